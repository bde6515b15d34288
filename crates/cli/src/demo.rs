//! `millpond demo`: the README's first command. Generates a Nexmark event
//! stream into the embedded log, runs the standard views over it (see
//! `job.rs`) until they have caught up, prints the live changes of one view
//! as its epochs commit, and ends with the views' contents.
//!
//! Run it again and it appends the next events of the same stream and the
//! job resumes from its last checkpoint.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use millpond_dataflow::{Event, Subscription, read_view};
use millpond_log::{Log, LogOptions};

use crate::job::{JobArgs, StateArg};

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// How many Nexmark events to append (persons, auctions and bids, 1:3:46).
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// Timely worker threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Checkpoint interval.
    #[arg(long, default_value_t = 250)]
    epoch_ms: u64,
}

/// Events already in the Nexmark topics (the next event number).
fn events_so_far(data_dir: &Path) -> Result<u64> {
    let log = Log::open(data_dir, LogOptions { background: false, ..LogOptions::default() })?;
    let mut total = 0;
    for topic in ["person", "auction", "bid"] {
        if log.topics().iter().any(|t| t == topic) {
            total += log.describe(topic)?.iter().map(|p| p.high_watermark).sum::<u64>();
        }
    }
    log.close()?;
    Ok(total)
}

pub(crate) fn run(data_dir: &Path, args: &DemoArgs) -> Result<()> {
    let start = events_so_far(data_dir)?;
    println!("1. generating Nexmark events {start}..{} into {}", start + args.events, data_dir.display());
    {
        let log = Log::open(data_dir, LogOptions::default())?;
        crate::generate::nexmark(&log, start, args.events, 0, None, 4)?;
        log.close()?;
    }

    println!("2. running the views bid_stats, bidder_stats, category_stats, top_bids ({} ms epochs)", args.epoch_ms);
    println!("   live changes of category_stats, one line per change, as each epoch commits:");
    let job_args = JobArgs {
        workers: args.workers,
        epoch_ms: args.epoch_ms,
        until_caught_up: true,
        state: StateArg::Rocksdb,
        no_checkpoints: false,
        test_commit_delay_ms: 0,
        on_retention_gap: crate::job::GapArg::Fail,
    };
    let started = Instant::now();
    let dir = data_dir.to_path_buf();
    let job =
        std::thread::spawn(move || crate::job::run_nexmark(&dir, &job_args, false, Arc::new(AtomicBool::new(false))));

    // Follow category_stats from its current contents (a snapshot) on.
    let mut subscription = None;
    let mut printed_epochs = 0;
    loop {
        let finished = job.is_finished();
        if subscription.is_none() {
            subscription = Subscription::open(data_dir, "category_stats", None, true).ok();
        }
        if let Some(subscription) = subscription.as_mut() {
            while let Some(event) = subscription.next_timeout(Duration::from_millis(20))? {
                match event {
                    Event::Change { epoch, diff, row } => {
                        println!("   epoch {epoch:>5} {diff:>+3} {row}");
                    }
                    Event::Progress { epoch, .. } => {
                        println!("   epoch {epoch:>5} complete");
                        printed_epochs += 1;
                    }
                }
            }
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
        if finished {
            break;
        }
    }
    let stats = job.join().expect("the job thread does not panic")?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "3. caught up: {} records in {seconds:.2} s ({:.0} records/s), {} dead letters, epochs {}..={} ({printed_epochs} shown)",
        stats.records,
        stats.records as f64 / seconds.max(1e-9),
        stats.dead_letters,
        stats.first_epoch,
        stats.committed_epoch
    );
    let mut bid_stats = read_view(data_dir, "bid_stats")?.rows;
    bid_stats.sort_by_key(|(row, _)| std::cmp::Reverse(row["volume"].as_i64().unwrap_or(0)));
    println!("   bid_stats has {} auctions; the top 3 by volume:", bid_stats.len());
    for (row, _) in bid_stats.iter().take(3) {
        println!("   {row}");
    }
    println!("next: millpond view list | millpond view read top_bids | millpond subscribe bid_stats --progress");
    Ok(())
}
