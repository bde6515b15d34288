//! SQL views under `kill -9`, with the real binary, compared with SQLite.
//!
//! `millpond run FILE.sql` maintains a sample of the SQLite corpus's views
//! (aggregates, joins, USING joins, top-k, TUMBLE/HOP/CUMULATE, SESSION, window functions,
//! subqueries, DISTINCT, UNION, EXCEPT ALL, INTERSECT, CTEs) over tables, an
//! upsert source and an append-only source. It is SIGKILLed at random
//! moments — while it executes the file (whose INSERTs must be applied once
//! per data directory), recovers, processes and checkpoints — and between
//! kills more data arrives: `millpond produce` appends events and upserts,
//! `millpond sql` inserts, updates and deletes table rows. A last run with
//! `--until-caught-up` finishes the input; then every view, as
//! `millpond view read` prints it, must equal SQLite's result over the same
//! data.
//!
//! `MILLPOND_SQL_KILL9_SEED` replays a run, `MILLPOND_SQL_KILL9_KILLS` sets the
//! number of kills (default 10).

#[path = "../crates/sql/tests/sqlite/common.rs"]
mod sqlite_common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use millpond_sql::{Session, Type};
use rusqlite::Connection;
use sqlite_common::*;

/// The corpus entries the job maintains.
const VIEWS: &[&str] = &[
    "agg_group_e_cat",
    "agg_global_e",
    "agg_group_null_key",
    "agg_minmax_retract",
    "agg_group_decimal",
    "having_count",
    "join_e_u_left",
    "join_three",
    "join_full_u",
    "join_left_group",
    "topk_partition",
    "topk_t1_s",
    "limit_simple",
    "tumble_hour",
    "hop",
    "distinct_two",
    "union_all_agg",
    "cte_two",
    "ts_group_hour",
    "sub_scalar_corr_count",
    "sub_in_value",
    "sub_exists_upsert",
    "any_eq_correlated",
    "except_all",
    "intersect_all",
    "using_full",
    "win_running",
    "win_rank_partition",
    "win_lag_lead",
    "session_rows",
    "session_e",
    "cumulate_hour",
    "lateral_series_left",
    "lateral_series_aggregate",
    "lat_top2",
    "lat_left_on",
];

fn millpond(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_millpond"));
    command.arg("--data-dir").arg(dir);
    command
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn succeed(command: &mut Command, what: &str) -> String {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(output.status.success(), "{what}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

fn produce(dir: &Path, topic: &str, key_field: Option<&str>, lines: &[String]) {
    let mut command = millpond(dir);
    command.args(["produce", topic]);
    if let Some(field) = key_field {
        command.args(["--key-field", field]);
    }
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "produce {topic}: {}", String::from_utf8_lossy(&output.stderr));
}

/// Appends a phase's events and upserts through the binary, and to SQLite.
fn append(dir: &Path, sqlite: &Connection, phase: &Phase) {
    produce(dir, "etopic", None, &phase.events.iter().map(|(json, _)| json.clone()).collect::<Vec<_>>());
    let upserts: Vec<String> =
        phase.upserts.iter().map(|(_, row)| row.as_ref().expect("no tombstones").0.clone()).collect();
    produce(dir, "utopic", Some("k"), &upserts);
    let sources = Phase { dml: Vec::new(), upserts: phase.upserts.clone(), events: phase.events.clone() };
    apply_sqlite(sqlite, &sources).unwrap();
}

/// Executes `pending` DML with `millpond sql`, and in SQLite, unless the
/// tables do not exist yet (every run so far was killed before its file's
/// statements were written): then they stay pending.
fn execute(dir: &Path, sqlite: &Connection, pending: &mut Vec<String>) {
    if pending.is_empty() {
        return;
    }
    let output = millpond(dir).args(["sql", &pending.join(";\n")]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() && stderr.contains("unknown table") {
        return;
    }
    assert!(output.status.success(), "millpond sql: {stderr}");
    apply_sqlite(sqlite, &Phase { dml: std::mem::take(pending), ..Phase::default() }).unwrap();
}

fn start(dir: &Path, file: &Path, log: &Path, workers: u64, until_caught_up: bool) -> Child {
    let mut command = millpond(dir);
    command.arg("run").arg(file).args(["--epoch-ms", "10", "--workers", &workers.to_string()]);
    if until_caught_up {
        command.arg("--until-caught-up");
    }
    let log = std::fs::File::create(log).unwrap();
    command.stdout(Stdio::null()).stderr(log).spawn().unwrap()
}

/// A view's rows as `millpond view read` prints them.
fn view_rows(dir: &Path, name: &str, columns: &[(String, Type)]) -> Rows {
    let text = succeed(millpond(dir).args(["view", "read", name]), &format!("view read {name}"));
    let mut rows = Vec::new();
    for line in text.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let object = row.as_object().expect("a row is an object");
        assert_eq!(object.len(), columns.len(), "view {name}: {line}");
        let cells: Vec<Cell> = columns
            .iter()
            .map(|(column, ty)| our_cell(object.get(column).unwrap_or(&serde_json::Value::Null), *ty))
            .collect();
        rows.push(cells); // a row held N times is printed N times
    }
    rows
}

#[test]
fn sql_views_match_sqlite_across_kill_9() {
    let seed = env_u64("MILLPOND_SQL_KILL9_SEED", std::process::id() as u64);
    let kills = env_u64("MILLPOND_SQL_KILL9_KILLS", 10);
    eprintln!("sql kill -9: {kills} kills, MILLPOND_SQL_KILL9_SEED={seed}");
    let mut rng = Rng::new(seed);
    let data = tempfile::tempdir().unwrap();
    let dir = data.path();
    let files = tempfile::tempdir().unwrap();
    let sqlite = Connection::open_in_memory().unwrap();
    sqlite.execute_batch(SQLITE_SCHEMA).unwrap();
    let entries = corpus();
    let entry = |name: &str| entries.iter().find(|e| e.name == name).unwrap_or_else(|| panic!("no entry {name}"));

    // The file: the schema, the first rows (applied once per data
    // directory, however often the file runs) and the views.
    let mut generator = Generator::new(seed);
    let mut first = generator.phase(0);
    first.upserts.retain(|(_, row)| row.is_some());
    let views: String =
        VIEWS.iter().map(|name| format!("CREATE MATERIALIZED VIEW {name} AS {};\n", entry(name).query)).collect();
    let definitions = format!("{OUR_SCHEMA}\n{views}");
    let file = files.path().join("views.sql");
    std::fs::write(&file, format!("{definitions}\n{};\n", first.dml.join(";\n"))).unwrap();
    // The views' column types, from the same definitions in a scratch directory.
    let scratch = tempfile::tempdir().unwrap();
    let mut session = Session::open(scratch.path()).unwrap();
    session.execute(&definitions, None, false).unwrap();
    let columns: BTreeMap<String, Vec<(String, Type)>> =
        session.compile().unwrap().views.into_iter().map(|v| (v.name, v.columns)).collect();
    drop(session);

    succeed(millpond(dir).args(["topic", "create", "etopic", "--partitions", "2"]), "topic create");
    succeed(millpond(dir).args(["topic", "create", "utopic", "--cleanup-policy", "compact"]), "topic create");
    append(dir, &sqlite, &first);
    apply_sqlite(&sqlite, &Phase { dml: first.dml.clone(), ..Phase::default() }).unwrap();
    let mut pending = Vec::new();

    let log = files.path().join("run.log");
    for round in 0..kills {
        let mut job = start(dir, &file, &log, 1 + round % 2, false);
        // Often right after the start (the file's statements, recovery),
        // otherwise while it processes the new input and checkpoints (a
        // restarted run commits its first epoch within about a second).
        let delay_ms = match rng.below(4) {
            0 => rng.below(40),
            1 => 40 + rng.below(600),
            _ => 600 + rng.below(1400),
        };
        std::thread::sleep(Duration::from_millis(delay_ms));
        job.kill().unwrap();
        let status = job.wait().unwrap();
        let stderr = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(status.code().is_none(), "round {round}: the job was killed, not exited ({status:?}): {stderr}");
        let changes = generator.round();
        append(dir, &sqlite, &changes);
        pending.extend(changes.dml);
        execute(dir, &sqlite, &mut pending);
    }
    if !pending.is_empty() {
        // Every run was killed before it wrote the file's statements.
        let status = start(dir, &file, &log, 1, true).wait().unwrap();
        assert!(status.success(), "a run to the end: {}", std::fs::read_to_string(&log).unwrap_or_default());
        execute(dir, &sqlite, &mut pending);
        assert!(pending.is_empty(), "the file's tables exist");
    }
    // The killed runs committed epochs: the final run resumes their work.
    let listed = succeed(millpond(dir).args(["view", "list"]), "view list");
    assert!(VIEWS.iter().all(|name| listed.contains(name)), "the killed runs committed every view: {listed}");
    let mut last = start(dir, &file, &log, 2, true);
    let status = last.wait().unwrap();
    assert!(status.success(), "the final run exits cleanly: {}", std::fs::read_to_string(&log).unwrap_or_default());

    let mut failures = Vec::new();
    let empty: Vec<&str> = VIEWS
        .iter()
        .copied()
        .filter(|name| sqlite_rows(&sqlite, entry(name).sqlite_query()).unwrap().0.is_empty())
        .collect();
    assert!(empty.is_empty(), "the workload gives every view rows, but not {empty:?}");
    for name in VIEWS {
        let ours = view_rows(dir, name, &columns[*name]);
        let (theirs, width) = sqlite_rows(&sqlite, entry(name).sqlite_query()).unwrap();
        assert_eq!(width, columns[*name].len(), "{name}: SQLite's columns");
        if let Some(difference) = compare(&ours, &theirs) {
            failures.push(format!("{name}: {}\n{difference}", entry(name).query));
        }
    }
    assert!(failures.is_empty(), "seed {seed}: views differ from SQLite:\n{}", failures.join("\n"));
}
