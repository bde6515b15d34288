//! What the SQLite differential tests share (`crates/sql/tests/sqlite.rs`
//! and the crash test `tests/sql_kill9.rs`): the query corpus, random data
//! applied alike to Millpond and SQLite, and the comparison of results.
#![allow(dead_code, unreachable_pub)]

use std::fmt::Write as _;

use millpond_sql::Type;
use rusqlite::Connection;
use rusqlite::types::ValueRef;

pub type TestResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

// ---------------------------------------------------------------------------
// The corpus.

/// One corpus entry: a (materialized or plain) view, and its SQLite form.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    /// A plain view (CREATE VIEW), used by later entries; not compared.
    pub plain: bool,
    /// A plain view's column list, as in `view v (x, y): ...`.
    pub columns: String,
    pub query: String,
    /// The query SQLite runs, when it must be written differently.
    pub sqlite: Option<String>,
    pub line: usize,
}

impl Entry {
    pub fn sqlite_query(&self) -> &str {
        self.sqlite.as_deref().unwrap_or(&self.query)
    }
}

/// Parses the corpus: `name: QUERY` (or `view name: QUERY`), an optional
/// `sqlite: QUERY`, indented lines continuing either; `#` starts a comment line.
pub fn parse_corpus(text: &str) -> Vec<Entry> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut in_sqlite = false;
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            let entry = entries.last_mut().unwrap_or_else(|| panic!("corpus line {}: continues nothing", number + 1));
            let part = if in_sqlite { entry.sqlite.as_mut().expect("in sqlite part") } else { &mut entry.query };
            part.push('\n');
            part.push_str(trimmed);
            continue;
        }
        let (head, rest) = line.split_once(": ").unwrap_or_else(|| panic!("corpus line {}: no 'name: '", number + 1));
        if head == "sqlite" {
            let entry = entries.last_mut().expect("sqlite: follows an entry");
            assert!(entry.sqlite.is_none(), "corpus line {}: a second sqlite:", number + 1);
            entry.sqlite = Some(rest.trim().to_owned());
            in_sqlite = true;
            continue;
        }
        let (plain, name) = match head.strip_prefix("view ") {
            Some(name) => (true, name),
            None => (false, head),
        };
        let (name, columns) = match name.split_once(' ') {
            Some((name, columns)) if plain => (name, format!(" {columns}")),
            _ => (name, String::new()),
        };
        assert!(
            name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "corpus line {}: bad name {name:?}",
            number + 1
        );
        assert!(!entries.iter().any(|e| e.name == name), "corpus line {}: {name} twice", number + 1);
        entries.push(Entry {
            name: name.to_owned(),
            plain,
            columns,
            query: rest.trim().to_owned(),
            sqlite: None,
            line: number + 1,
        });
        in_sqlite = false;
    }
    entries
}

pub fn corpus() -> Vec<Entry> {
    parse_corpus(include_str!("corpus.sql"))
}

// ---------------------------------------------------------------------------
// Random data.

/// xorshift64*.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn range(&mut self, low: i64, high: i64) -> i64 {
        low + self.below((high - low + 1) as u64) as i64
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

pub const WORDS: &[&str] = &["apple", "Apple", "banana", "cherry", "date", " pad ", "x_y", "", "a%b", "BANANA", "fig"];

/// 2024-03-10 00:00:00 UTC, in seconds.
pub const BASE_SECONDS: i64 = 1_710_028_800;

/// "YYYY-MM-DD HH:MM:SS" of seconds since 1970 (the format views print).
pub fn timestamp_text(seconds: i64) -> String {
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60)
}

/// A value as SQL text (both engines read it the same way).
pub fn sql_int(rng: &mut Rng, null_percent: u64, low: i64, high: i64) -> String {
    if rng.chance(null_percent) { "NULL".into() } else { rng.range(low, high).to_string() }
}
pub fn sql_text(rng: &mut Rng, null_percent: u64) -> String {
    if rng.chance(null_percent) { "NULL".into() } else { format!("'{}'", rng.pick(WORDS)) }
}
/// Eighths: exact in binary, so float sums do not depend on order.
pub fn sql_double(rng: &mut Rng, null_percent: u64) -> String {
    if rng.chance(null_percent) { "NULL".into() } else { format!("{}", rng.range(-400, 400) as f64 / 8.0) }
}
pub fn sql_decimal(rng: &mut Rng, null_percent: u64) -> String {
    if rng.chance(null_percent) {
        return "NULL".into();
    }
    let cents = rng.range(-5000, 5000);
    format!("{}{}.{:02}", if cents < 0 { "-" } else { "" }, cents.abs() / 100, cents.abs() % 100)
}
pub fn timestamp_seconds(rng: &mut Rng) -> i64 {
    // A fifth exactly on an hour, to test window boundaries.
    if rng.chance(20) { BASE_SECONDS + rng.range(0, 72) * 3600 } else { BASE_SECONDS + rng.range(0, 72 * 3600) }
}
pub fn sql_timestamp(rng: &mut Rng, null_percent: u64) -> String {
    if rng.chance(null_percent) { "NULL".into() } else { format!("'{}'", timestamp_text(timestamp_seconds(rng))) }
}

/// The data changes of one phase, applied the same way to both engines.
#[derive(Default)]
pub struct Phase {
    /// DML statements for both engines.
    pub dml: Vec<String>,
    /// Upsert source records: key, and the row as (JSON, SQLite statement) or a tombstone.
    pub upserts: Vec<(i64, Option<(String, String)>)>,
    /// Append-only source records: JSON and the SQLite INSERT.
    pub events: Vec<(String, String)>,
}

/// State of the generator across phases.
pub struct Generator {
    rng: Rng,
    next_t1: i64,
    next_event: i64,
}

pub fn json_field(name: &str, sql: &str, out: &mut Vec<String>) {
    if sql == "NULL" {
        return;
    }
    let value = match sql.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
        Some(text) => serde_json::Value::String(text.to_owned()).to_string(),
        None => sql.to_owned(),
    };
    out.push(format!("\"{name}\":{value}"));
}

impl Generator {
    pub fn new(seed: u64) -> Generator {
        Generator { rng: Rng::new(seed), next_t1: 1, next_event: 1 }
    }
    /// The changes of a round of the crash test: new rows, UPDATEs and
    /// DELETEs, upserts (no tombstones: `millpond produce` writes none) and
    /// events.
    pub fn round(&mut self) -> Phase {
        let mut phase = Phase::default();
        let rows: Vec<String> = (0..5).map(|_| self.t1_row()).collect();
        phase.dml.push(format!("INSERT INTO t1 VALUES {}", rows.join(", ")));
        let mut t2_rows = Vec::new();
        let rows: Vec<String> = (0..5).map(|_| self.t2_row(&mut t2_rows)).collect();
        phase.dml.push(format!("INSERT INTO t2 VALUES {}", rows.join(", ")));
        for _ in 0..3 {
            let change = self.change();
            phase.dml.push(change);
        }
        phase.upserts = (0..10).map(|_| self.upsert(0)).collect();
        phase.events = (0..40).map(|_| self.event()).collect();
        phase
    }
    pub fn t1_row(&mut self) -> String {
        let id = self.next_t1;
        self.next_t1 += 1;
        self.t1_row_with(id)
    }
    pub fn t1_row_with(&mut self, id: i64) -> String {
        let r = &mut self.rng;
        format!(
            "({id}, {}, {}, {}, {}, {}, {})",
            sql_int(r, 10, -20, 100),
            sql_int(r, 10, 0, 60),
            sql_double(r, 10),
            sql_decimal(r, 10),
            sql_text(r, 10),
            sql_timestamp(r, 5)
        )
    }
    pub fn t2_row(&mut self, previous: &mut Vec<String>) -> String {
        if !previous.is_empty() && self.rng.chance(15) {
            // An exact duplicate row (t2 has no primary key).
            return previous[self.rng.below(previous.len() as u64) as usize].clone();
        }
        let r = &mut self.rng;
        let day = if r.chance(10) {
            "NULL".to_owned()
        } else {
            format!("'{}'", &timestamp_text(BASE_SECONDS + r.range(-14, 6) * 86_400)[..10])
        };
        let (k, x, y, c) = (sql_int(r, 10, 0, 9), sql_int(r, 10, -10, 100), sql_text(r, 10), sql_double(r, 10));
        let row = format!("({k}, {x}, {y}, {c}, {day})");
        previous.push(row.clone());
        row
    }
    pub fn upsert(&mut self, tombstone_percent: u64) -> (i64, Option<(String, String)>) {
        let r = &mut self.rng;
        let k = r.range(0, 15);
        if r.chance(tombstone_percent) {
            return (k, None);
        }
        let (v, w) = (sql_int(r, 10, -50, 50), sql_text(r, 10));
        let mut fields = Vec::new();
        json_field("k", &k.to_string(), &mut fields);
        json_field("v", &v, &mut fields);
        json_field("w", &w, &mut fields);
        if r.chance(10) {
            fields.push("\"extra\":[1,2]".into());
        }
        let json = format!("{{{}}}", fields.join(","));
        (k, Some((json, format!("INSERT OR REPLACE INTO u VALUES ({k}, {v}, {w})"))))
    }
    /// An event as JSON (NULLs omitted or explicit; timestamps as text in
    /// two formats or as epoch milliseconds) and as a SQLite INSERT.
    pub fn event(&mut self) -> (String, String) {
        use serde_json::{Value as J, json};
        let id = self.next_event;
        self.next_event += 1;
        let r = &mut self.rng;
        let int = |r: &mut Rng, null: u64, low: i64, high: i64| (!r.chance(null)).then(|| r.range(low, high));
        let (k, amount) = (int(r, 10, 0, 9), int(r, 8, 0, 50));
        let price = (!r.chance(8)).then(|| r.range(1, 2000) as f64 / 8.0);
        let cat = (!r.chance(8)).then(|| r.pick(WORDS).to_owned());
        let ok = (!r.chance(10)).then(|| r.chance(50));
        let ts = (!r.chance(5)).then(|| {
            let seconds = timestamp_seconds(r);
            let millis = if r.chance(10) { [125, 250, 500][r.below(3) as usize] } else { 0 };
            let fraction =
                if millis == 0 { String::new() } else { format!(".{millis:03}").trim_end_matches('0').to_owned() };
            let text = format!("{}{fraction}", timestamp_text(seconds));
            let json = match r.below(7) {
                0 => json!(seconds * 1000 + millis),
                1 => J::String(format!("{}Z", text.replace(' ', "T"))),
                _ => J::String(text.clone()),
            };
            (json, text)
        });
        let sql_text = |t: &Option<String>| t.as_ref().map_or("NULL".to_owned(), |t| format!("'{t}'"));
        let sql_number = |n: Option<String>| n.unwrap_or_else(|| "NULL".to_owned());
        let insert = format!(
            "INSERT INTO e VALUES ({id}, {}, {}, {}, {}, {}, {})",
            sql_number(k.map(|k| k.to_string())),
            sql_number(amount.map(|a| a.to_string())),
            sql_number(price.map(|p| p.to_string())),
            sql_text(&cat),
            sql_text(&ts.as_ref().map(|(_, text)| text.clone())),
            sql_number(ok.map(|b| i32::from(b).to_string())),
        );
        let mut object = serde_json::Map::new();
        let fields = [
            ("id", Some(json!(id))),
            ("k", k.map(|k| json!(k))),
            ("amount", amount.map(|a| json!(a))),
            ("price", price.map(|p| json!(p))),
            ("cat", cat.map(J::String)),
            ("ts", ts.map(|(json, _)| json)),
            ("ok", ok.map(J::Bool)),
        ];
        for (name, value) in fields {
            match value {
                Some(value) => {
                    object.insert(name.to_owned(), value);
                }
                None if r.chance(50) => {
                    object.insert(name.to_owned(), J::Null);
                }
                None => {}
            }
        }
        (J::Object(object).to_string(), insert)
    }

    pub fn phase(&mut self, number: usize) -> Phase {
        let mut phase = Phase::default();
        let mut t2_rows = Vec::new();
        let (t1_rows, t2_count, upserts, events) = match number {
            0 => (60, 60, 40, 150),
            1 => (20, 20, 30, 100),
            _ => (10, 10, 20, 60),
        };
        let rows: Vec<String> = (0..t1_rows).map(|_| self.t1_row()).collect();
        phase.dml.push(format!("INSERT INTO t1 VALUES {}", rows.join(", ")));
        let rows: Vec<String> = (0..t2_count).map(|_| self.t2_row(&mut t2_rows)).collect();
        phase.dml.push(format!("INSERT INTO t2 VALUES {}", rows.join(", ")));
        match number {
            0 => {
                // t3: a dimension table keyed 0..=8 with gaps.
                let mut rows = Vec::new();
                for k in 0..=8 {
                    if self.rng.chance(80) {
                        let r = &mut self.rng;
                        rows.push(format!("({k}, {}, {})", sql_text(r, 10), sql_int(r, 10, 0, 50)));
                    }
                }
                phase.dml.push(format!("INSERT INTO t3 VALUES {}", rows.join(", ")));
                phase.dml.push("INSERT INTO t4 VALUES (1, 'one'), (2, 'two'), (2, NULL), (NULL, 'x')".into());
            }
            1 => {
                // t4 empties: global aggregates go back to their row over no input.
                phase.dml.push("DELETE FROM t4".into());
                phase.dml.push("UPDATE t3 SET w = w + 1 WHERE k % 2 = 0".into());
                phase.dml.push("DELETE FROM t3 WHERE k = 4".into());
            }
            _ => {
                phase.dml.push("INSERT INTO t4 VALUES (7, 'seven')".into());
                phase.dml.push("INSERT INTO t3 VALUES (4, 'four', 4), (9, NULL, 9)".into());
                // Keys deleted and inserted again, in the same run's input.
                phase.dml.push("DELETE FROM t1 WHERE id <= 5".into());
                let rows: Vec<String> = (1..=5).map(|id| self.t1_row_with(id)).collect();
                phase.dml.push(format!("INSERT INTO t1 VALUES {}", rows.join(", ")));
                // Primary key changes: ids above every generated one.
                phase.dml.push("UPDATE t1 SET id = id + 100000 WHERE a % 4 = 1".into());
            }
        }
        if number > 0 {
            for _ in 0..6 {
                let statement = self.change();
                phase.dml.push(statement);
            }
        }
        let tombstones = if number == 0 { 5 } else { 25 };
        phase.upserts = (0..upserts).map(|_| self.upsert(tombstones)).collect();
        phase.events = (0..events).map(|_| self.event()).collect();
        phase
    }

    /// A random UPDATE or DELETE of t1 or t2.
    pub fn change(&mut self) -> String {
        let r = &mut self.rng;
        let n = r.range(0, 60);
        let word = r.pick(WORDS);
        let m = r.range(2, 5);
        match r.below(10) {
            0 => format!("UPDATE t1 SET a = a + 1, s = '{word}' WHERE b > {n}"),
            1 => format!("UPDATE t1 SET c = NULL WHERE id % {m} = 0"),
            2 => format!("UPDATE t1 SET b = NULL, ts = '{}' WHERE a < {n}", timestamp_text(timestamp_seconds(r))),
            3 => format!("UPDATE t1 SET c = c * 2, d = 1.25 WHERE s = '{word}' OR a IS NULL"),
            4 => format!("DELETE FROM t1 WHERE a > {} AND a < {}", n, n + 10),
            5 => format!("DELETE FROM t1 WHERE s IS NULL AND id % {m} = 1"),
            6 => format!("UPDATE t2 SET x = x + 3 WHERE k = {}", n % 10),
            7 => format!("UPDATE t2 SET k = NULL WHERE x > {n} AND y = '{word}'"),
            8 => format!("DELETE FROM t2 WHERE k = {}", n % 10),
            _ => format!("DELETE FROM t2 WHERE y IS NULL OR x < {}", n - 40),
        }
    }
}

// ---------------------------------------------------------------------------
// The engines.

pub const OUR_SCHEMA: &str = "
    CREATE TABLE t1 (id INT PRIMARY KEY, a INT, b INT, c DOUBLE, d DECIMAL(10,2), s TEXT, ts TIMESTAMP);
    CREATE TABLE t2 (k INT, x INT, y TEXT, c DOUBLE, day DATE);
    CREATE TABLE t3 (k INT PRIMARY KEY, name TEXT, w INT);
    CREATE TABLE t0 (a INT, b DOUBLE);
    CREATE TABLE t4 (a INT, b TEXT);
    CREATE SOURCE u (k INT, v INT, w TEXT) FROM TOPIC 'utopic' FORMAT JSON ENVELOPE UPSERT KEY (k);
    CREATE SOURCE e (id INT, k INT, amount INT, price DOUBLE, cat TEXT, ts TIMESTAMP, ok BOOLEAN)
        FROM TOPIC 'etopic' FORMAT JSON;
";

/// Timestamps and dates are TEXT in SQLite, in the format views print them,
/// so that they compare, sort and show the same; DECIMAL is REAL, BOOLEAN
/// INTEGER.
pub const SQLITE_SCHEMA: &str = "
    PRAGMA case_sensitive_like = ON;
    CREATE TABLE t1 (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER, c REAL, d REAL, s TEXT, ts TEXT);
    CREATE TABLE t2 (k INTEGER, x INTEGER, y TEXT, c REAL, day TEXT);
    CREATE TABLE t3 (k INTEGER PRIMARY KEY, name TEXT, w INTEGER);
    CREATE TABLE t0 (a INTEGER, b REAL);
    CREATE TABLE t4 (a INTEGER, b TEXT);
    CREATE TABLE u (k INTEGER PRIMARY KEY, v INTEGER, w TEXT);
    CREATE TABLE e (id INTEGER, k INTEGER, amount INTEGER, price REAL, cat TEXT, ts TEXT, ok INTEGER);
    -- Epoch seconds of the timestamps (whole, for windows, and exact).
    CREATE VIEW e_s AS SELECT *, CAST(strftime('%s', ts) AS INTEGER) AS es,
        CAST(strftime('%s', ts) AS INTEGER) + CAST(strftime('%f', ts) AS REAL) - CAST(strftime('%S', ts) AS INTEGER) AS ep
        FROM e;
    CREATE VIEW t1_s AS SELECT *, CAST(strftime('%s', ts) AS INTEGER) AS ts_s FROM t1;
    -- 0..99, for HOP windows (a row in several windows).
    CREATE TABLE nums (i INTEGER);
    WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99) INSERT INTO nums SELECT i FROM n;
";

/// A value as compared: SQLite's storage classes, with our types mapped.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Null,
    Number(f64),
    Text(String),
}

impl Cell {
    pub fn rank(&self) -> u8 {
        match self {
            Cell::Null => 0,
            Cell::Number(_) => 1,
            Cell::Text(_) => 2,
        }
    }
    pub fn order(&self, other: &Cell) -> std::cmp::Ordering {
        match (self, other) {
            (Cell::Number(a), Cell::Number(b)) => a.total_cmp(b),
            (Cell::Text(a), Cell::Text(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
    pub fn matches(&self, other: &Cell) -> bool {
        match (self, other) {
            // Whole numbers (counts, sums of integers, epoch seconds) must be equal.
            (Cell::Number(a), Cell::Number(b)) if a.fract() == 0.0 && b.fract() == 0.0 => a == b,
            (Cell::Number(a), Cell::Number(b)) => {
                a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
            }
            _ => self == other,
        }
    }
}

impl std::fmt::Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Null => f.write_str("NULL"),
            Cell::Number(x) => write!(f, "{x}"),
            Cell::Text(s) => write!(f, "{s:?}"),
        }
    }
}

pub type Rows = Vec<Vec<Cell>>;

pub fn sort_rows(rows: &mut Rows) {
    rows.sort_by(|a, b| {
        a.iter().zip(b).map(|(x, y)| x.order(y)).find(|o| o.is_ne()).unwrap_or(std::cmp::Ordering::Equal)
    });
}

pub fn show_rows(rows: &[Vec<Cell>], limit: usize) -> String {
    let mut out = String::new();
    for row in rows.iter().take(limit) {
        let cells: Vec<String> = row.iter().map(ToString::to_string).collect();
        let _ = writeln!(out, "    ({})", cells.join(", "));
    }
    if rows.len() > limit {
        let _ = writeln!(out, "    ... {} more", rows.len() - limit);
    }
    out
}

/// Compares two multisets of rows; describes the difference.
pub fn compare(ours: &Rows, theirs: &Rows) -> Option<String> {
    let (mut ours, mut theirs) = (ours.clone(), theirs.clone());
    sort_rows(&mut ours);
    sort_rows(&mut theirs);
    let equal = |a: &Vec<Cell>, b: &Vec<Cell>| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.matches(y));
    if ours.len() == theirs.len() && ours.iter().zip(&theirs).all(|(a, b)| equal(a, b)) {
        return None;
    }
    // Numbers within the tolerance may sort apart: match greedily before reporting.
    let mut extra = Vec::new();
    let mut missing = theirs.clone();
    for row in ours.iter() {
        match missing.iter().position(|m| equal(row, m)) {
            Some(i) => {
                missing.remove(i);
            }
            None => extra.push(row.clone()),
        }
    }
    if extra.is_empty() && missing.is_empty() {
        return None;
    }
    Some(format!(
        "  ours has {} rows, SQLite {}\n  only ours:\n{}  only SQLite:\n{}",
        ours.len(),
        theirs.len(),
        show_rows(&extra, 12),
        show_rows(&missing, 12)
    ))
}

pub fn our_cell(value: &serde_json::Value, ty: Type) -> Cell {
    use serde_json::Value as J;
    match (value, ty) {
        (J::Null, _) => Cell::Null,
        (J::Bool(b), _) => Cell::Number(f64::from(u8::from(*b))),
        (J::Number(n), _) => Cell::Number(n.as_f64().expect("a JSON number")),
        (J::String(s), Type::Decimal { .. } | Type::Double | Type::Int) => match s.parse::<f64>() {
            Ok(x) => Cell::Number(x),
            Err(_) => Cell::Text(s.clone()),
        },
        (J::String(s), _) => Cell::Text(s.clone()),
        (other, _) => Cell::Text(other.to_string()),
    }
}

pub fn sqlite_rows(connection: &Connection, query: &str) -> Result<(Rows, usize), String> {
    let mut statement = connection.prepare(query).map_err(|e| format!("SQLite: {e}"))?;
    let width = statement.column_count();
    let mut rows = Vec::new();
    let mut results = statement.query([]).map_err(|e| format!("SQLite: {e}"))?;
    while let Some(row) = results.next().map_err(|e| format!("SQLite: {e}"))? {
        let mut cells = Vec::with_capacity(width);
        for i in 0..width {
            cells.push(match row.get_ref(i).map_err(|e| e.to_string())? {
                ValueRef::Null => Cell::Null,
                ValueRef::Integer(i) => Cell::Number(i as f64),
                ValueRef::Real(x) => Cell::Number(x),
                ValueRef::Text(t) => Cell::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(_) => return Err("SQLite returned a BLOB".into()),
            });
        }
        rows.push(cells);
    }
    Ok((rows, width))
}

pub fn apply_sqlite(connection: &Connection, phase: &Phase) -> TestResult {
    for statement in &phase.dml {
        connection.execute_batch(statement).map_err(|e| format!("SQLite: {statement}: {e}"))?;
    }
    for (k, row) in &phase.upserts {
        match row {
            Some((_, insert)) => connection.execute_batch(insert)?,
            None => connection.execute_batch(&format!("DELETE FROM u WHERE k = {k}"))?,
        }
    }
    for (_, insert) in &phase.events {
        connection.execute_batch(insert)?;
    }
    Ok(())
}
