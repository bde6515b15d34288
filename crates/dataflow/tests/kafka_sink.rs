//! The transactional Kafka sink against a real Apache Kafka broker: a
//! read_committed consumer of the sink's topic accumulates exactly the
//! view (each change once, each epoch whole) across sink restarts, the
//! progress topic names the last epoch shipped, and a second instance of
//! the sink fences the first.
mod common;
#[path = "../../../tests/common/kafka_broker.rs"]
mod kafka_broker;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kafka_broker::KafkaBroker;
use millpond_dataflow::{KafkaSink, Runtime, RuntimeConfig, Sum, json};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
struct Ev {
    k: u64,
    v: i64,
}

fn run_job(dir: &std::path::Path) {
    let config = RuntimeConfig::new(dir).epoch_interval_ms(20).fetch_bytes_max(4096).stop_when_caught_up(true);
    Runtime::run(config, |job| {
        let sums = job.source("ev", json::<Ev>()).map(|e| (e.k, e.v)).aggregate("sums", Sum(|v: &i64| *v));
        job.materialize("sums", sums);
    })
    .unwrap();
}

fn events(range: std::ops::Range<i64>) -> Vec<(Option<String>, Option<String>)> {
    range.map(|i| (Some(format!("{i}")), Some(format!(r#"{{"k":{},"v":{i}}}"#, i % 5)))).collect()
}

/// Everything a read_committed consumer reads from `topic`: the values.
fn read_committed(bootstrap: &str, topic: &str) -> Vec<serde_json::Value> {
    read_keyed(bootstrap, topic).into_iter().filter_map(|(_, value)| value).collect()
}

/// The rows the changes add up to; each (epoch, row) change at most once.
fn accumulate(changes: &[serde_json::Value]) -> BTreeMap<String, i64> {
    let mut rows = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for change in changes {
        let row = change["row"].to_string();
        assert!(seen.insert((change["epoch"].as_u64().unwrap(), row.clone())), "a change twice: {change}");
        *rows.entry(row).or_insert(0) += change["diff"].as_i64().unwrap();
    }
    rows.retain(|_, n| *n != 0);
    rows
}

/// Runs `sink` until the topic holds the view, then stops it.
fn ship(sink: &KafkaSink, dir: &std::path::Path, bootstrap: &str) -> millpond_dataflow::SinkStats {
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let (sink, dir, stop) = (sink.clone(), dir.to_owned(), stop.clone());
        std::thread::spawn(move || sink.run(&dir, &stop))
    };
    let view = common::view_rows(dir, "sums");
    let deadline = Instant::now() + Duration::from_secs(60);
    while accumulate(&read_committed(bootstrap, "out")) != view {
        assert!(Instant::now() < deadline, "the sink never shipped the view");
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap().unwrap()
}

#[test]
fn a_kafka_sink_ships_each_committed_epoch_once_across_restarts_and_fences_a_zombie() {
    let broker = KafkaBroker::start();
    broker.create_topic("out", 1);
    let dir = tempfile::tempdir().unwrap();
    common::produce_batches(dir.path(), "ev", 2, &events(0..200).chunks(20).map(<[_]>::to_vec).collect::<Vec<_>>());
    run_job(dir.path());
    let sink = KafkaSink {
        name: "sums-out".into(),
        view: "sums".into(),
        brokers: broker.bootstrap.clone(),
        topic: "out".into(),
        progress_topic: millpond_dataflow::kafka_sink::PROGRESS_TOPIC_DEFAULT.into(),
        properties: Vec::new(),
        envelope: millpond_dataflow::Envelope::Changes,
    };
    let first = ship(&sink, dir.path(), &broker.bootstrap);
    assert!(first.transactions >= 1, "{first:?}");
    // More epochs: the sink resumes after the last epoch Kafka holds.
    common::produce_batches(dir.path(), "ev", 2, &events(200..500).chunks(20).map(<[_]>::to_vec).collect::<Vec<_>>());
    run_job(dir.path());
    let second = ship(&sink, dir.path(), &broker.bootstrap);
    assert!(second.transactions >= 1 && second.last_epoch > first.last_epoch, "{first:?} then {second:?}");
    let progress = read_committed(&broker.bootstrap, millpond_dataflow::kafka_sink::PROGRESS_TOPIC_DEFAULT);
    let last = progress.last().unwrap();
    assert_eq!((last["sink"].as_str(), last["epoch"].as_u64()), (Some("sums-out"), second.last_epoch));
    assert_eq!(progress.len() as u64, first.transactions + second.transactions, "one progress record per transaction");
    // Nothing new: a third run ships nothing.
    let third = ship(&sink, dir.path(), &broker.bootstrap);
    assert_eq!(third.transactions, 0, "{third:?}");

    // A zombie: an instance started before another of the same sink is
    // fenced by it, and stops with an error at its next transaction.
    let zombie_stop = Arc::new(AtomicBool::new(false));
    let zombie = {
        let (sink, dir, stop) = (sink.clone(), dir.path().to_owned(), zombie_stop.clone());
        std::thread::spawn(move || sink.run(&dir, &stop))
    };
    std::thread::sleep(Duration::from_secs(3));
    let live_stop = Arc::new(AtomicBool::new(false));
    let live = {
        let (sink, dir, stop) = (sink.clone(), dir.path().to_owned(), live_stop.clone());
        std::thread::spawn(move || sink.run(&dir, &stop))
    };
    std::thread::sleep(Duration::from_secs(3));
    common::produce_batches(dir.path(), "ev", 2, &events(500..600).chunks(20).map(<[_]>::to_vec).collect::<Vec<_>>());
    run_job(dir.path());
    let view = common::view_rows(dir.path(), "sums");
    let deadline = Instant::now() + Duration::from_secs(60);
    while accumulate(&read_committed(&broker.bootstrap, "out")) != view {
        assert!(Instant::now() < deadline, "the live instance never shipped the view");
        std::thread::sleep(Duration::from_millis(200));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while !zombie.is_finished() {
        assert!(Instant::now() < deadline, "the zombie was never fenced");
        std::thread::sleep(Duration::from_millis(100));
    }
    let fenced = zombie.join().unwrap().unwrap_err().to_string();
    assert!(fenced.contains("fenced"), "{fenced}");
    zombie_stop.store(true, Ordering::Relaxed);
    live_stop.store(true, Ordering::Relaxed);
    live.join().unwrap().unwrap();
}

/// A row of the keyed view, as an object (the envelopes key by column name).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
struct Total {
    k: u64,
    total: i64,
}

fn run_keyed_job(dir: &std::path::Path) {
    let config = RuntimeConfig::new(dir).epoch_interval_ms(20).fetch_bytes_max(4096).stop_when_caught_up(true);
    Runtime::run(config, |job| {
        let totals = job
            .source("ev", json::<Ev>())
            .map(|e| (e.k, e.v))
            .aggregate("totals", Sum(|v: &i64| *v))
            .map(|(k, total)| Total { k, total });
        job.materialize("totals", totals);
    })
    .unwrap();
}

/// Every record of `topic` as (key, value or tombstone), read_committed.
fn read_keyed(bootstrap: &str, topic: &str) -> Vec<(String, Option<serde_json::Value>)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "check")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(topic, 0, Offset::Beginning).unwrap();
    consumer.assign(&list).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => out.push((
                String::from_utf8(m.key().unwrap().to_vec()).unwrap(),
                m.payload().map(|p| serde_json::from_slice(p).unwrap()),
            )),
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => return out,
            _ => {}
        }
    }
    panic!("{topic} was not read to its end");
}

#[test]
fn upsert_and_debezium_envelopes_key_each_row_and_add_up_to_the_view() {
    let broker = KafkaBroker::start();
    broker.create_topic("upserts", 1);
    broker.create_topic("cdc", 1);
    let dir = tempfile::tempdir().unwrap();
    let sink = |name: &str, envelope| KafkaSink {
        name: name.into(),
        view: "totals".into(),
        brokers: broker.bootstrap.clone(),
        topic: name.into(),
        progress_topic: millpond_dataflow::kafka_sink::PROGRESS_TOPIC_DEFAULT.into(),
        properties: Vec::new(),
        envelope,
    };
    let key = vec!["k".to_owned()];
    let upserts = sink("upserts", millpond_dataflow::Envelope::Upsert { key: key.clone() });
    let cdc = sink("cdc", millpond_dataflow::Envelope::Debezium { key });
    for round in 0..2 {
        let range = if round == 0 { 0..100 } else { 100..250 };
        common::produce_batches(dir.path(), "ev", 2, &events(range).chunks(20).map(<[_]>::to_vec).collect::<Vec<_>>());
        run_keyed_job(dir.path());
        let view: BTreeMap<String, Total> = millpond_dataflow::read_view(dir.path(), "totals")
            .unwrap()
            .rows
            .into_iter()
            .map(|(row, _)| {
                let row: Total = serde_json::from_value(row).unwrap();
                (format!(r#"{{"k":{}}}"#, row.k), row)
            })
            .collect();
        for sink in [&upserts, &cdc] {
            let stop = Arc::new(AtomicBool::new(false));
            let thread = {
                let (sink, dir, stop) = (sink.clone(), dir.path().to_owned(), stop.clone());
                std::thread::spawn(move || sink.run(&dir, &stop))
            };
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                // The latest value per key: the row (upsert) or the "after" image (Debezium).
                let mut latest: BTreeMap<String, Total> = BTreeMap::new();
                for (key, value) in read_keyed(&broker.bootstrap, &sink.topic) {
                    let row = match (&sink.envelope, value) {
                        (millpond_dataflow::Envelope::Debezium { .. }, Some(v)) => Some(v["after"].clone()),
                        (_, value) => value,
                    };
                    match row.filter(|r| !r.is_null()) {
                        Some(row) => drop(latest.insert(key, serde_json::from_value(row).unwrap())),
                        None => drop(latest.remove(&key)),
                    }
                }
                if latest == view {
                    break;
                }
                assert!(Instant::now() < deadline, "{} never added up to the view: {latest:?}", sink.name);
                std::thread::sleep(Duration::from_millis(200));
            }
            stop.store(true, Ordering::Relaxed);
            thread.join().unwrap().unwrap();
        }
    }
    // Debezium: each key's first record creates it, later ones update it.
    let mut seen = BTreeSet::new();
    for (key, value) in read_keyed(&broker.bootstrap, "cdc") {
        let op = value.unwrap()["op"].as_str().unwrap().to_owned();
        assert_eq!(op, if seen.insert(key) { "c" } else { "u" });
    }
}
