//! Users' bearer tokens for the RM's REST API, in the spirit of Hadoop's RM delegation
//! tokens (`RMDelegationTokenIdentifier`): an identifier naming the owner (the user the token
//! authenticates), the renewer, the issue date, the max date (after which the token is
//! refused) and a sequence number, signed with HMAC-SHA256 under a key only the RM (and the
//! operator who holds the key file) knows.
//!
//! A token is `base64url(identifier JSON) "." base64url(HMAC-SHA256(key, identifier JSON))`.
//! Spindle's tokens are not renewed: the max date is the expiry (YARN's `expiration-time`
//! and `max-validity` are the same instant); a caller asks for a new token instead.
//!
//! The key lives in a file (`hadoop.http.authentication.signature.secret.file`): hex of at
//! least [`MIN_KEY_BYTES`] random bytes, readable by its owner only ([`UserTokenKey::read_file`]
//! refuses anything else, naming what is wrong).
//!
//! Must not: decide who may do what (the RM's ACLs do), or keep state (cancellations are the
//! RM's).

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// YARN's kind of an RM delegation token.
pub const KIND: &str = "RM_DELEGATION_TOKEN";

/// The fewest key bytes a key file may hold (256 bits).
pub const MIN_KEY_BYTES: usize = 32;

/// The longest user name a token may carry (what `?user.name=` accepts too).
pub const MAX_USER_LEN: usize = 256;

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserTokenError {
    #[error("the token is malformed: {0}")]
    Malformed(String),
    #[error("the token's signature does not verify (tampered with, or signed with another key)")]
    BadSignature,
    #[error("the token is of kind {0}, not {KIND}")]
    WrongKind(String),
    #[error("the token expired at {max_date} (ms since the epoch; now {now})")]
    Expired { max_date: u64, now: u64 },
    #[error("the token names no valid owner: {0:?}")]
    BadOwner(String),
}

/// Why the key file was refused (one line each, naming the file).
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("key file {} does not exist (create one with `spindle token -newKey {}`)", path.display(), path.display())]
    Missing { path: PathBuf },
    #[error("key file {}: cannot read it: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("key file {} is readable or writable by others (mode {mode:04o}); run chmod 600 on it", path.display())]
    TooOpen { path: PathBuf, mode: u32 },
    #[error("key file {} is not hex (it must hold hex of random bytes, e.g. `openssl rand -hex 32`)", path.display())]
    NotHex { path: PathBuf },
    #[error("key file {} holds {bytes} bytes; at least {MIN_KEY_BYTES} are needed", path.display())]
    TooShort { path: PathBuf, bytes: usize },
    #[error("key file {}: cannot create it: {source}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot draw random bytes for a key: {0}")]
    Random(String),
}

/// The HMAC key users' tokens are signed with.
#[derive(Clone, PartialEq, Eq)]
pub struct UserTokenKey(Vec<u8>);

impl std::fmt::Debug for UserTokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UserTokenKey(..)")
    }
}

impl UserTokenKey {
    /// A key from raw bytes (tests, and [`Self::read_file`]); at least [`MIN_KEY_BYTES`].
    pub fn from_bytes(bytes: Vec<u8>) -> Option<Self> {
        (bytes.len() >= MIN_KEY_BYTES).then_some(Self(bytes))
    }

    /// Reads a key file: it must exist, be readable and writable by its owner only (no group
    /// or other bits), and hold hex (surrounding white space ignored) of at least
    /// [`MIN_KEY_BYTES`] bytes.
    pub fn read_file(path: &Path) -> Result<Self, KeyFileError> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                KeyFileError::Missing {
                    path: path.to_path_buf(),
                }
            } else {
                KeyFileError::Unreadable {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(KeyFileError::TooOpen {
                path: path.to_path_buf(),
                mode,
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| KeyFileError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
        let bytes = hex::decode(text.trim()).map_err(|_| KeyFileError::NotHex {
            path: path.to_path_buf(),
        })?;
        if bytes.len() < MIN_KEY_BYTES {
            return Err(KeyFileError::TooShort {
                path: path.to_path_buf(),
                bytes: bytes.len(),
            });
        }
        Ok(Self(bytes))
    }

    /// Writes a new key of 32 random bytes to `path`, created `0600`; refuses to overwrite
    /// an existing file.
    pub fn create_file(path: &Path) -> Result<Self, KeyFileError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut bytes = vec![0u8; MIN_KEY_BYTES];
        getrandom::getrandom(&mut bytes).map_err(|e| KeyFileError::Random(e.to_string()))?;
        let create = |source| KeyFileError::Create {
            path: path.to_path_buf(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(create)?;
        f.write_all(format!("{}\n", hex::encode(&bytes)).as_bytes())
            .map_err(create)?;
        Ok(Self(bytes))
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes a key of any length, so this cannot fail.
        <HmacSha256 as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length")
    }

    /// The signed token of `id`.
    pub fn issue(&self, id: &UserTokenIdentifier) -> String {
        // A struct of strings and integers always serializes.
        let payload = serde_json::to_vec(id).expect("token identifier serializes");
        let mut m = self.mac();
        m.update(&payload);
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&payload),
            URL_SAFE_NO_PAD.encode(m.finalize().into_bytes())
        )
    }

    /// The identifier of a token signed with this key, of kind [`KIND`], with a valid owner
    /// and not past its max date at `now` (ms since the epoch).
    pub fn verify(&self, token: &str, now: u64) -> Result<UserTokenIdentifier, UserTokenError> {
        let (body, sig) = split(token)?;
        let payload = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|e| UserTokenError::Malformed(format!("identifier: {e}")))?;
        let sig = URL_SAFE_NO_PAD
            .decode(sig)
            .map_err(|e| UserTokenError::Malformed(format!("signature: {e}")))?;
        let mut m = self.mac();
        m.update(&payload);
        m.verify_slice(&sig)
            .map_err(|_| UserTokenError::BadSignature)?;
        let id: UserTokenIdentifier = serde_json::from_slice(&payload)
            .map_err(|e| UserTokenError::Malformed(format!("identifier: {e}")))?;
        id.check(now)?;
        Ok(id)
    }
}

fn split(token: &str) -> Result<(&str, &str), UserTokenError> {
    token
        .trim()
        .split_once('.')
        .ok_or_else(|| UserTokenError::Malformed("expected IDENTIFIER.SIGNATURE".into()))
}

/// What a token says, unverified: for `spindle token -print` (never to authenticate).
pub fn decode_unverified(token: &str) -> Result<UserTokenIdentifier, UserTokenError> {
    let (body, _) = split(token)?;
    let payload = URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|e| UserTokenError::Malformed(format!("identifier: {e}")))?;
    serde_json::from_slice(&payload)
        .map_err(|e| UserTokenError::Malformed(format!("identifier: {e}")))
}

/// Whether `user` may be a token's owner or renewer: not empty, at most [`MAX_USER_LEN`]
/// bytes, no white space, `/`, `=`, control characters (what `?user.name=` accepts, and what
/// an audit line can carry).
pub fn valid_user(user: &str) -> bool {
    !user.is_empty()
        && user.len() <= MAX_USER_LEN
        && !user
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '/' || c == '=')
}

/// YARN's `RMDelegationTokenIdentifier`: whose token it is and how long it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserTokenIdentifier {
    /// Always [`KIND`].
    pub kind: String,
    /// The user the token authenticates.
    pub owner: String,
    /// Who may cancel it besides its owner.
    pub renewer: String,
    /// When it was issued (ms since the epoch).
    pub issue_date: u64,
    /// When it stops being accepted (ms since the epoch).
    pub max_date: u64,
    /// Random, so tokens minted offline and by the RM never collide: what a cancellation
    /// names.
    pub sequence_number: u64,
}

impl UserTokenIdentifier {
    /// A new identifier for `owner`, valid from `now` for `validity_ms`, with a random
    /// sequence number. `renewer` empty means the owner.
    pub fn new(
        owner: &str,
        renewer: &str,
        now: u64,
        validity_ms: u64,
    ) -> Result<Self, UserTokenError> {
        if !valid_user(owner) {
            return Err(UserTokenError::BadOwner(owner.to_string()));
        }
        let renewer = if renewer.trim().is_empty() {
            owner
        } else {
            renewer.trim()
        };
        if !valid_user(renewer) {
            return Err(UserTokenError::BadOwner(renewer.to_string()));
        }
        let mut seq = [0u8; 8];
        getrandom::getrandom(&mut seq)
            .map_err(|e| UserTokenError::Malformed(format!("no random sequence number: {e}")))?;
        Ok(Self {
            kind: KIND.to_string(),
            owner: owner.to_string(),
            renewer: renewer.to_string(),
            issue_date: now,
            max_date: now.saturating_add(validity_ms),
            // Below 2^53, so it survives a JSON number read as a double.
            sequence_number: u64::from_le_bytes(seq) >> 11,
        })
    }

    fn check(&self, now: u64) -> Result<(), UserTokenError> {
        if self.kind != KIND {
            return Err(UserTokenError::WrongKind(self.kind.clone()));
        }
        if !valid_user(&self.owner) {
            return Err(UserTokenError::BadOwner(self.owner.clone()));
        }
        if self.max_date < now {
            return Err(UserTokenError::Expired {
                max_date: self.max_date,
                now,
            });
        }
        Ok(())
    }
}

/// Parses a validity such as `7d`, `12h`, `30m`, `90s` or a bare number of seconds, to ms.
pub fn parse_validity(s: &str) -> Option<u64> {
    let t = s.trim();
    let (num, unit) = match t.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_lowercase()),
        _ => (t, 's'),
    };
    let n: u64 = num.trim().parse().ok().filter(|n| *n > 0)?;
    let secs = match unit {
        's' => n,
        'm' => n.checked_mul(60)?,
        'h' => n.checked_mul(3600)?,
        'd' => n.checked_mul(86_400)?,
        _ => return None,
    };
    secs.checked_mul(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> UserTokenKey {
        UserTokenKey::from_bytes(vec![b; 32]).unwrap()
    }

    #[test]
    fn a_token_round_trips_and_names_its_owner() {
        let k = key(1);
        let id = UserTokenIdentifier::new("alice", "", 1_000, 60_000).unwrap();
        assert_eq!(id.renewer, "alice");
        assert_eq!(id.max_date, 61_000);
        assert!(id.sequence_number < 1 << 53);
        let t = k.issue(&id);
        let back = k.verify(&t, 2_000).unwrap();
        assert_eq!(back, id);
        assert_eq!(back.owner, "alice");
        assert_eq!(decode_unverified(&t).unwrap(), id);
    }

    #[test]
    fn tampering_another_key_and_expiry_are_refused() {
        let k = key(1);
        let id = UserTokenIdentifier::new("alice", "yarn", 1_000, 60_000).unwrap();
        let t = k.issue(&id);
        // Another key.
        assert_eq!(key(2).verify(&t, 2_000), Err(UserTokenError::BadSignature));
        // The owner changed under the same signature.
        let mut bob = id.clone();
        bob.owner = "bob".into();
        let forged = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&bob).unwrap()),
            t.split_once('.').unwrap().1
        );
        assert_eq!(k.verify(&forged, 2_000), Err(UserTokenError::BadSignature));
        // A later max date under the same signature.
        let mut longer = id.clone();
        longer.max_date = u64::MAX;
        let forged = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&longer).unwrap()),
            t.split_once('.').unwrap().1
        );
        assert_eq!(k.verify(&forged, 2_000), Err(UserTokenError::BadSignature));
        // A flipped signature byte.
        let (body, sig) = t.split_once('.').unwrap();
        let mut raw = URL_SAFE_NO_PAD.decode(sig).unwrap();
        raw[0] ^= 1;
        let flipped = format!("{body}.{}", URL_SAFE_NO_PAD.encode(raw));
        assert_eq!(k.verify(&flipped, 2_000), Err(UserTokenError::BadSignature));
        // Expired.
        assert_eq!(
            k.verify(&t, 61_001),
            Err(UserTokenError::Expired {
                max_date: 61_000,
                now: 61_001
            })
        );
        assert!(k.verify(&t, 61_000).is_ok());
        // Garbage.
        for bad in ["", "abc", "a.b", "!!.!!"] {
            assert!(
                matches!(k.verify(bad, 0), Err(UserTokenError::Malformed(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn owners_and_kinds_are_checked() {
        assert!(UserTokenIdentifier::new("", "", 0, 1).is_err());
        assert!(UserTokenIdentifier::new("a b", "", 0, 1).is_err());
        assert!(UserTokenIdentifier::new("a/b", "", 0, 1).is_err());
        assert!(UserTokenIdentifier::new("alice", "x\ty", 0, 1).is_err());
        let k = key(3);
        let mut id = UserTokenIdentifier::new("alice", "", 0, 1_000).unwrap();
        id.kind = "YARN_AM_RM_TOKEN".into();
        assert_eq!(
            k.verify(&k.issue(&id), 0),
            Err(UserTokenError::WrongKind("YARN_AM_RM_TOKEN".into()))
        );
        let mut id = UserTokenIdentifier::new("alice", "", 0, 1_000).unwrap();
        id.owner = String::new();
        assert!(matches!(
            k.verify(&k.issue(&id), 0),
            Err(UserTokenError::BadOwner(_))
        ));
    }

    #[test]
    fn key_files_must_be_private_hex_and_long_enough() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("key");
        assert!(matches!(
            UserTokenKey::read_file(&p),
            Err(KeyFileError::Missing { .. })
        ));
        let made = UserTokenKey::create_file(&p).unwrap();
        assert_eq!(UserTokenKey::read_file(&p).unwrap(), made);
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(
            UserTokenKey::create_file(&p).is_err(),
            "never overwrites a key"
        );
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = UserTokenKey::read_file(&p).unwrap_err();
        assert!(
            matches!(e, KeyFileError::TooOpen { mode: 0o644, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("chmod 600"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&p, "abcd\n").unwrap();
        assert!(matches!(
            UserTokenKey::read_file(&p),
            Err(KeyFileError::TooShort { bytes: 2, .. })
        ));
        std::fs::write(&p, "not hex at all").unwrap();
        assert!(matches!(
            UserTokenKey::read_file(&p),
            Err(KeyFileError::NotHex { .. })
        ));
    }

    #[test]
    fn validities_read_like_durations() {
        assert_eq!(parse_validity("7d"), Some(7 * 86_400_000));
        assert_eq!(parse_validity("12h"), Some(12 * 3_600_000));
        assert_eq!(parse_validity("30m"), Some(1_800_000));
        assert_eq!(parse_validity("90"), Some(90_000));
        assert_eq!(parse_validity("90s"), Some(90_000));
        for bad in ["", "0", "-1d", "7w", "d", "1.5h"] {
            assert_eq!(parse_validity(bad), None, "{bad}");
        }
    }
}
