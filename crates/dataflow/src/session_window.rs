//! Session windows that close under a watermark: each key's rows grouped
//! into sessions, each row emitted once, with its session's bounds, when
//! the watermark passes the session's end, and then forgotten.
//!
//! A session of a key is a run of its rows whose times follow each other
//! by less than the gap: the union of the overlapping intervals `[t, t +
//! gap)` of its rows (intervals that only touch stay apart), from its first
//! time to its last plus the gap. [`Collection::sessions_closing`] keeps
//! the rows of each key's open sessions and, at the epoch whose watermark
//! first reaches a session's end, emits the session's rows with its bounds
//! (diff +1 each) and deletes them. A later row on time is at or above the
//! watermark, so it can neither join nor bridge a session that ended at or
//! below it: the output is final, never retracted.
//!
//! State (keyspace `sessions.NAME`): per key, its open sessions (`0 ++
//! key` -> `postcard(Vec<Open>)`), and the multiset of its open rows
//! `(time, row)` (module `multiset`, tags 1 and 2: inline while small, a
//! row an entry once large, so a long session costs its new rows an epoch,
//! not its length). Only the sessions are also in memory, as an index of
//! the keys by their first session's end.
//!
//! Invariants:
//! - A key's open sessions are disjoint, in time order, their ends above
//!   the watermark; each counts the rows whose time is in `[start, end)`,
//!   and every stored row of the key is in one of them (checked when the
//!   rows are read back, at close).
//! - A row is folded only when its time is at or above the watermark of
//!   the epoch before (so it touches no closed session); a row below it
//!   (a partition read for the first time after the watermark passed its
//!   records, module `event_time`) is dropped and counted
//!   (`RunStats::closed_window_drops`); a row without a time is in no
//!   session and dropped.
//! - A session's rows are emitted once, all at the epoch whose watermark
//!   first reaches its end, across restarts too (the watermark resumes as
//!   committed with the state).
//! - At most [`OPEN_SESSION_ROWS_MAX`] open rows and [`OPEN_KEYS_MAX`]
//!   keys with open sessions a worker: past them the job fails with an
//!   error that names the operator.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use differential_dataflow::consolidation::consolidate;
use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::collection::{Data, Key};
use crate::error::Result;
use crate::event_time::{OPEN_KEYS_MAX, Watermark, advanced, corrupt};
use crate::keyed::Grouped;
use crate::multiset::{self, Tags};
use crate::opstate::OperatorState;
use crate::{Collection, Diff, Epoch};

/// Most rows one session operator's worker keeps in open sessions.
pub const OPEN_SESSION_ROWS_MAX: u64 = 100_000_000;

/// A session's bounds: its first time, and its last time plus the gap.
pub type SessionBounds = (i64, i64);

/// The tag of a key's open sessions.
const SESSIONS: u8 = 0;
/// The tags of a key's open rows.
const ROWS: Tags = Tags { head: 1, row: 2 };

/// One open session of a key: `[start, end)` and its number of rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Open {
    start: i64,
    end: i64,
    rows: u64,
}

impl<'s, K: Key, V: Data> Collection<'s, (K, V)> {
    /// Each value (with a time, by `time`) with the bounds of its key's
    /// session (rows `gap` or more apart are in different sessions),
    /// emitted once the watermark passes the session's end (module doc).
    /// The input must never retract.
    pub fn sessions_closing(
        self,
        name: &str,
        gap: i64,
        watermark: &Watermark<'s>,
        time: impl Fn(&V) -> Option<i64> + 'static,
    ) -> Collection<'s, (V, SessionBounds)> {
        assert!(gap > 0, "a session gap is positive");
        let what = format!("sessions '{name}'");
        let state = self.watermarked_state(name, &format!("sessions.{name}"), watermark, &what);
        // Its rows are read back by key: a grouped state.
        let Some(state) = state.map(OperatorState::grouped) else {
            return self.flat_map(|_| None);
        };
        let mut sessions = match Sessions::open(&state, what.clone(), gap, watermark.resumed) {
            Ok(sessions) => sessions,
            Err(e) => {
                self.ctx.build_error(format!("{what}: {e}"));
                return self.flat_map(|_| None);
            }
        };
        self.watermarked(name, what, watermark, state, move |state, epoch, updates, marks, out| {
            // Folded against the watermark before the epoch's records moved it.
            let dropped = sessions.fold(state, epoch, updates, &time)?;
            sessions.watermark = advanced(&sessions.what, sessions.watermark, marks)?;
            sessions.close(state, epoch, out)?;
            Ok(dropped)
        })
        .into_monotonic()
    }
}

/// A session operator's worker: the watermark it has seen, each key with
/// open sessions (by its state key) and its sessions, and the keys by their
/// first session's end. Rebuilt from the state when resumed; every change
/// goes to the state too.
struct Sessions {
    what: String,
    gap: i64,
    watermark: Option<i64>,
    keys: HashMap<Vec<u8>, Vec<Open>>,
    by_end: BTreeMap<i64, BTreeSet<Vec<u8>>>,
    rows: u64,
}

impl Sessions {
    fn open(state: &OperatorState, what: String, gap: i64, watermark: Option<i64>) -> Result<Sessions> {
        let mut sessions = Sessions { what, gap, watermark, keys: HashMap::new(), by_end: BTreeMap::new(), rows: 0 };
        let mut stored = Vec::new();
        state.scan_group(&[SESSIONS], |key, value| {
            stored.push((key[1..].to_vec(), decode::<Vec<Open>>(value, &sessions.what)?));
            Ok(true)
        })?;
        for (key_bytes, open) in stored {
            if open.is_empty() || open.iter().any(|s| Some(s.end) <= watermark) {
                let reason = format!("a key's stored sessions are open ones: {open:?} at {watermark:?}");
                return Err(corrupt(&sessions.what, reason));
            }
            sessions.index(key_bytes, open);
        }
        Ok(sessions)
    }

    /// Puts a key's open sessions (not empty) in memory.
    fn index(&mut self, key_bytes: Vec<u8>, open: Vec<Open>) {
        assert!(!open.is_empty(), "{}: a key in memory has open sessions", self.what);
        self.rows += open.iter().map(|s| s.rows).sum::<u64>();
        self.by_end.entry(open[0].end).or_default().insert(key_bytes.clone());
        self.keys.insert(key_bytes, open);
    }

    /// Takes a key's open sessions out of memory (empty if none).
    fn unindex(&mut self, key_bytes: &[u8]) -> Vec<Open> {
        let Some(open) = self.keys.remove(key_bytes) else { return Vec::new() };
        self.rows -= open.iter().map(|s| s.rows).sum::<u64>();
        let first_end = open[0].end;
        let keys = self.by_end.get_mut(&first_end).expect("an open key is indexed by its first end");
        assert!(keys.remove(key_bytes), "{}: an open key is indexed by its first end", self.what);
        if keys.is_empty() {
            self.by_end.remove(&first_end);
        }
        open
    }

    /// Writes a key's open sessions to the state and memory (none: deleted).
    fn store(&mut self, state: &mut OperatorState, epoch: Epoch, key_bytes: &[u8], open: Vec<Open>) {
        let state_key = multiset::tagged(SESSIONS, &[key_bytes]);
        if open.is_empty() {
            state.delete_grouped(epoch, state_key, 1);
        } else {
            state.put_grouped(epoch, state_key, encode(&open), 1);
            self.index(key_bytes.to_vec(), open);
        }
    }

    /// Folds an epoch's updates into their keys' open sessions; returns how
    /// many were dropped below the watermark (module doc).
    fn fold<K: Key, V: Data>(
        &mut self,
        state: &mut OperatorState,
        epoch: Epoch,
        updates: Grouped<'_, K, V>,
        time: &impl Fn(&V) -> Option<i64>,
    ) -> Result<u64> {
        let (mut dropped, mut added) = (0u64, Vec::new());
        updates.for_each_key(|_key, key_bytes, values| {
            added.clear();
            for ((_, value), diff) in values {
                assert!(*diff > 0, "{}: a session operator's input never retracts", self.what);
                match time(value) {
                    None => {}
                    Some(t) if self.watermark.is_some_and(|w| t < w) => dropped += *diff as u64,
                    Some(t) => added.push(((t, value.clone()), *diff)),
                }
            }
            if added.is_empty() {
                return Ok(());
            }
            consolidate(&mut added);
            let mut open = self.unindex(key_bytes);
            // A key with no open session has no rows: nothing to read.
            let head = match open.is_empty() {
                true => multiset::Head::default(),
                false => multiset::head::<(i64, V)>(state, ROWS, key_bytes, &self.what)?,
            };
            for ((t, _), diff) in &added {
                join(&mut open, *t, self.gap, *diff as u64);
            }
            multiset::update(state, epoch, ROWS, key_bytes, head, &added, &self.what)?;
            self.store(state, epoch, key_bytes, open);
            Ok(())
        })?;
        if self.rows > OPEN_SESSION_ROWS_MAX || self.keys.len() > OPEN_KEYS_MAX {
            let reason = format!(
                "{} rows in sessions of {} keys open on one worker (at most {OPEN_SESSION_ROWS_MAX} rows, \
                 {OPEN_KEYS_MAX} keys): does the watermark advance?",
                self.rows,
                self.keys.len()
            );
            return Err(corrupt(&self.what, reason));
        }
        Ok(dropped)
    }

    /// Emits and deletes the rows of every session whose end the watermark
    /// reached.
    fn close<V: Data>(
        &mut self,
        state: &mut OperatorState,
        epoch: Epoch,
        out: &mut Vec<((V, SessionBounds), Diff)>,
    ) -> Result<()> {
        let Some(w) = self.watermark else { return Ok(()) };
        let due: Vec<Vec<u8>> = self.by_end.range(..=w).flat_map(|(_, keys)| keys.iter().cloned()).collect();
        for key_bytes in due {
            let mut open = self.unindex(&key_bytes);
            let still_open = open.iter().position(|s| s.end > w).unwrap_or(open.len());
            assert!(still_open > 0, "{}: a due key has a closed session", self.what);
            let closed: Vec<Open> = open.drain(..still_open).collect();
            let head = multiset::head::<(i64, V)>(state, ROWS, &key_bytes, &self.what)?;
            let rows = multiset::rows(state, ROWS, &key_bytes, &head, &self.what)?;
            let taken = self.emit(&closed, &open, rows, out);
            multiset::update(state, epoch, ROWS, &key_bytes, head, &taken, &self.what)?;
            self.store(state, epoch, &key_bytes, open);
        }
        consolidate(out);
        Ok(())
    }

    /// Emits the rows of `closed` sessions (each with its session's bounds)
    /// and returns their retractions from the key's rows; checks that every
    /// row is in a session, closed or `open`, that counts it.
    fn emit<V: Data>(
        &self,
        closed: &[Open],
        open: &[Open],
        rows: Vec<((i64, V), Diff)>,
        out: &mut Vec<((V, SessionBounds), Diff)>,
    ) -> Vec<((i64, V), Diff)> {
        let all: Vec<Open> = closed.iter().chain(open).copied().collect();
        let mut counted = vec![0u64; all.len()];
        let mut taken = Vec::new();
        for ((t, value), count) in rows {
            let i = all.partition_point(|s| s.end <= t);
            assert!(i < all.len() && all[i].start <= t, "{}: row at {t} is in no session of {all:?}", self.what);
            assert!(count > 0, "{}: a stored row has a positive count", self.what);
            counted[i] += count as u64;
            if i < closed.len() {
                out.push(((value.clone(), (all[i].start, all[i].end)), count));
                taken.push(((t, value), -count));
            }
        }
        let expected: Vec<u64> = all.iter().map(|s| s.rows).collect();
        assert_eq!(counted, expected, "{}: each session counts the rows stored in it", self.what);
        taken
    }
}

/// Adds `rows` rows at time `t` to a key's open sessions: the row's
/// interval `[t, t + gap)` merges with every session it overlaps.
fn join(open: &mut Vec<Open>, t: i64, gap: i64, rows: u64) {
    let end = t.saturating_add(gap);
    let first = open.partition_point(|s| s.end <= t);
    let last = open.partition_point(|s| s.start < end);
    let mut merged = Open { start: t, end, rows };
    for s in open.drain(first..last.max(first)) {
        merged = Open { start: merged.start.min(s.start), end: merged.end.max(s.end), rows: merged.rows + s.rows };
    }
    open.insert(first, merged);
    debug_assert!(open.windows(2).all(|w| w[0].end <= w[1].start), "open sessions are disjoint and in order");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sessions of `times` from scratch: sorted, a new one at each gap.
    fn recomputed(times: &[i64], gap: i64) -> Vec<Open> {
        let mut sorted = times.to_vec();
        sorted.sort_unstable();
        let mut out: Vec<Open> = Vec::new();
        for t in sorted {
            match out.last_mut() {
                Some(s) if t < s.end => {
                    s.end = s.end.max(t + gap);
                    s.rows += 1;
                }
                _ => out.push(Open { start: t, end: t + gap, rows: 1 }),
            }
        }
        out
    }

    #[test]
    fn joining_rows_one_at_a_time_gives_the_sessions_of_them_all() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..500 {
            let (mut open, mut times) = (Vec::new(), Vec::new());
            for _ in 0..(round % 40) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let t = (seed % 100) as i64;
                times.push(t);
                join(&mut open, t, 5, 1);
                assert_eq!(open, recomputed(&times, 5), "times {times:?}");
            }
        }
    }

    #[test]
    fn intervals_that_only_touch_are_separate_sessions_until_a_row_bridges_them() {
        let mut open = Vec::new();
        join(&mut open, 0, 10, 1);
        join(&mut open, 10, 10, 1);
        assert_eq!(open, vec![Open { start: 0, end: 10, rows: 1 }, Open { start: 10, end: 20, rows: 1 }]);
        join(&mut open, 5, 10, 2);
        assert_eq!(open, vec![Open { start: 0, end: 20, rows: 4 }]);
    }
}
