//! REST user authentication, with the RM in-process on an ephemeral port: `simple` mode as
//! before (and with anonymous calls disallowed), `token` mode (401 without a valid token, the
//! token's owner as the caller whatever `?user.name=` says, so queue ACLs and the admin ACL
//! refuse with 403), and `/delegation-token` issue and cancellation.

mod support;

use reqwest::Method;
use serde_json::{json, Value};
use spindle_common::time::now_ms;
use spindle_common::user_token::{UserTokenIdentifier, UserTokenKey};
use support::{start_rm, Rm};

const TYPE: &str = "hadoop.http.authentication.type";
const KEY_FILE: &str = "hadoop.http.authentication.signature.secret.file";
const DAY: u64 = 86_400_000;

/// `method path` with an optional bearer token and extra headers: status and JSON body.
async fn call(
    rm: &Rm,
    method: Method,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Value) {
    let mut rb = rm.http.request(method, format!("{}{path}", rm.base));
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb.send().await.expect(path);
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn assert_refused(status: u16, v: &Value, want: u16, exception: &str, words: &[&str]) {
    assert_eq!(status, want, "{v}");
    let re = &v["RemoteException"];
    assert_eq!(re["exception"], exception, "{v}");
    let msg = re["message"].as_str().unwrap_or_default();
    for w in words {
        assert!(msg.contains(w), "'{w}' not in: {msg}");
    }
}

/// Submits a sleeping application to `queue` as the caller `token` (or `user_name` names);
/// answers the id and the submission's status and body.
async fn submit(
    rm: &Rm,
    token: Option<&str>,
    user_name: &str,
    queue: &str,
) -> (String, u16, Value) {
    let (s, v) = call(
        rm,
        Method::POST,
        "/ws/v1/cluster/apps/new-application",
        token,
        &[],
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let id = v["application-id"].as_str().expect("id").to_string();
    let (s, v) = call(
        rm,
        Method::POST,
        &format!("/ws/v1/cluster/apps?user.name={user_name}"),
        token,
        &[],
        Some(json!({"application-id": id, "queue": queue,
               "am-container-spec": {"commands": {"command": "sleep 100"}},
               "resource": {"memory": 256, "vCores": 1}})),
    )
    .await;
    (id, s, v)
}

#[tokio::test]
async fn simple_mode_is_unchanged() {
    let rm = start_rm(&[]).await;
    let (s, v) = rm.get("/ws/v1/cluster/apps").await;
    assert_eq!(s, 200, "{v}");
    let (id, s, v) = submit(&rm, None, "alice", "default").await;
    assert_eq!(s, 202, "{v}");
    let (s, v) = rm.get(&format!("/ws/v1/cluster/apps/{id}")).await;
    assert_eq!(s, 200);
    assert_eq!(v["app"]["user"], "alice");
    // No ACLs: anyone named may kill it.
    let (s, v) = call(
        &rm,
        Method::PUT,
        &format!("/ws/v1/cluster/apps/{id}/state?user.name=bob"),
        None,
        &[],
        Some(json!({"state": "KILLED"})),
    )
    .await;
    assert!(s == 200 || s == 202, "{s} {v}");
    // No tokens without token authentication.
    let (s, v) = call(
        &rm,
        Method::POST,
        "/ws/v1/cluster/delegation-token?user.name=alice",
        None,
        &[],
        Some(json!({"renewer": "alice"})),
    )
    .await;
    assert_refused(
        s,
        &v,
        403,
        "ForbiddenException",
        &["token authenticated channel"],
    );
    rm.shutdown().await;
}

#[tokio::test]
async fn anonymous_calls_are_refused_when_disallowed() {
    let rm = start_rm(&[(
        "hadoop.http.authentication.simple.anonymous.allowed",
        "false",
    )])
    .await;
    for path in [
        "/ws/v1/cluster/apps",
        "/ws/v1/cluster/nodes",
        "/ws/v1/cluster/metrics",
    ] {
        let (s, v) = rm.get(path).await;
        assert_refused(
            s,
            &v,
            401,
            "AuthorizationException",
            &["anonymous requests are disallowed", "user.name"],
        );
    }
    let (s, v) = rm.get("/ws/v1/cluster/apps?user.name=alice").await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = rm.get("/ws/v1/cluster/info").await;
    assert_eq!(s, 200, "the cluster's info stays open: {v}");
    rm.shutdown().await;
}

struct Tokens {
    key: UserTokenKey,
    _dir: tempfile::TempDir,
    path: String,
}

impl Tokens {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rm-token.key");
        let key = UserTokenKey::create_file(&path).expect("key");
        Self {
            key,
            path: path.display().to_string(),
            _dir: dir,
        }
    }

    fn mint(&self, user: &str) -> String {
        self.key
            .issue(&UserTokenIdentifier::new(user, "", now_ms(), DAY).expect("id"))
    }
}

#[tokio::test]
async fn token_mode_authenticates_every_cluster_call_and_acls_see_the_owner() {
    let keys = Tokens::new();
    let rm = start_rm(&[
        (TYPE, "token"),
        (KEY_FILE, &keys.path),
        ("yarn.acl.enable", "true"),
        ("yarn.admin.acl", "admin"),
        (
            "hadoop.user.group.static.mapping.overrides",
            "dr.who=;alice=;bob=;carol=;admin=",
        ),
        ("yarn.scheduler.capacity.root.queues", "a,b"),
        ("yarn.scheduler.capacity.root.a.capacity", "50"),
        ("yarn.scheduler.capacity.root.b.capacity", "50"),
        ("yarn.scheduler.capacity.root.acl_submit_applications", " "),
        ("yarn.scheduler.capacity.root.acl_administer_queue", " "),
        (
            "yarn.scheduler.capacity.root.a.acl_submit_applications",
            "alice",
        ),
        (
            "yarn.scheduler.capacity.root.b.acl_submit_applications",
            "*",
        ),
    ])
    .await;
    let (alice, bob, admin) = (keys.mint("alice"), keys.mint("bob"), keys.mint("admin"));

    // Without a valid token: 401, reads too; the cluster's info stays open.
    let (s, v) = call(&rm, Method::GET, "/ws/v1/cluster/apps", None, &[], None).await;
    assert_refused(
        s,
        &v,
        401,
        "AuthorizationException",
        &["Authentication required", "spindle token -issue"],
    );
    let (s, v) = call(
        &rm,
        Method::GET,
        "/ws/v1/cluster/apps?user.name=alice",
        None,
        &[],
        None,
    )
    .await;
    assert_eq!(s, 401, "user.name is no credential: {v}");
    let other = Tokens::new();
    let tampered = {
        let (body, sig) = alice.split_once('.').unwrap();
        let mut sig: Vec<char> = sig.chars().collect();
        sig[3] = if sig[3] == 'A' { 'B' } else { 'A' };
        format!("{body}.{}", sig.into_iter().collect::<String>())
    };
    let expired = keys.key.issue(&UserTokenIdentifier {
        issue_date: 1,
        max_date: 2,
        ..UserTokenIdentifier::new("alice", "", 1, 1).unwrap()
    });
    for (bad, why) in [
        (other.mint("alice"), "signature"),
        (tampered, "signature"),
        (expired, "expired"),
        ("garbage".to_string(), "malformed"),
    ] {
        let (s, v) = call(
            &rm,
            Method::GET,
            "/ws/v1/cluster/apps",
            Some(&bad),
            &[],
            None,
        )
        .await;
        assert_refused(s, &v, 401, "AuthorizationException", &[why]);
    }
    let (s, _) = call(&rm, Method::GET, "/ws/v1/cluster/info", None, &[], None).await;
    assert_eq!(s, 200);
    // The classic pages list applications too: without a token only /cluster (YARN's
    // liveness probe) answers, pointing to /ui; /ui's files are open (it sends the token).
    let page = |path: &str, token: Option<&str>| {
        let mut rb = rm.http.get(format!("{}{path}", rm.base));
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        async move {
            let r = rb.send().await.expect("page");
            (r.status().as_u16(), r.text().await.unwrap_or_default())
        }
    };
    let (s, body) = page("/cluster", None).await;
    assert_eq!(s, 200);
    assert!(
        body.contains("authenticates its users with tokens") && !body.contains("<table"),
        "{body}"
    );
    for p in ["/cluster/nodes", "/cluster/scheduler", "/cluster/apps"] {
        assert_eq!(page(p, None).await.0, 401, "{p}");
        assert_eq!(page(p, Some(&alice)).await.0, 200, "{p}");
    }
    assert_eq!(page("/ui", None).await.0, 200);
    assert_eq!(page("/ui/app.js", None).await.0, 200);
    let (s, v) = call(
        &rm,
        Method::GET,
        "/ws/v1/cluster/apps",
        Some(&alice),
        &[],
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    // YARN's header works as well as Bearer.
    let (s, v) = call(
        &rm,
        Method::GET,
        "/ws/v1/cluster/nodes",
        None,
        &[("Hadoop-YARN-RM-Delegation-Token", &alice)],
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");

    // The owner submits, whatever user.name says; bob may not submit to a, even as alice.
    let (app, s, v) = submit(&rm, Some(&alice), "mallory", "a").await;
    assert_eq!(s, 202, "{v}");
    let (_, v) = call(
        &rm,
        Method::GET,
        &format!("/ws/v1/cluster/apps/{app}"),
        Some(&alice),
        &[],
        None,
    )
    .await;
    assert_eq!(v["app"]["user"], "alice", "{v}");
    let (_, s, v) = submit(&rm, Some(&bob), "alice", "a").await;
    assert_refused(
        s,
        &v,
        403,
        "ForbiddenException",
        &["User bob does not have permission to submit", "to queue a"],
    );
    let (_, s, v) = submit(&rm, Some(&bob), "bob", "b").await;
    assert_eq!(s, 202, "b is open to all: {v}");

    // bob may not kill, move or re-prioritize alice's application, even as ?user.name=alice.
    for (path, body) in [
        ("state", json!({"state": "KILLED"})),
        ("queue", json!({"queue": "b"})),
        ("priority", json!({"priority": 3})),
    ] {
        let (s, v) = call(
            &rm,
            Method::PUT,
            &format!("/ws/v1/cluster/apps/{app}/{path}?user.name=alice"),
            Some(&bob),
            &[],
            Some(body),
        )
        .await;
        assert_refused(s, &v, 403, "ForbiddenException", &["User bob"]);
    }
    // The admin ACL: bob is no admin whatever he says; admin is.
    let mutation = json!({"update-queue": {"queue-name": "root.a", "params": {"entry": {"key": "maximum-capacity", "value": "90"}}}});
    let (s, v) = call(
        &rm,
        Method::PUT,
        "/ws/v1/cluster/scheduler-conf?user.name=admin",
        Some(&bob),
        &[],
        Some(mutation.clone()),
    )
    .await;
    assert_refused(s, &v, 403, "ForbiddenException", &["Only admins"]);
    let (s, v) = call(
        &rm,
        Method::PUT,
        "/ws/v1/cluster/scheduler-conf",
        Some(&admin),
        &[],
        Some(mutation),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    // Alice kills her own.
    let (s, v) = call(
        &rm,
        Method::PUT,
        &format!("/ws/v1/cluster/apps/{app}/state"),
        Some(&alice),
        &[],
        Some(json!({"state": "KILLED"})),
    )
    .await;
    assert!(s == 200 || s == 202, "{s} {v}");
    rm.shutdown().await;
}

#[tokio::test]
async fn tokens_are_issued_to_token_holders_and_cancelled_by_owner_or_renewer() {
    let keys = Tokens::new();
    let rm = start_rm(&[(TYPE, "token"), (KEY_FILE, &keys.path)]).await;
    let alice = keys.mint("alice");
    // No token, no token.
    let (s, v) = call(
        &rm,
        Method::POST,
        "/ws/v1/cluster/delegation-token",
        None,
        &[],
        Some(json!({"renewer": "bob"})),
    )
    .await;
    assert_eq!(s, 401, "{v}");
    let (s, v) = call(
        &rm,
        Method::POST,
        "/ws/v1/cluster/delegation-token?user.name=carol",
        Some(&alice),
        &[],
        Some(json!({"renewer": "bob"})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["owner"], "alice", "{v}");
    assert_eq!(v["renewer"], "bob");
    assert_eq!(v["kind"], "RM_DELEGATION_TOKEN");
    let exp = v["expiration-time"].as_u64().expect("expiration-time");
    assert_eq!(v["max-validity"].as_u64(), Some(exp));
    assert!(
        exp <= now_ms() + DAY,
        "never outlives the token that asked: {exp}"
    );
    let issued = v["token"].as_str().expect("token").to_string();
    let (s, _) = call(
        &rm,
        Method::GET,
        "/ws/v1/cluster/apps",
        Some(&issued),
        &[],
        None,
    )
    .await;
    assert_eq!(s, 200);

    // carol is neither owner nor renewer: 403; bob (the renewer) cancels.
    let carol = keys.mint("carol");
    let (s, v) = call(
        &rm,
        Method::DELETE,
        "/ws/v1/cluster/delegation-token",
        Some(&carol),
        &[("Hadoop-YARN-RM-Delegation-Token", &issued)],
        None,
    )
    .await;
    assert_refused(
        s,
        &v,
        403,
        "ForbiddenException",
        &["carol is not authorized to cancel"],
    );
    let bob = keys.mint("bob");
    let (s, v) = call(
        &rm,
        Method::DELETE,
        "/ws/v1/cluster/delegation-token",
        Some(&bob),
        &[("Hadoop-YARN-RM-Delegation-Token", &issued)],
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = call(
        &rm,
        Method::GET,
        "/ws/v1/cluster/apps",
        Some(&issued),
        &[],
        None,
    )
    .await;
    assert_refused(s, &v, 401, "AuthorizationException", &["cancelled"]);
    // The token that asked is untouched; its owner cancels it with itself.
    let (s, _) = call(
        &rm,
        Method::GET,
        "/ws/v1/cluster/apps",
        Some(&alice),
        &[],
        None,
    )
    .await;
    assert_eq!(s, 200);
    let (s, v) = call(
        &rm,
        Method::DELETE,
        "/ws/v1/cluster/delegation-token",
        Some(&alice),
        &[],
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, _) = call(
        &rm,
        Method::GET,
        "/ws/v1/cluster/apps",
        Some(&alice),
        &[],
        None,
    )
    .await;
    assert_eq!(s, 401);
    rm.shutdown().await;
}

#[test]
fn token_mode_refuses_to_start_without_a_private_key() {
    use spindle_common::config::Configuration;
    use spindle_resourcemanager::config::RmConfig;
    use std::os::unix::fs::PermissionsExt;
    let keys = Tokens::new();
    std::fs::set_permissions(&keys.path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut conf = Configuration::new();
    conf.set(TYPE, "token");
    conf.set(KEY_FILE, &keys.path);
    let e = RmConfig::from_conf(&conf).unwrap_err().to_string();
    assert!(e.contains("chmod 600") && !e.contains('\n'), "{e}");
}

#[tokio::test]
async fn a_cancellation_survives_a_restart() {
    use spindle_common::config::Configuration;
    let keys = Tokens::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = || {
        let mut c = Configuration::new();
        c.set(TYPE, "token");
        c.set(KEY_FILE, &keys.path);
        c.set(
            "spindle.resourcemanager.state-store.path",
            &dir.path().join("rm.sqlite").display().to_string(),
        );
        c
    };
    let (alice, bob) = (keys.mint("alice"), keys.mint("bob"));
    let rm = support::start_rm_with(conf()).await;
    let (s, v) = call(
        &rm,
        Method::DELETE,
        "/ws/v1/cluster/delegation-token",
        Some(&alice),
        &[],
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    rm.shutdown().await;
    let rm = support::start_rm_with(conf()).await;
    let (s, v) = call(
        &rm,
        Method::GET,
        "/ws/v1/cluster/apps",
        Some(&alice),
        &[],
        None,
    )
    .await;
    assert_refused(s, &v, 401, "AuthorizationException", &["cancelled"]);
    let (s, _) = call(
        &rm,
        Method::GET,
        "/ws/v1/cluster/apps",
        Some(&bob),
        &[],
        None,
    )
    .await;
    assert_eq!(s, 200);
    rm.shutdown().await;
}
