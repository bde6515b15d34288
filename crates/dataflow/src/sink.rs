//! Sinks: exactly-once writes of each epoch's output to a topic.
//!
//! All of a sink's input goes to worker 0, which waits until the frontier
//! passes an epoch, appends that epoch's output to partition 0 of the sink
//! topic, and records the topic's new end offset with the epoch's
//! checkpoint. At startup the topic is cut back to the end offset of the
//! last committed checkpoint (0 if none), so nothing an unfinished epoch
//! wrote survives a crash, and the replayed epochs write it once.
//!
//! The changelog format of a view (topic `view.NAME`, compacted by key):
//! - key: the row as JSON;
//! - value: the row's multiplicity after the epoch, an i64 big-endian, or no
//!   value (a tombstone) when it drops to 0;
//! - headers `epoch` and `diff`: the epoch and the change of multiplicity,
//!   both i64 big-endian.
//!
//! Invariants: one record per row and epoch (updates are consolidated), in
//! epoch order; a record's `value - diff` equals the multiplicity carried by
//! the row's previous record. Readers rely on both (see [`crate::view`]).

use differential_dataflow::consolidation::consolidate;
use millpond_log::{CleanupPolicy, EncodeRecord, Error as LogError, FlushPolicy, Record, TopicConfig};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::Probe;
use timely::dataflow::operators::generic::Operator;

use crate::collection::Data;
use crate::context::Shared;
use crate::error::Result;
use crate::stash::EpochStash;
use crate::{Collection, Diff, Epoch};

/// Bytes per append call (one record batch; the log's limit is larger).
/// A reader decodes a whole batch at once, so a changelog in batches this
/// small lets a subscriber's reader hand out an epoch's first changes
/// before it has decoded the rest (as Kafka's 16 KiB `batch.size`).
const APPEND_BYTES_MAX: usize = 64 << 10;
pub(crate) const EPOCH_HEADER: &str = "epoch";
pub(crate) const DIFF_HEADER: &str = "diff";

fn sink_topic_config(cleanup_policy: CleanupPolicy, segment_bytes: u64) -> TopicConfig {
    TopicConfig {
        partitions: 1,
        retention_ms: None,
        segment_bytes,
        cleanup_policy,
        // Synced by the checkpoint, before the commit that covers it.
        flush: FlushPolicy::Interval { interval_ms: 60_000, records: u64::MAX },
        // Compacted only below the committed end the checkpoints persist, by any process.
        compaction_bound_required: cleanup_policy.compacts(),
        ..TopicConfig::default()
    }
}

/// Creates the sink topic if needed and cuts it back to its committed end.
pub(crate) fn prepare_topic(shared: &Shared, topic: &str, cleanup_policy: CleanupPolicy) -> Result<()> {
    let log = shared.log();
    match log.create_topic(topic, sink_topic_config(cleanup_policy, shared.config.sink_segment_bytes)) {
        Ok(()) | Err(LogError::TopicExists(_)) => {}
        Err(e) => return Err(e.into()),
    }
    let committed = shared.checkpoints.resumed().sinks.get(topic).copied().unwrap_or(0);
    let high = log.high_watermark(topic, 0)?;
    if high < committed {
        return Err(crate::Error::CorruptChangelog {
            view: topic.to_owned(),
            offset: high,
            reason: format!("the topic ends before its committed end offset {committed}"),
        });
    }
    // Nothing past the committed compaction bound may be compacted, before
    // the cut (uncommitted records) or after it.
    let cleanable = shared.checkpoints.cleanable_below(topic);
    log.set_cleanable_below(topic, 0, cleanable)?;
    log.truncate(topic, 0, committed)?;
    log.set_cleanable_below(topic, 0, cleanable)?;
    Ok(())
}

/// Appends records in bounded calls; returns the topic's new end offset.
pub(crate) fn append_all(shared: &Shared, topic: &str, records: &[Record]) -> Result<u64> {
    let records: Vec<EncodeRecord<'_>> = records.iter().map(EncodeRecord::from).collect();
    append_encoded(shared, topic, &records)
}

/// [`append_all`] of records borrowed from the caller.
pub(crate) fn append_encoded(shared: &Shared, topic: &str, records: &[EncodeRecord<'_>]) -> Result<u64> {
    let log = shared.log();
    let mut start = 0;
    while start < records.len() {
        let mut bytes = 0;
        let mut end = start;
        while end < records.len() && (end == start || bytes < APPEND_BYTES_MAX) {
            bytes += records[end].key.map_or(0, <[u8]>::len) + records[end].value.map_or(0, <[u8]>::len) + 64;
            end += 1;
        }
        log.append_encoded(topic, 0, &records[start..end])?;
        start = end;
    }
    Ok(log.high_watermark(topic, 0)?)
}

/// The engine: routes everything to worker 0 and calls `write` once per
/// finished epoch with its consolidated updates (a view's changelog has
/// its own, [`crate::view_sink`]).
pub(crate) fn epoch_sink<'s, D, W>(input: Collection<'s, D>, name: &str, mut write: W)
where
    D: Data,
    W: FnMut(Epoch, Vec<(D, Diff)>) -> Result<()> + 'static,
{
    let ctx = input.ctx.clone();
    let shared = ctx.shared.clone();
    let operator_name = name.to_owned();
    let stream = input.inner.inner.unary_frontier::<CapacityContainerBuilder<Vec<((), Epoch, Diff)>>, _, _, _>(
        Exchange::new(|_: &(D, Epoch, Diff)| 0),
        name,
        move |_capability, _info| {
            let mut stash = EpochStash::<D>::new();
            move |(input, frontier), _output| {
                input.for_each(|capability, data| stash.absorb(&capability, data));
                while let Some(epoch) = stash.ready(&[frontier]) {
                    if shared.failed() {
                        break;
                    }
                    // The capability is held until the write is done: the
                    // checkpoint of this epoch cannot happen before it.
                    let (_capability, mut updates) = stash.take(epoch).expect("a ready epoch is stashed");
                    consolidate(&mut updates);
                    if let Err(e) = write(epoch, updates) {
                        shared.fail(crate::Error::at(format!("sink '{operator_name}'"), e));
                        return;
                    }
                }
            }
        },
    );
    stream.probe_with(&ctx.probe);
}
