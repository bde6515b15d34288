//! Keyed operators whose state lives in the state store.
//!
//! Each operator exchanges its input by key hash, so one worker owns each
//! key, and stashes updates per epoch. When the input frontier passes an
//! epoch it consolidates that epoch's updates, folds them into the stored
//! state key by key, emits the change of its output at the same epoch,
//! hands the state writes to the checkpoint, and only then releases the
//! epoch's capability. Its output reports to the checkpoint probe, so the
//! barrier of an epoch passes only after every operator has written it.
//!
//! Invariants:
//! - Epochs are processed in increasing order, each once.
//! - After processing an epoch, the stored state of a key is a function of
//!   the multiset of its inputs so far (not of how they were batched), and
//!   the operator's output summed over epochs equals the function of the
//!   current inputs: each epoch emits `new output - old output`.
//! - State keys are `postcard(key)`: independent of the worker count, so a
//!   job may restart with a different number of workers.
//! - An operator's output derives from the same readers as its input (its
//!   lineage), and its state is registered with that lineage.

use std::hash::{Hash, Hasher};

use differential_dataflow::consolidation::consolidate;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::Probe;
use timely::dataflow::operators::generic::Operator;

use crate::aggregate::Aggregate;
use crate::codec::{decode, encode};
use crate::collection::{Data, Key};
use crate::error::{Error, Result};
use crate::opstate::{OperatorState, Values};
use crate::stash::EpochStash;
use crate::{Collection, Diff, Epoch};

/// Which worker owns a key: a hash that is stable for a given build.
pub(crate) fn key_hash<K: Hash + ?Sized>(key: &K) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    key.hash(&mut hasher);
    hasher.finish()
}

/// How an epoch's updates reach an operator's logic.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Batching {
    /// Consolidated: grouped by key (in state key order), each key's values
    /// sorted, each (key, value) once with a non-zero diff.
    Consolidated,
    /// Only grouped by key (equal keys adjacent, in state key order), values
    /// in any order and possibly repeated or cancelling: for folds where a
    /// retraction exactly undoes an insertion (aggregates), which then skip
    /// comparing values.
    ByKey,
}

/// A keyed operator's logic: one epoch's updates (grouped by key) and the
/// operator's state in, output updates out, consolidated (each output at
/// most once, none with a zero diff: as each key's output carries its key
/// and each key is folded once an epoch, consolidating each key's output
/// is enough; nothing sorts the epoch's output again).
pub(crate) trait EpochLogic<K, V, O>:
    FnMut(Epoch, Grouped<'_, K, V>, &mut OperatorState, &mut Vec<(O, Diff)>) -> Result<()> + 'static
{
}

impl<K, V, O, F> EpochLogic<K, V, O> for F where
    F: FnMut(Epoch, Grouped<'_, K, V>, &mut OperatorState, &mut Vec<(O, Diff)>) -> Result<()> + 'static
{
}

/// An epoch's updates grouped by key ([`group_by_key`]), with each key's
/// state key (its bytes, encoded once for the grouping).
pub(crate) struct Grouped<'a, K, V> {
    /// Mutable so that an operator may consume them
    /// ([`Grouped::drain_each_key_stored`]).
    pub(crate) updates: &'a mut Vec<Update<K, V>>,
    runs: &'a KeyRuns,
}

impl<'a, K, V> Grouped<'a, K, V> {
    /// `updates` grouped by [`group_by_key`] into `runs`.
    pub(crate) fn new(updates: &'a mut Vec<Update<K, V>>, runs: &'a KeyRuns) -> Self {
        Grouped { updates, runs }
    }

    /// Each key's state key and the range of its updates, in state key order.
    pub(crate) fn runs(&self) -> impl Iterator<Item = (&'a [u8], std::ops::Range<usize>)> + use<'a, K, V> {
        self.runs.iter()
    }

    /// Calls `f(key, state_key, values)` for each key, in state key order.
    pub(crate) fn for_each_key(&self, mut f: impl FnMut(&K, &[u8], &[Update<K, V>]) -> Result<()>) -> Result<()> {
        for (key_bytes, range) in self.runs() {
            let values = &self.updates[range];
            f(&(values[0].0).0, key_bytes, values)?;
        }
        Ok(())
    }
}

/// Keys of one batched state read of [`Grouped::for_each_key_stored`].
const STORED_READ_KEYS: usize = 1024;

impl<K, V> Grouped<'_, K, V> {
    /// Calls `f(state, key, state_key, values, stored)` for each key, in
    /// state key order, with the key's stored value: read a batch of
    /// [`STORED_READ_KEYS`] keys at a time ([`OperatorState::get_many`]:
    /// one batched store lookup, keys in the store's order). `f` writes
    /// only its own key (a later key's value was read before it ran).
    pub(crate) fn for_each_key_stored(
        &self,
        state: &mut OperatorState,
        mut f: impl FnMut(&mut OperatorState, &K, &[u8], &[Update<K, V>], Option<&[u8]>) -> Result<()>,
    ) -> Result<()> {
        let (mut keys, mut stored) = (Vec::with_capacity(STORED_READ_KEYS), Values::default());
        for batch in self.runs.runs.chunks(STORED_READ_KEYS) {
            keys.clear();
            keys.extend(batch.iter().map(|(key, _)| &self.runs.bytes[key.clone()]));
            state.get_many(&keys, &mut stored)?;
            for (i, (key, updates)) in batch.iter().enumerate() {
                let values = &self.updates[updates.clone()];
                f(state, &(values[0].0).0, &self.runs.bytes[key.clone()], values, stored.get(i))?;
            }
        }
        Ok(())
    }
}

/// One key's updates, moved out of an epoch's ([`Grouped::drain_each_key_stored`]).
pub(crate) type Drained<'d, V> = &'d mut dyn Iterator<Item = (V, Diff)>;

impl<K, V> Grouped<'_, K, V> {
    /// [`Grouped::for_each_key_stored`], consuming the updates: each key is
    /// moved out of its first update (not cloned), and its values come as
    /// an iterator that moves them out too (the rest of a run is dropped
    /// after `f`). The updates are empty afterwards.
    pub(crate) fn drain_each_key_stored(
        self,
        state: &mut OperatorState,
        mut f: impl FnMut(&mut OperatorState, K, &[u8], Drained<'_, V>, Option<&[u8]>) -> Result<()>,
    ) -> Result<()> {
        let (mut keys, mut stored) = (Vec::with_capacity(STORED_READ_KEYS), Values::default());
        let (runs, mut updates) = (self.runs, self.updates.drain(..));
        let mut consumed = 0;
        for batch in runs.runs.chunks(STORED_READ_KEYS) {
            keys.clear();
            keys.extend(batch.iter().map(|(key, _)| &runs.bytes[key.clone()]));
            state.get_many(&keys, &mut stored)?;
            for (i, (key, range)) in batch.iter().enumerate() {
                assert!(range.start == consumed && range.end > range.start, "runs are consecutive and not empty");
                consumed = range.end;
                let ((first_key, first_value), first_diff) = updates.next().expect("a run's first update");
                let rest = updates.by_ref().take(range.len() - 1).map(|((_, value), diff)| (value, diff));
                let mut values = std::iter::once((first_value, first_diff)).chain(rest);
                f(state, first_key, &runs.bytes[key.clone()], &mut values, stored.get(i))?;
                values.for_each(drop);
            }
        }
        assert!(updates.next().is_none(), "every update is in a run");
        Ok(())
    }
}

/// The engine of one-input keyed operators; `logic` gets one epoch's
/// updates, grouped by key (sorted and consolidated, or only grouped, per
/// `order`), and pushes
/// output updates. Its state is keyspace `keyspace`, a new layout of
/// state `moved_from` if given, prepared by `open` (told whether the old
/// layout's entries are to be moved in).
pub(crate) fn keyed_unary<'s, K: Key, V: Data, O: Data, L>(
    input: Collection<'s, (K, V)>,
    name: &str,
    keyspace: &str,
    moved_from: Option<&str>,
    open: impl FnOnce(OperatorState, bool) -> Result<OperatorState>,
    order: Batching,
    mut logic: L,
) -> Collection<'s, O>
where
    L: EpochLogic<K, V, O>,
{
    let ctx = input.ctx.clone();
    let shared = ctx.shared.clone();
    let empty = |input: Collection<'s, (K, V)>| input.flat_map(|_| None::<O>);
    if !ctx.claim("operator", name) {
        return empty(input);
    }
    let opened = match moved_from {
        Some(from) => ctx.operator_state_moved_from(keyspace, from, &input.lineage),
        None => ctx.operator_state(keyspace, &input.lineage).map(|state| (state, false)),
    };
    let mut state = match opened.and_then(|(state, due)| open(state, due)) {
        Ok(state) => state,
        Err(e) => {
            ctx.build_error(format!("operator '{name}': {e}"));
            return empty(input);
        }
    };
    let operator_name = name.to_owned();
    let lineage = input.lineage.clone();
    let stream = input.inner.inner.unary_frontier::<CapacityContainerBuilder<Vec<(O, Epoch, Diff)>>, _, _, _>(
        Exchange::new(|update: &((K, V), Epoch, Diff)| key_hash(&(update.0).0)),
        name,
        move |_capability, _info| {
            let mut stash = EpochStash::<(K, V)>::new();
            let mut out = Vec::new();
            let (mut key_order, mut runs) = (KeyOrder::default(), KeyRuns::default());
            move |(input, frontier), output| {
                input.for_each(|capability, data| stash.absorb(&capability, data));
                while let Some(epoch) = stash.ready(&[frontier]) {
                    if shared.failed() {
                        break;
                    }
                    let (capability, mut updates) = stash.take(epoch).expect("a ready epoch is stashed");
                    match order {
                        Batching::Consolidated => group_by_key(&mut updates, &mut key_order, true, Some(&mut runs)),
                        Batching::ByKey => group_by_key(&mut updates, &mut key_order, false, Some(&mut runs)),
                    }
                    out.clear();
                    let grouped = Grouped::new(&mut updates, &runs);
                    let folded = logic(epoch, grouped, &mut state, &mut out);
                    if let Err(e) = folded.and_then(|()| state.finish_epoch(epoch)) {
                        shared.fail(Error::at(format!("operator '{operator_name}'"), e));
                        return;
                    }
                    stash.recycle(updates);
                    debug_assert!(consolidated(&out), "operator '{operator_name}' emits consolidated changes");
                    output.session(&capability).give_iterator(out.drain(..).map(|(o, d)| (o, epoch, d)));
                }
            }
        },
    );
    Collection::from_stream(stream.probe_with(&ctx.probe), ctx, lineage)
}

/// [`keyed_unary`] with its state in keyspace `op.NAME`, as it was first.
fn keyed_unary_op<'s, K: Key, V: Data, O: Data, L>(
    input: Collection<'s, (K, V)>,
    name: &str,
    order: Batching,
    logic: L,
) -> Collection<'s, O>
where
    L: EpochLogic<K, V, O>,
{
    keyed_unary(input, name, &format!("op.{name}"), None, |state, _| Ok(state), order, logic)
}

/// Whether `updates` are consolidated: no update twice, no zero diff.
fn consolidated<D: Ord + Clone>(updates: &[(D, Diff)]) -> bool {
    let mut copy = updates.to_vec();
    consolidate(&mut copy);
    copy.len() == updates.len()
}

/// One update of a keyed operator's input.
type Update<K, V> = ((K, V), Diff);

/// Scratch space for [`group_by_key`], kept across epochs (empty between):
/// an update's key bytes and three indices, not a copy of the update.
#[derive(Debug, Default)]
pub(crate) struct KeyOrder {
    /// Every update's state key (`postcard(key)`), one after another.
    bytes: Vec<u8>,
    /// The updates in their new order: where each one's key bytes are,
    /// and where it was.
    sorted: Vec<Sorted>,
}

#[derive(Clone, Copy, Debug)]
struct Sorted {
    start: usize,
    end: usize,
    /// Its index before the sort (`usize::MAX` once moved there).
    from: usize,
}

/// The keys of updates grouped by [`group_by_key`]: each run's state key
/// and where its updates are.
#[derive(Debug, Default)]
pub(crate) struct KeyRuns {
    bytes: Vec<u8>,
    /// Per run: its key's bytes and its updates, as ranges.
    runs: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
}

impl KeyRuns {
    /// Each run's state key and the range of its updates, in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], std::ops::Range<usize>)> {
        self.runs.iter().map(|(key, updates)| (&self.bytes[key.clone()], updates.clone()))
    }
}

/// Puts equal keys next to each other, which is all a linear fold needs
/// (values need no order), in the order of their state keys: the order the
/// store keeps them in, so the epoch reads and writes its keys in order,
/// and sorting compares bytes, not keys (for SQL, tuples of values behind
/// pointers). Equal keys encode to equal bytes (`codec`), and unequal keys
/// to unequal ones, so each key is one run. With `consolidated`, each run's
/// values are sorted and consolidated too (each value once, no zero diff).
/// With `runs`, each run's key and range are written there. The updates
/// move in place (an index is sorted, then they follow it).
pub(crate) fn group_by_key<K: Key, V: Data>(
    updates: &mut Vec<Update<K, V>>,
    order: &mut KeyOrder,
    consolidated: bool,
    mut runs: Option<&mut KeyRuns>,
) {
    let KeyOrder { bytes, sorted } = order;
    debug_assert!(bytes.is_empty() && sorted.is_empty(), "the scratch space starts empty");
    if let Some(runs) = runs.as_deref_mut() {
        runs.bytes.clear();
        runs.runs.clear();
    }
    for (from, ((key, _), _)) in updates.iter().enumerate() {
        let start = bytes.len();
        crate::codec::encode_into(key, bytes);
        sorted.push(Sorted { start, end: bytes.len(), from });
    }
    sorted.sort_unstable_by(|a, b| bytes[a.start..a.end].cmp(&bytes[b.start..b.end]));
    permute(updates, sorted);
    if cfg!(debug_assertions) {
        let keys = sorted.iter().map(|s| &bytes[s.start..s.end]);
        assert!(
            updates.iter().zip(keys).all(|(((k, _), _), key)| crate::codec::encode(k) == key),
            "updates follow their keys"
        );
    }
    let (mut kept, mut at) = (0, 0);
    while let Some(&Sorted { start, end, .. }) = sorted.get(at) {
        let len = sorted[at..].iter().take_while(|s| bytes[s.start..s.end] == bytes[start..end]).count();
        let run = &mut updates[at..at + len];
        let left = if consolidated { consolidate_run(run) } else { len };
        // The run's updates left move down over those consolidated away before.
        for k in 0..left {
            updates.swap(kept + k, at + k);
        }
        if let Some(runs) = runs.as_deref_mut()
            && left > 0
        {
            let from = runs.bytes.len();
            runs.bytes.extend_from_slice(&bytes[start..end]);
            runs.runs.push((from..runs.bytes.len(), kept..kept + left));
        }
        (kept, at) = (kept + left, at + len);
    }
    updates.truncate(kept);
    bytes.clear();
    sorted.clear();
}

/// Consolidates one key's updates in place: its values sorted, each once
/// with the sum of its diffs, none zero, first; returns how many.
fn consolidate_run<K, V: Ord>(run: &mut [Update<K, V>]) -> usize {
    run.sort_unstable_by(|a, b| (a.0).1.cmp(&(b.0).1));
    let mut kept = 0;
    for at in 0..run.len() {
        if kept > 0 && (run[kept - 1].0).1 == (run[at].0).1 {
            run[kept - 1].1 += run[at].1;
            continue;
        }
        if kept > 0 && run[kept - 1].1 == 0 {
            kept -= 1; // the value before summed to nothing
        }
        run.swap(kept, at);
        kept += 1;
    }
    if kept > 0 && run[kept - 1].1 == 0 {
        kept -= 1;
    }
    kept
}

/// Moves each item to its sorted place, in place: position `i` gets the
/// item that was at `sorted[i].from` (swaps along each cycle of the
/// permutation; `from` is spent as the mark of a place filled).
fn permute<T>(items: &mut [T], sorted: &mut [Sorted]) {
    debug_assert_eq!(items.len(), sorted.len());
    for first in 0..items.len() {
        let mut at = first;
        loop {
            let from = std::mem::replace(&mut sorted[at].from, usize::MAX);
            if from == usize::MAX || from == first {
                break;
            }
            items.swap(at, from);
            at = from;
        }
    }
}

/// Adds `updates` into a consolidated multiset.
fn merge_into<V: Ord + Clone>(multiset: &mut Vec<(V, Diff)>, updates: impl IntoIterator<Item = (V, Diff)>) {
    multiset.extend(updates);
    consolidate(multiset);
}

impl<'s, K: Key, V: Data> Collection<'s, (K, V)> {
    /// Aggregates the values of each key with `aggregate` (e.g. `Count`,
    /// `(Count, Sum(|v| ..), Max(|v| ..))`, or a [`Fold`](crate::Fold)),
    /// keeping one accumulator per key in state named `name`. A key with no
    /// values has no output row.
    ///
    /// An aggregation that keeps sets (MIN, MAX) over an input that may
    /// retract keeps each set one entry per item once large, as
    /// [`aggregate_sets`](Self::aggregate_sets) does: an epoch reads what it
    /// changes and each set's first item, never a key's whole set. Over an
    /// input that never retracts ([`is_monotonic`](Collection::is_monotonic))
    /// it keeps no set (a MIN keeps its least value). Each of the three
    /// keeps its state in a keyspace of its own (docs/state.md).
    pub fn aggregate<A: Aggregate<V>>(self, name: &str, aggregate: A) -> Collection<'s, (K, A::Output)> {
        if let Err(message) = self.sets_layout_kept(name, aggregate.sets()) {
            self.ctx.build_error(message);
            return self.flat_map(|_| None);
        }
        let keyspace = match (aggregate.sets(), self.monotonic) {
            (0, _) => format!("op.{name}"),
            (_, false) => return crate::set_aggregate::aggregate_kept(self, name, aggregate),
            (_, true) => format!("extremes.{name}"),
        };
        let what = format!("aggregate '{name}'");
        let mut value_bytes = Vec::new();
        let open = |state, _| Ok(state);
        keyed_unary(self, name, &keyspace, None, open, Batching::ByKey, move |epoch, updates, state, out| {
            updates.drain_each_key_stored(state, |state, key, key_bytes, values, stored| {
                let (mut count, mut acc): (i64, A::State) = match stored {
                    Some(bytes) => decode(bytes, &what)?,
                    None => (0, A::State::default()),
                };
                let no_sets = crate::aggregate::Sets::none();
                let old = (count > 0).then(|| aggregate.output(count, &acc, &no_sets));
                for (value, diff) in values {
                    aggregate.update(&mut acc, &value, diff, &mut crate::aggregate::SetUpdates::none());
                    count += diff as i64;
                }
                let new = (count > 0).then(|| aggregate.output(count, &acc, &no_sets));
                if old != new {
                    match (old, new) {
                        (Some(old), Some(new)) => out.extend([((key.clone(), old), -1), ((key, new), 1)]),
                        (Some(old), None) => out.push(((key, old), -1)),
                        (None, Some(new)) => out.push(((key, new), 1)),
                        (None, None) => {}
                    }
                }
                // A key with count 0 may still hold values (+x and -y of a
                // difference): only a key back at the empty state is deleted.
                if count == 0 && encode(&acc) == encode(&A::State::default()) {
                    state.delete(epoch, key_bytes);
                } else {
                    value_bytes.clear();
                    crate::codec::encode_into(&(count, &acc), &mut value_bytes);
                    state.put(epoch, key_bytes, &value_bytes);
                }
                Ok(())
            })
        })
    }

    /// Refuses an aggregation with sets whose data directory holds both of
    /// its layouts' keyspaces: its input changed whether it retracts, and
    /// back, so the state it would resume was last fed before the change
    /// and missed what came since (a switch alone opens a new state, which
    /// the lineage rule checks; `drop_undeclared` drops the one left).
    fn sets_layout_kept(&self, name: &str, sets: usize) -> std::result::Result<(), String> {
        let (now, other) = match self.monotonic {
            true => (format!("extremes.{name}"), crate::set_aggregate::keyspace(name)),
            false => (crate::set_aggregate::keyspace(name), format!("extremes.{name}")),
        };
        let states = &self.ctx.shared.checkpoints.resumed().states;
        if sets == 0 || !(states.contains(&now) && states.contains(&other)) {
            return Ok(());
        }
        Err(format!(
            "aggregate '{name}' has MIN/MAX state in both '{now}' and '{other}': its input changed whether it \
             retracts since '{now}' was last fed, so that state misses what came since; give the operator a new \
             name, fed by new readers (Job::source_named), or drop the old state (drop_undeclared) first"
        ))
    }

    /// Aggregates the values of each key with `aggregate`, whose state is an
    /// accumulator and ordered sets of items (MIN and MAX under
    /// retractions, COUNT(DISTINCT)), each set one entry per item once
    /// large: an epoch reads what it changes and a set's first item, never
    /// a key's whole set (docs/state.md, "Set aggregate layout 1"). A key
    /// with no values has no output row.
    pub fn aggregate_sets<A: crate::SetAggregate<V>>(self, name: &str, aggregate: A) -> Collection<'s, (K, A::Output)> {
        crate::set_aggregate::aggregate_sets(self, name, aggregate)
    }

    /// The general keyed reduction: `logic(key, input, output)` maps the
    /// consolidated multiset of a key's values (sorted, all counts non-zero)
    /// to output values with multiplicities. The multiset is kept in state
    /// named `name`; `logic` must be deterministic.
    pub fn reduce<O, L>(self, name: &str, mut logic: L) -> Collection<'s, (K, O)>
    where
        O: Data,
        L: FnMut(&K, &[(V, Diff)], &mut Vec<(O, Diff)>) + 'static,
    {
        let what = format!("reduce '{name}'");
        let mut scratch = Vec::new();
        keyed_unary_op(self, name, Batching::Consolidated, move |epoch, updates, state, out| {
            updates.for_each_key_stored(state, |state, key, key_bytes, values, stored| {
                let mut multiset: Vec<(V, Diff)> = match stored {
                    Some(bytes) => decode(bytes, &what)?,
                    None => Vec::new(),
                };
                scratch.clear();
                if !multiset.is_empty() {
                    logic(key, &multiset, &mut scratch);
                    scratch.iter_mut().for_each(|(_, d)| *d = -*d);
                }
                merge_into(&mut multiset, values.iter().map(|((_, v), d)| (v.clone(), *d)));
                if !multiset.is_empty() {
                    logic(key, &multiset, &mut scratch);
                }
                consolidate(&mut scratch);
                out.extend(scratch.drain(..).map(|(o, d)| ((key.clone(), o), d)));
                if multiset.is_empty() {
                    state.delete(epoch, key_bytes);
                } else {
                    state.put(epoch, key_bytes, encode(&multiset));
                }
                Ok(())
            })
        })
    }

    /// The `k` greatest values of each key (by `V`'s `Ord`, counting
    /// multiplicities; wrap in `std::cmp::Reverse` for the least). An epoch
    /// reads a key's first `k` values and the values it changes, not the
    /// rest of the key: values are kept in the order of their
    /// [`OrderKey`](crate::OrderKey)s (docs/state.md, "Top-k layout 1").
    /// Over an input that never retracts
    /// ([`is_monotonic`](Collection::is_monotonic)) a key keeps only its
    /// first `k` values.
    pub fn top_k(self, name: &str, k: usize) -> Collection<'s, (K, V)>
    where
        V: crate::OrderKey,
    {
        let order_key = |value: &V, out: &mut Vec<u8>| {
            use crate::OrderKey;
            std::cmp::Reverse(value).order_key(out); // greatest first
        };
        // Over an input that never retracts, a key keeps only its first k values.
        let inserts_only = self.monotonic;
        crate::top_k::top_k_by(self, name, k, inserts_only, order_key, move |_key, first, out| {
            let mut left = k as Diff;
            for (value, count) in first {
                let take = (*count).min(left);
                out.push((value.clone(), take));
                left -= take;
                if left == 0 {
                    break;
                }
            }
        })
    }

    /// Per key, `logic` of the first values by `order_key` (values with
    /// positive counts, in the byte order of their order keys, until their
    /// counts reach `limit`). `order_key` appends an order-preserving,
    /// prefix-free encoding of a value (e.g. an [`OrderKey`](crate::OrderKey)); values whose
    /// keys are equal are ordered by their postcard encoding. An epoch reads
    /// a key's first values and the values it changes, not the rest.
    ///
    /// With `inserts_only`, the caller promises that the input never
    /// retracts (asserted): a key then keeps only its first values, since a
    /// value pushed past them can never return (state bounded by `limit`
    /// values a key). An input that is
    /// [`monotonic`](Collection::is_monotonic) is taken as such unasked.
    pub fn top_k_by<O, F, L>(
        self,
        name: &str,
        limit: usize,
        inserts_only: bool,
        order_key: F,
        logic: L,
    ) -> Collection<'s, (K, O)>
    where
        O: Data,
        F: Fn(&V, &mut Vec<u8>) + 'static,
        L: FnMut(&K, &[(V, Diff)], &mut Vec<(O, Diff)>) + 'static,
    {
        let inserts_only = inserts_only || self.monotonic;
        crate::top_k::top_k_by(self, name, limit, inserts_only, order_key, logic)
    }

    /// Inner equi-join on the key: `(k, (v, w))` for every pair of values.
    /// Both sides are kept in state named `name`.
    pub fn join<W: Data>(self, name: &str, other: Collection<'s, (K, W)>) -> Collection<'s, (K, (V, W))> {
        crate::join::join(self, other, name, false).flat_map(|(k, (v, w))| w.map(|w| (k, (v, w))))
    }

    /// Left outer equi-join: like [`join`](Self::join), plus `(k, (v, None))`
    /// for each `v` whose key has no match in `other`.
    pub fn left_join<W: Data>(self, name: &str, other: Collection<'s, (K, W)>) -> Collection<'s, (K, (V, Option<W>))> {
        crate::join::join(self, other, name, true)
    }
}

impl<'s, D: Key> Collection<'s, D> {
    /// Each distinct element once (elements with a positive count).
    pub fn distinct(self, name: &str) -> Collection<'s, D> {
        self.map(|d| (d, ()))
            .reduce(name, |_, values, out| {
                if values.iter().map(|(_, c)| *c).sum::<Diff>() > 0 {
                    out.push(((), 1));
                }
            })
            .map(|(d, ())| d)
    }
}

/// The upsert envelope: the latest value per key, by offset.
pub(crate) fn upsert<'s, K: Key, V: Data>(
    changes: Collection<'s, (K, (u64, Option<V>))>,
    name: &str,
) -> Collection<'s, (K, V)> {
    let what = format!("upsert '{name}'");
    keyed_unary_op(changes, name, Batching::Consolidated, move |epoch, updates, state, out| {
        let latest = latest_by_key(
            updates
                .updates
                .iter()
                .filter(|(_, d)| *d > 0)
                .map(|((k, (offset, v)), _)| (k.clone(), *offset, v.clone()))
                .collect(),
        );
        for (key, value) in latest {
            let key_bytes = encode(&key);
            let old: Option<V> = state.get(&key_bytes)?.map(|b| decode(&b, &what)).transpose()?;
            if old == value {
                continue;
            }
            out.extend(old.map(|v| ((key.clone(), v), -1)));
            match value {
                Some(v) => {
                    state.put(epoch, key_bytes, encode(&v));
                    out.push(((key, v), 1));
                }
                None => state.delete(epoch, key_bytes),
            }
        }
        Ok(())
    })
}

/// Keeps, per key, the record with the highest offset (an upsert log's
/// latest value). Used by the upsert envelope.
fn latest_by_key<K: Ord, V>(updates: Vec<(K, u64, Option<V>)>) -> std::collections::BTreeMap<K, Option<V>> {
    let mut latest: std::collections::BTreeMap<K, (u64, Option<V>)> = std::collections::BTreeMap::new();
    for (key, offset, value) in updates {
        match latest.get(&key) {
            Some((seen, _)) if *seen > offset => {}
            _ => {
                latest.insert(key, (offset, value));
            }
        }
    }
    latest.into_iter().map(|(k, (_, v))| (k, v)).collect()
}

#[cfg(test)]
mod tests {
    use super::{KeyOrder, KeyRuns, group_by_key};
    use crate::codec::encode;

    #[test]
    fn grouping_by_key_makes_each_key_one_run_in_state_key_order() {
        // Keys whose order as values is not their order as state keys
        // (postcard's varints are little-endian): 128 is [0x80, 0x02] and
        // 127 is [0xfe, 0x01], so 128 comes first as bytes.
        let keys: [(i64, String); 5] =
            [(2, "b".into()), (127, "a".into()), (2, "a".into()), (-1, "z".into()), (128, "a".into())];
        assert!(encode(&keys[4]) < encode(&keys[1]) && keys[1] < keys[4]);
        let mut updates: Vec<_> = (0..40).map(|i| ((keys[i * 7 % 5].clone(), i as u32), 1)).collect();
        let mut order = KeyOrder::default();
        for _ in 0..2 {
            let before = updates.clone();
            group_by_key(&mut updates, &mut order, false, None);
            assert!(order.bytes.is_empty() && order.sorted.is_empty(), "the scratch space ends empty");
            let runs: Vec<_> = updates.chunk_by(|a, b| (a.0).0 == (b.0).0).map(|run| encode(&(run[0].0).0)).collect();
            assert_eq!(runs.len(), keys.len(), "each key is one run: {updates:?}");
            assert!(runs.is_sorted(), "runs in the order of their state keys");
            let (mut sorted_before, mut sorted_after) = (before, updates.clone());
            sorted_before.sort();
            sorted_after.sort();
            assert_eq!(sorted_before, sorted_after, "the same updates");
        }
    }

    #[test]
    fn consolidating_by_key_sums_each_keys_values_and_names_each_run() {
        let mut updates = vec![
            ((128i64, 'b'), 1),
            ((127, 'a'), 1),
            ((128, 'a'), 2),
            ((127, 'a'), -1),
            ((128, 'b'), 1),
            ((5, 'z'), 1),
            ((128, 'a'), -1),
            ((5, 'z'), -1),
        ];
        let (mut order, mut runs) = (KeyOrder::default(), KeyRuns::default());
        let mut expected = updates.clone();
        differential_dataflow::consolidation::consolidate(&mut expected);
        group_by_key(&mut updates, &mut order, true, Some(&mut runs));
        assert_eq!(updates, vec![((128, 'a'), 1), ((128, 'b'), 2)], "127 and 5 cancel; 128 (0x80 0x02) sorts as bytes");
        let mut sorted = updates.clone();
        sorted.sort();
        assert_eq!(sorted, expected, "what consolidation gives, grouped in another key order");
        let named: Vec<_> = runs.iter().map(|(key, range)| (key.to_vec(), range)).collect();
        assert_eq!(named, vec![(encode(&128i64), 0..2)], "one run per key left, with its state key");
    }

    proptest::proptest! {
        #[test]
        fn grouping_by_key_is_consolidation_in_another_key_order(
            input in proptest::collection::vec(((0i64..300, 0u8..4), -2isize..3), 0..200),
        ) {
            for consolidated in [false, true] {
                let mut updates = input.clone();
                let (mut order, mut runs) = (KeyOrder::default(), KeyRuns::default());
                group_by_key(&mut updates, &mut order, consolidated, Some(&mut runs));
                let named: Vec<_> = runs.iter().collect();
                proptest::prop_assert!(named.windows(2).all(|w| w[0].0 < w[1].0), "runs in strict key order");
                proptest::prop_assert_eq!(named.iter().map(|(_, r)| r.len()).sum::<usize>(), updates.len());
                for (key, range) in &named {
                    proptest::prop_assert!(updates[range.clone()].iter().all(|((k, _), _)| &encode(k)[..] == *key));
                }
                let (mut got, mut expected) = (updates.clone(), input.clone());
                if consolidated {
                    differential_dataflow::consolidation::consolidate(&mut expected);
                    proptest::prop_assert!(updates.iter().all(|(_, d)| *d != 0));
                } else {
                    expected.sort();
                }
                got.sort();
                proptest::prop_assert_eq!(got, expected);
            }
        }
    }
}
