//! A consumer of a view's changelog over the Kafka endpoint, itself killed
//! with SIGKILL at times, while `millpond serve` is killed with SIGKILL again
//! and again under a producer (kcat) that feeds the view's source through the
//! same endpoint: the consumer (`tests/kafka/view_consumer.py`, confluent-kafka
//! with isolation.level=read_committed, its rows saved with its offset, the
//! offset committed to its group) never sees a change twice or out of step
//! with the view (each record's multiplicity is checked as it is applied),
//! and its rows end equal to the view.
//!
//! `MILLPOND_KAFKA_KILL9_SEED=N` replays one seed.
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::server::{Rng, Server, psql};

/// Produces `lines` (`key:json`) with kcat; a server that dies meanwhile may take some.
fn produce(kafka: &str, lines: &str) {
    let mut child = Command::new("kcat")
        .args(["-b", kafka, "-P", "-t", "ev", "-K:", "-X", "message.timeout.ms=3000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kcat runs (.ci/run installs it)");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), lines.as_bytes()).unwrap();
    drop(child.stdin.take());
    let _ = child.wait();
}

/// The source's records as the topic holds them: the view's truth, `g -> (n, s)`.
fn truth(kafka: &str) -> BTreeMap<i64, (i64, i64)> {
    let output = Command::new("kcat")
        .args(["-b", kafka, "-C", "-t", "ev", "-o", "beginning", "-e", "-q", "-f", "%s\\n"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let mut groups = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        let (k, v) = (record["k"].as_i64().unwrap(), record["v"].as_i64().unwrap());
        let entry: &mut (i64, i64) = groups.entry(k % 7).or_default();
        *entry = (entry.0 + 1, entry.1 + v);
    }
    groups
}

/// Runs the consumer for `seconds`, killed after `kill_after` if given;
/// the rows it saved.
fn consume(kafka: &str, state: &Path, seconds: f64, kill_after: Option<Duration>) -> BTreeMap<String, i64> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/kafka/view_consumer.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(state)
        .args([kafka, "view.v", "view-consumer", &seconds.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs (.ci/run installs confluent-kafka)");
    if let Some(after) = kill_after {
        std::thread::sleep(after);
        let _ = child.kill();
    }
    let output = child.wait_with_output().unwrap();
    assert!(
        kill_after.is_some() || output.status.success(),
        "the consumer failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(state).unwrap_or_else(|_| r#"{"rows":{}}"#.to_owned());
    let saved: serde_json::Value = serde_json::from_str(&text).unwrap();
    saved["rows"].as_object().unwrap().iter().map(|(row, n)| (row.clone(), n.as_i64().unwrap())).collect()
}

fn run_seed(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let state = work.path().join("consumer.json");
    let mut server = Server::start(dir.path(), true);
    let setup = "CREATE SOURCE ev (k BIGINT, v BIGINT) FROM TOPIC 'ev' FORMAT JSON; \
                 CREATE MATERIALIZED VIEW v AS SELECT k % 7 AS g, COUNT(*) AS n, SUM(v) AS s FROM ev GROUP BY k % 7";
    psql(server.port, setup).unwrap();
    let (mut kills, mut consumer_kills) = (0, 0);
    for round in 0..10u64 {
        let lines: String = (0..200).map(|i| format!("{i}:{{\"k\":{},\"v\":{round}}}\n", rng.below(1000))).collect();
        produce(server.kafka.as_deref().unwrap(), &lines);
        let kill_after = (rng.below(3) == 0).then(|| Duration::from_millis(200 + rng.below(800)));
        consumer_kills += usize::from(kill_after.is_some());
        consume(server.kafka.as_deref().unwrap(), &state, 0.3 + rng.below(10) as f64 / 10.0, kill_after);
        if rng.below(2) == 0 {
            std::thread::sleep(Duration::from_millis(rng.below(80)));
            let dir = server.kill();
            server = Server::start(&dir, true);
            kills += 1;
        }
    }
    // The topic is the truth: once the view shows it, the consumer catches up.
    let truth = truth(server.kafka.as_deref().unwrap());
    let wanted: BTreeMap<String, i64> =
        truth.iter().map(|(g, (n, s))| (format!("{{\"g\":{g},\"n\":{n},\"s\":{s}}}"), 1)).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let rows = consume(server.kafka.as_deref().unwrap(), &state, 1.0, None);
        if rows == wanted {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed}: the consumer never reached the view: {rows:?} against {wanted:?}"
        );
    }
    let view: Vec<Vec<String>> = psql(server.port, "SELECT g, n, s FROM v ORDER BY g").unwrap();
    let expected: Vec<Vec<String>> =
        truth.iter().map(|(g, (n, s))| vec![g.to_string(), n.to_string(), s.to_string()]).collect();
    assert_eq!(view, expected, "seed {seed}: the view is its source's");
    assert!(
        kills > 0 && consumer_kills > 0,
        "seed {seed} tested little: {kills} kills, {consumer_kills} consumer kills"
    );
    eprintln!("seed {seed}: {kills} server kills, {consumer_kills} consumer kills, {} groups", truth.len());
}

#[test]
fn a_read_committed_consumer_of_a_view_survives_server_kills_and_its_own() {
    match std::env::var("MILLPOND_KAFKA_KILL9_SEED") {
        Ok(seed) => run_seed(seed.parse().expect("a seed number")),
        Err(_) => {
            for seed in [1, 2] {
                run_seed(seed);
            }
        }
    }
}
