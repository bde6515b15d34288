//! A view's changelog sink: folds the view's updates as they arrive, and
//! writes each finished epoch's changes to `view.NAME` (the record format
//! is [`crate::sink`]'s).
//!
//! Work follows the data, not the barrier: an update is consolidated into
//! its epoch's map (row → change) when it arrives, and while the input
//! frontier sits at the oldest open epoch (no earlier update can come) the
//! rows of that epoch read their multiplicity before the epoch from the
//! state as they come. What is left when the frontier passes the epoch is
//! the arithmetic, the records and one append.
//!
//! Invariants:
//! - an epoch is written once, in increasing order, after every earlier
//!   one; its records are sorted by row and hold one record per changed row;
//! - a multiplicity read ahead (`before`) is read only when every earlier
//!   epoch is written and none can still arrive, so it equals what the
//!   state holds when the epoch is written (asserted against it in debug
//!   builds);
//! - the state is read (read ahead, or at a write) only after the last
//!   written epoch is in its overlay: the overlay's inserts are deferred
//!   from the write to the operator's second activation after it (the
//!   first is in the step that carries the epoch's progress to the probe,
//!   which the commit waits for), so the epoch's commit does not wait for
//!   them, but every read comes after them.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use millpond_log::{CleanupPolicy, EncodeRecord, Header};
use rustc_hash::{FxBuildHasher, FxHashMap};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, Probe};

use crate::codec::{decode, encode};
use crate::collection::Data;
use crate::context::Shared;
use crate::error::Result;
use crate::naming::changelog_topic;
use crate::opstate::OperatorState;
use crate::sink::{DIFF_HEADER, EPOCH_HEADER, append_encoded, prepare_topic};
use crate::{Collection, Diff, Epoch};

/// A row's change within one epoch.
#[derive(Clone, Copy, Debug, Default)]
struct Delta {
    /// The row's multiplicity before the epoch, once read.
    before: Option<i64>,
    diff: i64,
}

/// A row's changes in one epoch, in the order rows first came.
type Rows = IndexMap<Vec<u8>, Delta, FxBuildHasher>;

/// One open epoch: its capability and its rows' changes so far.
struct Open {
    capability: Capability<Epoch>,
    rows: Rows,
    /// Rows from this index on came after the last read ahead.
    unread_from: usize,
    /// The first row that could not be JSON (fails the epoch's write).
    error: Option<String>,
}

/// The view's state and the epochs not yet written.
struct ViewFold {
    name: String,
    /// `view 'NAME'`, for errors.
    what: String,
    topic: String,
    state: Option<OperatorState>,
    open: BTreeMap<Epoch, Open>,
    /// The first epoch of a run that replaces the view's definition: it
    /// retracts every row of the old one.
    replaced: Option<Epoch>,
    rows_held: u64,
    /// The last epoch written, not yet in the state's overlay (see
    /// [`ViewFold::index_written`]).
    written: Option<Written>,
    /// An epoch was written at this activation: the next one leaves it
    /// out of the overlay (it carries the epoch's progress), the one after
    /// puts it in.
    index_next: bool,
}

/// An epoch's rows as written to the changelog: each row and its
/// multiplicity after the epoch, in row order.
struct Written {
    epoch: Epoch,
    rows: Vec<(Vec<u8>, i64)>,
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
    let mut fold = ViewFold {
        name: name.to_owned(),
        what: format!("view '{name}'"),
        topic: topic.clone(),
        state: None,
        open: BTreeMap::new(),
        replaced: None,
        rows_held: 0,
        written: None,
        index_next: false,
    };
    if rows.inner.scope().index() == 0 {
        ctx.declare_view(name, &topic);
        // Reported first: whatever else fails about the view follows from it.
        if let Some(error) = shared.checkpoints.take_catch_up_failure(name) {
            ctx.build_error(format!("view '{name}': its state could not be caught up: {error}"));
        }
        match prepare_topic(&shared, &topic, CleanupPolicy::Compact)
            .and_then(|()| ctx.operator_state(&format!("view.{name}"), &rows.lineage))
        {
            Ok(opstate) => {
                let first_epoch = shared.first_epoch();
                let (replace, rows) = shared.checkpoints.register_view(name, &topic, definition, first_epoch);
                fold.replaced = replace.then_some(first_epoch);
                match rows.map_or_else(|| crate::sink::count_rows(&opstate), Ok) {
                    Ok(rows) => fold.rows_held = rows,
                    Err(e) => ctx.build_error(format!("view '{name}': {e}")),
                }
                fold.state = Some(opstate.indexed());
            }
            // The operator is still built: every worker must build the same
            // dataflow. The build error stops the job before any data flows.
            Err(e) => ctx.build_error(format!("view '{name}': {e}")),
        }
    }
    let scope = rows.inner.inner.scope();
    let operator_name = format!("view:{name}");
    let label = format!("sink '{operator_name}'");
    let stream = rows.inner.inner.unary_frontier::<CapacityContainerBuilder<Vec<((), Epoch, Diff)>>, _, _, _>(
        Exchange::new(|_: &(std::result::Result<Vec<u8>, String>, Epoch, Diff)| 0),
        &operator_name,
        move |capability, info| {
            let activator = scope.activator_for(info.address);
            // The replacing epoch is written even if it has no update.
            let mut forced = fold.replaced.map(|epoch| capability.delayed(&epoch));
            move |(input, frontier), _output| {
                // The epoch written at the last activation goes into the
                // overlay one activation later: the step right after a write
                // carries its progress to the probe, and the commit waits
                // for that step to end (runtime: sources skip it too).
                if std::mem::take(&mut fold.index_next) {
                    activator.activate();
                } else {
                    fold.index_written();
                }
                input.for_each(|capability, data| {
                    for (row, epoch, diff) in data.drain(..) {
                        fold.absorb(&capability, row, epoch, diff);
                    }
                });
                if let Some(capability) = forced.take() {
                    fold.open_at(capability);
                }
                while let Some(epoch) = fold.ready(frontier.frontier().first().copied()) {
                    if shared.failed() {
                        return;
                    }
                    shared.checkpoints.timings.close_to_write.record(shared.since_epoch_end(epoch));
                    let writing = std::time::Instant::now();
                    let written = fold.write(&shared, epoch);
                    shared.checkpoints.timings.sink_write.record(writing.elapsed());
                    if let Err(e) = written {
                        shared.fail(crate::Error::at(label.clone(), e));
                        return;
                    }
                    fold.index_next = true;
                    activator.activate();
                }
                if let Err(e) = fold.read_ahead(frontier.frontier().first().copied()) {
                    shared.fail(crate::Error::at(label.clone(), e));
                }
            }
        },
    );
    stream.probe_with(&ctx.probe);
}

impl ViewFold {
    /// Folds one update into its epoch.
    fn absorb(
        &mut self,
        capability: &timely::dataflow::operators::InputCapability<Epoch>,
        row: std::result::Result<Vec<u8>, String>,
        epoch: Epoch,
        diff: Diff,
    ) {
        let open = self.open.entry(epoch).or_insert_with(|| Open::new(capability.delayed(&epoch, 0)));
        match row {
            Err(e) => {
                open.error.get_or_insert(e);
            }
            Ok(row) => open.rows.entry(row).or_default().diff += diff as i64,
        }
    }

    /// Holds `capability`'s epoch open even without updates.
    fn open_at(&mut self, capability: Capability<Epoch>) {
        let epoch = *capability.time();
        assert!(self.open.keys().next().is_none_or(|&first| first >= epoch), "no epoch of a run precedes its first");
        self.open.entry(epoch).or_insert_with(|| Open::new(capability));
    }

    /// The oldest open epoch, if the frontier (`None`: empty) passed it.
    fn ready(&self, frontier: Option<Epoch>) -> Option<Epoch> {
        let epoch = *self.open.keys().next()?;
        frontier.is_none_or(|f| f > epoch).then_some(epoch)
    }

    /// Reads `before` for the rows of the oldest open epoch that came since
    /// the last call, if the frontier sits at it (nothing earlier can come,
    /// every earlier epoch is written).
    fn read_ahead(&mut self, frontier: Option<Epoch>) -> Result<()> {
        if self.written.is_some() {
            return Ok(()); // after the written epoch is indexed, at the next activation
        }
        let Some(state) = self.state.as_ref() else { return Ok(()) };
        let Some((&epoch, open)) = self.open.iter_mut().next() else { return Ok(()) };
        if frontier != Some(epoch) || self.replaced == Some(epoch) {
            return Ok(());
        }
        for at in open.unread_from..open.rows.len() {
            let (row, delta) = open.rows.get_index_mut(at).expect("an index below the length");
            delta.before = Some(held(state, row, &self.what)?);
        }
        open.unread_from = open.rows.len();
        Ok(())
    }

    /// Puts the last written epoch's rows into the state's overlay (where
    /// a multiplicity is read until the commit thread applies the epoch to
    /// the store) and lets the overlay forget what is applied. Deferred from
    /// the write to the operator's next activation: the epoch's commit does
    /// not wait for it, and nothing reads the state before it.
    fn index_written(&mut self) {
        let Some(Written { epoch, rows }) = self.written.take() else { return };
        let state = self.state.as_mut().expect("only a view with state writes epochs");
        for (row, new) in rows {
            if new == 0 {
                state.delete(epoch, row);
            } else {
                state.put(epoch, row, encode(&new));
            }
        }
        state.finish_epoch(epoch);
    }

    /// Writes epoch `epoch`'s changes and records its sink position.
    fn write(&mut self, shared: &Shared, epoch: Epoch) -> Result<()> {
        self.index_written(); // an earlier epoch written in this activation
        assert!(self.replaced.is_none_or(|first| epoch >= first), "no epoch of a run precedes its first");
        let open = self.open.remove(&epoch).expect("a ready epoch is open");
        if let Some(e) = open.error {
            return Err(crate::Error::InvalidJob(format!("a row of view '{}' is not JSON: {e}", self.name)));
        }
        let _capability = open.capability; // held until written: the checkpoint waits for it
        let state = self.state.as_mut().expect("only worker 0 receives sink input, and only after a clean build");
        let mut rows = open.rows;
        if self.replaced.take().is_some_and(|first| first == epoch) {
            retract_committed(state, &mut rows, &self.what)?;
        }
        let mut changes: Vec<(Vec<u8>, Delta)> = rows.into_iter().filter(|(_, d)| d.diff != 0).collect();
        changes.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        // Each row's multiplicity after the epoch.
        let mut after = Vec::with_capacity(changes.len());
        for (row, delta) in &changes {
            let old = match delta.before {
                None => held(state, row, &self.what)?,
                Some(before) => {
                    if cfg!(debug_assertions) {
                        assert_eq!(before, held(state, row, &self.what)?, "a multiplicity read ahead is current");
                    }
                    before
                }
            };
            let new = old + delta.diff;
            match (old, new) {
                (0, _) => self.rows_held += 1,
                (_, 0) => self.rows_held -= 1,
                _ => {}
            }
            after.push(new);
        }
        let end = append_changes(shared, &self.topic, epoch, &changes, &after)?;
        let rows = changes.into_iter().zip(after).map(|((row, _), new)| (row, new)).collect();
        self.written = Some(Written { epoch, rows });
        shared.checkpoints.sink_position(epoch, &self.topic, end);
        shared.checkpoints.view_rows(epoch, &self.name, self.rows_held);
        Ok(())
    }
}

impl Open {
    fn new(capability: Capability<Epoch>) -> Open {
        Open { capability, rows: Rows::default(), unread_from: 0, error: None }
    }
}

/// The replacing epoch's retractions: every row the committed state holds.
fn retract_committed(state: &OperatorState, rows: &mut Rows, what: &str) -> Result<()> {
    state.scan_committed(|row, count| {
        rows.entry(row.to_vec()).or_default().diff -= decode::<i64>(count, what)?;
        Ok(())
    })
}

/// A row's multiplicity in the view's state (0: absent). Only with no
/// written epoch waiting for the overlay ([`ViewFold::index_written`]).
fn held(state: &OperatorState, row: &[u8], what: &str) -> Result<i64> {
    state.get(row)?.map(|b| decode(&b, what)).transpose().map(|count| count.unwrap_or(0))
}

/// Appends an epoch's changelog records, one per changed row (sorted):
/// the row, its multiplicity after the epoch (or a tombstone), and the
/// epoch and change as headers. Records borrow the rows; the header pairs
/// are built once per distinct change (almost always +1 or -1).
fn append_changes(
    shared: &Shared,
    topic: &str,
    epoch: Epoch,
    changes: &[(Vec<u8>, Delta)],
    after: &[i64],
) -> Result<u64> {
    assert_eq!(changes.len(), after.len(), "one multiplicity per change");
    let epoch_value = (epoch as i64).to_be_bytes().to_vec();
    let mut headers: FxHashMap<i64, [Header; 2]> = FxHashMap::default();
    for (_, delta) in changes {
        headers.entry(delta.diff).or_insert_with(|| {
            [
                Header { key: EPOCH_HEADER.into(), value: Some(epoch_value.clone()) },
                Header { key: DIFF_HEADER.into(), value: Some(delta.diff.to_be_bytes().to_vec()) },
            ]
        });
    }
    let values: Vec<[u8; 8]> = after.iter().map(|new| new.to_be_bytes()).collect();
    let now_ms = shared.log().clock().now_ms();
    let records: Vec<EncodeRecord<'_>> = changes
        .iter()
        .zip(&values)
        .zip(after)
        .map(|(((row, delta), value), &new)| EncodeRecord {
            offset_delta: 0,
            timestamp_ms: now_ms,
            key: Some(row),
            value: (new != 0).then_some(&value[..]),
            headers: &headers[&delta.diff],
        })
        .collect();
    append_encoded(shared, topic, &records)
}
