//! SQL for Millpond: definition files of sources, tables and views,
//! compiled to the dataflow crate's public API — the same calls a Rust job
//! makes.
//!
//! ```text
//! text ──parse──▶ statements ──Session──▶ catalog (topic __millpond_catalog)
//!                                  │            + table rows (topics table.NAME)
//!                                  ▼
//!               views ──bind──▶ plans (Rel) ──render──▶ dataflow job
//! ```
//!
//! Module map: `parse` (sqlparser, plus CREATE/DROP SOURCE), `catalog`
//! (objects and their persistence), `bind` (names, types, plans), `plan`
//! (the plan types), `rewrite` (plan-to-plan rewrites), `eval` (expressions on rows), `value` and `time`
//! (SQL values), `decode` (JSON records to rows), `render` (plans to
//! collections), `session` (executing statements, with `catalog_log`, `ddl` and `dml`).
//!
//! Invariant (architecture): this crate depends on `millpond-dataflow` and
//! on no other Millpond crate; it knows nothing of RocksDB or of the log's
//! internals (it reaches topics only through `millpond_dataflow::Topics`).
//! `.ci/run` checks this with `cargo tree`.
//!
//! Without the default feature `runtime`, only the parser and the record
//! decoder are built ([`parse_statements`], [`decode_json_row`]): the fuzz
//! targets use them so, without building the dataflow crate.
#![forbid(unsafe_code)]
// Without the runtime, the helpers only the binder and the renderer call are unused.
#![cfg_attr(not(feature = "runtime"), allow(dead_code))]

#[cfg(feature = "runtime")]
mod bind;
#[cfg(feature = "runtime")]
mod catalog;
mod decode;
#[cfg(feature = "runtime")]
mod decorrelate;
mod error;
#[cfg(feature = "runtime")]
mod eval;
#[cfg(feature = "runtime")]
mod function;
#[cfg(feature = "runtime")]
mod interpreter;
#[cfg(feature = "runtime")]
mod join_order;
#[cfg(feature = "runtime")]
mod over;
mod parse;
#[cfg(feature = "runtime")]
mod plan;
#[cfg(feature = "runtime")]
mod render;
#[cfg(feature = "runtime")]
mod rewrite;
#[cfg(feature = "runtime")]
mod session;
#[cfg(feature = "runtime")]
mod set_operation;
#[cfg(feature = "runtime")]
mod sort_key;
#[cfg(feature = "runtime")]
mod sum;
#[cfg(feature = "runtime")]
mod system;
#[cfg(feature = "runtime")]
mod table_function;
mod time;
mod value;

#[cfg(feature = "runtime")]
use millpond_dataflow::{RunStats, Runtime, RuntimeConfig, Topics};

#[cfg(feature = "runtime")]
pub use catalog::CATALOG_TOPIC;
pub use error::{Error, Location, Result};
#[cfg(feature = "runtime")]
pub use render::{CompiledCatalog, CompiledSource, CompiledView, UNIT_TOPIC, ViewRow};
#[cfg(feature = "runtime")]
pub use session::{Description, Outcome, Query, Session, ViewReader};
#[cfg(feature = "runtime")]
pub use system::SystemContext;
pub use time::without_zone;
pub use value::{Dec, OrderedF64, Row, Type, Value, decimal_text_at_scale};

/// Parses `sql` (statements separated by `;`) without executing anything:
/// the number of statements, or the first syntax error with its location.
pub fn parse_statements(sql: &str, file: Option<&str>) -> Result<usize> {
    Ok(parse::parse(sql, file.map(Into::into))?.len())
}

/// Decodes a source record's JSON value into a row of `columns` (name and
/// type), as a source does: the error names the column at fault.
pub fn decode_json_row(json: &[u8], columns: &[(String, Type)]) -> std::result::Result<Row, String> {
    decode::decode_row(json, columns, &vec![true; columns.len()])
}

/// Runs the compiled views as one job until it stops (see
/// [`RuntimeConfig`]): each view is materialized under its own name.
///
/// The catalog is the whole job: whatever the data directory's earlier runs
/// maintained and the catalog no longer has (a dropped view, or a replaced
/// view's old operators and readers) is dropped, state and changelog
/// (`drop_undeclared`). A replaced view keeps its name and changelog: its
/// definition is its prefix (name and fingerprint), so the run's first
/// epoch retracts the old definition's rows (`Job::materialize_definition`).
/// The names the data directory's SQL catalog defines (sources, tables and
/// views), read without opening the log (so while a job runs), or `None`
/// if the directory's catalog was never written. A view that a job
/// committed but the catalog no longer names was dropped by a statement
/// that no job has applied yet: readers must not serve it.
#[cfg(feature = "runtime")]
pub fn catalog_names(data_dir: &std::path::Path) -> Result<Option<std::collections::BTreeSet<String>>> {
    Ok(catalog_objects(data_dir)?.map(|objects| objects.into_keys().collect()))
}

/// The source or table of the data directory's SQL catalog that reads
/// `topic` (as "source NAME" or "table NAME"), if any; read without opening
/// the log.
#[cfg(feature = "runtime")]
pub fn topic_reader(data_dir: &std::path::Path, topic: &str) -> Result<Option<String>> {
    Ok(catalog_objects(data_dir)?
        .unwrap_or_default()
        .into_iter()
        .find_map(|(name, reads)| reads.filter(|(_, t)| t == topic).map(|(kind, _)| format!("{kind} {name}"))))
}

/// Catalog object names to the (kind, topic) each reads: sources and
/// tables; views read no topic.
#[cfg(feature = "runtime")]
type CatalogObjects = std::collections::BTreeMap<String, Option<(&'static str, String)>>;

/// The catalog's objects; `None` for a catalog never written.
#[cfg(feature = "runtime")]
fn catalog_objects(data_dir: &std::path::Path) -> Result<Option<CatalogObjects>> {
    let Some(records) = millpond_dataflow::read_partition_unlocked(data_dir, CATALOG_TOPIC, 0)? else {
        return Ok(None);
    };
    if records.is_empty() {
        return Ok(None); // a catalog never written to: no SQL here
    }
    let mut latest = std::collections::BTreeMap::new();
    for record in records {
        let key = record
            .key
            .ok_or_else(|| Error::Catalog { offset: record.offset, message: "a record without a key".into() })?;
        latest.insert(key, (record.offset, record.value));
    }
    let mut objects = std::collections::BTreeMap::new();
    for (key, (offset, value)) in latest {
        let (Ok(name), Some(value)) = (String::from_utf8(key), value) else { continue };
        if name.contains('/') {
            continue; // a marker, not an object
        }
        let text = String::from_utf8_lossy(&value);
        let statements = parse::parse(&text, None).map_err(|e| Error::Catalog { offset, message: e.to_string() })?;
        let reads = match statements.first().map(|s| &s.stmt) {
            Some(parse::Stmt::CreateSource(source)) => Some((
                "source",
                match source.kafka_brokers {
                    Some(_) => millpond_dataflow::kafka_source::label(&source.topic),
                    None => source.topic.clone(),
                },
            )),
            Some(parse::Stmt::Sql(statement)) if matches!(**statement, sqlparser::ast::Statement::CreateTable(_)) => {
                Some(("table", catalog::table_topic(&name)))
            }
            _ => None,
        };
        objects.insert(name, reads);
    }
    Ok(Some(objects))
}

/// Runs the catalog's materialized views (see [`Session::compile`]).
#[cfg(feature = "runtime")]
pub fn run(config: RuntimeConfig, compiled: CompiledCatalog) -> Result<RunStats> {
    Ok(Runtime::run(config.drop_undeclared(true), move |job| render::build(job, &compiled.views, &compiled.sources))?)
}

/// [`run`] on a log this process has open already (a server's).
#[cfg(feature = "runtime")]
pub fn run_on(topics: &Topics, config: RuntimeConfig, compiled: CompiledCatalog) -> Result<RunStats> {
    let build = move |job: &mut millpond_dataflow::Job<'_>| render::build(job, &compiled.views, &compiled.sources);
    Ok(Runtime::run_on(topics, config.drop_undeclared(true), build)?)
}
