//! What a container's launch environment asks of its runtime, in YARN's names: an image
//! container (`YARN_CONTAINER_RUNTIME_TYPE=runc` with `YARN_CONTAINER_RUNTIME_RUNC_IMAGE`
//! and `..._RUNC_MOUNTS`; `docker` with `..._DOCKER_IMAGE`/`..._DOCKER_MOUNTS` is taken as
//! the same, no Docker daemon involved) or a plain process (`default`, or nothing set).
//! One reading for the client (`--image`, `--mount`), the application masters (the ask's
//! image) and the NodeManager (the launch, whose policy then admits it or not), so that all
//! three refuse the same mistakes.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};

use crate::env;
use crate::image_ref::{ImageRef, ReferenceError};

/// A container runtime YARN names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuntimeKind {
    /// A process of the node's own software (the process executor).
    Default,
    /// An OCI image under the node's OCI runtime.
    Runc,
    /// The same as [`RuntimeKind::Runc`], under YARN's Docker names (no Docker daemon).
    Docker,
}

impl RuntimeKind {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "default" => Some(Self::Default),
            "runc" => Some(Self::Runc),
            "docker" => Some(Self::Docker),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Runc => "runc",
            Self::Docker => "docker",
        }
    }
    fn image_var(self) -> &'static str {
        match self {
            Self::Docker => env::YARN_CONTAINER_RUNTIME_DOCKER_IMAGE,
            _ => env::YARN_CONTAINER_RUNTIME_RUNC_IMAGE,
        }
    }
    fn mounts_var(self) -> &'static str {
        match self {
            Self::Docker => env::YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS,
            _ => env::YARN_CONTAINER_RUNTIME_RUNC_MOUNTS,
        }
    }
    fn privileged_var(self) -> &'static str {
        match self {
            Self::Docker => env::YARN_CONTAINER_RUNTIME_DOCKER_RUN_PRIVILEGED_CONTAINER,
            _ => env::YARN_CONTAINER_RUNTIME_RUNC_RUN_PRIVILEGED_CONTAINER,
        }
    }
}

impl fmt::Display for RuntimeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Read-only or read-write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountMode {
    ReadOnly,
    ReadWrite,
}

impl fmt::Display for MountMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ReadOnly => "ro",
            Self::ReadWrite => "rw",
        })
    }
}

/// One bind mount: a host path at a path in the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    pub source: PathBuf,
    pub destination: PathBuf,
    pub mode: MountMode,
}

/// What the launch environment asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeRequest {
    pub kind: RuntimeKind,
    /// The image reference (required for `runc` and `docker`).
    pub image: Option<String>,
    /// The AM's mounts, as written (sources not yet checked against the allow-lists).
    pub mounts: Vec<BindMount>,
    pub privileged: bool,
}

/// Why a launch environment's runtime request cannot be read. The NodeManager fails such a
/// container at launch with this as its diagnostic; the client refuses it before submitting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeRequestError {
    #[error("unknown container runtime '{0}' in YARN_CONTAINER_RUNTIME_TYPE (expected default, runc or docker)")]
    UnknownRuntime(String),
    #[error("container runtime '{runtime}' needs an image in {var}")]
    NoImage {
        runtime: RuntimeKind,
        var: &'static str,
    },
    #[error("invalid image reference '{image}': {reason}")]
    BadImage {
        image: String,
        reason: ReferenceError,
    },
    #[error("invalid mount '{entry}' in {var}: {reason}")]
    BadMount {
        var: &'static str,
        entry: String,
        reason: &'static str,
    },
    #[error("invalid value '{value}' of {var} (expected true or false)")]
    BadPrivileged { var: &'static str, value: String },
}

impl RuntimeRequest {
    /// Reads the request from a launch context's environment: None when it asks for no
    /// runtime (or for `default`).
    pub fn from_env(
        environment: &BTreeMap<String, String>,
    ) -> Result<Option<Self>, RuntimeRequestError> {
        let Some(kind) = environment.get(env::YARN_CONTAINER_RUNTIME_TYPE) else {
            return Ok(None);
        };
        let kind = RuntimeKind::parse(kind)
            .ok_or_else(|| RuntimeRequestError::UnknownRuntime(kind.clone()))?;
        if kind == RuntimeKind::Default {
            return Ok(Some(Self {
                kind,
                image: None,
                mounts: Vec::new(),
                privileged: false,
            }));
        }
        let image = environment
            .get(kind.image_var())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .ok_or(RuntimeRequestError::NoImage {
                runtime: kind,
                var: kind.image_var(),
            })?;
        let image = ImageRef::parse(&image)
            .map_err(|reason| RuntimeRequestError::BadImage { image, reason })?
            .to_string();
        let mounts = match environment.get(kind.mounts_var()) {
            Some(list) => parse_mounts(list, kind.mounts_var(), MountMode::ReadOnly)?,
            None => Vec::new(),
        };
        let privileged = match environment.get(kind.privileged_var()) {
            None => false,
            Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" | "" => false,
                _ => {
                    return Err(RuntimeRequestError::BadPrivileged {
                        var: kind.privileged_var(),
                        value: v.clone(),
                    })
                }
            },
        };
        Ok(Some(Self {
            kind,
            image: Some(image),
            mounts,
            privileged,
        }))
    }
}

/// The image a launch environment asks for, normalized, when it asks for one and is well
/// formed (what an AM puts on its asks so that the RM prefers nodes holding it).
pub fn requested_image(environment: &BTreeMap<String, String>) -> Option<String> {
    RuntimeRequest::from_env(environment).ok()??.image
}

impl RuntimeRequest {
    /// The launch environment entries that ask for this (the reverse of `from_env`).
    pub fn to_env(&self) -> Vec<(String, String)> {
        let mut out = vec![(
            env::YARN_CONTAINER_RUNTIME_TYPE.to_string(),
            self.kind.name().to_string(),
        )];
        if self.kind == RuntimeKind::Default {
            return out;
        }
        if let Some(i) = &self.image {
            out.push((self.kind.image_var().to_string(), i.clone()));
        }
        if !self.mounts.is_empty() {
            let list: Vec<String> = self.mounts.iter().map(BindMount::to_string).collect();
            out.push((self.kind.mounts_var().to_string(), list.join(",")));
        }
        if self.privileged {
            out.push((self.kind.privileged_var().to_string(), "true".into()));
        }
        out
    }
}

impl fmt::Display for BindMount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}",
            self.source.display(),
            self.destination.display(),
            self.mode
        )
    }
}

/// Parses `src:dst[:ro|rw]` entries, comma-separated (YARN's mount list; a `+rprivate` or
/// `+private` propagation suffix is accepted, others refused). An entry without a mode is
/// `default_mode`.
pub fn parse_mounts(
    list: &str,
    var: &'static str,
    default_mode: MountMode,
) -> Result<Vec<BindMount>, RuntimeRequestError> {
    let bad = |entry: &str, reason| RuntimeRequestError::BadMount {
        var,
        entry: entry.to_string(),
        reason,
    };
    let mut out = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parts: Vec<&str> = entry.split(':').collect();
        let (src, dst, mode) = match parts.as_slice() {
            [p] => (*p, *p, None),
            [s, d] => (*s, *d, None),
            [s, d, m] => (*s, *d, Some(*m)),
            _ => return Err(bad(entry, "expected src:dst[:ro|rw]")),
        };
        let mode = match mode.map(|m| m.split_once('+').map_or((m, ""), |(a, b)| (a, b))) {
            None => default_mode,
            Some((m, prop)) => {
                if !matches!(prop, "" | "rprivate" | "private") {
                    return Err(bad(entry, "only private mount propagation is allowed"));
                }
                match m {
                    "ro" => MountMode::ReadOnly,
                    "rw" => MountMode::ReadWrite,
                    _ => return Err(bad(entry, "the mode must be ro or rw")),
                }
            }
        };
        for p in [src, dst] {
            check_path(p).map_err(|reason| bad(entry, reason))?;
        }
        let destination = PathBuf::from(dst);
        if destination == Path::new("/")
            || ["/proc", "/sys", "/dev"]
                .iter()
                .any(|d| destination.starts_with(d))
        {
            return Err(bad(
                entry,
                "the destination may not be /, nor under /proc, /sys or /dev",
            ));
        }
        out.push(BindMount {
            source: PathBuf::from(src),
            destination,
            mode,
        });
    }
    Ok(out)
}

/// An absolute, normal path: no `..` or `.` components, no NUL.
fn check_path(p: &str) -> Result<(), &'static str> {
    if !p.starts_with('/') {
        return Err("paths must be absolute");
    }
    if p.contains('\0') {
        return Err("paths may not contain NUL");
    }
    if Path::new(p)
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        || p.split('/').any(|c| c == "." || c == "..")
    {
        return Err("paths may not contain . or .. components");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn no_type_or_default_is_no_oci_request() {
        assert_eq!(RuntimeRequest::from_env(&env(&[])), Ok(None));
        let d = RuntimeRequest::from_env(&env(&[("YARN_CONTAINER_RUNTIME_TYPE", "default")]))
            .unwrap()
            .unwrap();
        assert_eq!(d.kind, RuntimeKind::Default);
    }

    #[test]
    fn runc_and_docker_read_their_own_variables() {
        let r = RuntimeRequest::from_env(&env(&[
            ("YARN_CONTAINER_RUNTIME_TYPE", "runc"),
            ("YARN_CONTAINER_RUNTIME_RUNC_IMAGE", "reg:5000/team/img:1"),
            (
                "YARN_CONTAINER_RUNTIME_RUNC_MOUNTS",
                "/data:/data:ro, /scratch:/s:rw+rprivate,/opt/x",
            ),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(r.image.as_deref(), Some("reg:5000/team/img:1"));
        assert_eq!(
            r.mounts,
            vec![
                BindMount {
                    source: "/data".into(),
                    destination: "/data".into(),
                    mode: MountMode::ReadOnly
                },
                BindMount {
                    source: "/scratch".into(),
                    destination: "/s".into(),
                    mode: MountMode::ReadWrite
                },
                BindMount {
                    source: "/opt/x".into(),
                    destination: "/opt/x".into(),
                    mode: MountMode::ReadOnly
                },
            ]
        );
        let d = RuntimeRequest::from_env(&env(&[
            ("YARN_CONTAINER_RUNTIME_TYPE", "Docker"),
            ("YARN_CONTAINER_RUNTIME_DOCKER_IMAGE", "img"),
            (
                "YARN_CONTAINER_RUNTIME_DOCKER_RUN_PRIVILEGED_CONTAINER",
                "true",
            ),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((d.kind, d.privileged), (RuntimeKind::Docker, true));
        assert_eq!(d.image.as_deref(), Some("docker.io/library/img:latest"));
        let back: BTreeMap<String, String> = r.to_env().into_iter().collect();
        assert_eq!(RuntimeRequest::from_env(&back), Ok(Some(r)));
    }

    #[test]
    fn bad_requests_are_refused_with_their_reason() {
        let e = |pairs: &[(&str, &str)]| RuntimeRequest::from_env(&env(pairs)).unwrap_err();
        assert!(matches!(
            e(&[("YARN_CONTAINER_RUNTIME_TYPE", "lxc")]),
            RuntimeRequestError::UnknownRuntime(_)
        ));
        assert!(matches!(
            e(&[("YARN_CONTAINER_RUNTIME_TYPE", "runc")]),
            RuntimeRequestError::NoImage { .. }
        ));
        for (mounts, why) in [
            ("data:/data", "absolute"),
            ("/data/../etc:/x", ". or .."),
            ("/a:/b:rx", "ro or rw"),
            ("/a:/b:ro+shared", "private"),
            ("/a:/proc/x", "/proc"),
            ("/a:/b:ro:x", "src:dst"),
        ] {
            let err = e(&[
                ("YARN_CONTAINER_RUNTIME_TYPE", "runc"),
                ("YARN_CONTAINER_RUNTIME_RUNC_IMAGE", "img"),
                ("YARN_CONTAINER_RUNTIME_RUNC_MOUNTS", mounts),
            ]);
            assert!(err.to_string().contains(why), "{mounts}: {err}");
        }
        let err = e(&[
            ("YARN_CONTAINER_RUNTIME_TYPE", "runc"),
            ("YARN_CONTAINER_RUNTIME_RUNC_IMAGE", "img"),
            (
                "YARN_CONTAINER_RUNTIME_RUNC_RUN_PRIVILEGED_CONTAINER",
                "yes",
            ),
        ]);
        assert!(matches!(err, RuntimeRequestError::BadPrivileged { .. }));
        assert!(matches!(
            e(&[
                ("YARN_CONTAINER_RUNTIME_TYPE", "runc"),
                ("YARN_CONTAINER_RUNTIME_RUNC_IMAGE", "Bad Image"),
            ]),
            RuntimeRequestError::BadImage { .. }
        ));
    }
}
