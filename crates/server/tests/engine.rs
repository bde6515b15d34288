//! The engine: statements while views run, views created and dropped at run
//! time, a subscriber that follows a view across those restarts and misses
//! nothing, and a catalog that survives reopening.
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use millpond_dataflow::{Event, StateBackend, Subscription, read_view};
use millpond_server::{Engine, EngineConfig, RunState};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn config(dir: &Path) -> EngineConfig {
    EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir) }
}

/// The view's rows as row -> multiplicity (an unknown view is empty).
fn rows(dir: &Path, view: &str) -> BTreeMap<String, i64> {
    match read_view(dir, view) {
        Ok(snapshot) => snapshot.rows.into_iter().map(|(row, n)| (row.to_string(), n)).collect(),
        Err(_) => BTreeMap::new(),
    }
}

fn wait_for(dir: &Path, view: &str, expected: &[Value]) {
    let expected: BTreeMap<String, i64> = expected.iter().map(|row| (row.to_string(), 1)).collect();
    let deadline = Instant::now() + WAIT;
    while rows(dir, view) != expected {
        assert!(Instant::now() < deadline, "view {view}: {:?}, expected {expected:?}", rows(dir, view));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Folds what `subscription` delivers until it holds `expected` (as a bag).
fn follow(subscription: &mut Subscription, held: &mut BTreeMap<String, i64>, expected: &[Value]) {
    let expected: BTreeMap<String, i64> = expected.iter().map(|row| (row.to_string(), 1)).collect();
    let deadline = Instant::now() + WAIT;
    while *held != expected {
        assert!(Instant::now() < deadline, "the subscriber holds {held:?}, expected {expected:?}");
        if let Some(Event::Change { diff, row, .. }) = subscription.next_timeout(Duration::from_millis(50)).unwrap() {
            let count = held.entry(row.to_string()).or_default();
            *count += diff;
            assert!(*count >= 0, "a row retracted more than it was inserted: {row}");
            if *count == 0 {
                held.remove(&row.to_string());
            }
        }
    }
}

#[test]
fn statements_run_while_views_run_and_views_come_and_go_without_losing_a_subscriber() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let engine = Engine::open(config(dir)).unwrap();
    assert_eq!(engine.status(), RunState::Idle);
    let tags: Vec<String> = engine
        .execute(
            "CREATE TABLE item (id BIGINT PRIMARY KEY, price BIGINT);\n\
             INSERT INTO item VALUES (1, 10), (2, 20);\n\
             CREATE MATERIALIZED VIEW total AS SELECT SUM(price) AS total FROM item;",
        )
        .unwrap()
        .into_iter()
        .map(|o| o.tag)
        .collect();
    assert_eq!(tags, ["CREATE TABLE item", "INSERT 2", "CREATE MATERIALIZED VIEW total"]);
    wait_for(dir, "total", &[json!({"total": 30})]);
    assert_eq!(engine.status(), RunState::Running { views: vec!["total".into()] });

    // DML while the view runs (was: refused, the job held the directory's lock).
    let mut subscription = Subscription::open(dir, "total", None, true).unwrap();
    let mut held = BTreeMap::new();
    follow(&mut subscription, &mut held, &[json!({"total": 30})]);
    engine.execute("INSERT INTO item VALUES (3, 5)").unwrap();
    follow(&mut subscription, &mut held, &[json!({"total": 35})]);

    // A view created at run time is maintained; the subscriber of the other
    // one follows it across the restart and misses nothing.
    engine.execute("CREATE MATERIALIZED VIEW cheap AS SELECT id FROM item WHERE price < 15").unwrap();
    wait_for(dir, "cheap", &[json!({"id": 1}), json!({"id": 3})]);
    let mut views = vec!["cheap".to_owned(), "total".to_owned()];
    assert_eq!(engine.status(), RunState::Running { views: views.clone() });
    engine.execute("UPDATE item SET price = 1 WHERE id = 2").unwrap();
    follow(&mut subscription, &mut held, &[json!({"total": 16})]);
    wait_for(dir, "cheap", &[json!({"id": 1}), json!({"id": 2}), json!({"id": 3})]);

    // Dropped at run time: gone, the other view goes on.
    engine.execute("DROP MATERIALIZED VIEW cheap").unwrap();
    views.remove(0);
    let deadline = Instant::now() + WAIT;
    while read_view(dir, "cheap").is_ok() {
        assert!(Instant::now() < deadline, "the dropped view is still readable");
        std::thread::sleep(Duration::from_millis(20));
    }
    engine.execute("DELETE FROM item WHERE id = 1").unwrap();
    follow(&mut subscription, &mut held, &[json!({"total": 6})]);
    engine.shutdown().unwrap();
    drop(engine);

    // Reopened: the catalog, the rows and the view are there, and it runs.
    let engine = Engine::open(config(dir)).unwrap();
    assert_eq!(engine.status(), RunState::Running { views });
    let kinds: Vec<(String, &str)> = engine.objects();
    assert_eq!(kinds, [("item".to_owned(), "table"), ("total".to_owned(), "materialized view")]);
    engine.execute("INSERT INTO item VALUES (4, 4)").unwrap();
    follow(&mut subscription, &mut held, &[json!({"total": 10})]);
    engine.shutdown().unwrap();
}

#[test]
fn a_failed_statement_changes_nothing_and_the_views_keep_running() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let engine = Engine::open(EngineConfig { state: StateBackend::Memory, ..config(dir) }).unwrap();
    engine
        .execute("CREATE TABLE t (k BIGINT PRIMARY KEY); CREATE MATERIALIZED VIEW n AS SELECT COUNT(*) AS n FROM t;")
        .unwrap();
    wait_for(dir, "n", &[json!({"n": 0})]);
    let error = engine.execute("INSERT INTO t VALUES (1); CREATE MATERIALIZED VIEW bad AS SELECT nope FROM t;");
    assert!(error.unwrap_err().to_string().contains("nope"));
    assert_eq!(engine.status(), RunState::Running { views: vec!["n".into()] });
    engine.execute("INSERT INTO t VALUES (2)").unwrap();
    wait_for(dir, "n", &[json!({"n": 1})]);
    engine.shutdown().unwrap();
}
