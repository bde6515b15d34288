//! [`EpochStash`]: updates waiting for the frontier to pass their epoch.
//!
//! Every stateful operator and sink works epoch by epoch: it keeps each
//! epoch's updates with a capability for that epoch, and processes an epoch
//! only once its input frontier has passed it.
//!
//! Invariants: an epoch comes out once, in increasing order, only when no
//! input can still carry updates at it; its capability is held until the
//! caller drops it (after emitting the epoch's output).

use std::collections::BTreeMap;

use timely::dataflow::operators::{Capability, InputCapability};
use timely::progress::frontier::MutableAntichain;

use crate::{Diff, Epoch};

/// One epoch's capability and updates.
pub(crate) type Stashed<D> = (Capability<Epoch>, Vec<(D, Diff)>);

/// Updates per epoch, each epoch with a capability to emit at it.
pub(crate) struct EpochStash<D> {
    epochs: BTreeMap<Epoch, Stashed<D>>,
    /// An epoch's vector handed back ([`EpochStash::recycle`]), empty, for
    /// the next new epoch: an epoch's updates grow into the capacity of an
    /// earlier one instead of a fresh allocation (and fresh pages) each time.
    spare: Vec<(D, Diff)>,
}

impl<D> EpochStash<D> {
    pub(crate) fn new() -> Self {
        EpochStash { epochs: BTreeMap::new(), spare: Vec::new() }
    }

    /// Hands back a taken epoch's vector for reuse.
    pub(crate) fn recycle(&mut self, mut updates: Vec<(D, Diff)>) {
        if updates.capacity() > self.spare.capacity() {
            updates.clear();
            self.spare = updates;
        }
    }

    /// Moves a container of updates in, each under its own epoch.
    pub(crate) fn absorb(&mut self, capability: &InputCapability<Epoch>, data: &mut Vec<(D, Epoch, Diff)>) {
        for (d, epoch, diff) in data.drain(..) {
            let spare = &mut self.spare;
            let stashed =
                self.epochs.entry(epoch).or_insert_with(|| (capability.delayed(&epoch, 0), std::mem::take(spare)));
            stashed.1.push((d, diff));
        }
    }

    /// The oldest stashed epoch, if every frontier has passed it.
    pub(crate) fn ready(&self, frontiers: &[&MutableAntichain<Epoch>]) -> Option<Epoch> {
        let epoch = *self.epochs.keys().next()?;
        frontiers.iter().all(|f| !f.frontier().less_equal(&epoch)).then_some(epoch)
    }

    /// The oldest stashed epoch, whether ready or not.
    pub(crate) fn first(&self) -> Option<Epoch> {
        self.epochs.keys().next().copied()
    }

    /// Takes an epoch out: its capability and updates.
    pub(crate) fn take(&mut self, epoch: Epoch) -> Option<Stashed<D>> {
        self.epochs.remove(&epoch)
    }
}
