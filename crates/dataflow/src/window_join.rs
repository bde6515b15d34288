//! Joins of windows that close: an inner equi-join of two inputs that
//! never retract, whose key holds a window's bound, that deletes a key's
//! state once the watermarks the windows close on have all passed the
//! key's window end (Nexmark q8: persons and auctions of the same window).
//!
//! [`Collection::join_closing`] joins as the keyed join does (module
//! `join`: `dL x (R + dR) + L x dR`, both sides' rows in state, layout 2),
//! with the two inputs' updates folded together per key, and closes a key
//! when the least of the watermarks reaches `closes_at(key)`: no input row
//! for that key can come after (each side's rows of a window come before
//! its own watermark passes the window's end), so its rows are deleted. As
//! both inputs only grow, so does the output: nothing it emitted is ever
//! retracted, and deleting a closed key's rows changes no answer.
//!
//! Invariants:
//! - The state holds the rows of open keys only: a key is deleted at the
//!   epoch whose least watermark first reaches its closing time.
//! - An update for a key already closed (the least watermark, before its
//!   epoch, at or past its closing time: a partition read for the first
//!   time after the window closed, module `event_time`) is dropped and
//!   counted (`RunStats::closed_window_drops`), never joined.
//! - The open keys' index is in memory, rebuilt from the state's heads when
//!   resumed, with the watermarks committed with the sources' state; at
//!   most [`OPEN_KEYS_MAX`] open keys a worker.

use std::collections::{BTreeMap, BTreeSet};

use differential_dataflow::consolidation::{consolidate, consolidate_slice};
use serde::{Deserialize, Serialize};

use crate::codec::decode;
use crate::collection::{Data, Key};
use crate::error::Result;
use crate::event_time::{Marks, OPEN_KEYS_MAX, Watermark, advanced, corrupt};
use crate::join::{KeyChanges, LEFT, RIGHT, join_key};
use crate::keyed::Grouped;
use crate::multiset::{self, Tags};
use crate::opstate::OperatorState;
use crate::{Collection, Diff, Epoch};

/// An epoch's output: joined pairs, per key.
type Joined<K, V, W> = Vec<((K, (V, W)), Diff)>;

/// A row of either input, folded together per key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum Side<V, W> {
    Left(V),
    Right(W),
}

impl<'s, K: Key, V: Data> Collection<'s, (K, V)> {
    /// The inner join of this collection with `other` (neither retracts)
    /// that deletes a key's rows once every one of `watermarks` has reached
    /// `closes_at(key)` (module doc). Its output never retracts.
    pub fn join_closing<W: Data>(
        self,
        other: Collection<'s, (K, W)>,
        name: &str,
        watermarks: &[&Watermark<'s>],
        closes_at: impl Fn(&K) -> i64 + 'static,
    ) -> Collection<'s, (K, (V, W))> {
        let what = format!("join '{name}'");
        let both = self.map(|(k, v)| (k, Side::Left(v))).concat(other.map(|(k, w)| (k, Side::Right(w))));
        let state = both.watermarked_state(name, &format!("closing_join.{name}"), watermarks, &what);
        // A key's spilled rows are read back as a range: a grouped state.
        let Some(state) = state.map(OperatorState::grouped) else {
            return both.flat_map(|_| None);
        };
        let resumed = watermarks.iter().map(|w| w.resumed).collect();
        let mut joins = match Joins::open(&state, what.clone(), &closes_at, resumed) {
            Ok(joins) => joins,
            Err(e) => {
                both.ctx.build_error(format!("{what}: {e}"));
                return both.flat_map(|_| None);
            }
        };
        let joined = both.watermarked(name, what, watermarks, state, move |state, epoch, updates, marks, out| {
            // Folded against the watermarks before the epoch's records moved them.
            let dropped = joins.fold::<K, V, W>(state, epoch, updates, &closes_at, out)?;
            joins.advance(marks)?;
            joins.close::<V, W>(state, epoch)?;
            Ok(dropped)
        });
        joined.into_monotonic()
    }
}

/// A closing join's worker: the watermarks it has seen and its open keys
/// by closing time (their rows are in the state only).
struct Joins {
    what: String,
    watermarks: Vec<Option<i64>>,
    open: BTreeMap<i64, BTreeSet<Vec<u8>>>,
    keys: usize,
}

impl Joins {
    /// Every key whose head the state holds is open (a closed key's rows
    /// were deleted). `watermarks`: as committed with the sources' state.
    fn open<K: Key>(
        state: &OperatorState,
        what: String,
        closes_at: &impl Fn(&K) -> i64,
        watermarks: Vec<Option<i64>>,
    ) -> Result<Joins> {
        let mut joins = Joins { what, watermarks, open: BTreeMap::new(), keys: 0 };
        let mut heads = Vec::new();
        state.scan_committed(|entry, _| {
            if matches!(entry.first(), Some(&tag) if tag == LEFT.head || tag == RIGHT.head) {
                heads.push(entry[1..].to_vec());
            }
            Ok(())
        })?;
        for key_bytes in heads {
            let at = closes_at(&decode::<K>(&key_bytes, &joins.what)?);
            if joins.closed(at) {
                return Err(corrupt(&joins.what, format!("a closed key (at {at}) still has rows")));
            }
            joins.keys += usize::from(joins.open.entry(at).or_default().insert(key_bytes));
        }
        Ok(joins)
    }

    /// The least of the watermarks (None until each has a value).
    fn watermark(&self) -> Option<i64> {
        self.watermarks.iter().copied().min().flatten()
    }

    fn closed(&self, at: i64) -> bool {
        self.watermark().is_some_and(|w| at <= w)
    }

    fn advance(&mut self, marks: Marks) -> Result<()> {
        assert_eq!(marks.len(), self.watermarks.len(), "{}: one list of changes per watermark", self.what);
        for (watermark, changes) in self.watermarks.iter_mut().zip(marks) {
            *watermark = advanced(&self.what, *watermark, changes)?;
        }
        Ok(())
    }

    /// Joins an epoch's updates of the open keys (module `join`), keeping
    /// the keys in the index; drops those of closed keys and returns how
    /// many.
    fn fold<K: Key, V: Data, W: Data>(
        &mut self,
        state: &mut OperatorState,
        epoch: Epoch,
        updates: Grouped<'_, K, Side<V, W>>,
        closes_at: &impl Fn(&K) -> i64,
        out: &mut Joined<K, V, W>,
    ) -> Result<u64> {
        let (mut dropped, mut joined) = (0u64, Vec::new());
        updates.for_each_key(|key, key_bytes, values| {
            let at = closes_at(key);
            if self.closed(at) {
                dropped += values.iter().map(|(_, diff)| (*diff).max(0) as u64).sum::<u64>();
                return Ok(());
            }
            let (mut d_left, mut d_right) = (Vec::new(), Vec::new());
            for ((_, side), diff) in values {
                assert!(*diff > 0, "{}: a closing join's inputs never retract", self.what);
                match side {
                    Side::Left(v) => d_left.push((v.clone(), *diff)),
                    Side::Right(w) => d_right.push((w.clone(), *diff)),
                }
            }
            consolidate(&mut d_left);
            consolidate(&mut d_right);
            joined.clear();
            join_key(&KeyChanges { epoch, key, key_bytes, d_left, d_right }, false, state, &self.what, &mut joined)?;
            let first = out.len();
            out.extend(joined.drain(..).map(|((k, (v, w)), d)| ((k, (v, w.expect("an inner join matches"))), d)));
            let consolidated = consolidate_slice(&mut out[first..]);
            out.truncate(first + consolidated);
            self.keys += usize::from(self.open.entry(at).or_default().insert(key_bytes.to_vec()));
            Ok(())
        })?;
        if self.keys > OPEN_KEYS_MAX {
            let reason =
                format!("{} keys open on one worker (at most {OPEN_KEYS_MAX}): does the watermark advance?", self.keys);
            return Err(corrupt(&self.what, reason));
        }
        Ok(dropped)
    }

    /// Deletes the rows of every open key whose closing time the least
    /// watermark reached.
    fn close<V: Data, W: Data>(&mut self, state: &mut OperatorState, epoch: Epoch) -> Result<()> {
        let Some(w) = self.watermark() else { return Ok(()) };
        let later = self.open.split_off(&w.saturating_add(1));
        let due = std::mem::replace(&mut self.open, later);
        for key_bytes in due.into_values().flatten() {
            self.keys -= 1;
            delete_side::<V>(state, epoch, LEFT, &key_bytes, &self.what)?;
            delete_side::<W>(state, epoch, RIGHT, &key_bytes, &self.what)?;
        }
        Ok(())
    }
}

/// Deletes one side's rows of a key (its multiset, module `multiset`).
fn delete_side<T: Data>(
    state: &mut OperatorState,
    epoch: Epoch,
    tags: Tags,
    key_bytes: &[u8],
    what: &str,
) -> Result<()> {
    let head = multiset::head::<T>(state, tags, key_bytes, what)?;
    let mut rows = multiset::rows(state, tags, key_bytes, &head, what)?;
    rows.iter_mut().for_each(|(_, count)| *count = -*count);
    multiset::update(state, epoch, tags, key_bytes, head, &rows, what)?;
    debug_assert!(multiset::head::<T>(state, tags, key_bytes, what).is_ok_and(|h| h.total() == 0), "{what}: deleted");
    Ok(())
}
