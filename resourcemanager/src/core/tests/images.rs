//! Placement that knows images: asks and gangs naming an image go to nodes that hold it
//! when such nodes fit, and anywhere else when none does (a preference, never a wait).

use std::collections::BTreeMap;

use spindle_common::resource::GPU;
use spindle_common::{ApplicationId, ContainerId, Resource};

use super::preemption::{conf, leaf, Cluster};
use super::TestEnv;
use crate::core::images::{NodeImage, MAX_NODE_IMAGES};
use crate::core::scheduler::gang::GangRequest;
use crate::core::*;

const IMG: &str = "127.0.0.1:5000/team/train:v1";

fn image(digest: char) -> NodeImage {
    NodeImage {
        names: vec![IMG.into()],
        digest: format!("sha256:{}", digest.to_string().repeat(64)),
        size_bytes: 1 << 20,
    }
}

/// `n` containers of `gpus` GPUs each naming `img`; a gang when `gang`.
fn ask(c: &mut Cluster, app: &ApplicationId, n: u32, gpus: i64, img: &str, gang: bool) {
    let att = c.att(app);
    let a = AskUpdate {
        image: Some(img.into()),
        label: None,
        tags: vec![],
        constraint: None,
        priority: 1,
        allocation_request_id: 1,
        resource_name: "*".into(),
        capability: Resource::new(1024, 1).with(GPU, gpus),
        num_containers: n,
        relax_locality: true,
        gang: gang.then(|| ("g".into(), GangRequest::default())),
        cpu: None,
    };
    c.env
        .core
        .am_allocate(&att, 0, vec![a], vec![], 0.1, c.env.now)
        .expect("allocate");
    c.env.step();
}

/// Node index to the count of `app`'s live non-AM containers there.
fn placed(c: &Cluster, app: &ApplicationId) -> BTreeMap<usize, usize> {
    let mut out = BTreeMap::new();
    for x in c.env.core.containers().values() {
        if x.is_live() && !x.is_am && x.id.application_id() == *app {
            let i = c.nodes.iter().position(|n| *n == x.node).expect("node");
            *out.entry(i).or_insert(0) += 1;
        }
    }
    out
}

fn cluster() -> Cluster {
    Cluster::new(conf(vec![leaf("a", 100.0)], 0), 6, 4)
}

#[test]
fn an_ask_goes_to_the_node_holding_its_image() {
    let mut c = cluster();
    let n4 = c.nodes[4].clone();
    c.env
        .core
        .report_node_images(&n4, vec![image('a')])
        .unwrap();
    let app = c.start("a", "u", 0);
    ask(&mut c, &app, 2, 1, IMG, false);
    assert_eq!(placed(&c, &app), BTreeMap::from([(4, 2)]));
    // By digest too.
    let other = c.start("a", "u", 0);
    ask(
        &mut c,
        &other,
        1,
        1,
        &format!("sha256:{}", "a".repeat(64)),
        false,
    );
    assert_eq!(placed(&c, &other), BTreeMap::from([(4, 1)]));
    assert_eq!(c.env.core.node_images(&n4), &[image('a')]);
}

#[test]
fn when_no_holder_fits_the_ask_goes_elsewhere_at_once() {
    let mut c = cluster();
    let n2 = c.nodes[2].clone();
    c.env
        .core
        .report_node_images(&n2, vec![image('b')])
        .unwrap();
    let app = c.start("a", "u", 0);
    // Six GPUs: four fit on the holder, the other two go elsewhere in the same pass.
    ask(&mut c, &app, 6, 1, IMG, false);
    let p = placed(&c, &app);
    assert_eq!(p.get(&2), Some(&4), "{p:?}");
    assert_eq!(p.values().sum::<usize>(), 6, "{p:?}");
    // An image no node holds is no reason to wait.
    let other = c.start("a", "u", 0);
    ask(
        &mut c,
        &other,
        1,
        1,
        "docker.io/library/nowhere:latest",
        false,
    );
    assert_eq!(placed(&c, &other).values().sum::<usize>(), 1);
}

#[test]
fn a_gang_lands_on_the_holders_when_it_fits_there() {
    let mut c = cluster();
    for i in [1, 5] {
        let n = c.nodes[i].clone();
        c.env.core.report_node_images(&n, vec![image('c')]).unwrap();
    }
    let app = c.start("a", "u", 0);
    ask(&mut c, &app, 2, 4, IMG, true);
    assert_eq!(placed(&c, &app), BTreeMap::from([(1, 1), (5, 1)]));
    // Three whole-node members do not fit on the two holders: placed anyway.
    let other = c.start("a", "u", 0);
    ask(&mut c, &other, 3, 4, IMG, true);
    assert_eq!(placed(&c, &other).values().sum::<usize>(), 3);
}

#[test]
fn a_new_report_replaces_the_old_and_too_many_are_refused() {
    let mut c = cluster();
    let n0 = c.nodes[0].clone();
    let n3 = c.nodes[3].clone();
    c.env
        .core
        .report_node_images(&n0, vec![image('d')])
        .unwrap();
    c.env.core.report_node_images(&n0, vec![]).unwrap();
    c.env
        .core
        .report_node_images(&n3, vec![image('d')])
        .unwrap();
    let app = c.start("a", "u", 0);
    ask(&mut c, &app, 1, 1, IMG, false);
    assert_eq!(placed(&c, &app), BTreeMap::from([(3, 1)]));
    let many = vec![image('e'); MAX_NODE_IMAGES + 1];
    assert!(matches!(
        c.env.core.report_node_images(&n0, many),
        Err(CoreError::TooManyNodeImages { .. })
    ));
}

#[test]
fn a_prefetch_rides_one_heartbeat_and_failures_are_kept_until_the_image_arrives() {
    let mut c = cluster();
    let (n0, n1) = (c.nodes[0].clone(), c.nodes[1].clone());
    let all = c.env.core.prefetch_image(IMG, &[]).unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(c.env.core.take_prefetch(&n0), vec![IMG.to_string()]);
    assert!(c.env.core.take_prefetch(&n0).is_empty(), "handed over once");
    let unknown = spindle_common::NodeId::new("nowhere", 1);
    assert!(matches!(
        c.env.core.prefetch_image(IMG, &[unknown]),
        Err(CoreError::UnknownNode(_))
    ));
    let failure = |i: usize| crate::core::images::PullFailure {
        image: format!("{IMG}{i}"),
        reason: "not found".into(),
        at: 0,
    };
    c.env
        .core
        .report_pull_failures(&n1, (0..40).map(failure).collect(), 7);
    let n = &c.env.core.nodes()[&n1];
    assert_eq!(
        n.pull_failures.len(),
        crate::core::images::MAX_PULL_FAILURES
    );
    assert_eq!(n.pull_failures.last().map(|f| f.at), Some(7));
    // Asking again forgets that image's failure; holding it does too.
    let last = format!("{IMG}39");
    c.env
        .core
        .prefetch_image(&last, std::slice::from_ref(&n1))
        .unwrap();
    assert!(c.env.core.nodes()[&n1]
        .pull_failures
        .iter()
        .all(|f| f.image != last));
    let held = NodeImage {
        names: vec![format!("{IMG}38")],
        ..image('f')
    };
    c.env.core.report_node_images(&n1, vec![held]).unwrap();
    let n = &c.env.core.nodes()[&n1];
    assert!(n
        .pull_failures
        .iter()
        .all(|f| f.image != format!("{IMG}38")));
}

#[test]
fn a_starting_container_shows_what_its_nm_says_it_waits_for() {
    let mut c = cluster();
    let app = c.start("a", "u", 0);
    ask(&mut c, &app, 1, 1, IMG, false);
    let id = *c
        .env
        .core
        .containers()
        .iter()
        .find(|(_, x)| x.is_live() && !x.is_am && x.id.application_id() == app)
        .expect("a task")
        .0;
    let node = c.env.core.containers()[&id].node.clone();
    let line = format!("pulling {IMG}: 1.2 of 9.8 MB");
    // Every live container of the node is reported (one left out would be lost).
    let beat = |c: &mut Cluster, diag: &str| {
        let live: Vec<ContainerId> = c.env.core.nodes()[&node]
            .containers
            .iter()
            .copied()
            .collect();
        let reports = live
            .into_iter()
            .map(|x| {
                let mut r = TestEnv::running(x);
                if x == id {
                    r.diagnostics = diag.to_string();
                }
                r
            })
            .collect();
        c.env.heartbeat(&node, reports);
    };
    beat(&mut c, &line);
    assert_eq!(c.env.core.containers()[&id].diagnostics, line);
    // A report without a word leaves it.
    beat(&mut c, "");
    assert_eq!(c.env.core.containers()[&id].diagnostics, line);
}
