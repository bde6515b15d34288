//! Commits: the runtime's published checkpoint, read once for the whole
//! server and handed to every subscriber, so that N subscribers cost one
//! read of `checkpoint.json` per commit, not N per poll.
//!
//! Threads that wait on their own (the fan-out hubs) register a [`Wake`]
//! and are woken at each commit instead of polling. The runtime of this
//! process rings the watch as it publishes ([`Commits::bell`]), so a commit
//! is read at once; the poll of the file remains for any other writer,
//! every [`COMMIT_POLL_MS`] until the bell first rings, then every
//! [`COMMIT_POLL_RUNG_MS`]: a server's runtime rings at every publish, and
//! a 5 ms timer is 200 wakeups a second that, on a machine whose other
//! cores are busy, land on a timely worker's core (measured on 2 cores with
//! 1000 subscribers: 2.7 % of the worker's time in a drain).
//!
//! Invariants: the published value only moves forward (a checkpoint
//! whose epoch is lower than the one published is never handed out); the
//! file is parsed only when its modification time or length changed; every
//! registered wake is notified after the value it should see is published.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use millpond_dataflow::{CHECKPOINT_FILE, CheckpointMeta};
use tokio::sync::watch;

/// How often the checkpoint file is looked at (a `stat`; parsed on change)
/// while no runtime has rung the bell.
pub(crate) const COMMIT_POLL_MS: u64 = 5;
/// The same once the bell has rung: each commit is read when rung, and the
/// poll only backs the bell up.
pub(crate) const COMMIT_POLL_RUNG_MS: u64 = 1_000;

/// How long the watch sleeps between looks at the file when nothing rings.
fn poll_interval(rung: &AtomicU64) -> Duration {
    let ms = if rung.load(Ordering::Acquire) > 0 { COMMIT_POLL_RUNG_MS } else { COMMIT_POLL_MS };
    Duration::from_millis(ms)
}

/// When the last commit was seen, and how long after the one before.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) last: Option<Instant>,
    pub(crate) interval: Option<Duration>,
}

/// The latest published checkpoint (None before the first).
pub(crate) type Commit = Option<Arc<CheckpointMeta>>;

/// A thread's doorbell: notified, its next (or current) wait returns.
#[derive(Debug, Default)]
pub(crate) struct Wake {
    rung: Mutex<bool>,
    bell: Condvar,
}

impl Wake {
    pub(crate) fn notify(&self) {
        *self.rung.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.bell.notify_all();
    }

    /// Waits until notified (since the last wait) or `timeout` passes.
    pub(crate) fn wait(&self, timeout: Duration) {
        let rung = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        let (mut rung, _) =
            self.bell.wait_timeout_while(rung, timeout, |rung| !*rung).unwrap_or_else(|e| e.into_inner());
        *rung = false;
    }
}

/// The wakes to notify at each commit.
type Wakes = Arc<Mutex<Vec<Weak<Wake>>>>;

/// Watches a data directory's checkpoint on its own thread; stops when dropped.
#[derive(Debug)]
pub(crate) struct Commits {
    receiver: watch::Receiver<Commit>,
    wakes: Wakes,
    /// When the last commit was seen, and the interval before it.
    timing: Arc<Mutex<Timing>>,
    stop: Arc<AtomicBool>,
    /// Rung by the runtime at each publish: the watch looks at once.
    poke: Arc<Wake>,
    /// The latest epoch the runtime rang for: read even if the file's
    /// stamp (mtime, length) looks unchanged (two publishes within one
    /// mtime tick can have the same length).
    rung: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Commits {
    pub(crate) fn watch(data_dir: &Path) -> std::io::Result<Commits> {
        let initial = CheckpointMeta::read_published(data_dir).ok().flatten().map(Arc::new);
        let (sender, receiver) = watch::channel(initial);
        let stop = Arc::new(AtomicBool::new(false));
        let timing = Arc::new(Mutex::new(Timing::default()));
        let wakes = Wakes::default();
        let poke = Arc::new(Wake::default());
        let rung = Arc::new(AtomicU64::new(0));
        let (path, stopping, timed, ringing) =
            (data_dir.join(CHECKPOINT_FILE), stop.clone(), timing.clone(), wakes.clone());
        let bell = (poke.clone(), rung.clone());
        let thread = std::thread::Builder::new()
            .name("millpond-commits".into())
            .spawn(move || follow(&path, &sender, &stopping, &timed, &ringing, &bell))?;
        Ok(Commits { receiver, wakes, timing, stop, poke, rung, thread: Some(thread) })
    }

    /// What the runtime rings after each publish: the file is read now
    /// rather than at the next poll.
    pub(crate) fn bell(&self) -> millpond_dataflow::CommitBell {
        let (poke, rung) = (Arc::downgrade(&self.poke), Arc::downgrade(&self.rung));
        millpond_dataflow::CommitBell(Arc::new(move |epoch| {
            if let (Some(poke), Some(rung)) = (poke.upgrade(), rung.upgrade()) {
                rung.fetch_max(epoch, Ordering::Release);
                poke.notify();
            }
        }))
    }

    /// Notifies `wake` at every later commit, while it lives.
    pub(crate) fn register(&self, wake: &Arc<Wake>) {
        let mut wakes = self.wakes.lock().unwrap_or_else(|e| e.into_inner());
        wakes.retain(|w| w.strong_count() > 0);
        wakes.push(Arc::downgrade(wake));
    }

    /// A receiver that sees every later commit (and the current one).
    pub(crate) fn subscribe(&self) -> watch::Receiver<Commit> {
        self.receiver.clone()
    }

    pub(crate) fn timing(&self) -> Timing {
        *self.timing.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Commits {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.poke.notify();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn follow(
    path: &PathBuf,
    sender: &watch::Sender<Commit>,
    stop: &AtomicBool,
    timing: &Mutex<Timing>,
    wakes: &Wakes,
    (poke, rung): &(Arc<Wake>, Arc<AtomicU64>),
) {
    let mut seen: Option<(SystemTime, u64)> = None;
    while !stop.load(Ordering::Relaxed) {
        poke.wait(poll_interval(rung));
        let Ok(stat) = std::fs::metadata(path) else { continue };
        let stamp = (stat.modified().unwrap_or(SystemTime::UNIX_EPOCH), stat.len());
        let published = sender.borrow().as_ref().map_or(0, |meta| meta.epoch);
        if seen == Some(stamp) && rung.load(Ordering::Acquire) <= published {
            continue;
        }
        let Some(dir) = path.parent() else { return };
        let Ok(Some(meta)) = CheckpointMeta::read_published(dir) else { continue };
        seen = Some(stamp);
        let current = sender.borrow().as_ref().map(|current| current.epoch);
        if current.is_none_or(|epoch| meta.epoch >= epoch) {
            if current.is_none_or(|epoch| meta.epoch > epoch) {
                let mut timing = timing.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                timing.interval = timing.last.map(|last| now - last);
                timing.last = Some(now);
            }
            sender.send_replace(Some(Arc::new(meta)));
            let live: Vec<Arc<Wake>> =
                wakes.lock().unwrap_or_else(|e| e.into_inner()).iter().filter_map(Weak::upgrade).collect();
            for wake in live {
                wake.notify();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file is polled often until a runtime rings, then only as a
    /// back-up of the bell (which still reads each rung commit at once).
    #[test]
    fn the_poll_slows_once_the_bell_has_rung() {
        let rung = AtomicU64::new(0);
        assert_eq!(poll_interval(&rung), Duration::from_millis(COMMIT_POLL_MS));
        rung.fetch_max(1, Ordering::Release);
        assert_eq!(poll_interval(&rung), Duration::from_millis(COMMIT_POLL_RUNG_MS));
    }

    #[test]
    fn a_wake_rung_before_the_wait_is_not_lost_and_a_wait_times_out() {
        let wake = Arc::new(Wake::default());
        wake.notify();
        let started = Instant::now();
        wake.wait(Duration::from_secs(30));
        assert!(started.elapsed() < Duration::from_secs(5), "a ring before the wait ends it at once");
        let started = Instant::now();
        wake.wait(Duration::from_millis(50));
        assert!(started.elapsed() >= Duration::from_millis(50), "the ring was used up: this wait times out");
        let ringer = wake.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            ringer.notify();
        });
        let started = Instant::now();
        wake.wait(Duration::from_secs(30));
        assert!(started.elapsed() < Duration::from_secs(5), "a ring during the wait ends it");
        thread.join().unwrap();
    }
}
