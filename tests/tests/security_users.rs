//! System test: REST user authentication in `token` mode on real binaries. An operator makes
//! the signing key (`spindle token -newKey`) and mints tokens offline (`spindle token -issue`);
//! the RM refuses to start on a key file others may read; `spindle application -list` without
//! a token fails with a message naming how to get one, and works with one (from
//! `$SPINDLE_TOKEN` or `$SPINDLE_TOKEN_FILE`); bob cannot kill alice's application (403) even
//! as `?user.name=alice`, nor submit to a queue whose ACL names only alice (403); a forged
//! token is 401; every refusal is a line of the audit file (`spindle.audit.log-file`) with
//! USER, IP, OPERATION, TARGET and RESULT=FAILURE, and alice's submission a SUCCESS line, none
//! of them in the RM's own log. Every process is killed by pid when the test ends (the
//! `Cluster`'s drop) and the temp dirs removed.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use spindle_system_tests::{bin, cs_xml, output_within, wait_until, Cluster, ClusterOpts};

const CLI_TIMEOUT: Duration = Duration::from_secs(60);

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `spindle args` with `env` set (and the RM's address and conf dir when a cluster is given).
fn spindle(c: Option<&Cluster>, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(bin("spindle"));
    cmd.args(args)
        .env_remove("SPINDLE_TOKEN")
        .env_remove("SPINDLE_TOKEN_FILE");
    if let Some(c) = c {
        cmd.env("SPINDLE_RM_ADDRESS", &c.rm_addr)
            .env("SPINDLE_CONF_DIR", &c.conf_dir);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    output_within(cmd, CLI_TIMEOUT)
}

/// A token minted offline with the key file.
fn mint(key: &Path, user: &str) -> String {
    let out = spindle(
        None,
        &[],
        &[
            "token",
            "-issue",
            "-user",
            user,
            "-validity",
            "1h",
            "-keyFile",
            key.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!("owner={user}")),
        "{}",
        text(&out.stderr)
    );
    text(&out.stdout).trim().to_string()
}

/// A REST call with `token` as `Authorization: Bearer`: status, body, Location.
fn call(
    c: &Cluster,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut rb = c.http.request(method, c.url(path));
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb.send().expect(path);
    let s = r.status().as_u16();
    (s, r.json().unwrap_or(Value::Null))
}

fn submit(c: &Cluster, token: &str, user_name: &str, queue: &str) -> (String, u16, Value) {
    let (s, v) = call(
        c,
        Method::POST,
        "/ws/v1/cluster/apps/new-application",
        Some(token),
        Some(json!({})),
    );
    assert_eq!(s, 200, "{v}");
    let id = v["application-id"].as_str().expect("id").to_string();
    let (s, v) = call(
        c,
        Method::POST,
        &format!("/ws/v1/cluster/apps?user.name={user_name}"),
        Some(token),
        Some(
            json!({"application-id": id, "application-name": "held", "queue": queue,
               "am-container-spec": {"commands": {"command": "sleep 120"}},
               "resource": {"memory": 256, "vCores": 1}}),
        ),
    );
    (id, s, v)
}

/// The audit file's lines that hold every one of `parts`.
fn audit_lines(audit: &Path, parts: &[&str]) -> Vec<String> {
    std::fs::read_to_string(audit)
        .unwrap_or_default()
        .lines()
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .map(str::to_string)
        .collect()
}

fn wait_audit(audit: &Path, parts: &[&str]) -> String {
    wait_until(
        &format!("an audit line with {parts:?}"),
        Duration::from_secs(10),
        || audit_lines(audit, parts).into_iter().next(),
    )
}

#[test]
fn token_mode_authenticates_users_acls_refuse_and_refusals_are_audited() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let key = scratch.path().join("rm-token.key");
    let audit = scratch.path().join("rm-audit.log");

    // The operator's key: 0600, hex; never written over.
    let out = spindle(None, &[], &["token", "-newKey", key.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let again = spindle(None, &[], &["token", "-newKey", key.to_str().unwrap()]);
    assert!(
        !again.status.success(),
        "an existing key is never overwritten"
    );

    // A key others may read stops the RM with one line naming it.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let rm_dir = scratch.path().join("refused");
    std::fs::create_dir_all(&rm_dir).unwrap();
    let mut rm = Command::new(bin("resourcemanager"));
    rm.args([
        "--conf-dir",
        rm_dir.to_str().unwrap(),
        "-D",
        "hadoop.http.authentication.type=token",
        "-D",
        &format!(
            "hadoop.http.authentication.signature.secret.file={}",
            key.display()
        ),
        "-D",
        "yarn.resourcemanager.webapp.address=127.0.0.1:0",
        "-D",
        &format!(
            "spindle.resourcemanager.state-store.path={}",
            rm_dir.join("s.sqlite").display()
        ),
    ]);
    let out = output_within(rm, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("chmod 600") && err.trim().lines().count() == 1,
        "{err}"
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();

    let (alice, bob) = (mint(&key, "alice"), mint(&key, "bob"));
    let cs = cs_xml(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "50"),
        ("root.b.capacity", "50"),
        ("root.acl_submit_applications", " "),
        ("root.acl_administer_queue", " "),
        ("root.a.acl_submit_applications", "alice"),
        ("root.b.acl_submit_applications", "*"),
    ]);
    let prop = |k: &str, v: &str| (k.to_string(), v.to_string());
    let mut c = Cluster::start_with_files(
        ClusterOpts {
            nodes: 0,
            rm_props: vec![
                prop("hadoop.http.authentication.type", "token"),
                prop(
                    "hadoop.http.authentication.signature.secret.file",
                    key.to_str().unwrap(),
                ),
                prop("spindle.audit.log-file", audit.to_str().unwrap()),
                prop("yarn.acl.enable", "true"),
                prop("yarn.admin.acl", "admin"),
                prop(
                    "hadoop.user.group.static.mapping.overrides",
                    "dr.who=;alice=;bob=;admin=",
                ),
            ],
            ..Default::default()
        },
        &[("capacity-scheduler.xml", &cs)],
    );
    c.add_nm(&[]);
    wait_until("1 RUNNING node", Duration::from_secs(20), || {
        let (s, v) = call(
            &c,
            Method::GET,
            "/ws/v1/cluster/nodes?states=RUNNING",
            Some(&alice),
            None,
        );
        (s == 200 && v["nodes"]["node"].as_array().is_some_and(|n| !n.is_empty())).then_some(())
    });

    // The CLI without a token: a clear refusal naming how to get one.
    let out = spindle(Some(&c), &[], &["application", "-list"]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    for w in ["HTTP 401", "SPINDLE_TOKEN", "spindle token -issue"] {
        assert!(err.contains(w), "'{w}' not in: {err}");
    }
    // With one: from the variable, and from a file.
    let out = spindle(
        Some(&c),
        &[("SPINDLE_TOKEN", &alice)],
        &["application", "-list"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Total number of applications"));
    let token_file = scratch.path().join("alice.token");
    std::fs::write(&token_file, format!("{alice}\n")).unwrap();
    let out = spindle(
        Some(&c),
        &[("SPINDLE_TOKEN_FILE", token_file.to_str().unwrap())],
        &["application", "-list"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    // alice submits to a (its ACL names her); bob may not, even as ?user.name=alice.
    let (app, s, v) = submit(&c, &alice, "alice", "a");
    assert_eq!(s, 202, "{v}");
    let (s, v) = call(
        &c,
        Method::GET,
        &format!("/ws/v1/cluster/apps/{app}"),
        Some(&bob),
        None,
    );
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["app"]["user"], "alice");
    let (_, s, v) = submit(&c, &bob, "alice", "a");
    assert_eq!(s, 403, "{v}");
    assert_eq!(v["RemoteException"]["exception"], "ForbiddenException");

    // bob cannot kill alice's application, whatever user.name says; nor through the CLI.
    let (s, v) = call(
        &c,
        Method::PUT,
        &format!("/ws/v1/cluster/apps/{app}/state?user.name=alice"),
        Some(&bob),
        Some(json!({"state": "KILLED"})),
    );
    assert_eq!(s, 403, "{v}");
    assert!(
        v["RemoteException"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("User bob"),
        "{v}"
    );
    let out = spindle(
        Some(&c),
        &[("SPINDLE_TOKEN", &bob), ("USER", "alice")],
        &["application", "-kill", &app],
    );
    assert!(!out.status.success(), "{}", text(&out.stdout));
    assert_ne!(c.app_state_with(&app, &alice), "KILLED");

    // A forged token is 401.
    let forged = format!("{}x", &bob[..bob.len() - 1]);
    let (s, v) = call(&c, Method::GET, "/ws/v1/cluster/apps", Some(&forged), None);
    assert_eq!(s, 401, "{v}");

    // Every refusal is an audit line in the file; alice's submission a success line.
    wait_audit(
        &audit,
        &[
            "USER=dr.who",
            "IP=127.0.0.1",
            "OPERATION=Get Applications Request",
            "TARGET=ClientRMService",
            "RESULT=FAILURE",
            "PERMISSIONS=Unauthenticated",
        ],
    );
    wait_audit(
        &audit,
        &[
            "USER=bob",
            "IP=127.0.0.1",
            "OPERATION=Submit Application Request",
            "TARGET=ClientRMService",
            "RESULT=FAILURE",
            "does not have permission to submit",
        ],
    );
    let kills = wait_until("bob's two refused kills", Duration::from_secs(10), || {
        let l = audit_lines(
            &audit,
            &[
                "USER=bob",
                "IP=127.0.0.1",
                "OPERATION=Kill Application Request",
                "TARGET=ClientRMService",
                "RESULT=FAILURE",
                &format!("APPID={app}"),
            ],
        );
        (l.len() >= 2).then_some(l)
    });
    assert!(kills[0].contains("DESCRIPTION="), "{}", kills[0]);
    wait_audit(
        &audit,
        &[
            "USER=dr.who",
            "RESULT=FAILURE",
            "DESCRIPTION=Authentication failed",
        ],
    );
    wait_audit(
        &audit,
        &[
            "USER=alice",
            "OPERATION=Submit Application Request",
            "RESULT=SUCCESS",
            &format!("APPID={app}"),
        ],
    );
    assert!(
        !c.rm.log_text().contains("RESULT=FAILURE"),
        "audit lines go to the audit file, not the RM's log"
    );

    // alice kills her own.
    let (s, v) = call(
        &c,
        Method::PUT,
        &format!("/ws/v1/cluster/apps/{app}/state"),
        Some(&alice),
        Some(json!({"state": "KILLED"})),
    );
    assert!(s == 200 || s == 202, "{s} {v}");
    wait_until("alice's kill", Duration::from_secs(20), || {
        (c.app_state_with(&app, &alice) == "KILLED").then_some(())
    });
}

trait WithToken {
    fn app_state_with(&self, app: &str, token: &str) -> String;
}

impl WithToken for Cluster {
    fn app_state_with(&self, app: &str, token: &str) -> String {
        let (_, v) = call(
            self,
            Method::GET,
            &format!("/ws/v1/cluster/apps/{app}/state"),
            Some(token),
            None,
        );
        v["state"].as_str().unwrap_or_default().to_string()
    }
}
