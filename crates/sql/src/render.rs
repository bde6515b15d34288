//! Rendering: plans to dataflow collections, through the same public API
//! that Rust jobs use (`Job::source`, `Collection::aggregate`, `join`, ...).
//!
//! Invariants:
//! - Every stateful operator of a view is named `VIEW.FINGERPRINT.N`: the
//!   same plan gets the same names on every run (so it resumes its state),
//!   and a changed definition gets new ones (so it never reads state built
//!   by another definition).
//! - A view reads each source or table with a reader of its own and keeps
//!   only the columns it reads (others are NULL): its rows and state depend
//!   on its own definition only. The readers of an append-only source that
//!   several views read form one reader group
//!   (`millpond_dataflow::source_group`): each record is decoded once, into
//!   the columns any of them reads, and masked per view; offsets stay per
//!   reader. The records a source rejects do not depend
//!   on the view (every declared column is validated): they go to the
//!   source's one dead-letter topic, `SOURCE.dead-letter`.
//! - SQL's NULL never equals anything: rows whose join key has a NULL never
//!   match (they survive outer joins unmatched).
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use millpond_dataflow::event_time::{Late, Watermark};
use millpond_dataflow::{
    Aggregate, Collection, DeadLetter, Diff, Job, Multiplicity, RecordView, SetAggregate, SetChanges, SetSummary,
    SetUpdates, Sets, raw,
};
use serde::{Deserialize, Serialize};

use crate::decode::{decode_record, decode_record_into, decode_row};
use crate::eval::{eval, holds};
use crate::plan::{
    AggregateCall, AggregateFunction, EventTime, Expr, Input, JoinKind, LateRows, Rel, SortKey, WindowFunction,
};
use crate::sort_key;
use crate::sum::ExactSum;
use crate::value::{OrderedF64, Row, Type, Value};

/// The topic whose one record feeds the FROM-less SELECTs and the default
/// row of global aggregates.
pub const UNIT_TOPIC: &str = "__millpond_unit";

/// The layout of the state that rendered operators keep. Mixed into every
/// reader and operator name, so a build that changes it starts views over
/// instead of misreading their state: bump it with any such change.
pub(crate) const STATE_LAYOUT_VERSION: u64 = 10;

/// A materialized view, bound and ready to render.
#[derive(Clone, Debug)]
pub struct CompiledView {
    pub name: String,
    pub columns: Vec<(String, Type)>,
    pub(crate) rel: Rel,
    /// Names this definition's operators.
    pub fingerprint: u64,
    /// What becomes of the late records of the sources it reads.
    pub(crate) late_rows: LateRows,
}

impl CompiledView {
    /// Names the view's readers (`PREFIX.SOURCE`, ...) and operators (`PREFIX.N`).
    pub(crate) fn prefix(&self) -> String {
        format!("{}.{:016x}", self.name, self.fingerprint.wrapping_add(STATE_LAYOUT_VERSION))
    }
}

/// What a job runs of a catalog: its materialized views, and its sources
/// and tables, whose dead-letter topics the job keeps.
#[derive(Clone, Debug, Default)]
pub struct CompiledCatalog {
    pub views: Vec<CompiledView>,
    pub sources: Vec<CompiledSource>,
    /// Sinks of views into external Kafka clusters (run beside the job:
    /// each follows its view's committed changelog).
    pub sinks: Vec<millpond_dataflow::KafkaSink>,
}

/// A source or table of the catalog, as the job declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledSource {
    pub name: String,
    pub topic: String,
    /// What decides which of its records are rejected: its definition and
    /// the decoder's version (`Job::declare_source`).
    pub verdict: String,
    /// A source of an external Kafka cluster (`topic` is its label).
    pub kafka: Option<millpond_dataflow::KafkaTopic>,
}

/// A row of a view, as stored in its changelog: a JSON object keyed by
/// column name. Ordered by its values.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ViewRow {
    pub values: Row,
    pub names: Arc<[String]>,
}

impl Serialize for ViewRow {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeTuple};
        if serializer.is_human_readable() {
            let mut map = serializer.serialize_map(Some(self.values.len()))?;
            for (name, value) in self.names.iter().zip(&self.values) {
                map.serialize_entry(name, &value.to_json())?;
            }
            map.end()
        } else {
            let mut tuple = serializer.serialize_tuple(2)?;
            tuple.serialize_element(&self.values)?;
            tuple.serialize_element(&*self.names)?;
            tuple.end()
        }
    }
}

impl<'de> Deserialize<'de> for ViewRow {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            // Read back from JSON, types are lost: numbers, text, booleans.
            let map = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
            let (names, values): (Vec<String>, Row) =
                map.into_iter().map(|(k, v)| (k, Value::from_json_untyped(&v))).unzip();
            Ok(ViewRow { values, names: names.into() })
        } else {
            let (values, names): (Row, Vec<String>) = Deserialize::deserialize(deserializer)?;
            Ok(ViewRow { values, names: names.into() })
        }
    }
}

/// Per-view rendering state: the view's own readers, one per source or
/// table it reads, keeping the columns the view reads.
struct Renderer<'s, 'j> {
    job: &'j mut Job<'s>,
    /// Names the view's readers and operators: `VIEW.FINGERPRINT`.
    prefix: String,
    sources: BTreeMap<String, Collection<'s, Row>>,
    /// The view's readers in shared reader groups (see `shared_sources`).
    shared: SharedReads<'s>,
    unit: Option<Collection<'s, Row>>,
    /// Per source or table: which columns the view reads.
    demanded: BTreeMap<String, Vec<bool>>,
    /// Per source or table: how many times the view's plan reads it.
    uses: BTreeMap<String, usize>,
    operators: usize,
    /// Per source with a WATERMARK that the view has read: its watermark.
    watermarks: BTreeMap<String, Watermark<'s>>,
    view: String,
    late_rows: LateRows,
}

/// A source or table a plan reads.
#[derive(Clone, Debug)]
struct Get {
    object: String,
    input: Input,
    columns: Vec<(String, Type)>,
}

impl Get {
    fn topic(&self) -> &str {
        input_topic(&self.input)
    }

    /// Whether its last column is the record's timestamp (`INCLUDE TIMESTAMP`).
    fn stamped(&self) -> bool {
        matches!(self.input, Input::Source { record_timestamp: true, .. })
    }
}

/// A fusible chain: the source and the stages over it, innermost first.
type Fused = (Get, Vec<Stage>);

/// What the last step of a fused source keeps of the row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Finish {
    /// The whole row: columns the view does not read must be NULL.
    Row,
    /// Expressions over the columns the view reads only.
    Columns,
}

/// A stage evaluated inside a source's decode step (see `Renderer::fusible`).
#[derive(Clone, Debug)]
enum Stage {
    Filter(Expr),
    Project(Vec<Expr>),
}

fn count_uses(rel: &Rel, uses: &mut BTreeMap<String, usize>) {
    match rel {
        Rel::Get { object, .. } => *uses.entry(object.clone()).or_default() += 1,
        Rel::Project { input, .. }
        | Rel::Filter { input, .. }
        | Rel::Aggregate { input, .. }
        | Rel::Distinct { input }
        | Rel::TopK { input, .. }
        | Rel::Window { input, .. }
        | Rel::Replicate { input }
        | Rel::Expand { input, .. }
        | Rel::Over { input, .. } => count_uses(input, uses),
        Rel::Join { left, right, .. } | Rel::Lateral { left, right, .. } => {
            count_uses(left, uses);
            count_uses(right, uses);
        }
        Rel::UnionAll { inputs } => inputs.iter().for_each(|i| count_uses(i, uses)),
        Rel::Unit => {}
    }
}

/// Builds every view of `views` in `job` and materializes it.
///
/// Each view reads its sources with readers of its own, named after the view
/// and its definition: a view created after others have run starts from the
/// beginning of the log (the runtime accepts its new state because all its
/// readers are fresh), and never shares state with another definition.
/// `sources` are the catalog's sources and tables: their dead-letter
/// topics are kept even while no view reads them.
pub(crate) fn build(job: &mut Job<'_>, views: &[CompiledView], sources: &[CompiledSource]) {
    for source in sources {
        if let Some(kafka) = &source.kafka {
            job.register_kafka_topic(kafka);
        }
        job.declare_source(&source.name, &source.topic, &source.verdict);
    }
    let plans: Vec<ViewPlan> = views.iter().map(ViewPlan::new).collect();
    let mut shared = shared_sources(job, &plans);
    for (index, (view, plan)) in views.iter().zip(plans).enumerate() {
        let shared = shared.remove(&index).unwrap_or_default();
        let ViewPlan { prefix, demanded, uses, .. } = plan;
        let mut renderer = Renderer {
            job,
            prefix,
            sources: BTreeMap::new(),
            shared,
            unit: None,
            demanded,
            uses,
            operators: 0,
            watermarks: BTreeMap::new(),
            view: view.name.clone(),
            late_rows: view.late_rows,
        };
        let names: Arc<[String]> = view.columns.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>().into();
        let rows = renderer.render(&view.rel);
        let rows = rows.map(move |values| ViewRow { values, names: names.clone() });
        let definition = renderer.prefix.clone();
        renderer.job.materialize_view(&view.name, &definition, multiplicity(view), rows);
    }
}

/// Whether a view holds each row at most once: some columns of it are a
/// key of its relation ([`unique_key`]), and their JSON tells their
/// values apart (a DOUBLE's NaN and infinities are all `null`, a NUMERIC
/// drops trailing zeros, an INTERVAL has many spellings). Such a view is
/// [`Multiplicity::Unique`]: the plan guarantees it, so its index keeps
/// no entry per row.
fn multiplicity(view: &CompiledView) -> Multiplicity {
    let distinct_json = |column: &usize| {
        matches!(
            view.columns[*column].1,
            Type::Bool | Type::Int | Type::Text | Type::Timestamp | Type::Date | Type::Null
        )
    };
    match unique_key(&view.rel) {
        Some(key) if key.iter().all(distinct_json) => Multiplicity::Unique,
        _ => Multiplicity::Any,
    }
}

/// Columns whose values no two rows of `rel` share after any epoch (so each
/// row is held at most once), where the plan shows one: a GROUP BY's group
/// columns, a DISTINCT's columns, kept through filters, top-k's and
/// projections that keep them as they are. Not a global aggregate's: its
/// default row comes from the unit source, whose epoch is not the
/// aggregate's, so the default row may be retracted (covered) an epoch
/// before it is inserted.
fn unique_key(rel: &Rel) -> Option<Vec<usize>> {
    match rel {
        Rel::Aggregate { group, .. } if !group.is_empty() => Some((0..group.len()).collect()),
        Rel::Distinct { input } => Some((0..width(input)).collect()),
        Rel::TopK { input, partition, limit, row_number, input_width, .. } => {
            top_k_key(partition, *limit, *row_number, *input_width).or_else(|| unique_key(input))
        }
        Rel::Filter { input, .. } => unique_key(input),
        Rel::Project { input, exprs } => {
            unique_key(input)?.into_iter().map(|column| exprs.iter().position(|e| *e == Expr::Column(column))).collect()
        }
        Rel::Aggregate { .. }
        | Rel::Get { .. }
        | Rel::Join { .. }
        | Rel::UnionAll { .. }
        | Rel::Window { .. }
        | Rel::Replicate { .. }
        | Rel::Expand { .. }
        | Rel::Lateral { .. }
        | Rel::Over { .. } => None,
        Rel::Unit => None,
    }
}

/// The columns that tell a top-k's rows apart by themselves, where its
/// partition is plain columns: with a limit of one row, the partition
/// alone (one copy of one row each); with a rank, the partition and the
/// rank (a partition's rows are ranked 1, 2, ... once each). Otherwise its rows
/// are some of its input's, told apart as those are (the caller's
/// fallback).
fn top_k_key(partition: &[Expr], limit: Option<usize>, row_number: bool, input_width: usize) -> Option<Vec<usize>> {
    let mut key: Vec<usize> =
        partition.iter().map(|e| if let Expr::Column(c) = e { Some(*c) } else { None }).collect::<Option<_>>()?;
    match (limit, row_number) {
        (Some(1), _) => Some(key),
        (Some(_), true) => {
            key.push(input_width);
            Some(key)
        }
        _ => None,
    }
}

/// What rendering needs of a view before it renders: its names, the columns
/// it reads and how often it reads each source or table.
struct ViewPlan {
    prefix: String,
    demanded: BTreeMap<String, Vec<bool>>,
    uses: BTreeMap<String, usize>,
    /// The append-only sources it reads.
    sources: BTreeMap<String, SourceRead>,
}

impl ViewPlan {
    fn new(view: &CompiledView) -> ViewPlan {
        let mut demanded = BTreeMap::new();
        demand(&view.rel, &vec![true; view.columns.len()], &mut demanded);
        let mut uses = BTreeMap::new();
        count_uses(&view.rel, &mut uses);
        let mut sources = BTreeMap::new();
        append_only_sources(&view.rel, &mut sources);
        ViewPlan { prefix: view.prefix(), demanded, uses, sources }
    }
}

/// An append-only source a view reads: its topic, declared columns, and
/// whether the last is the record's timestamp.
type SourceRead = (String, Vec<(String, Type)>, bool);

fn append_only_sources(rel: &Rel, out: &mut BTreeMap<String, SourceRead>) {
    match rel {
        // A source with a watermark is read apart: its reader judges lateness.
        Rel::Get { object, input: Input::Source { topic, event_time: None, record_timestamp }, columns } => {
            out.insert(object.clone(), (topic.clone(), columns.clone(), *record_timestamp));
        }
        Rel::Get { .. } | Rel::Unit => {}
        Rel::Project { input, .. }
        | Rel::Filter { input, .. }
        | Rel::Aggregate { input, .. }
        | Rel::Distinct { input }
        | Rel::TopK { input, .. }
        | Rel::Window { input, .. }
        | Rel::Replicate { input }
        | Rel::Expand { input, .. }
        | Rel::Over { input, .. } => append_only_sources(input, out),
        Rel::Join { left, right, .. } | Rel::Lateral { left, right, .. } => {
            append_only_sources(left, out);
            append_only_sources(right, out);
        }
        Rel::UnionAll { inputs } => inputs.iter().for_each(|i| append_only_sources(i, out)),
    }
}

/// Per view (by index), the append-only sources it reads through a shared
/// reader group: those that more than one view reads. Each record of such a
/// source is decoded once (into the columns that any of its views reads)
/// and handed to every view's reader; the views' readers, offsets and rows
/// are what they would be apart (see `millpond_dataflow::source_group`).
fn shared_sources<'s>(job: &mut Job<'s>, plans: &[ViewPlan]) -> BTreeMap<usize, SharedReads<'s>> {
    let mut readers: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, plan) in plans.iter().enumerate() {
        for object in plan.sources.keys() {
            readers.entry(object).or_default().push(index);
        }
    }
    let mut shared: BTreeMap<usize, SharedReads<'s>> = BTreeMap::new();
    for (object, views) in readers.into_iter().filter(|(_, views)| views.len() > 1) {
        let (topic, columns, stamped) = plans[views[0]].sources[object].clone();
        let mut wanted = vec![false; columns.len()];
        let names: Vec<String> = views
            .iter()
            .map(|v| {
                let plan = &plans[*v];
                plan.demanded[object].iter().zip(&mut wanted).for_each(|(a, b)| *b |= *a);
                reader_name(&plan.prefix, &plan.demanded, object)
            })
            .collect();
        let decode = move |record: &RecordView<'_>| match record.value {
            Some(value) => decode_record(value, record.timestamp_ms, &columns, &wanted, stamped),
            None => Err("the record has no value (a tombstone in an append-only source)".to_owned()),
        };
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let collections = job.shared_source_of(object, &names, &topic, decode);
        for (view, collection) in views.into_iter().zip(collections) {
            shared.entry(view).or_default().insert(object.to_owned(), collection);
        }
    }
    shared
}

/// A view's readers in reader groups: per source, the shared decoded rows.
type SharedReads<'s> = BTreeMap<String, Collection<'s, Rc<Row>>>;

/// `row` with the columns a view does not read set to NULL (its rows and
/// state depend on its own definition only).
fn masked(row: &[Value], wanted: &[bool]) -> Row {
    row.iter().zip(wanted).map(|(value, want)| if *want { value.clone() } else { Value::Null }).collect()
}

/// A view's reader of `object`: `VIEW.FINGERPRINT.OBJECT` (or a numbered
/// name when that would be too long for a reader name).
fn reader_name(prefix: &str, demanded: &BTreeMap<String, Vec<bool>>, object: &str) -> String {
    let name = format!("{prefix}.{object}");
    if name.len() <= 150 {
        return name;
    }
    let index = demanded.keys().position(|o| o == object).unwrap_or(usize::MAX);
    format!("{prefix}.r{index}")
}

/// The sources and tables a view of plan `rel` (with `width` columns) has a
/// reader of, once rendered: those its plan reads.
pub(crate) fn objects_read(rel: &Rel, width: usize) -> impl Iterator<Item = String> {
    let mut demanded = BTreeMap::new();
    demand(rel, &vec![true; width], &mut demanded);
    demanded.into_keys()
}

/// Marks the columns of each source and table that `rel` reads, given which
/// of its own output columns are needed.
fn demand(rel: &Rel, needed: &[bool], out: &mut BTreeMap<String, Vec<bool>>) {
    let all = |width: usize| vec![true; width];
    match rel {
        Rel::Get { object, input, columns } => {
            let entry = out.entry(object.clone()).or_insert_with(|| vec![false; columns.len()]);
            // Upserted rows are kept whole in the source's state.
            let keep_all = matches!(input, Input::Upsert { .. });
            entry.iter_mut().zip(needed).for_each(|(a, b)| *a |= *b || keep_all);
            // Lateness is judged by the event time column.
            if let Input::Source { event_time: Some(event_time), .. } = input {
                entry[event_time.column] = true;
            }
        }
        Rel::Project { input, exprs } => {
            let mut inner = vec![false; width(input)];
            for (expr, need) in exprs.iter().zip(needed) {
                if *need {
                    expr.visit_columns(&mut |c| inner[c] = true);
                }
            }
            demand(input, &inner, out);
        }
        Rel::Filter { input, predicate } => {
            let mut inner = needed.to_vec();
            predicate.visit_columns(&mut |c| inner[c] = true);
            demand(input, &inner, out);
        }
        Rel::Join { left, right, left_keys, right_keys, left_width, .. } => {
            let mut l = needed[..*left_width].to_vec();
            let mut r = needed[*left_width..].to_vec();
            left_keys.iter().for_each(|k| k.visit_columns(&mut |c| l[c] = true));
            right_keys.iter().for_each(|k| k.visit_columns(&mut |c| r[c] = true));
            demand(left, &l, out);
            demand(right, &r, out);
        }
        Rel::Aggregate { input, group, aggregates } => {
            let mut inner = vec![false; width(input)];
            group.iter().for_each(|g| g.visit_columns(&mut |c| inner[c] = true));
            aggregates.iter().for_each(|a| a.arg.visit_columns(&mut |c| inner[c] = true));
            demand(input, &inner, out);
        }
        // A session's bounds depend on its partition's times only: the other
        // columns count as needed above (a copy of a row is a row of the answer).
        Rel::Over { input, partition, order, calls, input_width }
            if calls.iter().all(|c| matches!(c.function, WindowFunction::Session { .. })) =>
        {
            let mut inner = needed[..*input_width].to_vec();
            let exprs = partition.iter().chain(order.iter().map(|k| &k.expr)).chain(calls.iter().flat_map(|c| &c.args));
            exprs.for_each(|e| e.visit_columns(&mut |c| inner[c] = true));
            demand(input, &inner, out);
        }
        // Whole rows are compared (and kept in state): every column counts.
        Rel::Distinct { input } | Rel::TopK { input, .. } | Rel::Replicate { input } | Rel::Over { input, .. } => {
            demand(input, &all(width(input)), out)
        }
        Rel::UnionAll { inputs } => inputs.iter().for_each(|i| demand(i, needed, out)),
        Rel::Window { input, time_column, .. } => {
            let mut inner = needed[..needed.len() - 2].to_vec();
            inner[*time_column] = true;
            demand(input, &inner, out);
        }
        Rel::Lateral { .. } => unreachable!("a view's LATERAL subqueries are decorrelated"),
        Rel::Expand { input, args, .. } => {
            let mut inner = needed[..width(input)].to_vec();
            args.iter().for_each(|a| a.visit_columns(&mut |c| inner[c] = true));
            demand(input, &inner, out);
        }
        Rel::Unit => {}
    }
}

fn input_topic(input: &Input) -> &str {
    match input {
        Input::Source { topic, .. } | Input::Upsert { topic } => topic,
        Input::View { view } => unreachable!("a view definition inlines view \"{view}\" (plan::Input::View)"),
        Input::System { table } => unreachable!("a view definition reads no system table ({table:?})"),
    }
}

/// The number of columns of a relation's rows.
pub(crate) fn width(rel: &Rel) -> usize {
    match rel {
        Rel::Get { columns, .. } => columns.len(),
        Rel::Project { exprs, .. } => exprs.len(),
        Rel::Filter { input, .. } | Rel::Distinct { input } => width(input),
        Rel::Join { left_width, right_width, .. } | Rel::Lateral { left_width, right_width, .. } => {
            left_width + right_width
        }
        Rel::Aggregate { group, aggregates, .. } => group.len() + aggregates.len(),
        Rel::UnionAll { inputs } => inputs.first().map_or(0, width),
        Rel::TopK { input_width, row_number, .. } => input_width + usize::from(*row_number),
        Rel::Window { input, .. } => width(input) + 2,
        Rel::Replicate { input } => width(input) - 1,
        Rel::Expand { input, function, .. } => width(input) + function.width(),
        Rel::Over { input_width, calls, .. } => input_width + calls.len(),
        Rel::Unit => 0,
    }
}

/// A key (of a group, a join or a top-k partition) or the arguments of a
/// group's aggregates: one value held inline — the common case, with no
/// allocation and a cheap comparison — or several.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) enum Tuple {
    One(Value),
    /// Boxed, not a `Vec`: with no capacity field it fits beside `One`'s
    /// tag, and a tuple is as small as a value (24 bytes).
    Many(Box<[Value]>),
}

const NULL: Value = Value::Null;

// Keys and arguments travel through every stage and sort: keep them small.
const _: () = assert!(std::mem::size_of::<Tuple>() == 24);

/// Hashes only the values (which worker owns a key): equal tuples hash equally.
impl std::hash::Hash for Tuple {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Tuple::One(value) => value.hash(state),
            Tuple::Many(values) => values.hash(state),
        }
    }
}

impl Tuple {
    pub(crate) fn eval(exprs: &[Expr], row: &[Value]) -> Tuple {
        match exprs {
            [expr] => Tuple::One(eval(expr, row)),
            exprs => Tuple::Many(exprs.iter().map(|e| eval(e, row)).collect()),
        }
    }
    fn get(&self, index: usize) -> &Value {
        match self {
            Tuple::One(value) if index == 0 => value,
            Tuple::Many(values) => values.get(index).unwrap_or(&NULL),
            Tuple::One(_) => &NULL,
        }
    }
    pub(crate) fn has_null(&self) -> bool {
        match self {
            Tuple::One(value) => value.is_null(),
            Tuple::Many(values) => values.iter().any(Value::is_null),
        }
    }
    pub(crate) fn into_row(self) -> Row {
        match self {
            Tuple::One(value) => vec![value],
            Tuple::Many(values) => values.into_vec(),
        }
    }
}

/// A decoded row through a view's fused stages, then `finish`: `None` when
/// a filter drops it. A row that holds columns the view does not read (a
/// shared reader's) is masked to `mask` unless a projection replaced it.
fn apply_stages<T>(
    stages: &[Stage],
    row: &[Value],
    mask: Option<&[bool]>,
    finish: impl Fn(&[Value]) -> T,
) -> Option<T> {
    let mut projected: Option<Row> = None;
    for stage in stages {
        let current: &[Value] = projected.as_deref().unwrap_or(row);
        match stage {
            Stage::Filter(predicate) => {
                if !holds(predicate, current) {
                    return None;
                }
            }
            Stage::Project(exprs) => projected = Some(eval_all(exprs, current)),
        }
    }
    match (projected, mask) {
        (Some(projected), _) => Some(finish(&projected)),
        (None, Some(mask)) => Some(finish(&masked(row, mask))),
        (None, None) => Some(finish(row)),
    }
}

fn eval_all(exprs: &[Expr], row: &[Value]) -> Row {
    exprs.iter().map(|e| eval(e, row)).collect()
}

impl<'s> Renderer<'s, '_> {
    fn operator_name(&mut self) -> String {
        self.operators += 1;
        format!("{}.{}", self.prefix, self.operators)
    }

    /// The view's reader of `object`: `VIEW.FINGERPRINT.OBJECT` (or a
    /// numbered name when that would be too long for a reader name).
    fn reader_name(&self, object: &str) -> String {
        reader_name(&self.prefix, &self.demanded, object)
    }

    fn source(&mut self, get: &Get) -> Collection<'s, Row> {
        if let Some(collection) = self.sources.get(&get.object) {
            return collection.clone();
        }
        let (object, topic) = (get.object.as_str(), get.topic());
        let reader = self.reader_name(object);
        let wanted: Rc<[bool]> = self.demanded.get(object).cloned().unwrap_or_default().into();
        let columns: Rc<[(String, Type)]> = get.columns.clone().into();
        let collection = match &get.input {
            Input::Source { event_time: Some(event_time), .. } => self.on_time(get, *event_time),
            Input::Source { .. } if self.shared.contains_key(object) => {
                let everything = !wanted.contains(&false);
                self.shared[object]
                    .clone()
                    .map(move |row: Rc<Row>| if everything { (*row).clone() } else { masked(&row, &wanted) })
            }
            Input::Source { .. } => {
                let stamped = get.stamped();
                let decode = move |record: &RecordView<'_>| match record.value {
                    Some(value) => decode_record(value, record.timestamp_ms, &columns, &wanted, stamped),
                    None => Err("the record has no value (a tombstone in an append-only source)".to_owned()),
                };
                self.job.source_of(object, &reader, topic, decode)
            }
            Input::View { .. } => unreachable!("a view definition reads no view's snapshot (plan::Input::View)"),
            Input::System { .. } => unreachable!("a view definition reads no system table (plan::Input)"),
            Input::Upsert { .. } => {
                let decode_value = move |value: &[u8]| decode_row(value, &columns, &wanted);
                self.job
                    .upsert_source_of(
                        object,
                        &reader,
                        &format!("{reader}.upsert"),
                        topic,
                        |key: &[u8]| Ok(key.to_vec()),
                        decode_value,
                    )
                    .map(|(_key, row): (Vec<u8>, Row)| row)
            }
        };
        self.sources.insert(object.to_owned(), collection.clone());
        collection
    }

    /// A chain of filters and projections over an append-only source that
    /// the view reads once: its stages run inside the source's decode step,
    /// on a reused row, so a record filtered out or reduced to a key costs
    /// no allocation. Returns the source and the stages, innermost first.
    fn fusible(&self, rel: &Rel) -> Option<Fused> {
        match rel {
            Rel::Get { object, input: input @ Input::Source { event_time: None, .. }, columns } => {
                (self.uses.get(object).copied() == Some(1)).then(|| {
                    (Get { object: object.clone(), input: input.clone(), columns: columns.clone() }, Vec::new())
                })
            }
            Rel::Filter { input, predicate } => {
                let (source, mut stages) = self.fusible(input)?;
                stages.push(Stage::Filter(predicate.clone()));
                Some((source, stages))
            }
            Rel::Project { input, exprs } => {
                let (source, mut stages) = self.fusible(input)?;
                stages.push(Stage::Project(exprs.clone()));
                Some((source, stages))
            }
            _ => None,
        }
    }

    /// Reads `input` with its stages applied, then `finish` on each row that
    /// passes; `reads` says what `finish` keeps of the row.
    fn fused_source<T: Clone + 'static>(
        &mut self,
        get: &Get,
        stages: Vec<Stage>,
        reads: Finish,
        finish: impl Fn(&[Value]) -> T + 'static,
    ) -> Collection<'s, T> {
        let (object, topic) = (get.object.as_str(), get.topic());
        let reader = self.reader_name(object);
        let wanted: Rc<[bool]> = self.demanded.get(object).cloned().unwrap_or_default().into();
        let columns: Rc<[(String, Type)]> = get.columns.clone().into();
        if let Some(shared) = self.shared.get(object) {
            let mask = (reads == Finish::Row && wanted.contains(&false)).then_some(wanted);
            return shared.clone().flat_map(move |row: Rc<Row>| apply_stages(&stages, &row, mask.as_deref(), &finish));
        }
        let filters = stages.iter().any(|s| matches!(s, Stage::Filter(_)));
        let stamped = get.stamped();
        let scratch = std::cell::RefCell::new(Row::new());
        // Applies the stages to a decoded row: `None` when a filter drops it.
        let apply = move |record: &RecordView<'_>| -> Result<Option<T>, String> {
            let Some(value) = record.value else {
                return Err("the record has no value (a tombstone in an append-only source)".to_owned());
            };
            let mut row = scratch.borrow_mut();
            decode_record_into(value, record.timestamp_ms, &columns, &wanted, stamped, &mut row)?;
            Ok(apply_stages(&stages, &row, None, &finish))
        };
        if filters {
            self.job.source_of(object, &reader, topic, apply).flat_map(|row: Option<T>| row)
        } else {
            // Every record yields a row: no Option layer, no extra pass over the data.
            let decode = move |record: &RecordView<'_>| Ok(apply(record)?.expect("only a filter drops a row"));
            self.job.source_of(object, &reader, topic, decode)
        }
    }

    /// The records of a source with a WATERMARK that are on time
    /// (`millpond_dataflow::event_time`); its late ones are dropped or sent
    /// to its dead-letter topic, as the view says. Keeps the watermark for
    /// the windows over the source.
    fn on_time(&mut self, get: &Get, event_time: EventTime) -> Collection<'s, Row> {
        let (object, topic) = (get.object.as_str(), get.topic());
        let reader = self.reader_name(object);
        let wanted: Rc<[bool]> = self.demanded.get(object).cloned().unwrap_or_default().into();
        let columns: Rc<[(String, Type)]> = get.columns.clone().into();
        let stamped = get.stamped();
        let decode = move |partition: u32, record: &RecordView<'_>| match record.value {
            Some(value) => {
                let row = decode_record(value, record.timestamp_ms, &columns, &wanted, stamped)?;
                Ok(((partition, record.offset), row))
            }
            None => Err("the record has no value (a tombstone in an append-only source)".to_owned()),
        };
        let positioned = self.job.source_at(object, &reader, topic, decode);
        let name = self.operator_name();
        let column = event_time.column;
        let time = move |row: &Row| match row[column] {
            Value::Timestamp(t) => Some(t),
            _ => None,
        };
        let split = positioned.event_time(&name, event_time.delay_micros, time);
        if self.late_rows == LateRows::DeadLetter {
            let (topic_name, view) = (topic.to_owned(), self.view.clone());
            let names: Vec<String> = get.columns.iter().map(|(n, _)| n.clone()).collect();
            let column_name = names[column].clone();
            let letters = split.late.map(move |late: Late<Row>| {
                let error = format!(
                    "late for view {view}: {column_name} {} is below {} (the partition's greatest on-time {column_name} \
                     minus the watermark's delay)",
                    Value::Timestamp(late.time),
                    Value::Timestamp(late.bound)
                );
                let row: serde_json::Map<String, serde_json::Value> =
                    names.iter().zip(&late.record).map(|(n, v)| (n.clone(), v.to_json())).collect();
                let value = serde_json::to_vec(&row).expect("a JSON object serializes");
                Box::new(DeadLetter {
                    topic: topic_name.clone(),
                    partition: late.partition,
                    offset: late.offset,
                    timestamp_ms: late.time.div_euclid(1000),
                    error,
                    key: None,
                    value: Some(value),
                    truncated: None,
                })
            });
            self.job.dead_letters(object, topic, letters);
        }
        self.watermarks.insert(object.to_owned(), split.watermark);
        split.on_time
    }

    fn unit(&mut self) -> Collection<'s, Row> {
        if self.unit.is_none() {
            let reader = format!("{}.unit", self.prefix);
            let unit = self.job.source_named(&reader, UNIT_TOPIC, raw()).map(|_| Row::new());
            self.unit = Some(unit);
        }
        self.unit.clone().expect("set above")
    }

    fn render(&mut self, rel: &Rel) -> Collection<'s, Row> {
        match rel {
            Rel::Get { object, input, columns } => {
                self.source(&Get { object: object.clone(), input: input.clone(), columns: columns.clone() })
            }
            Rel::Project { .. } | Rel::Filter { .. } if self.fusible(rel).is_some() => {
                let (get, stages) = self.fusible(rel).expect("checked");
                self.fused_source(&get, stages, Finish::Row, <[Value]>::to_vec)
            }
            Rel::Project { input, exprs } => {
                let exprs = exprs.clone();
                self.render(input).map(move |row| eval_all(&exprs, &row))
            }
            Rel::Filter { input, predicate } => {
                let predicate = predicate.clone();
                self.render(input).filter(move |row| holds(&predicate, row))
            }
            Rel::Join { kind, left, right, left_keys, right_keys, left_width, right_width } => {
                // An inner join of windows that close deletes each window's rows once closed.
                let closes = closing_join(left, right, left_keys, right_keys).filter(|_| *kind == JoinKind::Inner);
                let l = self.render(left);
                let r = self.render(right);
                let keys = (left_keys.clone(), right_keys.clone());
                self.join(*kind, l, r, keys, closes, *left_width, *right_width)
            }
            Rel::Aggregate { input, group, aggregates } => {
                let (aggregate, args) = SqlAggregates::new(aggregates, append_only(input));
                let closes = closing_aggregate(input, group, aggregates);
                let group = group.clone();
                let key_and_args = move |row: &[Value]| (Tuple::eval(&group, row), Tuple::eval(&args, row));
                let keyed = match self.fusible(input) {
                    Some((get, stages)) => self.fused_source(&get, stages, Finish::Columns, key_and_args),
                    None => self.render(input).map(move |row| key_and_args(&row)),
                };
                let name = self.operator_name();
                let result = match closes {
                    // Each window once, final, when the watermark passes its end.
                    Some((object, column, offset)) => {
                        let watermark = self.watermarks[&object].clone();
                        keyed.aggregate_closing(&name, aggregate, &watermark, window_end_at(column, offset))
                    }
                    None if aggregate.keeps_sets() => keyed.aggregate_sets(&name, aggregate),
                    None => keyed.aggregate(&name, aggregate),
                };
                let result = result.map(|(key, values): (Tuple, Row)| {
                    let mut row = key.into_row();
                    row.extend(values);
                    row
                });
                if let Rel::Aggregate { group, .. } = rel
                    && group.is_empty()
                {
                    // SQL's global aggregate has a row even over no input:
                    // result + default - (default once the result has a row).
                    let default = default_row(aggregates);
                    let fallback = default.clone();
                    let once = self.unit().map(move |_| default.clone());
                    let covered = result.clone().map(move |_| fallback.clone()).negate();
                    return result.concat(once).concat(covered);
                }
                result
            }
            Rel::Distinct { input } => {
                let name = self.operator_name();
                self.render(input).distinct(&name)
            }
            Rel::UnionAll { inputs } => {
                let mut rendered = inputs.iter().map(|i| self.render(i));
                let first = rendered.next().expect("a union has inputs");
                rendered.fold(first, |acc, c| acc.concat(c))
            }
            Rel::TopK { input, partition, order, limit, row_number, .. } => {
                let inserts_only = append_only(input);
                let input = self.render(input);
                let name = self.operator_name();
                let partition = partition.clone();
                let keyed = input.map(move |row| (Tuple::eval(&partition, &row), row));
                let order = order.clone();
                // Without a limit (every row's ROW_NUMBER), each changed partition is read whole.
                let limit = limit.unwrap_or(usize::MAX);
                let row_number = *row_number;
                let key_order = order.clone();
                let order_key = move |row: &Row, out: &mut Vec<u8>| {
                    sort_key::order_key(&key_order, row, out);
                    sort_key::row_key(row, out);
                };
                keyed
                    .top_k_by(
                        &name,
                        limit,
                        inserts_only,
                        order_key,
                        move |_key, first: &[(Row, Diff)], out: &mut Vec<(Row, Diff)>| {
                            top_k(first, &order, limit, row_number, out)
                        },
                    )
                    .map(|(_key, row): (Tuple, Row)| row)
            }
            Rel::Window { input, time_column, slide_micros, size_micros, cumulative } => {
                let (column, slide, size, cumulative) = (*time_column, *slide_micros, *size_micros, *cumulative);
                self.render(input).flat_map(move |row: Row| windowed(row, column, slide, size, cumulative))
            }
            Rel::Over { input, partition, .. } if closing_session(rel).is_some() => {
                // Each session once, final, when the watermark passes its end.
                let (object, gap, column) = closing_session(rel).expect("checked");
                let name = self.operator_name();
                let partition = partition.clone();
                let keyed = self.render(input).map(move |row| (Tuple::eval(&partition, &row), row));
                let time = move |row: &Row| match row.get(column) {
                    Some(Value::Timestamp(t)) => Some(*t),
                    _ => None,
                };
                let watermark = self.watermarks[&object].clone();
                keyed.sessions_closing(&name, gap, &watermark, time).map(|(mut row, (start, end)): (Row, _)| {
                    row.extend([Value::Timestamp(start), Value::Timestamp(end)]);
                    row
                })
            }
            Rel::Over { input, partition, order, calls, .. } => {
                let name = self.operator_name();
                let partition = partition.clone();
                let keyed = self.render(input).map(move |row| (Tuple::eval(&partition, &row), row));
                let (order, key_order, calls) = (order.clone(), order.clone(), calls.clone());
                let order_key = move |row: &Row, out: &mut Vec<u8>| {
                    sort_key::order_key(&key_order, row, out);
                    sort_key::row_key(row, out);
                };
                // Every row of a changed partition is read: a window sees it whole.
                keyed
                    .top_k_by(&name, usize::MAX, false, order_key, move |_key, rows: &[(Row, Diff)], out| {
                        crate::over::over(rows, &order, &calls, out)
                    })
                    .map(|(_key, row): (Tuple, Row)| row)
            }
            Rel::Replicate { input } => self.render(input).explode(|mut row: Row| {
                let copies = replicas(&mut row);
                std::iter::once((row, copies as Diff))
            }),
            Rel::Expand { input, function, args, outer, .. } => {
                // A call's error expands the row to no rows: one bad row
                // never stops a view (`table_function`).
                let (function, args, outer) = (*function, args.clone(), *outer);
                self.render(input).explode(move |row: Row| {
                    let rows = crate::table_function::expand(function, &args, outer, &row);
                    rows.unwrap_or_else(|_| crate::table_function::expand_none(function, outer, &row))
                        .into_iter()
                        .map(|row| (row, 1 as Diff))
                })
            }
            Rel::Lateral { .. } => unreachable!("a view's LATERAL subqueries are decorrelated"),
            Rel::Unit => self.unit(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn join(
        &mut self,
        kind: JoinKind,
        left: Collection<'s, Row>,
        right: Collection<'s, Row>,
        (left_keys, right_keys): (Vec<Expr>, Vec<Expr>),
        closes: Option<(Vec<String>, usize, i64)>,
        left_width: usize,
        right_width: usize,
    ) -> Collection<'s, Row> {
        let keyed = |c: Collection<'s, Row>, keys: Vec<Expr>| c.map(move |row| (Tuple::eval(&keys, &row), row));
        let has_null = |(key, _): &(Tuple, Row)| key.has_null();
        let l = keyed(left, left_keys);
        let r = keyed(right, right_keys);
        let r_matchable = r.clone().filter(move |kr| !has_null(kr));
        let concat_rows = |(_, (mut l, r)): (Tuple, (Row, Row))| {
            l.extend(r);
            l
        };
        let pad_right = move |mut l: Row| {
            l.extend(std::iter::repeat_n(Value::Null, right_width));
            l
        };
        let pad_left = move |r: Row| {
            let mut row: Row = std::iter::repeat_n(Value::Null, left_width).collect();
            row.extend(r);
            row
        };
        match kind {
            JoinKind::Inner => {
                let name = self.operator_name();
                let l_matchable = l.filter(move |kl| !has_null(kl));
                match closes {
                    Some((objects, at, offset)) => {
                        let watermarks: Vec<Watermark<'s>> =
                            objects.iter().map(|o| self.watermarks[o].clone()).collect();
                        let watermarks: Vec<&Watermark<'s>> = watermarks.iter().collect();
                        l_matchable
                            .join_closing(r_matchable, &name, &watermarks, window_end_at(at, offset))
                            .map(concat_rows)
                    }
                    None => l_matchable.join(&name, r_matchable).map(concat_rows),
                }
            }
            JoinKind::Left | JoinKind::Full => {
                let l_null = l.clone().filter(has_null).map(move |(_, row)| pad_right(row));
                let l_matchable = l.filter(move |kl| !has_null(kl));
                let name = self.operator_name();
                let left_side = l_matchable
                    .clone()
                    .left_join(&name, r_matchable.clone())
                    .map(move |(_, (mut l, r)): (Tuple, (Row, Option<Row>))| match r {
                        Some(r) => {
                            l.extend(r);
                            l
                        }
                        None => pad_right(l),
                    })
                    .concat(l_null);
                if kind == JoinKind::Left {
                    return left_side;
                }
                // FULL: also the right rows whose key no left row has.
                let distinct_name = self.operator_name();
                let left_keys = l_matchable.map(|(key, _)| key).distinct(&distinct_name).map(|key| (key, ()));
                let semi_name = self.operator_name();
                let matched =
                    r_matchable.clone().join(&semi_name, left_keys).map(|(_, (row, ())): (Tuple, (Row, ()))| row);
                let unmatched = r.map(|(_, row)| row).concat(matched.negate()).map(pad_left);
                left_side.concat(unmatched)
            }
        }
    }
}

/// `row` once per window that contains its time column, with window_start
/// and window_end appended; a NULL time is in no window. A HOP's windows are
/// `size` long, one starting every `slide` (a TUMBLE's slide is its size);
/// with `cumulative` (CUMULATE), the windows of the `size`-long period the
/// time is in that start with the period and end every `slide` after its
/// start, those ending after the time.
pub(crate) fn windowed(row: Row, column: usize, slide: i64, size: i64, cumulative: bool) -> impl Iterator<Item = Row> {
    let bounds: Vec<(i64, i64)> = match (row[column].clone(), cumulative) {
        (Value::Timestamp(t), false) => {
            let last = t.div_euclid(slide) * slide;
            (0..size / slide).rev().map(|i| (last - i * slide, (last - i * slide).saturating_add(size))).collect()
        }
        (Value::Timestamp(t), true) => {
            let start = t.div_euclid(size) * size;
            let first = (t - start) / slide + 1;
            (first..=size / slide).map(|k| (start, start.saturating_add(k * slide))).collect()
        }
        _ => Vec::new(),
    };
    bounds.into_iter().map(move |(start, end)| {
        let mut out = row.clone();
        out.push(Value::Timestamp(start));
        out.push(Value::Timestamp(end));
        out
    })
}

/// Where a GROUP BY over `input` closes its groups: the source whose
/// watermark closes them, the group column that holds a window's end (or
/// start), and what to add to that column for the window's end. Only a
/// TUMBLE or HOP over a source's WATERMARK column, through filters and
/// projections that keep the columns, closes.
fn closing(input: &Rel, group: &[Expr]) -> Option<(String, usize, i64)> {
    group.iter().enumerate().find_map(|(g, expr)| match expr {
        Expr::Column(c) => window_bound(input, *c).map(|(object, offset)| (object, g, offset)),
        _ => None,
    })
}

/// A key's closing time: its column `at` (a window bound) plus `offset`;
/// a key without a TIMESTAMP there never closes.
fn window_end_at(at: usize, offset: i64) -> impl Fn(&Tuple) -> i64 + 'static {
    move |key: &Tuple| match key.get(at) {
        Value::Timestamp(t) => t.saturating_add(offset),
        _ => i64::MAX,
    }
}

/// [`closing`], when the aggregates keep no value sets (those are
/// maintained as without a watermark).
fn closing_aggregate(input: &Rel, group: &[Expr], aggregates: &[AggregateCall]) -> Option<(String, usize, i64)> {
    closing(input, group).filter(|_| !SqlAggregates::new(aggregates, append_only(input)).0.keeps_sets())
}

/// Where an inner join of `left` and `right` on the keys closes its keys:
/// when a pair of key columns are the same bound of windows that close
/// (each side's `window_bound`) and neither input retracts. The sources
/// whose watermarks close them (each once), the key's index, and what to
/// add to its value for the window's end (the later of the two sides').
fn closing_join(left: &Rel, right: &Rel, left_keys: &[Expr], right_keys: &[Expr]) -> Option<(Vec<String>, usize, i64)> {
    if !append_only(left) || !append_only(right) {
        return None;
    }
    left_keys.iter().zip(right_keys).enumerate().find_map(|(i, pair)| match pair {
        (Expr::Column(a), Expr::Column(b)) => {
            let ((l, l_offset), (r, r_offset)) = (window_bound(left, *a)?, window_bound(right, *b)?);
            let objects = if l == r { vec![l] } else { vec![l, r] };
            Some((objects, i, l_offset.max(r_offset)))
        }
        _ => None,
    })
}

/// When column `c` of `rel` is a window's start or end over a watermarked
/// source's time column: the source, and the window's end minus the column.
fn window_bound(rel: &Rel, c: usize) -> Option<(String, i64)> {
    match rel {
        // A group column of windows that close (their results final).
        Rel::Aggregate { input, group, aggregates } if closing_aggregate(input, group, aggregates).is_some() => {
            match group.get(c)? {
                Expr::Column(g) => window_bound(input, *g),
                _ => None,
            }
        }
        Rel::Filter { input, .. } => window_bound(input, c),
        Rel::Project { input, exprs } => match exprs.get(c)? {
            Expr::Column(i) => window_bound(input, *i),
            _ => None,
        },
        // A closing session's end; its start is not its end minus a constant.
        Rel::Over { input_width, .. } if c == input_width + 1 => closing_session(rel).map(|(object, ..)| (object, 0)),
        Rel::Window { input, time_column, size_micros, cumulative, .. } => {
            // A cumulating window's end is not its start plus a constant.
            let offset = match c.checked_sub(width(input))? {
                0 if !cumulative => *size_micros,
                1 => 0,
                _ => return None,
            };
            Some((event_time_source(input, *time_column)?, offset))
        }
        _ => None,
    }
}

/// When `rel` is a `SESSION(...)` over a watermarked source's time column
/// (its two calls, the session's start and end): the source, the gap and
/// the time column. Such a SESSION closes: it emits each session once,
/// when the watermark passes its end.
fn closing_session(rel: &Rel) -> Option<(String, i64, usize)> {
    let Rel::Over { input, calls, .. } = rel else { return None };
    let [start, end] = calls.as_slice() else { return None };
    let (WindowFunction::Session { end: false, gap_micros }, WindowFunction::Session { end: true, gap_micros: same }) =
        (start.function, end.function)
    else {
        return None;
    };
    let [Expr::Column(column)] = start.args.as_slice() else { return None };
    if gap_micros != same || end.args != start.args {
        return None;
    }
    event_time_source(input, *column).map(|object| (object, gap_micros, *column))
}

/// The watermarked source whose time column column `c` of `rel` is.
fn event_time_source(rel: &Rel, c: usize) -> Option<String> {
    match rel {
        Rel::Filter { input, .. } => event_time_source(input, c),
        Rel::Project { input, exprs } => match exprs.get(c)? {
            Expr::Column(i) => event_time_source(input, *i),
            _ => None,
        },
        Rel::Get { object, input: Input::Source { event_time: Some(event_time), .. }, .. } => {
            (event_time.column == c).then(|| object.clone())
        }
        _ => None,
    }
}

/// Takes a `Rel::Replicate` row's last column, its number of copies.
pub(crate) fn replicas(row: &mut Row) -> i64 {
    match row.pop() {
        Some(Value::Int(copies)) if copies >= 1 => copies,
        other => panic!("a replicated row's count is an INT of at least 1, not {other:?}"),
    }
}

/// The first `limit` rows by `order` (ties broken by the whole row), with
/// their rank appended when `row_number`: rows are ordered by their
/// [`sort_key`](crate::sort_key)s, as the top-k's state keeps them.
pub(crate) fn top_k(
    rows: &[(Row, Diff)],
    order: &[SortKey],
    limit: usize,
    row_number: bool,
    out: &mut Vec<(Row, Diff)>,
) {
    let mut sorted: Vec<(Vec<u8>, &Row, Diff)> = rows
        .iter()
        .filter(|(_, count)| *count > 0)
        .map(|(row, count)| (top_k_order_key(order, row), row, *count))
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rank = 0usize;
    for (_, row, count) in sorted {
        if rank >= limit {
            break;
        }
        if row_number {
            for _ in 0..count {
                if rank >= limit {
                    break;
                }
                rank += 1;
                let mut ranked = row.clone();
                ranked.push(Value::Int(rank as i64));
                out.push((ranked, 1));
            }
        } else {
            let take = (count as usize).min(limit - rank);
            rank += take;
            out.push((row.clone(), take as Diff));
        }
    }
}

/// A top-k's order of rows: the ORDER BY key, then the whole row.
fn top_k_order_key(order: &[SortKey], row: &[Value]) -> Vec<u8> {
    let mut key = Vec::new();
    sort_key::order_key(order, row, &mut key);
    sort_key::row_key(row, &mut key);
    key
}

/// What a global aggregate shows over no rows: COUNT 0, the rest NULL.
pub(crate) fn default_row(aggregates: &[AggregateCall]) -> Row {
    aggregates
        .iter()
        .map(|a| match a.func {
            AggregateFunction::CountRows | AggregateFunction::Count => Value::Int(0),
            _ => Value::Null,
        })
        .collect()
}

/// SQL's aggregates over a group, folded under insertions and retractions.
pub(crate) struct SqlAggregates {
    calls: Vec<AggregateCall>,
    /// Per call, which argument of the input tuple it reads (none for COUNT(*)).
    arg_index: Vec<Option<usize>>,
    /// The input only ever inserts ([`append_only`]): MIN and MAX keep the
    /// extreme only, not the multiset a retraction would need.
    append_only: bool,
    /// Per call, its set when it keeps one (MIN and MAX under retractions,
    /// COUNT(DISTINCT)): rendered with `aggregate_sets`, one state entry
    /// per value once large.
    set_index: Vec<Option<usize>>,
}

impl SqlAggregates {
    /// The aggregates of `calls`, and the argument expressions they read:
    /// each distinct argument is evaluated once (SUM(x) and MAX(x) share x;
    /// COUNT(*) has none).
    pub(crate) fn new(calls: &[AggregateCall], append_only: bool) -> (SqlAggregates, Vec<Expr>) {
        let mut args: Vec<Expr> = Vec::new();
        let arg_index: Vec<Option<usize>> = calls
            .iter()
            .map(|a| {
                (a.func != AggregateFunction::CountRows).then(|| {
                    args.iter().position(|e| *e == a.arg).unwrap_or_else(|| {
                        args.push(a.arg.clone());
                        args.len() - 1
                    })
                })
            })
            .collect();
        let mut sets = 0;
        let set_index = calls
            .iter()
            .map(|call| {
                let keeps_set = match call.func {
                    AggregateFunction::Min | AggregateFunction::Max => !append_only || call.distinct,
                    AggregateFunction::Count => call.distinct,
                    _ => false,
                };
                keeps_set.then(|| {
                    sets += 1;
                    sets - 1
                })
            })
            .collect();
        (SqlAggregates { calls: calls.to_vec(), arg_index, append_only, set_index }, args)
    }

    /// Folds `diff` copies of `value` into one call's accumulator.
    fn fold(&self, call: &AggregateCall, acc: &mut Accumulator, value: &Value, diff: Diff) {
        let diff64 = diff as i64;
        let counts_row = call.func == AggregateFunction::CountRows;
        if value.is_null() && !counts_row {
            return;
        }
        match call.func {
            AggregateFunction::CountRows => bump_count(acc, diff64),
            AggregateFunction::Count if !call.distinct => bump_count(acc, diff64),
            AggregateFunction::Min | AggregateFunction::Max if self.append_only && !call.distinct => {
                assert!(diff > 0, "an append-only input retracted a row (diff {diff})");
                keep_extreme(acc, value, call.func == AggregateFunction::Max);
            }
            AggregateFunction::Count | AggregateFunction::Min | AggregateFunction::Max => match int_key(value) {
                Some(key) => {
                    if !matches!(acc, Accumulator::IntValues(_)) {
                        *acc = Accumulator::IntValues(BTreeMap::new());
                    }
                    if let Accumulator::IntValues(values) = acc {
                        add_to_multiset(values, key, diff64);
                    }
                }
                None => {
                    if !matches!(acc, Accumulator::Values(_)) {
                        *acc = Accumulator::Values(BTreeMap::new());
                    }
                    if let Accumulator::Values(values) = acc {
                        add_to_multiset(values, value.clone(), diff64);
                    }
                }
            },
            AggregateFunction::StringAgg | AggregateFunction::StringAggOrdered | AggregateFunction::ArrayAgg => {
                if !matches!(acc, Accumulator::Values(_)) {
                    *acc = Accumulator::Values(BTreeMap::new());
                }
                if let Accumulator::Values(values) = acc {
                    add_to_multiset(values, value.clone(), diff64);
                }
            }
            AggregateFunction::Sum | AggregateFunction::Avg => match value {
                Value::Double(x) => add_float(acc, x.0, diff64),
                other => {
                    let units = match other {
                        Value::Int(i) => *i as i128,
                        Value::Decimal(d) => d.get(),
                        _ => return,
                    };
                    if !matches!(acc, Accumulator::Sum { .. }) {
                        *acc = Accumulator::Sum { sum: ExactSum::default(), count: 0 };
                    }
                    if let Accumulator::Sum { sum, count } = acc {
                        sum.add_product(units, diff64);
                        *count += diff64;
                    }
                }
            },
        }
    }

    /// Whether any call keeps a set of values.
    pub(crate) fn keeps_sets(&self) -> bool {
        self.set_index.iter().any(Option::is_some)
    }

    /// Each call's argument with the call, its accumulator and its set.
    fn each<'a>(
        &'a self,
        state: &'a mut [Accumulator],
        args: &'a Tuple,
    ) -> impl Iterator<Item = (&'a AggregateCall, &'a mut Accumulator, &'a Value, Option<usize>)> + 'a {
        self.calls
            .iter()
            .zip(state.iter_mut())
            .zip(&self.arg_index)
            .zip(&self.set_index)
            .map(move |(((call, acc), index), set)| (call, acc, index.map_or(&NULL, |i| args.get(i)), *set))
    }
}

impl SetAggregate<Tuple> for SqlAggregates {
    type State = Vec<Accumulator>;
    type Item = Value;
    type Output = Row;

    fn sets(&self) -> usize {
        self.set_index.iter().flatten().count()
    }

    fn update(&self, state: &mut Vec<Accumulator>, args: &Tuple, diff: Diff, changes: &mut SetChanges<Value>) {
        if state.is_empty() {
            state.resize(self.calls.len(), Accumulator::Empty);
        }
        for (call, acc, value, set) in self.each(state, args) {
            match set {
                // MAX's set is ordered greatest first: its first is the maximum.
                Some(set) if !value.is_null() => {
                    let descending = call.func == AggregateFunction::Max;
                    changes.add(set, value, |out| sort_key::value_key(value, descending, out), diff);
                }
                Some(_) => {}
                None => self.fold(call, acc, value, diff),
            }
        }
        if state.iter().all(Accumulator::is_zero) {
            state.clear();
        }
    }

    fn output(&self, _count: i64, state: &Vec<Accumulator>, sets: &[SetSummary<Value>]) -> Row {
        let empty = Accumulator::Empty;
        self.calls
            .iter()
            .enumerate()
            .map(|(i, call)| match self.set_index[i] {
                Some(set) if call.func == AggregateFunction::Count => Value::Int(sets[set].distinct as i64),
                Some(set) => sets[set].first.clone().unwrap_or(Value::Null),
                None => output(call, state.get(i).unwrap_or(&empty)),
            })
            .collect()
    }
}

/// Fixed-point scale of DOUBLE sums: exact under retraction (a float sum
/// is not), to 2^-32.
const FLOAT_SCALE: f64 = 4_294_967_296.0;

/// One aggregate's state. Invariant: a function of the multiset of values
/// folded in, so retracting a value undoes adding it exactly.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) enum Accumulator {
    #[default]
    Empty,
    Count(i64),
    /// Sum of integers or decimal units (exact: a sum past `i128` is an
    /// overflow, NULL), and the number of non-NULL values.
    Sum {
        sum: ExactSum,
        count: i64,
    },
    /// Sum of doubles in fixed point; NaN, +inf and -inf counted apart.
    FloatSum {
        fixed: i128,
        count: i64,
        nan: i64,
        positive_infinity: i64,
        negative_infinity: i64,
    },
    /// The multiset of non-NULL values: MIN, MAX, COUNT(DISTINCT).
    Values(BTreeMap<Value, i64>),
    /// The same for integer-like values, kept as `i64` (smaller state, faster
    /// updates): see [`int_key`].
    IntValues(BTreeMap<i64, i64>),
    /// MIN or MAX over an append-only input (nothing is ever retracted, so
    /// the extreme is all there is to keep): the value so far.
    Extreme(Value),
}

impl Accumulator {
    fn is_zero(&self) -> bool {
        match self {
            Accumulator::Empty => true,
            Accumulator::Count(c) => *c == 0,
            Accumulator::Sum { sum, count } => sum.is_zero() && *count == 0,
            Accumulator::FloatSum { fixed, count, nan, positive_infinity, negative_infinity } => {
                *fixed == 0 && *count == 0 && *nan == 0 && *positive_infinity == 0 && *negative_infinity == 0
            }
            Accumulator::Values(values) => values.is_empty(),
            Accumulator::IntValues(values) => values.is_empty(),
            Accumulator::Extreme(_) => false,
        }
    }
}

/// Adds `diff` copies of `value` to a multiset, removing it at zero.
fn add_to_multiset<T: Ord>(values: &mut BTreeMap<T, i64>, value: T, diff: i64) {
    use std::collections::btree_map::Entry;
    match values.entry(value) {
        Entry::Occupied(mut entry) => {
            *entry.get_mut() += diff;
            if *entry.get() == 0 {
                entry.remove();
            }
        }
        Entry::Vacant(entry) => {
            if diff != 0 {
                entry.insert(diff);
            }
        }
    }
}

/// An integer-like value as its `i64` (a BIGINT, TIMESTAMP, INTERVAL or DATE
/// column holds only one of them, so the variant is known from the type).
fn int_key(value: &Value) -> Option<i64> {
    match value {
        Value::Int(i) | Value::Timestamp(i) | Value::Interval(i) => Some(*i),
        Value::Date(d) => Some(*d as i64),
        _ => None,
    }
}

/// The value of type `ty` that [`int_key`] made `key`.
fn from_int_key(ty: Type, key: i64) -> Value {
    match ty {
        Type::Timestamp => Value::Timestamp(key),
        Type::Interval => Value::Interval(key),
        Type::Date => Value::Date(key as i32),
        _ => Value::Int(key),
    }
}

impl Aggregate<Tuple> for SqlAggregates {
    type State = Vec<Accumulator>;
    type Output = Row;

    fn update(&self, state: &mut Vec<Accumulator>, args: &Tuple, diff: Diff, _: &mut SetUpdates<'_>) {
        if state.is_empty() {
            state.resize(self.calls.len(), Accumulator::Empty);
        }
        for (call, acc, value, _set) in self.each(state, args) {
            self.fold(call, acc, value, diff);
        }
        // A state back at zero is the empty state, so the operator can delete it.
        if state.iter().all(Accumulator::is_zero) {
            state.clear();
        }
    }

    fn output(&self, _count: i64, state: &Vec<Accumulator>, _: &Sets<'_>) -> Row {
        self.calls
            .iter()
            .enumerate()
            .map(|(i, call)| output(call, state.get(i).unwrap_or(&Accumulator::Empty)))
            .collect()
    }
}

/// Whether `rel` only ever inserts rows: an append-only source, through
/// filters, projections, windows, unions and inner joins of such (tables
/// and upsert sources update; aggregates, DISTINCT, top-k and outer joins
/// retract what they emitted).
pub(crate) fn append_only(rel: &Rel) -> bool {
    match rel {
        Rel::Get { input, .. } => matches!(input, Input::Source { .. }),
        Rel::Unit => true,
        Rel::Project { input, .. } | Rel::Filter { input, .. } | Rel::Window { input, .. } => append_only(input),
        Rel::UnionAll { inputs } => inputs.iter().all(append_only),
        Rel::Join { kind, left, right, .. } | Rel::Lateral { kind, left, right, .. } => {
            matches!(kind, JoinKind::Inner) && append_only(left) && append_only(right)
        }
        // A closing aggregate emits each window once, never retracted.
        Rel::Aggregate { input, group, aggregates } => closing_aggregate(input, group, aggregates).is_some(),
        Rel::Distinct { .. } | Rel::TopK { .. } => false,
        Rel::Replicate { input } => append_only(input),
        // A LEFT JOIN's NULL row is retracted when the call gives rows.
        Rel::Expand { input, outer, .. } => !outer && append_only(input),
        // A closing SESSION emits each row once; other windows update.
        Rel::Over { .. } => closing_session(rel).is_some(),
    }
}

/// Keeps the larger (`max`) or smaller of the extreme so far and `value` (not NULL).
fn keep_extreme(acc: &mut Accumulator, value: &Value, max: bool) {
    match acc {
        Accumulator::Extreme(extreme) => {
            if (max && value > extreme) || (!max && value < extreme) {
                *extreme = value.clone();
            }
        }
        _ => *acc = Accumulator::Extreme(value.clone()),
    }
}

fn bump_count(acc: &mut Accumulator, diff: i64) {
    match acc {
        Accumulator::Count(c) => *c += diff,
        _ => *acc = Accumulator::Count(diff),
    }
}

fn add_float(acc: &mut Accumulator, x: f64, diff: i64) {
    if !matches!(acc, Accumulator::FloatSum { .. }) {
        *acc = Accumulator::FloatSum { fixed: 0, count: 0, nan: 0, positive_infinity: 0, negative_infinity: 0 };
    }
    let Accumulator::FloatSum { fixed, count, nan, positive_infinity, negative_infinity } = acc else {
        unreachable!("set above")
    };
    *count += diff;
    let scaled = x * FLOAT_SCALE;
    if x.is_nan() {
        *nan += diff;
    } else if scaled >= 1.7e38 {
        *positive_infinity += diff;
    } else if scaled <= -1.7e38 {
        *negative_infinity += diff;
    } else {
        *fixed = fixed.wrapping_add((scaled.round() as i128).wrapping_mul(diff as i128));
    }
}

fn output(call: &AggregateCall, acc: &Accumulator) -> Value {
    match (call.func, acc) {
        (AggregateFunction::CountRows | AggregateFunction::Count, Accumulator::Count(c)) => Value::Int(*c),
        (AggregateFunction::Count, Accumulator::Values(values)) => Value::Int(values.len() as i64),
        (AggregateFunction::Count, Accumulator::IntValues(values)) => Value::Int(values.len() as i64),
        (AggregateFunction::Min, Accumulator::IntValues(values)) => {
            values.iter().find(|(_, c)| **c > 0).map_or(Value::Null, |(v, _)| from_int_key(call.arg_type, *v))
        }
        (AggregateFunction::Max, Accumulator::IntValues(values)) => {
            values.iter().rev().find(|(_, c)| **c > 0).map_or(Value::Null, |(v, _)| from_int_key(call.arg_type, *v))
        }
        (AggregateFunction::Min | AggregateFunction::Max, Accumulator::Extreme(value)) => value.clone(),
        (AggregateFunction::CountRows | AggregateFunction::Count, _) => Value::Int(0),
        (AggregateFunction::Min, Accumulator::Values(values)) => {
            values.iter().find(|(_, c)| **c > 0).map_or(Value::Null, |(v, _)| v.clone())
        }
        (AggregateFunction::Max, Accumulator::Values(values)) => {
            values.iter().rev().find(|(_, c)| **c > 0).map_or(Value::Null, |(v, _)| v.clone())
        }
        (AggregateFunction::ArrayAgg, Accumulator::Values(values)) if !values.is_empty() => {
            let parts: Vec<&str> = values
                .iter()
                .flat_map(|(value, count)| {
                    let Value::Text(text) = value else { unreachable!("array_agg's values are texts: {value:?}") };
                    std::iter::repeat_n(crate::sort_key::ordered_part(text), (*count).max(0) as usize)
                })
                .collect();
            Value::Text(format!("{{{}}}", parts.join(",")).into())
        }
        (AggregateFunction::StringAgg | AggregateFunction::StringAggOrdered, Accumulator::Values(values))
            if !values.is_empty() =>
        {
            let ordered = call.func == AggregateFunction::StringAggOrdered;
            let parts: Vec<String> = values
                .iter()
                .flat_map(|(value, count)| {
                    let text = value.to_string();
                    let part = if ordered { crate::sort_key::ordered_part(&text).to_owned() } else { text };
                    std::iter::repeat_n(part, (*count).max(0) as usize)
                })
                .collect();
            Value::Text(parts.join(&call.separator).into())
        }
        (AggregateFunction::Sum | AggregateFunction::Avg, Accumulator::Sum { sum, count }) if *count > 0 => {
            let average = call.func == AggregateFunction::Avg;
            // A sum past i128 overflowed: NULL, as every overflow (docs/sql.md).
            let Some(sum) = sum.to_i128() else { return Value::Null };
            match call.arg_type {
                Type::Int if !average => i64::try_from(sum).map_or(Value::Null, Value::Int),
                Type::Int => Value::Double(OrderedF64(sum as f64 / *count as f64)),
                _ if !average => decimal_in_range(sum),
                // The mean of decimal units, rounded half away from zero.
                _ => {
                    let count = *count as i128;
                    let (quotient, remainder) = (sum / count, sum % count);
                    decimal_in_range(if remainder.abs() * 2 >= count { quotient + sum.signum() } else { quotient })
                }
            }
        }
        (
            AggregateFunction::Sum | AggregateFunction::Avg,
            Accumulator::FloatSum { fixed, count, nan, positive_infinity, negative_infinity },
        ) if *count > 0 => {
            let total = if *nan > 0 || (*positive_infinity > 0 && *negative_infinity > 0) {
                f64::NAN
            } else if *positive_infinity > 0 {
                f64::INFINITY
            } else if *negative_infinity > 0 {
                f64::NEG_INFINITY
            } else {
                *fixed as f64 / FLOAT_SCALE
            };
            let result = if call.func == AggregateFunction::Avg { total / *count as f64 } else { total };
            Value::Double(OrderedF64(result))
        }
        _ => Value::Null,
    }
}

/// A DECIMAL of `units`, or NULL past 38 digits (an overflow).
fn decimal_in_range(units: i128) -> Value {
    const UNITS_MAX: i128 = 10i128.pow(38) - 1;
    if units.abs() > UNITS_MAX { Value::Null } else { Value::Decimal(units.into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(input: Input) -> Rel {
        Rel::Get { object: "s".into(), input, columns: vec![("x".into(), Type::Int)] }
    }

    #[test]
    fn only_inserting_plans_are_append_only() {
        let source = || get(Input::Source { topic: "s".into(), event_time: None, record_timestamp: false });
        let table = || get(Input::Upsert { topic: "table.t".into() });
        let join = |kind, left: Rel, right: Rel| Rel::Join {
            kind,
            left: Box::new(left),
            right: Box::new(right),
            left_keys: vec![],
            right_keys: vec![],
            right_width: 1,
            left_width: 1,
        };
        let aggregate = |input: Rel| Rel::Aggregate { input: Box::new(input), group: vec![], aggregates: vec![] };
        assert!(append_only(&source()));
        assert!(append_only(&Rel::Filter { input: Box::new(source()), predicate: Expr::Column(0) }));
        assert!(append_only(&join(JoinKind::Inner, source(), source())));
        assert!(append_only(&Rel::UnionAll { inputs: vec![source(), Rel::Unit] }));
        assert!(!append_only(&table()), "a table updates");
        assert!(!append_only(&join(JoinKind::Left, source(), source())), "an outer join retracts its NULL rows");
        assert!(!append_only(&join(JoinKind::Inner, source(), table())));
        assert!(!append_only(&aggregate(source())), "an aggregate retracts its old row");
        assert!(!append_only(&Rel::Distinct { input: Box::new(source()) }));
        assert!(!append_only(&Rel::UnionAll { inputs: vec![source(), table()] }));
    }

    #[test]
    fn a_view_holds_rows_at_most_once_where_key_columns_tell_its_rows_apart() {
        use Multiplicity::{Any, Unique};
        let dir = tempfile::tempdir().unwrap();
        let mut session = crate::Session::open(dir.path()).unwrap();
        let source = "CREATE SOURCE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel TEXT, ratio DOUBLE) \
                      FROM TOPIC 'bid' FORMAT JSON;";
        session.execute(source, None, false).unwrap();
        let cases = [
            ("SELECT bidder, auction, COUNT(*), SUM(price) FROM bid GROUP BY bidder, auction", Unique),
            ("SELECT COUNT(*) AS n, auction FROM bid GROUP BY auction", Unique),
            ("SELECT auction, MAX(price) FROM bid GROUP BY auction HAVING COUNT(*) > 1", Unique),
            ("SELECT auction, COUNT(*) AS n FROM bid GROUP BY auction ORDER BY n DESC LIMIT 10", Unique),
            // Its default row may be retracted an epoch before it comes.
            ("SELECT COUNT(*), SUM(price) FROM bid", Any),
            ("SELECT DISTINCT channel, auction FROM bid", Unique),
            // The key column dropped: two auctions may have one count.
            ("SELECT COUNT(*) FROM bid GROUP BY auction", Any),
            ("SELECT auction, price FROM bid", Any),
            ("SELECT auction, price FROM bid ORDER BY price DESC LIMIT 3", Any),
            // At most one row of one copy.
            ("SELECT auction, price FROM bid ORDER BY price DESC LIMIT 1", Unique),
            // Nexmark q18's shape: one row per partition.
            (
                "SELECT auction, bidder, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction \
                 ORDER BY price DESC) AS r FROM bid) AS t WHERE r <= 1",
                Unique,
            ),
            // Nexmark q19's shape: a partition's rows have distinct ranks.
            (
                "SELECT * FROM (SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) \
                 AS r FROM bid) AS t WHERE r <= 10",
                Unique,
            ),
            // The rank dropped, or the partition not a column: two rows may be equal.
            (
                "SELECT auction, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) \
                 AS r FROM bid) AS t WHERE r <= 10",
                Any,
            ),
            (
                "SELECT * FROM (SELECT price, ROW_NUMBER() OVER (PARTITION BY auction + 1 ORDER BY price DESC) \
                 AS r FROM bid) AS t WHERE r <= 1",
                Any,
            ),
            // NaN and the infinities are all JSON null: two groups, one row.
            ("SELECT ratio, COUNT(*) FROM bid GROUP BY ratio", Any),
            ("SELECT DISTINCT ratio FROM bid", Any),
        ];
        for (n, (select, expected)) in cases.into_iter().enumerate() {
            session.execute(&format!("CREATE MATERIALIZED VIEW v{n} AS {select};"), None, false).unwrap();
            let compiled = session.compile().unwrap();
            let view = compiled.views.iter().find(|v| v.name == format!("v{n}")).unwrap();
            assert_eq!(multiplicity(view), expected, "{select}");
        }
    }

    #[test]
    fn an_extreme_over_inserts_is_the_multisets_extreme() {
        let values = [5, -3, 12, 12, 7, -3, 0];
        for max in [true, false] {
            let mut acc = Accumulator::Empty;
            for v in values {
                keep_extreme(&mut acc, &Value::Int(v), max);
            }
            let expected = if max { values.iter().max() } else { values.iter().min() };
            assert_eq!(acc, Accumulator::Extreme(Value::Int(*expected.unwrap())));
        }
    }
}
