//! The `millpond` command line, driven as a user would.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn millpond(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_millpond"))
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn ok(dir: &Path, args: &[&str], stdin: &str) -> String {
    let output = millpond(dir, args, stdin);
    assert!(output.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

fn fails(dir: &Path, args: &[&str], stdin: &str) -> String {
    let output = millpond(dir, args, stdin);
    assert!(!output.status.success(), "{args:?} should fail");
    String::from_utf8(output.stderr).unwrap()
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn topics_can_be_created_listed_described_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ok(dir, &["topic", "create", "orders", "--partitions", "3", "--retention-ms", "60000"], "");
    let error = fails(dir, &["topic", "create", "orders"], "");
    assert!(error.contains("already exists"), "{error}");
    let error = fails(dir, &["topic", "create", "x", "--cleanup-policy", "shred"], "");
    assert!(error.contains("cleanup_policy"), "{error}");
    let list: serde_json::Value = serde_json::from_str(&ok(dir, &["topic", "list", "--json"], "")).unwrap();
    assert!(list.as_array().unwrap().iter().any(|t| t["name"] == "orders" && t["partitions"] == 3));
    let described: serde_json::Value =
        serde_json::from_str(&ok(dir, &["topic", "describe", "orders", "--json"], "")).unwrap();
    assert_eq!(described["config"]["retention_ms"], 60000);
    assert_eq!(described["partitions"].as_array().unwrap().len(), 3);
    assert_eq!(described["partitions"][0]["high_watermark"], 0);
    ok(dir, &["topic", "create", "fast", "--flush-ms", "50", "--flush-records", "1000"], "");
    let fast: serde_json::Value = serde_json::from_str(&ok(dir, &["topic", "describe", "fast", "--json"], "")).unwrap();
    assert_eq!(fast["config"]["flush"], serde_json::json!({"mode": "interval", "interval_ms": 50, "records": 1000}));
    ok(dir, &["topic", "delete", "orders"], "");
    let error = fails(dir, &["topic", "describe", "orders"], "");
    assert!(error.contains("unknown topic 'orders'"), "{error}");
}

#[test]
fn produce_routes_by_key_and_consume_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ok(dir, &["topic", "create", "t", "--partitions", "4"], "");
    let input: String = (0..100).map(|i| format!("{{\"user\":\"u{}\",\"n\":{i}}}\n", i % 7)).collect();
    let summary = ok(dir, &["produce", "t", "--key-field", "user"], &input);
    assert!(summary.contains("produced 100 records"), "{summary}");
    let records = json_lines(&ok(dir, &["consume", "t", "--from-beginning"], ""));
    assert_eq!(records.len(), 100);
    for record in &records {
        let value: serde_json::Value = serde_json::from_str(record["value"].as_str().unwrap()).unwrap();
        assert_eq!(record["key"], value["user"]);
        let key = record["key"].as_str().unwrap();
        assert_eq!(record["partition"], millpond_log::partitioner::partition_for_key(key.as_bytes(), 4));
    }
    // --partition, --offset and --max, on the busiest partition.
    let busiest = (0..4u64).max_by_key(|p| records.iter().filter(|r| r["partition"] == *p).count()).unwrap();
    let partition = busiest.to_string();
    let one = json_lines(&ok(dir, &["consume", "t", "--partition", &partition, "--offset", "2", "--max", "1"], ""));
    assert_eq!(one.len(), 1);
    assert_eq!((one[0]["partition"].as_u64(), one[0]["offset"].as_u64()), (Some(busiest), Some(2)));
    let error = fails(dir, &["consume", "t", "--partition", "9"], "");
    assert!(error.contains("no partition 9"), "{error}");
    let error = fails(dir, &["consume", "t", "--partition", "0", "--offset", "100000"], "");
    assert!(error.contains("out of range"), "{error}");
}

#[test]
fn a_bad_line_is_reported_by_number_and_earlier_lines_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ok(dir, &["topic", "create", "t"], "");
    let error = fails(dir, &["produce", "t", "--key-field", "id"], "{\"id\":1}\n{\"id\":2}\nnot json\n{\"id\":4}\n");
    assert!(error.contains("line 3"), "{error}");
    let records = json_lines(&ok(dir, &["consume", "t"], ""));
    assert_eq!(records.iter().map(|r| r["key"].as_str().unwrap().to_owned()).collect::<Vec<_>>(), ["1", "2"]);
    let error = fails(dir, &["produce", "t", "--key-field", "id"], "{\"other\":1}\n");
    assert!(error.contains("line 1") && error.contains("no field 'id'"), "{error}");
    let error = fails(dir, &["produce", "missing"], "x\n");
    assert!(error.contains("unknown topic 'missing'"), "{error}");
}

#[test]
fn groups_resume_from_their_committed_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ok(dir, &["topic", "create", "t"], "");
    let input: String = (0..10).map(|i| format!("v{i}\n")).collect();
    ok(dir, &["produce", "t"], &input);
    let first = json_lines(&ok(dir, &["consume", "t", "--group", "g", "--max", "4"], ""));
    assert_eq!(first.last().unwrap()["offset"], 3);
    let rest = json_lines(&ok(dir, &["consume", "t", "--group", "g"], ""));
    assert_eq!(rest.iter().map(|r| r["offset"].as_u64().unwrap()).collect::<Vec<_>>(), (4..10).collect::<Vec<_>>());
    assert!(json_lines(&ok(dir, &["consume", "t", "--group", "g"], "")).is_empty(), "nothing left for the group");
    assert_eq!(json_lines(&ok(dir, &["consume", "t", "--group", "g", "--from-beginning"], "")).len(), 10);
}

#[test]
fn from_time_starts_at_the_first_record_at_or_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ok(dir, &["topic", "create", "t"], "");
    ok(dir, &["produce", "t"], "a\nb\n");
    let all = json_lines(&ok(dir, &["consume", "t"], ""));
    let ts = all[0]["timestamp"].as_i64().unwrap();
    assert_eq!(json_lines(&ok(dir, &["consume", "t", "--from-time", &ts.to_string()], "")).len(), 2);
    assert!(json_lines(&ok(dir, &["consume", "t", "--from-time", &(ts + 3_600_000).to_string()], "")).is_empty());
    assert_eq!(json_lines(&ok(dir, &["consume", "t", "--from-time", "1970-01-01T00:00:00Z"], "")).len(), 2);
    let error = fails(dir, &["consume", "t", "--from-time", "soon"], "");
    assert!(error.contains("RFC 3339"), "{error}");
}

#[test]
fn nexmark_generation_is_deterministic_and_resumable() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let summary = ok(a.path(), &["gen", "nexmark", "--events", "5000", "--seed", "3"], "");
    assert!(summary.contains("100 persons, 300 auctions, 4600 bids"), "{summary}");
    // The same stream in two halves, in another directory.
    ok(b.path(), &["gen", "nexmark", "--events", "2000", "--seed", "3"], "");
    ok(b.path(), &["gen", "nexmark", "--events", "3000", "--seed", "3", "--start", "2000"], "");
    for topic in ["person", "auction", "bid"] {
        let read = |dir: &Path| {
            let mut lines = json_lines(&ok(dir, &["consume", topic], ""));
            lines.sort_by_key(|l| (l["partition"].as_u64(), l["offset"].as_u64()));
            lines
        };
        assert_eq!(read(a.path()), read(b.path()), "topic {topic}");
    }
    let described: serde_json::Value =
        serde_json::from_str(&ok(a.path(), &["topic", "describe", "bid", "--json"], "")).unwrap();
    assert_eq!(described["config"]["retention_ms"], serde_json::Value::Null, "generated topics are kept");
    let bids = json_lines(&ok(a.path(), &["consume", "bid", "--max", "1"], ""));
    let bid: serde_json::Value = serde_json::from_str(bids[0]["value"].as_str().unwrap()).unwrap();
    assert_eq!(bids[0]["key"].as_str().unwrap(), bid["auction"].to_string(), "bids are keyed by auction");
}

#[test]
fn consume_prints_partitions_in_order_raw_or_json_from_any_start() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ok(dir, &["topic", "create", "t", "--partitions", "3"], "");
    let input: String = (0..60).map(|i| format!("{{\"k\":\"key{i}\",\"n\":{i}}}\n")).collect();
    ok(dir, &["produce", "t", "--key-field", "k"], &input);

    // Without --follow: partition by partition, each in offset order.
    let records = json_lines(&ok(dir, &["consume", "t"], ""));
    assert_eq!(records.len(), 60);
    let order: Vec<(u64, u64)> =
        records.iter().map(|r| (r["partition"].as_u64().unwrap(), r["offset"].as_u64().unwrap())).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "partitions in order, offsets in order");
    assert!(order.iter().any(|(p, _)| *p > 0), "the keys spread over partitions");

    // Raw values, byte for byte, one per line.
    let raw = ok(dir, &["consume", "t", "--format", "raw", "--partition", "0"], "");
    let values: Vec<String> =
        records.iter().filter(|r| r["partition"] == 0).map(|r| r["value"].as_str().unwrap().to_owned()).collect();
    assert_eq!(raw.lines().collect::<Vec<_>>(), values);

    // --offset beginning | end | -N | N.
    let p0 = values.len() as u64;
    let from = |offset: &str| json_lines(&ok(dir, &["consume", "t", "--partition", "0", "--offset", offset], ""));
    assert_eq!(from("beginning").len() as u64, p0);
    assert!(from("end").is_empty());
    let last_two = from("-2");
    assert_eq!(last_two.iter().map(|r| r["offset"].as_u64().unwrap()).collect::<Vec<_>>(), [p0 - 2, p0 - 1]);
    assert_eq!(from(&format!("-{}", p0 + 10)).len() as u64, p0, "never before the log start");
    assert_eq!(from("1").len() as u64, p0 - 1);
    let error = fails(dir, &["consume", "t", "--offset", "middle"], "");
    assert!(error.contains("'middle' is not beginning, end, -N or an offset"), "{error}");
}

/// The segment file of partition 0 of `topic` (a topic with one segment).
fn only_segment(dir: &Path, topic: &str) -> std::path::PathBuf {
    dir.join("topics").join(topic).join("0").join(format!("{:020}.log", 0))
}

#[test]
fn recovery_cuts_are_warned_about_and_corruption_is_repaired_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ok(dir, &["topic", "create", "t"], "");
    // Three batches of two records: offsets 0-1, 2-3, 4-5.
    ok(dir, &["produce", "t", "--batch-records", "2"], "a\nb\nc\nd\ne\nf\n");
    let segment = only_segment(dir, "t");
    let bytes = std::fs::read(&segment).unwrap();
    let sizes: Vec<usize> = millpond_log::batch::Batches::new(&bytes).map(|b| b.size_bytes()).collect();
    assert_eq!((sizes.len(), sizes.iter().sum::<usize>()), (3, bytes.len()), "three batches");

    // A flipped byte inside the middle batch: every command refuses the directory.
    let mut damaged = bytes.clone();
    damaged[sizes[0] + 70] ^= 0x10;
    std::fs::write(&segment, &damaged).unwrap();
    let error = fails(dir, &["consume", "t"], "");
    assert!(error.contains("corrupt batch") && error.contains("offset 2"), "{error}");
    assert!(error.contains(&segment.display().to_string()) && error.contains("millpond topic repair t"), "{error}");
    assert_eq!(std::fs::read(&segment).unwrap(), damaged, "nothing cut without repair");
    let error = fails(dir, &["topic", "repair", "t", "--partition", "3"], "");
    assert!(error.contains("corrupt batch"), "repair of another partition does not cut: {error}");
    let repaired = ok(dir, &["topic", "repair", "t"], "");
    assert!(
        repaired.contains("cut t/0 at offset 2") && repaired.contains(&format!("{} bytes", sizes[1] + sizes[2])),
        "{repaired}"
    );
    let records = json_lines(&ok(dir, &["consume", "t"], ""));
    assert_eq!(records.iter().map(|r| r["value"].as_str().unwrap()).collect::<Vec<_>>(), ["a", "b"]);
    assert!(ok(dir, &["topic", "repair", "t"], "").contains("nothing to repair"));

    // A torn last batch is cut by any command, with a warning on stderr.
    ok(dir, &["produce", "t", "--batch-records", "2"], "c\nd\n");
    let len = std::fs::metadata(&segment).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&segment).unwrap().set_len(len - 5).unwrap();
    std::fs::remove_file(dir.join("clean-shutdown")).unwrap();
    let output = millpond(dir, &["consume", "t"], "");
    assert!(output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("warning: recovery cut t/0 at offset 2 (torn tail)"), "{stderr}");
    assert_eq!(json_lines(&String::from_utf8(output.stdout).unwrap()).len(), 2);
    let output = millpond(dir, &["consume", "t"], "");
    assert!(!String::from_utf8(output.stderr).unwrap().contains("warning"), "the cut is reported once");
}

#[test]
fn internal_topics_refuse_outside_writes_and_need_force_to_delete() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ok(dir, &["topic", "create", "t"], "");
    ok(dir, &["consume", "t", "--group", "g"], "");
    for args in [&["produce", "__consumer_offsets"][..], &["produce", "__consumer_offsets", "--partition", "0"]] {
        let error = fails(dir, args, "garbage\n");
        assert!(error.contains("topic '__consumer_offsets' is internal"), "{error}");
    }
    // The directory still opens, and the group's offsets are intact.
    let list: serde_json::Value = serde_json::from_str(&ok(dir, &["topic", "list", "--json"], "")).unwrap();
    assert!(list.as_array().unwrap().iter().any(|t| t["name"] == "__consumer_offsets" && t["internal"] == true));
    ok(dir, &["produce", "t"], "a\n");
    assert_eq!(json_lines(&ok(dir, &["consume", "t", "--group", "g"], "")).len(), 1);

    ok(dir, &["topic", "create", "__mine"], "");
    let error = fails(dir, &["topic", "delete", "__mine"], "");
    assert!(error.contains("'__mine' is internal") && error.contains("deleted"), "{error}");
    ok(dir, &["topic", "delete", "__mine", "--force"], "");
    let error = fails(dir, &["topic", "describe", "__mine"], "");
    assert!(error.contains("unknown topic"), "{error}");
    let error = fails(dir, &["topic", "delete", "__consumer_offsets", "--force"], "");
    assert!(error.contains("even by force"), "{error}");
}

#[test]
fn topic_describe_prints_settings_as_the_flags_spell_them() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ok(
        dir,
        &[
            "topic",
            "create",
            "t",
            "--partitions",
            "2",
            "--retention-ms",
            "86400000",
            "--cleanup-policy",
            "compact,delete",
        ],
        "",
    );
    let text = ok(dir, &["topic", "describe", "t"], "");
    let first = text.lines().next().unwrap();
    for setting in [
        "partitions=2",
        "retention-ms=86400000",
        "retention-bytes=none",
        "cleanup-policy=compact,delete",
        "flush=durable",
    ] {
        assert!(first.contains(setting), "{setting} in {first}");
    }
    assert!(!first.contains("Some(") && !first.contains("CompactDelete"), "{first}");
    let described: serde_json::Value =
        serde_json::from_str(&ok(dir, &["topic", "describe", "t", "--json"], "")).unwrap();
    let id = described["id"].as_str().unwrap();
    assert!(first.contains(id) && id.len() == 32, "the topic id: {first}");
}

#[test]
fn run_and_sql_report_what_recovery_cut() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ok(dir, &["topic", "create", "t"], "");
    ok(dir, &["produce", "t"], "{\"k\":1}\n{\"k\":2}\n");
    // A torn tail: half of a batch header after the last whole batch.
    let segment = only_segment(dir, "t");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 2, 0, 0]);
    std::fs::write(&segment, &bytes).unwrap();
    let file = dir.join("v.sql");
    std::fs::write(&file, "CREATE SOURCE t (k BIGINT) FROM TOPIC 't' FORMAT JSON;\nCREATE MATERIALIZED VIEW n AS SELECT COUNT(*) AS n FROM t;").unwrap();
    let output = millpond(dir, &["run", file.to_str().unwrap(), "--until-caught-up", "--epoch-ms", "50"], "");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("warning: recovery cut"), "run says what recovery cut: {stderr}");
    assert_eq!(json_lines(&ok(dir, &["view", "read", "n"], "")), [serde_json::json!({"n": 2})]);
}

/// `--state-cache-mib` caps RocksDB's block cache (its LOG says the
/// capacity it opened with), and a cap of 0 is refused before anything runs.
#[test]
fn run_caps_the_state_cache_as_told() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    ok(dir, &["topic", "create", "t"], "");
    ok(dir, &["produce", "t"], "{\"k\":1}\n");
    let file = dir.join("v.sql");
    std::fs::write(&file, "CREATE SOURCE t (k BIGINT) FROM TOPIC 't' FORMAT JSON;\nCREATE MATERIALIZED VIEW n AS SELECT k, COUNT(*) AS c FROM t GROUP BY k;").unwrap();
    let file = file.to_str().unwrap();
    let refused = fails(dir, &["run", file, "--until-caught-up", "--state-cache-mib", "0"], "");
    assert!(refused.contains("--state-cache-mib"), "{refused}");
    ok(dir, &["run", file, "--until-caught-up", "--epoch-ms", "50", "--state-cache-mib", "8"], "");
    let log = std::fs::read_to_string(dir.join("state").join("LOG")).unwrap();
    assert!(log.contains(&format!("capacity : {}", 8 << 20)), "RocksDB opened with an 8 MiB cache");
    assert!(!log.contains(&format!("capacity : {}", 256 << 20)), "not the default cache");
}

/// Kills the demo if the test fails before it stops it.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_live_demo_serves_the_nexmark_views_while_it_feeds_them() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_millpond"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["demo", "--pg-listen", "127.0.0.1:0", "--rate", "1000", "--epoch-ms", "100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut demo = Running(child);
    let mut lines = BufReader::new(demo.0.stdout.take().unwrap()).lines();
    // The first line names the address; a later one the psql line to watch.
    let first = lines.next().unwrap().unwrap();
    let address = first.split("postgres://").nth(1).and_then(|a| a.split(':').nth(1)).unwrap();
    let port: String = address.chars().take_while(char::is_ascii_digit).collect();
    let printed: Vec<String> = (0..3).map(|_| lines.next().unwrap().unwrap()).collect();
    assert!(printed.iter().any(|l| l.contains("COPY (SUBSCRIBE nexmark_q5")), "{printed:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let output = Command::new("psql")
            .args(["-h", "127.0.0.1", "-p", &port, "-U", "demo", "-X", "-A", "-t"])
            .args(["-c", "SELECT COUNT(*) FROM nexmark_q4"])
            .output()
            .expect("psql runs");
        let count: u64 = String::from_utf8_lossy(&output.stdout).trim().parse().unwrap_or(0);
        if count > 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "nexmark_q4 never filled: {output:?}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // SIGTERM: a clean stop that says how far the stream got.
    assert!(Command::new("kill").args(["-TERM", &demo.0.id().to_string()]).status().unwrap().success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(demo.0.wait().unwrap().success());
    assert!(rest.iter().any(|l| l.starts_with("stopped after ")), "{rest:?}");
}
