//! Helpers shared by the runtime tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::Path;

use millpond_dataflow::{Diff, OrderKey, SetAggregate, SetChanges, SetSummary};
use millpond_log::{Log, LogOptions, Record, TopicConfig};

/// Appends `(key, value)` records to `topic` (created with `partitions`).
pub fn produce(dir: &Path, topic: &str, partitions: u32, records: &[(Option<String>, Option<String>)]) {
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    if !log.topics().iter().any(|t| t == topic) {
        log.create_topic(topic, TopicConfig { partitions, retention_ms: None, ..TopicConfig::default() }).unwrap();
    }
    let records: Vec<Record> = records
        .iter()
        .map(|(k, v)| Record::new(k.as_deref().map(str::as_bytes), v.as_deref().map(str::as_bytes), 0))
        .collect();
    for chunk in records.chunks(1000) {
        log.produce(topic, chunk).unwrap();
    }
    log.close().unwrap();
}

/// Reads all records of a topic (values as strings).
pub fn read_topic(dir: &Path, topic: &str) -> Vec<String> {
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    let mut out = Vec::new();
    for info in log.describe(topic).unwrap() {
        let mut offset = info.low_watermark;
        while offset < info.high_watermark {
            let fetch = log.fetch(topic, info.partition, offset, 1 << 20).unwrap();
            out.extend(fetch.records().map(|r| String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned()));
            offset = fetch.next_offset();
        }
    }
    log.close().unwrap();
    out
}

/// A record of a dead-letter topic: the rejected value and the headers.
#[derive(Debug)]
pub struct Letter {
    pub key: Option<String>,
    pub value: Option<String>,
    pub headers: BTreeMap<String, String>,
}

impl Letter {
    /// The rejected record's (partition, offset), from its headers.
    pub fn source_offset(&self) -> (u32, u64) {
        (
            self.headers["millpond.source.partition"].parse().unwrap(),
            self.headers["millpond.source.offset"].parse().unwrap(),
        )
    }
}

/// The records of a dead-letter topic (none if it does not exist).
pub fn dead_letters(dir: &Path, topic: &str) -> Vec<Letter> {
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    let mut out = Vec::new();
    if log.topics().iter().any(|t| t == topic) {
        let mut offset = log.low_watermark(topic, 0).unwrap();
        while offset < log.high_watermark(topic, 0).unwrap() {
            let fetch = log.fetch(topic, 0, offset, 1 << 20).unwrap();
            for r in fetch.records() {
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                let headers = r.headers().into_iter().map(|h| (h.key, text(&h.value.unwrap_or_default()))).collect();
                out.push(Letter { key: r.key.map(text), value: r.value.map(text), headers });
            }
            offset = fetch.next_offset();
        }
    }
    log.close().unwrap();
    out
}

/// A view's rows as sorted (row JSON text, multiplicity) pairs.
pub fn view_rows(dir: &Path, view: &str) -> BTreeMap<String, i64> {
    millpond_dataflow::read_view(dir, view).unwrap().rows.into_iter().map(|(row, n)| (row.to_string(), n)).collect()
}

/// Rows the way a view stores them, from values computed in the test.
pub fn rows_of<T: serde::Serialize>(items: impl IntoIterator<Item = (T, i64)>) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (item, n) in items {
        *out.entry(serde_json::to_value(&item).unwrap().to_string()).or_insert(0) += n;
    }
    out.retain(|_, n| *n != 0);
    out
}

/// Appends `batches` to `topic` (created with `partitions` if missing), one
/// produce call per batch, so that a small `fetch_bytes_max` splits the
/// input over many fetches. Records are routed by key (unkeyed ones of one
/// call go to one partition). The topic is flushed on an interval, not per
/// append, to keep tests fast; `Log::close` syncs it.
pub fn produce_batches(dir: &Path, topic: &str, partitions: u32, batches: &[Vec<(Option<String>, Option<String>)>]) {
    let log = Log::open(dir, LogOptions { background: false, ..LogOptions::default() }).unwrap();
    if !log.topics().iter().any(|t| t == topic) {
        let config = TopicConfig {
            partitions,
            retention_ms: None,
            flush: millpond_log::FlushPolicy::Interval { interval_ms: 60_000, records: u64::MAX },
            ..TopicConfig::default()
        };
        log.create_topic(topic, config).unwrap();
    }
    for batch in batches.iter().filter(|b| !b.is_empty()) {
        let records: Vec<Record> = batch
            .iter()
            .map(|(k, v)| Record::new(k.as_deref().map(str::as_bytes), v.as_deref().map(str::as_bytes), 0))
            .collect();
        log.produce(topic, &records).unwrap();
    }
    log.close().unwrap();
}

/// The number of entries in a keyspace of the RocksDB state store.
pub fn state_entries(dir: &Path, keyspace: &str) -> usize {
    use millpond_dataflow::state::{RocksStore, StateStore};
    let store = RocksStore::open(dir.join("state")).unwrap();
    let space = store.keyspace(keyspace).unwrap();
    let mut count = 0;
    store
        .scan_prefix(space, b"", &mut |_, _| {
            count += 1;
            true
        })
        .unwrap();
    count
}

/// How many changelog records each epoch of `view` has, from their `epoch` headers.
pub fn changes_per_epoch(dir: &Path, view: &str) -> BTreeMap<u64, u64> {
    let topic = millpond_dataflow::changelog_topic(view);
    let mut reader = millpond_log::PartitionReader::new(dir, &topic, 0, 0).unwrap();
    let mut per_epoch = BTreeMap::new();
    loop {
        let records = reader.read(u64::MAX, 1 << 20).unwrap();
        if records.is_empty() {
            return per_epoch;
        }
        for r in records {
            let header = r.record.headers.iter().find(|h| h.key == "epoch").and_then(|h| h.value.clone()).unwrap();
            *per_epoch.entry(u64::from_be_bytes(header.try_into().unwrap())).or_default() += 1;
        }
    }
}

/// MIN, MAX and COUNT(DISTINCT) of a key's values, with their sets kept by
/// `aggregate_sets`: set 0 ascending (its first is the minimum), set 1
/// descending (its first is the maximum).
#[derive(Clone, Copy, Debug)]
pub struct Extremes;

impl SetAggregate<i64> for Extremes {
    type State = ();
    type Item = i64;
    type Output = (i64, i64, u64);
    fn sets(&self) -> usize {
        2
    }
    fn update(&self, _: &mut (), value: &i64, diff: Diff, changes: &mut SetChanges<i64>) {
        changes.add(0, value, |out| value.order_key(out), diff);
        changes.add(1, value, |out| std::cmp::Reverse(value).order_key(out), diff);
    }
    fn output(&self, _count: i64, _: &(), sets: &[SetSummary<i64>]) -> (i64, i64, u64) {
        let first = |set: &SetSummary<i64>| set.first.expect("a key with values has a first one");
        (first(&sets[0]), first(&sets[1]), sets[0].distinct)
    }
}
