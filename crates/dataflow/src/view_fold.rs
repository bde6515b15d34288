//! A view's fold: the first half of its changelog sink, on every worker.
//! Each worker owns the rows that hash to it (by the row's keyed hash,
//! [`crate::view_index`], computed once where the row becomes JSON); it
//! folds their updates into their epoch as they arrive, reads each row's
//! multiplicity before the epoch from the view's index, and when
//! the frontier passes an epoch emits one [`Change`] per changed row
//! (its change and its multiplicity after the epoch) to the append half
//! ([`crate::view_sink`]), which has the epoch's records appended from worker 0.
//!
//! Work follows the data, not the barrier: an update is pushed onto its
//! epoch's rows when it arrives (a row's updates are summed whenever the
//! vector doubles), and while the input frontier sits at the oldest open epoch (no earlier update can come) the
//! rows of that epoch read their multiplicity before the epoch from the
//! state as they come. What is left when the frontier passes the epoch is
//! the arithmetic and one sorted batch of changes.
//!
//! Invariants:
//! - a row's updates all reach one worker (the exchange routes by the
//!   row's hash), so each worker's index reads and unapplied rows are the
//!   only ones for its rows; the index's keys do not depend on the worker
//!   count;
//! - the hash a row arrives with is its hash under the index's hasher
//!   (asserted in debug builds); rows are told apart by their hashes;
//! - an epoch is folded once, in increasing order, after every earlier
//!   one; its changes are sorted by row hash (the order in which the
//!   index's applier writes them, [`crate::view_state`]), one per changed
//!   row, none zero;
//! - a multiplicity read ahead (`before`) is read only when every earlier
//!   epoch is folded and none can still arrive, so it equals what the
//!   state holds when the epoch is folded (asserted against it in debug
//!   builds);
//! - the index is read (read ahead, or at a fold) only after the last
//!   folded epoch is in the fold's rows not yet applied
//!   ([`Unapplied`]; the index's applier writes an epoch after its
//!   commit): its inserts are deferred from the fold to the operator's
//!   second activation after it (the first is in the step that carries the
//!   epoch onwards), so the epoch's commit does not wait for them, but
//!   every read comes after them;
//! - a view that holds each row at most once ([`Multiplicity::AtMostOnce`])
//!   reads no multiplicity for a row retracted once (it was held once):
//!   every change of such a view takes a row between 0 and 1 copies, or
//!   the fold fails (the replacing epoch, which retracts the old
//!   definition's rows, reads them all);
//! - a row's multiplicity is the one of the last folded epoch that changed
//!   it if that epoch may not be applied yet, else the index's: `Unapplied`
//!   forgets an epoch's rows only once the committed epoch (raised after
//!   the apply) reaches it.

use std::collections::BTreeMap;

use std::collections::VecDeque;

use timely::container::CapacityContainerBuilder;
use timely::dataflow::Stream;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, InputCapability};

use millpond_log::Log;

use crate::context::Shared;
use crate::error::Result;
use crate::held_filter::{HeldFilter, fill_step};
use crate::opstate::{FILTER_SCAN_STEP_KEYS, OperatorState};
use crate::stash::worth_keeping;
use crate::view_index::{FIRST_ROW_KEY, Head, IndexEntry, RowHash, RowHasher};
use crate::{Diff, Epoch};

/// What a view promises about its rows' multiplicities after each epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Multiplicity {
    /// Any count: each changed row's count before the epoch is read.
    #[default]
    Any,
    /// Each row is held at most once (a keyed aggregate's rows with their
    /// keys, a DISTINCT): a retracted row was held once, so its count is
    /// not read. Rows are told apart by their JSON, so the key's JSON must
    /// tell keys apart (not so: floats, whose NaN and infinities are all
    /// `null`; `Option<Option<_>>`; untagged enums; skipped fields). A
    /// change that would take a row outside 0..=1 copies fails the job (an
    /// insertion of a held row is seen where the filter sends it to the
    /// index; a retraction of a row held more than once only in debug
    /// builds, which read the index).
    AtMostOnce,
    /// Each row is held at most once by construction (SQL: a GROUP BY's,
    /// DISTINCT's or top-k partition's keys among the view's columns, whose
    /// JSON tells keys apart): as [`Multiplicity::AtMostOnce`], and a new
    /// view's index then keeps no entry per row (view index layout 2,
    /// [`crate::view_index`]), so the fold reads nothing and the applier
    /// writes nothing. What is checked: each epoch changes a row by -1, 0
    /// or +1 (else the job fails naming the row); a row inserted again in
    /// a later epoch without its retraction is not seen, so use this only
    /// where what produces the rows guarantees it.
    Unique,
}

/// A row's change in one epoch as the fold emits it: the row's hash, the
/// row (JSON), its change, and its multiplicity after the epoch (0: the
/// row is gone).
pub(crate) type Change = (RowHash, Vec<u8>, i64, i64);

/// A view's row as the fold receives it: its hash and its JSON, or why
/// it has none.
pub(crate) type JsonRow = std::result::Result<(RowHash, Vec<u8>), String>;

/// A row's change within one epoch.
#[derive(Clone, Copy, Debug, Default)]
struct Delta {
    /// The row's multiplicity before the epoch, once read.
    before: Option<i64>,
    diff: i64,
}

/// One change of a row within one epoch (a row has one such entry once
/// its epoch's rows are consolidated, several before).
#[derive(Debug)]
struct Row {
    hash: RowHash,
    json: Vec<u8>,
    delta: Delta,
}

/// Rows below which an epoch's rows are not consolidated before its fold.
const CONSOLIDATE_ROWS_MIN: usize = 4096;

/// The rows' changes in one epoch, in the order they came, a row's changes
/// summed into one entry whenever the vector doubles since the last time
/// (and at the fold). So an update costs a push, not a map's lookup, and
/// the vector holds at most twice the epoch's distinct rows (or
/// [`CONSOLIDATE_ROWS_MIN`]).
///
/// Invariant: the first `consolidated` entries are sorted by hash, one per
/// row, none with a zero change; an entry's `before`, once read, is the
/// row's multiplicity before the epoch (equal for all entries of a row).
#[derive(Debug, Default)]
struct Rows {
    rows: Vec<Row>,
    consolidated: usize,
}

impl Rows {
    fn push(&mut self, row: Row) {
        self.rows.push(row);
        if self.rows.len() >= CONSOLIDATE_ROWS_MIN.max(2 * self.consolidated) {
            self.consolidate();
        }
    }

    /// Sorts the rows by hash and sums each row's changes into one entry,
    /// dropping rows whose changes cancel.
    fn consolidate(&mut self) {
        self.rows.sort_unstable_by_key(|row| row.hash);
        self.rows.dedup_by(|later, kept| {
            if later.hash != kept.hash {
                return false;
            }
            debug_assert_eq!(later.json, kept.json, "rows with one hash are one row");
            debug_assert!(
                later.delta.before.is_none() || kept.delta.before.is_none_or(|b| Some(b) == later.delta.before),
                "a row's multiplicity before the epoch is read once"
            );
            kept.delta.diff += later.delta.diff;
            kept.delta.before = kept.delta.before.or(later.delta.before);
            true
        });
        self.rows.retain(|row| row.delta.diff != 0);
        self.consolidated = self.rows.len();
    }
}

/// One open epoch: its capability and its rows' changes so far.
struct Open {
    capability: Capability<Epoch>,
    rows: Rows,
    /// Rows from this index on came after the last read ahead (0 after a
    /// consolidation: rows with `before` read are passed over).
    unread_from: usize,
    /// The first row that could not be JSON (fails the epoch's fold).
    error: Option<String>,
}

/// This worker's share of the view's state and the epochs not yet folded.
pub(crate) struct ViewFold {
    /// `view 'NAME'`, for errors.
    what: String,
    /// `None` only when the build failed (no data then flows).
    state: Option<OperatorState>,
    /// The index's hasher, and the changelog (a replacement reads the old
    /// rows from it).
    hasher: RowHasher,
    changelog: (std::sync::Arc<Log>, String),
    open: BTreeMap<Epoch, Open>,
    /// The first epoch of a run that replaces the view's definition: it
    /// retracts every row of the old one (this worker's share).
    replaced: Option<Epoch>,
    /// This worker's index and the worker count (a replacement retracts
    /// the committed rows that route here).
    worker: (usize, usize),
    /// The last epoch folded, not yet in `unapplied` (see
    /// [`ViewFold::index_folded`]).
    folded: Option<Folded>,
    /// The rows of folded epochs that the index may not hold yet.
    unapplied: Unapplied,
    /// An epoch was folded at this activation: the next one leaves it out
    /// of `unapplied` (it carries the epoch onwards), the one after puts it in.
    index_next: bool,
    /// The rows this worker's share may hold: a row it says is absent is
    /// not read from the state.
    filter: HeldFilter,
    /// Where the scan of the committed rows into the filter goes on, until
    /// it is complete.
    filter_scan: Option<Vec<u8>>,
    /// An emptied map of an epoch's rows, for the next epoch to open.
    spare_rows: Rows,
    /// The view holds each row at most once ([`Multiplicity::AtMostOnce`]):
    /// a retracted row was held once, and is not read from the index.
    at_most_once: bool,
    /// The index holds an entry per row ([`crate::view_index::Head`]);
    /// if not (a [`Multiplicity::Unique`] view), nothing is read: a row
    /// retracted was held once, a row inserted was not held.
    holds_rows: bool,
}

/// An epoch's rows as folded: each row's hash and its multiplicity after
/// the epoch, in hash order.
struct Folded {
    epoch: Epoch,
    rows: Vec<(RowHash, i64)>,
}

/// The worker a row's updates go to (rows that are not JSON all go to
/// worker 0): [`RowHash::owned_by`] says which (checked against timely in
/// this module's tests).
fn route(row: &JsonRow) -> u64 {
    row.as_ref().map_or(0, |(hash, _)| hash.route())
}

impl ViewFold {
    /// The fold of view `name` on worker `worker.0` of `worker.1` over
    /// `state` (this worker's handle on the view's index, with its hasher)
    /// and its changelog, replacing the old definition's rows at `replaced`.
    pub(crate) fn new(
        name: &str,
        worker: (usize, usize),
        (state, head): (Option<OperatorState>, Head),
        changelog: (std::sync::Arc<Log>, String),
        replaced: Option<Epoch>,
        multiplicity: Multiplicity,
    ) -> ViewFold {
        assert!(worker.0 < worker.1, "a worker index is below the worker count");
        assert!(
            head.holds_rows || (multiplicity == Multiplicity::Unique && replaced.is_none()),
            "only a view unique by construction, not replaced, has an index without rows"
        );
        // A view whose index holds no row yet (or none at all) needs no
        // scan to be complete.
        let empty = !head.holds_rows
            || state
                .as_ref()
                .is_some_and(|state| state.scan_committed_keys_from(FIRST_ROW_KEY, 1, &mut |_| ()).ok() == Some(0));
        ViewFold {
            filter: HeldFilter::new(empty),
            filter_scan: (!empty && state.is_some()).then(|| FIRST_ROW_KEY.to_vec()),
            what: format!("view '{name}'"),
            state,
            hasher: head.hasher,
            changelog,
            open: BTreeMap::new(),
            replaced,
            worker,
            folded: None,
            unapplied: Unapplied::default(),
            index_next: false,
            spare_rows: Rows::default(),
            at_most_once: multiplicity != Multiplicity::Any,
            holds_rows: head.holds_rows,
        }
    }

    /// The fold as an operator: `rows` exchanged by row, out the changes of
    /// each finished epoch at that epoch. Failures fail the job (`label`).
    pub(crate) fn render<'s>(
        mut self,
        rows: Stream<'s, Epoch, Vec<(JsonRow, Epoch, Diff)>>,
        shared: std::sync::Arc<Shared>,
        label: String,
    ) -> Stream<'s, Epoch, Vec<Change>> {
        let scope = rows.scope();
        let name = format!("{label}:fold");
        rows.unary_frontier::<CapacityContainerBuilder<Vec<Change>>, _, _, _>(
            Exchange::new(|(row, _, _): &(JsonRow, Epoch, Diff)| route(row)),
            &name,
            move |capability, info| {
                let activator = scope.activator_for(info.address);
                // The replacing epoch is folded even if it has no update.
                let mut forced = self.replaced.map(|epoch| capability.delayed(&epoch));
                move |(input, frontier), output| {
                    // A resumed view's filter fills a step at a time, before
                    // this activation's reads.
                    match self.scan_filter_step() {
                        Ok(true) => activator.activate(),
                        Ok(false) => {}
                        Err(e) => return shared.fail(crate::Error::at(label.clone(), e)),
                    }
                    // The epoch folded at the last activation goes into the
                    // unapplied rows one activation later: the step right after a
                    // fold carries the epoch onwards to the append, and the
                    // commit waits for it.
                    if std::mem::take(&mut self.index_next) {
                        activator.activate();
                    } else {
                        self.index_folded();
                    }
                    input.for_each(|capability, data| {
                        for (row, epoch, diff) in data.drain(..) {
                            self.absorb(&capability, row, epoch, diff);
                        }
                    });
                    if let Some(capability) = forced.take() {
                        self.open_at(capability);
                    }
                    while let Some(epoch) = self.ready(frontier.frontier().first().copied()) {
                        if shared.failed() {
                            return;
                        }
                        match self.fold(epoch) {
                            Ok((capability, mut changes)) => output.session(&capability).give_container(&mut changes),
                            Err(e) => return shared.fail(crate::Error::at(label.clone(), e)),
                        }
                        self.index_next = true;
                        activator.activate();
                    }
                    if let Err(e) = self.read_ahead(frontier.frontier().first().copied()) {
                        shared.fail(crate::Error::at(label.clone(), e));
                    }
                }
            },
        )
    }

    /// Folds one update into its epoch.
    fn absorb(&mut self, capability: &InputCapability<Epoch>, row: JsonRow, epoch: Epoch, diff: Diff) {
        let spare = &mut self.spare_rows;
        let open = self.open.entry(epoch).or_insert_with(|| Open::new(capability.delayed(&epoch, 0), spare));
        match row {
            Err(e) => {
                open.error.get_or_insert(e);
            }
            Ok((hash, json)) => {
                debug_assert_eq!(hash, self.hasher.hash(&json), "a row arrives with its index hash");
                let consolidated = open.rows.consolidated;
                open.rows.push(Row { hash, json, delta: Delta { before: None, diff: diff as i64 } });
                if open.rows.consolidated != consolidated {
                    open.unread_from = 0;
                }
            }
        }
    }

    /// Holds `capability`'s epoch open even without updates.
    fn open_at(&mut self, capability: Capability<Epoch>) {
        let epoch = *capability.time();
        assert!(self.open.keys().next().is_none_or(|&first| first >= epoch), "no epoch of a run precedes its first");
        let spare = &mut self.spare_rows;
        self.open.entry(epoch).or_insert_with(|| Open::new(capability, spare));
    }

    /// The oldest open epoch, if the frontier (`None`: empty) passed it.
    fn ready(&self, frontier: Option<Epoch>) -> Option<Epoch> {
        let epoch = *self.open.keys().next()?;
        frontier.is_none_or(|f| f > epoch).then_some(epoch)
    }

    /// Reads `before` for the rows of the oldest open epoch that came since
    /// the last call, if the frontier sits at it (nothing earlier can come,
    /// every earlier epoch is folded).
    fn read_ahead(&mut self, frontier: Option<Epoch>) -> Result<()> {
        if self.folded.is_some() || !self.holds_rows {
            return Ok(()); // after the folded epoch is indexed, at the next activation; or nothing to read
        }
        let Some(state) = self.state.as_ref() else { return Ok(()) };
        let Some((&epoch, open)) = self.open.iter_mut().next() else { return Ok(()) };
        if frontier != Some(epoch) || self.replaced == Some(epoch) {
            return Ok(());
        }
        for row in &mut open.rows.rows[open.unread_from..] {
            if row.delta.before.is_some() || (self.at_most_once && row.delta.diff < 0) {
                continue; // read already; or held once if still retracted at the fold: nothing to read
            }
            row.delta.before = Some(held((state, &self.unapplied), &self.filter, row.hash, &self.what)?);
        }
        open.unread_from = open.rows.rows.len();
        Ok(())
    }

    /// Scans the next committed rows into the filter; whether more remain.
    /// Rows folded meanwhile go into the filter as they are folded, so
    /// when the scan reaches the end the filter covers every row held.
    fn scan_filter_step(&mut self) -> Result<bool> {
        let (Some(start), Some(state)) = (self.filter_scan.take(), self.state.as_ref()) else { return Ok(false) };
        let worker = self.worker;
        self.filter_scan = fill_step(
            &mut self.filter,
            &start,
            FILTER_SCAN_STEP_KEYS,
            |start, limit, visit| state.scan_committed_keys_from(start, limit, visit).map(|_| ()),
            |key| RowHash::from_key(key).filter(|hash| hash.owned_by(worker)).map(RowHash::filter),
        )?;
        state.report_reads();
        Ok(self.filter_scan.is_some())
    }

    /// Puts the last folded epoch's rows into `unapplied` (where a
    /// multiplicity is read until the applier writes the epoch to the
    /// index) and forgets the epochs the index holds by now. Deferred from
    /// the fold to the operator's next activation: the epoch's commit does
    /// not wait for it, and nothing reads the index before it.
    fn index_folded(&mut self) {
        let Some(Folded { epoch, rows }) = self.folded.take() else { return };
        let state = self.state.as_ref().expect("only a view with state folds epochs");
        self.unapplied.insert(epoch, rows);
        self.unapplied.forget_through(state.committed_epoch());
        state.report_reads();
    }

    /// Folds epoch `epoch`: its capability and its changes, sorted by row hash.
    fn fold(&mut self, epoch: Epoch) -> Result<(Capability<Epoch>, Vec<Change>)> {
        self.index_folded(); // an earlier epoch folded in this activation
        assert!(self.replaced.is_none_or(|first| epoch >= first), "no epoch of a run precedes its first");
        let open = self.open.remove(&epoch).expect("a ready epoch is open");
        if let Some(e) = open.error {
            return Err(crate::Error::InvalidJob(format!("a row of {} is not JSON: {e}", self.what)));
        }
        let state = self.state.as_mut().expect("rows reach a fold only after a clean build");
        let mut rows = open.rows;
        // The old definition's rows may be held more than once.
        let mut at_most_once = self.at_most_once;
        if self.replaced.take().is_some_and(|first| first == epoch) {
            let changelog = (self.changelog.0.as_ref(), self.changelog.1.as_str());
            retract_committed(state, changelog, (self.hasher, self.worker), &mut rows, &self.what)?;
            at_most_once = false;
        }
        // Sorted in place (no copy of the epoch's rows into a new vector).
        rows.consolidate();
        let used = rows.rows.len();
        let mut changes = Vec::with_capacity(used);
        let mut folded = Vec::with_capacity(if self.holds_rows { used } else { 0 });
        for Row { hash, json, delta } in rows.rows.drain(..) {
            let index = (&*state, &self.unapplied);
            let old = match delta.before {
                None if !self.holds_rows => i64::from(delta.diff < 0),
                None if at_most_once && delta.diff == -1 => retracted_once(index, &self.filter, hash, &self.what)?,
                None => held(index, &self.filter, hash, &self.what)?,
                Some(before) => {
                    if cfg!(debug_assertions) {
                        let now = stored(index, hash, &self.what)?;
                        assert_eq!(before, now, "a multiplicity read ahead is current");
                    }
                    before
                }
            };
            let new = old + delta.diff;
            if at_most_once && !((0..=1).contains(&old) && (0..=1).contains(&new)) {
                return Err(crate::Error::InvalidJob(format!(
                    "{} holds each row at most once, but row {} would go from {old} to {new} copies",
                    self.what,
                    String::from_utf8_lossy(&json)
                )));
            }
            if self.holds_rows {
                if new != 0 {
                    self.filter.insert(hash.filter());
                }
                folded.push((hash, new));
            }
            changes.push((hash, json, delta.diff, new));
        }
        // The next epoch's map grows into this one's capacity, unless that
        // is far more than this epoch used (a catch-up's map is let go).
        if worth_keeping(rows.rows.capacity(), used) && rows.rows.capacity() > self.spare_rows.rows.capacity() {
            rows.consolidated = 0;
            self.spare_rows = rows;
        }
        // The epoch's commit may come before the next `index_folded`.
        state.report_reads();
        // An index without rows is never read: nothing to remember.
        self.folded = self.holds_rows.then_some(Folded { epoch, rows: folded });
        Ok((open.capability, changes))
    }
}

impl Open {
    /// An epoch opened with `spare`'s map (empty, its capacity kept).
    fn new(capability: Capability<Epoch>, spare: &mut Rows) -> Open {
        debug_assert!(spare.rows.is_empty() && spare.consolidated == 0, "a spare vector of rows is empty");
        Open { capability, rows: std::mem::take(spare), unread_from: 0, error: None }
    }
}

/// The replacing epoch's retractions: every row of this worker's share
/// that the committed index holds, read from the changelog at the offsets
/// the index gives, in offset order (one pass over the changelog).
fn retract_committed(
    state: &OperatorState,
    (log, topic): (&Log, &str),
    (hasher, worker): (RowHasher, (usize, usize)),
    rows: &mut Rows,
    what: &str,
) -> Result<()> {
    let mut held: Vec<(u64, RowHash, i64)> = Vec::new();
    state.scan_committed(|key, value| {
        if let Some(hash) = RowHash::from_index_key(key, what)?.filter(|hash| hash.owned_by(worker)) {
            let entry = IndexEntry::decode(value, what)?;
            held.push((entry.offset, hash, entry.count));
        }
        Ok(())
    })?;
    held.sort_unstable();
    crate::view_index::read_rows_at(log, topic, &held, |(_, hash, count), row| {
        if hasher.hash(row) != hash {
            return Err(format!(
                "the record the index gives for a row holds another row ({})",
                String::from_utf8_lossy(row)
            ));
        }
        rows.push(Row { hash, json: row.to_vec(), delta: Delta { before: None, diff: -count } });
        Ok(())
    })
}

/// A row's multiplicity (0: absent): of the last unapplied epoch that
/// changed it, else in the view's index, not read where the filter says
/// the row is absent. Only with no folded epoch waiting to be put into
/// `unapplied` ([`ViewFold::index_folded`]).
fn held(index: (&OperatorState, &Unapplied), filter: &HeldFilter, hash: RowHash, what: &str) -> Result<i64> {
    if filter.surely_absent(hash.filter()) {
        if cfg!(debug_assertions) {
            assert_eq!(stored(index, hash, what)?, 0, "a row the filter says is absent is not held");
        }
        return Ok(0);
    }
    if let Some(count) = index.1.get(hash) {
        return Ok(count);
    }
    index.0.get(&hash.key())?.map_or(Ok(0), |bytes| IndexEntry::decode(&bytes, what).map(|entry| entry.count))
}

/// The multiplicity before the epoch of a row that a view holding each
/// row at most once retracts once: 1, not read. Checked against the
/// filter (a row it says is absent was not held: 0, which the caller
/// refuses); debug builds read the index instead, so the caller refuses
/// a row held twice there too.
fn retracted_once(index: (&OperatorState, &Unapplied), filter: &HeldFilter, hash: RowHash, what: &str) -> Result<i64> {
    if filter.surely_absent(hash.filter()) {
        return Ok(0);
    }
    if cfg!(debug_assertions) {
        return stored(index, hash, what);
    }
    Ok(1)
}

/// [`held`] without the filter and without counting the read (debug checks).
fn stored((state, unapplied): (&OperatorState, &Unapplied), hash: RowHash, what: &str) -> Result<i64> {
    if let Some(count) = unapplied.get(hash) {
        return Ok(count);
    }
    state.get_uncounted(&hash.key())?.map_or(Ok(0), |bytes| IndexEntry::decode(&bytes, what).map(|entry| entry.count))
}

/// The rows of folded epochs that the index may not hold yet (its
/// applier writes an epoch after the epoch's commit): each such epoch's
/// changed rows with their multiplicities after it, in hash order. A row's
/// multiplicity is the one of the newest of them that changed it.
///
/// Invariant: epochs increase; each epoch's rows are sorted by hash, one
/// entry per row (asserted on insert).
#[derive(Default)]
struct Unapplied {
    epochs: VecDeque<(Epoch, Vec<(RowHash, i64)>)>,
}

impl Unapplied {
    /// Searches the epochs newest first: usually one or two, each a binary
    /// search (no map to build for an epoch's rows, none to clean).
    fn get(&self, hash: RowHash) -> Option<i64> {
        self.epochs
            .iter()
            .rev()
            .find_map(|(_, rows)| rows.binary_search_by_key(&hash, |&(hash, _)| hash).ok().map(|at| rows[at].1))
    }

    /// Epoch `epoch`'s rows with their multiplicities after it, sorted by hash.
    fn insert(&mut self, epoch: Epoch, rows: Vec<(RowHash, i64)>) {
        assert!(self.epochs.back().is_none_or(|&(last, _)| last < epoch), "epochs are folded in order");
        assert!(rows.windows(2).all(|pair| pair[0].0 < pair[1].0), "an epoch's rows are sorted by hash, once each");
        self.epochs.push_back((epoch, rows));
    }

    /// Forgets the epochs up to `applied` (the committed epoch: the index
    /// holds every epoch up to it).
    fn forget_through(&mut self, applied: Epoch) {
        while self.epochs.front().is_some_and(|&(epoch, _)| epoch <= applied) {
            self.epochs.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use timely::dataflow::InputHandle;
    use timely::dataflow::channels::pact::Exchange;
    use timely::dataflow::operators::generic::Operator;
    use timely::dataflow::operators::{Input, Probe};

    use super::{CONSOLIDATE_ROWS_MIN, Delta, JsonRow, Row, Rows, Unapplied, route};
    use crate::view_index::{RowHash, RowHasher};

    /// An epoch's rows are read from memory until the index holds the
    /// epoch, and a row changed again later stays until that epoch is held.
    #[test]
    fn unapplied_rows_are_forgotten_once_applied_unless_changed_again() {
        let mut unapplied = Unapplied::default();
        let (a, b) = (RowHash(1), RowHash(2));
        unapplied.insert(3, vec![(a, 1), (b, 2)]);
        unapplied.insert(4, vec![(a, 0)]);
        assert_eq!((unapplied.get(a), unapplied.get(b)), (Some(0), Some(2)));
        unapplied.forget_through(2);
        assert_eq!(unapplied.get(b), Some(2), "nothing applied yet");
        unapplied.forget_through(3);
        assert_eq!((unapplied.get(a), unapplied.get(b)), (Some(0), None));
        unapplied.forget_through(4);
        assert_eq!(unapplied.get(a), None);
        assert!(unapplied.epochs.is_empty());
    }

    proptest::proptest! {
        /// However often an epoch's rows are consolidated while they come
        /// (every push past twice the last consolidated length), the fold
        /// sees each row once with the sum of its changes, in hash order,
        /// and no row whose changes cancel: against a map built from scratch.
        #[test]
        fn an_epochs_rows_sum_each_rows_changes_however_often_they_are_consolidated(
            updates in proptest::collection::vec((0u128..3000, -2i64..3), 0..3 * CONSOLIDATE_ROWS_MIN),
        ) {
            let mut rows = Rows::default();
            let mut expected = std::collections::BTreeMap::<u128, i64>::new();
            for &(hash, diff) in &updates {
                let json = hash.to_string().into_bytes();
                rows.push(Row { hash: RowHash(hash), json, delta: Delta { before: None, diff } });
                *expected.entry(hash).or_default() += diff;
                proptest::prop_assert!(rows.rows.len() <= CONSOLIDATE_ROWS_MIN.max(2 * rows.consolidated));
            }
            rows.consolidate();
            expected.retain(|_, diff| *diff != 0);
            let got: Vec<(u128, i64)> = rows.rows.iter().map(|row| (row.hash.0, row.delta.diff)).collect();
            proptest::prop_assert_eq!(got, expected.into_iter().collect::<Vec<_>>());
            proptest::prop_assert!(rows.rows.iter().all(|row| row.json == row.hash.0.to_string().into_bytes()));
        }
    }

    /// Every row reaches the one worker that owns its hash, for worker
    /// counts that are and are not powers of two.
    #[test]
    fn the_exchange_sends_each_row_to_the_worker_that_owns_it() {
        for workers in [1, 2, 3, 4] {
            let received = timely::execute(timely::Config::process(workers), move |worker| {
                let (index, peers) = (worker.index(), worker.peers());
                let mut input = InputHandle::new();
                let mut received = 0u64;
                let counted = std::rc::Rc::new(std::cell::Cell::new(0u64));
                let count = counted.clone();
                let probe = worker.dataflow::<u64, _, _>(|scope| {
                    scope
                        .input_from(&mut input)
                        .container::<Vec<JsonRow>>()
                        .unary::<timely::container::CapacityContainerBuilder<Vec<()>>, _, _, _>(
                            Exchange::new(route),
                            "owner",
                            move |_, _| {
                                move |input, _output| {
                                    input.for_each(|_, rows| {
                                        for row in rows.drain(..) {
                                            let (hash, row) = row.expect("the test sends JSON rows");
                                            assert!(
                                                hash.owned_by((index, peers)),
                                                "worker {index} of {peers} got {row:?}"
                                            );
                                            count.set(count.get() + 1);
                                        }
                                    });
                                }
                            },
                        )
                        .probe()
                        .0
                });
                for n in (0..1000).filter(|n| n % peers == index) {
                    let row = format!("{{\"a\":{n},\"b\":\"x{n}\"}}").into_bytes();
                    input.send(Ok((RowHasher::with_keys(7, 11).hash(&row), row)));
                }
                input.advance_to(1);
                while probe.less_than(input.time()) {
                    worker.step();
                }
                received += counted.get();
                received
            })
            .expect("timely runs")
            .join()
            .into_iter()
            .map(|r| r.expect("a worker ends"))
            .sum::<u64>();
            assert_eq!(received, 1000, "every row arrives once with {workers} workers");
        }
    }
}
