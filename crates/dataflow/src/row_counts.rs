//! [`RowCounts`]: a multiplicity per row (its bytes), for readers that hold
//! a whole view in memory (a server's hub holds every row of a view for the
//! snapshots of the subscribers that join it).
//!
//! One hash table would grow by rehashing every row at once: ~0.2 s at a
//! million rows on a busy core, in the middle of whatever the reader was
//! doing. So the rows are spread over [`SHARDS`] tables by hash, and a
//! reader with time to spare grows the fullest ones ahead of need, a few at
//! a time ([`RowCounts::grow_ahead`]); a table that fills anyway grows on
//! its own, a [`SHARDS`]th of the whole.
//!
//! Invariants: a row is held at most once, with a count other than 0
//! (setting 0 removes it); `len` is the number of rows held; growing ahead
//! never changes what is held.

use std::hash::BuildHasher;

use rustc_hash::{FxBuildHasher, FxHashMap};

/// Tables the rows are spread over (a power of two).
pub(crate) const SHARDS: usize = 256;
/// A table past this share of its capacity is grown ahead (doubled) when
/// the reader asks; well below the 7/8 at which it would grow by itself.
const GROW_AHEAD_LOAD: f64 = 0.6;

/// Multiplicity per row, in shards (none until the first row is held:
/// an empty one costs a pointer).
#[derive(Debug, Default)]
pub(crate) struct RowCounts {
    shards: Vec<FxHashMap<Box<[u8]>, i64>>,
    len: usize,
}

fn shard_of(row: &[u8]) -> usize {
    // The top bits: the tables' own hashing uses the low ones.
    (FxBuildHasher.hash_one(row) >> (64 - SHARDS.trailing_zeros())) as usize
}

impl RowCounts {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The row's count (0: not held).
    #[cfg(test)]
    pub(crate) fn get(&self, row: &[u8]) -> i64 {
        self.shards.get(shard_of(row)).and_then(|shard| shard.get(row)).copied().unwrap_or(0)
    }

    /// Sets the row's count (0: no longer held); returns the count it had
    /// (one lookup for both).
    pub(crate) fn set(&mut self, row: &[u8], count: i64) -> i64 {
        if self.shards.is_empty() {
            self.shards = (0..SHARDS).map(|_| FxHashMap::default()).collect();
        }
        let shard = &mut self.shards[shard_of(row)];
        let old = if count == 0 {
            shard.remove(row)
        } else if let Some(held) = shard.get_mut(row) {
            Some(std::mem::replace(held, count))
        } else {
            shard.insert(row.into(), count);
            None
        };
        match (old, count) {
            (None, 0) | (Some(_), 1..) | (Some(_), ..0) => {}
            (Some(_), 0) => self.len -= 1,
            (None, _) => self.len += 1,
        }
        debug_assert_eq!(self.len, self.shards.iter().map(|s| s.len()).sum::<usize>(), "len counts every shard");
        old.unwrap_or(0)
    }

    /// Every row held and its count, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], i64)> {
        self.shards.iter().flat_map(|shard| shard.iter().map(|(row, count)| (&**row, *count)))
    }

    /// Grows (doubles) at most `shards_max` of the fullest tables past
    /// [`GROW_AHEAD_LOAD`]; returns how many grew. A reader calls it when
    /// it is idle, so that tables grow a few at a time rather than in its
    /// busy moments.
    pub(crate) fn grow_ahead(&mut self, shards_max: usize) -> usize {
        let load = |shard: &FxHashMap<Box<[u8]>, i64>| shard.len() as f64 / shard.capacity().max(1) as f64;
        let mut full: Vec<usize> =
            (0..self.shards.len()).filter(|&i| load(&self.shards[i]) > GROW_AHEAD_LOAD).collect();
        full.sort_unstable_by(|&a, &b| load(&self.shards[b]).total_cmp(&load(&self.shards[a])));
        for &i in full.iter().take(shards_max) {
            let shard = &mut self.shards[i];
            shard.reserve(shard.capacity().max(1));
        }
        full.len().min(shards_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a from-scratch model: any sequence of sets, growing ahead
    /// between them, holds what a plain map holds.
    #[test]
    fn counts_hold_what_a_map_holds_whatever_grows() {
        let mut counts = RowCounts::default();
        let mut model = std::collections::BTreeMap::<Vec<u8>, i64>::new();
        let mut seed = 7u64;
        for step in 0..50_000u64 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let row = format!("{{\"k\":{}}}", (seed >> 33) % 5_000).into_bytes();
            let count = ((seed >> 20) % 4) as i64; // 0 removes
            let before = model.get(&row).copied().unwrap_or(0);
            assert_eq!(counts.set(&row, count), before);
            if count == 0 {
                model.remove(&row);
            } else {
                model.insert(row.clone(), count);
            }
            assert_eq!(counts.get(&row), count);
            if step % 1000 == 0 {
                counts.grow_ahead(8);
            }
        }
        assert_eq!(counts.len(), model.len());
        let mut held: Vec<(Vec<u8>, i64)> = counts.iter().map(|(r, c)| (r.to_vec(), c)).collect();
        held.sort();
        assert_eq!(held, model.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn growing_ahead_takes_the_fullest_tables_first_and_at_most_as_many_as_asked() {
        let mut counts = RowCounts::default();
        for k in 0..20_000 {
            counts.set(format!("{k}").as_bytes(), 1);
        }
        let capacity = |c: &RowCounts| c.shards.iter().map(|s| s.capacity()).sum::<usize>();
        let before = capacity(&counts);
        let mut grown = 0;
        while counts.grow_ahead(4) > 0 {
            grown += 1;
            assert!(grown < 1000, "growing ahead ends once no table is past the load");
        }
        assert!(capacity(&counts) > before);
        assert!(counts.shards.iter().all(|s| s.len() as f64 <= GROW_AHEAD_LOAD * s.capacity() as f64));
        assert_eq!(counts.len(), 20_000);
    }
}
