//! Container image references, as Docker and the OCI distribution spec write them, and the
//! local sources skopeo names: one parser for the client (`--image`), the RM (placement by
//! image) and the NodeManager (pulls), so that all three agree on what two names mean.
//!
//! `busybox` is `docker.io/library/busybox:latest`; `ghcr.io/org/img:1.2`,
//! `127.0.0.1:5000/team/train@sha256:<64 hex>`, `localhost/x` name a registry (a first
//! component with a `.` or a `:`, or `localhost`); `oci:/dir[:tag]` is an OCI image layout
//! on the node, `oci-archive:/file.tar[:tag]` one packed in a tar.

use std::fmt;

/// Docker Hub, the registry of a name without one.
pub const DEFAULT_REGISTRY: &str = "docker.io";
/// The tag of a name without a tag or digest.
pub const DEFAULT_TAG: &str = "latest";
/// Longest reference taken (Docker's limit on a repository name is 255).
const MAX_LEN: usize = 512;

/// Where an image comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ImageRef {
    /// From a registry over the OCI distribution protocol.
    Registry(RegistryRef),
    /// An OCI image layout directory on the node (`oci:/path[:tag]`).
    Layout { path: String, tag: Option<String> },
    /// An OCI image layout packed in a tar file (`oci-archive:/path[:tag]`).
    Archive { path: String, tag: Option<String> },
}

/// `registry/repository[:tag][@digest]`, normalized.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RegistryRef {
    /// `host[:port]`, lower case.
    pub registry: String,
    /// `library/busybox`, `team/train`.
    pub repository: String,
    /// `latest` when neither a tag nor a digest was given.
    pub tag: Option<String>,
    /// `sha256:<64 hex>`.
    pub digest: Option<String>,
}

/// Why a string is not an image reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    #[error("the image reference is empty")]
    Empty,
    #[error("the image reference is longer than {MAX_LEN} characters")]
    TooLong,
    #[error("image reference `{0}`: a local image needs an absolute path (oci:/dir or oci-archive:/file.tar)")]
    RelativePath(String),
    #[error("image reference `{reference}`: repository component `{component}` must be lower-case letters and digits, separated by '.', '_', '__' or '-'")]
    BadRepository {
        reference: String,
        component: String,
    },
    #[error(
        "image reference `{reference}`: registry `{registry}` is not a host name or host:port"
    )]
    BadRegistry { reference: String, registry: String },
    #[error("image reference `{reference}`: tag `{tag}` must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'")]
    BadTag { reference: String, tag: String },
    #[error("image reference `{reference}`: digest `{digest}` must be sha256:<64 lower-case hex digits>")]
    BadDigest { reference: String, digest: String },
}

impl ImageRef {
    /// Parses and normalizes a reference.
    pub fn parse(s: &str) -> Result<Self, ImageRefError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ImageRefError::Empty);
        }
        if s.len() > MAX_LEN {
            return Err(ImageRefError::TooLong);
        }
        if let Some(rest) = s.strip_prefix("oci-archive:") {
            let (path, tag) = local(s, rest)?;
            return Ok(Self::Archive { path, tag });
        }
        if let Some(rest) = s.strip_prefix("oci:") {
            let (path, tag) = local(s, rest)?;
            return Ok(Self::Layout { path, tag });
        }
        RegistryRef::parse(s).map(Self::Registry)
    }

    /// What the RM matches a node's images by: the manifest digest when the reference pins
    /// one, else the normalized name.
    pub fn placement_key(&self) -> String {
        match self {
            Self::Registry(RegistryRef {
                digest: Some(d), ..
            }) => d.clone(),
            other => other.to_string(),
        }
    }
}

/// `rest` of `oci:rest`: an absolute path, then an optional `:tag`.
fn local(whole: &str, rest: &str) -> Result<(String, Option<String>), ImageRefError> {
    if !rest.starts_with('/') {
        return Err(ImageRefError::RelativePath(whole.to_string()));
    }
    match rest.rsplit_once(':') {
        Some((path, tag)) if !tag.contains('/') => {
            check_tag(whole, tag)?;
            Ok((path.to_string(), Some(tag.to_string())))
        }
        _ => Ok((rest.to_string(), None)),
    }
}

impl RegistryRef {
    fn parse(s: &str) -> Result<Self, ImageRefError> {
        let (name, digest) = match s.split_once('@') {
            Some((n, d)) => (n, Some(d)),
            None => (s, None),
        };
        if let Some(d) = digest {
            let hex = d.strip_prefix("sha256:").unwrap_or("");
            if hex.len() != 64
                || !hex
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            {
                return Err(ImageRefError::BadDigest {
                    reference: s.into(),
                    digest: d.into(),
                });
            }
        }
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match name[last_slash..].rfind(':') {
            Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
            None => (name, None),
        };
        if let Some(t) = tag {
            check_tag(s, t)?;
        }
        let (registry, repository) = match path.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_ascii_lowercase(), rest.to_string())
            }
            _ => (DEFAULT_REGISTRY.to_string(), path.to_string()),
        };
        check_registry(s, &registry)?;
        let repository = if registry == DEFAULT_REGISTRY && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        for component in repository.split('/') {
            if !valid_component(component) {
                return Err(ImageRefError::BadRepository {
                    reference: s.into(),
                    component: component.into(),
                });
            }
        }
        let tag = match (tag, digest) {
            (None, None) => Some(DEFAULT_TAG.to_string()),
            (t, _) => t.map(str::to_string),
        };
        Ok(Self {
            registry,
            repository,
            tag,
            digest: digest.map(str::to_string),
        })
    }
}

fn check_tag(whole: &str, tag: &str) -> Result<(), ImageRefError> {
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && !tag.starts_with(['.', '-'])
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ImageRefError::BadTag {
            reference: whole.into(),
            tag: tag.into(),
        })
    }
}

fn check_registry(whole: &str, registry: &str) -> Result<(), ImageRefError> {
    let (host, port) = match registry.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (registry, None),
    };
    let host_ok = !host.is_empty()
        && host
            .split('.')
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0));
    if host_ok && port_ok {
        Ok(())
    } else {
        Err(ImageRefError::BadRegistry {
            reference: whole.into(),
            registry: registry.into(),
        })
    }
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`, Docker's path component.
fn valid_component(c: &str) -> bool {
    let b = c.as_bytes();
    if b.is_empty() || !is_alnum(b[0]) || !is_alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_alnum(b[i]) {
            i += 1;
            continue;
        }
        let sep_start = i;
        while i < b.len() && !is_alnum(b[i]) {
            i += 1;
        }
        let sep = &c[sep_start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

impl fmt::Display for RegistryRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (scheme, path, tag) = match self {
            Self::Registry(r) => return r.fmt(f),
            Self::Layout { path, tag } => ("oci", path, tag),
            Self::Archive { path, tag } => ("oci-archive", path, tag),
        };
        write!(f, "{scheme}:{path}")?;
        if let Some(t) = tag {
            write!(f, ":{t}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ImageRef {
    type Err = ImageRefError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        ImageRef::parse(s).unwrap().to_string()
    }

    #[test]
    fn names_normalize_as_docker_does() {
        assert_eq!(norm("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(norm("team/train:v2"), "docker.io/team/train:v2");
        assert_eq!(norm("127.0.0.1:5000/busybox:1"), "127.0.0.1:5000/busybox:1");
        assert_eq!(norm("localhost/x"), "localhost/x:latest");
        assert_eq!(
            norm("NVCR.IO/nvidia/pytorch:24.01-py3"),
            "nvcr.io/nvidia/pytorch:24.01-py3"
        );
        let d = format!("sha256:{}", "a".repeat(64));
        let r = ImageRef::parse(&format!("127.0.0.1:5000/a/b@{d}")).unwrap();
        assert_eq!(r.to_string(), format!("127.0.0.1:5000/a/b@{d}"));
        assert_eq!(r.placement_key(), d);
        assert_eq!(norm("oci:/srv/img:v1"), "oci:/srv/img:v1");
        assert_eq!(norm("oci-archive:/srv/img.tar"), "oci-archive:/srv/img.tar");
    }

    #[test]
    fn bad_references_are_named() {
        let e = |s: &str| ImageRef::parse(s).unwrap_err();
        assert_eq!(e("  "), ImageRefError::Empty);
        assert!(
            matches!(e("ghcr.io/Org/x"), ImageRefError::BadRepository { component, .. } if component == "Org")
        );
        assert!(matches!(e("x:-bad"), ImageRefError::BadTag { .. }));
        assert!(matches!(e("x@sha256:abc"), ImageRefError::BadDigest { .. }));
        assert!(matches!(e("x@md5:abc"), ImageRefError::BadDigest { .. }));
        assert!(matches!(
            e("host:99999/x"),
            ImageRefError::BadRegistry { .. }
        ));
        assert!(matches!(
            e("oci:relative/dir"),
            ImageRefError::RelativePath(_)
        ));
        assert!(matches!(e("a//b"), ImageRefError::BadRepository { .. }));
        assert!(matches!(e(&"a".repeat(600)), ImageRefError::TooLong));
    }
}
