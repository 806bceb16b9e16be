//! `RmConfig::from_conf`: defaults, each refusal (its variant and its exact text), the
//! state store and group settings, and reloading for `refreshQueues`.

use super::*;
use std::path::Path;

fn conf(xml: &str) -> Configuration {
    let mut c = Configuration::new();
    c.add_str(Path::new("capacity-scheduler.xml"), xml)
        .expect("xml");
    c
}

#[test]
fn defaults_match_yarn() {
    let c = RmConfig::from_conf(&Configuration::new()).unwrap();
    assert_eq!(c.webapp_address, "0.0.0.0:8088");
    assert_eq!(c.rm_hostname, None);
    // ${hadoop.tmp.dir}/yarn/system/rmstore.sqlite, expanded.
    let store = c.store_path.display().to_string();
    assert!(
        store.ends_with("/yarn/system/rmstore.sqlite") && !store.contains('$'),
        "{store}"
    );
    let mut legacy = Configuration::new();
    legacy.set(keys::RM_STORE_PATH, "/var/lib/old.sqlite");
    legacy.set(keys::RM_HOSTNAME, "rm.example");
    let c2 = RmConfig::from_conf(&legacy).unwrap();
    assert_eq!(c2.store_path, PathBuf::from("/var/lib/old.sqlite"));
    assert_eq!(c2.rm_hostname.as_deref(), Some("rm.example"));
    legacy.set(STATE_STORE_PATH, "/var/lib/new.sqlite");
    assert_eq!(
        RmConfig::from_conf(&legacy).unwrap().store_path,
        PathBuf::from("/var/lib/new.sqlite")
    );
    assert_eq!(c.core.min_allocation, Resource::new(1024, 1));
    assert_eq!(c.core.max_allocation, Resource::new(8192, 4));
    assert_eq!(c.core.am_max_attempts, 2);
    assert_eq!(c.core.nm_expiry_ms, 600_000);
    assert_eq!(c.container_key_rolling_ms, 86_400_000);
    assert!(c
        .core
        .scheduler
        .root
        .find("default")
        .is_some_and(|q| q.is_leaf()));
}

/// The defaults that moved to `keys` are the values the RM used before.
#[test]
fn defaults_spelled_in_keys_are_unchanged() {
    assert_eq!(
        keys::DEFAULT_SPINDLE_SCHEDULER_GANG_TIMEOUT_MS,
        crate::core::DEFAULT_GANG_TIMEOUT_MS
    );
    let c = RmConfig::from_conf(&Configuration::new()).unwrap();
    assert_eq!(c.core.gang_timeout_ms, crate::core::DEFAULT_GANG_TIMEOUT_MS);
    assert_eq!(c.cluster_id, "spindle");
    assert_eq!(c.groups, GroupsConfig::default());
    assert_eq!(c.groups.cache_ttl, Duration::from_secs(300));
    assert_eq!(c.groups.negative_cache_ttl, Duration::from_secs(30));
    let s = &c.core.scheduler;
    assert_eq!(s.max_applications, 10_000);
    assert_eq!(s.node_locality_delay, 40);
    assert_eq!(s.rack_locality_additional_delay, -1);
    assert!(!s.queue_mappings_override);
    assert_eq!(s.max_am_resource_percent, 0.1);
    let q = s.root.find("default").unwrap();
    assert_eq!(q.user_limit_factor, 1.0);
    assert_eq!(q.minimum_user_limit_percent, 100.0);
    assert_eq!((q.priority, q.default_application_priority), (0, 0));
}

/// `yarn-site.xml` with one property per line (line 2 onwards).
fn site(pairs: &[(&str, &str)]) -> Configuration {
    let mut xml = String::from("<configuration>\n");
    for (k, v) in pairs {
        xml.push_str(&format!(
            "<property><name>{k}</name><value>{v}</value></property>\n"
        ));
    }
    xml.push_str("</configuration>\n");
    let mut c = Configuration::new();
    c.add_str(Path::new("yarn-site.xml"), &xml).expect("xml");
    c
}

fn refusal(c: &Configuration) -> RmConfigError {
    match RmConfig::from_conf(c) {
        Ok(_) => panic!("expected a refusal"),
        Err(e) => e,
    }
}

/// Each refusal's exact text: where (`file:line: `, `-D: ` for an override, nothing for
/// an unset property), which property, and what is wrong.
#[test]
fn every_refusal_keeps_its_message() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[(keys::RM_WEBAPP_ADDRESS, "nohost")],
            "yarn-site.xml:2: property 'yarn.resourcemanager.webapp.address': expected host:port, got 'nohost'",
        ),
        (
            &[("x", "y"), (keys::SCHEDULER_MAX_ALLOCATION_VCORES, "0")],
            "yarn-site.xml:3: property 'yarn.scheduler.maximum-allocation-vcores': must be a positive integer, got 0",
        ),
        (
            &[(keys::RM_AM_MAX_ATTEMPTS, "-2")],
            "yarn-site.xml:2: property 'yarn.resourcemanager.am.max-attempts': must be a positive integer, got -2",
        ),
        (
            &[(keys::SCHEDULER_MIN_ALLOCATION_MB, "9000")],
            "yarn-site.xml:2: property 'yarn.scheduler.minimum-allocation-mb': minimum allocation 9000 MB exceeds the maximum 8192 MB",
        ),
        (
            &[(keys::SCHEDULER_MIN_ALLOCATION_VCORES, "5")],
            "yarn-site.xml:2: property 'yarn.scheduler.minimum-allocation-vcores': minimum allocation 5 vcores exceeds the maximum 4",
        ),
        (
            &[(keys::PREEMPTION_TOTAL_PER_ROUND, "1.5")],
            "yarn-site.xml:2: property 'yarn.resourcemanager.monitor.capacity.preemption.total_preemption_per_round': must be a fraction between 0 and 1, got 1.5",
        ),
        (
            &[(keys::PREEMPTION_MONITORING_INTERVAL, "0")],
            "yarn-site.xml:2: property 'yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval': the monitoring interval must be positive",
        ),
        (
            &[(keys::RM_NM_HEARTBEAT_INTERVAL_MS, "0")],
            "yarn-site.xml:2: property 'yarn.resourcemanager.nodemanagers.heartbeat-interval-ms': must be positive",
        ),
        (
            &[(keys::NM_LIVENESS_EXPIRY_MS, "500")],
            "yarn-site.xml:2: property 'yarn.nm.liveness-monitor.expiry-interval-ms': 500 ms is shorter than the heartbeat interval 1000 ms",
        ),
        (
            // The expiry is unset: its default is refused, with no place to name.
            &[(keys::RM_NM_HEARTBEAT_INTERVAL_MS, "700000")],
            "property 'yarn.nm.liveness-monitor.expiry-interval-ms': 600000 ms is shorter than the heartbeat interval 700000 ms",
        ),
        (
            &[(keys::RM_MAX_COMPLETED_APPLICATIONS, "-1")],
            "yarn-site.xml:2: property 'yarn.resourcemanager.max-completed-applications': must not be negative, got -1",
        ),
        (
            // YARN's rule: more than 3 x the NM expiry (600 s by default).
            &[(keys::RM_CONTAINER_TOKEN_MASTER_KEY_ROLLING_INTERVAL_SECS, "1800")],
            "yarn-site.xml:2: property 'yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs': 1800 s must be more than 3 x yarn.nm.liveness-monitor.expiry-interval-ms (600000 ms), so every live NM holds a new key before it is used",
        ),
        (
            &[(keys::RM_CONTAINER_TOKEN_MASTER_KEY_ROLLING_INTERVAL_SECS, "0")],
            "yarn-site.xml:2: property 'yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs': must be a positive integer, got 0",
        ),
        (
            &[(GROUP_STATIC_OVERRIDES, "alice=a;bob")],
            "yarn-site.xml:2: property 'hadoop.user.group.static.mapping.overrides': entry 'bob' is not user=group1,group2",
        ),
        (
            &[(GROUP_STATIC_OVERRIDES, " =devs")],
            "yarn-site.xml:2: property 'hadoop.user.group.static.mapping.overrides': entry '=devs' names no user",
        ),
    ];
    for (pairs, want) in cases {
        assert_eq!(refusal(&site(pairs)).to_string(), *want, "{pairs:?}");
    }
    // A -D override is placed as `-D`.
    let mut c = Configuration::new();
    c.set(keys::SCHEDULER_MIN_ALLOCATION_MB, "0");
    assert_eq!(
        refusal(&c).to_string(),
        "-D: property 'yarn.scheduler.minimum-allocation-mb': must be a positive integer, got 0"
    );
    // The raw layer's and the capacity scheduler's errors pass through unchanged.
    let e = refusal(&site(&[(keys::RM_AM_MAX_ATTEMPTS, "two")]));
    assert!(matches!(e, RmConfigError::Value(_)), "{e:?}");
    let e = refusal(&site(&[("yarn.scheduler.capacity.root.queues", "a.b")]));
    assert!(matches!(e, RmConfigError::Capacity(_)), "{e:?}");
}

/// Callers tell refusals apart by variant and fields, never by the text.
#[test]
fn each_refusal_is_its_own_variant() {
    use RmConfigError as E;
    let at = |line: u32| Place(Some(format!("yarn-site.xml:{line}")));
    match refusal(&site(&[(keys::RM_WEBAPP_ADDRESS, "nohost")])) {
        E::BadWebappAddress { place, name, value } => {
            assert_eq!(
                (place, name, value.as_str()),
                (at(2), keys::RM_WEBAPP_ADDRESS, "nohost")
            );
        }
        e => panic!("{e:?}"),
    }
    match refusal(&site(&[
        (keys::NM_LIVENESS_EXPIRY_MS, "100000"),
        (
            keys::RM_CONTAINER_TOKEN_MASTER_KEY_ROLLING_INTERVAL_SECS,
            "300",
        ),
    ])) {
        E::KeyRollingTooFast {
            interval_secs,
            expiry_ms,
            ..
        } => assert_eq!((interval_secs, expiry_ms), (300, 100_000)),
        e => panic!("{e:?}"),
    }
    match refusal(&site(&[("x", "y"), (keys::RM_AM_MAX_ATTEMPTS, "0")])) {
        E::NotPositive {
            place,
            name,
            value,
            written,
        } => {
            assert_eq!(
                (place, name, value, written.as_str()),
                (at(3), keys::RM_AM_MAX_ATTEMPTS, 0, "0")
            );
        }
        e => panic!("{e:?}"),
    }
    match refusal(&site(&[(keys::SCHEDULER_MIN_ALLOCATION_MB, "9000")])) {
        E::MinAllocationMbAboveMax { min, max, .. } => assert_eq!((min, max), (9000, 8192)),
        e => panic!("{e:?}"),
    }
    match refusal(&site(&[(keys::SCHEDULER_MIN_ALLOCATION_VCORES, "5")])) {
        E::MinAllocationVcoresAboveMax { min, max, .. } => assert_eq!((min, max), (5, 4)),
        e => panic!("{e:?}"),
    }
    match refusal(&site(&[(keys::RM_NM_HEARTBEAT_INTERVAL_MS, "0")])) {
        E::HeartbeatIntervalZero { name, .. } => {
            assert_eq!(name, keys::RM_NM_HEARTBEAT_INTERVAL_MS)
        }
        e => panic!("{e:?}"),
    }
    match refusal(&site(&[(keys::RM_NM_HEARTBEAT_INTERVAL_MS, "700000")])) {
        E::NmExpiryBelowHeartbeat {
            place,
            expiry_ms,
            heartbeat_ms,
            ..
        } => {
            assert_eq!(place.as_str(), None, "the expiry is unset");
            assert_eq!((expiry_ms, heartbeat_ms), (600_000, 700_000));
        }
        e => panic!("{e:?}"),
    }
    match refusal(&site(&[(keys::RM_MAX_COMPLETED_APPLICATIONS, "-1")])) {
        E::MaxCompletedAppsNegative { value, .. } => assert_eq!(value, -1),
        e => panic!("{e:?}"),
    }
    match refusal(&site(&[(GROUP_STATIC_OVERRIDES, "bob")])) {
        E::GroupMappingNotUserEqGroups { entry, .. } => assert_eq!(entry, "bob"),
        e => panic!("{e:?}"),
    }
    match refusal(&site(&[(GROUP_STATIC_OVERRIDES, "=devs")])) {
        E::GroupMappingWithoutUser { entry, .. } => assert_eq!(entry, "=devs"),
        e => panic!("{e:?}"),
    }
    let mut c = Configuration::new();
    c.set(keys::SCHEDULER_MAX_ALLOCATION_MB, "-5");
    match refusal(&c) {
        E::NotPositive { place, value, .. } => {
            assert_eq!((place.as_str(), value), (Some("-D"), -5));
        }
        e => panic!("{e:?}"),
    }
    // Refused values are quoted as written, not as the number they were parsed to.
    for (k, v, want) in [
        (
            keys::SCHEDULER_MIN_ALLOCATION_MB,
            " -0x10 ",
            "-D: property 'yarn.scheduler.minimum-allocation-mb': must be a positive integer, got -0x10",
        ),
        (
            keys::PREEMPTION_TOTAL_PER_ROUND,
            "1.50",
            "must be a fraction between 0 and 1, got 1.50",
        ),
        (
            keys::RM_MAX_COMPLETED_APPLICATIONS,
            "-0x1",
            "must not be negative, got -0x1",
        ),
    ] {
        let mut c = Configuration::new();
        c.set(k, v);
        let e = refusal(&c).to_string();
        assert!(e.ends_with(want), "{k}={v}: {e}");
    }
}

#[test]
fn queue_tree_and_capacity_sum() {
    let c = conf(
        r#"<configuration>
          <property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property>
          <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>70</value></property>
          <property><name>yarn.scheduler.capacity.root.b.capacity</name><value>30</value></property>
        </configuration>"#,
    );
    let rm = RmConfig::from_conf(&c).unwrap();
    let q = &rm.core.scheduler.root;
    assert_eq!(q.children.len(), 2);
    assert_eq!(
        q.find("root.b").unwrap().capacity,
        crate::core::queue_conf::CapacitySpec::Percent(30.0)
    );
    assert_eq!(
        rm.scheduler_props
            .get("yarn.scheduler.capacity.root.a.capacity"),
        Some("70")
    );
    let mut bad = c.clone();
    bad.set("yarn.scheduler.capacity.root.b.capacity", "40");
    let e = RmConfig::from_conf(&bad).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "capacity-scheduler.xml:2: Illegal capacity sum of 1.1 for children of queue root"
        ),
        "{e}"
    );
}

#[test]
fn load_remembers_the_dir_and_overrides_for_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let cs = dir.path().join("capacity-scheduler.xml");
    std::fs::write(
        &cs,
        "<configuration><property><name>yarn.scheduler.capacity.root.queues</name><value>a</value></property>\n\
         <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>100</value></property></configuration>",
    )
    .unwrap();
    let overrides = vec![(
        "yarn.scheduler.capacity.root.a.user-limit-factor".to_string(),
        "3".to_string(),
    )];
    let rm = RmConfig::load(dir.path(), &overrides).unwrap();
    assert_eq!(rm.conf_dir.as_deref(), Some(dir.path()));
    std::fs::write(
        &cs,
        "<configuration><property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property></configuration>",
    )
    .unwrap();
    let props = rm.reload_scheduler_props().unwrap().props;
    assert_eq!(
        props.get("yarn.scheduler.capacity.root.queues"),
        Some("a,b")
    );
    assert_eq!(
        props.get("yarn.scheduler.capacity.root.a.user-limit-factor"),
        Some("3"),
        "-D overrides survive a refresh"
    );
    // In memory: a refresh re-applies what the RM started with.
    let mem = RmConfig::from_conf(&Configuration::new()).unwrap();
    assert_eq!(
        mem.reload_scheduler_props().unwrap().props,
        mem.scheduler_props
    );
}

#[test]
fn group_settings() {
    let mut c = Configuration::new();
    let g = RmConfig::from_conf(&c).unwrap().groups;
    assert_eq!(g.static_overrides.get("dr.who"), Some(&vec![]));
    assert_eq!(g.command_timeout, Duration::from_secs(5));
    c.set(GROUP_STATIC_OVERRIDES, "alice=devs,ops;bob=;");
    c.set(GROUPS_COMMAND_TIMEOUT, "2s");
    let g = RmConfig::from_conf(&c).unwrap().groups;
    assert_eq!(
        g.static_overrides.get("alice"),
        Some(&vec!["devs".to_string(), "ops".to_string()])
    );
    assert_eq!(g.static_overrides.get("bob"), Some(&vec![]));
    assert_eq!(g.command_timeout, Duration::from_secs(2));
    c.set(GROUP_STATIC_OVERRIDES, "alice");
    assert!(RmConfig::from_conf(&c).is_err());
}

#[test]
fn preemption_properties_are_yarns_and_read_with_their_defaults() {
    let d = RmConfig::from_conf(&Configuration::new()).expect("defaults");
    assert_eq!(d.core.preemption, PreemptionConf::default());
    assert!(
        !d.core.preemption.enabled,
        "off unless asked for, as in YARN"
    );
    let mut c = Configuration::new();
    for (k, v) in [
        (keys::RM_SCHEDULER_MONITOR_ENABLE, "true"),
        (keys::PREEMPTION_OBSERVE_ONLY, "true"),
        (keys::PREEMPTION_MONITORING_INTERVAL, "500"),
        (keys::PREEMPTION_MAX_WAIT_BEFORE_KILL, "8000"),
        (keys::PREEMPTION_TOTAL_PER_ROUND, "0.5"),
        (keys::PREEMPTION_MAX_IGNORED_OVER_CAPACITY, "0"),
        (keys::PREEMPTION_NATURAL_TERMINATION_FACTOR, "1"),
        (keys::PREEMPTION_INTRA_QUEUE_ENABLED, "true"),
        (keys::PREEMPTION_MIN_RUNTIME_MS, "0"),
        (keys::PREEMPTION_INTRA_QUEUE_FAIRSHARE_USAGE_FACTOR, "3.5"),
    ] {
        c.set(k, v);
    }
    let p = RmConfig::from_conf(&c).expect("valid").core.preemption;
    assert_eq!(
        p,
        PreemptionConf {
            enabled: true,
            observe_only: true,
            monitoring_interval_ms: 500,
            max_wait_before_kill_ms: 8000,
            total_preemption_per_round: 0.5,
            max_ignored_over_capacity: 0.0,
            natural_termination_factor: 1.0,
            intra_queue: true,
            min_runtime_ms: 0,
            fairshare_usage_factor: 3.5,
        }
    );
}

#[test]
fn a_fairshare_usage_factor_below_one_or_not_a_number_is_refused_by_name() {
    for bad in ["0.5", "0", "-2"] {
        let mut c = Configuration::new();
        c.set(keys::PREEMPTION_INTRA_QUEUE_FAIRSHARE_USAGE_FACTOR, bad);
        let err = RmConfig::from_conf(&c).expect_err(bad);
        assert!(
            matches!(err, RmConfigError::PreemptionUsageFactor { name, .. }
                if name == keys::PREEMPTION_INTRA_QUEUE_FAIRSHARE_USAGE_FACTOR),
            "{bad}: {err}"
        );
        assert!(err.to_string().contains(bad), "{err}");
    }
    for bad in ["NaN", "inf", "two"] {
        let mut c = Configuration::new();
        c.set(keys::PREEMPTION_INTRA_QUEUE_FAIRSHARE_USAGE_FACTOR, bad);
        let err = RmConfig::from_conf(&c).expect_err(bad);
        assert!(
            err.to_string()
                .contains(keys::PREEMPTION_INTRA_QUEUE_FAIRSHARE_USAGE_FACTOR),
            "{bad}: {err}"
        );
    }
    let mut c = Configuration::new();
    c.set(keys::PREEMPTION_INTRA_QUEUE_FAIRSHARE_USAGE_FACTOR, "1");
    let p = RmConfig::from_conf(&c)
        .expect("1 is the least")
        .core
        .preemption;
    assert_eq!(p.fairshare_usage_factor, 1.0);
}

#[test]
fn a_reload_refuses_near_misses_of_capacity_keys_and_warns_of_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("capacity-scheduler.xml"),
        "<configuration>\n  <property>\n    <name>yarn.scheduler.capacity.root.queues</name>\n    <value>default</value>\n  </property>\n  <property>\n    <name>yarn.scheduler.capacity.root.default.capacity</name>\n    <value>100</value>\n  </property>\n  <property>\n    <name>yarn.scheduler.capacity.root.default.maximum-capacty</name>\n    <value>50</value>\n  </property>\n  <property>\n    <name>spindle.something.nobody.reads</name>\n    <value>1</value>\n  </property>\n</configuration>\n",
    )
    .expect("write");
    let conf = RmConfig::load(dir.path(), &[]).expect("the RM starts: unknown keys warn");
    let file = dir.path().join("capacity-scheduler.xml");
    match conf.reload_scheduler_props() {
        Err(RmConfigError::NearMissKeys(keys)) => {
            assert_eq!(keys.len(), 1, "{keys:?}");
            assert_eq!(
                keys[0].to_string(),
                format!(
                    "{}:10: unknown key 'yarn.scheduler.capacity.root.default.maximum-capacty'; did you mean 'yarn.scheduler.capacity.root.default.maximum-capacity'?",
                    file.display()
                )
            );
        }
        other => panic!("expected a refusal: {other:?}"),
    }
    let fixed = std::fs::read_to_string(&file)
        .expect("read")
        .replace("maximum-capacty", "maximum-capacity");
    std::fs::write(&file, fixed).expect("write");
    let r = conf.reload_scheduler_props().expect("applied");
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert_eq!(r.warnings[0].name, "spindle.something.nobody.reads");
    assert_eq!(r.warnings[0].source.line, 14);
    assert_eq!(
        conf.scheduler_props.changes_to(&r.props),
        [
            "root.default.maximum-capacity: added (50)",
            // The RM started with the typo (a start only warns): the refresh drops it.
            "root.default.maximum-capacty: removed (was 50)"
        ]
    );
}
