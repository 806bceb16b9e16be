//! Container isolation on real cgroups, through the real launch path: the executor (for
//! device and CPU limits, which need a hand-made `IsolationSpec`) and an in-process NM against
//! a fake RM (for the OOM kill's -104 reaching the RM, and the memory watcher without
//! cgroups).
//!
//! The cgroup tests need root and mounted cgroups; without them each prints why and returns,
//! and fails under `CI=true` (`spindle_test_support::require`).
//! Each test uses its own hierarchy (`spindle-test-<pid>-<n>`, inside the test process's own
//! cgroups where v1 carries the limits, at the root on pure cgroup2), so parallel tests never
//! meet, and a guard kills and removes it
//! in every controller even when the test fails.

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spindle_common::ids::ContainerId;
use spindle_common::records::node::{ContainerLaunchContext, StartContainerRequest};
use spindle_common::records::resource::ResourceInfo;
use spindle_common::resource::Resource;
use spindle_common::states::ContainerState;
use spindle_nodemanager::cgroups::{Cgroups, Controller, Layout};
use spindle_nodemanager::containers::ProcessExit;
use spindle_nodemanager::isolation::{
    DeviceIsolation, DeviceNumber, IsolationConfig, IsolationSpec,
};
use spindle_nodemanager::launcher::{
    ContainerExecutor, Enforcement, LaunchSpec, ProcessExecutor, StartedProcess, StopSignal,
};
use spindle_test_support::require;
use support::cgroups::{cgroups_or_skip, Hierarchy};
use support::*;

/// A LaunchSpec for an executor-level test, with its dirs under `base`.
fn spec(base: &Path, id: ContainerId, command: &str, isolation: IsolationSpec) -> LaunchSpec {
    let app = base.join("app");
    let work_dir = app.join(id.to_string());
    let mut env = BTreeMap::new();
    if let Ok(p) = std::env::var("PATH") {
        env.insert("PATH".to_string(), p);
    }
    LaunchSpec {
        container_id: id,
        user: "alice".into(),
        command: command.into(),
        env,
        work_dir,
        app_local_dirs: vec![app],
        log_dirs: vec![base.join("logs").join(id.to_string())],
        local_resources: BTreeMap::new(),
        isolation,
        run_as: None,
        fetch_token: None,
    }
}

fn limits(vcores: i64, memory_mb: i64) -> IsolationSpec {
    IsolationSpec {
        vcores,
        memory_mb,
        pids_max: 256,
        ..Default::default()
    }
}

/// The node's cgroups for `conf` (as root) and an executor that puts containers in them.
fn cgroup_executor(layout: &Layout, conf: &IsolationConfig) -> (Arc<Cgroups>, ProcessExecutor) {
    let cg = Arc::new(Cgroups::new(layout, conf, "nm-test").expect("cgroups as root"));
    let ex = ProcessExecutor::with_enforcement(Enforcement::Cgroups {
        cgroups: Arc::clone(&cg),
        interval: Duration::from_millis(100),
    });
    (cg, ex)
}

async fn launch(ex: &ProcessExecutor, s: &LaunchSpec) -> StartedProcess {
    ex.prepare(s).expect("prepare");
    ex.start(s, false).expect("start")
}

async fn wait_exit(p: StartedProcess) -> ProcessExit {
    tokio::time::timeout(WAIT, p.exit)
        .await
        .expect("container did not end in time")
}

/// Makes `/dev/nvidia0..3`-like nodes (major 195) in `dir`; None (after saying why) if the
/// machine cannot (no mknod, or device nodes do not work on this file system).
fn fake_gpus(dir: &Path, test: &str) -> Option<()> {
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    for minor in 0..4 {
        let p = dir.join(format!("nvidia{minor}"));
        if let Err(e) = mknod(
            &p,
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o666),
            makedev(195, minor),
        ) {
            require::skip(test, format_args!("cannot mknod {}: {e}", p.display()));
            return None;
        }
    }
    // Outside any container the node must reach the (absent) driver: ENXIO, not EACCES
    // (a nodev mount) and not EPERM (a devices cgroup around the test itself).
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("nvidia2"))
    {
        Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => Some(()),
        other => {
            require::skip(
                test,
                format_args!("opening a fresh major-195 node gives {other:?}, not ENXIO"),
            );
            None
        }
    }
}

const OPEN_EACH_GPU: &str = r#"for i in 0 1 2 3; do if (exec 3<>"$GPUS/nvidia$i") 2>err$i; then echo "$i opened"; else echo "$i $(cat err$i)"; fi; done > result"#;

/// Granted GPU 2 only: opening it reaches the driver (ENXIO, there is none), the other three
/// are refused by the cgroup (EPERM).
async fn a_container_sees_only_its_gpu(test: &str, devices: DeviceIsolation) {
    let Some(layout) = cgroups_or_skip(test) else {
        return;
    };
    let h = Hierarchy::new(&layout);
    let dir = tempfile::tempdir().unwrap();
    let gpus = dir.path().join("dev");
    std::fs::create_dir(&gpus).unwrap();
    if fake_gpus(&gpus, test).is_none() {
        return;
    }
    let conf = IsolationConfig {
        device_isolation: devices,
        ..h.config()
    };
    let cg = match Cgroups::new(&layout, &conf, "nm-test") {
        Ok(c) => c,
        Err(e) => panic!("{test}: cgroups unusable as root: {e}"),
    };
    if let Err(reason) = cg.device_isolation() {
        require::skip(test, reason);
        return;
    }
    let cg = Arc::new(cg);
    let ex = ProcessExecutor::with_enforcement(Enforcement::Cgroups {
        cgroups: Arc::clone(&cg),
        interval: Duration::from_millis(100),
    });
    let id = cid(40, 1);
    let mut iso = limits(1, 128);
    iso.denied_devices = [0, 1, 3].map(|m| DeviceNumber::char(195, m)).to_vec();
    iso.granted_devices = vec![DeviceNumber::char(195, 2)];
    let mut s = spec(dir.path(), id, OPEN_EACH_GPU, iso);
    s.env.insert("GPUS".into(), gpus.display().to_string());
    let p = launch(&ex, &s).await;
    assert_eq!(wait_exit(p).await, ProcessExit::Code(0));
    let result = std::fs::read_to_string(s.work_dir.join("result")).unwrap();
    let lines: Vec<&str> = result.lines().collect();
    assert_eq!(lines.len(), 4, "{result}");
    for (i, line) in lines.iter().enumerate() {
        let want = if i == 2 {
            "No such device or address"
        } else {
            "Operation not permitted"
        };
        assert!(line.contains(want), "nvidia{i}: want {want}: {result}");
    }
    // The container's cgroups went with it; the NM's own dirs go at shutdown.
    assert!(cg
        .container_dir(Controller::Memory, &id)
        .is_some_and(|d| !d.exists()));
    cg.shutdown();
    assert!(h.gone(), "cgroups left behind: {:?}", h.dirs());
}

#[tokio::test]
async fn gpu_devices_are_denied_with_the_v1_devices_controller() {
    a_container_sees_only_its_gpu("v1 devices", DeviceIsolation::V1).await;
}

/// The cgroup2 path: on a hybrid machine the eBPF program works beside the v1 controllers, so
/// it is tested here too (skipped where no cgroup2 is mounted or BPF cannot be loaded).
#[tokio::test]
async fn gpu_devices_are_denied_with_an_ebpf_device_program() {
    a_container_sees_only_its_gpu("ebpf devices", DeviceIsolation::Ebpf).await;
}

/// CPU time of the processes in a cgroup, in seconds (utime + stime from /proc).
fn cgroup_cpu_seconds(dir: &Path) -> f64 {
    let hz = 100.0; // USER_HZ is 100 on every Linux ABI
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).ok())
        .filter_map(|st| {
            let rest = st.get(st.rfind(')')? + 1..)?.to_string();
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ut: f64 = f.get(11)?.parse().ok()?;
            let stime: f64 = f.get(12)?.parse().ok()?;
            Some((ut + stime) / hz)
        })
        .sum()
}

/// Two busy loops in a 1-vcore container under strict usage: the CFS quota throttles it, and
/// it gets about one core (an unthrottled one would take both cores of a 2-core machine).
#[tokio::test]
async fn a_strict_one_vcore_container_is_throttled_to_one_core() {
    let test = "strict cpu";
    let Some(layout) = cgroups_or_skip(test) else {
        return;
    };
    let h = Hierarchy::new(&layout);
    let conf = IsolationConfig {
        strict_cpu: true,
        ..h.config()
    };
    let (cg, ex) = cgroup_executor(&layout, &conf);
    let dir = tempfile::tempdir().unwrap();
    let id = cid(41, 1);
    let mut iso = limits(1, 128);
    iso.strict_cpu = true;
    let s = spec(
        dir.path(),
        id,
        "cat /proc/self/cgroup > cgroups; (while :; do :; done) & (while :; do :; done) & wait",
        iso,
    );
    let p = launch(&ex, &s).await;
    let cpu_dir = cg.container_dir(Controller::Cpu, &id).unwrap();
    // The command ran inside its cgroups from its first instruction.
    let own = read_when_written(&s.work_dir.join("cgroups")).await;
    assert!(own.contains(&id.to_string()), "{own}");
    wait_until("both loops to run", || {
        let n = std::fs::read_to_string(cpu_dir.join("cgroup.procs")).unwrap_or_default();
        (n.lines().count() >= 3).then_some(())
    })
    .await;

    let stat0 = cg.cpu_stat(&id);
    let (t0, c0) = (Instant::now(), cgroup_cpu_seconds(&cpu_dir));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (dt, dc) = (
        t0.elapsed().as_secs_f64(),
        cgroup_cpu_seconds(&cpu_dir) - c0,
    );
    let stat1 = cg.cpu_stat(&id);
    let cores = dc / dt;
    eprintln!("{test}: {cores:.2} cores over {dt:.1} s; cpu.stat {stat0:?} -> {stat1:?}");
    let throttled = |s: &BTreeMap<String, u64>| s.get("nr_throttled").copied().unwrap_or(0);
    // The quota is one core per period (v1 cpu.cfs_quota_us = period, v2 cpu.max "q p").
    let quota = std::fs::read_to_string(cpu_dir.join("cpu.max"))
        .ok()
        .and_then(|t| {
            let mut w = t.split_whitespace();
            Some((
                w.next()?.parse::<i64>().ok()?,
                w.next()?.parse::<i64>().ok()?,
            ))
        })
        .or_else(|| {
            let q = std::fs::read_to_string(cpu_dir.join("cpu.cfs_quota_us")).ok()?;
            let p = std::fs::read_to_string(cpu_dir.join("cpu.cfs_period_us")).ok()?;
            Some((q.trim().parse().ok()?, p.trim().parse().ok()?))
        });
    assert!(
        matches!(quota, Some((q, p)) if q == p),
        "a 1-vcore strict container's quota: {quota:?}"
    );
    // Two busy loops against a one-core quota are throttled, unless the machine was too busy
    // to give them even a core (other tests run alongside): then the quota never bit.
    if cores > 0.9 {
        assert!(
            throttled(&stat1) > throttled(&stat0),
            "{stat0:?} -> {stat1:?}"
        );
    } else {
        eprintln!("{test}: the machine was busy ({cores:.2} cores); the quota was not reached");
    }
    assert!(
        cores < 1.25,
        "a 1-vcore strict container used {cores:.2} cores"
    );
    assert!(cores > 0.25, "the container barely ran: {cores:.2} cores");

    ex.signal(&p.handle, StopSignal::Kill).unwrap();
    assert!(matches!(wait_exit(p).await, ProcessExit::Signal(9)));
    assert!(!cpu_dir.exists(), "the container's cgroup outlived it");
    cg.shutdown();
    assert!(h.gone(), "cgroups left behind: {:?}", h.dirs());
}

/// With LinuxContainerExecutor's run-as (here `nobody`), the container runs as that user,
/// owns its work dir and logs, and cannot move itself out of its cgroups (a root container
/// could, by writing its pid to another cgroup's `cgroup.procs`).
#[tokio::test]
async fn a_container_run_as_nobody_owns_its_dirs_and_cannot_leave_its_cgroups() {
    let test = "run as nobody";
    let Some(layout) = cgroups_or_skip(test) else {
        return;
    };
    let h = Hierarchy::new(&layout);
    let (cg, ex) = cgroup_executor(&layout, &h.config());
    let nobody = spindle_nodemanager::runas::Credentials::lookup("nobody").expect("nobody");
    let dir = tempfile::tempdir().unwrap();
    // The test's tempdir is root's 0700: let nobody reach the container's dirs beneath it.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let id = cid(47, 1);
    // Try to leave: write our pid into the hierarchy's parent cgroup (one level up).
    let escape = layout
        .v1_mount("memory")
        .or(layout.v2.as_ref())
        .map(|m| m.mount_point.join("cgroup.procs"))
        .expect("a memory or cgroup2 mount");
    let command = format!(
        "id -u > uid; touch mine; {{ echo $$ > {}; }} 2> escape.err; echo $? > escape.rc; cat /proc/self/cgroup > cgroups",
        escape.display()
    );
    let mut s = spec(dir.path(), id, &command, limits(1, 128));
    s.run_as = Some(nobody.clone());
    let p = launch(&ex, &s).await;
    assert_eq!(wait_exit(p).await, ProcessExit::Code(0));
    let read = |f: &str| std::fs::read_to_string(s.work_dir.join(f)).unwrap_or_default();
    assert_eq!(read("uid").trim(), nobody.uid.to_string());
    assert_ne!(read("escape.rc").trim(), "0", "nobody left its cgroup");
    assert!(
        read("escape.err").contains("Permission denied"),
        "{}",
        read("escape.err")
    );
    assert!(
        read("cgroups").contains(&id.to_string()),
        "{}",
        read("cgroups")
    );
    use std::os::unix::fs::MetadataExt;
    for p in [
        s.work_dir.clone(),
        s.work_dir.join("mine"),
        s.log_dirs[0].clone(),
        s.log_dirs[0].join("stdout"),
    ] {
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(
            (m.uid(), m.gid()),
            (nobody.uid, nobody.gid),
            "{}",
            p.display()
        );
    }
    cg.shutdown();
    assert!(h.gone(), "cgroups left behind: {:?}", h.dirs());
}

/// An NM crashed and left a running container in its cgroups: the next NM on the same local
/// dir reclaims them at start (kills what runs, removes the cgroups), and keeps the ones of
/// containers it re-adopts. Empty cgroups that other, long-gone NMs left are reclaimed too;
/// another NM's recent ones are not.
#[tokio::test]
async fn stale_cgroups_are_reclaimed_and_adopted_ones_kept() {
    let test = "reclaim";
    let Some(layout) = cgroups_or_skip(test) else {
        return;
    };
    let h = Hierarchy::new(&layout);
    let (cg, ex) = cgroup_executor(&layout, &h.config());
    let dir = tempfile::tempdir().unwrap();
    let (stale, kept) = (cid(42, 1), cid(42, 2));
    let a = launch(
        &ex,
        &spec(dir.path(), stale, "exec sleep 100", limits(1, 64)),
    )
    .await;
    let b = launch(
        &ex,
        &spec(dir.path(), kept, "exec sleep 100", limits(1, 64)),
    )
    .await;
    let (pa, pb) = (a.handle.clone(), b.handle.clone());
    // The "crash": nobody waits for them any more.
    drop((a.exit, b.exit));

    // What two other NMs left: a long-dead one's empty cgroups (reclaimed) and a live one's
    // just-made empty cgroup (kept: it may be about to receive its process).
    let hier_dir = cg
        .container_dir(Controller::Memory, &stale)
        .and_then(|d| d.parent()?.parent().map(Path::to_path_buf))
        .unwrap();
    let (dead, alive) = (hier_dir.join("nm-dead"), hier_dir.join("nm-alive"));
    for d in [dead.join("container_x"), alive.join("container_y")] {
        std::fs::create_dir_all(&d).unwrap();
    }
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(7200);
    for d in [dead.join("container_x"), dead.clone()] {
        std::fs::File::open(&d)
            .and_then(|f| f.set_modified(long_ago))
            .unwrap();
    }

    let cg2 = Cgroups::new(&layout, &h.config(), "nm-test").expect("cgroups as root");
    let ex2 = ProcessExecutor::with_enforcement(Enforcement::Cgroups {
        cgroups: Arc::new(cg2),
        interval: Duration::from_millis(100),
    });
    ex2.reclaim(&[kept]);
    assert!(cg
        .container_dir(Controller::Memory, &stale)
        .is_some_and(|d| !d.exists()));
    wait_until("the stale container's process to die", || {
        (!ex.is_alive(&pa)).then_some(())
    })
    .await;
    assert!(ex.is_alive(&pb), "the re-adopted container was killed");
    assert!(!dead.exists(), "an abandoned instance was not reclaimed");
    assert!(
        alive.join("container_y").exists(),
        "a live NM's cgroup was taken"
    );
    std::fs::remove_dir(alive.join("container_y")).unwrap();
    std::fs::remove_dir(&alive).unwrap();
    // It ends later: the adopting executor cleans up.
    ex.signal(&pb, StopSignal::Kill).unwrap();
    wait_until("the kept container to die", || {
        (!ex.is_alive(&pb)).then_some(())
    })
    .await;
    let exit = ex2.adopted_ended(&kept, 64, ProcessExit::Code(137));
    assert_eq!(exit, ProcessExit::Code(137));
    assert!(cg
        .container_dir(Controller::Memory, &kept)
        .is_some_and(|d| !d.exists()));
    ex2.shutdown();
    assert!(h.gone(), "cgroups left behind: {:?}", h.dirs());
    // Reap our children (their exit futures were dropped).
    for h in [pa, pb] {
        let (pid, _) = h.as_process_group().expect("a process group");
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
    }
}

/// Allocates ~200 MB in bash and then holds it.
const ALLOCATE_200M: &str = r#"x=$(head -c 200000000 /dev/zero | tr '\0' a); echo "still alive with ${#x} bytes"; sleep 30"#;

/// Starts a 64 MB container running `command` on `nm`.
async fn start_64mb(nm: &TestNm, rm: &FakeRm, id: ContainerId, command: &str) {
    let mut ident = nm.ident(id, "alice");
    ident.resource = ResourceInfo::from(&Resource::new(64, 1));
    let resp = nm
        .start_containers(vec![StartContainerRequest {
            container_token: rm.token(&ident),
            container_launch_context: ContainerLaunchContext {
                commands: vec![command.into()],
                ..Default::default()
            },
        }])
        .await;
    assert_eq!(resp.successfully_started_containers, vec![id], "{resp:?}");
}

/// Through the NM: a 64 MB container that allocates 200 MB is OOM-killed in its cgroup and
/// the RM hears -104 KILLED_EXCEEDED_PMEM with a diagnostic that says so.
#[tokio::test]
async fn an_oom_killed_container_is_reported_with_minus_104() {
    let test = "oom";
    let Some(layout) = cgroups_or_skip(test) else {
        return;
    };
    let h = Hierarchy::new(&layout);
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut conf = nm_config(dirs.path(), rm.addr, false);
    conf.isolation = h.config();
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;

    let id = cid(43, 1);
    start_64mb(&nm, &rm, id, ALLOCATE_200M).await;
    let done = rm.wait_state(&id, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, -104, "{done:?}");
    assert!(
        done.status
            .diagnostics
            .contains("killed for exceeding its memory limit of 64 MB"),
        "{done:?}"
    );
    assert!(done.status.diagnostics.contains("OOM"), "{done:?}");
    let out = std::fs::read_to_string(nm.log_dir(&id).join("stdout")).unwrap_or_default();
    assert!(
        !out.contains("still alive"),
        "the allocation succeeded: {out}"
    );
    let (_, c) = nm.get_json(&format!("/ws/v1/node/containers/{id}")).await;
    assert_eq!(c["container"]["exitCode"], -104);
    nm.stop().await.unwrap();
    assert!(h.gone(), "cgroups left behind: {:?}", h.dirs());
}

/// Without cgroups the NM enforces memory by watching the process tree's RSS: same -104.
/// Needs no root, so it runs everywhere.
#[tokio::test]
async fn without_cgroups_the_pmem_watcher_kills_an_over_limit_container() {
    let rm = FakeRm::start().await;
    let dirs = tempfile::tempdir().unwrap();
    let mut conf = nm_config(dirs.path(), rm.addr, false);
    conf.isolation.cgroups_enabled = false;
    conf.isolation.monitor_interval = Duration::from_millis(100);
    let mut nm = TestNm::start_with(dirs.path(), conf).await;
    rm.wait_registered(1).await;

    let (big, small) = (cid(44, 1), cid(44, 2));
    start_64mb(&nm, &rm, big, ALLOCATE_200M).await;
    start_64mb(
        &nm,
        &rm,
        small,
        "x=$(head -c 1000000 /dev/zero | tr '\\0' a); sleep 0.5",
    )
    .await;
    let done = rm.wait_state(&big, ContainerState::COMPLETE).await;
    assert_eq!(done.status.exit_status, -104, "{done:?}");
    assert!(
        done.status
            .diagnostics
            .contains("killed for exceeding its memory limit of 64 MB"),
        "{done:?}"
    );
    assert!(done.status.diagnostics.contains("pmem check"), "{done:?}");
    let ok = rm.wait_state(&small, ContainerState::COMPLETE).await;
    assert_eq!(
        ok.status.exit_status, 0,
        "a small container is left alone: {ok:?}"
    );
    // `/metrics` counts the kill as an OOM kill (and only that one).
    let (_, metrics) = nm.get("/metrics").await;
    assert!(
        metrics.contains("\nspindle_nm_containers_oom_killed_total 1\n"),
        "{metrics}"
    );
    nm.stop().await.unwrap();
}

/// A container update rewrites a running container's limits in its own cgroups (memory and
/// CPU, v1 or v2, as the node uses them), both ways; once the container is gone its update
/// is an error.
#[tokio::test]
async fn an_update_rewrites_a_running_containers_cgroup_limits() {
    let test = "update";
    let Some(layout) = cgroups_or_skip(test) else {
        return;
    };
    let h = Hierarchy::new(&layout);
    let (cg, ex) = cgroup_executor(&layout, &h.config());
    let dir = tempfile::tempdir().unwrap();
    let id = cid(45, 1);
    let s = spec(dir.path(), id, "exec sleep 30", limits(1, 64));
    let p = launch(&ex, &s).await;
    let mem = cg
        .container_dir(Controller::Memory, &id)
        .expect("a memory cgroup");
    let cpu = cg
        .container_dir(Controller::Cpu, &id)
        .expect("a cpu cgroup");
    let read = |d: &Path, f: &str| {
        std::fs::read_to_string(d.join(f))
            .unwrap_or_else(|e| panic!("{}: {e}", d.join(f).display()))
            .trim()
            .to_string()
    };
    let v1 = mem.join("memory.limit_in_bytes").exists();
    let (mem_file, cpu_file, cpu_for_3) = if v1 {
        ("memory.limit_in_bytes", "cpu.shares", "3072")
    } else {
        ("memory.max", "cpu.weight", "300")
    };
    assert_eq!(read(&mem, mem_file), (64i64 << 20).to_string());
    ex.update_limits(&id, &limits(1, 64), &limits(3, 256))
        .expect("update");
    assert_eq!(read(&mem, mem_file), (256i64 << 20).to_string());
    assert_eq!(read(&cpu, cpu_file), cpu_for_3);
    ex.update_limits(&id, &limits(3, 256), &limits(1, 32))
        .expect("shrink");
    assert_eq!(read(&mem, mem_file), (32i64 << 20).to_string());
    ex.signal(&p.handle, StopSignal::Kill).unwrap();
    wait_exit(p).await;
    assert!(
        !mem.exists(),
        "the container's cgroup is removed at its end"
    );
    // No cgroup left to update: an error, not a silent success.
    assert!(ex
        .update_limits(&id, &limits(1, 32), &limits(2, 64))
        .is_err());
    ex.shutdown();
    assert!(h.gone(), "cgroups left behind: {:?}", h.dirs());
}
