//! What etcd holds and what was written to it, read by a test through etcd's JSON gateway
//! (`POST /v3/kv/range`, the `/v3/watch` stream from a past revision): the store's current
//! revision, a key, the keys under a prefix, and every put and delete between two
//! revisions with the key, its value and its creation revision. etcd keeps every revision
//! until it is compacted (the test clusters never are), so a test can show what was written
//! after a given moment, and by comparing with the leader key's creation revision (the
//! term, Spindle's fencing token) under which leader.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};
use std::io::BufRead;

/// An etcd member's client URL and a client that reaches it.
pub struct EtcdHistory<'a> {
    pub http: &'a reqwest::blocking::Client,
    /// `http://<ip>:<port>`.
    pub endpoint: String,
}

/// A key and its value as etcd holds them at one revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: String,
    /// The revision that created the key (for the leader key: the term).
    pub create_revision: i64,
    /// The revision of its last write.
    pub mod_revision: i64,
}

/// One write of etcd's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Put(KeyValue),
    /// The key deleted at `revision` (by a client, or by its lease's expiry).
    Delete {
        key: String,
        revision: i64,
    },
}

impl Event {
    pub fn key(&self) -> &str {
        match self {
            Event::Put(kv) => &kv.key,
            Event::Delete { key, .. } => key,
        }
    }

    pub fn revision(&self) -> i64 {
        match self {
            Event::Put(kv) => kv.mod_revision,
            Event::Delete { revision, .. } => *revision,
        }
    }
}

fn b64(s: &[u8]) -> String {
    B64.encode(s)
}

fn text(v: &Value) -> String {
    v.as_str()
        .and_then(|s| B64.decode(s).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// An int64 of the gateway's JSON (a string, or absent for 0).
fn int(v: &Value) -> i64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| v.as_i64())
        .unwrap_or(0)
}

fn key_value(kv: &Value) -> KeyValue {
    KeyValue {
        key: text(&kv["key"]),
        value: text(&kv["value"]),
        create_revision: int(&kv["create_revision"]),
        mod_revision: int(&kv["mod_revision"]),
    }
}

/// The first key after every key starting with `prefix`.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

impl EtcdHistory<'_> {
    fn range(&self, body: Value) -> Result<Value, String> {
        let url = format!("{}/v3/kv/range", self.endpoint);
        let r = self
            .http
            .post(&url)
            .json(&body)
            .send()
            .map_err(|e| format!("{url}: {e}"))?;
        let status = r.status();
        let v: Value = r.json().map_err(|e| format!("{url}: {e}"))?;
        if status.is_success() {
            Ok(v)
        } else {
            Err(format!("{url}: {status}: {v}"))
        }
    }

    /// The store's current revision (a linearizable read: an error without a quorum).
    pub fn revision(&self) -> Result<i64, String> {
        let v =
            self.range(json!({"key": b64(b"\0"), "range_end": b64(b"\0"), "count_only": true}))?;
        Ok(int(&v["header"]["revision"]))
    }

    /// `key` now, None when it does not exist.
    pub fn get(&self, key: &str) -> Result<Option<KeyValue>, String> {
        let v = self.range(json!({"key": b64(key.as_bytes())}))?;
        Ok(v["kvs"].as_array().and_then(|a| a.first()).map(key_value))
    }

    /// Every key under `prefix` now, in key order.
    pub fn under(&self, prefix: &str) -> Result<Vec<KeyValue>, String> {
        let v = self.range(json!({
            "key": b64(prefix.as_bytes()),
            "range_end": b64(&prefix_end(prefix)),
        }))?;
        Ok(v["kvs"]
            .as_array()
            .map(|a| a.iter().map(key_value).collect())
            .unwrap_or_default())
    }

    /// Every put and delete of any key from revision `from` through `to`, oldest first (a
    /// watch from `from`, read until it has passed `to`).
    pub fn events(&self, from: i64, to: i64) -> Result<Vec<Event>, String> {
        if to < from {
            return Ok(vec![]);
        }
        let url = format!("{}/v3/watch", self.endpoint);
        let body = json!({"create_request": {
            "key": b64(b"\0"), "range_end": b64(b"\0"), "start_revision": from.to_string(),
        }});
        let r = self
            .http
            .post(&url)
            .json(&body)
            .send()
            .map_err(|e| format!("{url}: {e}"))?;
        let mut out = vec![];
        for line in std::io::BufReader::new(r).lines() {
            let line = line.map_err(|e| format!("{url}: reading the watch: {e}"))?;
            let v: Value =
                serde_json::from_str(&line).map_err(|e| format!("{url}: {e}: {line}"))?;
            if let Some(e) = v.get("error") {
                return Err(format!("{url}: {e}"));
            }
            for e in v["result"]["events"].as_array().into_iter().flatten() {
                let kv = key_value(&e["kv"]);
                out.push(match e["type"].as_str() {
                    Some("DELETE") => Event::Delete {
                        key: kv.key,
                        revision: kv.mod_revision,
                    },
                    _ => Event::Put(kv),
                });
            }
            if out.last().is_some_and(|e| e.revision() >= to) {
                break;
            }
        }
        out.retain(|e| e.revision() <= to);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_key_values_decode_with_int64_strings_and_absent_zeros() {
        let kv = json!({"key": b64(b"/spindle/x/leader"), "value": b64(b"rm2"),
            "create_revision": "41", "mod_revision": "41"});
        assert_eq!(
            key_value(&kv),
            KeyValue {
                key: "/spindle/x/leader".into(),
                value: "rm2".into(),
                create_revision: 41,
                mod_revision: 41,
            }
        );
        assert_eq!(int(&Value::Null), 0);
        assert_eq!(prefix_end("/a/"), b"/a0".to_vec());
    }
}
