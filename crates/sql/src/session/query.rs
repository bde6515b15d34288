//! One-off queries: a `SELECT` bound against the catalog as it is now and
//! answered once by the interpreter, over the committed contents of what it
//! reads.
//!
//! Invariants:
//! - A materialized view is read as of its last committed epoch (the
//!   snapshot its caller passes in); a table as of its last committed batch
//!   (rows past its committed end belong to no batch); a source as its
//!   topic holds it now, with the records its decoder rejects left out, as
//!   the runtime leaves them out (they are dead letters).
//! - A non-materialized view is inlined, as in a view definition.
//! - What the binder refuses is refused with its error (never answered
//!   differently): the same SQL means the same rows as in a view, plus the
//!   outermost ORDER BY (the answer's order), OFFSET and duplicate column names.

use std::collections::BTreeMap;
use std::sync::Arc;

use millpond_dataflow::{RawSnapshot, Topics};
use sqlparser::ast;

use super::Session;
use crate::bind::Binder;
use crate::catalog::Catalog;
use crate::decode::{decode_record, decode_row};
use crate::error::{Error, Location, Result};
use crate::interpreter::{Inputs, Rows, evaluate};
use crate::parse::{Stmt, parse};
use crate::plan::{Expr, Input, Rel};
use crate::system::SystemContext;
use crate::value::{Row, Type};

/// A bound one-off query, ready to run over snapshots of the views it reads.
#[derive(Clone, Debug)]
pub struct Query {
    /// The answer's columns (names may repeat).
    pub columns: Vec<(String, Type)>,
    rel: Rel,
    /// Rows of the ordered answer skipped (OFFSET).
    offset: usize,
    /// The materialized views read, with their columns.
    views: BTreeMap<String, Vec<(String, Type)>>,
    /// The committed end of each table topic, when bound.
    committed: BTreeMap<String, u64>,
    topics: Topics,
    /// The catalog as bound, and what else the system catalog shows.
    catalog: Catalog,
    system: SystemContext,
    /// The most rows any of its operators may hold ([`ONE_OFF_ROWS_MAX`]).
    rows_max: usize,
}

impl Session {
    /// Binds `sql`, one `SELECT` (or `VALUES`, `WITH ...`), as a one-off query.
    pub fn query(&self, sql: &str) -> Result<Query> {
        self.query_in(sql, &SystemContext::default())
    }

    /// [`Session::query`] on a connection: `context` is what the system
    /// catalog and functions such as current_database() report.
    pub fn query_in(&self, sql: &str, context: &SystemContext) -> Result<Query> {
        let mut statements = parse(sql, None)?;
        if statements.len() != 1 {
            return Err(Error::Sql {
                location: crate::error::Location { file: None, line: 1, column: 1 },
                message: format!("a query is one statement, not {}", statements.len()),
            });
        }
        let parsed = statements.remove(0);
        let Stmt::Sql(statement) = &parsed.stmt else {
            return Err(Error::sql(parsed.location, "not a query: CREATE SOURCE changes the catalog"));
        };
        let ast::Statement::Query(query) = statement.as_ref() else {
            return Err(Error::sql(parsed.location, "not supported: this statement as a query"));
        };
        let mut binder = Binder::new(&self.catalog, None, parsed.location.clone());
        binder.one_off = true;
        binder.system = Some(context.clone());
        binder.outermost = true;
        binder.nesting = parsed.nesting;
        let bound = binder.bind_query(query)?;
        let mut views = BTreeMap::new();
        collect_views(&bound.rel, &mut views);
        Ok(Query {
            columns: bound.scope.columns.iter().map(|c| (c.name.clone(), c.ty)).collect(),
            rel: bound.rel,
            offset: binder.offset,
            views,
            committed: self.committed.clone(),
            topics: self.topics.clone(),
            catalog: self.catalog.clone(),
            system: context.clone(),
            rows_max: ONE_OFF_ROWS_MAX,
        })
    }
}

/// The materialized views `rel` reads, its subqueries' included.
fn collect_views(rel: &Rel, out: &mut BTreeMap<String, Vec<(String, Type)>>) {
    // Walked through a copy (the walkers are mutable); one-off plans are small.
    collect_views_in(&mut rel.clone(), out);
}

fn collect_views_in(rel: &mut Rel, out: &mut BTreeMap<String, Vec<(String, Type)>>) {
    if let Rel::Get { input: Input::View { view }, columns, .. } = rel {
        out.insert(view.clone(), columns.clone());
    }
    for expr in rel.exprs_mut() {
        collect_subquery_views(expr, out);
    }
    for input in rel.inputs_mut() {
        collect_views_in(input, out);
    }
}

fn collect_subquery_views(expr: &mut Expr, out: &mut BTreeMap<String, Vec<(String, Type)>>) {
    if let Expr::Subquery { rel, .. } = expr {
        collect_views_in(rel, out);
    }
    for child in expr.children_mut() {
        collect_subquery_views(child, out);
    }
}

impl Query {
    /// The query with another bound on the rows an operator may hold.
    pub fn with_rows_max(mut self, rows_max: usize) -> Query {
        self.rows_max = rows_max;
        self
    }

    /// The materialized views the query reads (their snapshots go to [`Query::run`]).
    pub fn views(&self) -> impl Iterator<Item = &str> {
        self.views.keys().map(String::as_str)
    }

    /// The answer, in order when the query orders it: each row as many
    /// times as it is held. `snapshots` has one per view of [`Query::views`].
    pub fn run(&self, snapshots: &BTreeMap<String, Arc<RawSnapshot>>) -> Result<Vec<Row>> {
        self.run_until(snapshots, &|| false)
    }

    /// [`Query::run`], stopped with an error (`canceling statement ...`)
    /// as soon as `stop` says so (checked as operators' rows grow), and at
    /// [`ONE_OFF_ROWS_MAX`] rows in any operator.
    pub fn run_until(
        &self,
        snapshots: &BTreeMap<String, Arc<RawSnapshot>>,
        stop: &dyn Fn() -> bool,
    ) -> Result<Vec<Row>> {
        let inputs = Contents { query: self, snapshots, stop };
        let rows = evaluate(&self.rel, &inputs)?;
        let mut out = Vec::new();
        let mut skip = self.offset;
        for (row, count) in rows {
            debug_assert!(count > 0, "the interpreter emits positive counts only");
            let count = count as usize;
            let taken = count.saturating_sub(skip);
            skip = skip.saturating_sub(count);
            out.extend(std::iter::repeat_n(row, taken));
        }
        Ok(out)
    }
}

/// The committed contents of a query's inputs.
struct Contents<'q> {
    query: &'q Query,
    snapshots: &'q BTreeMap<String, Arc<RawSnapshot>>,
    stop: &'q dyn Fn() -> bool,
}

/// The most rows any operator of a one-off query may hold (its memory bound).
pub(crate) const ONE_OFF_ROWS_MAX: usize = 10_000_000;

impl Inputs for Contents<'_> {
    fn check(&self, rows: usize) -> Result<()> {
        let location = Location { file: None, line: 0, column: 0 };
        if (self.stop)() {
            return Err(Error::sql(location, "canceling statement: cancelled or past statement_timeout"));
        }
        if rows > self.query.rows_max {
            let limit = self.query.rows_max;
            let message = format!("program limit exceeded: a step of the query holds over {limit} rows");
            return Err(Error::sql(location, message));
        }
        Ok(())
    }

    fn rows(&self, input: &Input, columns: &[(String, Type)]) -> Result<Rows> {
        match input {
            Input::View { view } => view_rows(self.snapshots, view, columns),
            Input::System { table } => {
                let rows = table.rows(&self.query.catalog, &self.query.system);
                Ok(rows.into_iter().map(|row| (row, 1)).collect())
            }
            Input::Source { topic, record_timestamp, .. } => {
                source_rows(&self.query.topics, topic, columns, *record_timestamp)
            }
            Input::Upsert { topic } => {
                let committed = self.query.committed.get(topic).copied().unwrap_or(u64::MAX);
                upsert_rows(&self.query.topics, topic, committed, columns)
            }
        }
    }
}

/// A materialized view's rows, from its snapshot.
fn view_rows(snapshots: &BTreeMap<String, Arc<RawSnapshot>>, view: &str, columns: &[(String, Type)]) -> Result<Rows> {
    let wanted = vec![true; columns.len()];
    let snapshot = snapshots.get(view).ok_or_else(|| Error::Catalog {
        offset: 0,
        message: format!("no snapshot of view \"{view}\" was read for the query"),
    })?;
    let mut rows = Rows::new();
    for (json, count) in snapshot.rows.iter().filter(|(_, count)| *count > 0) {
        let row = decode_row(json.get().as_bytes(), columns, &wanted).map_err(|e| Error::Catalog {
            offset: snapshot.epoch,
            message: format!("view \"{view}\" holds a row that does not read at epoch {}: {e}", snapshot.epoch),
        })?;
        rows.push((row, *count));
    }
    Ok(rows)
}

/// An append-only source's rows: its topic's records as they are now,
/// those its decoder rejects left out (dead letters).
fn source_rows(topics: &Topics, topic: &str, columns: &[(String, Type)], stamped: bool) -> Result<Rows> {
    let wanted = vec![true; columns.len()];
    let mut rows = Rows::new();
    if topics.exists(topic) {
        for record in topics.read_all(topic)? {
            let decoded = record.value.map(|v| decode_record(&v, record.timestamp_ms, columns, &wanted, stamped));
            if let Some(Ok(row)) = decoded {
                rows.push((row, 1));
            }
        }
    }
    Ok(rows)
}

/// A table's or an upsert source's rows: the latest record per key below
/// `committed`, tombstones removing the key's row.
fn upsert_rows(topics: &Topics, topic: &str, committed: u64, columns: &[(String, Type)]) -> Result<Rows> {
    let wanted = vec![true; columns.len()];
    let mut latest: BTreeMap<Vec<u8>, Row> = BTreeMap::new();
    if topics.exists(topic) {
        for record in topics.read_all(topic)?.into_iter().filter(|r| r.offset < committed) {
            let Some(key) = record.key else { continue };
            match record.value.map(|v| decode_row(&v, columns, &wanted)) {
                None => {
                    latest.remove(&key);
                }
                Some(Ok(row)) => {
                    latest.insert(key, row);
                }
                // Rejected (a dead letter): the key keeps its row.
                Some(Err(_)) => {}
            }
        }
    }
    Ok(latest.into_values().map(|row| (row, 1)).collect())
}

/// A query as `INSERT ... SELECT` runs it: bound one-off against the
/// batch's catalog; its output columns.
pub(super) fn bind_one_off(working: &Catalog, query: &ast::Query, at: &Location) -> Result<(Rel, Vec<(String, Type)>)> {
    let mut binder = Binder::new(working, at.file.clone(), at.clone());
    binder.one_off = true;
    binder.system = Some(SystemContext::default());
    binder.outermost = true;
    let bound = binder.bind_query(query)?;
    if binder.offset > 0 {
        return Err(Error::sql(at.clone(), "not supported: OFFSET in INSERT ... SELECT"));
    }
    Ok((bound.rel, bound.scope.columns.iter().map(|c| (c.name.clone(), c.ty)).collect()))
}

/// What a batch's `INSERT ... SELECT` reads: its tables as the batch has
/// left them, views' snapshots, the rest as a one-off query reads them.
struct BatchContents<'b> {
    topics: &'b Topics,
    catalog: &'b Catalog,
    /// By topic: the rows of each table the query reads.
    tables: BTreeMap<String, Rows>,
    snapshots: BTreeMap<String, Arc<RawSnapshot>>,
    system: SystemContext,
}

impl Inputs for BatchContents<'_> {
    fn check(&self, rows: usize) -> Result<()> {
        if rows > ONE_OFF_ROWS_MAX {
            let message = format!("program limit exceeded: a step of the query holds over {ONE_OFF_ROWS_MAX} rows");
            return Err(Error::sql(Location { file: None, line: 0, column: 0 }, message));
        }
        Ok(())
    }

    fn rows(&self, input: &Input, columns: &[(String, Type)]) -> Result<Rows> {
        match input {
            Input::View { view } => view_rows(&self.snapshots, view, columns),
            Input::System { table } => Ok(table.rows(self.catalog, &self.system).into_iter().map(|r| (r, 1)).collect()),
            Input::Source { topic, record_timestamp, .. } => {
                source_rows(self.topics, topic, columns, *record_timestamp)
            }
            Input::Upsert { topic } => match self.tables.get(topic) {
                Some(rows) => Ok(rows.clone()),
                None => upsert_rows(self.topics, topic, u64::MAX, columns),
            },
        }
    }
}

impl Session {
    /// `rel` (bound by [`bind_one_off`]) answered once: each row as many
    /// times as it is held, in the query's order.
    pub(super) fn answer(
        &self,
        working: &Catalog,
        tables: &mut BTreeMap<String, super::TableRows>,
        views: super::ViewReader<'_>,
        rel: &Rel,
        at: &Location,
    ) -> Result<Vec<Row>> {
        let mut read = BTreeMap::new();
        collect_views(rel, &mut read);
        let names: Vec<&str> = read.keys().map(String::as_str).collect();
        let snapshots = if names.is_empty() {
            BTreeMap::new()
        } else {
            views(&names).map_err(|e| Error::sql(at.clone(), format!("INSERT ... SELECT: {e}")))?
        };
        let mut table_rows = BTreeMap::new();
        for object in working.objects.values() {
            if let crate::catalog::ObjectKind::Table { topic, .. } = &object.kind
                && reads_topic(rel, topic)
            {
                let rows = self.table_rows(tables, object)?;
                table_rows.insert(topic.clone(), rows.values().map(|row| (row.clone(), 1)).collect());
            }
        }
        let contents = BatchContents {
            topics: &self.topics,
            catalog: working,
            tables: table_rows,
            snapshots,
            system: SystemContext::default(),
        };
        let rows = evaluate(rel, &contents)?;
        Ok(rows.into_iter().flat_map(|(row, count)| std::iter::repeat_n(row, count.max(0) as usize)).collect())
    }
}

/// Whether `rel` (or a subquery of it) reads the table or source `topic`.
fn reads_topic(rel: &Rel, topic: &str) -> bool {
    fn walk(rel: &mut Rel, topic: &str, found: &mut bool) {
        if let Rel::Get { input: Input::Upsert { topic: t } | Input::Source { topic: t, .. }, .. } = rel
            && t == topic
        {
            *found = true;
        }
        for expr in rel.exprs_mut() {
            walk_expr(expr, topic, found);
        }
        for input in rel.inputs_mut() {
            walk(input, topic, found);
        }
    }
    fn walk_expr(expr: &mut Expr, topic: &str, found: &mut bool) {
        if let Expr::Subquery { rel, .. } = expr {
            walk(rel, topic, found);
        }
        for child in expr.children_mut() {
            walk_expr(child, topic, found);
        }
    }
    let mut found = false;
    walk(&mut rel.clone(), topic, &mut found);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    fn session_with_rows(dir: &std::path::Path, rows: usize) -> Session {
        let mut session = Session::open(dir).unwrap();
        let values: Vec<String> = (0..rows).map(|i| format!("({i})")).collect();
        let sql = format!("CREATE TABLE t (x BIGINT); INSERT INTO t VALUES {}", values.join(", "));
        session.execute(&sql, None, false).unwrap();
        session
    }

    #[test]
    fn a_query_stops_at_its_row_bound_and_when_told() {
        let dir = tempfile::tempdir().unwrap();
        let session = session_with_rows(dir.path(), 100);
        let cross = "SELECT COUNT(*) FROM t a, t b, t c";
        let none = BTreeMap::new();
        // 100^3 rows: past a bound of 50 000, an error, not an answer.
        let bounded = session.query(cross).unwrap().with_rows_max(50_000);
        let error = bounded.run(&none).unwrap_err().to_string();
        assert!(error.contains("program limit exceeded"), "{error}");
        // Unbounded, it answers: the error came from the bound.
        assert_eq!(session.query(cross).unwrap().run(&none).unwrap(), [vec![Value::Int(1_000_000)]]);
        // Told to stop, it stops at the first check.
        let error = session.query(cross).unwrap().run_until(&none, &|| true).unwrap_err().to_string();
        assert!(error.contains("canceling statement"), "{error}");
        // A stop that comes later (after 10 checks) stops it too.
        let checks = std::sync::atomic::AtomicUsize::new(0);
        let later = || checks.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 10;
        let error = session.query(cross).unwrap().run_until(&none, &later).unwrap_err().to_string();
        assert!(error.contains("canceling statement"), "{error}");
    }

    #[test]
    fn a_table_function_past_its_limit_names_where_it_is_called() {
        let dir = tempfile::tempdir().unwrap();
        let session = Session::open(dir.path()).unwrap();
        let none = BTreeMap::new();
        let query = session.query("SELECT x\nFROM   generate_series(1, 100000000000) AS x").unwrap();
        match query.run(&none).unwrap_err() {
            Error::Sql { location, message, .. } => {
                assert_eq!((location.line, location.column), (2, 8), "{message}");
                assert!(message.contains("the limit is 10000000"), "{message}");
            }
            other => panic!("not an SQL error: {other}"),
        }
        let zero = session.query("SELECT * FROM generate_series(1, 5, 0)").unwrap().run(&none).unwrap_err();
        assert!(matches!(zero, Error::Sql { location, .. } if location.line == 1 && location.column == 15));
    }
}
