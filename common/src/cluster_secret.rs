//! The cluster secret: the key NodeManagers and the ResourceManager share out of band (a
//! file named by `spindle.cluster.secret-file`, mode `0600` or `0400`, like an ssh key) so
//! the RM knows a node-tracker call (register, heartbeat, unregister) comes from a real
//! NodeManager, and so the RM can hand NMs other keys (the container-token master key)
//! that only NMs can read.
//!
//! Two uses, each domain-separated by a fixed label inside the HMAC input:
//!
//! - **Request signing.** An NM sends every node-tracker call with
//!   `Authorization: SpindleNode node=<node id>, ts=<ms>, nonce=<32 hex>, sig=<64 hex>`,
//!   where `sig` is HMAC-SHA256(secret, `spindle-node-request\n` method `\n` path-and-query
//!   `\n` node `\n` ts `\n` nonce `\n` hex(SHA-256(body))). The RM recomputes it
//!   ([`ClusterSecret::verify`], constant-time), refuses a timestamp more than
//!   [`MAX_CLOCK_SKEW_MS`] from its clock, and remembers nonces for that long
//!   ([`ReplayCache`]) so a captured request cannot be sent again.
//! - **Key wrapping.** [`ClusterSecret::wrap_key`] encrypts a key by XOR with a keystream of
//!   HMAC-SHA256(secret, `spindle-key-wrap` key_id nonce counter) blocks and authenticates
//!   it with HMAC-SHA256(secret, `spindle-key-mac` key_id nonce ciphertext) (encrypt then
//!   MAC); [`ClusterSecret::unwrap_key`] checks the MAC (constant-time) before decrypting.
//!
//! The file holds the hex of at least [`MIN_SECRET_BYTES`] random bytes (surrounding
//! whitespace ignored); loading refuses, each with its own error, a missing file, one that is
//! not a regular file, group or other permission bits, another owner, an empty file, non-hex
//! text and fewer bytes. [`ClusterSecret::generate_file`] writes a new one (`0600`,
//! `O_EXCL`). Nothing here reads
//! a clock or the random source except `generate_file`: callers pass `now_ms` and nonces.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// The fewest random bytes a secret file may hold.
pub const MIN_SECRET_BYTES: usize = 32;
/// How many random bytes [`ClusterSecret::generate_file`] writes.
pub const GENERATED_SECRET_BYTES: usize = 32;
/// The `Authorization` scheme of a signed node-tracker call.
pub const AUTH_SCHEME: &str = "SpindleNode";
/// How far a signed request's timestamp may be from the verifier's clock, either way.
pub const MAX_CLOCK_SKEW_MS: u64 = 5 * 60 * 1000;

const REQUEST_LABEL: &[u8] = b"spindle-node-request\n";
const WRAP_LABEL: &[u8] = b"spindle-key-wrap";
const MAC_LABEL: &[u8] = b"spindle-key-mac";

/// Why a secret file could not be loaded or created. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ClusterSecretError {
    #[error("cluster secret file {path}: no such file (create one with `spindle cluster-secret -generate {path}`)")]
    Missing { path: PathBuf },
    #[error("cluster secret file {path}: cannot read it: {source}")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cluster secret file {path}: not a regular file")]
    NotAFile { path: PathBuf },
    #[error("cluster secret file {path}: mode {mode:04o} lets group or others read or write it; it must be 0600 or 0400 (chmod 600 {path})")]
    Permissions { path: PathBuf, mode: u32 },
    #[error(
        "cluster secret file {path}: owned by uid {owner}, not by this daemon's user (uid {uid})"
    )]
    Owner { path: PathBuf, owner: u32, uid: u32 },
    #[error("cluster secret file {path}: empty")]
    Empty { path: PathBuf },
    #[error("cluster secret file {path}: not hex ({detail})")]
    NotHex { path: PathBuf, detail: String },
    #[error("cluster secret file {path}: {bytes} bytes, at least {MIN_SECRET_BYTES} are needed")]
    TooShort { path: PathBuf, bytes: usize },
    #[error("cluster secret file {path}: already exists, not overwritten")]
    Exists { path: PathBuf },
    #[error("cluster secret file {path}: cannot create it: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cluster secret: the operating system's random source failed: {0}")]
    Random(String),
    #[error("cluster secret: {bytes} bytes given, at least {MIN_SECRET_BYTES} are needed")]
    TooShortBytes { bytes: usize },
}

/// Why a signed node-tracker request, or a wrapped key, was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeAuthError {
    #[error("no Authorization header: node-tracker calls must be signed with the cluster secret ({AUTH_SCHEME} scheme)")]
    Missing,
    #[error("Authorization header is not a {AUTH_SCHEME} signature: {0}")]
    Malformed(String),
    #[error("signature of node {node} does not verify with this cluster's secret")]
    BadSignature { node: String },
    #[error("signature of node {node} is dated {ts_ms}, more than {MAX_CLOCK_SKEW_MS} ms from now ({now_ms}); check the clocks")]
    Skew {
        node: String,
        ts_ms: u64,
        now_ms: u64,
    },
    #[error("signature of node {node} was already used (nonce {nonce}): a replayed request")]
    Replayed { node: String, nonce: String },
    #[error("request signed by node {signed} speaks for node {body}")]
    NodeMismatch { signed: String, body: String },
    #[error("wrapped key {key_id} is malformed: {detail}")]
    WrappedKeyMalformed { key_id: u32, detail: String },
    #[error("wrapped key {key_id} does not verify with this cluster's secret")]
    WrappedKeyBadMac { key_id: u32 },
}

/// A key encrypted and authenticated with the cluster secret (see the module doc), as it
/// travels in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WrappedKey {
    pub key_id: u32,
    /// 16 bytes, hex.
    pub nonce: String,
    /// hex; as long as the key.
    pub ciphertext: String,
    /// HMAC-SHA256, hex.
    pub mac: String,
}

/// A verified signature: who signed, when, with which nonce (for [`ReplayCache`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedRequest {
    pub node_id: String,
    pub ts_ms: u64,
    pub nonce: [u8; 16],
}

/// The shared cluster secret. `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterSecret {
    key: Vec<u8>,
}

impl fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

/// 16 fresh bytes from the operating system's random source: the nonce for
/// [`ClusterSecret::sign`] and [`ClusterSecret::wrap_key`].
pub fn random_nonce() -> Result<[u8; 16], ClusterSecretError> {
    let mut n = [0u8; 16];
    getrandom::getrandom(&mut n).map_err(|e| ClusterSecretError::Random(e.to_string()))?;
    Ok(n)
}

fn current_euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

impl ClusterSecret {
    /// Reads the secret file, refusing one that is missing, not a regular file, readable or
    /// writable by group or others, owned by another user, empty, not hex, or too short.
    pub fn load(path: &Path) -> Result<ClusterSecret, ClusterSecretError> {
        let p = || path.to_path_buf();
        let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ClusterSecretError::Missing { path: p() },
            _ => ClusterSecretError::Unreadable {
                path: p(),
                source: e,
            },
        })?;
        if !meta.is_file() {
            return Err(ClusterSecretError::NotAFile { path: p() });
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(ClusterSecretError::Permissions { path: p(), mode });
        }
        let uid = current_euid();
        if meta.uid() != uid {
            return Err(ClusterSecretError::Owner {
                path: p(),
                owner: meta.uid(),
                uid,
            });
        }
        let text = std::fs::read_to_string(path).map_err(|e| ClusterSecretError::Unreadable {
            path: p(),
            source: e,
        })?;
        let text = text.trim();
        if text.is_empty() {
            return Err(ClusterSecretError::Empty { path: p() });
        }
        let key = hex::decode(text).map_err(|e| ClusterSecretError::NotHex {
            path: p(),
            detail: e.to_string(),
        })?;
        if key.len() < MIN_SECRET_BYTES {
            return Err(ClusterSecretError::TooShort {
                path: p(),
                bytes: key.len(),
            });
        }
        Ok(ClusterSecret { key })
    }

    /// Writes a new secret ([`GENERATED_SECRET_BYTES`] from the operating system's random
    /// source, hex, one line) to `path`, created `0600` with `O_EXCL`: an existing file is
    /// never overwritten.
    pub fn generate_file(path: &Path) -> Result<(), ClusterSecretError> {
        let mut key = [0u8; GENERATED_SECRET_BYTES];
        getrandom::getrandom(&mut key).map_err(|e| ClusterSecretError::Random(e.to_string()))?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => ClusterSecretError::Exists {
                    path: path.to_path_buf(),
                },
                _ => ClusterSecretError::Create {
                    path: path.to_path_buf(),
                    source: e,
                },
            })?;
        let write = f
            .write_all(format!("{}\n", hex::encode(key)).as_bytes())
            .and_then(|()| f.sync_all());
        if let Err(e) = write {
            let _ = std::fs::remove_file(path);
            return Err(ClusterSecretError::Create {
                path: path.to_path_buf(),
                source: e,
            });
        }
        Ok(())
    }

    /// A secret from bytes (tests, or a caller that has its own store).
    pub fn from_bytes(key: &[u8]) -> Result<ClusterSecret, ClusterSecretError> {
        if key.len() < MIN_SECRET_BYTES {
            return Err(ClusterSecretError::TooShortBytes { bytes: key.len() });
        }
        Ok(ClusterSecret { key: key.to_vec() })
    }

    fn mac(&self) -> HmacSha256 {
        <HmacSha256 as Mac>::new_from_slice(&self.key).expect("HMAC takes any key length")
    }

    fn request_mac(
        &self,
        method: &str,
        path_and_query: &str,
        node_id: &str,
        ts_ms: u64,
        nonce_hex: &str,
        body: &[u8],
    ) -> HmacSha256 {
        let mut m = self.mac();
        m.update(REQUEST_LABEL);
        for part in [
            method.to_ascii_uppercase().as_str(),
            path_and_query,
            node_id,
            &ts_ms.to_string(),
            nonce_hex,
        ] {
            m.update(part.as_bytes());
            m.update(b"\n");
        }
        m.update(hex::encode(Sha256::digest(body)).as_bytes());
        m
    }

    /// The `Authorization` header value for a node-tracker request.
    pub fn sign(
        &self,
        method: &str,
        path_and_query: &str,
        node_id: &str,
        body: &[u8],
        now_ms: u64,
        nonce: [u8; 16],
    ) -> String {
        let nonce_hex = hex::encode(nonce);
        let sig = self
            .request_mac(method, path_and_query, node_id, now_ms, &nonce_hex, body)
            .finalize()
            .into_bytes();
        format!(
            "{AUTH_SCHEME} node={node_id}, ts={now_ms}, nonce={nonce_hex}, sig={}",
            hex::encode(sig)
        )
    }

    /// Checks an `Authorization` header made by [`Self::sign`] against the request it came
    /// with; on success returns who signed it (the caller checks that node is the one the
    /// body speaks for, and the nonce against its [`ReplayCache`]).
    pub fn verify(
        &self,
        header: &str,
        method: &str,
        path_and_query: &str,
        body: &[u8],
        now_ms: u64,
    ) -> Result<SignedRequest, NodeAuthError> {
        let parsed = parse_header(header)?;
        let mut nonce = [0u8; 16];
        hex::decode_to_slice(&parsed.nonce, &mut nonce)
            .map_err(|_| NodeAuthError::Malformed("nonce must be 32 hex digits".into()))?;
        let sig = hex::decode(&parsed.sig)
            .map_err(|_| NodeAuthError::Malformed("sig must be hex".into()))?;
        let m = self.request_mac(
            method,
            path_and_query,
            &parsed.node,
            parsed.ts_ms,
            &parsed.nonce,
            body,
        );
        if m.verify_slice(&sig).is_err() {
            return Err(NodeAuthError::BadSignature { node: parsed.node });
        }
        if parsed.ts_ms.abs_diff(now_ms) > MAX_CLOCK_SKEW_MS {
            return Err(NodeAuthError::Skew {
                node: parsed.node,
                ts_ms: parsed.ts_ms,
                now_ms,
            });
        }
        Ok(SignedRequest {
            node_id: parsed.node,
            ts_ms: parsed.ts_ms,
            nonce,
        })
    }

    fn keystream_block(&self, key_id: u32, nonce: &[u8; 16], counter: u32) -> [u8; 32] {
        let mut m = self.mac();
        m.update(WRAP_LABEL);
        m.update(&key_id.to_be_bytes());
        m.update(nonce);
        m.update(&counter.to_be_bytes());
        m.finalize().into_bytes().into()
    }

    fn xor_keystream(&self, key_id: u32, nonce: &[u8; 16], data: &[u8]) -> Vec<u8> {
        data.chunks(32)
            .enumerate()
            .flat_map(|(i, chunk)| {
                let block = self.keystream_block(key_id, nonce, i as u32);
                chunk
                    .iter()
                    .zip(block)
                    .map(|(a, b)| a ^ b)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn wrap_mac(&self, key_id: u32, nonce: &[u8; 16], ciphertext: &[u8]) -> HmacSha256 {
        let mut m = self.mac();
        m.update(MAC_LABEL);
        m.update(&key_id.to_be_bytes());
        m.update(nonce);
        m.update(ciphertext);
        m
    }

    /// Encrypts and authenticates `key` for whoever holds this secret. `nonce` must be
    /// fresh random bytes for every wrap (the caller draws them).
    pub fn wrap_key(&self, key_id: u32, key: &[u8], nonce: [u8; 16]) -> WrappedKey {
        let ciphertext = self.xor_keystream(key_id, &nonce, key);
        let mac = self
            .wrap_mac(key_id, &nonce, &ciphertext)
            .finalize()
            .into_bytes();
        WrappedKey {
            key_id,
            nonce: hex::encode(nonce),
            ciphertext: hex::encode(ciphertext),
            mac: hex::encode(mac),
        }
    }

    /// The key inside `w`, once its MAC verifies with this secret.
    pub fn unwrap_key(&self, w: &WrappedKey) -> Result<Vec<u8>, NodeAuthError> {
        let bad = |detail: &str| NodeAuthError::WrappedKeyMalformed {
            key_id: w.key_id,
            detail: detail.into(),
        };
        let mut nonce = [0u8; 16];
        hex::decode_to_slice(&w.nonce, &mut nonce)
            .map_err(|_| bad("nonce must be 32 hex digits"))?;
        let ciphertext = hex::decode(&w.ciphertext).map_err(|_| bad("ciphertext must be hex"))?;
        let mac = hex::decode(&w.mac).map_err(|_| bad("mac must be hex"))?;
        self.wrap_mac(w.key_id, &nonce, &ciphertext)
            .verify_slice(&mac)
            .map_err(|_| NodeAuthError::WrappedKeyBadMac { key_id: w.key_id })?;
        Ok(self.xor_keystream(w.key_id, &nonce, &ciphertext))
    }
}

struct ParsedHeader {
    node: String,
    ts_ms: u64,
    nonce: String,
    sig: String,
}

fn parse_header(header: &str) -> Result<ParsedHeader, NodeAuthError> {
    let header = header.trim();
    if header.is_empty() {
        return Err(NodeAuthError::Missing);
    }
    let rest = header
        .strip_prefix(AUTH_SCHEME)
        .and_then(|r| r.strip_prefix(' '))
        .ok_or_else(|| NodeAuthError::Malformed(format!("it must start with '{AUTH_SCHEME} '")))?;
    let (mut node, mut ts, mut nonce, mut sig) = (None, None, None, None);
    for field in rest.split(',') {
        let (k, v) = field.trim().split_once('=').ok_or_else(|| {
            NodeAuthError::Malformed(format!("'{}' is not name=value", field.trim()))
        })?;
        let slot = match k {
            "node" => &mut node,
            "ts" => &mut ts,
            "nonce" => &mut nonce,
            "sig" => &mut sig,
            other => return Err(NodeAuthError::Malformed(format!("unknown field '{other}'"))),
        };
        if slot.replace(v.to_string()).is_some() {
            return Err(NodeAuthError::Malformed(format!("field '{k}' given twice")));
        }
    }
    let need = |v: Option<String>, name: &str| {
        v.filter(|s| !s.is_empty())
            .ok_or_else(|| NodeAuthError::Malformed(format!("field '{name}' missing")))
    };
    let node = need(node, "node")?;
    let ts = need(ts, "ts")?;
    let ts_ms = ts
        .parse::<u64>()
        .map_err(|_| NodeAuthError::Malformed(format!("ts '{ts}' is not milliseconds")))?;
    Ok(ParsedHeader {
        node,
        ts_ms,
        nonce: need(nonce, "nonce")?,
        sig: need(sig, "sig")?,
    })
}

/// The nonces of verified requests, kept while their timestamp is within
/// [`MAX_CLOCK_SKEW_MS`] of now, so each signed request is accepted once. Bounded: at
/// `capacity` the oldest-dated entry is dropped first (its own window closes soonest).
#[derive(Debug)]
pub struct ReplayCache {
    capacity: usize,
    by_time: BTreeSet<(u64, [u8; 16])>,
    seen: HashSet<[u8; 16]>,
}

/// Entries [`ReplayCache::default`] keeps at most: five minutes of one heartbeat a second
/// from about 3,000 nodes.
pub const DEFAULT_REPLAY_CACHE_CAPACITY: usize = 1 << 20;

impl Default for ReplayCache {
    fn default() -> Self {
        Self::new(DEFAULT_REPLAY_CACHE_CAPACITY)
    }
}

impl ReplayCache {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            by_time: BTreeSet::new(),
            seen: HashSet::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.seen.len()
    }

    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Records `req`'s nonce; refuses one seen before.
    pub fn check(&mut self, req: &SignedRequest, now_ms: u64) -> Result<(), NodeAuthError> {
        let horizon = now_ms.saturating_sub(MAX_CLOCK_SKEW_MS);
        while let Some(&(ts, nonce)) = self.by_time.first() {
            if ts >= horizon && self.seen.len() < self.capacity {
                break;
            }
            self.by_time.pop_first();
            self.seen.remove(&nonce);
        }
        if !self.seen.insert(req.nonce) {
            return Err(NodeAuthError::Replayed {
                node: req.node_id.clone(),
                nonce: hex::encode(req.nonce),
            });
        }
        self.by_time.insert((req.ts_ms, req.nonce));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(b: u8) -> ClusterSecret {
        ClusterSecret::from_bytes(&[b; 32]).unwrap()
    }

    const NOW: u64 = 1_800_000_000_000;
    const PATH: &str = "/ws/v1/node-tracker/heartbeat";

    #[test]
    fn debug_hides_the_key() {
        let s = ClusterSecret::from_bytes(&[0xab; 32]).unwrap();
        let d = format!("{s:?}");
        assert_eq!(d, "ClusterSecret(..)");
        assert!(!d.contains("ab"));
    }

    #[test]
    fn signed_request_verifies_and_names_its_node() {
        let s = secret(1);
        let h = s.sign("POST", PATH, "h1:8041", b"{}", NOW, [7; 16]);
        assert!(h.starts_with("SpindleNode node=h1:8041, ts="));
        let v = s.verify(&h, "POST", PATH, b"{}", NOW + 1000).unwrap();
        assert_eq!(v.node_id, "h1:8041");
        assert_eq!(v.ts_ms, NOW);
        assert_eq!(v.nonce, [7; 16]);
    }

    #[test]
    fn any_change_to_the_request_breaks_the_signature() {
        let s = secret(1);
        let h = s.sign("POST", PATH, "h1:8041", b"{\"a\":1}", NOW, [7; 16]);
        let bad = |r: Result<SignedRequest, NodeAuthError>| {
            assert!(
                matches!(r, Err(NodeAuthError::BadSignature { .. })),
                "{r:?}"
            )
        };
        bad(s.verify(&h, "POST", PATH, b"{\"a\":2}", NOW));
        bad(s.verify(&h, "PUT", PATH, b"{\"a\":1}", NOW));
        bad(s.verify(
            &h,
            "POST",
            "/ws/v1/node-tracker/unregister",
            b"{\"a\":1}",
            NOW,
        ));
        bad(secret(2).verify(&h, "POST", PATH, b"{\"a\":1}", NOW));
        let other_node = h.replace("node=h1:8041", "node=h2:8041");
        bad(s.verify(&other_node, "POST", PATH, b"{\"a\":1}", NOW));
        let other_ts = h.replace(&format!("ts={NOW}"), &format!("ts={}", NOW + 1));
        bad(s.verify(&other_ts, "POST", PATH, b"{\"a\":1}", NOW));
        let other_nonce = h.replace(&hex::encode([7u8; 16]), &hex::encode([8u8; 16]));
        bad(s.verify(&other_nonce, "POST", PATH, b"{\"a\":1}", NOW));
    }

    #[test]
    fn stale_and_future_timestamps_are_refused() {
        let s = secret(1);
        let h = s.sign("POST", PATH, "n:1", b"", NOW, [1; 16]);
        assert!(s
            .verify(&h, "POST", PATH, b"", NOW + MAX_CLOCK_SKEW_MS)
            .is_ok());
        assert!(matches!(
            s.verify(&h, "POST", PATH, b"", NOW + MAX_CLOCK_SKEW_MS + 1),
            Err(NodeAuthError::Skew { .. })
        ));
        assert!(matches!(
            s.verify(&h, "POST", PATH, b"", NOW - MAX_CLOCK_SKEW_MS - 1),
            Err(NodeAuthError::Skew { .. })
        ));
    }

    #[test]
    fn malformed_headers_are_named() {
        let s = secret(1);
        assert_eq!(
            s.verify("", "POST", PATH, b"", NOW),
            Err(NodeAuthError::Missing)
        );
        for h in [
            "Bearer abc",
            "SpindleNode",
            "SpindleNode node=a",
            "SpindleNode node=a, ts=x, nonce=00, sig=00",
            "SpindleNode node=a, ts=1, nonce=zz, sig=00",
            "SpindleNode node=a, ts=1, nonce=00000000000000000000000000000000, sig=zz",
            "SpindleNode node=a, node=b, ts=1, nonce=0, sig=0",
            "SpindleNode node=a, ts=1, nonce=0, sig=0, extra=1",
            "SpindleNode garbage",
        ] {
            assert!(
                matches!(
                    s.verify(h, "POST", PATH, b"", NOW),
                    Err(NodeAuthError::Malformed(_))
                ),
                "{h}"
            );
        }
    }

    #[test]
    fn replay_cache_refuses_a_nonce_twice_and_forgets_old_ones() {
        let mut c = ReplayCache::new(10);
        let req = |ts, n| SignedRequest {
            node_id: "n:1".into(),
            ts_ms: ts,
            nonce: [n; 16],
        };
        c.check(&req(NOW, 1), NOW).unwrap();
        assert!(matches!(
            c.check(&req(NOW, 1), NOW + 1),
            Err(NodeAuthError::Replayed { .. })
        ));
        c.check(&req(NOW, 2), NOW).unwrap();
        // Past the window the entries go (a request that old fails the skew check anyway).
        c.check(
            &req(NOW + MAX_CLOCK_SKEW_MS + 10, 3),
            NOW + MAX_CLOCK_SKEW_MS + 10,
        )
        .unwrap();
        assert_eq!(c.len(), 1);
        // Bounded: the oldest-dated entry makes room.
        for n in 10..30u8 {
            c.check(
                &req(NOW + MAX_CLOCK_SKEW_MS + u64::from(n), n),
                NOW + MAX_CLOCK_SKEW_MS + 30,
            )
            .unwrap();
        }
        assert_eq!(c.len(), 10);
    }

    #[test]
    fn wrapped_key_round_trips() {
        let s = secret(3);
        for len in [0, 1, 31, 32, 33, 64, 100] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let w = s.wrap_key(9, &key, [5; 16]);
            assert_eq!(w.key_id, 9);
            assert_eq!(w.ciphertext.len(), 2 * len);
            if len > 0 {
                assert_ne!(w.ciphertext, hex::encode(&key));
            }
            assert_eq!(s.unwrap_key(&w).unwrap(), key);
        }
        let json = serde_json::to_value(s.wrap_key(1, b"k", [0; 16])).unwrap();
        assert!(json.get("keyId").is_some(), "{json}");
        assert!(json.get("ciphertext").is_some(), "{json}");
    }

    #[test]
    fn tampered_or_foreign_wrapped_keys_are_refused() {
        let s = secret(3);
        let w = s.wrap_key(9, &[0x42; 32], [5; 16]);
        let flip = |h: &str| {
            let mut b = hex::decode(h).unwrap();
            b[0] ^= 1;
            hex::encode(b)
        };
        let bad_mac = |w: WrappedKey| {
            assert_eq!(
                s.unwrap_key(&w),
                Err(NodeAuthError::WrappedKeyBadMac { key_id: w.key_id })
            )
        };
        bad_mac(WrappedKey {
            ciphertext: flip(&w.ciphertext),
            ..w.clone()
        });
        bad_mac(WrappedKey {
            nonce: flip(&w.nonce),
            ..w.clone()
        });
        bad_mac(WrappedKey {
            mac: flip(&w.mac),
            ..w.clone()
        });
        bad_mac(WrappedKey {
            key_id: 10,
            ..w.clone()
        });
        assert!(matches!(
            secret(4).unwrap_key(&w),
            Err(NodeAuthError::WrappedKeyBadMac { .. })
        ));
        assert!(matches!(
            s.unwrap_key(&WrappedKey {
                nonce: "xyz".into(),
                ..w.clone()
            }),
            Err(NodeAuthError::WrappedKeyMalformed { .. })
        ));
        // Different nonces give different ciphertexts of the same key.
        assert_ne!(s.wrap_key(9, &[0x42; 32], [6; 16]).ciphertext, w.ciphertext);
    }

    fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn generated_file_loads_and_is_never_overwritten() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("secret");
        ClusterSecret::generate_file(&p).unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let before = std::fs::read(&p).unwrap();
        assert_eq!(before.len(), 2 * GENERATED_SECRET_BYTES + 1);
        let s = ClusterSecret::load(&p).unwrap();
        assert!(matches!(
            ClusterSecret::generate_file(&p),
            Err(ClusterSecretError::Exists { .. })
        ));
        assert_eq!(std::fs::read(&p).unwrap(), before);
        // Two generated secrets differ.
        let q = dir.path().join("other");
        ClusterSecret::generate_file(&q).unwrap();
        let t = ClusterSecret::load(&q).unwrap();
        assert_ne!(s.key, t.key);
    }

    #[test]
    fn bad_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let good = hex::encode([9u8; 32]);
        assert!(ClusterSecret::load(&write(d, "ok", &format!("  {good}\n"), 0o600)).is_ok());
        assert!(ClusterSecret::load(&write(d, "ro", &good, 0o400)).is_ok());
        let err = |p: PathBuf| ClusterSecret::load(&p).unwrap_err();
        assert!(matches!(
            err(d.join("absent")),
            ClusterSecretError::Missing { .. }
        ));
        assert!(matches!(
            err(d.to_path_buf()),
            ClusterSecretError::NotAFile { .. }
        ));
        for mode in [0o640, 0o604, 0o660, 0o644, 0o602, 0o620] {
            match err(write(d, &format!("m{mode:o}"), &good, mode)) {
                ClusterSecretError::Permissions { mode: m, .. } => assert_eq!(m, mode),
                other => panic!("{mode:o}: {other:?}"),
            }
        }
        assert!(matches!(
            err(write(d, "empty", " \n", 0o600)),
            ClusterSecretError::Empty { .. }
        ));
        assert!(matches!(
            err(write(d, "nothex", &"zz".repeat(32), 0o600)),
            ClusterSecretError::NotHex { .. }
        ));
        assert!(matches!(
            err(write(d, "short", &hex::encode([1u8; 31]), 0o600)),
            ClusterSecretError::TooShort { bytes: 31, .. }
        ));
        let msg = err(write(d, "loose", &good, 0o644)).to_string();
        assert!(msg.contains("loose") && msg.contains("0644"), "{msg}");
    }

    #[test]
    fn a_file_of_another_user_is_refused() {
        // Only root can give a file away: as root, chown one to `nobody` (65534).
        if spindle_test_support::require::root(
            "a_file_of_another_user_is_refused",
            "only root can give a file to another user",
        )
        .is_none()
        {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "theirs", &hex::encode([9u8; 32]), 0o600);
        nix::unistd::chown(&p, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        assert!(matches!(
            ClusterSecret::load(&p),
            Err(ClusterSecretError::Owner { owner: 65534, .. })
        ));
    }

    #[test]
    fn from_bytes_refuses_short_keys() {
        assert!(matches!(
            ClusterSecret::from_bytes(&[0; 16]),
            Err(ClusterSecretError::TooShortBytes { bytes: 16 })
        ));
    }
}
