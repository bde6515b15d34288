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

/// A recycled vector is kept only if its capacity is at most this many
/// times the updates its epoch held (or [`SPARE_UPDATES_MIN`]).
pub(crate) const SPARE_SLACK: usize = 4;
/// Below this many updates' capacity a vector is never too large to keep.
pub(crate) const SPARE_UPDATES_MIN: usize = 1024;

/// Whether a buffer of `capacity` that held `used` items at its fullest
/// is worth keeping for the next epoch (not [`SPARE_SLACK`] times larger).
pub(crate) fn worth_keeping(capacity: usize, used: usize) -> bool {
    capacity <= SPARE_SLACK * used.max(SPARE_UPDATES_MIN)
}

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

    /// Hands back a taken epoch's vector for reuse, unless its capacity is
    /// more than [`SPARE_SLACK`] times what its epoch used: one large epoch
    /// (a catch-up) does not pin its memory for the rest of the run.
    pub(crate) fn recycle(&mut self, mut updates: Vec<(D, Diff)>) {
        if worth_keeping(updates.capacity(), updates.len()) && updates.capacity() > self.spare.capacity() {
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

#[cfg(test)]
mod tests {
    use super::{EpochStash, SPARE_SLACK, SPARE_UPDATES_MIN};

    #[test]
    fn a_recycled_vector_is_kept_unless_far_larger_than_its_epoch_used() {
        let mut stash = EpochStash::<u8>::new();
        let used = |len: usize, capacity: usize| {
            let mut updates = Vec::with_capacity(capacity);
            updates.extend((0..len).map(|_| (0u8, 1)));
            updates
        };
        // A catch-up epoch's capacity, then epochs of a tenth of it.
        stash.recycle(used(SPARE_UPDATES_MIN * 8, SPARE_UPDATES_MIN * 8));
        assert!(stash.spare.capacity() >= SPARE_UPDATES_MIN * 8 && stash.spare.is_empty());
        let big = std::mem::take(&mut stash.spare);
        let mut small = big;
        small.extend((0..SPARE_UPDATES_MIN).map(|_| (0u8, 1)));
        stash.recycle(small);
        const { assert!(8 > SPARE_SLACK) };
        assert_eq!(stash.spare.capacity(), 0, "a vector 8 times larger than its epoch used is let go");
        stash.recycle(used(10, 100));
        assert!(stash.spare.capacity() >= 100, "a small vector is always worth keeping");
    }
}
