//! RM-signed tokens, with one key for each kind, as Hadoop YARN keeps them apart:
//!
//! - The **AM-RM token** an AM presents on every ApplicationMasterProtocol call is signed with
//!   the [`AmRmKey`]. That key never leaves the RM: the RM keeps it in its state store (meta
//!   key `token-secret`) so that AM-RM tokens survive an RM restart, and sends it to nobody.
//! - The **container token** an NM checks before it starts a container is signed with a
//!   [`ContainerKey`], YARN's container-token master key: random, with a key id
//!   (`masterKeyId` in [`ContainerTokenIdentifier`]), generated at every RM start and rolled
//!   every `yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs`. The RM
//!   shares it with authenticated NMs only (wrapped with the cluster secret); an NM keeps the
//!   current and the previous key ([`ContainerKeys`]) and checks a token with the one whose
//!   id it names.
//!
//! A token is `base64url(identifier) "." hex(HMAC-SHA256(key, kind prefix || identifier))`.
//! The MAC input starts with a prefix naming the token's kind, so a MAC of one kind never
//! verifies as the other even under the same bytes; the key types keep the two apart at
//! compile time. Nothing here does I/O (the random source is the caller's business: the
//! `generate` constructors are for the daemons' edges, never the RM core).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ids::{ApplicationAttemptId, ContainerId, NodeId};
use crate::records::resource::ResourceInfo;
use crate::resource::Resource;

type HmacSha256 = Hmac<Sha256>;

/// The MAC input prefix of AM-RM tokens.
const AMRM_DOMAIN: &[u8] = b"spindle.amrm-token.v1\0";
/// The MAC input prefix of container tokens.
const CONTAINER_DOMAIN: &[u8] = b"spindle.container-token.v1\0";
/// Length of a generated key.
pub const KEY_LEN: usize = 32;
/// The shortest key accepted from hex or from the wire.
pub const MIN_KEY_LEN: usize = 16;

/// YARN's `MasterKey.keyId`.
pub type MasterKeyId = u32;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("token is malformed: {0}")]
    Malformed(String),
    #[error("token signature does not verify")]
    BadSignature,
    #[error("token expired at {expiry_ms} (now {now_ms})")]
    Expired { expiry_ms: u64, now_ms: u64 },
    #[error("secret is not valid hex of at least 16 bytes")]
    BadSecret,
    /// The token names a container-token master key this side does not hold (rolled out
    /// more than one period ago, or never issued by this cluster's RM).
    #[error("token names container-token master key {key_id}, which is not held (held: {held})")]
    UnknownMasterKey { key_id: MasterKeyId, held: String },
    /// No container-token master key was received yet (the NM has not registered).
    #[error("no container-token master key yet: the NodeManager has not registered with the ResourceManager")]
    NoMasterKey,
    /// The operating system's random source failed.
    #[error("the operating system's random source failed")]
    Random,
}

fn random_bytes() -> Result<Vec<u8>, TokenError> {
    let mut buf = vec![0u8; KEY_LEN];
    getrandom::getrandom(&mut buf).map_err(|_| TokenError::Random)?;
    Ok(buf)
}

fn mac(key: &[u8], domain: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(domain);
    m
}

fn seal(key: &[u8], domain: &[u8], payload: &[u8]) -> String {
    seal_keyed(mac(key, domain), payload)
}

/// `base64url(payload) "." hex(MAC)` with a MAC already keyed and fed its domain, written
/// into one string sized up front.
fn seal_keyed(mut m: HmacSha256, payload: &[u8]) -> String {
    m.update(payload);
    let sig = m.finalize().into_bytes();
    let mut out = String::with_capacity(payload.len().div_ceil(3) * 4 + 1 + sig.len() * 2);
    URL_SAFE_NO_PAD.encode_string(payload, &mut out);
    out.push('.');
    let mut hexed = [0u8; 64];
    if hex::encode_to_slice(sig, &mut hexed).is_ok() {
        out.push_str(std::str::from_utf8(&hexed).unwrap_or_default());
    }
    out
}

/// Splits a token into its payload and signature without checking anything.
fn split(token: &str) -> Result<(Vec<u8>, Vec<u8>), TokenError> {
    let (body, sig) = token
        .trim()
        .split_once('.')
        .ok_or_else(|| TokenError::Malformed("missing '.'".into()))?;
    let payload = URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|e| TokenError::Malformed(e.to_string()))?;
    let sig = hex::decode(sig).map_err(|e| TokenError::Malformed(e.to_string()))?;
    Ok((payload, sig))
}

fn check(key: &[u8], domain: &[u8], payload: &[u8], sig: &[u8]) -> Result<(), TokenError> {
    let mut m = mac(key, domain);
    m.update(payload);
    m.verify_slice(sig).map_err(|_| TokenError::BadSignature)
}

/// The AM-RM master key: signs AM-RM tokens, stays in the RM (its state store keeps it as
/// `token-secret`). Never sent to an NM or anyone else.
#[derive(Clone, PartialEq, Eq)]
pub struct AmRmKey(Vec<u8>);

/// The state store's name for the AM-RM master key.
pub type TokenSecret = AmRmKey;

impl std::fmt::Debug for AmRmKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AmRmKey(..)")
    }
}

impl AmRmKey {
    /// 32 bytes from the operating system's random source.
    pub fn generate() -> Result<Self, TokenError> {
        random_bytes().map(Self).map_err(|_| TokenError::BadSecret)
    }
    pub fn from_hex(s: &str) -> Result<Self, TokenError> {
        let b = hex::decode(s.trim()).map_err(|_| TokenError::BadSecret)?;
        if b.len() < MIN_KEY_LEN {
            return Err(TokenError::BadSecret);
        }
        Ok(Self(b))
    }
    /// For the state store only.
    pub fn to_hex(&self) -> String {
        hex::encode(&self.0)
    }
}

/// A container-token master key (YARN's `MasterKey`: `keyId` and the key bytes). The RM
/// generates one at start and at every roll; NMs receive it wrapped with the cluster secret.
#[derive(Clone)]
pub struct ContainerKey {
    id: MasterKeyId,
    bytes: Vec<u8>,
    /// The MAC keyed with `bytes` and fed the container-token prefix: each signature starts
    /// from a copy of it instead of hashing the key and the prefix again.
    keyed: HmacSha256,
}

impl PartialEq for ContainerKey {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.bytes == other.bytes
    }
}

impl Eq for ContainerKey {}

impl std::fmt::Debug for ContainerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ContainerKey({}, ..)", self.id)
    }
}

impl ContainerKey {
    /// A fresh key with id `id`, 32 bytes from the operating system's random source.
    pub fn generate(id: MasterKeyId) -> Result<Self, TokenError> {
        Ok(Self::keyed(id, random_bytes()?))
    }

    fn keyed(id: MasterKeyId, bytes: Vec<u8>) -> Self {
        let keyed = mac(&bytes, CONTAINER_DOMAIN);
        Self { id, bytes, keyed }
    }

    /// A fresh random key id, for the first key of an RM's life (YARN starts its serial
    /// number at a random int, so the keys of two RM lives never share an id).
    pub fn random_id() -> Result<MasterKeyId, TokenError> {
        let mut b = [0u8; 4];
        getrandom::getrandom(&mut b).map_err(|_| TokenError::Random)?;
        Ok(u32::from_be_bytes(b))
    }

    /// A key received from the RM (unwrapped); at least 16 bytes.
    pub fn from_bytes(id: MasterKeyId, bytes: Vec<u8>) -> Result<Self, TokenError> {
        if bytes.len() < MIN_KEY_LEN {
            return Err(TokenError::BadSecret);
        }
        Ok(Self::keyed(id, bytes))
    }

    /// A key derived from `master` for `(context, id)` with HMAC-SHA256 (a pseudo-random
    /// function: the result reveals nothing of `master`). For an RM core built without a
    /// key from the daemon (tests, the simulator); the daemon installs random ones.
    pub fn derive(master: &AmRmKey, context: u64, id: MasterKeyId) -> Self {
        let mut m = mac(&master.0, b"spindle.container-key-derivation.v1\0");
        m.update(&context.to_be_bytes());
        m.update(&id.to_be_bytes());
        Self::keyed(id, m.finalize().into_bytes().to_vec())
    }

    pub fn id(&self) -> MasterKeyId {
        self.id
    }

    /// The key bytes, to wrap for an NM. Anyone who holds them can sign container tokens.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// The container-token master keys a verifier holds: the current one and the one before it
/// (YARN's `currentMasterKey` and `previousMasterKey`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerKeys {
    current: Option<ContainerKey>,
    previous: Option<ContainerKey>,
}

impl ContainerKeys {
    pub fn new(current: ContainerKey) -> Self {
        Self {
            current: Some(current),
            previous: None,
        }
    }

    /// Takes a key from the RM: a new id becomes current and the current one previous; the
    /// id already current changes nothing. Returns whether anything changed.
    pub fn install(&mut self, key: ContainerKey) -> bool {
        match &self.current {
            Some(c) if c.id == key.id => false,
            _ => {
                self.previous = self.current.take();
                self.current = Some(key);
                true
            }
        }
    }

    pub fn current(&self) -> Option<&ContainerKey> {
        self.current.as_ref()
    }

    pub fn previous(&self) -> Option<&ContainerKey> {
        self.previous.as_ref()
    }

    /// The held key with id `id`.
    pub fn get(&self, id: MasterKeyId) -> Option<&ContainerKey> {
        [self.current.as_ref(), self.previous.as_ref()]
            .into_iter()
            .flatten()
            .find(|k| k.id == id)
    }

    fn held(&self) -> String {
        let ids: Vec<String> = [self.current.as_ref(), self.previous.as_ref()]
            .into_iter()
            .flatten()
            .map(|k| k.id.to_string())
            .collect();
        if ids.is_empty() {
            "none".into()
        } else {
            ids.join(", ")
        }
    }
}

/// What a container token grants, YARN's `ContainerTokenIdentifier`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerTokenIdentifier {
    pub container_id: ContainerId,
    pub node_id: NodeId,
    pub app_submitter: String,
    pub resource: ResourceInfo,
    pub expiry_time_ms: u64,
    pub rm_identifier: u64,
    /// Whether this is the application's AM container.
    #[serde(default)]
    pub is_am: bool,
    /// The container's version (YARN's): bumped by every resource update, so an NM applies
    /// an update only once and never an older one.
    #[serde(default)]
    pub version: i32,
    /// YARN's `masterKeyId`: the id of the container-token master key that signed the token
    /// (set by [`issue_container_token`]).
    #[serde(default)]
    pub master_key_id: MasterKeyId,
}

impl ContainerTokenIdentifier {
    /// The identifier of a container `resource` large, allocated until `expiry_time_ms`.
    pub fn new(
        container_id: ContainerId,
        node_id: NodeId,
        app_submitter: String,
        resource: &Resource,
        expiry_time_ms: u64,
        rm_identifier: u64,
        is_am: bool,
    ) -> Self {
        Self {
            container_id,
            node_id,
            app_submitter,
            resource: ResourceInfo::compact(resource),
            expiry_time_ms,
            rm_identifier,
            is_am,
            version: 0,
            master_key_id: 0,
        }
    }
}

/// Signs `id` with `key`; the token's `masterKeyId` is `key`'s id whatever `id` said.
pub fn issue_container_token(key: &ContainerKey, id: &ContainerTokenIdentifier) -> String {
    issue_container_token_owned(key, id.clone())
}

/// Bytes a container token's identifier is written into at first (most fit).
const TOKEN_PAYLOAD_CAPACITY: usize = 512;

/// [`issue_container_token`] for an identifier the caller gives up (no copy of it).
pub fn issue_container_token_owned(key: &ContainerKey, mut id: ContainerTokenIdentifier) -> String {
    id.master_key_id = key.id;
    // Serializing a struct of strings and integers cannot fail. Sized up front: an
    // identifier is a few hundred bytes, and growing the buffer would copy it each time.
    let mut payload = Vec::with_capacity(TOKEN_PAYLOAD_CAPACITY);
    serde_json::to_writer(&mut payload, &id).expect("token identifier serializes");
    seal_keyed(key.keyed.clone(), &payload)
}

/// The identifier a container token claims, NOT checked: for naming what a call is about
/// before the token is verified. Never trust it for anything else.
pub fn unverified_container_identifier(
    token: &str,
) -> Result<ContainerTokenIdentifier, TokenError> {
    let (payload, _) = split(token)?;
    serde_json::from_slice(&payload).map_err(|e| TokenError::Malformed(e.to_string()))
}

/// Checks the signature with the held key the token names, not the expiry: the identifier
/// is authentic. What a stop needs (an expired token still proves the application).
pub fn open_container_token(
    keys: &ContainerKeys,
    token: &str,
) -> Result<ContainerTokenIdentifier, TokenError> {
    let (payload, sig) = split(token)?;
    let id: ContainerTokenIdentifier =
        serde_json::from_slice(&payload).map_err(|e| TokenError::Malformed(e.to_string()))?;
    if keys.current.is_none() {
        return Err(TokenError::NoMasterKey);
    }
    let key = keys
        .get(id.master_key_id)
        .ok_or_else(|| TokenError::UnknownMasterKey {
            key_id: id.master_key_id,
            held: keys.held(),
        })?;
    let mut m = key.keyed.clone();
    m.update(&payload);
    m.verify_slice(&sig).map_err(|_| TokenError::BadSignature)?;
    Ok(id)
}

/// Checks the signature (with the held key the token names) and the expiry; the caller
/// checks that the node id is its own.
pub fn verify_container_token(
    keys: &ContainerKeys,
    token: &str,
    now_ms: u64,
) -> Result<ContainerTokenIdentifier, TokenError> {
    let id = open_container_token(keys, token)?;
    if id.expiry_time_ms < now_ms {
        return Err(TokenError::Expired {
            expiry_ms: id.expiry_time_ms,
            now_ms,
        });
    }
    Ok(id)
}

/// SHA-256 of a token's text (trimmed): how an NM remembers the tokens it verified at a
/// container's start without keeping them.
pub fn token_digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.trim().as_bytes()).into()
}

pub fn issue_amrm_token(key: &AmRmKey, attempt: &ApplicationAttemptId) -> String {
    seal(&key.0, AMRM_DOMAIN, attempt.to_string().as_bytes())
}

pub fn verify_amrm_token(key: &AmRmKey, token: &str) -> Result<ApplicationAttemptId, TokenError> {
    let (payload, sig) = split(token)?;
    check(&key.0, AMRM_DOMAIN, &payload, &sig)?;
    let s = String::from_utf8(payload).map_err(|e| TokenError::Malformed(e.to_string()))?;
    s.parse()
        .map_err(|e: crate::ids::IdParseError| TokenError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ApplicationId;

    fn ident(expiry: u64) -> ContainerTokenIdentifier {
        let att = ApplicationAttemptId::new(ApplicationId::new(1, 1), 1);
        ContainerTokenIdentifier {
            container_id: ContainerId::new(att, 0, 1),
            node_id: NodeId::new("h", 1),
            app_submitter: "alice".into(),
            resource: ResourceInfo::default(),
            expiry_time_ms: expiry,
            rm_identifier: 1,
            is_am: true,
            version: 0,
            master_key_id: 0,
        }
    }

    fn key(id: MasterKeyId) -> ContainerKey {
        ContainerKey::generate(id).unwrap()
    }

    #[test]
    fn container_tokens_verify_and_reject_tampering() {
        let k = key(7);
        let keys = ContainerKeys::new(k.clone());
        let t = issue_container_token(&k, &ident(100));
        let mut want = ident(100);
        want.master_key_id = 7;
        assert_eq!(verify_container_token(&keys, &t, 50).unwrap(), want);
        assert!(matches!(
            verify_container_token(&keys, &t, 101),
            Err(TokenError::Expired { .. })
        ));
        // Expiry is not checked by `open`.
        assert_eq!(open_container_token(&keys, &t).unwrap(), want);
        // Another key under the same id does not verify.
        let other = ContainerKeys::new(key(7));
        assert_eq!(
            verify_container_token(&other, &t, 50),
            Err(TokenError::BadSignature)
        );
        // Swap in another identifier under the same signature.
        let mut longer = want.clone();
        longer.expiry_time_ms = 1 << 40;
        let forged = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&longer).unwrap()),
            t.split_once('.').unwrap().1
        );
        assert_eq!(
            verify_container_token(&keys, &forged, 50),
            Err(TokenError::BadSignature)
        );
        assert_eq!(unverified_container_identifier(&forged).unwrap(), longer);
        assert!(matches!(
            verify_container_token(&keys, "garbage", 0),
            Err(TokenError::Malformed(_))
        ));
        assert_eq!(
            verify_container_token(&ContainerKeys::default(), &t, 0),
            Err(TokenError::NoMasterKey)
        );
    }

    #[test]
    fn a_token_is_checked_with_the_key_it_names() {
        let (k1, k2, k3) = (key(1), key(2), key(3));
        let t1 = issue_container_token(&k1, &ident(100));
        let t2 = issue_container_token(&k2, &ident(100));
        let t3 = issue_container_token(&k3, &ident(100));
        let mut keys = ContainerKeys::new(k1.clone());
        assert!(verify_container_token(&keys, &t1, 0).is_ok());
        assert!(matches!(
            verify_container_token(&keys, &t2, 0),
            Err(TokenError::UnknownMasterKey { key_id: 2, .. })
        ));
        // A roll: the new key is current, the old one still accepted.
        assert!(keys.install(k2.clone()));
        assert!(
            !keys.install(k2.clone()),
            "the same id again changes nothing"
        );
        assert!(verify_container_token(&keys, &t1, 0).is_ok());
        assert!(verify_container_token(&keys, &t2, 0).is_ok());
        // A second roll: the key before the previous one is refused.
        assert!(keys.install(k3));
        assert!(verify_container_token(&keys, &t3, 0).is_ok());
        assert!(verify_container_token(&keys, &t2, 0).is_ok());
        match verify_container_token(&keys, &t1, 0) {
            Err(TokenError::UnknownMasterKey { key_id, held }) => {
                assert_eq!(key_id, 1);
                assert_eq!(held, "3, 2");
            }
            other => panic!("{other:?}"),
        }
        // Naming another held key's id does not help a token signed by an old key.
        let mut claim = unverified_container_identifier(&t1).unwrap();
        claim.master_key_id = 2;
        let relabelled = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claim).unwrap()),
            t1.split_once('.').unwrap().1
        );
        assert_eq!(
            verify_container_token(&keys, &relabelled, 0),
            Err(TokenError::BadSignature)
        );
    }

    #[test]
    fn amrm_tokens_round_trip() {
        let s = AmRmKey::generate().unwrap();
        let att = ApplicationAttemptId::new(ApplicationId::new(7, 3), 2);
        let t = issue_amrm_token(&s, &att);
        assert_eq!(verify_amrm_token(&s, &t).unwrap(), att);
        let s2 = AmRmKey::from_hex(&s.to_hex()).unwrap();
        assert_eq!(verify_amrm_token(&s2, &t).unwrap(), att);
        assert!(AmRmKey::from_hex("abc").is_err());
        assert_eq!(
            verify_amrm_token(&AmRmKey::generate().unwrap(), &t),
            Err(TokenError::BadSignature)
        );
    }

    /// The kinds are not interchangeable: with the same key bytes, a MAC made for one kind
    /// does not verify as the other (the domain prefix), and the container key an NM holds
    /// signs nothing the AM-RM check accepts.
    #[test]
    fn token_kinds_are_not_interchangeable() {
        let bytes = vec![9u8; 32];
        let amrm = AmRmKey::from_hex(&hex::encode(&bytes)).unwrap();
        let ck = ContainerKey::from_bytes(5, bytes).unwrap();
        let att = ApplicationAttemptId::new(ApplicationId::new(7, 3), 1);
        // An AM-RM-shaped payload sealed as a container token, under identical key bytes.
        let as_container = seal(ck.bytes(), CONTAINER_DOMAIN, att.to_string().as_bytes());
        assert_eq!(
            verify_amrm_token(&amrm, &as_container),
            Err(TokenError::BadSignature)
        );
        // A container token does not pass as an AM-RM token, nor the other way round.
        let ct = issue_container_token(&ck, &ident(100));
        assert!(verify_amrm_token(&amrm, &ct).is_err());
        let at = issue_amrm_token(&amrm, &att);
        assert!(verify_container_token(&ContainerKeys::new(ck.clone()), &at, 0).is_err());
        // A derived key is neither the master nor the same for another context or id.
        let d = ContainerKey::derive(&amrm, 1, 5);
        assert_ne!(d.bytes(), ck.bytes());
        assert_ne!(d.bytes(), ContainerKey::derive(&amrm, 2, 5).bytes());
        assert_ne!(d.bytes(), ContainerKey::derive(&amrm, 1, 6).bytes());
        assert!(ContainerKey::from_bytes(1, vec![0; 8]).is_err());
    }

    #[test]
    fn digests_name_the_exact_token() {
        let k = key(1);
        let t = issue_container_token(&k, &ident(100));
        assert_eq!(token_digest(&t), token_digest(&format!(" {t}\n")));
        assert_ne!(token_digest(&t), token_digest(&t[1..]));
    }
}
