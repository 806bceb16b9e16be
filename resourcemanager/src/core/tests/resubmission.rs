//! A submission resent under the id the RM holds (its answer lost in a failover): the same
//! one is accepted without a second application or a write; another is refused, naming the
//! field; an id an earlier incarnation issued is taken, an invented one is not.

use super::recovery::{last_record, restarted};
use super::*;

#[test]
fn the_same_submission_twice_is_one_application_and_writes_nothing_more() {
    let mut env = TestEnv::new();
    env.add_node("h1", 1, 8192, 8);
    let id = env.submit("default");
    let apps = env.core.counters.apps_submitted;
    env.effects.clear();
    let again = env.submission("default");
    env.core.submit(id, again, env.now).expect("the same again");
    env.step();
    assert_eq!(env.core.counters.apps_submitted, apps);
    assert_eq!(env.core.apps.len(), 1);
    assert!(
        !env.effects
            .iter()
            .any(|e| matches!(e, Effect::PersistApp(_) | Effect::LaunchAm { .. })),
        "{:?}",
        env.effects
    );
    // The AM resource is compared as the core rounded it (to 128 MB steps here): 500 MB
    // is the 512 MB held, 600 MB is not.
    let mut rounded = env.submission("default");
    rounded.am_resource = Resource::new(500, 1);
    env.core
        .submit(id, rounded, env.now)
        .expect("rounds to the same");
    let mut bigger = env.submission("default");
    bigger.am_resource = Resource::new(600, 1);
    let e = env.core.submit(id, bigger, env.now).unwrap_err();
    assert!(
        matches!(
            e,
            CoreError::DuplicateApp {
                field: "resource",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn another_submission_under_a_held_id_is_refused_as_a_conflict_naming_the_field() {
    let mut env = TestEnv::new();
    let id = env.submit("default");
    let mut other = env.submission("default");
    other.am_launch.commands = vec!["./another-am".into()];
    let e = env.core.submit(id, other, env.now).unwrap_err();
    assert!(
        matches!(
            e,
            CoreError::DuplicateApp {
                field: "am-container-spec",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.class(), RefusalClass::Conflict);
    let mut by_bob = env.submission("default");
    by_bob.user = "bob".into();
    let e = env.core.submit(id, by_bob, env.now).unwrap_err();
    assert!(
        matches!(e, CoreError::DuplicateApp { field: "user", .. }),
        "{e}"
    );
    assert_eq!(env.core.apps.len(), 1);
}

#[test]
fn after_a_failover_a_resent_submission_is_the_held_one_or_a_new_one_of_the_old_incarnation() {
    let mut env = TestEnv::new();
    let written = env.submit("default");
    // Issued by the old active, never written: its submission was in flight at the kill.
    let in_flight = env.core.new_application();
    let rec = last_record(&env, &written);
    let mut next = restarted(vec![rec], env.now + 5_000);
    next.add_node("h1", 1, 8192, 8);
    // The written one, resent: accepted, still one application.
    let sub = next.submission("default");
    next.core.submit(written, sub, next.now).expect("resent");
    next.step();
    assert_eq!(next.core.apps.len(), 1);
    // The one never written: an id the old incarnation issued, taken.
    let sub = next.submission("default");
    next.core
        .submit(in_flight, sub, next.now)
        .expect("in flight");
    next.step();
    assert_eq!(next.core.apps.len(), 2);
    // An id of an incarnation the store knows nothing of is still refused.
    let invented = ApplicationId::new(1, 1);
    let sub = next.submission("default");
    let e = next.core.submit(invented, sub, next.now).unwrap_err();
    assert!(matches!(e, CoreError::AppIdNotIssued(_)), "{e}");
    // So is one of this incarnation not yet handed out.
    let ahead = ApplicationId::new(next.core.cluster_ts, next.core.next_app);
    let sub = next.submission("default");
    let e = next.core.submit(ahead, sub, next.now).unwrap_err();
    assert!(matches!(e, CoreError::AppIdNotIssued(_)), "{e}");
}
