//! The RM's token keys on the pure core: container tokens name the current
//! container-token master key; a roll hands NMs the next key at once and signs with it only
//! after the activation delay (1.5 x the NM expiry); the key before stays accepted until the
//! next activation, the one before that not; AM-RM tokens are signed with the AM-RM key,
//! which no container key (nor anything derived for NMs) verifies.

use spindle_common::token::{self, ContainerKey, ContainerKeys, TokenError};

use super::*;

/// A running AM on one node; its attempt.
fn running_am(env: &mut TestEnv) -> (NodeId, ApplicationAttemptId, ContainerId) {
    let n = env.add_node("h1", 1, 16384, 16);
    env.submit("default");
    let (att, am) = env.launch_all()[0];
    env.heartbeat(&n, vec![TestEnv::running(am)]);
    env.core
        .am_register(&att, "h1".into(), 0, String::new(), env.now)
        .expect("register");
    env.step();
    (n, att, am)
}

/// A core whose NM expiry is 20 s (activation delay 30 s).
fn env() -> TestEnv {
    let mut conf = CoreConfig::for_tests();
    conf.nm_expiry_ms = 20_000;
    TestEnv::with_conf(conf)
}

/// Lets `ms` pass as a live cluster does: the node heartbeats every 5 s.
fn pass(env: &mut TestEnv, n: &NodeId, am: ContainerId, ms: u64) {
    let mut left = ms;
    while left > 0 {
        let step = left.min(5_000);
        env.advance(step);
        env.heartbeat(n, vec![TestEnv::running(am)]);
        left -= step;
    }
}

fn key_of(t: &str) -> u32 {
    token::unverified_container_identifier(t)
        .expect("a container token")
        .master_key_id
}

#[test]
fn a_rolled_key_is_sent_first_then_signs_and_the_one_before_expires() {
    let mut env = env();
    let (n, att, am) = running_am(&mut env);
    let k0 = env.core.container_keys().current().expect("a key").id();
    assert_eq!(env.core.newest_container_key().id(), k0);
    let first = env.ask(&att, 1, 512).allocated[0].container_token.clone();
    assert_eq!(key_of(&first), k0);

    // Roll: NMs are sent k1 at once; tokens keep naming k0 for the activation delay.
    let delay = activation_delay_ms(env.core.conf().nm_expiry_ms);
    assert_eq!(delay, 30_000, "1.5 x the NM expiry of 20 s");
    let k1 = ContainerKey::generate(k0.wrapping_add(1)).unwrap();
    assert!(env.core.roll_container_key(k1.clone(), env.now));
    assert!(
        !env.core.roll_container_key(k1.clone(), env.now),
        "a key id already held is ignored"
    );
    assert_eq!(env.core.newest_container_key().id(), k1.id());
    pass(&mut env, &n, am, delay - 1);
    let before = env.ask(&att, 1, 512).allocated[0].container_token.clone();
    assert_eq!(key_of(&before), k0, "not active before the delay");
    assert_eq!(env.core.container_keys().current().unwrap().id(), k0);

    // Activation: k1 signs, k0 is previous and still verifies.
    pass(&mut env, &n, am, 1);
    assert_eq!(env.core.container_keys().current().unwrap().id(), k1.id());
    assert_eq!(env.core.container_keys().previous().unwrap().id(), k0);
    let after = env.ask(&att, 1, 512).allocated[0].container_token.clone();
    assert_eq!(key_of(&after), k1.id());
    let keys = env.core.container_keys().clone();
    for t in [&first, &before, &after] {
        token::verify_container_token(&keys, t, 0).expect("current and previous verify");
    }

    // A second roll, activated: k0 is two keys old and no longer verifies; k1 does.
    let k2 = ContainerKey::generate(k1.id().wrapping_add(1)).unwrap();
    assert!(env.core.roll_container_key(k2.clone(), env.now));
    pass(&mut env, &n, am, delay);
    assert_eq!(env.core.container_keys().current().unwrap().id(), k2.id());
    let keys = env.core.container_keys().clone();
    assert!(matches!(
        token::verify_container_token(&keys, &first, 0),
        Err(TokenError::UnknownMasterKey { .. })
    ));
    token::verify_container_token(&keys, &after, 0).expect("previous key verifies");
    // The same holds for an NM that got the keys as they were sent.
    let mut nm = ContainerKeys::new(ContainerKey::generate(k0).unwrap());
    nm.install(k1);
    nm.install(k2);
    assert_eq!(nm.get(k0), None);
}

#[test]
fn a_roll_before_the_last_one_activated_activates_it_first() {
    let mut env = TestEnv::new();
    let k0 = env.core.container_keys().current().unwrap().id();
    let k1 = ContainerKey::generate(k0.wrapping_add(1)).unwrap();
    let k2 = ContainerKey::generate(k0.wrapping_add(2)).unwrap();
    assert!(env.core.roll_container_key(k1, env.now));
    assert!(env.core.roll_container_key(k2, env.now + 1));
    assert_eq!(env.core.container_keys().current().unwrap().id(), k0 + 1);
    assert_eq!(env.core.container_keys().previous().unwrap().id(), k0);
    assert_eq!(env.core.newest_container_key().id(), k0 + 2);
    assert_eq!(env.core.activate_container_key(env.now), None, "not due");
}

#[test]
fn amrm_tokens_are_signed_with_a_key_no_container_key_verifies() {
    let mut env = TestEnv::new();
    let (_n, att, _am) = running_am(&mut env);
    let good = token::issue_amrm_token(env.core.amrm_key(), &att);
    assert_eq!(env.core.authenticate_am(&good).unwrap(), att);
    // An outsider holding every container key an NM was ever sent signs an AM-RM token.
    let keys = env.core.container_keys().clone();
    for k in [
        keys.current(),
        keys.previous(),
        Some(env.core.newest_container_key()),
    ]
    .into_iter()
    .flatten()
    {
        let hex = spindle_common::token::AmRmKey::from_hex(&hex_of(k.bytes())).unwrap();
        let forged = token::issue_amrm_token(&hex, &att);
        assert!(
            matches!(
                env.core.authenticate_am(&forged),
                Err(CoreError::InvalidToken(TokenError::BadSignature))
            ),
            "a container key signed an AM-RM token the RM accepts"
        );
    }
    // Nor does a container token pass as an AM-RM token.
    let ct = env.ask(&att, 1, 512).allocated[0].container_token.clone();
    assert!(env.core.authenticate_am(&ct).is_err());
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
