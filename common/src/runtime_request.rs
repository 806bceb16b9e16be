//! What a container's launch environment asks of its runtime, in YARN's names: an image
//! container (`YARN_CONTAINER_RUNTIME_TYPE=runc` with `YARN_CONTAINER_RUNTIME_RUNC_IMAGE`
//! and `..._RUNC_MOUNTS`; `docker` with `..._DOCKER_IMAGE`/`..._DOCKER_MOUNTS` is taken as
//! the same, no Docker daemon involved) or a plain process (`default`, or nothing set).
//! One reading for the client (`--image`, `--mount`), the application masters (the ask's
//! image) and the NodeManager (the launch), so that all three refuse the same mistakes.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use crate::image_ref::{ImageRef, ReferenceError};

pub const ENV_RUNTIME_TYPE: &str = "YARN_CONTAINER_RUNTIME_TYPE";
pub const ENV_RUNC_IMAGE: &str = "YARN_CONTAINER_RUNTIME_RUNC_IMAGE";
pub const ENV_RUNC_MOUNTS: &str = "YARN_CONTAINER_RUNTIME_RUNC_MOUNTS";
pub const ENV_DOCKER_IMAGE: &str = "YARN_CONTAINER_RUNTIME_DOCKER_IMAGE";
pub const ENV_DOCKER_MOUNTS: &str = "YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS";

/// Which runtime a container asked for (YARN's `allowed-runtimes` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RuntimeKind {
    /// A process of the node's own software.
    Default,
    Runc,
    /// Docker's variables, run by the same OCI runtime (no Docker daemon).
    Docker,
}

impl RuntimeKind {
    /// The name in `YARN_CONTAINER_RUNTIME_TYPE` and `allowed-runtimes`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Runc => "runc",
            Self::Docker => "docker",
        }
    }
}

/// A bind mount asked for (`src:dst[:ro|rw]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountSpec {
    pub source: PathBuf,
    pub destination: PathBuf,
    pub read_only: bool,
}

/// An image container's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRequest {
    pub kind: RuntimeKind,
    pub image: ImageRef,
    pub mounts: Vec<MountSpec>,
}

/// Why a launch environment's runtime request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeRequestError {
    #[error("{ENV_RUNTIME_TYPE}={0} is not a runtime (default, runc or docker)")]
    UnknownType(String),
    #[error("{ENV_RUNTIME_TYPE}={kind} needs an image in {var}")]
    MissingImage {
        kind: &'static str,
        var: &'static str,
    },
    #[error("{var}: {source}")]
    BadImage {
        var: &'static str,
        source: ReferenceError,
    },
    #[error("{var} is set but {ENV_RUNTIME_TYPE} is not {kind}: set both, or neither")]
    Stray {
        var: &'static str,
        kind: &'static str,
    },
    #[error("mount `{entry}`: {reason}")]
    BadMount { entry: String, reason: MountProblem },
}

/// What is wrong with one mount entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MountProblem {
    #[error("expected SOURCE:DESTINATION[:ro|rw]")]
    Shape,
    #[error("both paths must be absolute")]
    Relative,
    #[error("a path may not contain `..`")]
    DotDot,
    #[error("the mode must be ro or rw")]
    Mode,
}

impl ImageRequest {
    /// Reads a launch environment: `None` for a plain process container.
    pub fn from_env(env: &BTreeMap<String, String>) -> Result<Option<Self>, RuntimeRequestError> {
        let get = |k: &str| env.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let kind = match get(ENV_RUNTIME_TYPE)
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("default") => RuntimeKind::Default,
            Some("runc") => RuntimeKind::Runc,
            Some("docker") => RuntimeKind::Docker,
            Some(other) => return Err(RuntimeRequestError::UnknownType(other.to_string())),
        };
        let (image_var, mounts_var, others) = match kind {
            RuntimeKind::Default => {
                for var in [ENV_RUNC_IMAGE, ENV_DOCKER_IMAGE] {
                    if get(var).is_some() {
                        let kind = if var == ENV_RUNC_IMAGE {
                            "runc"
                        } else {
                            "docker"
                        };
                        return Err(RuntimeRequestError::Stray { var, kind });
                    }
                }
                return Ok(None);
            }
            RuntimeKind::Runc => (
                ENV_RUNC_IMAGE,
                ENV_RUNC_MOUNTS,
                [ENV_DOCKER_IMAGE, ENV_DOCKER_MOUNTS],
            ),
            RuntimeKind::Docker => (
                ENV_DOCKER_IMAGE,
                ENV_DOCKER_MOUNTS,
                [ENV_RUNC_IMAGE, ENV_RUNC_MOUNTS],
            ),
        };
        if let Some(var) = others.into_iter().find(|v| get(v).is_some()) {
            let kind = if kind == RuntimeKind::Runc {
                "docker"
            } else {
                "runc"
            };
            return Err(RuntimeRequestError::Stray { var, kind });
        }
        let raw = get(image_var).ok_or(RuntimeRequestError::MissingImage {
            kind: kind.name(),
            var: image_var,
        })?;
        let image = ImageRef::parse(raw).map_err(|source| RuntimeRequestError::BadImage {
            var: image_var,
            source,
        })?;
        let mounts = match get(mounts_var) {
            Some(list) => parse_mounts(list)?,
            None => Vec::new(),
        };
        Ok(Some(Self {
            kind,
            image,
            mounts,
        }))
    }

    /// The launch environment entries that ask for this (YARN's runc names).
    pub fn to_env(&self) -> Vec<(String, String)> {
        let (image_var, mounts_var) = match self.kind {
            RuntimeKind::Docker => (ENV_DOCKER_IMAGE, ENV_DOCKER_MOUNTS),
            _ => (ENV_RUNC_IMAGE, ENV_RUNC_MOUNTS),
        };
        let mut out = vec![
            (ENV_RUNTIME_TYPE.to_string(), self.kind.name().to_string()),
            (image_var.to_string(), self.image.to_string()),
        ];
        if !self.mounts.is_empty() {
            let list: Vec<String> = self.mounts.iter().map(MountSpec::to_string).collect();
            out.push((mounts_var.to_string(), list.join(",")));
        }
        out
    }
}

/// `src:dst[:ro|rw],...` (YARN's `..._MOUNTS`); empty entries are skipped.
pub fn parse_mounts(list: &str) -> Result<Vec<MountSpec>, RuntimeRequestError> {
    list.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(MountSpec::parse)
        .collect()
}

impl MountSpec {
    /// One `src:dst[:ro|rw]` entry (read-write unless `ro`, as in YARN).
    pub fn parse(entry: &str) -> Result<Self, RuntimeRequestError> {
        let bad = |reason| RuntimeRequestError::BadMount {
            entry: entry.to_string(),
            reason,
        };
        let parts: Vec<&str> = entry.split(':').collect();
        let (src, dst, mode) = match parts.as_slice() {
            [s, d] => (*s, *d, "rw"),
            [s, d, m] => (*s, *d, *m),
            _ => return Err(bad(MountProblem::Shape)),
        };
        let read_only = match mode {
            "ro" => true,
            "rw" => false,
            _ => return Err(bad(MountProblem::Mode)),
        };
        for p in [src, dst] {
            let path = Path::new(p);
            if !path.is_absolute() {
                return Err(bad(MountProblem::Relative));
            }
            if path.components().any(|c| c == Component::ParentDir) {
                return Err(bad(MountProblem::DotDot));
            }
        }
        Ok(Self {
            source: src.into(),
            destination: dst.into(),
            read_only,
        })
    }
}

impl std::fmt::Display for MountSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = if self.read_only { "ro" } else { "rw" };
        write!(
            f,
            "{}:{}:{mode}",
            self.source.display(),
            self.destination.display()
        )
    }
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
    fn runc_and_docker_read_the_same_and_round_trip() {
        let r = ImageRequest::from_env(&env(&[
            (ENV_RUNTIME_TYPE, "runc"),
            (ENV_RUNC_IMAGE, "busybox"),
            (ENV_RUNC_MOUNTS, "/data:/data:ro, /scratch:/tmp/s"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(r.image.to_string(), "docker.io/library/busybox:latest");
        assert_eq!(r.mounts.len(), 2);
        assert!(r.mounts[0].read_only && !r.mounts[1].read_only);
        let back: BTreeMap<String, String> = r.to_env().into_iter().collect();
        assert_eq!(ImageRequest::from_env(&back).unwrap().unwrap(), r);
        let d = ImageRequest::from_env(&env(&[
            (ENV_RUNTIME_TYPE, "docker"),
            (ENV_DOCKER_IMAGE, "busybox"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((d.kind, d.image), (RuntimeKind::Docker, r.image));
        assert_eq!(ImageRequest::from_env(&env(&[])).unwrap(), None);
        assert_eq!(
            ImageRequest::from_env(&env(&[(ENV_RUNTIME_TYPE, "default")])).unwrap(),
            None
        );
    }

    #[test]
    fn mistakes_are_named() {
        let e = |pairs: &[(&str, &str)]| ImageRequest::from_env(&env(pairs)).unwrap_err();
        assert!(matches!(
            e(&[(ENV_RUNTIME_TYPE, "lxc")]),
            RuntimeRequestError::UnknownType(_)
        ));
        assert!(matches!(
            e(&[(ENV_RUNTIME_TYPE, "runc")]),
            RuntimeRequestError::MissingImage { .. }
        ));
        assert!(matches!(
            e(&[(ENV_RUNC_IMAGE, "busybox")]),
            RuntimeRequestError::Stray { .. }
        ));
        assert!(matches!(
            e(&[(ENV_RUNTIME_TYPE, "runc"), (ENV_RUNC_IMAGE, "Bad Name")]),
            RuntimeRequestError::BadImage { .. }
        ));
        let m = |s: &str| match MountSpec::parse(s).unwrap_err() {
            RuntimeRequestError::BadMount { reason, .. } => reason,
            other => panic!("{other}"),
        };
        assert_eq!(m("/a"), MountProblem::Shape);
        assert_eq!(m("a:/b"), MountProblem::Relative);
        assert_eq!(m("/a/../etc:/b"), MountProblem::DotDot);
        assert_eq!(m("/a:/b:rx"), MountProblem::Mode);
    }
}
