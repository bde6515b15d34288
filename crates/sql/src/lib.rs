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
//! (the plan types), `eval` (expressions on rows), `value` and `time`
//! (SQL values), `decode` (JSON records to rows), `render` (plans to
//! collections), `session` (executing statements).
//!
//! Invariant (architecture): this crate depends on `millpond-dataflow` and
//! on no other Millpond crate; it knows nothing of RocksDB or of the log's
//! internals (it reaches topics only through `millpond_dataflow::Topics`).
//! `.ci/run` checks this with `cargo tree`.
#![forbid(unsafe_code)]

mod bind;
mod catalog;
mod decode;
mod error;
mod eval;
mod parse;
mod plan;
mod render;
mod session;
mod time;
mod value;

use millpond_dataflow::{RunStats, Runtime, RuntimeConfig};

pub use catalog::CATALOG_TOPIC;
pub use error::{Error, Location, Result};
pub use render::{CompiledView, UNIT_TOPIC, ViewRow};
pub use session::{Outcome, Session};
pub use value::{Row, Type, Value};

/// Runs the compiled views as one job until it stops (see
/// [`RuntimeConfig`]): each view is materialized under its own name.
///
/// The catalog is the whole job: whatever the data directory's earlier runs
/// maintained and the catalog no longer has (a dropped or replaced view) is
/// dropped, state and changelog (`drop_undeclared`).
pub fn run(config: RuntimeConfig, views: Vec<CompiledView>) -> Result<RunStats> {
    Ok(Runtime::run(config.drop_undeclared(true), move |job| render::build(job, &views))?)
}
