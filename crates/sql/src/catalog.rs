//! The catalog: every source, table and view, by name.
//!
//! It lives in the log, in the compacted topic [`CATALOG_TOPIC`]: one
//! record per object, keyed by its name, whose value is the object's
//! canonical `CREATE` statement (a tombstone when dropped). Loading folds
//! the topic (latest record per key) and parses each statement again.
//! Views are bound when used, so the order of the records does not matter.
//!
//! Invariants: names are unique across kinds; every view in the catalog
//! bound successfully against the catalog when it was created, and nothing
//! a view depends on can be dropped while the view exists.
use std::collections::BTreeMap;

use sqlparser::ast::Query;

use crate::value::Type;

/// The log topic holding the catalog.
pub const CATALOG_TOPIC: &str = "__millpond_catalog";

/// The topic backing table `name`.
pub(crate) fn table_topic(name: &str) -> String {
    format!("table.{name}")
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Column {
    pub(crate) name: String,
    pub(crate) ty: Type,
}

#[derive(Clone, Debug)]
pub(crate) enum ObjectKind {
    /// Rows decoded from a topic's JSON values; with `upsert_key`, the
    /// latest value per record key is a row, and a tombstone deletes it.
    /// With `kafka_brokers`, `topic` is the label `kafka:TOPIC` of a topic
    /// of that external Kafka cluster.
    /// With `event_time`, a WATERMARK: its views keep the records on time.
    Source {
        topic: String,
        upsert_key: Option<Vec<usize>>,
        kafka_brokers: Option<String>,
        event_time: Option<crate::plan::EventTime>,
        /// `INCLUDE TIMESTAMP`: the last column is each record's timestamp.
        record_timestamp: bool,
    },
    /// Rows written by INSERT/UPDATE/DELETE to the topic `table.NAME`,
    /// keyed by the primary key (or a row id).
    Table { topic: String, primary_key: Option<Vec<usize>> },
    /// Ships materialized view `view`'s committed changes to `topic` of the
    /// Kafka cluster at `brokers` (`millpond_dataflow::KafkaSink`).
    /// `envelope`: `UPSERT` or `DEBEZIUM` with the key columns (`None`:
    /// one record per change).
    Sink { view: String, brokers: String, topic: String, envelope: Option<(String, Vec<String>)> },
    View {
        query: Box<Query>,
        materialized: bool,
        /// `WITH (late_rows = ...)`.
        late_rows: crate::plan::LateRows,
        /// How deep its definition nests (`parse::check_nesting`): a view
        /// inlined into another adds its depth to the other's.
        nesting: usize,
    },
}

#[derive(Clone, Debug)]
pub(crate) struct Object {
    pub(crate) name: String,
    pub(crate) kind: ObjectKind,
    /// Sources and tables: as declared. Views: empty (known once bound).
    pub(crate) columns: Vec<Column>,
    /// The canonical CREATE statement, as stored in the catalog topic.
    pub(crate) definition: String,
}

impl Object {
    pub(crate) fn kind_name(&self) -> &'static str {
        match &self.kind {
            ObjectKind::Source { .. } => "source",
            ObjectKind::Table { .. } => "table",
            ObjectKind::Sink { .. } => "sink",
            ObjectKind::View { materialized: true, .. } => "materialized view",
            ObjectKind::View { materialized: false, .. } => "view",
        }
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Catalog {
    pub(crate) objects: BTreeMap<String, Object>,
}

impl Catalog {
    pub(crate) fn get(&self, name: &str) -> Option<&Object> {
        self.objects.get(name)
    }
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.objects.keys().map(String::as_str)
    }
}

/// The closest of `candidates` to `name`, if close enough to be a likely
/// misspelling (edit distance at most a third of the name, at least 1).
pub(crate) fn suggestion<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

/// Optimal string alignment distance: insertions, deletions, substitutions
/// and swaps of adjacent characters ("itme" is one edit from "item").
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    d[0] = (0..=b.len()).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(suggestion("pric", ["price", "auction"]), Some("price"));
        assert_eq!(suggestion("auctoin", ["price", "auction"]), Some("auction"));
        assert_eq!(suggestion("itme", ["item", "amount"]), Some("item"));
        assert_eq!(suggestion("zzz", ["price", "auction"]), None);
    }
}
