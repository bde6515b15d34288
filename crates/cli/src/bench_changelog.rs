//! `millpond bench changelog`: what a view's changelog sink costs per
//! change (issue 11, point 4). Two jobs over the same generated bids, side
//! by side in one run:
//! - `all_bids`: every bid (auction, bidder, price, date_time) a row of a
//!   view, so every bid is one change appended to `view.all_bids`;
//! - the baseline: the same source, decode and map, with a filter that
//!   keeps nothing, so the sink sees no change.
//!
//! The difference of their times is the sink's: changes/s of the sink =
//! bids / (all_bids seconds − baseline seconds). Each configuration runs
//! in a fresh data directory whose input segments are hard links to the
//! generated ones; the best of `--rounds` interleaved rounds counts.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::{Result, bail};
use clap::Args;
use millpond_dataflow::{Job, RunStats, Runtime, json};
use serde::{Deserialize, Serialize};

use crate::job::JobArgs;

#[derive(Debug, Args)]
pub(crate) struct ChangelogBenchArgs {
    /// Bids to process (each one view change).
    #[arg(long, default_value_t = 10_000_000)]
    bids: u64,
    /// Worker counts to run with.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    workers: Vec<usize>,
    /// Checkpoint interval.
    #[arg(long, default_value_t = 1000)]
    epoch_ms: u64,
    /// Rounds over the configurations (interleaved); the best time counts.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Where to put the input and the runs (default: DATA_DIR/bench-changelog).
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
}

/// The row of `all_bids`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct BidRow {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time: i64,
}

#[derive(Clone, Debug, Deserialize)]
struct Bid {
    auction: u64,
    bidder: u64,
    price: u64,
    date_time: i64,
}

/// `all_bids`, or (`keep` false) the same pipeline with no change reaching the sink.
fn all_bids(job: &mut Job<'_>, keep: bool) {
    let rows = job
        .source("bid", json::<Bid>())
        .map(|b| BidRow { auction: b.auction, bidder: b.bidder, price: b.price, date_time: b.date_time })
        .filter(move |_| keep);
    job.materialize("all_bids", rows);
}

/// Runs one configuration in a fresh directory; its seconds.
fn run_one(input: &Path, run: &Path, workers: usize, keep: bool, args: &ChangelogBenchArgs) -> Result<f64> {
    crate::bench_dataflow::fresh_run_dir_with(input, run, &["bid"])?;
    let config =
        crate::job::config(run, &JobArgs::until_caught_up(workers, args.epoch_ms), Arc::new(AtomicBool::new(false)));
    let started = Instant::now();
    let stats: RunStats = Runtime::run(config, move |job| all_bids(job, keep))?;
    let seconds = started.elapsed().as_secs_f64();
    if stats.records != args.bids {
        bail!("the run read {} records, expected {}", stats.records, args.bids);
    }
    Ok(seconds)
}

pub(crate) fn run(data_dir: &Path, args: &ChangelogBenchArgs) -> Result<()> {
    let dir = args.dir.clone().unwrap_or_else(|| data_dir.join("bench-changelog"));
    let input = dir.join("input");
    crate::bench_dataflow::ensure_input(&input, args.bids)?;
    crate::bench_dataflow::warm_page_cache(&input)?;
    println!(
        "all_bids (every bid one view change) over {} Nexmark bids, RocksDB state, {} ms epochs, best of {} rounds",
        args.bids,
        args.epoch_ms,
        args.rounds.max(1)
    );
    println!(
        "{:>7} {:>14} {:>14} {:>18} {:>22}",
        "workers", "baseline s", "all_bids s", "changes/s (job)", "sink changes/s/core"
    );
    let run = dir.join("run");
    for &workers in &args.workers {
        let (mut base, mut all) = (f64::MAX, f64::MAX);
        for _round in 0..args.rounds.max(1) {
            base = base.min(run_one(&input, &run, workers, false, args)?);
            all = all.min(run_one(&input, &run, workers, true, args)?);
        }
        let bids = args.bids as f64;
        let sink = bids / (all - base).max(f64::EPSILON) / workers as f64;
        println!("{workers:>7} {base:>14.2} {all:>14.2} {:>18.0} {sink:>22.0}", bids / all);
    }
    std::fs::remove_dir_all(&run).ok();
    Ok(())
}
