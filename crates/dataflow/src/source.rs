//! Sources: timely operators that tail a topic's partitions.
//!
//! Worker w owns the partitions p with `p % workers == w`. A source emits
//! each record at the epoch the run is in when it reads it, and when the
//! run moves to a later epoch it first records, for the epoch it closes,
//! the next offset of every partition it owns, then downgrades its
//! capability. So a checkpoint of epoch e holds exactly the offsets after
//! the records emitted at epochs up to e. A source that has read
//! `epoch_records_max` records at one epoch closes it early
//! ([`crate::timeline`]): a backlog is read in bounded epochs.
//!
//! Offsets are kept per reader (a name; `Job::source` names its reader
//! after the topic), so one job may read a topic with several readers,
//! each at its own position.
//!
//! Invariants:
//! - A record is emitted once per run and reader, at one epoch, in
//!   partition order.
//! - Resuming seeks every partition to the reader's committed offset. A
//!   fresh reader (no committed offsets) starts at each partition's log
//!   start offset, and its first checkpoint records a position for every
//!   partition it owns; a resuming reader's partition without an offset (a
//!   version 2 checkpoint) starts at the log start too, counting the offsets
//!   before it as skipped. A resuming reader whose offset
//!   retention passed (a **retention gap**) fails the job, or with
//!   `RetentionGapPolicy::Skip` skips to the log start and reports the gap.
//! - A resuming reader's committed offset is never past the partition's
//!   end: that would mean the log lost records the checkpoint had read (a
//!   repaired corruption), and reading on would skip the records that reuse
//!   those offsets. The job is refused.
//! - A reader reads one topic for the life of the data directory.
//! - A record that fails to decode is emitted as a [`DeadLetter`] instead
//!   (see [`crate::dead_letter`]); it never stops the job.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use millpond_log::{Error as LogError, RecordView, TopicConfig};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use timely::dataflow::operators::Capability;
use timely::dataflow::operators::generic::operator::source;

use crate::config::RetentionGap;
use crate::context::{Shared, WorkerContext};
use crate::dead_letter::DeadLetter;
use crate::{Collection, Diff, Epoch};

/// How long an idle source sleeps between polls of its partitions.
pub(crate) const IDLE_POLL_MS: u64 = 5;

/// A decoder from a JSON value into `T`.
pub fn json<T: DeserializeOwned>() -> impl Fn(&RecordView<'_>) -> Result<T, String> + Clone + 'static {
    |record: &RecordView<'_>| match record.value {
        None => Err("the record has no value".to_owned()),
        Some(bytes) => serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON: {e}")),
    }
}

/// A record's raw key and value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RawRecord {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// A decoder that keeps the key and value bytes.
pub fn raw() -> impl Fn(&RecordView<'_>) -> Result<RawRecord, String> + Clone + 'static {
    |record: &RecordView<'_>| {
        Ok(RawRecord { key: record.key.map(<[u8]>::to_vec), value: record.value.map(<[u8]>::to_vec) })
    }
}

/// One owned partition's read position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) partition: u32,
    pub(crate) next_offset: u64,
    /// Where "caught up" is, when the job stops there.
    pub(crate) target: u64,
    /// The offset last recorded for the checkpoint (`None`: none yet).
    pub(crate) recorded: Option<u64>,
}

/// Tails `topic` as the reader `reader`.
pub(crate) fn tail<'s, T, F>(
    scope: timely::dataflow::Scope<'s, Epoch>,
    ctx: &Rc<WorkerContext>,
    reader: &str,
    topic: &str,
    decode: F,
) -> Collection<'s, Result<T, Box<DeadLetter>>>
where
    T: Clone + 'static,
    F: Fn(u32, &RecordView<'_>) -> Result<T, String> + 'static,
{
    if crate::kafka_source::is_label(topic) {
        return match ctx.kafka_topic(topic) {
            Some(kafka) => crate::kafka_source::tail(scope, ctx, reader, &kafka, decode),
            None => {
                // Built anyway (every worker builds the same dataflow); the
                // build error stops the job before any data flows.
                ctx.build_error(format!("{topic}: no Kafka cluster is registered for it (Job::kafka_source)"));
                let none =
                    OneReader { reader: reader.to_owned(), topic: topic.to_owned(), positions: Vec::new(), decode };
                operate(scope, ctx, &format!("source:{reader}"), none, Rc::new(BTreeSet::from([reader.to_owned()])))
            }
        };
    }
    let partitions = open_topic(ctx, scope.index(), reader, topic);
    let positions = open_positions(ctx, (scope.index(), scope.peers()), reader, topic, partitions);
    let tailer = OneReader { reader: reader.to_owned(), topic: topic.to_owned(), positions, decode };
    let lineage = Rc::new(BTreeSet::from([reader.to_owned()]));
    operate(scope, ctx, &format!("source:{reader}"), tailer, lineage)
}

/// How a source operator reads: one reader's positions, or a reader group's cursors.
pub(crate) trait Tailer: 'static {
    type Item: Clone + 'static;
    /// Records the positions reached, for the checkpoint of `epoch`.
    fn record(&mut self, shared: &Shared, epoch: Epoch);
    /// Reads what is readable, handing each item to `give`. Returns whether
    /// anything was read (`None`: the job failed).
    fn read(&mut self, shared: &Shared, give: impl FnMut(Self::Item)) -> Option<bool>;
    /// Whether every position reached its target (the end when the job started).
    fn caught_up(&self) -> bool;
}

/// The source operator: emits what `tailer` reads at the current epoch;
/// when the clock moves on, records the positions for the epoch it closes
/// and then downgrades its capability.
pub(crate) fn operate<'s, R: Tailer>(
    scope: timely::dataflow::Scope<'s, Epoch>,
    ctx: &Rc<WorkerContext>,
    name: &str,
    mut tailer: R,
    lineage: crate::collection::Lineage,
) -> Collection<'s, R::Item> {
    let shared = ctx.shared.clone();
    let stream = source(scope, name, move |capability: Capability<Epoch>, info| {
        let activator = scope.activator_for(info.address);
        let mut cap = Some(capability);
        // Records read at the current epoch.
        let mut read_in_epoch = 0u64;
        move |output| {
            let Some(current) = cap.as_mut() else { return };
            let now = shared.epoch_now().max(shared.first_epoch());
            if *current.time() < now {
                // The initial capability (epoch 0) precedes the run: nothing
                // was emitted at it, so it has no positions to record.
                if *current.time() >= shared.first_epoch() {
                    tailer.record(&shared, *current.time());
                }
                current.downgrade(&now);
                read_in_epoch = 0;
            }
            let epoch = *current.time();
            if shared.checkpoints.progress_due() {
                // This step carries an operator's finished epoch to the probe.
                activator.activate();
                return;
            }
            let read_any = {
                let mut session = output.session(current);
                let give = |item| {
                    read_in_epoch += 1;
                    session.give((item, epoch, 1 as Diff));
                };
                match tailer.read(&shared, give) {
                    Some(read_any) => read_any,
                    None => return,
                }
            };
            let caught_up = shared.config.stop_when_caught_up && tailer.caught_up();
            if shared.stopping() || caught_up {
                tailer.record(&shared, epoch);
                cap = None;
            } else if read_in_epoch >= shared.config.epoch_records_max {
                // A backlog: the epoch is full, the next one starts now.
                shared.timeline.close_early(epoch);
                activator.activate();
            } else if read_any {
                activator.activate();
            } else {
                let wait = shared.until_epoch_end(epoch).min(Duration::from_millis(IDLE_POLL_MS));
                activator.activate_after(wait.max(Duration::from_millis(1)));
            }
        }
    });
    // Each record enters once, with multiplicity 1: a source never retracts.
    Collection::from_stream(stream, ctx.clone(), lineage).into_monotonic()
}

/// One reader and its decoder.
struct OneReader<F> {
    reader: String,
    topic: String,
    positions: Vec<Position>,
    decode: F,
}

impl<T, F> Tailer for OneReader<F>
where
    T: Clone + 'static,
    F: Fn(u32, &RecordView<'_>) -> Result<T, String> + 'static,
{
    type Item = Result<T, Box<DeadLetter>>;

    fn record(&mut self, shared: &Shared, epoch: Epoch) {
        record_positions(shared, &self.reader, &self.topic, epoch, &mut self.positions);
    }

    fn read(&mut self, shared: &Shared, mut give: impl FnMut(Self::Item)) -> Option<bool> {
        let mut read_any = false;
        for position in self.positions.iter_mut() {
            let fetch = match fetch_at(shared, &[&self.reader], &self.topic, position) {
                Fetched::Records(fetch) => fetch,
                Fetched::Skipped => continue,
                Fetched::Failed => return None,
            };
            let mut count = 0u64;
            for record in fetch.records() {
                // Boxed: a rare dead letter must not widen every record.
                give(
                    (self.decode)(position.partition, &record)
                        .map_err(|error| Box::new(DeadLetter::of(&self.topic, position.partition, &record, error))),
                );
                count += 1;
            }
            read_any |= advance(position, fetch.next_offset());
            shared.records.fetch_add(count, Ordering::Relaxed);
        }
        Some(read_any)
    }

    fn caught_up(&self) -> bool {
        self.positions.iter().all(|p| p.next_offset >= p.target)
    }
}

/// Checks that `reader` may read `topic` (creating the topic if it does not
/// exist) and registers the topic's incarnation; returns its partition count.
/// Problems are build errors (the count is then 0).
pub(crate) fn open_topic(ctx: &WorkerContext, worker: usize, reader: &str, topic: &str) -> u32 {
    let shared = &ctx.shared;
    let log = shared.log();
    let resumed = shared.checkpoints.resumed();
    if let Some(read) = resumed.readers.get(reader)
        && read != topic
    {
        ctx.build_error(format!(
            "reader '{reader}' has committed offsets in topic '{read}', so it cannot read '{topic}': a reader reads \
             one topic; give the reader of '{topic}' another name"
        ));
    }
    let config = match log.topic_config(topic) {
        Ok(config) => Some(config),
        Err(LogError::UnknownTopic(_)) => match log.create_topic(topic, TopicConfig::default()) {
            Ok(()) | Err(LogError::TopicExists(_)) => log.topic_config(topic).ok(),
            Err(e) => {
                ctx.build_error(format!("source topic '{topic}': {e}"));
                None
            }
        },
        Err(e) => {
            ctx.build_error(format!("source topic '{topic}': {e}"));
            None
        }
    };
    // Offsets belong to one incarnation of the topic (Kafka's topic ids):
    // a topic deleted and created again is not resumed at the old offsets.
    if let Ok(id) = log.topic_id(topic).map(|id| id.to_string()) {
        match resumed.topic_ids.get(reader) {
            Some(committed) if *committed != id && !resumed.is_fresh(reader) => ctx.build_error(format!(
                "reader '{reader}' committed offsets in topic '{topic}' with id {committed}, but '{topic}' now has \
                 id {id}: it was deleted and created again, so those offsets mean other records. Drop and re-create \
                 the views that read it (or give them a new reader), which read the new topic from its start"
            )),
            _ if worker == 0 => shared.checkpoints.register_topic_id(reader, &id),
            _ => {}
        }
    }
    config.map_or(0, |c| c.partitions)
}

/// Where `reader` starts on each partition of `topic` that this worker
/// (`index` of `peers`) owns.
pub(crate) fn open_positions(
    ctx: &WorkerContext,
    (index, peers): (usize, usize),
    reader: &str,
    topic: &str,
    partitions: u32,
) -> Vec<Position> {
    let shared = &ctx.shared;
    let log = shared.log();
    let resumed = shared.checkpoints.resumed();
    let fresh = resumed.is_fresh(reader);
    let committed = resumed.sources.get(reader).cloned().unwrap_or_default();
    (0..partitions)
        .filter(|p| *p as usize % peers == index)
        .map(|partition| {
            // A fresh reader reads all that is retained, and records where
            // it started on every partition at its first epoch boundary (it
            // is not fresh once that is committed); a resuming one notices
            // (as skipped) what retention took before it read it.
            // A resuming reader's partition without an offset (a version 2
            // checkpoint) starts there too, and counts what it never read.
            let start = log.low_watermark(topic, partition).unwrap_or(0);
            if !fresh && !committed.contains_key(&partition) {
                shared.skipped.fetch_add(start, Ordering::Relaxed);
            }
            let next_offset = committed.get(&partition).copied().unwrap_or(start);
            let high = log.high_watermark(topic, partition).unwrap_or(0);
            if next_offset > high {
                ctx.build_error(format!(
                    "reader '{reader}' committed offset {next_offset} of {topic}/{partition}, but the partition \
                     now ends at {high}: records the checkpoint had read are gone from the log (cut by \
                     recovery or a repair), and new records would reuse their offsets unread. Rebuild the views \
                     that read it in a new data directory, or drop and re-create them"
                ));
            }
            // Committed records only: the end is the last stable offset (the
            // high watermark unless a Kafka transaction is open).
            let target = log.last_stable_offset(topic, partition).unwrap_or(high);
            Position { partition, next_offset, target, recorded: (!fresh).then_some(next_offset) }
        })
        .collect()
}

/// What a fetch at a position gave.
pub(crate) enum Fetched {
    Records(millpond_log::Fetch),
    /// Retention removed what was never read, and the policy skips it: the
    /// position moved to the log start.
    Skipped,
    /// The job failed (an error, or a retention gap the policy refuses).
    Failed,
}

/// Fetches the records at `position` for `readers` (all at that position).
pub(crate) fn fetch_at(shared: &Shared, readers: &[&str], topic: &str, position: &mut Position) -> Fetched {
    let log = shared.log();
    match log.fetch(topic, position.partition, position.next_offset, shared.config.fetch_bytes_max) {
        Ok(fetch) => Fetched::Records(fetch),
        Err(LogError::OffsetOutOfRange { low, .. }) if low > position.next_offset => {
            // Retention removed what was never read: fail, or skip and report.
            for reader in readers {
                let gap = RetentionGap {
                    reader: (*reader).to_owned(),
                    topic: topic.to_owned(),
                    partition: position.partition,
                    from: position.next_offset,
                    to: low,
                };
                if !shared.retention_gap(gap) {
                    return Fetched::Failed;
                }
            }
            position.next_offset = low;
            Fetched::Skipped
        }
        Err(e) => {
            let at = format!("reader '{}' of {topic}/{}", readers.join("', '"), position.partition);
            shared.fail(crate::Error::at(at, e));
            Fetched::Failed
        }
    }
}

/// Moves `position` to `next` (after a fetch); true if it moved.
pub(crate) fn advance(position: &mut Position, next: u64) -> bool {
    assert!(next >= position.next_offset, "source offsets only move forward");
    let moved = next > position.next_offset;
    position.next_offset = next;
    moved
}

pub(crate) fn record_positions(shared: &Shared, reader: &str, topic: &str, epoch: Epoch, positions: &mut [Position]) {
    for position in positions.iter_mut() {
        if position.recorded != Some(position.next_offset) {
            shared.checkpoints.source_position(epoch, reader, topic, position.partition, position.next_offset);
            position.recorded = Some(position.next_offset);
        }
    }
}
