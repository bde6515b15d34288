//! # Tutorial 1: `bid_stats`, an aggregate view over the Nexmark bids
//!
//! ```sh
//! millpond --data-dir /tmp/mp gen nexmark --events 1000000     # the input topics
//! cargo run --release --example bid_stats -- --data-dir /tmp/mp
//! millpond --data-dir /tmp/mp view read bid_stats | head         # from another shell, any time
//! ```
//!
//! The job tails the `bid` topic, decodes each record's JSON value into a
//! `Bid`, keys bids by auction and keeps, per auction, the number of bids,
//! their total price and the top price, in RocksDB (`DATA_DIR/state`).
//! Every second (one epoch) the changes of the view are appended to the
//! changelog topic `view.bid_stats` and committed with the source offsets
//! in one checkpoint. It runs until interrupted; killed at any moment, it
//! resumes from its last checkpoint, and the view still counts every bid
//! exactly once.
//!
//! While it runs, this example follows its own view the way any process
//! can: a `Subscription` reads the committed changelog and yields a
//! snapshot, then changes and progress marks.

use std::time::Duration;

mod common;

use millpond_dataflow::{Count, Event, Max, Runtime, RuntimeConfig, Subscription, Sum, json};
use serde::{Deserialize, Serialize};

/// The fields of a bid this view needs (the JSON has more; they are ignored).
#[derive(Clone, Debug, Deserialize)]
struct Bid {
    auction: u64,
    price: u64,
}

/// One row of the view.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct BidStats {
    auction: u64,
    bids: i64,
    volume: i64,
    top: Option<u64>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data_dir = common::data_dir_arg("bid_stats")?;
    let config = RuntimeConfig::new(&data_dir).epoch_interval_ms(1000);
    // The job runs on its own threads; `build` is called once per worker.
    let job = std::thread::spawn(move || {
        Runtime::run(config, |job| {
            let bids = job.source("bid", json::<Bid>());
            let stats = bids
                .map(|bid| (bid.auction, bid.price))
                .aggregate("bid_stats", (Count, Sum(|price: &u64| *price as i64), Max(|price: &u64| *price)))
                .map(|(auction, (bids, volume, top))| BidStats { auction, bids, volume, top });
            job.materialize("bid_stats", stats);
        })
    });

    // Follow the view once its first checkpoint is committed.
    let mut subscription = loop {
        match Subscription::open(&data_dir, "bid_stats", None, true) {
            Ok(subscription) => break subscription,
            Err(millpond_dataflow::Error::UnknownView(_)) if !job.is_finished() => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(e) => return Err(e.into()),
        }
    };
    let (mut changes, mut rows) = (0u64, 0i64);
    while !job.is_finished() {
        match subscription.next_timeout(Duration::from_millis(500))? {
            Some(Event::Change { diff, .. }) => {
                changes += 1;
                rows += diff;
            }
            Some(Event::Progress { epoch, .. }) => {
                println!("epoch {epoch}: {changes} changes, {rows} auctions in bid_stats");
                changes = 0;
            }
            None => {}
        }
    }
    job.join().expect("the job thread does not panic")?;
    Ok(())
}
