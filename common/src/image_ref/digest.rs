//! [`Digest`]: a validated `sha256:<64 lowercase hex>` content address, and [`Hasher`], the
//! running sha256 every blob and layer stream is checked with before it is used.
//!
//! Only sha256 is accepted (what every registry and `umoci`/`skopeo` write); a digest is
//! always 64 hex digits, so its hex is safe as a file name under the cache.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::ReferenceError;

/// A sha256 content digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest {
    hex: String,
}

impl Digest {
    /// The 64 hex digits (the file name of the blob or layer in the cache).
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        let mut h = Hasher::default();
        h.update(bytes);
        h.finish()
    }

    /// From the 64 hex digits alone (a cache file name).
    pub fn from_hex(hex: &str) -> Result<Digest, ReferenceError> {
        if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(Digest { hex: hex.into() })
        } else {
            Err(ReferenceError::BadDigest { digest: hex.into() })
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl FromStr for Digest {
    type Err = ReferenceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            Some(("sha256", hex)) => Digest::from_hex(hex).map_err(|_| ReferenceError::BadDigest {
                digest: s.to_string(),
            }),
            Some((alg, _)) => Err(ReferenceError::UnsupportedDigestAlgorithm {
                algorithm: alg.to_string(),
            }),
            None => Err(ReferenceError::BadDigest {
                digest: s.to_string(),
            }),
        }
    }
}

impl TryFrom<String> for Digest {
    type Error = ReferenceError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.to_string()
    }
}

/// A running sha256.
#[derive(Default)]
pub struct Hasher(Sha256);

impl Hasher {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn finish(self) -> Digest {
        Digest {
            hex: hex::encode(self.0.finalize()),
        }
    }
}

/// A reader that hashes what passes through it (a layer's uncompressed stream, for its
/// diff id).
pub struct HashingReader<R> {
    inner: R,
    hasher: Hasher,
}

impl<R: std::io::Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Hasher::default(),
        }
    }

    /// Reads what is left (a tar's trailing blocks) and returns the digest of everything.
    pub fn finish(mut self) -> std::io::Result<Digest> {
        std::io::copy(&mut self, &mut std::io::sink())?;
        Ok(self.hasher.finish())
    }
}

impl<R: std::io::Read> std::io::Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_sha256() {
        let d: Digest = format!("sha256:{}", "ab".repeat(32)).parse().unwrap();
        assert_eq!(d.hex(), "ab".repeat(32));
        assert_eq!(d.to_string(), format!("sha256:{}", "ab".repeat(32)));
        assert_eq!(
            Digest::of(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
                .parse()
                .unwrap()
        );
    }

    #[test]
    fn refuses_other_algorithms_and_bad_hex() {
        assert!(matches!(
            "sha512:00".parse::<Digest>(),
            Err(ReferenceError::UnsupportedDigestAlgorithm { .. })
        ));
        for bad in [
            "sha256:AB",
            "sha256:../../etc/passwd",
            "sha256",
            &format!("sha256:{}", "AB".repeat(32)),
        ] {
            assert!(
                matches!(bad.parse::<Digest>(), Err(ReferenceError::BadDigest { .. })),
                "{bad}"
            );
        }
    }
}
