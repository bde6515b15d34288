//! Exactly once from Kafka to Kafka through SQL, with a real Apache Kafka
//! broker: a view over a Kafka topic (`CREATE SOURCE … FROM KAFKA`) shipped
//! by a transactional sink into another (`CREATE SINK … INTO KAFKA`). While
//! a producer writes keyed JSON into the input topic (idempotent, so a
//! broker restart adds no duplicate), `millpond serve` is killed with
//! SIGKILL 20 times at random moments and the Kafka broker is killed and
//! restarted twice. At the end the view equals a from-scratch
//! recomputation over everything the input topic holds, a read_committed
//! consumer of the sink's topic has accumulated exactly the view (no change
//! twice, none missing), and the progress topic names an epoch the sink
//! shipped.
//!
//! The same runs with Millpond's own Kafka endpoint as the cluster (a
//! second `millpond serve`, killed and restarted twice in place of the
//! broker): its transactions, read_committed fetches and idempotent
//! producers serve librdkafka 2.12.1's sink and source.
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

/// Every value a read_committed consumer reads from `topic`'s `partitions`.
fn read_committed(bootstrap: &str, topic: &str, partitions: i32) -> Vec<serde_json::Value> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "check")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition_offset(topic, p, Offset::Beginning).unwrap();
    }
    consumer.assign(&list).unwrap();
    let (mut out, mut eof) = (Vec::new(), std::collections::BTreeSet::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    while eof.len() < partitions as usize {
        assert!(Instant::now() < deadline, "{topic} was not read to its end");
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => out.push(serde_json::from_slice(m.payload().unwrap()).unwrap()),
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => drop(eof.insert(p)),
            _ => {}
        }
    }
    out
}

/// The rows the sink's changes add up to; no (epoch, row) change twice.
fn accumulate(seed: u64, changes: &[serde_json::Value]) -> BTreeMap<String, i64> {
    let (mut rows, mut seen) = (BTreeMap::new(), std::collections::BTreeSet::new());
    for change in changes {
        let row = change["row"].to_string();
        assert!(seen.insert((change["epoch"].as_u64().unwrap(), row.clone())), "seed {seed}: shipped twice: {change}");
        *rows.entry(row).or_insert(0i64) += change["diff"].as_i64().unwrap();
    }
    rows.retain(|_, n| *n != 0);
    rows
}

/// The Kafka cluster the job reads and writes: a real broker, or a second
/// `millpond serve` whose Kafka endpoint stays on one address across restarts.
enum Cluster {
    Kafka(KafkaBroker),
    Millpond { server: Option<Server>, dir: tempfile::TempDir, address: String },
}

impl Cluster {
    fn start(millpond: bool) -> Cluster {
        if !millpond {
            return Cluster::Kafka(KafkaBroker::start());
        }
        let dir = tempfile::tempdir().unwrap();
        let address = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        let server = Server::start_on(dir.path(), Some(&address));
        Cluster::Millpond { server: Some(server), dir, address }
    }

    fn bootstrap(&self) -> String {
        match self {
            Cluster::Kafka(broker) => broker.bootstrap.clone(),
            Cluster::Millpond { address, .. } => address.clone(),
        }
    }

    fn create_topic(&self, topic: &str, partitions: u32) {
        kafka_broker::create_topic(&self.bootstrap(), topic, partitions);
    }

    /// Kills the cluster with SIGKILL and starts it again after `pause`.
    fn restart(&mut self, pause: Duration) {
        match self {
            Cluster::Kafka(broker) => {
                broker.kill();
                std::thread::sleep(pause);
                broker.restart();
            }
            Cluster::Millpond { server, dir, address } => {
                server.take().expect("running").kill();
                std::thread::sleep(pause);
                *server = Some(Server::start_on(dir.path(), Some(address)));
            }
        }
    }
}

fn run_seed(seed: u64, millpond_cluster: bool) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut broker = Cluster::start(millpond_cluster);
    broker.create_topic("ev", PARTITIONS);
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), false);
    let setup = format!(
        "CREATE SOURCE ev (k BIGINT, v BIGINT) FROM KAFKA (BROKERS '{0}', TOPIC 'ev') FORMAT JSON; \
         CREATE MATERIALIZED VIEW v AS SELECT k AS g, COUNT(*) AS n, SUM(v) AS s FROM ev GROUP BY k; \
         CREATE SINK v_out FROM v INTO KAFKA (BROKERS '{0}', TOPIC 'out')",
        broker.bootstrap()
    );
    broker.create_topic("out", 2);
    psql(server.port, &setup).unwrap();
    let (stop, acked) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let producer = {
        let (bootstrap, stop, acked) = (broker.bootstrap(), stop.clone(), acked.clone());
        std::thread::spawn(move || produce(bootstrap, stop, acked))
    };
    let broker_restarts = [KILLS / 3, 2 * KILLS / 3];
    for kill in 0..KILLS {
        std::thread::sleep(Duration::from_millis(200 + rng.below(600)));
        let data = server.kill();
        if broker_restarts.contains(&kill) {
            broker.restart(Duration::from_millis(rng.below(500)));
        }
        server = Server::start(&data, false);
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let bootstrap = broker.bootstrap();
    let truth = truth(&bootstrap);
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
    // The sink's topic adds up to the view, each change once.
    let wanted: BTreeMap<String, i64> =
        truth.iter().map(|(g, (n, s))| (format!(r#"{{"g":{g},"n":{n},"s":{s}}}"#), 1)).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    let (shipped, changes) = loop {
        let changes = read_committed(&bootstrap, "out", 2);
        let shipped = accumulate(seed, &changes);
        if shipped == wanted {
            break (shipped, changes);
        }
        assert!(Instant::now() < deadline, "seed {seed}: the sink's topic never added up to the view: {shipped:?}");
        std::thread::sleep(Duration::from_millis(500));
    };
    let last_epoch = changes.iter().map(|c| c["epoch"].as_u64().unwrap()).max().unwrap();
    let progress = read_committed(&bootstrap, millpond_dataflow::kafka_sink::PROGRESS_TOPIC_DEFAULT, 1);
    let progressed = progress.iter().filter(|p| p["sink"] == "v_out").map(|p| p["epoch"].as_u64().unwrap()).max();
    assert_eq!(progressed, Some(last_epoch), "seed {seed}: the progress topic names the last epoch shipped");
    let cluster = if millpond_cluster { "Millpond's endpoint" } else { "Kafka" };
    eprintln!(
        "seed {seed} on {cluster}: {KILLS} server kills, 2 cluster restarts, {records} records, {} changes shipped in {} rows",
        changes.len(),
        shipped.len()
    );
}

fn seed() -> u64 {
    std::env::var("MILLPOND_KAFKA_SOURCE_KILL9_SEED").map_or(1, |seed| seed.parse().expect("a seed number"))
}

#[test]
fn kafka_to_kafka_through_a_sql_view_is_exactly_once_across_kills_and_broker_restarts() {
    run_seed(seed(), false);
}

#[test]
fn the_same_with_millponds_own_kafka_endpoint_as_the_cluster() {
    run_seed(seed(), true);
}
