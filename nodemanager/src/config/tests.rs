//! Unit tests of the configuration parser: defaults, each rule's error and its message, and
//! the keys of each concern. They build `Configuration`s in memory and must not depend on
//! files or on the machine beyond its host name and `nobody` user.

use super::*;
use crate::isolation::DeviceIsolation;

fn conf(pairs: &[(&str, &str)]) -> Configuration {
    let mut c = Configuration::new();
    for (k, v) in pairs {
        c.set(k, v);
    }
    c
}

#[test]
fn defaults_are_yarns() {
    let c = NmConfig::from_configuration(&Configuration::new(), Path::new("conf")).unwrap();
    assert_eq!(c.webapp_address, "0.0.0.0:8042");
    // Bound to every interface: the machine's name (if it resolves), never the wildcard.
    let expected = spindle_common::net::local_hostname().unwrap_or_else(|| "127.0.0.1".into());
    assert_eq!(c.hostname, expected);
    assert!(
        c.local_dirs[0].ends_with("nm-local-dir"),
        "{:?}",
        c.local_dirs
    );
    assert!(c.recovery_dir.ends_with("yarn-nm-recovery"));
    assert_eq!(c.resource, Resource::new(8192, 8));
    assert_eq!(c.sigkill_delay, Duration::from_millis(250));
    assert!(!c.recovery_enabled);
    assert_eq!(c.rm_address, "127.0.0.1:8088");
    assert!(c.conf_dir.is_absolute());
    assert_eq!(c.local_dirs.len(), 1);
    assert!(c.local_dirs[0].is_absolute());
    assert!(c.env_whitelist.contains(&"PATH".to_string()));
}

#[test]
fn parses_lists_and_addresses() {
    let c = NmConfig::from_configuration(
        &conf(&[
            (keys::NM_LOCAL_DIRS, "/a, /b ,"),
            (keys::NM_LOG_DIRS, "file:///l"),
            (keys::RM_WEBAPP_ADDRESS, "rm.example.com:9000"),
            (keys::NM_WEBAPP_ADDRESS, "127.0.0.1:0"),
            (keys::NM_RECOVERY_ENABLED, "true"),
            (keys::NM_RECOVERY_DIR, "/r"),
        ]),
        Path::new("/etc/spindle"),
    )
    .unwrap();
    assert_eq!(c.local_dirs, vec![PathBuf::from("/a"), PathBuf::from("/b")]);
    assert_eq!(c.log_dirs, vec![PathBuf::from("/l")]);
    assert_eq!(c.rm_address, "rm.example.com:9000");
    assert!(c.recovery_enabled);
    assert_eq!(c.recovery_dir, PathBuf::from("/r"));
}

#[test]
fn each_rule_has_its_error() {
    let cases: Vec<(&str, &str, &str)> = vec![
        (
            keys::NM_RESOURCE_MEMORY_MB,
            "0",
            "expected a memory size in MB greater than 0",
        ),
        (keys::NM_RESOURCE_CPU_VCORES, "-1", "vcores greater than 0"),
        (keys::NM_LOCAL_DIRS, " , ", "at least one local directory"),
        (keys::NM_LOG_DIRS, "", "at least one log directory"),
        (keys::NM_WEBAPP_ADDRESS, "nohostport", "expected host:port"),
        (keys::RM_WEBAPP_ADDRESS, "h:0", "expected host:port"),
        (keys::NM_HOSTNAME, "a b", "host name"),
        (keys::SPINDLE_NM_RM_ADDRESS, "nope", "expected host:port"),
        (keys::NM_RESOURCE_MEMORY_MB, "8g", "expected an integer"),
        (keys::NM_RECOVERY_DIR, "", "directory path"),
        (
            keys::NM_ENV_WHITELIST,
            "PATH,1X",
            "environment variable names",
        ),
    ];
    for (k, v, want) in cases {
        let e = NmConfig::from_configuration(&conf(&[(k, v)]), Path::new("c")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(want), "{k}={v}: {msg}");
        assert!(msg.contains(&format!("property '{k}'")), "{msg}");
        assert!(msg.starts_with("-D: "), "{msg}");
    }
}

#[test]
fn node_host_and_rm_address_follow_the_overrides() {
    let c = NmConfig::from_configuration(
        &conf(&[
            (keys::NM_WEBAPP_ADDRESS, "10.1.2.3:0"),
            (keys::SPINDLE_NM_RM_ADDRESS, "rm:1"),
            (keys::RM_WEBAPP_ADDRESS, "other:2"),
        ]),
        Path::new("c"),
    )
    .unwrap();
    assert_eq!(c.hostname, "10.1.2.3");
    assert_eq!(c.rm_address, "rm:1");
    let c = NmConfig::from_configuration(
        &conf(&[(keys::NM_HOSTNAME, "node7.example.com")]),
        Path::new("c"),
    )
    .unwrap();
    assert_eq!(c.hostname, "node7.example.com");
    assert_eq!(c.webapp_address, "node7.example.com:8042");
    let e = NmConfig::from_configuration(&conf(&[(keys::NM_LOCAL_DIRS, ",")]), Path::new("c"))
        .unwrap_err();
    assert!(matches!(e, NmConfigError::NoLocalDirs { .. }), "{e}");
}

#[test]
fn under_rm_ha_heartbeats_go_to_every_rm_of_rm_ids_unless_one_is_named() {
    let ha = [
        ("yarn.resourcemanager.ha.enabled", "true"),
        ("yarn.resourcemanager.ha.rm-ids", "rm1,rm2"),
        ("yarn.resourcemanager.webapp.address.rm1", "0.0.0.0:18088"),
        ("yarn.resourcemanager.hostname.rm2", "rm2.example"),
        ("yarn.client.failover-max-attempts", "4"),
    ];
    let c = NmConfig::from_configuration(&conf(&ha), Path::new("c")).unwrap();
    assert_eq!(c.rm_addresses, ["127.0.0.1:18088", "rm2.example:8088"]);
    assert_eq!(c.rm_address, "127.0.0.1:18088");
    assert_eq!(c.rm_failover.max_attempts, 4);
    let mut named = ha.to_vec();
    named.push((keys::SPINDLE_NM_RM_ADDRESS, "rm:1"));
    let c = NmConfig::from_configuration(&conf(&named), Path::new("c")).unwrap();
    assert_eq!(c.rm_addresses, ["rm:1"]);
    let mut bad = ha.to_vec();
    bad.retain(|(k, _)| *k != "yarn.resourcemanager.hostname.rm2");
    let e = NmConfig::from_configuration(&conf(&bad), Path::new("c")).unwrap_err();
    assert!(matches!(e, NmConfigError::RmHa(_)), "{e}");
}

#[test]
fn resource_plugins_are_read_with_yarns_names() {
    let c = NmConfig::from_configuration(&Configuration::new(), Path::new("c")).unwrap();
    assert_eq!(c.plugins, ResourcePluginsConfig::default());
    let c = NmConfig::from_configuration(
        &conf(&[
            (keys::NM_RESOURCE_PLUGINS, "yarn.io/gpu, yarn.io/fpga"),
            (keys::NM_GPU_ALLOWED_DEVICES, "0:0,1:1,2:2,3:4"),
            (
                keys::NM_GPU_PATH_TO_DISCOVERY_EXECUTABLES,
                "/opt/nvidia/bin",
            ),
            (keys::SPINDLE_NM_DEVICE_DISCOVERY_TIMEOUT_MS, "500"),
            (keys::SPINDLE_NM_GPU_REFRESH_INTERVAL_MS, "0"),
            (keys::NM_FPGA_ALLOWED_DEVICES, "0,2"),
            (keys::NM_FPGA_VENDOR_PLUGIN_CLASS, "IntelFpgaOpenclPlugin"),
        ]),
        Path::new("c"),
    )
    .unwrap();
    let gpu = c.plugins.gpu.unwrap();
    assert_eq!(
        gpu.allowed,
        AllowedGpus::List(vec![(0, 0), (1, 1), (2, 2), (3, 4)])
    );
    assert_eq!(
        gpu.discovery_executable,
        Some(PathBuf::from("/opt/nvidia/bin"))
    );
    assert_eq!(gpu.timeout, Duration::from_millis(500));
    assert_eq!(gpu.refresh_interval, None);
    assert_eq!(gpu.major, 195);
    let fpga = c.plugins.fpga.unwrap();
    assert_eq!(fpga.allowed, AllowedFpgas::Minors(vec![0, 2]));
    assert_eq!(fpga.major, 246);
    assert_eq!(fpga.discovery_executable, None);
}

#[test]
fn allowed_devices_refuse_duplicates_and_garbage() {
    assert_eq!(parse_allowed_gpus(" AUTO "), Ok(AllowedGpus::Auto));
    for (bad, why) in [
        ("0:0,0:1", "index 0 is listed twice"),
        ("0:0,1:0", "minor number 0 is listed twice"),
        ("0:0,x", "'x' is not index:minor"),
        ("0-0", "'0-0' is not index:minor"),
        ("0:-1", "not index:minor"),
        ("", "empty"),
        ("0:0,,1:1", "'' is not index:minor"),
    ] {
        let e = parse_allowed_gpus(bad).unwrap_err();
        assert!(e.contains(why), "{bad}: {e}");
    }
    assert_eq!(parse_allowed_fpgas("auto"), Ok(AllowedFpgas::Auto));
    assert!(parse_allowed_fpgas("1,1").unwrap_err().contains("twice"));
    assert!(parse_allowed_fpgas("a").unwrap_err().contains("'a'"));
    let cases: Vec<(&str, &str, &str)> = vec![
        (
            keys::NM_RESOURCE_PLUGINS,
            "yarn.io/tpu",
            "yarn.io/gpu, yarn.io/fpga",
        ),
        (keys::NM_GPU_ALLOWED_DEVICES, "0:1,1:1", "listed twice"),
        (keys::NM_FPGA_ALLOWED_DEVICES, "x", "minor numbers"),
        (
            keys::NM_FPGA_VENDOR_PLUGIN_CLASS,
            "com.acme.Fpga",
            "IntelFpgaOpenclPlugin",
        ),
        (
            keys::SPINDLE_NM_DEVICE_DISCOVERY_TIMEOUT_MS,
            "0",
            "greater than 0",
        ),
        (
            keys::SPINDLE_NM_GPU_MAJOR_DEVICE_NUMBER,
            "5000",
            "major number",
        ),
    ];
    for (k, v, want) in cases {
        let mut pairs = vec![(keys::NM_RESOURCE_PLUGINS, "yarn.io/gpu,yarn.io/fpga")];
        pairs.push((k, v));
        let e = NmConfig::from_configuration(&conf(&pairs), Path::new("c")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(want), "{k}={v}: {msg}");
        assert!(msg.contains(&format!("property '{k}'")), "{msg}");
    }
}

#[test]
fn launch_hold_timeout_is_one_ms_to_ten_minutes() {
    let key = keys::SPINDLE_NM_LAUNCH_HOLD_TIMEOUT_MS;
    let c = NmConfig::from_configuration(&Configuration::new(), Path::new("c")).unwrap();
    assert_eq!(c.launch_hold_timeout, Duration::from_secs(60));
    for (v, want) in [
        ("1", Duration::from_millis(1)),
        ("90s", Duration::from_secs(90)),
        ("10m", Duration::from_secs(600)),
        ("600000", Duration::from_secs(600)),
    ] {
        let c = NmConfig::from_configuration(&conf(&[(key, v)]), Path::new("c")).unwrap();
        assert_eq!(c.launch_hold_timeout, want, "{v}");
    }
    for (v, want) in [
        ("0", "from 1 ms to 10 min, got 0 ms"),
        ("600001", "from 1 ms to 10 min, got 600001 ms"),
        ("11m", "from 1 ms to 10 min, got 660000 ms"),
        ("soon", "expected a duration"),
    ] {
        let e = NmConfig::from_configuration(&conf(&[(key, v)]), Path::new("c")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(want), "{v}: {msg}");
        assert!(msg.contains(&format!("property '{key}'")), "{msg}");
        assert!(msg.starts_with("-D: "), "{msg}");
        assert!(!msg.contains('\n'), "one line: {msg}");
    }
}

#[test]
fn only_an_explicit_linux_container_executor_changes_the_container_user() {
    let from = |kv: &[(&str, &str)]| NmConfig::from_configuration(&conf(kv), Path::new("c"));
    let lce = (
        keys::NM_CONTAINER_EXECUTOR_CLASS,
        "org.apache.hadoop.yarn.server.nodemanager.LinuxContainerExecutor",
    );
    assert_eq!(from(&[]).unwrap().run_as, RunAs::NmUser);
    let dce = (
        keys::NM_CONTAINER_EXECUTOR_CLASS,
        "org.apache.hadoop.yarn.server.nodemanager.DefaultContainerExecutor",
    );
    assert_eq!(from(&[dce]).unwrap().run_as, RunAs::NmUser);
    match from(&[lce]).unwrap().run_as {
        RunAs::LocalUser(c) => assert_eq!(c.user, "nobody"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        from(&[lce, (keys::NM_LCE_LIMIT_USERS, "false")])
            .unwrap()
            .run_as,
        RunAs::Submitter {
            min_uid: 1000,
            banned: ["bin", "hdfs", "mapred", "yarn"]
                .into_iter()
                .map(String::from)
                .collect(),
        }
    );
    assert_eq!(
        from(&[
            lce,
            (keys::NM_LCE_LIMIT_USERS, "false"),
            (keys::SPINDLE_NM_LCE_MIN_USER_ID, "500"),
            (keys::SPINDLE_NM_LCE_BANNED_USERS, " a, b ,"),
        ])
        .unwrap()
        .run_as,
        RunAs::Submitter {
            min_uid: 500,
            banned: ["a", "b"].into_iter().map(String::from).collect(),
        }
    );
    let msg = from(&[lce, (keys::NM_LCE_LOCAL_USER, "no-such-user-spindle")])
        .unwrap_err()
        .to_string();
    assert!(msg.starts_with("-D: "), "{msg}");
    assert!(
        msg.contains(keys::NM_LCE_LOCAL_USER) && msg.contains("no local user"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
}

#[test]
fn node_resources_offer_extended_types() {
    let from = |kv: &[(&str, &str)]| NmConfig::from_configuration(&conf(kv), Path::new("c"));
    let c = from(&[
        ("yarn.nodemanager.resource-type.example.com/licenses", "2"),
        ("yarn.nodemanager.resource-type.yarn.io/gpu", "0"),
    ])
    .unwrap();
    assert_eq!(c.resource.get("example.com/licenses"), 2);
    assert_eq!(c.resource.get("yarn.io/gpu"), 0);
    assert_eq!(c.resource.memory_mb, keys::DEFAULT_NM_RESOURCE_MEMORY_MB);
    for (k, v, want) in [
        (
            "yarn.nodemanager.resource-type.example.com/licenses",
            "-1",
            "0 or more",
        ),
        (
            "yarn.nodemanager.resource-type.memory-mb",
            "5",
            "extended resource type",
        ),
        (
            "yarn.nodemanager.resource-type.bad name",
            "1",
            "extended resource type",
        ),
    ] {
        let msg = from(&[(k, v)]).unwrap_err().to_string();
        assert!(msg.contains(want) && msg.contains(k), "{k}={v}: {msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
}

#[test]
fn health_checks_follow_yarns_keys() {
    let from = |kv: &[(&str, &str)]| NmConfig::from_configuration(&conf(kv), Path::new("c"));
    let c = from(&[]).unwrap();
    assert_eq!(c.health, HealthConfig::default());
    assert!(c.health.script.is_none() && c.health.disks.enabled);
    assert_eq!(c.health.disks.max_utilization_percent, 90.0);
    let c = from(&[
        (keys::NM_HEALTH_CHECKER_SCRIPT_PATH, "/bin/true"),
        (keys::NM_HEALTH_CHECKER_SCRIPT_OPTS, "-a  -b"),
        (keys::NM_HEALTH_CHECKER_INTERVAL_MS, "5000"),
        (keys::NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS, "7000"),
        (keys::NM_DISK_CHECKER_MIN_HEALTHY, "0.5"),
        (keys::NM_DISK_CHECKER_MIN_FREE_MB, "1024"),
        (keys::NM_DISK_CHECKER_ENABLE, "false"),
    ])
    .unwrap();
    assert_eq!(c.health.script.as_deref(), Some(Path::new("/bin/true")));
    assert_eq!(c.health.script_opts, ["-a", "-b"]);
    assert_eq!(c.health.script_interval, Duration::from_secs(5));
    assert_eq!(c.health.script_timeout, Duration::from_secs(7));
    assert_eq!(c.health.disks.min_healthy_fraction, 0.5);
    assert_eq!(c.health.disks.min_free_mb, 1024);
    assert!(!c.health.disks.enabled);
    // YARN 3's name for the timeout wins over the old one.
    let c = from(&[
        (keys::NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS, "7000"),
        (keys::NM_HEALTH_CHECKER_TIMEOUT_MS, "9000"),
    ])
    .unwrap();
    assert_eq!(c.health.script_timeout, Duration::from_secs(9));
    for (k, v, want) in [
        (
            keys::NM_HEALTH_CHECKER_SCRIPT_PATH,
            "/nonexistent/x",
            "an executable file",
        ),
        (keys::NM_DISK_CHECKER_MIN_HEALTHY, "1.5", "a fraction"),
        (keys::NM_DISK_CHECKER_MAX_UTILIZATION, "101", "a percentage"),
        (keys::NM_HEALTH_CHECKER_INTERVAL_MS, "0", "greater than 0"),
    ] {
        let msg = from(&[(k, v)]).unwrap_err().to_string();
        assert!(msg.contains(want) && msg.contains(k), "{k}={v}: {msg}");
        assert!(msg.starts_with("-D: ") && !msg.contains('\n'), "{msg}");
    }
}

#[test]
fn wildcard_hosts_become_loopback() {
    assert_eq!(connectable("0.0.0.0:1"), "127.0.0.1:1");
    assert_eq!(connectable(":1"), "127.0.0.1:1");
    assert_eq!(connectable("h:1"), "h:1");
}

#[test]
fn isolation_keys() {
    let c = NmConfig::from_configuration(&Configuration::new(), Path::new("c")).unwrap();
    assert_eq!(c.isolation, IsolationConfig::default());
    assert!(c.isolation.cgroups_enabled && c.isolation.pmem_check);
    assert_eq!(c.isolation.hierarchy, "/spindle");
    assert_eq!(c.isolation.pids_limit, 4096);
    assert_eq!(c.isolation.monitor_interval, Duration::from_millis(3000));
    let c = NmConfig::from_configuration(
        &conf(&[
            (keys::NM_CGROUPS_HIERARCHY, "spindle-tests/a"),
            (keys::NM_CGROUPS_STRICT_RESOURCE_USAGE, "true"),
            (keys::SPINDLE_NM_CONTAINER_PIDS_LIMIT, "0"),
            (keys::NM_CONTAINER_MONITOR_INTERVAL_MS, "250"),
            (keys::NM_PMEM_CHECK_ENABLED, "false"),
            (keys::SPINDLE_NM_CGROUPS_DEVICE_ISOLATION, "eBPF"),
            (keys::NM_CGROUPS_MOUNT_PATH, "/sys/fs/cgroup"),
            (
                keys::NM_CONTAINER_EXECUTOR_CLASS,
                "org.apache.hadoop.yarn.server.nodemanager.LinuxContainerExecutor",
            ),
        ]),
        Path::new("c"),
    )
    .unwrap();
    let i = &c.isolation;
    assert!(i.cgroups_enabled && i.strict_cpu && !i.pmem_check);
    assert_eq!(i.hierarchy, "spindle-tests/a");
    assert_eq!(i.pids_limit, 0);
    assert_eq!(i.monitor_interval, Duration::from_millis(250));
    assert_eq!(i.device_isolation, DeviceIsolation::Ebpf);
    assert_eq!(i.mount_path, Some(PathBuf::from("/sys/fs/cgroup")));
    for off in [
        (
            keys::NM_CONTAINER_EXECUTOR_CLASS,
            "org.apache.hadoop.yarn.server.nodemanager.DefaultContainerExecutor",
        ),
        (keys::SPINDLE_NM_CGROUPS_ENABLED, "false"),
    ] {
        let c = NmConfig::from_configuration(&conf(&[off]), Path::new("c")).unwrap();
        assert!(!c.isolation.cgroups_enabled, "{off:?}");
    }
    let cases: Vec<(&str, &str, &str)> = vec![
        (
            keys::NM_CONTAINER_EXECUTOR_CLASS,
            "Docker",
            "LinuxContainerExecutor",
        ),
        (keys::NM_CGROUPS_HIERARCHY, "/a/../b", "cgroup path"),
        (keys::NM_CGROUPS_HIERARCHY, "/", "cgroup path"),
        (keys::NM_CGROUPS_HIERARCHY, "a,b", "cgroup path"),
        (
            keys::SPINDLE_NM_CGROUPS_DEVICE_ISOLATION,
            "v3",
            "auto, v1 or ebpf",
        ),
        (
            keys::NM_CONTAINER_MONITOR_INTERVAL_MS,
            "0",
            "greater than 0",
        ),
        (keys::SPINDLE_NM_CONTAINER_PIDS_LIMIT, "-1", "expected"),
    ];
    for (k, v, want) in cases {
        let e = NmConfig::from_configuration(&conf(&[(k, v)]), Path::new("c")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(want), "{k}={v}: {msg}");
        assert!(msg.contains(&format!("property '{k}'")), "{msg}");
    }
}

#[test]
fn node_label_and_attribute_providers() {
    use crate::node_labels::{NodeLabelsConfig, Provider, ScriptSpec};
    let from = |kv: &[(&str, &str)]| NmConfig::from_configuration(&conf(kv), Path::new("c"));
    assert_eq!(from(&[]).unwrap().node_labels, NodeLabelsConfig::default());
    let none = from(&[
        (keys::NM_NODE_LABELS_PROVIDER, "none"),
        (keys::NM_NODE_ATTRIBUTES_PROVIDER, "NONE"),
    ])
    .unwrap();
    assert_eq!(none.node_labels, NodeLabelsConfig::default());

    let c = from(&[
        (keys::NM_NODE_LABELS_PROVIDER, "config"),
        (
            keys::NM_NODE_LABELS_PROVIDER_CONFIGURED_NODE_PARTITION,
            "gpu",
        ),
        (keys::NM_NODE_ATTRIBUTES_PROVIDER, "config"),
        (
            keys::NM_NODE_ATTRIBUTES_PROVIDER_CONFIGURED_NODE_ATTRIBUTES,
            "os,STRING,ubuntu:nm.yarn.io/zone,STRING,z1",
        ),
    ])
    .unwrap();
    assert_eq!(
        c.node_labels.partition,
        Some(Provider::Config("gpu".into()))
    );
    let Some(Provider::Config(a)) = &c.node_labels.attributes else {
        panic!("{:?}", c.node_labels);
    };
    assert_eq!(a.get("nm.yarn.io/os").map(String::as_str), Some("ubuntu"));
    assert_eq!(a.get("nm.yarn.io/zone").map(String::as_str), Some("z1"));
    // An empty partition is the default partition.
    let c = from(&[(keys::NM_NODE_LABELS_PROVIDER, "config")]).unwrap();
    assert_eq!(
        c.node_labels.partition,
        Some(Provider::Config(String::new()))
    );

    let c = from(&[
        (keys::NM_NODE_LABELS_PROVIDER, "script"),
        (keys::NM_NODE_LABELS_PROVIDER_SCRIPT_PATH, "/bin/true"),
        (keys::NM_NODE_LABELS_PROVIDER_SCRIPT_OPTS, "-a  -b"),
        (keys::NM_NODE_LABELS_PROVIDER_FETCH_INTERVAL_MS, "100"),
        (keys::NM_NODE_ATTRIBUTES_PROVIDER, "script"),
        (keys::NM_NODE_ATTRIBUTES_PROVIDER_SCRIPT_PATH, "/bin/true"),
    ])
    .unwrap();
    assert_eq!(
        c.node_labels.partition,
        Some(Provider::Script(ScriptSpec {
            path: PathBuf::from("/bin/true"),
            opts: vec!["-a".into(), "-b".into()],
            interval: Duration::from_millis(100),
            timeout: Duration::from_millis(1_200_000),
        }))
    );
    assert_eq!(
        c.node_labels.attributes,
        Some(Provider::Script(ScriptSpec {
            path: PathBuf::from("/bin/true"),
            opts: vec![],
            interval: Duration::from_millis(600_000),
            timeout: Duration::from_millis(1_200_000),
        }))
    );

    let labels = |v: &str| (keys::NM_NODE_LABELS_PROVIDER, v.to_string());
    let attrs = |v: &str| (keys::NM_NODE_ATTRIBUTES_PROVIDER, v.to_string());
    for (pairs, key, want) in [
        (
            vec![labels("magic")],
            keys::NM_NODE_LABELS_PROVIDER,
            "none, config or script",
        ),
        (
            vec![attrs("x")],
            keys::NM_NODE_ATTRIBUTES_PROVIDER,
            "none, config or script",
        ),
        (
            vec![labels("script")],
            keys::NM_NODE_LABELS_PROVIDER_SCRIPT_PATH,
            "an executable file",
        ),
        (
            vec![
                attrs("script"),
                (
                    keys::NM_NODE_ATTRIBUTES_PROVIDER_SCRIPT_PATH,
                    "/nonexistent/x".into(),
                ),
            ],
            keys::NM_NODE_ATTRIBUTES_PROVIDER_SCRIPT_PATH,
            "an executable file",
        ),
        (
            vec![
                labels("script"),
                (
                    keys::NM_NODE_LABELS_PROVIDER_SCRIPT_PATH,
                    "/bin/true".into(),
                ),
                (keys::NM_NODE_LABELS_PROVIDER_FETCH_TIMEOUT_MS, "0".into()),
            ],
            keys::NM_NODE_LABELS_PROVIDER_FETCH_TIMEOUT_MS,
            "greater than 0",
        ),
        (
            vec![
                labels("config"),
                (
                    keys::NM_NODE_LABELS_PROVIDER_CONFIGURED_NODE_PARTITION,
                    "a,b".into(),
                ),
            ],
            keys::NM_NODE_LABELS_PROVIDER_CONFIGURED_NODE_PARTITION,
            "more than one partition",
        ),
        (
            vec![
                attrs("config"),
                (
                    keys::NM_NODE_ATTRIBUTES_PROVIDER_CONFIGURED_NODE_ATTRIBUTES,
                    "os,INT,3".into(),
                ),
            ],
            keys::NM_NODE_ATTRIBUTES_PROVIDER_CONFIGURED_NODE_ATTRIBUTES,
            "only attribute type is STRING",
        ),
        (
            vec![
                attrs("config"),
                (
                    keys::NM_NODE_ATTRIBUTES_PROVIDER_CONFIGURED_NODE_ATTRIBUTES,
                    "rm.yarn.io/os,STRING,x".into(),
                ),
            ],
            keys::NM_NODE_ATTRIBUTES_PROVIDER_CONFIGURED_NODE_ATTRIBUTES,
            "nm.yarn.io/",
        ),
        (
            vec![
                attrs("config"),
                (
                    keys::NM_NODE_ATTRIBUTES_PROVIDER_CONFIGURED_NODE_ATTRIBUTES,
                    "os:STRING:x".into(),
                ),
            ],
            keys::NM_NODE_ATTRIBUTES_PROVIDER_CONFIGURED_NODE_ATTRIBUTES,
            "name,type,value",
        ),
    ] {
        let kv: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let msg = from(&kv).unwrap_err().to_string();
        assert!(
            msg.contains(want) && msg.contains(&format!("property '{key}'")),
            "{pairs:?}: {msg}"
        );
        // A missing script path is unset, so its place is `<default>`.
        let placed = msg.starts_with("-D: ") || msg.starts_with("<default>: ");
        assert!(placed && !msg.contains('\n'), "{msg}");
    }
}

/// The NM logs each unknown key once at start, with the file, the line and the closest
/// known key (captured with a thread-local subscriber: `from_configuration` is synchronous).
#[test]
fn unknown_keys_are_logged_with_the_closest_known_key() {
    use std::sync::{Arc, Mutex};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<String>>>);
    struct Message(String);
    impl Visit for Message {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                self.0 = format!("{value:?}");
            }
        }
    }
    impl tracing::Subscriber for Capture {
        fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
            *meta.level() <= tracing::Level::WARN
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut m = Message(String::new());
            event.record(&mut m);
            self.0.lock().unwrap_or_else(|p| p.into_inner()).push(m.0);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    let mut c = Configuration::new();
    c.add_str(
        Path::new("conf/yarn-site.xml"),
        "<configuration>\n\
         <property><name>yarn.nodemanager.resource.memory_mb</name><value>4096</value></property>\n\
         <property><name>yarn.nodemanager.aux-services</name><value>mapreduce_shuffle</value></property>\n\
         </configuration>\n",
    )
    .unwrap();
    let capture = Capture::default();
    tracing::subscriber::with_default(capture.clone(), || {
        NmConfig::from_configuration(&c, Path::new("conf")).unwrap();
    });
    let logs = capture.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let typos: Vec<&String> = logs.iter().filter(|l| l.contains("unknown key")).collect();
    assert_eq!(
        typos,
        vec![
            "conf/yarn-site.xml:2: unknown key 'yarn.nodemanager.resource.memory_mb'; did you mean 'yarn.nodemanager.resource.memory-mb'?"
        ],
        "{logs:#?}"
    );
}

#[test]
fn runtime_policy_is_read_with_yarns_names() {
    use crate::oci::{MountMode, RuntimeKind};
    let c = NmConfig::from_configuration(&Configuration::new(), Path::new("c")).unwrap();
    assert_eq!(c.runtime.allowed, [RuntimeKind::Default].into());
    assert!(!c.runtime.privileged_allowed);
    let c = NmConfig::from_configuration(
        &conf(&[
            (keys::NM_RUNTIME_ALLOWED_RUNTIMES, "default, runc,docker"),
            (keys::NM_RUNC_ALLOWED_RO_MOUNTS, "/,/no/such/dir"),
            (keys::NM_RUNC_DEFAULT_RO_MOUNTS, "/etc/ssl:/etc/ssl"),
            (keys::NM_RUNC_PRIVILEGED_ALLOWED, "true"),
        ]),
        Path::new("c"),
    )
    .unwrap();
    assert_eq!(c.runtime.allowed.len(), 3);
    assert_eq!(c.runtime.allowed_ro, vec![std::path::PathBuf::from("/")]);
    assert_eq!(c.runtime.default_mounts[0].mode, MountMode::ReadOnly);
    assert!(c.runtime.privileged_allowed);
    for (k, v) in [
        (keys::NM_RUNTIME_ALLOWED_RUNTIMES, "default,lxc"),
        (keys::NM_RUNC_DEFAULT_RW_MOUNTS, "relative:/x"),
    ] {
        let e = NmConfig::from_configuration(&conf(&[(k, v)]), Path::new("c")).unwrap_err();
        assert!(e.to_string().contains(k), "{e}");
    }
}
