//! Kafka transactions survive SIGKILL: a transactional producer
//! (`tests/kafka/txn_driver.py`, confluent-kafka) commits and aborts
//! transactions of five records over three partitions while `millpond
//! serve` is killed with SIGKILL 20 times at random moments and restarted.
//! At the end a read_committed consumer reads every committed transaction
//! whole and once, no aborted one, and any whose answer the kill took
//! (commit asked, no answer) whole or not at all; read_uncommitted reads
//! at least as much; and a view over the topic (Millpond's own source,
//! reading committed records only) counts exactly what read_committed read.
//!
//! `MILLPOND_KAFKA_TXN_KILL9_SEED=N` replays one seed.
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::server::{Rng, Server, psql};

const RECORDS_PER_TXN: usize = 5;
const KILLS: usize = 20;

fn driver(dir: &Path, args: &[&str]) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/kafka/txn_driver.py");
    let mut command = Command::new("python3");
    command.arg(script).arg(dir).arg("tx").args(args);
    command
}

fn run_driver(dir: &Path, args: &[&str]) -> String {
    let output = driver(dir, args).output().expect("python3 runs (.ci/run installs confluent-kafka)");
    assert!(output.status.success(), "txn_driver.py {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Each transaction's records as read: `n -> [j]`.
fn read(dir: &Path, isolation: &str) -> BTreeMap<u64, Vec<u64>> {
    let mut by_txn: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for line in run_driver(dir, &["dump", isolation]).lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        by_txn.entry(value["n"].as_u64().unwrap()).or_default().push(value["j"].as_u64().unwrap());
    }
    by_txn
}

fn run_seed(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let dir = tempfile::tempdir().unwrap();
    let outcomes = dir.path().join("outcomes.txt");
    // One Kafka address for every restart: the producer's connection comes
    // back to the restarted server, whose recovery meets its retries.
    let kafka = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let mut server = Server::start_on(dir.path(), Some(&kafka));
    run_driver(dir.path(), &["create", "3"]);
    let setup = "CREATE SOURCE tx (n BIGINT, j BIGINT) FROM TOPIC 'tx' FORMAT JSON; \
                 CREATE MATERIALIZED VIEW per_txn AS SELECT n, COUNT(*) AS c FROM tx GROUP BY n";
    psql(server.port, setup).unwrap();
    let seconds = (KILLS as f64) * 1.6;
    let mut producer: Child = driver(dir.path(), &["run", &seconds.to_string(), outcomes.to_str().unwrap()])
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs");
    for _ in 0..KILLS {
        std::thread::sleep(Duration::from_millis(300 + rng.below(900)));
        let data = server.kill();
        server = Server::start_on(&data, Some(&kafka));
    }
    let status = producer.wait().unwrap();
    assert!(status.success(), "seed {seed}: the driver failed");
    let mut fates: BTreeMap<u64, String> = BTreeMap::new();
    for line in std::fs::read_to_string(&outcomes).unwrap().lines() {
        let (n, fate) = line.split_once(' ').unwrap();
        fates.insert(n.parse().unwrap(), fate.to_owned());
    }
    let committed = read(dir.path(), "read_committed");
    let everything = read(dir.path(), "read_uncommitted");
    let whole: Vec<u64> = (0..RECORDS_PER_TXN as u64).collect();
    for (n, fate) in &fates {
        match (fate.as_str(), committed.get(n)) {
            ("committed", Some(js)) | ("unknown", Some(js)) => {
                let mut sorted = js.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, whole, "seed {seed}: transaction {n} ({fate}) read whole and once");
            }
            ("committed", None) => panic!("seed {seed}: committed transaction {n} is missing"),
            ("aborted", Some(js)) => panic!("seed {seed}: aborted transaction {n} was read: {js:?}"),
            _ => {}
        }
    }
    let unknown_read = fates.iter().filter(|(n, f)| *f == "unknown" && committed.contains_key(n)).count();
    assert!(committed.keys().all(|n| fates.contains_key(n)), "seed {seed}: a transaction the driver never ran");
    for (n, js) in &committed {
        assert!(everything.get(n).is_some_and(|all| all.len() >= js.len()), "seed {seed}: read_uncommitted lost {n}");
    }
    // The view reads committed records only, each once.
    let wanted: BTreeSet<(u64, usize)> = committed.iter().map(|(n, js)| (*n, js.len())).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows: BTreeSet<(u64, usize)> = psql(server.port, "SELECT n, c FROM per_txn")
            .unwrap_or_default()
            .iter()
            .map(|row| (row[0].parse().unwrap(), row[1].parse().unwrap()))
            .collect();
        if rows == wanted {
            break;
        }
        assert!(Instant::now() < deadline, "seed {seed}: the view never matched read_committed: {rows:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let count = |fate: &str| fates.values().filter(|f| *f == fate).count();
    assert!(count("committed") > 10 && count("aborted") > 3, "seed {seed} tested little: {fates:?}");
    eprintln!(
        "seed {seed}: {KILLS} kills; {} committed, {} aborted, {} unknown ({unknown_read} of them read)",
        count("committed"),
        count("aborted"),
        count("unknown")
    );
}

#[test]
fn kafka_transactions_are_all_or_nothing_across_server_kills() {
    match std::env::var("MILLPOND_KAFKA_TXN_KILL9_SEED") {
        Ok(seed) => run_seed(seed.parse().expect("a seed number")),
        Err(_) => run_seed(1),
    }
}
