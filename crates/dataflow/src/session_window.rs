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
//! State (keyspace `sessions.NAME`): the rows of every key's open
//! sessions, one entry each, `postcard(key) ++ time ++ epoch ++ index` ->
//! `postcard((row, count))` (time as big-endian with its sign bit flipped,
//! so a key's rows are in time order; the epoch that folded the row and its
//! index among that epoch's rows of the key, so entries are written blind,
//! never read first). The sessions are derived from the rows: held in
//! memory (per key, and the keys by their first session's end), rebuilt by
//! a scan of the keyspace when the job resumes. An epoch writes its new
//! rows, and reads back a key's rows only when a session of it closes, up
//! to that session's end.
//!
//! Invariants:
//! - A key's open sessions are disjoint, in time order, their ends above
//!   the watermark; each counts the rows whose time is in `[start, end)`
//!   (checked when the rows are read back, at close, and when rebuilt).
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

use crate::codec::{decode, encode};
use crate::collection::{Data, Key};
use crate::error::Result;
use crate::event_time::{OPEN_KEYS_MAX, Watermark, advanced, corrupt};
use crate::keyed::Grouped;
use crate::opstate::OperatorState;
use crate::{Collection, Diff, Epoch};

/// Most rows one session operator's worker keeps in open sessions.
pub const OPEN_SESSION_ROWS_MAX: u64 = 100_000_000;

/// A session's bounds: its first time, and its last time plus the gap.
pub type SessionBounds = (i64, i64);

/// Bytes a row's entry key adds to its key's: time, epoch and index.
const ROW_SUFFIX_LEN: usize = 8 + 8 + 4;

/// One open session of a key: `[start, end)` and its number of rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
        let state = self.watermarked_state(name, &format!("sessions.{name}"), &[watermark], &what);
        // A key's rows are read back as a range: a grouped state.
        let Some(state) = state.map(OperatorState::grouped) else {
            return self.flat_map(|_| None);
        };
        let mut sessions = match Sessions::open::<V>(&state, what.clone(), gap, watermark.resumed) {
            Ok(sessions) => sessions,
            Err(e) => {
                self.ctx.build_error(format!("{what}: {e}"));
                return self.flat_map(|_| None);
            }
        };
        self.watermarked(name, what, &[watermark], state, move |state, epoch, updates, mut marks, out| {
            // Folded against the watermark before the epoch's records moved it.
            let dropped = sessions.fold(state, epoch, updates, &time)?;
            sessions.watermark = advanced(&sessions.what, sessions.watermark, marks.remove(0))?;
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
    /// The sessions of the rows the state holds (all in open sessions).
    fn open<V: Data>(state: &OperatorState, what: String, gap: i64, watermark: Option<i64>) -> Result<Sessions> {
        let mut sessions = Sessions { what, gap, watermark, keys: HashMap::new(), by_end: BTreeMap::new(), rows: 0 };
        let (mut key, mut open): (Vec<u8>, Vec<Open>) = (Vec::new(), Vec::new());
        let mut keys = Vec::new();
        state.scan_committed(|entry, value| {
            let (key_bytes, t) = row_entry(entry, &sessions.what)?;
            let (_, count): (V, Diff) = decode(value, &sessions.what)?;
            if key_bytes != key {
                keys.push((std::mem::replace(&mut key, key_bytes.to_vec()), std::mem::take(&mut open)));
            }
            join(&mut open, t, gap, count as u64);
            Ok(())
        })?;
        keys.push((key, open));
        for (key_bytes, open) in keys.into_iter().filter(|(_, open)| !open.is_empty()) {
            if open.iter().any(|s| Some(s.end) <= watermark) {
                let reason = format!("a key's stored rows are in open sessions: {open:?} at {watermark:?}");
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

    /// Puts a key's open sessions back in memory, if it has any.
    fn keep(&mut self, key_bytes: &[u8], open: Vec<Open>) {
        if !open.is_empty() {
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
            for (i, ((t, value), diff)) in added.drain(..).enumerate() {
                join(&mut open, t, self.gap, diff as u64);
                let entry = row_key(key_bytes, t, epoch, u32::try_from(i).expect("an epoch's rows of a key fit a u32"));
                state.put_grouped(epoch, entry, encode(&(value, diff)), key_bytes.len());
            }
            self.keep(key_bytes, open);
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
            self.take_closed(state, epoch, &key_bytes, &closed, out)?;
            self.keep(&key_bytes, open);
        }
        consolidate(out);
        Ok(())
    }

    /// Emits the rows of a key's `closed` sessions (its first ones), each
    /// with its session's bounds, and deletes them; checks that each
    /// session holds the rows it counts.
    fn take_closed<V: Data>(
        &self,
        state: &mut OperatorState,
        epoch: Epoch,
        key_bytes: &[u8],
        closed: &[Open],
        out: &mut Vec<((V, SessionBounds), Diff)>,
    ) -> Result<()> {
        let last_end = closed.last().expect("a closed session").end;
        let (mut counted, mut taken) = (vec![0u64; closed.len()], Vec::new());
        state.scan_group(key_bytes, |entry, value| {
            let (_, t) = row_entry(entry, &self.what)?;
            if t >= last_end {
                return Ok(false); // the open sessions' rows, not read
            }
            let i = closed.partition_point(|s| s.end <= t);
            assert!(
                i < closed.len() && closed[i].start <= t,
                "{}: row at {t} is in no session of {closed:?}",
                self.what
            );
            let (value, count): (V, Diff) = decode(value, &self.what)?;
            assert!(count > 0, "{}: a stored row has a positive count", self.what);
            counted[i] += count as u64;
            out.push(((value, (closed[i].start, closed[i].end)), count));
            taken.push(entry.to_vec());
            Ok(true)
        })?;
        let expected: Vec<u64> = closed.iter().map(|s| s.rows).collect();
        assert_eq!(counted, expected, "{}: each session counts the rows stored in it", self.what);
        for entry in taken {
            state.delete_grouped(epoch, entry, key_bytes.len());
        }
        Ok(())
    }
}

/// A row's entry key: its key's, then its time (order-preserving), the
/// epoch that folded it and its index among that epoch's rows of the key.
fn row_key(key_bytes: &[u8], t: i64, epoch: Epoch, index: u32) -> Vec<u8> {
    let mut entry = Vec::with_capacity(key_bytes.len() + ROW_SUFFIX_LEN);
    entry.extend_from_slice(key_bytes);
    entry.extend_from_slice(&((t as u64) ^ (1 << 63)).to_be_bytes());
    entry.extend_from_slice(&epoch.to_be_bytes());
    entry.extend_from_slice(&index.to_be_bytes());
    entry
}

/// A row entry's key bytes and time.
fn row_entry<'e>(entry: &'e [u8], what: &str) -> Result<(&'e [u8], i64)> {
    let Some(at) = entry.len().checked_sub(ROW_SUFFIX_LEN).filter(|at| *at > 0) else {
        return Err(corrupt(what, format!("a row entry of {} bytes", entry.len())));
    };
    let time: [u8; 8] = entry[at..at + 8].try_into().expect("8 bytes");
    Ok((&entry[..at], (u64::from_be_bytes(time) ^ (1 << 63)) as i64))
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
    fn row_entries_sort_by_time_and_give_back_their_key_and_time() {
        let times = [i64::MIN, -5_000_000, -1, 0, 1, 7_000_000, i64::MAX];
        let entries: Vec<Vec<u8>> = times.iter().map(|&t| row_key(b"k", t, 3, 0)).collect();
        assert!(entries.windows(2).all(|w| w[0] < w[1]), "entries in time order");
        for (entry, &t) in entries.iter().zip(&times) {
            assert_eq!(row_entry(entry, "test").unwrap(), (&b"k"[..], t));
        }
        assert!(row_key(b"k", 5, 1, 9) < row_key(b"k", 5, 2, 0), "then by epoch and index");
        assert!(row_entry(&entries[0][1..], "test").is_err(), "an entry without its key is corrupt");
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
