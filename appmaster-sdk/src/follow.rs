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

use reqwest::Method;
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
use crate::train::status::{GangRanks, RankState, RANKS_FILE};
use crate::train::GANG_ID;

/// How often the application's state is read.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// How often the rank file, the container reports and the followed logs are read.
pub const DETAIL_INTERVAL: Duration = Duration::from_millis(500);
/// How long an interrupted client waits for the RM to report the application KILLED.
pub const KILL_WAIT: Duration = Duration::from_secs(30);
/// The most bytes of one log file read per look.
const LOG_CHUNK: u64 = 1 << 20;
/// The longest unfinished line kept back for its end.
pub const MAX_LINE: usize = 64 * 1024;

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
    fn unit(self) -> &'static str {
        match self {
            Self::Train => "rank",
            Self::Shell => "task",
            Self::Sweep => "trial",
        }
    }
}

/// How to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowOptions {
    pub kind: AppKind,
    /// Stream rank 0's (the first task's) stdout and stderr.
    pub logs: bool,
    /// Kill the application when it has not finished after this long.
    pub timeout: Option<Duration>,
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

/// Follows the application until it reaches a final state (killing it if `opts.timeout`
/// runs out), printing what the module doc says.
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
        ranks: None,
        trials: None,
        tasks: Vec::new(),
        am: None,
        tail: None,
    };
    let start = Instant::now();
    let mut unreachable_since: Option<Instant> = None;
    let mut timed_out = false;
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
                timed_out,
            };
            for l in w.summary().await {
                out(&l);
            }
            for l in final_report(&outcome) {
                out(&l);
            }
            return Ok(outcome);
        }
        if let Some(t) = opts.timeout {
            if !timed_out && start.elapsed() >= t {
                out(&format!(
                    "Reached the client timeout of {} ms; killing application {app_id}",
                    t.as_millis()
                ));
                timed_out = true;
                if let Err(e) = rm.kill(app_id).await {
                    // It may have finished meanwhile; the next poll tells.
                    tracing::warn!(error = %e, "kill after timeout failed");
                }
            }
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
    /// Train: the AM's last rank file.
    ranks: Option<GangRanks>,
    /// Sweep: the AM's last trials file.
    trials: Option<SweepTrials>,
    /// Shell: the containers of the current attempt, AM excluded, in id order.
    tasks: Vec<ContainerReportInfo>,
    /// The current AM attempt: its id, container and node's web address.
    am: Option<(ApplicationAttemptId, ContainerId, String)>,
    /// The followed logs.
    tail: Option<LogTail>,
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
        let attempts = self.rm.app_attempts(&self.app_id).await?;
        self.am = attempts.last().and_then(am_of);
        let progress = match self.opts.kind {
            AppKind::Train => {
                if let Some(r) = self.fetch_am_file(RANKS_FILE).await {
                    self.ranks = Some(r);
                }
                let wanted = app.gangs.iter().find(|g| g.id == GANG_ID).map(|g| g.size);
                train_progress(self.ranks.as_ref(), wanted)
            }
            AppKind::Shell => {
                if let Some((attempt, am, _)) = &self.am {
                    let mut tasks: Vec<ContainerReportInfo> = self
                        .rm
                        .attempt_containers(attempt)
                        .await?
                        .into_iter()
                        .filter(|c| c.container_id != am.to_string())
                        .collect();
                    tasks.sort_by_key(|c| container_order(&c.container_id));
                    self.tasks = tasks;
                }
                shell_progress(&self.tasks)
            }
            AppKind::Sweep => {
                if let Some(t) = self.fetch_am_file(TRIALS_FILE).await {
                    self.trials = Some(t);
                }
                self.trials.as_ref().and_then(sweep_status::progress_line)
            }
        };
        if let Some(p) = progress.filter(|p| self.progress.as_ref() != Some(p)) {
            out(&p);
            self.progress = Some(p);
        }
        if self.opts.logs {
            self.follow_logs(out).await;
        }
        Ok(())
    }

    /// One of the AM's JSON files for its client (the rank file, the trials file), read
    /// through the NM's log REST of the AM container; None while it is not there (yet).
    async fn fetch_am_file<T: serde::de::DeserializeOwned>(&self, file: &str) -> Option<T> {
        let (_, am, node) = self.am.as_ref()?;
        let http = Http::with_client(self.nm.clone(), node);
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

    /// The container whose logs are followed now: rank 0's, or the first task's.
    fn followed(&self) -> Option<(ContainerId, String, String)> {
        match self.opts.kind {
            AppKind::Train => self.ranks.as_ref().and_then(|d| d.rank0()).map(|r| {
                (
                    r.container_id,
                    r.node_http_address.clone(),
                    "rank 0".to_string(),
                )
            }),
            AppKind::Shell => self.tasks.first().and_then(|c| {
                let id = c.container_id.parse().ok()?;
                Some((id, c.node_http_address.clone(), "task 0".to_string()))
            }),
            // Trials run side by side: their output is in their own logs.
            AppKind::Sweep => None,
        }
    }

    async fn follow_logs(&mut self, out: &mut (dyn FnMut(&str) + Send)) {
        let Some((id, node, label)) = self.followed() else {
            return;
        };
        if self.tail.as_ref().is_some_and(|t| t.container != id) {
            // A new gang attempt: what the last rank 0 wrote since the last look, then on.
            if let Some(mut old) = self.tail.take() {
                old.poll(&self.nm, out).await;
                old.flush(out);
            }
        }
        let tail = self.tail.get_or_insert_with(|| {
            out(&format!("Following {label}: container {id} on {node}"));
            LogTail::new(id, node, label)
        });
        tail.poll(&self.nm, out).await;
    }

    /// The exit summary: each rank (task) with its container, node, state and exit status,
    /// the RM's report of each container winning over the rank file's.
    async fn summary(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(mut t) = self.tail.take() {
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
            AppKind::Train => match &self.ranks {
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
        let title = match (self.opts.kind, &self.ranks) {
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
        if let Some(t) = self.fetch_am_file(TRIALS_FILE).await {
            self.trials = Some(t);
        }
        match &self.trials {
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

/// One followed log file: the bytes printed so far and an unfinished last line.
#[derive(Debug)]
pub struct TailFile {
    pub name: &'static str,
    /// Bytes of the file already read.
    pub offset: u64,
    partial: Vec<u8>,
}

impl TailFile {
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            offset: 0,
            partial: Vec::new(),
        }
    }

    /// Takes newly read bytes; returns the lines they complete (without their newline). An
    /// unfinished line longer than [`MAX_LINE`] bytes is given out as it is.
    pub fn take(&mut self, bytes: &[u8]) -> Vec<String> {
        self.offset += bytes.len() as u64;
        self.partial.extend_from_slice(bytes);
        let mut lines: Vec<String> = match self.partial.iter().rposition(|b| *b == b'\n') {
            Some(last) => {
                let rest = self.partial.split_off(last + 1);
                let done = std::mem::replace(&mut self.partial, rest);
                done[..done.len() - 1]
                    .split(|b| *b == b'\n')
                    .map(|l| {
                        String::from_utf8_lossy(l.strip_suffix(b"\r").unwrap_or(l)).into_owned()
                    })
                    .collect()
            }
            None => Vec::new(),
        };
        if self.partial.len() > MAX_LINE {
            lines.extend(self.rest());
        }
        lines
    }

    /// The unfinished last line, if any (at the end of the output).
    pub fn rest(&mut self) -> Option<String> {
        (!self.partial.is_empty())
            .then(|| String::from_utf8_lossy(&std::mem::take(&mut self.partial)).into_owned())
    }
}

/// A followed container's stdout and stderr.
struct LogTail {
    container: ContainerId,
    node: String,
    label: String,
    files: [TailFile; 2],
}

impl LogTail {
    fn new(container: ContainerId, node: String, label: String) -> Self {
        Self {
            container,
            node,
            label,
            files: [TailFile::new("stdout"), TailFile::new("stderr")],
        }
    }

    /// Prints the lines written since the last look, `[rank 0 stdout] line`.
    async fn poll(&mut self, client: &reqwest::Client, out: &mut (dyn FnMut(&str) + Send)) {
        let http = Http::with_client(client.clone(), &self.node);
        for f in &mut self.files {
            loop {
                let path = format!(
                    "/ws/v1/node/containerlogs/{}/{}?start={}&end={}",
                    self.container,
                    f.name,
                    f.offset,
                    f.offset + LOG_CHUNK
                );
                let (rb, url) = http.request(Method::GET, &path);
                let bytes = match http.send_ok(rb, &url).await {
                    Ok(resp) => match resp.bytes().await {
                        Ok(b) => b,
                        Err(e) => {
                            tracing::debug!(%url, error = %e, "log read");
                            break;
                        }
                    },
                    // Not written yet, or the NM is away for a moment: the next look tells.
                    Err(e) => {
                        tracing::debug!(%url, error = %e, "log read");
                        break;
                    }
                };
                for l in f.take(&bytes) {
                    out(&format!("[{} {}] {l}", self.label, f.name));
                }
                if (bytes.len() as u64) < LOG_CHUNK {
                    break;
                }
            }
        }
    }

    /// Prints what is left of unfinished lines.
    fn flush(&mut self, out: &mut (dyn FnMut(&str) + Send)) {
        for f in &mut self.files {
            if let Some(l) = f.rest() {
                out(&format!("[{} {}] {l}", self.label, f.name));
            }
        }
    }
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
    fn lines_are_cut_where_they_end() {
        let mut f = TailFile::new("stdout");
        assert!(f.take(b"hel").is_empty());
        assert_eq!(f.take(b"lo\nwor"), ["hello"]);
        assert_eq!(f.take(b"ld\r\n\nlast"), ["world", ""]);
        assert_eq!(f.offset, 18);
        assert_eq!(f.rest().as_deref(), Some("last"));
        assert_eq!(f.rest(), None);
        // A character split between two reads is whole in its line.
        let e = "é".as_bytes();
        assert!(f.take(&e[..1]).is_empty());
        assert_eq!(f.take(&[&e[1..], b"\n"].concat()), ["é"]);
        // A line without end is not kept back for ever.
        let long = vec![b'x'; MAX_LINE + 1];
        assert_eq!(f.take(&long), [String::from_utf8(long).unwrap()]);
        assert_eq!(f.rest(), None);
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
