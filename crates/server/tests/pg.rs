//! The Postgres wire endpoint with a real client (tokio-postgres): the
//! definition language and DML over the simple protocol while views run,
//! `SELECT * FROM view`, errors with their SQLSTATE, the connection cap,
//! and a garbage-speaking client that harms no one else.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use millpond_server::{Engine, EngineConfig, PgConfig, PgEndpoint};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

fn serve(dir: &std::path::Path, connections_max: usize) -> (Arc<Engine>, PgEndpoint) {
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir) }).unwrap();
    let mut config = PgConfig::new("127.0.0.1:0".parse().unwrap());
    config.connections_max = connections_max;
    let endpoint = PgEndpoint::start(engine.clone(), config).unwrap();
    (engine, endpoint)
}

/// A metrics endpoint for `engine` and `endpoint`, on a free loopback port.
fn metrics_of(engine: &Arc<Engine>, endpoint: &PgEndpoint) -> millpond_server::MetricsEndpoint {
    let listen = "127.0.0.1:0".parse().unwrap();
    millpond_server::MetricsEndpoint::start(engine.clone(), endpoint.gauges().clone(), listen).unwrap()
}

/// The response of a metrics endpoint at `addr` to `GET path`.
async fn scrape(addr: SocketAddr, path: &str) -> String {
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    socket.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
    let mut response = String::new();
    socket.read_to_string(&mut response).await.unwrap();
    response
}

/// Scrapes `addr` until the body holds `line`, for at most a minute.
async fn scrape_until(addr: SocketAddr, line: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = scrape(addr, "/metrics").await;
        if response.contains(line) {
            return response;
        }
        assert!(Instant::now() < deadline, "{line} never showed: {response}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn connect(addr: SocketAddr) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) =
        tokio_postgres::connect(&format!("host={} port={} user=millpond", addr.ip(), addr.port()), NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// (command tags with their row counts, data rows as text) of a simple query.
async fn query(client: &Client, sql: &str) -> Result<(Vec<u64>, Vec<Vec<Option<String>>>), tokio_postgres::Error> {
    let mut counts = Vec::new();
    let mut rows = Vec::new();
    for message in client.simple_query(sql).await? {
        match message {
            SimpleQueryMessage::CommandComplete(n) => counts.push(n),
            SimpleQueryMessage::Row(row) => {
                rows.push((0..row.len()).map(|i| row.get(i).map(str::to_owned)).collect());
            }
            _ => {}
        }
    }
    Ok((counts, rows))
}

fn sqlstate(error: &tokio_postgres::Error) -> String {
    error.code().map(|c| c.code().to_owned()).unwrap_or_else(|| format!("no SQLSTATE: {error}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_and_view_reads_over_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 8);
    let client = connect(endpoint.addr()).await.unwrap();
    let (counts, _) = query(
        &client,
        "CREATE TABLE item (id BIGINT PRIMARY KEY, name TEXT, price DECIMAL(10, 2));\n\
         INSERT INTO item VALUES (1, 'apple', 2.5), (2, 'pear', NULL);\n\
         CREATE MATERIALIZED VIEW items AS SELECT id, name, price FROM item;",
    )
    .await
    .unwrap();
    assert_eq!(counts, [0, 2, 0], "INSERT reports its rows");
    let deadline = Instant::now() + Duration::from_secs(60);
    let rows = loop {
        let (_, mut rows) = query(&client, "SELECT * FROM items").await.unwrap();
        rows.sort();
        if rows.len() == 2 {
            break rows;
        }
        assert!(Instant::now() < deadline, "the view never showed the rows: {rows:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let text = |s: &str| Some(s.to_owned());
    // A DECIMAL(10, 2) prints at its scale, as in Postgres.
    assert_eq!(rows, [vec![text("1"), text("apple"), text("2.50")], vec![text("2"), text("pear"), None]]);
    // DML while the view runs; BEGIN/COMMIT are accepted.
    let (counts, _) = query(&client, "BEGIN; UPDATE item SET price = 3 WHERE id = 2; COMMIT").await.unwrap();
    assert_eq!(counts, [0, 1, 0]);

    // Errors carry their SQLSTATE; the connection goes on.
    let error = query(&client, "CREATE TABLE broken (id BIGINT PRIMARY KEY,").await.unwrap_err();
    assert_eq!(sqlstate(&error), "42601", "{error:?}");
    let db = error.as_db_error().unwrap();
    assert!(db.position().is_some(), "a syntax error names its position: {db:?}");
    let error = query(&client, "SELECT * FROM nothing").await.unwrap_err();
    assert_eq!(sqlstate(&error), "42P01");
    let error = query(&client, "SELECT * FROM items FOR UPDATE").await.unwrap_err();
    assert_eq!(sqlstate(&error), "0A000", "refused, never answered wrongly");
    // What the catalog holds, and the parameters.
    assert_eq!(query(&client, "SHOW TABLES").await.unwrap().1, [vec![text("item")]]);
    assert_eq!(query(&client, "SHOW MATERIALIZED VIEWS").await.unwrap().1, [vec![text("items")]]);
    assert!(query(&client, "SHOW SOURCES").await.unwrap().1.is_empty());
    // SHOW CREATE: the defining statement, which runs again as it is.
    let (_, created) = query(&client, "SHOW CREATE MATERIALIZED VIEW items").await.unwrap();
    assert_eq!(created[0][0], text("items"));
    let definition = created[0][1].clone().unwrap();
    assert!(definition.starts_with("CREATE MATERIALIZED VIEW items AS SELECT"), "{definition}");
    assert_eq!(query(&client, &definition).await.unwrap().0, [0], "the same definition again is a no-op");
    let (_, created) = query(&client, "SHOW CREATE TABLE item").await.unwrap();
    assert!(created[0][1].as_deref().unwrap().contains("PRIMARY KEY"), "{created:?}");
    assert_eq!(sqlstate(&query(&client, "SHOW CREATE TABLE items").await.unwrap_err()), "42809");
    assert_eq!(sqlstate(&query(&client, "SHOW CREATE VIEW nothing").await.unwrap_err()), "42P01");
    assert_eq!(query(&client, "SHOW client_encoding").await.unwrap().1, [vec![text("UTF8")]]);
    assert_eq!(sqlstate(&query(&client, "SHOW nonsense").await.unwrap_err()), "42704");
    let error = query(&client, "ROLLBACK").await.unwrap_err();
    assert_eq!(sqlstate(&error), "0A000");
    assert_eq!(query(&client, "SELECT * FROM items").await.unwrap().1.len(), 2);
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_off_selects_answer_over_committed_contents() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 8);
    let client = connect(endpoint.addr()).await.unwrap();
    query(
        &client,
        "CREATE TABLE item (id BIGINT PRIMARY KEY, name TEXT, kind TEXT, price DECIMAL(10, 2));\n\
         CREATE TABLE kind (name TEXT PRIMARY KEY, label TEXT);\n\
         INSERT INTO item VALUES (1, 'apple', 'fruit', 2.5), (2, 'pear', 'fruit', NULL), (3, 'leek', 'veg', 1.25), \
           (4, 'kale', 'veg', 4), (5, 'salt', NULL, 0.5);\n\
         INSERT INTO kind VALUES ('fruit', 'Fruit'), ('veg', 'Vegetable');\n\
         CREATE MATERIALIZED VIEW by_kind AS SELECT kind, COUNT(*) AS n, SUM(price) AS total FROM item GROUP BY kind;",
    )
    .await
    .unwrap();
    let text = |s: &str| Some(s.to_owned());
    let rows = |values: &[&[Option<&str>]]| -> Vec<Vec<Option<String>>> {
        values.iter().map(|row| row.iter().map(|v| v.map(str::to_owned)).collect()).collect()
    };
    // Over a table: the last committed batch. Ordered, paged, joined, aggregated.
    let (_, got) = query(&client, "SELECT name FROM item WHERE price > 1 ORDER BY price DESC").await.unwrap();
    assert_eq!(got, rows(&[&[Some("kale")], &[Some("apple")], &[Some("leek")]]), "ORDER BY without LIMIT");
    let (_, got) = query(&client, "SELECT id FROM item ORDER BY id LIMIT 2 OFFSET 1").await.unwrap();
    assert_eq!(got, rows(&[&[Some("2")], &[Some("3")]]));
    let (_, got) = query(&client, "SELECT id FROM item ORDER BY id OFFSET 3").await.unwrap();
    assert_eq!(got, rows(&[&[Some("4")], &[Some("5")]]));
    let (_, got) = query(
        &client,
        "SELECT k.label, COUNT(*) AS n, MAX(i.price) FROM item i JOIN kind k ON i.kind = k.name \
         GROUP BY k.label ORDER BY k.label",
    )
    .await
    .unwrap();
    assert_eq!(got, rows(&[&[Some("Fruit"), Some("2"), Some("2.50")], &[Some("Vegetable"), Some("2"), Some("4.00")]]));
    let (_, got) =
        query(&client, "SELECT i.name, k.label FROM item i LEFT JOIN kind k ON i.kind = k.name WHERE i.id = 5")
            .await
            .unwrap();
    assert_eq!(got, rows(&[&[Some("salt"), None]]), "an outer join pads with NULL");
    let (_, got) = query(&client, "SELECT COUNT(*), SUM(price) FROM item WHERE id > 100").await.unwrap();
    assert_eq!(got, rows(&[&[Some("0"), None]]), "a global aggregate has a row over nothing");
    let (_, got) = query(&client, "SELECT 1 AS a, 2 AS a").await.unwrap();
    assert_eq!(got, rows(&[&[Some("1"), Some("2")]]), "a one-off answer may repeat a column name");
    let error = query(&client, "VALUES (1, 'x'), (2, 'y')").await.unwrap_err();
    assert_eq!(sqlstate(&error), "0A000", "what a view cannot say is refused: {error:?}");
    // Over a materialized view: its last committed epoch (waited for when new).
    let (_, got) = query(&client, "SELECT kind, n, total FROM by_kind WHERE n > 1 ORDER BY kind").await.unwrap();
    assert_eq!(got, rows(&[&[Some("fruit"), Some("2"), Some("2.50")], &[Some("veg"), Some("2"), Some("5.25")]]));
    // A write is visible to the next one-off read of the table at once.
    query(&client, "DELETE FROM item WHERE kind = 'veg'").await.unwrap();
    let (_, got) = query(&client, "SELECT COUNT(*) FROM item").await.unwrap();
    assert_eq!(got, [vec![text("3")]]);
    // Errors: unknown column, unknown relation, what is not supported.
    assert_eq!(sqlstate(&query(&client, "SELECT nope FROM item").await.unwrap_err()), "42703");
    assert_eq!(sqlstate(&query(&client, "SELECT * FROM nothing").await.unwrap_err()), "42P01");
    let sql = "SELECT id FROM item INTERSECT SELECT id FROM item WHERE id > 1 ORDER BY 1";
    assert_eq!(query(&client, sql).await.unwrap().1, [vec![text("2")], vec![text("5")]]);
    let sql = "SELECT id, SUM(id) OVER (ORDER BY id GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM item";
    let error = query(&client, sql).await.unwrap_err();
    assert_eq!(sqlstate(&error), "0A000", "{error:?}");
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_cap_a_client_is_refused_and_garbage_harms_no_one_else() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 2);
    let first = connect(endpoint.addr()).await.unwrap();
    query(&first, "CREATE TABLE t (k BIGINT PRIMARY KEY)").await.unwrap();

    // A client that speaks garbage gets its connection closed.
    let mut garbage = tokio::net::TcpStream::connect(endpoint.addr()).await.unwrap();
    garbage.write_all(&[0xff; 64]).await.unwrap();
    let mut buffer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), garbage.read_to_end(&mut buffer)).await;
    assert!(read.is_ok(), "the server closes a garbage-speaking connection");
    drop(garbage);

    // The second slot is free again (once the server has let go of the
    // garbage connection); a third client is refused with 53300.
    let deadline = Instant::now() + Duration::from_secs(30);
    let second = loop {
        match connect(endpoint.addr()).await {
            Ok(client) => break client,
            Err(error) => assert!(Instant::now() < deadline, "the slot was never freed: {error:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let error = match connect(endpoint.addr()).await {
        Ok(_) => panic!("a third connection was accepted past the cap of 2"),
        Err(error) => error,
    };
    assert_eq!(sqlstate(&error), "53300", "{error:?}");
    // The others are unaffected.
    assert_eq!(query(&first, "INSERT INTO t VALUES (1)").await.unwrap().0, [1]);
    assert_eq!(query(&second, "INSERT INTO t VALUES (2)").await.unwrap().0, [1]);
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_timeout_bounds_the_wait_for_a_views_first_commit() {
    let dir = tempfile::tempdir().unwrap();
    // Each commit waits 5 s: a view created now has no committed epoch for that long.
    let config = EngineConfig { epoch_interval_ms: 50, commit_delay_ms: 5_000, ..EngineConfig::new(dir.path()) };
    let engine = Engine::open(config).unwrap();
    let endpoint = PgEndpoint::start(engine.clone(), PgConfig::new("127.0.0.1:0".parse().unwrap())).unwrap();
    let client = connect(endpoint.addr()).await.unwrap();
    query(&client, "CREATE TABLE t (k BIGINT); CREATE MATERIALIZED VIEW v AS SELECT k FROM t").await.unwrap();
    let text = |s: &str| Some(s.to_owned());
    assert_eq!(query(&client, "SHOW statement_timeout").await.unwrap().1, [vec![text("0ms")]]);
    query(&client, "SET statement_timeout = '250ms'").await.unwrap();
    assert_eq!(query(&client, "SHOW statement_timeout").await.unwrap().1, [vec![text("250ms")]]);
    let started = Instant::now();
    let error = query(&client, "SELECT * FROM v").await.unwrap_err();
    assert_eq!(sqlstate(&error), "57014", "{error:?}");
    let message = error.as_db_error().unwrap().message();
    assert!(message.contains("within 250 ms"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(4), "the wait was bounded: {:?}", started.elapsed());
    // Other forms of SET, and a bad value (22023, the setting unchanged).
    query(&client, "SET SESSION statement_timeout TO 2000").await.unwrap();
    assert_eq!(query(&client, "SHOW statement_timeout").await.unwrap().1, [vec![text("2000ms")]]);
    let error = query(&client, "SET statement_timeout = 'soon'").await.unwrap_err();
    assert_eq!(sqlstate(&error), "22023", "{error:?}");
    assert_eq!(query(&client, "SHOW statement_timeout").await.unwrap().1, [vec![text("2000ms")]]);
    query(&client, "SET statement_timeout TO DEFAULT").await.unwrap();
    assert_eq!(query(&client, "SHOW statement_timeout").await.unwrap().1, [vec![text("0ms")]]);
    // The setting belongs to its connection.
    query(&client, "SET statement_timeout = '1min'").await.unwrap();
    let other = connect(endpoint.addr()).await.unwrap();
    assert_eq!(query(&other, "SHOW statement_timeout").await.unwrap().1, [vec![text("0ms")]]);
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_after_a_write_on_one_connection_sees_the_write() {
    let dir = tempfile::tempdir().unwrap();
    // Commits take 300 ms: a read that did not wait would see the view before the write.
    let config = EngineConfig { epoch_interval_ms: 50, commit_delay_ms: 300, ..EngineConfig::new(dir.path()) };
    let engine = Engine::open(config).unwrap();
    let endpoint = PgEndpoint::start(engine.clone(), PgConfig::new("127.0.0.1:0".parse().unwrap())).unwrap();
    let client = connect(endpoint.addr()).await.unwrap();
    query(
        &client,
        "CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT); CREATE TABLE other (k BIGINT);\n\
         CREATE MATERIALIZED VIEW total AS SELECT COUNT(*) AS n, SUM(v) AS s FROM t;\n\
         CREATE MATERIALIZED VIEW others AS SELECT COUNT(*) AS n FROM other",
    )
    .await
    .unwrap();
    let text = |s: &str| Some(s.to_owned());
    assert_eq!(query(&client, "SHOW read_your_writes").await.unwrap().1, [vec![text("on")]]);
    for k in 1..=4 {
        query(&client, &format!("INSERT INTO t VALUES ({k}, {})", k * 10)).await.unwrap();
        let (_, rows) = query(&client, "SELECT n, s FROM total").await.unwrap();
        let sum = (1..=k).map(|i| i * 10).sum::<i64>();
        assert_eq!(rows, [vec![text(&k.to_string()), text(&sum.to_string())]], "the write {k} is seen");
    }
    query(&client, "UPDATE t SET v = 0 WHERE k = 1").await.unwrap();
    let (_, rows) = query(&client, "SELECT s FROM total").await.unwrap();
    assert_eq!(rows, [vec![text("90")]], "an UPDATE is seen");
    // Another connection's reads do not wait for this one's writes; a
    // view that reads none of the written tables is read at once.
    query(&client, "INSERT INTO t VALUES (9, 9)").await.unwrap();
    let started = Instant::now();
    assert_eq!(query(&client, "SELECT n FROM others").await.unwrap().1, [vec![text("0")]]);
    assert!(started.elapsed() < Duration::from_millis(250), "others read at once: {:?}", started.elapsed());
    // The wait is bounded by statement_timeout (57014), and can be turned off.
    query(&client, "SET statement_timeout = 1").await.unwrap();
    query(&client, "INSERT INTO t VALUES (10, 10)").await.unwrap();
    let error = query(&client, "SELECT n FROM total").await.unwrap_err();
    assert_eq!(sqlstate(&error), "57014", "{error:?}");
    assert!(error.as_db_error().unwrap().message().contains("read_your_writes = off"), "{error:?}");
    query(&client, "SET read_your_writes = off").await.unwrap();
    assert_eq!(query(&client, "SHOW read_your_writes").await.unwrap().1, [vec![text("off")]]);
    // Below the 300 ms a commit takes (1 ms cut even a read of one row
    // under load): a read that waited for the write would fail.
    query(&client, "SET statement_timeout = 250").await.unwrap();
    assert_eq!(query(&client, "SELECT n FROM total").await.unwrap().1.len(), 1, "read without waiting");
    assert_eq!(sqlstate(&query(&client, "SET read_your_writes = maybe").await.unwrap_err()), "22023");
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_password_clients_authenticate_with_scram() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path())).unwrap();
    let mut config = PgConfig::new("127.0.0.1:0".parse().unwrap());
    config.password = Some("s3cret pässword".into());
    let endpoint = PgEndpoint::start(engine.clone(), config).unwrap();
    let addr = endpoint.addr();
    let connect_with = |password: &'static str| async move {
        let url = format!("host={} port={} user=anyone password='{password}'", addr.ip(), addr.port());
        let (client, connection) = tokio_postgres::connect(&url, NoTls).await?;
        tokio::spawn(connection);
        Ok::<Client, tokio_postgres::Error>(client)
    };
    let client = connect_with("s3cret pässword").await.expect("the right password is accepted");
    assert_eq!(query(&client, "SHOW server_encoding").await.unwrap().1.len(), 1);
    let Err(error) = connect_with("wrong").await else { panic!("a wrong password is refused") };
    assert_eq!(sqlstate(&error), "28P01", "{error:?}");
    // No password at all: the driver cannot answer SCRAM's challenge.
    assert!(connect(addr).await.is_err(), "a client without the password is refused");
    // psql too: with PGPASSWORD right it runs, wrong it names the failure.
    let psql = |password: &str| {
        std::process::Command::new("psql")
            .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string(), "-U", "me", "-c", "SHOW TABLES"])
            .env("PGPASSWORD", password)
            .env("PGCONNECT_TIMEOUT", "10")
            .output()
            .expect("psql runs (.ci/run installs postgresql-client)")
    };
    assert!(psql("s3cret pässword").status.success());
    let refused = psql("nope");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).to_lowercase().contains("password authentication failed"),
        "{refused:?}"
    );
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_endpoint_exports_views_and_connections_in_prometheus_text() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 8);
    let metrics = metrics_of(&engine, &endpoint);
    let client = connect(endpoint.addr()).await.unwrap();
    query(
        &client,
        "CREATE TABLE t (k BIGINT); INSERT INTO t VALUES (1), (2), (3); CREATE MATERIALIZED VIEW v AS SELECT k FROM t",
    )
    .await
    .unwrap();
    let scrape = |path: &'static str| scrape(metrics.addr(), path);
    let deadline = Instant::now() + Duration::from_secs(60);
    let body = loop {
        let response = scrape("/metrics").await;
        if response.contains("millpond_view_records_read_total{view=\"v\"} 3") {
            break response;
        }
        assert!(Instant::now() < deadline, "the view's reads never showed: {response}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(body.starts_with("HTTP/1.0 200 OK\r\n"), "{body}");
    assert!(body.contains("millpond_pg_connections 1\n"), "{body}");
    assert!(body.contains("millpond_pg_subscribers 0\n"), "{body}");
    assert!(body.contains("millpond_view_lag_records{view=\"v\"} 0\n"), "{body}");
    assert!(body.contains("# TYPE millpond_view_records_read_total counter"), "{body}");
    assert!(body.contains("millpond_view_committed_epoch{view=\"v\"} "), "{body}");
    assert!(body.contains("millpond_checkpoint_age_seconds "), "{body}");
    // The view committed: its sink wrote epochs and commits published them.
    for step in [
        "close_to_write",
        "sink_write",
        "commit",
        "changelog_sync",
        "state_commit",
        "publish",
        "view_apply",
        "close_to_publish",
    ] {
        let count = format!("millpond_checkpoint_duration_seconds_count{{step=\"{step}\"}} ");
        let line = body.lines().find(|l| l.starts_with(&count)).unwrap_or_else(|| panic!("no {count}: {body}"));
        let recorded: u64 = line[count.len()..].parse().unwrap();
        assert!(recorded >= 1, "{line}");
        assert!(body.contains(&format!("millpond_checkpoint_duration_seconds{{step=\"{step}\",quantile=\"0.99\"}} ")));
    }
    assert!(scrape("/other").await.starts_with("HTTP/1.0 404"));
    drop(metrics);
    drop(endpoint);
    engine.shutdown().unwrap();
}

/// Records of partitions first read after the watermark closed their
/// windows are dropped by a closing GROUP BY, never silently: the metrics
/// count them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_count_updates_dropped_at_closed_windows() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 8);
    let metrics = metrics_of(&engine, &endpoint);
    let record = |key: &str, at: &str| millpond_dataflow::TopicRecord {
        key: Some(key.as_bytes().to_vec()),
        value: Some(format!(r#"{{"k": 1, "at": "2024-01-01 {at}"}}"#).into_bytes()),
        headers: vec![],
    };
    engine.append("ev", vec![record("first", "10:00:30")]).unwrap();
    engine
        .execute(
            "CREATE SOURCE ev (k BIGINT, at TIMESTAMP, WATERMARK FOR at AS at - INTERVAL '1' SECOND) \
             FROM TOPIC 'ev' FORMAT JSON;
             CREATE MATERIALIZED VIEW w AS SELECT window_start, COUNT(*) AS n
             FROM TUMBLE(ev, at, INTERVAL '10' SECOND) GROUP BY window_start",
        )
        .unwrap();
    let addr = metrics.addr();
    let before = scrape_until(addr, "millpond_view_records_read_total{view=\"w\"} 1\n").await;
    assert!(before.contains("# TYPE millpond_closed_window_drops_total counter"), "{before}");
    assert!(before.contains("millpond_closed_window_drops_total 0\n"), "{before}");
    // The watermark is 10:00:29: the window [10:00:00, 10:00:10) is closed.
    // Of 20 records there, those in the first record's partition are late
    // (left out, not counted); the others are their partitions' first.
    let keys: Vec<String> = (0..20).map(|i| format!("key-{i}")).collect();
    engine.append("ev", keys.iter().map(|k| record(k, "10:00:01")).collect()).unwrap();
    let after = scrape_until(addr, "millpond_view_records_read_total{view=\"w\"} 21\n").await;
    let line = after.lines().find(|l| l.starts_with("millpond_closed_window_drops_total ")).unwrap();
    let drops: u64 = line["millpond_closed_window_drops_total ".len()..].parse().unwrap();
    assert!((1..=20).contains(&drops), "some of the 20 records fall in other partitions: {line}");
    drop(metrics);
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_agg_in_a_view_follows_inserts_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 8);
    let client = connect(endpoint.addr()).await.unwrap();
    query(
        &client,
        "CREATE TABLE tag (id BIGINT PRIMARY KEY, item TEXT, tag TEXT);\n\
         CREATE MATERIALIZED VIEW tags AS SELECT item, string_agg(tag, ', ') AS tags FROM tag GROUP BY item;\n\
         INSERT INTO tag VALUES (1, 'a', 'red'), (2, 'a', 'big'), (3, 'b', 'old'), (4, 'a', NULL), (5, 'a', 'big');",
    )
    .await
    .unwrap();
    let pairs = |rows: &[(&str, &str)]| -> Vec<Vec<Option<String>>> {
        rows.iter().map(|(a, b)| vec![Some((*a).to_owned()), Some((*b).to_owned())]).collect()
    };
    // Values in ascending order, each as often as it is held; NULLs skipped.
    let (_, got) = query(&client, "SELECT item, tags FROM tags ORDER BY item").await.unwrap();
    assert_eq!(got, pairs(&[("a", "big, big, red"), ("b", "old")]));
    let (_, got) =
        query(&client, "SELECT item, string_agg(tag, '|') FROM tag GROUP BY item ORDER BY item").await.unwrap();
    assert_eq!(got, pairs(&[("a", "big|big|red"), ("b", "old")]), "a one-off query agrees with the view");
    query(&client, "DELETE FROM tag WHERE id IN (2, 3)").await.unwrap();
    let (_, got) = query(&client, "SELECT item, tags FROM tags ORDER BY item").await.unwrap();
    assert_eq!(got, pairs(&[("a", "big, red")]), "a retraction takes its value out; an empty group leaves");
    let refused = query(&client, "CREATE VIEW bad AS SELECT string_agg(tag, item) FROM tag").await.unwrap_err();
    assert_eq!(sqlstate(&refused), "0A000", "a separator is a constant");
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_timeout_cuts_a_select_while_it_computes() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 8);
    let client = connect(endpoint.addr()).await.unwrap();
    let values: Vec<String> = (0..200).map(|i| format!("({i})")).collect();
    query(&client, &format!("CREATE TABLE big (x BIGINT); INSERT INTO big VALUES {}", values.join(", ")))
        .await
        .unwrap();
    query(&client, "SET statement_timeout = '100ms'").await.unwrap();
    // 8 000 000 joined rows: the interpreter is stopped while it builds them
    // (the message says so: a wait for a view's commit names the wait).
    let error = query(&client, "SELECT COUNT(*) FROM big a, big b, big c").await.unwrap_err();
    assert_eq!(sqlstate(&error), "57014");
    assert!(error.as_db_error().unwrap().message().starts_with("canceling statement"), "{error:?}");
    query(&client, "SET statement_timeout = 0").await.unwrap();
    let (_, got) = query(&client, "SELECT COUNT(*) FROM big").await.unwrap();
    assert_eq!(got, [vec![Some("200".to_owned())]], "the connection goes on");
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_at_a_time_client_is_closed_while_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir.path()) }).unwrap();
    let mut config = PgConfig::new("127.0.0.1:0".parse().unwrap());
    config.startup_timeout_ms = 500;
    let endpoint = PgEndpoint::start(engine.clone(), config).unwrap();
    // A well-formed startup packet (protocol 3.0, user=slow), sent one byte every 100 ms.
    let mut body = 196_608u32.to_be_bytes().to_vec();
    body.extend_from_slice(b"user\0slow\0\0");
    let mut packet = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    packet.extend_from_slice(&body);
    let mut slow = tokio::net::TcpStream::connect(endpoint.addr()).await.unwrap();
    let dribble = tokio::spawn(async move {
        for byte in packet {
            if slow.write_all(&[byte]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(30), slow.read_to_end(&mut answer)).await;
        answer
    });
    // Meanwhile another client connects and works.
    let client = connect(endpoint.addr()).await.unwrap();
    assert_eq!(
        query(&client, "CREATE TABLE t (k BIGINT PRIMARY KEY); INSERT INTO t VALUES (1)").await.unwrap().0,
        [0, 1]
    );
    // The slow one got an ErrorResponse (08P01) and a closed connection.
    let answer = dribble.await.unwrap();
    assert_eq!(answer.first(), Some(&b'E'), "an ErrorResponse: {answer:?}");
    assert!(answer.windows(5).any(|w| w == b"08P01"), "SQLSTATE 08P01: {}", String::from_utf8_lossy(&answer));
    let (_, rows) = query(&client, "SELECT k FROM t").await.unwrap();
    assert_eq!(rows, [vec![Some("1".to_owned())]], "the other client goes on");
    drop(endpoint);
    engine.shutdown().unwrap();
}

/// Reads backend messages until one of `kind` (included), or the end.
async fn read_until_message(socket: &mut tokio::net::TcpStream, kind: u8) -> Vec<(u8, Vec<u8>)> {
    let mut messages = Vec::new();
    loop {
        let mut header = [0u8; 5];
        if socket.read_exact(&mut header).await.is_err() {
            return messages;
        }
        let length = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let mut body = vec![0u8; length - 4];
        socket.read_exact(&mut body).await.unwrap();
        messages.push((header[0], body));
        if header[0] == kind {
            return messages;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_cap_is_refused_by_its_header_and_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir.path()) }).unwrap();
    let mut config = PgConfig::new("127.0.0.1:0".parse().unwrap());
    config.message_bytes_max = 1 << 20;
    let endpoint = PgEndpoint::start(engine.clone(), config).unwrap();
    let client = connect(endpoint.addr()).await.unwrap();
    // Under the cap: a query of about 900 KB works.
    let rows: Vec<String> = (0..100_000).map(|k| format!("({k})")).collect();
    let insert = format!("CREATE TABLE t (k BIGINT PRIMARY KEY); INSERT INTO t VALUES {}", rows.join(", "));
    assert!(insert.len() > 800_000 && insert.len() < 1 << 20);
    assert_eq!(query(&client, &insert).await.unwrap().0, [0, 100_000]);
    // A client announces a 1 GiB query and sends only its header.
    let mut raw = tokio::net::TcpStream::connect(endpoint.addr()).await.unwrap();
    let mut body = 196_608u32.to_be_bytes().to_vec();
    body.extend_from_slice(b"user\0raw\0\0");
    let mut packet = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    packet.extend_from_slice(&body);
    raw.write_all(&packet).await.unwrap();
    let ready = read_until_message(&mut raw, b'Z').await;
    assert_eq!(ready.last().map(|m| m.0), Some(b'Z'), "the startup completes: {ready:?}");
    let mut header = vec![b'Q'];
    header.extend_from_slice(&(1u32 << 30).to_be_bytes());
    raw.write_all(&header).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(30), read_until_message(&mut raw, 0)).await.unwrap();
    let (kind, error) = answer.first().expect("an answer before the close");
    let error = String::from_utf8_lossy(error);
    assert_eq!(*kind, b'E', "{error}");
    assert!(error.contains("54000") && error.contains("1073741824 bytes") && error.contains("'Q'"), "{error}");
    assert_eq!(answer.len(), 1, "then the connection is closed");
    // The Extended protocol is held to it too: a Parse over the cap.
    let big = format!("SELECT '{}'", "x".repeat(2 << 20));
    let error = client.prepare(&big).await.unwrap_err();
    assert_eq!(error.code().map(|c| c.code()), Some("54000"), "{error}");
    // Everyone else goes on.
    let other = connect(endpoint.addr()).await.unwrap();
    let (_, rows) = query(&other, "SELECT COUNT(*) FROM t").await.unwrap();
    assert_eq!(rows, [vec![Some("100000".to_owned())]]);
    drop(endpoint);
    engine.shutdown().unwrap();
}

/// The first row of a simple query, as text, once `done` holds for it (60 s at most).
async fn row_when(client: &Client, sql: &str, done: impl Fn(&[Option<String>]) -> bool) -> Vec<Option<String>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, rows) = query(client, sql).await.unwrap();
        if let Some(row) = rows.first().filter(|row| done(row)) {
            return row.clone();
        }
        assert!(Instant::now() < deadline, "{sql} never got there: {rows:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_from_stdin_appends_to_a_sources_topic_while_views_run() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 8);
    let client = connect(endpoint.addr()).await.unwrap();
    query(
        &client,
        "CREATE SOURCE ev (k BIGINT, v TEXT) FROM TOPIC 'ev' FORMAT JSON;\n\
         CREATE MATERIALIZED VIEW c AS SELECT COUNT(*) AS n, SUM(k) AS s FROM ev;\n\
         CREATE TABLE t (k BIGINT PRIMARY KEY)",
    )
    .await
    .unwrap();
    // tokio-postgres streams 10 000 lines in chunks that split lines anywhere.
    let lines: String = (1..=10_000).map(|k| format!("{{\"k\":{k},\"v\":\"line {k}\"}}\n")).collect();
    let sink = client.copy_in("COPY ev FROM STDIN WITH (KEY_FIELD 'k')").await.unwrap();
    futures::pin_mut!(sink);
    for chunk in lines.as_bytes().chunks(777) {
        futures::SinkExt::send(&mut sink, bytes::Bytes::copy_from_slice(chunk)).await.unwrap();
    }
    assert_eq!(sink.finish().await.unwrap(), 10_000);
    let row = row_when(&client, "SELECT n, s FROM c", |row| row[0].as_deref() == Some("10000")).await;
    assert_eq!(row, [Some("10000".to_owned()), Some("50005000".to_owned())]);
    // psql's \copy sends COPY ... FROM STDIN; the last line needs no newline.
    let file = dir.path().join("more.jsonl");
    std::fs::write(&file, "{\"k\":1}\n{\"k\":2}\n{\"k\":3}").unwrap();
    let addr = endpoint.addr();
    let output = std::process::Command::new("psql")
        .args([
            "-h",
            &addr.ip().to_string(),
            "-p",
            &addr.port().to_string(),
            "-U",
            "millpond",
            "-X",
            "-v",
            "ON_ERROR_STOP=1",
        ])
        .arg("-c")
        .arg(format!("\\copy ev FROM '{}'", file.display()))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "COPY 3");
    row_when(&client, "SELECT n FROM c", |row| row[0].as_deref() == Some("10003")).await;
    // What may not be written, or does not read, is refused with its
    // SQLSTATE: at once over the simple protocol (psql), at the COPY's end
    // over the extended one (tokio-postgres).
    let refusals = [
        ("COPY nothing FROM STDIN", "42P01"),
        ("COPY \"view.c\" FROM STDIN", "42501"),
        ("COPY \"table.t\" FROM STDIN", "42501"),
        ("COPY __millpond_catalog FROM STDIN", "42501"),
    ];
    for (sql, code) in refusals {
        let output = std::process::Command::new("psql")
            .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string(), "-U", "millpond", "-X"])
            .args(["-v", "VERBOSITY=verbose", "-c", sql])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() && stderr.contains(code), "{sql}: {stderr}");
        let sink = client.copy_in::<_, bytes::Bytes>(sql).await.unwrap();
        futures::pin_mut!(sink);
        futures::SinkExt::send(&mut sink, bytes::Bytes::from_static(b"{\"k\":1}\n")).await.unwrap();
        let error = sink.finish().await.unwrap_err();
        assert_eq!(error.code().map(|c| c.code()), Some(code), "{sql}: {error}");
    }
    let sink = client.copy_in::<_, bytes::Bytes>("COPY ev FROM '/etc/passwd'").await.unwrap();
    futures::pin_mut!(sink);
    let error = sink.finish().await.unwrap_err();
    assert_eq!(error.code().map(|c| c.code()), Some("42601"), "{error}");
    let sink = client.copy_in("COPY ev FROM STDIN WITH (KEY_FIELD 'k')").await.unwrap();
    futures::pin_mut!(sink);
    futures::SinkExt::send(&mut sink, bytes::Bytes::from_static(b"{\"k\":7}\nnot json\n{\"k\":8}\n")).await.unwrap();
    let error = sink.finish().await.unwrap_err();
    let db = error.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "22P02");
    assert!(db.message().starts_with("line 2: not JSON"), "{}", db.message());
    // The connection goes on after the failed COPY.
    assert_eq!(query(&client, "SELECT 1").await.unwrap().1, [vec![Some("1".to_owned())]]);
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subqueries_of_a_one_off_select_read_views_too() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 8);
    let client = connect(endpoint.addr()).await.unwrap();
    query(
        &client,
        "CREATE TABLE t (k BIGINT PRIMARY KEY);\n\
         CREATE MATERIALIZED VIEW a AS SELECT k FROM t; CREATE MATERIALIZED VIEW b AS SELECT k FROM t WHERE k % 2 = 0",
    )
    .await
    .unwrap();
    let rows: Vec<String> = (1..=50).map(|k| format!("({k})")).collect();
    query(&client, &format!("INSERT INTO t VALUES {}", rows.join(", "))).await.unwrap();
    // Views only in subqueries (they used to be left unread: XX000), and
    // read-your-writes covers them too.
    let (_, rows) =
        query(&client, "SELECT (SELECT COUNT(*) FROM a) AS n, (SELECT MAX(k) FROM b) AS top").await.unwrap();
    assert_eq!(rows, [vec![Some("50".to_owned()), Some("50".to_owned())]]);
    let (_, rows) = query(
        &client,
        "SELECT COUNT(*) FROM a WHERE k IN (SELECT k FROM b) AND EXISTS (SELECT 1 FROM b WHERE b.k = a.k + 2)",
    )
    .await
    .unwrap();
    assert_eq!(rows, [vec![Some("24".to_owned())]]);
    drop(endpoint);
    engine.shutdown().unwrap();
}

/// An endpoint without I/O threads, or with more than the cap, is refused
/// at start with what is wrong; one thread serves clients.
#[test]
fn the_endpoint_runs_one_to_the_cap_of_io_threads() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir.path()) }).unwrap();
    for wrong in [0, millpond_server::WIRE_THREADS_MAX + 1] {
        let mut config = PgConfig::new("127.0.0.1:0".parse().unwrap());
        config.wire_threads = wrong;
        let error = PgEndpoint::start(engine.clone(), config).unwrap_err().to_string();
        assert!(error.contains(&format!("wire_threads must be 1 to 64, not {wrong}")), "{error}");
    }
    let mut config = PgConfig::new("127.0.0.1:0".parse().unwrap());
    config.wire_threads = 1;
    let endpoint = PgEndpoint::start(engine.clone(), config).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let rows = runtime.block_on(async {
        let client = connect(endpoint.addr()).await.unwrap();
        query(&client, "SELECT 1 + 1").await.unwrap().1
    });
    assert_eq!(rows, vec![vec![Some("2".to_owned())]]);
}

/// One-off SELECTs read views through a cache that each query brings
/// forward (`view_cache`): after every batch of random writes the view as
/// a SELECT answers it equals its recomputation from the table's rows, and
/// a view dropped and created again is read as the new definition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selects_through_the_view_cache_equal_a_recomputation() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 16);
    let client = connect(endpoint.addr()).await.unwrap();
    let view =
        |scale: i64| format!("CREATE MATERIALIZED VIEW per_v AS SELECT v, COUNT(*) * {scale} AS n FROM t GROUP BY v");
    query(&client, &format!("CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT);\n{}", view(1))).await.unwrap();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n) as i64
    };
    let mut table = std::collections::BTreeMap::new();
    let mut scale = 1;
    for round in 0..30 {
        // The round that re-creates the view writes nothing: until the new
        // definition commits, the old one (as of round 14) may be read.
        for _ in 0..=next(6) * i64::from(round != 15) {
            let (k, v) = (next(40), next(5));
            let sql = match next(3) {
                0 => {
                    table.insert(k, v);
                    format!("DELETE FROM t WHERE k = {k}; INSERT INTO t VALUES ({k}, {v})")
                }
                1 => {
                    if let Some(held) = table.get_mut(&k) {
                        *held = v;
                    }
                    format!("UPDATE t SET v = {v} WHERE k = {k}")
                }
                _ => {
                    table.remove(&k);
                    format!("DELETE FROM t WHERE k = {k}")
                }
            };
            query(&client, &sql).await.unwrap();
        }
        if round == 15 {
            scale = 10;
            // Dropped and committed without it first: the new view has a
            // changelog of its own (in one batch it would replace the old).
            query(&client, "DROP MATERIALIZED VIEW per_v").await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            while millpond_dataflow::list_views(dir.path()).unwrap().iter().any(|v| v.name == "per_v") {
                assert!(Instant::now() < deadline, "the drop never committed");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            query(&client, &view(scale)).await.unwrap();
        }
        let expected_at = |scale: i64| {
            let mut counts = std::collections::BTreeMap::new();
            for v in table.values() {
                *counts.entry(*v).or_insert(0) += scale;
            }
            counts.iter().map(|(v, n)| vec![Some(v.to_string()), Some(n.to_string())]).collect::<Vec<_>>()
        };
        let expected = expected_at(scale);
        let mut rows = query(&client, "SELECT v, n FROM per_v ORDER BY v").await.unwrap().1;
        // Until the new definition's first commit, a read may wait for it
        // or see the old rows; then the new ones, never anything else (a
        // cache that kept the old reader's rows would answer none).
        let deadline = Instant::now() + Duration::from_secs(30);
        while round == 15 && rows != expected && Instant::now() < deadline {
            assert_eq!(rows, expected_at(1), "round {round}: neither the old view nor the new one");
            tokio::time::sleep(Duration::from_millis(20)).await;
            rows = query(&client, "SELECT v, n FROM per_v ORDER BY v").await.unwrap().1;
        }
        assert_eq!(rows, expected, "round {round}");
    }
    drop(endpoint);
    engine.shutdown().unwrap();
}

/// A view's ORDER BY without LIMIT is accepted with a NOTICE (a view holds
/// no order), sent before the statement completes, over both protocols.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_ordered_without_limit_is_created_with_a_notice() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 4);
    let addr = endpoint.addr();
    let (client, mut connection) =
        tokio_postgres::connect(&format!("host={} port={} user=millpond", addr.ip(), addr.port()), NoTls)
            .await
            .unwrap();
    let (notices, mut received) = tokio::sync::mpsc::unbounded_channel();
    let messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
    tokio::spawn(messages.for_each(move |message| {
        if let Ok(tokio_postgres::AsyncMessage::Notice(notice)) = message {
            notices.send(notice).unwrap();
        }
        std::future::ready(())
    }));
    client
        .batch_execute("CREATE TABLE t (id INT PRIMARY KEY, price INT); INSERT INTO t VALUES (1, 5), (2, 7)")
        .await
        .unwrap();
    let create = "CREATE MATERIALIZED VIEW v AS SELECT id FROM t ORDER BY price DESC";
    client.batch_execute(create).await.unwrap();
    let notice = received.try_recv().expect("the notice came before the statement completed");
    assert_eq!((notice.severity(), notice.code().code()), ("NOTICE", "00000"));
    assert!(notice.message().starts_with("ORDER BY without LIMIT orders nothing here"), "{}", notice.message());
    // The position is the ORDER BY key's, in characters from 1, as for errors.
    let position: usize = notice.position().map_or(0, |p| match p {
        tokio_postgres::error::ErrorPosition::Original(at) => *at as usize,
        tokio_postgres::error::ErrorPosition::Internal { position, .. } => *position as usize,
    });
    assert_eq!(&create[position - 1..], "price DESC");
    // The view holds every row (the order dropped, not the rows).
    let rows = client.simple_query("SELECT id FROM v ORDER BY id").await.unwrap();
    let ids: Vec<&str> = rows
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["1", "2"]);
    // The extended protocol sends it too; a statement without one sends none.
    client.execute("CREATE MATERIALIZED VIEW w AS SELECT id FROM t ORDER BY id", &[]).await.unwrap();
    assert!(received.try_recv().unwrap().message().contains("ORDER BY without LIMIT"));
    client.batch_execute("CREATE MATERIALIZED VIEW x AS SELECT id FROM t").await.unwrap();
    assert!(received.try_recv().is_err());
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_select_and_create_table_as_read_views_and_tables_once() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 4);
    let client = connect(endpoint.addr()).await.unwrap();
    let text = |s: &str| Some(s.to_owned());
    query(
        &client,
        "CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT); INSERT INTO t VALUES (1, 10), (2, 20), (3, 30);\n\
         CREATE TABLE archive (parity BIGINT, total BIGINT);\n\
         CREATE MATERIALIZED VIEW totals AS SELECT k % 2 AS parity, SUM(v) AS s FROM t GROUP BY k % 2",
    )
    .await
    .unwrap();
    // Read-your-writes: the view holds the rows above before it is copied.
    assert_eq!(query(&client, "SELECT COUNT(*) FROM totals").await.unwrap().1, [vec![text("2")]]);
    let (counts, _) = query(&client, "INSERT INTO archive SELECT parity, s FROM totals").await.unwrap();
    assert_eq!(counts, [2], "INSERT 0 2");
    let (counts, _) = query(
        &client,
        "CREATE TABLE snap AS SELECT parity, s * 10 AS big, k FROM totals JOIN t ON t.k % 2 = totals.parity",
    )
    .await
    .unwrap();
    assert_eq!(counts, [3], "SELECT 3: one row per row of t");
    // Later changes to what they read do not reach the copies.
    query(&client, "DELETE FROM t; INSERT INTO t VALUES (8, 800)").await.unwrap();
    assert_eq!(query(&client, "SELECT s FROM totals").await.unwrap().1, [vec![text("800")]]);
    let archive = query(&client, "SELECT parity, total FROM archive ORDER BY parity").await.unwrap().1;
    assert_eq!(archive, [vec![text("0"), text("20")], vec![text("1"), text("40")]]);
    let snap = query(&client, "SELECT k, big FROM snap ORDER BY k").await.unwrap().1;
    assert_eq!(snap, [vec![text("1"), text("400")], vec![text("2"), text("200")], vec![text("3"), text("400")]]);
    // A type the column cannot take is refused (42804), and nothing is written.
    let error = query(&client, "INSERT INTO archive SELECT parity, 'x' || s FROM totals").await.unwrap_err();
    assert_eq!(sqlstate(&error), "42804", "{error:?}");
    assert_eq!(query(&client, "SELECT COUNT(*) FROM archive").await.unwrap().1, [vec![text("2")]]);
    drop(endpoint);
    engine.shutdown().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_with_repeated_column_names_reads_back_by_its_renamed_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = serve(dir.path(), 4);
    let client = connect(endpoint.addr()).await.unwrap();
    let text = |s: &str| Some(s.to_owned());
    query(
        &client,
        "CREATE TABLE a (id INT PRIMARY KEY, x INT); INSERT INTO a VALUES (1, 10), (2, 20);\n\
         CREATE MATERIALIZED VIEW w AS SELECT x + 1, x * 2, x - 1 FROM a;\n\
         CREATE VIEW p AS SELECT a.x, b.x FROM a, a AS b WHERE a.id < b.id;\n\
         CREATE MATERIALIZED VIEW q AS SELECT * FROM p",
    )
    .await
    .unwrap();
    // Each column keeps its value: the reader names them as the view did.
    let rows = client.query("SELECT * FROM w ORDER BY 1", &[]).await.unwrap();
    let names: Vec<&str> = rows[0].columns().iter().map(|c| c.name()).collect();
    assert_eq!(names, ["?column?", "?column?_2", "?column?_3"]);
    let (_, got) = query(&client, "SELECT * FROM w ORDER BY 1").await.unwrap();
    assert_eq!(got, [vec![text("11"), text("20"), text("9")], vec![text("21"), text("40"), text("19")]]);
    let (_, got) = query(&client, "SELECT x, x_2 FROM q").await.unwrap();
    assert_eq!(got, [vec![text("10"), text("20")]]);
    drop(endpoint);
    engine.shutdown().unwrap();
}
