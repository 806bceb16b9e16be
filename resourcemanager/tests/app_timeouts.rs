//! Application lifetimes over REST (YARN's `/apps/{id}/timeouts`, `/timeouts/{type}`,
//! `/timeout`): the RM in-process, a submitted application, every refusal with its status
//! and exception, and the kill when the lifetime runs out.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use spindle_common::time::{format_iso8601, now_ms};
use support::{start_rm, Rm};

async fn put(rm: &Rm, path: &str, body: Value) -> (u16, Value) {
    let r = rm
        .http
        .put(format!("{}{path}", rm.base))
        .json(&body)
        .send()
        .await
        .expect("PUT");
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn submit(rm: &Rm, user: &str) -> String {
    let r = rm
        .http
        .post(format!("{}/ws/v1/cluster/apps/new-application", rm.base))
        .send()
        .await
        .expect("new-application");
    let v: Value = r.json().await.expect("json");
    let id = v["application-id"].as_str().expect("id").to_string();
    let r = rm
        .http
        .post(format!("{}/ws/v1/cluster/apps?user.name={user}", rm.base))
        .json(&json!({"application-id": id, "am-container-spec": {"commands": {"command": "sleep 100"}},
                      "resource": {"memory": 256, "vCores": 1}}))
        .send()
        .await
        .expect("submit");
    assert_eq!(r.status().as_u16(), 202);
    id
}

fn lifetime(expiry: &str) -> Value {
    json!({"timeout": {"type": "LIFETIME", "expiryTime": expiry}})
}

fn exception(v: &Value) -> &str {
    v["RemoteException"]["exception"].as_str().unwrap_or("")
}

fn message(v: &Value) -> &str {
    v["RemoteException"]["message"].as_str().unwrap_or("")
}

#[tokio::test]
async fn lifetimes_are_read_set_refused_and_enforced() {
    let rm = start_rm(&[
        ("yarn.acl.enable", "true"),
        ("yarn.admin.acl", "admin"),
        ("yarn.scheduler.capacity.root.acl_administer_queue", " "),
        (
            "yarn.scheduler.capacity.root.default.acl_administer_queue",
            " ",
        ),
        (
            "hadoop.user.group.static.mapping.overrides",
            "alice=;mallory=;admin=",
        ),
    ])
    .await;
    let app = submit(&rm, "alice").await;
    let as_alice = format!("/ws/v1/cluster/apps/{app}/timeout?user.name=alice");

    // None set: UNLIMITED, -1, in the list, the one and the app view.
    let unlimited =
        json!({"type": "LIFETIME", "expiryTime": "UNLIMITED", "remainingTimeInSeconds": -1});
    let (s, v) = rm.get(&format!("/ws/v1/cluster/apps/{app}/timeouts")).await;
    assert_eq!(s, 200);
    assert_eq!(v, json!({"timeouts": {"timeout": [unlimited.clone()]}}));
    let (s, v) = rm
        .get(&format!("/ws/v1/cluster/apps/{app}/timeouts/lifetime"))
        .await;
    assert_eq!(s, 200, "the type is read without case: {v}");
    assert_eq!(v, json!({"timeout": unlimited.clone()}));
    let (_, v) = rm.get(&format!("/ws/v1/cluster/apps/{app}")).await;
    assert_eq!(v["app"]["timeouts"]["timeout"][0], unlimited);

    // Refusals.
    let (s, v) = rm
        .get(&format!("/ws/v1/cluster/apps/{app}/timeouts/DEADLINE"))
        .await;
    assert_eq!((s, exception(&v)), (400, "BadRequestException"), "{v}");
    assert!(message(&v).contains("the only type is LIFETIME"), "{v}");
    let in_an_hour = format_iso8601(now_ms() + 3_600_000);
    let (s, v) = put(
        &rm,
        &as_alice,
        json!({"timeout": {"type": "DEADLINE", "expiryTime": in_an_hour}}),
    )
    .await;
    assert_eq!((s, exception(&v)), (400, "BadRequestException"), "{v}");
    let (s, v) = put(&rm, &as_alice, json!({"timeout": {"type": "LIFETIME"}})).await;
    assert_eq!(s, 400, "{v}");
    assert!(message(&v).contains("Expiry time is null"), "{v}");
    let (s, v) = put(&rm, &as_alice, lifetime("in an hour")).await;
    assert_eq!(s, 400, "{v}");
    assert!(
        message(&v).contains("Invalid expiryTime: 'in an hour' is not a time"),
        "{v}"
    );
    let (s, v) = put(&rm, &as_alice, lifetime(&format_iso8601(now_ms() - 60_000))).await;
    assert_eq!(s, 400, "{v}");
    assert!(
        message(&v).contains("Expire time is less than current time"),
        "{v}"
    );
    let (s, v) = put(
        &rm,
        &format!("/ws/v1/cluster/apps/{app}/timeout?user.name=mallory"),
        lifetime(&in_an_hour),
    )
    .await;
    assert_eq!((s, exception(&v)), (403, "ForbiddenException"), "{v}");
    let (s, v) = put(
        &rm,
        "/ws/v1/cluster/apps/application_1_0999/timeout?user.name=alice",
        lifetime(&in_an_hour),
    )
    .await;
    assert_eq!(s, 404, "{v}");
    let (_, v) = rm.get(&format!("/ws/v1/cluster/apps/{app}/timeouts")).await;
    assert_eq!(v["timeouts"]["timeout"][0], unlimited, "nothing changed");

    // Set, in another zone: answered in UTC.
    let at = now_ms() / 1000 * 1000 + 3_600_000;
    let utc = format_iso8601(at);
    // The same instant written at +05:30.
    let ist = format_iso8601(at + 19_800_000).replace("+0000", "+05:30");
    let (s, v) = put(&rm, &as_alice, lifetime(&ist)).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["timeout"]["type"], "LIFETIME");
    assert_eq!(v["timeout"]["expiryTime"], utc, "{v}");
    let left = v["timeout"]["remainingTimeInSeconds"].as_i64().unwrap();
    assert!((3500..=3600).contains(&left), "{v}");
    let (_, v) = rm
        .get(&format!("/ws/v1/cluster/apps/{app}/timeouts/LIFETIME"))
        .await;
    assert_eq!(v["timeout"]["expiryTime"], utc);
    // The admin may change it too.
    let (s, v) = put(
        &rm,
        &format!("/ws/v1/cluster/apps/{app}/timeout?user.name=admin"),
        lifetime(&format_iso8601(now_ms() + 1_000)),
    )
    .await;
    assert_eq!(s, 200, "{v}");

    // It runs out: the RM kills the application with YARN's diagnostic.
    let mut killed = Value::Null;
    for _ in 0..200 {
        let (_, v) = rm.get(&format!("/ws/v1/cluster/apps/{app}")).await;
        if v["app"]["state"] == "KILLED" {
            killed = v;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(killed["app"]["state"], "KILLED", "not killed within 10 s");
    assert_eq!(
        killed["app"]["diagnostics"],
        "Application is killed by ResourceManager as it has exceeded the lifetime period."
    );
    // A finished application's lifetime cannot change.
    let (s, v) = put(&rm, &as_alice, lifetime(&in_an_hour)).await;
    assert_eq!((s, exception(&v)), (409, "YarnException"), "{v}");
    assert!(message(&v).contains("lifetime cannot be updated"), "{v}");
    rm.shutdown().await;
}
