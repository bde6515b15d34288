//! Fan-out: 1000 concurrent subscribers on one view, each a changelog
//! reader of its own (no dataflow per subscriber), all getting every
//! change, while one deliberately stalled subscriber of another view (its
//! client never reads) is dropped with 53200 once its buffer stays full,
//! and nobody else notices; and a burst larger than a view's shared ring,
//! which a fast subscriber follows in full while a slow one is dropped.
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use millpond_server::{Engine, EngineConfig, PgConfig, PgEndpoint};
use tokio_postgres::NoTls;

const SUBSCRIBERS: usize = 1000;
const CHANGES: usize = 200;
/// Rows the view holds before anyone subscribes.
const VIEW_ROWS: usize = 20_000;

/// The test process's resident memory, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// A client that asks for a stream and then reads nothing, ever.
fn stalled_subscriber(addr: SocketAddr, sql: &str) -> std::net::TcpStream {
    let mut socket = std::net::TcpStream::connect(addr).unwrap();
    let mut startup = Vec::new();
    startup.extend_from_slice(&196_608i32.to_be_bytes());
    startup.extend_from_slice(b"user\0millpond\0\0");
    let mut message = ((startup.len() + 4) as i32).to_be_bytes().to_vec();
    message.extend_from_slice(&startup);
    message.push(b'Q');
    message.extend_from_slice(&((sql.len() + 5) as i32).to_be_bytes());
    message.extend_from_slice(sql.as_bytes());
    message.push(0);
    socket.write_all(&message).unwrap();
    socket
}

async fn wait_for(what: &str, deadline_s: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(deadline_s);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_subscribers_get_every_change_and_a_stalled_one_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir.path()) }).unwrap();
    let mut config = PgConfig::new("127.0.0.1:0".parse().unwrap());
    config.connections_max = SUBSCRIBERS + 16;
    config.subscriber_stall_ms = 2_000;
    let endpoint = PgEndpoint::start(engine.clone(), config).unwrap();
    let addr = endpoint.addr();
    let url = format!("host={} port={} user=millpond", addr.ip(), addr.port());
    let (admin, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    admin
        .batch_execute(
            "CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT); CREATE TABLE big (k BIGINT PRIMARY KEY, pad TEXT);\n\
             CREATE MATERIALIZED VIEW v AS SELECT k, v FROM t; CREATE MATERIALIZED VIEW bigv AS SELECT k, pad FROM big",
        )
        .await
        .unwrap();
    // A view with rows already: a subscriber's memory must not grow with them.
    let rows: Vec<String> = (0..VIEW_ROWS).map(|i| format!("({}, {i})", 1_000_000 + i)).collect();
    admin.batch_execute(&format!("INSERT INTO t VALUES {}", rows.join(", "))).await.unwrap();
    let counted = admin.simple_query("SELECT COUNT(*) FROM v").await.unwrap(); // committed, with the rows
    assert!(
        matches!(&counted[1], tokio_postgres::SimpleQueryMessage::Row(r) if r.get(0) == Some(VIEW_ROWS.to_string().as_str()))
    );

    let before_kib = rss_kib();
    let mut subscribers = Vec::new();
    for _ in 0..SUBSCRIBERS {
        let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(connection);
        subscribers.push(tokio::spawn(async move {
            let mut stream = Box::pin(client.copy_out("SUBSCRIBE v WITH (SNAPSHOT = false)").await.unwrap());
            let mut lines = 0;
            while lines < CHANGES {
                let chunk = stream.next().await.expect("the stream goes on").expect("no error");
                lines += chunk.iter().filter(|b| **b == b'\n').count();
            }
            lines
        }));
    }
    let gauges = endpoint.gauges();
    wait_for("every subscriber to start", 120, || gauges.subscribers.load(Ordering::Relaxed) == SUBSCRIBERS).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let per_subscriber_kib = rss_kib().saturating_sub(before_kib) as f64 / SUBSCRIBERS as f64;
    eprintln!(
        "idle subscribers of a {VIEW_ROWS}-row view: {per_subscriber_kib:.1} KiB each (test process RSS, server and client side)"
    );

    // The stalled subscriber; its view's changes (16 MiB) overflow its socket.
    let _stalled = stalled_subscriber(addr, "COPY (SUBSCRIBE bigv) TO STDOUT");
    wait_for("the stalled subscriber to start", 60, || gauges.subscribers.load(Ordering::Relaxed) == SUBSCRIBERS + 1)
        .await;
    let pad = "x".repeat(400);
    for batch in 0..40 {
        let rows: Vec<String> = (0..1000).map(|i| format!("({}, '{pad}')", batch * 1000 + i)).collect();
        admin.batch_execute(&format!("INSERT INTO big VALUES {}", rows.join(", "))).await.unwrap();
    }
    wait_for("the stalled subscriber to be dropped", 120, || gauges.subscribers.load(Ordering::Relaxed) == SUBSCRIBERS)
        .await;

    // Everyone else gets every change of v.
    let started = Instant::now();
    for k in 0..CHANGES {
        admin.batch_execute(&format!("INSERT INTO t VALUES ({k}, {k})")).await.unwrap();
    }
    for subscriber in subscribers {
        let lines = tokio::time::timeout(Duration::from_secs(120), subscriber).await.expect("in time").unwrap();
        assert_eq!(lines, CHANGES);
    }
    eprintln!("{SUBSCRIBERS} subscribers got {CHANGES} changes each in {:?}", started.elapsed());
    drop(endpoint);
    engine.shutdown().unwrap();
}

/// Change rows (mp_progressed false) in COPY text with PROGRESS.
fn change_rows(chunk: &[u8]) -> usize {
    chunk.split(|b| *b == b'\n').filter(|line| line.split(|b| *b == b'\t').nth(1) == Some(b"f")).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_shared_buffer_drops_the_slow_subscriber_and_not_the_fast() {
    const BATCHES: usize = 40;
    const ROWS_PER_BATCH: usize = 1000;
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir.path()) }).unwrap();
    let mut config = PgConfig::new("127.0.0.1:0".parse().unwrap());
    config.subscriber_buffer_bytes = 8 << 20;
    config.subscriber_stall_ms = 120_000; // not a stall: the slow one reads
    let endpoint = PgEndpoint::start(engine.clone(), config).unwrap();
    let addr = endpoint.addr();
    let url = format!("host={} port={} user=millpond", addr.ip(), addr.port());
    let connect = || async {
        let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(connection);
        client
    };
    let admin = connect().await;
    admin
        .batch_execute("CREATE TABLE big (k BIGINT PRIMARY KEY, pad TEXT); CREATE MATERIALIZED VIEW bigv AS SELECT k, pad FROM big")
        .await
        .unwrap();
    let subscribe = "SUBSCRIBE bigv WITH (SNAPSHOT = false, PROGRESS)";
    // Each stream starts with a progress row of the epoch it starts after.
    let fast = connect().await;
    let mut fast = Box::pin(fast.copy_out(subscribe).await.unwrap());
    assert!(change_rows(&fast.next().await.unwrap().unwrap()) == 0, "a progress row first");
    let slow = connect().await;
    let mut slow = Box::pin(slow.copy_out(subscribe).await.unwrap());
    assert!(change_rows(&slow.next().await.unwrap().unwrap()) == 0, "a progress row first");
    let fast = tokio::spawn(async move {
        let mut rows = 0;
        while rows < BATCHES * ROWS_PER_BATCH {
            let chunk = fast.next().await.expect("the stream goes on");
            rows += change_rows(&chunk.unwrap_or_else(|e| panic!("after {rows} rows: {e:?}")));
        }
        rows
    });
    let slow = tokio::spawn(async move {
        let mut rows = 0;
        loop {
            match slow.next().await {
                Some(Ok(chunk)) => rows += change_rows(&chunk),
                Some(Err(error)) => return (rows, error),
                None => panic!("the slow stream ended without an error after {rows} rows"),
            }
            // About 1.6 rows a millisecond: a tenth of what the burst brings.
            if rows % 8 == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
    // 16 MB of changes (twice that encoded, with and without mp_progressed).
    let pad = "x".repeat(400);
    for batch in 0..BATCHES {
        let rows: Vec<String> =
            (0..ROWS_PER_BATCH).map(|i| format!("({}, '{pad}')", batch * ROWS_PER_BATCH + i)).collect();
        admin.batch_execute(&format!("INSERT INTO big VALUES {}", rows.join(", "))).await.unwrap();
    }
    let rows = tokio::time::timeout(Duration::from_secs(120), fast).await.expect("in time").unwrap();
    assert_eq!(rows, BATCHES * ROWS_PER_BATCH, "the fast subscriber got every change, once");
    let (slow_rows, error) = tokio::time::timeout(Duration::from_secs(120), slow).await.expect("in time").unwrap();
    let db = error.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "53200", "{}", db.message());
    assert!(db.message().contains("subscriber buffer"), "{}", db.message());
    assert!(slow_rows < BATCHES * ROWS_PER_BATCH, "the slow one fell behind after {slow_rows} rows");
    eprintln!("the slow subscriber was dropped after {slow_rows} of {} rows", BATCHES * ROWS_PER_BATCH);
    drop(endpoint);
    engine.shutdown().unwrap();
}

/// The nice value of each of this process's threads whose name (as the
/// kernel keeps it: 15 bytes) starts with `prefix`.
fn nice_of_threads(prefix: &str) -> Vec<i64> {
    let mut nices = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // After "pid (comm) ": field 3 (state) is index 0, so field 19 (nice) is 16.
        let fields: Vec<&str> = stat.rsplit_once(") ").map(|(_, rest)| rest).unwrap_or("").split(' ').collect();
        nices.push(fields[16].parse().unwrap());
    }
    nices
}

/// The dataflow (the runtime's run, its commit thread, timely workers and
/// state applier) runs at the engine's priority, though a client's
/// statement started the run; a hub (per change, not per subscriber) and
/// the client threads run below it, at the wire's nice value (a hub is
/// started by the engine's spawner, not the client thread that asked for
/// it, so it gets the nice value it was given, not its asker's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dataflow_runs_at_the_engines_priority_and_hubs_and_wire_threads_below_it() {
    let own = i64::from(rustix::process::getpriority_process(None).unwrap());
    assert!(own < 18, "the test needs room below its own priority (nice {own})");
    let wire = (own + 6).min(19);
    let fanout = i64::from(millpond_server::fanout_nice(wire as i32)).max(own);
    assert!(own < fanout && fanout == wire, "the hubs' nice {fanout} is the wire's {wire}, below {own}");
    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { epoch_interval_ms: 50, fanout_nice: fanout as i32, ..EngineConfig::new(dir.path()) };
    let engine = Engine::open(config).unwrap();
    let mut config = PgConfig::new("127.0.0.1:0".parse().unwrap());
    config.wire_nice = wire as i32;
    let endpoint = PgEndpoint::start(engine.clone(), config).unwrap();
    let addr = endpoint.addr();
    let url = format!("host={} port={} user=millpond", addr.ip(), addr.port());
    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute("CREATE TABLE t (k BIGINT PRIMARY KEY); CREATE MATERIALIZED VIEW v AS SELECT k FROM t")
        .await
        .unwrap();
    let mut stream = Box::pin(client.copy_out("COPY (SUBSCRIBE v WITH (PROGRESS)) TO STDOUT").await.unwrap());
    stream.next().await.unwrap().unwrap(); // the hub runs: it sent a row
    let hubs = nice_of_threads("millpond-fanou");
    assert!(hubs.contains(&fanout), "this engine's hub at nice {fanout}: {hubs:?}");
    let spawners = nice_of_threads("millpond-spawne");
    assert!(!spawners.is_empty() && spawners.iter().all(|&nice| nice == own), "spawners at {own}: {spawners:?}");
    // This endpoint's client threads run at the wire's nice (the other
    // tests of this binary run endpoints of their own at the default).
    let wire_threads = nice_of_threads("millpond-pg");
    assert!(wire_threads.contains(&wire), "client threads at nice {wire}: {wire_threads:?}");
    // The run that maintains the view started when a client thread created
    // it, yet runs at the engine's priority, and so do its commit thread,
    // workers and state applier.
    for runtime in ["millpond-runtim", "millpond-commit", "timely:work", "millpond-apply"] {
        let nices = nice_of_threads(runtime);
        assert!(!nices.is_empty() && nices.iter().all(|&nice| nice == own), "{runtime} at nice {own}: {nices:?}");
    }
    drop(stream);
    drop(endpoint);
    engine.shutdown().unwrap();
}
