//! A view's changelog sink: the append half. The fold
//! ([`crate::view_fold`]) runs on every worker over the rows that hash to
//! it and emits each finished epoch's changes with their multiplicities
//! after the epoch; here worker 0 gathers them and, when the frontier
//! passes the epoch (every worker folded it), has the epoch's records
//! appended to `view.NAME` (the record format is [`crate::sink`]'s) by the
//! view's append thread ([`crate::append_thread`]) and, once it answers,
//! records the topic's end for the epoch's checkpoint.
//!
//! Invariants:
//! - an epoch is written once, in increasing order, after every earlier
//!   one, and only when every worker has folded it; its records are
//!   sorted by row hash and hold one record per changed row (no worker folds
//!   another's rows);
//! - the epoch's capability is held until its records are appended and
//!   its sink position recorded: the commit waits for both;
//! - the rows held, counted from each change's multiplicities before and
//!   after, are recorded with the epoch.

use std::collections::{BTreeMap, VecDeque};

use millpond_log::{CleanupPolicy, EncodeRecord, Header};
use rustc_hash::FxHashMap;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, Probe};

use crate::append_thread::AppendThread;
use crate::checkpoint::IndexWanted;
use crate::collection::Data;
use crate::context::Shared;
use crate::error::Result;
use crate::naming::changelog_topic;
use crate::sink::{DIFF_HEADER, EPOCH_HEADER, append_encoded, prepare_topic};
use crate::view_fold::{Change, Multiplicity, ViewFold};
use crate::view_index::{Head, RowHasher};
use crate::{Collection, Epoch};

/// One epoch waiting for every worker's fold: its capability and the
/// changes gathered so far.
struct Pending {
    capability: Capability<Epoch>,
    changes: Vec<Change>,
}

/// What worker 0 keeps to write the view's changelog.
struct Appender {
    name: String,
    topic: String,
    rows_held: u64,
    pending: BTreeMap<Epoch, Pending>,
    /// Epochs handed to the append thread, each with its capability (held
    /// until the thread has appended it: the commit waits for it) and the
    /// rows held after it.
    appending: VecDeque<(Capability<Epoch>, u64)>,
}

/// Materializes `collection` as view `name` holding `definition` (see
/// [`crate::checkpoint::ViewChangelog`]). A view resumed under another
/// definition retracts every row of the old one at the run's first epoch,
/// in the same changelog records as that epoch's new rows.
pub(crate) fn materialize<D: Data>(
    collection: Collection<'_, D>,
    name: &str,
    definition: &str,
    multiplicity: Multiplicity,
) {
    let ctx = collection.ctx.clone();
    let shared = ctx.shared.clone();
    let topic = changelog_topic(name);
    let lineage = collection.lineage.clone();
    let scope = collection.inner.inner.scope();
    let worker = (scope.index(), scope.peers());
    let first_epoch = shared.first_epoch();
    let replaced = shared.checkpoints.view_replaced(name, &topic, definition).then_some(first_epoch);
    let mut appender = Appender {
        name: name.to_owned(),
        topic: topic.clone(),
        rows_held: 0,
        pending: BTreeMap::new(),
        appending: VecDeque::new(),
    };
    if worker.0 == 0 {
        ctx.declare_view(name, &topic);
        // Reported first: whatever else fails about the view follows from it.
        if let Some(error) = shared.checkpoints.take_catch_up_failure(name) {
            ctx.build_error(format!("view '{name}': its state could not be caught up: {error}"));
        }
        let resuming = shared.checkpoints.resuming_readers(&lineage);
        if replaced.is_some() && !resuming.is_empty() {
            // Its old rows would be retracted and only what changes from
            // now on would come in their place.
            ctx.build_error(format!(
                "view '{name}' has a new definition, but it reads through reader(s) {} that resume from \
                 committed offsets: its new rows would miss their input before those offsets. Feed the new \
                 definition from new readers (Job::source_named), which read from the start of the log",
                resuming.join(", ")
            ));
        }
    }
    let prepare = || prepare_topic(&shared, &topic, CleanupPolicy::Compact);
    let prepared = if worker.0 == 0 { shared.checkpoints.under_view_index_lock(prepare) } else { Ok(()) };
    let index = IndexWanted { rows: multiplicity != Multiplicity::Unique, replaced: replaced.is_some() };
    let state = match prepared.and_then(|()| ctx.view_index(name, &lineage, index)) {
        Ok((opstate, head)) => {
            if worker.0 == 0 {
                let (replace, rows) = shared.checkpoints.register_view(name, &topic, definition, first_epoch);
                assert_eq!(replace, replaced.is_some(), "a view's replacement is decided by the resumed checkpoint");
                match rows.map_or_else(|| count_rows(&opstate, head.holds_rows, name), Ok) {
                    Ok(rows) => appender.rows_held = rows,
                    Err(e) => ctx.build_error(format!("view '{name}': {e}")),
                }
            }
            (Some(opstate), head)
        }
        // The operators are still built: every worker must build the same
        // dataflow. The build error stops the job before any data flows.
        Err(e) => {
            ctx.build_error(format!("view '{name}': {e}"));
            (None, Head { hasher: RowHasher::with_keys(0, 0), holds_rows: true })
        }
    };
    // A row becomes JSON and is hashed once, where it is produced. One that
    // cannot be JSON (a map with non-string keys) fails the job with an
    // error at its epoch, never a panic.
    let hasher = state.1.hasher;
    let rows = collection
        .map(move |row| serde_json::to_vec(&row).map(|json| (hasher.hash(&json), json)).map_err(|e| e.to_string()));
    let label = format!("sink 'view:{name}'");
    let changelog = (shared.log().clone(), topic.clone());
    let fold = ViewFold::new(name, worker, state, changelog, replaced, multiplicity);
    let changes = fold.render(rows.inner.inner, shared.clone(), label.clone());
    let operator_name = format!("view:{name}");
    let stream = changes.unary_frontier::<CapacityContainerBuilder<Vec<()>>, _, _, _>(
        Exchange::new(|_: &Change| 0),
        &operator_name,
        move |capability, info| {
            // The replacing epoch is written even if it has no change.
            let mut forced = replaced.filter(|_| worker.0 == 0).map(|epoch| capability.delayed(&epoch));
            let activator = scope.worker().sync_activator_for(info.address.to_vec());
            let mut thread = match worker.0 {
                0 => AppendThread::start(shared.clone(), &topic, activator).map_err(|e| shared.fail(e)).ok(),
                _ => None,
            };
            move |(input, frontier), _output| {
                input.for_each(|capability, data| {
                    let capability = capability.retain_least(0).expect("a fold sends its changes at their epoch");
                    appender.pending_at(capability).changes.append(data);
                });
                if let Some(capability) = forced.take() {
                    appender.pending_at(capability);
                }
                let Some(thread) = thread.as_mut() else { return };
                if let Err(e) = appender.written(&shared, thread) {
                    return shared.fail(crate::Error::at(label.clone(), e));
                }
                while let Some(epoch) = appender.ready(frontier.frontier().first().copied()) {
                    if shared.failed() {
                        return;
                    }
                    shared.checkpoints.timings.close_to_write.record(shared.since_epoch_end(epoch));
                    if let Err(e) = appender.write(thread, epoch) {
                        return shared.fail(crate::Error::at(label.clone(), e));
                    }
                }
            }
        },
    );
    stream.probe_with(&ctx.probe);
}

impl Appender {
    /// The pending epoch of `capability`, opened with it if new.
    fn pending_at(&mut self, capability: Capability<Epoch>) -> &mut Pending {
        self.pending.entry(*capability.time()).or_insert_with(|| Pending { capability, changes: Vec::new() })
    }

    /// The oldest pending epoch, if the frontier (`None`: empty) passed it.
    fn ready(&self, frontier: Option<Epoch>) -> Option<Epoch> {
        let epoch = *self.pending.keys().next()?;
        frontier.is_none_or(|f| f > epoch).then_some(epoch)
    }

    /// Hands epoch `epoch`'s changes to the append thread; its sink
    /// position and rows are recorded once appended ([`Appender::written`]).
    fn write(&mut self, thread: &mut AppendThread, epoch: Epoch) -> Result<()> {
        let Pending { capability, mut changes } = self.pending.remove(&epoch).expect("a ready epoch is pending");
        // Each worker's changes come sorted by row hash: a stable sort merges the runs.
        changes.sort_by_key(|change| change.0);
        for pair in changes.windows(2) {
            assert!(pair[0].0 < pair[1].0, "one change per row and epoch, from one worker");
        }
        for (_, _, diff, after) in &changes {
            assert!(*diff != 0, "a fold emits no zero change");
            match (after - diff, *after) {
                (0, _) => self.rows_held += 1,
                (_, 0) => self.rows_held -= 1,
                _ => {}
            }
        }
        thread.append(epoch, changes)?;
        self.appending.push_back((capability, self.rows_held));
        Ok(())
    }

    /// Records the sink position and rows of each epoch the append thread
    /// has appended, and lets its capability go.
    fn written(&mut self, shared: &Shared, thread: &mut AppendThread) -> Result<()> {
        for (epoch, end) in thread.written()? {
            let (capability, rows_held) = self.appending.pop_front().expect("an appended epoch was handed over");
            assert_eq!(*capability.time(), epoch, "the append thread answers in order");
            shared.checkpoints.sink_position(epoch, &self.topic, end);
            shared.checkpoints.view_rows(epoch, &self.name, rows_held);
        }
        Ok(())
    }
}

/// The rows a view's committed index holds (a view resumed from a
/// checkpoint that did not count them). An index without row entries
/// cannot say: such a view was created since rows were counted.
fn count_rows(index: &crate::opstate::OperatorState, holds_rows: bool, name: &str) -> Result<u64> {
    let what = format!("the index of view '{name}'");
    if !holds_rows {
        let reason = "its checkpoint has no row count and its index holds no rows to count".to_owned();
        return Err(crate::Error::CorruptState { what, reason });
    }
    crate::view_index::count_rows(index, &what)
}

/// Appends an epoch's changelog records, one per changed row (sorted):
/// the row, its multiplicity after the epoch (or a tombstone), and the
/// epoch and change as headers. Records borrow the rows; the header pairs
/// are built once per distinct change (almost always +1 or -1).
pub(crate) fn append_changes(shared: &Shared, topic: &str, epoch: Epoch, changes: &[Change]) -> Result<u64> {
    let epoch_value = (epoch as i64).to_be_bytes().to_vec();
    let mut headers: FxHashMap<i64, [Header; 2]> = FxHashMap::default();
    for &(_, _, diff, _) in changes {
        headers.entry(diff).or_insert_with(|| {
            [
                Header { key: EPOCH_HEADER.into(), value: Some(epoch_value.clone()) },
                Header { key: DIFF_HEADER.into(), value: Some(diff.to_be_bytes().to_vec()) },
            ]
        });
    }
    let values: Vec<[u8; 8]> = changes.iter().map(|(_, _, _, after)| after.to_be_bytes()).collect();
    let now_ms = shared.log().clock().now_ms();
    let records: Vec<EncodeRecord<'_>> = changes
        .iter()
        .zip(&values)
        .map(|((_, row, diff, after), value)| EncodeRecord {
            offset_delta: 0,
            timestamp_ms: now_ms,
            key: Some(row),
            value: (*after != 0).then_some(&value[..]),
            headers: &headers[diff],
        })
        .collect();
    append_encoded(shared, topic, &records)
}
