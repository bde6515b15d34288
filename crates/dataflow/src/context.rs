//! What a running job shares: [`Shared`] across the workers and the commit
//! thread of one runtime, and [`WorkerContext`] per worker while the job is
//! built (names, build errors, declarations).
//!
//! Invariants: the first failure wins and is returned by the run, typed;
//! a job that failed commits nothing more; every name a job declares is
//! claimed once per kind.

use std::cell::{Ref, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use millpond_log::Log;
use timely::dataflow::ProbeHandle;

use crate::Epoch;
use crate::checkpoint::{Checkpoints, Declarations, IndexWanted};
use crate::config::{RetentionGap, RetentionGapPolicy, RuntimeConfig};
use crate::error::{Error, Result};
use crate::opstate::OperatorState;
use crate::timeline::Timeline;
use crate::view_index::{Head, index_keyspace};

/// What all workers of a runtime share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: RuntimeConfig,
    pub(crate) checkpoints: Arc<Checkpoints>,
    pub(crate) timeline: Timeline,
    failure: Mutex<Option<Error>>,
    dropped: Mutex<Vec<String>>,
    retention_gaps: Mutex<Vec<RetentionGap>>,
    pub(crate) records: AtomicU64,
    pub(crate) dead_letters: AtomicU64,
    pub(crate) skipped: AtomicU64,
    /// `config.counters.closed_window_drops` when the run started (the
    /// run's part is what it adds).
    pub(crate) closed_window_drops_before: u64,
}

impl Shared {
    pub(crate) fn new(config: RuntimeConfig, checkpoints: Arc<Checkpoints>, first_epoch: Epoch) -> Shared {
        let timeline = Timeline::new(first_epoch, config.epoch_interval_ms);
        let closed_window_drops_before = config.counters.closed_window_drops.load(Ordering::Relaxed);
        Shared {
            config,
            checkpoints,
            timeline,
            failure: Mutex::new(None),
            dropped: Mutex::new(Vec::new()),
            retention_gaps: Mutex::new(Vec::new()),
            records: AtomicU64::new(0),
            dead_letters: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            closed_window_drops_before,
        }
    }
    /// The first failure, if any (taken once, by the run).
    pub(crate) fn take_failure(&self) -> Option<Error> {
        self.failure.lock().expect("failure lock").take()
    }
    /// What this run drops (with `drop_undeclared`), sorted.
    pub(crate) fn set_dropped(&self, mut dropped: Vec<String>) {
        dropped.sort();
        *self.dropped.lock().expect("dropped lock") = dropped;
    }
    pub(crate) fn take_dropped(&self) -> Vec<String> {
        std::mem::take(&mut *self.dropped.lock().expect("dropped lock"))
    }
    pub(crate) fn take_retention_gaps(&self) -> Vec<RetentionGap> {
        std::mem::take(&mut *self.retention_gaps.lock().expect("gaps lock"))
    }
    /// The epoch the run is in now ([`Timeline`]).
    pub(crate) fn epoch_now(&self) -> Epoch {
        self.timeline.epoch_now()
    }
    pub(crate) fn first_epoch(&self) -> Epoch {
        self.timeline.first()
    }
    /// Time left in `epoch`.
    pub(crate) fn until_epoch_end(&self, epoch: Epoch) -> Duration {
        self.timeline.until_epoch_end(epoch)
    }
    /// Time since `epoch` ended (zero while it runs).
    pub(crate) fn since_epoch_end(&self, epoch: Epoch) -> Duration {
        self.timeline.since_epoch_end(epoch)
    }
    pub(crate) fn log(&self) -> &Arc<Log> {
        self.checkpoints.log()
    }
    /// Stops the job without committing anything further.
    pub(crate) fn fail(&self, error: Error) {
        let mut failure = self.failure.lock().expect("failure lock");
        if failure.is_none() {
            *failure = Some(error);
        }
    }
    /// A resuming reader found `gap`: fails the job or records it, as the
    /// policy says. Returns whether the reader may skip it.
    pub(crate) fn retention_gap(&self, gap: RetentionGap) -> bool {
        assert!(gap.from < gap.to, "a gap skips at least one offset: {gap:?}");
        match self.config.on_retention_gap {
            RetentionGapPolicy::Fail => {
                let RetentionGap { reader, topic, partition, from, to } = gap;
                self.fail(Error::RetentionGap { reader, topic, partition, from, to, lost: to - from });
                false
            }
            RetentionGapPolicy::Skip => {
                self.skipped.fetch_add(gap.to - gap.from, Ordering::Relaxed);
                self.retention_gaps.lock().expect("gaps lock").push(gap);
                true
            }
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
    /// External Kafka topics by their label (`kafka:TOPIC`).
    kafka_topics: RefCell<BTreeMap<String, crate::KafkaTopic>>,
}

impl WorkerContext {
    pub(crate) fn new(shared: Arc<Shared>) -> WorkerContext {
        WorkerContext {
            shared,
            probe: ProbeHandle::new(),
            names: RefCell::new(BTreeSet::new()),
            build_errors: RefCell::new(Vec::new()),
            declared: RefCell::new(Declarations::default()),
            kafka_topics: RefCell::new(BTreeMap::new()),
        }
    }

    /// Registers an external Kafka topic; its label, the name its readers
    /// read (one topic per label: another cluster's topic of the same name
    /// is a build error).
    pub(crate) fn register_kafka_topic(&self, topic: &crate::KafkaTopic) -> String {
        let label = crate::kafka_source::label(&topic.topic);
        let mut topics = self.kafka_topics.borrow_mut();
        match topics.get(&label) {
            Some(known) if known != topic => self.build_error(format!(
                "{label} is read from {} and from {}: one job reads one Kafka topic of a name",
                known.brokers, topic.brokers
            )),
            Some(_) => {}
            None => drop(topics.insert(label.clone(), topic.clone())),
        }
        label
    }

    /// The external Kafka topic registered under `label`.
    pub(crate) fn kafka_topic(&self, label: &str) -> Option<crate::KafkaTopic> {
        self.kafka_topics.borrow().get(label).cloned()
    }
    /// The first error met while building (the job is refused with it).
    pub(crate) fn first_build_error(&self) -> Option<String> {
        self.build_errors.borrow().first().cloned()
    }
    /// What this worker's part of the job declared.
    pub(crate) fn declared(&self) -> Ref<'_, Declarations> {
        self.declared.borrow()
    }
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

    /// Declares and opens the state in `keyspace` of an operator fed
    /// by the readers in `lineage`.
    pub(crate) fn operator_state(&self, keyspace: &str, lineage: &BTreeSet<String>) -> Result<OperatorState> {
        self.declared.borrow_mut().states.insert(keyspace.to_owned());
        OperatorState::new(self.shared.checkpoints.clone(), keyspace, lineage)
    }

    /// Declares and opens view `name`'s index (keyspace `vidx.NAME`, an
    /// index of its changelog, [`OperatorState::new_index`]), fed by
    /// `lineage`, with its hasher. A resumed view whose state is of the
    /// layout before (`view.NAME`) is not new: its index was replayed from
    /// its changelog ([`Checkpoints::register_view_index`]). `index` says
    /// whether a new index holds rows, and whether the view is replaced.
    pub(crate) fn view_index(
        &self,
        name: &str,
        lineage: &BTreeSet<String>,
        index: IndexWanted,
    ) -> Result<(OperatorState, Head)> {
        let keyspace = index_keyspace(name);
        self.declared.borrow_mut().states.insert(keyspace.clone());
        let checkpoints = &self.shared.checkpoints;
        let before = crate::naming::changelog_topic(name);
        let what = format!("the index of view '{name}'");
        let first = (self.shared.first_epoch(), index);
        let head = checkpoints.register_view_index((&keyspace, &before), lineage, first, &what)?;
        Ok((OperatorState::new_index(checkpoints.clone(), &keyspace)?, head))
    }

    /// [`Context::operator_state`] for a new layout of state `from`:
    /// whether `from`'s committed entries must be moved into it first
    /// ([`OperatorState::move_committed_from`]).
    pub(crate) fn operator_state_moved_from(
        &self,
        keyspace: &str,
        from: &str,
        lineage: &BTreeSet<String>,
    ) -> Result<(OperatorState, bool)> {
        self.declared.borrow_mut().states.insert(keyspace.to_owned());
        OperatorState::new_moved_from(self.shared.checkpoints.clone(), keyspace, from, lineage)
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
