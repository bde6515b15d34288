//! One operator's view of the state store: committed state plus its own
//! changes that are not committed yet.
//!
//! An operator finishes epoch e and moves on to e+1 before worker 0 commits
//! e, so it must read its own uncommitted writes: every write goes to an
//! in-memory overlay tagged with its epoch as well as to the epoch's write
//! batch. Once an epoch is committed its overlay entries are dropped (the
//! store then holds them; a view's writes are applied after the commit's
//! publish, and the committed epoch is raised only after that).
//!
//! An operator that reads ranges of its keys ([`OperatorState::scan_prefix`],
//! e.g. a join reading one key's rows) keeps its overlay ordered
//! ([`OperatorState::ordered`]); the others keep a hash map, which is
//! cheaper for point reads.
//!
//! Every read is counted ([`StateReads`]: point reads, entries visited and
//! bytes of values), so tests can check what an epoch costs in reads and
//! not only in time.
//!
//! Invariants:
//! - `get` and `scan_prefix` return the value of the latest write by this
//!   operator, committed or not; the overlay only holds entries of
//!   uncommitted epochs (after [`OperatorState::finish_epoch`] prunes).
//! - `scan_prefix` visits keys in increasing byte order, each once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashMap;
use std::sync::Arc;

use crate::Epoch;
use crate::checkpoint::Checkpoints;
use crate::error::Result;
use crate::state::{Keyspace, WriteBatch, prefix_end};

/// A write not yet committed: its epoch and the value (`None`: deleted).
type Pending = (Epoch, Option<Vec<u8>>);

/// Operations per batch of [`OperatorState::rewrite_committed`] (a batch
/// may exceed it by one entry's replacements).
pub(crate) const REWRITE_BATCH_OPS: usize = 64 * 1024;

/// Entries to write: `(key, value)`.
pub(crate) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Uncommitted writes, by key.
#[derive(Debug)]
enum Overlay {
    Hashed(FxHashMap<Vec<u8>, Pending>),
    Ordered(BTreeMap<Vec<u8>, Pending>),
}

impl Overlay {
    fn get(&self, key: &[u8]) -> Option<&Pending> {
        match self {
            Overlay::Hashed(map) => map.get(key),
            Overlay::Ordered(map) => map.get(key),
        }
    }
    fn insert(&mut self, key: Vec<u8>, pending: Pending) {
        match self {
            Overlay::Hashed(map) => map.insert(key, pending),
            Overlay::Ordered(map) => map.insert(key, pending),
        };
    }
    fn retain_after(&mut self, committed: Epoch) {
        match self {
            Overlay::Hashed(map) => map.retain(|_, (written, _)| *written > committed),
            Overlay::Ordered(map) => map.retain(|_, (written, _)| *written > committed),
        }
    }
    fn is_empty(&self) -> bool {
        match self {
            Overlay::Hashed(map) => map.is_empty(),
            Overlay::Ordered(map) => map.is_empty(),
        }
    }
    /// The pending writes of keys that start with `prefix`, in key order.
    fn with_prefix(&self, prefix: &[u8]) -> Vec<(&[u8], Option<&[u8]>)> {
        let Overlay::Ordered(map) = self else { panic!("a range read of an operator whose overlay is not ordered") };
        let range = match prefix_end(prefix) {
            Some(end) => map.range::<[u8], _>((std::ops::Bound::Included(prefix), std::ops::Bound::Excluded(&end[..]))),
            None => map.range::<[u8], _>((std::ops::Bound::Included(prefix), std::ops::Bound::Unbounded)),
        };
        range.map(|(key, (_, value))| (key.as_slice(), value.as_deref())).collect()
    }
}

/// Reads of operator state, summed over a runtime's operators and views.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateReads {
    /// Point reads (`get`).
    pub gets: u64,
    /// Entries a range read visited (committed or pending).
    pub entries: u64,
    /// Bytes of the values returned by both.
    pub value_bytes: u64,
}

impl StateReads {
    fn add(&mut self, other: StateReads) {
        self.gets += other.gets;
        self.entries += other.entries;
        self.value_bytes += other.value_bytes;
    }
}

/// [`StateReads`] shared between threads.
#[derive(Debug, Default)]
pub(crate) struct StateReadCounters {
    gets: AtomicU64,
    entries: AtomicU64,
    value_bytes: AtomicU64,
}

impl StateReadCounters {
    pub(crate) fn add(&self, reads: StateReads) {
        self.gets.fetch_add(reads.gets, Ordering::Relaxed);
        self.entries.fetch_add(reads.entries, Ordering::Relaxed);
        self.value_bytes.fetch_add(reads.value_bytes, Ordering::Relaxed);
    }
    pub(crate) fn total(&self) -> StateReads {
        StateReads {
            gets: self.gets.load(Ordering::Relaxed),
            entries: self.entries.load(Ordering::Relaxed),
            value_bytes: self.value_bytes.load(Ordering::Relaxed),
        }
    }
}

#[derive(Debug)]
pub(crate) struct OperatorState {
    checkpoints: Arc<Checkpoints>,
    keyspace: Keyspace,
    overlay: Overlay,
    batch: WriteBatch,
    /// A view's state: the store is written from the changelog after each
    /// commit ([`crate::view_state`]), so writes only go to the overlay.
    indexed: bool,
    /// Reads since the last [`OperatorState::finish_epoch`] (then added to
    /// the runtime's counters). A cell: reads take `&self`.
    reads: std::cell::Cell<StateReads>,
}

impl OperatorState {
    /// The state in keyspace `keyspace_name` of an operator or view fed by
    /// the readers in `lineage` (refused if it is new and they resume).
    pub(crate) fn new(
        checkpoints: Arc<Checkpoints>,
        keyspace_name: &str,
        lineage: &BTreeSet<String>,
    ) -> Result<OperatorState> {
        checkpoints.register_state(keyspace_name, lineage)?;
        let keyspace = checkpoints.store().keyspace(keyspace_name)?;
        Ok(OperatorState {
            checkpoints,
            keyspace,
            overlay: Overlay::Hashed(FxHashMap::default()),
            batch: WriteBatch::new(),
            indexed: false,
            reads: std::cell::Cell::new(StateReads::default()),
        })
    }

    /// This state with an ordered overlay, for an operator that reads
    /// ranges ([`OperatorState::scan_prefix`]). Before its first write.
    pub(crate) fn ordered(mut self) -> OperatorState {
        assert!(self.overlay.is_empty(), "an overlay is ordered before the operator's first write");
        self.overlay = Overlay::Ordered(BTreeMap::new());
        self
    }

    fn count(&self, reads: StateReads) {
        let mut total = self.reads.get();
        total.add(reads);
        self.reads.set(total);
    }

    /// This state as a view's: an index of its changelog, written from it
    /// after each commit ([`crate::view_state`]).
    pub(crate) fn indexed(mut self) -> OperatorState {
        self.indexed = true;
        self
    }

    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let value = match self.overlay.get(key) {
            Some((_, value)) => value.clone(),
            None => self.checkpoints.store().get(self.keyspace, key)?,
        };
        self.count(StateReads { gets: 1, entries: 0, value_bytes: value.as_ref().map_or(0, |v| v.len() as u64) });
        Ok(value)
    }

    /// Calls `f` with every entry whose key starts with `prefix`, committed
    /// or pending, in key order, until it returns false. Only with an
    /// ordered overlay ([`OperatorState::ordered`]).
    pub(crate) fn scan_prefix(&self, prefix: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        let pending = self.overlay.with_prefix(prefix);
        let mut next = 0; // the first pending write not yet merged in
        let mut reads = StateReads::default();
        let mut error = None;
        let mut visit = |key: &[u8], value: &[u8], reads: &mut StateReads| {
            reads.entries += 1;
            reads.value_bytes += value.len() as u64;
            f(key, value).unwrap_or_else(|e| {
                error = Some(e);
                false
            })
        };
        let mut going = true;
        self.checkpoints.store().scan_prefix(self.keyspace, prefix, &mut |key, value| {
            // Pending writes of keys before this one, then this key's own.
            while let Some(&(pending_key, pending_value)) = pending.get(next) {
                if pending_key > key {
                    break;
                }
                next += 1;
                if let Some(pending_value) = pending_value {
                    going = visit(pending_key, pending_value, &mut reads);
                    if !going {
                        return false;
                    }
                }
                if pending_key == key {
                    return true; // the pending write shadows the committed one
                }
            }
            going = visit(key, value, &mut reads);
            going
        })?;
        if going {
            for &(pending_key, pending_value) in &pending[next..] {
                if let Some(pending_value) = pending_value
                    && !visit(pending_key, pending_value, &mut reads)
                {
                    break;
                }
            }
        }
        self.count(reads);
        error.map_or(Ok(()), Err)
    }

    /// Calls `f` with every committed entry, in key order. Only before this
    /// operator's first write: the overlay is not merged in.
    pub(crate) fn scan_committed(&self, mut f: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
        assert!(self.overlay.is_empty(), "a committed scan precedes the operator's writes");
        let mut failed = Ok(());
        self.checkpoints.store().scan_prefix(self.keyspace, &[], &mut |key, value| {
            failed = f(key, value);
            failed.is_ok()
        })?;
        failed
    }

    /// Replaces every committed entry whose key starts with `prefix` by the
    /// entries `f` makes of it (a change of layout), straight in the store:
    /// each old entry is deleted in the same atomic batch as its
    /// replacements, batches of about [`REWRITE_BATCH_OPS`], so a crash
    /// leaves whole entries of either layout. Only before the operator's
    /// first write; the state it stands for does not change.
    pub(crate) fn rewrite_committed(
        &self,
        prefix: &[u8],
        mut f: impl FnMut(&[u8], &[u8], &mut Entries) -> Result<()>,
    ) -> Result<()> {
        assert!(self.overlay.is_empty(), "a rewrite precedes the operator's writes");
        let store = self.checkpoints.store();
        let (mut batch, mut replacements) = (WriteBatch::new(), Vec::new());
        let mut outcome = Ok(());
        store.scan_prefix(self.keyspace, prefix, &mut |key, value| {
            outcome = f(key, value, &mut replacements).and_then(|()| {
                batch.delete(self.keyspace, key);
                for (new_key, new_value) in replacements.drain(..) {
                    assert!(!new_key.starts_with(prefix), "a rewritten entry leaves the rewritten range");
                    batch.put_owned(self.keyspace, new_key, new_value);
                }
                if batch.len() >= REWRITE_BATCH_OPS { store.commit(std::mem::take(&mut batch), false) } else { Ok(()) }
            });
            outcome.is_ok()
        })?;
        outcome?;
        if !batch.is_empty() {
            store.commit(batch, false)?;
        }
        Ok(())
    }

    pub(crate) fn put(&mut self, epoch: Epoch, key: Vec<u8>, value: Vec<u8>) {
        if !self.indexed {
            self.batch.put(self.keyspace, &key, &value);
        }
        self.overlay.insert(key, (epoch, Some(value)));
    }

    pub(crate) fn delete(&mut self, epoch: Epoch, key: Vec<u8>) {
        if !self.indexed {
            self.batch.delete(self.keyspace, &key);
        }
        self.overlay.insert(key, (epoch, None));
    }

    /// Hands this epoch's writes to the checkpoint and forgets overlay
    /// entries that are committed by now.
    pub(crate) fn finish_epoch(&mut self, epoch: Epoch) {
        if !self.batch.is_empty() {
            self.checkpoints.add_writes(epoch, &mut self.batch);
        }
        self.checkpoints.count_reads(self.reads.take());
        let committed = self.checkpoints.committed_epoch();
        self.overlay.retain_after(committed);
    }
}
