//! Commits: the runtime's published checkpoint, read once for the whole
//! server and handed to every subscriber, so that N subscribers cost one
//! read of `checkpoint.json` per commit, not N per poll.
//!
//! Invariants: the published value only moves forward (a checkpoint
//! whose epoch is lower than the one published is never handed out); the
//! file is parsed only when its modification time or length changed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use millpond_dataflow::{CHECKPOINT_FILE, CheckpointMeta};
use tokio::sync::watch;

/// How often the checkpoint file is looked at (a `stat`; parsed on change).
pub(crate) const COMMIT_POLL_MS: u64 = 5;

/// When the last commit was seen, and how long after the one before.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) last: Option<Instant>,
    pub(crate) interval: Option<Duration>,
}

/// The latest published checkpoint (None before the first).
pub(crate) type Commit = Option<Arc<CheckpointMeta>>;

/// Watches a data directory's checkpoint on its own thread; stops when dropped.
#[derive(Debug)]
pub(crate) struct Commits {
    receiver: watch::Receiver<Commit>,
    /// When the last commit was seen, and the interval before it.
    timing: Arc<Mutex<Timing>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Commits {
    pub(crate) fn watch(data_dir: &Path) -> std::io::Result<Commits> {
        let initial = CheckpointMeta::read_published(data_dir).ok().flatten().map(Arc::new);
        let (sender, receiver) = watch::channel(initial);
        let stop = Arc::new(AtomicBool::new(false));
        let timing = Arc::new(Mutex::new(Timing::default()));
        let (path, stopping, timed) = (data_dir.join(CHECKPOINT_FILE), stop.clone(), timing.clone());
        let thread = std::thread::Builder::new()
            .name("millpond-commits".into())
            .spawn(move || follow(&path, &sender, &stopping, &timed))?;
        Ok(Commits { receiver, timing, stop, thread: Some(thread) })
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
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn follow(path: &PathBuf, sender: &watch::Sender<Commit>, stop: &AtomicBool, timing: &Mutex<Timing>) {
    let mut seen: Option<(SystemTime, u64)> = None;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(COMMIT_POLL_MS));
        let Ok(stat) = std::fs::metadata(path) else { continue };
        let stamp = (stat.modified().unwrap_or(SystemTime::UNIX_EPOCH), stat.len());
        if seen == Some(stamp) {
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
        }
    }
}
