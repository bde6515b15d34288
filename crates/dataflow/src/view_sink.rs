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
//!   builds).

use std::collections::BTreeMap;

use indexmap::IndexMap;
use millpond_log::{CleanupPolicy, Header, Record};
use rustc_hash::FxBuildHasher;
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
use crate::sink::{DIFF_HEADER, EPOCH_HEADER, append_all, prepare_topic};
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
    let operator_name = format!("view:{name}");
    let label = format!("sink '{operator_name}'");
    let stream = rows.inner.inner.unary_frontier::<CapacityContainerBuilder<Vec<((), Epoch, Diff)>>, _, _, _>(
        Exchange::new(|_: &(std::result::Result<Vec<u8>, String>, Epoch, Diff)| 0),
        &operator_name,
        move |capability, _info| {
            // The replacing epoch is written even if it has no update.
            let mut forced = fold.replaced.map(|epoch| capability.delayed(&epoch));
            move |(input, frontier), _output| {
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
                    if let Err(e) = fold.write(&shared, epoch) {
                        shared.fail(crate::Error::at(label.clone(), e));
                        return;
                    }
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

    /// Writes epoch `epoch`'s changes and records its sink position.
    fn write(&mut self, shared: &Shared, epoch: Epoch) -> Result<()> {
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
        let now_ms = shared.log().clock().now_ms();
        let mut records = Vec::with_capacity(changes.len());
        for (row, delta) in changes {
            let old = match delta.before {
                None => held(state, &row, &self.what)?,
                Some(before) => {
                    if cfg!(debug_assertions) {
                        assert_eq!(before, held(state, &row, &self.what)?, "a multiplicity read ahead is current");
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
            let value = (new != 0).then(|| new.to_be_bytes().to_vec());
            if new == 0 {
                state.delete(epoch, row.clone());
            } else {
                state.put(epoch, row.clone(), encode(&new));
            }
            records.push(change_record(row, value, epoch, delta.diff, now_ms));
        }
        let end = append_all(shared, &self.topic, &records)?;
        shared.checkpoints.sink_position(epoch, &self.topic, end);
        shared.checkpoints.view_rows(epoch, &self.name, self.rows_held);
        state.finish_epoch(epoch);
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

/// A row's multiplicity in the view's state (0: absent).
fn held(state: &OperatorState, row: &[u8], what: &str) -> Result<i64> {
    state.get(row)?.map(|b| decode(&b, what)).transpose().map(|count| count.unwrap_or(0))
}

/// One changelog record: the row, its multiplicity after the epoch (or a
/// tombstone), and the epoch and change as headers.
fn change_record(row: Vec<u8>, value: Option<Vec<u8>>, epoch: Epoch, diff: i64, now_ms: i64) -> Record {
    let headers = vec![
        Header { key: EPOCH_HEADER.into(), value: Some((epoch as i64).to_be_bytes().to_vec()) },
        Header { key: DIFF_HEADER.into(), value: Some(diff.to_be_bytes().to_vec()) },
    ];
    Record { key: Some(row), value, timestamp_ms: now_ms, headers }
}
