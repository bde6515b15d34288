//! [`Collection`]: a differential collection of `(data, epoch, diff)`
//! updates, with Millpond's stateful operators.
//!
//! Stateless transforms (map, filter, flat_map, concat, negate) are
//! differential dataflow's own. Stateful operators are built here on
//! [`keyed`](crate::keyed) so that their state lives in the runtime's state
//! store and is committed by the barrier checkpoints.
//!
//! Every collection carries its **lineage**: the names of the readers it
//! derives from. One-input transforms and keyed operators keep their
//! input's; `concat`, `join` and `left_join` take the union of both. The
//! checkpoint uses it to decide whether a state that is new after a commit
//! can be built correctly (all its readers fresh).
//!
//! Invariant: a collection's lineage contains every reader whose records
//! can reach it through Millpond's operators (a differential collection
//! wrapped with [`Collection::from_differential`] gets the lineage of the
//! collection it is wrapped with, plus any added with
//! [`Collection::with_lineage_of`]).

use std::collections::BTreeSet;
use std::hash::Hash;
use std::rc::Rc;

use differential_dataflow::AsCollection;
use differential_dataflow::collection::vec::Collection as VecCollection;
use serde::Serialize;
use serde::de::DeserializeOwned;
use timely::dataflow::Stream;
use timely::dataflow::operators::OkErr;

use crate::context::WorkerContext;
use crate::dead_letter::DeadLetter;
use crate::runtime::Job;
use crate::source;
use crate::view_fold::Multiplicity;
use crate::{Diff, Epoch};

/// What flows through a Millpond dataflow: cloneable, ordered (for
/// consolidation), serializable (for exchange between workers and for
/// state). A blanket impl covers every such type.
pub trait Data: Clone + Ord + std::fmt::Debug + Serialize + DeserializeOwned + Send + 'static {}
impl<T: Clone + Ord + std::fmt::Debug + Serialize + DeserializeOwned + Send + 'static> Data for T {}

/// Keys also hash, to pick the worker that owns them.
pub trait Key: Data + Hash {}
impl<T: Data + Hash> Key for T {}

/// The names of the readers a collection derives from.
pub(crate) type Lineage = Rc<BTreeSet<String>>;

/// The union of two lineages (shared when one contains the other).
pub(crate) fn union(a: &Lineage, b: &Lineage) -> Lineage {
    if a.is_superset(b) {
        a.clone()
    } else if b.is_superset(a) {
        b.clone()
    } else {
        Rc::new(a.union(b).cloned().collect())
    }
}

/// An evolving multiset of `D`, defined on one worker of a running job.
#[derive(Clone)]
pub struct Collection<'s, D: 'static> {
    pub(crate) inner: VecCollection<'s, Epoch, D, Diff>,
    pub(crate) ctx: Rc<WorkerContext>,
    pub(crate) lineage: Lineage,
    /// Whether it never retracts (see [`Collection::is_monotonic`]).
    pub(crate) monotonic: bool,
}

impl<D: 'static> std::fmt::Debug for Collection<'_, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection")
            .field("lineage", &self.lineage)
            .field("monotonic", &self.monotonic)
            .finish_non_exhaustive()
    }
}

impl<'s, D: Clone + 'static> Collection<'s, D> {
    pub(crate) fn from_stream(
        stream: Stream<'s, Epoch, Vec<(D, Epoch, Diff)>>,
        ctx: Rc<WorkerContext>,
        lineage: Lineage,
    ) -> Self {
        Collection { inner: stream.as_collection(), ctx, lineage, monotonic: false }
    }

    /// This collection, said to never retract (a source's records).
    pub(crate) fn into_monotonic(mut self) -> Self {
        self.monotonic = true;
        self
    }

    /// Applies a one-input differential operator that keeps each update's
    /// sign: the result keeps this collection's context, lineage and
    /// monotonicity.
    fn then<D2: 'static>(
        self,
        operator: impl FnOnce(VecCollection<'s, Epoch, D, Diff>) -> VecCollection<'s, Epoch, D2, Diff>,
    ) -> Collection<'s, D2> {
        Collection { inner: operator(self.inner), ctx: self.ctx, lineage: self.lineage, monotonic: self.monotonic }
    }

    /// Whether this collection never retracts: every update it carries
    /// has a positive multiplicity, so it only ever grows. A source's
    /// records do, and `map`, `filter`, `flat_map`, `inspect`, `concat` of
    /// two such collections and a `join` of two keep it; `explode`,
    /// `negate`, the keyed operators' outputs (they retract an output that
    /// changes) and a collection from
    /// [`from_differential`](Self::from_differential) do not. An aggregate's
    /// MIN and MAX over a monotonic collection keep only the extreme
    /// ([`aggregate`](Self::aggregate)).
    pub fn is_monotonic(&self) -> bool {
        self.monotonic
    }

    /// The names of the readers this collection derives from (a reader of
    /// `Job::source(topic, ..)` is named after its topic).
    pub fn lineage(&self) -> &BTreeSet<String> {
        &self.lineage
    }

    /// Adds `other`'s readers to this collection's lineage: for a
    /// collection built with differential operators from several of this
    /// job's collections (see [`from_differential`](Self::from_differential)).
    pub fn with_lineage_of<D2>(mut self, other: &Collection<'s, D2>) -> Self {
        self.lineage = union(&self.lineage, &other.lineage);
        self
    }

    /// The differential dataflow collection underneath, for operators that
    /// Millpond does not wrap. Their state is in memory and not part of the
    /// checkpoints: after a restart they see only input after the resumed
    /// offsets.
    pub fn into_differential(self) -> VecCollection<'s, Epoch, D, Diff> {
        self.inner
    }

    /// Wraps a differential collection built from this job's collections.
    /// It gets this collection's lineage; add the lineage of any other
    /// collection it derives from with [`with_lineage_of`](Self::with_lineage_of).
    pub fn from_differential(&self, inner: VecCollection<'s, Epoch, D, Diff>) -> Self {
        Collection { inner, ctx: self.ctx.clone(), lineage: self.lineage.clone(), monotonic: false }
    }

    pub fn map<D2: Clone + 'static>(self, logic: impl FnMut(D) -> D2 + 'static) -> Collection<'s, D2> {
        self.then(|inner| inner.map(logic))
    }

    pub fn filter(self, logic: impl FnMut(&D) -> bool + 'static) -> Collection<'s, D> {
        self.then(|inner| inner.filter(logic))
    }

    pub fn flat_map<I>(self, logic: impl FnMut(D) -> I + 'static) -> Collection<'s, I::Item>
    where
        I: IntoIterator<Item: Clone + 'static>,
    {
        self.then(|inner| inner.flat_map(logic))
    }

    /// Replaces each element by elements with multiplicities: `(d2, n)`
    /// stands for `n` copies of `d2` (negative: retractions), times the
    /// input's own multiplicity. Reads change streams such as `(row, diff)`.
    pub fn explode<D2, I>(self, logic: impl FnMut(D) -> I + 'static) -> Collection<'s, D2>
    where
        D2: Clone + 'static,
        I: IntoIterator<Item = (D2, Diff)>,
    {
        let mut exploded = self.then(|inner| inner.explode(logic));
        exploded.monotonic = false;
        exploded
    }

    /// The sum of both collections; it derives from the readers of both.
    pub fn concat(self, other: Collection<'s, D>) -> Collection<'s, D> {
        let lineage = union(&self.lineage, &other.lineage);
        let monotonic = self.monotonic && other.monotonic;
        Collection { inner: self.inner.concat(other.inner), ctx: self.ctx, lineage, monotonic }
    }

    /// Every update with its multiplicity negated.
    pub fn negate(self) -> Collection<'s, D> {
        let mut negated = self.then(|inner| inner.negate());
        negated.monotonic = false;
        negated
    }

    /// Calls `logic` on each update as it passes: `(data, epoch, diff)`.
    pub fn inspect(self, logic: impl FnMut(&(D, Epoch, Diff)) + 'static) -> Collection<'s, D> {
        self.then(|inner| inner.inspect(logic))
    }
}

impl<'s, T: Clone + 'static> Collection<'s, Result<T, Box<DeadLetter>>> {
    /// Splits decoded records from dead letters, in one pass and without
    /// copies: each update goes to exactly one of the two.
    pub(crate) fn split_dead_letters(self) -> (Collection<'s, T>, Collection<'s, Box<DeadLetter>>) {
        let (ok, err) = self.inner.inner.ok_err::<Vec<(T, Epoch, Diff)>, _, Vec<(Box<DeadLetter>, Epoch, Diff)>, _, _>(
            |(result, epoch, diff)| match result {
                Ok(value) => Ok((value, epoch, diff)),
                Err(letter) => Err((letter, epoch, diff)),
            },
        );
        let monotonic = self.monotonic;
        let letters = Collection::from_stream(err, self.ctx.clone(), self.lineage.clone());
        let mut records = Collection::from_stream(ok, self.ctx, self.lineage);
        records.monotonic = monotonic;
        (records, letters)
    }
}

impl<'s> Job<'s> {
    /// Tails `topic`, decoding each record's value with `decode` (e.g.
    /// [`json`](crate::json)). Records that fail to decode go to the topic's
    /// dead-letter topic, `TOPIC.dead-letter` ([`crate::dead_letter`]). The
    /// reader is named after the topic: `source_named(topic, topic, ..)`.
    pub fn source<T, F>(&mut self, topic: &str, decode: F) -> Collection<'s, T>
    where
        T: Clone + 'static,
        F: Fn(&millpond_log::RecordView<'_>) -> Result<T, String> + 'static,
    {
        self.source_named(topic, topic, decode)
    }

    /// Tails `topic` with the reader `reader`: its offsets are checkpointed
    /// under that name, so one job may read a topic with several readers.
    /// A reader without committed offsets (fresh) starts at the beginning
    /// of the log, so a view that is new to a data directory can be fed by
    /// a new reader. Reader names are unique per job (1..=200 ASCII letters,
    /// digits, '_', '-', '.'), and a reader keeps its topic for the life of
    /// the data directory. The readers of a topic are one source, named
    /// after it: `source_of(topic, reader, topic, ..)`.
    pub fn source_named<T, F>(&mut self, reader: &str, topic: &str, decode: F) -> Collection<'s, T>
    where
        T: Clone + 'static,
        F: Fn(&millpond_log::RecordView<'_>) -> Result<T, String> + 'static,
    {
        self.source_of(topic, reader, topic, decode)
    }

    /// Tails `topic` with the reader `reader` of the source `source`: the
    /// records it rejects go to the source's dead-letter topic,
    /// `SOURCE.dead-letter`, which holds each record that the source rejects
    /// once, however many readers reject it. So every reader of a source must
    /// decode with the same verdict on every record (the same decoder, or
    /// one that validates the same fields), and read one topic.
    pub fn source_of<T, F>(&mut self, source: &str, reader: &str, topic: &str, decode: F) -> Collection<'s, T>
    where
        T: Clone + 'static,
        F: Fn(&millpond_log::RecordView<'_>) -> Result<T, String> + 'static,
    {
        self.source_at(source, reader, topic, move |_: u32, record: &millpond_log::RecordView<'_>| decode(record))
    }

    /// [`source_of`](Self::source_of) with a decoder that is also told each
    /// record's partition (event time is kept per partition:
    /// [`crate::event_time`]).
    pub fn source_at<T, F>(&mut self, source: &str, reader: &str, topic: &str, decode: F) -> Collection<'s, T>
    where
        T: Clone + 'static,
        F: Fn(u32, &millpond_log::RecordView<'_>) -> Result<T, String> + 'static,
    {
        self.ctx.declare_reader(reader, topic);
        let (records, letters) = source::tail(self.scope, &self.ctx, reader, topic, decode).split_dead_letters();
        self.route_dead_letters(source, topic, letters);
        records
    }

    /// Tails a topic of an external Kafka cluster with the reader `reader`
    /// ([`crate::kafka_source`]): read_committed, its offsets in Millpond's
    /// checkpoint (nothing committed to Kafka), so views reflect each Kafka
    /// record exactly once across crashes. Records that fail to decode go
    /// to the source's dead-letter topic, `SOURCE.dead-letter`, as for a
    /// log source (the letters name the topic `kafka:TOPIC`).
    pub fn kafka_source<T, F>(
        &mut self,
        source: &str,
        reader: &str,
        topic: &crate::KafkaTopic,
        decode: F,
    ) -> Collection<'s, T>
    where
        T: Clone + 'static,
        F: Fn(&millpond_log::RecordView<'_>) -> Result<T, String> + 'static,
    {
        let label = self.register_kafka_topic(topic);
        self.source_of(source, reader, &label, decode)
    }

    /// Registers a topic of an external Kafka cluster: its label
    /// (`kafka:TOPIC`), which every source API then reads as it reads a log
    /// topic's name ([`Job::source_of`], [`Job::upsert_source_of`],
    /// [`Job::shared_source_of`]).
    pub fn register_kafka_topic(&mut self, topic: &crate::KafkaTopic) -> String {
        self.ctx.register_kafka_topic(topic)
    }

    /// Reads a keyed topic as a table (the upsert envelope): the latest value
    /// per key is the row; a new value retracts the previous one; a record
    /// without a value (a tombstone) deletes the key. `decode_key` reads the
    /// record key; `decode_value` the value when there is one. The current
    /// value per key is state named `name`. The reader is named after the
    /// topic: `upsert_source_named(topic, name, topic, ..)`.
    pub fn upsert_source<K, V, FK, FV>(
        &mut self,
        name: &str,
        topic: &str,
        decode_key: FK,
        decode_value: FV,
    ) -> Collection<'s, (K, V)>
    where
        K: Key,
        V: Data,
        FK: Fn(&[u8]) -> Result<K, String> + 'static,
        FV: Fn(&[u8]) -> Result<V, String> + 'static,
    {
        self.upsert_source_named(topic, name, topic, decode_key, decode_value)
    }

    /// [`upsert_source`](Self::upsert_source) with the reader `reader` (see
    /// [`source_named`](Self::source_named)).
    pub fn upsert_source_named<K, V, FK, FV>(
        &mut self,
        reader: &str,
        name: &str,
        topic: &str,
        decode_key: FK,
        decode_value: FV,
    ) -> Collection<'s, (K, V)>
    where
        K: Key,
        V: Data,
        FK: Fn(&[u8]) -> Result<K, String> + 'static,
        FV: Fn(&[u8]) -> Result<V, String> + 'static,
    {
        self.upsert_source_of(topic, reader, name, topic, decode_key, decode_value)
    }

    /// [`upsert_source_named`](Self::upsert_source_named) as a reader of
    /// the source `source` (see [`source_of`](Self::source_of)).
    pub fn upsert_source_of<K, V, FK, FV>(
        &mut self,
        source: &str,
        reader: &str,
        name: &str,
        topic: &str,
        decode_key: FK,
        decode_value: FV,
    ) -> Collection<'s, (K, V)>
    where
        K: Key,
        V: Data,
        FK: Fn(&[u8]) -> Result<K, String> + 'static,
        FV: Fn(&[u8]) -> Result<V, String> + 'static,
    {
        let decode = move |record: &millpond_log::RecordView<'_>| {
            let key = decode_key(record.key.ok_or("an upsert record needs a key")?)?;
            let value = record.value.map(&decode_value).transpose()?;
            Ok((key, (record.offset, value)))
        };
        let changes = self.source_of(source, reader, topic, decode);
        crate::keyed::upsert(changes, name)
    }

    /// Materializes `collection` as the view `name`: its changes per epoch
    /// go to the changelog topic `view.NAME`, committed with each checkpoint,
    /// where `millpond view read` and `millpond subscribe` find them. Rows
    /// are stored as JSON. A view that is new to a data directory that has
    /// committed must derive only from fresh readers (see
    /// [`source_named`](Self::source_named)).
    pub fn materialize<D: Data>(&mut self, name: &str, collection: Collection<'s, D>) {
        self.materialize_definition(name, "", collection);
    }

    /// [`materialize`](Self::materialize) a view whose definition may change
    /// over the data directory's life, identified by `definition` (any
    /// string that changes when the definition does, such as a hash of its
    /// text). When a run resumes the view under another definition, the
    /// changelog retracts every row of the old one at the run's first
    /// epoch; the new definition's rows follow as its readers catch up.
    /// Subscribers therefore see the replacement as ordinary changes. The
    /// new definition must read with fresh readers (its operators' state
    /// is new); the view's own state (row multiplicities) is kept.
    pub fn materialize_definition<D: Data>(&mut self, name: &str, definition: &str, collection: Collection<'s, D>) {
        self.materialize_view(name, definition, Multiplicity::Any, collection);
    }

    /// [`materialize_definition`](Self::materialize_definition) with what
    /// the view promises about its rows' multiplicities: with
    /// [`Multiplicity::AtMostOnce`] (every row of `collection` held at most
    /// once after each epoch, as a keyed aggregate's rows with their keys or
    /// a DISTINCT's, whose JSON tells keys apart), a retracted row's count
    /// is not read from the view's index. A change that breaks the promise
    /// fails the job where it is seen (see [`Multiplicity`]).
    pub fn materialize_view<D: Data>(
        &mut self,
        name: &str,
        definition: &str,
        multiplicity: Multiplicity,
        collection: Collection<'s, D>,
    ) {
        if self.ctx.claim("view", name) {
            crate::view_sink::materialize(collection, name, definition, multiplicity);
        }
    }
}
