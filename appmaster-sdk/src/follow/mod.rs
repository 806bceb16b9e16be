//! Following a submitted application for its client (`spindle train`, `spindle
//! distributed-shell`): what the user sees while it runs.
//!
//! Every [`POLL_INTERVAL`] the client reads the application's REST view and prints
//! - its state when it changes (`Application ... is RUNNING`);
//! - why it waits, when that changes and never again while it stays the same: the RM's
//!   diagnostics while the application is not yet running (the AM resource limit, ...), and
//!   each gang's while the gang is `PENDING` or `RESERVED` (`gang of 12 containers needs 12
//!   GPUs ...; the best fit now is 8 of 12`);
//! - the progress of the work when it changes: for a training job, the gang's granted, held
//!   (set up on their NMs and held for the gang's simultaneous start) and running workers,
//!   read from the training AM's rank file ([`crate::train::status`]) through the NM's log
//!   REST of the AM container; for the distributed shell, its containers as the RM lists
//!   them (granted, starting, running, complete);
//! - with `logs`, rank 0's (the distributed shell's first container's) `stdout` and
//!   `stderr` as they are written, each line prefixed `[rank 0 stdout] `, read from the NM
//!   with `?start=` the bytes already printed;
//! - for a sweep, its trials (running, succeeded, failed, waiting) from the sweep AM's trials
//!   file ([`crate::sweep::status`]), read as the rank file is;
//! - at the end, each rank's (container's) container, node, state and exit status (for a
//!   sweep, the table of trials), then the final report.
//!
//! Nothing here reads a log message to decide anything: ranks and their containers come
//! from the AM's JSON rank file, states and exits from the RM's container reports.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use spindle_common::ids::{ApplicationAttemptId, ContainerId};
use spindle_common::records::am::GangState;
use spindle_common::records::cluster::{AppAttemptInfo, AppInfo, ContainerReportInfo};
use spindle_common::states::{exit_status, YarnApplicationState};

use crate::dshell::client::{final_report, look_at_app, DsOutcome, GangSizes};
use crate::error::ClientError;
use crate::http::{build_client, Http};
use crate::rm_client::RmClient;
use crate::sweep::status::{self as sweep_status, SweepTrials, TRIALS_FILE};
use crate::train::am::{one_line, status_line};
use crate::train::status::{GangEvent, GangRanks, RankState, RANKS_FILE};
use crate::train::GANG_ID;

/// How often the application's state is read.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);
mod tail;
pub use tail::{tail_window, LogTail, TailFile, MAX_LINE};

/// How often the rank file, the container reports and the followed logs are read.
pub const DETAIL_INTERVAL: Duration = Duration::from_millis(500);
/// How long an interrupted client waits for the RM to report the application KILLED.
pub const KILL_WAIT: Duration = Duration::from_secs(30);

/// Which client follows: what its work is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppKind {
    /// A training gang: ranks from the training AM's rank file.
    Train,
    /// The distributed shell: containers from the RM's reports, numbered in id order.
    Shell,
    /// A sweep: trials from the sweep AM's trials file ([`crate::sweep::status`]).
    Sweep,
}

impl AppKind {
    /// By YARN application type; anything but a training job is followed as the shell is.
    pub fn of_type(application_type: &str) -> Self {
        match application_type {
            crate::train::APPLICATION_TYPE => Self::Train,
            crate::sweep::APPLICATION_TYPE => Self::Sweep,
            _ => Self::Shell,
        }
    }

    /// What one unit of work is called: `rank` or `task`.
    pub fn unit(self) -> &'static str {
        match self {
            Self::Train => "rank",
            Self::Shell => "task",
            Self::Sweep => "trial",
        }
    }
}

/// Whose output is streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logs {
    /// Nobody's.
    Off,
    /// Rank 0's (the first task's): the attached client.
    First,
    /// Every rank's (task's), or only this one's (`spindle logs -follow [-rank N]`).
    Ranks(Option<u32>),
}

/// How to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowOptions {
    pub kind: AppKind,
    /// Whose stdout and stderr to stream.
    pub logs: Logs,
    /// Each streamed file starts with its last this many lines (None: from its start).
    pub tail: Option<usize>,
}

/// How following ended.
#[derive(Debug, Clone, PartialEq)]
pub enum FollowEnd {
    /// The application reached a final state.
    Finished(DsOutcome),
    /// The client was interrupted and asked the RM to kill the application; `state` is the
    /// final state the RM then reported, None if it did not within [`KILL_WAIT`].
    Interrupted {
        app_id: spindle_common::ids::ApplicationId,
        state: Option<YarnApplicationState>,
    },
}

/// Follows the application to its end, or until `interrupt` completes, then kills it.
pub async fn follow<I: Future<Output = ()>>(
    rm: &RmClient,
    app_id: &spindle_common::ids::ApplicationId,
    opts: &FollowOptions,
    interrupt: I,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<FollowEnd, ClientError> {
    let ended = {
        let run = follow_to_end(rm, app_id, opts, &mut *out);
        tokio::select! {
            biased;
            () = interrupt => None,
            r = run => Some(r),
        }
    };
    match ended {
        Some(r) => r.map(FollowEnd::Finished),
        None => Ok(FollowEnd::Interrupted {
            app_id: *app_id,
            state: kill_interrupted(rm, app_id, out).await?,
        }),
    }
}

/// Asks the RM to kill the application, saying so, and waits for its final state.
async fn kill_interrupted(
    rm: &RmClient,
    app_id: &spindle_common::ids::ApplicationId,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<Option<YarnApplicationState>, ClientError> {
    out(&format!("Killing application {app_id}: interrupted"));
    if let Err(e) = rm.kill(app_id).await {
        // Refused because it has just ended on its own?
        return match rm.app_state(app_id).await {
            Ok(s) if s.is_final() => {
                out(&format!("Application {app_id} had already ended: {s}"));
                Ok(Some(s))
            }
            _ => Err(e),
        };
    }
    let start = Instant::now();
    loop {
        match rm.app_state(app_id).await {
            Ok(s) if s.is_final() => {
                if s == YarnApplicationState::KILLED {
                    out(&format!("Killed application {app_id}"));
                } else {
                    out(&format!("Application {app_id} had already ended: {s}"));
                }
                return Ok(Some(s));
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "state poll after the kill failed"),
        }
        if start.elapsed() > KILL_WAIT {
            out(&format!(
                "Application {app_id} is not yet KILLED after {} s; see `spindle application \
                 -status {app_id}`",
                KILL_WAIT.as_secs()
            ));
            return Ok(None);
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Follows the application until it reaches a final state (its lifetime, if it has one, is
/// the RM's to enforce), printing what the module doc says.
pub async fn follow_to_end(
    rm: &RmClient,
    app_id: &spindle_common::ids::ApplicationId,
    opts: &FollowOptions,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<DsOutcome, ClientError> {
    let mut w = Watcher {
        rm,
        app_id: *app_id,
        nm: build_client()?,
        opts,
        last_state: None,
        sizes: GangSizes::default(),
        waiting: WaitingReasons::default(),
        progress: None,
        details_at: None,
        work: Work::default(),
        tails: BTreeMap::new(),
        events_seen: None,
    };
    let mut unreachable_since: Option<Instant> = None;
    loop {
        let Some(app) = look_at_app(rm, app_id, &mut unreachable_since, POLL_INTERVAL).await?
        else {
            continue;
        };
        w.look(&app, out).await;
        if app.state.is_final() {
            let outcome = DsOutcome {
                app_id: *app_id,
                state: app.state,
                final_status: app.final_status,
                diagnostics: app.diagnostics.clone(),
                am_container_logs: app.am_container_logs.clone().filter(|s| !s.is_empty()),
            };
            for l in w.summary().await {
                out(&l);
            }
            for l in final_report(&outcome) {
                out(&l);
            }
            return Ok(outcome);
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// What the client has seen of the application so far.
struct Watcher<'a> {
    rm: &'a RmClient,
    app_id: spindle_common::ids::ApplicationId,
    nm: reqwest::Client,
    opts: &'a FollowOptions,
    last_state: Option<YarnApplicationState>,
    sizes: GangSizes,
    waiting: WaitingReasons,
    /// The last progress line printed.
    progress: Option<String>,
    details_at: Option<Instant>,
    work: Work,
    /// The followed logs, by rank (task).
    tails: BTreeMap<u32, LogTail>,
    /// Train: the AM container whose rank file's events were printed, and how many.
    events_seen: Option<(ContainerId, usize)>,
}

impl Watcher<'_> {
    /// One look at the application: state, resizes, waiting reasons; then, at most every
    /// [`DETAIL_INTERVAL`] (and always at the end), progress and the followed logs.
    async fn look(&mut self, app: &AppInfo, out: &mut (dyn FnMut(&str) + Send)) {
        if self.last_state != Some(app.state) {
            out(&state_line(app));
            self.last_state = Some(app.state);
        }
        for l in self.sizes.lines(app) {
            out(&l);
        }
        for l in self.waiting.lines(app) {
            out(&l);
        }
        let due = self
            .details_at
            .is_none_or(|t| t.elapsed() >= DETAIL_INTERVAL);
        let started = !matches!(
            app.state,
            YarnApplicationState::NEW
                | YarnApplicationState::NEW_SAVING
                | YarnApplicationState::SUBMITTED
                | YarnApplicationState::ACCEPTED
        );
        if !(started && (due || app.state.is_final())) {
            return;
        }
        self.details_at = Some(Instant::now());
        if let Err(e) = self.details(app, out).await {
            tracing::debug!(error = %e, "progress look failed; trying again");
        }
    }

    async fn details(
        &mut self,
        app: &AppInfo,
        out: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), ClientError> {
        self.work
            .fetch(self.rm, &self.nm, &self.app_id, self.opts.kind)
            .await?;
        if let (Some((_, am, _)), Some(r)) = (&self.work.am, &self.work.ranks) {
            let seen = match self.events_seen {
                Some((c, n)) if c == *am => n,
                _ => 0,
            };
            for l in event_lines(&r.events, seen, app) {
                out(&l);
            }
            self.events_seen = Some((*am, r.events.len().max(seen)));
        }
        let progress = match self.opts.kind {
            AppKind::Train => {
                let wanted = app.gangs.iter().find(|g| g.id == GANG_ID).map(|g| g.size);
                train_progress(self.work.ranks.as_ref(), wanted)
            }
            AppKind::Shell => shell_progress(&self.work.tasks),
            AppKind::Sweep => self
                .work
                .trials
                .as_ref()
                .and_then(sweep_status::progress_line),
        };
        if let Some(p) = progress.filter(|p| self.progress.as_ref() != Some(p)) {
            out(&p);
            self.progress = Some(p);
        }
        self.follow_logs(out).await;
        Ok(())
    }

    /// Polls the followed ranks' logs; a rank now in another container (a new gang
    /// attempt) first prints what its last container wrote since the last look.
    async fn follow_logs(&mut self, out: &mut (dyn FnMut(&str) + Send)) {
        let kind = self.opts.kind;
        for u in self.work.units(kind, self.opts.logs) {
            if self
                .tails
                .get(&u.index)
                .is_some_and(|t| t.container != u.container)
            {
                if let Some(mut old) = self.tails.remove(&u.index) {
                    old.poll(&self.nm, out).await;
                    old.flush(out);
                }
            }
            let tail = self.tails.entry(u.index).or_insert_with(|| {
                let label = format!("{} {}", kind.unit(), u.index);
                out(&format!(
                    "Following {label}: container {} on {}",
                    u.container, u.node_http_address
                ));
                LogTail::new(
                    u.container,
                    u.node_http_address.clone(),
                    label,
                    &STREAMS,
                    self.opts.tail,
                )
            });
            tail.poll(&self.nm, out).await;
        }
    }

    /// The exit summary: each rank (task) with its container, node, state and exit status,
    /// the RM's report of each container winning over the rank file's.
    async fn summary(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        for (_, mut t) in std::mem::take(&mut self.tails) {
            let mut rest = Vec::new();
            t.poll(&self.nm, &mut |l: &str| rest.push(l.to_string()))
                .await;
            t.flush(&mut |l: &str| rest.push(l.to_string()));
            lines.extend(rest);
        }
        if self.opts.kind == AppKind::Sweep {
            return self.sweep_summary(lines).await;
        }
        let reports = self.all_containers().await;
        let rows: Vec<SummaryRow> = match self.opts.kind {
            AppKind::Train => match &self.work.ranks {
                Some(d) => d
                    .ranks
                    .iter()
                    .map(|r| {
                        let rm = reports.get(&r.container_id.to_string());
                        let (state, exit) = match rm {
                            Some(c) if c.container_state == "COMPLETE" => {
                                ("COMPLETE".to_string(), Some(c.container_exit_status))
                            }
                            _ => (rank_state(r.state).to_string(), r.exit_status),
                        };
                        SummaryRow {
                            index: r.rank,
                            container: r.container_id.to_string(),
                            node: r.node_id.clone(),
                            state,
                            exit,
                        }
                    })
                    .collect(),
                None => Vec::new(),
            },
            AppKind::Shell | AppKind::Sweep => self
                .work
                .tasks
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let c = reports.get(&c.container_id).unwrap_or(c);
                    SummaryRow {
                        index: i as u32,
                        container: c.container_id.clone(),
                        node: c.node_id.clone(),
                        state: c.container_state.clone(),
                        exit: (c.container_state == "COMPLETE").then_some(c.container_exit_status),
                    }
                })
                .collect(),
        };
        let title = match (self.opts.kind, &self.work.ranks) {
            (AppKind::Train, Some(d)) => format!("Ranks of gang attempt {}:", d.gang_attempt),
            (AppKind::Train, None) => "Ranks: none was started".to_string(),
            (AppKind::Shell, _) if rows.is_empty() => "Tasks: none was started".to_string(),
            (AppKind::Shell | AppKind::Sweep, _) => "Tasks:".to_string(),
        };
        lines.push(title);
        lines.extend(summary_table(self.opts.kind, &rows));
        lines
    }

    /// The sweep's closing table, from the AM's last trials file.
    async fn sweep_summary(&mut self, mut lines: Vec<String>) -> Vec<String> {
        if let Err(e) = self
            .work
            .fetch(self.rm, &self.nm, &self.app_id, AppKind::Sweep)
            .await
        {
            tracing::debug!(error = %e, "trials for the summary");
        }
        match &self.work.trials {
            Some(t) if !t.trials.is_empty() => {
                lines.push("Trials:".into());
                lines.extend(sweep_status::table(t));
            }
            _ => lines.push("Trials: none was started".into()),
        }
        lines
    }

    /// Every container the RM reports for every attempt, by id (empty where it cannot say).
    async fn all_containers(&self) -> BTreeMap<String, ContainerReportInfo> {
        let mut by_id = BTreeMap::new();
        let attempts = match self.rm.app_attempts(&self.app_id).await {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(error = %e, "attempts for the summary");
                return by_id;
            }
        };
        for a in attempts {
            let Ok(id) = a.app_attempt_id.parse::<ApplicationAttemptId>() else {
                continue;
            };
            match self.rm.attempt_containers(&id).await {
                Ok(cs) => by_id.extend(cs.into_iter().map(|c| (c.container_id.clone(), c))),
                Err(e) => tracing::debug!(error = %e, "containers for the summary"),
            }
        }
        by_id
    }
}

/// The files streamed of each followed container.
pub const STREAMS: [&str; 2] = ["stdout", "stderr"];

/// What the client knows of the application's work.
#[derive(Debug, Default)]
pub struct Work {
    /// The current AM attempt: its id, container and node's web address.
    pub am: Option<(ApplicationAttemptId, ContainerId, String)>,
    /// Train: the AM's last rank file.
    pub ranks: Option<GangRanks>,
    /// Shell: the containers of the current attempt, AM excluded, in id order.
    pub tasks: Vec<ContainerReportInfo>,
    /// Sweep: the AM's last trials file.
    pub trials: Option<SweepTrials>,
}

/// A rank (task) whose logs can be read: its index, container and NM web address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub index: u32,
    pub container: ContainerId,
    pub node_http_address: String,
}

impl Work {
    /// Reads the current AM attempt, then the training AM's rank file or the sweep AM's
    /// trials file through its NM (each kept as it was while the new AM has written none),
    /// or the shell's containers.
    pub async fn fetch(
        &mut self,
        rm: &RmClient,
        nm: &reqwest::Client,
        app_id: &spindle_common::ids::ApplicationId,
        kind: AppKind,
    ) -> Result<(), ClientError> {
        let attempts = rm.app_attempts(app_id).await?;
        self.am = attempts.last().and_then(am_of);
        let Some((attempt, am, node)) = &self.am else {
            return Ok(());
        };
        match kind {
            AppKind::Train => {
                if let Some(r) = fetch_am_file(nm, node, am, RANKS_FILE).await {
                    self.ranks = Some(r);
                }
            }
            AppKind::Sweep => {
                if let Some(t) = fetch_am_file(nm, node, am, TRIALS_FILE).await {
                    self.trials = Some(t);
                }
            }
            AppKind::Shell => {
                let mut tasks: Vec<ContainerReportInfo> = rm
                    .attempt_containers(attempt)
                    .await?
                    .into_iter()
                    .filter(|c| c.container_id != am.to_string())
                    .collect();
                tasks.sort_by_key(|c| container_order(&c.container_id));
                self.tasks = tasks;
            }
        }
        Ok(())
    }

    /// Every rank (task) known now, in order.
    pub fn all_units(&self, kind: AppKind) -> Vec<Unit> {
        match kind {
            AppKind::Train => self
                .ranks
                .iter()
                .flat_map(|d| &d.ranks)
                .map(|r| Unit {
                    index: r.rank,
                    container: r.container_id,
                    node_http_address: r.node_http_address.clone(),
                })
                .collect(),
            AppKind::Shell => self
                .tasks
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    Some(Unit {
                        index: i as u32,
                        container: c.container_id.parse().ok()?,
                        node_http_address: c.node_http_address.clone(),
                    })
                })
                .collect(),
            // Trials run side by side, each with its own logs (`spindle logs`).
            AppKind::Sweep => Vec::new(),
        }
    }

    /// The ranks (tasks) whose logs `logs` follows.
    pub fn units(&self, kind: AppKind, logs: Logs) -> Vec<Unit> {
        let mut all = self.all_units(kind);
        match logs {
            Logs::Off => Vec::new(),
            Logs::First => {
                all.retain(|u| u.index == 0);
                all
            }
            Logs::Ranks(None) => all,
            Logs::Ranks(Some(n)) => {
                all.retain(|u| u.index == n);
                all
            }
        }
    }
}

impl Work {
    /// The work as it is now ([`Work::fetch`] once).
    pub async fn read(
        rm: &RmClient,
        app_id: &spindle_common::ids::ApplicationId,
        kind: AppKind,
    ) -> Result<Self, ClientError> {
        let mut w = Self::default();
        w.fetch(rm, &build_client()?, app_id, kind).await?;
        Ok(w)
    }
}

/// Prints `files` of each of `units` once, `[rank 1 stdout] line`: from its start, or its
/// last `tail` lines (`spindle logs -rank N -tail N` without `-follow`).
pub async fn print_units(
    units: &[Unit],
    kind: AppKind,
    files: &[&str],
    tail: Option<usize>,
    out: &mut (dyn FnMut(&str) + Send),
) -> Result<(), ClientError> {
    let nm = build_client()?;
    for u in units {
        let label = format!("{} {}", kind.unit(), u.index);
        let mut t = LogTail::new(u.container, u.node_http_address.clone(), label, files, tail);
        t.poll(&nm, out).await;
        t.flush(out);
    }
    Ok(())
}

/// One of the AM's JSON files for its client (the rank file, the trials file), read through
/// the NM's log REST of the AM container; None while it is not there (yet) or unreadable.
async fn fetch_am_file<T: serde::de::DeserializeOwned>(
    nm: &reqwest::Client,
    node: &str,
    am: &ContainerId,
    file: &str,
) -> Option<T> {
    let http = Http::with_client(nm.clone(), node);
    let path = format!("/ws/v1/node/containerlogs/{am}/{file}");
    let r = match http.get_text(&path).await {
        Ok(text) => serde_json::from_str(&text).map_err(|e| ClientError::Decode {
            url: http.url(&path),
            message: e.to_string(),
        }),
        Err(e) => Err(e),
    };
    match r {
        Ok(doc) => Some(doc),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            tracing::debug!(error = %e, "{file}");
            None
        }
    }
}

/// The attempt's id, AM container and node web address, when the RM has them.
fn am_of(a: &AppAttemptInfo) -> Option<(ApplicationAttemptId, ContainerId, String)> {
    let attempt = a.app_attempt_id.parse().ok()?;
    let container = a.container_id.parse().ok()?;
    (!a.node_http_address.is_empty()).then(|| (attempt, container, a.node_http_address.clone()))
}

/// Container ids in allocation order (by their number), unparsable ones last.
fn container_order(id: &str) -> (u8, Option<ContainerId>, String) {
    match id.parse::<ContainerId>() {
        Ok(c) => (0, Some(c), String::new()),
        Err(_) => (1, None, id.to_string()),
    }
}

fn state_line(app: &AppInfo) -> String {
    let mut l = format!("Application {} is {}", app.id, app.state);
    if let Some(u) = app.tracking_url.as_deref().filter(|u| !u.is_empty()) {
        if app.state == YarnApplicationState::RUNNING {
            l.push_str(&format!(" (tracking URL: {u})"));
        }
    }
    l
}

/// Why the application waits, by what waits (the application, each gang); a line when a
/// reason appears or changes, none while it stays the same.
#[derive(Debug, Default)]
pub struct WaitingReasons {
    last: BTreeMap<String, String>,
}

impl WaitingReasons {
    pub fn lines(&mut self, app: &AppInfo) -> Vec<String> {
        let mut now = BTreeMap::new();
        let not_yet_running = matches!(
            app.state,
            YarnApplicationState::NEW
                | YarnApplicationState::NEW_SAVING
                | YarnApplicationState::SUBMITTED
                | YarnApplicationState::ACCEPTED
        );
        let d = one_line(&app.diagnostics);
        if not_yet_running && !d.is_empty() {
            now.insert(String::new(), d);
        }
        if app.state == YarnApplicationState::RUNNING {
            for g in &app.gangs {
                let waits = matches!(g.state, GangState::PENDING | GangState::RESERVED);
                if waits && !g.diagnostics.trim().is_empty() {
                    now.insert(format!("gang {}", g.id), one_line(&status_line(g)));
                }
            }
        }
        let lines = now
            .iter()
            .filter(|(k, v)| self.last.get(*k) != Some(*v))
            .map(|(_, v)| format!("Waiting: {v}"))
            .collect();
        self.last = now;
        lines
    }
}

/// The lines of the gang's events after the first `seen` ([`GangEvent::line`]); a preemption
/// names the application and queue the RM took the gang for, when its app view says.
pub fn event_lines(events: &[GangEvent], seen: usize, app: &AppInfo) -> Vec<String> {
    let by = app
        .preemption
        .as_ref()
        .and_then(|p| p.last_preempted_by.as_ref());
    events
        .iter()
        .skip(seen)
        .map(|e| match (e, by) {
            (GangEvent::Preempted { .. }, Some(b)) => format!(
                "{} (taken for {} in queue {})",
                e.line(),
                b.application_id,
                b.queue
            ),
            _ => e.line(),
        })
        .collect()
}

/// `Gang workers: 8 of 12 granted, 8 held, 0 running, 0 exited`; None before anything is
/// known of the gang.
pub fn train_progress(ranks: Option<&GangRanks>, wanted: Option<u32>) -> Option<String> {
    match ranks.filter(|d| !d.ranks.is_empty()) {
        Some(d) => {
            let c = d.counts();
            let granted = d.ranks.len() as u32;
            let of = wanted.unwrap_or(granted).max(granted);
            let mut l = format!(
                "Gang {GANG_ID}: {granted} of {of} granted, {} held, {} running, {} exited",
                c.held, c.running, c.complete
            );
            if d.gang_attempt > 1 {
                l.push_str(&format!(" (gang attempt {})", d.gang_attempt));
            }
            Some(l)
        }
        None => wanted.map(|n| format!("Gang {GANG_ID}: 0 of {n} granted")),
    }
}

/// `Containers: 2 granted, 0 starting, 2 running, 0 complete`; None before any.
pub fn shell_progress(tasks: &[ContainerReportInfo]) -> Option<String> {
    if tasks.is_empty() {
        return None;
    }
    let count = |s: &str| tasks.iter().filter(|c| c.container_state == s).count();
    let (running, complete) = (count("RUNNING"), count("COMPLETE"));
    Some(format!(
        "Containers: {} granted, {} starting, {running} running, {complete} complete",
        tasks.len(),
        tasks.len() - running - complete
    ))
}

fn rank_state(s: RankState) -> &'static str {
    match s {
        RankState::HELD => "HELD",
        RankState::RUNNING => "RUNNING",
        RankState::COMPLETE => "COMPLETE",
    }
}

/// One line of the exit summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRow {
    pub index: u32,
    pub container: String,
    pub node: String,
    pub state: String,
    pub exit: Option<i32>,
}

/// An exit status with YARN's name for the negative ones: `0`, `-105 (KILLED_BY_APPMASTER)`.
pub fn exit_text(code: i32) -> String {
    let name = match code {
        exit_status::ABORTED => "ABORTED",
        exit_status::DISKS_FAILED => "DISKS_FAILED",
        exit_status::PREEMPTED => "PREEMPTED",
        exit_status::KILLED_EXCEEDED_VMEM => "KILLED_EXCEEDED_VMEM",
        exit_status::KILLED_EXCEEDED_PMEM => "KILLED_EXCEEDED_PMEM",
        exit_status::KILLED_BY_APPMASTER => "KILLED_BY_APPMASTER",
        exit_status::KILLED_BY_RESOURCEMANAGER => "KILLED_BY_RESOURCEMANAGER",
        exit_status::KILLED_AFTER_APP_COMPLETION => "KILLED_AFTER_APP_COMPLETION",
        exit_status::KILLED_BY_CONTAINER_SCHEDULER => "KILLED_BY_CONTAINER_SCHEDULER",
        exit_status::KILLED_FOR_EXCESS_LOGS => "KILLED_FOR_EXCESS_LOGS",
        _ => return code.to_string(),
    };
    format!("{code} ({name})")
}

/// The summary as an aligned table: `RANK CONTAINER NODE STATE EXIT-STATUS` (`TASK` for
/// the shell), one row each.
pub fn summary_table(kind: AppKind, rows: &[SummaryRow]) -> Vec<String> {
    if rows.is_empty() {
        return Vec::new();
    }
    let head = [
        kind.unit().to_uppercase(),
        "CONTAINER".to_string(),
        "NODE".to_string(),
        "STATE".to_string(),
        "EXIT-STATUS".to_string(),
    ];
    let mut table = vec![head.to_vec()];
    table.extend(rows.iter().map(|r| {
        vec![
            r.index.to_string(),
            r.container.clone(),
            r.node.clone(),
            r.state.clone(),
            r.exit.map_or_else(|| "-".to_string(), exit_text),
        ]
    }));
    aligned(&table)
}

/// Rows of cells as lines indented by two spaces, each column as wide as its widest cell,
/// two spaces between columns, no trailing blanks.
pub fn aligned(rows: &[Vec<String>]) -> Vec<String> {
    let mut width: Vec<usize> = Vec::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if width.len() <= i {
                width.push(0);
            }
            width[i] = width[i].max(cell.chars().count());
        }
    }
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(width.iter())
                .map(|(c, w)| format!("{c:<w$}"))
                .collect();
            format!("  {}", cells.join("  ").trim_end())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::status::RankStatus;

    fn app(state: &str, diagnostics: &str, gangs: serde_json::Value) -> AppInfo {
        serde_json::from_value(serde_json::json!({
            "id": "application_1_0001", "state": state, "diagnostics": diagnostics,
            "gangs": gangs,
        }))
        .expect("an app")
    }

    #[test]
    fn a_waiting_reason_is_told_once_per_change() {
        let mut w = WaitingReasons::default();
        let limit = "Queue's AM resource limit exceeded";
        assert_eq!(
            w.lines(&app("ACCEPTED", limit, serde_json::json!([]))),
            [format!("Waiting: {limit}")]
        );
        assert!(w
            .lines(&app("ACCEPTED", limit, serde_json::json!([])))
            .is_empty());
        let gang = |d: &str, state: &str| serde_json::json!([{"id": "workers", "state": state, "size": 12, "diagnostics": d}]);
        let fit8 = "gang of 12 containers needs 12 GPUs; the best fit now is 8 of 12";
        let l = w.lines(&app("RUNNING", "", gang(fit8, "PENDING")));
        assert_eq!(l, [format!("Waiting: gang workers is PENDING: {fit8}")]);
        for _ in 0..5 {
            assert!(w
                .lines(&app("RUNNING", "", gang(fit8, "PENDING")))
                .is_empty());
        }
        let fit4 = fit8.replace("8 of 12", "4 of 12");
        assert_eq!(
            w.lines(&app("RUNNING", "", gang(&fit4, "PENDING"))),
            [format!("Waiting: gang workers is PENDING: {fit4}")]
        );
        // Granted: nothing to say; a RUNNING application's own diagnostics are not a wait.
        assert!(w
            .lines(&app("RUNNING", "something", gang("", "ALLOCATED")))
            .is_empty());
        assert!(w
            .lines(&app("FINISHED", "done", serde_json::json!([])))
            .is_empty());
    }

    fn rank(rank: u32, state: RankState, exit: Option<i32>) -> RankStatus {
        RankStatus {
            rank,
            container_id: format!("container_1_0001_01_00000{}", rank + 2)
                .parse()
                .expect("id"),
            node_id: "h:1".into(),
            node_http_address: "h:2".into(),
            state,
            exit_status: exit,
        }
    }

    #[test]
    fn progress_lines() {
        assert_eq!(train_progress(None, None), None);
        assert_eq!(
            train_progress(None, Some(12)).as_deref(),
            Some("Gang workers: 0 of 12 granted")
        );
        let d = GangRanks {
            gang_attempt: 2,
            ranks: vec![
                rank(0, RankState::RUNNING, None),
                rank(1, RankState::HELD, None),
                rank(2, RankState::COMPLETE, Some(0)),
            ],
            updated_ms: 1,
            events: Vec::new(),
        };
        assert_eq!(
            train_progress(Some(&d), Some(3)).as_deref(),
            Some("Gang workers: 3 of 3 granted, 1 held, 1 running, 1 exited (gang attempt 2)")
        );
        let c = |id: &str, state: &str| -> ContainerReportInfo {
            serde_json::from_value(serde_json::json!({
                "containerId": id, "containerState": state, "containerExitStatus": 0,
                "allocatedMB": 1, "allocatedVCores": 1, "assignedNodeId": "h:1", "priority": 0,
                "startedTime": 0, "finishedTime": 0, "elapsedTime": 0, "diagnosticsInfo": "",
                "logUrl": "", "nodeHttpAddress": "http://h:2", "nodeId": "h:1",
                "allocatedResources": {},
            }))
            .expect("a report")
        };
        assert_eq!(shell_progress(&[]), None);
        assert_eq!(
            shell_progress(&[
                c("container_1_0001_01_000002", "NEW"),
                c("container_1_0001_01_000003", "RUNNING"),
                c("container_1_0001_01_000004", "COMPLETE"),
            ])
            .as_deref(),
            Some("Containers: 3 granted, 1 starting, 1 running, 1 complete")
        );
        let mut ids = ["container_1_0001_01_000010", "container_1_0001_01_000009"];
        ids.sort_by_key(|i| container_order(i));
        assert_eq!(ids[0], "container_1_0001_01_000009");
    }

    #[test]
    fn events_are_told_once_and_a_preemption_names_who_took_the_gang() {
        let events = vec![
            GangEvent::Restarted {
                attempt: 2,
                of: 4,
                because: "worker rank 1 failed".into(),
            },
            GangEvent::Preempted {
                gang_attempt: 2,
                checkpoint: Some("ckpt-3 (step 3)".into()),
            },
        ];
        let mut a = app("RUNNING", "", serde_json::json!([]));
        assert_eq!(
            event_lines(&events, 0, &a),
            [
                "Gang workers restarted: attempt 2 of 4, because worker rank 1 failed",
                "Gang workers preempted in gang attempt 2; resuming from checkpoint ckpt-3 (step 3)",
            ]
        );
        assert!(event_lines(&events, 2, &a).is_empty());
        a.preemption = Some(spindle_common::records::cluster::AppPreemptionInfo {
            preemptions: 1,
            last_preempted_by: Some(spindle_common::records::cluster::PreemptedBy {
                application_id: "application_1_0009".into(),
                queue: "root.prod".into(),
            }),
            ..Default::default()
        });
        assert_eq!(
            event_lines(&events, 1, &a),
            ["Gang workers preempted in gang attempt 2; resuming from checkpoint ckpt-3 (step 3) \
              (taken for application_1_0009 in queue root.prod)"]
        );
    }

    #[test]
    fn the_summary_is_a_table() {
        assert_eq!(exit_text(0), "0");
        assert_eq!(exit_text(3), "3");
        assert_eq!(exit_text(-105), "-105 (KILLED_BY_APPMASTER)");
        let rows = vec![
            SummaryRow {
                index: 0,
                container: "container_1_0001_01_000002".into(),
                node: "h:1".into(),
                state: "COMPLETE".into(),
                exit: Some(0),
            },
            SummaryRow {
                index: 1,
                container: "container_1_0001_01_000003".into(),
                node: "host-b:1".into(),
                state: "RUNNING".into(),
                exit: None,
            },
        ];
        let t = summary_table(AppKind::Train, &rows);
        assert_eq!(
            t,
            [
                "  RANK  CONTAINER                   NODE      STATE     EXIT-STATUS",
                "  0     container_1_0001_01_000002  h:1       COMPLETE  0",
                "  1     container_1_0001_01_000003  host-b:1  RUNNING   -",
            ]
        );
        assert!(summary_table(AppKind::Shell, &rows)[0].starts_with("  TASK"));
        assert!(summary_table(AppKind::Shell, &[]).is_empty());
    }
}
