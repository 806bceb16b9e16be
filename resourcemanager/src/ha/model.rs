//! A model test of the fencing: etcd's lease, create-if-absent and compare semantics as a
//! small state machine, and RMs that follow the elector's and the store's rules (campaign
//! with a lease; renew every step; believe the lease until `sent + ttl`; write every record
//! through `Compare(CreateRevision(leader) == term)`; step down on a refused write). Over
//! random schedules of time, pauses (no renewal, then a write with the old term at once),
//! kills, partitions and resignations, proptest checks that no two RMs ever write in the
//! same term, that a term never writes after a later one did, and that no acknowledged
//! write is lost (every record's stored value is its last acknowledged write). The same
//! schedules with the fence compare removed must break the last property on some schedule,
//! which shows the test can fail.

use std::collections::BTreeMap;

use proptest::prelude::*;

const TTL: u64 = 3;
const RMS: usize = 3;
const RECORDS: usize = 3;

#[derive(Debug, Clone, Copy)]
enum Step {
    Tick,
    Campaign(usize),
    Renew(usize),
    Write(usize, usize),
    Pause(usize),
    /// The paused RM runs again and writes the record at once, before any check of its own.
    Resume(usize, usize),
    Kill(usize),
    Partition(usize),
    Heal(usize),
    Resign(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let rm = 0..RMS;
    prop_oneof![
        3 => Just(Step::Tick),
        3 => rm.clone().prop_map(Step::Campaign),
        3 => rm.clone().prop_map(Step::Renew),
        6 => (rm.clone(), 0..RECORDS).prop_map(|(r, k)| Step::Write(r, k)),
        1 => rm.clone().prop_map(Step::Pause),
        2 => (rm.clone(), 0..RECORDS).prop_map(|(r, k)| Step::Resume(r, k)),
        1 => rm.clone().prop_map(Step::Kill),
        1 => rm.clone().prop_map(Step::Partition),
        2 => rm.clone().prop_map(Step::Heal),
        1 => rm.prop_map(Step::Resign),
    ]
}

/// etcd as far as the election and the fence use it.
#[derive(Default)]
struct Etcd {
    now: u64,
    rev: i64,
    next_lease: i64,
    /// Lease id to expiry time.
    leases: BTreeMap<i64, u64>,
    /// The leader key: holder, creation revision, lease.
    leader: Option<(usize, i64, i64)>,
    /// The records: value and the term that wrote it.
    records: BTreeMap<usize, (u64, i64)>,
}

impl Etcd {
    fn tick(&mut self) {
        self.now += 1;
        let now = self.now;
        self.leases.retain(|_, exp| *exp > now);
        if let Some((_, _, lease)) = self.leader {
            if !self.leases.contains_key(&lease) {
                self.leader = None;
                self.rev += 1;
            }
        }
    }

    fn grant(&mut self) -> i64 {
        self.next_lease += 1;
        self.leases.insert(self.next_lease, self.now + TTL);
        self.next_lease
    }

    /// `Txn(CreateRevision(leader) == 0) then Put(leader, rm, lease)`: the new term, if won.
    fn create_leader(&mut self, rm: usize, lease: i64) -> Option<i64> {
        if self.leader.is_some() || !self.leases.contains_key(&lease) {
            return None;
        }
        self.rev += 1;
        self.leader = Some((rm, self.rev, lease));
        Some(self.rev)
    }

    fn keep_alive(&mut self, lease: i64) -> bool {
        let exp = self.now + TTL;
        self.leases.get_mut(&lease).map(|e| *e = exp).is_some()
    }

    /// The fenced write: `Txn(CreateRevision(leader) == term) then Put(record, value)`.
    fn fenced_put(&mut self, term: i64, k: usize, v: u64, fence: bool) -> bool {
        let holds = self.leader.is_some_and(|(_, rev, _)| rev == term);
        if fence && !holds {
            return false;
        }
        self.rev += 1;
        self.records.insert(k, (v, term));
        true
    }

    /// `Txn(CreateRevision(leader) == term) then Delete(leader)`, and the lease revoked.
    fn resign(&mut self, term: i64, lease: i64) {
        if self.leader.is_some_and(|(_, rev, _)| rev == term) {
            self.leader = None;
            self.rev += 1;
        }
        self.leases.remove(&lease);
    }
}

/// One RM as the elector and the store behave.
#[derive(Default, Clone)]
struct Rm {
    /// The term, its lease and the local belief's end (`sent + ttl` of the last renewal).
    term: Option<(i64, i64, u64)>,
    /// What it recovered and wrote since: record to value.
    view: BTreeMap<usize, u64>,
    paused: bool,
    partitioned: bool,
}

/// What a schedule did.
#[derive(Default)]
struct Outcome {
    /// Every acknowledged write in order: term, writer, record, value, and the value the
    /// writer's view had for the record (0: none).
    acked: Vec<(i64, usize, usize, u64, u64)>,
    counter: u64,
}

impl Outcome {
    /// RM `i` writes record `k` with its term (if it holds one): a new value over its view.
    fn write(&mut self, etcd: &mut Etcd, rm: &mut Rm, i: usize, k: usize, fence: bool) {
        let Some((term, ..)) = rm.term else { return };
        self.counter += 1;
        let v = self.counter;
        let over = rm.view.get(&k).copied().unwrap_or(0);
        if etcd.fenced_put(term, k, v, fence) {
            rm.view.insert(k, v);
            self.acked.push((term, i, k, v, over));
        } else {
            rm.term = None;
        }
    }
}

fn run(steps: &[Step], fence: bool) -> (Etcd, Outcome) {
    let mut etcd = Etcd::default();
    let mut rms = vec![Rm::default(); RMS];
    let mut out = Outcome::default();
    for s in steps {
        // An RM whose clock runs steps down once its lease is past (the renewal's deadline).
        for rm in rms.iter_mut().filter(|r| !r.paused) {
            if rm.term.is_some_and(|(_, _, until)| etcd.now >= until) {
                rm.term = None;
            }
        }
        let live = |r: &Rm| !r.paused && !r.partitioned;
        match *s {
            Step::Tick => etcd.tick(),
            Step::Campaign(i) if live(&rms[i]) && rms[i].term.is_none() => {
                let sent = etcd.now;
                let lease = etcd.grant();
                if let Some(term) = etcd.create_leader(i, lease) {
                    // Recovery: the new active reads every record.
                    rms[i].view = etcd.records.iter().map(|(k, (v, _))| (*k, *v)).collect();
                    rms[i].term = Some((term, lease, sent + TTL));
                }
            }
            Step::Renew(i) if live(&rms[i]) => {
                if let Some((t, lease, _)) = rms[i].term {
                    if etcd.keep_alive(lease) {
                        rms[i].term = Some((t, lease, etcd.now + TTL));
                    }
                }
            }
            Step::Write(i, k) if live(&rms[i]) => out.write(&mut etcd, &mut rms[i], i, k, fence),
            Step::Pause(i) => rms[i].paused = true,
            Step::Resume(i, k) if rms[i].paused => {
                rms[i].paused = false;
                if !rms[i].partitioned {
                    out.write(&mut etcd, &mut rms[i], i, k, fence);
                }
            }
            Step::Kill(i) => rms[i] = Rm::default(),
            Step::Partition(i) => rms[i].partitioned = true,
            Step::Heal(i) => rms[i].partitioned = false,
            Step::Resign(i) if live(&rms[i]) => {
                if let Some((term, lease, _)) = rms[i].term.take() {
                    etcd.resign(term, lease);
                }
            }
            _ => {}
        }
    }
    (etcd, out)
}

/// The properties: one writer per term, terms never go back, no acknowledged write lost.
fn check(etcd: &Etcd, out: &Outcome) -> Result<(), String> {
    let mut writer_of: BTreeMap<i64, usize> = BTreeMap::new();
    let mut last_term = 0;
    for &(term, rm, ..) in &out.acked {
        if *writer_of.entry(term).or_insert(rm) != rm {
            return Err(format!("two RMs wrote in term {term}"));
        }
        if term < last_term {
            return Err(format!("term {term} wrote after term {last_term}"));
        }
        last_term = term;
    }
    let mut last: BTreeMap<usize, u64> = BTreeMap::new();
    for &(_, _, k, v, _) in &out.acked {
        last.insert(k, v);
    }
    for (k, v) in last {
        let stored = etcd.records.get(&k).map(|(v, _)| *v);
        if stored != Some(v) {
            return Err(format!("record {k}: acknowledged {v}, stored {stored:?}"));
        }
    }
    // A value is only written on top of the record's previous acknowledged value.
    let mut seen: BTreeMap<usize, u64> = BTreeMap::new();
    for &(_, _, k, v, over) in &out.acked {
        let before = seen.get(&k).copied().unwrap_or(0);
        if over != before {
            return Err(format!(
                "record {k}: {v} was written over a stale view (last acknowledged {before})"
            ));
        }
        seen.insert(k, v);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn fenced_writes_never_split_brain_nor_lose_an_acknowledged_write(
        steps in proptest::collection::vec(step(), 1..80)
    ) {
        let (etcd, out) = run(&steps, true);
        prop_assert_eq!(check(&etcd, &out), Ok(()));
    }
}

/// Without the compare, a paused active that resumes overwrites its successor's write: the
/// properties catch it (so the proptest above can fail).
#[test]
fn without_the_fence_a_resumed_active_loses_its_successors_write() {
    use Step::*;
    let schedule = [
        Campaign(0),
        Write(0, 0),
        Pause(0),
        Tick,
        Tick,
        Tick,
        Campaign(1),
        Write(1, 0),
        Resume(0, 0),
    ];
    let (etcd, out) = run(&schedule, false);
    assert!(check(&etcd, &out).is_err());
    let (etcd, out) = run(&schedule, true);
    assert_eq!(check(&etcd, &out), Ok(()));
    assert_eq!(out.acked.len(), 2, "the resumed active's write was refused");
}
