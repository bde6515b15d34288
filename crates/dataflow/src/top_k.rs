//! Top-k per key over an ordered multiset of rows in operator state, so an
//! epoch reads the first rows of a key and the rows it changes, never the
//! rest (docs/state.md, "Top-k layout 1").
//!
//! Rows are ordered by bytes: the caller's order key of the row (an
//! order-preserving, prefix-free encoding: memcomparable for Rust values,
//! the SQL crate's sort keys for rows) followed by `postcard(row)`, which
//! makes the bytes unique per row without changing the order. Those bytes
//! are the row's *suffix*. A key's head, `0x00 ++ postcard(key)` ->
//! `postcard(Head)`, holds the rows inline (`Head::Inline`: each row's
//! suffix, the length of its order key and its count, sorted by suffix)
//! while that encoding is at most [`INLINE_BYTES_MAX`]. Past that the key
//! spills: each row is an entry `0x01 ++ postcard(key) ++ suffix` ->
//! `postcard((count, order key length))`, read in order by a prefix scan
//! that stops once it has the first `limit` rows, and the head keeps the
//! number of rows and their total count.
//!
//! An epoch that changes a key reads its first rows (up to `limit`
//! multiplicities of rows with positive counts) before and after applying
//! the changes, and one entry per changed row of a spilled key. When the
//! old first rows were `limit` already and every change sorts after them,
//! the output cannot change and the second read is skipped: the common case
//! of a top-k over a growing key.
//!
//! Invariants:
//! - A key with no rows has no head and no row entries; a spilled head's
//!   `rows` is the number of its row entries and `total` the sum of their
//!   counts; no entry or inline row has count 0.
//! - A key spills when its inline head would exceed the cap and stays
//!   spilled until it is empty.
//! - The output summed over epochs is `logic` of each key's current first
//!   rows (checked against a recomputation in `tests/operators.rs` and
//!   `tests/state_cost.rs`).

use differential_dataflow::consolidation::consolidate;
use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::collection::{Data, Key};
use crate::error::Result;
use crate::keyed::{Batching, for_each_key, keyed_unary};
use crate::multiset::{INLINE_BYTES_MAX, tagged};
use crate::opstate::OperatorState;
use crate::{Collection, Diff, Epoch};

const HEAD: u8 = 0;
const ROW: u8 = 1;

/// One row of a key's multiset, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    /// The order key, then `postcard(row)`.
    suffix: Vec<u8>,
    /// The order key's length in `suffix`.
    order_len: u32,
    count: i64,
}

/// A key's head entry.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Head {
    /// Every row, sorted by suffix.
    Inline(Vec<Entry>),
    /// The rows are entries of their own: how many, and their counts' sum.
    Spilled { rows: u64, total: i64 },
}

/// [`Head::Inline`] of borrowed rows: the same encoding (variant 0, then
/// the rows as a sequence).
#[derive(Serialize)]
enum InlineRef<'a> {
    Inline(&'a [Entry]),
}

/// The keyspace of the operator named `name`: new with this layout, so a
/// job whose state has the layout before (a `reduce` over the whole
/// multiset) is refused as new state rather than misread.
pub(crate) fn keyspace(name: &str) -> String {
    format!("topk.{name}")
}

/// Per key, `logic` of the first rows by `order_key` (rows with positive
/// counts, in order, until their counts reach `limit`): see the module doc.
pub(crate) fn top_k_by<'s, K, V, O, F, L>(
    input: Collection<'s, (K, V)>,
    name: &str,
    limit: usize,
    order_key: F,
    mut logic: L,
) -> Collection<'s, (K, O)>
where
    K: Key,
    V: Data,
    O: Data,
    F: Fn(&V, &mut Vec<u8>) + 'static,
    L: FnMut(&K, &[(V, Diff)], &mut Vec<(O, Diff)>) + 'static,
{
    let what = format!("top-k '{name}'");
    let mut scratch = Vec::new();
    let open = |state: OperatorState| Ok(state.grouped());
    keyed_unary(input, name, &keyspace(name), open, Batching::Consolidated, move |epoch, updates, state, out| {
        for_each_key(updates, |key, values| {
            let key_bytes = encode(key);
            let changes = suffixes(values.iter().map(|((_, v), d)| (v, *d)), &order_key);
            let head = read_head(state, &key_bytes, &what)?;
            let old = first_rows(state, &key_bytes, &head, limit, &what)?;
            let settled = counts_reach(&old, limit)
                && old.last().is_some_and(|last| changes.iter().all(|c| c.suffix > last.suffix));
            let head = apply(state, epoch, &key_bytes, head, changes, &what)?;
            if settled {
                return Ok(());
            }
            let new = first_rows(state, &key_bytes, &head, limit, &what)?;
            if new == old {
                return Ok(());
            }
            scratch.clear();
            logic(key, &decoded(&old, &what)?, &mut scratch);
            scratch.iter_mut().for_each(|(_, d)| *d = -*d);
            logic(key, &decoded(&new, &what)?, &mut scratch);
            consolidate(&mut scratch);
            out.extend(scratch.drain(..).map(|(o, d)| ((key.clone(), o), d)));
            Ok(())
        })
    })
}

/// The changes as entries (count = diff), sorted by suffix.
fn suffixes<'a, V: Data>(
    changes: impl Iterator<Item = (&'a V, Diff)>,
    order_key: &impl Fn(&V, &mut Vec<u8>),
) -> Vec<Entry> {
    let mut entries = Vec::new();
    for (row, diff) in changes {
        let mut suffix = Vec::new();
        order_key(row, &mut suffix);
        let order_len = u32::try_from(suffix.len()).expect("an order key is shorter than 4 GiB");
        suffix.extend_from_slice(&encode(row));
        entries.push(Entry { suffix, order_len, count: diff as i64 });
    }
    entries.sort_unstable_by(|a, b| a.suffix.cmp(&b.suffix));
    // Consolidated input: each row once, so each suffix once.
    assert!(entries.windows(2).all(|w| w[0].suffix < w[1].suffix), "a top-k's changes are consolidated");
    entries
}

fn read_head(state: &OperatorState, key_bytes: &[u8], what: &str) -> Result<Head> {
    let head = match state.get(&tagged(HEAD, &[key_bytes]))? {
        Some(bytes) => decode(&bytes, what)?,
        None => Head::Inline(Vec::new()),
    };
    match &head {
        Head::Spilled { rows, .. } => assert!(*rows > 0, "{what}: a stored spilled head has rows"),
        Head::Inline(rows) => assert!(rows.iter().all(|r| r.count != 0), "{what}: an inline row has count 0"),
    }
    Ok(head)
}

/// Whether rows with positive counts reach `limit`.
fn counts_reach(rows: &[Entry], limit: usize) -> bool {
    rows.iter().map(|r| r.count.max(0) as u128).sum::<u128>() >= limit as u128
}

/// Appends `entry` to `rows` if it counts; whether `rows` now reach `limit`.
fn take(rows: &mut Vec<Entry>, entry: Entry, taken: &mut u128, limit: usize) -> bool {
    if entry.count > 0 {
        *taken += entry.count as u128;
        rows.push(entry);
    }
    *taken >= limit as u128
}

/// The first rows with positive counts, in order, until their counts reach
/// `limit`.
fn first_rows(state: &OperatorState, key_bytes: &[u8], head: &Head, limit: usize, what: &str) -> Result<Vec<Entry>> {
    let (mut rows, mut taken) = (Vec::new(), 0u128);
    if limit == 0 {
        return Ok(rows);
    }
    match head {
        Head::Inline(inline) => {
            for entry in inline {
                if take(&mut rows, entry.clone(), &mut taken, limit) {
                    break;
                }
            }
        }
        Head::Spilled { .. } => {
            let prefix = tagged(ROW, &[key_bytes]);
            state.scan_group(&prefix, |entry_key, value| {
                let (count, order_len): (i64, u32) = decode(value, what)?;
                let entry = Entry { suffix: entry_key[prefix.len()..].to_vec(), order_len, count };
                Ok(!take(&mut rows, entry, &mut taken, limit))
            })?;
        }
    }
    Ok(rows)
}

/// Adds `changes` to the key's multiset; returns its head after.
fn apply(
    state: &mut OperatorState,
    epoch: Epoch,
    key_bytes: &[u8],
    head: Head,
    changes: Vec<Entry>,
    what: &str,
) -> Result<Head> {
    let head_key = tagged(HEAD, &[key_bytes]);
    let group_len = 1 + key_bytes.len();
    let (mut rows, mut total) = match head {
        Head::Inline(inline) => {
            let merged = merge(inline, changes);
            let bytes = encode(&InlineRef::Inline(&merged));
            if merged.is_empty() {
                state.delete(epoch, head_key);
            } else if bytes.len() <= INLINE_BYTES_MAX {
                state.put(epoch, head_key, bytes);
            } else {
                let total = merged.iter().map(|r| r.count).sum();
                let spilled = Head::Spilled { rows: merged.len() as u64, total };
                state.put(epoch, head_key, encode(&spilled));
                for entry in merged {
                    let row_key = tagged(ROW, &[key_bytes, &entry.suffix]);
                    state.put_grouped(epoch, row_key, encode(&(entry.count, entry.order_len)), group_len);
                }
                return Ok(spilled);
            }
            return Ok(Head::Inline(merged));
        }
        Head::Spilled { rows, total } => (rows as i64, total),
    };
    for change in changes {
        let row_key = tagged(ROW, &[key_bytes, &change.suffix]);
        let old = match state.get(&row_key)? {
            Some(bytes) => decode::<(i64, u32)>(&bytes, what)?.0,
            None => 0,
        };
        let new = old + change.count;
        rows += i64::from(new != 0) - i64::from(old != 0);
        total += change.count;
        match new {
            0 => state.delete_grouped(epoch, row_key, group_len),
            count => state.put_grouped(epoch, row_key, encode(&(count, change.order_len)), group_len),
        }
    }
    assert!(rows >= 0, "{what}: a spilled key has {rows} rows");
    if rows == 0 {
        state.delete(epoch, head_key);
        return Ok(Head::Inline(Vec::new()));
    }
    let head = Head::Spilled { rows: rows as u64, total };
    state.put(epoch, head_key, encode(&head));
    Ok(head)
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

fn decoded<V: Data>(rows: &[Entry], what: &str) -> Result<Vec<(V, Diff)>> {
    rows.iter().map(|r| Ok((decode(&r.suffix[r.order_len as usize..], what)?, r.count as Diff))).collect()
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
    fn first_rows_skip_non_positive_counts_and_stop_at_the_limit() {
        let head = Head::Inline(vec![entry(b"a", -1), entry(b"b", 2), entry(b"c", 1), entry(b"d", 5)]);
        let (mut rows, mut taken) = (Vec::new(), 0);
        let Head::Inline(inline) = &head else { unreachable!() };
        for e in inline {
            if take(&mut rows, e.clone(), &mut taken, 3) {
                break;
            }
        }
        assert_eq!(rows, vec![entry(b"b", 2), entry(b"c", 1)]);
        assert!(counts_reach(&rows, 3));
        assert!(!counts_reach(&rows, 4));
    }
}
