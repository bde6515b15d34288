//! A [`Session`]: statements executed against a data directory's catalog
//! and tables.
//!
//! A batch of statements (a file, or one from the command line) is checked
//! whole against a working copy of the catalog before anything is written:
//! an error anywhere writes nothing. Then catalog changes go to the catalog
//! topic in one append (one batch, so all or nothing), and table changes to
//! their table topics.
//!
//! Exactly once for files: `millpond run FILE.sql` executes the file at
//! every start, so DDL is idempotent (the same definition again changes
//! nothing) and each INSERT/UPDATE/DELETE of a file is applied once per data
//! directory. Its catalog marker, written with the batch's DDL before the
//! rows, records where in the table its rows go (offset and count). A crash
//! between the two appends leaves a marker whose rows are not in the table:
//! the next session to open the data directory — before anything else can
//! write the table — finds it so and deletes the marker, and the statement
//! is applied at the next run of the file. A marker that stays means applied.
//!
//! A marker belongs to its file (its canonical path) and to its table's
//! incarnation: DROP TABLE deletes the table's markers (in the catalog
//! append of its tombstone), so a table created again takes the file's DML
//! again. Markers are typed ([`Marker`], with a version); one that does not
//! read is an error naming it, never taken for a cut one.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use millpond_dataflow::{TopicRecord, TopicSpec, Topics};
use serde::{Deserialize, Serialize};
use sqlparser::ast::{self, Spanned};

use crate::bind::{Binder, Scope, ScopeColumn, data_type, normalize};
use crate::catalog::{CATALOG_TOPIC, Catalog, Column, Object, ObjectKind, table_topic};
use crate::decode::decode_row;
use crate::error::{Error, Location, Result};
use crate::eval::{eval, holds};
use crate::parse::{CreateSource, Parsed, Stmt, parse};
use crate::render::{CompiledView, UNIT_TOPIC};
use crate::value::{Row, Type, Value, cast};

/// Rows per INSERT statement, and changed rows per UPDATE/DELETE.
const STATEMENT_ROWS_MAX: usize = 1_000_000;

/// What a statement did, as a command tag ("CREATE SOURCE bid", "INSERT 3").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub tag: String,
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
}

/// Catalog keys of DML markers start so; then `v1/FILE/STATEMENT/N`.
const MARKER_PREFIX: &str = "applied/";
/// The marker format written (docs/sql.md, "DML of a file runs once").
const MARKER_VERSION: u32 = 1;

/// A file statement's DML marker, the value of catalog key
/// `applied/v1/FILE/STATEMENT/N` (FNV-1a of the file's canonical path and
/// of the statement's canonical text, in hex; N its occurrence in the file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Marker {
    version: u32,
    /// The file, as the key's hash was taken of it.
    file: String,
    /// The table written: its markers go when it is dropped.
    table: String,
    /// Where the statement's rows go: `records` records from `offset` of `topic`.
    topic: String,
    offset: u64,
    records: u64,
}

/// The marker a file statement gets: its key, and its file.
#[derive(Clone, Debug)]
struct MarkerKey {
    key: String,
    file: String,
}

impl Marker {
    /// Reads a marker back: a malformed one, or one of another version, is an
    /// error that names it (and its offset).
    fn read(key: &str, offset: u64, value: &[u8]) -> Result<Marker> {
        let refuse = |message: String| Error::Catalog { offset, message: format!("DML marker \"{key}\": {message}") };
        let Some(rest) = key.strip_prefix(MARKER_PREFIX).and_then(|k| k.strip_prefix("v1/")) else {
            return Err(refuse(
                "not a version 1 key (markers before version 1, `applied/HASH/N`, were never released; delete the \
                 data directory's catalog to start over)"
                    .into(),
            ));
        };
        if rest.split('/').count() != 3 {
            return Err(refuse("a version 1 key is applied/v1/FILE/STATEMENT/N".into()));
        }
        let json: serde_json::Value = serde_json::from_slice(value).map_err(|e| refuse(format!("not JSON: {e}")))?;
        match json.get("version").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(MARKER_VERSION) => {}
            Some(v) => return Err(refuse(format!("version {v}, this build reads version {MARKER_VERSION}"))),
            None => return Err(refuse("no version".into())),
        }
        serde_json::from_value(json).map_err(|e| refuse(format!("malformed: {e}")))
    }
}

/// A change a checked statement will make.
enum Effect {
    CatalogPut { name: String, definition: String },
    CatalogDelete { name: String },
    MarkerPut { key: String, marker: Marker },
    CreateTopic { topic: String, spec: TopicSpec },
    TableWrite { topic: String, records: Vec<TopicRecord> },
}

/// What a batch of statements has checked so far and will write: the
/// working catalog, the tables as its DML left them, the effects queued,
/// and the tables' predicted end offsets. Applied whole, or not at all.
struct PendingBatch {
    working: Catalog,
    /// The rows of the tables read so far, as the batch's statements left them.
    tables: BTreeMap<String, TableRows>,
    effects: Vec<Effect>,
    /// Predicted end offsets of the tables written by this batch.
    table_ends: BTreeMap<String, u64>,
}

/// The rows of a table as DML sees them: key bytes → row.
type TableRows = BTreeMap<Vec<u8>, Row>;
/// A table row with its key.
type KeyedRow = (Vec<u8>, Row);

fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// Object names become topic names and JSON: keep them plain.
fn check_name(name: &str, location: &Location) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.starts_with("__");
    if ok {
        Ok(())
    } else {
        Err(Error::sql(
            location.clone(),
            format!(
                "invalid name \"{name}\": use up to 100 lowercase letters, digits and '_' (not starting with '__')"
            ),
        ))
    }
}

fn row_json(columns: &[Column], row: &[Value]) -> Vec<u8> {
    let object: serde_json::Map<String, serde_json::Value> =
        columns.iter().zip(row).map(|(c, v)| (c.name.clone(), v.to_json())).collect();
    serde_json::to_vec(&object).expect("JSON values serialize")
}

impl Session {
    /// Opens `data_dir` (creating it), holding its log until dropped.
    pub fn open(data_dir: &Path) -> Result<Session> {
        let topics = Topics::open(data_dir)?;
        topics.ensure(CATALOG_TOPIC, TopicSpec { partitions: 1, compacted: true })?;
        if topics.ensure(UNIT_TOPIC, TopicSpec { partitions: 1, compacted: false })?
            || topics.end_offset(UNIT_TOPIC, 0)? == 0
        {
            topics.append(UNIT_TOPIC, vec![TopicRecord { value: Some(b"{}".to_vec()), ..TopicRecord::default() }])?;
        }
        let mut session = Session { topics, catalog: Catalog::default(), markers: BTreeMap::new() };
        session.load()?;
        Ok(session)
    }

    fn load(&mut self) -> Result<()> {
        let mut latest: BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)> = BTreeMap::new();
        for record in self.topics.read_all(CATALOG_TOPIC)? {
            let Some(key) = record.key else {
                return Err(Error::Catalog { offset: record.offset, message: "a record without a key".into() });
            };
            latest.insert(key, (record.offset, record.value));
        }
        for (key, (offset, value)) in latest {
            let Some(value) = value else { continue };
            let key = String::from_utf8(key)
                .map_err(|_| Error::Catalog { offset, message: "a key that is not UTF-8".into() })?;
            if key.starts_with(MARKER_PREFIX) {
                let marker = Marker::read(&key, offset, &value)?;
                self.markers.insert(key, marker);
                continue;
            }
            let text = String::from_utf8(value)
                .map_err(|_| Error::Catalog { offset, message: "a definition that is not UTF-8".into() })?;
            let statements = parse(&text, None).map_err(|e| Error::Catalog { offset, message: e.to_string() })?;
            let [statement] = statements.as_slice() else {
                return Err(Error::Catalog { offset, message: "not exactly one statement".into() });
            };
            let object =
                self.object_of(statement).map_err(|e| Error::Catalog { offset, message: format!("{key}: {e}") })?;
            self.catalog.objects.insert(object.name.clone(), object);
        }
        self.drop_cut_markers()
    }

    /// Deletes the markers whose rows a crash kept out of their table (see
    /// the module docs): its end is short of them, or it is gone.
    fn drop_cut_markers(&mut self) -> Result<()> {
        let mut cut = Vec::new();
        for (key, marker) in &self.markers {
            let end = if self.topics.exists(&marker.topic) { self.topics.end_offset(&marker.topic, 0)? } else { 0 };
            if marker.records > 0 && end < marker.offset.saturating_add(marker.records) {
                cut.push(key.clone());
            }
        }
        let tombstones =
            cut.iter().map(|key| TopicRecord { key: Some(key.clone().into_bytes()), value: None, headers: vec![] });
        self.topics.append(CATALOG_TOPIC, tombstones.collect())?;
        for key in cut {
            self.markers.remove(&key);
        }
        Ok(())
    }

    /// The catalog object a CREATE statement defines (unchecked against others).
    fn object_of(&self, parsed: &Parsed) -> Result<Object> {
        let at = &parsed.location;
        match &parsed.stmt {
            Stmt::CreateSource(source) => self.source_object(source, at),
            Stmt::Sql(statement) => match statement.as_ref() {
                ast::Statement::CreateTable(create) => self.table_object(create, at),
                ast::Statement::CreateView(create) => view_object(create, at, parsed.nesting),
                _ => Err(Error::sql(at.clone(), "not a CREATE statement")),
            },
            Stmt::DropSource { .. } => Err(Error::sql(at.clone(), "not a CREATE statement")),
        }
    }

    fn columns(&self, defs: &[ast::ColumnDef], at: &Location) -> Result<Vec<Column>> {
        let mut columns: Vec<Column> = Vec::new();
        for def in defs {
            let name = normalize(&def.name);
            let location = span_location(at, def.name.span);
            let Some(ty) = data_type(&def.data_type) else {
                return Err(Error::sql(
                    location,
                    format!("not supported: the type {} (column \"{name}\")", def.data_type),
                ));
            };
            if columns.iter().any(|c| c.name == name) {
                return Err(Error::sql(location, format!("column \"{name}\" is declared twice")));
            }
            for option in &def.options {
                match &option.option {
                    ast::ColumnOption::Null | ast::ColumnOption::NotNull | ast::ColumnOption::PrimaryKey(_) => {}
                    other => {
                        return Err(Error::sql(location, format!("not supported: the column option {other}")));
                    }
                }
            }
            columns.push(Column { name, ty });
        }
        Ok(columns)
    }

    fn source_object(&self, source: &CreateSource, at: &Location) -> Result<Object> {
        let name = normalize(&source.name);
        check_name(&name, &span_location(at, source.name.span))?;
        let columns = self.columns(&source.columns, at)?;
        let upsert_key = match &source.upsert_key {
            None => None,
            Some(key) => Some(key_indexes(key, &columns, at)?),
        };
        if source.topic.is_empty()
            || source.topic.len() > 200
            || !source.topic.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return Err(Error::sql(
                source.topic_location.clone(),
                format!("invalid topic name '{}': use ASCII letters, digits, '.', '_' and '-'", source.topic),
            ));
        }
        let canonical = CreateSource { or_replace: false, if_not_exists: false, ..source.clone() };
        Ok(Object {
            name,
            kind: ObjectKind::Source { topic: source.topic.clone(), upsert_key },
            columns,
            definition: canonical.to_string(),
        })
    }

    fn table_object(&self, create: &ast::CreateTable, at: &Location) -> Result<Object> {
        let Some(ident) = single_name(&create.name) else {
            return Err(Error::sql(at.clone(), "not supported: qualified table names"));
        };
        let name = normalize(ident);
        check_name(&name, &span_location(at, ident.span))?;
        if create.query.is_some()
            || create.like.is_some()
            || create.clone.is_some()
            || create.temporary
            || create.external
        {
            return Err(Error::sql(
                at.clone(),
                "not supported: CREATE TABLE AS/LIKE/CLONE, TEMPORARY and EXTERNAL tables",
            ));
        }
        let columns = self.columns(&create.columns, at)?;
        let mut primary_key: Option<Vec<usize>> = None;
        for def in &create.columns {
            if def.options.iter().any(|o| matches!(o.option, ast::ColumnOption::PrimaryKey(_))) {
                let index = columns.iter().position(|c| c.name == normalize(&def.name)).expect("declared");
                primary_key.get_or_insert_with(Vec::new).push(index);
            }
        }
        for constraint in &create.constraints {
            match constraint {
                ast::TableConstraint::PrimaryKey(pk) if primary_key.is_none() => {
                    let mut key = Vec::new();
                    for column in &pk.columns {
                        let ast::Expr::Identifier(ident) = &column.column.expr else {
                            return Err(Error::sql(at.clone(), "PRIMARY KEY lists column names"));
                        };
                        key.extend(key_indexes(std::slice::from_ref(ident), &columns, at)?);
                    }
                    primary_key = Some(key);
                }
                ast::TableConstraint::PrimaryKey(_) => {
                    return Err(Error::sql(at.clone(), "a table has at most one PRIMARY KEY"));
                }
                other => return Err(Error::sql(at.clone(), format!("not supported: the constraint {other}"))),
            }
        }
        let mut canonical = create.clone();
        canonical.or_replace = false;
        canonical.if_not_exists = false;
        Ok(Object {
            name: name.clone(),
            kind: ObjectKind::Table { topic: table_topic(&name), primary_key },
            columns,
            definition: ast::Statement::CreateTable(canonical).to_string(),
        })
    }

    /// Executes the statements of `sql` (`file` names it in errors). With
    /// `once`, each DML statement is applied once per data directory (see
    /// the module docs); without, every time.
    pub fn execute(&mut self, sql: &str, file: Option<&str>, once: bool) -> Result<Vec<Outcome>> {
        // A marker belongs to its file: the same statement in another file is another.
        let file_id = file.map_or_else(String::new, |f| {
            std::fs::canonicalize(f).map_or_else(|_| f.to_owned(), |path| path.display().to_string())
        });
        let file: Option<Arc<str>> = file.map(Into::into);
        let statements = parse(sql, file.clone())?;
        let mut batch = PendingBatch {
            working: self.catalog.clone(),
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
                outcomes.push(Outcome { tag: format!("{} (already applied)", statement_tag(parsed)) });
                continue;
            }
            let outcome = self.plan(parsed, &mut batch, marker)?;
            outcomes.push(outcome);
        }
        self.apply(batch.effects)?;
        self.catalog = batch.working;
        Ok(outcomes)
    }

    fn plan(&self, parsed: &Parsed, batch: &mut PendingBatch, marker: Option<MarkerKey>) -> Result<Outcome> {
        let at = &parsed.location;
        match &parsed.stmt {
            Stmt::CreateSource(source) => {
                let object = self.source_object(source, at)?;
                let ObjectKind::Source { topic, upsert_key } = &object.kind else { unreachable!("a source") };
                let spec = TopicSpec { partitions: 1, compacted: upsert_key.is_some() };
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
                if !self.topics.exists(&topic) {
                    batch.effects.push(Effect::CreateTopic { topic, spec });
                }
                Ok(outcome)
            }
            Stmt::DropSource { name, if_exists, cascade } => {
                let name_at = span_location(at, name.span);
                let name = normalize(name);
                self.drop(batch, &name, "source", *if_exists, *cascade, &name_at)
            }
            Stmt::Sql(statement) => match statement.as_ref() {
                ast::Statement::CreateTable(create) => {
                    let object = self.table_object(create, at)?;
                    let topic = table_topic(&object.name);
                    let name_at = name_location(at, &create.name);
                    let outcome = self.create(
                        &mut batch.working,
                        object,
                        create.or_replace,
                        create.if_not_exists,
                        &name_at,
                        &mut batch.effects,
                    )?;
                    if !self.topics.exists(&topic) {
                        batch
                            .effects
                            .push(Effect::CreateTopic { topic, spec: TopicSpec { partitions: 1, compacted: true } });
                    }
                    Ok(outcome)
                }
                ast::Statement::CreateView(create) => {
                    if create.or_alter || create.secure || !create.cluster_by.is_empty() {
                        return Err(Error::sql(at.clone(), "not supported: OR ALTER, SECURE and CLUSTER BY"));
                    }
                    let object = view_object(create, at, parsed.nesting)?;
                    // The definition must bind now, against the catalog as it is at this point.
                    bind_view(&batch.working, &object, Some(at))?;
                    let name_at = name_location(at, &create.name);
                    self.create(
                        &mut batch.working,
                        object,
                        create.or_replace,
                        create.if_not_exists,
                        &name_at,
                        &mut batch.effects,
                    )
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
                    Ok(outcome.unwrap_or(Outcome { tag: format!("DROP {}", kind.to_uppercase()) }))
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

    fn create(
        &self,
        working: &mut Catalog,
        object: Object,
        or_replace: bool,
        if_not_exists: bool,
        at: &Location,
        effects: &mut Vec<Effect>,
    ) -> Result<Outcome> {
        let tag = format!("CREATE {} {}", object.kind_name().to_uppercase(), object.name);
        if let Some(existing) = working.get(&object.name) {
            if existing.definition == object.definition || if_not_exists {
                return Ok(Outcome { tag: format!("{tag} (unchanged)") });
            }
            if !or_replace {
                return Err(Error::sql(
                    at.clone(),
                    format!(
                        "{} \"{}\" already exists with another definition; use CREATE OR REPLACE, or DROP it first",
                        existing.kind_name(),
                        object.name
                    ),
                ));
            }
            if existing.kind_name() != object.kind_name() {
                return Err(Error::sql(
                    at.clone(),
                    format!("\"{}\" is a {}, not a {}", object.name, existing.kind_name(), object.kind_name()),
                ));
            }
        }
        let replaced = working.objects.insert(object.name.clone(), object.clone()).is_some();
        // Every view must still bind against the changed catalog.
        for view in working.objects.values().filter(|o| matches!(o.kind, ObjectKind::View { .. })) {
            if let Err(e) = bind_view(working, view, None) {
                // The view's own position would be in its stored definition, which the user does not see.
                let reason = match e {
                    Error::Sql { message, .. } => message,
                    other => other.to_string(),
                };
                return Err(Error::sql(at.clone(), format!("this change breaks view \"{}\": {reason}", view.name)));
            }
        }
        effects.push(Effect::CatalogPut { name: object.name.clone(), definition: object.definition.clone() });
        Ok(Outcome { tag: if replaced { format!("{tag} (replaced)") } else { tag } })
    }

    fn drop(
        &self,
        batch: &mut PendingBatch,
        name: &str,
        kind: &str,
        if_exists: bool,
        cascade: bool,
        at: &Location,
    ) -> Result<Outcome> {
        let PendingBatch { working, tables, effects, table_ends } = batch;
        let tag = format!("DROP {} {name}", kind.to_uppercase());
        let Some(object) = working.get(name) else {
            if if_exists {
                return Ok(Outcome { tag: format!("{tag} (did not exist)") });
            }
            return Err(Error::sql(at.clone(), format!("there is no {kind} \"{name}\"")));
        };
        if object.kind_name() != kind {
            return Err(Error::sql(at.clone(), format!("\"{name}\" is a {}, not a {kind}", object.kind_name())));
        }
        let mut doomed: BTreeSet<String> = BTreeSet::from([name.to_owned()]);
        // Dependents, transitively: views whose definition reads a doomed object.
        loop {
            let mut more = Vec::new();
            for view in working.objects.values().filter(|o| matches!(o.kind, ObjectKind::View { .. })) {
                if doomed.contains(&view.name) {
                    continue;
                }
                let mut binder = Binder::new(working, None, Location::default());
                let ObjectKind::View { query, .. } = &view.kind else { unreachable!("a view") };
                if binder.bind_view_query(query).is_ok() && binder.dependencies.iter().any(|d| doomed.contains(d)) {
                    more.push(view.name.clone());
                }
            }
            if more.is_empty() {
                break;
            }
            if !cascade {
                return Err(Error::sql(
                    at.clone(),
                    format!(
                        "cannot drop \"{name}\": view \"{}\" depends on it (drop that first, or use CASCADE)",
                        more[0]
                    ),
                ));
            }
            doomed.extend(more);
        }
        for gone in &doomed {
            let object = working.objects.remove(gone).expect("doomed objects exist");
            effects.push(Effect::CatalogDelete { name: gone.clone() });
            if let ObjectKind::Table { .. } = &object.kind {
                // Its markers go with it: a table created again takes the files' DML again.
                let mut markers: Vec<String> =
                    self.markers.iter().filter(|(_, m)| m.table == *gone).map(|(k, _)| k.clone()).collect();
                markers.extend(effects.iter().filter_map(|e| match e {
                    Effect::MarkerPut { key, marker } if marker.table == *gone => Some(key.clone()),
                    _ => None,
                }));
                for key in markers {
                    effects.push(Effect::CatalogDelete { name: key });
                }
                // Its rows are deleted and its topic kept: a table created again
                // under the name continues its offsets, so the readers of views
                // over it (created again too, they may resume) see the rows go.
                let keys: Vec<Vec<u8>> = self.table_rows(tables, &object)?.keys().cloned().collect();
                // Empty from here on: a table created again in this batch starts without
                // the rows (their tombstones are not written yet).
                tables.insert(gone.clone(), TableRows::new());
                let records = keys.into_iter().map(|key| TopicRecord { key: Some(key), value: None, headers: vec![] });
                self.write_table(&object, records.collect(), None, effects, table_ends)?;
            }
        }
        Ok(Outcome { tag: if doomed.len() > 1 { format!("{tag} (and {} dependents)", doomed.len() - 1) } else { tag } })
    }

    /// The current rows of a table: the latest record per key of its topic.
    fn table_rows<'t>(
        &self,
        tables: &'t mut BTreeMap<String, TableRows>,
        object: &Object,
    ) -> Result<&'t mut TableRows> {
        if !tables.contains_key(&object.name) {
            let ObjectKind::Table { topic, .. } = &object.kind else { unreachable!("a table") };
            let columns: Vec<(String, Type)> = object.columns.iter().map(|c| (c.name.clone(), c.ty)).collect();
            let wanted = vec![true; columns.len()];
            let mut rows = TableRows::new();
            if self.topics.exists(topic) {
                for record in self.topics.read_all(topic)? {
                    let Some(key) = record.key else { continue };
                    match record.value {
                        Some(value) => {
                            let row = decode_row(&value, &columns, &wanted).map_err(|e| Error::Catalog {
                                offset: record.offset,
                                message: format!("table \"{}\" holds a bad row: {e}", object.name),
                            })?;
                            rows.insert(key, row);
                        }
                        None => {
                            rows.remove(&key);
                        }
                    }
                }
            }
            tables.insert(object.name.clone(), rows);
        }
        Ok(tables.get_mut(&object.name).expect("inserted above"))
    }

    fn target_table<'c>(&self, working: &'c Catalog, name: &ast::ObjectName, at: &Location) -> Result<&'c Object> {
        let Some(ident) = single_name(name) else {
            return Err(Error::sql(at.clone(), "not supported: qualified names"));
        };
        let table = normalize(ident);
        let location = span_location(at, ident.span);
        match working.get(&table) {
            Some(object @ Object { kind: ObjectKind::Table { .. }, .. }) => Ok(object),
            Some(object) => Err(Error::sql(
                location,
                format!(
                    "\"{table}\" is a {}; only tables take INSERT, UPDATE and DELETE (a source's rows come from its topic)",
                    object.kind_name()
                ),
            )),
            None => {
                let tables = working.objects.values().filter(|o| matches!(o.kind, ObjectKind::Table { .. }));
                let hint = crate::catalog::suggestion(&table, tables.map(|o| o.name.as_str()))
                    .map(|s| format!("; did you mean \"{s}\"?"))
                    .unwrap_or_default();
                Err(Error::sql(location, format!("unknown table \"{table}\"{hint}")))
            }
        }
    }

    /// Checks a row against the table's constraints and builds its key.
    fn row_key(object: &Object, row: &[Value], rowid: u64, at: &Location) -> Result<Vec<u8>> {
        let ObjectKind::Table { primary_key, .. } = &object.kind else { unreachable!("a table") };
        match primary_key {
            Some(key) => {
                let values: Vec<serde_json::Value> = key.iter().map(|i| row[*i].to_json()).collect();
                if let Some(i) = key.iter().find(|i| row[**i].is_null()) {
                    return Err(Error::sql(
                        at.clone(),
                        format!("NULL in primary key column \"{}\" of \"{}\"", object.columns[*i].name, object.name),
                    ));
                }
                Ok(serde_json::to_vec(&values).expect("JSON values serialize"))
            }
            None => Ok(format!("{{\"rowid\":{rowid}}}").into_bytes()),
        }
    }

    fn next_rowid(&self, object: &Object, table_ends: &mut BTreeMap<String, u64>) -> Result<u64> {
        let ObjectKind::Table { topic, .. } = &object.kind else { unreachable!("a table") };
        match table_ends.get(topic) {
            Some(end) => Ok(*end),
            None if self.topics.exists(topic) => Ok(self.topics.end_offset(topic, 0)?),
            None => Ok(0),
        }
    }

    /// Queues a table write, recording where it will start for its marker.
    fn write_table(
        &self,
        object: &Object,
        records: Vec<TopicRecord>,
        marker: Option<MarkerKey>,
        effects: &mut Vec<Effect>,
        table_ends: &mut BTreeMap<String, u64>,
    ) -> Result<()> {
        let ObjectKind::Table { topic, .. } = &object.kind else { unreachable!("a table") };
        let start = self.next_rowid(object, table_ends)?;
        table_ends.insert(topic.clone(), start + records.len() as u64);
        if let Some(MarkerKey { key, file }) = marker {
            let marker = Marker {
                version: MARKER_VERSION,
                file,
                table: object.name.clone(),
                topic: topic.clone(),
                offset: start,
                records: records.len() as u64,
            };
            effects.push(Effect::MarkerPut { key, marker });
        }
        effects.push(Effect::TableWrite { topic: topic.clone(), records });
        Ok(())
    }

    fn insert(
        &self,
        insert: &ast::Insert,
        batch: &mut PendingBatch,
        marker: Option<MarkerKey>,
        at: &Location,
    ) -> Result<Outcome> {
        let PendingBatch { working, tables, effects, table_ends } = batch;
        let ast::TableObject::TableName(name) = &insert.table else {
            return Err(Error::sql(at.clone(), "not supported: INSERT INTO a table function"));
        };
        if insert.on.is_some() || insert.returning.is_some() || insert.or.is_some() || insert.overwrite {
            return Err(Error::sql(at.clone(), "not supported: ON CONFLICT, RETURNING, OR ... and OVERWRITE"));
        }
        let object = self.target_table(working, name, at)?.clone();
        let targets: Vec<usize> = if insert.columns.is_empty() {
            (0..object.columns.len()).collect()
        } else {
            let mut targets = Vec::new();
            for column in &insert.columns {
                let Some(ident) = single_name(column) else {
                    return Err(Error::sql(at.clone(), "INSERT lists column names"));
                };
                targets.extend(key_indexes(std::slice::from_ref(ident), &object.columns, at)?);
            }
            targets
        };
        let Some(source) = &insert.source else {
            return Err(Error::sql(at.clone(), "INSERT needs VALUES"));
        };
        let ast::SetExpr::Values(values) = source.body.as_ref() else {
            return Err(Error::sql(
                span_location(at, source.span()),
                "not supported: INSERT ... SELECT (a table takes rows from VALUES; define a view for derived rows)",
            ));
        };
        if values.rows.len() > STATEMENT_ROWS_MAX {
            return Err(Error::sql(at.clone(), format!("more than {STATEMENT_ROWS_MAX} rows in one INSERT")));
        }
        let first_rowid = self.next_rowid(&object, table_ends)?;
        let rows_now = self.table_rows(tables, &object)?;
        let mut records = Vec::new();
        for (rowid, row_exprs) in (first_rowid..).zip(&values.rows) {
            let row_location = span_location(at, row_exprs.span());
            if row_exprs.content.len() != targets.len() {
                return Err(Error::sql(
                    row_location,
                    format!("INSERT has {} columns but a row has {} values", targets.len(), row_exprs.content.len()),
                ));
            }
            let mut row = vec![Value::Null; object.columns.len()];
            for (expr, target) in row_exprs.content.iter().zip(&targets) {
                row[*target] = constant(working, expr, &object.columns[*target], at)?;
            }
            let key = Self::row_key(&object, &row, rowid, &row_location)?;
            if rows_now.contains_key(&key) {
                return Err(Error::sql(
                    row_location,
                    format!("duplicate primary key {} in \"{}\"", String::from_utf8_lossy(&key), object.name),
                ));
            }
            rows_now.insert(key.clone(), row.clone());
            records.push(TopicRecord { key: Some(key), value: Some(row_json(&object.columns, &row)), headers: vec![] });
        }
        let count = records.len();
        self.write_table(&object, records, marker, effects, table_ends)?;
        Ok(Outcome { tag: format!("INSERT {count}") })
    }

    /// The table's scope and the rows matching `selection`.
    fn matching(
        &self,
        working: &Catalog,
        object: &Object,
        rows: &TableRows,
        selection: Option<&ast::Expr>,
        at: &Location,
    ) -> Result<(Scope, Vec<KeyedRow>)> {
        let scope = table_scope(object);
        let predicate = match selection {
            None => None,
            Some(e) => Some(bind_scalar(working, e, &scope, at)?),
        };
        let matching: Vec<KeyedRow> = rows
            .iter()
            .filter(|(_, row)| predicate.as_ref().is_none_or(|p| holds(p, row)))
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect();
        if matching.len() > STATEMENT_ROWS_MAX {
            return Err(Error::sql(at.clone(), format!("the statement changes more than {STATEMENT_ROWS_MAX} rows")));
        }
        Ok((scope, matching))
    }

    fn update(
        &self,
        update: &ast::Update,
        batch: &mut PendingBatch,
        marker: Option<MarkerKey>,
        at: &Location,
    ) -> Result<Outcome> {
        let PendingBatch { working, tables, effects, table_ends } = batch;
        if update.from.is_some()
            || !update.table.joins.is_empty()
            || update.returning.is_some()
            || update.limit.is_some()
        {
            return Err(Error::sql(at.clone(), "not supported: UPDATE with FROM, joins, RETURNING or LIMIT"));
        }
        let ast::TableFactor::Table { name, .. } = &update.table.relation else {
            return Err(Error::sql(at.clone(), "UPDATE takes a table name"));
        };
        let object = self.target_table(working, name, at)?.clone();
        let rows_now = self.table_rows(tables, &object)?.clone();
        let (scope, matching) = self.matching(working, &object, &rows_now, update.selection.as_ref(), at)?;
        let mut assignments = Vec::new();
        for assignment in &update.assignments {
            let ast::AssignmentTarget::ColumnName(column) = &assignment.target else {
                return Err(Error::sql(at.clone(), "not supported: assigning a tuple of columns"));
            };
            let Some(ident) = single_name(column) else {
                return Err(Error::sql(at.clone(), "UPDATE sets column names"));
            };
            let index = key_indexes(std::slice::from_ref(ident), &object.columns, at)?[0];
            let expr = bind_scalar(working, &assignment.value, &scope, at)?;
            assignments.push((index, expr, span_location(at, assignment.value.span())));
        }
        let rows = self.table_rows(tables, &object)?;
        let mut records = Vec::new();
        for (old_key, old_row) in &matching {
            let mut row = old_row.clone();
            for (index, expr, location) in &assignments {
                let column = &object.columns[*index];
                let value = eval(expr, old_row);
                let value = cast(&value, column.ty).ok_or_else(|| {
                    Error::sql(
                        location.clone(),
                        format!("'{value}' is not a valid {} for \"{}\"", column.ty, column.name),
                    )
                })?;
                row[*index] = storable(value, column, location)?;
            }
            let rowid = std::str::from_utf8(old_key)
                .ok()
                .and_then(|k| k.strip_prefix("{\"rowid\":")?.strip_suffix('}')?.parse().ok())
                .unwrap_or(0);
            let new_key = Self::row_key(&object, &row, rowid, at)?;
            if new_key != *old_key {
                if rows.contains_key(&new_key) {
                    return Err(Error::sql(
                        at.clone(),
                        format!("duplicate primary key {} in \"{}\"", String::from_utf8_lossy(&new_key), object.name),
                    ));
                }
                rows.remove(old_key);
                records.push(TopicRecord { key: Some(old_key.clone()), value: None, headers: vec![] });
            }
            rows.insert(new_key.clone(), row.clone());
            records.push(TopicRecord {
                key: Some(new_key),
                value: Some(row_json(&object.columns, &row)),
                headers: vec![],
            });
        }
        let count = matching.len();
        self.write_table(&object, records, marker, effects, table_ends)?;
        Ok(Outcome { tag: format!("UPDATE {count}") })
    }

    fn delete(
        &self,
        delete: &ast::Delete,
        batch: &mut PendingBatch,
        marker: Option<MarkerKey>,
        at: &Location,
    ) -> Result<Outcome> {
        let PendingBatch { working, tables, effects, table_ends } = batch;
        let from = match &delete.from {
            ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from) => from,
        };
        if from.len() != 1 || !from[0].joins.is_empty() || delete.using.is_some() || delete.returning.is_some() {
            return Err(Error::sql(at.clone(), "not supported: DELETE from several tables, USING or RETURNING"));
        }
        let ast::TableFactor::Table { name, .. } = &from[0].relation else {
            return Err(Error::sql(at.clone(), "DELETE takes a table name"));
        };
        let object = self.target_table(working, name, at)?.clone();
        let rows_now = self.table_rows(tables, &object)?.clone();
        let (_, matching) = self.matching(working, &object, &rows_now, delete.selection.as_ref(), at)?;
        let rows = self.table_rows(tables, &object)?;
        let mut records = Vec::new();
        for (key, _) in &matching {
            rows.remove(key);
            records.push(TopicRecord { key: Some(key.clone()), value: None, headers: vec![] });
        }
        let count = matching.len();
        self.write_table(&object, records, marker, effects, table_ends)?;
        Ok(Outcome { tag: format!("DELETE {count}") })
    }

    fn apply(&mut self, effects: Vec<Effect>) -> Result<()> {
        // Catalog first, in one append (one batch: all or nothing), then topics and rows.
        let mut catalog_records = Vec::new();
        for effect in &effects {
            match effect {
                Effect::CatalogPut { name, definition } => catalog_records.push(TopicRecord {
                    key: Some(name.clone().into_bytes()),
                    value: Some(definition.clone().into_bytes()),
                    headers: vec![],
                }),
                Effect::CatalogDelete { name } => catalog_records.push(TopicRecord {
                    key: Some(name.clone().into_bytes()),
                    value: None,
                    headers: vec![],
                }),
                Effect::MarkerPut { key, marker } => catalog_records.push(TopicRecord {
                    key: Some(key.clone().into_bytes()),
                    value: Some(serde_json::to_vec(marker).expect("a marker serializes")),
                    headers: vec![],
                }),
                _ => {}
            }
        }
        self.topics.append(CATALOG_TOPIC, catalog_records)?;
        for effect in effects {
            match effect {
                Effect::CreateTopic { topic, spec } => {
                    self.topics.ensure(&topic, spec)?;
                }
                Effect::TableWrite { topic, records } => {
                    self.topics.ensure(&topic, TopicSpec { partitions: 1, compacted: true })?;
                    self.topics.append(&topic, records)?;
                }
                Effect::MarkerPut { key, marker } => {
                    self.markers.insert(key, marker);
                }
                Effect::CatalogDelete { name } if name.starts_with(MARKER_PREFIX) => {
                    self.markers.remove(&name);
                }
                Effect::CatalogPut { .. } | Effect::CatalogDelete { .. } => {}
            }
        }
        Ok(())
    }

    /// Every materialized view of the catalog, bound and ready to run.
    pub fn compile(&self) -> Result<Vec<CompiledView>> {
        let mut views = Vec::new();
        for object in self.catalog.objects.values() {
            if let ObjectKind::View { materialized: true, .. } = object.kind {
                let (rel, columns, dependencies) = bind_view(&self.catalog, object, None)?;
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
                });
            }
        }
        Ok(views)
    }

    /// The names and kinds of the catalog's objects.
    pub fn objects(&self) -> Vec<(String, &'static str)> {
        self.catalog.objects.values().map(|o| (o.name.clone(), o.kind_name())).collect()
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

fn view_object(create: &ast::CreateView, at: &Location, nesting: usize) -> Result<Object> {
    let Some(ident) = single_name(&create.name) else {
        return Err(Error::sql(at.clone(), "not supported: qualified view names"));
    };
    let name = normalize(ident);
    check_name(&name, &span_location(at, ident.span))?;
    let mut canonical = create.clone();
    canonical.or_replace = false;
    canonical.if_not_exists = false;
    let mut query = create.query.clone();
    if !create.columns.is_empty() {
        // CREATE VIEW v (a, b) AS ...: rename through a derived table.
        let alias = ast::TableAlias {
            explicit: true,
            at: None,
            name: ast::Ident::new("v"),
            columns: create.columns.iter().map(|c| ast::TableAliasColumnDef::from_name(c.name.value.clone())).collect(),
        };
        let select = ast::Select {
            select_token: ast::helpers::attached_token::AttachedToken::empty(),
            optimizer_hints: vec![],
            distinct: None,
            select_modifiers: None,
            top: None,
            top_before_distinct: false,
            projection: vec![ast::SelectItem::Wildcard(ast::WildcardAdditionalOptions::default())],
            exclude: None,
            into: None,
            from: vec![ast::TableWithJoins {
                relation: ast::TableFactor::Derived {
                    lateral: false,
                    subquery: query,
                    alias: Some(alias),
                    sample: None,
                },
                joins: vec![],
            }],
            lateral_views: vec![],
            prewhere: None,
            selection: None,
            connect_by: vec![],
            group_by: ast::GroupByExpr::Expressions(vec![], vec![]),
            cluster_by: vec![],
            distribute_by: vec![],
            sort_by: vec![],
            having: None,
            named_window: vec![],
            qualify: None,
            window_before_qualify: false,
            value_table_mode: None,
            flavor: ast::SelectFlavor::Standard,
        };
        query = Box::new(ast::Query {
            with: None,
            body: Box::new(ast::SetExpr::Select(Box::new(select))),
            order_by: None,
            limit_clause: None,
            fetch: None,
            locks: vec![],
            for_clause: None,
            settings: None,
            format_clause: None,
            pipe_operators: vec![],
        });
    }
    Ok(Object {
        name,
        kind: ObjectKind::View { query, materialized: create.materialized, nesting },
        columns: Vec::new(),
        definition: ast::Statement::CreateView(canonical).to_string(),
    })
}

/// A bound view: its plan, output columns and the catalog objects it reads
/// (through views too).
type BoundView = (crate::plan::Rel, Vec<(String, Type)>, BTreeSet<String>);

/// Binds a view's query.
fn bind_view(catalog: &Catalog, object: &Object, at: Option<&Location>) -> Result<BoundView> {
    let ObjectKind::View { query, nesting, .. } = &object.kind else { unreachable!("a view") };
    let location = at.cloned().unwrap_or_default();
    let mut binder = Binder::new(catalog, location.file.clone(), location);
    binder.nesting = *nesting;
    if binder.dependencies.contains(&object.name) {
        unreachable!("no dependencies before binding");
    }
    binder.defining = Some(object.name.clone());
    let bound = binder.bind_view_query(query)?;
    if binder.dependencies.contains(&object.name) {
        return Err(Error::sql(at.cloned().unwrap_or_default(), format!("view \"{}\" reads itself", object.name)));
    }
    let columns = bound.scope.columns.iter().map(|c| (c.name.clone(), c.ty)).collect();
    Ok((bound.rel, columns, binder.dependencies))
}

fn table_scope(object: &Object) -> Scope {
    Scope {
        columns: object
            .columns
            .iter()
            .map(|c| ScopeColumn { table: Some(object.name.clone()), name: c.name.clone(), ty: c.ty })
            .collect(),
    }
}

/// Binds a scalar expression over a scope (WHERE and SET of DML).
fn bind_scalar(catalog: &Catalog, expr: &ast::Expr, scope: &Scope, at: &Location) -> Result<crate::plan::Expr> {
    let mut binder = Binder::new(catalog, at.file.clone(), at.clone());
    binder.bind_scalar(expr, scope)
}

/// A constant for a column of a row being inserted.
fn constant(catalog: &Catalog, expr: &ast::Expr, column: &Column, at: &Location) -> Result<Value> {
    let bound = bind_scalar(catalog, expr, &Scope::default(), at)?;
    let value = eval(&bound, &[]);
    let location = span_location(at, expr.span());
    let value = cast(&value, column.ty).ok_or_else(|| {
        Error::sql(location.clone(), format!("'{value}' is not a valid {} for column \"{}\"", column.ty, column.name))
    })?;
    storable(value, column, &location)
}

/// A table's rows are JSON, which has no infinities or NaN: a DOUBLE that
/// is one is refused (stored, it would read back as NULL).
fn storable(value: Value, column: &Column, at: &Location) -> Result<Value> {
    match value.as_f64() {
        Some(x) if matches!(value, Value::Double(_)) && !x.is_finite() => Err(Error::sql(
            at.clone(),
            format!(
                "column \"{}\" cannot store {value}: a table holds JSON, which has no infinities or NaN",
                column.name
            ),
        )),
        _ => Ok(value),
    }
}
