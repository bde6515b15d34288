//! The state applier: a thread that brings the views' state up to each
//! commit's changelog ends ([`crate::view_state::apply_through`]) after
//! the commit is published, below the runtime's priority, then raises the
//! committed epoch.
//!
//! Why a thread of its own: a commit's view rows (RocksDB puts, ~1.7 µs a
//! row) are the largest step after a publish, and they ran on the commit
//! thread exactly when the readers of that commit (a server's fan-out hubs
//! and their clients) have their burst of work. No reader needs them (they
//! read the changelog); only the views' operators do, and those read their
//! overlays until the committed epoch is raised. So the applier can run
//! at a nice value of its own (`RuntimeConfig::state_apply_nice`; a server
//! puts it between its hubs and its client threads): what is left of a
//! core after the dataflow and its readers, with the next commit as its
//! deadline. Even at the runtime's priority it overlaps the next epoch's
//! work instead of holding up the commit thread.
//!
//! Invariants:
//! - One commit at a time, in commit order: a commit hands its apply over
//!   only when the previous one is done ([`Applier::wait`]), and the
//!   commit thread waits for it before the next commit's synced batch, so
//!   a view's marker is never more than one commit behind once a commit
//!   is durable (the bound that changelog compaction relies on,
//!   [`crate::checkpoint`]).
//! - The committed epoch (what operators' overlays prune by) is raised
//!   only after its epoch's apply, never past a failed one.
//! - A failed apply is returned by the next [`Applier::wait`] (and every
//!   one after it); nothing is applied after it.
//! - Dropping the applier finishes the apply in hand, then joins the thread.

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use millpond_log::Log;

use crate::Epoch;
use crate::error::{Error, Result};
use crate::state::StateStore;
use crate::timing::CommitTimings;

/// The largest nice value (the lowest priority).
const NICE_MAX: i32 = 19;

/// One commit's apply: every view whose changelog the commit synced, to
/// its committed end.
#[derive(Clone, Debug)]
pub(crate) struct Apply {
    pub(crate) epoch: Epoch,
    /// View, changelog topic, committed end offset.
    pub(crate) views: Vec<(String, String, u64)>,
    pub(crate) timings: Arc<CommitTimings>,
}

#[derive(Debug, Default)]
struct Slot {
    /// Handed over and not yet done (being applied, or about to be).
    apply: Option<Apply>,
    /// Why an apply failed, for the first wait after it; every later one
    /// gets `failed`.
    failure: Option<Error>,
    failed: Option<String>,
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    slot: Mutex<Slot>,
    changed: Condvar,
    committed_epoch: AtomicU64,
    /// The thread's id once it has lowered its priority (0 before).
    thread_id: AtomicI32,
}

impl Shared {
    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The applier thread and its one-commit hand-over slot.
#[derive(Debug)]
pub(crate) struct Applier {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Applier {
    /// Starts the thread at nice value `nice` (0: its creator's); `committed`
    /// is the epoch the state is applied through now (the resumed commit's,
    /// after its catch-up).
    pub(crate) fn start(store: Arc<dyn StateStore>, log: Arc<Log>, committed: Epoch, nice: i32) -> Result<Applier> {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot::default()),
            changed: Condvar::new(),
            committed_epoch: AtomicU64::new(committed),
            thread_id: AtomicI32::new(0),
        });
        let running = shared.clone();
        let thread = std::thread::Builder::new()
            .name("millpond-apply".into())
            .spawn(move || run(&running, store.as_ref(), &log, nice))
            .map_err(|e| Error::Worker(format!("spawning the state applier: {e}")))?;
        Ok(Applier { shared, thread: Some(thread) })
    }

    /// The last epoch whose views' state is applied (and so committed).
    pub(crate) fn committed_epoch(&self) -> Epoch {
        self.shared.committed_epoch.load(Ordering::Acquire)
    }

    /// Waits until the apply in hand is done; fails if any apply failed.
    pub(crate) fn wait(&self) -> Result<()> {
        let mut slot = self.shared.slot();
        while slot.apply.is_some() {
            slot = self.shared.changed.wait(slot).unwrap_or_else(|e| e.into_inner());
        }
        if let Some(error) = slot.failure.take() {
            return Err(error);
        }
        match &slot.failed {
            Some(reason) => Err(Error::Worker(format!("applying the views' state failed earlier: {reason}"))),
            None => Ok(()),
        }
    }

    /// Hands a published commit's apply over (after the previous one).
    pub(crate) fn submit(&self, apply: Apply) -> Result<()> {
        self.wait()?;
        assert!(apply.epoch > self.committed_epoch(), "applies come in commit order");
        self.shared.slot().apply = Some(apply);
        self.shared.changed.notify_all();
        Ok(())
    }
}

impl Drop for Applier {
    fn drop(&mut self) {
        self.shared.slot().stop = true;
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join(); // a panic there was already reported
        }
    }
}

/// The thread: lowers its priority, then applies what it is handed until
/// stopped (finishing the apply in hand).
fn run(shared: &Shared, store: &dyn StateStore, log: &Log, nice: i32) {
    lower_priority(nice);
    shared.thread_id.store(rustix::thread::gettid().as_raw_nonzero().get(), Ordering::Release);
    loop {
        let apply = {
            let mut slot = shared.slot();
            while slot.apply.is_none() && !slot.stop {
                slot = shared.changed.wait(slot).unwrap_or_else(|e| e.into_inner());
            }
            match &slot.apply {
                Some(apply) => apply.clone(),
                None => return,
            }
        };
        let result = apply_views(store, log, &apply);
        let mut slot = shared.slot();
        match result {
            Ok(()) => shared.committed_epoch.store(apply.epoch, Ordering::Release),
            Err(error) => {
                slot.failed = Some(error.to_string());
                slot.failure = Some(error);
            }
        }
        slot.apply = None;
        shared.changed.notify_all();
        if slot.failed.is_some() {
            return;
        }
    }
}

fn apply_views(store: &dyn StateStore, log: &Log, apply: &Apply) -> Result<()> {
    let started = std::time::Instant::now();
    for (view, topic, end) in &apply.views {
        crate::view_state::apply_through(store, log, (view, topic), *end)?;
    }
    apply.timings.view_apply.record(started.elapsed());
    Ok(())
}

/// Raises the thread's nice value to `nice` (never lowers it: raising
/// one's own needs no privilege).
fn lower_priority(nice: i32) {
    let thread = rustix::thread::gettid();
    let own = rustix::process::getpriority_process(Some(thread)).unwrap_or(0);
    if nice <= own {
        return;
    }
    if let Err(error) = rustix::process::setpriority_process(Some(thread), nice.min(NICE_MAX)) {
        eprintln!("millpond: the state applier runs at its creator's priority ({error})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::MemoryStore;

    fn applier(dir: &std::path::Path) -> Applier {
        let log = Arc::new(Log::open(dir, millpond_log::LogOptions::default()).unwrap());
        Applier::start(Arc::new(MemoryStore::new()), log, 3, 7).unwrap()
    }

    fn apply(epoch: Epoch, views: Vec<(String, String, u64)>) -> Apply {
        Apply { epoch, views, timings: Arc::default() }
    }

    #[test]
    fn the_committed_epoch_rises_after_each_apply_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let applier = applier(dir.path());
        assert_eq!(applier.committed_epoch(), 3);
        applier.submit(apply(4, Vec::new())).unwrap();
        applier.submit(apply(5, Vec::new())).unwrap();
        applier.wait().unwrap();
        assert_eq!(applier.committed_epoch(), 5);
    }

    #[test]
    fn a_failed_apply_keeps_the_epoch_and_fails_every_later_wait() {
        let dir = tempfile::tempdir().unwrap();
        let applier = applier(dir.path());
        // A changelog that does not exist cannot be applied.
        applier.submit(apply(4, vec![("v".into(), "no-such-topic".into(), 10)])).unwrap();
        let error = applier.wait().unwrap_err().to_string();
        assert!(error.contains("no-such-topic"), "{error}");
        assert_eq!(applier.committed_epoch(), 3, "a failed apply does not commit its epoch");
        assert!(applier.submit(apply(5, Vec::new())).is_err());
        assert_eq!(applier.committed_epoch(), 3);
    }

    #[test]
    fn the_applier_runs_at_the_nice_value_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let own = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
        let applier = applier(dir.path());
        // It lowers itself as it starts, before its first apply.
        applier.submit(apply(4, Vec::new())).unwrap();
        applier.wait().unwrap();
        let tid = rustix::process::Pid::from_raw(applier.shared.thread_id.load(Ordering::Acquire));
        let tid = tid.expect("the thread recorded its id");
        assert_eq!(rustix::process::getpriority_process(Some(tid)).unwrap(), own.max(7));
    }
}
