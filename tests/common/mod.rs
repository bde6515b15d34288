//! What the end-to-end tests share: the Nexmark views recomputed from
//! scratch (the reference `millpond job nexmark` is checked against).
#![allow(dead_code, unreachable_pub)]

pub mod server;

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// Rows (as JSON text) with their multiplicities.
pub type Rows = BTreeMap<String, i64>;

/// Counts equal rows.
pub fn counted(rows: impl IntoIterator<Item = Value>) -> Rows {
    let mut out = BTreeMap::new();
    for row in rows {
        *out.entry(row.to_string()).or_insert(0) += 1;
    }
    out
}

/// The four views of `millpond job nexmark`, computed from the bids
/// `(auction, bidder, price)` and the auctions' categories by id.
pub fn nexmark_views(bids: &[(u64, u64, u64)], categories: &BTreeMap<u64, u64>) -> BTreeMap<&'static str, Rows> {
    let mut per_auction: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    let mut per_bidder: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let mut per_category: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for &(auction, bidder, price) in bids {
        per_auction.entry(auction).or_default().push((price, bidder));
        per_bidder.entry(bidder).or_default().push(price);
        if let Some(category) = categories.get(&auction) {
            let entry = per_category.entry(*category).or_default();
            entry.0 += 1;
            entry.1 += price;
        }
    }
    let mut views = BTreeMap::new();
    views.insert(
        "bid_stats",
        counted(per_auction.iter().map(|(auction, bids)| {
            let prices = bids.iter().map(|b| b.0);
            json!({"auction": auction, "bids": bids.len(), "volume": prices.clone().sum::<u64>(), "top": prices.max()})
        })),
    );
    views.insert(
        "bidder_stats",
        counted(per_bidder.iter().map(|(bidder, prices)| {
            json!({"bidder": bidder, "bids": prices.len(), "low": prices.iter().min(), "high": prices.iter().max()})
        })),
    );
    views.insert(
        "category_stats",
        counted(
            per_category
                .iter()
                .map(|(category, (n, volume))| json!({"category": category, "bids": n, "volume": volume})),
        ),
    );
    views.insert(
        "top_bids",
        counted(per_auction.iter().flat_map(|(auction, bids)| {
            let mut sorted = bids.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            sorted.truncate(3);
            sorted.into_iter().map(move |(price, bidder)| json!({"auction": auction, "price": price, "bidder": bidder}))
        })),
    );
    views
}
