//! Configuration mistakes are named: the RM in-process on an ephemeral port with a real
//! configuration directory, its log captured. An unknown key in the files is logged at start
//! (and on `refreshQueues`) with the file, the line and the closest known key; a
//! `scheduler-conf` mutation naming an unknown queue property is refused with 400 naming the
//! known one, and stores nothing (the version stays); refused mutations and refreshes are
//! written to the log as YARN's audit logger writes a failure (user, address, operation,
//! reason); a refused value is quoted as written.

use std::fmt::Debug;
use std::path::Path;
use std::sync::{Mutex, Once};
use std::time::Duration;

use serde_json::{json, Value};
use spindle_resourcemanager::config::RmConfig;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

// ------------------------------------------------------------------ the log, captured

/// Every warning and error logged in this test binary (its message, then its fields).
static LOGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}"));
        } else {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        *meta.level() <= Level::WARN
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut m = Message(String::new());
        event.record(&mut m);
        LOGS.lock().unwrap_or_else(|p| p.into_inner()).push(m.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn capture_logs() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        tracing::subscriber::set_global_default(Capture).expect("one subscriber");
    });
}

/// The captured lines that contain every one of `parts`.
fn logged(parts: &[&str]) -> Vec<String> {
    LOGS.lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|l| parts.iter().all(|p| l.contains(p)))
        .cloned()
        .collect()
}

// ------------------------------------------------------------------ the RM

const CS: &str = "yarn.scheduler.capacity.";

fn xml(pairs: &[(&str, &str)]) -> String {
    let mut x = String::from("<?xml version=\"1.0\"?>\n<configuration>\n");
    for (k, v) in pairs {
        x.push_str(&format!(
            "  <property><name>{k}</name><value>{v}</value></property>\n"
        ));
    }
    x.push_str("</configuration>\n");
    x
}

struct Rm {
    base: String,
    http: reqwest::Client,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Drop for Rm {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn start(conf_dir: &Path) -> Rm {
    let store = conf_dir.join("rm.sqlite");
    let overrides = vec![(
        "spindle.resourcemanager.state-store.path".to_string(),
        store.display().to_string(),
    )];
    let conf = RmConfig::load(conf_dir, &overrides).expect("config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let (rm, serve) = spindle_resourcemanager::daemon::start(listener, conf)
        .await
        .expect("start");
    let server = tokio::spawn(serve(Box::pin(std::future::pending())));
    Rm {
        base: format!("http://{}", rm.addr),
        http: reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client"),
        server,
    }
}

impl Rm {
    async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .expect("send");
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("get");
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    async fn version(&self, user: &str) -> u64 {
        let (status, v) = self
            .get(&format!(
                "/ws/v1/cluster/scheduler-conf/version?user.name={user}"
            ))
            .await;
        assert_eq!(status, 200, "{v}");
        v["versionID"].as_u64().expect("versionID")
    }

    async fn conf_names(&self, user: &str) -> Vec<String> {
        let (status, v) = self
            .get(&format!("/ws/v1/cluster/scheduler-conf?user.name={user}"))
            .await;
        assert_eq!(status, 200, "{v}");
        v["property"]
            .as_array()
            .expect("property")
            .iter()
            .map(|p| p["name"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

fn message(v: &Value) -> String {
    v["RemoteException"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn two_queues() -> String {
    xml(&[
        (&format!("{CS}root.queues"), "a,b"),
        (&format!("{CS}root.a.capacity"), "70"),
        (&format!("{CS}root.b.capacity"), "30"),
    ])
}

// ------------------------------------------------------------------ the tests

#[tokio::test]
async fn an_unknown_queue_property_is_refused_and_nothing_is_stored() {
    capture_logs();
    let dir = tempfile::tempdir().expect("tempdir");
    // A typo on line 5 of yarn-site.xml, another component's key on line 4.
    std::fs::write(
        dir.path().join("yarn-site.xml"),
        xml(&[
            ("yarn.scheduler.minimum-allocation-mb", "128"),
            ("fs.defaultFS", "hdfs://nn:8020"),
            ("yarn.schedular.maximum-allocation-mb", "4096"),
        ]),
    )
    .expect("write");
    std::fs::write(dir.path().join("capacity-scheduler.xml"), two_queues()).expect("write");
    let rm = start(dir.path()).await;

    // At start: the file, the line, the key and the closest known key.
    let site = dir.path().join("yarn-site.xml").display().to_string();
    let start_warning = format!(
        "{site}:5: unknown key 'yarn.schedular.maximum-allocation-mb'; did you mean 'yarn.scheduler.maximum-allocation-mb'?"
    );
    assert_eq!(logged(&[&start_warning]).len(), 1, "{:#?}", logged(&[]));
    assert!(logged(&["fs.defaultFS"]).is_empty(), "{:#?}", logged(&[]));

    let before = rm.version("alice").await;
    let (status, v) = rm
        .send(
            reqwest::Method::PUT,
            "/ws/v1/cluster/scheduler-conf?user.name=alice",
            json!({"update-queue": {"queue-name": "root.a", "params": {"entry": [
                {"key": "capacity", "value": "60"},
                {"key": "maximum-capacty", "value": "80"},
            ]}}}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    let m = message(&v);
    assert!(
        m.contains(
            "Unknown property 'maximum-capacty' for queue root.a; did you mean 'maximum-capacity'?"
        ),
        "{m}"
    );
    assert!(m.contains("rule unknown-property"), "{m}");
    // Nothing stored: the same version, no new key, the valid part not applied either.
    assert_eq!(rm.version("alice").await, before);
    let names = rm.conf_names("alice").await;
    assert!(
        !names.iter().any(|n| n.contains("maximum-capacty")),
        "{names:?}"
    );
    // The refusal is in the log: who, from where, what and why.
    let audit = logged(&[
        "USER=alice\tIP=127.0.0.1\tOPERATION=updateSchedulerConfiguration\tTARGET=RMWebService\tRESULT=FAILURE\tDESCRIPTION=Failed to re-init queues : Unknown property 'maximum-capacty'",
    ]);
    assert_eq!(audit.len(), 1, "{:#?}", logged(&[]));

    // The right spelling is accepted and makes a new version.
    let (status, v) = rm
        .send(
            reqwest::Method::PUT,
            "/ws/v1/cluster/scheduler-conf?user.name=alice",
            json!({"update-queue": {"queue-name": "root.a", "params": {"entry":
                {"key": "maximum-capacity", "value": "80"}}}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(rm.version("alice").await, before + 1);
}

#[tokio::test]
async fn a_refused_refresh_is_logged_with_who_asked_and_why() {
    capture_logs();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("yarn-site.xml"),
        xml(&[("yarn.scheduler.minimum-allocation-mb", "128")]),
    )
    .expect("write");
    let cs = dir.path().join("capacity-scheduler.xml");
    std::fs::write(&cs, two_queues()).expect("write");
    let rm = start(dir.path()).await;
    let before = rm.version("bob").await;

    // An edit with a negative capacity and a misspelt property (line 6): the misspelling
    // refuses the refresh first, naming file, line and the closest known key.
    std::fs::write(
        &cs,
        xml(&[
            (&format!("{CS}root.queues"), "a,b"),
            (&format!("{CS}root.a.capacity"), "-60"),
            (&format!("{CS}root.b.capacity"), "30"),
            (&format!("{CS}root.b.user-limit-facter"), "2"),
        ]),
    )
    .expect("write");
    let refresh = || {
        rm.send(
            reqwest::Method::POST,
            "/ws/v1/cluster/refresh-queues?user.name=bob",
            json!({}),
        )
    };
    let (status, v) = refresh().await;
    assert_eq!(status, 400, "{v}");
    let file = cs.display().to_string();
    let typo = format!(
        "{file}:6: unknown key '{CS}root.b.user-limit-facter'; did you mean '{CS}root.b.user-limit-factor'?"
    );
    let m = message(&v);
    assert!(m.contains("nothing applied") && m.contains(&typo), "{m}");
    assert_eq!(rm.version("bob").await, before);

    // The negative capacity alone: refused with the value as written, not as the fraction
    // it was parsed to.
    std::fs::write(
        &cs,
        xml(&[
            (&format!("{CS}root.queues"), "a,b"),
            (&format!("{CS}root.a.capacity"), "-60"),
            (&format!("{CS}root.b.capacity"), "30"),
        ]),
    )
    .expect("write");
    let (status, v) = refresh().await;
    assert_eq!(status, 400, "{v}");
    let m = message(&v);
    assert!(
        m.contains("Illegal capacity of -60 for queue root.a"),
        "{m}"
    );
    assert_eq!(rm.version("bob").await, before);
    let audit = logged(&[
        "USER=bob\tIP=127.0.0.1\tOPERATION=refreshQueues\tTARGET=AdminService\tRESULT=FAILURE\tDESCRIPTION=Failed to re-init queues : ",
        "Illegal capacity of -60 for queue root.a",
    ]);
    assert_eq!(audit.len(), 1, "{:#?}", logged(&[]));
    let audit = logged(&[
        "USER=bob\tIP=127.0.0.1\tOPERATION=refreshQueues\tTARGET=AdminService\tRESULT=FAILURE",
        "nothing applied",
    ]);
    assert_eq!(audit.len(), 1, "{:#?}", logged(&[]));
}
