//! `spindle image -list | -prefetch IMAGE [-nodes N1,N2]`: the container images nodes hold,
//! and pulling one ahead of the jobs that will want it (Spindle's; YARN has none, Slurm
//! sites pre-pull by hand on each node).

use std::time::{Duration, Instant};

use anyhow::Context;
use spindle_appmaster_sdk::rm_client::RmClient;
use spindle_common::image_ref::ImageRef;
use spindle_common::records::cluster::NodeInfo;
use spindle_common::states::NodeState;

use super::args::{Opt, Parsed, UsageError};
use super::format::{ascii_table, human_bytes};
use super::launch::invalid;
use super::{parse_or_usage, rm_client, usage_error, EXIT_APP_FAILED, EXIT_OK};

pub const USAGE: &str = "\
usage: spindle image -list | -prefetch IMAGE [-nodes N1,N2] [-wait SECONDS | -no_wait]
                   [--rm-address HOST:PORT] [--conf-dir DIR]
  -list             the images the nodes hold: names, digest, size and on which nodes
  -prefetch IMAGE   pull IMAGE (registry/repo:tag, repo@sha256:..., oci:/dir) on the nodes
                    ahead of the jobs that will run in it; waits until every node holds it
                    or says why it could not, printing how many hold it
  -nodes N1,N2      only these nodes (host:port, as `node -list` shows them; default: every
                    RUNNING node)
  -wait SECONDS     how long to wait for the pulls (default 1800)
  -no_wait          ask and return at once
Exit status 0 when every node holds the image, 2 when a pull failed or the wait ran out.";

pub const OPTS: &[Opt] = &[
    Opt::flag("list", &[]),
    Opt::one("prefetch", &[]),
    Opt::list("nodes", &[]),
    Opt::one("wait", &[]),
    Opt::flag("no_wait", &[]),
];

/// How often the nodes are looked at while waiting.
const POLL: Duration = Duration::from_secs(1);

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    if p.has("list") {
        let rm = rm_client(&p)?;
        let nodes = rm
            .nodes(&[NodeState::RUNNING])
            .await
            .with_context(|| format!("cannot list nodes at {}", rm.address()))?;
        say_raw!("{}", format_images(&nodes));
        return Ok(EXIT_OK);
    }
    let Some(image) = p.value("prefetch") else {
        return Err(usage_error(
            UsageError::Other("give -list or -prefetch IMAGE".into()),
            USAGE,
        ));
    };
    let image = ImageRef::parse(image)
        .map_err(|e| usage_error(invalid("prefetch", image, e.to_string()), USAGE))?;
    let wait = wait_from(&p).map_err(|e| usage_error(e, USAGE))?;
    let nodes: Vec<String> = p.values("nodes").to_vec();
    let rm = rm_client(&p)?;
    let asked = rm
        .prefetch_image(&image.to_string(), &nodes)
        .await
        .with_context(|| format!("cannot ask the nodes to pull {image}"))?;
    say!(
        "Asked {} node(s) to pull {}: {}",
        asked.nodes.len(),
        asked.image,
        asked.nodes.join(", ")
    );
    match wait {
        None => Ok(EXIT_OK),
        Some(limit) => watch(&rm, &image, &asked.nodes, limit).await,
    }
}

fn wait_from(p: &Parsed) -> Result<Option<Duration>, UsageError> {
    if p.has("no_wait") {
        return Ok(None);
    }
    Ok(Some(Duration::from_secs(
        p.parse::<u64>("wait")?.unwrap_or(1800),
    )))
}

/// Where one node stands with the image.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pull {
    Holds,
    Failed(String),
    Pending,
}

fn pull_on(n: &NodeInfo, image: &ImageRef) -> Pull {
    let name = image.to_string();
    let key = image.placement_key();
    if n.images
        .iter()
        .any(|i| i.digest == key || i.names.contains(&name))
    {
        return Pull::Holds;
    }
    match n.image_pull_failures.iter().find(|f| f.image == name) {
        Some(f) => Pull::Failed(f.reason.clone()),
        None => Pull::Pending,
    }
}

/// Waits until every node asked holds the image or failed, saying so as counts change.
async fn watch(
    rm: &RmClient,
    image: &ImageRef,
    asked: &[String],
    limit: Duration,
) -> anyhow::Result<u8> {
    let start = Instant::now();
    let mut last = None;
    loop {
        let nodes = rm.nodes(NodeState::ALL).await?;
        let states: Vec<(String, Pull)> = asked
            .iter()
            .map(|id| {
                let pull = nodes
                    .iter()
                    .find(|n| n.id == *id)
                    .map_or(Pull::Failed("the node is gone".into()), |n| {
                        pull_on(n, image)
                    });
                (id.clone(), pull)
            })
            .collect();
        let holds = states.iter().filter(|(_, s)| *s == Pull::Holds).count();
        let failed: Vec<_> = states
            .iter()
            .filter_map(|(id, s)| match s {
                Pull::Failed(why) => Some((id, why)),
                _ => None,
            })
            .collect();
        let now = (holds, failed.len());
        if last != Some(now) {
            say!("{holds} of {} node(s) hold {image}", asked.len());
            last = Some(now);
        }
        if holds + failed.len() == asked.len() {
            for (id, why) in &failed {
                say!("{id}: could not pull {image}: {why}");
            }
            return Ok(if failed.is_empty() {
                EXIT_OK
            } else {
                EXIT_APP_FAILED
            });
        }
        if start.elapsed() >= limit {
            let pending: Vec<&str> = states
                .iter()
                .filter(|(_, s)| *s == Pull::Pending)
                .map(|(id, _)| id.as_str())
                .collect();
            say!(
                "Gave up waiting after {} s; still pulling on: {} (see `spindle image -list`)",
                limit.as_secs(),
                pending.join(", ")
            );
            return Ok(EXIT_APP_FAILED);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// One row per image: its names, short digest, size, and the nodes holding it.
pub fn format_images(nodes: &[NodeInfo]) -> String {
    let mut by_digest: std::collections::BTreeMap<&str, (Vec<&str>, u64, Vec<&str>)> =
        Default::default();
    for n in nodes {
        for i in &n.images {
            let e = by_digest.entry(i.digest.as_str()).or_default();
            for name in &i.names {
                if !e.0.contains(&name.as_str()) {
                    e.0.push(name);
                }
            }
            e.1 = e.1.max(i.size_bytes);
            e.2.push(&n.id);
        }
    }
    let rows: Vec<Vec<String>> = by_digest
        .iter()
        .map(|(d, (names, size, on))| {
            vec![
                names.join(", "),
                d.get(..19).unwrap_or(d).to_string(),
                human_bytes(*size),
                on.join(", "),
            ]
        })
        .collect();
    let title = format!("Images on {} node(s): {}", nodes.len(), rows.len());
    ascii_table(&title, &["IMAGE", "DIGEST", "SIZE", "NODES"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, images: serde_json::Value, failures: serde_json::Value) -> NodeInfo {
        serde_json::from_value(serde_json::json!({
            "id": id, "state": "RUNNING", "images": images, "imagePullFailures": failures,
        }))
        .unwrap()
    }

    #[test]
    fn a_node_holds_fails_or_pulls() {
        let d = format!("sha256:{}", "c".repeat(64));
        let held = serde_json::json!([{"names": ["127.0.0.1:5000/busybox:1"], "digest": d, "sizeBytes": 5}]);
        let img = ImageRef::parse("127.0.0.1:5000/busybox:1").unwrap();
        assert_eq!(
            pull_on(&node("a:1", held.clone(), serde_json::json!([])), &img),
            Pull::Holds
        );
        let by_digest = ImageRef::parse(&format!("127.0.0.1:5000/busybox@{d}")).unwrap();
        assert_eq!(
            pull_on(
                &node("a:1", held.clone(), serde_json::json!([])),
                &by_digest
            ),
            Pull::Holds
        );
        let failed =
            serde_json::json!([{"image": "127.0.0.1:5000/busybox:1", "reason": "not found"}]);
        assert_eq!(
            pull_on(&node("b:1", serde_json::json!([]), failed), &img),
            Pull::Failed("not found".into())
        );
        assert_eq!(
            pull_on(
                &node("c:1", serde_json::json!([]), serde_json::json!([])),
                &img
            ),
            Pull::Pending
        );
        let t = format_images(&[
            node("a:1", held.clone(), serde_json::json!([])),
            node("b:1", held, serde_json::json!([])),
        ]);
        assert!(t.contains("Images on 2 node(s): 1"), "{t}");
        assert!(
            t.contains("127.0.0.1:5000/busybox:1") && t.contains("a:1, b:1"),
            "{t}"
        );
    }
}
