//! The `doubling` elastic policy's round: how a leaf's GPUs are shared among its elastic
//! jobs, in the spirit of the dynamic-scheduling study's doubling heuristic, as a greedy over
//! one objective, the sum of the jobs' completion times (seconds):
//!
//! - **Growing** a running job one step (to the next legal size, at least double) saves it
//!   `rem * (1/T(w) - 1/T(w'))` less the restart cost, for `(w' - w)` more GPUs;
//! - **starting** a waiting job at its minimum now rather than when the k-th running job ends
//!   saves it that wait, less what running at its minimum costs against running at its
//!   maximum later (when that is a loss, it waits);
//! - **shrinking** a running job one step loses it `rem * (1/T(w') - 1/T(w))` plus a restart.
//!
//! Free GPUs go to the best saving per GPU first, in doublings; a waiting job is started by
//! shrinking others only when the time it saves exceeds what they lose; rigid work waiting in
//! the leaf always gets its GPUs by shrinking (shrinking comes before preempting). No job is
//! resized more often than the resize interval. Jobs' remaining work comes from their AM's
//! progress and the speed model ([`super::elastic_policy::Elastic::remaining`]); a job yet without
//! progress counts as the average of the others. Pure, like the rest of the scheduler.

use spindle_common::resource::GPU;
use spindle_common::{ApplicationId, Resource};

use super::elastic_policy::{Elastic, ElasticConf, Resize};
use super::gang::{plan, GangPhase, Plan, Unit};
use super::queue_tree::QueueIdx;
use super::{AskKey, Placement, Scheduler};
use crate::core::queue_conf::{ElasticPolicy, SUBLINEAR_EFFICIENCY};

/// An elastic job of the leaf, as a round sees it.
struct Job {
    app: ApplicationId,
    gang: String,
    /// Members now (0: waiting) and after this round.
    cur: u32,
    target: u32,
    /// GPUs a member holds.
    per: u64,
    /// May be resized (or started) this round.
    free: bool,
    rem: Option<f64>,
    model: Elastic,
}

impl Job {
    fn rem(&self, fallback: f64) -> f64 {
        self.rem.unwrap_or(fallback)
    }
    /// Seconds to finish at `w` members.
    fn time(&self, w: u32, fallback: f64) -> f64 {
        self.rem(fallback) / self.model.speed(w).max(1e-9)
    }
    /// GPU-seconds to finish at `w` members.
    fn gpu_time(&self, w: u32, fallback: f64) -> f64 {
        f64::from(w) * self.per as f64 * self.time(w, fallback)
    }
}

/// What the jobs waiting behind pay for GPU-seconds spent: each of `waiting` jobs waits
/// about `1 / gpus` seconds longer per GPU-second the leaf spends (0 under the study's rule,
/// which looks at the running jobs alone).
#[derive(Clone, Copy)]
struct Queue {
    per_gpu_s: f64,
}

impl Queue {
    fn cost(&self, gpu_s: f64) -> f64 {
        self.per_gpu_s * gpu_s
    }
}

/// Whether a round of `policy` over `jobs` follows the by-gain rule rather than the
/// study's: `doubling-adaptive` does unless the jobs whose speed is known scale sublinearly
/// (their mean per-GPU throughput at their maximum below [`SUBLINEAR_EFFICIENCY`] of their
/// minimum's); jobs of unknown speed count as linear.
fn by_gain(policy: ElasticPolicy, jobs: &[Job]) -> bool {
    match policy {
        ElasticPolicy::DoublingByGain => true,
        ElasticPolicy::DoublingAdaptive => {
            let known: Vec<f64> = jobs.iter().filter_map(|j| j.model.efficiency()).collect();
            known.is_empty()
                || known.iter().sum::<f64>() / known.len() as f64 >= SUBLINEAR_EFFICIENCY
        }
        ElasticPolicy::Doubling | ElasticPolicy::None => false,
    }
}

fn gpus(r: &Resource) -> u64 {
    r.get(GPU).max(0) as u64
}

impl Scheduler {
    /// The doubling policy's round over every `doubling` leaf.
    pub fn elastic_round(&mut self, conf: &ElasticConf, now: u64) -> Vec<Resize> {
        self.now = now;
        let leaves: Vec<QueueIdx> = (0..self.tree.queues.len())
            .map(QueueIdx)
            .filter(|q| {
                let queue = &self.tree.queues[*q];
                queue.spec.is_leaf() && queue.spec.elastic.is_doubling() && !queue.apps.is_empty()
            })
            .collect();
        let mut out = Vec::new();
        for leaf in leaves {
            out.extend(self.doubling_leaf(leaf, conf, now));
        }
        out
    }

    /// The leaf's elastic jobs (running, then waiting, each in submission order) and the
    /// GPUs its rigid waiting work needs.
    fn leaf_jobs(&mut self, leaf: QueueIdx, conf: &ElasticConf, now: u64) -> (Vec<Job>, u64) {
        let mut running = Vec::new();
        let mut waiting = Vec::new();
        let mut rigid: u64 = 0;
        let ids: Vec<ApplicationId> = self.tree.queues[leaf].apps.iter().copied().collect();
        for id in ids {
            let Some(a) = self.apps.get_mut(&id) else {
                continue;
            };
            if !a.active {
                continue;
            }
            for ask in a.asks.values().filter(|x| !x.is_am) {
                let per = gpus(&ask.capability);
                let spec = ask
                    .gang
                    .as_ref()
                    .and_then(|g| a.gangs.get(g))
                    .filter(|g| g.phase.is_waiting())
                    .and_then(|g| g.params.elastic.clone());
                match (spec, &ask.gang) {
                    (Some(spec), Some(gid)) if per > 0 => waiting.push(Job {
                        app: id,
                        gang: gid.clone(),
                        cur: 0,
                        target: 0,
                        per,
                        free: true,
                        rem: None,
                        model: Elastic::new(spec, ask.capability.clone(), AskKey::default(), now),
                    }),
                    (Some(_), _) => {}
                    (None, _) => {
                        rigid = rigid.saturating_add(per.saturating_mul(u64::from(ask.any)))
                    }
                }
            }
            for (gid, g) in a.gangs.iter_mut() {
                let cur = g.members.len() as u32;
                let Some(e) = g
                    .elastic
                    .as_mut()
                    .filter(|_| g.phase == GangPhase::Allocated)
                else {
                    continue;
                };
                e.accrue(cur, now);
                let per = gpus(&e.cap);
                if per == 0 || cur == 0 {
                    continue;
                }
                running.push(Job {
                    app: id,
                    gang: gid.clone(),
                    cur,
                    target: e.shrinking.unwrap_or(cur),
                    per,
                    free: e.shrinking.is_none()
                        && now.saturating_sub(e.last_resize) >= conf.resize_interval_ms,
                    rem: e.remaining(),
                    model: e.clone(),
                });
            }
        }
        running.extend(waiting);
        (running, rigid)
    }

    fn doubling_leaf(&mut self, leaf: QueueIdx, conf: &ElasticConf, now: u64) -> Vec<Resize> {
        let (mut jobs, rigid) = self.leaf_jobs(leaf, conf, now);
        if jobs.is_empty() {
            return vec![];
        }
        let by_gain = by_gain(self.tree.queues[leaf].spec.elastic, &jobs);
        let known: Vec<f64> = jobs.iter().filter_map(|j| j.rem).collect();
        // Without any progress reported, times are only comparable with each other (every
        // job counts as one unit of work left), not with a restart's cost.
        let (fb, rc) = if known.is_empty() {
            (1.0, 0.0)
        } else {
            (
                known.iter().sum::<f64>() / known.len() as f64,
                conf.restart_cost_ms as f64 / 1000.0,
            )
        };
        let waiting = jobs.iter().filter(|j| j.cur == 0).count() + usize::from(rigid > 0);
        let behind = Queue {
            per_gpu_s: if by_gain {
                waiting as f64 / gpus(&self.nodes.cluster).max(1) as f64
            } else {
                0.0
            },
        };
        // Rigid work first: it gets its GPUs, by shrinking if need be.
        let mut budget = self.leaf_free_gpus(leaf, &jobs) as i64 - rigid as i64;
        while budget < 0 {
            let Some((i, down, _)) = cheapest_shrink(&jobs, fb, rc, behind) else {
                break;
            };
            budget += i64::from(jobs[i].target - down) * jobs[i].per as i64;
            jobs[i].target = down;
        }
        // When the running jobs end, soonest first (a waiting job's alternative to starting
        // now is starting then).
        let mut ends: Vec<f64> = jobs
            .iter()
            .filter(|j| j.cur > 0)
            .map(|j| rc.max(0.0) + j.time(j.target, fb))
            .collect();
        ends.sort_by(f64::total_cmp);
        let round = Round {
            fb,
            rc,
            behind,
            by_gain,
            ends,
        };
        budget = round.start_first_waiting(&mut jobs, budget);
        // Free GPUs to the best saving per GPU, in doublings.
        while let Some((i, to)) = round.best_doubling(&jobs, budget) {
            budget -= i64::from(to - jobs[i].target) * jobs[i].per as i64;
            jobs[i].target = to;
        }
        // GPUs nobody gains from would idle: waiting jobs start on them, first come first,
        // as large as they hold (they grow when more is free).
        for j in jobs
            .iter_mut()
            .filter(|j| j.cur == 0 && j.target == 0 && j.free)
        {
            if let Some(s) = fits(j, budget) {
                budget -= i64::from(s) * j.per as i64;
                j.target = s;
            }
        }
        self.carry(jobs, now)
    }

    /// Free GPUs the leaf may use now (under every maximum on its path), counting those on
    /// their way back from shrinks.
    fn leaf_free_gpus(&self, leaf: QueueIdx, jobs: &[Job]) -> u64 {
        let mut free = gpus(&self.nodes.cluster_free());
        for q in self.tree.path_up(leaf) {
            let queue = &self.tree.queues[q];
            let room = queue.maximum.minus(&queue.used).clamp_non_negative();
            if room.get(GPU) < i64::MAX / 2 {
                free = free.min(gpus(&room));
            }
        }
        free + jobs
            .iter()
            .map(|j| u64::from(j.cur.saturating_sub(j.target)) * j.per)
            .sum::<u64>()
    }

    /// Turns the round's targets into resizes: admissions (placed by the next pass),
    /// shrinks, and grows placed now.
    fn carry(&mut self, jobs: Vec<Job>, now: u64) -> Vec<Resize> {
        let mut out = Vec::new();
        for j in jobs {
            if j.cur == 0 {
                if let Some(g) = self
                    .apps
                    .get_mut(&j.app)
                    .and_then(|a| a.gangs.get_mut(&j.gang))
                {
                    let admit = (j.target > 0).then_some(j.target);
                    if g.admitted != admit {
                        g.admitted = admit;
                        g.missed_at = None;
                    }
                }
                continue;
            }
            if !j.free || j.target == j.cur {
                continue;
            }
            if j.target < j.cur {
                if let Some(e) = self.elastic_mut(&j.app, &j.gang) {
                    e.shrinking = Some(j.target);
                    e.last_resize = now;
                    e.resizes += 1;
                }
                out.push(Resize::Shrink {
                    app: j.app,
                    gang: j.gang.clone(),
                    from: j.cur,
                    to: j.target,
                });
            } else if let Some(r) = self.grow(&j.app, &j.gang, j.cur, j.target, now) {
                out.push(r);
            }
        }
        out
    }

    /// Places the members taking a gang from `from` to `to` (or to the largest legal size
    /// between that fits), whole, on free room no other gang holds.
    fn grow(
        &mut self,
        app: &ApplicationId,
        gang: &str,
        from: u32,
        to: u32,
        now: u64,
    ) -> Option<Resize> {
        let g = self.apps.get(app)?.gangs.get(gang)?;
        let e = g.elastic.as_ref()?;
        let params = g.params.clone();
        let (cap, key, spec) = (e.cap.clone(), e.key, e.spec.clone());
        let holder = (*app, gang.to_string());
        let leaf = self.apps.get(app)?.queue;
        let calc = self.conf.calculator;
        for size in spec
            .sizes()
            .into_iter()
            .rev()
            .filter(|s| *s > from && *s <= to)
        {
            let add = cap.times(i64::from(size - from));
            let within = self.tree.path_up(leaf).all(|q| {
                let queue = &self.tree.queues[q];
                super::queue_tree::within(calc, &queue.used.plus(&add), &queue.maximum)
            });
            if !within {
                continue;
            }
            let units: Vec<Unit> = (from..size)
                .map(|_| Unit {
                    key,
                    cap: cap.clone(),
                })
                .collect();
            let nodes = &self.nodes;
            let free = |s: usize| nodes.free_room(s);
            let open = |s: usize| nodes.reserved_by(s).is_none_or(|h| *h == holder);
            let mut params = params.clone();
            params.max_nodes = 0;
            let Plan::Fits(assign) = plan(app, nodes, &units, &params, &free, &open) else {
                continue;
            };
            let mut placements = Vec::with_capacity(assign.len());
            for (key, slot, r) in assign {
                if let Some(p) = self.place_member(app, key, &r, gang, slot) {
                    placements.push(p);
                }
            }
            if let Some(e) = self.elastic_mut(app, gang) {
                e.accrue(from, now);
                e.last_resize = now;
                e.resizes += 1;
            }
            if let Some(g) = self.apps.get_mut(app).and_then(|a| a.gangs.get_mut(gang)) {
                g.size = from + placements.len() as u32;
            }
            self.stats.placements += placements.len() as u64;
            return Some(Resize::Grow {
                app: *app,
                gang: gang.to_string(),
                from,
                to: size,
                placements,
            });
        }
        None
    }

    /// Charges one member placed outside the ask table (growth).
    fn place_member(
        &mut self,
        app: &ApplicationId,
        key: AskKey,
        r: &Resource,
        gang: &str,
        slot: usize,
    ) -> Option<Placement> {
        let node = self.nodes.get(slot)?.id.clone();
        self.charge(app, &node, r);
        let (tags, partition) = self
            .apps
            .get(app)
            .and_then(|a| a.gangs.get(gang))
            .map(|g| (g.params.tags.clone(), g.params.partition.clone()))
            .unwrap_or_default();
        self.tag(app, &node, &tags, true);
        Some(Placement {
            app: *app,
            key,
            node,
            resource: r.clone(),
            is_am: false,
            gang: Some(gang.to_string()),
            tags,
            partition,
        })
    }
}

/// The running job whose next step down loses the least time per GPU freed (ties: the
/// newest), with the loss in seconds.
fn cheapest_shrink(jobs: &[Job], fb: f64, rc: f64, queue: Queue) -> Option<(usize, u32, f64)> {
    let targets: Vec<u32> = jobs.iter().map(|j| j.target).collect();
    cheapest_shrink_with(jobs, &targets, fb, rc, queue)
}

fn cheapest_shrink_with(
    jobs: &[Job],
    targets: &[u32],
    fb: f64,
    rc: f64,
    queue: Queue,
) -> Option<(usize, u32, f64)> {
    let mut best: Option<(f64, usize, u32, f64)> = None;
    for (i, j) in jobs.iter().enumerate() {
        let t = targets[i];
        if !j.free || j.cur == 0 || t == 0 {
            continue;
        }
        let Some(down) = j.model.spec.down(t) else {
            continue;
        };
        let restart = if t == j.cur { rc } else { 0.0 };
        let spared = queue.cost(j.gpu_time(t, fb) - j.gpu_time(down, fb));
        let loss = j.time(down, fb) - j.time(t, fb) + restart - spared;
        let per_gpu = loss / (f64::from(t - down) * j.per as f64);
        if best.is_none_or(|(b, _, _, _)| per_gpu <= b) {
            best = Some((per_gpu, i, down, loss));
        }
    }
    best.map(|(_, i, d, l)| (i, d, l))
}

/// What one leaf's round measures its choices with.
struct Round {
    /// Work left of a job that reported none (the mean of those that did, or one unit).
    fb: f64,
    /// A restart's cost in seconds.
    rc: f64,
    /// The work waiting behind the leaf's jobs.
    behind: Queue,
    by_gain: bool,
    /// When the running jobs end, soonest first.
    ends: Vec<f64>,
}

impl Round {
    /// Starting the k-th waiting job at `s` members now instead of at its maximum when the
    /// k-th running job ends, per GPU. (Starting it smaller spends fewer GPU-seconds when
    /// it scales sublinearly, which the jobs behind it gain.)
    fn start_gain(&self, j: &Job, k: usize, s: u32) -> f64 {
        let later = j.model.spec.max;
        let wait = self.ends.get(k).copied().unwrap_or(0.0);
        let cost = f64::from(s) * j.per as f64;
        let spared = self
            .behind
            .cost(j.gpu_time(later, self.fb) - j.gpu_time(s, self.fb));
        (wait + j.time(later, self.fb) - j.time(s, self.fb) + spared) / cost
    }

    /// The first waiting job still waiting: started by shrinking others when the time it
    /// saves exceeds what they lose. Returns the budget left.
    fn start_first_waiting(&self, jobs: &mut [Job], mut budget: i64) -> i64 {
        let Some(h) = jobs
            .iter()
            .position(|j| j.cur == 0 && j.target == 0 && j.free)
        else {
            return budget;
        };
        let least = jobs[h].model.spec.least().unwrap_or(1);
        let need = i64::from(least) * jobs[h].per as i64 - budget.max(0);
        let saved = if self.by_gain {
            self.start_gain(&jobs[h], 0, least) * f64::from(least) * jobs[h].per as f64
        } else {
            f64::MAX
        };
        let mut trial: Vec<u32> = jobs.iter().map(|j| j.target).collect();
        let mut freed = 0i64;
        let mut lost = 0.0;
        while need > 0 && freed < need {
            let Some((i, down, loss)) =
                cheapest_shrink_with(jobs, &trial, self.fb, self.rc, self.behind)
            else {
                break;
            };
            freed += i64::from(trial[i] - down) * jobs[i].per as i64;
            lost += loss;
            trial[i] = down;
        }
        if need > 0 && freed >= need && saved > lost {
            for (j, t) in jobs.iter_mut().zip(trial) {
                j.target = t;
            }
            jobs[h].target = least;
            budget += freed - i64::from(least) * jobs[h].per as i64;
        }
        budget
    }

    /// The doubling (or a waiting job's start) that saves most per GPU within `budget`:
    /// (job, its new target).
    fn best_doubling(&self, jobs: &[Job], budget: i64) -> Option<(usize, u32)> {
        let mut best: Option<(f64, usize, u32)> = None;
        // Waiting jobs start in the leaf's order: only the first not started is a
        // candidate (its wait is until the first running job ends).
        let first_waiting = jobs
            .iter()
            .position(|j| j.cur == 0 && j.target == 0 && j.free);
        let k = jobs.iter().filter(|j| j.cur == 0 && j.target > 0).count();
        for (i, j) in jobs.iter().enumerate() {
            if !j.free || (j.cur == 0 && j.target == 0 && Some(i) != first_waiting) {
                continue;
            }
            let (to, gain) = if j.cur == 0 && j.target == 0 {
                self.start_size(j, k, budget)
            } else {
                let Some(up) = j.model.spec.up(j.target) else {
                    continue;
                };
                let restart = if j.target == j.cur { self.rc } else { 0.0 };
                let spent = self
                    .behind
                    .cost(j.gpu_time(up, self.fb) - j.gpu_time(j.target, self.fb));
                let saved = j.time(j.target, self.fb) - j.time(up, self.fb) - restart - spent;
                (up, saved / (f64::from(up - j.target) * j.per as f64))
            };
            let cost = i64::from(to - j.target) * j.per as i64;
            if cost <= budget && gain > 0.0 && best.is_none_or(|(b, _, _)| gain > b) {
                best = Some((gain, i, to));
            }
        }
        best.map(|(_, i, to)| (i, to))
    }

    /// The size a waiting job would start at, and its gain per GPU. By gain, the size that
    /// saves most per GPU among those the budget holds (larger on a tie); under the study's
    /// rule, the minimum. With nothing running to wait for, a waiting job starts; under the
    /// study's rule, every waiting job gets its minimum before any growth.
    fn start_size(&self, j: &Job, k: usize, budget: i64) -> (u32, f64) {
        let least = j.model.spec.least().unwrap_or(1);
        let (s, g) = if self.by_gain {
            let top = fits(j, budget).unwrap_or(least);
            j.model
                .spec
                .sizes()
                .into_iter()
                .filter(|s| *s <= top)
                .map(|s| (s, self.start_gain(j, k, s)))
                .fold((least, f64::MIN), |b, x| if x.1 >= b.1 { x } else { b })
        } else {
            (least, self.start_gain(j, k, least))
        };
        (
            s,
            if self.ends.is_empty() || !self.by_gain {
                f64::MAX
            } else {
                g
            },
        )
    }
}

/// The largest legal size of a waiting job that `budget` GPUs hold.
fn fits(j: &Job, budget: i64) -> Option<u32> {
    let n = u32::try_from(budget.max(0) as u64 / j.per.max(1)).unwrap_or(u32::MAX);
    j.model.spec.at_most(n)
}
