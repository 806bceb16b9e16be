//! The web UI (`/ui`) in a real browser: Debian's `chromium`, headless, loads each page of a
//! live minicluster (two NMs of 4 fake GPUs each) and the test reads the DOM after the
//! page's script ran (`--dump-dom`). A gang of 2 x 2 GPUs runs and a gang of 2 x 4 GPUs waits
//! (4 GPUs are free); 2,000 cheap applications wait in a queue that admits one at a time.
//! Checked: the overview's GPU total, used and free and a node's GPUs equal the REST API's;
//! the waiting gang's reason is in the DOM whole, in an element whose CSS rule wraps; the
//! applications page pages the 2,000 on the server (50 a page, 40 pages, distinct rows) and
//! sorts and filters them there (name order, tag and user filters).
//! Screenshots of each page go to a temp dir, or to `docs/ui/` with
//! `SPINDLE_UI_SCREENSHOTS=docs` (the PNGs `docs/operations.md` shows).
//!
//! Without `chromium` the test prints why it skips; under `CI=true` that is a failure.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use spindle_system_tests::{
    bin, cs_xml, fake_gpus, output_within, spawn, wait_until, Cluster, ClusterOpts, Daemon,
};

const GPU: &str = "yarn.io/gpu";
const BULK: usize = 2000;
const TEST: &str = "web_ui_pages_show_the_rest_figures_in_a_browser";

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(name))
                    .find(|p| p.is_file())
            })
        })
}

/// Headless chromium's flags: no network beyond the page, no first-run work, its own profile.
fn browser(chrome: &Path, profile: &Path) -> Command {
    let mut cmd = Command::new(chrome);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

/// The DOM of `url` once its script ran (chromium's virtual time lets the fetches finish).
fn dom(chrome: &Path, profile: &Path, url: &str) -> String {
    for _ in 0..3 {
        let mut cmd = browser(chrome, profile);
        cmd.args(["--virtual-time-budget=5000", "--dump-dom", url]);
        let out = output_within(cmd, Duration::from_secs(60));
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        // The page counts its renders in `data-loaded` on <main>.
        if text.contains("data-loaded=") {
            return text;
        }
        eprintln!(
            "{url}: no rendered page yet ({}); again",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    panic!("{url}: the page never rendered");
}

fn screenshot(chrome: &Path, profile: &Path, url: &str, file: &Path) {
    let mut cmd = browser(chrome, profile);
    cmd.args(["--virtual-time-budget=5000", "--window-size=1400,1000"])
        .arg(format!("--screenshot={}", file.display()))
        .arg(url);
    let out = output_within(cmd, Duration::from_secs(60));
    let png = std::fs::read(file).unwrap_or_default();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 5_000,
        "{url}: no screenshot ({} bytes): {}",
        png.len(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The text of the element with `id` (its first text run), HTML entities left as they are.
fn by_id(dom: &str, id: &str) -> String {
    let key = format!("id=\"{id}\"");
    let at = dom
        .find(&key)
        .unwrap_or_else(|| panic!("no #{id} in the page:\n{}", head(dom)));
    let rest = &dom[at..];
    let start = rest.find('>').expect("tag end") + 1;
    let end = rest[start..].find('<').expect("text end") + start;
    rest[start..end].trim().to_string()
}

fn head(dom: &str) -> &str {
    let mut n = dom.len().min(4000);
    while !dom.is_char_boundary(n) {
        n -= 1;
    }
    &dom[..n]
}

fn count(dom: &str, needle: &str) -> usize {
    dom.matches(needle).count()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\u{a0}', "&nbsp;")
}

fn resource_value(r: &Value, name: &str) -> i64 {
    let infos = &r["resourceInformations"]["resourceInformation"];
    let list = match infos {
        Value::Array(a) => a.clone(),
        Value::Object(_) => vec![infos.clone()],
        _ => vec![],
    };
    list.iter()
        .find(|i| i["name"] == name)
        .and_then(|i| i["value"].as_i64())
        .unwrap_or(0)
}

/// A `spindle train` client running in the background (killed by its pid when dropped).
fn train(c: &Cluster, name: &str, workers: &str, resources: &str) -> Daemon {
    let args: Vec<String> = [
        "train",
        "--appname",
        name,
        "--workers",
        workers,
        "--worker-resources",
        resources,
        "--gang-timeout-ms",
        "600000",
        "--timeout-ms",
        "600000",
        "--",
        "sleep",
        "600",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    spawn(
        name,
        &bin("spindle"),
        &args,
        c.dir.path().join(format!("{name}.log")),
        &[
            ("SPINDLE_RM_ADDRESS", c.rm_addr.clone()),
            ("SPINDLE_CONF_DIR", c.conf_dir.display().to_string()),
        ],
    )
}

fn app_named(c: &Cluster, name: &str) -> Option<Value> {
    let (_, apps) = c.get("/ws/v1/cluster/apps?queue=default");
    apps["apps"]["app"]
        .as_array()?
        .iter()
        .find(|a| a["name"] == name)
        .cloned()
}

/// The app's first gang once it is in one of `states`.
fn gang_in(c: &Cluster, name: &str, states: &[&str]) -> (String, Value) {
    wait_until(
        &format!("{name}'s gang in {states:?}"),
        Duration::from_secs(60),
        || {
            let a = app_named(c, name)?;
            let id = a["id"].as_str()?.to_string();
            let g = c.app(&id)["gangs"].as_array()?.first()?.clone();
            states.contains(&g["state"].as_str()?).then_some((id, g))
        },
    )
}

/// Submits `n` applications whose AM sleeps to queue `bulk` (it runs one at a time), from
/// 8 threads over REST.
fn submit_bulk(c: &Cluster, n: usize) {
    let base = c.url("");
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let base = base.clone();
            std::thread::spawn(move || {
                let http = reqwest::blocking::Client::builder()
                    .timeout(Duration::from_secs(30))
                    .build()
                    .expect("client");
                for i in (t..n).step_by(8) {
                    let new: Value = http
                        .post(format!("{base}/ws/v1/cluster/apps/new-application"))
                        .send()
                        .and_then(|r| r.json())
                        .expect("new-application");
                    let body = json!({
                        "application-id": new["application-id"],
                        "application-name": format!("bulk-{i:04}"),
                        "application-type": "YARN",
                        "queue": "bulk",
                        "max-app-attempts": 1,
                        "am-container-spec": {"commands": {"command": "sleep 600"}},
                        "resource": {"memory": 128, "vCores": 1},
                        "application-tags": {"tag": ["bulk"]}
                    });
                    let r = http
                        .post(format!("{base}/ws/v1/cluster/apps?user.name=bulk"))
                        .json(&body)
                        .send()
                        .expect("submit");
                    assert_eq!(r.status().as_u16(), 202, "{:?}", r.text());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("submitter");
    }
}

#[test]
fn web_ui_pages_show_the_rest_figures_in_a_browser() {
    let Some(chrome) = chromium() else {
        spindle_test_support::require::skip(
            TEST,
            "chromium is not installed (apt-get install -y chromium)",
        );
        return;
    };
    let started = Instant::now();
    let scratch = tempfile::tempdir().expect("tempdir");
    let profile = scratch.path().join("chromium-profile");
    let gpus = fake_gpus(scratch.path(), 4);
    let queues = cs_xml(&[
        ("root.queues", "default,bulk"),
        ("root.default.capacity", "90"),
        ("root.bulk.capacity", "10"),
        ("root.bulk.maximum-capacity", "10"),
        ("root.bulk.max-parallel-apps", "1"),
        ("root.bulk.maximum-applications", "5000"),
    ]);
    let c = Cluster::start_with_files(
        ClusterOpts {
            nodes: 2,
            rm_props: vec![("yarn.resource-types".into(), GPU.into())],
            nm_props: vec![
                ("yarn.nodemanager.resource-plugins".into(), GPU.into()),
                (
                    "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables".into(),
                    gpus.display().to_string(),
                ),
                ("yarn.nodemanager.resource.cpu-vcores".into(), "16".into()),
                ("yarn.nodemanager.resource.memory-mb".into(), "8192".into()),
            ],
        },
        &[("capacity-scheduler.xml", &queues)],
    );
    // A gang that runs (2 x 2 GPUs) and one that cannot fit beside it (2 x 4 GPUs).
    let _running = train(
        &c,
        "ui-gang-runs",
        "2",
        "memory-mb=256,vcores=1,yarn.io/gpu=2",
    );
    let (run_id, _) = gang_in(&c, "ui-gang-runs", &["ALLOCATED"]);
    let _waiting = train(
        &c,
        "ui-gang-waits",
        "2",
        "memory-mb=256,vcores=1,yarn.io/gpu=4",
    );
    let (wait_id, gang) = gang_in(&c, "ui-gang-waits", &["PENDING", "RESERVED"]);
    assert!(
        !gang["diagnostics"].as_str().unwrap_or_default().is_empty(),
        "a waiting gang says why: {gang}"
    );
    submit_bulk(&c, BULK);
    eprintln!(
        "{TEST}: cluster, gangs and {BULK} apps in {:?}",
        started.elapsed()
    );

    let ui = |route: &str| c.url(&format!("/ui/#/{route}"));
    let shots = if std::env::var("SPINDLE_UI_SCREENSHOTS").as_deref() == Ok("docs") {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ui")
    } else {
        scratch.path().join("shots")
    };
    std::fs::create_dir_all(&shots).expect("screenshot dir");

    // ---- the overview: GPU total, used and free as /metrics says.
    let (_, m) = c.get("/ws/v1/cluster/metrics");
    let m = &m["clusterMetrics"];
    let total = resource_value(&m["totalClusterResourcesAcrossPartition"], GPU);
    let used = resource_value(&m["totalUsedResourcesAcrossPartition"], GPU);
    assert_eq!((total, used), (8, 4), "the REST view: {m}");
    let page = dom(&chrome, &profile, &ui("overview"));
    assert_eq!(by_id(&page, "gpu-total"), total.to_string());
    assert_eq!(by_id(&page, "gpu-used"), used.to_string());
    assert_eq!(by_id(&page, "gpu-free"), (total - used).to_string());
    // Reserved: what the waiting gang holds on its nodes, as the RM reports it.
    let reserved = resource_value(&m["totalReservedResourcesAcrossPartition"], GPU);
    assert!(reserved > 0, "the waiting gang holds GPUs: {m}");
    assert_eq!(by_id(&page, "gpu-reserved"), reserved.to_string());
    // By model: the fake GPUs' one model holds all 8.
    assert!(
        page.contains("class=\"num model-total\">8<"),
        "{}",
        head(&page)
    );
    screenshot(
        &chrome,
        &profile,
        &ui("overview"),
        &shots.join("overview.png"),
    );

    // ---- the queue tree: both leaves, with the GPUs default uses.
    let page = dom(&chrome, &profile, &ui("queues"));
    assert!(
        page.contains("data-queue=\"root.default\""),
        "{}",
        head(&page)
    );
    assert!(page.contains("data-queue=\"root.bulk\""), "{}", head(&page));
    assert!(
        page.contains("data-resource=\"yarn.io/gpu\" data-used=\"4\""),
        "default uses 4 GPUs: {}",
        head(&page)
    );
    screenshot(&chrome, &profile, &ui("queues"), &shots.join("queues.png"));

    // ---- the waiting gang: its reason whole, in an element that wraps.
    let page = dom(&chrome, &profile, &ui(&format!("app/{wait_id}")));
    let reason_now = c.app(&wait_id)["gangs"][0]["diagnostics"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let reasons = [
        gang["diagnostics"].as_str().unwrap_or_default(),
        &reason_now,
    ];
    let shown = reasons.iter().find(|r| {
        page.contains(&format!(
            "<pre class=\"diag wrap gang-reason\">{}</pre>",
            esc(r)
        ))
    });
    assert!(
        shown.is_some(),
        "the gang's reason {reasons:?} whole in a .wrap element: {}",
        head(&page)
    );
    let css = c
        .http
        .get(c.url("/ui/app.css"))
        .send()
        .and_then(|r| r.text())
        .expect("app.css");
    let rule = css
        .lines()
        .find(|l| l.starts_with(".wrap {"))
        .unwrap_or_else(|| panic!("no .wrap rule in app.css"));
    assert!(
        rule.contains("white-space: pre-wrap") && rule.contains("overflow-wrap: anywhere"),
        "{rule}"
    );
    screenshot(
        &chrome,
        &profile,
        &ui(&format!("app/{wait_id}")),
        &shots.join("application-waiting-gang.png"),
    );
    // The running gang's page lists its containers with their GPUs.
    let page = dom(&chrome, &profile, &ui(&format!("app/{run_id}")));
    assert!(page.contains("id=\"app-containers\""), "{}", head(&page));
    assert!(
        count(&page, "<td class=\"num\">2</td><td>256 MB</td>") >= 2,
        "two 2-GPU members: {}",
        head(&page)
    );

    // ---- the applications page: 2,000 in queue bulk, paged on the server.
    // The REST paging the page uses: the tail page and the total in X-Total-Count.
    let r = c
        .http
        .get(c.url("/ws/v1/cluster/apps?queue=bulk&offset=1990&limit=50"))
        .send()
        .expect("apps page");
    assert_eq!(
        r.headers()
            .get("x-total-count")
            .and_then(|v| v.to_str().ok()),
        Some(BULK.to_string().as_str())
    );
    let tail: Value = r.json().expect("apps json");
    assert_eq!(
        tail["apps"]["app"].as_array().map(Vec::len),
        Some(BULK - 1990),
        "{tail}"
    );
    let first = dom(&chrome, &profile, &ui("apps?queue=bulk"));
    assert_eq!(by_id(&first, "apps-total"), BULK.to_string());
    assert_eq!(by_id(&first, "page-count"), (BULK / 50).to_string());
    assert_eq!(count(&first, "class=\"app-row\""), 50);
    let last = dom(&chrome, &profile, &ui("apps?queue=bulk&page=39"));
    assert_eq!(by_id(&last, "page-number"), "40");
    assert_eq!(count(&last, "class=\"app-row\""), 50);
    let ids = |d: &str| -> BTreeSet<String> {
        d.split("class=\"app-row\" data-id=\"")
            .skip(1)
            .filter_map(|s| s.split('"').next().map(str::to_string))
            .collect()
    };
    let (a, b) = (ids(&first), ids(&last));
    assert_eq!((a.len(), b.len()), (50, 50));
    assert!(a.is_disjoint(&b), "pages 1 and 40 share rows");
    // Newest first by default: page 1 holds the last submitted.
    assert!(first.contains("bulk-1999") || a.iter().max() > b.iter().max());
    // Sorted on the server by name, filtered by tag and user: page 1 starts at bulk-0000.
    let sorted = dom(
        &chrome,
        &profile,
        &ui("apps?queue=bulk&tag=bulk&user=bulk&sort=name"),
    );
    assert_eq!(by_id(&sorted, "apps-total"), BULK.to_string());
    let first_row = sorted.split("class=\"app-row\"").nth(1).unwrap_or_default();
    assert!(first_row.contains(">bulk-0000<"), "{}", head(first_row));
    let none = dom(&chrome, &profile, &ui("apps?queue=bulk&user=nobody"));
    assert_eq!(by_id(&none, "apps-total"), "0");
    screenshot(
        &chrome,
        &profile,
        &ui("apps?queue=bulk"),
        &shots.join("applications.png"),
    );

    // ---- nodes and a node: its GPUs as /nodes/{id} says.
    let page = dom(&chrome, &profile, &ui("nodes"));
    assert_eq!(count(&page, "class=\"node-row\""), 2, "{}", head(&page));
    screenshot(&chrome, &profile, &ui("nodes"), &shots.join("nodes.png"));
    let (_, nodes) = c.get("/ws/v1/cluster/nodes");
    let busiest = nodes["nodes"]["node"]
        .as_array()
        .expect("nodes")
        .iter()
        .max_by_key(|n| resource_value(&n["usedResource"], GPU))
        .expect("a node")["id"]
        .as_str()
        .expect("id")
        .to_string();
    let page = dom(&chrome, &profile, &ui(&format!("node/{busiest}")));
    let (_, n) = c.get(&format!("/ws/v1/cluster/nodes/{busiest}"));
    let t = resource_value(&n["node"]["totalResource"], GPU);
    let u = resource_value(&n["node"]["usedResource"], GPU);
    assert_eq!(by_id(&page, "node-gpu-total"), t.to_string());
    assert_eq!(by_id(&page, "node-gpu-used"), u.to_string());
    assert_eq!(by_id(&page, "node-gpu-free"), (t - u).to_string());
    // Each GPU from the NM (another origin, which allows the read): one row per GPU, and
    // as many held by containers as the RM counts used.
    assert!(page.contains("id=\"node-gpus\""), "{}", head(&page));
    let table = &page[page.find("id=\"node-gpus\"").expect("table")..];
    let table = &table[..table.find("</table>").expect("end of table")];
    assert_eq!(table.matches("<tr>").count() as i64 - 1, t, "{table}");
    assert_eq!(table.matches(">container_").count() as i64, u, "{table}");
    screenshot(
        &chrome,
        &profile,
        &ui(&format!("node/{busiest}")),
        &shots.join("node.png"),
    );

    // The classic pages link to the UI.
    let classic = c
        .http
        .get(c.url("/cluster"))
        .send()
        .and_then(|r| r.text())
        .expect("/cluster");
    assert!(classic.contains("href=\"/ui\""), "{classic}");
    eprintln!("{TEST}: done in {:?}", started.elapsed());
}
