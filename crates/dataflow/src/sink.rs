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
use millpond_log::{CleanupPolicy, Error as LogError, FlushPolicy, Header, Record, TopicConfig};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::Probe;
use timely::dataflow::operators::generic::Operator;

use crate::codec::{decode, encode};
use crate::collection::Data;
use crate::context::Shared;
use crate::error::Result;
use crate::naming::changelog_topic;
use crate::stash::EpochStash;
use crate::{Collection, Diff, Epoch};

/// Bytes per append call; the log's batch limit is larger.
const APPEND_BYTES_MAX: usize = 1 << 20;
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
    let log = shared.log();
    let mut start = 0;
    while start < records.len() {
        let mut bytes = 0;
        let mut end = start;
        while end < records.len() && (end == start || bytes < APPEND_BYTES_MAX) {
            bytes +=
                records[end].key.as_ref().map_or(0, Vec::len) + records[end].value.as_ref().map_or(0, Vec::len) + 64;
            end += 1;
        }
        log.append(topic, 0, &records[start..end])?;
        start = end;
    }
    Ok(log.high_watermark(topic, 0)?)
}

/// The engine: routes everything to worker 0 and calls `write` once per
/// finished epoch with its consolidated updates; and at epoch `forced`, if
/// given, once even if that epoch has no updates (the sink holds a
/// capability there until it has written, so the epoch's checkpoint waits).
pub(crate) fn epoch_sink<'s, D, W>(input: Collection<'s, D>, name: &str, forced: Option<Epoch>, mut write: W)
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
        move |capability, _info| {
            let mut stash = EpochStash::<D>::new();
            let mut forced = forced.map(|epoch| (epoch, capability.delayed(&epoch)));
            move |(input, frontier), _output| {
                input.for_each(|capability, data| stash.absorb(&capability, data));
                if let Some((epoch, _capability)) = forced.take_if(|(epoch, _)| !frontier.less_equal(epoch)) {
                    assert!(stash.first().is_none_or(|first| first >= epoch), "no epoch of a run precedes its first");
                    let mut updates = stash.take(epoch).map(|(_, updates)| updates).unwrap_or_default();
                    consolidate(&mut updates);
                    if let Err(e) = write(epoch, updates) {
                        shared.fail(crate::Error::at(format!("sink '{operator_name}'"), e));
                        return;
                    }
                }
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

/// Materializes `collection` as view `name` holding `definition` (see
/// [`crate::checkpoint::ViewChangelog`]). A view resumed under another
/// definition retracts every row of the old one at the run's first epoch,
/// in the same changelog records as that epoch's new rows.
pub(crate) fn materialize<D: Data>(collection: Collection<'_, D>, name: &str, definition: &str) {
    let ctx = collection.ctx.clone();
    let shared = ctx.shared.clone();
    let topic = changelog_topic(name);
    // A row that cannot be JSON (a map with non-string keys) fails the job
    // with an error at its epoch, never a panic.
    let rows = collection.map(|row| serde_json::to_vec(&row).map_err(|e| e.to_string()));
    let mut state = None;
    let mut replaced = None;
    let mut rows_held = 0u64;
    if rows.inner.scope().index() == 0 {
        ctx.declare_view(name, &topic);
        match prepare_topic(&shared, &topic, CleanupPolicy::Compact)
            .and_then(|()| ctx.operator_state(&format!("view.{name}"), &rows.lineage))
        {
            Ok(opstate) => {
                let first_epoch = shared.first_epoch();
                let (replace, rows) = shared.checkpoints.register_view(name, &topic, definition, first_epoch);
                replaced = replace.then_some(first_epoch);
                match rows.map_or_else(|| count_rows(&opstate), Ok) {
                    Ok(rows) => rows_held = rows,
                    Err(e) => ctx.build_error(format!("view '{name}': {e}")),
                }
                state = Some(opstate);
            }
            // The operator is still built: every worker must build the same
            // dataflow. The build error stops the job before any data flows.
            Err(e) => ctx.build_error(format!("view '{name}': {e}")),
        }
    }
    let what = format!("view '{name}'");
    let name = name.to_owned();
    epoch_sink(rows, &format!("view:{name}"), replaced, move |epoch, updates| {
        let state = state.as_mut().expect("only worker 0 receives sink input, and only after a clean build");
        let mut changes = Vec::with_capacity(updates.len());
        for (row, diff) in updates {
            let row = row.map_err(|e| crate::Error::InvalidJob(format!("a row of view '{name}' is not JSON: {e}")))?;
            changes.push((row, diff as i64));
        }
        if replaced.take().is_some_and(|first| first == epoch) {
            // The old definition's rows: every row the committed state holds.
            state.scan_committed(|row, count| {
                changes.push((row.to_vec(), -decode::<i64>(count, &what)?));
                Ok(())
            })?;
            consolidate(&mut changes);
        }
        let now_ms = shared.log().clock().now_ms();
        let mut records = Vec::with_capacity(changes.len());
        for (row, diff) in changes {
            let old: i64 = state.get(&row)?.map(|b| decode(&b, &what)).transpose()?.unwrap_or(0);
            let new = old + diff;
            let headers = vec![
                Header { key: EPOCH_HEADER.into(), value: Some((epoch as i64).to_be_bytes().to_vec()) },
                Header { key: DIFF_HEADER.into(), value: Some(diff.to_be_bytes().to_vec()) },
            ];
            let value = (new != 0).then(|| new.to_be_bytes().to_vec());
            records.push(Record { key: Some(row.clone()), value, timestamp_ms: now_ms, headers });
            match (old, new) {
                (0, _) => rows_held += 1,
                (_, 0) => rows_held -= 1,
                _ => {}
            }
            if new == 0 {
                state.delete(epoch, row);
            } else {
                state.put(epoch, row, encode(&new));
            }
        }
        let end = append_all(&shared, &topic, &records)?;
        shared.checkpoints.sink_position(epoch, &topic, end);
        shared.checkpoints.view_rows(epoch, &name, rows_held);
        state.finish_epoch(epoch);
        Ok(())
    });
}

/// The distinct rows of a view's committed state (a view whose checkpoint
/// did not count them).
fn count_rows(state: &crate::opstate::OperatorState) -> Result<u64> {
    let mut rows = 0;
    state.scan_committed(|_, _| {
        rows += 1;
        Ok(())
    })?;
    Ok(rows)
}
