//! The rows one-off SELECTs read, kept per view and brought forward to the
//! last commit by each query: a query reads the changelog written since
//! the previous one, not the whole view, so its cost follows the change.
//!
//! A cached view is a [`Subscription`] opened with a snapshot (it keeps
//! every row's multiplicity as it folds) and the rows as of the epoch it
//! was last brought to, shared (`Arc`) by the queries at that epoch.
//!
//! Invariants:
//! - the rows handed out for epoch E are the view's committed contents at
//!   E: the subscription's fold through E's committed end, the same fold
//!   `read_view_raw_at` makes (tested against it);
//! - every view of one query is read as of one published checkpoint (all
//!   views commit in the same one), or the query fails with 40001;
//! - an entry whose subscription fails (the view dropped or created again,
//!   the changelog compacted past it) is dropped and the view read afresh;
//! - the rows held by entries not in use stay under [`CACHED_ROWS_MAX`]:
//!   the least recently used go first.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use millpond_dataflow::{CheckpointMeta, RawSnapshot, Subscription};

use crate::pg::VIEW_READY_POLL_MS;

/// Rows (all views together) the cache keeps between queries (each held
/// twice: the reader's multiplicities and the rows handed out).
pub(crate) const CACHED_ROWS_MAX: usize = 1_000_000;
/// Changelog records a query folds before it drops the events it queued
/// (the subscription queues every change it reads).
const FOLD_RECORDS_STEP: usize = 65_536;
/// Checkpoints a query reads before it gives up putting its views at one.
const CONSISTENT_READS_MAX: usize = 3;

/// Why the rows could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The view has not committed its first epoch within the wait.
    NotCommitted(String),
    /// Reads kept landing on different checkpoints.
    Inconsistent(String),
    Failed(String, Box<millpond_dataflow::Error>),
}

/// One view's cached reader and rows.
#[derive(Debug)]
struct Entry {
    subscription: Subscription,
    rows: Option<Arc<RawSnapshot>>,
    used: Instant,
}

impl Entry {
    /// Folds what `meta` committed past the rows held; the rows as of it.
    fn bring_to(&mut self, meta: &CheckpointMeta) -> millpond_dataflow::Result<Arc<RawSnapshot>> {
        while !self.subscription.poll_at_most(meta, FOLD_RECORDS_STEP)? {
            while self.subscription.next_raw().is_some() {}
        }
        while self.subscription.next_raw().is_some() {}
        if let Some(error) = self.subscription.take_end() {
            // Dropped or created again: what it holds is not the view.
            return Err(error);
        }
        let epoch = self.subscription.progressed();
        self.used = Instant::now();
        match &self.rows {
            Some(rows) if rows.epoch == epoch => Ok(rows.clone()),
            _ => {
                let rows = Arc::new(RawSnapshot { epoch, rows: self.subscription.held_rows() });
                self.rows = Some(rows.clone());
                Ok(rows)
            }
        }
    }

    fn held(&self) -> usize {
        self.rows.as_ref().map_or(0, |rows| rows.rows.len())
    }
}

/// The server's cache of view rows for one-off queries.
#[derive(Debug, Default)]
pub(crate) struct ViewCache {
    entries: Mutex<HashMap<String, Arc<Mutex<Entry>>>>,
}

impl ViewCache {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Arc<Mutex<Entry>>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The rows of every view in `views`, all as of one published
    /// checkpoint (the newest when the query began, or a later one).
    pub(crate) fn rows(
        &self,
        data_dir: &std::path::Path,
        views: &[&str],
        wait_ms: u64,
    ) -> Result<BTreeMap<String, Arc<RawSnapshot>>, ReadError> {
        if views.is_empty() {
            return Ok(BTreeMap::new());
        }
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        let mut epochs = Vec::new();
        for _ in 0..CONSISTENT_READS_MAX {
            let meta = published(data_dir, views, deadline)?;
            let mut read = BTreeMap::new();
            for view in views {
                let rows = self.view_rows(data_dir, view, &meta, deadline)?;
                read.insert((*view).to_owned(), rows);
            }
            epochs = read.iter().map(|(view, rows)| format!("{view} at {}", rows.epoch)).collect();
            if read.values().all(|rows| rows.epoch == meta.epoch) {
                self.evict();
                return Ok(read);
            }
        }
        Err(ReadError::Inconsistent(epochs.join(", ")))
    }

    /// One view's rows as of `meta` (or later, when its reader opened at
    /// a newer checkpoint: the caller reads again).
    fn view_rows(
        &self,
        data_dir: &std::path::Path,
        view: &str,
        meta: &CheckpointMeta,
        deadline: Instant,
    ) -> Result<Arc<RawSnapshot>, ReadError> {
        let cached = self.entries().get(view).cloned();
        if let Some(entry) = cached {
            let mut entry = entry.lock().unwrap_or_else(|e| e.into_inner());
            if let Ok(rows) = entry.bring_to(meta) {
                return Ok(rows);
            }
            // Dropped, created again, compacted past: read it afresh.
            drop(entry);
            self.entries().remove(view);
        }
        let subscription = open(data_dir, view, deadline)?;
        let mut entry = Entry { subscription, rows: None, used: Instant::now() };
        let rows = entry.bring_to(meta).map_err(|e| ReadError::Failed(view.to_owned(), Box::new(e)))?;
        self.entries().insert(view.to_owned(), Arc::new(Mutex::new(entry)));
        Ok(rows)
    }

    /// Drops the least recently used entries past the cap (those in use,
    /// locked by a query, are passed over).
    fn evict(&self) {
        let mut entries = self.entries();
        let mut held: Vec<(Instant, String, usize)> = entries
            .iter()
            .filter_map(|(view, entry)| entry.try_lock().ok().map(|e| (e.used, view.clone(), e.held())))
            .collect();
        let mut total: usize = held.iter().map(|(_, _, rows)| rows).sum();
        held.sort();
        for (_, view, rows) in held {
            if total <= CACHED_ROWS_MAX {
                break;
            }
            entries.remove(&view);
            total -= rows;
        }
    }
}

/// The published checkpoint, once it has committed every view in `views`.
fn published(data_dir: &std::path::Path, views: &[&str], deadline: Instant) -> Result<CheckpointMeta, ReadError> {
    loop {
        let meta =
            CheckpointMeta::read_published(data_dir).map_err(|e| ReadError::Failed(views.join(", "), Box::new(e)))?;
        let missing = views.iter().find(|view| meta.as_ref().is_none_or(|m| !m.views.contains_key(**view)));
        match (meta, missing) {
            (Some(meta), None) => return Ok(meta),
            (_, missing) if Instant::now() >= deadline => {
                return Err(ReadError::NotCommitted(missing.map_or_else(|| views.join(", "), |v| (*v).to_owned())));
            }
            _ => std::thread::sleep(Duration::from_millis(VIEW_READY_POLL_MS)),
        }
    }
}

/// A reader of `view` with its snapshot, waiting for its first commit.
fn open(data_dir: &std::path::Path, view: &str, deadline: Instant) -> Result<Subscription, ReadError> {
    loop {
        match Subscription::open(data_dir, view, None, true) {
            Ok(subscription) => return Ok(subscription),
            Err(millpond_dataflow::Error::UnknownView(_)) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(VIEW_READY_POLL_MS));
            }
            Err(millpond_dataflow::Error::UnknownView(_)) => return Err(ReadError::NotCommitted(view.to_owned())),
            Err(e) => return Err(ReadError::Failed(view.to_owned(), Box::new(e))),
        }
    }
}
