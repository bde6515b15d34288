//! Differential testing against SQLite.
//!
//! Random data (seeded; NULLs, duplicates, then updates, deletes, upsert
//! tombstones and more appends) goes into tables with and without a primary
//! key, an upsert source and an append-only source, and the same final data
//! into SQLite (in memory). Every query of `sqlite/corpus.sql` runs as a
//! materialized view — all in one job, resumed after each phase of changes
//! — and after each phase each view must hold SQLite's result as a multiset
//! of rows (numbers compared with a 1e-9 relative tolerance).
//!
//! `MILLPOND_SQL_SEEDS` runs more seeds: a count ("20": seeds 1 to 20) or a
//! list ("3,17").

#[path = "sqlite/common.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use common::*;
use millpond_dataflow::{RuntimeConfig, TopicRecord, TopicSpec, Topics};
use millpond_sql::{Session, Type};
use rusqlite::Connection;

fn our_rows(dir: &Path, name: &str, columns: &[(String, Type)]) -> Result<Rows, String> {
    let snapshot = millpond_dataflow::read_view(dir, name).map_err(|e| format!("read_view: {e}"))?;
    let mut rows = Vec::new();
    for (row, multiplicity) in snapshot.rows {
        if multiplicity <= 0 {
            return Err(format!("a row with multiplicity {multiplicity}: {row}"));
        }
        let object = row.as_object().ok_or_else(|| format!("a row that is not an object: {row}"))?;
        if object.len() != columns.len() {
            return Err(format!("a row with {} fields, not {}: {row}", object.len(), columns.len()));
        }
        let cells: Vec<Cell> = columns
            .iter()
            .map(|(column, ty)| our_cell(object.get(column).unwrap_or(&serde_json::Value::Null), *ty))
            .collect();
        for _ in 0..multiplicity {
            rows.push(cells.clone());
        }
    }
    Ok(rows)
}

/// `query` answered once by the interpreter, over the views' committed snapshots.
fn one_off_rows(session: &Session, dir: &Path, query: &str) -> Result<Rows, String> {
    let query = session.query(query).map_err(|e| format!("refused: {e}"))?;
    let mut snapshots = BTreeMap::new();
    for view in query.views() {
        let snapshot = millpond_dataflow::read_view_raw(dir, view).map_err(|e| format!("read_view {view}: {e}"))?;
        snapshots.insert(view.to_owned(), std::sync::Arc::new(snapshot));
    }
    let rows = query.run(&snapshots).map_err(|e| format!("failed: {e}"))?;
    Ok(rows
        .iter()
        .map(|row| row.iter().zip(&query.columns).map(|(value, (_, ty))| our_cell(&value.to_json(), *ty)).collect())
        .collect())
}

fn append(dir: &Path, phase: &Phase) -> TestResult {
    let topics = Topics::open(dir)?;
    topics.ensure("utopic", TopicSpec { partitions: 1, compacted: true, compaction_bounded: false })?;
    topics.ensure("etopic", TopicSpec { partitions: 2, compacted: false, compaction_bounded: false })?;
    let upserts = phase
        .upserts
        .iter()
        .map(|(k, row)| TopicRecord {
            key: Some(k.to_string().into_bytes()),
            value: row.as_ref().map(|(json, _)| json.clone().into_bytes()),
            headers: vec![],
        })
        .collect();
    topics.append("utopic", upserts)?;
    let events = phase
        .events
        .iter()
        .enumerate()
        .map(|(i, (json, _))| TopicRecord {
            key: Some(format!("e{i}").into_bytes()),
            value: Some(json.clone().into_bytes()),
            headers: vec![],
        })
        .collect();
    topics.append("etopic", events)?;
    // Records that do not decode go to the source's dead-letter topic, not into
    // any view (every declared field is validated, whichever a view reads).
    let malformed = [&b"not json"[..], b"[1, 2]", br#"{"id": 1, "k": 2"#];
    let malformed =
        malformed.iter().map(|v| TopicRecord { key: None, value: Some(v.to_vec()), headers: vec![] }).collect();
    topics.append("etopic", malformed)?;
    Ok(())
}

struct Outcome {
    failures: Vec<String>,
    compared: usize,
    nonempty: usize,
}

/// Views dropped before the second run (which drops what it no longer
/// declares) and created again before the third, which must build them from
/// the whole log.
const DROPPED: &[&str] = &["agg_group_e_k", "ts_diff", "agg_minmax_retract", "case_e"];
/// Views replaced before the third run by another entry's query.
const REPLACED: &[(&str, &str)] = &[("all_t3", "where_t3"), ("agg_global_u", "agg_group_u"), ("str_u", "where_u")];

/// Creates `name` as `entry`'s query in both engines; false if either refuses.
fn create_view(
    session: &mut Session,
    sqlite: &Connection,
    name: &str,
    entry: &Entry,
    replace: bool,
) -> Result<(), String> {
    let kind = if entry.plain { "VIEW" } else { "MATERIALIZED VIEW" };
    let or_replace = if replace { "OR REPLACE " } else { "" };
    let columns = &entry.columns;
    let create = format!("CREATE {or_replace}{kind} {name}{columns} AS {}", entry.query);
    session.execute(&create, None, false).map_err(|e| format!("ours refuses it: {e}\n  {}", entry.query))?;
    if !replace {
        // Every entry is a view in SQLite too, for later entries to read.
        let create = format!("CREATE VIEW {name}{columns} AS {}", entry.sqlite_query());
        sqlite.execute_batch(&create).map_err(|e| format!("SQLite refuses it: {e}"))?;
    }
    Ok(())
}

/// One seed: three phases of changes, each followed by a (resumed) run and
/// a comparison of every view. The first half of the corpus is defined
/// before the first run, the second half before the second (views added to
/// a running pipeline are built from the whole log). The second run has two
/// workers and small fetches (so many epochs).
fn run_seed(seed: u64, entries: &[Entry]) -> TestResult<Outcome> {
    let dir = tempfile::tempdir()?;
    let dir = dir.path();
    let sqlite = Connection::open_in_memory()?;
    sqlite.execute_batch(SQLITE_SCHEMA)?;
    let mut generator = Generator::new(seed);
    let mut failures = Vec::new();
    let mut compared = 0;
    let mut nonempty = 0;
    let index = |name: &str| entries.iter().position(|e| e.name == name).unwrap_or_else(|| panic!("no entry {name}"));
    let half = entries.iter().filter(|e| !e.plain).count() / 2;
    let mut materialized = 0;
    let defined_in: Vec<usize> = entries
        .iter()
        .map(|e| {
            materialized += usize::from(!e.plain);
            usize::from(!e.plain && materialized > half)
        })
        .collect();
    // Materialized view name → the entry whose query it has.
    let mut live: BTreeMap<String, usize> = BTreeMap::new();
    for number in 0..3 {
        let phase = generator.phase(number);
        append(dir, &phase)?;
        apply_sqlite(&sqlite, &phase)?;
        let mut session = Session::open(dir)?;
        if number == 0 {
            session.execute(OUR_SCHEMA, None, false)?;
        }
        let mut changes: Vec<(&str, usize, bool)> = Vec::new();
        for (i, entry) in entries.iter().enumerate().filter(|(i, _)| defined_in[*i] == number) {
            changes.push((&entry.name, i, false));
        }
        if number == 1 {
            for name in DROPPED {
                assert_eq!(defined_in[index(name)], 0, "{name} is defined before the first run");
                session.execute(&format!("DROP MATERIALIZED VIEW {name}"), None, false)?;
                live.remove(*name);
            }
        }
        if number == 2 {
            for name in DROPPED {
                session.execute(
                    &format!("CREATE MATERIALIZED VIEW {name} AS {}", entries[index(name)].query),
                    None,
                    false,
                )?;
                live.insert(name.to_string(), index(name));
            }
            changes.extend(REPLACED.iter().map(|(name, other)| (*name, index(other), true)));
        }
        for (name, i, replace) in changes {
            let entry = &entries[i];
            match create_view(&mut session, &sqlite, name, entry, replace) {
                Ok(()) if !entry.plain => {
                    live.insert(name.to_owned(), i);
                }
                Ok(()) => {}
                Err(e) => {
                    failures.push(format!("{name} (corpus line {}): {e}", entry.line));
                    live.remove(name);
                }
            }
        }
        for statement in &phase.dml {
            session.execute(statement, None, false).map_err(|e| format!("{statement}: {e}"))?;
        }
        let views = session.compile()?;
        drop(session);
        let columns: BTreeMap<String, Vec<(String, Type)>> =
            views.views.iter().map(|v| (v.name.clone(), v.columns.clone())).collect();
        assert_eq!(
            columns.keys().collect::<Vec<_>>(),
            live.keys().collect::<Vec<_>>(),
            "the views compiled (failures so far: {failures:#?})"
        );
        let mut config = RuntimeConfig::new(dir).epoch_interval_ms(20).stop_when_caught_up(true);
        if number == 1 {
            config = config.workers(2).fetch_bytes_max(256).drop_undeclared(true);
        }
        let stats = millpond_sql::run(config, views)?;
        assert!(stats.dead_letters >= 3, "the malformed records are dead letters: {stats:?}");
        if number == 1 {
            for name in DROPPED {
                assert!(stats.dropped.contains(&format!("view {name}")), "{name} was dropped: {:?}", stats.dropped);
            }
        }
        if number == 2 {
            // A replaced view keeps its name and changelog; its old
            // definition's readers and operators go.
            for (name, _) in REPLACED {
                assert!(!stats.dropped.contains(&format!("view {name}")), "{name} stays: {:?}", stats.dropped);
                let old_reader = format!("reader {name}.");
                assert!(stats.dropped.iter().any(|d| d.starts_with(&old_reader)), "{name}: {:?}", stats.dropped);
            }
        }
        let mut broken = Vec::new();
        // Each view's query also runs as a one-off query (the interpreter,
        // over the committed snapshots): it must give SQLite's rows too.
        let session = Session::open(dir)?;
        for (name, i) in &live {
            let entry = &entries[*i];
            let failure = |message: String| {
                let replaced =
                    if *name == entry.name { String::new() } else { format!(" (replaced by {})", entry.name) };
                format!(
                    "seed {seed} phase {number}: {name}{replaced} (corpus line {}):\n  ours:   {}\n  SQLite: {}\n{message}",
                    entry.line,
                    entry.query.replace('\n', "\n          "),
                    entry.sqlite_query().replace('\n', "\n          "),
                )
            };
            let (theirs, width) = match sqlite_rows(&sqlite, entry.sqlite_query()) {
                Ok(result) => result,
                Err(e) => {
                    failures.push(failure(e));
                    broken.push(name.clone());
                    continue;
                }
            };
            let ours = match our_rows(dir, name, &columns[name]) {
                Ok(rows) => rows,
                Err(e) => {
                    failures.push(failure(e));
                    continue;
                }
            };
            compared += 1;
            if !theirs.is_empty() {
                nonempty += 1;
            }
            if columns[name].len() != width {
                failures.push(failure(format!("  ours has {} columns, SQLite {width}", columns[name].len())));
                broken.push(name.clone());
                continue;
            }
            if let Some(difference) = compare(&ours, &theirs) {
                failures.push(failure(difference));
            }
            match one_off_rows(&session, dir, &entry.query) {
                Ok(once) => {
                    if let Some(difference) = compare(&once, &theirs) {
                        failures.push(failure(format!("as a one-off query:\n{difference}")));
                    }
                }
                Err(e) => failures.push(failure(format!("as a one-off query: {e}"))),
            }
        }
        drop(session);
        // Reported once: not compared again.
        for name in broken {
            live.remove(&name);
        }
    }
    Ok(Outcome { failures, compared, nonempty })
}

/// Random expressions, written for both engines: (ours, SQLite's).
struct Expressions<'r> {
    rng: &'r mut Rng,
}

type Pair = (String, String);

fn same(text: String) -> Pair {
    (text.clone(), text)
}

impl Expressions<'_> {
    fn leaf_int(&mut self) -> Pair {
        let r = &mut self.rng;
        same(match r.below(25) {
            0 => "NULL".into(),
            1..=7 => "a".into(),
            8..=13 => "b".into(),
            14..=16 => "(id % 7)".into(),
            _ => format!("({})", r.range(-5, 20)),
        })
    }
    fn int(&mut self, depth: u32) -> Pair {
        if depth == 0 || self.rng.chance(25) {
            return self.leaf_int();
        }
        let d = depth - 1;
        match self.rng.below(12) {
            0..=3 => {
                let op = ["+", "-", "*", "/", "%"][self.rng.below(5) as usize];
                let (x, y) = (self.int(d), self.int(d));
                (format!("({} {op} {})", x.0, y.0), format!("({} {op} {})", x.1, y.1))
            }
            4 => {
                let x = self.int(d);
                (format!("(-{})", x.0), format!("(-{})", x.1))
            }
            5 => {
                let x = self.int(d);
                (format!("abs({})", x.0), format!("abs({})", x.1))
            }
            6 => {
                let (c, x, y) = (self.boolean(d), self.int(d), self.int(d));
                if self.rng.chance(30) {
                    (format!("CASE WHEN {} THEN {} END", c.0, x.0), format!("CASE WHEN {} THEN {} END", c.1, x.1))
                } else {
                    (
                        format!("CASE WHEN {} THEN {} ELSE {} END", c.0, x.0, y.0),
                        format!("CASE WHEN {} THEN {} ELSE {} END", c.1, x.1, y.1),
                    )
                }
            }
            7 => {
                let (x, y, z) = (self.int(d), self.int(d), self.int(d));
                let (k1, k2) = (self.rng.range(-2, 5), self.rng.range(-2, 5));
                (
                    format!("CASE {} WHEN {k1} THEN {} WHEN {k2} THEN {} ELSE 0 END", x.0, y.0, z.0),
                    format!("CASE {} WHEN {k1} THEN {} WHEN {k2} THEN {} ELSE 0 END", x.1, y.1, z.1),
                )
            }
            8 => {
                let (x, y) = (self.int(d), self.int(d));
                (format!("COALESCE({}, {})", x.0, y.0), format!("COALESCE({}, {})", x.1, y.1))
            }
            9 => {
                let (x, y) = (self.int(d), self.int(d));
                (format!("NULLIF({}, {})", x.0, y.0), format!("NULLIF({}, {})", x.1, y.1))
            }
            10 => {
                let t = self.text(d);
                (format!("length({})", t.0), format!("length({})", t.1))
            }
            _ => {
                let (t, u) = (self.text(d), self.text(d));
                (format!("strpos({}, {})", t.0, u.0), format!("instr({}, {})", t.1, u.1))
            }
        }
    }
    fn boolean(&mut self, depth: u32) -> Pair {
        let cmp = ["=", "<>", "<", "<=", ">", ">="][self.rng.below(6) as usize];
        if depth == 0 || self.rng.chance(20) {
            return match self.rng.below(8) {
                0 => same(["TRUE", "FALSE", "NULL"][self.rng.below(3) as usize].into()),
                1 => {
                    let x = self.leaf_int();
                    (format!("({} IS NULL)", x.0), format!("({} IS NULL)", x.1))
                }
                _ => {
                    let (x, y) = (self.leaf_int(), self.leaf_int());
                    (format!("({} {cmp} {})", x.0, y.0), format!("({} {cmp} {})", x.1, y.1))
                }
            };
        }
        let d = depth - 1;
        match self.rng.below(11) {
            0 | 1 => {
                let op = ["AND", "OR"][self.rng.below(2) as usize];
                let (x, y) = (self.boolean(d), self.boolean(d));
                (format!("({} {op} {})", x.0, y.0), format!("({} {op} {})", x.1, y.1))
            }
            2 => {
                let x = self.boolean(d);
                (format!("(NOT {})", x.0), format!("(NOT {})", x.1))
            }
            3 => {
                let (x, y) = (self.int(d), self.int(d));
                (format!("({} {cmp} {})", x.0, y.0), format!("({} {cmp} {})", x.1, y.1))
            }
            4 => {
                let (x, y) = (self.text(d), self.text(d));
                (format!("({} {cmp} {})", x.0, y.0), format!("({} {cmp} {})", x.1, y.1))
            }
            5 => {
                let (x, lo, hi) = (self.int(d), self.int(d), self.int(d));
                let not = if self.rng.chance(30) { "NOT " } else { "" };
                (
                    format!("({} {not}BETWEEN {} AND {})", x.0, lo.0, hi.0),
                    format!("({} {not}BETWEEN {} AND {})", x.1, lo.1, hi.1),
                )
            }
            6 => {
                let x = self.int(d);
                let items: Vec<String> = (0..self.rng.range(1, 4))
                    .map(|_| if self.rng.chance(15) { "NULL".into() } else { self.rng.range(-3, 30).to_string() })
                    .collect();
                let not = if self.rng.chance(30) { "NOT " } else { "" };
                let list = items.join(", ");
                (format!("({} {not}IN ({list}))", x.0), format!("({} {not}IN ({list}))", x.1))
            }
            7 => {
                let x = self.boolean(d);
                let test = ["IS TRUE", "IS FALSE", "IS NOT TRUE", "IS NOT FALSE"][self.rng.below(4) as usize];
                (format!("({} {test})", x.0), format!("({} {test})", x.1))
            }
            8 => {
                let (x, y) = (self.int(d), self.int(d));
                let not = if self.rng.chance(50) { "NOT " } else { "" };
                (format!("({} IS {not}DISTINCT FROM {})", x.0, y.0), format!("({} IS {not}DISTINCT FROM {})", x.1, y.1))
            }
            9 => {
                let t = self.text(d);
                let pattern =
                    ["'a%'", "'%an%'", "'_pple'", "'%'", "''", "'%e'", "'A%'", "'x_y'"][self.rng.below(8) as usize];
                let not = if self.rng.chance(30) { "NOT " } else { "" };
                (format!("({} {not}LIKE {pattern})", t.0), format!("({} {not}LIKE {pattern})", t.1))
            }
            _ => {
                let (x, y) = (self.boolean(d), self.boolean(d));
                (format!("({} = {})", x.0, y.0), format!("({} = {})", x.1, y.1))
            }
        }
    }
    fn text(&mut self, depth: u32) -> Pair {
        if depth == 0 || self.rng.chance(30) {
            return same(match self.rng.below(10) {
                0 => "NULL".into(),
                1..=5 => "s".into(),
                _ => format!("'{}'", self.rng.pick(WORDS)),
            });
        }
        let d = depth - 1;
        match self.rng.below(9) {
            0 | 1 => {
                let (x, y) = (self.text(d), self.text(d));
                (format!("({} || {})", x.0, y.0), format!("({} || {})", x.1, y.1))
            }
            2 => {
                let x = self.text(d);
                let f = ["lower", "upper", "trim", "ltrim", "rtrim"][self.rng.below(5) as usize];
                (format!("{f}({})", x.0), format!("{f}({})", x.1))
            }
            3 => {
                let x = self.text(d);
                let (start, length) = (self.rng.range(1, 4), self.rng.range(0, 4));
                (format!("substring({}, {start}, {length})", x.0), format!("substr({}, {start}, {length})", x.1))
            }
            4 => {
                let x = self.text(d);
                let from = ["'a'", "'an'", "'p'", "' '", "'A'"][self.rng.below(5) as usize];
                (format!("replace({}, {from}, 'xy')", x.0), format!("replace({}, {from}, 'xy')", x.1))
            }
            5 => {
                let (x, y) = (self.text(d), self.text(d));
                (format!("COALESCE({}, {})", x.0, y.0), format!("COALESCE({}, {})", x.1, y.1))
            }
            6 => {
                let (c, x, y) = (self.boolean(d), self.text(d), self.text(d));
                (
                    format!("CASE WHEN {} THEN {} ELSE {} END", c.0, x.0, y.0),
                    format!("CASE WHEN {} THEN {} ELSE {} END", c.1, x.1, y.1),
                )
            }
            7 => {
                let x = self.int(d);
                (format!("CAST({} AS TEXT)", x.0), format!("CAST({} AS TEXT)", x.1))
            }
            _ => {
                let (x, y) = (self.text(d), self.text(d));
                (format!("NULLIF({}, {})", x.0, y.0), format!("NULLIF({}, {})", x.1, y.1))
            }
        }
    }

    /// A query over t1 using random expressions: a projection, a filter or a grouping.
    fn query(&mut self) -> Pair {
        let depth = self.rng.range(1, 4) as u32;
        match self.rng.below(4) {
            0 | 1 => {
                let (i, b, t) = (self.int(depth), self.boolean(depth), self.text(depth));
                (
                    format!("SELECT id, {} AS i, {} AS b, {} AS t FROM t1", i.0, b.0, t.0),
                    format!("SELECT id, {}, {}, {} FROM t1", i.1, b.1, t.1),
                )
            }
            2 => {
                let b = self.boolean(depth);
                (format!("SELECT id, a, s FROM t1 WHERE {}", b.0), format!("SELECT id, a, s FROM t1 WHERE {}", b.1))
            }
            _ => {
                let (g, x) = (self.int(depth), self.int(depth));
                (
                    format!(
                        "SELECT {} AS g, COUNT(*) AS n, SUM({}) AS s, MIN({}) AS m FROM t1 GROUP BY 1",
                        g.0, x.0, x.0
                    ),
                    format!("SELECT {}, COUNT(*), SUM({}), MIN({}) FROM t1 GROUP BY 1", g.1, x.1, x.1),
                )
            }
        }
    }
}

/// Random expressions (integer, boolean and text, with NULLs everywhere)
/// as views over t1, compared with SQLite after a first load and after
/// updates and deletes.
#[test]
fn random_expressions_match_sqlite() -> TestResult {
    let mut failures = Vec::new();
    for seed in seeds() {
        let dir = tempfile::tempdir()?;
        let dir = dir.path();
        let sqlite = Connection::open_in_memory()?;
        sqlite.execute_batch(SQLITE_SCHEMA)?;
        let mut generator = Generator::new(seed);
        let mut rng = Rng::new(seed ^ 0x5eed);
        let queries: Vec<Pair> = (0..150).map(|_| Expressions { rng: &mut rng }.query()).collect();
        let mut compared = 0;
        for number in 0..2 {
            let phase = generator.phase(number);
            append(dir, &phase)?;
            apply_sqlite(&sqlite, &phase)?;
            let mut session = Session::open(dir)?;
            if number == 0 {
                session.execute(OUR_SCHEMA, None, false)?;
                for (i, (ours, _)) in queries.iter().enumerate() {
                    session
                        .execute(&format!("CREATE MATERIALIZED VIEW x{i} AS {ours}"), None, false)
                        .map_err(|e| format!("ours refuses {ours}: {e}"))?;
                }
            }
            for statement in &phase.dml {
                session.execute(statement, None, false)?;
            }
            let views = session.compile()?;
            drop(session);
            let columns: BTreeMap<String, Vec<(String, Type)>> =
                views.views.iter().map(|v| (v.name.clone(), v.columns.clone())).collect();
            millpond_sql::run(RuntimeConfig::new(dir).epoch_interval_ms(20).stop_when_caught_up(true), views)?;
            for (i, (ours, theirs)) in queries.iter().enumerate() {
                let name = format!("x{i}");
                let (expected, _) = sqlite_rows(&sqlite, theirs).map_err(|e| format!("{theirs}: {e}"))?;
                let actual = our_rows(dir, &name, &columns[&name])?;
                compared += 1;
                if let Some(difference) = compare(&actual, &expected) {
                    failures.push(format!(
                        "seed {seed} phase {number}:\n  ours:   {ours}\n  SQLite: {theirs}\n{difference}"
                    ));
                }
            }
        }
        assert_eq!(compared, 300);
    }
    for failure in &failures {
        eprintln!("{failure}");
    }
    assert!(failures.is_empty(), "{} random expressions differ from SQLite (printed above)", failures.len());
    Ok(())
}

fn seeds() -> Vec<u64> {
    match std::env::var("MILLPOND_SQL_SEEDS") {
        Ok(text) if text.contains(',') => text.split(',').map(|s| s.trim().parse().expect("a seed")).collect(),
        Ok(text) => (1..=text.trim().parse::<u64>().expect("a number of seeds")).collect(),
        Err(_) => vec![1, 2],
    }
}

#[test]
fn views_match_sqlite() -> TestResult {
    let entries = corpus();
    let queries = entries.iter().filter(|e| !e.plain).count();
    assert!(queries >= 200, "the corpus has {queries} queries");
    let mut failures = Vec::new();
    for seed in seeds() {
        let started = Instant::now();
        let outcome = run_seed(seed, &entries)?;
        eprintln!(
            "seed {seed}: {} comparisons ({} non-empty), {} failures, {:.1} s",
            outcome.compared,
            outcome.nonempty,
            outcome.failures.len(),
            started.elapsed().as_secs_f64()
        );
        // Most results must have rows, or the comparison proves little.
        assert!(outcome.nonempty * 10 >= outcome.compared * 8, "too many empty results");
        failures.extend(outcome.failures);
    }
    for failure in &failures {
        eprintln!("{failure}");
    }
    assert!(failures.is_empty(), "{} differences from SQLite (printed above)", failures.len());
    Ok(())
}

/// A view replaced by another definition holds the new definition's rows
/// only (not the old ones too), also when it is the only view.
#[test]
fn a_replaced_view_is_built_anew() -> TestResult {
    let dir = tempfile::tempdir()?;
    let run = |sql: &str| -> TestResult<Vec<(serde_json::Value, i64)>> {
        let mut session = Session::open(dir.path())?;
        session.execute(sql, None, false)?;
        let views = session.compile()?;
        drop(session);
        millpond_sql::run(RuntimeConfig::new(dir.path()).epoch_interval_ms(20).stop_when_caught_up(true), views)?;
        let mut rows = millpond_dataflow::read_view(dir.path(), "v")?.rows;
        rows.sort_by_key(|(row, _)| row.to_string());
        Ok(rows)
    };
    let rows =
        run("CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2); CREATE MATERIALIZED VIEW v AS SELECT a FROM t")?;
    assert_eq!(rows, vec![(serde_json::json!({"a": 1}), 1), (serde_json::json!({"a": 2}), 1)]);
    let rows = run("INSERT INTO t VALUES (3); CREATE OR REPLACE MATERIALIZED VIEW v AS SELECT SUM(a) AS s FROM t")?;
    assert_eq!(rows, vec![(serde_json::json!({"s": 6}), 1)]);
    let rows = run("DELETE FROM t WHERE a = 1")?;
    assert_eq!(rows, vec![(serde_json::json!({"s": 5}), 1)]);
    Ok(())
}

/// A view over a view that is replaced (plain or materialized), or over a
/// source replaced with other columns, computes with the new definitions
/// only: its state was built with the old ones.
#[test]
fn a_view_over_a_replaced_definition_is_built_anew() -> TestResult {
    let dir = tempfile::tempdir()?;
    let run = |sql: &str, names: &[&str]| -> TestResult<BTreeMap<String, Vec<serde_json::Value>>> {
        let mut session = Session::open(dir.path())?;
        session.execute(sql, None, false)?;
        let views = session.compile()?;
        drop(session);
        millpond_sql::run(RuntimeConfig::new(dir.path()).epoch_interval_ms(20).stop_when_caught_up(true), views)?;
        let mut out = BTreeMap::new();
        for name in names {
            let mut rows: Vec<serde_json::Value> = Vec::new();
            for (row, n) in millpond_dataflow::read_view(dir.path(), name)?.rows {
                rows.extend(std::iter::repeat_n(row, n as usize));
            }
            rows.sort_by_key(|r| r.to_string());
            out.insert(name.to_string(), rows);
        }
        Ok(out)
    };
    let rows = run(
        "CREATE TABLE t (k INT, a INT); INSERT INTO t VALUES (1, 5), (1, 20), (2, 40);
        CREATE VIEW big AS SELECT k, a FROM t WHERE a > 10;
        CREATE MATERIALIZED VIEW total AS SELECT k, SUM(a) AS s FROM t GROUP BY k;
        CREATE MATERIALIZED VIEW big_total AS SELECT k, SUM(a) AS s FROM big GROUP BY k",
        &["total", "big_total"],
    )?;
    assert_eq!(rows["big_total"], vec![serde_json::json!({"k": 1, "s": 20}), serde_json::json!({"k": 2, "s": 40})]);
    let rows = run(
        "CREATE OR REPLACE VIEW big AS SELECT k, a FROM t WHERE a > 30; INSERT INTO t VALUES (1, 50)",
        &["big_total"],
    )?;
    assert_eq!(rows["big_total"], vec![serde_json::json!({"k": 1, "s": 50}), serde_json::json!({"k": 2, "s": 40})]);
    // The table again, its columns swapped: the rows the view keeps (to
    // retract them when they change) have the new layout.
    let rows =
        run("DROP VIEW big CASCADE; CREATE OR REPLACE TABLE t (a INT, k INT); DELETE FROM t WHERE a = 5", &["total"])?;
    assert_eq!(rows["total"], vec![serde_json::json!({"k": 1, "s": 70}), serde_json::json!({"k": 2, "s": 40})]);
    Ok(())
}

/// A table dropped and created again, with a view over it dropped and
/// created again with the same definition, between two runs: the view holds
/// the new table's rows only.
#[test]
fn a_table_created_again_starts_empty_for_its_views() -> TestResult {
    let dir = tempfile::tempdir()?;
    Session::open(dir.path())?.execute("CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2), (4)", None, false)?;
    assert_eq!(table_rows(dir.path())?, vec![1, 2, 4]);
    let sql = "DROP TABLE t CASCADE; CREATE TABLE t (a INT); INSERT INTO t VALUES (3)";
    Session::open(dir.path())?.execute(sql, None, false)?;
    assert_eq!(table_rows(dir.path())?, vec![3]);
    Session::open(dir.path())?.execute("INSERT INTO t VALUES (5), (6), (7)", None, false)?;
    assert_eq!(table_rows(dir.path())?, vec![3, 5, 6, 7]);
    // In one batch: a table dropped starts empty for the statements after it.
    let sql = "DROP TABLE t CASCADE; CREATE TABLE t (a INT PRIMARY KEY); INSERT INTO t VALUES (5), (8);
        DROP TABLE t; CREATE TABLE t (a INT PRIMARY KEY); INSERT INTO t VALUES (8)";
    Session::open(dir.path())?.execute(sql, None, false)?;
    assert_eq!(table_rows(dir.path())?, vec![8]);
    Ok(())
}

/// The rows of table `t` (column `a`), through a view.
fn table_rows(dir: &Path) -> TestResult<Vec<i64>> {
    let mut session = Session::open(dir)?;
    session.execute("CREATE MATERIALIZED VIEW IF NOT EXISTS all_t AS SELECT a FROM t", None, false)?;
    let views = session.compile()?;
    drop(session);
    millpond_sql::run(RuntimeConfig::new(dir).epoch_interval_ms(20).stop_when_caught_up(true), views)?;
    let mut rows = Vec::new();
    for (row, n) in millpond_dataflow::read_view(dir, "all_t")?.rows {
        rows.extend(std::iter::repeat_n(row["a"].as_i64().expect("an integer"), n as usize));
    }
    rows.sort_unstable();
    Ok(rows)
}

/// A file's INSERT, UPDATE and DELETE apply once per data directory, also
/// when other statements change the table in between: a DELETE that
/// deleted nothing is not applied again to rows inserted since.
#[test]
fn file_statements_apply_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let file = "CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2); DELETE FROM t WHERE a = 9; UPDATE t SET a = a + 10 WHERE a = 8";
    Session::open(dir.path())?.execute(file, Some("f.sql"), true)?;
    assert_eq!(table_rows(dir.path())?, vec![1, 2]);
    Session::open(dir.path())?.execute("INSERT INTO t VALUES (9), (8)", None, false)?;
    let outcomes = Session::open(dir.path())?.execute(file, Some("f.sql"), true)?;
    assert!(outcomes.iter().filter(|o| o.tag.contains("already applied")).count() == 3, "{outcomes:?}");
    assert_eq!(table_rows(dir.path())?, vec![1, 2, 8, 9]);
    Ok(())
}

/// A crash between a file's catalog append (with its statement's marker)
/// and the statement's rows: the next run applies the statement, also when
/// another statement wrote the table in between.
#[test]
fn a_file_statement_cut_by_a_crash_is_applied_later() -> TestResult {
    let dir = tempfile::tempdir()?;
    Session::open(dir.path())?.execute("CREATE TABLE t (a INT); INSERT INTO t VALUES (1)", None, false)?;
    // What the crash left: the marker of `INSERT INTO t VALUES (2)` in f.sql
    // (named by FNV-1a hashes of the file and the statement, and its
    // occurrence: docs/sql.md), none of its rows.
    let statement = "INSERT INTO t VALUES (2)";
    let fnv =
        |text: &str| text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    let topics = Topics::open(dir.path())?;
    let end = topics.end_offset("table.t", 0)?;
    topics.append(
        millpond_sql::CATALOG_TOPIC,
        vec![TopicRecord {
            key: Some(format!("applied/v1/{:016x}/{:016x}/1", fnv("f.sql"), fnv(statement)).into_bytes()),
            value: Some(
                format!(r#"{{"version":1,"file":"f.sql","table":"t","topic":"table.t","offset":{end},"records":1}}"#)
                    .into_bytes(),
            ),
            headers: vec![],
        }],
    )?;
    drop(topics);
    Session::open(dir.path())?.execute("INSERT INTO t VALUES (3)", None, false)?;
    Session::open(dir.path())?.execute(statement, Some("f.sql"), true)?;
    assert_eq!(table_rows(dir.path())?, vec![1, 2, 3]);
    // Applied now: not again.
    Session::open(dir.path())?.execute(statement, Some("f.sql"), true)?;
    assert_eq!(table_rows(dir.path())?, vec![1, 2, 3]);
    Ok(())
}

#[test]
fn the_corpus_parses() {
    let entries = parse_corpus("# c\nq1: SELECT 1\n  + 2\nsqlite: SELECT 3\n  AS x\nview v: SELECT 4\n");
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].query, "SELECT 1\n+ 2");
    assert_eq!(entries[0].sqlite.as_deref(), Some("SELECT 3\nAS x"));
    assert!(entries[1].plain && entries[1].sqlite.is_none());
    assert_eq!(timestamp_text(BASE_SECONDS + 3661), "2024-03-10 01:01:01");
    let a = vec![vec![Cell::Number(1.0), Cell::Text("x".into())], vec![Cell::Null, Cell::Number(0.1 + 0.2)]];
    let b = vec![vec![Cell::Null, Cell::Number(0.3)], vec![Cell::Number(1.0), Cell::Text("x".into())]];
    assert!(compare(&a, &b).is_none());
    assert!(compare(&a, &b[..1].to_vec()).is_some());
    assert!(compare(&b, &vec![vec![Cell::Null, Cell::Number(0.31)], b[1].clone()]).is_some());
}
