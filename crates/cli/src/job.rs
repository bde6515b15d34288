//! `millpond job nexmark`: the standard views over the Nexmark topics that
//! `millpond gen nexmark` writes, run by the dataflow runtime until
//! interrupted (or, with `--until-caught-up`, until it has read what the
//! topics held at the start). Killed at any moment, it resumes from its last
//! checkpoint when started again.
//!
//! Views:
//! - `bid_stats`: per auction, the number of bids, their total and the top price;
//! - `bidder_stats`: per bidder, the number of bids and the lowest and highest price;
//! - `category_stats`: bids joined with auctions, per category: bids and volume;
//! - `top_bids`: the 3 highest bids of each auction.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use millpond_dataflow::{
    Count, Job, Max, Min, Multiplicity, RetentionGapPolicy, RunStats, Runtime, RuntimeConfig, StateBackend, Sum, json,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Subcommand)]
pub(crate) enum JobCommand {
    /// Maintain the standard views over the Nexmark topics.
    Nexmark(NexmarkArgs),
}

#[derive(Debug, Clone, Args)]
pub(crate) struct NexmarkArgs {
    #[command(flatten)]
    pub(crate) job: JobArgs,
    /// Only `bid_stats` (the benchmark's query).
    #[arg(long)]
    pub(crate) bid_stats_only: bool,
}

/// `--state-cache-mib`'s default: the runtime's.
pub(crate) const STATE_CACHE_MIB_DEFAULT: u64 = (millpond_dataflow::state::STATE_CACHE_BYTES_DEFAULT >> 20) as u64;

#[derive(Debug, Clone, Args)]
pub(crate) struct JobArgs {
    /// Timely worker threads.
    #[arg(long, default_value_t = 1)]
    pub(crate) workers: usize,
    /// Checkpoint interval (the epoch length).
    #[arg(long, default_value_t = 1000)]
    pub(crate) epoch_ms: u64,
    /// Records a source reads in one epoch (per worker) before it ends the
    /// epoch early: a backlog is read in epochs of at most this many.
    #[arg(long, default_value_t = millpond_dataflow::EPOCH_RECORDS_MAX_DEFAULT, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) epoch_records_max: u64,
    /// Stop once everything the topics held at the start is processed.
    #[arg(long)]
    pub(crate) until_caught_up: bool,
    /// Where operator state lives.
    #[arg(long, value_enum, default_value_t = StateArg::Rocksdb)]
    pub(crate) state: StateArg,
    /// The cap of RocksDB's block cache (data, index and filter blocks), in MiB.
    #[arg(long, default_value_t = STATE_CACHE_MIB_DEFAULT, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub(crate) state_cache_mib: u64,
    /// Commit without fsync (for measuring what checkpoints cost; not crash-safe).
    #[arg(long)]
    pub(crate) no_checkpoints: bool,
    /// Crash tests only: pause between writing an epoch's output and
    /// committing it, so that kills land in that window.
    #[arg(long, hide = true, default_value_t = 0)]
    pub(crate) test_commit_delay_ms: u64,
    /// When retention deleted records a resuming reader had not read: stop
    /// with an error (fail), or skip them and report each gap (skip).
    #[arg(long, value_enum, default_value_t = GapArg::Fail)]
    pub(crate) on_retention_gap: GapArg,
}

impl JobArgs {
    /// A run of `workers` workers with RocksDB state and checkpoints that
    /// stops once caught up (the benches' and the demo's).
    pub(crate) fn until_caught_up(workers: usize, epoch_ms: u64) -> JobArgs {
        JobArgs {
            workers,
            epoch_ms,
            epoch_records_max: millpond_dataflow::EPOCH_RECORDS_MAX_DEFAULT,
            until_caught_up: true,
            state: StateArg::Rocksdb,
            state_cache_mib: STATE_CACHE_MIB_DEFAULT,
            no_checkpoints: false,
            test_commit_delay_ms: 0,
            on_retention_gap: GapArg::Fail,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum GapArg {
    Fail,
    Skip,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum StateArg {
    /// RocksDB under DATA_DIR/state (survives restarts).
    Rocksdb,
    /// Memory only: every run starts over from the retained input.
    Memory,
}

/// The fields of a bid that the views use.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Bid {
    pub(crate) auction: u64,
    pub(crate) bidder: u64,
    pub(crate) price: u64,
}

/// The fields of an auction that the views use.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Auction {
    pub(crate) id: u64,
    pub(crate) category: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct BidStats {
    pub(crate) auction: u64,
    pub(crate) bids: i64,
    pub(crate) volume: i64,
    pub(crate) top: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct BidderStats {
    pub(crate) bidder: u64,
    pub(crate) bids: i64,
    pub(crate) low: Option<u64>,
    pub(crate) high: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct CategoryStats {
    pub(crate) category: u64,
    pub(crate) bids: i64,
    pub(crate) volume: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct TopBid {
    pub(crate) auction: u64,
    pub(crate) price: u64,
    pub(crate) bidder: u64,
}

/// Declares the Nexmark views on one worker. The three aggregates' rows
/// carry their keys (one row per key): unique by construction, so their
/// indexes keep no entry per row (docs/state.md).
pub(crate) fn nexmark(job: &mut Job<'_>, bid_stats_only: bool) {
    let bids = job.source("bid", json::<Bid>());
    let stats = bids
        .clone()
        .map(|b| (b.auction, b.price))
        .aggregate("bid_stats", (Count, Sum(|p: &u64| *p as i64), Max(|p: &u64| *p)))
        .map(|(auction, (bids, volume, top))| BidStats { auction, bids, volume, top });
    job.materialize_view("bid_stats", "", Multiplicity::Unique, stats);
    if bid_stats_only {
        return;
    }
    let bidders = bids
        .clone()
        .map(|b| (b.bidder, b.price))
        .aggregate("bidder_stats", (Count, Min(|p: &u64| *p), Max(|p: &u64| *p)))
        .map(|(bidder, (bids, low, high))| BidderStats { bidder, bids, low, high });
    job.materialize_view("bidder_stats", "", Multiplicity::Unique, bidders);

    let auctions = job.source("auction", json::<Auction>()).map(|a| (a.id, a.category));
    let categories = bids
        .clone()
        .map(|b| (b.auction, b.price))
        .join("bids_by_auction", auctions)
        .map(|(_auction, (price, category))| (category, price))
        .aggregate("category_stats", (Count, Sum(|p: &u64| *p as i64)))
        .map(|(category, (bids, volume))| CategoryStats { category, bids, volume });
    job.materialize_view("category_stats", "", Multiplicity::Unique, categories);

    let top = bids
        .map(|b| (b.auction, (b.price, b.bidder)))
        .top_k("top_bids", 3)
        .map(|(auction, (price, bidder))| TopBid { auction, price, bidder });
    job.materialize("top_bids", top);
}

pub(crate) fn config(data_dir: &Path, args: &JobArgs, stop: Arc<AtomicBool>) -> RuntimeConfig {
    let mut config = RuntimeConfig::new(data_dir)
        .workers(args.workers)
        .epoch_interval_ms(args.epoch_ms)
        .epoch_records_max(args.epoch_records_max)
        .state(match args.state {
            StateArg::Rocksdb => StateBackend::RocksDb,
            StateArg::Memory => StateBackend::Memory,
        })
        .state_cache_bytes((args.state_cache_mib << 20) as usize)
        .checkpoints(!args.no_checkpoints)
        .stop_when_caught_up(args.until_caught_up)
        .on_retention_gap(match args.on_retention_gap {
            GapArg::Fail => RetentionGapPolicy::Fail,
            GapArg::Skip => RetentionGapPolicy::Skip,
        });
    config.stop = stop;
    config.commit_delay_ms = args.test_commit_delay_ms;
    config
}

pub(crate) fn run_nexmark(
    data_dir: &Path,
    args: &JobArgs,
    bid_stats_only: bool,
    stop: Arc<AtomicBool>,
) -> Result<RunStats> {
    Ok(Runtime::run(config(data_dir, args, stop), move |job| nexmark(job, bid_stats_only))?)
}

pub(crate) fn run(data_dir: &Path, command: JobCommand) -> Result<()> {
    match command {
        JobCommand::Nexmark(args) => {
            let stats = run_nexmark(data_dir, &args.job, args.bid_stats_only, crate::signals::stop_flag()?)?;
            report(&stats);
            Ok(())
        }
    }
}

/// Prints what a finished run did, on stderr: gaps first, so they are seen.
pub(crate) fn report(stats: &RunStats) {
    for gap in &stats.retention_gaps {
        eprintln!(
            "warning: reader '{}' skipped {}/{} offsets {}..{} ({} records deleted by retention before it read them)",
            gap.reader,
            gap.topic,
            gap.partition,
            gap.from,
            gap.to,
            gap.to - gap.from
        );
    }
    let epochs = if stats.committed_epoch >= stats.first_epoch {
        format!("epochs {}..={} committed", stats.first_epoch, stats.committed_epoch)
    } else {
        format!("nothing new to commit (last committed epoch {})", stats.committed_epoch)
    };
    eprintln!(
        "read {} records ({} dead letters, {} offsets skipped); {epochs}",
        stats.records, stats.dead_letters, stats.skipped_offsets
    );
    if stats.closed_window_drops > 0 {
        eprintln!(
            "warning: {} updates fell in windows a watermark had closed already and were dropped (records of a \
             partition first read after the watermark passed their times; docs/sql.md, \"Event time and watermarks\")",
            stats.closed_window_drops
        );
    }
    let reads = stats.state_reads;
    eprintln!(
        "state reads: {} point reads, {} range entries, {} bytes of values, {} keys scanned into filters",
        reads.gets, reads.entries, reads.value_bytes, reads.filter_keys
    );
}
