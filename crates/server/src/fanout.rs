//! Fan-out: one changelog reader per view for all of its subscribers.
//!
//! A [`Hub`] reads its view's changelog once, on its own thread, as the
//! server's checkpoint watch ([`crate::commits`]) says epochs commit; it
//! decodes each change once and encodes it once as a COPY text line (with
//! and without the `mp_progressed` column), into a ring of [`Entry`]s
//! shared by every subscriber. A subscriber is a position (a sequence
//! number) in that ring: delivering a change to it is a reference-counted
//! slice and a socket write, so k subscribers cost one decode, not k.
//!
//! The hub keeps the view's rows as of what it has read (the reader's
//! multiplicities), so a new subscriber's snapshot is encoded from memory
//! at an epoch boundary, once per epoch for all who ask then, and a dropped
//! view is retracted row by row to every subscriber before its stream ends.
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
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use bytes::Bytes;
use millpond_dataflow::{Epoch, RawEvent, Subscription};
use millpond_sql::Type;
use serde_json::value::RawValue;
use tokio::sync::{oneshot, watch};

use crate::commits::{Commit, Commits, Wake};
use crate::copy_line::LinesBuilder;
use crate::pg::VIEW_READY_POLL_MS;

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
/// (a commit, a snapshot request or the last subscriber leaving wakes it).
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
}

/// One unit of the ring.
#[derive(Debug)]
pub(crate) enum Entry {
    /// Changes of one epoch, as COPY lines without and with `mp_progressed`.
    Rows { epoch: Epoch, plain: Lines, flagged: Lines },
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
            Entry::Rows { plain, flagged, .. } => plain.bytes() + flagged.bytes(),
            Entry::Progress { .. } => 16,
        }
    }
}

/// A view's rows at one epoch, as snapshot lines (`mp_diff` is the count).
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) epoch: Epoch,
    pub(crate) plain: Lines,
    pub(crate) flagged: Lines,
}

/// Why a stream ends: the SQLSTATE and message every subscriber gets.
pub(crate) type End = (&'static str, String);

/// A subscriber's place in a hub.
#[derive(Debug)]
pub(crate) struct Joined {
    /// The snapshot at the join epoch (only for a snapshot join).
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
    /// The hub's reader is open (the view had committed).
    opened: bool,
    positions: Vec<Weak<AtomicU64>>,
    end: Option<End>,
    snapshot: Option<(Epoch, Weak<Snapshot>)>,
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
    /// Snapshot joins waiting for an epoch boundary at or after theirs.
    requests: Mutex<Vec<(Epoch, oneshot::Sender<Joined>)>>,
    stop: AtomicBool,
    /// Rung at each commit, snapshot request and stop.
    wake: Arc<Wake>,
    /// Subscribers found behind the ring so far (each then ends, 53200).
    behind: AtomicU64,
}

/// What a hub holds, for the metrics.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HubStats {
    pub(crate) ring_bytes: usize,
    pub(crate) positions: usize,
    pub(crate) behind: u64,
}

impl Hub {
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

    /// A snapshot join: the hub answers at an epoch boundary at or after
    /// `min_epoch`, with the snapshot of that epoch.
    pub(crate) fn request_snapshot(&self, min_epoch: Epoch) -> oneshot::Receiver<Joined> {
        let (sender, receiver) = oneshot::channel();
        self.requests.lock().unwrap_or_else(|e| e.into_inner()).push((min_epoch, sender));
        self.wake.notify();
        receiver
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
        HubStats { ring_bytes: ring.bytes, positions, behind: self.behind.load(Ordering::Relaxed) }
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
    spawner: Spawner,
}

/// A hub thread's body.
type HubThread = Box<dyn FnOnce() + Send>;
/// A request to the spawner: the thread's name and body, and where to say
/// whether it started.
type SpawnRequest = (String, HubThread, std::sync::mpsc::SyncSender<std::io::Result<()>>);

/// Starts hub threads at the priority of the thread that made it (the
/// engine's opener, beside the runtime): a thread inherits its creator's
/// nice value and may not lower it again, and a hub asked for by a client
/// thread (at the wire's nice) would be starved by the runtime it must
/// keep up with. A hub's work is per change, like the dataflow's, not per
/// subscriber (measured: a hub at nice 10 delayed an epoch's first line by
/// up to 150-250 ms after its commit; at nice 0, 20 ms at p99).
#[derive(Debug)]
struct Spawner {
    requests: Mutex<std::sync::mpsc::Sender<SpawnRequest>>,
}

impl Spawner {
    fn new() -> Spawner {
        let (requests, received) = std::sync::mpsc::channel::<SpawnRequest>();
        // Ends when the hubs (and so the sender) are dropped.
        let started = std::thread::Builder::new().name("millpond-fanout-spawner".into()).spawn(move || {
            for (name, body, reply) in received {
                let _ = reply.send(std::thread::Builder::new().name(name).spawn(body).map(drop));
            }
        });
        if let Err(error) = started {
            eprintln!("millpond: no hub spawner ({error}); hubs start at their client's priority");
        }
        Spawner { requests: Mutex::new(requests) }
    }

    /// Starts `body` on a thread named `name` at the spawner's priority
    /// (or, without a spawner, at the caller's).
    fn spawn(&self, name: String, body: HubThread) -> std::io::Result<()> {
        let (reply, replied) = std::sync::mpsc::sync_channel(1);
        let sent = self.requests.lock().unwrap_or_else(|e| e.into_inner()).send((name, body, reply));
        match sent {
            Ok(()) => replied.recv().unwrap_or_else(|_| Err(std::io::Error::other("the hub spawner stopped"))),
            Err(std::sync::mpsc::SendError((name, body, _))) => {
                std::thread::Builder::new().name(name).spawn(body).map(drop)
            }
        }
    }
}

impl Default for Hubs {
    fn default() -> Self {
        Hubs { hubs: Mutex::default(), spawner: Spawner::new() }
    }
}

impl Hubs {
    /// The view's running hub, or a new one reading `data_dir`.
    pub(crate) fn get(
        &self,
        data_dir: &std::path::Path,
        commits: &Commits,
        view: &str,
        columns: Vec<(String, Type)>,
        ring_bytes_max: usize,
    ) -> std::io::Result<Arc<HubHandle>> {
        let mut hubs = self.hubs.lock().unwrap_or_else(|e| e.into_inner());
        hubs.retain(|_, hub| hub.strong_count() > 0);
        if let Some(handle) = hubs.get(view).and_then(Weak::upgrade)
            && handle.hub.ring().end.is_none()
            && handle.hub.columns == columns
        {
            return Ok(handle);
        }
        let hub = Arc::new(Hub {
            view: view.to_owned(),
            columns,
            ring: Mutex::new(Ring::default()),
            ring_bytes_max: ring_bytes_max.max(1),
            appended: watch::channel(0).0,
            requests: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            wake: Arc::new(Wake::default()),
            behind: AtomicU64::new(0),
        });
        commits.register(&hub.wake);
        let commits = commits.subscribe();
        let (running, dir) = (hub.clone(), data_dir.to_path_buf());
        self.spawner.spawn(format!("millpond-fanout-{view}"), Box::new(move || run(&running, &dir, commits)))?;
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
    {
        let mut ring = hub.ring();
        ring.base = reader.progressed();
        ring.opened = true;
    }
    while !hub.stop.load(Ordering::Acquire) {
        let commit = commits.borrow_and_update().clone();
        let caught_up = match commit.as_deref() {
            Some(meta) => reader.poll_at_most(meta, RECORDS_PER_POLL_MAX),
            None => Ok(true),
        };
        append(hub, &mut reader);
        match caught_up {
            Err(error) => return end(hub, crate::subscribe::error_parts(error, 0)),
            Ok(false) => continue,
            Ok(true) => answer_requests(hub, &reader),
        }
        // Caught up, idle until the next commit: the held rows' tables grow
        // now, a few at a time, rather than while a commit is delivered.
        while !commits.has_changed().unwrap_or(true) && reader.grow_ahead() {}
        // A commit, a request or the stop that came since rang already:
        // the wait then returns at once.
        if !commits.has_changed().unwrap_or(false) {
            hub.wake.wait(Duration::from_millis(IDLE_WAIT_MS));
        }
    }
}

/// Opens the hub's reader as of the last commit (keeping rows), waiting
/// while the view has not committed; None when stopped or failed.
fn open(hub: &Hub, data_dir: &std::path::Path) -> Option<Subscription> {
    loop {
        if hub.stop.load(Ordering::Acquire) {
            return None;
        }
        match Subscription::open(data_dir, &hub.view, None, false) {
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

/// Moves what the reader queued into the ring, as entries.
fn append(hub: &Hub, reader: &mut Subscription) {
    let mut rows = Rows::default();
    let mut pushed = false;
    while let Some(event) = reader.next_raw() {
        let epoch = event.epoch();
        let boundary = rows.epoch.is_some_and(|first| first != epoch);
        let full = rows.len() >= ROWS_PER_ENTRY_MAX || rows.plain.bytes() >= ENTRY_BYTES_MAX;
        if matches!(event, RawEvent::Progress { .. }) || boundary || full {
            pushed |= rows.push_to(hub);
        }
        match event {
            RawEvent::Progress { epoch, .. } => {
                hub.ring().push(Entry::Progress { epoch }, hub.ring_bytes_max);
                pushed = true;
            }
            RawEvent::Change { epoch, diff, row } => {
                rows.epoch = Some(epoch);
                LinesBuilder::push_change_to_both(
                    &mut rows.plain,
                    &mut rows.flagged,
                    (epoch, diff, &row),
                    &hub.columns,
                );
            }
        }
    }
    pushed |= rows.push_to(hub);
    if pushed {
        let next = hub.ring().next_seq();
        hub.appended.send_replace(next);
    }
}

/// Changes of one epoch being encoded into an entry.
#[derive(Default)]
struct Rows {
    epoch: Option<Epoch>,
    plain: LinesBuilder,
    flagged: LinesBuilder,
}

impl Rows {
    fn len(&self) -> usize {
        self.plain.len()
    }

    /// Pushes what is encoded as one entry; false if nothing is.
    fn push_to(&mut self, hub: &Hub) -> bool {
        let Some(epoch) = self.epoch.take() else { return false };
        let rows = std::mem::take(self);
        debug_assert!(!rows.plain.is_empty() && rows.plain.len() == rows.flagged.len());
        let entry = Entry::Rows { epoch, plain: Lines::build(rows.plain), flagged: Lines::build(rows.flagged) };
        hub.ring().push(entry, hub.ring_bytes_max);
        true
    }
}

/// At an epoch boundary: gives every waiting snapshot join the snapshot
/// of the epoch read (encoded once) and a position after it.
fn answer_requests(hub: &Hub, reader: &Subscription) {
    let epoch = reader.progressed();
    let requests: Vec<oneshot::Sender<Joined>> = {
        let mut waiting = hub.requests.lock().unwrap_or_else(|e| e.into_inner());
        let (ready, later) = std::mem::take(&mut *waiting).into_iter().partition(|(min, _)| *min <= epoch);
        *waiting = later;
        ready.into_iter().map(|(_, sender)| sender).collect()
    };
    if requests.is_empty() {
        return;
    }
    let cached = hub.ring().snapshot.as_ref().filter(|(at, _)| *at == epoch).and_then(|(_, s)| s.upgrade());
    let snapshot = cached.unwrap_or_else(|| {
        let snapshot = Arc::new(encode_snapshot(hub, reader, epoch));
        hub.ring().snapshot = Some((epoch, Arc::downgrade(&snapshot)));
        snapshot
    });
    let mut ring = hub.ring();
    let seq = ring.next_seq();
    for request in requests {
        let joined = Joined { snapshot: Some(snapshot.clone()), position: ring.register(seq), skip_through: epoch };
        let _ = request.send(joined); // a subscriber that left no longer waits
    }
}

fn encode_snapshot(hub: &Hub, reader: &Subscription, epoch: Epoch) -> Snapshot {
    let (mut plain, mut flagged) = (LinesBuilder::default(), LinesBuilder::default());
    for (row, count) in reader.held_rows() {
        let row: &RawValue = serde_json::from_slice(row).expect("the reader validated every row it holds");
        LinesBuilder::push_change_to_both(&mut plain, &mut flagged, (epoch, count, row), &hub.columns);
    }
    Snapshot { epoch, plain: Lines::build(plain), flagged: Lines::build(flagged) }
}

/// Ends the stream for every subscriber (after the entries they have).
fn end(hub: &Hub, end: End) {
    let next = {
        let mut ring = hub.ring();
        ring.end = Some(end);
        ring.next_seq()
    };
    hub.requests.lock().unwrap_or_else(|e| e.into_inner()).clear();
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
        Entry::Rows { epoch, plain: texts(&[text]), flagged: texts(&[text]) }
    }

    #[test]
    fn lines_slice_one_buffer() {
        let lines = texts(&["a\n", "bc\n", "", "d\n"]);
        let got: Vec<Bytes> = lines.iter().collect();
        assert_eq!(got, [&b"a\n"[..], b"bc\n", b"", b"d\n"]);
        assert_eq!(lines.len(), 4);
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
