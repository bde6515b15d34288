//! Durable subscriptions with tokio-postgres: a subscription read through a
//! cursor, acknowledged, resumed by another connection right after the
//! acknowledged epoch (nothing missed, nothing twice), surviving the
//! server's restart; SHOW SUBSCRIPTIONS; errors with their SQLSTATE.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio_postgres::{Client, SimpleQueryMessage};

mod common;
use common::{connect, serve};

async fn rows(client: &Client, sql: &str) -> Result<Vec<Vec<Option<String>>>, tokio_postgres::Error> {
    let mut out = Vec::new();
    for message in client.simple_query(sql).await? {
        if let SimpleQueryMessage::Row(row) = message {
            out.push((0..row.len()).map(|i| row.get(i).map(str::to_owned)).collect());
        }
    }
    Ok(out)
}

fn code(error: tokio_postgres::Error) -> String {
    error.code().map(|c| c.code().to_owned()).unwrap_or_else(|| format!("no SQLSTATE: {error}"))
}

/// Reads the subscription until a progress row at or after `until`:
/// (changes per row "k=v" with their diffs summed, the last progress epoch).
async fn read_through(client: &Client, until: u64) -> (BTreeMap<String, i64>, u64) {
    rows(client, "DECLARE c CURSOR FOR SUBSCRIBE TO SUBSCRIPTION s WITH (PROGRESS)").await.unwrap();
    let mut changes = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "no progress to {until}");
        for row in rows(client, "FETCH 100 c WITH (timeout = '1s')").await.unwrap() {
            let epoch: u64 = row[0].as_deref().unwrap().parse().unwrap();
            if row[1].as_deref() == Some("t") {
                if epoch >= until {
                    rows(client, "CLOSE c").await.unwrap();
                    return (changes, epoch);
                }
                continue;
            }
            let key = format!("{}={}", row[3].as_deref().unwrap(), row[4].as_deref().unwrap());
            *changes.entry(key).or_default() += row[2].as_deref().unwrap().parse::<i64>().unwrap();
        }
    }
}

fn committed_epoch(dir: &std::path::Path) -> u64 {
    millpond_dataflow::CheckpointMeta::read_published(dir).unwrap().map_or(0, |m| m.epoch)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_subscription_resumes_right_after_its_acknowledged_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path());
    let client = connect(endpoint.addr()).await;
    rows(
        &client,
        "CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT); INSERT INTO t VALUES (1, 10), (2, 20);\n\
         CREATE MATERIALIZED VIEW v AS SELECT k, v FROM t",
    )
    .await
    .unwrap();
    rows(&client, "CREATE SUBSCRIPTION s FOR v WITH (max_retained_epochs = 1000)").await.unwrap();
    assert_eq!(code(rows(&client, "CREATE SUBSCRIPTION s FOR v").await.unwrap_err()), "42710");
    assert_eq!(code(rows(&client, "CREATE SUBSCRIPTION x FOR nothing").await.unwrap_err()), "42P01");
    // The first read starts with the snapshot.
    let now = committed_epoch(dir.path());
    let (first, through) = read_through(&client, now).await;
    assert_eq!(first, BTreeMap::from([("1=10".into(), 1), ("2=20".into(), 1)]));
    rows(&client, &format!("ACK SUBSCRIPTION s THROUGH {through}")).await.unwrap();
    let error = rows(&client, &format!("ACK SUBSCRIPTION s THROUGH {}", through + 1_000_000)).await.unwrap_err();
    assert_eq!(code(error), "22023", "an epoch not committed yet");
    // Changes after the acknowledgement; a client that read them but did
    // not acknowledge (it crashed) gets them again, and only them.
    rows(&client, "UPDATE t SET v = 11 WHERE k = 1; INSERT INTO t VALUES (3, 30)").await.unwrap();
    let expected = BTreeMap::from([("1=10".into(), -1), ("1=11".into(), 1), ("3=30".into(), 1)]);
    let later = committed_epoch(dir.path());
    let (unacked, _) = read_through(&client, later).await;
    assert_eq!(unacked, expected);
    drop(client);
    let client = connect(endpoint.addr()).await;
    let (again, through) = read_through(&client, later).await;
    assert_eq!(again, expected, "resumed right after the acknowledged epoch");
    rows(&client, &format!("ACK SUBSCRIPTION s THROUGH {through}")).await.unwrap();
    rows(&client, &format!("ACK SUBSCRIPTION s THROUGH {}", through - 1)).await.unwrap();
    let shown = rows(&client, "SHOW SUBSCRIPTIONS").await.unwrap();
    assert_eq!(shown.len(), 1);
    assert_eq!((shown[0][0].as_deref(), shown[0][1].as_deref()), (Some("s"), Some("v")));
    assert_eq!(shown[0][2].as_deref(), Some(through.to_string().as_str()), "an older ACK changes nothing");
    assert_eq!(shown[0][7].as_deref(), Some("active"));
    drop(client);
    drop(endpoint);
    engine.shutdown().unwrap();
    drop(engine);

    // Restarted: the subscription and its position survive.
    let (engine, endpoint) = serve(dir.path());
    let client = connect(endpoint.addr()).await;
    rows(&client, "DELETE FROM t WHERE k = 2").await.unwrap();
    let (after_restart, _) = read_through(&client, committed_epoch(dir.path())).await;
    assert_eq!(after_restart, BTreeMap::from([("2=20".into(), -1)]), "only what came after the ACK");
    rows(&client, "DROP SUBSCRIPTION s").await.unwrap();
    assert_eq!(code(rows(&client, "DROP SUBSCRIPTION s").await.unwrap_err()), "42704");
    rows(&client, "DROP SUBSCRIPTION IF EXISTS s").await.unwrap();
    assert!(rows(&client, "SHOW SUBSCRIPTIONS").await.unwrap().is_empty());
    let error = rows(&client, "DECLARE c CURSOR FOR SUBSCRIBE TO SUBSCRIPTION s").await.unwrap_err();
    assert_eq!(code(error), "42704");
    drop(endpoint);
    engine.shutdown().unwrap();
}

/// An engine whose changelogs may be compacted up to the newest commit (no
/// lag), in 1 KiB segments, and its endpoint.
fn serve_compacting(dir: &std::path::Path) -> (std::sync::Arc<millpond_server::Engine>, millpond_server::PgEndpoint) {
    let config = millpond_server::EngineConfig {
        epoch_interval_ms: 50,
        changelog_compaction_lag_ms: 0,
        changelog_segment_bytes: 1024,
        ..millpond_server::EngineConfig::new(dir)
    };
    let engine = millpond_server::Engine::open(config).unwrap();
    let pg = millpond_server::PgConfig::new("127.0.0.1:0".parse().unwrap());
    let endpoint = millpond_server::PgEndpoint::start(engine.clone(), pg).unwrap();
    (engine, endpoint)
}

/// Stops the server on `dir` (its client first) and runs one compaction
/// pass over its log, once the engine has let go of it.
fn stop_and_compact(
    server: (Client, std::sync::Arc<millpond_server::Engine>, millpond_server::PgEndpoint),
    dir: &std::path::Path,
) {
    let (client, engine, endpoint) = server;
    drop(client);
    drop(endpoint);
    engine.shutdown().unwrap();
    drop(engine);
    let deadline = Instant::now() + Duration::from_secs(30);
    let log = loop {
        match millpond_log::Log::open(dir, millpond_log::LogOptions::default()) {
            Ok(log) => break log,
            Err(error) => assert!(Instant::now() < deadline, "the log stays locked: {error}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    log.compact().unwrap();
    log.close().unwrap();
}

/// `UPDATE`s of row 1 to `values`, each in an epoch of its own.
async fn updates(client: &Client, values: std::ops::RangeInclusive<i64>) {
    for value in values {
        rows(client, &format!("UPDATE t SET v = {value} WHERE k = 1")).await.unwrap();
        rows(client, "SELECT v FROM v").await.unwrap(); // read-your-writes: committed
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_keeps_what_a_subscription_has_not_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve_compacting(dir.path());
    let client = connect(endpoint.addr()).await;
    rows(
        &client,
        "CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT); INSERT INTO t VALUES (1, 0);\n\
                   CREATE MATERIALIZED VIEW v AS SELECT k, v FROM t",
    )
    .await
    .unwrap();
    rows(&client, "CREATE SUBSCRIPTION s FOR v WITH (max_retained_epochs = 100000)").await.unwrap();
    let (snapshot, through) = read_through(&client, committed_epoch(dir.path())).await;
    assert_eq!(snapshot, BTreeMap::from([("1=0".into(), 1)]));
    rows(&client, &format!("ACK SUBSCRIPTION s THROUGH {through}")).await.unwrap();
    // Many commits past the acknowledged epoch, then a compaction that may
    // take the changelog up to the newest commit but for the subscription.
    updates(&client, 1..=40).await;
    stop_and_compact((client, engine, endpoint), dir.path());
    let (engine, endpoint) = serve_compacting(dir.path());
    let client = connect(endpoint.addr()).await;
    let (resumed, through) = read_through(&client, committed_epoch(dir.path())).await;
    let net: BTreeMap<String, i64> = resumed.into_iter().filter(|(_, d)| *d != 0).collect();
    assert_eq!(net, BTreeMap::from([("1=0".into(), -1), ("1=40".into(), 1)]), "resumed right after the ACK");
    rows(&client, &format!("ACK SUBSCRIPTION s THROUGH {through}")).await.unwrap();
    rows(&client, "DROP SUBSCRIPTION s").await.unwrap();
    // Without a subscription the same compaction takes the old epochs away:
    // reading from one is refused (22000), not answered wrong.
    let old = committed_epoch(dir.path());
    updates(&client, 41..=80).await;
    stop_and_compact((client, engine, endpoint), dir.path());
    let (engine, endpoint) = serve_compacting(dir.path());
    let client = connect(endpoint.addr()).await;
    let error = client.simple_query(&format!("DECLARE c CURSOR FOR SUBSCRIBE v AS OF {old}")).await;
    let error = match error {
        Err(error) => error,
        Ok(_) => client.simple_query("FETCH 1 c WITH (timeout = '1s')").await.unwrap_err(),
    };
    assert_eq!(code(error), "22000", "the released epochs were compacted away");
    drop(endpoint);
    engine.shutdown().unwrap();
}
