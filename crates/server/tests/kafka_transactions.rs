//! Kafka transactions on the Kafka endpoint with an unmodified
//! transactional client (confluent-kafka; `tests/kafka/transactions.py`):
//! commits and aborts seen by read_committed and read_uncommitted
//! consumers, a zombie fenced by a newer producer of its transactional id,
//! offsets committed with a transaction and not with an abort, a zombie
//! consumer's offsets refused by its group's generation, a producer
//! that dies mid-transaction aborted by its timeout; Millpond's own source
//! reads committed records only; and after a restart the coordinator
//! carries on from its state topic.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use millpond_server::{Engine, EngineConfig, KafkaConfig, KafkaEndpoint};

fn start(dir: &std::path::Path) -> (Arc<Engine>, KafkaEndpoint) {
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir) }).unwrap();
    let endpoint = KafkaEndpoint::start(engine.clone(), KafkaConfig::new("127.0.0.1:0".parse().unwrap())).unwrap();
    (engine, endpoint)
}

/// Runs tests/kafka/transactions.py's `phases` against `addr`; its stdout.
fn transactions_py(addr: std::net::SocketAddr, phases: &[&str]) -> String {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/transactions.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg(addr.to_string())
        .args(phases)
        .output()
        .expect("python3 runs (pip install confluent-kafka; .ci/run does)");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "transactions.py {phases:?} failed:\n{stdout}\n{stderr}");
    stdout
}

/// The rows of view `view`'s changelog (its keys), oldest first.
fn changelog(broker: &str, view: &str) -> Vec<String> {
    let output = Command::new("kcat")
        .args(["-b", broker, "-C", "-t", &format!("view.{view}"), "-o", "beginning", "-e", "-q", "-f", "%k\\n"])
        .output()
        .expect("kcat runs (.ci/run installs it)");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).lines().map(str::to_owned).collect()
}

#[test]
fn transactional_producers_commit_abort_are_fenced_and_time_out() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = start(dir.path());
    engine
        .execute(
            "CREATE SOURCE ev (t BIGINT, i BIGINT) FROM TOPIC 'txn-ca' FORMAT JSON; \
             CREATE MATERIALIZED VIEW c AS SELECT COUNT(*) AS n, SUM(t) AS s FROM ev",
        )
        .unwrap();
    let stdout = transactions_py(endpoint.addr(), &["commit-abort", "fencing", "offsets", "zombie", "hanging"]);
    for phase in ["commit-abort: ok", "fencing: ok", "offsets: ok", "zombie: ok", "hanging: ok"] {
        assert!(stdout.contains(phase), "{phase} missing from:\n{stdout}");
    }
    // The view counts the two committed transactions (30 records each,
    // t = 0 and t = 2), never the aborted one (t = 1).
    let broker = endpoint.addr().to_string();
    let wanted = r#"{"n":60,"s":60}"#;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !changelog(&broker, "c").iter().any(|row| row == wanted) {
        assert!(Instant::now() < deadline, "the view never reached {wanted}: {:?}", changelog(&broker, "c"));
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    let rows = changelog(&broker, "c");
    let counts: Vec<i64> =
        rows.iter().map(|row| serde_json::from_str::<serde_json::Value>(row).unwrap()["n"].as_i64().unwrap()).collect();
    assert!(counts.iter().all(|&n| n <= 60), "the view counted an aborted record: {rows:?}");

    // A restart: the coordinator's state comes back, the same transactional
    // ids go on (their epochs bumped), and the committed reads are unchanged.
    drop((endpoint, engine));
    let (_engine, endpoint) = start(dir.path());
    let stdout = transactions_py(endpoint.addr(), &["after-restart"]);
    assert!(stdout.contains("after-restart: ok"), "{stdout}");
}
