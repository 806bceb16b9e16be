//! The check before a replay: every job against the cluster and the configuration.

use super::*;

/// Checks every job against the cluster and the configuration; every problem is reported
/// with its line, and any problem refuses the replay.
pub fn check_jobs(jobs: &[Job], cluster: &ClusterSpec, rm: &RmConfig) -> Result<(), Vec<BadRow>> {
    let root = &rm.core.scheduler.root;
    let leaves: Vec<String> = root
        .walk()
        .into_iter()
        .filter(|q| q.is_leaf())
        .map(|q| q.path.to_string())
        .collect();
    let cluster_gpus = cluster.total_gpus();
    let models = cluster.gpu_models();
    let max = &rm.core.max_allocation;
    let mut bad = Vec::new();
    for j in jobs {
        let mut problem = |p| {
            bad.push(BadRow {
                line: j.line,
                problem: p,
            })
        };
        match root.find(&j.queue) {
            None => problem(RowProblem::UnknownQueue {
                queue: j.queue.clone(),
                known: leaves.join(", "),
            }),
            Some(q) if !q.is_leaf() => problem(RowProblem::ParentQueue(j.queue.clone())),
            Some(_) => {}
        }
        if j.gpus() > cluster_gpus {
            problem(RowProblem::LargerThanCluster {
                gpus: j.gpus(),
                cluster: cluster_gpus,
            });
        }
        let model = match &j.shape {
            Shape::Gang { gpu_model, .. } => gpu_model.clone(),
            Shape::Independent => None,
        };
        if let Some(m) = &model {
            if !models.contains(m) {
                problem(RowProblem::UnknownGpuModel {
                    model: m.clone(),
                    known: models.iter().cloned().collect::<Vec<_>>().join(", "),
                });
            }
        }
        if let (Shape::Gang { placement, .. }, [t]) = (&j.shape, j.tasks.as_slice()) {
            let cap = capability(t);
            let eligible: Vec<&crate::cluster::SimNode> = cluster
                .nodes
                .iter()
                .filter(|n| {
                    model
                        .as_ref()
                        .is_none_or(|m| n.gpu_model.as_ref() == Some(m))
                })
                .collect();
            let need = cap.times(i64::from(t.count));
            match placement {
                Placement::Spread => {
                    let nodes = eligible.iter().filter(|n| cap.fits_in(&n.total())).count();
                    if (t.count as usize) > nodes {
                        problem(RowProblem::SpreadWiderThanCluster {
                            containers: t.count,
                            nodes,
                        });
                    }
                }
                Placement::StrictPack if !eligible.iter().any(|n| need.fits_in(&n.total())) => {
                    problem(RowProblem::LargerThanAnyNode {
                        need: need.to_string(),
                    });
                }
                Placement::SameRack => {
                    let mut racks: BTreeMap<&str, Resource> = BTreeMap::new();
                    for n in &eligible {
                        racks
                            .entry(n.rack.as_str())
                            .or_default()
                            .add_assign(&n.total());
                    }
                    if !racks.values().any(|r| need.fits_in(r)) {
                        problem(RowProblem::LargerThanAnyRack {
                            need: need.to_string(),
                        });
                    }
                }
                _ => {}
            }
        }
        for t in &j.tasks {
            let cap = capability(t);
            let what = format!("{cap}");
            if !cap.fits_in(max) {
                problem(RowProblem::OverMaximumAllocation {
                    what: what.clone(),
                    max: max.to_string(),
                });
            }
            let fits = cluster.nodes.iter().any(|n| {
                cap.fits_in(&n.total())
                    && model
                        .as_ref()
                        .is_none_or(|m| n.gpu_model.as_ref() == Some(m))
            });
            if !fits {
                problem(RowProblem::NoNodeFits { what });
            }
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad)
    }
}
