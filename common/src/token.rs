//! RM-signed tokens: the container token an NM checks before it starts a container, and the
//! AM-RM token an AM presents on every ApplicationMasterProtocol call.
//!
//! A token is `base64url(identifier) "." hex(HMAC-SHA256(secret, identifier))`. The RM keeps
//! the secret in its state store so tokens stay valid across an RM restart, and hands it to
//! each NM at registration.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::ids::{ApplicationAttemptId, ContainerId, NodeId};
use crate::records::resource::ResourceInfo;
use crate::resource::Resource;

type HmacSha256 = Hmac<Sha256>;

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
}

/// The HMAC key shared by the RM and its NMs.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSecret(Vec<u8>);

impl std::fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSecret(..)")
    }
}

impl TokenSecret {
    /// 32 bytes from the operating system's random source.
    pub fn generate() -> Result<Self, TokenError> {
        let mut buf = vec![0u8; 32];
        getrandom::getrandom(&mut buf).map_err(|_| TokenError::BadSecret)?;
        Ok(Self(buf))
    }
    pub fn from_hex(s: &str) -> Result<Self, TokenError> {
        let b = hex::decode(s.trim()).map_err(|_| TokenError::BadSecret)?;
        if b.len() < 16 {
            return Err(TokenError::BadSecret);
        }
        Ok(Self(b))
    }
    pub fn to_hex(&self) -> String {
        hex::encode(&self.0)
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC accepts keys of any length, so this cannot fail.
        <HmacSha256 as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length")
    }

    fn seal(&self, payload: &[u8]) -> String {
        let mut m = self.mac();
        m.update(payload);
        let sig = hex::encode(m.finalize().into_bytes());
        format!("{}.{}", URL_SAFE_NO_PAD.encode(payload), sig)
    }

    fn open(&self, token: &str) -> Result<Vec<u8>, TokenError> {
        let (body, sig) = token
            .trim()
            .split_once('.')
            .ok_or_else(|| TokenError::Malformed("missing '.'".into()))?;
        let payload = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|e| TokenError::Malformed(e.to_string()))?;
        let sig = hex::decode(sig).map_err(|e| TokenError::Malformed(e.to_string()))?;
        let mut m = self.mac();
        m.update(&payload);
        m.verify_slice(&sig).map_err(|_| TokenError::BadSignature)?;
        Ok(payload)
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
            resource: ResourceInfo::from(resource),
            expiry_time_ms,
            rm_identifier,
            is_am,
            version: 0,
        }
    }
}

pub fn issue_container_token(secret: &TokenSecret, id: &ContainerTokenIdentifier) -> String {
    // Serializing a struct of strings and integers cannot fail.
    let payload = serde_json::to_vec(id).expect("token identifier serializes");
    secret.seal(&payload)
}

/// Checks the signature and the expiry; the caller checks that the node id is its own.
pub fn verify_container_token(
    secret: &TokenSecret,
    token: &str,
    now_ms: u64,
) -> Result<ContainerTokenIdentifier, TokenError> {
    let payload = secret.open(token)?;
    let id: ContainerTokenIdentifier =
        serde_json::from_slice(&payload).map_err(|e| TokenError::Malformed(e.to_string()))?;
    if id.expiry_time_ms < now_ms {
        return Err(TokenError::Expired {
            expiry_ms: id.expiry_time_ms,
            now_ms,
        });
    }
    Ok(id)
}

pub fn issue_amrm_token(secret: &TokenSecret, attempt: &ApplicationAttemptId) -> String {
    secret.seal(attempt.to_string().as_bytes())
}

pub fn verify_amrm_token(
    secret: &TokenSecret,
    token: &str,
) -> Result<ApplicationAttemptId, TokenError> {
    let payload = secret.open(token)?;
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
        }
    }

    #[test]
    fn container_tokens_verify_and_reject_tampering() {
        let s = TokenSecret::generate().unwrap();
        let t = issue_container_token(&s, &ident(100));
        assert_eq!(verify_container_token(&s, &t, 50).unwrap(), ident(100));
        assert!(matches!(
            verify_container_token(&s, &t, 101),
            Err(TokenError::Expired { .. })
        ));
        let other = TokenSecret::generate().unwrap();
        assert_eq!(
            verify_container_token(&other, &t, 50),
            Err(TokenError::BadSignature)
        );
        // Swap in another identifier under the same signature.
        let forged = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&ident(1 << 40)).unwrap()),
            t.split_once('.').unwrap().1
        );
        assert_eq!(
            verify_container_token(&s, &forged, 50),
            Err(TokenError::BadSignature)
        );
        assert!(matches!(
            verify_container_token(&s, "garbage", 0),
            Err(TokenError::Malformed(_))
        ));
    }

    #[test]
    fn amrm_tokens_round_trip() {
        let s = TokenSecret::generate().unwrap();
        let att = ApplicationAttemptId::new(ApplicationId::new(7, 3), 2);
        let t = issue_amrm_token(&s, &att);
        assert_eq!(verify_amrm_token(&s, &t).unwrap(), att);
        let s2 = TokenSecret::from_hex(&s.to_hex()).unwrap();
        assert_eq!(verify_amrm_token(&s2, &t).unwrap(), att);
        assert!(TokenSecret::from_hex("abc").is_err());
    }
}
