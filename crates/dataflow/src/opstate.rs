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
//! Invariant: `get` returns the value of the latest write by this operator,
//! committed or not; the overlay only holds entries of uncommitted epochs
//! (after [`OperatorState::finish_epoch`] prunes).

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;
use std::sync::Arc;

use crate::Epoch;
use crate::checkpoint::Checkpoints;
use crate::error::Result;
use crate::state::{Keyspace, WriteBatch};

#[derive(Debug)]
pub(crate) struct OperatorState {
    checkpoints: Arc<Checkpoints>,
    keyspace: Keyspace,
    overlay: FxHashMap<Vec<u8>, (Epoch, Option<Vec<u8>>)>,
    batch: WriteBatch,
    /// A view's state: the store is written from the changelog after each
    /// commit ([`crate::view_state`]), so writes only go to the overlay.
    indexed: bool,
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
            overlay: FxHashMap::default(),
            batch: WriteBatch::new(),
            indexed: false,
        })
    }

    /// This state as a view's: an index of its changelog, written from it
    /// after each commit ([`crate::view_state`]).
    pub(crate) fn indexed(mut self) -> OperatorState {
        self.indexed = true;
        self
    }

    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.overlay.get(key) {
            Some((_, value)) => Ok(value.clone()),
            None => self.checkpoints.store().get(self.keyspace, key),
        }
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
        let committed = self.checkpoints.committed_epoch();
        self.overlay.retain(|_, (written, _)| *written > committed);
    }
}
