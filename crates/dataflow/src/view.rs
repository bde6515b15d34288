//! Reading views: snapshots and subscriptions, from any process.
//!
//! A reader never opens the log or the state store (the running job holds
//! both). It reads `checkpoint.json` for the last committed epoch and each
//! changelog's committed end offset, and reads the changelog segment files
//! below that offset with a [`PartitionReader`]. So it sees exactly the
//! committed epochs: never a change that a crash takes back, never one
//! twice.
//!
//! A subscription as of epoch E folds the changelog records of epochs up to
//! E into a snapshot, then emits every later change in epoch order, with a
//! progress mark when an epoch is complete. Compaction keeps only the latest
//! record per row, which is all a snapshot of the latest epoch needs; for
//! an older E, or a reader that falls behind the cleaner, the reader checks
//! every change against the multiplicity it holds (`value - diff` must equal
//! it) and reports [`Error::EpochUnavailable`] instead of a wrong stream.
//!
//! A view that the job drops (`RuntimeConfig::drop_undeclared`) leaves
//! `checkpoint.json` before its changelog is deleted: readers then report
//! [`Error::UnknownView`]. A live subscription retracts every row it holds
//! (at the epoch of the commit that dropped the view), marks that epoch
//! complete, and then fails with [`Error::ViewDropped`]; so does one that
//! finds the view created again (a new changelog, `ViewChangelog::since`).
//! A subscription resumed as of an epoch before the view's changelog began
//! is refused ([`Error::EpochUnavailable`]): it cannot retract what it
//! holds. A view *replaced* by another definition keeps its changelog,
//! which itself retracts the old rows: subscribers just follow it.
//!
//! Invariant: what a subscriber has folded at each progress mark equals
//! the view's committed contents at that epoch (empty after a drop).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use millpond_log::{PartitionReader, RecordView};
use serde::Serialize;

use crate::Epoch;
use crate::checkpoint::CheckpointMeta;
use crate::error::{Error, Result};
use crate::row_counts::RowCounts;
use crate::sink::{DIFF_HEADER, EPOCH_HEADER};

/// Bytes of changelog read at once when bootstrapping a snapshot.
const READ_BYTES_MAX: usize = 1 << 20;
/// Bytes of changelog read at once when following commits (at least one
/// batch): a poll of a few records stops soon after them.
const POLL_READ_BYTES_MAX: usize = 64 << 10;

/// A view as listed by [`list_views`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ViewInfo {
    pub name: String,
    pub changelog_topic: String,
    /// The last committed epoch of the job that maintains it.
    pub epoch: Epoch,
    pub changelog_end_offset: u64,
}

/// The views committed in a data directory.
pub fn list_views(data_dir: &Path) -> Result<Vec<ViewInfo>> {
    let Some(meta) = CheckpointMeta::read_published(data_dir)? else { return Ok(Vec::new()) };
    Ok(meta
        .views
        .iter()
        .map(|(name, topic)| ViewInfo {
            name: name.clone(),
            changelog_topic: topic.clone(),
            epoch: meta.epoch,
            changelog_end_offset: meta.sinks.get(topic).copied().unwrap_or(0),
        })
        .collect())
}

/// A view's contents at one epoch: rows (as JSON) with their multiplicities.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub epoch: Epoch,
    pub rows: Vec<(serde_json::Value, i64)>,
}

/// A view's contents at one epoch with each row as its checked JSON text:
/// what a reader that decodes rows itself takes (a one-off query), without
/// a JSON tree per row.
#[derive(Clone, Debug, PartialEq)]
pub struct RawSnapshot {
    pub epoch: Epoch,
    pub rows: Vec<(RawRow, i64)>,
}

impl RawSnapshot {
    /// The rows parsed into JSON trees.
    pub fn parse(self) -> Snapshot {
        Snapshot { epoch: self.epoch, rows: self.rows.into_iter().map(|(row, count)| (row.parse(), count)).collect() }
    }
}

/// The contents of view `name` as of the last committed epoch.
pub fn read_view(data_dir: &Path, name: &str) -> Result<Snapshot> {
    read_view_raw(data_dir, name).map(RawSnapshot::parse)
}

/// [`read_view`] with each row left as JSON text.
pub fn read_view_raw(data_dir: &Path, name: &str) -> Result<RawSnapshot> {
    let subscription = Subscription::open(data_dir, name, None, true)?;
    let epoch = subscription.as_of();
    Ok(RawSnapshot { epoch, rows: snapshot_rows(subscription, epoch) })
}

/// The snapshot's rows a subscription opened with one queued (they come
/// before its progress mark).
fn snapshot_rows(mut subscription: Subscription, epoch: Epoch) -> Vec<(RawRow, i64)> {
    let mut rows = Vec::new();
    while let Some(event) = subscription.next_raw() {
        match event {
            RawEvent::Change { diff, row, epoch: at } => {
                debug_assert_eq!(at, epoch, "the snapshot's rows come before its progress mark");
                rows.push((row, diff));
            }
            RawEvent::Progress { .. } => break,
        }
    }
    rows
}

/// The contents of view `name` as of committed epoch `epoch` (a reader of
/// several views reads them all at one epoch). Fails as a subscription
/// AS OF `epoch` does when that epoch is no longer retained or not yet
/// committed.
pub fn read_view_at(data_dir: &Path, name: &str, epoch: Epoch) -> Result<Snapshot> {
    read_view_raw_at(data_dir, name, epoch).map(RawSnapshot::parse)
}

/// [`read_view_at`] with each row left as JSON text.
pub fn read_view_raw_at(data_dir: &Path, name: &str, epoch: Epoch) -> Result<RawSnapshot> {
    let subscription = Subscription::open(data_dir, name, Some(epoch), true)?;
    Ok(RawSnapshot { epoch, rows: snapshot_rows(subscription, epoch) })
}

/// What a subscription yields.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Event {
    /// A row's multiplicity changed by `diff` at `epoch` (snapshot rows come
    /// as changes at the snapshot's epoch).
    Change { epoch: Epoch, diff: i64, row: serde_json::Value },
    /// Every change of `epoch` and before has been yielded.
    Progress { epoch: Epoch, progress: bool },
}

/// An [`Event`] whose row is still the JSON text of the changelog record
/// (validated when read): what a reader that re-encodes rows takes
/// without building a JSON tree per change ([`Subscription::next_raw`]).
#[derive(Clone, Debug)]
pub enum RawEvent {
    Change { epoch: Epoch, diff: i64, row: RawRow },
    Progress { epoch: Epoch, progress: bool },
}

/// A changelog row's JSON text, checked where it was read as strictly as a
/// parse into a `serde_json::Value` checks it (so every later parse of it
/// succeeds), without surrounding whitespace. Checked once, by one pass
/// that builds nothing: what a server's hub does for every change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawRow(Box<str>);

impl RawRow {
    /// Checks `text` (the record at `offset` of `view`'s changelog).
    fn check(view: &str, offset: u64, text: &[u8]) -> Result<RawRow> {
        validate_row(view, offset, text).map(|text| RawRow(text.into()))
    }

    /// A row held by a fold: checked by [`RawRow::check`] or
    /// [`validate_row`] when its record was read.
    fn held(text: &[u8]) -> RawRow {
        let text = std::str::from_utf8(text).expect("rows held were checked when read");
        RawRow(trim_json_space(text).into())
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        &self.0
    }

    /// The row as a tree.
    pub fn parse(&self) -> serde_json::Value {
        serde_json::from_str(self.get()).expect("a raw row is JSON checked when it was read")
    }
}

/// A change's row as the changelog holds it, NOT yet checked: what a
/// reader opened with [`Subscription::tail_unchecked`] gets, so that the
/// one pass that re-encodes a row can also be its check (instead of a check
/// pass and an encode pass). That reader must refuse a row that a parse into
/// a tree would refuse ([`UncheckedRow::corrupt`] names its offset) before
/// it gives anything of it to anyone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UncheckedRow {
    offset: u64,
    bytes: Box<[u8]>,
}

impl UncheckedRow {
    /// The row's bytes as read.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The changelog offset of its record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Checks it as a [`RawRow`] is checked where it is read.
    pub fn check(&self, view: &str) -> Result<RawRow> {
        RawRow::check(view, self.offset, &self.bytes)
    }

    /// The error a reader reports for it when it is not a JSON row
    /// (`reason`: what its parse said), the same as [`UncheckedRow::check`]'s.
    pub fn corrupt(&self, view: &str, reason: &dyn std::fmt::Display) -> Error {
        not_json(view, self.offset, reason)
    }
}

/// What a reader opened with [`Subscription::tail_unchecked`] reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TailEvent {
    Change { epoch: Epoch, diff: i64, row: UncheckedRow },
    Progress { epoch: Epoch },
}

impl TailEvent {
    pub fn epoch(&self) -> Epoch {
        match self {
            TailEvent::Change { epoch, .. } | TailEvent::Progress { epoch } => *epoch,
        }
    }
}

impl RawEvent {
    pub fn epoch(&self) -> Epoch {
        match self {
            RawEvent::Change { epoch, .. } | RawEvent::Progress { epoch, .. } => *epoch,
        }
    }

    /// The event with its row parsed.
    pub fn parse(self) -> Event {
        match self {
            RawEvent::Change { epoch, diff, row } => Event::Change { epoch, diff, row: row.parse() },
            RawEvent::Progress { epoch, progress } => Event::Progress { epoch, progress },
        }
    }
}

/// A view's changes as a blocking iterator (it polls `checkpoint.json`).
#[derive(Debug)]
pub struct Subscription {
    data_dir: PathBuf,
    topic: String,
    reader: PartitionReader,
    /// Where the changelog being read began (`ViewChangelog::since`).
    since: Epoch,
    /// The error to return once the queued retractions of a dropped view
    /// have been yielded.
    dropped: Option<Error>,
    fold: Fold,
    /// How long to sleep when nothing new is committed.
    pub poll_interval: Duration,
}

/// What a subscription has read: the rows it holds and the events queued.
/// Apart from the reader, so a read can hand records to it borrowed.
#[derive(Debug)]
struct Fold {
    view: String,
    /// The snapshot epoch.
    as_of: Epoch,
    /// Multiplicity per row (JSON bytes) as of what has been read; empty
    /// once [`Subscription::forget_rows`] is called ([`RowCounts`]).
    counts: RowCounts,
    /// Whether `counts` is kept (the default): it checks each change
    /// against the row it continues and lets a dropped view be retracted.
    track_rows: bool,
    /// The epoch of the last record read, and the last progress yielded.
    last_epoch: Epoch,
    last_progress: Epoch,
    /// The greatest epoch of any record read (records come in epoch order).
    read_epoch: Epoch,
    queue: VecDeque<RawEvent>,
    /// Whether rows are checked as they are read (the default), or handed
    /// unchecked through `unchecked` instead of `queue`
    /// ([`Subscription::tail_unchecked`]).
    check_rows: bool,
    unchecked: VecDeque<TailEvent>,
}

impl Subscription {
    /// Subscribes to view `name` as of epoch `as_of` (default: the last
    /// committed), starting with a snapshot when `snapshot` is set.
    pub fn open(data_dir: &Path, name: &str, as_of: Option<Epoch>, snapshot: bool) -> Result<Subscription> {
        let (meta, topic, since) = published_view(data_dir, name)?;
        let as_of = as_of.unwrap_or(meta.epoch);
        check_as_of(&meta, name, &topic, since, as_of, snapshot)?;
        let reader = PartitionReader::new(data_dir, &topic, 0, 0)?;
        let fold = Fold::new(name, as_of, true, 0);
        let mut subscription = Subscription::new(data_dir, topic, reader, since, fold);
        // Fold everything up to the snapshot epoch; later committed changes queue up.
        let end = meta.sinks.get(&subscription.topic).copied().unwrap_or(0);
        let mut after = Vec::new();
        let mut failed = None;
        let Subscription { reader, fold, .. } = &mut subscription;
        while failed.is_none()
            && reader.read_each(end, READ_BYTES_MAX, |record| {
                if failed.is_none()
                    && let Err(e) = fold.fold_before(&record, meta.epoch, &mut after)
                {
                    failed = Some(e);
                }
            })? > 0
        {}
        if let Some(error) = failed {
            return Err(error);
        }
        subscription.check_end(end)?;
        subscription.fold.check_counted(&meta, end)?;
        let fold = &mut subscription.fold;
        if snapshot {
            let rows =
                fold.sorted_counts().into_iter().map(|(row, count)| (RawRow::held(row), count)).collect::<Vec<_>>();
            for (row, diff) in rows {
                fold.queue.push_back(RawEvent::Change { epoch: as_of, diff, row });
            }
            fold.queue.push_back(RawEvent::Progress { epoch: as_of, progress: true });
        }
        fold.last_epoch = fold.last_epoch.max(as_of);
        for (offset, key, count, epoch, diff) in after {
            fold.change(offset, &key, count, epoch, diff)?;
        }
        // Every epoch with changes gets its own mark, then the committed one.
        fold.finish_through(fold.last_epoch);
        fold.finish_through(meta.epoch);
        Ok(subscription)
    }

    /// A reader of view `name`'s changes after the last committed epoch,
    /// without a snapshot and without rows (as after
    /// [`Subscription::forget_rows`]): it starts at the changelog's
    /// committed end and reads nothing before it, so opening it costs the
    /// same for any size of view. A server's hub reads a view this way.
    pub fn tail(data_dir: &Path, name: &str) -> Result<Subscription> {
        let (meta, topic, since) = published_view(data_dir, name)?;
        let end = meta.sinks.get(&topic).copied().unwrap_or(0);
        let reader = PartitionReader::new(data_dir, &topic, 0, end)?;
        let fold = Fold::new(name, meta.epoch, false, meta.epoch);
        Ok(Subscription::new(data_dir, topic, reader, since, fold))
    }

    /// [`Subscription::tail`] whose changes come through
    /// [`Subscription::next_unchecked`] with their rows as read, not
    /// checked: for a reader whose one pass over each row re-encodes it and
    /// checks it as strictly as [`RawRow`]'s check (a server's hub). Its
    /// [`Subscription::next_raw`] and [`Subscription::next_queued`] yield
    /// nothing.
    pub fn tail_unchecked(data_dir: &Path, name: &str) -> Result<Subscription> {
        let mut subscription = Subscription::tail(data_dir, name)?;
        subscription.fold.check_rows = false;
        Ok(subscription)
    }

    fn new(data_dir: &Path, topic: String, reader: PartitionReader, since: Epoch, fold: Fold) -> Subscription {
        Subscription {
            data_dir: data_dir.to_path_buf(),
            topic,
            reader,
            since,
            dropped: None,
            fold,
            poll_interval: Duration::from_millis(50),
        }
    }

    /// Stops keeping every row's multiplicity, so the reader's memory no
    /// longer grows with the view (a server's subscribers). What it gives
    /// up: the check of each change against the row it continues (the
    /// compaction bound still refuses a reader that fell behind it), and
    /// the retractions of a dropped view (the next poll fails with
    /// `ViewDropped { retracted: false }`, and the reader must re-snapshot).
    pub fn forget_rows(&mut self) {
        self.fold.track_rows = false;
        self.fold.counts = RowCounts::default();
    }

    /// The error that ends it when the view was dropped or created again
    /// (its retractions are queued before it), taken: a reader that keeps
    /// the rows learns here that they are not the view's.
    pub fn take_end(&mut self) -> Option<Error> {
        self.dropped.take()
    }

    /// The rows held and their multiplicities, in byte order: the view's
    /// contents as of what has been read (none after
    /// [`Subscription::forget_rows`], or once the view was dropped).
    pub fn held_rows(&self) -> Vec<(RawRow, i64)> {
        self.fold.sorted_counts().into_iter().map(|(row, count)| (RawRow::held(row), count)).collect()
    }

    /// Where the changelog it reads began (`ViewChangelog::since`): a view
    /// created again has a new changelog, begun later.
    pub fn since(&self) -> Epoch {
        self.since
    }

    /// The epoch of the snapshot.
    pub fn as_of(&self) -> Epoch {
        self.fold.as_of
    }

    /// The job syncs the changelog before it publishes the end offset.
    fn check_end(&self, end: u64) -> Result<()> {
        if self.reader.next_offset() < end {
            return Err(Error::CorruptChangelog {
                view: self.fold.view.clone(),
                offset: self.reader.next_offset(),
                reason: format!("the changelog ends before the committed end offset {end}"),
            });
        }
        Ok(())
    }

    /// Reads whatever has been committed since the last call; queues events.
    pub fn poll(&mut self) -> Result<()> {
        if self.dropped.is_some() {
            return Err(self.dropped.take().expect("checked"));
        }
        match CheckpointMeta::read_published(&self.data_dir)? {
            Some(meta) => self.poll_at(&meta),
            None => Ok(()),
        }
    }

    /// [`Subscription::poll`] against `meta`, a published checkpoint its
    /// caller read (a server reads it once for every subscriber).
    pub fn poll_at(&mut self, meta: &CheckpointMeta) -> Result<()> {
        self.poll_at_most(meta, usize::MAX).map(|_| ())
    }

    /// [`Subscription::poll_at`], reading about `records_max` changelog
    /// records at most (one read of up to 64 KiB past it): a reader's memory
    /// bound when much was committed at once. True when it caught up with
    /// `meta` (then the committed epoch's progress mark is queued); false
    /// when records are left for the next call (an epoch may be partly
    /// queued, without its mark).
    pub fn poll_at_most(&mut self, meta: &CheckpointMeta, records_max: usize) -> Result<bool> {
        if let Some(error) = self.dropped.take() {
            return Err(error);
        }
        let since = meta.changelogs.get(&self.fold.view).map(|d| d.since);
        if meta.views.get(&self.fold.view) != Some(&self.topic) || since != Some(self.since) {
            // The job dropped the view (RuntimeConfig::drop_undeclared; its
            // changelog is being deleted), and maybe created it again.
            self.retract_all(meta.epoch, since.is_some());
            return Ok(true);
        }
        if let Some(&(compacted, _)) = meta.compactable.get(&self.topic)
            && compacted > self.fold.last_progress
        {
            // This reader fell further behind than the compaction lag.
            return Err(Error::EpochUnavailable {
                view: self.fold.view.clone(),
                epoch: self.fold.last_progress,
                reason: format!("the changelog may now be compacted through epoch {compacted}; subscribe again"),
            });
        }
        let end = meta.sinks.get(&self.topic).copied().unwrap_or(0);
        let mut read = 0usize;
        let mut failed = None;
        loop {
            if read >= records_max {
                return Ok(false);
            }
            let Subscription { reader, fold, .. } = self;
            let records = reader.read_each(end, POLL_READ_BYTES_MAX, |record| {
                if failed.is_none()
                    && let Err(e) = fold.fold_after(&record, meta.epoch)
                {
                    failed = Some(e);
                }
            })?;
            if let Some(error) = failed {
                return Err(error);
            }
            if records == 0 {
                break;
            }
            read += records;
        }
        self.check_end(end)?;
        // Every epoch with changes gets its own mark, then the committed one.
        self.fold.finish_through(self.fold.last_epoch);
        self.fold.finish_through(meta.epoch);
        Ok(true)
    }

    /// The last epoch whose progress mark has been queued.
    pub fn progressed(&self) -> Epoch {
        self.fold.last_progress
    }

    /// Queues the retraction of every row held, at `epoch` (the commit that
    /// dropped the view), and its progress mark (none for a reader that
    /// keeps no rows); the next poll fails.
    fn retract_all(&mut self, epoch: Epoch, recreated: bool) {
        let fold = &mut self.fold;
        // The dropping commit follows every epoch read; the max only guards
        // against a published checkpoint that went back.
        let epoch = epoch.max(fold.last_progress + 1);
        let held: Vec<(RawRow, i64)> =
            fold.sorted_counts().into_iter().map(|(row, count)| (RawRow::held(row), count)).collect();
        fold.counts = RowCounts::default();
        for (row, count) in held {
            fold.queue.push_back(RawEvent::Change { epoch, diff: -count, row });
        }
        let retracted = fold.track_rows;
        // Without rows to retract, no progress mark: the view at `epoch`
        // is not what the reader holds, and the error says so.
        if retracted {
            fold.finish_through(epoch);
        }
        self.dropped = Some(Error::ViewDropped { view: fold.view.clone(), epoch, recreated, retracted });
    }

    /// How many events are read and not yet taken.
    pub fn queued_len(&self) -> usize {
        self.fold.queue.len()
    }

    /// The next event already read, if any (reads nothing).
    pub fn next_queued(&mut self) -> Option<Event> {
        self.fold.queue.pop_front().map(RawEvent::parse)
    }

    /// [`Subscription::next_queued`] with the row left as JSON text.
    pub fn next_raw(&mut self) -> Option<RawEvent> {
        debug_assert!(self.fold.check_rows, "a reader of unchecked rows takes them with next_unchecked");
        self.fold.queue.pop_front()
    }

    /// The next event read by a reader opened with
    /// [`Subscription::tail_unchecked`], its row not checked (reads nothing).
    pub fn next_unchecked(&mut self) -> Option<TailEvent> {
        debug_assert!(!self.fold.check_rows, "a reader of checked rows takes them with next_raw");
        self.fold.unchecked.pop_front()
    }

    /// The next event, waiting for one (polling) for at most `timeout`.
    pub fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Event>> {
        let deadline = std::time::Instant::now().checked_add(timeout);
        loop {
            if let Some(event) = self.next_queued() {
                return Ok(Some(event));
            }
            self.poll()?;
            if !self.fold.queue.is_empty() {
                continue;
            }
            let now = std::time::Instant::now();
            let left = deadline.map_or(self.poll_interval, |d| d.saturating_duration_since(now));
            if left.is_zero() {
                return Ok(None);
            }
            std::thread::sleep(self.poll_interval.min(left));
        }
    }
}

impl Iterator for Subscription {
    type Item = Result<Event>;
    /// Blocks until the next event; ends only on an error (then stops).
    fn next(&mut self) -> Option<Result<Event>> {
        match self.next_timeout(Duration::MAX) {
            Ok(event) => event.map(Ok),
            Err(e) => Some(Err(e)),
        }
    }
}

/// The published checkpoint, and view `name`'s changelog topic and the
/// epoch it began at.
fn published_view(data_dir: &Path, name: &str) -> Result<(CheckpointMeta, String, Epoch)> {
    let meta = CheckpointMeta::read_published(data_dir)?.ok_or_else(|| Error::UnknownView(name.to_owned()))?;
    let topic = meta.views.get(name).cloned().ok_or_else(|| Error::UnknownView(name.to_owned()))?;
    let since = meta.changelogs.get(name).map_or(0, |d| d.since);
    Ok((meta, topic, since))
}

/// Refuses a subscription as of an epoch its changelog cannot give.
fn check_as_of(
    meta: &CheckpointMeta,
    name: &str,
    topic: &str,
    since: Epoch,
    as_of: Epoch,
    snapshot: bool,
) -> Result<()> {
    let unavailable = |reason: String| Err(Error::EpochUnavailable { view: name.to_owned(), epoch: as_of, reason });
    if as_of < since && !snapshot {
        return unavailable(format!(
            "the view's changelog began at epoch {since} (the view was created, or created again, then): \
             what a reader holds as of epoch {as_of} cannot be continued; subscribe with a fresh snapshot"
        ));
    }
    if as_of > meta.epoch {
        return unavailable(format!("it is not committed yet (the last committed epoch is {})", meta.epoch));
    }
    if let Some(&(compacted, _)) = meta.compactable.get(topic)
        && as_of < compacted
    {
        return unavailable(format!(
            "the changelog may be compacted through epoch {compacted}; start at or after it \
             (or from a fresh snapshot)"
        ));
    }
    Ok(())
}

/// A change read past the snapshot epoch while opening: offset, row, the
/// multiplicity the record carries, epoch, diff.
type After = (u64, Vec<u8>, i64, Epoch, i64);

impl Fold {
    /// A fold with a snapshot at `as_of`, having read records through
    /// epoch `read_through` (0: none yet).
    fn new(view: &str, as_of: Epoch, track_rows: bool, read_through: Epoch) -> Fold {
        Fold {
            view: view.to_owned(),
            as_of,
            counts: RowCounts::default(),
            track_rows,
            last_epoch: read_through,
            last_progress: as_of,
            read_epoch: read_through,
            queue: VecDeque::new(),
            check_rows: true,
            unchecked: VecDeque::new(),
        }
    }

    /// Opening: folds a record of an epoch up to `as_of` into the rows held;
    /// keeps a later one in `after`.
    fn fold_before(&mut self, record: &RecordView<'_>, committed: Epoch, after: &mut Vec<After>) -> Result<()> {
        let (epoch, diff, key) = self.parse(record)?;
        self.check_epoch(record.offset, epoch, committed)?;
        let count = record_count(record);
        if epoch > self.as_of {
            after.push((record.offset, key.to_vec(), count, epoch, diff));
            return Ok(());
        }
        validate_row(&self.view, record.offset, key)?;
        self.last_epoch = epoch;
        self.hold(key, count);
        Ok(())
    }

    /// Following: queues a change read after the snapshot.
    fn fold_after(&mut self, record: &RecordView<'_>, committed: Epoch) -> Result<()> {
        let (epoch, diff, key) = self.parse(record)?;
        self.check_epoch(record.offset, epoch, committed)?;
        self.change(record.offset, key, record_count(record), epoch, diff)
    }

    fn parse<'r>(&self, record: &RecordView<'r>) -> Result<(Epoch, i64, &'r [u8])> {
        // One pass over the headers; the first of each name counts.
        let (mut epoch, mut diff) = (None, None);
        for (key, value) in record.header_pairs() {
            let slot = match key {
                k if k == EPOCH_HEADER.as_bytes() => &mut epoch,
                k if k == DIFF_HEADER.as_bytes() => &mut diff,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(value.and_then(|v| <[u8; 8]>::try_from(v).ok()).map(i64::from_be_bytes));
            }
        }
        match (epoch.flatten(), diff.flatten(), record.key) {
            (Some(epoch), Some(diff), Some(key)) if epoch > 0 => Ok((epoch as Epoch, diff, key)),
            _ => Err(Error::CorruptChangelog {
                view: self.view.clone(),
                offset: record.offset,
                reason: "a changelog record needs a key and 8-byte epoch and diff headers".into(),
            }),
        }
    }

    /// Records come in epoch order, and none below the committed end offset
    /// can be of an epoch after the committed one.
    fn check_epoch(&mut self, offset: u64, epoch: Epoch, committed: Epoch) -> Result<()> {
        let reason = if epoch < self.read_epoch {
            format!("epoch {epoch} after epoch {}", self.read_epoch)
        } else if epoch > committed {
            format!("epoch {epoch} below the end offset of committed epoch {committed}")
        } else {
            self.read_epoch = epoch;
            return Ok(());
        };
        Err(Error::CorruptChangelog { view: self.view.clone(), offset, reason })
    }

    /// A snapshot of the committed epoch must hold the rows its commit counted.
    fn check_counted(&self, meta: &CheckpointMeta, end: u64) -> Result<()> {
        let counted = meta.changelogs.get(&self.view).and_then(|c| c.rows);
        if let Some(rows) = counted.filter(|_| self.as_of == meta.epoch)
            && rows != self.counts.len() as u64
        {
            return Err(Error::CorruptChangelog {
                view: self.view.clone(),
                offset: end,
                reason: format!(
                    "it no longer covers committed epoch {}: its records fold to {} rows, the checkpoint counted \
                     {rows} (compacted past the committed epoch, or damaged)",
                    meta.epoch,
                    self.counts.len()
                ),
            });
        }
        Ok(())
    }

    /// Queues one change after the snapshot, checking it continues the row
    /// (`count` is the multiplicity the record says the row now has).
    fn change(&mut self, offset: u64, key: &[u8], count: i64, epoch: Epoch, diff: i64) -> Result<()> {
        if epoch < self.last_epoch {
            return Err(Error::CorruptChangelog {
                view: self.view.clone(),
                offset,
                reason: format!("epoch {epoch} after epoch {}", self.last_epoch),
            });
        }
        if epoch > self.last_epoch {
            self.finish_through(self.last_epoch);
            self.last_epoch = epoch;
        }
        if !self.check_rows {
            debug_assert!(!self.track_rows, "a reader of unchecked rows holds none");
            let row = UncheckedRow { offset, bytes: key.into() };
            self.unchecked.push_back(TailEvent::Change { epoch, diff, row });
            return Ok(());
        }
        let row = RawRow::check(&self.view, offset, key)?;
        if self.track_rows {
            self.track(offset, key, count, diff)?;
        }
        self.queue.push_back(RawEvent::Change { epoch, diff, row });
        Ok(())
    }

    /// Moves a row held from `count - diff` to `count`.
    fn track(&mut self, offset: u64, key: &[u8], count: i64, diff: i64) -> Result<()> {
        let Some(before) = count.checked_sub(diff) else {
            return Err(Error::CorruptChangelog {
                view: self.view.clone(),
                offset,
                reason: format!("multiplicity {count} and change {diff} overflow"),
            });
        };
        let held = self.counts.set(key, count);
        if held != before {
            self.counts.set(key, held); // as it was: the reader fails here
            return Err(Error::EpochUnavailable {
                view: self.view.clone(),
                epoch: self.as_of,
                reason: format!(
                    "the changelog was compacted past it (at offset {offset} a row goes from {before} to {count}, \
                     but this reader holds {held}); subscribe again with a later --as-of or a fresh snapshot"
                ),
            });
        }
        Ok(())
    }

    /// Sets the multiplicity held for `key` (0: not held).
    fn hold(&mut self, key: &[u8], count: i64) {
        self.counts.set(key, count);
    }

    /// The rows held and their multiplicities, in byte order.
    fn sorted_counts(&self) -> Vec<(&[u8], i64)> {
        self.counts.sorted()
    }

    /// Queues a progress mark for `epoch` unless one at or past it was queued.
    fn finish_through(&mut self, epoch: Epoch) {
        if epoch > self.last_progress {
            if self.check_rows {
                self.queue.push_back(RawEvent::Progress { epoch, progress: true });
            } else {
                self.unchecked.push_back(TailEvent::Progress { epoch });
            }
            self.last_progress = epoch;
        }
    }
}

fn record_count(record: &RecordView<'_>) -> i64 {
    record.value.and_then(|v| <[u8; 8]>::try_from(v).ok()).map_or(0, i64::from_be_bytes)
}

/// The row's JSON text without surrounding whitespace, checked as a parse
/// into a tree would check it (so that every later parse of it succeeds).
fn validate_row<'k>(view: &str, offset: u64, key: &'k [u8]) -> Result<&'k str> {
    crate::json_check::check(key).map_err(|e| not_json(view, offset, &e))?;
    // JSON that parses is UTF-8 (outside strings it is ASCII).
    let text = std::str::from_utf8(key).map_err(|e| not_json(view, offset, &e))?;
    Ok(trim_json_space(text))
}

/// The error for the row at `offset` of `view`'s changelog that is not JSON.
fn not_json(view: &str, offset: u64, reason: &dyn std::fmt::Display) -> Error {
    Error::CorruptChangelog { view: view.to_owned(), offset, reason: format!("the row is not JSON: {reason}") }
}

/// `text` without the JSON whitespace around it.
fn trim_json_space(text: &str) -> &str {
    let space = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r');
    if text.bytes().next().is_some_and(space) || text.bytes().next_back().is_some_and(space) {
        return text.trim_matches(|c: char| c.is_ascii() && space(c as u8));
    }
    text
}
