//! Aggregates that keep ordered sets of values per key (MIN and MAX under
//! retractions, COUNT(DISTINCT)) beside a small accumulator, each set one
//! entry per value once large, so an epoch costs what changed and never the
//! values a key holds (docs/state.md, "Set aggregate layout 1"). Two kinds
//! of aggregation run here: a [`SetAggregate`] (its items typed, as SQL's),
//! and a [`crate::Aggregate`] that keeps sets (`Min`, `Max`) over an input
//! that may retract ([`crate::Collection::aggregate`]).
//!
//! A key's head, `0x00 ++ postcard(key)` -> `postcard(Head)`, holds the
//! count of values, the accumulator, and per set its [`OrderedSet`] and a
//! copy of its first entry (the least by order key with a positive count:
//! a MIN's value, or a MAX's with an inverted order key). A spilled set's
//! rows are entries `0x01 ++ postcard(key) ++ set index (u8) ++ suffix`.
//! An epoch reads the head, one entry per changed value of a spilled set,
//! and scans a set's start only when a change sorts at or before its
//! cached first entry (the minimum was retracted or beaten).
//!
//! Invariants:
//! - A head's cached first entry of each set is the set's first entry with
//!   a positive count (asserted against a scan in debug builds, and
//!   against a recomputation in `tests/state_cost.rs`).
//! - A key back at count 0, the default accumulator and empty sets has no
//!   entries.
//! - After an epoch, the output summed over epochs is `output` of each
//!   key's current values, as [`crate::Collection::aggregate`]'s is.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::aggregate::{Aggregate, SetUpdates, Sets};
use crate::codec::{decode, encode};
use crate::collection::{Data, Key};
use crate::error::Result;
use crate::keyed::{Batching, keyed_unary};
use crate::multiset::tagged;
use crate::opstate::OperatorState;
use crate::ordered_set::{self, Entry, OrderedSet};
use crate::{Collection, Diff, Epoch};

const HEAD: u8 = 0;
const ROW: u8 = 1;

/// The most sets an aggregate keeps per key (a set's index is one byte).
pub const SETS_MAX: usize = 255;

/// An aggregation whose state is an accumulator and ordered sets of items.
pub trait SetAggregate<V>: 'static {
    /// The accumulator kept per key beside the sets.
    type State: Default + Serialize + DeserializeOwned;
    /// What the sets hold.
    type Item: Data;
    /// The result per key.
    type Output: Data;
    /// How many sets each key has (at most [`SETS_MAX`]).
    fn sets(&self) -> usize;
    /// Adds `diff` copies of `value` (a negative diff retracts): to the
    /// accumulator, and to sets through `changes`.
    fn update(&self, state: &mut Self::State, value: &V, diff: Diff, changes: &mut SetChanges<Self::Item>);
    /// The result for a key that holds `count` values (always > 0).
    fn output(&self, count: i64, state: &Self::State, sets: &[SetSummary<Self::Item>]) -> Self::Output;
}

/// The set changes of one value's update.
#[derive(Debug)]
pub struct SetChanges<T> {
    entries: Vec<(u8, Entry)>,
    sets: usize,
    _item: std::marker::PhantomData<T>,
}

impl<T: Data> SetChanges<T> {
    /// Adds `diff` copies of `item` to set `set`, ordered by the bytes
    /// `order_key` appends (order-preserving and prefix-free, e.g. an
    /// [`OrderKey`](crate::OrderKey)'s; inverted for greatest first).
    pub fn add(&mut self, set: usize, item: &T, order_key: impl FnOnce(&mut Vec<u8>), diff: Diff) {
        assert!(set < self.sets, "set {set} of an aggregate with {} sets", self.sets);
        self.entries.push((set as u8, Entry::new(item, order_key, diff)));
    }
}

/// What an aggregate's output may read of one set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetSummary<T> {
    /// The first item by order key with a positive count.
    pub first: Option<T>,
    /// The number of distinct items with a non-zero count.
    pub distinct: u64,
}

/// One set of a key's head: the set and its first entry with a positive count.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SetHead {
    set: OrderedSet,
    pub(crate) first: Option<Entry>,
}

/// What the operator asks of an aggregation: a [`SetAggregate`] (its items
/// typed), or an [`Aggregate`] whose sets are kept (its input may retract).
pub(crate) trait SetLogic<V>: 'static {
    type State: Default + Serialize + DeserializeOwned;
    type Output: Data;
    fn sets(&self) -> usize;
    /// Adds `diff` copies of `value`: to the state, and to sets through `entries`.
    fn update(&self, state: &mut Self::State, value: &V, diff: Diff, entries: &mut Vec<(u8, Entry)>);
    fn output(&self, count: i64, state: &Self::State, heads: &[SetHead], what: &str) -> Result<Self::Output>;
}

/// A [`SetAggregate`] as the operator's logic.
struct Typed<A>(A);

impl<V, A: SetAggregate<V>> SetLogic<V> for Typed<A> {
    type State = A::State;
    type Output = A::Output;
    fn sets(&self) -> usize {
        self.0.sets()
    }
    fn update(&self, state: &mut A::State, value: &V, diff: Diff, entries: &mut Vec<(u8, Entry)>) {
        let mut changes =
            SetChanges { entries: std::mem::take(entries), sets: self.0.sets(), _item: Default::default() };
        self.0.update(state, value, diff, &mut changes);
        *entries = changes.entries;
    }
    fn output(&self, count: i64, state: &A::State, heads: &[SetHead], what: &str) -> Result<A::Output> {
        Ok(self.0.output(count, state, &summaries(heads, what)?))
    }
}

/// An [`Aggregate`] whose sets are kept, as the operator's logic.
struct Kept<A>(A);

impl<V, A: Aggregate<V>> SetLogic<V> for Kept<A> {
    type State = A::State;
    type Output = A::Output;
    fn sets(&self) -> usize {
        self.0.sets()
    }
    fn update(&self, state: &mut A::State, value: &V, diff: Diff, entries: &mut Vec<(u8, Entry)>) {
        self.0.update(state, value, diff, &mut SetUpdates::kept(entries, self.0.sets()));
    }
    fn output(&self, count: i64, state: &A::State, heads: &[SetHead], what: &str) -> Result<A::Output> {
        Ok(self.0.output(count, state, &Sets::kept(heads, what)))
    }
}

/// The keyspace of the operator named `name`.
pub(crate) fn keyspace(name: &str) -> String {
    format!("sets.{name}")
}

/// [`crate::Collection::aggregate_sets`].
pub(crate) fn aggregate_sets<'s, K: Key, V: Data, A: SetAggregate<V>>(
    input: Collection<'s, (K, V)>,
    name: &str,
    aggregate: A,
) -> Collection<'s, (K, A::Output)> {
    aggregate_with(input, name, Typed(aggregate))
}

/// [`crate::Collection::aggregate`] of an aggregation that keeps sets, over
/// an input that may retract: the same layout, in the same keyspace.
pub(crate) fn aggregate_kept<'s, K: Key, V: Data, A: Aggregate<V>>(
    input: Collection<'s, (K, V)>,
    name: &str,
    aggregate: A,
) -> Collection<'s, (K, A::Output)> {
    aggregate_with(input, name, Kept(aggregate))
}

fn aggregate_with<'s, K: Key, V: Data, A: SetLogic<V>>(
    input: Collection<'s, (K, V)>,
    name: &str,
    aggregate: A,
) -> Collection<'s, (K, A::Output)> {
    let what = format!("aggregate '{name}'");
    let sets = aggregate.sets();
    assert!(sets <= SETS_MAX, "{what}: {sets} sets, at most {SETS_MAX}");
    let open = |state: OperatorState, _| Ok(state.grouped());
    keyed_unary(input, name, &keyspace(name), None, open, Batching::ByKey, move |epoch, updates, state, out| {
        updates.for_each_key(|key, key_bytes, values| {
            let key_bytes = key_bytes.to_vec();
            let head_key = tagged(HEAD, &[&key_bytes]);
            let (mut count, mut acc, mut heads): (i64, A::State, Vec<SetHead>) = match state.get(&head_key)? {
                Some(bytes) => decode(&bytes, &what)?,
                None => (0, A::State::default(), vec![SetHead::default(); sets]),
            };
            assert_eq!(heads.len(), sets, "{what}: a head has one entry per set");
            heads.iter().for_each(|h| h.set.check(&what));
            let old = (count > 0).then(|| aggregate.output(count, &acc, &heads, &what)).transpose()?;
            let mut entries = Vec::new();
            for ((_, value), diff) in values {
                aggregate.update(&mut acc, value, *diff, &mut entries);
                count += *diff as i64;
            }
            apply_sets(state, epoch, &key_bytes, &mut heads, entries, &what)?;
            let new = (count > 0).then(|| aggregate.output(count, &acc, &heads, &what)).transpose()?;
            if old != new {
                out.extend(old.map(|o| ((key.clone(), o), -1)));
                out.extend(new.map(|o| ((key.clone(), o), 1)));
            }
            let empty =
                count == 0 && encode(&acc) == encode(&A::State::default()) && heads.iter().all(|h| h.set.is_empty());
            match empty {
                true => state.delete(epoch, head_key),
                false => state.put(epoch, head_key, encode(&(count, &acc, &heads))),
            }
            Ok(())
        })
    })
}

/// Applies each set's changes and refreshes its cached first entry.
fn apply_sets(
    state: &mut OperatorState,
    epoch: Epoch,
    key_bytes: &[u8],
    heads: &mut [SetHead],
    mut changes: Vec<(u8, Entry)>,
    what: &str,
) -> Result<()> {
    changes.sort_by_key(|(set, _)| *set);
    let mut changes = changes.into_iter().peekable();
    while let Some(&(set, _)) = changes.peek() {
        let mut entries = Vec::new();
        while let Some((_, entry)) = changes.next_if(|(s, _)| *s == set) {
            entries.push(entry);
        }
        ordered_set::consolidate(&mut entries);
        if entries.is_empty() {
            continue;
        }
        let prefix = tagged(ROW, &[key_bytes, &[set]]);
        let head = &mut heads[set as usize];
        // The first entry stays first if every change sorts after it.
        let stays = head.first.as_ref().is_some_and(|first| entries.iter().all(|e| e.suffix > first.suffix));
        head.set = std::mem::take(&mut head.set).apply(state, epoch, &prefix, entries, what)?;
        if !stays {
            head.first = head.set.first(state, &prefix, 1, what)?.into_iter().next();
        }
        debug_assert_eq!(
            head.first,
            head.set.first(state, &prefix, 1, what)?.into_iter().next(),
            "{what}: a set's cached first entry is its first"
        );
    }
    Ok(())
}

fn summaries<T: Data>(heads: &[SetHead], what: &str) -> Result<Vec<SetSummary<T>>> {
    heads
        .iter()
        .map(|h| Ok(SetSummary { first: h.first.as_ref().map(|e| e.row(what)).transpose()?, distinct: h.set.rows() }))
        .collect()
}
