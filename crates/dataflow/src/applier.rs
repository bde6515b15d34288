//! The state applier: a thread that brings the views' state up to each
//! commit's changelog ends ([`crate::view_state::apply_step`]) after the
//! commit is published, then raises the committed epoch.
//!
//! Why a thread of its own: a commit's view rows (RocksDB puts, ~1.7 µs a
//! row) are the largest step after a publish, and they ran on the commit
//! thread exactly when the readers of that commit (a server's fan-out hubs
//! and their clients) have their burst of work. No reader needs them (they
//! read the changelog); only the views' operators do, and those read their
//! unapplied rows from memory until the committed epoch is raised. So the applier can run
//! at a nice value of its own (`RuntimeConfig::state_apply_nice`; `millpond
//! serve` leaves it at the runtime's, as nice 7 measured no different): what is left of a
//! core after the dataflow and its readers, with the next commit as its
//! deadline. Even at the runtime's priority it overlaps the next epoch's
//! work instead of holding up the commit thread.
//!
//! The apply goes in steps of at most [`APPLY_STEP_RECORDS`] records, and
//! a commit that finds the previous apply unfinished takes the remaining
//! steps itself, at its own priority ([`Applier::wait`]): the commit
//! thread never waits on the lower-priority thread for more than the step
//! it is in.
//!
//! Invariants:
//! - One commit at a time, in commit order, one step at a time: a commit
//!   hands its apply over only when the previous one is done, and the
//!   commit thread finishes it before the next commit's synced batch, so a
//!   view's marker is never more than one commit behind once a commit is
//!   durable (the bound that changelog compaction relies on,
//!   [`crate::checkpoint`]).
//! - The committed epoch (what operators' overlays and views' unapplied
//!   rows prune by) is raised
//!   only after its epoch's last step, never past a failed one.
//! - A failed (or panicked) step is returned by the next [`Applier::wait`]
//!   (and every one after it); nothing is applied after it.
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
/// Changelog records per step (one RocksDB batch with its marker): about
/// 3 ms of work at the runtime's priority, the most a commit waits for the
/// applier's thread.
pub(crate) const APPLY_STEP_RECORDS: u64 = 2048;

/// One commit's apply: every view whose changelog the commit synced, to
/// its committed end.
#[derive(Clone, Debug)]
pub(crate) struct Apply {
    pub(crate) epoch: Epoch,
    /// View, changelog topic, committed end offset.
    pub(crate) views: Vec<(String, String, u64)>,
    pub(crate) timings: Arc<CommitTimings>,
    /// When it was handed over (`view_apply` times it from there to its
    /// last step).
    pub(crate) submitted: std::time::Instant,
}

#[derive(Debug, Default)]
struct Slot {
    /// Handed over and not yet done (being applied, or about to be).
    apply: Option<Apply>,
    /// The view of `apply` the next step is of.
    view: usize,
    /// A step is being taken (by the thread or a waiting commit).
    stepping: bool,
    /// Why an apply failed, for the first wait after it; every later one
    /// gets `failed`.
    failure: Option<Error>,
    failed: Option<String>,
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    store: Arc<dyn StateStore>,
    log: Arc<Log>,
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

    fn wait<'a>(&self, slot: MutexGuard<'a, Slot>) -> MutexGuard<'a, Slot> {
        self.changed.wait(slot).unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the next step of the apply in hand, unless one is being taken.
    fn take_step(slot: &mut Slot) -> Option<(String, String, u64)> {
        if slot.stepping {
            return None;
        }
        let view = slot.apply.as_ref()?.views.get(slot.view)?.clone();
        slot.stepping = true;
        Some(view)
    }

    /// Takes one step (unlocked), then records it: the apply is done
    /// after its last view's last step, or failed.
    fn step<'a>(
        &'a self,
        slot: MutexGuard<'a, Slot>,
        (view, topic, end): (String, String, u64),
    ) -> MutexGuard<'a, Slot> {
        drop(slot);
        let taken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let store = self.store.as_ref();
            crate::view_state::apply_step(store, &self.log, (&view, &topic), end, APPLY_STEP_RECORDS)
        }));
        let outcome = taken.unwrap_or_else(|_| Err(Error::Worker(format!("applying view '{view}' panicked"))));
        let mut slot = self.slot();
        slot.stepping = false;
        match outcome {
            Ok(false) => {}
            Ok(true) => slot.view += 1,
            Err(error) => {
                slot.failed = Some(error.to_string());
                slot.failure = Some(error);
                slot.apply = None;
            }
        }
        self.finish_if_done(&mut slot);
        self.changed.notify_all();
        slot
    }

    /// Ends the apply in hand once no view is left: raises the committed
    /// epoch.
    fn finish_if_done(&self, slot: &mut Slot) {
        if let Some(apply) = slot.apply.as_ref().filter(|a| slot.view >= a.views.len()) {
            apply.timings.view_apply.record(apply.submitted.elapsed());
            self.committed_epoch.store(apply.epoch, Ordering::Release);
            slot.apply = None;
        }
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
            store,
            log,
            slot: Mutex::new(Slot::default()),
            changed: Condvar::new(),
            committed_epoch: AtomicU64::new(committed),
            thread_id: AtomicI32::new(0),
        });
        let running = shared.clone();
        let thread = std::thread::Builder::new()
            .name("millpond-apply".into())
            .spawn(move || run(&running, nice))
            .map_err(|e| Error::Worker(format!("spawning the state applier: {e}")))?;
        Ok(Applier { shared, thread: Some(thread) })
    }

    /// The last epoch whose views' state is applied (and so committed).
    pub(crate) fn committed_epoch(&self) -> Epoch {
        self.shared.committed_epoch.load(Ordering::Acquire)
    }

    /// Finishes the apply in hand, taking its remaining steps on the
    /// calling thread (and waiting for a step the applier's thread is in);
    /// fails if any apply failed.
    pub(crate) fn wait(&self) -> Result<()> {
        let shared = &self.shared;
        let mut slot = shared.slot();
        while slot.apply.is_some() {
            slot = match Shared::take_step(&mut slot) {
                Some(step) => shared.step(slot, step),
                None => shared.wait(slot),
            };
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
        let mut slot = self.shared.slot();
        debug_assert!(slot.apply.is_none() && !slot.stepping, "one apply at a time");
        slot.view = 0;
        slot.apply = Some(apply);
        self.shared.finish_if_done(&mut slot); // a commit without views' rows
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

/// The thread: lowers its priority, then takes the steps of what it is
/// handed until stopped (finishing the apply in hand).
fn run(shared: &Shared, nice: i32) {
    if let Err(error) = lower_current_thread(nice) {
        eprintln!("millpond: the state applier runs at its creator's priority ({error})");
    }
    shared.thread_id.store(rustix::thread::gettid().as_raw_nonzero().get(), Ordering::Release);
    let mut slot = shared.slot();
    loop {
        if slot.apply.is_none() && slot.stop {
            return;
        }
        slot = match Shared::take_step(&mut slot) {
            Some(step) => shared.step(slot, step),
            None => shared.wait(slot),
        };
    }
}

/// Raises the calling thread's nice value to `nice` (at most 19); never
/// lowers it (raising one's own needs no privilege, and a thread already
/// at or past `nice` is left alone). The one helper every niced thread of
/// Millpond's uses (the applier here; a server's hubs and client threads).
pub fn lower_current_thread(nice: i32) -> std::io::Result<()> {
    let thread = rustix::thread::gettid();
    let own = rustix::process::getpriority_process(Some(thread)).unwrap_or(0);
    let nice = nice.min(NICE_MAX);
    if nice <= own {
        return Ok(());
    }
    rustix::process::setpriority_process(Some(thread), nice).map_err(std::io::Error::from)
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
        Apply { epoch, views, timings: Arc::default(), submitted: std::time::Instant::now() }
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

    /// An apply of several steps, finished by a waiting commit or the
    /// thread, leaves every row and the marker at the committed end.
    #[test]
    fn an_apply_of_many_steps_reaches_the_committed_end() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Log::open(dir.path(), millpond_log::LogOptions::default()).unwrap());
        let config = millpond_log::TopicConfig { partitions: 1, ..millpond_log::TopicConfig::default() };
        log.create_topic("view.v", config).unwrap();
        let rows = 3 * APPLY_STEP_RECORDS + 5;
        let records: Vec<millpond_log::Record> = (0..rows)
            .map(|k| millpond_log::Record::new(Some(format!("[{k}]").as_bytes()), Some(&1i64.to_be_bytes()), 0))
            .collect();
        log.append("view.v", 0, &records).unwrap();
        let store: Arc<dyn StateStore> = Arc::new(MemoryStore::new());
        let keyspace = store.keyspace("vidx.v").unwrap();
        let hasher = crate::view_index::hasher_or_create(store.as_ref(), keyspace, "v").unwrap();
        let applier = Applier::start(store.clone(), log, 3, 7).unwrap();
        applier.submit(apply(4, vec![("v".into(), "view.v".into(), rows)])).unwrap();
        applier.wait().unwrap();
        assert_eq!(applier.committed_epoch(), 4);
        let markers = store.keyspace(crate::view_state::APPLIED_KEYSPACE).unwrap();
        assert_eq!(crate::view_state::applied(store.as_ref(), markers, "view.v").unwrap(), rows);
        for k in [0, APPLY_STEP_RECORDS, rows - 1] {
            let entry = store.get(keyspace, &hasher.hash(format!("[{k}]").as_bytes()).key()).unwrap();
            let entry = entry.map(|bytes| crate::view_index::IndexEntry::decode(&bytes, "v").unwrap());
            assert_eq!(entry, Some(crate::view_index::IndexEntry { count: 1, offset: k }), "row {k}");
        }
    }

    #[test]
    fn a_failed_apply_keeps_the_epoch_and_fails_every_later_wait() {
        let dir = tempfile::tempdir().unwrap();
        let applier = applier(dir.path());
        // A view whose index has no hash key cannot be applied.
        applier.submit(apply(4, vec![("v".into(), "no-such-topic".into(), 10)])).unwrap();
        let error = applier.wait().unwrap_err().to_string();
        assert!(error.contains("the index of view 'v'"), "{error}");
        assert_eq!(applier.committed_epoch(), 3, "a failed apply does not commit its epoch");
        assert!(applier.submit(apply(5, Vec::new())).is_err());
        assert_eq!(applier.committed_epoch(), 3);
    }

    #[test]
    fn the_applier_runs_at_the_nice_value_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let own = rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap();
        let applier = applier(dir.path());
        // It lowers itself as it starts, then records its id.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while applier.shared.thread_id.load(Ordering::Acquire) == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let tid = rustix::process::Pid::from_raw(applier.shared.thread_id.load(Ordering::Acquire));
        let tid = tid.expect("the thread recorded its id");
        assert_eq!(rustix::process::getpriority_process(Some(tid)).unwrap(), own.max(7));
    }
}
