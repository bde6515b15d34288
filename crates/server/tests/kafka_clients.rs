//! Unmodified Kafka clients against the Kafka endpoint: Debian's kcat
//! (librdkafka 2.0.2, the oldest client served), Python's confluent-kafka,
//! kafka-python and aiokafka, and Apache Kafka's own Java tools (4.4.0);
//! `.ci/run` installs them all. Keyed records produced (in every codec),
//! consumed back from an offset, from a time and in groups, offsets
//! queried by time, topics created and described, groups described and reset;
//! Kafka's transactional copier (the Java client) read back with read_committed.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use millpond_server::{Engine, EngineConfig, KafkaConfig, KafkaEndpoint};

fn start(dir: &std::path::Path) -> (Arc<Engine>, KafkaEndpoint) {
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir) }).unwrap();
    let endpoint = KafkaEndpoint::start(engine.clone(), KafkaConfig::new("127.0.0.1:0".parse().unwrap())).unwrap();
    (engine, endpoint)
}

/// Runs `command` with `input` on its stdin; its stdout, once it succeeded.
fn run(mut command: Command, input: Option<&str>, missing: &str) -> String {
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect(missing);
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        stdin.write_all(input.as_bytes()).unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{command:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

/// Runs kcat with `args` (and `input` on its stdin); its stdout.
fn kcat(broker: &str, args: &[&str], input: Option<&str>) -> String {
    let mut command = Command::new("kcat");
    command.arg("-b").arg(broker).args(args);
    run(command, input, "kcat is not installed: `apt-get install kcat` (.ci/run installs it)")
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
    // An idempotent producer (InitProducerId, then sequenced batches).
    let idempotent = ["-P", "-t", "clicks", "-K:", "-X", "enable.idempotence=true"];
    kcat(&broker, &idempotent, Some("i1:x\ni2:y\n"));
    let tail = kcat(&broker, &["-C", "-t", "clicks", "-o", "51", "-e", "-f", "%o %k\\n"], None);
    assert_eq!(tail.lines().collect::<Vec<_>>(), vec!["51 i1", "52 i2"]);
}

/// A kcat consumer of group `group` running in the background, its
/// records (`partition offset key`) going to `out`.
fn group_consumer(
    broker: &str,
    group: &str,
    topic: &str,
    out: &std::path::Path,
    exit_at_end: bool,
) -> std::process::Child {
    let file = std::fs::File::create(out).unwrap();
    let mut command = Command::new("kcat");
    command
        .args(["-b", broker, "-G", group, topic, "-f", "%p %o %k\\n", "-q", "-u"])
        .args(["-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=300"])
        .args(["-X", "auto.commit.interval.ms=100", "-X", "auto.offset.reset=earliest"])
        .stdout(file)
        .stderr(Stdio::null());
    if exit_at_end {
        command.arg("-e");
    }
    command.spawn().expect("kcat is not installed: `apt-get install kcat` (.ci/run installs it)")
}

fn lines_of(paths: &[std::path::PathBuf]) -> Vec<String> {
    paths
        .iter()
        .flat_map(|p| std::fs::read_to_string(p).unwrap_or_default().lines().map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Sends SIGTERM (kcat then commits its offsets and leaves its group) and waits.
fn stop(mut child: std::process::Child) {
    let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
    child.wait().unwrap();
}

#[test]
fn a_group_of_three_kcat_consumers_rebalances_as_one_leaves_and_resumes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir.path()) }).unwrap();
    let mut config = KafkaConfig::new("127.0.0.1:0".parse().unwrap());
    config.auto_create_partitions = Some(3);
    let endpoint = KafkaEndpoint::start(engine.clone(), config).unwrap();
    let broker = endpoint.addr().to_string();
    let produce = |from: usize, to: usize| {
        let lines: Vec<String> = (from..to).map(|i| format!("k{i}:v{i}")).collect();
        kcat(&broker, &["-P", "-t", "orders", "-K:"], Some(&(lines.join("\n") + "\n")));
    };
    produce(0, 60);
    let outs: Vec<std::path::PathBuf> = (0..3).map(|i| work.path().join(format!("c{i}.txt"))).collect();
    let mut consumers: Vec<std::process::Child> =
        outs.iter().map(|out| group_consumer(&broker, "billing", "orders", out, false)).collect();
    wait_until("the three consumers read the 60 records", || lines_of(&outs).len() >= 60);
    let per_consumer: Vec<usize> = outs.iter().map(|o| lines_of(std::slice::from_ref(o)).len()).collect();
    assert!(per_consumer.iter().all(|&n| n > 0), "each of three members got a partition: {per_consumer:?}");

    // One leaves: the other two take its partition over, from its commit.
    stop(consumers.remove(0));
    produce(60, 120);
    wait_until("the two left read the next 60", || {
        lines_of(&outs[1..]).iter().filter(|l| l.contains(" k")).count() + per_consumer[0] >= 120
    });
    let mut seen = lines_of(&outs);
    let total = seen.len();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), total, "no record was delivered twice");
    let keys: std::collections::BTreeSet<String> =
        seen.iter().map(|l| l.rsplit(' ').next().unwrap().to_owned()).collect();
    assert_eq!(keys, (0..120).map(|i| format!("k{i}")).collect(), "every record was delivered");
    for consumer in consumers {
        stop(consumer);
    }

    // The committed offsets outlive the server: a new member reads only what came after.
    drop(endpoint);
    engine.shutdown().unwrap();
    drop(engine);
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir.path()) }).unwrap();
    let endpoint = KafkaEndpoint::start(engine.clone(), KafkaConfig::new("127.0.0.1:0".parse().unwrap())).unwrap();
    let broker = endpoint.addr().to_string();
    let lines: Vec<String> = (120..130).map(|i| format!("k{i}:v{i}")).collect();
    kcat(&broker, &["-P", "-t", "orders", "-K:"], Some(&(lines.join("\n") + "\n")));
    let out = work.path().join("after.txt");
    let consumer = group_consumer(&broker, "billing", "orders", &out, true);
    let output = consumer.wait_with_output().unwrap();
    assert!(output.status.success());
    let mut keys: Vec<String> = lines_of(&[out]).iter().map(|l| l.rsplit(' ').next().unwrap().to_owned()).collect();
    keys.sort();
    let mut expected: Vec<String> = (120..130).map(|i| format!("k{i}")).collect();
    expected.sort();
    assert_eq!(keys, expected, "resumed at the committed offsets");
}

/// Runs tests/kafka/python_clients.py against `addr` with `args`; its stdout.
fn python_clients(addr: std::net::SocketAddr, args: &[&str]) -> String {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/python_clients.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg(addr.to_string())
        .args(args)
        .output()
        .expect("python3 runs (pip install confluent-kafka kafka-python aiokafka; .ci/run does)");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "python_clients.py {args:?} failed:\n{stdout}\n{stderr}");
    stdout
}

#[test]
fn pythons_kafka_clients_produce_consume_in_groups_and_find_offsets_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = start(dir.path());
    let stdout = python_clients(endpoint.addr(), &[]);
    for client in ["confluent-kafka: ok", "kafka-python: ok", "aiokafka: ok"] {
        assert!(stdout.contains(client), "{client} missing from:\n{stdout}");
    }
    // Each client's group resumes at its committed offset in a restarted server.
    drop((endpoint, engine));
    let (_engine, endpoint) = start(dir.path());
    assert!(python_clients(endpoint.addr(), &["after-restart"]).contains("after restart: ok"));
}

#[test]
fn batches_in_every_codec_are_consumed_as_produced_and_read_by_a_view() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = start(dir.path());
    engine
        .execute(
            "CREATE SOURCE ev (k BIGINT) FROM TOPIC 'zipped' FORMAT JSON; \
             CREATE MATERIALIZED VIEW c AS SELECT COUNT(*) AS n, SUM(k) AS s FROM ev",
        )
        .unwrap();
    let broker = endpoint.addr().to_string();
    let mut expected_sum = 0;
    for (i, codec) in ["none", "gzip", "snappy", "lz4", "zstd"].iter().enumerate() {
        let lines: Vec<String> = (0..100).map(|j| format!("{{\"k\":{}}}", i * 100 + j)).collect();
        expected_sum += (0..100).map(|j| i * 100 + j).sum::<usize>();
        kcat(&broker, &["-P", "-t", "zipped", "-z", codec, "-X", "linger.ms=50"], Some(&(lines.join("\n") + "\n")));
    }
    // Each codec's records come back to a Kafka consumer whole and in order per partition.
    let consumed = kcat(&broker, &["-C", "-t", "zipped", "-o", "beginning", "-e", "-f", "%s\\n"], None);
    let mut values: Vec<u64> =
        consumed.lines().map(|l| l.trim_start_matches("{\"k\":").trim_end_matches('}').parse().unwrap()).collect();
    values.sort_unstable();
    assert_eq!(values, (0..500).collect::<Vec<u64>>());
    // The runtime's source decodes every codec: the view counts all 500.
    let wanted = format!("{{\"n\":500,\"s\":{expected_sum}}}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let changelog = kcat(&broker, &["-C", "-t", "view.c", "-o", "beginning", "-e", "-f", "%k\\n"], None);
        if changelog.lines().any(|row| row == wanted) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the view never reached {wanted}: {changelog}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Runs a class of Apache Kafka's jars (`benches/kafka/pom.xml`, fetched by
/// .ci/run) with `args`, `input` on its stdin; its stdout.
fn kafka_tool(class: &str, args: &[&str], input: Option<&str>) -> String {
    let jars = std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/millpond/kafka-4.4.0");
    assert!(
        jars.join("kafka-tools-4.4.0.jar").exists(),
        "Apache Kafka's jars are not in {}: mvn -q -f benches/kafka/pom.xml dependency:copy-dependencies \
         -DoutputDirectory={} (.ci/run does)",
        jars.display(),
        jars.display()
    );
    let mut command = Command::new("java");
    command.arg("-cp").arg(format!("{}/*", jars.display())).arg(class).args(args);
    run(command, input, "java runs")
}

#[test]
fn kafkas_own_tools_create_describe_produce_consume_and_reset_a_group() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = start(dir.path());
    let server = endpoint.addr().to_string();
    let bootstrap = ["--bootstrap-server", server.as_str()];
    let topics = "org.apache.kafka.tools.TopicCommand";
    let create =
        [&bootstrap[..], &["--create", "--topic", "jt", "--partitions", "3", "--config", "retention.ms=60000"]]
            .concat();
    assert!(kafka_tool(topics, &create, None).contains("Created topic jt."));
    let described = kafka_tool(topics, &[&bootstrap[..], &["--describe", "--topic", "jt"]].concat(), None);
    assert!(described.contains("PartitionCount: 3") && described.contains("retention.ms=60000"), "{described}");
    // The console producer is idempotent by default (InitProducerId,
    // sequenced batches); six records in each codec.
    let produce = [
        &bootstrap[..],
        &["--topic", "jt", "--reader-property", "parse.key=true", "--reader-property", "key.separator=:"],
    ]
    .concat();
    for (c, codec) in ["none", "gzip", "snappy", "lz4", "zstd"].iter().enumerate() {
        let lines: String = (c * 6..c * 6 + 6).map(|i| format!("key{i}:value{i}\n")).collect();
        let args = [&produce[..], &["--compression-codec", codec]].concat();
        kafka_tool("org.apache.kafka.tools.ConsoleProducer", if c == 0 { &produce } else { &args }, Some(&lines));
    }
    assert_eq!(engine.records_in("jt").unwrap(), 30);
    let consume =
        [&bootstrap[..], &["--topic", "jt", "--from-beginning", "--max-messages", "30", "--group", "jg"]].concat();
    let consumed = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", &consume, None);
    let mut values: Vec<&str> = consumed.lines().collect();
    values.sort_unstable();
    let mut expected: Vec<String> = (0..30).map(|i| format!("value{i}")).collect();
    expected.sort_unstable();
    assert_eq!(values, expected);
    // The group's committed offsets, as kafka-consumer-groups shows them, then reset.
    let groups = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
    let lag = |table: &str| -> Vec<(String, String)> {
        table
            .lines()
            .filter(|l| l.starts_with("jg "))
            .map(|l| {
                let fields: Vec<&str> = l.split_whitespace().collect();
                (fields[3].to_owned(), fields[5].to_owned())
            })
            .collect()
    };
    let describe = [&bootstrap[..], &["--describe", "--group", "jg"]].concat();
    let before = lag(&kafka_tool(groups, &describe, None));
    assert_eq!(before.len(), 3, "one row a partition: {before:?}");
    assert!(before.iter().all(|(_, lag)| lag == "0"), "consumed to the end: {before:?}");
    let reset =
        [&bootstrap[..], &["--reset-offsets", "--to-earliest", "--group", "jg", "--topic", "jt", "--execute"]].concat();
    kafka_tool(groups, &reset, None);
    let after = lag(&kafka_tool(groups, &describe, None));
    assert!(after.iter().all(|(current, _)| current == "0"), "reset to the earliest offsets: {after:?}");
    let listed = kafka_tool(groups, &[&bootstrap[..], &["--list"]].concat(), None);
    assert!(listed.lines().any(|l| l.trim() == "jg"), "{listed}");
    let config_tool = "org.apache.kafka.tools.ConfigCommand";
    let entity = ["--entity-type", "topics", "--entity-name", "jt"];
    let configs = [&bootstrap[..], &entity[..], &["--describe"]].concat();
    assert!(kafka_tool(config_tool, &configs, None).contains("retention.ms=60000"));
    // kafka-configs --alter (IncrementalAlterConfigs): set, then delete back to the default.
    let add = [&bootstrap[..], &entity[..], &["--alter", "--add-config", "retention.ms=90000,segment.bytes=200000"]];
    kafka_tool(config_tool, &add.concat(), None);
    let shown = kafka_tool(config_tool, &configs, None);
    assert!(shown.contains("retention.ms=90000") && shown.contains("segment.bytes=200000"), "{shown}");
    kafka_tool(
        config_tool,
        &[&bootstrap[..], &entity[..], &["--alter", "--delete-config", "segment.bytes"]].concat(),
        None,
    );
    assert!(kafka_tool(config_tool, &configs, None).contains("segment.bytes=1073741824"));
    // kafka-topics --alter --partitions (CreatePartitions): the new partitions take records.
    kafka_tool(topics, &[&bootstrap[..], &["--alter", "--topic", "jt", "--partitions", "5"]].concat(), None);
    let described = kafka_tool(topics, &[&bootstrap[..], &["--describe", "--topic", "jt"]].concat(), None);
    assert!(described.contains("PartitionCount: 5"), "{described}");
    let lines: String = (30..230).map(|i| format!("key{i}:value{i}\n")).collect();
    kafka_tool("org.apache.kafka.tools.ConsoleProducer", &produce, Some(&lines));
    assert_eq!(engine.records_in("jt").unwrap(), 230);
    // By offset (the console consumer at a partition and offset) and by time
    // (kafka-get-offsets --time: ListOffsets with a timestamp).
    let first_of_0 = [&bootstrap[..], &["--topic", "jt", "--partition", "0", "--offset", "0", "--max-messages", "1"]];
    let first_value = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", &first_of_0.concat(), None);
    assert!(first_value.lines().any(|l| l.starts_with("value")), "{first_value}");
    let by_time = [&bootstrap[..], &["--topic", "jt", "--partitions", "0", "--time", "0"]].concat();
    let at_zero = kafka_tool("org.apache.kafka.tools.GetOffsetShell", &by_time, None);
    assert_eq!(at_zero.trim(), "jt:0:0", "the first record at or after time 0 is offset 0");
    let far = [&bootstrap[..], &["--topic", "jt", "--partitions", "0", "--time", "99999999999999"]].concat();
    let after_all = kafka_tool("org.apache.kafka.tools.GetOffsetShell", &far, None);
    // No record that late: offset -1, which the tool leaves out (as with Kafka).
    assert!(after_all.trim().is_empty(), "no record that late: {after_all}");
    // kafka-get-offsets: each partition's end offset.
    let ends =
        kafka_tool("org.apache.kafka.tools.GetOffsetShell", &[&bootstrap[..], &["--topic", "jt"]].concat(), None);
    let added: u64 = ends
        .lines()
        .filter(|l| l.starts_with("jt:3:") || l.starts_with("jt:4:"))
        .map(|l| l.rsplit(':').next().unwrap().trim().parse::<u64>().unwrap())
        .sum();
    assert!(ends.lines().count() == 5 && added > 0, "keys reach the added partitions: {ends}");
}

/// kcat with `args`: whether it succeeded, and its stdout.
fn kcat_status(broker: &str, args: &[&str]) -> (bool, String) {
    let output =
        Command::new("kcat").arg("-b").arg(broker).args(args).stdin(Stdio::null()).output().expect("kcat runs");
    (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn with_a_password_only_clients_that_authenticate_with_sasl_plain_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir.path()) }).unwrap();
    let mut config = KafkaConfig::new("127.0.0.1:0".parse().unwrap());
    config.password = Some("s3cret".to_owned());
    let endpoint = KafkaEndpoint::start(engine.clone(), config).unwrap();
    let broker = endpoint.addr().to_string();
    let sasl = |password: &str| {
        ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=anyone"]
            .into_iter()
            .map(str::to_owned)
            .chain(["-X".to_owned(), format!("sasl.password={password}")])
            .collect::<Vec<String>>()
    };
    let with = |password: &str, rest: &[&str]| {
        let mut args: Vec<String> = sasl(password);
        args.extend(rest.iter().map(|s| (*s).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kcat_status(&broker, &args)
    };
    let (ok, listing) = with("s3cret", &["-L", "-m", "5"]);
    assert!(ok && listing.contains("1 brokers:"), "{listing}");
    let mut child = Command::new("kcat")
        .args(["-b", &broker, "-P", "-t", "secure"])
        .args(sasl("s3cret"))
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"one\ntwo\n").unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(engine.records_in("secure").unwrap(), 2);
    let (ok, _) = with("wrong", &["-L", "-m", "3"]);
    assert!(!ok, "a wrong password was served");
    let (ok, _) = kcat_status(&broker, &["-L", "-m", "3"]);
    assert!(!ok, "a client without SASL was served");
    assert_eq!(engine.records_in("secure").unwrap(), 2);
}

/// Kafka's console consumer in group `group` in the background, printing
/// `key value` lines to `out`; it commits every 100 ms and, on SIGTERM,
/// commits and leaves its group.
fn java_group_consumer(broker: &str, group: &str, topic: &str, out: &std::path::Path) -> std::process::Child {
    let jars = std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/millpond/kafka-4.4.0");
    let mut command = Command::new("java");
    command.arg("-cp").arg(format!("{}/*", jars.display())).arg("org.apache.kafka.tools.consumer.ConsoleConsumer");
    command.args(["--bootstrap-server", broker, "--topic", topic, "--group", group, "--from-beginning"]);
    command.args(["--property", "print.key=true", "--property", "key.separator= "]);
    for setting in ["session.timeout.ms=6000", "heartbeat.interval.ms=300", "auto.commit.interval.ms=100"] {
        command.args(["--consumer-property", setting]);
    }
    command.stdout(std::fs::File::create(out).unwrap()).stderr(Stdio::null());
    command.spawn().expect("java runs")
}

#[test]
fn a_group_of_three_java_console_consumers_rebalances_as_one_leaves_and_resumes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let (engine, endpoint) = start(dir.path());
    let broker = endpoint.addr().to_string();
    let bootstrap = ["--bootstrap-server", broker.as_str()];
    let topics = "org.apache.kafka.tools.TopicCommand";
    kafka_tool(topics, &[&bootstrap[..], &["--create", "--topic", "jtrio", "--partitions", "3"]].concat(), None);
    let groups = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
    let members = |group: &str| -> Vec<String> {
        let table =
            kafka_tool(groups, &[&bootstrap[..], &["--describe", "--members", "--group", group]].concat(), None);
        table
            .lines()
            .filter(|l| l.starts_with(group))
            .map(|l| l.split_whitespace().last().unwrap().to_owned())
            .collect()
    };
    let produce = |from: usize, to: usize| {
        let lines: String = (from..to).map(|i| format!("k{i}:v{i}\n")).collect();
        let args = [&bootstrap[..], &["--topic", "jtrio", "--reader-property", "parse.key=true"]].concat();
        let args = [&args[..], &["--reader-property", "key.separator=:"]].concat();
        kafka_tool("org.apache.kafka.tools.ConsoleProducer", &args, Some(&lines));
    };
    let outs: Vec<std::path::PathBuf> = (0..3).map(|i| work.path().join(format!("j{i}.txt"))).collect();
    let mut consumers: Vec<std::process::Child> =
        outs.iter().map(|out| java_group_consumer(&broker, "jtrio-g", "jtrio", out)).collect();
    // Records come once the group is formed (one partition each), so no rebalance rereads them.
    wait_until("three members with a partition each", || members("jtrio-g") == ["1", "1", "1"]);
    produce(0, 60);
    // Record lines only (the tool also prints notices of deprecated options).
    let keys_of = |outs: &[std::path::PathBuf]| -> Vec<String> {
        let lines = lines_of(outs);
        lines.iter().filter(|l| l.starts_with('k')).map(|l| l.split(' ').next().unwrap().to_owned()).collect()
    };
    wait_until("the three read the 60 records", || keys_of(&outs).len() >= 60);
    stop(consumers.remove(0));
    wait_until("two members hold the three partitions", || {
        let held = members("jtrio-g");
        held.len() == 2 && held.iter().map(|n| n.parse::<usize>().unwrap()).sum::<usize>() == 3
    });
    produce(60, 120);
    wait_until("the two left read the next 60", || keys_of(&outs).len() >= 120);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut keys = keys_of(&outs);
    keys.sort();
    let mut expected: Vec<String> = (0..120).map(|i| format!("k{i}")).collect();
    expected.sort();
    assert_eq!(keys, expected, "every record once, the leaver's partition taken over from its commit");
    for consumer in consumers {
        stop(consumer);
    }
    // The committed offsets outlive the server: a new member reads only what came after.
    drop((endpoint, engine));
    let (_engine, endpoint) = start(dir.path());
    let broker = endpoint.addr().to_string();
    let bootstrap = ["--bootstrap-server", broker.as_str()];
    let lines: String = (120..130).map(|i| format!("k{i}:v{i}\n")).collect();
    let args = [&bootstrap[..], &["--topic", "jtrio", "--reader-property", "parse.key=true"]].concat();
    let args = [&args[..], &["--reader-property", "key.separator=:"]].concat();
    kafka_tool("org.apache.kafka.tools.ConsoleProducer", &args, Some(&lines));
    let consume = [&bootstrap[..], &["--topic", "jtrio", "--group", "jtrio-g", "--max-messages", "10"]].concat();
    let consume = [&consume[..], &["--property", "print.key=true", "--property", "key.separator= "]].concat();
    let consumed = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", &consume, None);
    let mut keys: Vec<&str> =
        consumed.lines().filter(|l| l.starts_with('k')).map(|l| l.split(' ').next().unwrap()).collect();
    keys.sort_unstable();
    let mut expected: Vec<String> = (120..130).map(|i| format!("k{i}")).collect();
    expected.sort();
    assert_eq!(keys, expected, "resumed at the committed offsets");
}

#[test]
fn kafkas_transactional_copier_copies_exactly_once_through_random_aborts() {
    let dir = tempfile::tempdir().unwrap();
    let (_engine, endpoint) = start(dir.path());
    let broker = endpoint.addr().to_string();
    let lines: Vec<String> = (0..1000).map(|i| format!("v{i}")).collect();
    kcat(&broker, &["-P", "-t", "jin"], Some(&(lines.join("\n") + "\n")));
    // Kafka's own transactional copier (the Java producer and consumer,
    // offsets sent to each transaction), aborting transactions at random
    // and copying them again.
    let progress = kafka_tool(
        "org.apache.kafka.tools.TransactionalMessageCopier",
        &[
            "--broker-list",
            &broker,
            "--input-topic",
            "jin",
            "--input-partition",
            "0",
            "--output-topic",
            "jout",
            "--transactional-id",
            "copier",
            "--consumer-group",
            "copiers",
            "--transaction-size",
            "50",
            "--enable-random-aborts",
            "--use-group-metadata",
        ],
        None,
    );
    assert!(progress.contains(r#""stage":"ShutdownComplete""#) && progress.contains(r#""remaining":0"#), "{progress}");
    // read_committed (kcat: librdkafka 2.0.2) reads each input record once, in order.
    let committed = kcat(
        &broker,
        &["-C", "-t", "jout", "-o", "beginning", "-e", "-q", "-X", "isolation.level=read_committed"],
        None,
    );
    assert_eq!(committed.lines().collect::<Vec<_>>(), lines);
    let everything = kcat(
        &broker,
        &["-C", "-t", "jout", "-o", "beginning", "-e", "-q", "-X", "isolation.level=read_uncommitted"],
        None,
    );
    let copied = everything.lines().count();
    assert!(copied >= 1000, "read_uncommitted reads the aborted copies too: {copied}");
    let described = kafka_tool(
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        &["--bootstrap-server", &broker, "--describe", "--group", "copiers"],
        None,
    );
    let row: Vec<&str> = described.lines().find(|l| l.starts_with("copiers")).unwrap().split_whitespace().collect();
    assert_eq!(row[1..5], ["jin", "0", "1000", "1000"], "the group committed with the transactions: {described}");
    eprintln!("copier: {copied} records written, 1000 committed");
}
