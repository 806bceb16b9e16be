//! Node labels and node attributes over REST, in-process: YARN's label endpoints
//! (`add-node-labels`, `replace-node-to-labels`, `get-node-labels`, `get-node-to-labels`,
//! `label-mappings`, `nodes/{id}/get-labels`, `nodes/{id}/replace-labels`,
//! `remove-node-labels`), the attribute endpoints (`node-attributes-mapping`,
//! `get-node-to-attributes`, `get-attributes-to-nodes`, `get-node-attributes`), the label and
//! attribute fields of `/nodes` and of the node tracker, and every refusal: a 400
//! `RemoteException` naming the problem (403 for a non-admin with `yarn.acl.enable=true`),
//! after which nothing changed.
//!
//! Each answer's keys are also checked against the schema `docs/openapi.yaml` gives it.

mod support;

use std::collections::BTreeSet;

use serde_json::{json, Value};
use support::{fake_nm, start_rm, Rm};

impl Rm {
    async fn post_q(&self, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.http.post(format!("{}{path}", self.base));
        req = match body {
            Some(b) => req.json(&b),
            None => req,
        };
        let r = req.send().await.unwrap_or_else(|e| panic!("{path}: {e}"));
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// POST `path` with `body`, expecting YARN's 200 with an empty body.
    async fn ok(&self, path: &str, body: Option<Value>) {
        let (s, v) = self.post_q(path, body).await;
        assert_eq!(s, 200, "POST {path}: {v}");
    }

    /// POST `path`, expecting a `status` RemoteException whose message has every `words`.
    async fn refused(&self, path: &str, body: Option<Value>, status: u16, words: &[&str]) {
        let (s, v) = self.post_q(path, body).await;
        assert_eq!(s, status, "POST {path}: {v}");
        let re = &v["RemoteException"];
        let msg = re["message"].as_str().unwrap_or_else(|| panic!("{v}"));
        let exc = if status == 403 {
            "ForbiddenException"
        } else {
            "BadRequestException"
        };
        assert_eq!(re["exception"], exc, "{v}");
        for w in words {
            assert!(msg.contains(w), "POST {path}: {msg:?} does not name {w:?}");
        }
    }

    /// GET `path`, expecting 200; checks the answer's keys against `schema` in the spec.
    async fn read(&self, path: &str, schema: &str) -> Value {
        let (s, v) = self.get(path).await;
        assert_eq!(s, 200, "GET {path}: {v}");
        assert_schema(&v, schema);
        v
    }

    async fn register(&self, node: &str, extra: Value) -> Value {
        let mut body = json!({"nodeId": node, "httpAddress": node, "resource": {"memory": 4096, "vCores": 4}, "nmVersion": "t"});
        for (k, v) in extra.as_object().expect("object") {
            body[k] = v.clone();
        }
        let (s, v) = self
            .post_q("/ws/v1/node-tracker/register", Some(body))
            .await;
        assert_eq!(s, 200, "{v}");
        assert_schema(&v, "RegisterNodeManagerResponse");
        v
    }
}

// ---------------------------------------------------------------- schema check

/// The `properties` of schema `name` in the spec's `components: schemas:`, each with the
/// schema its value refers to (directly, through `allOf`, array `items` or
/// `additionalProperties`), if any.
fn spec_props(name: &str) -> Vec<(String, Option<String>)> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.yaml"))
            .expect("read docs/openapi.yaml");
    let head = format!("    {name}:");
    let mut lines = text
        .lines()
        .skip_while(|l| *l != "  schemas:")
        .skip_while(|l| *l != head)
        .skip(1)
        .take_while(|l| l.trim().is_empty() || l.starts_with("      "));
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for l in lines.by_ref() {
        if l == "      properties:" {
            break;
        }
    }
    for l in lines {
        if !l.starts_with("        ") {
            break;
        }
        let t = l.trim();
        if !l.starts_with("         ") {
            let (k, rest) = t.split_once(':').unwrap_or((t, ""));
            let r = rest.split_once("$ref:").map(|x| x.1);
            out.push((k.trim_matches('\'').to_string(), r.map(ref_of)));
        } else if let Some((_, r)) = t.split_once("$ref:") {
            if let Some(last) = out.last_mut() {
                last.1.get_or_insert_with(|| ref_of(r));
            }
        }
    }
    assert!(
        !out.is_empty(),
        "schema {name} has no properties in the spec"
    );
    out
}

fn ref_of(r: &str) -> String {
    r.trim()
        .trim_matches(|c| c == '\'' || c == '"')
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Every key of `v` is a property of `schema`; objects under properties that refer to another
/// schema with properties are checked against it (maps keyed by ids are looked through).
fn assert_schema(v: &Value, schema: &str) {
    let props = spec_props(schema);
    let Some(obj) = v.as_object() else {
        panic!("{schema}: not an object: {v}")
    };
    for (k, val) in obj {
        let Some((_, r)) = props.iter().find(|(p, _)| p == k) else {
            panic!(
                "{schema}: key {k:?} is not in docs/openapi.yaml ({:?}): {v}",
                props.iter().map(|p| &p.0).collect::<Vec<_>>()
            )
        };
        let Some(r) = r else { continue };
        let has_props = !matches!(r.as_str(), "NodeState" | "NodeAction" | "ResourceInfo");
        if !has_props {
            continue;
        }
        check_value(val, r);
    }
}

fn check_value(val: &Value, schema: &str) {
    match val {
        Value::Array(items) => items.iter().for_each(|i| check_value(i, schema)),
        Value::Object(o) => {
            let props: BTreeSet<String> = spec_props(schema).into_iter().map(|p| p.0).collect();
            if o.keys().all(|k| props.contains(k)) {
                assert_schema(val, schema);
            } else {
                // A map (node id, label or attribute name -> value of `schema`).
                o.values().for_each(|x| check_value(x, schema));
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------- the tests

fn names(info: &Value) -> Vec<(String, bool)> {
    info["nodeLabelInfo"]
        .as_array()
        .unwrap_or_else(|| panic!("no nodeLabelInfo list: {info}"))
        .iter()
        .map(|l| {
            (
                l["name"].as_str().expect("name").to_string(),
                l["exclusivity"].as_bool().expect("exclusivity"),
            )
        })
        .collect()
}

fn own(pairs: &[(&str, bool)]) -> Vec<(String, bool)> {
    pairs.iter().map(|(n, e)| (n.to_string(), *e)).collect()
}

#[tokio::test]
async fn node_labels_over_rest() {
    let rm = start_rm(&[]).await;
    let (node, _launches) = fake_nm().await;
    let r = rm.register(&node, json!({})).await;
    assert_eq!(r["areNodeLabelsAcceptedByRM"], true, "{r}");
    let c = "/ws/v1/cluster";

    let v = rm
        .read(&format!("{c}/get-node-labels"), "NodeLabelsEnvelope")
        .await;
    assert_eq!(names(&v["nodeLabelsInfo"]), own(&[]), "{v}");

    // Add: YARN's wrapped body and the bare one; exclusivity defaults to true.
    rm.ok(
        &format!("{c}/add-node-labels"),
        Some(json!({"nodeLabelsInfo": {"nodeLabelInfo": [{"name": "gpu"}]}})),
    )
    .await;
    rm.ok(
        &format!("{c}/add-node-labels?user.name=alice"),
        Some(json!({"nodeLabelInfo": [{"name": "shared", "exclusivity": false}, {"name": "gpu", "exclusivity": true}]})),
    )
    .await;
    let v = rm
        .read(&format!("{c}/get-node-labels"), "NodeLabelsEnvelope")
        .await;
    assert_eq!(
        names(&v["nodeLabelsInfo"]),
        own(&[("gpu", true), ("shared", false)])
    );
    rm.refused(
        &format!("{c}/add-node-labels"),
        Some(json!({"nodeLabelInfo": [{"name": "gpu", "exclusivity": false}]})),
        400,
        &["gpu", "already exists"],
    )
    .await;
    rm.refused(
        &format!("{c}/add-node-labels"),
        Some(json!({"nodeLabelInfo": [{"name": "ok-one"}, {"name": "-bad"}]})),
        400,
        &["-bad", "invalid"],
    )
    .await;
    rm.refused(
        &format!("{c}/add-node-labels"),
        Some(json!({"nodeLabelInfo": "gpu"})),
        400,
        &[],
    )
    .await;
    rm.refused(
        &format!("{c}/add-node-labels"),
        Some(json!({"nodeLabelsInfo": {"nodeLabelInfo": [{"name": "x", "exclusivity": "no"}]}})),
        400,
        &["nodeLabelsInfo"],
    )
    .await;
    rm.refused(
        &format!("{c}/add-node-labels"),
        Some(json!({"nodeLabelsInfo": "gpu"})),
        400,
        &[],
    )
    .await;
    let v = rm
        .read(&format!("{c}/get-node-labels"), "NodeLabelsEnvelope")
        .await;
    assert_eq!(
        names(&v["nodeLabelsInfo"]),
        own(&[("gpu", true), ("shared", false)]),
        "a refused add adds nothing"
    );

    // Replace node-to-labels for the registered node.
    rm.ok(
        &format!("{c}/replace-node-to-labels"),
        Some(json!({"nodeToLabels": [{"nodeId": node, "labels": ["gpu"]}]})),
    )
    .await;
    let v = rm
        .read(&format!("{c}/get-node-to-labels"), "NodeToLabelsInfo")
        .await;
    assert_eq!(
        names(&v["nodeToLabels"][&node]),
        own(&[("gpu", true)]),
        "{v}"
    );
    let v = rm
        .read(&format!("{c}/label-mappings"), "LabelsToNodesInfo")
        .await;
    assert_eq!(
        v,
        json!({"labelsToNodes": {"gpu": {"nodeId": [node], "exclusivity": true},
                                 "shared": {"nodeId": [], "exclusivity": false}}})
    );
    let v = rm
        .read(
            &format!("{c}/label-mappings?labels=shared"),
            "LabelsToNodesInfo",
        )
        .await;
    assert_eq!(
        v,
        json!({"labelsToNodes": {"shared": {"nodeId": [], "exclusivity": false}}})
    );
    let v = rm
        .read(&format!("{c}/nodes/{node}/get-labels"), "NodeLabelsInfo")
        .await;
    assert_eq!(names(&v), own(&[("gpu", true)]));
    let v = rm.read(&format!("{c}/nodes"), "NodesBody").await;
    let n = &v["nodes"]["node"][0];
    assert_eq!(n["nodeLabels"], json!(["gpu"]), "{n}");
    assert_eq!(n["allocationTags"], json!({"allocationTagInfo": []}), "{n}");
    assert_eq!(
        n["nodeAttributesInfo"],
        json!({"nodeAttributeInfo": []}),
        "{n}"
    );

    // Refused replacements change nothing.
    let replace = format!("{c}/replace-node-to-labels");
    rm.refused(
        &replace,
        Some(json!({"nodeToLabels": [{"nodeId": node, "labels": ["nosuch"]}]})),
        400,
        &["nosuch"],
    )
    .await;
    rm.refused(
        &replace,
        Some(json!({"nodeToLabels": [{"nodeId": node, "labels": ["gpu", "shared"]}]})),
        400,
        &[&node, "at most one label"],
    )
    .await;
    rm.refused(
        &replace,
        Some(
            json!({"nodeToLabels": [{"nodeId": "ghost.example.com:1", "labels": ["gpu"]}], "failOnUnknownNodes": true}),
        ),
        400,
        &["ghost.example.com:1", "not known"],
    )
    .await;
    rm.refused(
        &format!("{replace}?failOnUnknownNodes=true"),
        Some(json!({"nodeToLabels": [{"nodeId": "ghost.example.com:1", "labels": ["gpu"]}]})),
        400,
        &["ghost.example.com:1"],
    )
    .await;
    rm.refused(
        &replace,
        Some(json!({"nodeToLabels": [{"nodeId": " ", "labels": ["gpu"]}]})),
        400,
        &[],
    )
    .await;
    let v = rm
        .read(&format!("{c}/nodes/{node}/get-labels"), "NodeLabelsInfo")
        .await;
    assert_eq!(names(&v), own(&[("gpu", true)]));

    // Remove: refused while a node is in the label, for an unknown label, or with none.
    let remove = format!("{c}/remove-node-labels");
    rm.refused(&format!("{remove}?labels=gpu"), None, 400, &["gpu", &node])
        .await;
    rm.refused(
        &format!("{remove}?labels=shared&labels=nosuch"),
        None,
        400,
        &["nosuch", "not in the cluster"],
    )
    .await;
    rm.refused(&remove, None, 400, &["labels"]).await;
    let v = rm
        .read(&format!("{c}/get-node-labels"), "NodeLabelsEnvelope")
        .await;
    assert_eq!(
        names(&v["nodeLabelsInfo"]),
        own(&[("gpu", true), ("shared", false)]),
        "a refused removal removes nothing"
    );

    // One node's labels: replace-labels, then back to the default partition.
    rm.ok(
        &format!("{c}/nodes/{node}/replace-labels?labels=shared"),
        None,
    )
    .await;
    let v = rm
        .read(&format!("{c}/nodes/{node}/get-labels"), "NodeLabelsInfo")
        .await;
    assert_eq!(names(&v), own(&[("shared", false)]));
    rm.refused(
        &format!("{c}/nodes/{node}/replace-labels?labels=nosuch"),
        None,
        400,
        &["nosuch"],
    )
    .await;
    let (s, v) = rm
        .post_q(
            &format!("{c}/nodes/ghost.example.com:1/replace-labels?labels=gpu"),
            None,
        )
        .await;
    assert_eq!(s, 404, "{v}");
    assert_eq!(v["RemoteException"]["exception"], "NotFoundException");
    let (s, v) = rm
        .get(&format!("{c}/nodes/ghost.example.com:1/get-labels"))
        .await;
    assert_eq!(s, 404, "{v}");
    rm.ok(&format!("{c}/nodes/{node}/replace-labels"), None)
        .await;
    let v = rm
        .read(&format!("{c}/nodes/{node}/get-labels"), "NodeLabelsInfo")
        .await;
    assert_eq!(names(&v), own(&[]));
    let v = rm
        .read(&format!("{c}/get-node-to-labels"), "NodeToLabelsInfo")
        .await;
    assert_eq!(v, json!({"nodeToLabels": {}}));
    let v = rm.read(&format!("{c}/nodes"), "NodesBody").await;
    assert_eq!(v["nodes"]["node"][0]["nodeLabels"], json!([]), "{v}");

    // Now both labels are free: removing them (comma-separated) works.
    rm.ok(&format!("{remove}?labels=gpu,shared"), None).await;
    let v = rm
        .read(&format!("{c}/get-node-labels"), "NodeLabelsEnvelope")
        .await;
    assert_eq!(names(&v["nodeLabelsInfo"]), own(&[]));

    // An NM's own labels are refused under the default (centralized) configuration.
    let (other, _l2) = fake_nm().await;
    let r = rm.register(&other, json!({"nodeLabels": ["gpu"]})).await;
    assert_eq!(r["areNodeLabelsAcceptedByRM"], false, "{r}");
    assert!(
        r["diagnosticsMessage"]
            .as_str()
            .is_some_and(|d| d.contains("centrally")),
        "{r}"
    );
    rm.shutdown().await;
}

#[tokio::test]
async fn node_attributes_over_rest() {
    let rm = start_rm(&[]).await;
    let (node, _launches) = fake_nm().await;
    let host = node.split(':').next().expect("host").to_string();
    let r = rm
        .register(
            &node,
            json!({"nodeAttributes": {"nm.yarn.io/gpu-model": "H100"}}),
        )
        .await;
    assert_eq!(r["areNodeAttributesAcceptedByRM"], true, "{r}");
    let c = "/ws/v1/cluster";
    let map = format!("{c}/node-attributes-mapping");

    rm.ok(
        &map,
        Some(
            json!({"operation": "REPLACE", "nodesToAttributes": [{"node": host, "nodeAttributes": [
            {"prefix": "rm.yarn.io", "name": "os", "type": "STRING", "value": "linux"},
            {"name": "zone", "value": "a"}]}]}),
        ),
    )
    .await;
    let v = rm
        .read(
            &format!("{c}/get-node-to-attributes?hostnames={host}"),
            "NodeToAttributesInfo",
        )
        .await;
    let attrs: BTreeSet<(String, String, String, String)> = v["nodeToAttributes"][&host]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|a| {
            let s = |k: &str| a[k].as_str().unwrap_or_default().to_string();
            (s("prefix"), s("name"), s("type"), s("value"))
        })
        .collect();
    let want: BTreeSet<(String, String, String, String)> = [
        ("nm.yarn.io", "gpu-model", "STRING", "H100"),
        ("rm.yarn.io", "os", "STRING", "linux"),
        ("rm.yarn.io", "zone", "STRING", "a"),
    ]
    .iter()
    .map(|(p, n, t, x)| (p.to_string(), n.to_string(), t.to_string(), x.to_string()))
    .collect();
    assert_eq!(attrs, want, "{v}");
    let v = rm
        .read(
            &format!("{c}/get-node-to-attributes?hostnames=nosuch.example.com"),
            "NodeToAttributesInfo",
        )
        .await;
    assert_eq!(v, json!({"nodeToAttributes": {}}));
    let v = rm
        .read(
            &format!("{c}/get-attributes-to-nodes?attributes=rm.yarn.io%2Fos"),
            "AttributesToNodesInfo",
        )
        .await;
    assert_eq!(
        v,
        json!({"attributesToNodes": {"rm.yarn.io/os": [{"hostname": host, "attributeValue": "linux"}]}})
    );
    let v = rm
        .read(&format!("{c}/get-node-attributes"), "NodeAttributesInfo")
        .await;
    let listed: BTreeSet<String> = v["nodeAttributeInfo"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|a| {
            format!(
                "{}/{}",
                a["prefix"].as_str().unwrap_or(""),
                a["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        listed,
        ["nm.yarn.io/gpu-model", "rm.yarn.io/os", "rm.yarn.io/zone"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    let v = rm.read(&format!("{c}/nodes"), "NodesBody").await;
    let n = &v["nodes"]["node"][0];
    assert!(
        n["nodeAttributesInfo"]["nodeAttributeInfo"]
            .as_array()
            .is_some_and(|l| l.iter().any(|a| a["name"] == "os" && a["value"] == "linux")),
        "{n}"
    );

    // ADD changes a value, REMOVE takes one away.
    rm.ok(
        &map,
        Some(json!({"operation": "ADD", "nodesToAttributes": [{"node": host, "nodeAttributes": [{"name": "os", "value": "bsd"}]}]})),
    )
    .await;
    rm.ok(
        &map,
        Some(json!({"operation": "REMOVE", "nodesToAttributes": [{"node": node, "nodeAttributes": [{"prefix": "rm.yarn.io", "name": "zone"}]}]})),
    )
    .await;
    let v = rm
        .read(
            &format!("{c}/get-attributes-to-nodes"),
            "AttributesToNodesInfo",
        )
        .await;
    assert_eq!(
        v["attributesToNodes"]["rm.yarn.io/os"],
        json!([{"hostname": host, "attributeValue": "bsd"}]),
        "{v}"
    );
    assert!(
        v["attributesToNodes"].get("rm.yarn.io/zone").is_none(),
        "{v}"
    );

    // Refusals: 400, naming the problem, and nothing changes.
    for (body, words) in [
        (
            json!({"operation": "ADD", "nodesToAttributes": [{"node": host, "nodeAttributes": [{"prefix": "nm.yarn.io", "name": "os", "value": "x"}]}]}),
            vec!["nm.yarn.io/os", "prefix"],
        ),
        (
            json!({"operation": "ADD", "nodesToAttributes": [{"node": host, "nodeAttributes": [{"prefix": "other.io", "name": "os", "value": "x"}]}]}),
            vec!["other.io/os", "prefix"],
        ),
        (
            json!({"operation": "ADD", "nodesToAttributes": [{"node": host, "nodeAttributes": [{"name": "os", "type": "INT", "value": "1"}]}]}),
            vec!["INT", "STRING"],
        ),
        (
            json!({"operation": "ADD", "nodesToAttributes": [{"node": host, "nodeAttributes": [{"name": "-os", "value": "1"}]}]}),
            vec!["-os", "invalid"],
        ),
        (
            json!({"operation": "REMOVE", "nodesToAttributes": [{"node": host, "nodeAttributes": [{"name": "zone"}]}]}),
            vec!["zone", "has no attribute"],
        ),
        (
            json!({"operation": "ADD", "failOnUnknownNodes": true, "nodesToAttributes": [{"node": "ghost.example.com", "nodeAttributes": [{"name": "os", "value": "x"}]}]}),
            vec!["ghost.example.com", "not known"],
        ),
        (
            json!({"operation": "MERGE", "nodesToAttributes": []}),
            vec![],
        ),
    ] {
        rm.refused(&map, Some(body), 400, &words).await;
    }
    let v = rm
        .read(
            &format!("{c}/get-attributes-to-nodes"),
            "AttributesToNodesInfo",
        )
        .await;
    assert_eq!(
        v,
        json!({"attributesToNodes": {
            "nm.yarn.io/gpu-model": [{"hostname": host, "attributeValue": "H100"}],
            "rm.yarn.io/os": [{"hostname": host, "attributeValue": "bsd"}]}})
    );

    // An NM may not report central attributes (in a heartbeat; see the report for register).
    let (s, r) = rm
        .post_q(
            "/ws/v1/node-tracker/heartbeat",
            Some(
                json!({"nodeId": node, "responseId": 0, "nodeStatus": {"healthy": true},
                        "nodeAttributes": {"rm.yarn.io/os": "linux"}}),
            ),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert_schema(&r, "NodeHeartbeatResponse");
    assert_eq!(r["areNodeAttributesAcceptedByRM"], false, "{r}");
    assert!(
        r["diagnosticsMessage"]
            .as_str()
            .is_some_and(|d| d.contains("rm.yarn.io/os")),
        "{r}"
    );
    let v = rm
        .read(
            &format!("{c}/get-attributes-to-nodes"),
            "AttributesToNodesInfo",
        )
        .await;
    assert_eq!(
        v["attributesToNodes"]["rm.yarn.io/os"],
        json!([{"hostname": host, "attributeValue": "bsd"}]),
        "a refused report changes nothing: {v}"
    );
    rm.shutdown().await;
}

#[tokio::test]
async fn label_and_attribute_changes_are_admin_only_with_acls() {
    let rm = start_rm(&[
        ("yarn.acl.enable", "true"),
        ("yarn.admin.acl", "admin"),
        (
            "hadoop.user.group.static.mapping.overrides",
            "dr.who=;bob=;admin=",
        ),
    ])
    .await;
    let (node, _launches) = fake_nm().await;
    rm.register(&node, json!({})).await;
    let c = "/ws/v1/cluster";
    let add = json!({"nodeLabelInfo": [{"name": "gpu"}]});
    let mapping = json!({"nodesToAttributes": [{"node": node, "nodeAttributes": [{"name": "os", "value": "linux"}]}]});
    for user in ["", "?user.name=bob"] {
        rm.refused(
            &format!("{c}/add-node-labels{user}"),
            Some(add.clone()),
            403,
            &["Only admins"],
        )
        .await;
        rm.refused(
            &format!("{c}/node-attributes-mapping{user}"),
            Some(mapping.clone()),
            403,
            &["Only admins"],
        )
        .await;
    }
    rm.ok(&format!("{c}/add-node-labels?user.name=admin"), Some(add))
        .await;
    let sep = "&user.name=bob";
    rm.refused(
        &format!("{c}/nodes/{node}/replace-labels?labels=gpu{sep}"),
        None,
        403,
        &["Only admins"],
    )
    .await;
    rm.refused(
        &format!("{c}/remove-node-labels?labels=gpu{sep}"),
        None,
        403,
        &["Only admins"],
    )
    .await;
    rm.refused(
        &format!("{c}/replace-node-to-labels?user.name=bob"),
        Some(json!({"nodeToLabels": [{"nodeId": node, "labels": ["gpu"]}]})),
        403,
        &["Only admins"],
    )
    .await;
    rm.ok(
        &format!("{c}/nodes/{node}/replace-labels?labels=gpu&user.name=admin"),
        None,
    )
    .await;
    rm.ok(
        &format!("{c}/node-attributes-mapping?user.name=admin"),
        Some(mapping),
    )
    .await;
    // Reads are never restricted.
    let v = rm
        .read(&format!("{c}/nodes/{node}/get-labels"), "NodeLabelsInfo")
        .await;
    assert_eq!(names(&v), own(&[("gpu", true)]));
    let v = rm
        .read(
            &format!("{c}/get-node-to-attributes"),
            "NodeToAttributesInfo",
        )
        .await;
    assert_eq!(
        v["nodeToAttributes"]["127.0.0.1"],
        json!([{"prefix": "rm.yarn.io", "name": "os", "type": "STRING", "value": "linux"}]),
        "{v}"
    );
    rm.shutdown().await;
}
