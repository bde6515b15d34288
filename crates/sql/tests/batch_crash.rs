//! A batch is applied whole or not at all, whatever moment a crash (or a
//! failed write) stops it: the machine is stopped after each number of disk
//! changes into the batch in turn (the in-memory filesystem keeps only what
//! was synced), the directory is opened again, and the tables — as their
//! topics hold them, which is what views read — are as before the batch or
//! as after it, never in between. Running the file again then gives the
//! state after it exactly once.
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use millpond_dataflow::Topics;
use millpond_log::{FaultPlan, FaultStorage, LogOptions, MemStorage};
use millpond_sql::Session;

const SETUP: &str = "CREATE TABLE t (k INT PRIMARY KEY, v TEXT);\nINSERT INTO t VALUES (1, 'one'), (2, 'two');";

/// A file run once per data directory: a table created, rows inserted,
/// updated and deleted across two tables.
const FILE: &str = "CREATE TABLE t (k INT PRIMARY KEY, v TEXT);
CREATE TABLE u (x INT);
INSERT INTO t VALUES (3, 'three');
UPDATE t SET v = 'uno' WHERE k = 1;
INSERT INTO u VALUES (10), (20);
DELETE FROM t WHERE k = 2;";

/// Each table's live rows, as its topic holds them (the latest value per
/// key, sorted: a table without a primary key keys rows by offset, which a
/// batch run again after a crash does not repeat).
type State = BTreeMap<String, Vec<String>>;

fn topics_on(storage: &MemStorage) -> Topics {
    let options = LogOptions { storage: Arc::new(storage.clone()), background: false, ..LogOptions::default() };
    Topics::open_with(Path::new("/data"), options).unwrap()
}

fn state(topics: &Topics) -> State {
    let mut state = State::new();
    for table in ["t", "u"] {
        let topic = format!("table.{table}");
        let mut rows = BTreeMap::new();
        if topics.exists(&topic) {
            for record in topics.read_all(&topic).unwrap() {
                let key = record.key.expect("table records have keys");
                match record.value {
                    Some(value) => rows.insert(key, value),
                    None => rows.remove(&key),
                };
            }
        }
        let mut rows: Vec<String> = rows.into_values().map(|v| String::from_utf8(v).unwrap()).collect();
        rows.sort();
        state.insert(table.to_owned(), rows);
    }
    state
}

/// Runs `FILE` on a copy of `before` whose disk stops after `changes`
/// changes; returns whether the batch got that far, and the state the
/// directory opens with after the crash.
fn crash_during_file(before: &MemStorage, changes: u64) -> (bool, MemStorage) {
    let disk = before.deep_copy();
    let mut session = Session::open_on(topics_on(&disk)).unwrap();
    disk.crash_after(changes);
    let result = session.execute(FILE, Some("/files/views.sql"), true);
    let stopped = disk.stopped();
    assert!(result.is_ok() || stopped, "only the crash fails the batch: {result:?}");
    drop(session);
    disk.crash();
    (stopped, disk)
}

#[test]
fn a_batch_cut_at_any_disk_change_is_applied_whole_or_not_at_all() {
    let disk = MemStorage::new();
    let mut session = Session::open_on(topics_on(&disk)).unwrap();
    session.execute(SETUP, None, false).unwrap();
    drop(session);
    let before = state(&topics_on(&disk));
    let after = {
        let (stopped, done) = crash_during_file(&disk, u64::MAX);
        assert!(!stopped);
        state(&topics_on(&done))
    };
    assert_ne!(before, after);

    let (mut cut_before, mut cut_after) = (0, 0);
    for changes in 0.. {
        let (stopped, disk) = crash_during_file(&disk, changes);
        if !stopped {
            break;
        }
        // Opening the directory takes back what the batch had not committed.
        drop(Session::open_on(topics_on(&disk)).unwrap());
        let opened = state(&topics_on(&disk));
        if opened == before {
            cut_before += 1;
        } else {
            assert_eq!(opened, after, "stopped after {changes} changes: the batch is half applied");
            cut_after += 1;
        }
        // The file runs again at the next start: the state after it, once.
        let mut session = Session::open_on(topics_on(&disk)).unwrap();
        let tags: Vec<String> =
            session.execute(FILE, Some("/files/views.sql"), true).unwrap().into_iter().map(|o| o.tag).collect();
        drop(session);
        assert_eq!(state(&topics_on(&disk)), after, "stopped after {changes} changes, then run again: {tags:?}");
    }
    eprintln!("cut before the commit: {cut_before}, after: {cut_after}");
    assert!(cut_before > 3, "crashes before the commit point were tried: {cut_before}");
    assert!(cut_after > 0, "crashes after the commit point were tried: {cut_after}");
}

/// A batch whose write fails (ENOSPC at each write in turn) returns the
/// error and leaves nothing of itself: the same session's next batch, and
/// the directory opened again, see the state before it; the file run again
/// once there is space gives the state after it.
#[test]
fn a_batch_whose_write_fails_leaves_nothing_and_the_session_goes_on() {
    let disk = MemStorage::new();
    let mut session = Session::open_on(topics_on(&disk)).unwrap();
    session.execute(SETUP, None, false).unwrap();
    drop(session);
    let before = state(&topics_on(&disk));
    let (_, done) = crash_during_file(&disk, u64::MAX);
    let after = state(&topics_on(&done));
    let mut failed = 0;
    for write in 1.. {
        let copy = disk.deep_copy();
        let faults = FaultStorage::new(Arc::new(copy.clone()), FaultPlan::default());
        let options = LogOptions { storage: Arc::new(faults.clone()), background: false, ..LogOptions::default() };
        let mut session = Session::open_on(Topics::open_with(Path::new("/data"), options).unwrap()).unwrap();
        faults.set_plan(FaultPlan { enospc_on_write: Some(write), ..FaultPlan::default() });
        let result = session.execute(FILE, Some("/files/views.sql"), true);
        if faults.injected() == 0 {
            result.unwrap();
            break;
        }
        faults.set_plan(FaultPlan::default());
        let Err(error) = result else {
            // The disk filled after the commit point (a compaction bound, say): applied.
            drop(session);
            assert_eq!(state(&topics_on(&copy)), after, "write {write}");
            continue;
        };
        failed += 1;
        assert!(error.to_string().contains("No space left") || error.to_string().contains("os error 28"), "{error}");
        // The next batch of the same session sees the rows as before.
        let rows = session.execute("UPDATE t SET v = v", None, false).unwrap().remove(0).tag;
        assert_eq!(rows, "UPDATE 2", "write {write}: {error}");
        drop(session);
        assert_eq!(state(&topics_on(&copy)), before, "write {write}: the failed batch left rows");
        let mut session = Session::open_on(topics_on(&copy)).unwrap();
        session.execute(FILE, Some("/files/views.sql"), true).unwrap();
        drop(session);
        assert_eq!(state(&topics_on(&copy)), after, "write {write}, then run again");
    }
    assert!(failed > 3, "writes into the batch failed: {failed}");
}
