//! One epoch's writes to one operator's state: the operator's overlay
//! reads them until the epoch is committed, and the same memory is the
//! epoch's share of the checkpoint's write batch (shared, not copied:
//! [`crate::state::WriteBatch::put_epoch`]).
//!
//! Every key and value is copied once, into one buffer; a hash table maps
//! each key to its entry, and entries keep the order of each key's first
//! write (a keyed operator writes an epoch's keys in the store's order, so
//! the batch reaches the store sorted). A key written again points at its
//! new value; the old value's bytes stay in the buffer until the epoch is
//! dropped or reset, so the buffer holds at most the bytes written.
//!
//! With groups (key prefixes an operator reads as a range, e.g. the rows
//! of one side of one key of a join), each group lists its entries.
//!
//! Invariants:
//! - each key has exactly one entry, holding its latest write (`None`: a
//!   delete); entries are in the order of first write;
//! - a group's list holds exactly the entries of the keys written to that
//!   group, each once;
//! - every entry's ranges lie inside the buffer (asserted when written).

use std::ops::Range;

use hashbrown::HashTable;
use rustc_hash::FxHashMap;

use crate::Epoch;

/// One key's latest write.
#[derive(Clone, Debug)]
struct Entry {
    hash: u64,
    key: Range<usize>,
    /// `None`: deleted.
    value: Option<Range<usize>>,
}

/// One epoch's writes (see the module documentation).
#[derive(Clone, Debug, Default)]
pub(crate) struct EpochWrites {
    epoch: Epoch,
    bytes: Vec<u8>,
    entries: Vec<Entry>,
    /// Indices into `entries`, by the hash of their key.
    table: HashTable<usize>,
    /// Each group's entries, by the group's key prefix.
    groups: FxHashMap<Vec<u8>, Vec<usize>>,
}

fn hash(key: &[u8]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(key)
}

impl EpochWrites {
    pub(crate) fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Empties these writes for epoch `epoch`, keeping their memory.
    pub(crate) fn reset(&mut self, epoch: Epoch) {
        self.epoch = epoch;
        self.bytes.clear();
        self.entries.clear();
        self.table.clear();
        self.groups.clear();
    }

    /// Keys written.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries' capacity (what keeping this memory for a later epoch
    /// holds on to).
    pub(crate) fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    fn append(&mut self, bytes: &[u8]) -> Range<usize> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(bytes);
        start..self.bytes.len()
    }

    fn find(&self, hash: u64, key: &[u8]) -> Option<usize> {
        let (entries, bytes) = (&self.entries, &self.bytes);
        self.table.find(hash, |&at| entries[at].hash == hash && bytes[entries[at].key.clone()] == *key).copied()
    }

    /// Writes `key` (`value` `None`: a delete); its entry's index, and
    /// whether the key is new to this epoch.
    fn write(&mut self, key: &[u8], value: Option<&[u8]>) -> (usize, bool) {
        let hash = hash(key);
        let value = value.map(|value| self.append(value));
        if let Some(at) = self.find(hash, key) {
            self.entries[at].value = value;
            return (at, false);
        }
        let key = self.append(key);
        let at = self.entries.len();
        self.entries.push(Entry { hash, key, value });
        let entries = &self.entries;
        self.table.insert_unique(hash, at, |&other| entries[other].hash);
        (at, true)
    }

    /// Writes `key`, a key outside every group.
    pub(crate) fn put(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.write(key, value);
    }

    /// Writes `key`, a member of the group of its first `group_len` bytes.
    pub(crate) fn put_grouped(&mut self, key: &[u8], value: Option<&[u8]>, group_len: usize) {
        assert!(group_len <= key.len(), "a group is a prefix of its keys");
        let (at, new) = self.write(key, value);
        if new {
            match self.groups.get_mut(&key[..group_len]) {
                Some(members) => members.push(at),
                None => {
                    self.groups.insert(key[..group_len].to_vec(), vec![at]);
                }
            }
        }
    }

    fn entry(&self, entry: &Entry) -> (&[u8], Option<&[u8]>) {
        (&self.bytes[entry.key.clone()], entry.value.clone().map(|value| &self.bytes[value]))
    }

    /// The latest write of `key` in this epoch: `Some(None)` if a delete.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.find(hash(key), key).map(|at| self.entry(&self.entries[at]).1)
    }

    /// Every key's latest write, in the order of first write.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.entries.iter().map(|entry| self.entry(entry))
    }

    /// The latest writes of the keys of group `prefix`, in no order.
    pub(crate) fn group(&self, prefix: &[u8]) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.groups.get(prefix).into_iter().flatten().map(|&at| self.entry(&self.entries[at]))
    }
}

impl PartialEq for EpochWrites {
    /// The same epoch and the same latest writes in the same order.
    fn eq(&self, other: &EpochWrites) -> bool {
        self.epoch == other.epoch && self.iter().eq(other.iter())
    }
}

impl Eq for EpochWrites {}

#[cfg(test)]
mod tests {
    use super::EpochWrites;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Against a map built from scratch: each key's latest write, keys
        /// in the order of first write, groups holding exactly their keys.
        #[test]
        fn writes_answer_as_a_map_of_latest_writes(
            writes in proptest::collection::vec((0u8..4, 0u8..24, proptest::option::of(any::<u16>())), 0..200),
        ) {
            let mut epoch = EpochWrites::default();
            epoch.reset(3);
            let (mut latest, mut order) = (BTreeMap::new(), Vec::new());
            for &(group, key, value) in &writes {
                let key = vec![group, key];
                let value = value.map(|v| v.to_be_bytes().to_vec());
                epoch.put_grouped(&key, value.as_deref(), 1);
                if latest.insert(key.clone(), value).is_none() {
                    order.push(key);
                }
            }
            prop_assert_eq!(epoch.len(), latest.len());
            let expected: Vec<_> = order.iter().map(|key| (key.as_slice(), latest[key].as_deref())).collect();
            prop_assert_eq!(epoch.iter().collect::<Vec<_>>(), expected);
            for (key, value) in &latest {
                prop_assert_eq!(epoch.get(key), Some(value.as_deref()));
            }
            prop_assert_eq!(epoch.get(&[9, 9]), None);
            for group in 0u8..4 {
                let mut members: Vec<_> = epoch.group(&[group]).map(|(key, _)| key.to_vec()).collect();
                members.sort();
                let expected: Vec<_> = latest.keys().filter(|key| key[0] == group).cloned().collect();
                prop_assert_eq!(members, expected);
            }
            let capacity = epoch.capacity();
            epoch.reset(4);
            prop_assert!(epoch.is_empty() && epoch.epoch() == 4 && epoch.capacity() == capacity);
            prop_assert_eq!(epoch.get(&[0, 0]), None);
        }
    }
}
