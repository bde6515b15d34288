//! Aggregations for [`Collection::aggregate`](crate::Collection::aggregate):
//! accumulators that take insertions and retractions.
//!
//! Invariant: an accumulator's state after a sequence of `(value, diff)`
//! updates depends only on the multiset they sum to, so a retraction undoes
//! its insertion exactly. MIN and MAX therefore keep the multiset of values
//! they have seen (a retracted minimum falls back to the next one).

use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Diff;

/// An aggregation of the values of one key.
pub trait Aggregate<V>: 'static {
    /// What is kept per key, in the state store.
    type State: Default + Serialize + DeserializeOwned;
    /// The result per key.
    type Output: crate::Data;
    /// Adds `diff` copies of `value` (a negative diff retracts).
    fn update(&self, state: &mut Self::State, value: &V, diff: Diff);
    /// The result for a key that holds `count` values (always > 0).
    fn output(&self, count: i64, state: &Self::State) -> Self::Output;
}

/// The number of values.
#[derive(Clone, Copy, Debug, Default)]
pub struct Count;

impl<V> Aggregate<V> for Count {
    type State = ();
    type Output = i64;
    fn update(&self, _: &mut (), _: &V, _: Diff) {}
    fn output(&self, count: i64, _: &()) -> i64 {
        count
    }
}

/// The sum of an integer field (wrapping on overflow, like a retraction must).
#[derive(Clone, Copy, Debug)]
pub struct Sum<F>(pub F);

impl<V, F: Fn(&V) -> i64 + 'static> Aggregate<V> for Sum<F> {
    type State = i64;
    type Output = i64;
    fn update(&self, state: &mut i64, value: &V, diff: Diff) {
        *state = state.wrapping_add((self.0)(value).wrapping_mul(diff as i64));
    }
    fn output(&self, _: i64, state: &i64) -> i64 {
        *state
    }
}

/// The mean of an integer field, as a float.
#[derive(Clone, Copy, Debug)]
pub struct Avg<F>(pub F);

impl<V, F: Fn(&V) -> i64 + 'static> Aggregate<V> for Avg<F> {
    type State = i64;
    type Output = OrderedF64;
    fn update(&self, state: &mut i64, value: &V, diff: Diff) {
        *state = state.wrapping_add((self.0)(value).wrapping_mul(diff as i64));
    }
    fn output(&self, count: i64, state: &i64) -> OrderedF64 {
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

/// A multiset of values, for MIN and MAX under retractions.
fn add_to_multiset<T: Ord>(set: &mut BTreeMap<T, i64>, value: T, diff: Diff) {
    use std::collections::btree_map::Entry;
    match set.entry(value) {
        Entry::Occupied(mut entry) => {
            *entry.get_mut() += diff as i64;
            if *entry.get() == 0 {
                entry.remove();
            }
        }
        Entry::Vacant(entry) => {
            if diff != 0 {
                entry.insert(diff as i64);
            }
        }
    }
}

/// The least value of a field.
#[derive(Clone, Copy, Debug)]
pub struct Min<F>(pub F);

impl<V, T, F> Aggregate<V> for Min<F>
where
    T: crate::Data,
    F: Fn(&V) -> T + 'static,
{
    type State = BTreeMap<T, i64>;
    type Output = Option<T>;
    fn update(&self, state: &mut Self::State, value: &V, diff: Diff) {
        add_to_multiset(state, (self.0)(value), diff);
    }
    fn output(&self, _: i64, state: &Self::State) -> Option<T> {
        state.iter().find(|(_, c)| **c > 0).map(|(v, _)| v.clone())
    }
}

/// The greatest value of a field.
#[derive(Clone, Copy, Debug)]
pub struct Max<F>(pub F);

impl<V, T, F> Aggregate<V> for Max<F>
where
    T: crate::Data,
    F: Fn(&V) -> T + 'static,
{
    type State = BTreeMap<T, i64>;
    type Output = Option<T>;
    fn update(&self, state: &mut Self::State, value: &V, diff: Diff) {
        add_to_multiset(state, (self.0)(value), diff);
    }
    fn output(&self, _: i64, state: &Self::State) -> Option<T> {
        state.iter().rev().find(|(_, c)| **c > 0).map(|(v, _)| v.clone())
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
    fn update(&self, state: &mut S, value: &V, diff: Diff) {
        (self.update)(state, value, diff);
    }
    fn output(&self, count: i64, state: &S) -> R {
        (self.output)(count, state)
    }
}

macro_rules! tuple_aggregate {
    ($($name:ident $index:tt),+) => {
        impl<V, $($name: Aggregate<V>),+> Aggregate<V> for ($($name,)+) {
            type State = ($($name::State,)+);
            type Output = ($($name::Output,)+);
            fn update(&self, state: &mut Self::State, value: &V, diff: Diff) {
                $(self.$index.update(&mut state.$index, value, diff);)+
            }
            fn output(&self, count: i64, state: &Self::State) -> Self::Output {
                ($(self.$index.output(count, &state.$index),)+)
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
