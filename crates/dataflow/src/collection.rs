//! [`Collection`]: a differential collection of `(data, epoch, diff)`
//! updates, with Millpond's stateful operators.
//!
//! Stateless transforms (map, filter, flat_map, concat, negate) are
//! differential dataflow's own. Stateful operators are built here on
//! [`keyed`](crate::keyed) so that their state lives in the runtime's state
//! store and is committed by the barrier checkpoints.

use std::hash::Hash;
use std::rc::Rc;

use differential_dataflow::AsCollection;
use differential_dataflow::collection::vec::Collection as VecCollection;
use serde::Serialize;
use serde::de::DeserializeOwned;
use timely::dataflow::Stream;
use timely::dataflow::operators::OkErr;

use crate::runtime::{Job, WorkerContext};
use crate::source::{self, DeadLetter};
use crate::{Diff, Epoch};

/// What flows through a Millpond dataflow: cloneable, ordered (for
/// consolidation), serializable (for exchange between workers and for
/// state). A blanket impl covers every such type.
pub trait Data: Clone + Ord + std::fmt::Debug + Serialize + DeserializeOwned + Send + 'static {}
impl<T: Clone + Ord + std::fmt::Debug + Serialize + DeserializeOwned + Send + 'static> Data for T {}

/// Keys also hash, to pick the worker that owns them.
pub trait Key: Data + Hash {}
impl<T: Data + Hash> Key for T {}

/// An evolving multiset of `D`, defined on one worker of a running job.
#[derive(Clone)]
pub struct Collection<'s, D: 'static> {
    pub(crate) inner: VecCollection<'s, Epoch, D, Diff>,
    pub(crate) ctx: Rc<WorkerContext>,
}

impl<D: 'static> std::fmt::Debug for Collection<'_, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection").finish_non_exhaustive()
    }
}

impl<'s, D: Clone + 'static> Collection<'s, D> {
    pub(crate) fn from_stream(stream: Stream<'s, Epoch, Vec<(D, Epoch, Diff)>>, ctx: Rc<WorkerContext>) -> Self {
        Collection { inner: stream.as_collection(), ctx }
    }

    /// The differential dataflow collection underneath, for operators that
    /// Millpond does not wrap. Their state is in memory and not part of the
    /// checkpoints: after a restart they see only input after the resumed
    /// offsets.
    pub fn into_differential(self) -> VecCollection<'s, Epoch, D, Diff> {
        self.inner
    }

    /// Wraps a differential collection built from this job's collections.
    pub fn from_differential(&self, inner: VecCollection<'s, Epoch, D, Diff>) -> Self {
        Collection { inner, ctx: self.ctx.clone() }
    }

    pub fn map<D2: Clone + 'static>(self, logic: impl FnMut(D) -> D2 + 'static) -> Collection<'s, D2> {
        Collection { inner: self.inner.map(logic), ctx: self.ctx }
    }

    pub fn filter(self, logic: impl FnMut(&D) -> bool + 'static) -> Collection<'s, D> {
        Collection { inner: self.inner.filter(logic), ctx: self.ctx }
    }

    pub fn flat_map<I>(self, logic: impl FnMut(D) -> I + 'static) -> Collection<'s, I::Item>
    where
        I: IntoIterator<Item: Clone + 'static>,
    {
        Collection { inner: self.inner.flat_map(logic), ctx: self.ctx }
    }

    /// Replaces each element by elements with multiplicities: `(d2, n)`
    /// stands for `n` copies of `d2` (negative: retractions), times the
    /// input's own multiplicity. Reads change streams such as `(row, diff)`.
    pub fn explode<D2, I>(self, logic: impl FnMut(D) -> I + 'static) -> Collection<'s, D2>
    where
        D2: Clone + 'static,
        I: IntoIterator<Item = (D2, Diff)>,
    {
        Collection { inner: self.inner.explode(logic), ctx: self.ctx }
    }

    /// The sum of both collections.
    pub fn concat(self, other: Collection<'s, D>) -> Collection<'s, D> {
        Collection { inner: self.inner.concat(other.inner), ctx: self.ctx }
    }

    /// Every update with its multiplicity negated.
    pub fn negate(self) -> Collection<'s, D> {
        Collection { inner: self.inner.negate(), ctx: self.ctx }
    }

    /// Calls `logic` on each update as it passes: `(data, epoch, diff)`.
    pub fn inspect(self, logic: impl FnMut(&(D, Epoch, Diff)) + 'static) -> Collection<'s, D> {
        Collection { inner: self.inner.inspect(logic), ctx: self.ctx }
    }
}

impl<'s, T: Clone + 'static> Collection<'s, Result<T, Box<DeadLetter>>> {
    /// Splits decoded records from dead letters; the dead letters are written
    /// to `dead_letter_topic` exactly once per input record.
    pub(crate) fn split_dead_letters(self, dead_letter_topic: &str) -> Collection<'s, T> {
        // One pass, no copies: each update goes to exactly one of the two streams.
        let (ok, err) = self.inner.inner.ok_err::<Vec<(T, Epoch, Diff)>, _, Vec<(Box<DeadLetter>, Epoch, Diff)>, _, _>(
            |(result, epoch, diff)| match result {
                Ok(value) => Ok((value, epoch, diff)),
                Err(letter) => Err((letter, epoch, diff)),
            },
        );
        crate::sink::dead_letters(Collection::from_stream(err, self.ctx.clone()), dead_letter_topic);
        Collection::from_stream(ok, self.ctx)
    }
}

impl<'s> Job<'s> {
    /// Tails `topic`, decoding each record's value with `decode` (e.g.
    /// [`json`](crate::json)). Records that fail to decode go to the topic's
    /// dead-letter topic ([`dead_letter_topic`](crate::dead_letter_topic)).
    pub fn source<T, F>(&mut self, topic: &str, decode: F) -> Collection<'s, T>
    where
        T: Clone + 'static,
        F: Fn(&millpond_log::RecordView<'_>) -> Result<T, String> + 'static,
    {
        self.ctx.claim("source", topic);
        source::tail(self.scope, &self.ctx, topic, decode).split_dead_letters(&source::dead_letter_topic(topic))
    }

    /// Reads a keyed topic as a table (the upsert envelope): the latest value
    /// per key is the row; a new value retracts the previous one; a record
    /// without a value (a tombstone) deletes the key. `decode_key` reads the
    /// record key; `decode_value` the value when there is one. The current
    /// value per key is state named `name`.
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
        let decode = move |record: &millpond_log::RecordView<'_>| {
            let key = decode_key(record.key.ok_or("an upsert record needs a key")?)?;
            let value = record.value.map(&decode_value).transpose()?;
            Ok((key, (record.offset, value)))
        };
        // One reader per topic: offsets are checkpointed per topic and partition.
        self.ctx.claim("source", topic);
        let changes =
            source::tail(self.scope, &self.ctx, topic, decode).split_dead_letters(&source::dead_letter_topic(topic));
        crate::keyed::upsert(changes, name)
    }

    /// Materializes `collection` as the view `name`: its changes per epoch
    /// go to the changelog topic `view.NAME`, committed with each checkpoint,
    /// where `millpond view read` and `millpond subscribe` find them. Rows
    /// are stored as JSON.
    pub fn materialize<D: Data>(&mut self, name: &str, collection: Collection<'s, D>) {
        if self.ctx.claim("view", name) {
            crate::sink::materialize(collection, name);
        }
    }
}
