//! Recovery of an application whose attempt still waited for its AM container when the RM
//! stopped (found by `tests/ha_hosts.rs`: a failover under a stream of submissions): the
//! restarted RM starts that attempt again under the same number, without a failed attempt
//! in front of it and without spending one of the application's attempts.

use spindle_common::states::YarnApplicationState as AppState;

use super::recovery::{last_record, registration, restarted};
use super::TestEnv;
use crate::core::*;

#[test]
fn an_attempt_still_waiting_for_its_am_container_is_started_again_under_its_number() {
    // No node: the attempt is scheduled, its AM container never allocated.
    let mut env = TestEnv::new();
    let app = env.submit("default");
    assert_eq!(env.app(&app).attempts.len(), 1);
    let rec = last_record(&env, &app);
    assert_eq!(rec.attempts, 0, "a waiting attempt is not numbered past");

    let mut env = restarted(vec![rec], env.now + 5_000);
    let node = NodeId::new("h1", 1);
    env.core.register_node(registration(&node, vec![]), env.now);
    env.step();
    // The record written before the AM's launch numbers it.
    assert_eq!(last_record(&env, &app).attempts, 1);
    let launched = env.launch_all();
    let a = env.app(&app);
    assert_eq!(a.state, AppState::ACCEPTED);
    // One attempt used of its maximum, not two.
    assert_eq!(a.attempts.len(), 1, "no failed placeholder before it");
    assert_eq!(launched.len(), 1, "its AM is launched");
    assert_eq!(launched[0].0.attempt_id, 1, "under its own number");
}
