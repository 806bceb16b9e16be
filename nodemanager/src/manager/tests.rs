//! Unit tests of the actor's pure helpers (token labels, user and environment checks). The
//! actor's behaviour is tested end to end in `nodemanager/tests`; these must not start one.

use super::start::{token_label, valid_env, valid_user};
use super::*;
use spindle_common::ids::ApplicationAttemptId;
use spindle_common::records::resource::ResourceInfo;
use spindle_common::token::{issue_container_token, ContainerKey, ContainerTokenIdentifier};

#[test]
fn labels_and_names() {
    let s = ContainerKey::generate(1).unwrap();
    let id = ContainerId::new(ApplicationAttemptId::new(ApplicationId::new(3, 4), 1), 0, 7);
    let t = issue_container_token(
        &s,
        &ContainerTokenIdentifier {
            container_id: id,
            node_id: NodeId::new("h", 1),
            app_submitter: "u".into(),
            resource: ResourceInfo::default(),
            expiry_time_ms: 0,
            rm_identifier: 0,
            is_am: false,
            version: 0,
            master_key_id: 0,
        },
    );
    assert_eq!(token_label(&t), id.to_string());
    assert_eq!(token_label("garbage"), "");
    assert!(valid_user("alice.b-c_d@X"));
    for bad in ["", ".", "..", "a/b", "-x", "a b"] {
        assert!(!valid_user(bad), "{bad}");
    }
    assert!(valid_env("A", "x=y"));
    assert!(!valid_env("A=B", "x"));
    assert!(!valid_env("", "x"));
}
