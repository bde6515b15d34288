//! Event time: which records of a source are late, the source's
//! watermark, and aggregates that emit each window once, when the
//! watermark closes it, and then forget it.
//!
//! A source declares one field as its event time (an `i64` in the caller's
//! unit: SQL uses microseconds) and a delay `d`. Per partition, in offset
//! order, a record is **late** when its time is below `m - d`, where `m`
//! is the greatest time of the partition's earlier records that were on
//! time; a record without a time is never late. The source's
//! **watermark** after an epoch is the least `m - d` over the partitions
//! that have had records on time: no record read later from those
//! partitions is on time below it.
//!
//! [`Collection::event_time`] splits a source's records into those on
//! time and the late ones, and gives the watermark's changes.
//! [`Collection::aggregate_closing`] folds on-time records per key, as
//! [`Collection::aggregate`] does, but emits a key's result only once the
//! watermark reaches the key's closing time (its window's end), then
//! deletes the key's state: its output only grows, and its state holds
//! the open windows only. Module `session_window` does the same for
//! sessions, on the frame both share ([`Collection::watermarked`]).
//!
//! Invariants:
//! - Whether a record is late depends only on the records before it in its
//!   partition: not on how the run cut epochs, on the worker count, on the
//!   reader (every view reading the source judges it alike), or on
//!   restarts (the partition maxima are state, committed with the offsets).
//! - The watermark never goes back (asserted). A partition seen for the
//!   first time with times below the watermark does not lower it: its
//!   records are on time by their own partition's order, but those that
//!   fall in a window already closed are dropped by the closing aggregate
//!   and counted (`RunStats::closed_window_drops`, printed by `millpond
//!   run`; a topic whose partitions all have records before windows close
//!   never sees that).
//! - A closing aggregate emits a key's result once, with diff +1, at the
//!   epoch whose watermark first reaches its closing time, and never
//!   retracts it; the key's state is deleted then. Across restarts too: it
//!   resumes at the watermark committed with the source's state, so a key
//!   closed before a restart is still closed after it. An update for a key
//!   already closed (a partition seen for the first time after the window
//!   closed) is dropped and counted, never folded.
//! - Both operators' state keys are independent of the worker count.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

use differential_dataflow::consolidation::consolidate;
use serde::{Deserialize, Serialize};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::Probe;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::vec::{Broadcast, Partition};

use crate::aggregate::{Aggregate, SetUpdates, Sets};
use crate::codec::{decode, encode, encode_into};
use crate::collection::{Data, Key, Lineage};
use crate::error::{Error, Result};
use crate::keyed::{Batching, Grouped, KeyOrder, KeyRuns, group_by_key, key_hash, keyed_unary};
use crate::opstate::OperatorState;
use crate::stash::EpochStash;
use crate::{Collection, Diff, Epoch};

/// Where a record is in its topic: partition and offset.
pub type Position = (u32, u64);

/// A late record: where it was, its time, and the bound it fell below
/// (its partition's greatest on-time time before it, minus the delay).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Late<D> {
    pub partition: u32,
    pub offset: u64,
    pub time: i64,
    pub bound: i64,
    pub record: D,
}

/// The changes of a source's watermark: at each epoch where it moves, the
/// old value retracted (none the first time) and the new one inserted.
#[derive(Clone, Debug)]
pub struct Watermark<'s> {
    changes: Collection<'s, i64>,
    /// The watermark as the resumed checkpoint committed it (None in a
    /// new run): a closing aggregate starts from it, so that a window
    /// closed before a restart stays closed until the watermark moves.
    pub(crate) resumed: Option<i64>,
}

impl<'s> Watermark<'s> {
    /// The watermark as a collection: at most one value at any epoch.
    pub fn changes(&self) -> Collection<'s, i64> {
        self.changes.clone()
    }
}

/// A source's records split by [`Collection::event_time`].
#[derive(Debug)]
pub struct EventTime<'s, D: 'static> {
    /// The records on time (a collection that never retracts).
    pub on_time: Collection<'s, D>,
    pub late: Collection<'s, Late<D>>,
    pub watermark: Watermark<'s>,
}

/// What the late-record operator emits, split afterwards.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum Judged<D> {
    /// With its position, so that every output is distinct (consolidated
    /// without a sort).
    OnTime(Position, D),
    Late(Late<D>),
    Mark(i64),
}

/// Per partition, the greatest time of its on-time records.
type Maxima = BTreeMap<u32, i64>;

/// The state of [`Collection::event_time`]: the partition maxima and the
/// watermark last emitted.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Judge {
    maxima: Maxima,
    watermark: Option<i64>,
}

/// The watermark of `maxima` with delay `delay`, never below `before`: the
/// least maximum minus the delay, if any partition has one.
fn watermark_of(maxima: &Maxima, delay: i64, before: Option<i64>) -> Option<i64> {
    let least = maxima.values().min().map(|max| max.saturating_sub(delay));
    least.max(before)
}

impl<'s, D: Data> Collection<'s, (Position, D)> {
    /// Splits a source's records (each with its position) into those on
    /// time and the late ones, by `time` (None: never late) and `delay`,
    /// and gives the watermark (module doc). The partition maxima are
    /// state named `name`; the records are judged on one worker.
    pub fn event_time(self, name: &str, delay: i64, time: impl Fn(&D) -> Option<i64> + 'static) -> EventTime<'s, D> {
        assert!(delay >= 0, "a watermark delay is not negative");
        let what = format!("event time '{name}'");
        let keyed = self.map(|((partition, offset), record)| ((), (partition, offset, record)));
        let keyspace = format!("op.{name}");
        // The watermark committed with the state (opened here, at build).
        let resumed = std::rc::Rc::new(std::cell::Cell::new(None));
        let open = {
            let (resumed, what) = (resumed.clone(), what.clone());
            move |state: OperatorState, _| {
                if let Some(bytes) = state.get_uncounted(&encode(&()))? {
                    resumed.set(decode::<Judge>(&bytes, &what)?.watermark);
                }
                Ok(state)
            }
        };
        // Only grouped by key (one key): the records are put in offset order
        // here, by their positions, without comparing rows.
        let mut records = Vec::new();
        let judged = keyed_unary(keyed, name, &keyspace, None, open, Batching::ByKey, {
            move |epoch, updates: Grouped<'_, (), (u32, u64, D)>, state, out| {
                updates.drain_each_key_stored(state, |state, _key, key_bytes, values, stored| {
                    let mut judge: Judge = stored.map(|bytes| decode(bytes, &what)).transpose()?.unwrap_or_default();
                    let before = judge.watermark;
                    records.clear();
                    records.extend(values);
                    records.sort_unstable_by_key(|((partition, offset, _), _)| (*partition, *offset));
                    for ((partition, offset, record), diff) in records.drain(..) {
                        assert!(diff == 1, "{what}: a source's record is read once, never retracted");
                        out.push((judged(&mut judge.maxima, (partition, offset), record, &time, delay), 1));
                    }
                    let after = watermark_of(&judge.maxima, delay, before);
                    assert!(after >= before, "{what}: the watermark never goes back");
                    if after != before {
                        out.extend(before.map(|w| (Judged::Mark(w), -1)));
                        out.extend(after.map(|w| (Judged::Mark(w), 1)));
                    }
                    judge.watermark = after;
                    state.put(epoch, key_bytes, encode(&judge));
                    Ok(())
                })
            }
        });
        // Split by moving each output to one of three streams (three readers
        // of one stream would each get a copy of every record).
        let (ctx, lineage) = (judged.ctx.clone(), judged.lineage.clone());
        let part = |judged: &Judged<D>| match judged {
            Judged::OnTime(..) => 0,
            Judged::Late(_) => 1,
            Judged::Mark(_) => 2,
        };
        let mut parts = judged.inner.inner.partition(3, move |update| (part(&update.0), update));
        let mut part = || Collection::from_stream(parts.pop().expect("three parts"), ctx.clone(), lineage.clone());
        let (marks, late, on_time) = (part(), part(), part());
        let on_time =
            on_time.flat_map(|j| if let Judged::OnTime(_, record) = j { Some(record) } else { None }).into_monotonic();
        let late = late.flat_map(|j| if let Judged::Late(late) = j { Some(late) } else { None });
        let changes = marks.flat_map(|j| if let Judged::Mark(w) = j { Some(w) } else { None });
        EventTime { on_time, late, watermark: Watermark { changes, resumed: resumed.get() } }
    }
}

/// Judges one record against its partition's maximum, raising it when the
/// record is on time.
fn judged<D>(
    maxima: &mut Maxima,
    (partition, offset): Position,
    record: D,
    time: &impl Fn(&D) -> Option<i64>,
    delay: i64,
) -> Judged<D> {
    let Some(t) = time(&record) else { return Judged::OnTime((partition, offset), record) };
    match maxima.get(&partition) {
        Some(max) if t < max.saturating_sub(delay) => {
            let bound = max.saturating_sub(delay);
            Judged::Late(Late { partition, offset, time: t, bound, record })
        }
        _ => {
            let max = maxima.entry(partition).or_insert(t);
            *max = (*max).max(t);
            Judged::OnTime((partition, offset), record)
        }
    }
}

/// An epoch's changes of each watermark an operator closes on, in order.
pub(crate) type Marks = Vec<Vec<(i64, Diff)>>;

/// The readers of an input and of the watermarks it closes on.
fn lineage_with(lineage: &Lineage, watermarks: &[&Watermark<'_>]) -> Lineage {
    watermarks.iter().fold(lineage.clone(), |l, w| crate::collection::union(&l, &w.changes.lineage))
}

/// Most keys one closing aggregate's worker keeps open: past it the job
/// fails with an error that names the operator (a watermark that does not
/// advance, or windows too small for the data), instead of growing without
/// bound.
pub const OPEN_KEYS_MAX: usize = 10_000_000;

impl<'s, K: Key, V: Data> Collection<'s, (K, V)> {
    /// Aggregates each key's values with `aggregate`, as
    /// [`aggregate`](Collection::aggregate) does, but emits a key's result
    /// once, when `watermark` reaches `closes_at(key)`, and then deletes
    /// the key's state (module doc). The input must never retract (on-time
    /// records, through maps and filters).
    pub fn aggregate_closing<A: Aggregate<V>>(
        self,
        name: &str,
        aggregate: A,
        watermark: &Watermark<'s>,
        closes_at: impl Fn(&K) -> i64 + 'static,
    ) -> Collection<'s, (K, A::Output)> {
        let what = format!("aggregate '{name}'");
        let Some(state) = self.watermarked_state(name, &format!("closing.{name}"), &[watermark], &what) else {
            return self.flat_map(|_| None);
        };
        let mut closing = match Closing::open(&state, name, &closes_at, watermark.resumed) {
            Ok(closing) => closing,
            Err(e) => {
                self.ctx.build_error(format!("{what}: {e}"));
                return self.flat_map(|_| None);
            }
        };
        let closed = self.watermarked(name, what, &[watermark], state, move |state, epoch, updates, mut marks, out| {
            // Folded against the watermark before the epoch's records moved it.
            let dropped = closing.fold(state, epoch, updates, &aggregate, &closes_at)?;
            closing.advance(marks.remove(0))?;
            closing.close(state, epoch, &aggregate, &closes_at, out)?;
            Ok(dropped)
        });
        // Each key's result once, never retracted.
        closed.into_monotonic()
    }

    /// The operator state (keyspace `keyspace`) of a keyed operator over
    /// this collection that closes what `watermarks` pass: its input must
    /// never retract, its name be unique. None: a build error says why.
    pub(crate) fn watermarked_state(
        &self,
        name: &str,
        keyspace: &str,
        watermarks: &[&Watermark<'s>],
        what: &str,
    ) -> Option<OperatorState> {
        if !self.monotonic {
            self.ctx.build_error(format!("{what} closes windows over an input that retracts"));
            return None;
        }
        if !self.ctx.claim("operator", name) {
            return None;
        }
        let opened = self.ctx.operator_state(keyspace, &lineage_with(&self.lineage, watermarks));
        opened.map_err(|e| self.ctx.build_error(format!("{what}: {e}"))).ok()
    }

    /// The frame of a keyed operator that folds this (never retracting)
    /// collection against `watermarks`: per epoch, in order, once every
    /// input is complete through it, `step` gets the epoch's updates
    /// grouped by key (each key on the worker its hash names) and each
    /// watermark's changes (in the order given), and returns how many
    /// updates fell in closed windows (added to
    /// `RunStats::closed_window_drops`); then the state's epoch is
    /// finished. An error fails the run, named by `what`.
    pub(crate) fn watermarked<O: Data>(
        self,
        name: &str,
        what: String,
        watermarks: &[&Watermark<'s>],
        mut state: OperatorState,
        mut step: impl FnMut(&mut OperatorState, Epoch, Grouped<'_, K, V>, Marks, &mut Vec<(O, Diff)>) -> Result<u64>
        + 'static,
    ) -> Collection<'s, O> {
        let ctx = self.ctx.clone();
        let count = watermarks.len();
        assert!(count > 0, "{what}: closes on a watermark");
        let lineage = lineage_with(&self.lineage, watermarks);
        let shared = ctx.shared.clone();
        let tagged = watermarks.iter().enumerate().map(|(i, w)| w.changes.clone().map(move |mark| (i, mark)));
        let marks = tagged.reduce(Collection::concat).expect("a watermark").inner.inner.broadcast();
        let stream =
            self.inner.inner.binary_frontier::<_, CapacityContainerBuilder<Vec<(O, Epoch, Diff)>>, _, _, _, _>(
                marks,
                Exchange::new(|u: &((K, V), Epoch, Diff)| key_hash(&(u.0).0)),
                Pipeline,
                name,
                move |_capability, _info| {
                    let (mut data, mut moves) = (EpochStash::<(K, V)>::new(), EpochStash::<(usize, i64)>::new());
                    let (mut order, mut runs, mut out) = (KeyOrder::default(), KeyRuns::default(), Vec::new());
                    move |(input1, frontier1), (input2, frontier2), output| {
                        input1.for_each(|capability, batch| data.absorb(&capability, batch));
                        input2.for_each(|capability, batch| moves.absorb(&capability, batch));
                        while let Some(epoch) = [data.first(), moves.first()].into_iter().flatten().min() {
                            if frontier1.frontier().less_equal(&epoch)
                                || frontier2.frontier().less_equal(&epoch)
                                || shared.failed()
                            {
                                break;
                            }
                            let (data_capability, updates) = data.take(epoch).unzip();
                            let (move_capability, marks) = moves.take(epoch).unzip();
                            let capability = data_capability.or(move_capability).expect("one input holds the epoch");
                            let mut updates = updates.unwrap_or_default();
                            group_by_key(&mut updates, &mut order, false, Some(&mut runs));
                            out.clear();
                            let grouped = Grouped::new(&mut updates, &runs);
                            let mut split = vec![Vec::new(); count];
                            marks.into_iter().flatten().for_each(|((i, mark), diff)| split[i].push((mark, diff)));
                            let stepped = step(&mut state, epoch, grouped, split, &mut out)
                                .map(|dropped| {
                                    shared.config.counters.closed_window_drops.fetch_add(dropped, Ordering::Relaxed)
                                })
                                .and_then(|_| state.finish_epoch(epoch));
                            if let Err(e) = stepped {
                                shared.fail(Error::at(what.clone(), e));
                                return;
                            }
                            data.recycle(updates);
                            output.session(&capability).give_iterator(out.drain(..).map(|(o, d)| (o, epoch, d)));
                        }
                    }
                },
            );
        Collection::from_stream(stream.probe_with(&ctx.probe), ctx, lineage)
    }
}

/// A closing aggregate's worker: the watermark it has seen, its open keys
/// by closing time, and each open key's accumulator as the state holds it
/// (`postcard((count, state))`): an epoch reads no state, since the open
/// keys are few (the windows the delay keeps open) and all here. Rebuilt
/// from the state when resumed; every write goes to the state too.
struct Closing {
    name: String,
    watermark: Option<i64>,
    open: BTreeMap<i64, BTreeSet<Vec<u8>>>,
    accumulators: std::collections::HashMap<Vec<u8>, Vec<u8>>,
}

/// The watermark after an epoch's changes `marks`: the value inserted, if
/// any, else `current` (a resumed operator starts from the committed
/// watermark; the value retracted at its first move is that one).
pub(crate) fn advanced(what: &str, current: Option<i64>, mut marks: Vec<(i64, Diff)>) -> Result<Option<i64>> {
    consolidate(&mut marks);
    let inserted: Vec<i64> = marks.iter().filter(|(_, d)| *d > 0).map(|(w, _)| *w).collect();
    let next = match inserted.as_slice() {
        [] => return Ok(current),
        [w] => Some(*w),
        more => return Err(corrupt(what, format!("a watermark moves to one value at a time, not {more:?}"))),
    };
    if next < current {
        return Err(corrupt(what, format!("the watermark went back from {current:?} to {next:?}")));
    }
    Ok(next)
}

pub(crate) fn corrupt(what: &str, reason: String) -> Error {
    Error::CorruptState { what: what.to_owned(), reason }
}

impl Closing {
    /// Every key the state holds is open (a closed key was deleted).
    /// `watermark`: as committed with the state (the source's, resumed).
    fn open<K: Key>(
        state: &OperatorState,
        name: &str,
        closes_at: &impl Fn(&K) -> i64,
        watermark: Option<i64>,
    ) -> Result<Closing> {
        let mut closing =
            Closing { name: name.to_owned(), watermark, open: BTreeMap::new(), accumulators: Default::default() };
        let what = format!("aggregate '{name}'");
        let mut entries = Vec::new();
        state.scan_committed(|key, value| {
            entries.push((key.to_vec(), value.to_vec()));
            Ok(())
        })?;
        for (key_bytes, value) in entries {
            let key: K = decode(&key_bytes, &what)?;
            let at = closes_at(&key);
            if closing.closed(at) {
                return Err(corrupt(&what, format!("a closed key (at {at}) still has an accumulator")));
            }
            closing.open.entry(at).or_default().insert(key_bytes.clone());
            closing.accumulators.insert(key_bytes, value);
        }
        Ok(closing)
    }

    fn advance(&mut self, marks: Vec<(i64, Diff)>) -> Result<()> {
        self.watermark = advanced(&format!("aggregate '{}'", self.name), self.watermark, marks)?;
        Ok(())
    }

    fn closed(&self, at: i64) -> bool {
        self.watermark.is_some_and(|w| at <= w)
    }

    /// Folds an epoch's updates into the open keys' accumulators (held
    /// here, written to the state); updates of a key already closed are
    /// dropped and counted (module doc). Returns how many were dropped.
    fn fold<K: Key, V: Data, A: Aggregate<V>>(
        &mut self,
        state: &mut OperatorState,
        epoch: Epoch,
        updates: Grouped<'_, K, V>,
        aggregate: &A,
        closes_at: &impl Fn(&K) -> i64,
    ) -> Result<u64> {
        let what = format!("aggregate '{}'", self.name);
        let mut dropped = 0u64;
        updates.for_each_key(|key, key_bytes, values| {
            let at = closes_at(key);
            if self.closed(at) {
                dropped += values.iter().map(|(_, diff)| (*diff).max(0) as u64).sum::<u64>();
                return Ok(());
            }
            let (mut count, mut acc): (i64, A::State) = match self.accumulators.get(key_bytes) {
                Some(bytes) => decode(bytes, &what)?,
                None => {
                    self.open.entry(at).or_default().insert(key_bytes.to_vec());
                    (0, A::State::default())
                }
            };
            for ((_, value), diff) in values {
                assert!(*diff > 0, "{what}: a closing aggregate's input never retracts");
                aggregate.update(&mut acc, value, *diff, &mut SetUpdates::none());
                count += *diff as i64;
            }
            let mut value_bytes = Vec::new();
            encode_into(&(count, &acc), &mut value_bytes);
            state.put(epoch, key_bytes, &value_bytes);
            self.accumulators.insert(key_bytes.to_vec(), value_bytes);
            Ok(())
        })?;
        if self.accumulators.len() > OPEN_KEYS_MAX {
            let reason = format!(
                "{} windows open on one worker (at most {OPEN_KEYS_MAX}): does the watermark advance?",
                self.accumulators.len()
            );
            return Err(corrupt(&what, reason));
        }
        Ok(dropped)
    }

    /// Emits and deletes every open key whose closing time the watermark reached.
    fn close<K: Key, V: Data, A: Aggregate<V>>(
        &mut self,
        state: &mut OperatorState,
        epoch: Epoch,
        aggregate: &A,
        closes_at: &impl Fn(&K) -> i64,
        out: &mut Vec<((K, A::Output), Diff)>,
    ) -> Result<()> {
        let Some(w) = self.watermark else { return Ok(()) };
        let what = format!("aggregate '{}'", self.name);
        let later = self.open.split_off(&w.saturating_add(1));
        let due = std::mem::replace(&mut self.open, later);
        for (at, keys) in due {
            for key_bytes in keys {
                let key: K = decode(&key_bytes, &what)?;
                assert_eq!(closes_at(&key), at, "{what}: a key closes when its index says");
                let stored = self.accumulators.remove(&key_bytes);
                let stored = stored.ok_or_else(|| corrupt(&what, "an open key has no accumulator".to_owned()))?;
                // One key in 64, by its hash: debug builds check without reading every key.
                if cfg!(debug_assertions) && key_hash(&key_bytes) % 64 == 0 {
                    let held = state.get(&key_bytes)?;
                    assert_eq!(held.as_deref(), Some(&stored[..]), "{what}: an accumulator is what the state holds");
                }
                let (count, acc): (i64, A::State) = decode(&stored, &what)?;
                assert!(count > 0, "{what}: an open key holds values");
                out.push(((key, aggregate.output(count, &acc, &Sets::none())), 1));
                state.delete(epoch, &key_bytes);
            }
        }
        Ok(())
    }
}
