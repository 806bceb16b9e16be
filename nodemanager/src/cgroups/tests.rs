use super::*;
use crate::isolation::DeviceNumber;

fn spec(vcores: i64, mb: i64, strict: bool) -> IsolationSpec {
    IsolationSpec {
        vcores,
        memory_mb: mb,
        strict_cpu: strict,
        denied_devices: vec![DeviceNumber::char(195, 0), DeviceNumber::char(195, 3)],
        granted_devices: vec![DeviceNumber::char(195, 2)],
        pids_max: 4096,
    }
}

fn files(s: &[Setting]) -> Vec<(&str, &str)> {
    s.iter().map(|s| (s.file, s.value.as_str())).collect()
}

#[test]
fn v1_limits_follow_yarn() {
    assert_eq!(
        files(&v1::cpu(&spec(2, 64, false))),
        vec![("cpu.shares", "2048")]
    );
    assert_eq!(
        files(&v1::cpu(&spec(3, 64, true))),
        vec![
            ("cpu.shares", "3072"),
            ("cpu.cfs_period_us", "100000"),
            ("cpu.cfs_quota_us", "300000")
        ]
    );
    let m = v1::memory(&spec(1, 64, false));
    assert_eq!(
        files(&m),
        vec![
            ("memory.limit_in_bytes", "67108864"),
            ("memory.memsw.limit_in_bytes", "67108864"),
            ("memory.swappiness", "0")
        ]
    );
    assert!(m[0].required && !m[1].required);
    assert!(v1::memory(&spec(1, 0, false)).is_empty());
    assert_eq!(
        files(&v1::devices(&spec(1, 1, false))),
        vec![
            ("devices.deny", "c 195:0 rwm"),
            ("devices.deny", "c 195:3 rwm")
        ]
    );
    let mut s = spec(0, 1, false);
    s.pids_max = 0;
    assert_eq!(files(&v1::pids(&s)), vec![("pids.max", "max")]);
    assert_eq!(
        files(&v1::cpu(&s)),
        vec![("cpu.shares", "1024")],
        "at least one vcore"
    );
}

#[test]
fn v2_limits_are_proportional() {
    assert_eq!(
        files(&v2::cpu(&spec(1, 64, false))),
        vec![("cpu.weight", "100")]
    );
    assert_eq!(
        files(&v2::cpu(&spec(4, 64, true))),
        vec![("cpu.weight", "400"), ("cpu.max", "400000 100000")]
    );
    assert_eq!(files(&v2::cpu(&spec(500, 1, false)))[0].1, "10000");
    assert_eq!(
        files(&v2::memory(&spec(1, 2, false))),
        vec![
            ("memory.max", "2097152"),
            ("memory.swap.max", "0"),
            ("memory.oom.group", "1")
        ]
    );
    assert_eq!(
        files(&v2::pids(&spec(1, 2, false))),
        vec![("pids.max", "4096")]
    );
}

#[test]
fn names_and_counters() {
    assert!(check_name("/spindle"));
    assert!(check_name("a/b"));
    for bad in ["", "/", "/a/../b", "a,b", "./x"] {
        assert!(!check_name(bad), "{bad}");
    }
    let a = instance_name(Path::new("/data/nm1/local"));
    assert_eq!(a, instance_name(Path::new("/data/nm1/local")));
    assert_ne!(a, instance_name(Path::new("/data/nm2/local")));
    assert!(a.starts_with("nm-") && a.len() == 11, "{a}");

    let d = tempfile::tempdir().unwrap();
    fs::write(
        d.path().join("memory.events"),
        "low 0\nhigh 3\noom 2\noom_kill 1\nx y\n",
    )
    .unwrap();
    assert_eq!(
        read_counter(&d.path().join("memory.events"), "oom_kill"),
        Some(1)
    );
    assert_eq!(v2::oom_kills(d.path()), Some(1));
    assert_eq!(v1::oom_kills(d.path()), None);
    assert!(write_file(d.path(), "no-such-file", "1").is_err());
}

/// On a fake cgroupfs (plain directories): the bases are made under the hierarchy and the
/// instance, and a container that must be denied devices is refused, before anything is
/// made, on a node that cannot deny them (fail closed).
#[test]
fn a_node_without_device_isolation_refuses_gpu_containers() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().display();
    let mountinfo = format!(
        "1 0 0:1 / {m}/cpu rw - cgroup cgroup rw,cpu,cpuacct\n\
         2 0 0:2 / {m}/memory rw - cgroup cgroup rw,memory\n"
    );
    let layout = Layout::parse(&mountinfo, "2:memory:/\n1:cpu,cpuacct:/\n");
    let conf = IsolationConfig {
        device_isolation: DeviceIsolation::V1,
        ..Default::default()
    };
    let cg = Cgroups::new(&layout, &conf, "nm-x").unwrap();
    assert!(d.path().join("cpu/spindle/nm-x").is_dir());
    assert!(d.path().join("memory/spindle/nm-x").is_dir());
    assert_eq!(cg.mode(), Mode::V1);
    assert!(cg.device_isolation().is_err());
    assert!(
        cg.describe().contains("cpu [cpu,cpuacct]"),
        "{}",
        cg.describe()
    );
    let id = ContainerId::new(
        spindle_common::ids::ApplicationAttemptId::new(
            spindle_common::ids::ApplicationId::new(1, 1),
            1,
        ),
        0,
        1,
    );
    let e = cg.create(&id, &spec(1, 64, false)).unwrap_err();
    assert!(
        matches!(e, CgroupError::NoDeviceIsolation { count: 2, .. }),
        "{e}"
    );
    assert!(!d
        .path()
        .join("cpu/spindle/nm-x")
        .join(id.to_string())
        .exists());
    // Without a device to deny it goes ahead (and fails here only because a plain
    // directory has no control files), removing what it made.
    let mut plain = spec(1, 64, false);
    plain.denied_devices.clear();
    assert!(cg.create(&id, &plain).is_err());
    assert!(!d
        .path()
        .join("cpu/spindle/nm-x")
        .join(id.to_string())
        .exists());
    cg.shutdown();
    assert!(!d.path().join("cpu/spindle").exists());
    assert!(
        d.path().join("cpu").exists(),
        "pruning stops at the mount point"
    );
}

/// The cgroup2 delegation walks from the start down, enabling what is missing, and says
/// why when a parent does not delegate a controller (on a fake cgroupfs).
#[test]
fn v2_delegation_on_a_fake_tree() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    fs::write(root.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
    fs::write(root.join("cgroup.subtree_control"), "").unwrap();
    // A fake cgroupfs does not create the children's files: pre-create them.
    let a = root.join("spindle");
    fs::create_dir(&a).unwrap();
    fs::write(a.join("cgroup.controllers"), "cpu memory\n").unwrap();
    fs::write(a.join("cgroup.subtree_control"), "").unwrap();
    let b = a.join("nm-1");
    fs::create_dir(&b).unwrap();
    fs::write(b.join("cgroup.controllers"), "cpu memory\n").unwrap();
    fs::write(b.join("cgroup.subtree_control"), "cpu").unwrap();
    v2::delegate(root, &b, &["memory"]).unwrap();
    assert_eq!(
        fs::read_to_string(root.join("cgroup.subtree_control")).unwrap(),
        "+memory"
    );
    assert_eq!(
        fs::read_to_string(b.join("cgroup.subtree_control")).unwrap(),
        "+memory"
    );
    let e = v2::delegate(root, &b, &["pids"]).unwrap_err();
    assert!(e.to_string().contains("'pids' is not available"), "{e}");
}

/// A container update rewrites the memory and CPU limits in the container's existing
/// cgroups (on a fake v1 cgroupfs, whose control files are pre-created), and says so when
/// the container has no cgroup.
#[test]
fn an_update_rewrites_memory_and_cpu_limits() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().display();
    let mountinfo = format!(
        "1 0 0:1 / {m}/cpu rw - cgroup cgroup rw,cpu,cpuacct\n\
         2 0 0:2 / {m}/memory rw - cgroup cgroup rw,memory\n"
    );
    let layout = Layout::parse(&mountinfo, "2:memory:/\n1:cpu,cpuacct:/\n");
    let cg = Cgroups::new(&layout, &IsolationConfig::default(), "nm-u").unwrap();
    let id = ContainerId::new(
        spindle_common::ids::ApplicationAttemptId::new(
            spindle_common::ids::ApplicationId::new(1, 1),
            1,
        ),
        0,
        7,
    );
    let old = spec(1, 1024, true);
    let new = spec(3, 4096, true);
    let e = cg.update(&id, &old, &new).unwrap_err();
    assert!(e.to_string().contains("has no cgroup"), "{e}");
    let cpu = d.path().join("cpu/spindle/nm-u").join(id.to_string());
    let mem = d.path().join("memory/spindle/nm-u").join(id.to_string());
    fs::create_dir_all(&cpu).unwrap();
    fs::create_dir_all(&mem).unwrap();
    for f in ["cpu.shares", "cpu.cfs_period_us", "cpu.cfs_quota_us"] {
        fs::write(cpu.join(f), "0").unwrap();
    }
    for f in [
        "memory.limit_in_bytes",
        "memory.memsw.limit_in_bytes",
        "memory.swappiness",
    ] {
        fs::write(mem.join(f), "0").unwrap();
    }
    cg.update(&id, &old, &new).unwrap();
    let read = |p: &std::path::Path| fs::read_to_string(p).unwrap().trim().to_string();
    assert_eq!(read(&cpu.join("cpu.shares")), "3072");
    assert_eq!(read(&cpu.join("cpu.cfs_quota_us")), "300000");
    assert_eq!(
        read(&mem.join("memory.limit_in_bytes")),
        (4096i64 << 20).to_string()
    );
    assert_eq!(
        read(&mem.join("memory.memsw.limit_in_bytes")),
        (4096i64 << 20).to_string()
    );
    // A shrink writes the smaller values the same way (emptied first: `write_file` does not
    // truncate, which a control file needs not but a plain one does).
    for f in ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"] {
        fs::write(mem.join(f), "").unwrap();
    }
    cg.update(&id, &new, &spec(1, 512, false)).unwrap();
    assert_eq!(read(&cpu.join("cpu.shares")), "1024");
    assert_eq!(
        read(&mem.join("memory.limit_in_bytes")),
        (512i64 << 20).to_string()
    );
    // A missing memory file fails before the CPU limits change.
    fs::remove_file(mem.join("memory.limit_in_bytes")).unwrap();
    assert!(cg.update(&id, &old, &new).is_err());
    assert_eq!(read(&cpu.join("cpu.shares")), "1024");
}
