//! A multiset of rows per key in operator state: inline while small, one
//! entry per row once large.
//!
//! A key's multiset has a head entry, `head tag ++ postcard(key)` ->
//! `postcard(Head)`. While its encoding is at most [`INLINE_BYTES_MAX`],
//! the head holds the rows (`Head::Inline`, sorted, no zero counts): one
//! point read and one write a key an epoch, as cheap as a single entry
//! gets. Past that the key spills (`Head::Spilled`): each row is an entry,
//! `row tag ++ postcard(key) ++ postcard(row)` -> `postcard(i64)`, and the
//! head keeps only the number of rows and their total multiplicity. A
//! change to a spilled key reads and writes the changed rows' entries, and
//! reading its rows is a prefix scan (keys are prefix-free: postcard of one
//! type). So an epoch never rewrites more than [`INLINE_BYTES_MAX`] of a
//! key it touches, whatever the key holds.
//!
//! Invariants:
//! - A key with no rows has no head and no row entries.
//! - A spilled head's `rows` is the number of its row entries and `total`
//!   the sum of their counts; no row entry has count 0; an inline head has
//!   no row entries beside it.
//! - A key spills when an inline encoding would exceed the cap, and stays
//!   spilled until it is empty (no flapping at the threshold).

use differential_dataflow::consolidation::consolidate;
use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::collection::Data;
use crate::error::Result;
use crate::opstate::{Entries, OperatorState};
use crate::{Diff, Epoch};

/// The largest inline multiset, in bytes of its head's encoding: the most
/// an epoch rewrites of one key. Small, because a key touched by a change or
/// two an epoch pays the whole rewrite (decode and encode of every inline
/// row), against a point read and a write per changed row once spilled:
/// measured on 10 M Zipf bids joined with 9 000 auctions, a 4 KiB cap let
/// the rewrites of thousands of warm keys per epoch dominate (50 µs a bid
/// once epochs got small), a 256-byte cap keeps them to tens of rows.
pub(crate) const INLINE_BYTES_MAX: usize = 256;

/// Where one multiset of a keyspace lives: the tags of its heads and rows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tags {
    pub(crate) head: u8,
    pub(crate) row: u8,
}

/// A key's head entry.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) enum Head<T> {
    /// Every row with its count, sorted by row, no zero counts.
    Inline(Vec<(T, i64)>),
    /// The rows are entries of their own: how many, and their counts' sum.
    Spilled { rows: u64, total: i64 },
}

/// [`Head::Inline`] of borrowed rows: the same encoding (variant 0, then
/// the rows as a sequence).
#[derive(Serialize)]
enum InlineRef<'a, T> {
    Inline(&'a [(T, i64)]),
}

impl<T> Default for Head<T> {
    fn default() -> Self {
        Head::Inline(Vec::new())
    }
}

impl<T: Data> Head<T> {
    /// The sum of the counts.
    pub(crate) fn total(&self) -> i64 {
        match self {
            Head::Inline(rows) => rows.iter().map(|(_, c)| c).sum(),
            Head::Spilled { total, .. } => *total,
        }
    }
}

pub(crate) fn tagged(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + parts.iter().map(|p| p.len()).sum::<usize>());
    out.push(tag);
    parts.iter().for_each(|p| out.extend_from_slice(p));
    out
}

/// The head of `key_bytes`'s multiset (empty inline if it has none).
pub(crate) fn head<T: Data>(state: &OperatorState, tags: Tags, key_bytes: &[u8], what: &str) -> Result<Head<T>> {
    let head: Head<T> = match state.get(&tagged(tags.head, &[key_bytes]))? {
        Some(bytes) => decode(&bytes, what)?,
        None => Head::default(),
    };
    if let Head::Spilled { rows, .. } = head {
        assert!(rows > 0, "{what}: a stored spilled head has rows");
    }
    Ok(head)
}

/// Every row of the multiset with its count (in row order when inline, in
/// encoded order when spilled).
pub(crate) fn rows<T: Data>(
    state: &OperatorState,
    tags: Tags,
    key_bytes: &[u8],
    head: &Head<T>,
    what: &str,
) -> Result<Vec<(T, Diff)>> {
    let (count, total) = match head {
        Head::Inline(rows) => return Ok(rows.iter().map(|(row, c)| (row.clone(), *c as Diff)).collect()),
        Head::Spilled { rows, total } => (rows, total),
    };
    let prefix = tagged(tags.row, &[key_bytes]);
    let mut rows = Vec::with_capacity(*count as usize);
    state.scan_group(&prefix, |entry_key, value| {
        let count: i64 = decode(value, what)?;
        rows.push((decode(&entry_key[prefix.len()..], what)?, count as Diff));
        Ok(true)
    })?;
    // Both sides of the boundary: the head describes its row entries.
    assert_eq!(rows.len() as u64, *count, "{what}: a spilled head counts its rows");
    assert_eq!(rows.iter().map(|(_, c)| *c as i64).sum::<i64>(), *total, "{what}: a spilled head sums its rows");
    Ok(rows)
}

/// Adds `changes` (consolidated) to the multiset whose head is `head`.
pub(crate) fn update<T: Data>(
    state: &mut OperatorState,
    epoch: Epoch,
    tags: Tags,
    key_bytes: &[u8],
    head: Head<T>,
    changes: &[(T, Diff)],
    what: &str,
) -> Result<()> {
    if changes.is_empty() {
        return Ok(());
    }
    let head_key = tagged(tags.head, &[key_bytes]);
    // A key's rows are one group: the row tag and the key.
    let group_len = 1 + key_bytes.len();
    let (rows, total) = match head {
        Head::Inline(mut rows) => {
            rows.extend(changes.iter().map(|(row, d)| (row.clone(), *d as i64)));
            consolidate(&mut rows);
            if rows.is_empty() {
                state.delete(epoch, head_key);
                return Ok(());
            }
            let mut entries = inline_or_spilled(tags, key_bytes, rows).into_iter();
            let (head_key, head) = entries.next().expect("a multiset's entries start with its head");
            state.put(epoch, head_key, head);
            for (row_key, count) in entries {
                state.put_grouped(epoch, row_key, count, group_len);
            }
            return Ok(());
        }
        Head::Spilled { rows, total } => (rows, total),
    };
    let (mut rows, mut total) = (rows as i64, total);
    for (row, diff) in changes {
        let entry_key = tagged(tags.row, &[key_bytes, &encode(row)]);
        let old: i64 = state.get(&entry_key)?.map(|b| decode(&b, what)).transpose()?.unwrap_or(0);
        let new = old + *diff as i64;
        rows += i64::from(new != 0) - i64::from(old != 0);
        total += *diff as i64;
        match new {
            0 => state.delete_grouped(epoch, entry_key, group_len),
            count => state.put_grouped(epoch, entry_key, encode(&count), group_len),
        }
    }
    assert!(rows >= 0, "{what}: a spilled key has {rows} rows");
    match rows {
        0 => state.delete(epoch, head_key),
        rows => state.put(epoch, head_key, encode(&Head::<T>::Spilled { rows: rows as u64, total })),
    }
    Ok(())
}

/// The entries that store a non-empty consolidated multiset from scratch:
/// its inline head, or a spilled head and then its rows.
pub(crate) fn inline_or_spilled<T: Data>(tags: Tags, key_bytes: &[u8], rows: Vec<(T, i64)>) -> Entries {
    assert!(!rows.is_empty(), "an empty multiset has no entries");
    let head_key = tagged(tags.head, &[key_bytes]);
    let inline = encode(&InlineRef::Inline(&rows));
    if inline.len() <= INLINE_BYTES_MAX {
        return vec![(head_key, inline)];
    }
    let total = rows.iter().map(|(_, c)| c).sum();
    let mut entries = vec![(head_key, encode(&Head::<T>::Spilled { rows: rows.len() as u64, total }))];
    entries.extend(rows.iter().map(|(row, count)| (tagged(tags.row, &[key_bytes, &encode(row)]), encode(count))));
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_inline_head_encodes_as_an_owned_one() {
        let rows: Vec<(String, i64)> = vec![("a".into(), 2), ("b".into(), -1)];
        assert_eq!(encode(&InlineRef::Inline(&rows)), encode(&Head::Inline(rows.clone())));
        let decoded: Head<String> = decode(&encode(&InlineRef::Inline(&rows)), "test").unwrap();
        assert_eq!(decoded, Head::Inline(rows));
    }

    #[test]
    fn a_large_multiset_spills_into_a_head_and_its_rows() {
        let tags = Tags { head: 7, row: 8 };
        let small: Vec<(u64, i64)> = (0..10).map(|r| (r, 1)).collect();
        assert_eq!(inline_or_spilled(tags, b"k", small).len(), 1);
        let large: Vec<(u64, i64)> = (0..5_000).map(|r| (r, 2)).collect();
        let entries = inline_or_spilled(tags, b"k", large);
        assert_eq!(entries.len(), 5_001);
        let head: Head<u64> = decode(&entries[0].1, "test").unwrap();
        assert_eq!(head, Head::Spilled { rows: 5_000, total: 10_000 });
        assert_eq!(entries[0].0, b"\x07k");
        assert!(entries[1..].iter().all(|(key, value)| key.starts_with(b"\x08k") && value == &encode(&2i64)));
    }
}
