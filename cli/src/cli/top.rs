//! `spindle top`, as `yarn top`: a live view of the cluster's figures (GPUs too) and its
//! applications, sorted by what they hold (GPUs, then containers, then memory, then
//! vcores), refreshed every
//! `-delay` seconds (3 by default) until `q` or Ctrl-C. When stdout is not a terminal, one
//! frame is printed and the command exits (that is how scripts and tests read it).
//!
//! The frame is [`frame`], a pure function of what the RM answered; the loop only fetches,
//! draws and reads keys.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context;
use spindle_appmaster_sdk::rm_client::{AppsFilter, RmClient};
use spindle_common::records::cluster::{AppInfo, ClusterMetrics};
use spindle_common::resource::GPU;
use spindle_common::states::YarnApplicationState;
use spindle_common::time::{now_ms, UtcTime};

use super::args::{Opt, Parsed, UsageError};
use super::{parse_or_usage, rm_client, usage_error, EXIT_OK};

pub const USAGE: &str = "\
usage: spindle top [-delay SECONDS] [-queues Q1,Q2] [-users U1,U2] [-types T1,T2]
                   [-cols N] [-rows N] [--rm-address HOST:PORT] [--conf-dir DIR]
  A live view of the cluster (NodeManagers, applications, memory, vcores, GPUs used, free
  and reserved of the total, the GPUs each queue's applications hold, containers) and of
  its running and accepted applications, the ones holding the most GPUs first. Press q (or
  Ctrl-C) to quit. When stdout is not a terminal, prints one frame and exits.
  -delay SECONDS   refresh period (default 3)
  -queues Q1,Q2    only applications in these queues
  -users U1,U2     only applications of these users
  -types T1,T2     only applications of these types
  -cols N, -rows N the terminal's size (default: asked of the terminal, else unlimited)";

pub const OPTS: &[Opt] = &[
    Opt::one("delay", &[]),
    Opt::list("queues", &[]),
    Opt::list("users", &[]),
    Opt::list("types", &[]),
    Opt::one("cols", &[]),
    Opt::one("rows", &[]),
];

/// YARN top's refresh period.
const DEFAULT_DELAY_S: u64 = 3;

/// What one frame shows, as fetched.
#[derive(Debug, Clone)]
pub struct TopData {
    pub now: u64,
    /// The RM's `startedOn` (0 when unknown).
    pub rm_started: u64,
    pub metrics: ClusterMetrics,
    pub apps: Vec<AppInfo>,
}

/// How a frame is cut and filtered.
#[derive(Debug, Clone, Default)]
pub struct FrameOpts {
    pub queues: Vec<String>,
    pub users: Vec<String>,
    pub types: Vec<String>,
    /// Line width limit; `None` for none.
    pub cols: Option<usize>,
    /// Screen height; `None` for every application.
    pub rows: Option<usize>,
}

fn limit(line: String, cols: Option<usize>) -> String {
    match cols {
        Some(c) if line.chars().count() > c => line.chars().take(c).collect(),
        _ => line,
    }
}

/// DurationFormatUtils' `dd:HH:mm`.
fn duration(ms: u64) -> String {
    let mins = ms / 60_000;
    format!(
        "{:02}:{:02}:{:02}",
        mins / 1440,
        (mins / 60) % 24,
        mins % 60
    )
}

/// TopCLI's columns: header and `%Ns` width (negative: left-aligned; 0: as is).
const COLUMNS: [(&str, i32); 17] = [
    ("APPLICATIONID", 31),
    ("USER", -10),
    ("TYPE", 10),
    ("QUEUE", 10),
    ("PRIOR", 5),
    ("#CONT", 7),
    ("#RCONT", 7),
    ("VCORES", 7),
    ("RVCORES", 7),
    ("MEM", 7),
    ("RMEM", 7),
    ("GPUS", 5),
    ("VCORESECS", 10),
    ("MEMSECS", 10),
    ("%PROGR", 6),
    ("TIME", 10),
    ("NAME", 0),
];

fn row(cells: &[String]) -> String {
    cells
        .iter()
        .zip(COLUMNS)
        .map(|(c, (_, w))| match w {
            0 => c.clone(),
            w if w < 0 => format!("{c:<width$}", width = (-w) as usize),
            w => format!("{c:>width$}", width = w as usize),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The applications a frame lists: filtered, the ones holding the most first.
pub fn visible_apps<'a>(apps: &'a [AppInfo], o: &FrameOpts) -> Vec<&'a AppInfo> {
    let any = |set: &[String], v: &str| set.is_empty() || set.iter().any(|x| x == v);
    let mut v: Vec<&AppInfo> = apps
        .iter()
        .filter(|a| any(&o.queues, &a.queue) && any(&o.users, &a.user))
        .filter(|a| {
            o.types.is_empty()
                || o.types
                    .iter()
                    .any(|t| t.eq_ignore_ascii_case(&a.application_type))
        })
        .collect();
    let held = |a: &AppInfo| {
        (
            a.allocated_gpus.max(0),
            a.running_containers.max(0),
            a.allocated_mb.max(0),
            a.allocated_v_cores.max(0),
        )
    };
    v.sort_by(|a, b| held(b).cmp(&held(a)).then_with(|| a.id.cmp(&b.id)));
    v
}

/// One frame of `top`, as TopCLI lays it out: six header lines, a blank line, the
/// applications' header, then one line per application.
pub fn frame(d: &TopData, o: &FrameOpts) -> Vec<String> {
    let m = &d.metrics;
    let t = UtcTime::from_ms(d.now);
    let up = d.now.saturating_sub(d.rm_started);
    let (days, hours, minutes) = (up / 86_400_000, (up / 3_600_000) % 24, (up / 60_000) % 60);
    let apps = visible_apps(&d.apps, o);
    let mut users: Vec<&str> = apps
        .iter()
        .filter(|a| a.state == YarnApplicationState::RUNNING)
        .map(|a| a.user.as_str())
        .collect();
    users.sort();
    users.dedup();
    let queues = if o.queues.is_empty() {
        "root".to_string()
    } else {
        o.queues.join(",")
    };
    let gb = |mb: i64| mb.max(0) / 1024;
    let mut out = vec![
        format!(
            "Spindle top - {:02}:{:02}:{:02}+00:00, up {days}d, {hours}:{minutes}, {} active users, queue(s): {queues}",
            t.hour,
            t.minute,
            t.second,
            users.len()
        ),
        format!(
            "NodeManager(s): {} total, {} active, {} unhealthy, {} decommissioned, {} lost, {} rebooted",
            m.total_nodes,
            m.active_nodes,
            m.unhealthy_nodes,
            m.decommissioned_nodes,
            m.lost_nodes,
            m.rebooted_nodes
        ),
        format!(
            "Queue(s) Applications: {} running, {} submitted, {} pending, {} completed, {} killed, {} failed",
            m.apps_running, m.apps_submitted, m.apps_pending, m.apps_completed, m.apps_killed, m.apps_failed
        ),
        format!(
            "Queue(s) Mem(GB): {} available, {} allocated, {} pending, {} reserved",
            gb(m.available_mb),
            gb(m.allocated_mb),
            gb(m.pending_mb),
            gb(m.reserved_mb)
        ),
        format!(
            "Queue(s) VCores: {} available, {} allocated, {} pending, {} reserved",
            m.available_virtual_cores,
            m.allocated_virtual_cores,
            m.pending_virtual_cores,
            m.reserved_virtual_cores
        ),
        gpu_line(m),
        queue_gpus_line(&apps),
        format!(
            "Queue(s) Containers: {} allocated, {} pending, {} reserved",
            m.containers_allocated, m.containers_pending, m.containers_reserved
        ),
        String::new(),
    ];
    let header: Vec<String> = COLUMNS.iter().map(|(h, _)| h.to_string()).collect();
    out.push(row(&header));
    // TopCLI keeps 9 lines for the header block and the prompt; the GPU lines take 2 more.
    let room = o.rows.map_or(usize::MAX, |r| r.saturating_sub(11));
    for a in apps.into_iter().take(room) {
        let cells = [
            a.id.clone(),
            a.user.clone(),
            a.application_type.to_lowercase(),
            a.queue.clone(),
            a.priority.to_string(),
            a.running_containers.max(0).to_string(),
            "0".into(),
            a.allocated_v_cores.max(0).to_string(),
            a.reserved_v_cores.max(0).to_string(),
            format!("{}G", gb(a.allocated_mb)),
            format!("{}G", gb(a.reserved_mb)),
            a.allocated_gpus.max(0).to_string(),
            a.vcore_seconds.to_string(),
            (a.memory_seconds / 1024).to_string(),
            format!("{:.2}", a.progress),
            duration(d.now.saturating_sub(a.started_time)),
            a.name.clone(),
        ];
        out.push(row(&cells));
    }
    out.into_iter().map(|l| limit(l, o.cols)).collect()
}

/// The cluster's GPUs: used, free and reserved (held on nodes for waiting gangs) of total.
fn gpu_line(m: &ClusterMetrics) -> String {
    let gpus = |r: &spindle_common::records::resource::ResourceInfo| r.to_resource().get(GPU);
    let total = gpus(&m.total_cluster_resources_across_partition);
    let used = gpus(&m.total_used_resources_across_partition);
    let reserved = gpus(&m.total_reserved_resources_across_partition);
    format!(
        "Queue(s) GPUs: {used} used, {} free, {reserved} reserved of {total} total",
        (total - used - reserved).max(0)
    )
}

/// The GPUs each queue's listed applications hold, the most first (ties by name).
fn queue_gpus_line(apps: &[&AppInfo]) -> String {
    let mut by_queue: BTreeMap<&str, i64> = BTreeMap::new();
    for a in apps {
        *by_queue.entry(a.queue.as_str()).or_default() += a.allocated_gpus.max(0);
    }
    let mut v: Vec<(&str, i64)> = by_queue.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let cells: Vec<String> = v.iter().map(|(q, n)| format!("{q} {n}")).collect();
    let list = if cells.is_empty() {
        "none".to_string()
    } else {
        cells.join(", ")
    };
    format!("Queue(s) GPUs held by queue: {list}")
}

fn frame_opts(p: &Parsed, tty: bool) -> Result<FrameOpts, UsageError> {
    let size = |name: &'static str, tput: &str| -> Result<Option<usize>, UsageError> {
        match p.parse::<usize>(name)? {
            Some(n) => Ok(Some(n)),
            None if tty => Ok(tput_size(tput)),
            None => Ok(None),
        }
    };
    Ok(FrameOpts {
        queues: p.values("queues").to_vec(),
        users: p.values("users").to_vec(),
        types: p.values("types").to_vec(),
        cols: size("cols", "cols")?,
        rows: size("rows", "lines")?,
    })
}

/// The terminal's size as `tput` tells it (YARN asks `tput` too).
fn tput_size(what: &str) -> Option<usize> {
    let out = std::process::Command::new("tput")
        .arg(what)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

async fn fetch(rm: &RmClient) -> anyhow::Result<TopData> {
    let metrics = rm
        .metrics()
        .await
        .with_context(|| format!("cannot read the cluster metrics at {}", rm.address()))?;
    let rm_started = rm.cluster_info().await.map(|i| i.started_on).unwrap_or(0);
    let apps = rm
        .apps(&AppsFilter {
            states: vec![
                YarnApplicationState::ACCEPTED,
                YarnApplicationState::RUNNING,
            ],
            ..Default::default()
        })
        .await
        .with_context(|| format!("cannot list applications at {}", rm.address()))?;
    Ok(TopData {
        now: now_ms(),
        rm_started,
        metrics,
        apps,
    })
}

pub async fn run(args: Vec<String>) -> anyhow::Result<u8> {
    let Some(p) = parse_or_usage(&args, OPTS, USAGE)? else {
        return Ok(EXIT_OK);
    };
    if !p.positionals.is_empty() {
        return Err(usage_error(
            UsageError::Other(format!("unexpected argument '{}'", p.positionals[0])),
            USAGE,
        ));
    }
    let delay = match p.parse::<u64>("delay").map_err(|e| usage_error(e, USAGE))? {
        Some(0) => {
            return Err(usage_error(
                UsageError::Invalid {
                    option: "delay",
                    value: "0".into(),
                    reason: "the refresh delay is at least 1 second".into(),
                },
                USAGE,
            ))
        }
        Some(d) => d,
        None => DEFAULT_DELAY_S,
    };
    let tty = std::io::stdout().is_terminal();
    let opts = frame_opts(&p, tty).map_err(|e| usage_error(e, USAGE))?;
    let rm = rm_client(&p)?;
    let first = fetch(&rm).await?;
    if !tty {
        for line in frame(&first, &opts) {
            say!("{line}");
        }
        return Ok(EXIT_OK);
    }
    live(&rm, first, opts, Duration::from_secs(delay)).await
}

/// ANSI sequences TopCLI gets from `tput`.
const CLEAR: &str = "\x1b[2J";
const HOME: &str = "\x1b[H";
const CLEAR_LINE: &str = "\x1b[2K";
const CLEAR_BELOW: &str = "\x1b[J";
const REVERSE: &str = "\x1b[7m";
const RESET: &str = "\x1b[0m";

/// The line of a frame with the applications' header: after the eight summary lines
/// (TopCLI's six and the two GPU lines) and a blank one.
const APPS_HEADER_LINE: usize = 9;

fn draw(lines: &[String], note: Option<&str>) {
    let mut s = String::from(HOME);
    for (i, l) in lines.iter().enumerate() {
        s.push_str(CLEAR_LINE);
        if i == APPS_HEADER_LINE {
            // The applications' header, in reverse video as TopCLI draws it.
            s.push_str(REVERSE);
            s.push_str(l);
            s.push_str(RESET);
        } else {
            s.push_str(l);
        }
        s.push('\n');
    }
    if let Some(n) = note {
        s.push_str(CLEAR_LINE);
        s.push_str(n);
        s.push('\n');
    }
    s.push_str(CLEAR_BELOW);
    super::out(&s);
}

/// Puts the terminal in non-canonical, no-echo mode (keys arrive at once; Ctrl-C still
/// signals) and restores it when dropped.
struct RawInput {
    saved: Option<nix::sys::termios::Termios>,
}

impl RawInput {
    fn enter() -> Self {
        use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Self { saved: None };
        }
        let Ok(saved) = tcgetattr(&stdin) else {
            return Self { saved: None };
        };
        let mut raw = saved.clone();
        raw.local_flags
            .remove(LocalFlags::ICANON | LocalFlags::ECHO);
        if tcsetattr(&stdin, SetArg::TCSANOW, &raw).is_err() {
            return Self { saved: None };
        }
        Self { saved: Some(saved) }
    }
}

impl Drop for RawInput {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                saved,
            );
        }
    }
}

async fn live(
    rm: &RmClient,
    first: TopData,
    opts: FrameOpts,
    delay: Duration,
) -> anyhow::Result<u8> {
    let _raw = RawInput::enter();
    // Keys come from a blocking reader thread; `q` (or an end of input) quits.
    let (keys_tx, mut keys) = tokio::sync::mpsc::unbounded_channel::<u8>();
    if std::io::stdin().is_terminal() {
        std::thread::spawn(move || {
            use std::io::Read;
            let mut b = [0u8; 1];
            let mut stdin = std::io::stdin();
            while let Ok(1) = stdin.read(&mut b) {
                if keys_tx.send(b[0]).is_err() {
                    break;
                }
            }
        });
    }
    super::out(&format!("{CLEAR}{HOME}"));
    let mut data = first;
    let mut note: Option<String> = None;
    loop {
        draw(&frame(&data, &opts), note.as_deref());
        let sleep = tokio::time::sleep(delay);
        tokio::pin!(sleep);
        let quit = loop {
            tokio::select! {
                _ = &mut sleep => break false,
                _ = tokio::signal::ctrl_c() => break true,
                k = keys.recv() => match k {
                    Some(b'q') | Some(b'Q') | Some(3) => break true,
                    Some(_) => continue,
                    None => continue,
                },
            }
        };
        if quit {
            break;
        }
        match fetch(rm).await {
            Ok(d) => {
                data = d;
                note = None;
            }
            Err(e) => {
                note = Some(format!(
                    "{} (showing the last figures)",
                    super::error_text(&e)
                ))
            }
        }
    }
    super::out(&format!("{CLEAR}{HOME}"));
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spindle_common::resource::Resource;

    fn app(id: &str, user: &str, cont: i64, mb: i64) -> AppInfo {
        AppInfo {
            id: id.into(),
            user: user.into(),
            name: "job".into(),
            queue: "default".into(),
            application_type: "DISTRIBUTEDSHELL".into(),
            state: YarnApplicationState::RUNNING,
            running_containers: cont,
            allocated_mb: mb,
            allocated_v_cores: cont,
            memory_seconds: 4096,
            vcore_seconds: 7,
            progress: 12.5,
            started_time: 1_000,
            ..Default::default()
        }
    }

    #[test]
    fn frame_is_top_clis_layout_sorted_by_what_apps_hold() {
        let d = TopData {
            now: 1_000 + 90_061_000,
            rm_started: 1_000,
            metrics: ClusterMetrics {
                total_nodes: 2,
                active_nodes: 2,
                apps_running: 2,
                apps_submitted: 3,
                apps_completed: 1,
                available_mb: 10 * 1024,
                allocated_mb: 6 * 1024,
                available_virtual_cores: 10,
                allocated_virtual_cores: 6,
                containers_allocated: 6,
                total_cluster_resources_across_partition: (&Resource::new(0, 0).with(GPU, 8))
                    .into(),
                total_used_resources_across_partition: (&Resource::new(0, 0).with(GPU, 3)).into(),
                total_reserved_resources_across_partition: (&Resource::new(0, 0).with(GPU, 1))
                    .into(),
                ..Default::default()
            },
            apps: vec![
                AppInfo {
                    allocated_gpus: 2,
                    queue: "prod".into(),
                    ..app("application_1_0001", "alice", 1, 1024)
                },
                AppInfo {
                    allocated_gpus: 1,
                    ..app("application_1_0002", "bob", 5, 5120)
                },
            ],
        };
        let f = frame(&d, &FrameOpts::default());
        assert!(f[0].starts_with("Spindle top - "), "{}", f[0]);
        assert!(
            f[0].ends_with(", up 1d, 1:1, 2 active users, queue(s): root"),
            "{}",
            f[0]
        );
        assert_eq!(
            f[1],
            "NodeManager(s): 2 total, 2 active, 0 unhealthy, 0 decommissioned, 0 lost, 0 rebooted"
        );
        assert_eq!(
            f[2],
            "Queue(s) Applications: 2 running, 3 submitted, 0 pending, 1 completed, 0 killed, 0 failed"
        );
        assert_eq!(
            f[3],
            "Queue(s) Mem(GB): 10 available, 6 allocated, 0 pending, 0 reserved"
        );
        assert_eq!(
            f[4],
            "Queue(s) VCores: 10 available, 6 allocated, 0 pending, 0 reserved"
        );
        assert_eq!(f[5], "Queue(s) GPUs: 3 used, 4 free, 1 reserved of 8 total");
        assert_eq!(f[6], "Queue(s) GPUs held by queue: prod 2, default 1");
        assert_eq!(
            f[7],
            "Queue(s) Containers: 6 allocated, 0 pending, 0 reserved"
        );
        assert_eq!(f[8], "");
        assert_eq!(
            f[9],
            format!(
                "{:>31} {:<10} {:>10} {:>10} {:>5} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>5} {:>10} {:>10} {:>6} {:>10} NAME",
                "APPLICATIONID", "USER", "TYPE", "QUEUE", "PRIOR", "#CONT", "#RCONT", "VCORES",
                "RVCORES", "MEM", "RMEM", "GPUS", "VCORESECS", "MEMSECS", "%PROGR", "TIME"
            )
        );
        // alice holds more GPUs: first, though bob holds more containers.
        let cols: Vec<&str> = f[11].split_whitespace().collect();
        assert_eq!(
            cols,
            [
                "application_1_0002",
                "bob",
                "distributedshell",
                "default",
                "0",
                "5",
                "0",
                "5",
                "0",
                "5G",
                "0G",
                "1",
                "7",
                "4",
                "12.50",
                "01:01:01",
                "job"
            ]
        );
        assert!(f[10].trim_start().starts_with("application_1_0001 "));
        assert_eq!(f.len(), 12);
        // Filters, a height and a width.
        let o = FrameOpts {
            users: vec!["alice".into()],
            cols: Some(40),
            ..Default::default()
        };
        let f = frame(&d, &o);
        assert_eq!(f.len(), 11);
        assert!(f.iter().all(|l| l.chars().count() <= 40));
        let o = FrameOpts {
            rows: Some(12),
            ..Default::default()
        };
        assert_eq!(
            frame(&d, &o).len(),
            11,
            "one application row fits in 12 rows"
        );
    }
}
