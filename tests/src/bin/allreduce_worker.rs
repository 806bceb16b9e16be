//! A small stand-in for a distributed training worker, for `spindle train` system tests:
//! it proves the rank environment end to end by an all-reduce of the ranks over TCP.
//!
//! Reads `RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`. Rank 0 listens on
//! `0.0.0.0:MASTER_PORT`; every other rank connects to `MASTER_ADDR:MASTER_PORT` (retrying
//! for up to 30 s, as rank 0 may start later) and sends its rank; rank 0 sums all ranks
//! (its own 0 included) and sends the sum back to everyone. Each worker prints
//! `rank R of N: allreduce sum S` and exits 0 if S == N(N-1)/2, else 1 (2 if it could not
//! take part at all).
//!
//! It also prints one `env ...` line with what it saw (for the tests to check), and with
//! `ALLREDUCE_REPORT_DIR` writes the same as `<dir>/attempt-<A>-rank-<R>.txt`.
//! Test hook: with `ALLREDUCE_HANG_DIR` set and `SPINDLE_GANG_ATTEMPT` = 1, after the
//! all-reduce each worker writes its pid to `<dir>/rank-<R>.pid` and sleeps up to 120 s, so
//! that a test can kill one and watch the gang restart.

#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

const CONNECT_FOR: Duration = Duration::from_secs(30);
const GATHER_FOR: Duration = Duration::from_secs(60);
const IO_TIMEOUT: Duration = Duration::from_secs(30);
const HANG_FOR: Duration = Duration::from_secs(120);

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

fn env_u64(name: &str) -> Result<u64, String> {
    let v = env(name)?;
    v.trim()
        .parse()
        .map_err(|_| format!("{name}='{v}' is not a whole number"))
}

fn main() {
    match run() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("allreduce_worker: {e}");
            std::process::exit(2);
        }
    }
}

fn run() -> Result<i32, String> {
    let rank = env_u64("RANK")?;
    let world = env_u64("WORLD_SIZE")?;
    if world == 0 || rank >= world {
        return Err(format!("RANK {rank} is not within WORLD_SIZE {world}"));
    }
    let master_addr = env("MASTER_ADDR")?;
    let port = u16::try_from(env_u64("MASTER_PORT")?).map_err(|_| "MASTER_PORT is not a port")?;
    let attempt = std::env::var("SPINDLE_GANG_ATTEMPT").unwrap_or_default();
    let seen = format!(
        "env RANK={rank} WORLD_SIZE={world} LOCAL_RANK={} LOCAL_WORLD_SIZE={} NODE={}:{} \
         CUDA_VISIBLE_DEVICES={} SPINDLE_GANG_ATTEMPT={attempt} CONTAINER_ID={} MASTER={master_addr}:{port}",
        std::env::var("LOCAL_RANK").unwrap_or_default(),
        std::env::var("LOCAL_WORLD_SIZE").unwrap_or_default(),
        std::env::var("NM_HOST").unwrap_or_default(),
        std::env::var("NM_PORT").unwrap_or_default(),
        std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_default(),
        std::env::var("CONTAINER_ID").unwrap_or_default(),
    );
    println!("{seen}");

    let sum = if rank == 0 {
        lead(world, port)?
    } else {
        follow(rank, &master_addr, port)?
    };
    let line = format!("rank {rank} of {world}: allreduce sum {sum}");
    println!("{line}");
    let _ = std::io::stdout().flush();
    if let Ok(dir) = std::env::var("ALLREDUCE_REPORT_DIR") {
        let path = Path::new(&dir).join(format!("attempt-{attempt}-rank-{rank}.txt"));
        write_atomically(&path, &format!("{seen}\n{line}\n"))?;
    }
    if let Ok(dir) = std::env::var("ALLREDUCE_HANG_DIR") {
        if attempt.trim() == "1" {
            let path = Path::new(&dir).join(format!("rank-{rank}.pid"));
            write_atomically(&path, &format!("{}\n", std::process::id()))?;
            std::thread::sleep(HANG_FOR);
        }
    }
    Ok(if sum == world * (world - 1) / 2 { 0 } else { 1 })
}

fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Rank 0: gathers every other rank, answers the sum to each.
fn lead(world: u64, port: u16) -> Result<u64, String> {
    let listener = TcpListener::bind(("0.0.0.0", port))
        .map_err(|e| format!("rank 0 cannot listen on port {port}: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("listener: {e}"))?;
    let deadline = Instant::now() + GATHER_FOR;
    let mut peers: Vec<TcpStream> = Vec::new();
    let mut sum = 0u64;
    while (peers.len() as u64) < world - 1 {
        match listener.accept() {
            Ok((stream, _)) => {
                stream
                    .set_nonblocking(false)
                    .and_then(|()| stream.set_read_timeout(Some(IO_TIMEOUT)))
                    .map_err(|e| format!("peer socket: {e}"))?;
                let mut line = String::new();
                BufReader::new(&stream)
                    .read_line(&mut line)
                    .map_err(|e| format!("reading a peer's rank: {e}"))?;
                let r: u64 = line
                    .trim()
                    .parse()
                    .map_err(|_| format!("a peer sent '{}' for its rank", line.trim()))?;
                sum += r;
                peers.push(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err(format!(
                        "only {} of {} peers joined within {} s",
                        peers.len(),
                        world - 1,
                        GATHER_FOR.as_secs()
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    }
    for mut p in peers {
        p.write_all(format!("{sum}\n").as_bytes())
            .map_err(|e| format!("sending the sum: {e}"))?;
    }
    Ok(sum)
}

/// Other ranks: connect (retrying while rank 0 is not up yet), send the rank, read the sum.
fn follow(rank: u64, master: &str, port: u16) -> Result<u64, String> {
    let deadline = Instant::now() + CONNECT_FOR;
    let mut stream = loop {
        match TcpStream::connect((master, port)) {
            Ok(s) => break s,
            Err(e) if Instant::now() > deadline => {
                return Err(format!("cannot reach rank 0 at {master}:{port}: {e}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    stream
        .set_read_timeout(Some(GATHER_FOR))
        .map_err(|e| format!("socket: {e}"))?;
    stream
        .write_all(format!("{rank}\n").as_bytes())
        .map_err(|e| format!("sending the rank: {e}"))?;
    let mut line = String::new();
    BufReader::new(&stream)
        .read_line(&mut line)
        .map_err(|e| format!("reading the sum: {e}"))?;
    line.trim()
        .parse()
        .map_err(|_| format!("rank 0 sent '{}' for the sum", line.trim()))
}
