//! `millpond bench nexmark`: the Nexmark SQL queries (sql/nexmark/qN.sql)
//! and issue 11's state views (benches/state/*.sql) over generated inputs
//! of several sizes, with 1 and 2 workers, RocksDB state and checkpoints
//! every `--epoch-ms`.
//!
//! Each run is a child process, `millpond run FILE --until-caught-up`, in a
//! fresh data directory that shares the input's segment files, so that its
//! peak memory (the child's `VmHWM`, polled) and its state size (the bytes
//! under `DATA_DIR/state` once it stops) are its own. Per query and worker
//! count it prints events/s per core at each size (input events / seconds /
//! workers), the per-event cost ratio of the largest size to the smallest,
//! and the peak memory and state size of the largest. Where the machine has
//! Flink (`--flink`, `bench_flink`), the same query at the same
//! parallelism runs in Flink over the same input, and the table adds Flink's
//! events/s per core (its job time, start-up excluded) at each size and
//! Millpond's rate over Flink's at the largest. Nothing is asserted; the
//! table goes to docs/performance.md.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::bench_flink::{Flink, FlinkMode, FlinkRun};

/// How often a run's peak memory is sampled.
const MEMORY_POLL_MS: u64 = 50;

#[derive(Debug, Args)]
pub(crate) struct NexmarkBenchArgs {
    /// Input sizes in Nexmark events (persons, auctions and bids, 1:3:46).
    #[arg(long, value_delimiter = ',', default_values_t = [1_000_000u64, 10_000_000])]
    sizes: Vec<u64>,
    /// Worker counts to run each query with.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    workers: Vec<usize>,
    /// Checkpoint interval.
    #[arg(long, default_value_t = 1000)]
    epoch_ms: u64,
    /// Where the Nexmark query files are.
    #[arg(long, default_value = "sql/nexmark")]
    queries_dir: PathBuf,
    /// Which Nexmark queries (file stems, comma-separated); default: every qN.sql.
    #[arg(long, value_delimiter = ',')]
    queries: Vec<String>,
    /// More SQL files to run over the same input (their sources must read
    /// the Nexmark topics person, auction and bid).
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = [
            "benches/state/by_auction.sql".to_owned(),
            "benches/state/join_by_category.sql".to_owned(),
            "benches/state/by_bidder_auction.sql".to_owned(),
            "benches/state/three_views.sql".to_owned(),
        ]
    )]
    extra: Vec<String>,
    /// A run that takes longer is stopped and reported as such.
    #[arg(long, default_value_t = 1800)]
    timeout_s: u64,
    /// Where to keep the generated inputs and the runs (default: DATA_DIR/bench-nexmark).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Run each query in Flink too (benches/flink): auto = where the
    /// machine has java (and mvn, until the runner is built).
    #[arg(long, value_enum, default_value_t = FlinkMode::Auto)]
    flink: FlinkMode,
    /// Where the Flink runner and its query translations are.
    #[arg(long, default_value = "benches/flink")]
    flink_dir: PathBuf,
}

/// What one child run measured.
struct Measured {
    seconds: f64,
    peak_rss_bytes: u64,
    state_bytes: u64,
}

pub(crate) fn run(data_dir: &Path, args: &NexmarkBenchArgs) -> Result<()> {
    if args.sizes.is_empty() || args.workers.is_empty() {
        bail!("--sizes and --workers each need at least one value");
    }
    let dir = args.dir.clone().unwrap_or_else(|| data_dir.join("bench-nexmark"));
    let mut sizes = args.sizes.clone();
    sizes.sort_unstable();
    for events in &sizes {
        crate::bench_sql::ensure_input(&dir.join(format!("input-{events}")), *events)?;
    }
    let files = query_files(args)?;
    let (small, large) = (sizes[0], sizes[sizes.len() - 1]);
    let flink = Flink::detect(args.flink, &args.flink_dir, crate::bench_flink::NEXMARK_JAR, args.timeout_s)?;
    println!(
        "Nexmark over {sizes:?} events, RocksDB state, {} ms checkpoints; events/s/core = input events / seconds / workers{}",
        args.epoch_ms,
        if flink.is_some() { "; Flink: the same query and input, parallelism = workers, its job time" } else { "" }
    );
    let mut header =
        sizes.iter().map(|s| format!(" {:>16}", format!("{} ev/s/core", millions(*s)))).collect::<String>();
    header += &format!(" {:>18} {:>12} {:>12}", "cost large/small", "peak RSS", "state");
    if flink.is_some() {
        header += &sizes.iter().map(|s| format!(" {:>16}", format!("Flink {}", millions(*s)))).collect::<String>();
        header += &format!(" {:>10}", "x Flink");
    }
    println!("{:<20} {:>7}{header}", "query", "workers");
    for file in &files {
        let name = file.file_stem().unwrap_or_default().to_string_lossy().into_owned();
        for workers in &args.workers {
            let mut rates = Vec::new();
            let mut last: Option<Measured> = None;
            for events in &sizes {
                let input = dir.join(format!("input-{events}"));
                let measured = run_one(&input, &dir.join("run"), file, *workers, args)?;
                rates.push(measured.as_ref().map(|m| *events as f64 / m.seconds / *workers as f64).ok_or("timeout"));
                last = measured;
            }
            // Per-event cost is the inverse of the rate.
            let ratio = match (rates[0], rates[rates.len() - 1]) {
                (Ok(a), Ok(b)) if small != large => format!("{:.2}", a / b),
                _ => "-".to_owned(),
            };
            let (rss, state) =
                last.map_or(("-".to_owned(), "-".to_owned()), |m| (mib(m.peak_rss_bytes), mib(m.state_bytes)));
            let mut row = format!("{name:<20} {workers:>7}{} {ratio:>18} {rss:>12} {state:>12}", rate_cells(&rates));
            if let Some(flink) = &flink {
                row += &flink_cells(flink, &dir, &sizes, &name, *workers, rates[rates.len() - 1].ok())?;
            }
            println!("{row}");
        }
    }
    fs::remove_dir_all(dir.join("run")).ok();
    Ok(())
}

/// A cell per size: events/s per core, or why there is none.
fn rate_cells(rates: &[Result<f64, &str>]) -> String {
    rates
        .iter()
        .map(|r| match r {
            Ok(rate) => format!(" {rate:>16.0}"),
            Err(why) => format!(" {why:>16}"),
        })
        .collect()
}

/// Flink's cells for one query and parallelism: its events/s per core at
/// each size, then Millpond's rate at the largest size over Flink's.
fn flink_cells(
    flink: &Flink,
    dir: &Path,
    sizes: &[u64],
    name: &str,
    workers: usize,
    millpond_largest: Option<f64>,
) -> Result<String> {
    if !flink.has_query(name) {
        return Ok(
            sizes.iter().map(|_| format!(" {:>16}", "no translation")).collect::<String>() + &format!(" {:>10}", "-")
        );
    }
    let mut runs = Vec::new();
    for events in sizes {
        runs.push(match flink.run(&dir.join(format!("input-{events}")), name, workers)? {
            FlinkRun::Done { job_seconds } => Ok(*events as f64 / job_seconds / workers as f64),
            FlinkRun::Timeout => Err("timeout"),
            FlinkRun::Failed => Err("failed"),
        });
    }
    let times = match (millpond_largest, runs[runs.len() - 1]) {
        (Some(ours), Ok(theirs)) => format!("{:.2}", ours / theirs),
        _ => "-".to_owned(),
    };
    Ok(format!("{} {times:>10}", rate_cells(&runs)))
}

/// The Nexmark query files asked for, in query order, then the extra files.
fn query_files(args: &NexmarkBenchArgs) -> Result<Vec<PathBuf>> {
    let mut files = crate::bench_sql::nexmark_queries(&args.queries_dir, &args.queries)?;
    for extra in args.extra.iter().filter(|e| !e.is_empty()) {
        let path = PathBuf::from(extra);
        if !path.is_file() {
            bail!("--extra {extra}: no such file");
        }
        files.push(path);
    }
    Ok(files)
}

/// Runs `file` as a child process over a fresh copy of `input`; `None` when
/// it ran out of time.
fn run_one(input: &Path, run: &Path, file: &Path, workers: usize, args: &NexmarkBenchArgs) -> Result<Option<Measured>> {
    crate::bench_sql::fresh_run_dir(input, run)?;
    let exe = std::env::current_exe().context("locating the millpond binary")?;
    let started = Instant::now();
    let mut child = Command::new(exe)
        .arg("--data-dir")
        .arg(run)
        .arg("run")
        .arg(file)
        .args(["--until-caught-up", "--workers", &workers.to_string(), "--epoch-ms", &args.epoch_ms.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting millpond run")?;
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_rss_bytes = 0;
    let timeout = Duration::from_secs(args.timeout_s);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > timeout {
            child.kill().ok();
            child.wait().ok();
            return Ok(None);
        }
        peak_rss_bytes = peak_rss_bytes.max(vm_hwm_bytes(&status_path).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(MEMORY_POLL_MS));
    };
    let seconds = started.elapsed().as_secs_f64();
    let output = child.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !status.success() {
        bail!(
            "{} with {workers} worker(s) failed: {}{}",
            file.display(),
            stdout,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(Some(Measured { seconds, peak_rss_bytes, state_bytes: dir_bytes(&run.join("state")) }))
}

/// A process's peak resident memory, from its `/proc/PID/status`.
fn vm_hwm_bytes(status_path: &str) -> Option<u64> {
    let status = fs::read_to_string(status_path).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The bytes of the files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1 << 20) as f64)
}

fn millions(events: u64) -> String {
    if events.is_multiple_of(1_000_000) { format!("{}M", events / 1_000_000) } else { events.to_string() }
}
