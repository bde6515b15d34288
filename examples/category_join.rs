//! # Tutorial 2: a join of two topics, `category_stats`
//!
//! ```sh
//! millpond --data-dir /tmp/mp gen nexmark --events 1000000
//! cargo run --release --example category_join -- --data-dir /tmp/mp
//! millpond --data-dir /tmp/mp subscribe category_stats --progress
//! ```
//!
//! Bids name the auction they are for; auctions carry a category. The job
//! keys both topics by auction id, joins them (`join` keeps both sides in
//! state, so a bid that arrives before its auction still joins when the
//! auction comes), re-keys the pairs by category and aggregates. The view
//! has one row per category: the number of bids and their total price.
//!
//! Unlike tutorial 1 this example does not follow its view itself: use
//! `millpond view read` or `millpond subscribe` from another shell.

mod common;

use millpond_dataflow::{Count, Runtime, RuntimeConfig, Sum, json};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize)]
struct Bid {
    auction: u64,
    price: u64,
}

#[derive(Clone, Debug, Deserialize)]
struct Auction {
    id: u64,
    category: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct CategoryStats {
    category: u64,
    bids: i64,
    volume: i64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data_dir = common::data_dir_arg("category_join")?;
    let stats = Runtime::run(RuntimeConfig::new(&data_dir), |job| {
        let bids = job.source("bid", json::<Bid>()).map(|bid| (bid.auction, bid.price));
        let auctions = job.source("auction", json::<Auction>()).map(|auction| (auction.id, auction.category));
        let per_category = bids
            .join("bids_with_auctions", auctions)
            .map(|(_auction, (price, category))| (category, price))
            .aggregate("category_stats", (Count, Sum(|price: &u64| *price as i64)))
            .map(|(category, (bids, volume))| CategoryStats { category, bids, volume });
        job.materialize("category_stats", per_category);
    })?;
    println!("stopped after {} records", stats.records);
    Ok(())
}
