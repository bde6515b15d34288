//! # Tutorial 3: top-k per key, `top_bids`
//!
//! ```sh
//! millpond --data-dir /tmp/mp gen nexmark --events 1000000
//! cargo run --release --example top_bids -- --data-dir /tmp/mp
//! millpond --data-dir /tmp/mp view read top_bids | head
//! ```
//!
//! `top_k(name, k)` keeps the k greatest values of each key, by the value's
//! own order. Here the value is `(price, bidder)`, so the view holds the 3
//! highest bids of every auction, ties broken by bidder. Its input is a
//! source's records, which are never retracted (`Collection::is_monotonic`),
//! so the operator keeps only each auction's first 3 bids in state; over an
//! input that may retract it would keep every bid, so that a retracted
//! first one brings the fourth-highest back. Wrap a value in
//! `std::cmp::Reverse` to keep the k least instead.

mod common;

use millpond_dataflow::{Runtime, RuntimeConfig, json};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize)]
struct Bid {
    auction: u64,
    bidder: u64,
    price: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct TopBid {
    auction: u64,
    price: u64,
    bidder: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data_dir = common::data_dir_arg("top_bids")?;
    let stats = Runtime::run(RuntimeConfig::new(&data_dir), |job| {
        let top = job
            .source("bid", json::<Bid>())
            .map(|bid| (bid.auction, (bid.price, bid.bidder)))
            .top_k("top_bids", 3)
            .map(|(auction, (price, bidder))| TopBid { auction, price, bidder });
        job.materialize("top_bids", top);
    })?;
    println!("stopped after {} records", stats.records);
    Ok(())
}
