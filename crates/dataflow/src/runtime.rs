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
//! - After a step in which an operator finished an epoch, sources skip the
//!   next step ([`Checkpoints::progress_due`]): it carries the progress to
//!   the probe at once, instead of after the reads and the processing of
//!   whatever arrived meanwhile (a hint for latency; correctness never
//!   depends on it).
//! - Every worker builds the same dataflow, and worker 0 builds all of it
//!   (views and sinks only have state there): its declarations are the
//!   job's. With `drop_undeclared`, worker 0 plans the drops right after
//!   its build, before it hands the committer any frontier, so the first
//!   commit of the run carries them.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use timely::dataflow::Scope;

use crate::Epoch;
use crate::checkpoint::Checkpoints;
pub use crate::config::{RetentionGap, RetentionGapPolicy, RuntimeConfig, StateBackend};
use crate::context::{Shared, WorkerContext};
use crate::dead_letter::Route;
use crate::error::{Error, Result};
use crate::opstate::StateReads;
use crate::state::{MemoryStore, RocksStore, StateStore};
use crate::topics::Topics;

/// Counters of a finished run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Records read by all sources.
    pub records: u64,
    /// Dead letters written: records a source rejected, each counted once
    /// however many of its readers rejected it.
    pub dead_letters: u64,
    /// Offsets that retention deleted before a resuming reader read them (a
    /// fresh reader starts at the log start offset and skips nothing).
    pub skipped_offsets: u64,
    /// Updates (records, once per window they fall in) that closing
    /// aggregates dropped because their window had closed already: the
    /// on-time records of a partition first read after the watermark
    /// passed their times (`event_time`'s module doc). Counted, never
    /// folded; 0 when every partition has records before windows close.
    pub closed_window_drops: u64,
    /// Each such gap, per reader and partition (with
    /// [`RetentionGapPolicy::Skip`]; otherwise the first one fails the run).
    pub retention_gaps: Vec<RetentionGap>,
    /// The first epoch of this run and the last committed one at its end.
    pub first_epoch: Epoch,
    pub committed_epoch: Epoch,
    /// With `drop_undeclared`: what this run dropped, as `reader NAME`,
    /// `view NAME`, `state KEYSPACE` and `topic NAME` (sink topics, orphans
    /// included), sorted.
    pub dropped: Vec<String>,
    /// What operators and views read of their state in this run.
    pub state_reads: StateReads,
}

/// A job under construction on one worker: the place sources and views are
/// declared. See [`Runtime::run`].
pub struct Job<'s> {
    pub(crate) scope: Scope<'s, Epoch>,
    pub(crate) ctx: Rc<WorkerContext>,
    /// Per dead-letter topic, what the readers of its source rejected.
    pub(crate) dead_letters: BTreeMap<String, Route<'s>>,
}

impl std::fmt::Debug for Job<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("worker", &self.scope.index())
            .field("dead_letters", &self.dead_letters.keys())
            .finish()
    }
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
        let topics = Topics::open(&config.data_dir)?;
        let stats = Runtime::run_on(&topics, config, build)?;
        // A clean close (the next start trusts the indexes), and its errors reported.
        topics.close()?;
        Ok(stats)
    }

    /// [`run`](Self::run) on a log this process has open already (`topics`,
    /// of `config.data_dir`), which stays open after the run: how a server
    /// runs its views beside its SQL session and its clients.
    pub fn run_on<F>(topics: &Topics, config: RuntimeConfig, build: F) -> Result<RunStats>
    where
        F: Fn(&mut Job<'_>) + Send + Sync + 'static,
    {
        if config.workers == 0 || config.epoch_interval_ms == 0 {
            return Err(Error::InvalidJob("workers and epoch_interval_ms must be at least 1".into()));
        }
        let log = topics.log().clone();
        let store: Arc<dyn StateStore> = match config.state {
            StateBackend::RocksDb => {
                Arc::new(RocksStore::open_with_cache(config.data_dir.join("state"), config.state_cache_bytes)?)
            }
            StateBackend::Memory => Arc::new(MemoryStore::new()),
        };
        let mut checkpoints = Checkpoints::open(
            store,
            log.clone(),
            config.data_dir.clone(),
            config.checkpoints,
            config.state_apply_nice,
        )?;
        checkpoints.commit_delay = Duration::from_millis(config.commit_delay_ms);
        checkpoints.compaction_lag = Duration::from_millis(config.changelog_compaction_lag_ms);
        checkpoints.holds = config.changelog_holds.clone();
        checkpoints.on_commit = config.on_commit.clone();
        checkpoints.timings = config.timings.clone();
        let checkpoints = Arc::new(checkpoints);
        let first_epoch = checkpoints.epoch_floor() + 1;
        let shared = Arc::new(Shared::new(config.clone(), checkpoints.clone(), first_epoch));
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
                    match committer_shared.checkpoints.commit_below(frontier) {
                        Ok(Some(epoch)) => {
                            let since = committer_shared.since_epoch_end(epoch);
                            committer_shared.checkpoints.timings.close_to_publish.record(since);
                        }
                        Ok(None) => {}
                        Err(e) => committer_shared.fail(e),
                    }
                }
            })
            .map_err(Error::io("spawning the commit thread", &config.data_dir))?;
        let worker_frontiers = Mutex::new(frontiers.clone());
        let worker_shared = shared.clone();
        let guards = timely::execute(timely::Config::process(config.workers), move |worker| {
            let shared = worker_shared.clone();
            let ctx = Rc::new(WorkerContext::new(shared.clone()));
            let dataflow = worker.next_dataflow_index();
            worker.dataflow::<Epoch, _, _>(|scope| {
                let mut job = Job { scope, ctx: ctx.clone(), dead_letters: BTreeMap::new() };
                build(&mut job);
                job.build_dead_letter_sinks();
            });
            if let Some(error) = ctx.first_build_error() {
                shared.fail(Error::InvalidJob(error));
            }
            if worker.index() == 0 && shared.config.drop_undeclared && !shared.failed() {
                let declared = ctx.declared();
                let checkpoints = &shared.checkpoints;
                let dropped = checkpoints.delete_orphan_sink_topics(&declared).and_then(|orphans| {
                    let planned = checkpoints.drop_undeclared(&declared, shared.first_epoch())?;
                    Ok(orphans.into_iter().map(|topic| format!("topic {topic}")).chain(planned).collect::<Vec<_>>())
                });
                match dropped {
                    Ok(dropped) => shared.set_dropped(dropped),
                    Err(e) => shared.fail(Error::at("dropping what the job no longer declares", e)),
                }
            }
            let frontiers = (worker.index() == 0).then(|| worker_frontiers.lock().expect("frontier sender").clone());
            let mut last_sent = 0;
            while !ctx.probe.done() && !shared.failed() {
                // Set before this step: the step carries it (sources skip it).
                let progress_due = frontiers.is_some() && shared.checkpoints.progress_due();
                worker.step_or_park(Some(Duration::from_millis(2)));
                if let Some(frontiers) = &frontiers {
                    let frontier = ctx.probe.with_frontier(|f| f.first().copied().unwrap_or(Epoch::MAX));
                    if frontier > last_sent {
                        // A closed channel means the committer failed; the loop sees it.
                        let _ = frontiers.send(Some(frontier));
                        last_sent = frontier;
                    }
                    if progress_due {
                        shared.checkpoints.progress_carried();
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
        let applied = checkpoints.finish_applying();
        for result in results {
            result.map_err(Error::Worker)?;
        }
        if let Some(failure) = shared.take_failure() {
            return Err(failure);
        }
        applied?;
        let stats = RunStats {
            records: shared.records.load(Ordering::Relaxed),
            dead_letters: shared.dead_letters.load(Ordering::Relaxed),
            skipped_offsets: shared.skipped.load(Ordering::Relaxed),
            closed_window_drops: shared.config.counters.closed_window_drops.load(Ordering::Relaxed)
                - shared.closed_window_drops_before,
            first_epoch,
            committed_epoch: checkpoints.committed_epoch(),
            retention_gaps: shared.take_retention_gaps(),
            dropped: shared.take_dropped(),
            state_reads: checkpoints.state_reads(),
        };
        // The workers and the committer are done with the log: what they
        // wrote is flushed (the caller closes it).
        drop((shared, checkpoints));
        log.flush()?;
        Ok(stats)
    }
}
