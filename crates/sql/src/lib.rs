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
mod error;
#[cfg(feature = "runtime")]
mod eval;
mod parse;
#[cfg(feature = "runtime")]
mod plan;
#[cfg(feature = "runtime")]
mod render;
#[cfg(feature = "runtime")]
mod rewrite;
#[cfg(feature = "runtime")]
mod session;
mod time;
mod value;

#[cfg(feature = "runtime")]
use std::collections::BTreeSet;
#[cfg(feature = "runtime")]
use std::path::Path;
#[cfg(feature = "runtime")]
use std::sync::atomic::Ordering;

#[cfg(feature = "runtime")]
use millpond_dataflow::{CheckpointMeta, RunStats, Runtime, RuntimeConfig};

#[cfg(feature = "runtime")]
pub use catalog::CATALOG_TOPIC;
pub use error::{Error, Location, Result};
#[cfg(feature = "runtime")]
pub use render::{CompiledView, UNIT_TOPIC, ViewRow};
#[cfg(feature = "runtime")]
pub use session::{Outcome, Session};
pub use value::{Dec, OrderedF64, Row, Type, Value};

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
/// maintained and the catalog no longer has (a dropped or replaced view) is
/// dropped, state and changelog (`drop_undeclared`).
///
/// A replaced view keeps its name, and with it its changelog and the state
/// of its rows: the new definition would add its rows to the old ones. So a
/// run that finds views replaced since the last commit first runs without
/// them until caught up, which drops them, and then with them, built anew.
#[cfg(feature = "runtime")]
pub fn run(config: RuntimeConfig, views: Vec<CompiledView>) -> Result<RunStats> {
    let config = config.drop_undeclared(true);
    let replaced = replaced_views(&config.data_dir, &views)?;
    let mut before = None;
    if !replaced.is_empty() {
        let kept: Vec<CompiledView> = views.iter().filter(|v| !replaced.contains(&v.name)).cloned().collect();
        let stats = Runtime::run(config.clone().stop_when_caught_up(true), move |job| render::build(job, &kept))?;
        if config.stop.load(Ordering::SeqCst) {
            return Ok(stats);
        }
        before = Some(stats);
    }
    let mut stats = Runtime::run(config, move |job| render::build(job, &views))?;
    if let Some(before) = before {
        stats.records += before.records;
        stats.dead_letters += before.dead_letters;
        stats.skipped_offsets += before.skipped_offsets;
        stats.first_epoch = before.first_epoch;
        stats.dropped = before.dropped.into_iter().chain(stats.dropped).collect();
    }
    Ok(stats)
}

/// The views that the last commit has under another definition: listed,
/// but with no reader named after their current one. (A published
/// checkpoint that lags the store at worst makes a view built anew.)
#[cfg(feature = "runtime")]
fn replaced_views(data_dir: &Path, views: &[CompiledView]) -> Result<BTreeSet<String>> {
    let Some(meta) = CheckpointMeta::read_published(data_dir)? else { return Ok(BTreeSet::new()) };
    Ok(views
        .iter()
        .filter(|view| {
            let readers = format!("{}.", view.prefix());
            meta.views.contains_key(&view.name) && !meta.sources.keys().any(|reader| reader.starts_with(&readers))
        })
        .map(|view| view.name.clone())
        .collect())
}
