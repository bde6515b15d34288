//! A SQL view over a topic of a real Apache Kafka broker (`CREATE SOURCE …
//! FROM KAFKA`), exactly once: while a producer writes keyed JSON into the
//! topic (idempotent, so a broker restart adds no duplicate), `millpond
//! serve` is killed with SIGKILL 20 times at random moments and the Kafka
//! broker is killed and restarted twice; at the end the view equals a
//! from-scratch recomputation over everything the topic holds.
//!
//! `MILLPOND_KAFKA_SOURCE_KILL9_SEED=N` replays one seed.
mod common;
#[path = "common/kafka_broker.rs"]
mod kafka_broker;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::server::{Rng, Server, psql};
use kafka_broker::KafkaBroker;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

const KILLS: u64 = 20;
const PARTITIONS: u32 = 3;

/// Produces `{"k", "v"}` records until `stop`; counts the acknowledged ones.
fn produce(bootstrap: String, stop: Arc<AtomicBool>, acked: Arc<AtomicU64>) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "300000")
        .create()
        .unwrap();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let (key, value) = (format!("{}", i % 1000), format!(r#"{{"k":{},"v":{i}}}"#, i % 7));
        match producer.send(BaseRecord::to("ev").key(&key).payload(&value)) {
            Ok(()) => i += 1,
            Err(_) => std::thread::sleep(Duration::from_millis(5)), // the queue is full
        }
        producer.poll(Duration::ZERO);
        if i.is_multiple_of(50) {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    producer.flush(Duration::from_secs(300)).unwrap();
    acked.store(i, Ordering::Relaxed);
}

/// The topic's records, `g -> (count, sum)`: the view recomputed from scratch.
fn truth(bootstrap: &str) -> BTreeMap<i64, (i64, i64)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "truth")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut list = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        list.add_partition_offset("ev", p as i32, Offset::Beginning).unwrap();
    }
    consumer.assign(&list).unwrap();
    let (mut groups, mut eof) = (BTreeMap::new(), std::collections::BTreeSet::new());
    let deadline = Instant::now() + Duration::from_secs(120);
    while eof.len() < PARTITIONS as usize {
        assert!(Instant::now() < deadline, "the topic was not read to its end");
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => {
                let value: serde_json::Value = serde_json::from_slice(message.payload().unwrap()).unwrap();
                let entry: &mut (i64, i64) = groups.entry(value["k"].as_i64().unwrap()).or_default();
                *entry = (entry.0 + 1, entry.1 + value["v"].as_i64().unwrap());
            }
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => drop(eof.insert(p)),
            _ => {}
        }
    }
    groups
}

fn run_seed(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut broker = KafkaBroker::start();
    broker.create_topic("ev", PARTITIONS);
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), false);
    let setup = format!(
        "CREATE SOURCE ev (k BIGINT, v BIGINT) FROM KAFKA (BROKERS '{}', TOPIC 'ev') FORMAT JSON; \
         CREATE MATERIALIZED VIEW v AS SELECT k AS g, COUNT(*) AS n, SUM(v) AS s FROM ev GROUP BY k",
        broker.bootstrap
    );
    psql(server.port, &setup).unwrap();
    let (stop, acked) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let producer = {
        let (bootstrap, stop, acked) = (broker.bootstrap.clone(), stop.clone(), acked.clone());
        std::thread::spawn(move || produce(bootstrap, stop, acked))
    };
    let broker_restarts = [KILLS / 3, 2 * KILLS / 3];
    for kill in 0..KILLS {
        std::thread::sleep(Duration::from_millis(200 + rng.below(600)));
        let data = server.kill();
        if broker_restarts.contains(&kill) {
            broker.kill();
            std::thread::sleep(Duration::from_millis(rng.below(500)));
            broker.restart();
        }
        server = Server::start(&data, false);
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let truth = truth(&broker.bootstrap);
    let records: i64 = truth.values().map(|(n, _)| n).sum();
    assert!(records as u64 >= acked.load(Ordering::Relaxed), "seed {seed}: the topic holds every acknowledged record");
    let expected: Vec<Vec<String>> =
        truth.iter().map(|(g, (n, s))| vec![g.to_string(), n.to_string(), s.to_string()]).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let view = psql(server.port, "SELECT g, n, s FROM v ORDER BY g").unwrap_or_default();
        if view == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed}: the view never matched the topic: {view:?} against {expected:?}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    eprintln!("seed {seed}: {KILLS} server kills, 2 broker restarts, {records} records");
}

#[test]
fn a_view_over_a_kafka_topic_counts_each_record_once_across_kills_and_broker_restarts() {
    match std::env::var("MILLPOND_KAFKA_SOURCE_KILL9_SEED") {
        Ok(seed) => run_seed(seed.parse().expect("a seed number")),
        Err(_) => run_seed(1),
    }
}
