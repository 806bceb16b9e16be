//! [`ImageRef`]: what a container asks for. A registry reference in Docker's grammar
//! (`registry[:port]/repo[:tag][@sha256:...]`, with Docker's defaults: no registry is
//! `docker.io`, a one-segment name gets `library/`, no tag and no digest is `latest`), or a
//! local source in skopeo's spelling: an OCI image layout directory `oci:/path[:tag]` or an
//! OCI archive `oci-archive:/path.tar[:tag]`.
//!
//! Parsing only: nothing here touches the network or the disk. The canonical text
//! ([`fmt::Display`]) is the name the cache records the image under, the name NodeManagers
//! report to the RM, and what the RM matches asks' images against ([`ImageRef::placement_key`]).
//! One parser for the client (`--image`), the RM (placement by image) and the NodeManager
//! (pulls), so that all three agree on what two names mean.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

pub mod digest;

pub use digest::Digest;

/// The registry a reference without one names (Docker's default).
pub const DEFAULT_REGISTRY: &str = "docker.io";
/// The tag a reference without tag and digest names.
pub const DEFAULT_TAG: &str = "latest";

/// Why a reference does not parse: one variant per rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("the reference is empty")]
    Empty,
    #[error("registry '{registry}' is not a host name with an optional port")]
    BadRegistry { registry: String },
    #[error(
        "repository '{repository}' is not lowercase letters, digits and separators ._- between '/'"
    )]
    BadRepository { repository: String },
    #[error("tag '{tag}' is not 1 to 128 of letters, digits, '_', '.', '-' (not starting with '.' or '-')")]
    BadTag { tag: String },
    #[error("digest '{digest}' is not sha256: and 64 lowercase hex digits")]
    BadDigest { digest: String },
    #[error("digest algorithm '{algorithm}' is not supported (only sha256)")]
    UnsupportedDigestAlgorithm { algorithm: String },
    #[error("the {transport} path '{path}' is not absolute")]
    RelativeLayoutPath {
        transport: &'static str,
        path: String,
    },
    #[error("the reference is {len} bytes long (at most 1024)")]
    TooLong { len: usize },
}

/// A reference to an image in a registry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RegistryRef {
    /// `host[:port]`, `docker.io` by default.
    pub registry: String,
    /// `library/busybox`, `team/train`.
    pub repository: String,
    /// `None` only when a digest is given.
    pub tag: Option<String>,
    pub digest: Option<Digest>,
}

/// What a container asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ImageRef {
    Registry(RegistryRef),
    /// An OCI image layout directory; `tag` picks the manifest by its
    /// `org.opencontainers.image.ref.name` annotation (none: the layout's only manifest).
    Layout {
        path: PathBuf,
        tag: Option<String>,
    },
    /// A tar of an OCI image layout.
    Archive {
        path: PathBuf,
        tag: Option<String>,
    },
}

impl ImageRef {
    /// Parses and normalizes a reference (the same as `str::parse`).
    pub fn parse(s: &str) -> Result<Self, ReferenceError> {
        s.parse()
    }

    /// What the RM matches a node's images by: the manifest digest when the reference pins
    /// one, else the normalized name.
    pub fn placement_key(&self) -> String {
        match self {
            ImageRef::Registry(RegistryRef {
                digest: Some(d), ..
            }) => d.to_string(),
            other => other.to_string(),
        }
    }

    /// The registry's `host[:port]` for a registry reference.
    pub fn registry(&self) -> Option<&str> {
        match self {
            ImageRef::Registry(r) => Some(&r.registry),
            _ => None,
        }
    }
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
        let (transport, path, tag) = match self {
            ImageRef::Registry(r) => return r.fmt(f),
            ImageRef::Layout { path, tag } => ("oci", path, tag),
            ImageRef::Archive { path, tag } => ("oci-archive", path, tag),
        };
        write!(f, "{transport}:{}", path.display())?;
        match tag {
            Some(t) => write!(f, ":{t}"),
            None => Ok(()),
        }
    }
}

impl FromStr for ImageRef {
    type Err = ReferenceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ReferenceError::Empty);
        }
        if s.len() > 1024 {
            return Err(ReferenceError::TooLong { len: s.len() });
        }
        if let Some(rest) = s.strip_prefix("oci:") {
            let (path, tag) = local_source("oci", rest)?;
            return Ok(ImageRef::Layout { path, tag });
        }
        if let Some(rest) = s.strip_prefix("oci-archive:") {
            let (path, tag) = local_source("oci-archive", rest)?;
            return Ok(ImageRef::Archive { path, tag });
        }
        let s = s.strip_prefix("docker://").unwrap_or(s);
        parse_registry_ref(s).map(ImageRef::Registry)
    }
}

/// `/path[:tag]` as skopeo splits it: the path ends at the first ':'.
fn local_source(
    transport: &'static str,
    rest: &str,
) -> Result<(PathBuf, Option<String>), ReferenceError> {
    let (path, tag) = match rest.split_once(':') {
        Some((p, t)) => (p, Some(t)),
        None => (rest, None),
    };
    if !path.starts_with('/') {
        return Err(ReferenceError::RelativeLayoutPath {
            transport,
            path: path.to_string(),
        });
    }
    if let Some(t) = tag {
        check_tag(t)?;
    }
    Ok((PathBuf::from(path), tag.map(str::to_string)))
}

fn parse_registry_ref(s: &str) -> Result<RegistryRef, ReferenceError> {
    let (name_tag, digest) = match s.rsplit_once('@') {
        Some((n, d)) => (n, Some(d.parse::<Digest>()?)),
        None => (s, None),
    };
    // The tag is after a ':' in the last path segment (a ':' before a '/' is a port).
    let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_tag[last_slash..].rfind(':') {
        Some(i) => (
            &name_tag[..last_slash + i],
            Some(&name_tag[last_slash + i + 1..]),
        ),
        None => (name_tag, None),
    };
    if let Some(t) = tag {
        check_tag(t)?;
    }
    let (registry, repository) = match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            check_registry(first)?;
            (first.to_string(), rest.to_string())
        }
        Some(_) => (DEFAULT_REGISTRY.to_string(), name.to_string()),
        None => (DEFAULT_REGISTRY.to_string(), format!("library/{name}")),
    };
    check_repository(&repository)?;
    let tag = match (tag, &digest) {
        (Some(t), _) => Some(t.to_string()),
        (None, Some(_)) => None,
        (None, None) => Some(DEFAULT_TAG.to_string()),
    };
    Ok(RegistryRef {
        registry,
        repository,
        tag,
        digest,
    })
}

fn check_tag(tag: &str) -> Result<(), ReferenceError> {
    let ok = (1..=128).contains(&tag.len())
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        && !tag.starts_with(['.', '-']);
    if ok {
        Ok(())
    } else {
        Err(ReferenceError::BadTag { tag: tag.into() })
    }
}

fn check_registry(registry: &str) -> Result<(), ReferenceError> {
    let (host, port) = match registry.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (registry, None),
    };
    let host_ok = !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0));
    if host_ok && port_ok {
        Ok(())
    } else {
        Err(ReferenceError::BadRegistry {
            registry: registry.into(),
        })
    }
}

/// Docker's path components: `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`, joined by '/'.
fn check_repository(repository: &str) -> Result<(), ReferenceError> {
    let component_ok = |c: &str| {
        let b = c.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|&x| {
                x.is_ascii_lowercase() || x.is_ascii_digit() || matches!(x, b'.' | b'_' | b'-')
            })
            && !c.contains("..")
            && !c.contains("___")
    };
    if repository.len() <= 255 && repository.split('/').all(component_ok) {
        Ok(())
    } else {
        Err(ReferenceError::BadRepository {
            repository: repository.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(s: &str) -> RegistryRef {
        match s.parse::<ImageRef>().unwrap() {
            ImageRef::Registry(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn docker_defaults() {
        let r = reg("busybox");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("docker.io", "library/busybox", Some("latest"))
        );
        assert_eq!(r.to_string(), "docker.io/library/busybox:latest");
        let r = reg("team/train:v2");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str()),
            ("docker.io", "team/train")
        );
        assert_eq!(r.tag.as_deref(), Some("v2"));
        let r = reg("localhost/x");
        assert_eq!(r.registry, "localhost");
        let hex = "a".repeat(64);
        let pinned = ImageRef::parse(&format!("127.0.0.1:5000/a/b@sha256:{hex}")).unwrap();
        assert_eq!(pinned.placement_key(), format!("sha256:{hex}"));
        assert_eq!(
            ImageRef::parse("busybox").unwrap().placement_key(),
            "docker.io/library/busybox:latest"
        );
    }

    #[test]
    fn registry_port_path_and_digest() {
        let r = reg("127.0.0.1:5000/a/b:1.2");
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref()),
            ("127.0.0.1:5000", "a/b", Some("1.2"))
        );
        let hex = "0123456789abcdef".repeat(4);
        let r = reg(&format!("nvcr.io/nvidia/pytorch@sha256:{hex}"));
        assert_eq!(r.tag, None);
        assert_eq!(r.digest.as_ref().unwrap().hex(), hex);
        assert_eq!(
            r.to_string(),
            format!("nvcr.io/nvidia/pytorch@sha256:{hex}")
        );
        let r = reg(&format!("repo:t@sha256:{hex}"));
        assert_eq!(r.tag.as_deref(), Some("t"));
        // A port and no tag: the ':' belongs to the registry.
        let r = reg("registry.local:5000/img");
        assert_eq!(
            (r.registry.as_str(), r.tag.as_deref()),
            ("registry.local:5000", Some("latest"))
        );
    }

    #[test]
    fn local_sources() {
        assert_eq!(
            "oci:/srv/layout:1".parse::<ImageRef>().unwrap(),
            ImageRef::Layout {
                path: "/srv/layout".into(),
                tag: Some("1".into())
            }
        );
        assert_eq!(
            "oci-archive:/tmp/i.tar".parse::<ImageRef>().unwrap(),
            ImageRef::Archive {
                path: "/tmp/i.tar".into(),
                tag: None
            }
        );
        assert_eq!(
            "oci:/srv/layout:1".parse::<ImageRef>().unwrap().to_string(),
            "oci:/srv/layout:1"
        );
    }

    #[test]
    fn bad_references_are_named() {
        use ReferenceError as E;
        type Check = fn(&E) -> bool;
        let cases: Vec<(&str, Check)> = vec![
            ("", |e| matches!(e, E::Empty)),
            ("Busybox", |e| matches!(e, E::BadRepository { .. })),
            ("a//b", |e| matches!(e, E::BadRepository { .. })),
            ("busybox:", |e| matches!(e, E::BadTag { .. })),
            ("busybox:-x", |e| matches!(e, E::BadTag { .. })),
            ("busybox@sha256:abc", |e| matches!(e, E::BadDigest { .. })),
            ("busybox@md5:abc", |e| {
                matches!(e, E::UnsupportedDigestAlgorithm { .. })
            }),
            ("bad_host.io:99999/x", |e| {
                matches!(e, E::BadRegistry { .. })
            }),
            ("oci:relative/dir", |e| {
                matches!(e, E::RelativeLayoutPath { .. })
            }),
            ("oci:/x:bad tag", |e| matches!(e, E::BadTag { .. })),
        ];
        for (text, want) in cases {
            let e = text.parse::<ImageRef>().unwrap_err();
            assert!(want(&e), "{text}: {e}");
        }
        assert!(matches!(
            "a".repeat(2000).parse::<ImageRef>(),
            Err(E::TooLong { .. })
        ));
    }
}
