//! The container-token master key as the node-tracker answers carry it (YARN's
//! `containerTokenMasterKey`): wrapped with the cluster secret
//! (`spindle_common::cluster_secret::ClusterSecret::wrap_key`, a fresh random nonce each
//! time), so only a holder of the secret (an authenticated NM) can read it. Without a
//! cluster secret (compatibility mode) it goes as plain hex with `unwrapped: true`, which an
//! NM that has a secret refuses.
//!
//! Must not: send the AM-RM key (it never leaves the RM), or the key at all to a node the
//! RM refused.

use spindle_common::cluster_secret::ClusterSecret;
use spindle_common::records::exception::ExceptionKind;
use spindle_common::records::tracker::MasterKey;
use spindle_common::token::ContainerKey;

use super::ApiError;

/// `key` as an NM receives it.
pub(super) fn for_node(
    secret: Option<&ClusterSecret>,
    key: &ContainerKey,
) -> Result<MasterKey, ApiError> {
    match secret {
        Some(s) => {
            let mut nonce = [0u8; 16];
            getrandom::getrandom(&mut nonce).map_err(|e| {
                ApiError::new(
                    ExceptionKind::Internal,
                    format!(
                        "cannot wrap the container-token master key: the random source failed: {e}"
                    ),
                )
            })?;
            Ok(MasterKey {
                key_id: key.id(),
                wrapped_key: Some(s.wrap_key(key.id(), key.bytes(), nonce)),
                bytes: None,
                unwrapped: false,
            })
        }
        None => Ok(MasterKey {
            key_id: key.id(),
            wrapped_key: None,
            bytes: Some(hex::encode(key.bytes())),
            unwrapped: true,
        }),
    }
}

/// The key a heartbeat answer carries: the newest one when the node's last known key is
/// another (or it named none).
pub(super) fn if_changed(
    secret: Option<&ClusterSecret>,
    last_known: Option<&MasterKey>,
    newest: &ContainerKey,
) -> Result<Option<MasterKey>, ApiError> {
    match last_known {
        Some(k) if k.key_id == newest.id() => Ok(None),
        _ => for_node(secret, newest).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_with_the_secret_and_only_then() {
        let s = ClusterSecret::from_bytes(&[3; 32]).unwrap();
        let k = ContainerKey::generate(41).unwrap();
        let m = for_node(Some(&s), &k).unwrap();
        assert_eq!(m.key_id, 41);
        assert!(m.bytes.is_none() && !m.unwrapped);
        let w = m.wrapped_key.expect("wrapped");
        assert_ne!(w.ciphertext, hex::encode(k.bytes()));
        assert_eq!(s.unwrap_key(&w).unwrap(), k.bytes());
        // Two answers never share a nonce.
        let again = for_node(Some(&s), &k).unwrap().wrapped_key.unwrap();
        assert_ne!(again.nonce, w.nonce);
        let plain = for_node(None, &k).unwrap();
        assert!(plain.unwrapped && plain.wrapped_key.is_none());
        assert_eq!(
            plain.bytes.as_deref(),
            Some(hex::encode(k.bytes()).as_str())
        );
        // Sent only when the node's last known key is another one.
        assert!(if_changed(Some(&s), Some(&MasterKey::id_only(41)), &k)
            .unwrap()
            .is_none());
        assert!(if_changed(Some(&s), Some(&MasterKey::id_only(40)), &k)
            .unwrap()
            .is_some());
        assert!(if_changed(Some(&s), None, &k).unwrap().is_some());
    }
}
