//! One operator's view of the state store: committed state plus its own
//! changes that are not committed yet.
//!
//! An operator finishes epoch e and moves on to e+1 before worker 0 commits
//! e, so it must read its own uncommitted writes: every write goes to an
//! in-memory overlay, one [`EpochWrites`] per epoch, which is handed whole
//! to the checkpoint as the epoch's write batch when the operator finishes
//! the epoch (shared, not copied). Once an epoch is committed its writes
//! are dropped from the overlay (the store then holds them). A view's index is only read through here: its
//! fold keeps the rows not yet applied ([`crate::view_fold`]).
//!
//! An operator that reads ranges of its keys ([`OperatorState::scan_group`],
//! e.g. a join reading one key's rows) writes those keys in groups
//! ([`OperatorState::grouped`], [`OperatorState::put_grouped`]), so that a
//! range read finds the group's pending writes without an ordered map.
//!
//! Every read is counted ([`StateReads`]: point reads, entries visited and
//! bytes of values), so tests can check what an epoch costs in reads and
//! not only in time.
//!
//! An operator's state keeps a filter of the keys it may hold
//! ([`HeldFilter`]), so a point read of a key it never wrote (every new
//! key of an aggregate, a join or a top-k) costs a hash and a cache line
//! instead of a store read. A keyspace that holds nothing when it opens
//! starts with a complete filter; one that holds keys (a resumed job, a
//! moved layout) fills it with a scan of its committed keys, a step per
//! epoch, and reads the store until the scan ends. A view's state has no
//! such filter: its fold keeps its own, by row ([`crate::view_fold`]).
//!
//! Invariants:
//! - `get` and `scan_group` return the value of the latest write by this
//!   operator, committed or not; the overlay only holds entries of
//!   uncommitted epochs (after [`OperatorState::finish_epoch`] prunes).
//! - `scan_group` visits keys in increasing byte order, each once.
//! - a key the filter says is absent is not in the store and at most a
//!   pending delete in the overlay (asserted in debug builds), so `get`
//!   asks the filter first: every key written
//!   with a value since the state opened is in the filter, and every key
//!   committed before it opened is in it once the scan is over. Keys other
//!   workers commit to the same keyspace meanwhile are not: an operator
//!   only reads the keys its exchange routes to it, which only it writes.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Arc;

use crate::Epoch;
use crate::checkpoint::Checkpoints;
use crate::epoch_writes::EpochWrites;
use crate::error::Result;
use crate::held_filter::{HeldFilter, fill_step, row_hash};
use crate::keyed::key_hash;
use crate::stash::worth_keeping;
use crate::state::{Keyspace, WriteBatch};

/// Operations per batch of [`OperatorState::rewrite_committed`] (a batch
/// may exceed it by one entry's replacements).
pub(crate) const REWRITE_BATCH_OPS: usize = 64 * 1024;

/// Entries to write: `(key, value)`.
pub(crate) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Committed keys one step of the scan that fills a resumed state's key
/// filter reads (one step an epoch).
pub(crate) const FILTER_SCAN_STEP_KEYS: usize = 64 * 1024;

/// The keys an operator's state may hold, and where the scan that fills it
/// goes on (`None`: done, the filter is complete).
#[derive(Debug)]
struct KeyFilter {
    held: HeldFilter,
    scan: Option<Vec<u8>>,
}

impl KeyFilter {
    /// A filter complete at once if the keyspace holds nothing yet.
    fn new(empty: bool) -> KeyFilter {
        KeyFilter { held: HeldFilter::new(empty), scan: (!empty).then(Vec::new) }
    }

    fn hash(key: &[u8]) -> u64 {
        row_hash(key_hash(key))
    }
}

/// Uncommitted writes, one [`EpochWrites`] per epoch (newest last), each
/// shared with the checkpoint's batch once the epoch is finished; with
/// groups, each epoch also lists each group's keys (a key prefix an
/// operator reads as a range, e.g. the rows of one side of one key of a
/// join), so a range read finds them without an ordered map of every
/// write (measured: a `BTreeMap` overlay spent a fifth of a join's time
/// comparing keys). A committed epoch's writes go whole, and once the
/// checkpoint let go of them they are emptied and kept for a later epoch,
/// so an epoch's writes grow into an earlier one's memory.
///
/// Invariants: epochs do not decrease from the oldest to the newest, and
/// a write goes to the newest, which is not handed to the checkpoint yet
/// (an operator finishes epochs in order; a write to an epoch after its
/// writes were handed over starts another `EpochWrites` of that epoch).
#[derive(Debug, Default)]
struct Overlay {
    epochs: std::collections::VecDeque<Pending>,
    grouped: bool,
    /// A committed epoch's writes, emptied (`worth_keeping` its capacity).
    spare: EpochWrites,
}

/// One epoch's writes, and whether the checkpoint holds them (then they
/// no longer change).
#[derive(Debug)]
struct Pending {
    writes: Arc<EpochWrites>,
    handed: bool,
}

impl Overlay {
    /// The latest uncommitted write of `key`: `Some(None)` if a delete.
    fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.epochs.iter().rev().find_map(|pending| pending.writes.get(key))
    }

    /// The newest epoch's writes, if they are `epoch`'s and still open.
    fn open_writes(&mut self, epoch: Epoch) -> &mut EpochWrites {
        let newest = self.epochs.back().map(|pending| (pending.writes.epoch(), pending.handed));
        if newest.is_none_or(|(newest, handed)| newest != epoch || handed) {
            assert!(newest.is_none_or(|(newest, _)| newest <= epoch), "writes come in epoch order");
            let mut writes = std::mem::take(&mut self.spare);
            debug_assert!(writes.is_empty(), "a spare epoch's writes are empty");
            writes.reset(epoch);
            self.epochs.push_back(Pending { writes: Arc::new(writes), handed: false });
        }
        let newest = self.epochs.back_mut().expect("the epoch's writes were just pushed");
        Arc::get_mut(&mut newest.writes).expect("an epoch's writes are not shared before they are handed over")
    }

    fn insert(&mut self, epoch: Epoch, key: &[u8], value: Option<&[u8]>, group_len: Option<usize>) {
        let grouped = self.grouped;
        let writes = self.open_writes(epoch);
        match group_len {
            None => writes.put(key, value),
            Some(len) => {
                assert!(grouped, "a grouped write to an operator with groups");
                writes.put_grouped(key, value, len);
            }
        }
    }

    /// `epoch`'s writes, to hand to the checkpoint (then they do not
    /// change), if it has any not handed over yet.
    fn hand_over(&mut self, epoch: Epoch) -> Option<Arc<EpochWrites>> {
        let newest = self.epochs.back_mut()?;
        if newest.handed || newest.writes.epoch() != epoch || newest.writes.is_empty() {
            return None;
        }
        newest.handed = true;
        Some(newest.writes.clone())
    }

    /// Forgets the writes of epochs up to `committed` (the store holds them).
    fn retain_after(&mut self, committed: Epoch) {
        while self.epochs.front().is_some_and(|oldest| oldest.writes.epoch() <= committed) {
            let oldest = self.epochs.pop_front().expect("an oldest epoch");
            // The checkpoint may still hold them (the commit thread drops
            // its batch after the committed epoch is published).
            let Ok(mut writes) = Arc::try_unwrap(oldest.writes) else { continue };
            if worth_keeping(writes.capacity(), writes.len()) && writes.capacity() > self.spare.capacity() {
                writes.reset(0);
                self.spare = writes;
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.epochs.iter().all(|pending| pending.writes.is_empty())
    }

    /// The pending writes of group `prefix`, in key order, each key's latest.
    fn group(&self, prefix: &[u8]) -> Vec<(&[u8], Option<&[u8]>)> {
        assert!(self.grouped, "a range read of an operator with groups");
        let mut pending: Vec<(&[u8], Option<&[u8]>)> = Vec::new();
        for epoch in self.epochs.iter().rev() {
            pending.extend(epoch.writes.group(prefix));
        }
        // Stable: of one key's writes, the newest stays first and is kept.
        pending.sort_by(|a, b| a.0.cmp(b.0));
        pending.dedup_by(|later, kept| later.0 == kept.0);
        pending
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
    /// Keys scanned once per run, not per epoch: a resumed view's rows
    /// read into its filter of the rows held (`held_filter`).
    pub filter_keys: u64,
}

impl StateReads {
    fn add(&mut self, other: StateReads) {
        self.gets += other.gets;
        self.entries += other.entries;
        self.value_bytes += other.value_bytes;
        self.filter_keys += other.filter_keys;
    }
}

/// [`StateReads`] shared between threads.
#[derive(Debug, Default)]
pub(crate) struct StateReadCounters {
    gets: AtomicU64,
    entries: AtomicU64,
    value_bytes: AtomicU64,
    filter_keys: AtomicU64,
}

impl StateReadCounters {
    pub(crate) fn add(&self, reads: StateReads) {
        self.gets.fetch_add(reads.gets, Ordering::Relaxed);
        self.entries.fetch_add(reads.entries, Ordering::Relaxed);
        self.value_bytes.fetch_add(reads.value_bytes, Ordering::Relaxed);
        self.filter_keys.fetch_add(reads.filter_keys, Ordering::Relaxed);
    }
    pub(crate) fn total(&self) -> StateReads {
        StateReads {
            gets: self.gets.load(Ordering::Relaxed),
            entries: self.entries.load(Ordering::Relaxed),
            value_bytes: self.value_bytes.load(Ordering::Relaxed),
            filter_keys: self.filter_keys.load(Ordering::Relaxed),
        }
    }
}

/// The values of a batch of keys ([`OperatorState::get_many`]): one
/// buffer of their bytes, and each key's range of it (`None`: no value).
#[derive(Debug, Default)]
pub(crate) struct Values {
    bytes: Vec<u8>,
    ranges: Vec<Option<std::ops::Range<usize>>>,
}

impl Values {
    fn clear(&mut self) {
        self.bytes.clear();
        self.ranges.clear();
    }

    fn set(&mut self, i: usize, value: Option<&[u8]>) {
        self.ranges[i] = value.map(|value| {
            let start = self.bytes.len();
            self.bytes.extend_from_slice(value);
            start..self.bytes.len()
        });
    }

    /// The value of the `i`th key.
    pub(crate) fn get(&self, i: usize) -> Option<&[u8]> {
        self.ranges[i].clone().map(|range| &self.bytes[range])
    }
}

#[derive(Debug)]
pub(crate) struct OperatorState {
    checkpoints: Arc<Checkpoints>,
    keyspace: Keyspace,
    overlay: Overlay,
    /// A view's index: only read here (its fold keeps the rows not yet
    /// applied, and the applier writes the store, [`crate::view_state`]).
    read_only: bool,
    /// The keys it may hold (`None`: a view's state, filtered by its fold).
    filter: Option<KeyFilter>,
    /// Reads since the last [`OperatorState::finish_epoch`] (then added to
    /// the runtime's counters). A cell: reads take `&self`.
    reads: std::cell::Cell<StateReads>,
}

impl OperatorState {
    /// The state in keyspace `keyspace_name` of an operator fed by the
    /// readers in `lineage` (refused if it is new and they resume).
    pub(crate) fn new(
        checkpoints: Arc<Checkpoints>,
        keyspace_name: &str,
        lineage: &BTreeSet<String>,
    ) -> Result<OperatorState> {
        checkpoints.register_state(keyspace_name, lineage)?;
        Self::opened(checkpoints, keyspace_name)?.with_key_filter()
    }

    /// A view's index (registered by the caller,
    /// [`crate::context::WorkerContext::view_index`]), read only: its
    /// applier writes it from the changelog after each commit
    /// ([`crate::view_state`]) and its fold keeps the rows not applied yet.
    /// No key filter: the fold keeps its own.
    pub(crate) fn new_index(checkpoints: Arc<Checkpoints>, keyspace_name: &str) -> Result<OperatorState> {
        Ok(OperatorState { read_only: true, ..Self::opened(checkpoints, keyspace_name)? })
    }

    /// The committed epoch: every write of an epoch up to it is in the
    /// store (a view's index: applied).
    pub(crate) fn committed_epoch(&self) -> Epoch {
        self.checkpoints.committed_epoch()
    }

    /// The state of a registered keyspace, without a key filter.
    fn opened(checkpoints: Arc<Checkpoints>, keyspace_name: &str) -> Result<OperatorState> {
        let keyspace = checkpoints.store().keyspace(keyspace_name)?;
        Ok(OperatorState {
            checkpoints,
            keyspace,
            overlay: Overlay::default(),
            read_only: false,
            filter: None,
            reads: std::cell::Cell::new(StateReads::default()),
        })
    }

    /// This state with a filter of its keys, complete at once if the
    /// keyspace is empty, else filled by a scan (its first step now, the
    /// rest a step an epoch).
    fn with_key_filter(mut self) -> Result<OperatorState> {
        let mut empty = true;
        self.checkpoints.store().scan_keys_from(self.keyspace, &[], 1, &mut |_| empty = false)?;
        self.filter = Some(KeyFilter::new(empty));
        self.scan_filter_step()?;
        Ok(self)
    }

    /// The state in keyspace `keyspace_name`, a new layout of state `from`
    /// (see [`Checkpoints::register_state_moved_from`]), and whether
    /// `from`'s entries must be moved into it.
    pub(crate) fn new_moved_from(
        checkpoints: Arc<Checkpoints>,
        keyspace_name: &str,
        from: &str,
        lineage: &BTreeSet<String>,
    ) -> Result<(OperatorState, bool)> {
        let due = checkpoints.register_state_moved_from(keyspace_name, from, lineage)?;
        Ok((Self::opened(checkpoints, keyspace_name)?.with_key_filter()?, due))
    }

    /// This state with groups, for an operator that reads ranges of its
    /// keys ([`OperatorState::scan_group`]). Before its first write.
    pub(crate) fn grouped(mut self) -> OperatorState {
        assert!(self.overlay.is_empty(), "an overlay gets groups before the operator's first write");
        self.overlay.grouped = true;
        self
    }

    fn count(&self, reads: StateReads) {
        let mut total = self.reads.get();
        total.add(reads);
        self.reads.set(total);
    }

    /// The latest value of `key`, counted as a point read unless the key
    /// filter answers it.
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        // The filter holds every key written with a value, so a key it says
        // is absent is at most pending as a delete: one probe for a new key.
        if self.surely_absent(key) {
            debug_assert!(
                self.overlay.get(key).is_none_or(|value| value.is_none()),
                "a key the filter says is absent is not pending with a value"
            );
            return Ok(None);
        }
        let value = self.get_uncounted(key)?;
        self.count(StateReads {
            gets: 1,
            value_bytes: value.as_ref().map_or(0, |v| v.len() as u64),
            ..StateReads::default()
        });
        Ok(value)
    }

    /// The latest values of `keys` (increasing byte order, each once), as
    /// [`OperatorState::get`] gives them one at a time, into `values`
    /// (cleared first: one entry a key, a value's bytes in `values.bytes`).
    /// The keys neither the filter nor the overlay answers are read from
    /// the store in one batched lookup, in the store's order.
    pub(crate) fn get_many(&self, keys: &[&[u8]], values: &mut Values) -> Result<()> {
        values.clear();
        let mut misses: Vec<(usize, &[u8])> = Vec::new();
        let mut reads = StateReads::default();
        for (i, &key) in keys.iter().enumerate() {
            values.ranges.push(None);
            if self.surely_absent(key) {
                debug_assert!(
                    self.overlay.get(key).is_none_or(|value| value.is_none()),
                    "a key the filter says is absent is not pending with a value"
                );
                continue;
            }
            reads.gets += 1;
            match self.overlay.get(key) {
                Some(pending) => values.set(i, pending),
                None => misses.push((i, key)),
            }
        }
        let miss_keys: Vec<&[u8]> = misses.iter().map(|&(_, key)| key).collect();
        self.checkpoints.store().multi_get(self.keyspace, &miss_keys, &mut |at, stored| {
            values.set(misses[at].0, stored);
        })?;
        reads.value_bytes = values.bytes.len() as u64;
        self.count(reads);
        Ok(())
    }

    /// [`OperatorState::get`] without counting the read: for assertions
    /// that check what an operator did not read.
    pub(crate) fn get_uncounted(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.overlay.get(key) {
            Some(value) => {
                debug_assert!(
                    value.is_none() || !self.surely_absent(key),
                    "a key written with a value is in the filter"
                );
                Ok(value.map(<[u8]>::to_vec))
            }
            None if self.surely_absent(key) => {
                if cfg!(debug_assertions) {
                    let stored = self.checkpoints.store().get(self.keyspace, key)?;
                    assert!(stored.is_none(), "a key the filter says is absent is not in the store");
                }
                Ok(None)
            }
            None => self.checkpoints.store().get(self.keyspace, key),
        }
    }

    /// Whether the key filter says this state holds no value for `key`.
    fn surely_absent(&self, key: &[u8]) -> bool {
        self.filter.as_ref().is_some_and(|filter| filter.held.surely_absent(KeyFilter::hash(key)))
    }

    /// Scans the next committed keys into the key filter, if it is not
    /// complete yet (keys written meanwhile go in as they are written, so
    /// when the scan reaches the end the filter covers every key held).
    fn scan_filter_step(&mut self) -> Result<()> {
        let Some(filter) = self.filter.as_mut() else { return Ok(()) };
        let Some(start) = filter.scan.take() else { return Ok(()) };
        let (store, keyspace, mut visited) = (self.checkpoints.store(), self.keyspace, 0);
        let scan = |start: &[u8], limit, visit: &mut dyn FnMut(&[u8])| {
            store.scan_keys_from(keyspace, start, limit, &mut |key| {
                visited += 1;
                visit(key);
            })
        };
        filter.scan =
            fill_step(&mut filter.held, &start, FILTER_SCAN_STEP_KEYS, scan, |key| Some(KeyFilter::hash(key)))?;
        self.count(StateReads { filter_keys: visited, ..StateReads::default() });
        Ok(())
    }

    /// Calls `f` with every entry of group `prefix` (the keys written with
    /// [`OperatorState::put_grouped`] and that group's length, committed or
    /// pending), in key order, until it returns false. Every key that
    /// starts with `prefix` must belong to that group.
    pub(crate) fn scan_group(&self, prefix: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> Result<bool>) -> Result<()> {
        let pending = self.overlay.group(prefix);
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

    /// Calls `f` with the committed keys from `start` on, in key order, at
    /// most `limit` of them; the number visited (counted as filter keys).
    /// The overlay is not merged in (a scan done a step at a time while the
    /// operator writes: a view's filter of the rows held).
    pub(crate) fn scan_committed_keys_from(
        &self,
        start: &[u8],
        limit: usize,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<usize> {
        let mut visited = 0;
        self.checkpoints.store().scan_keys_from(self.keyspace, start, limit, &mut |key| {
            visited += 1;
            f(key);
        })?;
        self.count(StateReads { filter_keys: visited as u64, ..StateReads::default() });
        Ok(visited)
    }

    /// Replaces every committed entry whose key starts with `prefix` by the
    /// entries `f` makes of it (a change of layout), straight in the store:
    /// each old entry is deleted in the same atomic batch as its
    /// replacements, batches of about [`REWRITE_BATCH_OPS`], so a crash
    /// leaves whole entries of either layout. Only before the operator's
    /// first write; the state it stands for does not change.
    pub(crate) fn rewrite_committed(
        &mut self,
        prefix: &[u8],
        f: impl FnMut(&[u8], &[u8], &mut Entries) -> Result<()>,
    ) -> Result<()> {
        self.move_entries(self.keyspace, prefix, f)
    }

    /// Moves every committed entry of the keyspace called `from` into this
    /// one, as the entries `f` makes of it (a new layout in a new
    /// keyspace), in atomic batches as [`OperatorState::rewrite_committed`]
    /// does: a crash leaves each entry in one of the two keyspaces.
    pub(crate) fn move_committed_from(
        &mut self,
        from: &str,
        f: impl FnMut(&[u8], &[u8], &mut Entries) -> Result<()>,
    ) -> Result<()> {
        let from = self.checkpoints.store().keyspace(from)?;
        assert_ne!(from, self.keyspace, "a move is between two keyspaces");
        self.move_entries(from, &[], f)
    }

    fn move_entries(
        &mut self,
        from: Keyspace,
        prefix: &[u8],
        mut f: impl FnMut(&[u8], &[u8], &mut Entries) -> Result<()>,
    ) -> Result<()> {
        assert!(self.overlay.is_empty(), "a rewrite precedes the operator's writes");
        let store = self.checkpoints.store();
        let (mut batch, mut replacements) = (WriteBatch::new(), Vec::new());
        let mut outcome = Ok(());
        store.scan_prefix(from, prefix, &mut |key, value| {
            outcome = f(key, value, &mut replacements).and_then(|()| {
                batch.delete(from, key);
                for (new_key, new_value) in replacements.drain(..) {
                    let stays = from == self.keyspace && new_key.starts_with(prefix);
                    assert!(!stays, "a rewritten entry leaves the rewritten range");
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
        if let Some(filter) = self.filter.as_mut() {
            *filter = KeyFilter::new(false); // its keys are new: scan them in
        }
        self.scan_filter_step()
    }

    pub(crate) fn put(&mut self, epoch: Epoch, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.write(epoch, key.as_ref(), Some(value.as_ref()), None);
    }

    pub(crate) fn delete(&mut self, epoch: Epoch, key: impl AsRef<[u8]>) {
        self.write(epoch, key.as_ref(), None, None);
    }

    /// Puts `key`, a member of the group of its first `group_len` bytes
    /// ([`OperatorState::scan_group`]).
    pub(crate) fn put_grouped(
        &mut self,
        epoch: Epoch,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        group_len: usize,
    ) {
        self.write(epoch, key.as_ref(), Some(value.as_ref()), Some(group_len));
    }

    /// Deletes `key`, a member of the group of its first `group_len` bytes.
    pub(crate) fn delete_grouped(&mut self, epoch: Epoch, key: impl AsRef<[u8]>, group_len: usize) {
        self.write(epoch, key.as_ref(), None, Some(group_len));
    }

    /// Every write is copied once, into the epoch's writes
    /// ([`EpochWrites`]), which the checkpoint's batch shares.
    fn write(&mut self, epoch: Epoch, key: &[u8], value: Option<&[u8]>, group_len: Option<usize>) {
        if let (Some(filter), Some(_)) = (self.filter.as_mut(), value) {
            filter.held.insert(KeyFilter::hash(key));
        }
        assert!(!self.read_only, "a view's index is written by its applier only");
        self.overlay.insert(epoch, key, value, group_len);
    }

    /// Adds the reads since the last report to the runtime's counters
    /// (done by [`OperatorState::finish_epoch`]; an operator whose epoch
    /// ends before it finishes the epoch reports them earlier).
    pub(crate) fn report_reads(&self) {
        self.checkpoints.count_reads(self.reads.take());
    }

    /// Hands this epoch's writes to the checkpoint and forgets overlay
    /// entries that are committed by now.
    pub(crate) fn finish_epoch(&mut self, epoch: Epoch) -> Result<()> {
        if let Some(writes) = self.overlay.hand_over(epoch) {
            let mut batch = WriteBatch::new();
            batch.put_epoch(self.keyspace, writes);
            self.checkpoints.add_writes(epoch, &mut batch);
        }
        self.scan_filter_step()?;
        self.report_reads();
        let committed = self.checkpoints.committed_epoch();
        self.overlay.retain_after(committed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{OperatorState, Overlay, Values};
    use crate::checkpoint::Checkpoints;
    use crate::state::{MemoryStore, RocksStore, StateStore};
    use std::sync::Arc;

    /// `get_many` answers as `get` does, key by key, over keys committed,
    /// pending in the overlay (puts and deletes over committed keys), and
    /// never written, in batches longer than one store lookup takes.
    #[test]
    fn a_batched_read_answers_as_point_reads_do() {
        let dir = tempfile::tempdir().unwrap();
        let rocks: Arc<dyn StateStore> = Arc::new(RocksStore::open(dir.path().join("state")).unwrap());
        for (n, store) in [rocks, Arc::new(MemoryStore::new()) as Arc<dyn StateStore>].into_iter().enumerate() {
            let data_dir = dir.path().join(format!("data{n}"));
            let log = Arc::new(millpond_log::Log::open(&data_dir, millpond_log::LogOptions::default()).unwrap());
            let checkpoints = Arc::new(Checkpoints::open(store, log, data_dir, false, 0).unwrap());
            let mut state = OperatorState::new(checkpoints.clone(), "op.t", &Default::default()).unwrap();
            let key = |k: u32| k.to_be_bytes().to_vec();
            for k in (0..6000).step_by(2) {
                state.put(1, key(k), format!("committed {k}").into_bytes());
            }
            state.finish_epoch(1).unwrap();
            assert_eq!(checkpoints.commit_below(2).unwrap(), Some(1));
            for k in (0..6000).step_by(3) {
                match k % 4 {
                    0 => state.delete(2, key(k)),
                    _ => state.put(2, key(k), format!("pending {k}").into_bytes()),
                }
            }
            let keys: Vec<Vec<u8>> = (0..6100).filter(|k| k % 5 != 0).map(key).collect();
            let borrowed: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let mut values = Values::default();
            state.get_many(&borrowed, &mut values).unwrap();
            let mut present = 0;
            for (i, key) in keys.iter().enumerate() {
                let one = state.get_uncounted(key).unwrap();
                assert_eq!(values.get(i), one.as_deref(), "key {i} of store {n}");
                present += usize::from(one.is_some());
            }
            assert!(present > 2000 && present < keys.len(), "a mix of present and absent keys: {present}");
        }
    }

    fn grouped() -> Overlay {
        Overlay { grouped: true, ..Overlay::default() }
    }

    #[test]
    fn an_overlay_answers_each_keys_latest_write_across_its_epochs() {
        let mut overlay = grouped();
        overlay.insert(1, b"ga", Some(&b"1"[..]), Some(1));
        overlay.insert(1, b"gb", Some(&b"1"[..]), Some(1));
        overlay.insert(2, b"ga", Some(&b"2"[..]), Some(1));
        overlay.insert(3, b"gb", None, Some(1));
        overlay.insert(3, b"x", Some(&b"3"[..]), None);
        assert_eq!(overlay.get(b"ga"), Some(Some(&b"2"[..])));
        assert_eq!(overlay.get(b"gb"), Some(None), "a later delete shadows an earlier put");
        assert_eq!(overlay.get(b"gc"), None);
        let group: Vec<_> = overlay.group(b"g");
        assert_eq!(
            group,
            vec![(&b"ga"[..], Some(&b"2"[..])), (&b"gb"[..], None)],
            "each key once, its latest, in order"
        );
        overlay.retain_after(2);
        assert_eq!(overlay.get(b"ga"), None, "a committed epoch's writes are the store's");
        assert_eq!(overlay.get(b"gb"), Some(None));
        assert_eq!(overlay.group(b"g"), vec![(&b"gb"[..], None)]);
        overlay.retain_after(3);
        assert!(overlay.is_empty() && overlay.epochs.is_empty());
        // The next epoch grows into a committed one's memory.
        assert!(overlay.spare.capacity() > 0 && overlay.spare.is_empty());
        overlay.insert(4, b"y", Some(&b"4"[..]), None);
        assert_eq!(overlay.get(b"y"), Some(Some(&b"4"[..])));
    }

    /// An epoch's writes handed to the checkpoint do not change: a later
    /// write to that epoch goes to writes of its own, read first; and the
    /// memory is kept for a later epoch only once the checkpoint let go.
    #[test]
    fn writes_handed_over_do_not_change() {
        let mut overlay = Overlay::default();
        overlay.insert(1, b"a", Some(&b"1"[..]), None);
        let handed = overlay.hand_over(1).expect("epoch 1 has writes");
        assert!(overlay.hand_over(1).is_none(), "handed over once");
        overlay.insert(1, b"a", Some(&b"2"[..]), None);
        assert_eq!(handed.iter().collect::<Vec<_>>(), vec![(&b"a"[..], Some(&b"1"[..]))]);
        assert_eq!(overlay.get(b"a"), Some(Some(&b"2"[..])));
        assert_eq!(overlay.epochs.len(), 2);
        let second = overlay.hand_over(1).expect("the later writes of epoch 1");
        drop(second);
        overlay.retain_after(1);
        assert!(overlay.epochs.is_empty() && overlay.spare.capacity() > 0, "the writes let go are kept");
        overlay.insert(2, b"b", None, None);
        assert_eq!(overlay.spare.capacity(), 0, "epoch 2 grows into the spare");
        let held = overlay.hand_over(2).expect("epoch 2 has writes");
        overlay.retain_after(2);
        assert!(overlay.epochs.is_empty() && overlay.spare.capacity() == 0, "writes still held are not reused");
        assert_eq!(held.iter().collect::<Vec<_>>(), vec![(&b"b"[..], None)], "and do not change");
    }

    #[test]
    #[should_panic(expected = "writes come in epoch order")]
    fn an_overlay_refuses_a_write_to_an_epoch_before_its_newest() {
        let mut overlay = Overlay::default();
        overlay.insert(2, b"a", None, None);
        overlay.insert(1, b"a", None, None);
    }
}
