//! The Kafka source against a real Apache Kafka broker (4.4.0, KRaft, from
//! the jars `.ci/run` fetches): committed records only (an aborted
//! transaction never reaches the view), each once across runs that resume
//! from the checkpoint, records that fail to decode as dead letters, and
//! partitions added to the topic read from their start; through both of
//! the source's fetch paths (its own Fetch requests, librdkafka's queue),
//! with compressed and uncompressed batches.
mod common;
#[path = "../../../tests/common/kafka_broker.rs"]
mod kafka_broker;

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_broker::KafkaBroker;
use millpond_dataflow::{KafkaTopic, Runtime, RuntimeConfig, Sum, json};
use rdkafka::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
struct Ev {
    k: u64,
    v: i64,
}

fn producer(bootstrap: &str, transactional_id: Option<&str>, compression: &str) -> BaseProducer {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap).set("linger.ms", "5").set("topic.metadata.refresh.interval.ms", "300");
    config.set("compression.type", compression);
    if let Some(id) = transactional_id {
        config.set("transactional.id", id);
    }
    config.create().unwrap()
}

/// Produces `(partition, key, value)` records and waits for them (a
/// partition the producer does not know yet is waited for).
fn produce(producer: &BaseProducer, records: &[(Option<i32>, String, String)]) {
    for (partition, key, value) in records {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let mut record = BaseRecord::to("ev").key(key.as_str()).payload(value.as_str());
            if let Some(partition) = partition {
                record = record.partition(*partition);
            }
            match producer.send(record) {
                Ok(()) => break,
                Err((e, _)) if std::time::Instant::now() < deadline => {
                    assert!(e.to_string().contains("nknown partition"), "{e}");
                    producer.poll(Duration::from_millis(100));
                }
                Err((e, _)) => panic!("{e}"),
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

fn events(range: std::ops::Range<i64>, partition: Option<i32>) -> Vec<(Option<i32>, String, String)> {
    range.map(|i| (partition, format!("{}", i % 10), format!(r#"{{"k":{},"v":{i}}}"#, i % 10))).collect()
}

/// The source's properties that choose its fetch path.
fn fetch(path: &str) -> Vec<(String, String)> {
    vec![(millpond_dataflow::kafka_source::FETCH_PROPERTY.to_owned(), path.to_owned())]
}

/// Runs the job until it read every partition to its end.
fn run(dir: &std::path::Path, bootstrap: &str, path: &str) {
    let source = KafkaTopic { brokers: bootstrap.to_owned(), topic: "ev".to_owned(), properties: fetch(path) };
    let config = RuntimeConfig::new(dir).workers(2).epoch_interval_ms(20).stop_when_caught_up(true);
    Runtime::run(config, move |job| {
        let events = job.kafka_source("ev", "ev", &source, json::<Ev>());
        let sums = events.map(|e| (e.k, e.v)).aggregate("sums", Sum(|v: &i64| *v));
        job.materialize("sums", sums);
    })
    .unwrap();
}

fn truth(values: impl IntoIterator<Item = i64>) -> BTreeMap<String, i64> {
    let mut sums: BTreeMap<u64, i64> = BTreeMap::new();
    for v in values {
        *sums.entry((v % 10) as u64).or_default() += v;
    }
    common::rows_of(sums.into_iter().map(|row| (row, 1)))
}

#[test]
fn a_kafka_source_reads_committed_records_once_across_runs_and_new_partitions() {
    reads_committed_records_once_across_runs_and_new_partitions("direct");
}

#[test]
fn the_same_through_librdkafkas_consumer_queue() {
    reads_committed_records_once_across_runs_and_new_partitions("librdkafka");
}

fn reads_committed_records_once_across_runs_and_new_partitions(path: &str) {
    let broker = KafkaBroker::start();
    broker.create_topic("ev", 2);
    let plain = producer(&broker.bootstrap, None, "lz4");
    produce(&plain, &events(0..1000, None));
    produce(&plain, &[(Some(0), "bad".into(), "not json".into()), (Some(1), "bad".into(), "{\"k\":1}".into())]);
    let transactional = producer(&broker.bootstrap, Some("writer"), "zstd");
    transactional.init_transactions(Duration::from_secs(30)).unwrap();
    transactional.begin_transaction().unwrap();
    produce(
        &transactional,
        &(0..100).map(|i| (None, format!("{i}"), r#"{"k":3,"v":1000000}"#.to_owned())).collect::<Vec<_>>(),
    );
    transactional.abort_transaction(Duration::from_secs(30)).unwrap();
    transactional.begin_transaction().unwrap();
    produce(&transactional, &events(1000..1100, None));
    transactional.commit_transaction(Duration::from_secs(30)).unwrap();

    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), &broker.bootstrap, path);
    assert_eq!(common::view_rows(dir.path(), "sums"), truth(0..1100), "committed records, each once");
    let letters = common::dead_letters(dir.path(), "ev.dead-letter");
    assert_eq!(letters.len(), 2, "the two records that do not decode: {letters:?}");
    assert!(letters.iter().all(|l| l.headers["millpond.source.topic"] == "kafka:ev"), "{letters:?}");

    // More records, and two more partitions read from their start.
    produce(&plain, &events(1100..1500, None));
    broker.add_partitions("ev", 4);
    produce(&plain, &events(1500..1600, Some(2)));
    produce(&plain, &events(1600..1700, Some(3)));
    run(dir.path(), &broker.bootstrap, path);
    assert_eq!(common::view_rows(dir.path(), "sums"), truth(0..1700), "resumed: each record once");
    assert_eq!(common::dead_letters(dir.path(), "ev.dead-letter").len(), 2, "each rejected record once");
}

/// Every field a decoder sees — key, value, headers, timestamp, offset —
/// comes through as Kafka holds it, for records with and without headers.
#[test]
fn a_decoder_sees_each_kafka_records_key_headers_timestamp_and_offset() {
    let broker = KafkaBroker::start();
    broker.create_topic("hd", 1);
    let plain = producer(&broker.bootstrap, None, "none");
    let expected = produce_fields(&plain);
    for path in ["direct", "librdkafka"] {
        let dir = tempfile::tempdir().unwrap();
        let source = KafkaTopic { brokers: broker.bootstrap.clone(), topic: "hd".to_owned(), properties: fetch(path) };
        read_fields(dir.path(), source);
        let rows = common::view_rows(dir.path(), "seen");
        assert_eq!(
            rows,
            common::rows_of(expected.clone().into_iter().map(|row| (row, 1))),
            "{path}: each record, once"
        );
    }
}

type Fields = (Option<String>, String, String, i64);

/// Produces records with and without keys and headers; returns each
/// one's fields by offset.
fn produce_fields(plain: &BaseProducer) -> BTreeMap<u64, Fields> {
    use rdkafka::message::{Header, OwnedHeaders};
    let mut expected = BTreeMap::new();
    for i in 0..300i64 {
        let value = format!("v{i}");
        let mut record = BaseRecord::to("hd").payload(&value).timestamp(1_000_000 + i);
        let key = format!("k{i}");
        if i % 3 != 0 {
            record = record.key(&key);
        }
        let weight = (i % 5).to_string();
        if i % 2 == 0 {
            let headers = OwnedHeaders::new()
                .insert(Header { key: "weight", value: Some(&weight) })
                .insert(Header { key: "empty", value: None::<&[u8]> });
            record = record.headers(headers);
        }
        plain.send(record).map_err(|(e, _)| e).unwrap();
        let key = (i % 3 != 0).then(|| format!("k{i}"));
        let headers = if i % 2 == 0 { format!("weight={weight},empty=null") } else { String::new() };
        expected.insert(i as u64, (key, format!("v{i}"), headers, 1_000_000 + i));
    }
    plain.flush(Duration::from_secs(30)).unwrap();
    expected
}

/// Runs a job whose view holds each record's fields by offset.
fn read_fields(dir: &std::path::Path, source: KafkaTopic) {
    let config = RuntimeConfig::new(dir).workers(1).epoch_interval_ms(20).stop_when_caught_up(true);
    Runtime::run(config, move |job| {
        let seen = job.kafka_source("hd", "hd", &source, |r: &millpond_log::RecordView<'_>| {
            let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8_lossy(b).into_owned());
            let headers: Vec<String> = r
                .headers()
                .into_iter()
                .map(|h| format!("{}={}", h.key, text(h.value.as_deref()).unwrap_or("null".into())))
                .collect();
            Ok((r.offset, (text(r.key), text(r.value).unwrap_or_default(), headers.join(","), r.timestamp_ms)))
        });
        job.materialize("seen", seen);
    })
    .unwrap();
}

/// A topic deleted and created again has a new Kafka topic id: a reader
/// with offsets in the old one is refused with an error that says so, even
/// when the new topic already holds more records than those offsets (a
/// silent resume would skip the new topic's first records).
#[test]
fn a_kafka_topic_deleted_and_created_again_is_not_resumed_at_its_old_offsets() {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let broker = KafkaBroker::start();
    broker.create_topic("ev", 1);
    let plain = producer(&broker.bootstrap, None, "none");
    produce(&plain, &events(0..100, None));
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), &broker.bootstrap, "direct");
    assert_eq!(common::view_rows(dir.path(), "sums"), truth(0..100));

    let admin: AdminClient<_> = ClientConfig::new().set("bootstrap.servers", &broker.bootstrap).create().unwrap();
    let deleted = futures::executor::block_on(admin.delete_topics(&["ev"], &AdminOptions::new())).unwrap();
    assert!(deleted.iter().all(Result::is_ok), "{deleted:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        // Deletion completes in the background: created again once it has.
        let topic = NewTopic::new("ev", 1, TopicReplication::Fixed(1));
        let created = futures::executor::block_on(admin.create_topics([&topic], &AdminOptions::new())).unwrap();
        if created.iter().all(Result::is_ok) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the topic was not created again");
        std::thread::sleep(Duration::from_millis(500));
    }
    // The broker applies the deletion and the creation after the controller
    // answered: until then it still serves (and appends to) the old log.
    let consumer: rdkafka::consumer::BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", &broker.bootstrap).create().unwrap();
    use rdkafka::consumer::Consumer;
    while consumer.fetch_watermarks("ev", 0, Duration::from_secs(5)).ok() != Some((0, 0)) {
        assert!(std::time::Instant::now() < deadline, "the broker never served the new topic");
        std::thread::sleep(Duration::from_millis(200));
    }
    let plain = producer(&broker.bootstrap, None, "none");
    produce(&plain, &events(1000..1200, None));

    let source = KafkaTopic { brokers: broker.bootstrap.clone(), topic: "ev".to_owned(), properties: fetch("direct") };
    let config = RuntimeConfig::new(dir.path()).workers(2).epoch_interval_ms(20).stop_when_caught_up(true);
    let error = Runtime::run(config, move |job| {
        let events = job.kafka_source("ev", "ev", &source, json::<Ev>());
        let sums = events.map(|e| (e.k, e.v)).aggregate("sums", Sum(|v: &i64| *v));
        job.materialize("sums", sums);
    })
    .unwrap_err()
    .to_string();
    assert!(error.contains("deleted and created again"), "{error}");
    assert_eq!(common::view_rows(dir.path(), "sums"), truth(0..100), "nothing of the new topic was read");
}
