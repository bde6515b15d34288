//! The runtime: opens a data directory, builds a job on every timely worker,
//! steps the workers and drives checkpoints.
//!
//! Invariants:
//! - Epoch numbers are the timely timestamps. Every source on every worker
//!   cuts epochs on the same clock (`start`, a first epoch of at most
//!   100 ms, then whole intervals), so the dataflow frontier passing epoch e
//!   is the barrier of e.
//! - After a restart the first epoch is the last committed one plus one:
//!   epochs strictly increase across restarts.
//! - Only worker 0 decides what to commit: epochs below the frontier of the
//!   probe that every stateful operator and sink reports to. The commit
//!   thread commits them in frontier order.
//! - Every worker builds the same dataflow, and worker 0 builds all of it
//!   (views and sinks only have state there): its declarations are the
//!   job's. With `drop_undeclared`, worker 0 plans the drops right after
//!   its build, before it hands the committer any frontier, so the first
//!   commit of the run carries them.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use millpond_log::{Log, LogOptions};
use timely::dataflow::{ProbeHandle, Scope};

use crate::Epoch;
use crate::checkpoint::{Checkpoints, Declarations};
use crate::error::{Error, Result};
use crate::opstate::OperatorState;
use crate::state::{MemoryStore, RocksStore, StateStore};

/// The longest first epoch of a run.
const FIRST_EPOCH_MS_MAX: u64 = 100;

/// Where operator state lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateBackend {
    /// RocksDB under `DATA_DIR/state` (the default; survives restarts).
    RocksDb,
    /// Memory only: for tests and the benchmark baseline. Nothing survives a
    /// restart, so sources start from the beginning each run.
    Memory,
}

/// How a runtime runs.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    pub data_dir: PathBuf,
    /// Timely worker threads.
    pub workers: usize,
    /// Length of an epoch: the checkpoint interval.
    pub epoch_interval_ms: u64,
    pub state: StateBackend,
    /// Commit checkpoints durably (fsync). Off only for measuring their cost:
    /// state is still written, but a crash may lose or repeat output.
    pub checkpoints: bool,
    /// Stop once every source has read what its partitions held when the job
    /// started (and that output is committed).
    pub stop_when_caught_up: bool,
    /// Set to stop at the next epoch boundary (e.g. from a Ctrl-C handler).
    pub stop: Arc<AtomicBool>,
    /// Bytes a source fetches from one partition per step.
    pub fetch_bytes_max: usize,
    /// How long a committed epoch's changelog records are kept from
    /// compaction (Kafka's `min.compaction.lag.ms`): a subscriber can resume
    /// with `--as-of` an epoch this recent.
    pub changelog_compaction_lag_ms: u64,
    /// Segment size of the changelog and dead-letter topics this job creates
    /// (compaction works on closed segments only).
    pub sink_segment_bytes: u64,
    /// For crash tests only: sleep this long between writing an epoch's
    /// sink output and committing its checkpoint, so that kills land in
    /// that window often.
    pub commit_delay_ms: u64,
    /// Drop what the checkpoint lists but this run's job does not declare:
    /// readers' offsets, operator and view state, views and their sink
    /// topics (see docs/checkpoints.md). Off by default: a job that stops
    /// declaring something keeps it, so declaring it again resumes it.
    pub drop_undeclared: bool,
}

impl RuntimeConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> RuntimeConfig {
        RuntimeConfig {
            data_dir: data_dir.into(),
            workers: 1,
            epoch_interval_ms: 1000,
            state: StateBackend::RocksDb,
            checkpoints: true,
            stop_when_caught_up: false,
            stop: Arc::new(AtomicBool::new(false)),
            fetch_bytes_max: 1 << 20,
            commit_delay_ms: 0,
            sink_segment_bytes: 64 << 20,
            changelog_compaction_lag_ms: 600_000,
            drop_undeclared: false,
        }
    }
    pub fn drop_undeclared(mut self, on: bool) -> Self {
        self.drop_undeclared = on;
        self
    }
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }
    pub fn epoch_interval_ms(mut self, interval_ms: u64) -> Self {
        self.epoch_interval_ms = interval_ms;
        self
    }
    pub fn state(mut self, state: StateBackend) -> Self {
        self.state = state;
        self
    }
    pub fn checkpoints(mut self, on: bool) -> Self {
        self.checkpoints = on;
        self
    }
    pub fn changelog_compaction_lag_ms(mut self, lag_ms: u64) -> Self {
        self.changelog_compaction_lag_ms = lag_ms;
        self
    }
    pub fn sink_segment_bytes(mut self, bytes: u64) -> Self {
        self.sink_segment_bytes = bytes;
        self
    }
    pub fn fetch_bytes_max(mut self, bytes: usize) -> Self {
        self.fetch_bytes_max = bytes;
        self
    }
    pub fn stop_when_caught_up(mut self, on: bool) -> Self {
        self.stop_when_caught_up = on;
        self
    }
}

/// Counters of a finished run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Records read by all sources.
    pub records: u64,
    /// Records that failed to decode and went to a dead-letter topic.
    pub dead_letters: u64,
    /// Offsets that retention deleted before a resuming reader read them (a
    /// fresh reader starts at the log start offset and skips nothing).
    pub skipped_offsets: u64,
    /// The first epoch of this run and the last committed one at its end.
    pub first_epoch: Epoch,
    pub committed_epoch: Epoch,
    /// With `drop_undeclared`: what this run dropped, as `reader NAME`,
    /// `view NAME`, `state KEYSPACE` and `topic NAME` (sink topics, orphans
    /// included), sorted.
    pub dropped: Vec<String>,
}

/// What all workers of a runtime share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: RuntimeConfig,
    pub(crate) checkpoints: Arc<Checkpoints>,
    start: Instant,
    first_epoch: Epoch,
    failure: Mutex<Option<String>>,
    dropped: Mutex<Vec<String>>,
    pub(crate) records: AtomicU64,
    pub(crate) dead_letters: AtomicU64,
    pub(crate) skipped: AtomicU64,
}

impl Shared {
    /// The epoch that the clock is in now.
    pub(crate) fn epoch_now(&self) -> Epoch {
        let elapsed_ms = self.start.elapsed().as_millis() as u64;
        let first_ms = self.first_epoch_ms();
        if elapsed_ms < first_ms {
            self.first_epoch
        } else {
            self.first_epoch + 1 + (elapsed_ms - first_ms) / self.config.epoch_interval_ms.max(1)
        }
    }
    /// The first epoch of a run is short, so that output resumes soon after
    /// a restart (the replayed backlog then flows through regular epochs).
    fn first_epoch_ms(&self) -> u64 {
        self.config.epoch_interval_ms.clamp(1, FIRST_EPOCH_MS_MAX)
    }
    pub(crate) fn first_epoch(&self) -> Epoch {
        self.first_epoch
    }
    /// Time left in `epoch`.
    pub(crate) fn until_epoch_end(&self, epoch: Epoch) -> Duration {
        let end_ms = self.first_epoch_ms() + (epoch - self.first_epoch) * self.config.epoch_interval_ms.max(1);
        Duration::from_millis(end_ms).saturating_sub(self.start.elapsed())
    }
    pub(crate) fn log(&self) -> &Arc<Log> {
        self.checkpoints.log()
    }
    /// Stops the job without committing anything further.
    pub(crate) fn fail(&self, error: impl std::fmt::Display) {
        let mut failure = self.failure.lock().expect("failure lock");
        if failure.is_none() {
            *failure = Some(error.to_string());
        }
    }
    pub(crate) fn failed(&self) -> bool {
        self.failure.lock().expect("failure lock").is_some()
    }
    pub(crate) fn stopping(&self) -> bool {
        self.config.stop.load(Ordering::Relaxed) || self.failed()
    }
}

/// Per-worker build context.
#[derive(Debug)]
pub(crate) struct WorkerContext {
    pub(crate) shared: Arc<Shared>,
    pub(crate) probe: ProbeHandle<Epoch>,
    names: RefCell<BTreeSet<String>>,
    build_errors: RefCell<Vec<String>>,
    /// What this worker's part of the job declares.
    declared: RefCell<Declarations>,
}

impl WorkerContext {
    /// Declares the reader `reader` of `topic` (each reader name once per job).
    pub(crate) fn declare_reader(&self, reader: &str, topic: &str) {
        if self.claim("reader", reader) {
            self.declared.borrow_mut().readers.insert(reader.to_owned(), topic.to_owned());
        }
    }

    /// Declares the view `name` with its changelog `topic` (worker 0).
    pub(crate) fn declare_view(&self, name: &str, topic: &str) {
        let mut declared = self.declared.borrow_mut();
        declared.views.insert(name.to_owned());
        declared.sinks.insert(topic.to_owned());
    }

    /// Declares a sink topic (worker 0).
    pub(crate) fn declare_sink(&self, topic: &str) {
        self.declared.borrow_mut().sinks.insert(topic.to_owned());
    }

    /// Declares and opens the state in `keyspace` of an operator or view fed
    /// by the readers in `lineage`.
    pub(crate) fn operator_state(&self, keyspace: &str, lineage: &BTreeSet<String>) -> Result<OperatorState> {
        self.declared.borrow_mut().states.insert(keyspace.to_owned());
        OperatorState::new(self.shared.checkpoints.clone(), keyspace, lineage)
    }

    /// Claims a name of a kind ("operator", "view", "reader"): each stateful
    /// operator, view and reader may appear once per job.
    pub(crate) fn claim(&self, kind: &str, name: &str) -> bool {
        let ok = !name.is_empty()
            && name.len() <= 200
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
        if !ok {
            self.build_error(format!("{kind} name '{name}' must be 1..=200 ASCII letters, digits, '_', '-' or '.'"));
            return false;
        }
        if !self.names.borrow_mut().insert(format!("{kind}:{name}")) {
            self.build_error(format!("two {kind}s are named '{name}'; names must be unique"));
            return false;
        }
        true
    }
    pub(crate) fn build_error(&self, message: String) {
        self.build_errors.borrow_mut().push(message);
    }
}

/// A job under construction on one worker: the place sources and views are
/// declared. See [`Runtime::run`].
#[derive(Debug)]
pub struct Job<'s> {
    pub(crate) scope: Scope<'s, Epoch>,
    pub(crate) ctx: Rc<WorkerContext>,
}

impl<'s> Job<'s> {
    /// This worker's index, in `0..workers`.
    pub fn worker_index(&self) -> usize {
        self.scope.index()
    }
    pub fn workers(&self) -> usize {
        self.scope.peers()
    }
}

/// Runs jobs on a data directory.
#[derive(Debug)]
pub struct Runtime;

impl Runtime {
    /// Opens the data directory, recovers from its last checkpoint, builds
    /// the job with `build` on every worker and runs it until it stops
    /// (caught up, `config.stop`, or a failure).
    pub fn run<F>(config: RuntimeConfig, build: F) -> Result<RunStats>
    where
        F: Fn(&mut Job<'_>) + Send + Sync + 'static,
    {
        if config.workers == 0 || config.epoch_interval_ms == 0 {
            return Err(Error::InvalidJob("workers and epoch_interval_ms must be at least 1".into()));
        }
        std::fs::create_dir_all(&config.data_dir).map_err(Error::io("creating", &config.data_dir))?;
        let log = Arc::new(Log::open(&config.data_dir, LogOptions::default())?);
        let store: Arc<dyn StateStore> = match config.state {
            StateBackend::RocksDb => Arc::new(RocksStore::open(config.data_dir.join("state"))?),
            StateBackend::Memory => Arc::new(MemoryStore::new()),
        };
        let mut checkpoints = Checkpoints::open(store, log.clone(), config.data_dir.clone(), config.checkpoints)?;
        checkpoints.commit_delay = Duration::from_millis(config.commit_delay_ms);
        checkpoints.compaction_lag = Duration::from_millis(config.changelog_compaction_lag_ms);
        let checkpoints = Arc::new(checkpoints);
        let first_epoch = checkpoints.epoch_floor() + 1;
        let shared = Arc::new(Shared {
            config: config.clone(),
            checkpoints: checkpoints.clone(),
            start: Instant::now(),
            first_epoch,
            failure: Mutex::new(None),
            dropped: Mutex::new(Vec::new()),
            records: AtomicU64::new(0),
            dead_letters: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        });
        // Commits run on their own thread, in frontier order, so that the
        // fsyncs of a checkpoint never stall worker 0's dataflow.
        // `None` ends the thread (sent after the workers are done).
        let (frontiers, frontier_updates) = std::sync::mpsc::channel::<Option<Epoch>>();
        let committer_shared = shared.clone();
        let committer = std::thread::Builder::new()
            .name("millpond-commit".into())
            .spawn(move || {
                while let Ok(Some(frontier)) = frontier_updates.recv() {
                    if committer_shared.failed() {
                        break;
                    }
                    if let Err(e) = committer_shared.checkpoints.commit_below(frontier) {
                        committer_shared.fail(e);
                    }
                }
            })
            .map_err(Error::io("spawning the commit thread", &config.data_dir))?;
        let worker_frontiers = Mutex::new(frontiers.clone());
        let worker_shared = shared.clone();
        let guards = timely::execute(timely::Config::process(config.workers), move |worker| {
            let shared = worker_shared.clone();
            let ctx = Rc::new(WorkerContext {
                shared: shared.clone(),
                probe: ProbeHandle::new(),
                names: RefCell::new(BTreeSet::new()),
                build_errors: RefCell::new(Vec::new()),
                declared: RefCell::new(Declarations::default()),
            });
            let dataflow = worker.next_dataflow_index();
            worker.dataflow::<Epoch, _, _>(|scope| {
                let mut job = Job { scope, ctx: ctx.clone() };
                build(&mut job);
            });
            if let Some(error) = ctx.build_errors.borrow().first() {
                shared.fail(format!("invalid job: {error}"));
            }
            if worker.index() == 0 && shared.config.drop_undeclared && !shared.failed() {
                let declared = ctx.declared.borrow();
                let checkpoints = &shared.checkpoints;
                let dropped = checkpoints.delete_orphan_sink_topics(&declared).and_then(|orphans| {
                    let planned = checkpoints.drop_undeclared(&declared, shared.first_epoch())?;
                    Ok(orphans.into_iter().map(|topic| format!("topic {topic}")).chain(planned).collect::<Vec<_>>())
                });
                match dropped {
                    Ok(mut dropped) => {
                        dropped.sort();
                        *shared.dropped.lock().expect("dropped lock") = dropped;
                    }
                    Err(e) => shared.fail(format!("dropping what the job no longer declares: {e}")),
                }
            }
            let frontiers = (worker.index() == 0).then(|| worker_frontiers.lock().expect("frontier sender").clone());
            let mut last_sent = 0;
            while !ctx.probe.done() && !shared.failed() {
                worker.step_or_park(Some(Duration::from_millis(2)));
                if let Some(frontiers) = &frontiers {
                    let frontier = ctx.probe.with_frontier(|f| f.first().copied().unwrap_or(Epoch::MAX));
                    if frontier > last_sent {
                        // A closed channel means the committer failed; the loop sees it.
                        let _ = frontiers.send(Some(frontier));
                        last_sent = frontier;
                    }
                }
            }
            if shared.failed() {
                worker.drop_dataflow(dataflow);
            } else if let Some(frontiers) = &frontiers {
                let _ = frontiers.send(Some(Epoch::MAX));
            }
        })
        .map_err(Error::Worker)?;
        let results = guards.join();
        let _ = frontiers.send(None);
        committer.join().map_err(|_| Error::Worker("the commit thread panicked".into()))?;
        for result in results {
            result.map_err(Error::Worker)?;
        }
        if let Some(failure) = shared.failure.lock().expect("failure lock").take() {
            return Err(Error::Worker(failure));
        }
        log.flush()?;
        Ok(RunStats {
            records: shared.records.load(Ordering::Relaxed),
            dead_letters: shared.dead_letters.load(Ordering::Relaxed),
            skipped_offsets: shared.skipped.load(Ordering::Relaxed),
            first_epoch,
            committed_epoch: checkpoints.committed_epoch(),
            dropped: std::mem::take(&mut *shared.dropped.lock().expect("dropped lock")),
        })
    }
}
