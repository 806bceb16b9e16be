//! Shipping the user's code to the containers (`--files`, `--archives`, `--src-dir`, the
//! distributed shell's `--shell_script`).
//!
//! Spindle has no distributed file system. By default the client uploads what it ships to
//! the RM's blob store (`upload`: each file hashed, asked for by digest first, sent only when
//! the RM does not hold it for the caller, streamed from disk; the packed `--src-dir` is
//! written to a temp file of the client's and removed once sent) and names each one a local
//! resource `spindle-rm:///blobs/sha256:<hex>` the NMs download from the RM and verify.
//! A site with a file system every NM reads sets the yarn-site property
//! [`STAGING_DIR_PROPERTY`] (or the client passes `--staging-dir`): then the client copies
//! what it ships into `<staging>/<user>/<application id>/` there and names each copy a
//! `file://` resource, as before. "Configured" means set and not empty; unset, the RM route
//! is taken ([`resolve_staging_root`] answers `None`). The NM localizes either
//! (`nodemanager::launcher::localize`): a FILE is copied into the container's working
//! directory under its name, an ARCHIVE (`.tar`, `.tar.gz`, `.tgz`) unpacked into a directory
//! of that name, and the packed `--src-dir` unpacked into the working directory itself (the
//! reserved key [`SRC_DIR_KEY`], `.`), so that `python3 train.py` finds `train.py`.
//!
//! The client hands the AM the resources and the staging directory in its environment
//! ([`ENV_LOCAL_RESOURCES`], [`ENV_STAGING_DIR`]). The AM removes the staging directory when
//! it unregisters (success or failure); the client removes it when the submission fails, and
//! once more when it has followed the application to its end (a killed application's AM
//! does not unregister). Whoever ends the application (a `--detach`ed one killed with
//! `application -kill` too), the NMs that ran its containers remove
//! `<staging root>/<user>/<application id>` under their configured root when the RM tells
//! them it is over (`nodemanager::manager`, with the application's local dirs).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use spindle_common::ids::ApplicationId;
use spindle_common::paths::link_stays_inside;
use spindle_common::records::cluster::{ApplicationSubmissionContext, KeyValue, LocalResourceInfo};

mod upload;

/// The AM environment entry carrying the workers' local resources, a JSON object of
/// key -> YARN `LocalResource` (`resource`, `type`, `visibility`, `size`, `timestamp`).
pub const ENV_LOCAL_RESOURCES: &str = "SPINDLE_LOCAL_RESOURCES";
/// The AM environment entry naming the staging directory the AM removes when it ends.
pub const ENV_STAGING_DIR: &str = "SPINDLE_STAGING_DIR";
/// The yarn-site property naming the staging root.
pub const STAGING_DIR_PROPERTY: &str = spindle_common::config::keys::CLIENT_STAGING_DIR;
/// The local resource key of the packed `--src-dir`: an ARCHIVE under this key is unpacked
/// into the container's working directory itself (the NM's `WORK_DIR_KEY`).
pub const SRC_DIR_KEY: &str = ".";
/// The packed `--src-dir`'s file name in the staging directory.
pub const SRC_ARCHIVE_NAME: &str = ".spindle-src.tar.gz";

pub use spindle_common::paths::default_staging_root;

/// What a client ships, and where it stages it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shipment {
    /// `--files`: (name in the working directory, local path). `a.py#b.py` names it `b.py`.
    pub files: Vec<(String, PathBuf)>,
    /// `--archives`: (directory it is unpacked into, local path).
    pub archives: Vec<(String, PathBuf)>,
    /// `--src-dir`: packed and unpacked into the working directory itself.
    pub src_dir: Option<PathBuf>,
    /// A shared staging root (`<root>/<user>/<application id>/`); `None`: uploaded to the
    /// RM's blob store.
    pub staging_root: Option<PathBuf>,
    pub user: String,
}

/// Why the client cannot ship what it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum ShipError {
    #[error("{option} {path}: no such file")]
    NotFound { option: &'static str, path: String },
    #[error("{option} {path}: not a regular file")]
    NotAFile { option: &'static str, path: String },
    #[error("--src-dir {path}: not a directory")]
    NotADirectory { path: String },
    #[error(
        "--archives {path}: archive format not supported (only .tar, .tar.gz and .tgz; zip and \
         jar are not)"
    )]
    ArchiveFormat { path: String },
    #[error(
        "{option} '{name}': a shipped name must be a plain file name (no '/', not '.' or '..')"
    )]
    BadName { option: &'static str, name: String },
    #[error("'{name}' is shipped twice (--files and --archives names must differ)")]
    Duplicate { name: String },
    #[error("cannot stage into {path}: {source}")]
    Staging { path: String, source: io::Error },
    #[error("cannot pack --src-dir {path}: {source}")]
    Pack { path: String, source: io::Error },
    #[error("cannot read {STAGING_DIR_PROPERTY}: {0}")]
    Config(Box<crate::address::AddressError>),
    #[error("cannot read {path} to send it: {source}")]
    Read { path: String, source: io::Error },
    #[error("cannot send {name} to the ResourceManager: {source}")]
    Upload {
        name: String,
        source: Box<crate::error::ClientError>,
    },
    #[error("the ResourceManager stored {name} as {got}, but the client hashed {sent}")]
    Stored {
        name: String,
        sent: String,
        got: String,
    },
}

/// The shared staging root: `--staging-dir`, else [`STAGING_DIR_PROPERTY`] in the
/// configuration directory's yarn-site.xml (set and not empty), made absolute; `None` when
/// neither names one: shipped files go through the RM's blob store.
pub fn resolve_staging_root(
    flag: Option<&str>,
    conf_dir: Option<&Path>,
) -> Result<Option<PathBuf>, ShipError> {
    let given = match flag.filter(|f| !f.trim().is_empty()) {
        Some(f) => Some(f.to_string()),
        None => {
            let dir = spindle_common::config::Configuration::resolve_conf_dir(conf_dir);
            let conf =
                crate::address::load_conf_dir(&dir).map_err(|e| ShipError::Config(Box::new(e)))?;
            conf.get(STAGING_DIR_PROPERTY)
                .map_err(|e| {
                    ShipError::Config(Box::new(crate::address::AddressError::Config {
                        dir,
                        error: Box::new(e),
                    }))
                })?
                .filter(|v| !v.trim().is_empty())
        }
    };
    let Some(root) = given.map(|g| PathBuf::from(g.trim())) else {
        return Ok(None);
    };
    std::path::absolute(&root)
        .map(Some)
        .map_err(|source| ShipError::Staging {
            path: root.display().to_string(),
            source,
        })
}

/// `--files a,b#c` / `--archives x.tgz#data`: (name, path) pairs.
pub fn parse_list(option: &'static str, list: &str) -> Result<Vec<(String, PathBuf)>, ShipError> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (path, name) = match item.split_once('#') {
            Some((p, n)) => (p, n.to_string()),
            None => (
                item,
                Path::new(item)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            ),
        };
        let plain = Path::new(&name).components().count() == 1
            && matches!(
                Path::new(&name).components().next(),
                Some(Component::Normal(_))
            )
            && !name.contains('/');
        if !plain {
            return Err(ShipError::BadName { option, name });
        }
        out.push((name, PathBuf::from(path)));
    }
    Ok(out)
}

/// Whether `path` names an archive format the NMs unpack (`.tar`, `.tar.gz`, `.tgz`).
pub fn is_supported_archive(path: &Path) -> bool {
    let n = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    n.ends_with(".tar") || n.ends_with(".tar.gz") || n.ends_with(".tgz")
}

/// What was staged (or uploaded) for one application.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Staged {
    /// `<root>/<user>/<application id>` in a shared staging root; `None` when uploaded to
    /// the RM (which removes what no application uses).
    pub dir: Option<PathBuf>,
    /// Every worker's local resources.
    pub resources: BTreeMap<String, LocalResourceInfo>,
    /// Symbolic links of `--src-dir` left out because they point outside it.
    pub skipped_links: Vec<String>,
}

impl Shipment {
    /// A shipment staged under the shared `staging_root`, or (`None`) uploaded to the RM,
    /// for the current user.
    pub fn new(staging_root: Option<PathBuf>) -> Self {
        Self {
            staging_root,
            user: crate::current_user(),
            ..Default::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.archives.is_empty() && self.src_dir.is_none()
    }

    /// Checks everything before anything is submitted: each path exists and is what its
    /// option says, archives are of a format the NMs unpack, no name is shipped twice.
    pub fn validate(&self) -> Result<(), ShipError> {
        let mut names = std::collections::BTreeSet::new();
        for (option, list) in [("--files", &self.files), ("--archives", &self.archives)] {
            for (name, path) in list {
                let shown = path.display().to_string();
                let meta = fs::metadata(path).map_err(|_| ShipError::NotFound {
                    option,
                    path: shown.clone(),
                })?;
                if !meta.is_file() {
                    return Err(ShipError::NotAFile {
                        option,
                        path: shown,
                    });
                }
                if option == "--archives" && !is_supported_archive(path) {
                    return Err(ShipError::ArchiveFormat { path: shown });
                }
                if name == SRC_ARCHIVE_NAME || !names.insert(name.clone()) {
                    return Err(ShipError::Duplicate { name: name.clone() });
                }
            }
        }
        if let Some(d) = &self.src_dir {
            let shown = d.display().to_string();
            match fs::metadata(d) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(ShipError::NotADirectory { path: shown }),
                Err(_) => {
                    return Err(ShipError::NotFound {
                        option: "--src-dir",
                        path: shown,
                    })
                }
            }
        }
        Ok(())
    }

    /// `<root>/<user>/<app_id>` (an unset root or user: the default root, the current user).
    pub fn dir_for(&self, app_id: &ApplicationId) -> PathBuf {
        let user = match self.user.trim() {
            "" => crate::current_user(),
            u => u.to_string(),
        };
        self.root().join(user).join(app_id.to_string())
    }

    fn root(&self) -> PathBuf {
        match &self.staging_root {
            Some(r) if !r.as_os_str().is_empty() => r.clone(),
            _ => default_staging_root(),
        }
    }

    /// Copies (and packs) everything into the application's staging directory; on failure
    /// what was staged is removed.
    pub fn stage(&self, app_id: &ApplicationId) -> Result<Staged, ShipError> {
        self.validate()?;
        let dir = self.dir_for(app_id);
        let staged = self.stage_into(&dir);
        if staged.is_err() {
            let _ = fs::remove_dir_all(&dir);
        }
        staged
    }

    fn stage_into(&self, dir: &Path) -> Result<Staged, ShipError> {
        let staging = |path: &Path| {
            let path = path.display().to_string();
            move |source| ShipError::Staging { path, source }
        };
        let root = self.root();
        if !root.exists() {
            fs::create_dir_all(&root).map_err(staging(&root))?;
            // Shared by every user, as /tmp: each one makes its own directory in it.
            fs::set_permissions(&root, fs::Permissions::from_mode(0o1777))
                .map_err(staging(&root))?;
        }
        fs::create_dir_all(dir).map_err(staging(dir))?;
        let mut staged = Staged {
            dir: Some(dir.to_path_buf()),
            ..Default::default()
        };
        for (kind, list) in [("FILE", &self.files), ("ARCHIVE", &self.archives)] {
            for (name, path) in list {
                let to = dir.join(name);
                fs::copy(path, &to).map_err(staging(&to))?;
                staged.resources.insert(name.clone(), resource(&to, kind)?);
            }
        }
        if let Some(src) = &self.src_dir {
            let to = dir.join(SRC_ARCHIVE_NAME);
            staged.skipped_links = pack_dir(src, &to).map_err(|source| ShipError::Pack {
                path: src.display().to_string(),
                source,
            })?;
            staged
                .resources
                .insert(SRC_DIR_KEY.into(), resource(&to, "ARCHIVE")?);
        }
        Ok(staged)
    }
}

fn resource(path: &Path, kind: &str) -> Result<LocalResourceInfo, ShipError> {
    let meta = fs::metadata(path).map_err(|source| ShipError::Staging {
        path: path.display().to_string(),
        source,
    })?;
    // The NMs read it from elsewhere: always an absolute file:// URL.
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    Ok(LocalResourceInfo {
        resource: file_url(&abs),
        kind: kind.into(),
        visibility: "APPLICATION".into(),
        size: i64::try_from(meta.len()).unwrap_or(i64::MAX),
        timestamp: meta.mtime().saturating_mul(1000),
    })
}

/// `file:///a/b%20c`: each component percent-encoded, as the NM decodes it.
pub fn file_url(abs: &Path) -> String {
    let parts: Vec<String> = abs
        .components()
        .filter_map(|c| match c {
            Component::Normal(p) => Some(urlencoding::encode(&p.to_string_lossy()).into_owned()),
            _ => None,
        })
        .collect();
    format!("file:///{}", parts.join("/"))
}

/// Packs the directory `src` into the `.tar.gz` `to`, its entries relative to `src`.
/// Symbolic links stay links when they point inside `src`; those pointing outside are left
/// out (the NM would refuse them) and returned.
pub fn pack_dir(src: &Path, to: &Path) -> io::Result<Vec<String>> {
    let file = fs::File::create(to)?;
    let gz = flate2::write::GzEncoder::new(io::BufWriter::new(file), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    b.follow_symlinks(false);
    let mut skipped = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut entries: Vec<fs::DirEntry> =
            fs::read_dir(src.join(&rel))?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = rel.join(e.file_name());
            let path = e.path();
            let ft = e.file_type()?;
            if ft.is_dir() {
                // Writable by its owner whatever it was here: the NM unpacks into it.
                let meta = fs::metadata(&path)?;
                let mut h = tar::Header::new_gnu();
                h.set_metadata(&meta);
                h.set_mode((meta.mode() & 0o7777) | 0o700);
                b.append_data(&mut h, &name, io::empty())?;
                stack.push(name);
            } else if ft.is_symlink() {
                let target = fs::read_link(&path)?;
                let depth = name.components().count().saturating_sub(1);
                if !link_stays_inside(depth, &target) {
                    skipped.push(format!("{} -> {}", name.display(), target.display()));
                    continue;
                }
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                h.set_mode(0o777);
                if b.append_link(&mut h, &name, &target).is_err() {
                    skipped.push(format!("{} -> {}", name.display(), target.display()));
                }
            } else if ft.is_file() {
                b.append_path_with_name(&path, &name)?;
            }
            // Sockets, fifos and devices are not code: left out.
        }
    }
    b.into_inner()?.finish()?;
    Ok(skipped)
}

impl Staged {
    /// The AM environment entries that carry this staging to the AM.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![(
            ENV_LOCAL_RESOURCES.into(),
            serde_json::to_string(&self.resources).unwrap_or_else(|_| "{}".into()),
        )];
        if let Some(dir) = &self.dir {
            env.push((ENV_STAGING_DIR.into(), dir.display().to_string()));
        }
        env
    }

    /// Removes the staging directory (gone already, or none, is fine).
    pub fn remove(&self) -> io::Result<()> {
        self.dir.as_deref().map_or(Ok(()), remove_dir)
    }
}

fn remove_dir(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The launcher's step between the application id and the submission: stages `ship` (when
/// something is shipped) for `app_id` (into the shared staging root, else uploaded to the RM
/// `rm`) and hands it to the AM in `ctx`'s environment, saying what was done.
pub async fn stage_for_submission(
    ship: Option<&Shipment>,
    app_id: &ApplicationId,
    ctx: &mut ApplicationSubmissionContext,
    rm: &crate::rm_client::RmClient,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<Option<Staged>, ShipError> {
    let Some(ship) = ship.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let staged = match &ship.staging_root {
        Some(_) => ship.stage(app_id)?,
        None => upload::upload(ship, app_id, rm, out).await?,
    };
    let env = ctx
        .am_container_spec
        .environment
        .get_or_insert_with(Default::default);
    env.entry.0.extend(
        staged
            .env()
            .into_iter()
            .map(|(key, value)| KeyValue { key, value }),
    );
    if let Some(dir) = &staged.dir {
        let names: Vec<&str> = staged
            .resources
            .keys()
            .map(|k| {
                if k == SRC_DIR_KEY {
                    "the --src-dir"
                } else {
                    k.as_str()
                }
            })
            .collect();
        out(&format!(
            "Staged {} for the containers in {}",
            names.join(", "),
            dir.display()
        ));
    }
    for l in &staged.skipped_links {
        out(&format!(
            "warning: --src-dir: left out the symbolic link {l}: it points outside the directory"
        ));
    }
    Ok(Some(staged))
}

/// Removes what [`stage_for_submission`] staged when the submission failed.
pub fn unstage(staged: Option<&Staged>) {
    if let Some(s) = staged {
        if let Err(e) = s.remove() {
            tracing::warn!(dir = ?s.dir, error = %e, "cannot remove the staging directory");
        }
    }
}

/// After the client saw the application end: removes its staging directory if the AM did
/// not (a killed application's AM never unregisters).
pub fn clean_after_end(ship: Option<&Shipment>, app_id: &ApplicationId) {
    if let Some(s) = ship.filter(|s| !s.is_empty() && s.staging_root.is_some()) {
        let _ = remove_dir(&s.dir_for(app_id));
    }
}

/// What an AM was handed: its workers' local resources and the staging directory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shipped {
    pub resources: BTreeMap<String, LocalResourceInfo>,
    pub staging_dir: Option<PathBuf>,
}

/// Why the AM cannot read what the client shipped.
#[derive(Debug, thiserror::Error)]
pub enum ShippedError {
    #[error("environment variable {ENV_LOCAL_RESOURCES}='{value}' is invalid: {reason}")]
    Resources { value: String, reason: String },
    #[error(
        "environment variable {ENV_STAGING_DIR}='{value}' is not a staging directory of \
         application {app}"
    )]
    StagingDir { value: String, app: ApplicationId },
}

impl Shipped {
    /// Reads [`ENV_LOCAL_RESOURCES`] and [`ENV_STAGING_DIR`]; the staging directory must be
    /// absolute and named after `app` (the AM removes it: nothing else may be named).
    pub fn from_lookup(
        app: ApplicationId,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ShippedError> {
        let resources = match lookup(ENV_LOCAL_RESOURCES).filter(|v| !v.trim().is_empty()) {
            Some(v) => serde_json::from_str(&v).map_err(|e| ShippedError::Resources {
                value: v.clone(),
                reason: format!("not a JSON object of local resources: {e}"),
            })?,
            None => BTreeMap::new(),
        };
        let staging_dir = match lookup(ENV_STAGING_DIR).filter(|v| !v.trim().is_empty()) {
            Some(v) => {
                let p = PathBuf::from(&v);
                let named = p.file_name().is_some_and(|n| *n == *app.to_string());
                if !p.is_absolute() || !named {
                    return Err(ShippedError::StagingDir { value: v, app });
                }
                Some(p)
            }
            None => None,
        };
        Ok(Self {
            resources,
            staging_dir,
        })
    }

    pub fn from_env(app: ApplicationId) -> Result<Self, ShippedError> {
        Self::from_lookup(app, |k| std::env::var(k).ok())
    }

    /// Removes the staging directory, if any; a line saying what happened.
    pub fn clean_up(&self) -> Option<String> {
        let dir = self.staging_dir.as_ref()?;
        Some(match remove_dir(dir) {
            Ok(()) => format!("removed the staging directory {}", dir.display()),
            Err(e) => format!("cannot remove the staging directory {}: {e}", dir.display()),
        })
    }
}

/// The client's warning when the command's program (or, for an interpreter such as
/// `python3 train.py`, its first argument) is a relative path found in `cwd` and nothing is
/// shipped: the containers will not have it.
pub fn unshipped_program_warning(command: &[String], cwd: &Path) -> Option<String> {
    let mut candidates: Vec<&str> = command.first().map(String::as_str).into_iter().collect();
    if let Some(arg) = command.get(1).filter(|a| !a.starts_with('-')) {
        candidates.push(arg);
    }
    let word = candidates.into_iter().find(|w| {
        let p = Path::new(w);
        !w.is_empty() && !p.is_absolute() && fs::symlink_metadata(cwd.join(p)).is_ok()
    })?;
    Some(format!(
        "warning: '{word}' is in the current directory, but nothing is shipped to the \
         containers (--files, --archives, --src-dir): the workers will not find it there. Ship \
         it with --src-dir . (the whole directory) or --files {word}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_with_aliases_and_refuse_paths_as_names() {
        let l = parse_list("--files", "a/b.py, c.txt#d.txt,").unwrap();
        assert_eq!(
            l,
            vec![
                ("b.py".to_string(), PathBuf::from("a/b.py")),
                ("d.txt".to_string(), PathBuf::from("c.txt")),
            ]
        );
        for bad in ["x#a/b", "x#..", "x#.", "x#", "/"] {
            assert!(
                matches!(parse_list("--files", bad), Err(ShipError::BadName { .. })),
                "{bad}"
            );
        }
        assert!(is_supported_archive(Path::new("a/b.TGZ")));
        assert!(is_supported_archive(Path::new("b.tar")));
        assert!(!is_supported_archive(Path::new("b.zip")));
    }

    #[test]
    fn staging_copies_packs_and_names_every_resource() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("code");
        fs::create_dir_all(src.join("pkg")).unwrap();
        fs::write(src.join("train.py"), "print(1)").unwrap();
        fs::write(src.join("pkg/m.py"), "x").unwrap();
        std::os::unix::fs::symlink("../train.py", src.join("pkg/in")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.join("out")).unwrap();
        fs::set_permissions(src.join("pkg"), fs::Permissions::from_mode(0o555)).unwrap();
        let f = d.path().join("conf.yaml");
        fs::write(&f, "a: 1").unwrap();
        let a = d.path().join("data.tgz");
        pack_dir(&src.join("pkg"), &a).unwrap();
        let mut s = Shipment::new(Some(d.path().join("staging")));
        s.user = "alice".into();
        s.files = vec![("conf.yaml".into(), f.clone())];
        s.archives = vec![("data.tgz".into(), a.clone())];
        s.src_dir = Some(src.clone());
        let app: ApplicationId = "application_7_0003".parse().unwrap();
        let st = s.stage(&app).unwrap();
        assert_eq!(
            st.dir.as_deref(),
            Some(d.path().join("staging/alice/application_7_0003").as_path())
        );
        let st_dir = st.dir.clone().unwrap();
        let keys: Vec<&str> = st.resources.keys().map(String::as_str).collect();
        assert_eq!(keys, [".", "conf.yaml", "data.tgz"]);
        assert_eq!(st.resources["."].kind, "ARCHIVE");
        assert_eq!(st.resources["conf.yaml"].kind, "FILE");
        assert_eq!(st.skipped_links, ["out -> /etc/passwd"]);
        assert!(st_dir.join("conf.yaml").is_file());
        // The packed directory holds the code at its root, links inside kept.
        let gz =
            flate2::read::GzDecoder::new(fs::File::open(st_dir.join(SRC_ARCHIVE_NAME)).unwrap());
        let mut names: Vec<(String, u32)> = tar::Archive::new(gz)
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let mode = e.header().mode().unwrap();
                (e.path().unwrap().display().to_string(), mode)
            })
            .collect();
        names.sort();
        let paths: Vec<&str> = names.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["pkg", "pkg/in", "pkg/m.py", "train.py"]);
        // A read-only directory is packed writable by its owner: the NM unpacks into it.
        assert_eq!(names[0].1 & 0o777, 0o755);
        fs::set_permissions(src.join("pkg"), fs::Permissions::from_mode(0o755)).unwrap();
        // The AM reads it back and removes the directory.
        let env: BTreeMap<String, String> = st.env().into_iter().collect();
        let back = Shipped::from_lookup(app, |k| env.get(k).cloned()).unwrap();
        assert_eq!(back.resources, st.resources);
        assert!(back.clean_up().unwrap().starts_with("removed"));
        assert!(!st_dir.exists());
        // Not this application's directory: refused, so the AM removes nothing else.
        let other: ApplicationId = "application_7_0004".parse().unwrap();
        assert!(matches!(
            Shipped::from_lookup(other, |k| env.get(k).cloned()),
            Err(ShippedError::StagingDir { .. })
        ));
    }

    #[test]
    fn urls_are_encoded_as_the_nm_decodes_them() {
        assert_eq!(
            file_url(Path::new("/tmp/a b/50%.tgz")),
            "file:///tmp/a%20b/50%25.tgz"
        );
        assert_eq!(file_url(Path::new("/x")), "file:///x");
    }

    #[test]
    fn mistakes_are_named_before_submission() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x.zip");
        fs::write(&f, "PK").unwrap();
        let mut s = Shipment::new(Some(d.path().to_path_buf()));
        s.archives = vec![("x.zip".into(), f.clone())];
        assert!(matches!(s.validate(), Err(ShipError::ArchiveFormat { .. })));
        s.archives.clear();
        s.files = vec![("a".into(), d.path().join("none"))];
        assert!(matches!(s.validate(), Err(ShipError::NotFound { .. })));
        s.files = vec![("a".into(), f.clone()), ("a".into(), f.clone())];
        assert!(matches!(s.validate(), Err(ShipError::Duplicate { .. })));
        s.files.clear();
        s.src_dir = Some(f);
        assert!(matches!(s.validate(), Err(ShipError::NotADirectory { .. })));
    }

    #[test]
    fn an_unshipped_local_program_is_named() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("train.py"), "").unwrap();
        let words = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        let w = unshipped_program_warning(&words("python3 train.py --lr 1"), d.path()).unwrap();
        assert!(w.contains("'train.py'"), "{w}");
        assert!(
            w.contains("--src-dir .") && w.contains("--files train.py"),
            "{w}"
        );
        assert!(unshipped_program_warning(&words("./train.py"), d.path()).is_some());
        assert!(unshipped_program_warning(&words("python3 -c x"), d.path()).is_none());
        assert!(unshipped_program_warning(&words("/bin/sh train.py"), d.path()).is_some());
        assert!(unshipped_program_warning(&words("/bin/sh run.sh"), d.path()).is_none());
        assert!(unshipped_program_warning(&words("python3 missing.py"), d.path()).is_none());
        assert!(unshipped_program_warning(&words("python3 /abs/train.py"), d.path()).is_none());
    }
}
