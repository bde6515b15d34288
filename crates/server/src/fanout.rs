//! Fan-out: one changelog reader per view for all of its subscribers.
//!
//! A [`Hub`] reads its view's changelog once, on its own thread, as the
//! server's checkpoint watch ([`crate::commits`]) says epochs commit; it
//! decodes each change once and encodes it once as a COPY text line (the
//! form with the `mp_progressed` column is made from it once, when a
//! subscriber with PROGRESS first reads the entry), into a ring of [`Entry`]s
//! shared by every subscriber. A subscriber is a position (a sequence
//! number) in that ring: delivering a change to it is a reference-counted
//! slice and a socket write, so k subscribers cost one decode, not k.
//!
//! The hub keeps no rows: it reads the changelog from its committed end
//! on ([`Subscription::tail_unchecked`]), so its memory and its work per
//! change do not grow with the view. It takes each row as read and one
//! pass both encodes and checks it ([`LinesBuilder::push_change`] refuses
//! what a parse into a tree refuses), instead of a check pass and then an
//! encode pass: a row that is not JSON ends every stream with the
//! changelog's error naming its offset, after the changes before it. A new subscriber's snapshot is read from the
//! changelog off the hub's thread, at the wire's priority, by the first
//! subscriber that asks ([`Hub::join_with_snapshot`]), and shared with the
//! others that join while the ring still holds what follows it and a
//! subscriber that joined on it has not yet read a later epoch (each lets
//! it go then: new joiners want the newest commit anyway). A dropped
//! view ends every stream with an error that says the rows held are void
//! (42P01): nothing is retracted, and nothing is left silently stale.
//!
//! Invariants:
//! - Entries are appended in changelog order; sequence numbers are dense
//!   and only grow; an epoch's `Progress` entry follows all its rows.
//! - The ring holds at most `ring_bytes_max` bytes of lines (plus the one
//!   entry being appended). An entry leaves it when every registered
//!   position is past it (kept while the ring is under [`RING_BYTES_IDLE`],
//!   for readers about to join), or when the ring is over its cap: then a
//!   subscriber whose next entry left is behind (SQLSTATE 53200), and
//!   never silently skips it.
//! - `base`: every change of an epoch at or before it is before the ring's
//!   first entry, and every change after it is in the ring or not yet read.
//!   A reader that has delivered every epoch through P may join at the
//!   ring's start only if `base <= P`, skipping entries of epochs <= P.
//! - The hub never waits for a subscriber: a slow one falls behind alone.
//! - A snapshot join registers its position before it reads the snapshot:
//!   every entry before the position is of an epoch the snapshot covers
//!   (the hub reads only committed epochs, the snapshot is of the newest),
//!   and the subscriber skips the entries after it that the snapshot also
//!   covers, so it sees each change exactly once.
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use bytes::Bytes;
use millpond_dataflow::{Epoch, RawEvent, Subscription, TailEvent, UncheckedRow};
use millpond_sql::Type;
use tokio::sync::watch;

use crate::commits::{Commit, Commits, Wake};
use crate::copy_line::LinesBuilder;
use crate::pg::VIEW_READY_POLL_MS;
use crate::priority::Spawner;

/// The ring's cap in bytes of encoded lines, per view, unless configured:
/// how far (in bytes of changes) a subscriber may fall behind the newest
/// commit before it is dropped with 53200.
pub const SUBSCRIBER_BUFFER_BYTES_DEFAULT: usize = 64 << 20;
/// Below this many bytes the ring keeps entries every subscriber has
/// passed, so that a reader catching up on its own can still join it.
pub(crate) const RING_BYTES_IDLE: usize = 1 << 20;
/// Rows per ring entry (one epoch's rows span several entries).
const ROWS_PER_ENTRY_MAX: usize = 1024;
/// Bytes of lines per ring entry: a subscriber blocked on a full socket
/// holds what it took, so entries stay small.
const ENTRY_BYTES_MAX: usize = 64 << 10;
/// Bytes of entries a subscriber takes from the ring at once.
const TAKE_BYTES_MAX: usize = 64 << 10;
/// How long an idle hub sleeps at most between looks at its stop flag
/// (a commit or the last subscriber leaving wakes it).
const IDLE_WAIT_MS: u64 = 1_000;
/// Changelog records the hub reads per poll (its memory bound per poll,
/// and small beside the ring, so a burst is appended in steps that
/// subscribers can follow): about one entry, so that an epoch's first
/// changes go out while the hub still decodes the rest.
const RECORDS_PER_POLL_MAX: usize = ROWS_PER_ENTRY_MAX;

/// COPY text lines in one buffer; each line is a slice of it.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    buf: Bytes,
    ends: Vec<u32>,
}

impl Lines {
    fn build(builder: LinesBuilder) -> Lines {
        let (buf, ends) = builder.finish();
        Lines { buf, ends }
    }

    /// Each line, a slice sharing the buffer.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Bytes> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter().copied()).map(|(start, end)| self.buf.slice(start as usize..end as usize))
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn bytes(&self) -> usize {
        self.buf.len() + 4 * self.ends.len()
    }

    /// The same lines with `mp_progressed` (`f`) after their first field
    /// (`mp_epoch`).
    fn flagged(&self) -> Lines {
        let mut builder = LinesBuilder::default();
        for line in self.iter() {
            let at = line.iter().position(|&b| b == b'\t').expect("a change line has fields after mp_epoch");
            builder.push_flagged(&line[..at], &line[at..]);
        }
        Lines::build(builder)
    }

    /// What [`Lines::flagged`] of these lines takes: 2 bytes more a line.
    fn flagged_bytes(&self) -> usize {
        self.bytes() + 2 * self.ends.len()
    }
}

/// A change entry's lines. Those with `mp_progressed` are made from the
/// plain ones when a subscriber with PROGRESS first asks (on its thread,
/// once per entry), not by the hub for every entry: most streams never
/// need them.
#[derive(Debug)]
pub(crate) struct RowLines {
    plain: Lines,
    flagged: std::sync::OnceLock<Lines>,
}

impl RowLines {
    fn new(plain: Lines) -> RowLines {
        RowLines { plain, flagged: std::sync::OnceLock::new() }
    }

    /// The lines, with `mp_progressed` when `progress`.
    pub(crate) fn lines(&self, progress: bool) -> &Lines {
        if progress { self.flagged.get_or_init(|| self.plain.flagged()) } else { &self.plain }
    }

    /// Bytes of the forms made so far.
    fn allocated_bytes(&self) -> usize {
        self.plain.bytes() + self.flagged.get().map_or(0, Lines::bytes)
    }

    /// Bytes of both forms (the flagged one counted before it is made, so
    /// that what the ring counts never changes under it).
    fn bytes(&self) -> usize {
        self.plain.bytes() + self.plain.flagged_bytes()
    }
}

/// One unit of the ring.
#[derive(Debug)]
pub(crate) enum Entry {
    /// Changes of one epoch, as COPY lines without and with `mp_progressed`.
    Rows { epoch: Epoch, lines: RowLines },
    /// Every change of `epoch` and before precedes this entry.
    Progress { epoch: Epoch },
}

impl Entry {
    pub(crate) fn epoch(&self) -> Epoch {
        match self {
            Entry::Rows { epoch, .. } | Entry::Progress { epoch } => *epoch,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Entry::Rows { lines, .. } => lines.bytes(),
            Entry::Progress { .. } => 16,
        }
    }
}

/// A view's rows at one epoch, as snapshot lines (`mp_diff` is the count).
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) epoch: Epoch,
    pub(crate) lines: RowLines,
    /// Where the changelog it was read from began.
    since: Epoch,
}

/// A snapshot and the ring position it continues from.
#[derive(Debug)]
struct SharedSnapshot {
    snapshot: Weak<Snapshot>,
    /// The sequence number registered before it was read.
    seq: u64,
}

/// Why a snapshot join failed.
#[derive(Debug)]
pub(crate) enum JoinError {
    /// The view has not committed within the wait.
    NotReady,
    /// The stream ended (the view went, or its reader failed).
    Ended(End),
    /// The snapshot read is of another changelog than the hub's (the view
    /// was created again): the hub serves no new subscriber now; get the
    /// view's hub again.
    Stale,
}

/// Why a stream ends: the SQLSTATE and message every subscriber gets.
pub(crate) type End = (&'static str, String);

/// A subscriber's place in a hub.
#[derive(Debug)]
pub(crate) struct Joined {
    /// The snapshot at the join epoch (only for a snapshot join), held so
    /// that others joining at that epoch share it; the stream lets it go
    /// when it reads an entry of a later epoch (then new joiners want a
    /// newer one), so a subscriber does not keep a view's rows for life.
    pub(crate) snapshot: Option<Arc<Snapshot>>,
    /// The sequence number of the next entry to deliver (the hub reads it
    /// to know what every subscriber has passed).
    pub(crate) position: Arc<AtomicU64>,
    /// Entries of epochs at or before this were delivered another way.
    pub(crate) skip_through: Epoch,
}

/// What a subscriber finds at its position.
#[derive(Debug)]
pub(crate) enum Found {
    Entries(Vec<Arc<Entry>>),
    /// Nothing new yet.
    Nothing,
    /// Its next entry left the ring: it fell behind.
    Behind,
    /// The stream is over (after every entry was delivered).
    Ended(End),
}

#[derive(Debug, Default)]
struct Ring {
    entries: VecDeque<Arc<Entry>>,
    first_seq: u64,
    bytes: usize,
    base: Epoch,
    /// The newest epoch of any entry pushed (or the one the reader opened
    /// at): a snapshot that continues from the ring's end covers it.
    read_through: Epoch,
    /// The hub's reader is open (the view had committed).
    opened: bool,
    positions: Vec<Weak<AtomicU64>>,
    end: Option<End>,
}

impl Ring {
    fn next_seq(&self) -> u64 {
        self.first_seq + self.entries.len() as u64
    }

    fn register(&mut self, seq: u64) -> Arc<AtomicU64> {
        let position = Arc::new(AtomicU64::new(seq));
        self.positions.push(Arc::downgrade(&position));
        position
    }

    fn push(&mut self, entry: Entry, bytes_max: usize) {
        self.read_through = self.read_through.max(entry.epoch());
        self.bytes += entry.bytes();
        self.entries.push_back(Arc::new(entry));
        self.positions.retain(|p| p.strong_count() > 0);
        let passed = self.positions.iter().filter_map(Weak::upgrade).map(|p| p.load(Ordering::Acquire)).min();
        let passed = passed.unwrap_or_else(|| self.next_seq());
        while let Some(front) = self.entries.front() {
            let over = self.bytes > bytes_max;
            if !over && (self.first_seq >= passed || self.bytes <= RING_BYTES_IDLE) {
                break;
            }
            self.base = self.base.max(front.epoch());
            self.bytes -= front.bytes();
            self.entries.pop_front();
            self.first_seq += 1;
        }
        debug_assert!(self.bytes <= bytes_max.max(RING_BYTES_IDLE) || self.entries.len() == 1);
    }
}

/// One view's shared reader and ring.
#[derive(Debug)]
pub(crate) struct Hub {
    view: String,
    columns: Vec<(String, Type)>,
    ring: Mutex<Ring>,
    ring_bytes_max: usize,
    /// The next sequence number, sent whenever entries are appended or the
    /// stream ends: subscribers wait on it.
    appended: watch::Sender<u64>,
    /// Set once the reader is open or the stream ended: snapshot joins
    /// wait for it.
    ready: watch::Sender<bool>,
    /// The last snapshot read (shared while the ring holds what follows
    /// it and a subscriber holds it, see [`Joined::snapshot`]); the lock
    /// also makes joins that arrive together read one.
    snapshot: tokio::sync::Mutex<Option<SharedSnapshot>>,
    /// The same snapshot, for the metrics (which cannot wait on a join).
    last_snapshot: Mutex<Weak<Snapshot>>,
    stop: AtomicBool,
    /// Rung at each commit and at the stop.
    wake: Arc<Wake>,
    /// Subscribers found behind the ring so far (each then ends, 53200).
    behind: AtomicU64,
    /// Where the changelog its reader reads began (`ViewChangelog::since`),
    /// once it is open ([`SINCE_UNKNOWN`] before).
    since: AtomicU64,
    /// Set when a snapshot join found the view's changelog is no longer
    /// the one it reads: it serves no new subscriber.
    retired: AtomicBool,
}

/// A hub's `since` before its reader is open.
const SINCE_UNKNOWN: u64 = u64::MAX;

/// What a hub holds, for the metrics.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HubStats {
    pub(crate) ring_bytes: usize,
    pub(crate) positions: usize,
    pub(crate) behind: u64,
    /// Bytes of the last snapshot read (both its forms, once made) while
    /// a subscriber holds it; older ones still held are not counted.
    pub(crate) snapshot_bytes: usize,
}

impl Hub {
    /// A hub of `view` (not yet running) with an empty ring.
    fn new(view: &str, columns: Vec<(String, Type)>, ring_bytes_max: usize) -> Hub {
        Hub {
            view: view.to_owned(),
            columns,
            ring: Mutex::new(Ring::default()),
            ring_bytes_max: ring_bytes_max.max(1),
            appended: watch::channel(0).0,
            ready: watch::channel(false).0,
            snapshot: tokio::sync::Mutex::new(None),
            last_snapshot: Mutex::new(Weak::new()),
            stop: AtomicBool::new(false),
            wake: Arc::new(Wake::default()),
            behind: AtomicU64::new(0),
            since: AtomicU64::new(SINCE_UNKNOWN),
            retired: AtomicBool::new(false),
        }
    }

    /// Whether a new subscriber of the view with `columns`, whose changelog
    /// began at `since` as last committed (None: the view is not in it),
    /// may join this hub: not once it ended or was retired, nor when it
    /// reads another changelog (the view was dropped, maybe created again,
    /// and it has not read that yet) or has other columns. A hub still
    /// opening opens at the newest commit. A snapshot join checks again
    /// against the changelog it reads ([`JoinError::Stale`]).
    fn serves(&self, columns: &[(String, Type)], since: Option<Epoch>) -> bool {
        let read = self.since.load(Ordering::Acquire);
        self.ring().end.is_none()
            && !self.retired.load(Ordering::Acquire)
            && self.columns == columns
            && (read == SINCE_UNKNOWN || since == Some(read))
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The entries from `seq` on (about [`TAKE_BYTES_MAX`] of them, at
    /// least one), or why there are none.
    pub(crate) fn find(&self, seq: u64) -> Found {
        let ring = self.ring();
        assert!(seq <= ring.next_seq(), "a position {seq} past the ring's end {}", ring.next_seq());
        if seq < ring.first_seq {
            self.behind.fetch_add(1, Ordering::Relaxed);
            return Found::Behind;
        }
        let at = (seq - ring.first_seq) as usize;
        if at < ring.entries.len() {
            let mut bytes = 0;
            let taken = ring.entries.range(at..).take_while(|entry| {
                let take = bytes < TAKE_BYTES_MAX;
                bytes += entry.bytes();
                take
            });
            return Found::Entries(taken.cloned().collect());
        }
        match &ring.end {
            Some(end) => Found::Ended(end.clone()),
            None => Found::Nothing,
        }
    }

    /// Waits for entries at or after `seq` (or the end), at most
    /// `timeout`; false if none came.
    pub(crate) async fn changed(&self, seq: u64, timeout: Duration) -> bool {
        let mut appended = self.appended.subscribe();
        let came = appended.wait_for(|&next| next > seq || self.ring().end.is_some());
        matches!(tokio::time::timeout(timeout, came).await, Ok(Ok(_)))
    }

    /// A snapshot join: the view's rows as of a committed epoch at or after
    /// `min_epoch` (read from `data_dir`'s changelog on a blocking thread,
    /// or shared with an earlier join), and a position from which the ring
    /// has every later change. Waits at most `wait` for the view to commit.
    /// A read holds a permit of `opens` (the server's bound on snapshot
    /// reads at once) until it is done, even if the join is abandoned.
    pub(crate) async fn join_with_snapshot(
        &self,
        data_dir: &std::path::Path,
        opens: &Arc<tokio::sync::Semaphore>,
        min_epoch: Epoch,
        wait: Duration,
    ) -> Result<Joined, JoinError> {
        let mut ready = self.ready.subscribe();
        match tokio::time::timeout(wait, ready.wait_for(|&ready| ready)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) | Err(_) => return Err(JoinError::NotReady),
        }
        if let Some(end) = self.ended() {
            return Err(JoinError::Ended(end));
        }
        let mut shared = self.snapshot.lock().await;
        if let Some(joined) = self.join_shared(shared.as_ref(), min_epoch) {
            return Ok(joined);
        }
        let closed = |_| JoinError::Ended(("XX000", "the server is stopping".into()));
        let permit = opens.clone().acquire_owned().await.map_err(closed)?;
        // Registered first: what the ring holds before it, the snapshot covers.
        let (seq, position, read_through) = {
            let mut ring = self.ring();
            let seq = ring.next_seq();
            (seq, ring.register(seq), ring.read_through)
        };
        let (dir, view, columns) = (data_dir.to_path_buf(), self.view.clone(), self.columns.clone());
        let read = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            read_snapshot(&dir, &view, &columns)
        });
        let snapshot = match read.await {
            Ok(Ok(snapshot)) => Arc::new(snapshot),
            Ok(Err(error)) => return Err(JoinError::Ended(crate::subscribe::error_parts(error, 0))),
            Err(panicked) => {
                return Err(JoinError::Ended(("XX000", format!("reading the snapshot failed: {panicked}"))));
            }
        };
        let read = self.since.load(Ordering::Acquire);
        if read != SINCE_UNKNOWN && snapshot.since != read {
            self.retired.store(true, Ordering::Release);
            return Err(JoinError::Stale);
        }
        if snapshot.epoch < read_through {
            // Published epochs only grow: a checkpoint that went back.
            let message = format!(
                "the view's snapshot is of epoch {}, older than epoch {read_through} its reader had read",
                snapshot.epoch
            );
            return Err(JoinError::Ended(("XX000", message)));
        }
        debug_assert!(snapshot.epoch >= min_epoch, "published epochs only grow");
        *shared = Some(SharedSnapshot { snapshot: Arc::downgrade(&snapshot), seq });
        *self.last_snapshot.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&snapshot);
        let skip_through = snapshot.epoch;
        Ok(Joined { snapshot: Some(snapshot), position, skip_through })
    }

    /// A join on the last snapshot read, if it is new enough and the ring
    /// still holds everything after it.
    fn join_shared(&self, shared: Option<&SharedSnapshot>, min_epoch: Epoch) -> Option<Joined> {
        let shared = shared?;
        let snapshot = shared.snapshot.upgrade().filter(|s| s.epoch >= min_epoch)?;
        let mut ring = self.ring();
        if ring.end.is_some() || shared.seq < ring.first_seq {
            return None;
        }
        let position = ring.register(shared.seq);
        let skip_through = snapshot.epoch;
        Some(Joined { snapshot: Some(snapshot), position, skip_through })
    }

    /// Why the stream ended, if it did.
    pub(crate) fn ended(&self) -> Option<End> {
        self.ring().end.clone()
    }

    /// Joins a reader that has delivered every epoch through `progressed`,
    /// if the ring still holds everything after it.
    pub(crate) fn join_after(&self, progressed: Epoch) -> Option<Joined> {
        let mut ring = self.ring();
        if !ring.opened || ring.end.is_some() || ring.base > progressed {
            return None;
        }
        let skipped = ring.entries.iter().take_while(|e| e.epoch() <= progressed).count() as u64;
        let seq = ring.first_seq + skipped;
        let position = ring.register(seq);
        Some(Joined { snapshot: None, position, skip_through: progressed })
    }

    pub(crate) fn view(&self) -> &str {
        &self.view
    }

    pub(crate) fn stats(&self) -> HubStats {
        let ring = self.ring();
        let positions = ring.positions.iter().filter(|p| p.strong_count() > 0).count();
        let snapshot = self.last_snapshot.lock().unwrap_or_else(|e| e.into_inner()).upgrade();
        HubStats {
            ring_bytes: ring.bytes,
            positions,
            behind: self.behind.load(Ordering::Relaxed),
            snapshot_bytes: snapshot.map_or(0, |s| s.lines.allocated_bytes()),
        }
    }
}

/// A subscriber's hold on a hub: the last one dropped stops its thread.
#[derive(Debug)]
pub(crate) struct HubHandle {
    pub(crate) hub: Arc<Hub>,
}

impl Drop for HubHandle {
    fn drop(&mut self) {
        self.hub.stop.store(true, Ordering::Release);
        self.hub.wake.notify();
    }
}

/// The server's hubs, one per view with subscribers.
#[derive(Debug)]
pub(crate) struct Hubs {
    hubs: Mutex<HashMap<String, Weak<HubHandle>>>,
    /// Hubs start from the engine's priority, not from the client
    /// thread's that asked for one (a thread may not lower its nice
    /// value again), then take `nice`: below the dataflow, above the
    /// client threads (see [`crate::priority`]).
    spawner: Arc<Spawner>,
    nice: i32,
}

impl Hubs {
    /// Hubs whose threads `spawner` starts (at the engine's priority),
    /// each then at nice value `nice`.
    pub(crate) fn new(spawner: Arc<Spawner>, nice: i32) -> Hubs {
        Hubs { hubs: Mutex::default(), spawner, nice }
    }

    /// The view's running hub, or a new one reading `data_dir` (see
    /// [`Hub::serves`]; the view's changelog `since` is the last commit's).
    pub(crate) fn get(
        &self,
        data_dir: &std::path::Path,
        commits: &Commits,
        view: &str,
        columns: Vec<(String, Type)>,
        ring_bytes_max: usize,
    ) -> std::io::Result<Arc<HubHandle>> {
        let since = commits.subscribe().borrow().as_deref().filter(|meta| meta.views.contains_key(view)).map(|meta| {
            // As a reader takes it (`Subscription::since`): 0 when not recorded.
            meta.changelogs.get(view).map_or(0, |c| c.since)
        });
        let mut hubs = self.hubs.lock().unwrap_or_else(|e| e.into_inner());
        hubs.retain(|_, hub| hub.strong_count() > 0);
        if let Some(handle) = hubs.get(view).and_then(Weak::upgrade)
            && handle.hub.serves(&columns, since)
        {
            return Ok(handle);
        }
        let hub = Arc::new(Hub::new(view, columns, ring_bytes_max));
        commits.register(&hub.wake);
        let commits = commits.subscribe();
        let (running, dir, nice) = (hub.clone(), data_dir.to_path_buf(), self.nice);
        self.spawner.spawn(format!("millpond-fanout-{view}"), move || {
            crate::priority::lower_current_thread(nice);
            run(&running, &dir, commits)
        })?;
        let handle = Arc::new(HubHandle { hub });
        hubs.insert(view.to_owned(), Arc::downgrade(&handle));
        Ok(handle)
    }

    /// The hubs running now.
    pub(crate) fn running(&self) -> Vec<Arc<HubHandle>> {
        let hubs = self.hubs.lock().unwrap_or_else(|e| e.into_inner());
        hubs.values().filter_map(Weak::upgrade).collect()
    }
}

/// The hub's thread: open the reader, then follow commits until stopped
/// or the stream ends.
fn run(hub: &Hub, data_dir: &std::path::Path, mut commits: watch::Receiver<Commit>) {
    let Some(mut reader) = open(hub, data_dir) else { return };
    hub.since.store(reader.since(), Ordering::Release);
    {
        let mut ring = hub.ring();
        ring.base = reader.progressed();
        ring.read_through = reader.progressed();
        ring.opened = true;
    }
    hub.ready.send_replace(true);
    while !hub.stop.load(Ordering::Acquire) {
        let commit = commits.borrow_and_update().clone();
        let caught_up = match commit.as_deref() {
            Some(meta) => reader.poll_at_most(meta, RECORDS_PER_POLL_MAX),
            None => Ok(true),
        };
        if let Err(error) = append(hub, &mut reader) {
            return end(hub, crate::subscribe::error_parts(error, 0));
        }
        match caught_up {
            Err(error) => return end(hub, crate::subscribe::error_parts(error, 0)),
            Ok(false) => continue,
            Ok(true) => {}
        }
        // A commit or the stop that came since rang already: the wait then
        // returns at once.
        if !commits.has_changed().unwrap_or(false) {
            hub.wake.wait(Duration::from_millis(IDLE_WAIT_MS));
        }
    }
}

/// Opens the hub's reader at the last commit's end (no rows), waiting
/// while the view has not committed; None when stopped or failed.
fn open(hub: &Hub, data_dir: &std::path::Path) -> Option<Subscription> {
    loop {
        if hub.stop.load(Ordering::Acquire) {
            return None;
        }
        match Subscription::tail_unchecked(data_dir, &hub.view) {
            Ok(reader) => return Some(reader),
            Err(millpond_dataflow::Error::UnknownView(_)) => {
                hub.wake.wait(Duration::from_millis(VIEW_READY_POLL_MS));
            }
            Err(error) => {
                end(hub, crate::subscribe::error_parts(error, 0));
                return None;
            }
        }
    }
}

/// Moves what the reader queued into the ring, as entries. Its rows come
/// unchecked ([`Subscription::tail_unchecked`]): encoding each is its check,
/// and the first that is not a JSON row fails the hub, after the entries
/// before it (its epoch never gets a progress mark).
fn append(hub: &Hub, reader: &mut Subscription) -> millpond_dataflow::Result<()> {
    let mut rows = Rows::default();
    let mut pushed = false;
    let mut failed = None;
    while let Some(event) = reader.next_unchecked() {
        let epoch = event.epoch();
        let boundary = rows.epoch.is_some_and(|first| first != epoch);
        let full = rows.len() >= ROWS_PER_ENTRY_MAX || rows.plain.bytes() >= ENTRY_BYTES_MAX;
        if matches!(event, TailEvent::Progress { .. }) || boundary || full {
            pushed |= rows.push_to(hub);
        }
        match event {
            TailEvent::Progress { epoch } => {
                hub.ring().push(Entry::Progress { epoch }, hub.ring_bytes_max);
                pushed = true;
            }
            TailEvent::Change { epoch, diff, row } => {
                if let Err(error) = rows.push_change(epoch, diff, &row, &hub.columns) {
                    // The checked readers' error for it (the same words).
                    failed = Some(row.check(&hub.view).err().unwrap_or_else(|| row.corrupt(&hub.view, &error)));
                    break;
                }
            }
        }
    }
    pushed |= rows.push_to(hub);
    if pushed {
        let next = hub.ring().next_seq();
        hub.appended.send_replace(next);
    }
    failed.map_or(Ok(()), Err)
}

/// Changes of one epoch being encoded into an entry.
#[derive(Default)]
struct Rows {
    epoch: Option<Epoch>,
    plain: LinesBuilder,
}

impl Rows {
    fn len(&self) -> usize {
        self.plain.len()
    }

    /// Encodes one change read unchecked; the error of a row that is not JSON.
    fn push_change(
        &mut self,
        epoch: Epoch,
        diff: i64,
        row: &UncheckedRow,
        columns: &[(String, Type)],
    ) -> Result<(), String> {
        let text = std::str::from_utf8(row.bytes()).map_err(|e| e.to_string())?;
        self.plain.push_change(epoch, diff, text, columns, false).map_err(|e| e.to_string())?;
        self.epoch = Some(epoch);
        Ok(())
    }

    /// Pushes what is encoded as one entry; false if nothing is.
    fn push_to(&mut self, hub: &Hub) -> bool {
        let Some(epoch) = self.epoch.take() else { return false };
        let rows = std::mem::take(self);
        debug_assert!(!rows.plain.is_empty());
        let entry = Entry::Rows { epoch, lines: RowLines::new(Lines::build(rows.plain)) };
        hub.ring().push(entry, hub.ring_bytes_max);
        true
    }
}

/// The view's rows as of the last committed epoch, as snapshot lines.
fn read_snapshot(
    data_dir: &std::path::Path,
    view: &str,
    columns: &[(String, Type)],
) -> millpond_dataflow::Result<Snapshot> {
    let mut reader = Subscription::open(data_dir, view, None, true)?;
    let epoch = reader.as_of();
    let mut plain = LinesBuilder::default();
    while let Some(RawEvent::Change { epoch: at, diff, row }) = reader.next_raw() {
        debug_assert_eq!(at, epoch, "a snapshot's rows come before its progress mark");
        plain.push_change(epoch, diff, row.get(), columns, false).expect("a raw row is JSON checked when it was read");
    }
    Ok(Snapshot { epoch, lines: RowLines::new(Lines::build(plain)), since: reader.since() })
}

/// Ends the stream for every subscriber (after the entries they have).
fn end(hub: &Hub, end: End) {
    let next = {
        let mut ring = hub.ring();
        ring.end = Some(end);
        ring.next_seq()
    };
    hub.ready.send_replace(true);
    hub.appended.send_replace(next);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(texts: &[&str]) -> Lines {
        let mut buf = Vec::new();
        let mut ends = Vec::new();
        for text in texts {
            buf.extend_from_slice(text.as_bytes());
            ends.push(buf.len() as u32);
        }
        Lines { buf: buf.into(), ends }
    }

    fn rows(epoch: Epoch, text: &str) -> Entry {
        Entry::Rows { epoch, lines: RowLines::new(texts(&[text])) }
    }

    #[test]
    fn lines_slice_one_buffer() {
        let lines = texts(&["a\n", "bc\n", "", "d\n"]);
        let got: Vec<Bytes> = lines.iter().collect();
        assert_eq!(got, [&b"a\n"[..], b"bc\n", b"", b"d\n"]);
        assert_eq!(lines.len(), 4);
    }

    #[test]
    fn flagged_lines_are_the_lines_a_change_gets_with_progress() {
        let columns: Vec<(String, Type)> = ["a", "b"].iter().map(|n| ((*n).to_owned(), Type::Text)).collect();
        let rows = [r#"{"a":1,"b":"x\ty"}"#, r#"{"a\u0062":1}"#, r#"[1]"#, r#"{"a":"\t","b":null}"#];
        let (mut plain, mut flagged) = (LinesBuilder::default(), LinesBuilder::default());
        for (epoch, row) in (12_345..).zip(rows) {
            plain.push_change(epoch, -3, row, &columns, false).unwrap();
            flagged.push_change(epoch, -3, row, &columns, true).unwrap();
        }
        let lines = RowLines::new(Lines::build(plain));
        let expected = Lines::build(flagged);
        let made = lines.lines(true);
        assert_eq!(made.iter().collect::<Vec<_>>(), expected.iter().collect::<Vec<_>>());
        assert_eq!(lines.bytes(), lines.lines(false).bytes() + made.bytes(), "counted before it was made");
    }

    /// A changelog record of `row` at epoch 2 (diff 1, count 1).
    fn change(row: &str) -> millpond_log::Record {
        let header =
            |key: &str| millpond_log::Header { key: key.to_owned(), value: Some(vec![0, 0, 0, 0, 0, 0, 0, 0]) };
        let (mut epoch, mut diff) = (header("epoch"), header("diff"));
        epoch.value.as_mut().unwrap()[7] = 2;
        diff.value.as_mut().unwrap()[7] = 1;
        millpond_log::Record {
            key: Some(row.as_bytes().to_vec()),
            value: Some(1i64.to_be_bytes().to_vec()),
            timestamp_ms: 0,
            headers: vec![epoch, diff],
        }
    }

    fn publish(dir: &std::path::Path, epoch: u64, end: u64) -> millpond_dataflow::CheckpointMeta {
        let meta = millpond_dataflow::CheckpointMeta {
            version: millpond_dataflow::CHECKPOINT_VERSION,
            epoch,
            sinks: [("view.v".to_owned(), end)].into(),
            views: [("v".to_owned(), "view.v".to_owned())].into(),
            changelogs: [("v".to_owned(), millpond_dataflow::ViewChangelog::default())].into(),
            ..Default::default()
        };
        std::fs::write(dir.join(millpond_dataflow::CHECKPOINT_FILE), serde_json::to_vec(&meta).unwrap()).unwrap();
        meta
    }

    /// The hub reads rows unchecked: encoding is their check. A row a tree
    /// refuses (valid syntax, a lone surrogate) fails the hub naming its
    /// offset, after the lines before it and without its epoch's mark.
    #[test]
    fn a_row_that_is_not_json_fails_the_hub_naming_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let log = millpond_log::Log::open(dir.path(), millpond_log::LogOptions::default()).unwrap();
        log.create_topic("view.v", millpond_log::TopicConfig::default()).unwrap();
        let rows = [r#"{"a":"x"}"#, r#"{"a":"y","b":1e400}"#, r#"{"a":"\ud800"}"#, r#"{"a":"z"}"#];
        log.append("view.v", 0, &rows.map(change)[..2]).unwrap();
        log.append("view.v", 0, &rows.map(change)[2..]).unwrap();
        log.close().unwrap();
        publish(dir.path(), 1, 0);
        let mut reader = Subscription::tail_unchecked(dir.path(), "v").unwrap();
        let hub = Hub::new("v", vec![("a".to_owned(), Type::Text)], SUBSCRIBER_BUFFER_BYTES_DEFAULT);
        reader.poll_at(&publish(dir.path(), 2, 4)).unwrap();
        match append(&hub, &mut reader) {
            Err(millpond_dataflow::Error::CorruptChangelog { view, offset: 1, reason }) => {
                assert_eq!(view, "v");
                assert!(reason.contains("not JSON"), "{reason}");
            }
            other => panic!("expected the row at offset 1 refused, got {other:?}"),
        }
        let ring = hub.ring();
        let entries: Vec<&Entry> = ring.entries.iter().map(|entry| &**entry).collect();
        match &entries[..] {
            [Entry::Rows { epoch: 2, lines }] => {
                let got: Vec<Bytes> = lines.lines(false).iter().collect();
                assert_eq!(got, [&b"2\t1\tx\n"[..]]);
            }
            other => panic!("the line before the bad row, no mark: {other:?}"),
        }
    }

    /// A snapshot join that reads another changelog than the hub's (the view
    /// was created again before the hub saw it) retires the hub instead of
    /// joining it; a join on the hub's own changelog joins.
    #[tokio::test]
    async fn a_snapshot_join_on_another_changelog_retires_the_hub() {
        let dir = tempfile::tempdir().unwrap();
        let log = millpond_log::Log::open(dir.path(), millpond_log::LogOptions::default()).unwrap();
        log.create_topic("view.v", millpond_log::TopicConfig::default()).unwrap();
        log.append("view.v", 0, &[change(r#"{"a":"x"}"#)]).unwrap();
        log.close().unwrap();
        publish(dir.path(), 2, 1); // the changelog's since: 0
        let columns = vec![("a".to_owned(), Type::Text)];
        let opens = Arc::new(tokio::sync::Semaphore::new(1));
        let wait = Duration::from_secs(5);
        let stale = Hub::new("v", columns.clone(), SUBSCRIBER_BUFFER_BYTES_DEFAULT);
        stale.since.store(5, Ordering::Release);
        stale.ready.send_replace(true);
        assert!(matches!(stale.join_with_snapshot(dir.path(), &opens, 0, wait).await, Err(JoinError::Stale)));
        assert!(!stale.serves(&columns, Some(5)), "retired");
        let current = Hub::new("v", columns.clone(), SUBSCRIBER_BUFFER_BYTES_DEFAULT);
        current.since.store(0, Ordering::Release);
        current.ready.send_replace(true);
        let joined = current.join_with_snapshot(dir.path(), &opens, 0, wait).await.unwrap();
        let snapshot = joined.snapshot.expect("a snapshot join reads one");
        assert_eq!((snapshot.epoch, snapshot.lines.lines(false).len()), (2, 1));
        assert!(current.serves(&columns, Some(0)));
    }

    /// A view dropped and created again has a new changelog: a subscriber
    /// that comes before the hub read the drop gets a new hub, not the old
    /// one (which would end its stream with 42P01 though the view exists).
    #[test]
    fn a_hub_serves_only_its_own_changelog_and_columns_while_it_runs() {
        let columns = vec![("a".to_owned(), Type::Text)];
        let hub = Hub::new("v", columns.clone(), SUBSCRIBER_BUFFER_BYTES_DEFAULT);
        assert!(hub.serves(&columns, Some(7)), "a hub still opening opens at the newest commit");
        hub.since.store(3, Ordering::Release);
        assert!(hub.serves(&columns, Some(3)));
        assert!(!hub.serves(&columns, None), "the view is gone from the last commit");
        assert!(!hub.serves(&columns, Some(7)), "the view was created again at epoch 7");
        assert!(!hub.serves(&[("b".to_owned(), Type::Text)], Some(3)), "other columns");
        hub.retired.store(true, Ordering::Release);
        assert!(!hub.serves(&columns, Some(3)), "a snapshot join found another changelog");
        hub.retired.store(false, Ordering::Release);
        hub.ring().end = Some(("42P01", "dropped".to_owned()));
        assert!(!hub.serves(&columns, Some(3)), "an ended hub serves no one");
    }

    #[test]
    fn the_ring_keeps_what_a_position_needs_until_the_cap_and_moves_base() {
        let mut ring = Ring::default();
        let slow = ring.register(0);
        let big = "x".repeat(RING_BYTES_IDLE);
        for epoch in 1..=3 {
            ring.push(rows(epoch, &big), 10 * RING_BYTES_IDLE);
            ring.push(Entry::Progress { epoch }, 10 * RING_BYTES_IDLE);
        }
        assert_eq!((ring.first_seq, ring.base), (0, 0), "a position at 0 holds everything under the cap");
        slow.store(2, Ordering::Release);
        ring.push(Entry::Progress { epoch: 4 }, 10 * RING_BYTES_IDLE);
        assert_eq!((ring.first_seq, ring.base), (2, 1), "passed entries leave once over the idle size");
        for epoch in 5..=20 {
            ring.push(rows(epoch, &big), 10 * RING_BYTES_IDLE);
        }
        assert!(ring.first_seq > 2, "over the cap, entries leave though a position needs them");
        assert!(ring.bytes <= 10 * RING_BYTES_IDLE);
        assert!(slow.load(Ordering::Acquire) < ring.first_seq, "the slow position is behind the ring");
        assert_eq!(ring.base, ring.entries.front().map(|e| e.epoch() - 1).unwrap());
    }
}
