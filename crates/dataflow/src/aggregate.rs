//! Aggregations for [`Collection::aggregate`](crate::Collection::aggregate):
//! accumulators that take insertions and retractions, and ordered sets of
//! items for MIN and MAX.
//!
//! Invariant: an aggregation's state after a sequence of `(value, diff)`
//! updates depends only on the multiset they sum to, so a retraction undoes
//! its insertion exactly. MIN and MAX therefore keep, over an input that may
//! retract, the ordered set of their items (one state entry per item once
//! large: a retracted minimum falls back to the next one, and an epoch
//! reads what it changes and the set's first item, docs/state.md "Set
//! aggregate layout 1"); over an input that never retracts
//! ([`Collection::is_monotonic`](crate::Collection::is_monotonic)) they keep
//! only the extreme itself.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::order_key::OrderKey;
use crate::ordered_set::Entry;
use crate::set_aggregate::SetHead;
use crate::{Data, Diff};

/// An aggregation of the values of one key.
pub trait Aggregate<V>: 'static {
    /// What is kept per key, in the state store.
    type State: Default + Serialize + DeserializeOwned;
    /// The result per key.
    type Output: crate::Data;
    /// Adds `diff` copies of `value` (a negative diff retracts): to the
    /// state, and to this aggregation's sets through `sets` when they are
    /// kept ([`SetUpdates::kept`]).
    fn update(&self, state: &mut Self::State, value: &V, diff: Diff, sets: &mut SetUpdates<'_>);
    /// The result for a key that holds `count` values (always > 0).
    fn output(&self, count: i64, state: &Self::State, sets: &Sets<'_>) -> Self::Output;
    /// How many ordered sets of items this aggregation keeps per key when
    /// its input may retract (MIN and MAX one each; none by default). Over
    /// an input that never retracts no set is kept.
    fn sets(&self) -> usize {
        0
    }
}

/// Where an aggregation's [`update`](Aggregate::update) adds items to its
/// sets: numbered from 0 for each aggregation (a tuple's parts each see
/// their own).
#[derive(Debug)]
pub struct SetUpdates<'a> {
    /// The key's set changes, if sets are kept.
    entries: Option<&'a mut Vec<(u8, Entry)>>,
    /// This aggregation's first set among the key's.
    first: usize,
    sets: usize,
}

impl<'a> SetUpdates<'a> {
    /// No sets kept: the input never retracts, or the aggregation keeps none.
    pub fn none() -> SetUpdates<'static> {
        SetUpdates { entries: None, first: 0, sets: 0 }
    }

    /// Sets `0..sets`, whose changes go to `entries`.
    pub(crate) fn kept(entries: &'a mut Vec<(u8, Entry)>, sets: usize) -> Self {
        assert!(sets <= crate::SETS_MAX, "{sets} sets, at most {}", crate::SETS_MAX);
        SetUpdates { entries: Some(entries), first: 0, sets }
    }

    /// Whether this aggregation's sets are kept (its input may retract).
    pub fn are_kept(&self) -> bool {
        self.entries.is_some()
    }

    /// Adds `diff` copies of `item` to set `set`, least item first (or
    /// greatest first if `descending`).
    pub fn add<T: Data + OrderKey>(&mut self, set: usize, item: &T, descending: bool, diff: Diff) {
        assert!(set < self.sets, "set {set} of an aggregation with {} sets", self.sets);
        let entries = self.entries.as_mut().expect("an aggregation adds to its sets only when they are kept");
        let entry = match descending {
            false => Entry::new(item, |out| item.order_key(out), diff),
            true => Entry::new(item, |out| std::cmp::Reverse(item).order_key(out), diff),
        };
        entries.push(((self.first + set) as u8, entry));
    }

    /// The `sets` sets from this one's set `at` on: a tuple's part.
    pub(crate) fn part(&mut self, at: usize, sets: usize) -> SetUpdates<'_> {
        let kept = self.entries.is_some();
        assert!(!kept || at + sets <= self.sets, "sets {at}..{} of {}", at + sets, self.sets);
        SetUpdates { entries: self.entries.as_deref_mut(), first: self.first + at, sets: if kept { sets } else { 0 } }
    }
}

/// What an aggregation's [`output`](Aggregate::output) reads of its sets:
/// each one's first item.
#[derive(Debug)]
pub struct Sets<'a> {
    /// The key's sets, if kept.
    heads: Option<&'a [SetHead]>,
    first: usize,
    sets: usize,
    /// The operator, for messages.
    what: &'a str,
}

impl<'a> Sets<'a> {
    /// No sets kept: the input never retracts, or the aggregation keeps none.
    pub fn none() -> Sets<'static> {
        Sets { heads: None, first: 0, sets: 0, what: "" }
    }

    /// A key's sets.
    pub(crate) fn kept(heads: &'a [SetHead], what: &'a str) -> Self {
        Sets { heads: Some(heads), first: 0, sets: heads.len(), what }
    }

    /// Whether this aggregation's sets are kept (its input may retract).
    pub fn are_kept(&self) -> bool {
        self.heads.is_some()
    }

    /// The first item of set `set` with a positive count (the least, or the
    /// greatest of a descending set), if any.
    ///
    /// Panics if the item does not decode as a `T`: the operator wrote it
    /// from a `T`, so that is a corrupt state store.
    pub fn first<T: Data>(&self, set: usize) -> Option<T> {
        assert!(set < self.sets, "set {set} of an aggregation with {} sets", self.sets);
        let heads = self.heads.expect("an aggregation reads its sets only when they are kept");
        let entry = heads[self.first + set].first.as_ref()?;
        Some(entry.row(self.what).unwrap_or_else(|e| panic!("{}: a set's first item: {e}", self.what)))
    }

    /// The `sets` sets from this one's set `at` on: a tuple's part.
    pub(crate) fn part(&self, at: usize, sets: usize) -> Sets<'a> {
        let kept = self.heads.is_some();
        assert!(!kept || at + sets <= self.sets, "sets {at}..{} of {}", at + sets, self.sets);
        Sets { heads: self.heads, first: self.first + at, sets: if kept { sets } else { 0 }, what: self.what }
    }
}

/// The number of values.
#[derive(Clone, Copy, Debug, Default)]
pub struct Count;

impl<V> Aggregate<V> for Count {
    type State = ();
    type Output = i64;
    fn update(&self, _: &mut (), _: &V, _: Diff, _: &mut SetUpdates<'_>) {}
    fn output(&self, count: i64, _: &(), _: &Sets<'_>) -> i64 {
        count
    }
}

/// The sum of an integer field (wrapping on overflow, like a retraction must).
#[derive(Clone, Copy, Debug)]
pub struct Sum<F>(pub F);

impl<V, F: Fn(&V) -> i64 + 'static> Aggregate<V> for Sum<F> {
    type State = i64;
    type Output = i64;
    fn update(&self, state: &mut i64, value: &V, diff: Diff, _: &mut SetUpdates<'_>) {
        *state = state.wrapping_add((self.0)(value).wrapping_mul(diff as i64));
    }
    fn output(&self, _: i64, state: &i64, _: &Sets<'_>) -> i64 {
        *state
    }
}

/// The mean of an integer field, as a float.
#[derive(Clone, Copy, Debug)]
pub struct Avg<F>(pub F);

impl<V, F: Fn(&V) -> i64 + 'static> Aggregate<V> for Avg<F> {
    type State = i64;
    type Output = OrderedF64;
    fn update(&self, state: &mut i64, value: &V, diff: Diff, _: &mut SetUpdates<'_>) {
        *state = state.wrapping_add((self.0)(value).wrapping_mul(diff as i64));
    }
    fn output(&self, count: i64, state: &i64, _: &Sets<'_>) -> OrderedF64 {
        OrderedF64(*state as f64 / count as f64)
    }
}

/// An `f64` with a total order (IEEE 754 `totalOrder`), so that it can be
/// data in a collection.
#[derive(Clone, Copy, Debug, Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct OrderedF64(pub f64);

impl PartialEq for OrderedF64 {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0).is_eq()
    }
}
impl Eq for OrderedF64 {}
impl PartialOrd for OrderedF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrderedF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}
impl std::hash::Hash for OrderedF64 {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

/// The least value of a field: over an input that may retract, its set of
/// values (ascending); over one that never does, the least value itself.
#[derive(Clone, Copy, Debug)]
pub struct Min<F>(pub F);

/// The greatest value of a field: over an input that may retract, its set
/// of values (descending); over one that never does, the greatest value
/// itself.
#[derive(Clone, Copy, Debug)]
pub struct Max<F>(pub F);

/// MIN's and MAX's update: the item into the set, or kept if it beats the
/// extreme (`better`).
fn update_extreme<T: Data + OrderKey>(
    extreme: &mut Option<T>,
    item: T,
    diff: Diff,
    sets: &mut SetUpdates<'_>,
    descending: bool,
) {
    if sets.are_kept() {
        sets.add(0, &item, descending, diff);
        return;
    }
    assert!(diff > 0, "MIN and MAX keep only the extreme of an input that never retracts, and got {diff}");
    let better = extreme.as_ref().is_none_or(|e| if descending { item > *e } else { item < *e });
    if better {
        *extreme = Some(item);
    }
}

fn output_extreme<T: Data>(extreme: &Option<T>, sets: &Sets<'_>) -> Option<T> {
    if sets.are_kept() { sets.first(0) } else { extreme.clone() }
}

impl<V, T, F> Aggregate<V> for Min<F>
where
    T: Data + OrderKey,
    F: Fn(&V) -> T + 'static,
{
    type State = Option<T>;
    type Output = Option<T>;
    fn update(&self, state: &mut Option<T>, value: &V, diff: Diff, sets: &mut SetUpdates<'_>) {
        update_extreme(state, (self.0)(value), diff, sets, false);
    }
    fn output(&self, _: i64, state: &Option<T>, sets: &Sets<'_>) -> Option<T> {
        output_extreme(state, sets)
    }
    fn sets(&self) -> usize {
        1
    }
}

impl<V, T, F> Aggregate<V> for Max<F>
where
    T: Data + OrderKey,
    F: Fn(&V) -> T + 'static,
{
    type State = Option<T>;
    type Output = Option<T>;
    fn update(&self, state: &mut Option<T>, value: &V, diff: Diff, sets: &mut SetUpdates<'_>) {
        update_extreme(state, (self.0)(value), diff, sets, true);
    }
    fn output(&self, _: i64, state: &Option<T>, sets: &Sets<'_>) -> Option<T> {
        output_extreme(state, sets)
    }
    fn sets(&self) -> usize {
        1
    }
}

/// A user-defined fold: `update(state, value, diff)` must treat a negative
/// diff as the exact inverse of a positive one.
pub struct Fold<S, U, O> {
    pub update: U,
    pub output: O,
    _state: std::marker::PhantomData<fn() -> S>,
}

impl<S, U, O> Fold<S, U, O> {
    pub fn new(update: U, output: O) -> Self {
        Fold { update, output, _state: std::marker::PhantomData }
    }
}

impl<S, U, O> std::fmt::Debug for Fold<S, U, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fold")
    }
}

impl<V, S, R, U, O> Aggregate<V> for Fold<S, U, O>
where
    S: Default + Serialize + DeserializeOwned + 'static,
    R: crate::Data,
    U: Fn(&mut S, &V, Diff) + 'static,
    O: Fn(i64, &S) -> R + 'static,
{
    type State = S;
    type Output = R;
    fn update(&self, state: &mut S, value: &V, diff: Diff, _: &mut SetUpdates<'_>) {
        (self.update)(state, value, diff);
    }
    fn output(&self, count: i64, state: &S, _: &Sets<'_>) -> R {
        (self.output)(count, state)
    }
}

macro_rules! tuple_aggregate {
    ($($name:ident $index:tt),+) => {
        impl<V, $($name: Aggregate<V>),+> Aggregate<V> for ($($name,)+) {
            type State = ($($name::State,)+);
            type Output = ($($name::Output,)+);
            // Each part's sets follow the previous parts' (`at`).
            #[allow(unused_assignments)]
            fn update(&self, state: &mut Self::State, value: &V, diff: Diff, sets: &mut SetUpdates<'_>) {
                let mut at = 0;
                $(
                    let n = self.$index.sets();
                    self.$index.update(&mut state.$index, value, diff, &mut sets.part(at, n));
                    at += n;
                )+
            }
            #[allow(unused_assignments)]
            fn output(&self, count: i64, state: &Self::State, sets: &Sets<'_>) -> Self::Output {
                let mut at = 0;
                ($({
                    let n = self.$index.sets();
                    let part = sets.part(at, n);
                    at += n;
                    self.$index.output(count, &state.$index, &part)
                },)+)
            }
            fn sets(&self) -> usize {
                0 $(+ self.$index.sets())+
            }
        }
    };
}

tuple_aggregate!(A 0);
tuple_aggregate!(A 0, B 1);
tuple_aggregate!(A 0, B 1, C 2);
tuple_aggregate!(A 0, B 1, C 2, D 3);
tuple_aggregate!(A 0, B 1, C 2, D 3, E 4);
tuple_aggregate!(A 0, B 1, C 2, D 3, E 4, G 5);
