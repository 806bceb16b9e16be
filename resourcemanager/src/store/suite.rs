//! The one test suite every [`StateStore`] implementation passes: [`run`] gives each check a
//! fresh store from `make`. The SQLite store runs it in `sqlite.rs`, the in-memory one in
//! `memory.rs`; what only a file can show (surviving a reopen, refusing a foreign file) is
//! tested beside the SQLite store.

use std::collections::BTreeMap;

use spindle_common::resource::GPU;
use spindle_common::states::{FinalApplicationStatus, YarnApplicationState};
use spindle_common::{ApplicationId, Resource};

use super::{SchedConfSource, StateStore, StoredSchedConf, UsageRecord, SCHED_CONF_VERSIONS_KEPT};
use crate::core::labels::NodeLabels;
use crate::core::{AppQueue, AppRecord, AttemptRecord, Submission};

/// Runs every check of the suite, each on a store of its own.
pub(crate) fn run<S: StateStore>(make: impl Fn() -> S) {
    recovery_bumps_the_epoch_and_keeps_the_secret(make());
    apps_are_written_read_back_and_forgotten(make());
    usage_records_are_written_when_final_and_outlive_the_app_record(make());
    labels_are_replaced_whole(make());
    cancelled_tokens_are_kept_until_their_max_date(make());
    the_newest_scheduler_conf_is_read_back_and_old_ones_pruned(make());
    decayed_usage_is_replaced_per_leaf_and_user(make());
}

/// An accepted application with a live attempt, a GPU in its AM resource and a lifetime.
pub(crate) fn record() -> AppRecord {
    AppRecord {
        id: ApplicationId::new(5, 1),
        sub: Submission {
            name: "n".into(),
            queue: "default".into(),
            user: "u".into(),
            priority: 0,
            application_type: "YARN".into(),
            tags: vec!["t".into()],
            am_resource: Resource::new(1024, 1).with("yarn.io/gpu", 1),
            am_launch: Default::default(),
            max_app_attempts: 0,
            keep_containers: false,
            unmanaged_am: false,
            groups: vec![],
            node_label_expression: None,
            am_node_label_expression: None,
            lifetime_secs: None,
            dependencies: Vec::new(),
        },
        queue: AppQueue::recovered("root.default".into()),
        state: YarnApplicationState::ACCEPTED,
        final_status: FinalApplicationStatus::UNDEFINED,
        diagnostics: String::new(),
        submit_time: 1,
        launch_time: 0,
        finish_time: 0,
        attempts: 1,
        memory_ms: 0,
        vcore_ms: 0,
        lifetime: Some(1_900_000_000_000),
        live_attempt: Some(AttemptRecord {
            am_container: "container_5_0001_01_000001".parse().unwrap(),
            am_node: "127.0.0.1:4545".parse().unwrap(),
            am_node_http: "127.0.0.1:4545".into(),
            start_time: 2,
            host: "h".into(),
            rpc_port: -1,
            tracking_url: String::new(),
        }),
        usage: Default::default(),
    }
}

/// A stored scheduler configuration whose one property names its version.
pub(crate) fn sched_conf(version: u64, source: SchedConfSource) -> StoredSchedConf {
    StoredSchedConf {
        version,
        source,
        user: "admin".into(),
        time: 7,
        props: BTreeMap::from([(
            "yarn.scheduler.capacity.root.queues".to_string(),
            format!("a{version}"),
        )]),
    }
}

fn recovery_bumps_the_epoch_and_keeps_the_secret(mut s: impl StateStore) {
    let first = s.recover().unwrap();
    assert_eq!(first.epoch, 0, "a new store starts at epoch 0");
    assert!(first.apps.is_empty() && first.skipped.is_empty());
    let second = s.recover().unwrap();
    assert_eq!(second.epoch, 1);
    assert_eq!(
        second.secret, first.secret,
        "the token secret is never remade"
    );
}

fn apps_are_written_read_back_and_forgotten(mut s: impl StateStore) {
    s.recover().unwrap();
    let rec = record();
    let mut other = record();
    other.id = ApplicationId::new(5, 2);
    other.live_attempt = None;
    s.put_app(&rec).unwrap();
    s.put_app(&other).unwrap();
    // A rewrite replaces the record.
    let mut moved = rec.clone();
    moved.sub.priority = 3;
    s.put_app(&moved).unwrap();
    let r = s.recover().unwrap();
    let ids: Vec<ApplicationId> = r.apps.iter().map(|a| a.id).collect();
    assert_eq!(ids, vec![rec.id, other.id]);
    let back = &r.apps[0];
    assert_eq!(back.sub.am_resource, rec.sub.am_resource);
    assert_eq!(back.sub.priority, 3);
    assert_eq!(back.sub.tags, rec.sub.tags);
    assert_eq!(back.queue.to_string(), "root.default");
    assert_eq!(back.live_attempt, rec.live_attempt);
    assert_eq!(back.lifetime, rec.lifetime);
    assert_eq!(r.apps[1].live_attempt, None);
    s.delete_app(&rec.id).unwrap();
    // Forgetting what is not there is no error.
    s.delete_app(&ApplicationId::new(5, 9)).unwrap();
    let left: Vec<ApplicationId> = s.recover().unwrap().apps.iter().map(|a| a.id).collect();
    assert_eq!(left, vec![other.id]);
}

fn usage_records_are_written_when_final_and_outlive_the_app_record(mut s: impl StateStore) {
    s.recover().unwrap();
    let mut rec = record();
    rec.live_attempt = None;
    rec.usage
        .add(&Resource::new(2048, 2).with(GPU, 4), 3_600_000, false);
    rec.usage
        .add(&Resource::new(1024, 1).with(GPU, 2), 1_800_000, true);
    s.put_app(&rec).unwrap();
    assert!(
        s.usage_between(0, u64::MAX).unwrap().0.is_empty(),
        "no usage row while the application runs"
    );
    rec.state = YarnApplicationState::FINISHED;
    rec.finish_time = 3_600_001;
    s.put_app(&rec).unwrap();
    s.delete_app(&rec.id).unwrap();
    assert!(
        s.recover().unwrap().apps.is_empty(),
        "the app record was forgotten"
    );
    let (rows, skipped) = s.usage_between(0, u64::MAX).unwrap();
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(rows, vec![UsageRecord::of(&rec)]);
    let u = &rows[0];
    assert_eq!(
        (u.id, u.user.as_str(), u.queue.as_str()),
        (rec.id, "u", "root.default")
    );
    assert_eq!((u.start_time, u.finish_time), (1, 3_600_001));
    assert_eq!(u.resource_ms.get(GPU), 4 * 3_600_000 + 2 * 1_800_000);
    assert_eq!(u.preempted_ms.get(GPU), 2 * 1_800_000);
    // The window: finished before `from` or submitted after `to` is left out.
    assert!(s.usage_between(3_600_002, u64::MAX).unwrap().0.is_empty());
    assert!(s.usage_between(0, 0).unwrap().0.is_empty());
    assert_eq!(s.usage_between(3_600_001, 3_600_001).unwrap().0.len(), 1);
}

fn labels_are_replaced_whole(mut s: impl StateStore) {
    assert_eq!(s.labels().unwrap(), NodeLabels::default(), "none set yet");
    let mut l = NodeLabels::default();
    l.cluster.insert("gpu".into(), true);
    l.cluster.insert("cpu".into(), false);
    l.mapping.insert("h1".into(), "gpu".into());
    l.attributes.insert(
        "h1".into(),
        BTreeMap::from([("rm.yarn.io/os".into(), "linux".into())]),
    );
    s.put_labels(&l).unwrap();
    assert_eq!(s.labels().unwrap(), l);
    let mut fewer = NodeLabels::default();
    fewer.cluster.insert("cpu".into(), false);
    s.put_labels(&fewer).unwrap();
    assert_eq!(s.labels().unwrap(), fewer);
}

fn cancelled_tokens_are_kept_until_their_max_date(mut s: impl StateStore) {
    assert!(!s.is_user_token_cancelled(1, 0).unwrap());
    s.cancel_user_token(1, 100, 10).unwrap();
    s.cancel_user_token(2, 1_000, 10).unwrap();
    assert!(s.is_user_token_cancelled(1, 50).unwrap());
    assert!(s.is_user_token_cancelled(1, 100).unwrap());
    assert!(!s.is_user_token_cancelled(3, 50).unwrap());
    // Past its max date the cancellation no longer matters (the token has expired) ...
    assert!(!s.is_user_token_cancelled(1, 101).unwrap());
    // ... and the next cancellation forgets it.
    s.cancel_user_token(3, 1_000, 200).unwrap();
    assert!(!s.is_user_token_cancelled(1, 0).unwrap());
    assert!(s.is_user_token_cancelled(2, 200).unwrap());
    assert!(s.is_user_token_cancelled(3, 200).unwrap());
}

fn the_newest_scheduler_conf_is_read_back_and_old_ones_pruned(mut s: impl StateStore) {
    assert_eq!(s.latest_sched_conf().unwrap(), None);
    s.put_sched_conf(&sched_conf(1, SchedConfSource::Mutation))
        .unwrap();
    s.put_sched_conf(&sched_conf(2, SchedConfSource::Refresh))
        .unwrap();
    assert_eq!(
        s.latest_sched_conf().unwrap(),
        Some(sched_conf(2, SchedConfSource::Refresh))
    );
    s.put_sched_conf(&sched_conf(3, SchedConfSource::Mutation))
        .unwrap();
    assert_eq!(
        s.latest_sched_conf().unwrap(),
        Some(sched_conf(3, SchedConfSource::Mutation))
    );
    let far = 3 + SCHED_CONF_VERSIONS_KEPT;
    s.put_sched_conf(&sched_conf(far, SchedConfSource::Refresh))
        .unwrap();
    assert_eq!(
        s.latest_sched_conf().unwrap(),
        Some(sched_conf(far, SchedConfSource::Refresh))
    );
}

fn decayed_usage_is_replaced_per_leaf_and_user(mut s: impl StateStore) {
    use crate::core::scheduler::decayed_usage::DecayedUsage;
    use crate::core::scheduler::FairshareRecord;
    s.recover().unwrap();
    assert!(s.fairshare().unwrap().is_empty());
    let row = |queue: &str, user: &str, decayed: f64, at: u64| FairshareRecord {
        queue: queue.into(),
        user: user.into(),
        usage: DecayedUsage {
            decayed,
            raw: decayed * 2.0,
            at,
        },
    };
    s.put_fairshare(&[
        row("root.b", "bob", 1.0, 5),
        row("root.a", "alice", 0.25, 7),
    ])
    .unwrap();
    s.put_fairshare(&[row("root.a", "alice", 3600.125, 99)])
        .unwrap();
    assert_eq!(
        s.fairshare().unwrap(),
        vec![
            row("root.a", "alice", 3600.125, 99),
            row("root.b", "bob", 1.0, 5)
        ],
        "one row per leaf and user, the latest, by leaf then user"
    );
}
