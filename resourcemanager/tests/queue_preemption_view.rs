//! Integration test: `/scheduler` (what `spindle queue -status` prints as `Preemption`)
//! says whether preemption applies to each leaf from the configuration: the monitor on or
//! off, a queue's `disable_preemption`, and the intra-queue policy with a queue's
//! `intra-queue-preemption.disable_preemption`. The RM runs in-process on an ephemeral port.

mod support;

use serde_json::Value;

/// `(preemptionDisabled, intraQueuePreemptionDisabled)` of leaf `name`.
fn flags(scheduler: &Value, name: &str) -> (bool, bool) {
    let q = scheduler["scheduler"]["schedulerInfo"]["queues"]["queue"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["queueName"] == name))
        .unwrap_or_else(|| panic!("queue {name} in {scheduler}"))
        .clone();
    (
        q["preemptionDisabled"]
            .as_bool()
            .expect("preemptionDisabled"),
        q["intraQueuePreemptionDisabled"]
            .as_bool()
            .expect("intraQueuePreemptionDisabled"),
    )
}

async fn scheduler_with(monitor: bool) -> Value {
    let on = if monitor { "true" } else { "false" };
    let rm = support::start_rm(&[
        ("yarn.resourcemanager.scheduler.monitor.enable", on),
        (
            "yarn.resourcemanager.monitor.capacity.preemption.intra-queue-preemption.enabled",
            "true",
        ),
        ("yarn.scheduler.capacity.root.queues", "a,b,c"),
        ("yarn.scheduler.capacity.root.a.capacity", "40"),
        ("yarn.scheduler.capacity.root.b.capacity", "30"),
        ("yarn.scheduler.capacity.root.b.disable_preemption", "true"),
        ("yarn.scheduler.capacity.root.c.capacity", "30"),
        (
            "yarn.scheduler.capacity.root.c.intra-queue-preemption.disable_preemption",
            "true",
        ),
    ])
    .await;
    let (status, v) = rm.get("/ws/v1/cluster/scheduler").await;
    assert_eq!(status, 200, "{v}");
    rm.shutdown().await;
    v
}

#[tokio::test]
async fn preemption_per_queue_follows_the_monitor_and_the_queues_settings() {
    let on = scheduler_with(true).await;
    assert_eq!(
        flags(&on, "a"),
        (false, false),
        "monitor on: a is preemptable"
    );
    assert_eq!(flags(&on, "b"), (true, false), "b sets disable_preemption");
    assert_eq!(
        flags(&on, "c"),
        (false, true),
        "c disables intra-queue only"
    );

    let off = scheduler_with(false).await;
    for q in ["a", "b", "c"] {
        assert_eq!(flags(&off, q), (true, true), "monitor off: {q}");
    }
}
