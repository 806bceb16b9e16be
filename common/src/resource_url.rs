//! Where a local resource comes from: the `resource` URL of YARN's `LocalResource`, read by
//! one parser for the client that names it (the SDK's shipping) and the NM that fetches it.
//!
//! Three forms:
//! - a local file: `file:///path` or an absolute path (on a file system the NM reads; the
//!   NM decodes the percent-encoding), [`ResourceUrl::Local`];
//! - a blob in the RM's blob store: `spindle-rm:///blobs/sha256:<64 hex>`
//!   ([`rm_blob_url`]), fetched from the RM the NM reports to (never from a host the URL
//!   names), with the application's container token, [`ResourceUrl::Rm`];
//! - an `http://` or `https://` URL (an artifact server, an object store's signed URL),
//!   [`ResourceUrl::Http`]. YARN's `LocalResource` has no digest field: an expected SHA-256
//!   rides in the URL's fragment, `#sha256=<64 hex>` (pip's form), which is never sent to the
//!   server; the `size` field is checked too (`-1`: unknown).
//!
//! Must not: touch the network or the disk.

use crate::image_ref::Digest;

/// The scheme of a blob in the RM's blob store.
pub const RM_SCHEME: &str = "spindle-rm";
/// `spindle-rm:///blobs/` + the digest (`sha256:<hex>`).
const RM_PREFIX: &str = "spindle-rm:///blobs/";
/// The fragment key carrying an expected SHA-256.
const SHA256_FRAGMENT: &str = "sha256=";

/// The RM's REST path of the blob store, for clients (`{digest}` appended).
pub const CLUSTER_BLOBS_PATH: &str = "/ws/v1/cluster/blobs";
/// The RM's REST path NMs download blobs from with a container token (`{digest}` appended).
pub const LOCALIZER_BLOBS_PATH: &str = "/ws/v1/localizer/blobs";

/// A parsed resource URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceUrl {
    /// `file:` or an absolute path: the text as given (the NM decodes it).
    Local(String),
    /// A blob of the RM's blob store.
    Rm(Digest),
    /// An HTTP(S) URL without its fragment, and the SHA-256 the fragment named, if any.
    Http { url: String, sha256: Option<Digest> },
}

/// Why a resource URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceUrlError {
    #[error("resource URL '{url}' names no blob: expected spindle-rm:///blobs/sha256:<64 lowercase hex digits>")]
    BadBlob { url: String },
    #[error(
        "resource URL '{url}': the fragment '#{fragment}' is not sha256=<64 lowercase hex digits>"
    )]
    BadFragment { url: String, fragment: String },
    #[error("resource URL '{url}' has no host")]
    NoHost { url: String },
    #[error("resource URL '{url}' is not supported: expected file://, an absolute path, spindle-rm:///blobs/..., http:// or https://")]
    Unsupported { url: String },
}

/// The resource URL of the blob `digest` in the RM's blob store.
pub fn rm_blob_url(digest: &Digest) -> String {
    format!("{RM_PREFIX}{digest}")
}

/// `url` with `#sha256=<hex>` appended: an HTTP(S) resource checked against `digest`.
pub fn with_sha256(url: &str, digest: &Digest) -> String {
    let base = url.split_once('#').map_or(url, |(b, _)| b);
    format!("{base}#{SHA256_FRAGMENT}{}", digest.hex())
}

impl ResourceUrl {
    pub fn parse(url: &str) -> Result<Self, ResourceUrlError> {
        let lower = url.get(..16).unwrap_or(url).to_ascii_lowercase();
        if url.starts_with('/') || lower.starts_with("file:") {
            return Ok(Self::Local(url.to_string()));
        }
        if let Some(rest) = url.strip_prefix(RM_PREFIX) {
            return rest
                .parse::<Digest>()
                .map(Self::Rm)
                .map_err(|_| ResourceUrlError::BadBlob { url: url.into() });
        }
        if lower.starts_with(&format!("{RM_SCHEME}:")) {
            return Err(ResourceUrlError::BadBlob { url: url.into() });
        }
        let Some(scheme_len) = ["http://", "https://"]
            .iter()
            .find(|s| lower.starts_with(**s))
            .map(|s| s.len())
        else {
            return Err(ResourceUrlError::Unsupported { url: url.into() });
        };
        let (base, fragment) = match url.split_once('#') {
            Some((b, f)) => (b, Some(f)),
            None => (url, None),
        };
        let host = base[scheme_len..].split(['/', '?']).next().unwrap_or("");
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(ResourceUrlError::NoHost { url: url.into() });
        }
        let sha256 = match fragment {
            None | Some("") => None,
            Some(f) => Some(
                f.strip_prefix(SHA256_FRAGMENT)
                    .and_then(|h| Digest::from_hex(h).ok())
                    .ok_or_else(|| ResourceUrlError::BadFragment {
                        url: base.into(),
                        fragment: f.into(),
                    })?,
            ),
        };
        Ok(Self::Http {
            url: base.to_string(),
            sha256,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn each_form_parses_and_blob_urls_round_trip() {
        let d = Digest::from_hex(HEX).unwrap();
        assert_eq!(
            ResourceUrl::parse(&rm_blob_url(&d)).unwrap(),
            ResourceUrl::Rm(d.clone())
        );
        assert_eq!(
            ResourceUrl::parse("file:///a/b").unwrap(),
            ResourceUrl::Local("file:///a/b".into())
        );
        assert_eq!(
            ResourceUrl::parse("/a/b").unwrap(),
            ResourceUrl::Local("/a/b".into())
        );
        let signed = "https://store.example/b/k.tgz?sig=x%2Fy";
        assert_eq!(
            ResourceUrl::parse(&with_sha256(signed, &d)).unwrap(),
            ResourceUrl::Http {
                url: signed.into(),
                sha256: Some(d)
            }
        );
        assert_eq!(
            ResourceUrl::parse("HTTP://127.0.0.1:9/x").unwrap(),
            ResourceUrl::Http {
                url: "HTTP://127.0.0.1:9/x".into(),
                sha256: None
            }
        );
    }

    #[test]
    fn bad_urls_are_named() {
        for (url, want) in [
            ("spindle-rm:///blobs/sha256:abc", "names no blob"),
            ("spindle-rm://evil/blobs/x", "names no blob"),
            ("http:///x", "has no host"),
            (
                "http://h/x#md5=0123",
                "is not sha256=<64 lowercase hex digits>",
            ),
            ("ftp://h/x", "is not supported"),
            ("hdfs://nn/x", "is not supported"),
            ("relative/x", "is not supported"),
        ] {
            let e = ResourceUrl::parse(url).unwrap_err().to_string();
            assert!(e.contains(want), "{url}: {e}");
        }
    }
}
