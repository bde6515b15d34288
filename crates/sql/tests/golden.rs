//! Golden tests: SQL behaviour pinned by checked-in files, not by plan
//! internals.
//!
//! - `sql/tests/NAME.sql`: a scenario (tables and their rows, sources and
//!   their records, views). Its `NAME.expected` lists every materialized
//!   view's final rows, or the error the file must fail with.
//! - `sql/tests/errors/NAME.sql`: a file that must fail; its `NAME.expected`
//!   is the rendered error (file:line:column, message, the line and a caret).
//! - `sql/nexmark/*.sql`, when that directory exists: each must execute
//!   (parse and bind) in a new data directory.
//!
//! A scenario is executed like `millpond run FILE.sql`: the whole file
//! through `Session::execute` (once per data directory), then every
//! materialized view run until caught up. Comment lines drive the rest:
//!
//! - `-- run` ends a phase: the statements before it are executed and the
//!   views run, then the next phase's statements are executed and the views
//!   run again (resuming their state), so later UPDATEs and DELETEs reach
//!   running views as retractions;
//! - `-- topic: NAME` names the topic that the next records go to;
//! - `-- record: JSON` appends a record without a key, `-- record KEY: JSON`
//!   one with a key, `-- record KEY: tombstone` a tombstone. A phase's
//!   records are appended after its statements run (so `CREATE SOURCE` has
//!   made the topic) and before its views run.
//!
//! The expected output lists the views after each phase (under `== phase N`
//! when there are several). A phase that fails must be the last: its
//! rendered error ends the output, and nothing of it may be applied (the
//! test checks that the catalog and the tables' topics are as they were).
//!
//! `MILLPOND_BLESS=1 cargo test -p millpond-sql --test golden` rewrites the
//! `.expected` files: check each by hand before committing it.
use std::cmp::Ordering;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use millpond_dataflow::{RuntimeConfig, TopicRecord, Topics, read_view};
use millpond_sql::{CompiledCatalog, Error, Session};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository root")
}

/// The `.sql` files of `dir`, sorted.
fn sql_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    files
}

/// A record a scenario appends to a topic.
#[derive(Debug)]
struct Record {
    topic: String,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
}

/// A phase: its lines of the file (the others blanked, so that line
/// numbers stay the file's) and its records.
#[derive(Debug)]
struct Phase {
    text: String,
    records: Vec<Record>,
}

fn phases(text: &str, file: &str) -> Vec<Phase> {
    let lines: Vec<&str> = text.lines().collect();
    let mut phases = Vec::new();
    let mut start = 0;
    let mut records = Vec::new();
    let mut topic: Option<String> = None;
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("-- topic:") {
            topic = Some(name.trim().to_owned());
        } else if let Some(rest) = line.strip_prefix("-- record") {
            let (key, value) =
                rest.split_once(':').unwrap_or_else(|| panic!("{file}:{}: `-- record [KEY]: JSON`", i + 1));
            let topic = topic.clone().unwrap_or_else(|| panic!("{file}:{}: a record before `-- topic: NAME`", i + 1));
            let key = Some(key.trim()).filter(|k| !k.is_empty()).map(|k| k.as_bytes().to_vec());
            let value = value.trim();
            let value = (value != "tombstone").then(|| value.as_bytes().to_vec());
            records.push(Record { topic, key, value });
        }
        if line == "-- run" || i + 1 == lines.len() {
            let text: Vec<&str> =
                lines.iter().enumerate().map(|(j, l)| if (start..=i).contains(&j) { *l } else { "" }).collect();
            phases.push(Phase { text: text.join("\n"), records: std::mem::take(&mut records) });
            start = i + 1;
        }
    }
    phases
}

/// JSON values in SQL's order: NULL first, numbers by value.
fn compare_json(a: &serde_json::Value, b: &serde_json::Value) -> Ordering {
    use serde_json::Value as J;
    let rank = |v: &J| match v {
        J::Null => 0,
        J::Bool(_) => 1,
        J::Number(_) => 2,
        J::String(_) => 3,
        J::Array(_) => 4,
        J::Object(_) => 5,
    };
    match (a, b) {
        (J::Bool(x), J::Bool(y)) => x.cmp(y),
        (J::Number(x), J::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => x.as_f64().unwrap_or(f64::NAN).total_cmp(&y.as_f64().unwrap_or(f64::NAN)),
        },
        (J::String(x), J::String(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)).then_with(|| a.to_string().cmp(&b.to_string())),
    }
}

/// Every view's rows: a header with its columns and types, then one JSON
/// object per row in column order, sorted, with ` xN` for multiplicity N ≠ 1.
fn list_views(dir: &Path, views: &[(String, Vec<(String, String)>)]) -> String {
    let mut out = String::new();
    for (name, columns) in views {
        let snapshot = read_view(dir, name).unwrap_or_else(|e| panic!("reading view {name}: {e}"));
        let mut rows: Vec<(Vec<serde_json::Value>, i64)> = snapshot
            .rows
            .iter()
            .map(|(row, n)| {
                let values = columns.iter().map(|(c, _)| row.get(c).cloned().unwrap_or(serde_json::Value::Null));
                assert_eq!(row.as_object().map(|o| o.len()), Some(columns.len()), "view {name}: row {row}");
                (values.collect(), *n)
            })
            .collect();
        rows.sort_by(|(a, _), (b, _)| {
            a.iter().zip(b).map(|(x, y)| compare_json(x, y)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
        });
        let described: Vec<String> = columns.iter().map(|(c, t)| format!("{c} {t}")).collect();
        let count: i64 = rows.iter().map(|(_, n)| n).sum();
        let _ = writeln!(out, "-- {name} ({}): {count} row{}", described.join(", "), if count == 1 { "" } else { "s" });
        for (values, n) in rows {
            let fields: Vec<String> = columns
                .iter()
                .zip(&values)
                .map(|((c, _), v)| format!("{}:{v}", serde_json::Value::String(c.clone())))
                .collect();
            let _ = write!(out, "{{{}}}", fields.join(","));
            if n != 1 {
                let _ = write!(out, " x{n}");
            }
            out.push('\n');
        }
    }
    out
}

/// What a finished phase leaves to compare: each table's topic end.
fn table_ends(dir: &Path, objects: &[(String, &'static str)]) -> Vec<(String, u64)> {
    let topics = Topics::open(dir).expect("opening the topics");
    objects
        .iter()
        .filter(|(_, kind)| *kind == "table")
        .map(|(name, _)| {
            let topic = format!("table.{name}");
            let end = if topics.exists(&topic) { topics.end_offset(&topic, 0).expect("an end offset") } else { 0 };
            (name.clone(), end)
        })
        .collect()
}

/// Runs the scenario `path` (named `file` in errors) in a new data
/// directory; returns what its `.expected` must hold: each phase's views
/// (under a `== phase N` line when there are several), then the error that
/// stopped it, if one did.
fn run_scenario(path: &Path, file: &str) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {file}: {e}"));
    let temp = tempfile::tempdir().expect("a temporary directory");
    let dir = temp.path();
    let phases = phases(&text, file);
    let mut out = String::new();
    let mut previous: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for (number, phase) in phases.iter().enumerate() {
        if phases.len() > 1 {
            let _ = writeln!(out, "{}== phase {}", if number > 0 { "\n" } else { "" }, number + 1);
        }
        let mut session = Session::open(dir).expect("opening a session");
        let before = session.objects();
        let views: CompiledCatalog = match session.execute(&phase.text, Some(file), true) {
            Ok(_) => session.compile().unwrap_or_else(|e| panic!("{file}: compiling: {e}")),
            Err(error) => {
                drop(session);
                let ends_before = table_ends(dir, &before);
                let session = Session::open(dir).expect("opening a session");
                assert_eq!(session.objects(), before, "{file}: a failed phase changed the catalog");
                drop(session);
                assert_eq!(table_ends(dir, &before), ends_before, "{file}: a failed phase wrote table rows");
                let rendered = error.render(&text).replace(&dir.display().to_string(), "$DATA_DIR");
                assert!(matches!(error, Error::Sql { .. }), "{file}: not an SQL error: {rendered}");
                assert_eq!(number + 1, phases.len(), "{file}: phase {} failed, but a phase follows it", number + 1);
                return format!("{out}{rendered}\n");
            }
        };
        drop(session);
        if !phase.records.is_empty() {
            let topics = Topics::open(dir).expect("opening the topics");
            for record in &phase.records {
                assert!(topics.exists(&record.topic), "{file}: no topic {}", record.topic);
                let appended = TopicRecord { key: record.key.clone(), value: record.value.clone(), headers: vec![] };
                topics.append(&record.topic, vec![appended]).expect("appending a record");
            }
        }
        let listed: Vec<(String, Vec<(String, String)>)> = views
            .views
            .iter()
            .map(|v| (v.name.clone(), v.columns.iter().map(|(c, t)| (c.clone(), t.to_string())).collect()))
            .collect();
        if views.views.is_empty() {
            out.push_str("-- no materialized views\n");
            continue;
        }
        let config = RuntimeConfig::new(dir).epoch_interval_ms(20).stop_when_caught_up(true);
        let stats = millpond_sql::run(config, views).unwrap_or_else(|e| panic!("{file}: running: {e}"));
        if stats.dead_letters > 0 {
            let _ = writeln!(out, "-- dead letters: {}", stats.dead_letters);
        }
        out.push_str(&list_views(dir, &listed));
        // A view the catalog no longer has is gone, changelog and all.
        for (name, _) in &previous {
            if !listed.iter().any(|(n, _)| n == name) {
                assert!(read_view(dir, name).is_err(), "{file}: dropped view {name} can still be read");
            }
        }
        previous = listed;
    }
    out
}

/// Runs every `.sql` file of `dir` and compares (or, with MILLPOND_BLESS=1,
/// rewrites) its `.expected`; `check(file, text, output)` asserts what every
/// file and output must be.
fn golden_dir(relative: &str, minimum: usize, check: impl Fn(&str, &str, &str)) {
    let root = repo_root();
    let bless = std::env::var_os("MILLPOND_BLESS").is_some_and(|v| v == "1");
    let files = sql_files(&root.join(relative));
    assert!(files.len() >= minimum, "{relative} has {} files, fewer than {minimum}", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let name = path.file_name().expect("a file name").to_string_lossy();
        let file = format!("{relative}/{name}");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {file}: {e}"));
        assert!(text.starts_with("-- "), "{file} must start with a comment saying what it checks");
        let actual = run_scenario(path, &file);
        check(&file, &text, &actual);
        let expected_path = path.with_extension("expected");
        if bless {
            std::fs::write(&expected_path, &actual)
                .unwrap_or_else(|e| panic!("writing {}: {e}", expected_path.display()));
            continue;
        }
        match std::fs::read_to_string(&expected_path) {
            Ok(expected) if expected == actual => {}
            Ok(expected) => failures.push(format!("{file}: expected\n{expected}\n--- but got\n{actual}")),
            Err(e) => {
                failures.push(format!("{file}: no {}: {e}\n--- it would hold\n{actual}", expected_path.display()))
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} files differ (MILLPOND_BLESS=1 rewrites them: check each by hand):\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
}

#[test]
fn golden_scenarios() {
    golden_dir("sql/tests", 25, |file, text, output| {
        // Every scenario shows views, unless it is meant to fail.
        assert!(output.contains("-- ") || output.contains("error: "), "{file}: nothing to compare:\n{output}");
        assert!(text.contains("CREATE MATERIALIZED VIEW"), "{file} defines no materialized view");
    });
}

#[test]
fn error_messages() {
    golden_dir("sql/tests/errors", 30, |file, _text, output| {
        assert!(output.starts_with("error: "), "{file} must fail, but gave:\n{output}");
        let position = output.lines().nth(1).unwrap_or_default();
        assert!(position.contains(&format!("--> {file}:")), "{file}: the error names no position:\n{output}");
        assert!(output.trim_end().ends_with('^'), "{file}: no caret under the position:\n{output}");
    });
}

/// The Nexmark queries (`sql/nexmark`, when it exists) parse and bind, each
/// in a new data directory and all of them together in one.
#[test]
fn nexmark_definitions_bind() {
    let dir = repo_root().join("sql/nexmark");
    if !dir.is_dir() {
        return;
    }
    let files = sql_files(&dir);
    assert!(!files.is_empty(), "sql/nexmark has no .sql files");
    let together = tempfile::tempdir().expect("a temporary directory");
    let mut shared = Session::open(together.path()).expect("opening a session");
    let mut queries = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("reading a Nexmark file");
        let file = format!("sql/nexmark/{}", path.file_name().expect("a file name").to_string_lossy());
        let temp = tempfile::tempdir().expect("a temporary directory");
        let mut session = Session::open(temp.path()).expect("opening a session");
        if let Err(e) = session.execute(&text, Some(&file), true) {
            panic!("{}", e.render(&text));
        }
        let views = session.compile().unwrap_or_else(|e| panic!("{file}: {e}"));
        if text.contains("CREATE MATERIALIZED VIEW") {
            assert!(!views.views.is_empty(), "{file}: no view compiled");
            queries += 1;
        }
        if let Err(e) = shared.execute(&text, Some(&file), true) {
            panic!("{file}, after the other Nexmark files: {}", e.render(&text));
        }
    }
    let views = shared.compile().expect("compiling every Nexmark view");
    assert!(views.views.len() >= queries, "{} views from {queries} query files", views.views.len());
}
