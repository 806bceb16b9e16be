//! Application lifetimes (YARN's `LIFETIME` timeout): the tick kills an application whose
//! deadline passed, with YARN's diagnostic; updates move the deadline; refusals are typed;
//! the deadline survives a restart.

use spindle_common::states::{FinalApplicationStatus, YarnApplicationState as AppState};
use spindle_common::token::TokenSecret;

use super::TestEnv;
use crate::core::*;

/// One node, one application whose AM container runs.
fn running() -> (TestEnv, NodeId, ApplicationId, ContainerId) {
    let mut env = TestEnv::new();
    let node = env.add_node("h1", 1, 8192, 8);
    let app = env.submit("default");
    let (_, am) = env.launch_all()[0];
    env.heartbeat(&node, vec![TestEnv::running(am)]);
    (env, node, app, am)
}

fn alice() -> Caller {
    Caller::new("alice", vec![])
}

#[test]
fn the_tick_kills_an_application_at_its_lifetime_with_yarns_diagnostic() {
    let (mut env, node, app, am) = running();
    let at = env.now + 10_000;
    assert_eq!(
        env.core.update_lifetime(&app, at, &alice(), env.now),
        Ok(at)
    );
    env.step();
    assert_eq!(env.app(&app).lifetime, Some(at));
    // Persisted with the deadline.
    assert!(env
        .effects
        .iter()
        .any(|e| matches!(e, Effect::PersistApp(r) if r.id == app && r.lifetime == Some(at))));
    env.advance(9_000);
    assert!(!env.app(&app).state.is_final());
    assert!(env.app(&app).killing_since.is_none());
    env.advance(1_000);
    let a = env.app(&app);
    assert!(a.killing_since.is_some(), "killed at the deadline");
    assert_eq!(a.diagnostics, LIFETIME_EXCEEDED);
    // Its AM container is told to stop; once the NM reports it gone, the app is KILLED.
    env.heartbeat(&node, vec![TestEnv::done(am, -105)]);
    env.advance(1);
    let a = env.app(&app);
    assert_eq!(a.state, AppState::KILLED);
    assert_eq!(
        a.diagnostics,
        "Application is killed by ResourceManager as it has exceeded the lifetime period."
    );
}

/// An AM that unregisters while its application is being killed (it heard of its workers'
/// kills first) does not turn the kill into its own verdict: the application ends KILLED
/// with the kill's diagnostic, as YARN's KILLING state ignores the unregister's status.
#[test]
fn an_unregister_during_a_kill_leaves_the_application_killed() {
    let (mut env, _node, app, am) = running();
    let attempt = am.attempt_id;
    env.core
        .am_register(&attempt, "h".into(), 0, String::new(), env.now)
        .unwrap();
    env.step();
    let at = env.now + 1_000;
    env.core
        .update_lifetime(&app, at, &alice(), env.now)
        .unwrap();
    env.step();
    env.advance(1_000);
    assert!(env.app(&app).killing_since.is_some());
    env.core
        .am_finish(
            &attempt,
            FinalApplicationStatus::FAILED,
            "1 of 1 containers failed".into(),
            String::new(),
            env.now,
        )
        .unwrap();
    env.step();
    let a = env.app(&app);
    assert_eq!(a.state, AppState::KILLED);
    assert_eq!(a.final_status, FinalApplicationStatus::KILLED);
    assert_eq!(a.diagnostics, LIFETIME_EXCEEDED);
}

#[test]
fn an_update_moves_the_deadline_and_refusals_are_typed() {
    let (mut env, _node, app, _am) = running();
    let first = env.now + 5_000;
    env.core
        .update_lifetime(&app, first, &alice(), env.now)
        .unwrap();
    // Extended: the first deadline passes without a kill.
    let later = env.now + 60_000;
    env.core
        .update_lifetime(&app, later, &alice(), env.now)
        .unwrap();
    env.step();
    env.advance(10_000);
    assert!(env.app(&app).killing_since.is_none());
    assert_eq!(env.app(&app).lifetime, Some(later));
    // In the past: refused, nothing changes.
    assert_eq!(
        env.core
            .update_lifetime(&app, env.now - 1, &alice(), env.now),
        Err(CoreError::LifetimeInThePast {
            expiry: env.now - 1,
            now: env.now
        })
    );
    assert_eq!(env.app(&app).lifetime, Some(later));
    let unknown = ApplicationId::new(1_000, 99);
    assert_eq!(
        env.core.update_lifetime(&unknown, later, &alice(), env.now),
        Err(CoreError::AppNotFound(unknown))
    );
    // An ended application's lifetime cannot change.
    env.core.kill(&app, &alice(), env.now).unwrap();
    env.advance(KILL_DEADLINE_MS + 1);
    assert_eq!(env.app(&app).state, AppState::KILLED);
    assert!(matches!(
        env.core.update_lifetime(&app, later, &alice(), env.now),
        Err(CoreError::LifetimeOfEndedApp {
            state: AppState::KILLED,
            ..
        })
    ));
    assert_eq!(
        CoreError::LifetimeInThePast { expiry: 1, now: 2 }.class(),
        RefusalClass::BadRequest
    );
}

#[test]
fn the_deadline_survives_a_restart() {
    let (mut env, _node, app, _am) = running();
    let at = env.now + 30_000;
    env.core
        .update_lifetime(&app, at, &alice(), env.now)
        .unwrap();
    env.step();
    let rec = env
        .effects
        .iter()
        .rev()
        .find_map(|e| match e {
            Effect::PersistApp(r) if r.id == app => Some((**r).clone()),
            _ => None,
        })
        .expect("a persisted record");
    assert_eq!(rec.lifetime, Some(at));
    let secret = TokenSecret::from_hex("00112233445566778899aabbccddeeff").expect("static hex");
    let mut env2 = TestEnv::new();
    env2.core = RmCore::new(CoreConfig::for_tests(), 2_000, 1, secret);
    env2.now = env.now + 1_000;
    env2.core.recover_app(rec, env2.now);
    env2.step();
    env2.add_node("h1", 1, 8192, 8);
    assert_eq!(env2.app(&app).lifetime, Some(at));
    env2.advance(28_000);
    assert!(env2.app(&app).killing_since.is_none());
    env2.advance(2_000);
    assert_eq!(env2.app(&app).diagnostics, LIFETIME_EXCEEDED);
}

/// A core whose only queue `root.q` has the given default and maximum lifetimes.
fn with_limits(default_secs: Option<u64>, max_secs: Option<u64>) -> TestEnv {
    use crate::core::queue_conf::{CapacitySpec, LifetimeLimits, QueueSpec};
    let mut c = CoreConfig::for_tests();
    let mut root = QueueSpec::new(super::qp("root"), CapacitySpec::Percent(100.0));
    let mut q = QueueSpec::new(super::qp("root.q"), CapacitySpec::Percent(100.0));
    q.lifetime = LifetimeLimits {
        default_secs,
        max_secs,
    };
    root.children = vec![q];
    c.scheduler.root = root;
    let mut env = TestEnv::with_conf(c);
    env.add_node("h1", 1, 8192, 8);
    env
}

fn submit_for(env: &mut TestEnv, secs: Option<u64>) -> ApplicationId {
    let id = env.core.new_application();
    let mut sub = env.submission("q");
    sub.lifetime_secs = secs;
    env.core.submit(id, sub, env.now).expect("submit");
    env.step();
    id
}

#[test]
fn a_submitted_lifetime_counts_from_submission_and_is_persisted_with_it() {
    let mut env = with_limits(None, None);
    let submitted = env.now;
    let app = submit_for(&mut env, Some(5));
    assert_eq!(env.app(&app).lifetime, Some(submitted + 5_000));
    assert!(env.effects.iter().any(|e| matches!(e,
        Effect::PersistApp(r) if r.id == app && r.lifetime == Some(submitted + 5_000)
            && r.sub.lifetime_secs == Some(5))));
    env.advance(4_999);
    assert!(env.app(&app).killing_since.is_none());
    env.advance(1);
    assert_eq!(env.app(&app).diagnostics, LIFETIME_EXCEEDED);
}

#[test]
fn the_queue_caps_a_lifetime_above_its_maximum_and_gives_its_default_to_none() {
    let mut env = with_limits(Some(60), Some(600));
    let now = env.now;
    let capped = submit_for(&mut env, Some(3_600));
    let asked = submit_for(&mut env, Some(30));
    let none = submit_for(&mut env, None);
    assert_eq!(env.app(&capped).lifetime, Some(now + 600_000));
    assert_eq!(env.app(&asked).lifetime, Some(now + 30_000));
    assert_eq!(env.app(&none).lifetime, Some(now + 60_000));
    // Without a default, the maximum; without either, unlimited.
    let mut env = with_limits(None, Some(600));
    let none = submit_for(&mut env, None);
    assert_eq!(env.app(&none).lifetime, Some(env.now + 600_000));
    let mut env = with_limits(None, None);
    let none = submit_for(&mut env, None);
    assert_eq!(env.app(&none).lifetime, None);
}

#[test]
fn lifetime_limits_grant_as_yarn_does() {
    use crate::core::queue_conf::{Lifetime, LifetimeLimits};
    let l = LifetimeLimits {
        default_secs: Some(10),
        max_secs: Some(100),
    };
    assert_eq!(
        l.grant(Some(500)),
        Lifetime::Capped {
            asked: 500,
            max: 100
        }
    );
    assert_eq!(l.grant(Some(100)), Lifetime::Granted(100));
    assert_eq!(l.grant(None), Lifetime::Granted(10));
    assert_eq!(LifetimeLimits::default().grant(None), Lifetime::Unlimited);
    assert_eq!(Lifetime::Capped { asked: 5, max: 3 }.secs(), Some(3));
}
