//! `COPY (SUBSCRIBE ...) TO STDOUT` with the real psql, as a user runs it:
//! the snapshot, then each committed change as it commits, with progress
//! rows; UP TO ends the stream; psql's Ctrl-C (a cancel request) stops it
//! with 57014; errors carry their SQLSTATE. With tokio-postgres: a plain
//! `SUBSCRIBE` as COPY over the extended protocol, and cursors (`DECLARE
//! ... CURSOR FOR SUBSCRIBE`, `FETCH ... WITH (timeout)`, `CLOSE`).
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use tokio_postgres::{Client, SimpleQueryMessage};

mod common;
use common::{connect, serve};

/// psql, its stdout line-buffered (`stdbuf`: into a pipe, psql's stdio
/// would hold COPY rows until 4 KiB or the end; into a terminal it shows
/// each as it comes).
fn psql(addr: SocketAddr, sql: &str) -> Command {
    let mut command = Command::new("stdbuf");
    command
        .args(["-oL", "psql", "-X", "-h", &addr.ip().to_string(), "-p", &addr.port().to_string(), "-U", "millpond"])
        .args(["-v", "VERBOSITY=verbose", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .env("PGCONNECT_TIMEOUT", "10");
    command
}

/// psql running a COPY (SUBSCRIBE ...): its stdout lines arrive on a channel.
fn subscribe(addr: SocketAddr, sql: &str) -> (Child, Receiver<Vec<String>>) {
    let mut child = psql(addr, sql)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql runs (the machine needs postgresql-client; .ci/run installs it)");
    let stdout = child.stdout.take().unwrap();
    let (send, receive) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line.split('\t').map(str::to_owned).collect()).is_err() {
                break;
            }
        }
    });
    (child, receive)
}

/// Reads rows until `done` holds of all read so far; panics after 60 s.
fn read_until(rows_in: &Receiver<Vec<String>>, rows: &mut Vec<Vec<String>>, done: impl Fn(&[Vec<String>]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(rows) {
        let left = deadline.saturating_duration_since(Instant::now());
        rows.push(rows_in.recv_timeout(left).unwrap_or_else(|e| panic!("rows within 60 s ({e}): {rows:?}")));
    }
}

fn changes(rows: &[Vec<String>]) -> Vec<(String, String)> {
    rows.iter().filter(|r| r[1] == "f").map(|r| (r[2].clone(), r[3..].join(","))).collect()
}

async fn items_view(client: &Client) {
    client
        .simple_query(
            "CREATE TABLE item (id BIGINT PRIMARY KEY, name TEXT);\n\
             INSERT INTO item VALUES (1, 'apple'), (2, 'tab\there');\n\
             CREATE MATERIALIZED VIEW items AS SELECT id, name FROM item;",
        )
        .await
        .unwrap();
}

/// The epoch a new subscriber's snapshot is at (the last committed).
fn committed_epoch(addr: SocketAddr) -> u64 {
    let (mut child, rows_in) = subscribe(addr, "COPY (SUBSCRIBE items WITH (PROGRESS)) TO STDOUT");
    let mut rows = Vec::new();
    read_until(&rows_in, &mut rows, |rows| rows.iter().any(|r| r[1] == "t"));
    child.kill().unwrap();
    child.wait().unwrap();
    rows.iter().find(|r| r[1] == "t").unwrap()[0].parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_gets_the_snapshot_then_each_change_as_it_commits() {
    let dir = tempfile::tempdir().unwrap();
    let (_engine, endpoint) = serve(dir.path());
    let addr = endpoint.addr();
    let writer = connect(addr).await;
    items_view(&writer).await;
    let (child, rows_in) = subscribe(addr, "COPY (SUBSCRIBE items WITH (PROGRESS)) TO STDOUT");
    let mut rows = Vec::new();
    // The snapshot, then a progress row for its epoch.
    read_until(&rows_in, &mut rows, |rows| changes(rows).len() == 2 && rows.last().unwrap()[1] == "t");
    let mut snapshot = changes(&rows);
    snapshot.sort();
    // COPY text escapes the tab inside a value.
    assert_eq!(snapshot, [("1".into(), "1,apple".into()), ("1".into(), "2,tab\\there".into())]);
    let snapshot_epoch: u64 = rows[0][0].parse().unwrap();
    // A change arrives as its epoch commits: a retraction and an insertion, in one epoch.
    writer.simple_query("UPDATE item SET name = 'pear' WHERE id = 1").await.unwrap();
    read_until(&rows_in, &mut rows, |rows| changes(rows).len() == 4);
    let mut update: Vec<(String, String)> = changes(&rows)[2..].to_vec();
    update.sort();
    assert_eq!(update, [("-1".into(), "1,apple".into()), ("1".into(), "1,pear".into())]);
    let epochs: Vec<u64> = rows.iter().filter(|r| r[1] == "f").skip(2).map(|r| r[0].parse().unwrap()).collect();
    assert_eq!(epochs[0], epochs[1], "one epoch holds the update");
    assert!(epochs[0] > snapshot_epoch);
    // Progress rows carry NULLs in the other columns and never go back.
    let progress: Vec<u64> = rows.iter().filter(|r| r[1] == "t").map(|r| r[0].parse().unwrap()).collect();
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
    assert!(rows.iter().filter(|r| r[1] == "t").all(|r| r[2..].iter().all(|f| f == "\\N")), "{rows:?}");

    // Ctrl-C: psql sends a cancel request; the statement stops with 57014.
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "psql reports the cancelled statement");
    assert!(stderr.contains("57014"), "{stderr}");
    // The server goes on.
    assert!(!writer.simple_query("SHOW VIEWS").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_to_ends_the_stream_and_as_of_resumes_without_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (_engine, endpoint) = serve(dir.path());
    let addr = endpoint.addr();
    let client = connect(addr).await;
    items_view(&client).await;
    let seen = committed_epoch(addr);
    client.simple_query("INSERT INTO item VALUES (3, 'plum')").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let rows =
        |messages: Vec<SimpleQueryMessage>| messages.iter().filter(|m| matches!(m, SimpleQueryMessage::Row(_))).count();
    while rows(client.simple_query("SELECT * FROM items").await.unwrap()) < 3 {
        assert!(Instant::now() < deadline, "the insert never committed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let now = committed_epoch(addr);
    assert!(now > seen);
    // Resuming after the epoch seen, without a snapshot: only the insert;
    // UP TO ends the stream (COPY's own end) once its epoch committed.
    let sql = format!("COPY (SUBSCRIBE items AS OF {seen} UP TO {} WITH (SNAPSHOT = false)) TO STDOUT", now + 1);
    let output = psql(addr, &sql).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "the insert, and not the snapshot again: {lines:?}");
    let fields: Vec<&str> = lines[0].split('\t').collect();
    assert_eq!(fields[1..], ["1", "3", "plum"], "{lines:?}");
    let epoch: u64 = fields[0].parse().unwrap();
    assert!(seen < epoch && epoch <= now, "{seen} < {epoch} <= {now}");
    // Errors carry their SQLSTATE.
    for (sql, code) in [
        ("COPY (SUBSCRIBE items WITH (COLOR)) TO STDOUT", "42601"),
        ("COPY (SUBSCRIBE nothing) TO STDOUT", "42P01"),
        ("COPY (SUBSCRIBE items) TO STDOUT; SELECT 1", "0A000"),
    ] {
        let output = psql(addr, sql).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains(code), "{sql}: {stderr}");
    }
}

/// Rows of a simple query, as text.
async fn rows(client: &Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let mut out = Vec::new();
    for message in client.simple_query(sql).await.unwrap() {
        if let SimpleQueryMessage::Row(row) = message {
            out.push((0..row.len()).map(|i| row.get(i).map(str::to_owned)).collect());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_fetch_a_views_changes_in_order_and_once() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path());
    let client = connect(endpoint.addr()).await;
    client
        .batch_execute(
            "CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'one'), (2, 'two');\n\
             CREATE MATERIALIZED VIEW v AS SELECT k, v FROM t",
        )
        .await
        .unwrap();
    // The snapshot first (read-your-writes: it has both rows), in one FETCH ALL.
    client.batch_execute("DECLARE c CURSOR FOR SUBSCRIBE v WITH (PROGRESS)").await.unwrap();
    let snapshot = rows(&client, "FETCH ALL c WITH (timeout = '10s')").await;
    let changes: Vec<_> = snapshot.iter().filter(|r| r[1].as_deref() == Some("f")).collect();
    assert_eq!(changes.len(), 2, "{snapshot:?}");
    let as_of: u64 = changes[0][0].as_deref().unwrap().parse().unwrap();
    assert!(changes.iter().all(|r| r[2].as_deref() == Some("1")), "{snapshot:?}");
    // Nothing new: a short timeout answers no rows, promptly.
    let started = Instant::now();
    let none: Vec<_> = rows(&client, "FETCH ALL c WITH (timeout = '100ms')").await;
    assert!(none.iter().all(|r| r[1].as_deref() == Some("t")), "only progress, if anything: {none:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // A change: FETCH waits for it, then returns it once, after the snapshot's epoch.
    client.batch_execute("UPDATE t SET v = 'uno' WHERE k = 1").await.unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while seen.len() < 2 && Instant::now() < deadline {
        for row in rows(&client, "FETCH 10 c WITH (timeout = '5s')").await {
            if row[1].as_deref() == Some("f") {
                seen.push((row[2].clone().unwrap(), row[3].clone().unwrap(), row[4].clone().unwrap()));
                assert!(row[0].as_deref().unwrap().parse::<u64>().unwrap() > as_of);
            }
        }
    }
    seen.sort();
    let expected = [("-1", "1", "one"), ("1", "1", "uno")].map(|(d, k, v)| (d.to_owned(), k.to_owned(), v.to_owned()));
    assert_eq!(seen, expected);
    // CLOSE ends it; a closed or unknown cursor is 34000.
    client.batch_execute("CLOSE c").await.unwrap();
    let error = client.simple_query("FETCH c").await.unwrap_err();
    assert_eq!(error.code().unwrap().code(), "34000");
    let error = client.simple_query("DECLARE d CURSOR FOR SUBSCRIBE nothing").await.unwrap_err();
    assert_eq!(error.code().unwrap().code(), "42P01");
    // A plain SUBSCRIBE streams as COPY (tokio-postgres sends it over the
    // extended protocol); UP TO ends it.
    let stream = client.copy_out(&format!("SUBSCRIBE v AS OF {as_of} UP TO {}", as_of + 1)).await.unwrap();
    let chunks: Vec<bytes::Bytes> = futures::TryStreamExt::try_collect(stream).await.unwrap();
    let text: String = chunks.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort();
    assert_eq!(lines, [format!("{as_of}\t1\t1\tone"), format!("{as_of}\t1\t2\ttwo")], "the snapshot as of {as_of}");
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_a_dropped_view_ends_with_an_error_that_voids_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path());
    let client = connect(endpoint.addr()).await;
    client
        .batch_execute("CREATE TABLE t (k BIGINT PRIMARY KEY); INSERT INTO t VALUES (1), (2); CREATE MATERIALIZED VIEW v AS SELECT k FROM t")
        .await
        .unwrap();
    let stream = client.copy_out("SUBSCRIBE v WITH (PROGRESS)").await.unwrap();
    let other = connect(endpoint.addr()).await;
    other.batch_execute("DROP MATERIALIZED VIEW v").await.unwrap();
    let mut stream = Box::pin(stream);
    let mut text = String::new();
    let error = loop {
        match futures::StreamExt::next(&mut stream).await {
            Some(Ok(chunk)) => text.push_str(&String::from_utf8_lossy(&chunk)),
            Some(Err(error)) => break error,
            None => panic!("the stream ended without an error: {text}"),
        }
    };
    // The snapshot and its progress row, then the error: no progress row
    // claims the dropping epoch, and the error voids what the client holds.
    let changes: Vec<Vec<&str>> =
        text.lines().map(|l| l.split('\t').collect::<Vec<_>>()).filter(|f| f[1] == "f").collect();
    let diffs: Vec<(&str, &str)> = changes.iter().map(|f| (f[2], f[3])).collect();
    assert_eq!(diffs, [("1", "1"), ("1", "2")], "{text}");
    let snapshot_at = changes[0][0];
    let progress: Vec<&str> = text.lines().filter(|l| l.split('\t').nth(1) == Some("t")).collect();
    assert!(progress.iter().all(|l| l.starts_with(&format!("{snapshot_at}\t"))), "{text}");
    let db = error.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "42P01");
    assert!(db.message().contains("void") && db.message().contains("subscribe again"), "{}", db.message());
    drop(endpoint);
    engine.shutdown().unwrap();
}

/// A metrics endpoint of the server, on a port of its own.
fn metrics_of(
    engine: &std::sync::Arc<millpond_server::Engine>,
    endpoint: &millpond_server::PgEndpoint,
) -> millpond_server::MetricsEndpoint {
    let listen = "127.0.0.1:0".parse().unwrap();
    millpond_server::MetricsEndpoint::start(engine.clone(), endpoint.gauges().clone(), listen).unwrap()
}

/// The value of metric `name` with label `view="items"` (None: not exported).
async fn items_metric(metrics: SocketAddr, name: &str) -> Option<u64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(metrics).await.unwrap();
    socket.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut response = String::new();
    socket.read_to_string(&mut response).await.unwrap();
    let prefix = format!("{name}{{view=\"items\"}} ");
    response.lines().find_map(|line| line.strip_prefix(prefix.as_str())?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_as_of_stream_joins_the_views_hub_once_caught_up_and_misses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path());
    let metrics = metrics_of(&engine, &endpoint);
    let client = connect(endpoint.addr()).await;
    items_view(&client).await;
    let seen = committed_epoch(endpoint.addr());
    for id in 3..=5 {
        client.simple_query(&format!("INSERT INTO item VALUES ({id}, 'n{id}')")).await.unwrap();
    }
    // Its own reader first (AS OF needs history), then the shared ring.
    let streaming = connect(endpoint.addr()).await;
    let sql = format!("COPY (SUBSCRIBE items AS OF {seen} WITH (SNAPSHOT = false, PROGRESS)) TO STDOUT");
    let mut stream = Box::pin(streaming.copy_out(&sql).await.unwrap());
    let mut changes: Vec<(u64, String)> = Vec::new();
    let mut read_until = async |changes: &mut Vec<(u64, String)>, count: usize| {
        while changes.len() < count {
            let chunk = tokio::time::timeout(Duration::from_secs(60), futures::StreamExt::next(&mut stream))
                .await
                .expect("a change in time")
                .unwrap()
                .unwrap();
            let line = String::from_utf8(chunk.to_vec()).unwrap();
            let fields: Vec<&str> = line.trim_end().split('\t').collect();
            if fields[1] == "f" {
                changes.push((fields[0].parse().unwrap(), format!("{} {} {}", fields[2], fields[3], fields[4])));
            }
        }
    };
    read_until(&mut changes, 3).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while items_metric(metrics.addr(), "millpond_fanout_positions").await != Some(1) {
        assert!(Instant::now() < deadline, "the AS OF stream never joined the hub");
        client.simple_query("SELECT 1").await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for id in 6..=9 {
        client.simple_query(&format!("INSERT INTO item VALUES ({id}, 'n{id}')")).await.unwrap();
    }
    client.simple_query("DELETE FROM item WHERE id = 3").await.unwrap();
    read_until(&mut changes, 8).await;
    // Each change once (an epoch's changes come in no particular order).
    let mut got: Vec<&str> = changes.iter().map(|(_, change)| change.as_str()).collect();
    got.sort_unstable();
    assert_eq!(got, ["-1 3 n3", "1 3 n3", "1 4 n4", "1 5 n5", "1 6 n6", "1 7 n7", "1 8 n8", "1 9 n9"], "{changes:?}");
    let epoch_of = |change: &str| changes.iter().find(|(_, c)| c == change).unwrap().0;
    assert!(epoch_of("1 3 n3") < epoch_of("-1 3 n3"), "{changes:?}");
    assert!(changes.windows(2).all(|w| w[0].0 <= w[1].0) && changes[0].0 > seen, "in epoch order: {changes:?}");
    drop(metrics);
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_lets_its_snapshot_go_once_a_later_epoch_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path());
    let metrics = metrics_of(&engine, &endpoint);
    let client = connect(endpoint.addr()).await;
    items_view(&client).await;
    let streaming = connect(endpoint.addr()).await;
    let sql = "COPY (SUBSCRIBE items WITH (PROGRESS)) TO STDOUT";
    let mut stream = Box::pin(streaming.copy_out(sql).await.unwrap());
    let mut next_line = async || {
        let chunk = tokio::time::timeout(Duration::from_secs(60), futures::StreamExt::next(&mut stream))
            .await
            .expect("a line in time")
            .unwrap()
            .unwrap();
        String::from_utf8(chunk.to_vec()).unwrap()
    };
    // The snapshot's rows, then its progress row.
    let snapshot_at = loop {
        let line = next_line().await;
        let fields: Vec<&str> = line.trim_end().split('\t').collect();
        if fields[1] == "t" {
            break fields[0].parse::<u64>().unwrap();
        }
    };
    let held = items_metric(metrics.addr(), "millpond_fanout_snapshot_bytes").await;
    assert!(held.is_some_and(|bytes| bytes > 0), "the snapshot is held while no later epoch came: {held:?}");
    client.simple_query("INSERT INTO item VALUES (3, 'pear')").await.unwrap();
    loop {
        let line = next_line().await;
        let fields: Vec<&str> = line.trim_end().split('\t').collect();
        if fields[1] == "f" && fields[0].parse::<u64>().unwrap() > snapshot_at {
            assert_eq!(&fields[2..], ["1", "3", "pear"]);
            break;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while items_metric(metrics.addr(), "millpond_fanout_snapshot_bytes").await != Some(0) {
        assert!(Instant::now() < deadline, "the subscriber kept the snapshot after a later epoch reached it");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A new subscriber reads a new snapshot: every row once, the new one too.
    let late = connect(endpoint.addr()).await;
    let mut late_stream = Box::pin(late.copy_out(sql).await.unwrap());
    let mut rows = Vec::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(60), futures::StreamExt::next(&mut late_stream))
            .await
            .expect("a line in time")
            .unwrap()
            .unwrap();
        let line = String::from_utf8(chunk.to_vec()).unwrap();
        let fields: Vec<String> = line.trim_end().split('\t').map(str::to_owned).collect();
        if fields[1] == "t" {
            assert!(fields[0].parse::<u64>().unwrap() > snapshot_at, "a snapshot of the later epoch");
            break;
        }
        rows.push(fields[2..].join(" "));
    }
    rows.sort();
    assert_eq!(rows, ["1 1 apple", "1 2 tab\\there", "1 3 pear"]);
    drop(metrics);
    drop(endpoint);
    engine.shutdown().unwrap();
}
