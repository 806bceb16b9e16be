//! The node's runtime policy (`yarn.nodemanager.runtime.linux.*`): which runtimes it allows,
//! which host paths an AM may mount and how, whether privileged containers are allowed, the
//! OCI runtime binary and where CDI specifications are. [`RuntimePolicy::admit`] turns a
//! [`RuntimeRequest`] into what runs, or a [`RuntimeRefusal`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::request::{
    BindMount, MountMode, OciRequest, RuntimeKind, RuntimeRefusal, RuntimeRequest,
};

/// The typed runtime configuration (read by `crate::config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimePolicy {
    /// `yarn.nodemanager.runtime.linux.allowed-runtimes`.
    pub allowed: BTreeSet<RuntimeKind>,
    /// The OCI runtime binary, resolved at NM start; Err: why there is none.
    pub binary: Result<PathBuf, String>,
    /// `...runc.allowed-ro-mounts` and `...runc.allowed-rw-mounts`, resolved.
    pub allowed_ro: Vec<PathBuf>,
    pub allowed_rw: Vec<PathBuf>,
    /// `...runc.default-ro-mounts` then `...runc.default-rw-mounts`.
    pub default_mounts: Vec<BindMount>,
    /// `...runc.privileged-containers.allowed`.
    pub privileged_allowed: bool,
    /// `spindle.nodemanager.runtime.oci.cdi-spec-dirs`.
    pub cdi_dirs: Vec<PathBuf>,
}

impl Default for RuntimePolicy {
    fn default() -> Self {
        Self {
            allowed: BTreeSet::from([RuntimeKind::Default]),
            binary: Err("no OCI runtime configured".into()),
            allowed_ro: Vec::new(),
            allowed_rw: Vec::new(),
            default_mounts: Vec::new(),
            privileged_allowed: false,
            cdi_dirs: Vec::new(),
        }
    }
}

impl RuntimePolicy {
    /// Whether the node runs image containers at all (`runc` or `docker` allowed).
    pub fn allows_images(&self) -> bool {
        self.allowed
            .iter()
            .any(|k| matches!(k, RuntimeKind::Runc | RuntimeKind::Docker))
    }
}

/// Finds the runtime binary: `configured` (a path, or a name in `PATH`), else `crun` in
/// `PATH`, else `runc`.
pub fn find_runtime_binary(configured: Option<&str>) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let find = |name: &str| -> Option<PathBuf> {
        if name.contains('/') {
            return Path::new(name).is_file().then(|| PathBuf::from(name));
        }
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    };
    match configured {
        Some(name) => find(name).ok_or_else(|| format!("'{name}' was not found")),
        None => find("crun")
            .or_else(|| find("runc"))
            .ok_or_else(|| "neither crun nor runc is in PATH".to_string()),
    }
}

impl RuntimePolicy {
    fn allowed_list(&self) -> String {
        self.allowed
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// What the node runs for a request (None: the process executor), or why it refuses.
    /// Blocking (resolves mount sources).
    pub fn admit(&self, req: Option<RuntimeRequest>) -> Result<Option<OciRequest>, RuntimeRefusal> {
        let kind = req.as_ref().map_or(RuntimeKind::Default, |r| r.kind);
        if !self.allowed.contains(&kind) {
            return Err(RuntimeRefusal::NotAllowed {
                runtime: kind,
                allowed: self.allowed_list(),
            });
        }
        let Some(req) = req.filter(|r| r.kind != RuntimeKind::Default) else {
            return Ok(None);
        };
        if let Err(e) = &self.binary {
            return Err(RuntimeRefusal::NoRuntimeBinary(e.clone()));
        }
        if req.privileged && !self.privileged_allowed {
            return Err(RuntimeRefusal::PrivilegedNotAllowed);
        }
        let mut mounts = self.default_mounts.clone();
        for m in req.mounts {
            mounts.push(self.check_mount(m)?);
        }
        Ok(Some(OciRequest {
            kind: req.kind,
            image: req.image.unwrap_or_default(),
            mounts,
            privileged: req.privileged,
        }))
    }

    /// An AM's mount, allowed only under the allow-list of its mode (read-only also under
    /// the read-write list); its source resolved, so a link cannot lead elsewhere.
    fn check_mount(&self, m: BindMount) -> Result<BindMount, RuntimeRefusal> {
        let source = m
            .source
            .canonicalize()
            .map_err(|e| RuntimeRefusal::MountSource {
                path: m.source.clone(),
                reason: e.to_string(),
            })?;
        let under = |list: &[PathBuf]| list.iter().any(|a| source.starts_with(a));
        let ok = match m.mode {
            MountMode::ReadOnly => under(&self.allowed_ro) || under(&self.allowed_rw),
            MountMode::ReadWrite => under(&self.allowed_rw),
        };
        if !ok {
            return Err(RuntimeRefusal::MountNotAllowed {
                path: m.source,
                mode: m.mode,
                list: match m.mode {
                    MountMode::ReadOnly => "yarn.nodemanager.runtime.linux.runc.allowed-ro-mounts",
                    MountMode::ReadWrite => "yarn.nodemanager.runtime.linux.runc.allowed-rw-mounts",
                },
            });
        }
        Ok(BindMount { source, ..m })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(ro: &Path, rw: &Path) -> RuntimePolicy {
        RuntimePolicy {
            allowed: BTreeSet::from([RuntimeKind::Default, RuntimeKind::Runc, RuntimeKind::Docker]),
            binary: Ok("/usr/bin/crun".into()),
            allowed_ro: vec![ro.canonicalize().unwrap()],
            allowed_rw: vec![rw.canonicalize().unwrap()],
            ..Default::default()
        }
    }

    fn req(mounts: Vec<BindMount>, privileged: bool) -> Option<RuntimeRequest> {
        Some(RuntimeRequest {
            kind: RuntimeKind::Runc,
            image: Some("img".into()),
            mounts,
            privileged,
        })
    }

    fn bind(src: &Path, mode: MountMode) -> BindMount {
        BindMount {
            source: src.to_path_buf(),
            destination: "/mnt".into(),
            mode,
        }
    }

    #[test]
    fn mounts_only_under_their_allow_lists() {
        let d = tempfile::tempdir().unwrap();
        let (ro, rw, other) = (d.path().join("ro"), d.path().join("rw"), d.path().join("x"));
        for p in [&ro, &rw, &other] {
            std::fs::create_dir(p).unwrap();
        }
        std::fs::create_dir(ro.join("sub")).unwrap();
        std::os::unix::fs::symlink(&other, ro.join("link-out")).unwrap();
        let p = policy(&ro, &rw);
        let ok = p
            .admit(req(
                vec![
                    bind(&ro.join("sub"), MountMode::ReadOnly),
                    bind(&rw, MountMode::ReadOnly),
                    bind(&rw, MountMode::ReadWrite),
                ],
                false,
            ))
            .unwrap()
            .unwrap();
        assert_eq!(ok.mounts.len(), 3);
        for (m, why) in [
            (bind(&ro, MountMode::ReadWrite), "allowed-rw-mounts"),
            (bind(&other, MountMode::ReadOnly), "allowed-ro-mounts"),
            (
                bind(&ro.join("link-out"), MountMode::ReadOnly),
                "allowed-ro-mounts",
            ),
            (
                bind(&ro.join("missing"), MountMode::ReadOnly),
                "cannot resolve",
            ),
        ] {
            let e = p.admit(req(vec![m.clone()], false)).unwrap_err();
            assert!(e.to_string().contains(why), "{m:?}: {e}");
        }
    }

    #[test]
    fn runtimes_and_privilege_follow_the_policy() {
        let d = tempfile::tempdir().unwrap();
        let mut p = policy(d.path(), d.path());
        assert_eq!(
            p.admit(req(vec![], true)).unwrap_err(),
            RuntimeRefusal::PrivilegedNotAllowed
        );
        p.privileged_allowed = true;
        assert!(p.admit(req(vec![], true)).unwrap().unwrap().privileged);
        p.allowed = BTreeSet::from([RuntimeKind::Default]);
        let e = p.admit(req(vec![], false)).unwrap_err();
        assert!(e.to_string().contains("'runc' is not allowed"), "{e}");
        assert_eq!(p.admit(None), Ok(None));
        p.allowed = BTreeSet::from([RuntimeKind::Runc]);
        assert!(matches!(
            p.admit(None),
            Err(RuntimeRefusal::NotAllowed { .. })
        ));
    }
}
