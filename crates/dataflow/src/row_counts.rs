//! [`RowCounts`]: a multiplicity per row (its bytes), for readers that hold
//! a whole view in memory: a snapshot being read (`read_view`, a SELECT, a
//! server's snapshot join) and a reader that follows a view and retracts
//! it when it is dropped (`millpond subscribe`).
//!
//! A tree: folding a changelog (each epoch's records in row order) and
//! reading the snapshot in order need no sort. (A server's hub once held
//! every row in hash tables for its subscribers' snapshots; it now reads
//! snapshots from the changelog and holds no rows.)
//!
//! Invariants: a row is held at most once, with a count other than 0
//! (setting 0 removes it); `sorted` is in byte order.

use std::collections::BTreeMap;

/// Multiplicity per row, in byte order.
#[derive(Debug, Default)]
pub(crate) struct RowCounts {
    rows: BTreeMap<Box<[u8]>, i64>,
}

impl RowCounts {
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// The row's count (0: not held).
    #[cfg(test)]
    pub(crate) fn get(&self, row: &[u8]) -> i64 {
        self.rows.get(row).copied().unwrap_or(0)
    }

    /// Sets the row's count (0: no longer held); returns the count it had
    /// (one lookup for both).
    pub(crate) fn set(&mut self, row: &[u8], count: i64) -> i64 {
        let old = if count == 0 {
            self.rows.remove(row)
        } else if let Some(held) = self.rows.get_mut(row) {
            Some(std::mem::replace(held, count))
        } else {
            self.rows.insert(row.into(), count);
            None
        };
        old.unwrap_or(0)
    }

    /// Every row held and its count, in byte order.
    pub(crate) fn sorted(&self) -> Vec<(&[u8], i64)> {
        self.rows.iter().map(|(row, count)| (&**row, *count)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a from-scratch model: any sequence of sets holds what a
    /// plain map holds.
    #[test]
    fn counts_hold_what_a_map_holds() {
        let mut counts = RowCounts::default();
        let mut model = std::collections::BTreeMap::<Vec<u8>, i64>::new();
        let mut seed = 7u64;
        for _ in 0..50_000u64 {
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
        }
        assert_eq!(counts.len(), model.len());
        let held: Vec<(Vec<u8>, i64)> = counts.sorted().into_iter().map(|(r, c)| (r.to_vec(), c)).collect();
        assert_eq!(held, model.into_iter().collect::<Vec<_>>());
    }
}
