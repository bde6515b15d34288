//! `millpond bench dataflow`: the `bid_stats` view over generated Nexmark
//! bids, side by side with RocksDB state and 1 s checkpoints, the in-memory
//! backend, and checkpoints off; then the time for output to resume after a
//! `kill -9`. One worker, so events/s is per core.
//!
//! The bids are generated once into `DIR/input`; each run gets a fresh data
//! directory whose segment files are hard links to the input's (a run only
//! reads them), so every run starts from nothing and reads the same bytes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use millpond_dataflow::CheckpointMeta;
use millpond_log::{Log, LogOptions, Record, TopicConfig};
use millpond_nexmark::{Config, Event, Generator};

use crate::job::{JobArgs, StateArg};

#[derive(Debug, Args)]
pub(crate) struct DataflowBenchArgs {
    /// Bids to process.
    #[arg(long, default_value_t = 10_000_000)]
    bids: u64,
    /// Checkpoint interval.
    #[arg(long, default_value_t = 1000)]
    epoch_ms: u64,
    /// Where to put the input and the runs (default: DATA_DIR/bench-dataflow).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Skip the kill -9 recovery measurement.
    #[arg(long)]
    no_recovery: bool,
    /// Rounds over the three configurations (interleaved); the best time of
    /// each counts, so that noise and cache warm-up do not favour one.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
}

/// Reads every input file once, so the first run does not pay for the page cache.
pub(crate) fn warm_page_cache(input: &Path) -> Result<()> {
    let topic = input.join("topics").join("bid");
    for partition in fs::read_dir(&topic)? {
        let partition = partition?;
        if partition.file_type()?.is_dir() {
            for file in fs::read_dir(partition.path())? {
                std::io::copy(&mut fs::File::open(file?.path())?, &mut std::io::sink())?;
            }
        }
    }
    Ok(())
}

const PARTITIONS: u32 = 4;

/// Generates `bids` Nexmark bids into `dir` unless they are there already.
pub(crate) fn ensure_input(dir: &Path, bids: u64) -> Result<()> {
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() })?;
    let have: u64 = if log.topics().iter().any(|t| t == "bid") {
        log.describe("bid")?.iter().map(|p| p.high_watermark).sum()
    } else {
        log.create_topic("bid", TopicConfig { partitions: PARTITIONS, retention_ms: None, ..TopicConfig::default() })?;
        0
    };
    if have == bids {
        return log.close().map_err(Into::into);
    }
    if have != 0 {
        bail!("{} holds {have} bids, not {bids}: remove it or pass another --dir", dir.display());
    }
    let generator = Generator::new(Config::default());
    let mut progress = crate::progress::Progress::new("generating bids", Some(bids));
    let (mut written, mut event) = (0u64, 0u64);
    while written < bids {
        let mut records = Vec::with_capacity(10_000);
        while records.len() < 10_000 && written + (records.len() as u64) < bids {
            if let Event::Bid(bid) = generator.event(event) {
                let json = Event::Bid(bid.clone()).to_json();
                records.push(Record::new(
                    Some(bid.auction.to_string().as_bytes()),
                    Some(json.as_bytes()),
                    bid.date_time,
                ));
            }
            event += 1;
        }
        log.produce("bid", &records)?;
        written += records.len() as u64;
        progress.advance(records.len() as u64, records.len() as u64);
    }
    progress.finish();
    log.close()?;
    Ok(())
}

/// A fresh data directory whose `bid` topic shares the input's segment files.
fn fresh_run_dir(input: &Path, run: &Path) -> Result<()> {
    fresh_run_dir_with(input, run, &["bid"])
}

/// A fresh data directory holding `topics` of `input`: segment data (only
/// ever read) is hard-linked, indexes (which may be rewritten) copied.
pub(crate) fn fresh_run_dir_with(input: &Path, run: &Path, topics: &[&str]) -> Result<()> {
    if run.exists() {
        fs::remove_dir_all(run).with_context(|| format!("removing {}", run.display()))?;
    }
    for topic in topics {
        let source = input.join("topics").join(topic);
        let target = run.join("topics").join(topic);
        fs::create_dir_all(&target)?;
        fs::copy(source.join("meta.json"), target.join("meta.json"))?;
        for partition in fs::read_dir(&source)? {
            let partition = partition?;
            if !partition.file_type()?.is_dir() {
                continue;
            }
            let to = target.join(partition.file_name());
            fs::create_dir_all(&to)?;
            for file in fs::read_dir(partition.path())? {
                let file = file?;
                let name = file.file_name();
                if name.to_string_lossy().ends_with(".log") {
                    fs::hard_link(file.path(), to.join(&name))?;
                } else {
                    fs::copy(file.path(), to.join(&name))?;
                }
            }
        }
    }
    fs::write(run.join("clean-shutdown"), b"")?;
    Ok(())
}

fn job_args(epoch_ms: u64, state: StateArg, checkpoints: bool) -> JobArgs {
    JobArgs { state, no_checkpoints: !checkpoints, ..JobArgs::until_caught_up(1, epoch_ms) }
}

fn committed_epoch(dir: &Path) -> u64 {
    CheckpointMeta::read_published(dir).ok().flatten().map_or(0, |m| m.epoch)
}

/// Kills a running job mid-input and times how long the restarted job takes
/// to commit its next epoch. Returns (seconds to resume, epoch at the kill).
fn measure_recovery(input: &Path, run: &Path, epoch_ms: u64, bids: u64) -> Result<(f64, u64)> {
    fresh_run_dir(input, run)?;
    let exe = std::env::current_exe()?;
    let spawn = || {
        Command::new(&exe)
            .arg("--data-dir")
            .arg(run)
            .args(["job", "nexmark", "--bid-stats-only", "--epoch-ms", &epoch_ms.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    };
    let mut child = spawn()?;
    // Let it commit two epochs (the first of a run is short), then kill it
    // half way through the next.
    let deadline = Instant::now() + Duration::from_secs(120);
    while committed_epoch(run) < 2 {
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("the job did not commit two epochs within 120 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(epoch_ms / 2));
    child.kill()?;
    child.wait()?;
    let killed_at = committed_epoch(run);
    let read: u64 =
        CheckpointMeta::read_published(run)?.map_or(0, |m| m.sources.values().flat_map(|p| p.values()).sum());
    if read >= bids {
        bail!("the job had read all {bids} bids before the kill: use more --bids to measure recovery");
    }
    let started = Instant::now();
    let mut child = spawn()?;
    while committed_epoch(run) <= killed_at {
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            bail!("output did not resume within 120 s");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let seconds = started.elapsed().as_secs_f64();
    child.kill()?;
    child.wait()?;
    Ok((seconds, killed_at))
}

pub(crate) fn run(data_dir: &Path, args: &DataflowBenchArgs) -> Result<()> {
    let dir = args.dir.clone().unwrap_or_else(|| data_dir.join("bench-dataflow"));
    let input = dir.join("input");
    ensure_input(&input, args.bids)?;
    println!(
        "bid_stats over {} Nexmark bids, 1 worker, {} ms epochs, best of {} interleaved rounds",
        args.bids,
        args.epoch_ms,
        args.rounds.max(1)
    );
    println!("{:<44} {:>10} {:>16} {:>8}", "run", "seconds", "events/s/core", "ratio");
    let runs = [
        ("RocksDB state, checkpoints on (fsync)", StateArg::Rocksdb, true),
        ("in-memory state, checkpoints on (fsync)", StateArg::Memory, true),
        ("RocksDB state, checkpoints off (no fsync)", StateArg::Rocksdb, false),
    ];
    warm_page_cache(&input)?;
    let mut best = [f64::MAX; 3];
    for _round in 0..args.rounds.max(1) {
        for (index, (_, state, checkpoints)) in runs.iter().enumerate() {
            let run = dir.join("run");
            fresh_run_dir(&input, &run)?;
            let started = Instant::now();
            let stats = crate::job::run_nexmark(
                &run,
                &job_args(args.epoch_ms, *state, *checkpoints),
                true,
                Arc::new(AtomicBool::new(false)),
            )?;
            let seconds = started.elapsed().as_secs_f64();
            if stats.records != args.bids {
                bail!("the run read {} records, expected {}", stats.records, args.bids);
            }
            best[index] = best[index].min(seconds);
        }
    }
    let rates: Vec<f64> = best.iter().map(|seconds| args.bids as f64 / seconds).collect();
    for ((name, _, _), (seconds, rate)) in runs.iter().zip(best.iter().zip(&rates)) {
        println!("{name:<44} {seconds:>10.2} {rate:>16.0} {:>8.2}", rate / rates[0]);
    }
    println!("RocksDB / in-memory: {:.2}x (target >= 0.5x)", rates[0] / rates[1]);
    println!("checkpoint cost: {:.1} % (target <= 5 %)", (1.0 - rates[0] / rates[2]) * 100.0);
    if !args.no_recovery {
        let (seconds, epoch) = measure_recovery(&input, &dir.join("run"), args.epoch_ms, args.bids)?;
        println!(
            "recovery after kill -9 at epoch {epoch}: next epoch committed {seconds:.2} s after restart \
             (target <= 3 s + one {} ms interval)",
            args.epoch_ms
        );
    }
    fs::remove_dir_all(dir.join("run")).ok();
    Ok(())
}
