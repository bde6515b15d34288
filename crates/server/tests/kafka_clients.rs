//! Unmodified Kafka clients against the Kafka endpoint: Debian's kcat
//! (librdkafka 2.0.2, the oldest client served; `.ci/run` installs it).
//! Keyed records produced, consumed back from an offset and from a time,
//! offsets queried by time.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use millpond_server::{Engine, EngineConfig, KafkaConfig, KafkaEndpoint};

fn start(dir: &std::path::Path) -> (Arc<Engine>, KafkaEndpoint) {
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir) }).unwrap();
    let endpoint = KafkaEndpoint::start(engine.clone(), KafkaConfig::new("127.0.0.1:0".parse().unwrap())).unwrap();
    (engine, endpoint)
}

/// Runs kcat with `args` (and `input` on its stdin); its stdout.
fn kcat(broker: &str, args: &[&str], input: Option<&str>) -> String {
    let mut child = Command::new("kcat")
        .arg("-b")
        .arg(broker)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat is not installed: `apt-get install kcat` (.ci/run installs it)");
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        stdin.write_all(input.as_bytes()).unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "kcat {args:?} failed: {stderr}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn kcat_produces_keyed_records_and_consumes_them_by_offset_and_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = start(dir.path());
    let broker = endpoint.addr().to_string();
    let listing = kcat(&broker, &["-L"], None);
    assert!(listing.contains("1 brokers:"), "{listing}");
    // Produce creates the topic (auto-creation, 1 partition), keyed records.
    let lines: Vec<String> = (0..50).map(|i| format!("key{i}:value {i}")).collect();
    kcat(&broker, &["-P", "-t", "clicks", "-K:"], Some(&(lines.join("\n") + "\n")));
    let consumed = kcat(&broker, &["-C", "-t", "clicks", "-o", "beginning", "-e", "-f", "%p %o %k %s\\n"], None);
    let expected: Vec<String> = (0..50).map(|i| format!("0 {i} key{i} value {i}")).collect();
    assert_eq!(consumed.lines().collect::<Vec<_>>(), expected);
    // From an offset; and what the log holds agrees with what kcat read.
    let from = kcat(&broker, &["-C", "-t", "clicks", "-o", "45", "-e", "-f", "%o %k\\n"], None);
    assert_eq!(from.lines().collect::<Vec<_>>(), (45..50).map(|i| format!("{i} key{i}")).collect::<Vec<_>>());
    assert_eq!(engine.records_in("clicks").unwrap(), 50);
    // A second batch later in time, found by its timestamp.
    let timestamps = kcat(&broker, &["-C", "-t", "clicks", "-o", "-1", "-e", "-f", "%T\\n"], None);
    let last_ms: i64 = timestamps.trim().parse().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    kcat(&broker, &["-P", "-t", "clicks", "-K:"], Some("late:one\n"));
    let since = format!("s@{}", last_ms + 1);
    let late = kcat(&broker, &["-C", "-t", "clicks", "-o", &since, "-e", "-f", "%o %k %s\\n"], None);
    assert_eq!(late.trim(), "50 late one");
    let query = kcat(&broker, &["-Q", "-t", &format!("clicks:0:{}", last_ms + 1)], None);
    assert!(query.contains("offset 50"), "{query}");
}
