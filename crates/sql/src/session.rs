//! A [`Session`]: statements executed against a data directory's catalog
//! and tables.
//!
//! A batch of statements (a file, or one from the command line) is checked
//! whole against a working copy of the catalog before anything is written:
//! an error anywhere writes nothing. Then catalog changes go to the catalog
//! topic in one append (one batch, so all or nothing), and table changes to
//! their table topics.
//!
//! A batch is atomic across crashes too: its table rows are appended
//! first, then its catalog records in one append, which commits it and
//! records each written table's committed end. Rows past a committed end
//! (a crash, or a failed append, between the two) are taken back before
//! anything reads the table again (`catalog_log`), so a batch is applied
//! whole or not at all.
//!
//! Exactly once for files: `millpond run FILE.sql` executes the file at
//! every start, so DDL is idempotent (the same definition again changes
//! nothing) and each INSERT/UPDATE/DELETE of a file is applied once per data
//! directory. Its catalog marker, committed with the batch, records where
//! in the table its rows went (offset and count): a marker means applied.
//!
//! A marker belongs to its file (its canonical path) and to its table's
//! incarnation: DROP TABLE deletes the table's markers (in the catalog
//! append of its tombstone), so a table created again takes the file's DML
//! again. Markers are typed ([`Marker`], with a version); one that does not
//! read is an error naming it, never taken for a cut one.
//!
//! Modules: `catalog_log` (the catalog topic: loading, markers, applying a
//! batch's effects), `ddl` (CREATE and DROP), `dml` (INSERT, UPDATE, DELETE).
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use millpond_dataflow::{KafkaSink, KafkaTopic, TopicRecord, TopicSpec, Topics};
use serde::{Deserialize, Serialize};
use sqlparser::ast::{self, Spanned};

use crate::bind::{Binder, Scope, ScopeColumn, data_type, normalize};
use crate::catalog::{CATALOG_TOPIC, Catalog, Column, Object, ObjectKind, table_topic};
use crate::decode::decode_row;
use crate::error::{Error, Location, Result};
use crate::eval::{eval, holds};
use crate::parse::{CreateSink, CreateSource, Parsed, Stmt, parse};
use crate::plan::{EventTime, LateRows};
use crate::render::{CompiledCatalog, CompiledSource, CompiledView, UNIT_TOPIC};
use crate::value::{Row, Type, Value};

mod catalog_log;
mod ddl;
mod describe;
mod dml;
mod query;

use catalog_log::*;
use ddl::*;
pub use describe::Description;
use dml::*;
pub use query::Query;

/// What a statement did, as a command tag ("CREATE SOURCE bid", "INSERT 3").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub tag: String,
    /// What the statement did not do as written, though it was accepted
    /// (PostgreSQL's NOTICE): an ORDER BY a view cannot keep; each with
    /// where it is in the executed text.
    pub notices: Vec<(Location, String)>,
}

impl Outcome {
    pub(crate) fn tagged(tag: String) -> Outcome {
        Outcome { tag, notices: Vec::new() }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.tag)
    }
}

/// An open data directory: its topics (the log's lock is held) and catalog.
#[derive(Debug)]
pub struct Session {
    topics: Topics,
    catalog: Catalog,
    /// Catalog markers of file statements already applied, by key.
    markers: BTreeMap<String, Marker>,
    /// The committed end of each table topic (see `catalog_log`).
    committed: BTreeMap<String, u64>,
    /// Rows may be past a committed end: take them back before the next batch.
    uncommitted: bool,
    /// A table topic's compaction bound is below its committed end.
    bounds_behind: bool,
}

/// What a batch of statements has checked so far and will write: the
/// working catalog, the tables as its DML left them, the effects queued,
/// and the tables' predicted end offsets. Applied whole, or not at all.
struct PendingBatch<'v> {
    working: Catalog,
    /// Reads materialized views' committed snapshots (INSERT ... SELECT).
    views: ViewReader<'v>,
    /// The rows of the tables read so far, as the batch's statements left them.
    tables: BTreeMap<String, TableRows>,
    effects: Vec<Effect>,
    /// Predicted end offsets of the tables written by this batch.
    table_ends: BTreeMap<String, u64>,
}

/// Reads the last committed snapshots of the materialized views named
/// (every one of them, or an error that says why not).
pub type ViewReader<'v> =
    &'v dyn Fn(&[&str]) -> std::result::Result<BTreeMap<String, Arc<millpond_dataflow::RawSnapshot>>, String>;

/// The reader of a session with no runtime beside it: no view can be read.
fn no_views(views: &[&str]) -> std::result::Result<BTreeMap<String, Arc<millpond_dataflow::RawSnapshot>>, String> {
    Err(format!(
        "materialized view \"{}\" is read only where its runtime runs (millpond serve, or millpond sql on a \
         data directory)",
        views.first().copied().unwrap_or_default()
    ))
}

fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3))
}

impl Session {
    /// Opens `data_dir` (creating it), holding its log until dropped.
    pub fn open(data_dir: &Path) -> Result<Session> {
        Session::open_on(Topics::open(data_dir)?)
    }

    /// [`open`](Self::open) on a log this process has open already (a
    /// server shares it with its runtime).
    pub fn open_on(topics: Topics) -> Result<Session> {
        topics.ensure(CATALOG_TOPIC, TopicSpec { partitions: 1, compacted: true, compaction_bounded: false })?;
        if topics.ensure(UNIT_TOPIC, TopicSpec { partitions: 1, compacted: false, compaction_bounded: false })?
            || topics.end_offset(UNIT_TOPIC, 0)? == 0
        {
            topics.append(UNIT_TOPIC, vec![TopicRecord { value: Some(b"{}".to_vec()), ..TopicRecord::default() }])?;
        }
        let mut session = Session {
            topics,
            catalog: Catalog::default(),
            markers: BTreeMap::new(),
            committed: BTreeMap::new(),
            uncommitted: false,
            bounds_behind: false,
        };
        session.load()?;
        Ok(session)
    }

    /// Executes the statements of `sql` (`file` names it in errors). With
    /// `once`, each DML statement is applied once per data directory (see
    /// the module docs); without, every time.
    pub fn execute(&mut self, sql: &str, file: Option<&str>, once: bool) -> Result<Vec<Outcome>> {
        self.execute_reading(sql, file, once, &no_views)
    }

    /// [`Session::execute`], where `INSERT ... SELECT` and `CREATE TABLE ...
    /// AS SELECT` read materialized views through `views` (their last
    /// committed snapshots; a server's runtime has them).
    pub fn execute_reading(
        &mut self,
        sql: &str,
        file: Option<&str>,
        once: bool,
        views: ViewReader<'_>,
    ) -> Result<Vec<Outcome>> {
        // A marker belongs to its file: the same statement in another file is another.
        let file_id = file.map_or_else(String::new, |f| {
            std::fs::canonicalize(f).map_or_else(|_| f.to_owned(), |path| path.display().to_string())
        });
        let file: Option<Arc<str>> = file.map(Into::into);
        let statements = parse(sql, file.clone())?;
        if self.uncommitted {
            // A failed batch's rows, which its own take-back could not remove.
            self.take_back_uncommitted()?;
        }
        self.raise_bounds()?;
        let mut batch = PendingBatch {
            working: self.catalog.clone(),
            views,
            tables: BTreeMap::new(),
            effects: Vec::new(),
            table_ends: BTreeMap::new(),
        };
        let mut outcomes = Vec::new();
        let mut occurrences: BTreeMap<u64, usize> = BTreeMap::new();
        for parsed in &statements {
            let marker = if once && is_dml(parsed) {
                let hash = fnv64(parsed.stmt.to_string().as_bytes());
                let n = occurrences.entry(hash).or_insert(0);
                *n += 1;
                let key = format!("{MARKER_PREFIX}v1/{:016x}/{hash:016x}/{n}", fnv64(file_id.as_bytes()));
                Some(MarkerKey { key, file: file_id.clone() })
            } else {
                None
            };
            // Applied, unless a DROP TABLE earlier in the batch deleted it.
            if let Some(marker) = &marker
                && self.markers.contains_key(&marker.key)
                && !batch.effects.iter().any(|e| matches!(e, Effect::CatalogDelete { name } if *name == marker.key))
            {
                outcomes.push(Outcome::tagged(format!("{} (already applied)", statement_tag(parsed))));
                continue;
            }
            let outcome = self.plan(parsed, &mut batch, marker)?;
            outcomes.push(outcome);
        }
        self.apply(batch.effects, &batch.working)?;
        self.catalog = batch.working;
        Ok(outcomes)
    }

    fn plan(&self, parsed: &Parsed, batch: &mut PendingBatch<'_>, marker: Option<MarkerKey>) -> Result<Outcome> {
        let at = &parsed.location;
        match &parsed.stmt {
            Stmt::CreateSource(source) => {
                let object = self.source_object(source, at)?;
                let ObjectKind::Source { topic, upsert_key, kafka_brokers, .. } = &object.kind else {
                    unreachable!("a source")
                };
                let external = kafka_brokers.is_some();
                let spec = TopicSpec { partitions: 1, compacted: upsert_key.is_some(), compaction_bounded: false };
                let topic = topic.clone();
                let name_at = span_location(at, source.name.span);
                let outcome = self.create(
                    &mut batch.working,
                    object,
                    source.or_replace,
                    source.if_not_exists,
                    &name_at,
                    &mut batch.effects,
                )?;
                // An external Kafka topic is the cluster's to create.
                if !external && !self.topics.exists(&topic) {
                    batch.effects.push(Effect::CreateTopic { topic, spec });
                }
                Ok(outcome)
            }
            Stmt::DropSource { name, if_exists, cascade } => {
                let name_at = span_location(at, name.span);
                let name = normalize(name);
                self.drop(batch, &name, "source", *if_exists, *cascade, &name_at)
            }
            Stmt::CreateSink(sink) => {
                let object = Session::sink_object_in(&batch.working, sink, at)?;
                let name_at = span_location(at, sink.name.span);
                self.create(&mut batch.working, object, false, sink.if_not_exists, &name_at, &mut batch.effects)
            }
            Stmt::DropSink { name, if_exists } => {
                let name_at = span_location(at, name.span);
                let name = normalize(name);
                self.drop(batch, &name, "sink", *if_exists, false, &name_at)
            }
            Stmt::Sql(statement) => match statement.as_ref() {
                ast::Statement::CreateTable(create) if create.query.is_some() => {
                    self.create_table_as(create, batch, at)
                }
                ast::Statement::CreateTable(create) => {
                    let object = self.table_object(create, at)?;
                    let topic = table_topic(&object.name);
                    let name_at = name_location(at, &create.name);
                    let fresh = batch.working.get(&object.name).is_none().then(|| object.clone());
                    let outcome = self.create(
                        &mut batch.working,
                        object,
                        create.or_replace,
                        create.if_not_exists,
                        &name_at,
                        &mut batch.effects,
                    )?;
                    if !self.topics.exists(&topic) {
                        batch.effects.push(Effect::CreateTopic { topic, spec: TABLE_TOPIC_SPEC });
                    } else if let Some(object) = fresh {
                        self.clear_leftover_rows(batch, &object)?;
                    }
                    Ok(outcome)
                }
                ast::Statement::CreateView(create) => {
                    if create.or_alter || create.secure || !create.cluster_by.is_empty() {
                        return Err(Error::sql(at.clone(), "not supported: OR ALTER, SECURE and CLUSTER BY"));
                    }
                    let object = view_object(create, at, parsed.nesting)?;
                    // The definition must bind now, against the catalog as it is at this point.
                    let (_, _, _, notices) = bind_view(&batch.working, &object, Some(at))?;
                    let name_at = name_location(at, &create.name);
                    let mut outcome = self.create(
                        &mut batch.working,
                        object,
                        create.or_replace,
                        create.if_not_exists,
                        &name_at,
                        &mut batch.effects,
                    )?;
                    outcome.notices = notices;
                    Ok(outcome)
                }
                ast::Statement::Drop { object_type, if_exists, names, cascade, .. } => {
                    let kind = match object_type {
                        ast::ObjectType::Table => "table",
                        ast::ObjectType::View => "view",
                        ast::ObjectType::MaterializedView => "materialized view",
                        other => return Err(Error::sql(at.clone(), format!("not supported: DROP {other}"))),
                    };
                    let mut outcome = None;
                    for name in names {
                        let Some(ident) = single_name(name) else {
                            return Err(Error::sql(at.clone(), "not supported: qualified names"));
                        };
                        let name_at = span_location(at, ident.span);
                        outcome = Some(self.drop(batch, &normalize(ident), kind, *if_exists, *cascade, &name_at)?);
                    }
                    Ok(outcome.unwrap_or(Outcome::tagged(format!("DROP {}", kind.to_uppercase()))))
                }
                ast::Statement::Insert(insert) => self.insert(insert, batch, marker, at),
                ast::Statement::Update(update) => self.update(update, batch, marker, at),
                ast::Statement::Delete(delete) => self.delete(delete, batch, marker, at),
                ast::Statement::Query(_) => Err(Error::sql(
                    at.clone(),
                    "not supported: a query on its own; define it with CREATE MATERIALIZED VIEW name AS SELECT ... \
                     and read it with `millpond view read name` or `millpond subscribe name`",
                )),
                other => {
                    let head: String = other.to_string().split_whitespace().take(2).collect::<Vec<_>>().join(" ");
                    Err(Error::sql(at.clone(), format!("not supported: the statement {head} ...")))
                }
            },
        }
    }

    /// Every materialized view of the catalog, bound and ready to run, and
    /// the sources and tables whose dead letters the job keeps.
    pub fn compile(&self) -> Result<CompiledCatalog> {
        let mut views = Vec::new();
        let mut sources = Vec::new();
        let mut sinks = Vec::new();
        for object in self.catalog.objects.values() {
            match &object.kind {
                ObjectKind::Source { topic, .. } | ObjectKind::Table { topic, .. } => {
                    let verdict = format!(
                        "sql-{}:{:016x}",
                        crate::render::STATE_LAYOUT_VERSION,
                        fnv64(object.definition.as_bytes())
                    );
                    let kafka = match &object.kind {
                        ObjectKind::Source { kafka_brokers: Some(brokers), topic, .. } => Some(KafkaTopic {
                            brokers: brokers.clone(),
                            topic: topic
                                .strip_prefix(millpond_dataflow::kafka_source::LABEL_PREFIX)
                                .unwrap_or(topic)
                                .to_owned(),
                            properties: Vec::new(),
                        }),
                        _ => None,
                    };
                    sources.push(CompiledSource { name: object.name.clone(), topic: topic.clone(), verdict, kafka });
                }
                ObjectKind::Sink { view, brokers, topic, envelope } => sinks.push(KafkaSink {
                    name: object.name.clone(),
                    view: view.clone(),
                    brokers: brokers.clone(),
                    topic: topic.clone(),
                    progress_topic: millpond_dataflow::kafka_sink::PROGRESS_TOPIC_DEFAULT.to_owned(),
                    properties: Vec::new(),
                    envelope: match envelope {
                        None => millpond_dataflow::Envelope::Changes,
                        Some((kind, key)) if kind == "UPSERT" => {
                            millpond_dataflow::Envelope::Upsert { key: key.clone() }
                        }
                        Some((_, key)) => millpond_dataflow::Envelope::Debezium { key: key.clone() },
                    },
                }),
                _ => {}
            }
            if let ObjectKind::View { materialized: true, late_rows, .. } = object.kind {
                let (rel, columns, dependencies, _) = bind_view(&self.catalog, object, None)?;
                // The view's plan depends on its definition and on those of the
                // objects it reads (a replaced view, table or source changes it):
                // a new fingerprint, so its operators start over.
                let mut definitions = object.definition.clone();
                for dependency in &dependencies {
                    let definition = self.catalog.get(dependency).map_or("", |o| o.definition.as_str());
                    definitions.push_str(&format!("\0{dependency}\0{definition}"));
                }
                views.push(CompiledView {
                    name: object.name.clone(),
                    columns,
                    rel,
                    fingerprint: fnv64(definitions.as_bytes()),
                    late_rows,
                });
            }
        }
        Ok(CompiledCatalog { views, sources, sinks })
    }

    /// The names and kinds of the catalog's objects.
    pub fn objects(&self) -> Vec<(String, &'static str)> {
        self.catalog.objects.values().map(|o| (o.name.clone(), o.kind_name())).collect()
    }

    /// The topics materialized view `name` has readers of once rendered (the
    /// tables and local sources its plan reads, through the views it
    /// inlines); None when `name` is
    /// not a materialized view or no longer binds. Read-your-writes waits
    /// for a view's readers of exactly these (`millpond_server`'s
    /// `Engine::covers`).
    pub fn topics_read(&self, name: &str) -> Option<std::collections::BTreeSet<String>> {
        let object = self.catalog.get(name)?;
        if !matches!(object.kind, ObjectKind::View { materialized: true, .. }) {
            return None;
        }
        let (rel, columns, _, _) = bind_view(&self.catalog, object, None).ok()?;
        let objects = crate::render::objects_read(&rel, columns.len());
        let topics = objects.filter_map(|read| match &self.catalog.get(&read)?.kind {
            // An external Kafka source's records are not written here.
            ObjectKind::Source { topic, kafka_brokers: None, .. } | ObjectKind::Table { topic, .. } => {
                Some(topic.clone())
            }
            _ => None,
        });
        Some(topics.collect())
    }

    /// The kind of object `name` and the statement that defines it, as the
    /// catalog keeps it (canonical text).
    pub fn definition(&self, name: &str) -> Option<(&'static str, String)> {
        self.catalog.get(name).map(|o| (o.kind_name(), o.definition.clone()))
    }
}

fn is_dml(parsed: &Parsed) -> bool {
    matches!(
        &parsed.stmt,
        Stmt::Sql(s) if matches!(s.as_ref(), ast::Statement::Insert(_) | ast::Statement::Update(_) | ast::Statement::Delete(_))
    )
}

fn statement_tag(parsed: &Parsed) -> String {
    parsed.stmt.to_string().split_whitespace().next().unwrap_or_default().to_uppercase()
}

fn single_name(name: &ast::ObjectName) -> Option<&ast::Ident> {
    match name.0.as_slice() {
        [ast::ObjectNamePart::Identifier(ident)] => Some(ident),
        _ => None,
    }
}

fn span_location(at: &Location, span: sqlparser::tokenizer::Span) -> Location {
    if span.start.line == 0 {
        at.clone()
    } else {
        Location { file: at.file.clone(), line: span.start.line, column: span.start.column }
    }
}

/// Where an object's name is written (the statement's start when it has no span).
fn name_location(at: &Location, name: &ast::ObjectName) -> Location {
    single_name(name).map_or_else(|| at.clone(), |ident| span_location(at, ident.span))
}

fn key_indexes(idents: &[ast::Ident], columns: &[Column], at: &Location) -> Result<Vec<usize>> {
    idents
        .iter()
        .map(|ident| {
            let name = normalize(ident);
            columns.iter().position(|c| c.name == name).ok_or_else(|| {
                let hint = crate::catalog::suggestion(&name, columns.iter().map(|c| c.name.as_str()))
                    .map(|s| format!("; did you mean \"{s}\"?"))
                    .unwrap_or_default();
                Error::sql(span_location(at, ident.span), format!("unknown column \"{name}\"{hint}"))
            })
        })
        .collect()
}
