//! How a runtime runs: [`RuntimeConfig`] and its parts.
//!
//! Every limit and interval is named with its unit last; `RuntimeConfig::new`
//! holds the defaults, and `docs/checkpoints.md` says what each one changes.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::Epoch;

/// The default [`RuntimeConfig::epoch_records_max`].
pub const EPOCH_RECORDS_MAX_DEFAULT: u64 = 128 * 1024;

/// Where operator state lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateBackend {
    /// RocksDB under `DATA_DIR/state` (the default; survives restarts).
    RocksDb,
    /// Memory only: for tests and the benchmark baseline. Nothing survives a
    /// restart, so sources start from the beginning each run.
    Memory,
}

/// What a resuming reader does when retention deleted records it had not
/// read yet (its committed offset is below the partition's log start).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RetentionGapPolicy {
    /// Stop the job with [`crate::Error::RetentionGap`] (the default: a view would
    /// silently miss those records).
    #[default]
    Fail,
    /// Skip to the log start, and report the gap in [`RunStats::retention_gaps`].
    Skip,
}

/// Records that retention deleted before a resuming reader read them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetentionGap {
    pub reader: String,
    pub topic: String,
    pub partition: u32,
    /// The reader's offset, and the log start offset it skipped to.
    pub from: u64,
    pub to: u64,
}

/// A position in a view's changelog that compaction must not pass: the
/// changes after `epoch` stay readable while the view's committed epoch is
/// at most `epochs_max` past it (then the hold lapses: a reader that far
/// behind may have to start over).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangelogHold {
    pub view: String,
    pub epoch: Epoch,
    pub epochs_max: u64,
}

/// Holds by their owner's name, shared between a server and its runs.
pub type ChangelogHolds = Arc<std::sync::Mutex<std::collections::BTreeMap<String, ChangelogHold>>>;

/// The epoch before which `view`'s changelog may be compacted, at
/// committed epoch `committed`: the oldest hold on it that has not lapsed.
pub(crate) fn held_epoch(holds: &ChangelogHolds, view: &str, committed: Epoch) -> Option<Epoch> {
    let holds = holds.lock().unwrap_or_else(|e| e.into_inner());
    holds
        .values()
        .filter(|h| h.view == view && committed.saturating_sub(h.epoch) <= h.epochs_max)
        .map(|h| h.epoch)
        .min()
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
    /// Records one source reads in one epoch on one worker before it closes
    /// the epoch early ([`EPOCH_RECORDS_MAX_DEFAULT`]): a backlog is read in
    /// epochs of this size at most, so what an epoch holds downstream is
    /// bounded however fast the sources read.
    pub epoch_records_max: u64,
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
    /// What a resuming reader does about records retention deleted unread.
    pub on_retention_gap: RetentionGapPolicy,
    /// Positions in views' changelogs that compaction must keep readable
    /// (a server's durable subscriptions), read at every commit.
    pub changelog_holds: ChangelogHolds,
    /// The cap of RocksDB's block cache (data, index and filter blocks), in
    /// bytes ([`crate::state::STATE_CACHE_BYTES_DEFAULT`]).
    pub state_cache_bytes: usize,
    /// The nice value of the thread that applies each commit's view rows
    /// to the views' state after the commit is published (0: the
    /// runtime's own; see `applier.rs`). A server whose client threads run
    /// at a higher nice value puts it between them and its hubs.
    pub state_apply_nice: i32,
    /// Rung with each epoch as soon as its checkpoint is published (a
    /// server's readers look at the checkpoint then, instead of at their
    /// next poll of the file).
    pub on_commit: Option<CommitBell>,
    /// Where the commit path records its durations (shared with whoever
    /// reads them: a server's metrics, a benchmark).
    pub timings: Arc<crate::timing::CommitTimings>,
    /// Counters the runs add to while they run (shared with whoever reads
    /// them: a server's metrics).
    pub counters: Arc<RunCounters>,
}

/// What a runtime counts as it runs, summed over the runs that share it
/// ([`RuntimeConfig::counters`]); `RunStats` gives one run's part.
#[derive(Debug, Default)]
pub struct RunCounters {
    /// Updates that windowed operators dropped because they fell in a
    /// window, session or join key the watermark had already closed
    /// (module `event_time`).
    pub closed_window_drops: std::sync::atomic::AtomicU64,
}

/// A callback rung after each commit is published ([`RuntimeConfig::on_commit`]).
#[derive(Clone)]
pub struct CommitBell(pub Arc<dyn Fn(Epoch) + Send + Sync>);

impl std::fmt::Debug for CommitBell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CommitBell")
    }
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
            epoch_records_max: EPOCH_RECORDS_MAX_DEFAULT,
            commit_delay_ms: 0,
            sink_segment_bytes: 64 << 20,
            changelog_compaction_lag_ms: 600_000,
            drop_undeclared: false,
            on_retention_gap: RetentionGapPolicy::Fail,
            changelog_holds: ChangelogHolds::default(),
            state_cache_bytes: crate::state::STATE_CACHE_BYTES_DEFAULT,
            state_apply_nice: 0,
            on_commit: None,
            timings: Arc::default(),
            counters: Arc::default(),
        }
    }
    /// Adds this run's counts to `counters`.
    pub fn counters(mut self, counters: Arc<RunCounters>) -> Self {
        self.counters = counters;
        self
    }
    /// Records this run's commit-path durations in `timings`.
    pub fn timings(mut self, timings: Arc<crate::timing::CommitTimings>) -> Self {
        self.timings = timings;
        self
    }
    pub fn on_commit(mut self, bell: CommitBell) -> Self {
        self.on_commit = Some(bell);
        self
    }
    pub fn state_apply_nice(mut self, nice: i32) -> Self {
        self.state_apply_nice = nice;
        self
    }
    pub fn state_cache_bytes(mut self, bytes: usize) -> Self {
        self.state_cache_bytes = bytes;
        self
    }
    /// Shares `holds` with this run (see [`ChangelogHold`]).
    pub fn changelog_holds(mut self, holds: ChangelogHolds) -> Self {
        self.changelog_holds = holds;
        self
    }
    pub fn on_retention_gap(mut self, policy: RetentionGapPolicy) -> Self {
        self.on_retention_gap = policy;
        self
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
    pub fn epoch_records_max(mut self, records: u64) -> Self {
        self.epoch_records_max = records;
        self
    }
    /// Stops the run at the next epoch boundary once `flag` is set.
    pub fn stop(mut self, flag: Arc<AtomicBool>) -> Self {
        self.stop = flag;
        self
    }
    pub fn stop_when_caught_up(mut self, on: bool) -> Self {
        self.stop_when_caught_up = on;
        self
    }
}

#[cfg(test)]
mod hold_tests {
    use super::*;

    #[test]
    fn the_oldest_live_hold_on_a_view_bounds_its_compaction() {
        let holds = ChangelogHolds::default();
        let hold = |view: &str, epoch, epochs_max| ChangelogHold { view: view.into(), epoch, epochs_max };
        assert_eq!(held_epoch(&holds, "v", 100), None, "no hold: compaction as the lag says");
        holds.lock().unwrap().insert("a".into(), hold("v", 40, 100));
        holds.lock().unwrap().insert("b".into(), hold("v", 70, 100));
        holds.lock().unwrap().insert("c".into(), hold("w", 10, 100));
        assert_eq!(held_epoch(&holds, "v", 100), Some(40), "the oldest of v's holds");
        assert_eq!(held_epoch(&holds, "v", 141), Some(70), "a's hold lapsed 101 epochs on");
        assert_eq!(held_epoch(&holds, "v", 171), None, "every hold on v lapsed");
        assert_eq!(held_epoch(&holds, "w", 50), Some(10), "holds are per view");
    }
}
