//! Transactions as one partition sees them (Kafka's producer state and
//! `.txnindex`): which producers have a transaction open here, from which
//! offset, and which transactions were aborted, from their first offset to
//! their abort marker.
//!
//! A transactional data batch (attribute bit 4) opens its producer's
//! transaction here if none is open; a control batch (bit 5, written only
//! by the transaction coordinator) closes it, and an abort marker records
//! the aborted range. The last stable offset (LSO) is the first offset of
//! the earliest open transaction, or the high watermark when none is open:
//! a read_committed reader never reads at or past it, and skips control
//! batches and the batches of aborted ranges.
//!
//! Nothing here is stored apart from the batches: a partition that ever
//! held a transactional batch carries a `transactional` marker file, and
//! opening it rebuilds this state from its batch headers (and markers).
//!
//! Invariants: a producer has at most one open transaction per partition;
//! the open set and its by-offset order hold the same entries; aborted
//! ranges are kept in the order of their markers (last offsets increase)
//! and each starts at or below its marker.

use std::collections::{BTreeMap, BTreeSet};

use crate::batch::{BatchView, ControlType};

/// A partition's marker file: it has held transactional batches.
pub(crate) const MARKER_FILE: &str = "transactional";

/// A transaction aborted in one partition: its producer, its first
/// offset there and its abort marker's offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: u64,
    pub last_offset: u64,
}

impl AbortedTxn {
    /// Whether `batch` (a data batch) belongs to this aborted range.
    pub fn covers(&self, batch: &BatchView<'_>) -> bool {
        batch.is_transactional()
            && batch.producer_id() == self.producer_id
            && (self.first_offset..=self.last_offset).contains(&batch.base_offset())
    }
}

/// What a batch does to the partition's transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxnBatch {
    /// A transactional data batch of this producer at this base offset.
    Data { producer_id: i64, base_offset: u64 },
    /// A marker of this producer at this offset.
    Marker { producer_id: i64, offset: u64, control: ControlType },
}

impl TxnBatch {
    /// What `batch` is to transactions (`None`: not transactional).
    pub(crate) fn of(batch: &BatchView<'_>) -> Option<TxnBatch> {
        if !batch.is_transactional() {
            return None;
        }
        let (producer_id, offset) = (batch.producer_id(), batch.base_offset());
        match batch.control_type() {
            Some(control) => Some(TxnBatch::Marker { producer_id, offset, control }),
            None if batch.is_control() => None, // not a marker this log wrote; parse refuses it
            None => Some(TxnBatch::Data { producer_id, base_offset: offset }),
        }
    }
}

/// The open transactions and aborted ranges of one partition.
#[derive(Debug, Default)]
pub(crate) struct Transactions {
    /// Producer id to its open transaction's first offset here.
    open: BTreeMap<i64, u64>,
    /// The same entries by first offset: the first is the LSO.
    by_offset: BTreeSet<(u64, i64)>,
    aborted: Vec<AbortedTxn>,
}

/// What [`Transactions::apply`] changed, so a failed write can be undone.
#[derive(Debug)]
pub(crate) enum Applied {
    Nothing,
    Opened(i64),
    Closed { producer_id: i64, first_offset: u64, aborted: bool },
}

impl Transactions {
    /// Takes `batch` into account; what it changed.
    pub(crate) fn apply(&mut self, batch: TxnBatch) -> Applied {
        let applied = match batch {
            TxnBatch::Data { producer_id, base_offset } => match self.open.entry(producer_id) {
                std::collections::btree_map::Entry::Occupied(_) => Applied::Nothing,
                std::collections::btree_map::Entry::Vacant(entry) => {
                    entry.insert(base_offset);
                    self.by_offset.insert((base_offset, producer_id));
                    Applied::Opened(producer_id)
                }
            },
            TxnBatch::Marker { producer_id, offset, control } => match self.open.remove(&producer_id) {
                None => Applied::Nothing,
                Some(first_offset) => {
                    assert!(self.by_offset.remove(&(first_offset, producer_id)), "open sets agree");
                    assert!(first_offset <= offset, "a transaction starts before its marker");
                    let aborted = control == ControlType::Abort;
                    if aborted {
                        debug_assert!(self.aborted.last().is_none_or(|a| a.last_offset < offset));
                        self.aborted.push(AbortedTxn { producer_id, first_offset, last_offset: offset });
                    }
                    Applied::Closed { producer_id, first_offset, aborted }
                }
            },
        };
        debug_assert_eq!(self.open.len(), self.by_offset.len());
        applied
    }

    /// Reverts what [`Transactions::apply`] did (its batch was not written).
    pub(crate) fn undo(&mut self, applied: Applied) {
        match applied {
            Applied::Nothing => {}
            Applied::Opened(producer_id) => {
                let first = self.open.remove(&producer_id).expect("opened just now");
                self.by_offset.remove(&(first, producer_id));
            }
            Applied::Closed { producer_id, first_offset, aborted } => {
                if aborted {
                    self.aborted.pop();
                }
                self.open.insert(producer_id, first_offset);
                self.by_offset.insert((first_offset, producer_id));
            }
        }
    }

    /// The first offset of the earliest open transaction.
    pub(crate) fn first_open_offset(&self) -> Option<u64> {
        self.by_offset.first().map(|&(offset, _)| offset)
    }

    /// Open transactions: producer id and first offset.
    pub(crate) fn open(&self) -> Vec<(i64, u64)> {
        self.open.iter().map(|(&producer, &first)| (producer, first)).collect()
    }

    /// Aborted ranges that overlap `[from, to)`, in marker order.
    pub(crate) fn aborted_in(&self, from: u64, to: u64) -> Vec<AbortedTxn> {
        let start = self.aborted.partition_point(|a| a.last_offset < from);
        self.aborted[start..].iter().filter(|a| a.first_offset < to).copied().collect()
    }

    /// Forgets aborted ranges wholly below `offset` (retention took them).
    pub(crate) fn forget_below(&mut self, offset: u64) {
        let gone = self.aborted.partition_point(|a| a.last_offset < offset);
        self.aborted.drain(..gone);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(producer_id: i64, base_offset: u64) -> TxnBatch {
        TxnBatch::Data { producer_id, base_offset }
    }
    fn marker(producer_id: i64, offset: u64, control: ControlType) -> TxnBatch {
        TxnBatch::Marker { producer_id, offset, control }
    }

    #[test]
    fn the_earliest_open_transaction_holds_the_stable_offset_and_aborts_are_kept() {
        let mut txns = Transactions::default();
        txns.apply(data(1, 10));
        txns.apply(data(2, 12));
        txns.apply(data(1, 14));
        assert_eq!(txns.first_open_offset(), Some(10));
        txns.apply(marker(1, 15, ControlType::Abort));
        assert_eq!(txns.first_open_offset(), Some(12));
        txns.apply(marker(2, 16, ControlType::Commit));
        assert_eq!(txns.first_open_offset(), None);
        assert_eq!(txns.aborted_in(0, 100), vec![AbortedTxn { producer_id: 1, first_offset: 10, last_offset: 15 }]);
        assert_eq!(txns.aborted_in(16, 100), vec![], "ranges wholly below the read are left out");
        assert_eq!(txns.aborted_in(0, 10), vec![], "and ranges wholly after it");
        let applied = txns.apply(marker(3, 17, ControlType::Abort));
        assert!(matches!(applied, Applied::Nothing), "a marker without data here changes nothing");
        let applied = txns.apply(data(3, 18));
        txns.undo(applied);
        assert_eq!(txns.first_open_offset(), None, "an unwritten batch is undone");
        txns.apply(data(3, 18));
        let applied = txns.apply(marker(3, 19, ControlType::Abort));
        txns.undo(applied);
        assert_eq!((txns.first_open_offset(), txns.aborted_in(0, 100).len()), (Some(18), 1));
        txns.forget_below(16);
        assert_eq!(txns.aborted_in(0, 100), vec![]);
    }
}
