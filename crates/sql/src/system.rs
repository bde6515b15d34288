//! The system catalog: a `pg_catalog` and `information_schema` subset whose
//! rows are generated from Millpond's own catalog when a one-off query reads
//! them, so that Postgres tools (psql's `\d`, `\dt`, `\dv`, `\dm`, `\l`;
//! drivers' metadata calls) can describe what the server holds.
//!
//! Invariants:
//! - Generated, never stored: every row follows from the catalog as the
//!   query binds it (plus the connection's database, user and settings), so
//!   nothing can go stale; a view definition cannot read these relations
//!   (they are not changes in a log), one-off queries only.
//! - Each relation's rows have its columns' arity and types
//!   (`debug_assert`ed where they are made).
//! - Object ids are stable for a catalog state: a user object's oid is a
//!   hash of its name into [`USER_OID_MIN`]..=`i32::MAX` (probing past a
//!   collision in name order), a system relation's oid is fixed, so a
//!   client may look an object up by name and then query it by oid.
//! - Millpond has one schema for user objects (`public`), one database, no
//!   roles but its one owner, no functions of its own (`pg_proc` is empty:
//!   SQL's built-ins are not listed), privileges, indexes, constraints,
//!   defaults or comments: the
//!   relations describing those are empty, and the functions reading them
//!   answer NULL (or TRUE for privilege checks).
//! - Sources are foreign tables (`relkind` 'f': their rows live in a topic
//!   written from outside), tables 'r', views 'v', materialized views 'm'.

use std::collections::BTreeMap;

use sqlparser::tokenizer::Span;

use crate::bind::Binder;
use crate::catalog::{Catalog, ObjectKind};
use crate::error::{Location, Result};
use crate::plan::{BinaryOp, Expr, Function};
use crate::value::{Row, Type, Value};

/// The first oid of a user object (Postgres's `FirstNormalObjectId`).
pub(crate) const USER_OID_MIN: i64 = 16_384;
/// The oid of the `pg_catalog` schema.
pub(crate) const PG_CATALOG_OID: i64 = 11;
/// The oid of the `public` schema, where every user object is.
pub(crate) const PUBLIC_OID: i64 = 2200;
/// The oid of the `information_schema` schema.
pub(crate) const INFORMATION_SCHEMA_OID: i64 = 13_000;
/// The owner of everything: the one role Millpond reports.
pub(crate) const OWNER_OID: i64 = 10;
pub(crate) const OWNER_NAME: &str = "millpond";
/// The one foreign server: the embedded log, where sources' topics are.
const LOG_SERVER_OID: i64 = 16_382;
const LOG_SERVER_NAME: &str = "millpond_log";
/// The database's oid, and Postgres's encoding number of UTF8.
const DATABASE_OID: i64 = 16_383;
pub(crate) const UTF8_ENCODING: i64 = 6;

/// What a query over the system catalog sees besides the catalog.
#[derive(Clone, Debug)]
pub struct SystemContext {
    pub database: String,
    pub user: String,
    /// The session's settings as `SHOW` reports them, for `pg_settings`.
    pub settings: Vec<(String, String)>,
}

impl Default for SystemContext {
    fn default() -> SystemContext {
        SystemContext { database: "millpond".into(), user: OWNER_NAME.into(), settings: Vec::new() }
    }
}

/// A relation of the system catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum SystemTable {
    PgNamespace,
    PgClass,
    PgAttribute,
    PgType,
    PgDatabase,
    PgSettings,
    PgRoles,
    PgAuthMembers,
    PgProc,
    PgViews,
    PgMatviews,
    PgAm,
    PgIndex,
    PgInherits,
    PgConstraint,
    PgAttrdef,
    PgCollation,
    PgDescription,
    PgPolicy,
    PgTrigger,
    PgStatisticExt,
    PgPublication,
    PgPublicationRel,
    PgPublicationNamespace,
    PgForeignTable,
    PgForeignServer,
    InfoTables,
    InfoColumns,
    InfoSchemata,
    InfoViews,
}

use crate::value::Type::{Bool as B, Double as F, Int as I, Text as T};

/// A relation of the system catalog: which, its schema, name, fixed oid and columns.
type TableEntry = (SystemTable, &'static str, &'static str, i64, &'static [(&'static str, Type)]);

/// Every relation of the system catalog.
#[rustfmt::skip]
const TABLES: &[TableEntry] = &[
    (SystemTable::PgNamespace, "pg_catalog", "pg_namespace", 2615, &[
        ("oid", I), ("nspname", T), ("nspowner", I), ("nspacl", T),
    ]),
    (SystemTable::PgClass, "pg_catalog", "pg_class", 1259, &[
        ("oid", I), ("relname", T), ("relnamespace", I), ("reltype", I), ("reloftype", I), ("relowner", I),
        ("relam", I), ("relfilenode", I), ("reltablespace", I), ("relpages", I), ("reltuples", F),
        ("relallvisible", I), ("reltoastrelid", I), ("relhasindex", B), ("relisshared", B),
        ("relpersistence", T), ("relkind", T), ("relnatts", I), ("relchecks", I), ("relhasrules", B),
        ("relhastriggers", B), ("relhassubclass", B), ("relrowsecurity", B), ("relforcerowsecurity", B),
        ("relispopulated", B), ("relreplident", T), ("relispartition", B), ("relrewrite", I),
        ("relacl", T), ("reloptions", T), ("relpartbound", T),
    ]),
    (SystemTable::PgAttribute, "pg_catalog", "pg_attribute", 1249, &[
        ("attrelid", I), ("attname", T), ("atttypid", I), ("attstattarget", I), ("attlen", I), ("attnum", I),
        ("attndims", I), ("atttypmod", I), ("attbyval", B), ("attstorage", T), ("attalign", T),
        ("attnotnull", B), ("atthasdef", B), ("atthasmissing", B), ("attidentity", T), ("attgenerated", T),
        ("attisdropped", B), ("attislocal", B), ("attinhcount", I), ("attcollation", I), ("attacl", T),
        ("attoptions", T), ("attfdwoptions", T), ("attcompression", T),
    ]),
    (SystemTable::PgType, "pg_catalog", "pg_type", 1247, &[
        ("oid", I), ("typname", T), ("typnamespace", I), ("typowner", I), ("typlen", I), ("typbyval", B),
        ("typtype", T), ("typcategory", T), ("typispreferred", B), ("typisdefined", B), ("typdelim", T),
        ("typrelid", I), ("typelem", I), ("typarray", I), ("typnotnull", B), ("typbasetype", I),
        ("typtypmod", I), ("typndims", I), ("typcollation", I), ("typdefault", T), ("typacl", T),
    ]),
    (SystemTable::PgDatabase, "pg_catalog", "pg_database", 1262, &[
        ("oid", I), ("datname", T), ("datdba", I), ("encoding", I), ("datlocprovider", T),
        ("datistemplate", B), ("datallowconn", B), ("datconnlimit", I), ("dattablespace", I),
        ("datcollate", T), ("datctype", T), ("daticulocale", T), ("datcollversion", T), ("datacl", T),
    ]),
    (SystemTable::PgSettings, "pg_catalog", "pg_settings", 12_000, &[
        ("name", T), ("setting", T), ("unit", T), ("category", T), ("short_desc", T), ("context", T),
        ("vartype", T), ("source", T), ("boot_val", T), ("reset_val", T), ("pending_restart", B),
    ]),
    (SystemTable::PgRoles, "pg_catalog", "pg_roles", 12_001, &[
        ("oid", I), ("rolname", T), ("rolsuper", B), ("rolinherit", B), ("rolcreaterole", B),
        ("rolcreatedb", B), ("rolcanlogin", B), ("rolreplication", B), ("rolconnlimit", I),
        ("rolvaliduntil", T), ("rolbypassrls", B), ("rolconfig", T),
    ]),
    (SystemTable::PgAuthMembers, "pg_catalog", "pg_auth_members", 1261, &[
        ("oid", I), ("roleid", I), ("member", I), ("grantor", I), ("admin_option", B),
    ]),
    (SystemTable::PgProc, "pg_catalog", "pg_proc", 1255, &[
        ("oid", I), ("proname", T), ("pronamespace", I), ("proowner", I), ("prolang", I), ("prokind", T),
        ("prosecdef", B), ("proretset", B), ("pronargs", I), ("prorettype", I), ("proargtypes", T),
        ("proargnames", T), ("prosrc", T),
    ]),
    (SystemTable::PgViews, "pg_catalog", "pg_views", 12_002, &[
        ("schemaname", T), ("viewname", T), ("viewowner", T), ("definition", T),
    ]),
    (SystemTable::PgMatviews, "pg_catalog", "pg_matviews", 12_003, &[
        ("schemaname", T), ("matviewname", T), ("matviewowner", T), ("tablespace", T),
        ("hasindexes", B), ("ispopulated", B), ("definition", T),
    ]),
    (SystemTable::PgAm, "pg_catalog", "pg_am", 2601, &[("oid", I), ("amname", T), ("amtype", T)]),
    (SystemTable::PgIndex, "pg_catalog", "pg_index", 2610, &[
        ("indexrelid", I), ("indrelid", I), ("indnatts", I), ("indisunique", B), ("indisprimary", B),
        ("indisclustered", B), ("indisvalid", B), ("indisreplident", B), ("indkey", T),
    ]),
    (SystemTable::PgInherits, "pg_catalog", "pg_inherits", 2611, &[
        ("inhrelid", I), ("inhparent", I), ("inhseqno", I), ("inhdetachpending", B),
    ]),
    (SystemTable::PgConstraint, "pg_catalog", "pg_constraint", 2606, &[
        ("oid", I), ("conname", T), ("connamespace", I), ("contype", T), ("conrelid", I), ("conindid", I),
        ("confrelid", I), ("conparentid", I), ("conislocal", B), ("convalidated", B), ("conkey", T),
    ]),
    (SystemTable::PgAttrdef, "pg_catalog", "pg_attrdef", 2604, &[
        ("oid", I), ("adrelid", I), ("adnum", I), ("adbin", T),
    ]),
    (SystemTable::PgCollation, "pg_catalog", "pg_collation", 3456, &[
        ("oid", I), ("collname", T), ("collnamespace", I),
    ]),
    (SystemTable::PgDescription, "pg_catalog", "pg_description", 2609, &[
        ("objoid", I), ("classoid", I), ("objsubid", I), ("description", T),
    ]),
    (SystemTable::PgPolicy, "pg_catalog", "pg_policy", 3256, &[
        ("oid", I), ("polname", T), ("polrelid", I), ("polcmd", T), ("polpermissive", B), ("polroles", T),
        ("polqual", T), ("polwithcheck", T),
    ]),
    (SystemTable::PgTrigger, "pg_catalog", "pg_trigger", 2620, &[
        ("oid", I), ("tgrelid", I), ("tgparentid", I), ("tgname", T), ("tgenabled", T), ("tgisinternal", B),
    ]),
    (SystemTable::PgStatisticExt, "pg_catalog", "pg_statistic_ext", 3381, &[
        ("oid", I), ("stxrelid", I), ("stxname", T), ("stxnamespace", I), ("stxstattarget", I),
        ("stxkind", T),
    ]),
    (SystemTable::PgPublication, "pg_catalog", "pg_publication", 6104, &[
        ("oid", I), ("pubname", T), ("puballtables", B), ("pubviaroot", B),
    ]),
    (SystemTable::PgPublicationRel, "pg_catalog", "pg_publication_rel", 6106, &[
        ("oid", I), ("prpubid", I), ("prrelid", I), ("prqual", T), ("prattrs", T),
    ]),
    (SystemTable::PgPublicationNamespace, "pg_catalog", "pg_publication_namespace", 6237, &[
        ("oid", I), ("pnpubid", I), ("pnnspid", I),
    ]),
    (SystemTable::PgForeignTable, "pg_catalog", "pg_foreign_table", 3118, &[
        ("ftrelid", I), ("ftserver", I), ("ftoptions", T),
    ]),
    (SystemTable::PgForeignServer, "pg_catalog", "pg_foreign_server", 1417, &[
        ("oid", I), ("srvname", T), ("srvowner", I), ("srvfdw", I), ("srvtype", T), ("srvversion", T),
        ("srvacl", T), ("srvoptions", T),
    ]),
    (SystemTable::InfoTables, "information_schema", "tables", 13_001, &[
        ("table_catalog", T), ("table_schema", T), ("table_name", T), ("table_type", T),
        ("is_insertable_into", T), ("is_typed", T),
    ]),
    (SystemTable::InfoColumns, "information_schema", "columns", 13_002, &[
        ("table_catalog", T), ("table_schema", T), ("table_name", T), ("column_name", T),
        ("ordinal_position", I), ("column_default", T), ("is_nullable", T), ("data_type", T),
        ("character_maximum_length", I), ("numeric_precision", I), ("numeric_scale", I),
        ("datetime_precision", I), ("udt_catalog", T), ("udt_schema", T), ("udt_name", T),
        ("is_updatable", T),
    ]),
    (SystemTable::InfoSchemata, "information_schema", "schemata", 13_003, &[
        ("catalog_name", T), ("schema_name", T), ("schema_owner", T),
    ]),
    (SystemTable::InfoViews, "information_schema", "views", 13_004, &[
        ("table_catalog", T), ("table_schema", T), ("table_name", T), ("view_definition", T),
        ("is_updatable", T), ("is_insertable_into", T),
    ]),
];

/// The oids of `information_schema`'s relations (not on the search path).
const INFORMATION_SCHEMA_OIDS: std::ops::RangeInclusive<i64> = 13_000..=13_999;

/// A type Postgres clients know: oid, typname, format_type name, typlen, category.
const TYPES: &[(i64, &str, &str, i64, &str)] = &[
    (16, "bool", "boolean", 1, "B"),
    (17, "bytea", "bytea", -1, "U"),
    (18, "char", "\"char\"", 1, "Z"),
    (19, "name", "name", 64, "S"),
    (20, "int8", "bigint", 8, "N"),
    (21, "int2", "smallint", 2, "N"),
    (23, "int4", "integer", 4, "N"),
    (25, "text", "text", -1, "S"),
    (26, "oid", "oid", 4, "N"),
    (114, "json", "json", -1, "U"),
    (700, "float4", "real", 4, "N"),
    (701, "float8", "double precision", 8, "N"),
    (1042, "bpchar", "character", -1, "S"),
    (1043, "varchar", "character varying", -1, "S"),
    (1082, "date", "date", 4, "D"),
    (1083, "time", "time without time zone", 8, "D"),
    (1114, "timestamp", "timestamp without time zone", 8, "D"),
    (1184, "timestamptz", "timestamp with time zone", 8, "D"),
    (1186, "interval", "interval", 16, "T"),
    (1700, "numeric", "numeric", -1, "N"),
    (2205, "regclass", "regclass", 4, "N"),
    (2206, "regtype", "regtype", 4, "N"),
    (2950, "uuid", "uuid", 16, "U"),
    (3802, "jsonb", "jsonb", -1, "U"),
];

/// The Postgres type oid and type modifier of a Millpond type.
pub(crate) fn type_oid(ty: Type) -> (i64, i64) {
    match ty {
        Type::Bool => (16, -1),
        Type::Int => (20, -1),
        Type::Double => (701, -1),
        Type::Decimal { precision, scale } => (1700, ((i64::from(precision) << 16) | i64::from(scale)) + 4),
        Type::Text | Type::Null => (25, -1),
        Type::Timestamp => (1114, -1),
        Type::Date => (1082, -1),
        Type::Interval => (1186, -1),
    }
}

/// `format_type(oid, typmod)`: the SQL name of a type, as Postgres spells it.
pub(crate) fn format_type(oid: i64, typmod: Option<i64>) -> String {
    let Some((_, _, name, _, _)) = TYPES.iter().find(|t| t.0 == oid) else {
        return "???".into();
    };
    match (oid, typmod) {
        (1700, Some(m)) if m >= 4 => format!("numeric({},{})", (m - 4) >> 16, (m - 4) & 0xffff),
        (1042 | 1043, Some(m)) if m >= 4 => format!("{name}({})", m - 4),
        _ => (*name).to_owned(),
    }
}

impl SystemTable {
    /// The relation `schema.name` (`schema` `None`: unqualified, as found on
    /// the search path, which holds `pg_catalog` but not `information_schema`).
    pub(crate) fn lookup(schema: Option<&str>, name: &str) -> Option<SystemTable> {
        TABLES
            .iter()
            .find(|(_, s, n, ..)| *n == name && schema.map_or(*s == "pg_catalog", |schema| schema == *s))
            .map(|t| t.0)
    }

    fn entry(self) -> &'static TableEntry {
        TABLES.iter().find(|t| t.0 == self).expect("every system table is in TABLES")
    }

    pub(crate) fn name(self) -> String {
        let (_, schema, name, ..) = self.entry();
        format!("{schema}.{name}")
    }

    pub(crate) fn columns(self) -> Vec<(String, Type)> {
        self.entry().4.iter().map(|(n, t)| ((*n).to_owned(), *t)).collect()
    }

    /// The relation's rows for `catalog` as seen by `context`.
    pub(crate) fn rows(self, catalog: &Catalog, context: &SystemContext) -> Vec<Row> {
        let objects = Objects::of(catalog);
        let rows = match self {
            SystemTable::PgNamespace => namespaces(),
            SystemTable::PgClass => classes(&objects),
            SystemTable::PgAttribute => attributes(&objects),
            SystemTable::PgType => types(),
            SystemTable::PgDatabase => database(context),
            SystemTable::PgSettings => settings(context),
            SystemTable::PgRoles => roles(),
            SystemTable::PgViews | SystemTable::PgMatviews => views(&objects, self),
            SystemTable::PgForeignTable => foreign_tables(&objects),
            SystemTable::PgForeignServer => vec![vec![
                Value::Int(LOG_SERVER_OID),
                text(LOG_SERVER_NAME),
                Value::Int(OWNER_OID),
                Value::Int(0),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ]],
            SystemTable::InfoTables => info_tables(&objects, context),
            SystemTable::InfoColumns => info_columns(&objects, context),
            SystemTable::InfoSchemata => info_schemata(context),
            SystemTable::InfoViews => info_views(&objects, context),
            _ => Vec::new(),
        };
        debug_assert!(
            rows.iter().all(|r| r.len() == self.entry().4.len()),
            "every row of {} has its columns' arity",
            self.name()
        );
        rows
    }
}

/// A relation as the system catalog lists it.
struct Relation {
    oid: i64,
    namespace: i64,
    name: String,
    /// `relkind`: r, v, m, f.
    kind: &'static str,
    columns: Vec<(String, Type)>,
    /// The defining query (views).
    definition: Option<String>,
    /// A source's options as a foreign table's (`{topic=...}`).
    options: Option<String>,
}

/// Every relation, user objects then system relations.
struct Objects(Vec<Relation>);

impl Objects {
    fn of(catalog: &Catalog) -> Objects {
        let mut taken = std::collections::BTreeSet::new();
        let mut relations = Vec::new();
        // Sinks are not relations: they have no rows to read.
        for (name, object) in catalog.objects.iter().filter(|(_, o)| !matches!(o.kind, ObjectKind::Sink { .. })) {
            let mut oid = name_oid(name);
            while !taken.insert(oid) {
                oid = if oid == i64::from(i32::MAX) { USER_OID_MIN } else { oid + 1 };
            }
            let options = match &object.kind {
                ObjectKind::Source { topic, upsert_key, kafka_brokers, .. } => {
                    let envelope = if upsert_key.is_some() { "upsert" } else { "none" };
                    let mut elements =
                        vec![format!("topic={topic}"), "format=json".into(), format!("envelope={envelope}")];
                    elements.extend(kafka_brokers.iter().map(|brokers| format!("brokers={brokers}")));
                    Some(crate::eval::array_text(elements.iter().map(|e| Some(e.as_str()))))
                }
                _ => None,
            };
            let (kind, definition) = match &object.kind {
                ObjectKind::Source { .. } | ObjectKind::Sink { .. } => ("f", None),
                ObjectKind::Table { .. } => ("r", None),
                ObjectKind::View { materialized, query, .. } => {
                    (if *materialized { "m" } else { "v" }, Some(format!(" {query};")))
                }
            };
            let columns = match &object.kind {
                ObjectKind::View { query, .. } => {
                    let location = Location { file: None, line: 1, column: 1 };
                    // A view that no longer binds is listed without columns.
                    Binder::new(catalog, None, location)
                        .bind_view_query(query)
                        .map(|b| b.scope.columns.into_iter().map(|c| (c.name, c.ty)).collect())
                        .unwrap_or_default()
                }
                _ => object.columns.iter().map(|c| (c.name.clone(), c.ty)).collect(),
            };
            let name = name.clone();
            relations.push(Relation { oid, namespace: PUBLIC_OID, name, kind, columns, definition, options });
        }
        for (_, schema, name, oid, columns) in TABLES {
            let namespace = if *schema == "pg_catalog" { PG_CATALOG_OID } else { INFORMATION_SCHEMA_OID };
            let columns = columns.iter().map(|(n, t)| ((*n).to_owned(), *t)).collect();
            let kind = if *schema == "pg_catalog" && *oid < 12_000 { "r" } else { "v" };
            let (name, definition, options) = ((*name).into(), None, None);
            relations.push(Relation { oid: *oid, namespace, name, kind, columns, definition, options });
        }
        Objects(relations)
    }
}

/// FNV-1a of the name, into the user oid range.
fn name_oid(name: &str) -> i64 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes() {
        hash = (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193);
    }
    let span = i64::from(i32::MAX) - USER_OID_MIN + 1;
    USER_OID_MIN + i64::from(hash) % span
}

fn text(s: &str) -> Value {
    Value::Text(s.into())
}

fn namespaces() -> Vec<Row> {
    [(PG_CATALOG_OID, "pg_catalog"), (PUBLIC_OID, "public"), (INFORMATION_SCHEMA_OID, "information_schema")]
        .into_iter()
        .map(|(oid, name)| vec![Value::Int(oid), text(name), Value::Int(OWNER_OID), Value::Null])
        .collect()
}

fn classes(objects: &Objects) -> Vec<Row> {
    let (f, t) = (Value::Bool(false), Value::Bool(true));
    objects
        .0
        .iter()
        .map(|r| {
            vec![
                Value::Int(r.oid),
                text(&r.name),
                Value::Int(r.namespace),
                Value::Int(0),
                Value::Int(0),
                Value::Int(OWNER_OID),
                Value::Int(0),
                Value::Int(0),
                Value::Int(0),
                Value::Int(0),
                Value::double(-1.0),
                Value::Int(0),
                Value::Int(0),
                f.clone(),
                f.clone(),
                text("p"),
                text(r.kind),
                Value::Int(r.columns.len() as i64),
                Value::Int(0),
                f.clone(),
                f.clone(),
                f.clone(),
                f.clone(),
                f.clone(),
                t.clone(),
                text("d"),
                f.clone(),
                Value::Int(0),
                Value::Null,
                Value::Null,
                Value::Null,
            ]
        })
        .collect()
}

fn attributes(objects: &Objects) -> Vec<Row> {
    let mut rows = Vec::new();
    for r in &objects.0 {
        for (i, (name, ty)) in r.columns.iter().enumerate() {
            let (type_oid, typmod) = type_oid(*ty);
            let len = TYPES.iter().find(|t| t.0 == type_oid).map_or(-1, |t| t.3);
            let collation = if *ty == Type::Text { 100 } else { 0 };
            let f = Value::Bool(false);
            rows.push(vec![
                Value::Int(r.oid),
                text(name),
                Value::Int(type_oid),
                Value::Int(-1),
                Value::Int(len),
                Value::Int(i as i64 + 1),
                Value::Int(0),
                Value::Int(typmod),
                Value::Bool(len > 0 && len <= 8),
                text(if len > 0 { "p" } else { "x" }),
                text("d"),
                f.clone(),
                f.clone(),
                f.clone(),
                text(""),
                text(""),
                f.clone(),
                Value::Bool(true),
                Value::Int(0),
                Value::Int(collation),
                Value::Null,
                Value::Null,
                Value::Null,
                text(""),
            ]);
        }
    }
    rows
}

fn types() -> Vec<Row> {
    TYPES
        .iter()
        .map(|(oid, name, _, len, category)| {
            let collation = if *category == "S" { 100 } else { 0 };
            vec![
                Value::Int(*oid),
                text(name),
                Value::Int(PG_CATALOG_OID),
                Value::Int(OWNER_OID),
                Value::Int(*len),
                Value::Bool(*len > 0 && *len <= 8),
                text("b"),
                text(category),
                Value::Bool(false),
                Value::Bool(true),
                text(","),
                Value::Int(0),
                Value::Int(0),
                Value::Int(0),
                Value::Bool(false),
                Value::Int(0),
                Value::Int(-1),
                Value::Int(0),
                Value::Int(collation),
                Value::Null,
                Value::Null,
            ]
        })
        .collect()
}

fn database(context: &SystemContext) -> Vec<Row> {
    vec![vec![
        Value::Int(DATABASE_OID),
        text(&context.database),
        Value::Int(OWNER_OID),
        Value::Int(UTF8_ENCODING),
        text("c"),
        Value::Bool(false),
        Value::Bool(true),
        Value::Int(-1),
        Value::Int(0),
        text("C"),
        text("C"),
        Value::Null,
        Value::Null,
        Value::Null,
    ]]
}

fn settings(context: &SystemContext) -> Vec<Row> {
    let sorted: BTreeMap<&str, &str> = context.settings.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    sorted
        .into_iter()
        .map(|(name, value)| {
            vec![
                text(name),
                text(value),
                Value::Null,
                text("Millpond"),
                Value::Null,
                text("user"),
                text("string"),
                text("session"),
                text(value),
                text(value),
                Value::Bool(false),
            ]
        })
        .collect()
}

fn roles() -> Vec<Row> {
    let t = Value::Bool(true);
    vec![vec![
        Value::Int(OWNER_OID),
        text(OWNER_NAME),
        t.clone(),
        t.clone(),
        t.clone(),
        t.clone(),
        t.clone(),
        Value::Bool(false),
        Value::Int(-1),
        Value::Null,
        Value::Bool(false),
        Value::Null,
    ]]
}

fn views(objects: &Objects, table: SystemTable) -> Vec<Row> {
    let kind = if table == SystemTable::PgViews { "v" } else { "m" };
    objects
        .0
        .iter()
        .filter(|r| r.kind == kind && r.namespace == PUBLIC_OID)
        .map(|r| {
            let definition = text(r.definition.as_deref().unwrap_or(""));
            match table {
                SystemTable::PgViews => vec![text("public"), text(&r.name), text(OWNER_NAME), definition],
                _ => vec![
                    text("public"),
                    text(&r.name),
                    text(OWNER_NAME),
                    Value::Null,
                    Value::Bool(false),
                    Value::Bool(true),
                    definition,
                ],
            }
        })
        .collect()
}

fn foreign_tables(objects: &Objects) -> Vec<Row> {
    objects
        .0
        .iter()
        .filter_map(|r| Some(vec![Value::Int(r.oid), Value::Int(LOG_SERVER_OID), text(r.options.as_deref()?)]))
        .collect()
}

fn schema_name(namespace: i64) -> &'static str {
    match namespace {
        PUBLIC_OID => "public",
        PG_CATALOG_OID => "pg_catalog",
        _ => "information_schema",
    }
}

fn info_tables(objects: &Objects, context: &SystemContext) -> Vec<Row> {
    objects
        .0
        .iter()
        .map(|r| {
            let table_type = match r.kind {
                "r" if r.namespace == PUBLIC_OID => "BASE TABLE",
                "r" => "SYSTEM TABLE",
                "f" => "FOREIGN",
                _ => "VIEW",
            };
            let insertable = if r.kind == "r" && r.namespace == PUBLIC_OID { "YES" } else { "NO" };
            vec![
                text(&context.database),
                text(schema_name(r.namespace)),
                text(&r.name),
                text(table_type),
                text(insertable),
                text("NO"),
            ]
        })
        .collect()
}

fn info_columns(objects: &Objects, context: &SystemContext) -> Vec<Row> {
    let mut rows = Vec::new();
    for r in &objects.0 {
        for (i, (name, ty)) in r.columns.iter().enumerate() {
            let (oid, typmod) = type_oid(*ty);
            let udt = TYPES.iter().find(|t| t.0 == oid).map_or("text", |t| t.1);
            let data_type = format_type(oid, None);
            let (precision, scale) = match ty {
                Type::Int => (Value::Int(64), Value::Int(0)),
                Type::Double => (Value::Int(53), Value::Null),
                Type::Decimal { precision, scale } => {
                    (Value::Int(i64::from(*precision)), Value::Int(i64::from(*scale)))
                }
                _ => (Value::Null, Value::Null),
            };
            let datetime = if matches!(ty, Type::Timestamp | Type::Interval) { Value::Int(6) } else { Value::Null };
            let updatable = if r.kind == "r" && r.namespace == PUBLIC_OID { "YES" } else { "NO" };
            debug_assert!(typmod >= -1, "a type modifier is -1 or a packed value");
            rows.push(vec![
                text(&context.database),
                text(schema_name(r.namespace)),
                text(&r.name),
                text(name),
                Value::Int(i as i64 + 1),
                Value::Null,
                text("YES"),
                text(&data_type),
                Value::Null,
                precision,
                scale,
                datetime,
                text(&context.database),
                text("pg_catalog"),
                text(udt),
                text(updatable),
            ]);
        }
    }
    rows
}

fn info_schemata(context: &SystemContext) -> Vec<Row> {
    ["pg_catalog", "public", "information_schema"]
        .into_iter()
        .map(|schema| vec![text(&context.database), text(schema), text(OWNER_NAME)])
        .collect()
}

fn info_views(objects: &Objects, context: &SystemContext) -> Vec<Row> {
    objects
        .0
        .iter()
        .filter(|r| r.kind == "v" && r.namespace == PUBLIC_OID)
        .map(|r| {
            vec![
                text(&context.database),
                text("public"),
                text(&r.name),
                text(r.definition.as_deref().unwrap_or("")),
                text("NO"),
                text("NO"),
            ]
        })
        .collect()
}

/// Functions that describe what Millpond has none of (comments,
/// expressions, constraints, indexes, triggers): they answer NULL.
const DESCRIBERS: &[&str] = &[
    "obj_description",
    "shobj_description",
    "col_description",
    "pg_get_expr",
    "pg_get_constraintdef",
    "pg_get_indexdef",
    "pg_get_triggerdef",
    "pg_get_partkeydef",
    "pg_get_statisticsobjdef_columns",
    "pg_get_function_result",
    "pg_get_function_arguments",
    "pg_tablespace_location",
];

impl Binder<'_> {
    /// The system catalog's functions, as the queries of psql and drivers
    /// call them: `None` when `name` is not one of them.
    pub(crate) fn bind_system_function(
        &self,
        name: &str,
        args: Vec<(Expr, Type)>,
        span: Span,
    ) -> Option<Result<(Expr, Type)>> {
        let arity: std::ops::RangeInclusive<usize> = match name {
            "current_database" | "current_catalog" | "current_schema" | "current_user" | "session_user" | "version" => {
                0..=0
            }
            "pg_get_userbyid"
            | "pg_table_is_visible"
            | "pg_type_is_visible"
            | "pg_function_is_visible"
            | "pg_encoding_to_char" => 1..=1,
            "format_type" => 2..=2,
            "array_to_string" => 2..=3,
            "quote_ident" | "quote_literal" => 1..=1,
            "array_upper" => 2..=2,
            "current_schemas" => 1..=1,
            "pg_get_viewdef" => 1..=2,
            "pg_relation_is_publishable" => 1..=1,
            describer if DESCRIBERS.contains(&describer) => 1..=3,
            "has_table_privilege"
            | "has_schema_privilege"
            | "has_database_privilege"
            | "has_column_privilege"
            | "pg_has_role" => 2..=4,
            _ => return None,
        };
        if !arity.contains(&args.len()) {
            let message = format!("{name}() takes {} to {} arguments, not {}", arity.start(), arity.end(), args.len());
            return Some(Err(self.error(span, message)));
        }
        Some(self.system_call(name, args, span))
    }

    fn system_call(&self, name: &str, mut args: Vec<(Expr, Type)>, span: Span) -> Result<(Expr, Type)> {
        let oid_arg = |args: &mut Vec<(Expr, Type)>| -> Result<Expr> {
            match args.remove(0) {
                (e, Type::Int | Type::Null) => Ok(e),
                (_, ty) => Err(self.error(span, format!("{name}() takes an oid (a number), not {ty}"))),
            }
        };
        let null_text = (Expr::Literal(Value::Null), Type::Text);
        Ok(match name {
            "current_database" | "current_catalog" | "current_schema" | "current_user" | "session_user" | "version" => {
                let Some(context) = &self.system else {
                    let message = format!("{name}(): a view must compute the same rows for every reader");
                    return Err(self.unsupported(span, message));
                };
                let value = match name {
                    "current_database" | "current_catalog" => context.database.clone(),
                    "current_schema" => "public".into(),
                    "version" => format!("PostgreSQL 15.0 (Millpond {})", env!("CARGO_PKG_VERSION")),
                    _ => context.user.clone(),
                };
                (Expr::Literal(Value::Text(value.into())), Type::Text)
            }
            "pg_get_userbyid" => {
                let oid = oid_arg(&mut args)?;
                (strict(oid, Expr::Literal(text(OWNER_NAME))), Type::Text)
            }
            "pg_table_is_visible" | "pg_type_is_visible" | "pg_function_is_visible" => {
                let oid = oid_arg(&mut args)?;
                let (low, high) = (*INFORMATION_SCHEMA_OIDS.start(), *INFORMATION_SCHEMA_OIDS.end());
                let inside = Expr::binary(
                    BinaryOp::And,
                    Expr::binary(BinaryOp::GtEq, oid.clone(), Expr::Literal(Value::Int(low))),
                    Expr::binary(BinaryOp::LtEq, oid, Expr::Literal(Value::Int(high))),
                );
                (Expr::Not(Box::new(inside)), Type::Bool)
            }
            "pg_encoding_to_char" => {
                let encoding = oid_arg(&mut args)?;
                let is_utf8 = Expr::binary(BinaryOp::Eq, encoding.clone(), Expr::Literal(Value::Int(UTF8_ENCODING)));
                let name = Expr::Case(vec![(is_utf8, Expr::Literal(text("UTF8")))], Box::new(Expr::Literal(text(""))));
                (strict(encoding, name), Type::Text)
            }
            "format_type" => {
                let oid = oid_arg(&mut args)?;
                let typmod = oid_arg(&mut args)?;
                (Expr::Call(Function::FormatType, vec![oid, typmod]), Type::Text)
            }
            "array_to_string" => {
                if let Some((_, ty)) = args.iter().find(|(_, t)| !matches!(t, Type::Text | Type::Null)) {
                    return Err(self.error(span, format!("array_to_string() takes an array and text, not {ty}")));
                }
                (Expr::Call(Function::ArrayToString, args.into_iter().map(|(e, _)| e).collect()), Type::Text)
            }
            "current_schemas" => {
                // The search path: pg_catalog (implicitly first) and public.
                let implicit = args.remove(0).0;
                let with = Expr::Literal(text("{pg_catalog,public}"));
                let without = Expr::Literal(text("{public}"));
                let pick = Expr::Case(vec![(implicit.clone(), with)], Box::new(without));
                (strict(implicit, pick), Type::Text)
            }
            "array_upper" => {
                if !matches!(args[0].1, Type::Text | Type::Null) || !matches!(args[1].1, Type::Int | Type::Null) {
                    return Err(self.error(span, "array_upper() takes an array and a dimension"));
                }
                (Expr::Call(Function::ArrayUpper, args.into_iter().map(|(e, _)| e).collect()), Type::Int)
            }
            "quote_ident" | "quote_literal" => {
                let function = if name == "quote_ident" { Function::QuoteIdent } else { Function::QuoteLiteral };
                (Expr::Call(function, vec![args.remove(0).0]), Type::Text)
            }
            "pg_get_viewdef" => {
                let oid = oid_arg(&mut args)?;
                let objects = Objects::of(self.catalog);
                let whens = objects
                    .0
                    .iter()
                    .filter_map(|r| Some((r.oid, r.definition.as_deref()?)))
                    .map(|(view, definition)| {
                        let this = Expr::binary(BinaryOp::Eq, oid.clone(), Expr::Literal(Value::Int(view)));
                        (this, Expr::Literal(text(definition)))
                    })
                    .collect();
                (Expr::Case(whens, Box::new(Expr::Literal(Value::Null))), Type::Text)
            }
            // No comments, expressions, constraints, indexes or triggers exist.
            describer if DESCRIBERS.contains(&describer) => null_text,
            "pg_relation_is_publishable" => (Expr::Literal(Value::Bool(false)), Type::Bool),
            // No privileges exist: whoever is connected may do everything.
            _ => (Expr::Literal(Value::Bool(true)), Type::Bool),
        })
    }
}

/// The oid of the relation `'name'::regclass` names (`pg_catalog.x`,
/// `information_schema.x`, `public.x` or unqualified), if there is one.
pub(crate) fn regclass(catalog: &Catalog, name: &str) -> Option<i64> {
    let (schema, relation) = match name.split_once('.') {
        Some((schema, relation)) => (Some(schema.trim_matches('"')), relation.trim_matches('"')),
        None => (None, name.trim_matches('"')),
    };
    let objects = Objects::of(catalog);
    let namespace = match schema {
        None => None,
        Some("public") => Some(PUBLIC_OID),
        Some("pg_catalog") => Some(PG_CATALOG_OID),
        Some("information_schema") => Some(INFORMATION_SCHEMA_OID),
        Some(_) => return None,
    };
    // Unqualified: the search path, pg_catalog then public.
    let found = |ns: i64| objects.0.iter().find(|r| r.name == relation && r.namespace == ns).map(|r| r.oid);
    match namespace {
        Some(ns) => found(ns),
        None => found(PG_CATALOG_OID).or_else(|| found(PUBLIC_OID)),
    }
}

/// `expr`, or NULL when `arg` is NULL (a strict function of `arg`).
fn strict(arg: Expr, expr: Expr) -> Expr {
    Expr::Case(vec![(Expr::IsNull(Box::new(arg)), Expr::Literal(Value::Null))], Box::new(expr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_a_unique_name_and_oid() {
        let mut names = std::collections::BTreeSet::new();
        let mut oids = std::collections::BTreeSet::new();
        for (table, schema, name, oid, _) in TABLES {
            assert!(names.insert((schema, name)), "{schema}.{name} is listed once");
            assert!(oids.insert(oid), "oid {oid} is one relation's");
            assert!(*oid < USER_OID_MIN, "a system oid is below the user range");
            assert_eq!(SystemTable::lookup(Some(schema), name), Some(*table));
            assert_eq!(!INFORMATION_SCHEMA_OIDS.contains(oid), *schema == "pg_catalog", "only pg_catalog is visible");
        }
    }

    #[test]
    fn user_oids_are_in_range_and_stable() {
        for name in ["t", "mv", "a_long_name_of_a_view", ""] {
            let oid = name_oid(name);
            assert!((USER_OID_MIN..=i64::from(i32::MAX)).contains(&oid));
            assert_eq!(oid, name_oid(name));
        }
        assert_ne!(name_oid("a"), name_oid("b"));
    }

    #[test]
    fn format_type_spells_types_as_postgres() {
        assert_eq!(format_type(20, None), "bigint");
        let (oid, typmod) = type_oid(Type::Decimal { precision: 10, scale: 2 });
        assert_eq!(format_type(oid, Some(typmod)), "numeric(10,2)");
        assert_eq!(format_type(1114, Some(-1)), "timestamp without time zone");
        assert_eq!(format_type(99_999, None), "???");
        for ty in [Type::Bool, Type::Int, Type::Double, Type::Text, Type::Timestamp, Type::Date, Type::Interval] {
            assert_ne!(format_type(type_oid(ty).0, None), "???", "{ty} has a Postgres type");
        }
    }
}
