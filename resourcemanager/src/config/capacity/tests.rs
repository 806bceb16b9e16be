//! One test (at least) per rule and per form of `capacity-scheduler.xml`.

use std::path::Path;

use spindle_common::config::Configuration;
use spindle_common::Resource;

use super::error::Result;
use super::*;
use crate::core::queue_conf::{
    Acl, Calculator, CapacitySpec, FairshareConf, FairshareSpec, LasSpec, MaxCapacitySpec,
    OrderingPolicy, QueueMapping, QueueSpec, QueueState, SchedulerConf,
};

const CS: &str = "yarn.scheduler.capacity.";

/// A configuration from `(suffix, value)` pairs under the CS prefix, as if read from
/// `capacity-scheduler.xml` (each property on its own line, so errors name a line).
fn conf_of(pairs: &[(&str, &str)]) -> Configuration {
    let mut xml = String::from("<configuration>\n");
    for (k, v) in pairs {
        let name = if k.starts_with("yarn.") || k.starts_with("spindle.") {
            k.to_string()
        } else {
            format!("{CS}{k}")
        };
        xml.push_str(&format!(
            "<property><name>{name}</name><value>{v}</value></property>\n"
        ));
    }
    xml.push_str("</configuration>\n");
    let mut c = Configuration::new();
    c.add_str(Path::new("capacity-scheduler.xml"), &xml)
        .expect("test xml");
    c
}

fn parse_pairs(pairs: &[(&str, &str)]) -> Result<SchedulerConf> {
    parse(&conf_of(pairs), &Resource::new(8192, 8))
}

fn ok(pairs: &[(&str, &str)]) -> SchedulerConf {
    parse_pairs(pairs).unwrap_or_else(|e| panic!("{e}"))
}

fn err(pairs: &[(&str, &str)]) -> CapacityConfError {
    match parse_pairs(pairs) {
        Ok(_) => panic!("expected an error for {pairs:?}"),
        Err(e) => e,
    }
}

fn two_queues() -> Vec<(&'static str, &'static str)> {
    vec![
        ("root.queues", "a,b"),
        ("root.a.capacity", "70"),
        ("root.b.capacity", "30"),
    ]
}

fn with(
    mut base: Vec<(&'static str, &'static str)>,
    extra: &[(&'static str, &'static str)],
) -> Vec<(&'static str, &'static str)> {
    for (k, v) in extra {
        base.retain(|(bk, _)| bk != k);
        base.push((k, v));
    }
    base
}

fn leaf<'a>(c: &'a SchedulerConf, path: &str) -> &'a QueueSpec {
    c.root
        .find(path)
        .unwrap_or_else(|| panic!("no queue {path}"))
}

// ------------------------------------------------------------------ defaults and forms

#[test]
fn no_properties_is_yarns_default_tree() {
    let c = parse(&Configuration::new(), &Resource::new(8192, 4)).unwrap();
    assert_eq!(c.root.children.len(), 1);
    let d = leaf(&c, "root.default");
    assert_eq!(d.capacity, CapacitySpec::Percent(100.0));
    assert_eq!(d.max_capacity, MaxCapacitySpec::Percent(100.0));
    assert_eq!(d.state, QueueState::Running);
    assert_eq!(d.user_limit_factor, 1.0);
    assert_eq!(d.minimum_user_limit_percent, 100.0);
    assert_eq!(d.max_am_resource_percent, 0.1);
    assert_eq!(d.ordering, OrderingPolicy::Fifo);
    assert_eq!(d.acl_submit, None);
    assert_eq!(
        c.calculator,
        Calculator::Memory,
        "YARN's default calculator"
    );
    assert_eq!(c.max_applications, 10_000);
    assert_eq!(c.node_locality_delay, 40);
    assert_eq!(c.rack_locality_additional_delay, -1);
    assert_eq!(c.max_application_priority, 0);
    assert!(!c.acl_enabled);
    assert!(c.admin_acl.all);
    // The live set shows the implicit defaults, as YARN's shipped file would.
    let props = CsProps::from_conf(&Configuration::new()).unwrap();
    assert_eq!(props.get(&format!("{CS}root.queues")), Some("default"));
    assert_eq!(
        props.get(&format!("{CS}root.default.capacity")),
        Some("100")
    );
}

#[test]
fn percent_capacities_and_every_queue_property() {
    let c = ok(&with(
        two_queues(),
        &[
            ("root.a.capacity", "62.5"),
            ("root.b.capacity", "37.5"),
            ("root.a.maximum-capacity", "80"),
            ("root.b.maximum-capacity", "-1"),
            ("root.a.user-limit-factor", "2.5"),
            ("root.a.minimum-user-limit-percent", "25"),
            ("root.a.maximum-applications", "50"),
            ("root.b.maximum-applications", "-1"),
            ("root.a.max-parallel-apps", "3"),
            ("root.a.maximum-am-resource-percent", "0.5"),
            ("maximum-am-resource-percent", "0.2"),
            ("root.a.maximum-allocation-mb", "4096"),
            ("root.a.maximum-allocation-vcores", "2"),
            ("root.b.state", "stopped"),
            ("root.a.ordering-policy", "fair"),
            ("root.a.default-application-priority", "3"),
            ("root.b.priority", "7"),
            ("root.a.acl_submit_applications", "alice,bob devs"),
            ("root.a.acl_administer_queue", " admins"),
        ],
    ));
    let a = leaf(&c, "root.a");
    assert_eq!(a.name, "a");
    assert_eq!(a.capacity, CapacitySpec::Percent(62.5));
    assert_eq!(a.max_capacity, MaxCapacitySpec::Percent(80.0));
    assert_eq!(a.user_limit_factor, 2.5);
    assert_eq!(a.minimum_user_limit_percent, 25.0);
    assert_eq!(a.max_applications, Some(50));
    assert_eq!(a.max_parallel_apps, Some(3));
    assert_eq!(a.max_am_resource_percent, 0.5);
    assert_eq!(a.max_allocation, Some(Resource::new(4096, 2)));
    assert_eq!(a.ordering, OrderingPolicy::Fair);
    assert_eq!(a.default_application_priority, 3);
    let submit = a.acl_submit.as_ref().unwrap();
    assert!(submit.allows("alice", &[]) && submit.allows("carol", &["devs".into()]));
    assert!(!submit.allows("carol", &[]));
    let admin = a.acl_admin.as_ref().unwrap();
    assert!(admin.users.is_empty() && admin.groups.contains("admins"));
    let b = leaf(&c, "root.b");
    assert_eq!(
        b.max_capacity,
        MaxCapacitySpec::Percent(100.0),
        "-1 is no limit"
    );
    assert_eq!(
        b.max_applications, None,
        "negative derives from the global value"
    );
    assert_eq!(
        b.max_am_resource_percent, 0.2,
        "per-queue default is the global one"
    );
    assert_eq!(b.state, QueueState::Stopped);
    assert_eq!(b.priority, 7);
    assert_eq!(b.max_allocation, None);
    assert_eq!(c.max_am_resource_percent, 0.2);
}

#[test]
fn absolute_capacities_with_units_and_resource_types() {
    let conf = conf_of(&[
        ("yarn.resource-types", "yarn.io/gpu"),
        ("root.queues", "a,b"),
        ("root.a.capacity", "[memory=10Gi,vcores=12,yarn.io/gpu=8]"),
        (
            "root.a.maximum-capacity",
            "[memory=20480,vcores=24,yarn.io/gpu=8]",
        ),
        ("root.b.capacity", "[memory-mb=2048,vcores=2]"),
        ("root.b.maximum-capacity", "[memory=4096]"),
    ]);
    let c = parse(&conf, &Resource::new(8192, 8)).unwrap();
    let a = leaf(&c, "root.a");
    assert_eq!(
        a.capacity,
        CapacitySpec::Absolute(Resource::new(10240, 12).with("yarn.io/gpu", 8))
    );
    assert_eq!(
        a.max_capacity,
        MaxCapacitySpec::Absolute(Resource::new(20480, 24).with("yarn.io/gpu", 8))
    );
    let b = leaf(&c, "root.b");
    assert_eq!(b.capacity, CapacitySpec::Absolute(Resource::new(2048, 2)));
    let MaxCapacitySpec::Absolute(bm) = &b.max_capacity else {
        panic!("absolute max")
    };
    assert_eq!(bm.memory_mb, 4096);
    assert_eq!(
        bm.vcores,
        i64::MAX,
        "a type left out of a maximum is unbounded"
    );
    assert_eq!(bm.get("yarn.io/gpu"), i64::MAX);
}

#[test]
fn weight_capacities() {
    let c = ok(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "2w"),
        ("root.b.capacity", "1W"),
    ]);
    assert_eq!(leaf(&c, "root.a").capacity, CapacitySpec::Weight(2.0));
    assert_eq!(leaf(&c, "root.b").capacity, CapacitySpec::Weight(1.0));
    let e = err(&[("root.queues", "a"), ("root.a.capacity", "-1w")]);
    assert_eq!(e.rule, Rule::CapacityRange);
    let e = err(&[("root.queues", "a"), ("root.a.capacity", "xw")]);
    assert_eq!(e.rule, Rule::CapacityRange);
    let e = err(&with(two_queues(), &[("root.a.maximum-capacity", "2w")]));
    assert_eq!(e.rule, Rule::CapacityRange);
    assert!(e.message.contains("no weight form"), "{e}");
}

#[test]
fn global_properties() {
    let conf = conf_of(&[
        ("root.queues", "a"),
        ("root.a.capacity", "100"),
        (
            "resource-calculator",
            "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
        ),
        ("maximum-applications", "500"),
        ("max-parallel-apps", "20"),
        ("user.max-parallel-apps", "4"),
        ("user.alice.max-parallel-apps", "9"),
        (
            "queue-mappings",
            "u:alice:a,g:devs:root.a,u:%user:%user,u:bob:%primary_group",
        ),
        ("queue-mappings-override.enable", "true"),
        ("node-locality-delay", "10"),
        ("rack-locality-additional-delay", "5"),
        ("yarn.cluster.max-application-priority", "10"),
        ("yarn.admin.acl", "root admins"),
        ("yarn.acl.enable", "true"),
    ]);
    let c = parse(&conf, &Resource::new(8192, 8)).unwrap();
    assert_eq!(c.calculator, Calculator::Dominant);
    assert_eq!(c.max_applications, 500);
    assert_eq!(c.max_parallel_apps, Some(20));
    assert_eq!(c.user_max_parallel_apps, Some(4));
    assert_eq!(c.user_max_parallel_apps_for.get("alice"), Some(&9));
    assert_eq!(c.user_max_parallel_apps_for.len(), 1);
    assert_eq!(
        c.queue_mappings,
        vec![
            QueueMapping::User {
                user: "alice".into(),
                queue: "a".into()
            },
            QueueMapping::Group {
                group: "devs".into(),
                queue: "root.a".into()
            },
            QueueMapping::User {
                user: "%user".into(),
                queue: "%user".into()
            },
            QueueMapping::User {
                user: "bob".into(),
                queue: "%primary_group".into()
            },
        ]
    );
    assert!(c.queue_mappings_override);
    assert_eq!(c.node_locality_delay, 10);
    assert_eq!(c.rack_locality_additional_delay, 5);
    assert_eq!(c.max_application_priority, 10);
    assert!(c.acl_enabled);
    assert!(c.admin_acl.users.contains("root") && c.admin_acl.groups.contains("admins"));
    let conf = conf_of(&[(
        "resource-calculator",
        "org.apache.hadoop.yarn.util.resource.DefaultResourceCalculator",
    )]);
    assert_eq!(
        parse(&conf, &Resource::new(1, 1)).unwrap().calculator,
        Calculator::Memory
    );
}

#[test]
fn the_example_conf_dir_parses() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conf");
    let conf = Configuration::load_dir(&dir).unwrap();
    let c = parse(&conf, &Resource::new(8192, 8)).unwrap();
    assert!(c.root.find("root.default").is_some_and(|q| q.is_leaf()));
    assert_eq!(c.calculator, Calculator::Dominant);
}

// ------------------------------------------------------------------ tree rules

#[test]
fn capacity_sum_must_be_100_with_yarns_message_and_the_place() {
    let e = err(&with(two_queues(), &[("root.b.capacity", "40")]));
    assert_eq!(e.rule, Rule::CapacitySum);
    assert!(
        e.message.starts_with(
            "Illegal capacity sum of 1.1 for children of queue root for label=. It should be either 0 or 1.0"
        ),
        "{e}"
    );
    assert_eq!(e.queue.as_deref(), Some("root"));
    assert_eq!(
        e.property.as_deref(),
        Some("yarn.scheduler.capacity.root.queues")
    );
    assert_eq!(e.place.as_deref(), Some("capacity-scheduler.xml:2"));
    let text = e.to_string();
    assert!(
        text.starts_with("capacity-scheduler.xml:2: Illegal capacity sum"),
        "{text}"
    );
    assert!(text.contains("rule capacity-sum"), "{text}");
    // Within YARN's precision is fine.
    ok(&with(
        two_queues(),
        &[("root.a.capacity", "69.99"), ("root.b.capacity", "30.0")],
    ));
}

#[test]
fn zero_sum_only_under_a_zero_parent_or_when_allowed() {
    let tree = vec![
        ("root.queues", "a,b"),
        ("root.a.capacity", "100"),
        ("root.b.capacity", "0"),
        ("root.a.queues", "x,y"),
        ("root.a.x.capacity", "0"),
        ("root.a.y.capacity", "0"),
    ];
    let e = err(&tree);
    assert_eq!(e.rule, Rule::CapacitySum);
    assert!(
        e.message
            .contains("It is set to 0, but parent percent != 0"),
        "{e}"
    );
    ok(&with(
        tree.clone(),
        &[("root.a.allow-zero-capacity-sum", "true")],
    ));
    // Under a 0% parent, 0% children are fine.
    ok(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "100"),
        ("root.b.capacity", "0"),
        ("root.b.queues", "x"),
        ("root.b.x.capacity", "0"),
    ]);
}

#[test]
fn capacity_range() {
    for bad in ["101", "-1", "abc", "1e999"] {
        let e = err(&with(two_queues(), &[("root.a.capacity", bad)]));
        assert_eq!(e.rule, Rule::CapacityRange, "{bad}: {e}");
        assert_eq!(e.queue.as_deref(), Some("root.a"));
        assert_eq!(
            e.property.as_deref(),
            Some("yarn.scheduler.capacity.root.a.capacity")
        );
    }
    let e = err(&with(two_queues(), &[("root.a.maximum-capacity", "150")]));
    assert_eq!(e.rule, Rule::CapacityRange);
    assert!(
        e.message
            .contains("Illegal maximum-capacity of 150 for queue root.a"),
        "{e}"
    );
}

#[test]
fn maximum_capacity_not_below_capacity() {
    let e = err(&with(two_queues(), &[("root.a.maximum-capacity", "50")]));
    assert_eq!(e.rule, Rule::MaxCapacityBelowCapacity);
    assert!(e.message.contains("Queue 'root.a' has an absolute capacity (0.7) greater than its absolute maximumCapacity (0.5)"), "{e}");
    assert_eq!(
        e.property.as_deref(),
        Some("yarn.scheduler.capacity.root.a.maximum-capacity")
    );
    // YARN compares absolute figures: a child's max below its own capacity is fine while the
    // parent's maximum leaves room.
    ok(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "50"),
        ("root.b.capacity", "50"),
        ("root.a.queues", "x,y"),
        ("root.a.x.capacity", "80"),
        ("root.a.x.maximum-capacity", "60"),
        ("root.a.y.capacity", "20"),
    ]);
    let e = err(&[
        ("root.queues", "a"),
        ("root.a.capacity", "[memory=4096,vcores=4]"),
        ("root.a.maximum-capacity", "[memory=2048,vcores=4]"),
    ]);
    assert_eq!(e.rule, Rule::MaxCapacityBelowCapacity);
    assert!(e.message.starts_with("Min resource configuration"), "{e}");
}

#[test]
fn siblings_may_not_mix_capacity_forms() {
    for (a, b) in [
        ("50", "[memory=1024,vcores=1]"),
        ("50", "1w"),
        ("2w", "[memory=1024]"),
    ] {
        let e = err(&[
            ("root.queues", "a,b"),
            ("root.a.capacity", a),
            ("root.b.capacity", b),
        ]);
        assert_eq!(e.rule, Rule::MixedChildrenCapacityTypes, "{a} {b}: {e}");
        assert!(
            e.message
                .starts_with("Parent queue 'root' have children queue used mixed of"),
            "{e}"
        );
    }
}

#[test]
fn parent_and_child_must_agree_on_percent_or_absolute() {
    let e = err(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "50"),
        ("root.b.capacity", "50"),
        ("root.a.queues", "x"),
        ("root.a.x.capacity", "[memory=1024,vcores=1]"),
    ]);
    assert_eq!(e.rule, Rule::ParentChildCapacityType);
    assert!(
        e.message.contains(
            "Parent queue 'root.a' and child queue 'root.a.x' should use either percentage"
        ),
        "{e}"
    );
    let e = err(&[
        ("root.queues", "a"),
        ("root.a.capacity", "[memory=4096,vcores=4]"),
        ("root.a.queues", "x"),
        ("root.a.x.capacity", "100"),
    ]);
    assert_eq!(e.rule, Rule::ParentChildCapacityType);
}

#[test]
fn absolute_children_fit_in_their_parent() {
    let base = vec![
        ("root.queues", "a"),
        ("root.a.capacity", "[memory=4096,vcores=4]"),
        ("root.a.queues", "x,y"),
        ("root.a.x.capacity", "[memory=2048,vcores=2]"),
        ("root.a.y.capacity", "[memory=2048,vcores=2]"),
    ];
    ok(&base);
    let e = err(&with(
        base.clone(),
        &[("root.a.y.capacity", "[memory=3072,vcores=2]")],
    ));
    assert_eq!(e.rule, Rule::AbsoluteExceedsParent);
    assert!(e.message.contains("is less than to its children"), "{e}");
    let e = err(&with(
        base,
        &[
            ("root.a.maximum-capacity", "[memory=4096,vcores=4]"),
            ("root.a.x.maximum-capacity", "[memory=8192,vcores=4]"),
        ],
    ));
    assert_eq!(e.rule, Rule::AbsoluteExceedsParent);
}

#[test]
fn unknown_resource_types_and_bad_absolute_forms() {
    let e = err(&[
        ("root.queues", "a"),
        ("root.a.capacity", "[memory=1024,yarn.io/gpu=1]"),
    ]);
    assert_eq!(e.rule, Rule::UnknownResourceType);
    assert!(e.message.contains("yarn.io/gpu"), "{e}");
    for bad in [
        "[memory=1024",
        "[]",
        "[memory]",
        "[memory=-1]",
        "[memory=1,memory-mb=2]",
        "[memory=50%]",
        "[vcores=2w]",
    ] {
        let e = err(&[("root.queues", "a"), ("root.a.capacity", bad)]);
        assert_eq!(e.rule, Rule::CapacityRange, "{bad}: {e}");
    }
}

#[test]
fn queue_names() {
    for bad in ["a b", "a:b", "a/b", "a%"] {
        let raw = format!("x,{bad}");
        let e = err(&[("root.queues", raw.as_str()), ("root.x.capacity", "100")]);
        assert_eq!(e.rule, Rule::InvalidQueueName, "{bad}: {e}");
    }
    let e = err(&[("root.queues", "a,a"), ("root.a.capacity", "100")]);
    assert_eq!(e.rule, Rule::DuplicateQueue);
    let e = err(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "50"),
        ("root.b.capacity", "50"),
        ("root.a.queues", "x"),
        ("root.a.x.capacity", "100"),
        ("root.b.queues", "x"),
        ("root.b.x.capacity", "100"),
    ]);
    assert_eq!(e.rule, Rule::DuplicateLeafName);
    assert!(
        e.message
            .starts_with("Two leaf queues were named x. Leaf queue names must be distinct"),
        "{e}"
    );
}

#[test]
fn root_must_have_children() {
    let e = err(&[("root.queues", " , ")]);
    assert_eq!(e.rule, Rule::RootWithoutChildren);
}

#[test]
fn tree_depth_is_bounded() {
    let mut owned: Vec<(String, String)> = Vec::new();
    let mut path = "root".to_string();
    for i in 0..=MAX_DEPTH {
        let child = format!("q{i}");
        owned.push((format!("{path}.queues"), child.clone()));
        path = format!("{path}.{child}");
        owned.push((format!("{path}.capacity"), "100".into()));
    }
    let pairs: Vec<(&str, &str)> = owned
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(err(&pairs).rule, Rule::TreeTooDeep);
}

#[test]
fn per_queue_maximum_allocation_bounded_by_cluster_and_parent() {
    let e = err(&with(
        two_queues(),
        &[("root.a.maximum-allocation-mb", "16384")],
    ));
    assert_eq!(e.rule, Rule::MaximumAllocation);
    assert!(
        e.message.starts_with(
            "Queue maximum allocation cannot be larger than the cluster setting for queue root.a"
        ),
        "{e}"
    );
    let e = err(&with(
        two_queues(),
        &[("root.a.maximum-allocation-vcores", "0")],
    ));
    assert_eq!(e.rule, Rule::MaximumAllocation);
    let e = err(&[
        ("root.queues", "a"),
        ("root.a.capacity", "100"),
        ("root.a.maximum-allocation-mb", "2048"),
        ("root.a.queues", "x"),
        ("root.a.x.capacity", "100"),
        ("root.a.x.maximum-allocation-mb", "4096"),
    ]);
    assert_eq!(e.rule, Rule::MaximumAllocation);
    // Inherited from the parent.
    let c = ok(&[
        ("root.queues", "a"),
        ("root.a.capacity", "100"),
        ("root.a.maximum-allocation-mb", "2048"),
        ("root.a.queues", "x"),
        ("root.a.x.capacity", "100"),
    ]);
    assert_eq!(
        leaf(&c, "root.a.x").max_allocation,
        Some(Resource::new(2048, 8))
    );
}

#[test]
fn states_inherit_and_running_child_of_stopped_parent_is_refused() {
    let tree = vec![
        ("root.queues", "a"),
        ("root.a.capacity", "100"),
        ("root.a.state", "STOPPED"),
        ("root.a.queues", "x"),
        ("root.a.x.capacity", "100"),
    ];
    let c = ok(&tree);
    assert_eq!(leaf(&c, "root.a.x").state, QueueState::Stopped);
    let e = err(&with(tree, &[("root.a.x.state", "RUNNING")]));
    assert_eq!(e.rule, Rule::RunningChildOfStoppedParent);
    assert!(e.message.contains("The parent queue:root.a cannot be STOPPED as the child queue:root.a.x is in RUNNING state."), "{e}");
    let e = err(&with(two_queues(), &[("root.a.state", "DRAINING")]));
    assert_eq!(e.rule, Rule::InvalidState);
}

#[test]
fn acls() {
    assert!(parse_acl("*").unwrap().all);
    assert!(parse_acl("alice *").unwrap().all);
    let none = parse_acl(" ").unwrap();
    assert!(!none.all && none.users.is_empty() && none.groups.is_empty());
    assert_eq!(parse_acl("").unwrap(), Acl::nobody());
    let a = parse_acl("alice,bob devs, ops").unwrap();
    assert_eq!(a.users.len(), 2);
    assert!(a.groups.contains("ops"));
    let g = parse_acl(" admins").unwrap();
    assert!(g.users.is_empty() && g.groups.contains("admins"));
    assert!(parse_acl("\n   alice\n").unwrap().users.contains("alice"));
    assert!(parse_acl("a b c").is_err());
    assert!(
        parse_acl("alice, bob devs").is_err(),
        "a space splits users from groups"
    );
    assert!(parse_acl("al*ce").is_err());
    assert_eq!(acl_string(&parse_acl("alice devs").unwrap()), "alice devs");
    assert_eq!(acl_string(&parse_acl(" ").unwrap()), " ");
    assert_eq!(acl_string(&Acl::everyone()), "*");
    let e = err(&with(
        two_queues(),
        &[("root.a.acl_submit_applications", "a b c")],
    ));
    assert_eq!(e.rule, Rule::InvalidAcl);
    let e = err(&with(two_queues(), &[("yarn.admin.acl", "x*y")]));
    assert_eq!(e.rule, Rule::InvalidAcl);
    assert_eq!(e.property.as_deref(), Some("yarn.admin.acl"));
}

#[test]
fn queue_mappings_syntax_and_targets() {
    for (bad, why) in [
        ("u:alice", "expected"),
        ("x:alice:a", "unknown mapping type"),
        ("u::a", "may not be empty"),
        ("u:alice:nope", "invalid or non-leaf queue : nope"),
        ("u:alice:root", "invalid or non-leaf queue : root"),
        ("u:alice:root.%user", "expected a queue or one of %user"),
        ("u:%user:%group", "expected a queue or one of %user"),
        ("g:%user:a", "must name a group"),
    ] {
        let e = err(&with(two_queues(), &[("queue-mappings", bad)]));
        assert_eq!(e.rule, Rule::InvalidQueueMapping, "{bad}: {e}");
        assert!(e.message.contains(why), "{bad}: {e}");
    }
    let c = ok(&with(
        two_queues(),
        &[(
            "queue-mappings",
            "u:%user:%secondary_group,u:%user:%primary_group.%user,u:%user:%secondary_group.%user",
        )],
    ));
    assert_eq!(c.queue_mappings.len(), 3);
}

#[test]
fn ordering_policies() {
    let c = ok(&with(
        two_queues(),
        &[(
            "root.a.ordering-policy",
            "org.apache.hadoop.yarn.server.resourcemanager.scheduler.policy.FairOrderingPolicy",
        )],
    ));
    assert_eq!(leaf(&c, "root.a").ordering, OrderingPolicy::Fair);
    ok(&with(
        two_queues(),
        &[("root.ordering-policy", "priority-utilization")],
    ));
    for (k, v) in [
        ("root.a.ordering-policy", "fifo-with-partitions"),
        ("root.a.ordering-policy", "utilization"),
        ("root.ordering-policy", "fair"),
    ] {
        let e = err(&with(two_queues(), &[(k, v)]));
        assert_eq!(e.rule, Rule::InvalidOrderingPolicy, "{k}={v}: {e}");
    }
}

#[test]
fn limits_and_bad_values() {
    for (k, v, rule) in [
        ("root.a.user-limit-factor", "0", Rule::LimitRange),
        ("root.a.user-limit-factor", "x", Rule::BadValue),
        ("root.a.minimum-user-limit-percent", "0", Rule::LimitRange),
        ("root.a.minimum-user-limit-percent", "101", Rule::LimitRange),
        (
            "root.a.maximum-am-resource-percent",
            "1.5",
            Rule::LimitRange,
        ),
        ("maximum-am-resource-percent", "-0.1", Rule::LimitRange),
        ("maximum-applications", "-5", Rule::LimitRange),
        ("root.a.max-parallel-apps", "-1", Rule::LimitRange),
        ("user.bob.max-parallel-apps", "many", Rule::BadValue),
        ("queue-mappings-override.enable", "yes", Rule::BadValue),
        ("node-locality-delay", "-3", Rule::LimitRange),
        ("rack-locality-additional-delay", "-2", Rule::LimitRange),
        ("root.a.priority", "99999999999", Rule::LimitRange),
        (
            "resource-calculator",
            "com.example.Mine",
            Rule::InvalidResourceCalculator,
        ),
        (
            "yarn.cluster.max-application-priority",
            "-1",
            Rule::LimitRange,
        ),
        ("yarn.acl.enable", "on", Rule::BadValue),
    ] {
        let e = err(&with(two_queues(), &[(k, v)]));
        assert_eq!(e.rule, rule, "{k}={v}: {e}");
        assert!(
            e.property.as_deref().is_some_and(|p| p.ends_with(k)),
            "{k}: {e}"
        );
        assert!(e.place.is_some(), "{k}: the error names the file: {e}");
    }
    ok(&with(two_queues(), &[("root.a.user-limit-factor", "-1")]));
}

// ------------------------------------------------------------------ transitions

fn parsed(pairs: &[(&str, &str)]) -> SchedulerConf {
    ok(pairs)
}

#[test]
fn removing_a_running_queue_is_refused_a_stopped_one_allowed() {
    let old = parsed(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "70"),
        ("root.b.capacity", "30"),
    ]);
    let new = parsed(&[("root.queues", "a"), ("root.a.capacity", "100")]);
    let e = validate_transition(&old, &new).unwrap_err();
    assert_eq!(e.rule, Rule::QueueRemovalNotStopped);
    assert_eq!(
        e.message,
        "root.b cannot be deleted from the capacity scheduler configuration, as the queue is not yet in stopped state. Current State : RUNNING"
    );
    assert_eq!(e.queue.as_deref(), Some("root.b"));
    let stopped = parsed(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "70"),
        ("root.b.capacity", "30"),
        ("root.b.state", "STOPPED"),
    ]);
    validate_transition(&stopped, &new).unwrap();
    // Children of a stopped parent are stopped too.
    let old = parsed(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "70"),
        ("root.b.capacity", "30"),
        ("root.b.state", "STOPPED"),
        ("root.b.queues", "x"),
        ("root.b.x.capacity", "100"),
    ]);
    validate_transition(&old, &new).unwrap();
}

#[test]
fn moving_a_queue_is_refused_with_yarns_message() {
    let old = parsed(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "50"),
        ("root.b.capacity", "50"),
        ("root.a.queues", "x"),
        ("root.a.x.capacity", "100"),
        ("root.a.x.state", "STOPPED"),
    ]);
    let new = parsed(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "50"),
        ("root.b.capacity", "50"),
        ("root.b.queues", "x"),
        ("root.b.x.capacity", "100"),
    ]);
    let e = validate_transition(&old, &new).unwrap_err();
    assert_eq!(e.rule, Rule::QueueMoved);
    assert_eq!(
        e.message,
        "x is moved from:root.a.x to:root.b.x after refresh, which is not allowed."
    );
}

#[test]
fn a_running_leaf_may_not_become_a_parent() {
    let old = parsed(&two_queues());
    let new = parsed(&with(
        two_queues(),
        &[("root.b.queues", "c"), ("root.b.c.capacity", "100")],
    ));
    let e = validate_transition(&old, &new).unwrap_err();
    assert_eq!(e.rule, Rule::LeafToParentConversion);
    assert!(e.message.starts_with("Can not convert the leaf queue: root.b to parent queue since it is not yet in stopped state."), "{e}");
    let old_stopped = parsed(&with(two_queues(), &[("root.b.state", "STOPPED")]));
    validate_transition(&old_stopped, &new).unwrap();
    // ... or when the new configuration stops it.
    let new_stopped = parsed(&with(
        two_queues(),
        &[
            ("root.b.queues", "c"),
            ("root.b.c.capacity", "100"),
            ("root.b.state", "STOPPED"),
        ],
    ));
    validate_transition(&old, &new_stopped).unwrap();
    // Parent to leaf is fine.
    validate_transition(&new, &old).unwrap_err(); // c removed while RUNNING
    validate_transition(&new_stopped, &old_stopped).unwrap();
}

#[test]
fn unchanged_and_grown_trees_pass() {
    let old = parsed(&two_queues());
    validate_transition(&old, &old).unwrap();
    let grown = parsed(&[
        ("root.queues", "a,b,c"),
        ("root.a.capacity", "50"),
        ("root.b.capacity", "30"),
        ("root.c.capacity", "20"),
    ]);
    validate_transition(&old, &grown).unwrap();
}

#[test]
fn locate_names_the_file() {
    let conf = conf_of(&two_queues());
    let props = CsProps::from_conf(&conf).unwrap();
    let old = parse(&conf, &Resource::new(8192, 8)).unwrap();
    let new = parsed(&[("root.queues", "a"), ("root.a.capacity", "100")]);
    let e = validate_transition(&old, &new).unwrap_err().locate(&props);
    assert_eq!(e.place.as_deref(), Some("capacity-scheduler.xml:2"));
}

// ------------------------------------------------------------------ mutations

fn props_of(pairs: &[(&str, &str)]) -> CsProps {
    CsProps::from_pairs(
        pairs
            .iter()
            .map(|(k, v)| (format!("{CS}{k}"), v.to_string())),
        None,
    )
}

fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn mutation_adds_updates_and_removes_like_yarn() {
    let props = props_of(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "70"),
        ("root.b.capacity", "30"),
        ("root.b.state", "STOPPED"),
        ("root.b.user-limit-factor", "2"),
    ]);
    let m = SchedConfMutation {
        remove_queues: vec!["root.b".into()],
        add_queues: vec![QueueParams {
            queue: "root.c".into(),
            params: entries(&[("capacity", "40"), ("maximum-capacity", "60")]),
        }],
        update_queues: vec![QueueParams {
            queue: "root.a".into(),
            params: entries(&[("capacity", "60"), ("user-limit-factor", "")]),
        }],
        global: entries(&[("yarn.scheduler.capacity.maximum-applications", "99")]),
    };
    let out = apply_mutation(&props, &m).unwrap();
    let get = |k: &str| out.get(&format!("{CS}{k}")).map(str::to_string);
    assert_eq!(get("root.queues").as_deref(), Some("a,c"));
    assert_eq!(get("root.b.capacity"), None);
    assert_eq!(get("root.b.user-limit-factor"), None);
    assert_eq!(get("root.c.capacity").as_deref(), Some("40"));
    assert_eq!(get("root.a.capacity").as_deref(), Some("60"));
    assert_eq!(get("maximum-applications").as_deref(), Some("99"));
    let old = parse_props(&props, &SiteSettings::for_tests()).unwrap();
    let new = parse_props(&out, &SiteSettings::for_tests()).unwrap();
    validate_transition(&old, &new).unwrap();
    assert_eq!(new.max_applications, 99);
    // The original is untouched.
    assert_eq!(props.get(&format!("{CS}root.queues")), Some("a,b"));
}

#[test]
fn mutation_refusals() {
    let props = props_of(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "70"),
        ("root.b.capacity", "30"),
    ]);
    let cases: Vec<(SchedConfMutation, &str)> = vec![
        (
            SchedConfMutation {
                remove_queues: vec!["root.zz".into()],
                ..Default::default()
            },
            "Queue root.zz not found",
        ),
        (
            SchedConfMutation {
                remove_queues: vec!["root".into()],
                ..Default::default()
            },
            "Can't remove queue root",
        ),
        (
            SchedConfMutation {
                remove_queues: vec!["b".into()],
                ..Default::default()
            },
            "full path",
        ),
        (
            SchedConfMutation {
                add_queues: vec![QueueParams {
                    queue: "root.a".into(),
                    params: vec![],
                }],
                ..Default::default()
            },
            "Can't add existing queue root.a",
        ),
        (
            SchedConfMutation {
                add_queues: vec![QueueParams {
                    queue: "root.x.y".into(),
                    params: vec![],
                }],
                ..Default::default()
            },
            "parent queue root.x does not exist",
        ),
        (
            SchedConfMutation {
                add_queues: vec![QueueParams {
                    queue: "root.bad name".into(),
                    params: vec![],
                }],
                ..Default::default()
            },
            "invalid queue",
        ),
        (
            SchedConfMutation {
                update_queues: vec![QueueParams {
                    queue: "root.nope".into(),
                    params: entries(&[("capacity", "1")]),
                }],
                ..Default::default()
            },
            "does not exist",
        ),
        (
            SchedConfMutation {
                update_queues: vec![QueueParams {
                    queue: "root.a".into(),
                    params: entries(&[("bad key", "1")]),
                }],
                ..Default::default()
            },
            "invalid parameter name",
        ),
        (
            SchedConfMutation {
                global: entries(&[("yarn.acl.enable", "true")]),
                ..Default::default()
            },
            "not a capacity-scheduler property",
        ),
    ];
    for (m, why) in cases {
        let e = apply_mutation(&props, &m).unwrap_err();
        assert_eq!(e.rule, Rule::InvalidMutation, "{why}: {e}");
        assert!(e.message.contains(why), "{why}: {e}");
    }
}

#[test]
fn mutation_refuses_unknown_properties_with_the_closest_known_one() {
    let props = props_of(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "70"),
        ("root.b.capacity", "30"),
    ]);
    let update = |params: &[(&str, &str)]| SchedConfMutation {
        update_queues: vec![QueueParams {
            queue: "root.a".into(),
            params: entries(params),
        }],
        ..Default::default()
    };
    let e = apply_mutation(&props, &update(&[("maximum-capacty", "80")])).unwrap_err();
    assert_eq!(e.rule, Rule::UnknownProperty, "{e}");
    assert_eq!(e.queue.as_deref(), Some("root.a"));
    assert_eq!(
        e.property.as_deref(),
        Some("yarn.scheduler.capacity.root.a.maximum-capacty")
    );
    assert_eq!(
        e.to_string(),
        "Unknown property 'maximum-capacty' for queue root.a; did you mean 'maximum-capacity'? (queue root.a, property yarn.scheduler.capacity.root.a.maximum-capacty, rule unknown-property)"
    );
    // Adding a queue is checked the same way; a property nothing resembles is named alone.
    let add = SchedConfMutation {
        add_queues: vec![QueueParams {
            queue: "root.c".into(),
            params: entries(&[("capacity", "0"), ("colour", "blue")]),
        }],
        ..Default::default()
    };
    let e = apply_mutation(&props, &add).unwrap_err();
    assert_eq!(e.rule, Rule::UnknownProperty);
    assert!(
        e.message
            .starts_with("Unknown property 'colour' for queue root.c; docs/"),
        "{e}"
    );
    // Global updates: full names, queue keys among them.
    for (k, want) in [
        (
            "yarn.scheduler.capacity.maximum-aplications",
            "did you mean 'yarn.scheduler.capacity.maximum-applications'?",
        ),
        (
            "yarn.scheduler.capacity.root.b.user-limit-facter",
            "did you mean 'yarn.scheduler.capacity.root.b.user-limit-factor'?",
        ),
    ] {
        let m = SchedConfMutation {
            global: entries(&[(k, "5")]),
            ..Default::default()
        };
        let e = apply_mutation(&props, &m).unwrap_err();
        assert_eq!(e.rule, Rule::UnknownProperty, "{k}");
        assert!(e.message.ends_with(want), "{k}: {e}");
    }
    // Known ones, per-label ones and YARN's unimplemented ones are applied.
    let ok = update(&[
        ("maximum-capacity", "80"),
        ("accessible-node-labels.gpu.capacity", "0"),
        ("maximum-application-lifetime", "60"),
    ]);
    let out = apply_mutation(&props, &ok).unwrap();
    assert_eq!(out.get(&format!("{CS}root.a.maximum-capacity")), Some("80"));
}

#[test]
fn errors_quote_values_as_written() {
    let cases = [
        (
            "root.a.capacity",
            "-60",
            "Illegal capacity of -60 for queue root.a",
        ),
        (
            "root.a.capacity",
            "1e3",
            "Illegal capacity of 1e3 for queue root.a",
        ),
        (
            "root.a.maximum-capacity",
            "150%",
            "Illegal maximum-capacity of 150% for queue root.a",
        ),
        (
            "root.a.user-limit-factor",
            "-0.50",
            "user-limit-factor must be positive, or -1 for no limit, got -0.50",
        ),
        ("root.a.minimum-user-limit-percent", "0.0", "got 0.0"),
        ("root.a.maximum-am-resource-percent", "10", "got 10"),
        ("maximum-am-resource-percent", " 1.50 ", "got 1.50"),
        ("root.a.maximum-allocation-mb", "-0x10", "got -0x10"),
        ("node-locality-delay", "-0x1", "got -0x1"),
        ("root.a.max-parallel-apps", "-01", "got -01"),
    ];
    for (k, v, want) in cases {
        let e = err(&with(two_queues(), &[(k, v)]));
        assert!(e.message.contains(want), "{k}={v}: {e}");
    }
}

#[test]
fn mutation_result_is_validated_as_a_whole() {
    let props = props_of(&[
        ("root.queues", "a,b"),
        ("root.a.capacity", "70"),
        ("root.b.capacity", "30"),
    ]);
    let m = SchedConfMutation {
        add_queues: vec![QueueParams {
            queue: "root.c".into(),
            params: entries(&[("capacity", "10")]),
        }],
        ..Default::default()
    };
    let out = apply_mutation(&props, &m).unwrap();
    let e = parse_props(&out, &SiteSettings::for_tests()).unwrap_err();
    assert_eq!(e.rule, Rule::CapacitySum);
    assert!(
        e.message
            .starts_with("Illegal capacity sum of 1.1 for children of queue root"),
        "{e}"
    );
    assert_eq!(e.place, None, "a mutated value has no file");
    // Removing the last child of a parent makes it a leaf again.
    let props = props_of(&[
        ("root.queues", "a"),
        ("root.a.capacity", "100"),
        ("root.a.queues", "x"),
        ("root.a.ordering-policy", "utilization"),
        ("root.a.x.capacity", "100"),
        ("root.a.x.state", "STOPPED"),
    ]);
    let out = apply_mutation(
        &props,
        &SchedConfMutation {
            remove_queues: vec!["root.a.x".into()],
            ..Default::default()
        },
    )
    .unwrap();
    let c = parse_props(&out, &SiteSettings::for_tests()).unwrap();
    assert!(c.root.find("root.a").is_some_and(|q| q.is_leaf()));
    assert_eq!(out.get(&format!("{CS}root.a.ordering-policy")), None);
}

#[test]
fn queue_paths_walks_the_listed_tree() {
    let props = props_of(&[
        ("root.queues", "a,b"),
        ("root.a.queues", "x"),
        ("root.zz.capacity", "5"),
    ]);
    assert_eq!(
        props.queue_paths(),
        vec!["root", "root.a", "root.a.x", "root.b"]
    );
}

#[test]
fn preemption_flags_inherit_and_las_ordering_parses() {
    let c = ok(&with(
        two_queues(),
        &[
            ("root.disable_preemption", "true"),
            ("root.b.disable_preemption", "false"),
            ("root.a.intra-queue-preemption.disable_preemption", "true"),
            ("root.a.ordering-policy", "las"),
            ("root.a.ordering-policy.las.thresholds", "60, 600,6000"),
            ("root.a.ordering-policy.las.promotion-factor", "2.5"),
        ],
    ));
    let a = leaf(&c, "root.a");
    assert!(a.disable_preemption, "inherited from root");
    assert!(a.intra_queue_disable_preemption);
    assert!(
        !leaf(&c, "root.b").disable_preemption,
        "a child may turn it back on"
    );
    assert_eq!(a.ordering, OrderingPolicy::Las);
    assert_eq!(a.las.thresholds_gpu_s, vec![60, 600, 6000]);
    assert_eq!(a.las.promotion_factor, 2.5);
    assert_eq!(a.las.level(59_999), 0);
    assert_eq!(a.las.level(60_000), 1);
    assert_eq!(a.las.level(7_000_000), 3);
    let b = leaf(&c, "root.b");
    assert_eq!(b.las, LasSpec::default());
    for (v, why) in [
        ("600,60", "ascending"),
        ("0,10", "ascending"),
        ("ten", "whole number"),
    ] {
        let e = err(&with(
            two_queues(),
            &[("root.a.ordering-policy.las.thresholds", v)],
        ));
        assert!(e.to_string().contains(why), "{v}: {e}");
    }
    let e = err(&with(
        two_queues(),
        &[("root.a.ordering-policy.las.promotion-factor", "-1")],
    ));
    assert!(e.to_string().contains("promotion"), "{e}");
    let e = err(&with(two_queues(), &[("root.ordering-policy", "las")]));
    assert!(e.to_string().contains("for leaf queues"), "{e}");
}

#[test]
fn fairshare_ordering_user_weights_and_accounting_parse() {
    let c = ok(&with(
        two_queues(),
        &[
            ("root.a.ordering-policy", "fairshare"),
            ("root.a.user-settings.alice.weight", "2.5"),
            ("root.a.user-settings.bob.weight", "0"),
            ("root.a.ordering-policy.fairshare.max-wait-ms", "60000"),
            (
                "spindle.scheduler.fairshare.billing-weights",
                "yarn.io/gpu=2,vcores=0.5",
            ),
            ("spindle.scheduler.fairshare.decay-half-life-ms", "0"),
            ("spindle.scheduler.fairshare.calc-period-ms", "1000"),
        ],
    ));
    let a = leaf(&c, "root.a");
    assert_eq!(a.ordering, OrderingPolicy::Fairshare);
    assert_eq!(a.fairshare.weight("alice"), 2.5);
    assert_eq!(a.fairshare.weight("bob"), 0.0);
    assert_eq!(
        a.fairshare.weight("carol"),
        1.0,
        "unnamed users have a share of 1"
    );
    assert_eq!(a.fairshare.max_wait_ms, 60_000);
    assert_eq!(leaf(&c, "root.b").fairshare, FairshareSpec::default());
    assert_eq!(c.fairshare.half_life_ms, 0);
    assert_eq!(c.fairshare.calc_period_ms, 1000);
    assert_eq!(
        c.fairshare
            .billing
            .per_second(&Resource::new(1024, 2).with("yarn.io/gpu", 3)),
        7.0
    );
    assert_eq!(ok(&two_queues()).fairshare, FairshareConf::default());
    for (k, v, why) in [
        ("root.a.user-settings.alice.weight", "-1", "weight"),
        ("root.a.user-settings.alice.weight", "lots", "number"),
        (
            "root.a.ordering-policy.fairshare.max-wait-ms",
            "-5",
            "milliseconds",
        ),
        (
            "spindle.scheduler.fairshare.billing-weights",
            "gpus=1",
            "resource type",
        ),
        (
            "spindle.scheduler.fairshare.decay-half-life-ms",
            "10",
            "at least 1000",
        ),
        (
            "spindle.scheduler.fairshare.calc-period-ms",
            "0",
            "at least 1",
        ),
    ] {
        let e = err(&with(two_queues(), &[(k, v)]));
        assert!(e.to_string().contains(why), "{k}={v}: {e}");
    }
    let e = err(&with(
        two_queues(),
        &[("root.ordering-policy", "fairshare")],
    ));
    assert!(e.to_string().contains("for leaf queues"), "{e}");
}
