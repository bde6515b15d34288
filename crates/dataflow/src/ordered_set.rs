//! An ordered multiset of rows in operator state: inline in its owner's
//! head while small, one entry per row in key order once large, so its
//! first rows are a prefix scan that stops early (a top-k's rows, a MIN's
//! or MAX's values).
//!
//! A row is stored under its *suffix*: an order key of the row (an
//! order-preserving, prefix-free encoding, [`crate::OrderKey`] or the SQL
//! crate's sort keys) then `postcard(row)`, which makes it unique per row
//! without changing the order. Inline, the set is `Inline(Vec<Entry>)`
//! (sorted by suffix) while that encoding is at most [`INLINE_BYTES_MAX`].
//! Spilled, it is `Spilled { rows, total }` and each row is an entry
//! `prefix ++ suffix` -> `postcard((count, order key length))`, where
//! `prefix` is the owner's (e.g. a tag and the key), one group of the
//! operator's state ([`OperatorState::scan_group`]).
//!
//! Invariants:
//! - No entry or inline row has count 0; a spilled set's `rows` is the
//!   number of its row entries and `total` the sum of their counts.
//! - A set spills when its inline encoding would exceed the cap and stays
//!   spilled until it is empty; an empty set has no row entries.

use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::collection::Data;
use crate::error::Result;
use crate::multiset::INLINE_BYTES_MAX;
use crate::opstate::{Entries, OperatorState};
use crate::{Diff, Epoch};

/// One row of a set, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// The order key, then `postcard(row)`.
    pub(crate) suffix: Vec<u8>,
    /// The order key's length in `suffix`.
    pub(crate) order_len: u32,
    pub(crate) count: i64,
}

impl Entry {
    /// `row` with count `diff`, ordered by the key `order_key` appends.
    pub(crate) fn new<V: Data>(row: &V, order_key: impl FnOnce(&mut Vec<u8>), diff: Diff) -> Entry {
        let mut suffix = Vec::new();
        order_key(&mut suffix);
        let order_len = u32::try_from(suffix.len()).expect("an order key is shorter than 4 GiB");
        suffix.extend_from_slice(&encode(row));
        Entry { suffix, order_len, count: diff as i64 }
    }

    /// The row.
    pub(crate) fn row<V: Data>(&self, what: &str) -> Result<V> {
        decode(&self.suffix[self.order_len as usize..], what)
    }
}

/// A set: its rows inline, or how many and their counts' sum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum OrderedSet {
    /// Every row, sorted by suffix.
    Inline(Vec<Entry>),
    /// The rows are entries of their own: how many, and their counts' sum.
    Spilled { rows: u64, total: i64 },
}

impl Default for OrderedSet {
    fn default() -> Self {
        OrderedSet::Inline(Vec::new())
    }
}

/// [`OrderedSet::Inline`] of borrowed rows: the same encoding (variant 0,
/// then the rows as a sequence).
#[derive(Serialize)]
enum InlineRef<'a> {
    Inline(&'a [Entry]),
}

/// Sorts `changes` by suffix and adds up equal ones, dropping zeros.
pub(crate) fn consolidate(changes: &mut Vec<Entry>) {
    changes.sort_unstable_by(|a, b| a.suffix.cmp(&b.suffix));
    let mut out: Vec<Entry> = Vec::with_capacity(changes.len());
    for entry in changes.drain(..) {
        match out.last_mut() {
            Some(last) if last.suffix == entry.suffix => last.count += entry.count,
            _ => out.push(entry),
        }
    }
    out.retain(|e| e.count != 0);
    *changes = out;
}

impl OrderedSet {
    /// Asserts what a stored set promises (on the way in from the store).
    pub(crate) fn check(&self, what: &str) {
        match self {
            OrderedSet::Spilled { rows, .. } => assert!(*rows > 0, "{what}: a stored spilled set has rows"),
            OrderedSet::Inline(rows) => {
                assert!(rows.iter().all(|r| r.count != 0), "{what}: an inline row has count 0");
                assert!(rows.windows(2).all(|w| w[0].suffix < w[1].suffix), "{what}: inline rows are sorted");
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        matches!(self, OrderedSet::Inline(rows) if rows.is_empty())
    }

    /// The number of distinct rows (with a non-zero count).
    pub(crate) fn rows(&self) -> u64 {
        match self {
            OrderedSet::Inline(rows) => rows.len() as u64,
            OrderedSet::Spilled { rows, .. } => *rows,
        }
    }

    /// The first rows with positive counts, in order, until their counts
    /// reach `limit`; a spilled set's are read from the group `prefix`.
    pub(crate) fn first(&self, state: &OperatorState, prefix: &[u8], limit: usize, what: &str) -> Result<Vec<Entry>> {
        let (mut rows, mut reached) = (Vec::new(), Reached::new(limit));
        if reached.done() {
            return Ok(rows);
        }
        let mut take = |entry: Entry| {
            reached.add(entry.count);
            if entry.count > 0 {
                rows.push(entry);
            }
            !reached.done()
        };
        match self {
            OrderedSet::Inline(inline) => {
                for entry in inline {
                    if !take(entry.clone()) {
                        break;
                    }
                }
            }
            OrderedSet::Spilled { .. } => {
                state.scan_group(prefix, |entry_key, value| {
                    let (count, order_len): (i64, u32) = decode(value, what)?;
                    Ok(take(Entry { suffix: entry_key[prefix.len()..].to_vec(), order_len, count }))
                })?;
            }
        }
        Ok(rows)
    }

    /// The set of `rows` (consolidated) stored from scratch: the set for its
    /// owner's head and, if it spills, each row's entry as `(suffix, value)`.
    pub(crate) fn stored(rows: Vec<Entry>) -> (OrderedSet, Entries) {
        assert!(rows.windows(2).all(|w| w[0].suffix < w[1].suffix), "rows are consolidated");
        if encode(&InlineRef::Inline(&rows)).len() <= INLINE_BYTES_MAX {
            return (OrderedSet::Inline(rows), Vec::new());
        }
        let set = OrderedSet::Spilled { rows: rows.len() as u64, total: rows.iter().map(|r| r.count).sum() };
        (set, rows.into_iter().map(|r| (r.suffix, encode(&(r.count, r.order_len)))).collect())
    }

    /// Adds `changes` (consolidated: sorted by suffix, each once, none 0),
    /// writing a spilled set's row entries under `prefix`; returns the set
    /// after, which its owner stores in its head.
    pub(crate) fn apply(
        self,
        state: &mut OperatorState,
        epoch: Epoch,
        prefix: &[u8],
        changes: Vec<Entry>,
        what: &str,
    ) -> Result<OrderedSet> {
        assert!(changes.windows(2).all(|w| w[0].suffix < w[1].suffix), "{what}: changes are consolidated");
        let row_key = |suffix: &[u8]| [prefix, suffix].concat();
        let (mut rows, mut total) = match self {
            OrderedSet::Inline(inline) => {
                let (set, spilled) = OrderedSet::stored(merge(inline, changes));
                for (suffix, value) in spilled {
                    state.put_grouped(epoch, row_key(&suffix), value, prefix.len());
                }
                return Ok(set);
            }
            OrderedSet::Spilled { rows, total } => (rows as i64, total),
        };
        for change in changes {
            let key = row_key(&change.suffix);
            let old = match state.get(&key)? {
                Some(bytes) => decode::<(i64, u32)>(&bytes, what)?.0,
                None => 0,
            };
            let new = old + change.count;
            rows += i64::from(new != 0) - i64::from(old != 0);
            total += change.count;
            match new {
                0 => state.delete_grouped(epoch, key, prefix.len()),
                count => state.put_grouped(epoch, key, encode(&(count, change.order_len)), prefix.len()),
            }
        }
        assert!(rows >= 0, "{what}: a spilled set has {rows} rows");
        Ok(if rows == 0 { OrderedSet::default() } else { OrderedSet::Spilled { rows: rows as u64, total } })
    }
}

impl OrderedSet {
    /// Drops every row after the first ones whose positive counts reach
    /// `limit`: for an input that only inserts, rows that can never be
    /// among the first again. Reads the first rows and the dropped ones.
    pub(crate) fn trim(
        self,
        state: &mut OperatorState,
        epoch: Epoch,
        prefix: &[u8],
        limit: usize,
        what: &str,
    ) -> Result<OrderedSet> {
        let mut reached = Reached::new(limit);
        if let OrderedSet::Inline(mut rows) = self {
            let keep = rows.iter().take_while(|e| !reached.past(e.count)).count();
            rows.truncate(keep);
            return Ok(OrderedSet::Inline(rows));
        }
        let (mut rows, mut total, mut dropped) = (0u64, 0i64, Vec::new());
        state.scan_group(prefix, |entry_key, value| {
            let (count, _order_len): (i64, u32) = decode(value, what)?;
            match reached.past(count) {
                true => dropped.push(entry_key.to_vec()),
                false => (rows, total) = (rows + 1, total + count),
            }
            Ok(true)
        })?;
        for key in dropped {
            state.delete_grouped(epoch, key, prefix.len());
        }
        Ok(if rows == 0 { OrderedSet::default() } else { OrderedSet::Spilled { rows, total } })
    }
}

/// Counts the positive counts of rows in order, against a limit.
struct Reached {
    taken: u128,
    limit: u128,
}

impl Reached {
    fn new(limit: usize) -> Reached {
        Reached { taken: 0, limit: limit as u128 }
    }
    fn add(&mut self, count: i64) {
        self.taken += count.max(0) as u128;
    }
    /// Whether the rows counted so far reach the limit.
    fn done(&self) -> bool {
        self.taken >= self.limit
    }
    /// Whether a row of `count` is past the first rows (those before it
    /// reach the limit already); counts it.
    fn past(&mut self, count: i64) -> bool {
        let past = self.done();
        self.add(count);
        past
    }
}

/// Over rows that only ever gain copies: drops the `changes` (sorted by
/// suffix, counts positive) that would sit past the first `limit` rows of
/// the set once applied, the set's first rows being `old` (all of them, or
/// rows whose counts reach `limit`). They are the changes
/// [`OrderedSet::trim`] would remove right after applying them, so the
/// trimmed set is the same and they are never written.
pub(crate) fn keep_first(old: &[Entry], changes: &mut Vec<Entry>, limit: usize) {
    let mut reached = Reached::new(limit);
    let mut old = old.iter().peekable();
    let mut keep = 0;
    for change in changes.iter() {
        assert!(change.count > 0, "keep_first: a change removes copies");
        while let Some(row) = old.next_if(|row| row.suffix < change.suffix) {
            reached.add(row.count);
        }
        // The same row stored already: one position, both counts.
        let stored = old.next_if(|row| row.suffix == change.suffix).map_or(0, |row| row.count);
        if reached.past(change.count + stored) {
            break;
        }
        keep += 1;
    }
    changes.truncate(keep);
}

/// Whether rows with positive counts reach `limit`.
pub(crate) fn counts_reach(rows: &[Entry], limit: usize) -> bool {
    rows.iter().map(|r| r.count.max(0) as u128).sum::<u128>() >= limit as u128
}

/// Two sorted entry lists added up, zero counts dropped.
fn merge(old: Vec<Entry>, changes: Vec<Entry>) -> Vec<Entry> {
    let mut merged = Vec::with_capacity(old.len() + changes.len());
    let (mut old, mut changes) = (old.into_iter().peekable(), changes.into_iter().peekable());
    loop {
        let next = match (old.peek(), changes.peek()) {
            (None, None) => break,
            (Some(_), None) => old.next(),
            (None, Some(_)) => changes.next(),
            (Some(a), Some(b)) => match a.suffix.cmp(&b.suffix) {
                std::cmp::Ordering::Less => old.next(),
                std::cmp::Ordering::Greater => changes.next(),
                std::cmp::Ordering::Equal => {
                    let mut entry = old.next().expect("peeked");
                    entry.count += changes.next().expect("peeked").count;
                    Some(entry)
                }
            },
        };
        merged.extend(next.filter(|e| e.count != 0));
    }
    merged
}

/// The rows of `entries` with their counts.
pub(crate) fn decoded<V: Data>(entries: &[Entry], what: &str) -> Result<Vec<(V, Diff)>> {
    entries.iter().map(|e| Ok((e.row(what)?, e.count as Diff))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(suffix: &[u8], count: i64) -> Entry {
        Entry { suffix: suffix.to_vec(), order_len: 0, count }
    }

    #[test]
    fn merging_adds_counts_and_drops_zeros() {
        let old = vec![entry(b"a", 1), entry(b"c", 2), entry(b"e", 1)];
        let changes = vec![entry(b"b", 3), entry(b"c", -2), entry(b"e", 1), entry(b"f", -1)];
        let merged = merge(old, changes);
        assert_eq!(merged, vec![entry(b"a", 1), entry(b"b", 3), entry(b"e", 2), entry(b"f", -1)]);
    }

    #[test]
    fn consolidating_sorts_and_adds_up_equal_rows() {
        let mut changes = vec![entry(b"c", 1), entry(b"a", 2), entry(b"c", -1), entry(b"b", 1), entry(b"a", 1)];
        consolidate(&mut changes);
        assert_eq!(changes, vec![entry(b"a", 3), entry(b"b", 1)]);
    }

    #[test]
    fn only_changes_among_the_first_rows_once_applied_are_kept() {
        // Rows as (suffix, count); the kept changes' suffixes.
        let keep = |old: &[(&[u8], i64)], changes: &[(&[u8], i64)], limit| {
            let old: Vec<Entry> = old.iter().map(|(s, c)| entry(s, *c)).collect();
            let mut changes: Vec<Entry> = changes.iter().map(|(s, c)| entry(s, *c)).collect();
            keep_first(&old, &mut changes, limit);
            changes.into_iter().map(|e| e.suffix).collect::<Vec<_>>()
        };
        // Positions a 0, b 1, c 2, d 3, e 4.
        assert_eq!(keep(&[(b"b", 1), (b"d", 1)], &[(b"a", 1), (b"c", 1), (b"e", 1)], 3), [b"a", b"c"]);
        // A row with two copies takes two places.
        assert_eq!(keep(&[(b"b", 2)], &[(b"a", 1), (b"c", 1)], 3), [b"a"]);
        // A stored row that gains a copy is one place, kept if it starts before the limit.
        assert_eq!(keep(&[(b"a", 2)], &[(b"a", 1), (b"b", 1)], 2), [b"a"]);
        // Over an empty set: the first `limit` changes by count.
        assert_eq!(keep(&[], &[(b"a", 2), (b"c", 1)], 2), [b"a"]);
        assert_eq!(keep(&[(b"m", 1)], &[(b"a", 1), (b"c", 1), (b"e", 1)], 1), [b"a"]);
        assert!(keep(&[], &[(b"c", 1)], 0).is_empty());
    }

    #[test]
    fn first_rows_skip_non_positive_counts_and_stop_at_the_limit() {
        let rows = [entry(b"a", -1), entry(b"b", 2), entry(b"c", 1), entry(b"d", 5)];
        let mut reached = Reached::new(3);
        let first: Vec<&Entry> = rows.iter().filter(|e| !reached.past(e.count) && e.count > 0).collect();
        assert_eq!(first, [&entry(b"b", 2), &entry(b"c", 1)]);
        assert!(counts_reach(&[entry(b"b", 2), entry(b"c", 1)], 3));
        assert!(!counts_reach(&[entry(b"b", 2), entry(b"c", 1)], 4));
    }

    #[test]
    fn trimming_keeps_the_rows_until_their_counts_reach_the_limit() {
        let rows = [entry(b"a", 2), entry(b"b", -1), entry(b"c", 1), entry(b"d", 4)];
        let mut reached = Reached::new(3);
        assert_eq!(rows.iter().take_while(|e| !reached.past(e.count)).count(), 3);
        let mut reached = Reached::new(0);
        assert!(reached.past(5));
    }

    #[test]
    fn an_inline_set_encodes_as_a_borrowed_one() {
        let rows = vec![entry(b"a", 1), entry(b"b", -2)];
        assert_eq!(encode(&InlineRef::Inline(&rows)), encode(&OrderedSet::Inline(rows.clone())));
    }
}
