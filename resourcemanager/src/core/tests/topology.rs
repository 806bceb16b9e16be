//! Topology domains for gangs on the pure core: a gang that requires a domain is granted
//! whole inside one or waits (naming the best domain and its shortfall); a preferred domain
//! falls back to the whole cluster; small gangs pack into partly used domains, keeping a
//! whole one free for a large gang; and a property test that no gang is granted across the
//! domain it requires.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use spindle_common::resource::GPU;
use spindle_common::{ApplicationId, NodeId, Resource};

use super::preemption::{conf, leaf, Cluster};
use super::TestEnv;
use crate::core::scheduler::gang::{GangPhase, GangRequest};
use crate::core::scheduler::topology::Domain;
use crate::core::*;

const CLIQUE: &str = "nm.yarn.io/nvlink-clique";

/// `nodes` nodes of `gpus` GPUs; node i in rack `/r{i / per_rack}` and clique `c{i / per_rack}`.
fn cluster(nodes: usize, per_rack: usize, gpus: i64) -> Cluster {
    let mut env = TestEnv::with_conf(conf(vec![leaf("root.a", 100.0)], 0));
    let mut ids = Vec::new();
    for i in 0..nodes {
        let id = NodeId::new(format!("n{i}"), 1);
        env.core.register_node(
            NodeRegistration {
                id: id.clone(),
                http_address: format!("n{i}:2"),
                rack: format!("/r{}", i / per_rack),
                total: Resource::new(65536, 64).with(GPU, gpus),
                version: "test".into(),
                containers: vec![],
                attributes: BTreeMap::from([(CLIQUE.to_string(), format!("c{}", i / per_rack))]),
            },
            env.now,
        );
        env.step();
        ids.push(id);
    }
    Cluster {
        env,
        nodes: ids,
        ams: BTreeMap::new(),
    }
}

fn in_domain(
    c: &mut Cluster,
    app: &ApplicationId,
    id: &str,
    n: u32,
    gpus: i64,
    d: Domain,
) -> AllocateReply {
    let params = GangRequest {
        domain: Some(d),
        ..GangRequest::default()
    };
    c.gang_with(app, id, n, gpus, params, 0.0)
}

fn required(level: &str) -> Domain {
    Domain {
        level: level.into(),
        required: true,
    }
}

/// The racks (or cliques) of a gang's live members.
fn domains_of(c: &Cluster, app: &ApplicationId, gang: &str, level: &str) -> BTreeSet<String> {
    let g = c.env.core.scheduler().gang(app, gang).expect("gang");
    g.members
        .iter()
        .filter_map(|m| c.env.core.containers().get(m))
        .filter(|x| x.is_live())
        .filter_map(|x| {
            let n = c.env.core.scheduler().node(&x.node)?;
            crate::core::scheduler::topology::domain_of(n, level).map(str::to_string)
        })
        .collect()
}

#[test]
fn a_gang_requiring_a_rack_is_granted_inside_one_or_waits_naming_the_best() {
    // Two racks of two 4-GPU nodes.
    let mut c = cluster(4, 2, 4);
    let a = c.start("root.a", "u", 0);
    let r = in_domain(&mut c, &a, "fits", 3, 2, required("rack"));
    assert_eq!(r.allocated.len(), 3);
    assert_eq!(domains_of(&c, &a, "fits", "rack").len(), 1, "one rack");
    // 10 GPUs in one rack of 8: it waits, and says why.
    let b = c.start("root.a", "v", 0);
    let r = in_domain(&mut c, &b, "big", 5, 2, required("rack"));
    assert!(r.allocated.is_empty());
    let g = c.env.core.scheduler().gang(&b, "big").expect("gang");
    assert!(g.phase.is_waiting());
    // The best rack is the one the first gang left whole.
    let used = domains_of(&c, &a, "fits", "rack");
    let other = if used.contains("/r0") { "/r1" } else { "/r0" };
    let why = format!("it requires one rack (the best, {other}, holds 4 of 5)");
    assert!(g.diagnostics.contains(&why), "{}", g.diagnostics);
}

#[test]
fn a_preferred_domain_is_taken_when_one_fits_and_the_whole_cluster_otherwise() {
    let mut c = cluster(4, 2, 4);
    let preferred = || Domain {
        level: "rack".into(),
        required: false,
    };
    let a = c.start("root.a", "u", 0);
    let r = in_domain(&mut c, &a, "one", 4, 1, preferred());
    assert_eq!(r.allocated.len(), 4);
    assert_eq!(domains_of(&c, &a, "one", "rack").len(), 1);
    // 10 GPUs fit no rack of 8 (4 of one are taken): it runs across racks.
    let b = c.start("root.a", "v", 0);
    let r = in_domain(&mut c, &b, "across", 5, 2, preferred());
    assert_eq!(r.allocated.len(), 5);
    assert_eq!(domains_of(&c, &b, "across", "rack").len(), 2);
}

#[test]
fn small_gangs_pack_into_a_partly_used_domain_keeping_a_whole_one_free() {
    // Two NVLink cliques of two 4-GPU nodes each (attribute nm.yarn.io/nvlink-clique).
    let mut c = cluster(4, 2, 4);
    let a = c.start("root.a", "u", 0);
    in_domain(&mut c, &a, "first", 1, 4, required(CLIQUE));
    let first = domains_of(&c, &a, "first", CLIQUE);
    // A small gang goes to the clique already in use...
    let b = c.start("root.a", "v", 0);
    in_domain(&mut c, &b, "small", 2, 1, required(CLIQUE));
    assert_eq!(domains_of(&c, &b, "small", CLIQUE), first);
    // ... so a gang needing a whole clique (8 GPUs) still fits.
    let big = c.start("root.a", "w", 0);
    let r = in_domain(&mut c, &big, "big", 2, 4, required(CLIQUE));
    assert_eq!(r.allocated.len(), 2);
    let whole = domains_of(&c, &big, "big", CLIQUE);
    assert_eq!(whole.len(), 1);
    assert!(whole.is_disjoint(&first));
}

#[test]
fn nodes_without_the_attribute_are_in_no_domain_of_its_level() {
    let mut c = cluster(2, 1, 4);
    let a = c.start("root.a", "u", 0);
    in_domain(&mut c, &a, "g", 1, 1, required("nm.yarn.io/nope"));
    let g = c.env.core.scheduler().gang(&a, "g").expect("gang");
    assert_eq!(g.phase, GangPhase::Pending);
    assert!(
        g.diagnostics
            .contains("it requires one nm.yarn.io/nope and no node is in one"),
        "{}",
        g.diagnostics
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48)
    ))]
    /// Random gangs that require a rack or a clique: each granted gang is inside one domain.
    #[test]
    fn no_gang_is_granted_across_the_domain_it_requires(
        per_rack in 1usize..4,
        gangs in proptest::collection::vec((1u32..5, 1i64..4, any::<bool>()), 1..8),
    ) {
        let mut c = cluster(6, per_rack, 4);
        let mut placed = Vec::new();
        for (i, (n, gpus, by_rack)) in gangs.into_iter().enumerate() {
            let app = c.start("root.a", "u", 0);
            let level = if by_rack { "rack" } else { CLIQUE };
            let id = format!("g{i}");
            in_domain(&mut c, &app, &id, n, gpus, required(level));
            placed.push((app, id, level));
            c.run_for(1_000);
        }
        for (app, id, level) in &placed {
            let ds = domains_of(&c, app, id, level);
            prop_assert!(ds.len() <= 1, "gang {id} spans {ds:?} of {level}");
        }
    }
}
