//! [`RowCounts`]: a multiplicity per row (its bytes), for readers that hold
//! a whole view in memory: a snapshot being read (`read_view`, a SELECT)
//! and a server's hub, which holds every row of a view for the snapshots
//! of the subscribers that join it.
//!
//! A reader starts with a tree: folding a changelog (each epoch's records
//! in row order) and reading the snapshot in order need no sort. A
//! long-lived reader that looks rows up at every change moves them, once,
//! into hash tables: a tree compares rows' long common prefixes at every
//! level. One hash table would grow by rehashing every row at once (~0.2 s
//! at a million rows on a busy core, in the middle of a delivery), so the
//! rows are spread over [`SHARDS`] tables by hash, and the reader grows the
//! fullest ones ahead of need while idle, a few at a time
//! ([`RowCounts::grow_ahead`]); a table that fills anyway grows on its
//! own, a [`SHARDS`]th of the whole.
//!
//! Invariants: a row is held at most once, with a count other than 0
//! (setting 0 removes it); `len` is the number of rows held; moving to the
//! tables and growing them never change what is held; `sorted` is in byte
//! order in both forms.

use std::collections::BTreeMap;
use std::hash::BuildHasher;

use rustc_hash::{FxBuildHasher, FxHashMap};

/// Tables the rows are spread over (a power of two).
pub(crate) const SHARDS: usize = 256;
/// Where the shard's bits start in a row's hash (below hashbrown's 7-bit tag).
const SHARD_BITS_AT: u32 = 49;
/// A table past this share of its capacity is grown ahead (doubled) when
/// the reader asks; well below the 7/8 at which it would grow by itself.
const GROW_AHEAD_LOAD: f64 = 0.6;

/// Multiplicity per row: a tree while a reader folds and reads in order,
/// hash tables in shards once it serves as a long-lived index.
#[derive(Debug)]
pub(crate) enum RowCounts {
    /// Rows in byte order: folding a changelog (whose epochs are sorted)
    /// and reading a snapshot in order cost no sort.
    Tree(BTreeMap<Box<[u8]>, i64>),
    /// Rows by hash over [`SHARDS`] tables ([`RowCounts::grow_ahead`]).
    Shards { shards: Vec<FxHashMap<Box<[u8]>, i64>>, len: usize },
}

impl Default for RowCounts {
    fn default() -> RowCounts {
        RowCounts::Tree(BTreeMap::new())
    }
}

fn shard_of(row: &[u8]) -> usize {
    // Bits 49..57: a table's buckets come from the low bits and its tags
    // from the top 7, so rows of one shard still differ in both.
    ((FxBuildHasher.hash_one(row) >> SHARD_BITS_AT) as usize) & (SHARDS - 1)
}

impl RowCounts {
    pub(crate) fn len(&self) -> usize {
        match self {
            RowCounts::Tree(tree) => tree.len(),
            RowCounts::Shards { len, .. } => *len,
        }
    }

    /// The row's count (0: not held).
    #[cfg(test)]
    pub(crate) fn get(&self, row: &[u8]) -> i64 {
        match self {
            RowCounts::Tree(tree) => tree.get(row).copied().unwrap_or(0),
            RowCounts::Shards { shards, .. } => shards[shard_of(row)].get(row).copied().unwrap_or(0),
        }
    }

    /// Sets the row's count (0: no longer held); returns the count it had
    /// (one lookup for both).
    pub(crate) fn set(&mut self, row: &[u8], count: i64) -> i64 {
        let old = match self {
            RowCounts::Tree(tree) => set_in(tree, row, count),
            RowCounts::Shards { shards, len } => {
                let old = set_in(&mut shards[shard_of(row)], row, count);
                match (old, count) {
                    (None, 0) | (Some(_), 1..) | (Some(_), ..0) => {}
                    (Some(_), 0) => *len -= 1,
                    (None, _) => *len += 1,
                }
                debug_assert_eq!(*len, shards.iter().map(|s| s.len()).sum::<usize>(), "len counts every shard");
                old
            }
        };
        old.unwrap_or(0)
    }

    /// Every row held and its count, in byte order (a sort once hashed).
    pub(crate) fn sorted(&self) -> Vec<(&[u8], i64)> {
        match self {
            RowCounts::Tree(tree) => tree.iter().map(|(row, count)| (&**row, *count)).collect(),
            RowCounts::Shards { shards, .. } => {
                let mut rows: Vec<(&[u8], i64)> =
                    shards.iter().flat_map(|s| s.iter().map(|(row, count)| (&**row, *count))).collect();
                rows.sort_unstable_by(|a, b| a.0.cmp(b.0));
                rows
            }
        }
    }

    /// Grows (doubles) at most `shards_max` of the fullest tables past
    /// [`GROW_AHEAD_LOAD`]; returns how many grew. The first call moves the
    /// rows from the tree into the tables (once, sized for them). A reader
    /// calls it when it is idle, so that tables grow a few at a time rather
    /// than in its busy moments.
    pub(crate) fn grow_ahead(&mut self, shards_max: usize) -> usize {
        if let RowCounts::Tree(tree) = self {
            *self = hashed(std::mem::take(tree));
            return 1;
        }
        let RowCounts::Shards { shards, .. } = self else { unreachable!("hashed above") };
        let load = |shard: &FxHashMap<Box<[u8]>, i64>| shard.len() as f64 / shard.capacity().max(1) as f64;
        let mut full: Vec<usize> = (0..shards.len()).filter(|&i| load(&shards[i]) > GROW_AHEAD_LOAD).collect();
        full.sort_unstable_by(|&a, &b| load(&shards[b]).total_cmp(&load(&shards[a])));
        for &i in full.iter().take(shards_max) {
            let shard = &mut shards[i];
            shard.reserve(shard.capacity().max(1));
        }
        full.len().min(shards_max)
    }
}

/// The tree's rows in hash tables, each with room to spare.
fn hashed(tree: BTreeMap<Box<[u8]>, i64>) -> RowCounts {
    let share = tree.len() / SHARDS;
    let room = 2 * share + 16;
    let mut shards: Vec<FxHashMap<Box<[u8]>, i64>> =
        (0..SHARDS).map(|_| FxHashMap::with_capacity_and_hasher(room, FxBuildHasher)).collect();
    let len = tree.len();
    for (row, count) in tree {
        shards[shard_of(&row)].insert(row, count);
    }
    RowCounts::Shards { shards, len }
}

/// Sets `row` to `count` in one map (0 removes); the count it had.
fn set_in<M: CountMap>(map: &mut M, row: &[u8], count: i64) -> Option<i64> {
    if count == 0 {
        map.remove_row(row)
    } else if let Some(held) = map.get_row_mut(row) {
        Some(std::mem::replace(held, count))
    } else {
        map.insert_row(row.into(), count);
        None
    }
}

/// The two maps' common operations.
trait CountMap {
    fn remove_row(&mut self, row: &[u8]) -> Option<i64>;
    fn get_row_mut(&mut self, row: &[u8]) -> Option<&mut i64>;
    fn insert_row(&mut self, row: Box<[u8]>, count: i64);
}

/// The same three calls on both maps.
macro_rules! count_map {
    ($map:ty) => {
        impl CountMap for $map {
            fn remove_row(&mut self, row: &[u8]) -> Option<i64> {
                self.remove(row)
            }
            fn get_row_mut(&mut self, row: &[u8]) -> Option<&mut i64> {
                self.get_mut(row)
            }
            fn insert_row(&mut self, row: Box<[u8]>, count: i64) {
                self.insert(row, count);
            }
        }
    };
}
count_map!(BTreeMap<Box<[u8]>, i64>);
count_map!(FxHashMap<Box<[u8]>, i64>);

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
            if step == 25_000 || (step > 25_000 && step % 1000 == 0) {
                counts.grow_ahead(8); // the first half as a tree, the second hashed
            }
        }
        assert_eq!(counts.len(), model.len());
        let held: Vec<(Vec<u8>, i64)> = counts.sorted().into_iter().map(|(r, c)| (r.to_vec(), c)).collect();
        assert_eq!(held, model.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn growing_ahead_takes_the_fullest_tables_first_and_at_most_as_many_as_asked() {
        let mut counts = RowCounts::default();
        for k in 0..20_000 {
            counts.set(format!("{k}").as_bytes(), 1);
        }
        let shards = |c: &RowCounts| match c {
            RowCounts::Shards { shards, .. } => shards.clone(),
            RowCounts::Tree(_) => Vec::new(),
        };
        let capacity = |c: &RowCounts| shards(c).iter().map(|s| s.capacity()).sum::<usize>();
        assert_eq!(counts.grow_ahead(4), 1, "the first call hashes the tree");
        for k in 20_000..40_000 {
            counts.set(format!("{k}").as_bytes(), 1);
        }
        let before = capacity(&counts);
        let mut grown = 0;
        while counts.grow_ahead(4) > 0 {
            grown += 1;
            assert!(grown < 1000, "growing ahead ends once no table is past the load");
        }
        assert!(capacity(&counts) > before);
        assert!(shards(&counts).iter().all(|s| s.len() as f64 <= GROW_AHEAD_LOAD * s.capacity() as f64));
        assert_eq!(counts.len(), 40_000);
    }
}
