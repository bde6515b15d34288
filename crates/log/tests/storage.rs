//! The log on an in-memory filesystem that models crashes ([`MemStorage`])
//! and on a fault-injecting one ([`FaultStorage`]), by seed. For each
//! operation (a roll, a retention delete, a topic create, a topic delete) the
//! machine is stopped after every possible number of disk changes, the
//! unsynced state is dropped, and the reopened log must hold exactly the
//! acknowledged records.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use millpond_log::{
    CleanupPolicy, Error, FaultPlan, FaultStorage, Log, LogOptions, ManualClock, MemStorage, Record, Storage,
    TopicConfig,
};

const DATA: &str = "/data";
const TOPIC: &str = "t";
const START_MS: i64 = 1_000_000;

fn options(storage: Arc<dyn Storage>, clock: &Arc<ManualClock>) -> LogOptions {
    LogOptions { clock: clock.clone(), background: false, storage, ..LogOptions::default() }
}

fn config() -> TopicConfig {
    TopicConfig { segment_bytes: 600, retention_ms: Some(60_000), index_interval_bytes: 200, ..TopicConfig::default() }
}

fn record(i: u64, timestamp_ms: i64) -> Record {
    Record::new(Some(format!("k{}", i % 5).as_bytes()), Some(format!("value number {i}").as_bytes()), timestamp_ms)
}

/// Every record of `topic`, by partition.
fn contents(log: &Log, topic: &str) -> BTreeMap<u32, Vec<(u64, Record)>> {
    let mut out = BTreeMap::new();
    for partition in 0..log.topic_config(topic).unwrap().partitions {
        let mut records = Vec::new();
        let mut offset = log.low_watermark(topic, partition).unwrap();
        loop {
            let fetch = log.fetch(topic, partition, offset, 1 << 16).unwrap();
            if fetch.is_empty() {
                break;
            }
            records.extend(fetch.records().map(|r| (r.offset, r.to_record())));
            offset = fetch.next_offset();
        }
        out.insert(partition, records);
    }
    out
}

/// A data directory in memory with topic [`TOPIC`] holding `batches`
/// acknowledged one-record batches (timestamps `START_MS + i`), closed cleanly.
fn base(batches: u64) -> (MemStorage, Arc<ManualClock>, Vec<(u64, Record)>) {
    let mem = MemStorage::new();
    let clock = Arc::new(ManualClock::new(START_MS));
    let log = Log::open(DATA, options(Arc::new(mem.clone()), &clock)).unwrap();
    log.create_topic(TOPIC, config()).unwrap();
    let mut acked = Vec::new();
    for i in 0..batches {
        let r = record(i, START_MS + i as i64);
        let info = log.append(TOPIC, 0, std::slice::from_ref(&r)).unwrap();
        acked.push((info.base_offset, r));
    }
    log.close().unwrap();
    (mem, clock, acked)
}

/// Runs `scenario` on a copy of `base` stopped after `n` disk changes, for
/// every `n` until the scenario runs to its end; after each crash, `check`
/// gets the reopened log and what the scenario reported as acknowledged.
/// Returns how many crash points were tried.
fn at_every_crash_point<A>(
    base: &MemStorage,
    clock: &Arc<ManualClock>,
    mut scenario: impl FnMut(&Log, &mut A),
    mut check: impl FnMut(u64, &Log, &A),
) -> u64
where
    A: Default,
{
    for n in 0.. {
        let mem = base.deep_copy();
        mem.crash_after(n);
        let mut acked = A::default();
        if let Ok(log) = Log::open(DATA, options(Arc::new(mem.clone()), clock)) {
            scenario(&log, &mut acked);
            drop(log);
        }
        let finished = !mem.stopped();
        mem.crash();
        let log = Log::open(DATA, options(Arc::new(mem.clone()), clock))
            .unwrap_or_else(|e| panic!("crash after {n} changes: reopen failed: {e}"));
        check(n, &log, &acked);
        drop(log);
        if finished {
            return n;
        }
    }
    unreachable!()
}

#[test]
fn a_crash_at_every_step_of_a_roll_keeps_exactly_the_acknowledged_records() {
    // Fill the active segment until the next batch must roll.
    let (mem, clock, before) = base(1);
    let log = Log::open(DATA, options(Arc::new(mem.clone()), &clock)).unwrap();
    let mut before = before;
    let mut i = 1;
    while log.describe(TOPIC).unwrap()[0].size_bytes + 120 < 600 {
        let r = record(i, START_MS + i as i64);
        before.push((log.append(TOPIC, 0, std::slice::from_ref(&r)).unwrap().base_offset, r));
        i += 1;
    }
    log.close().unwrap();
    let next = before.len() as u64;
    let steps = at_every_crash_point(
        &mem,
        &clock,
        |log, acked: &mut Vec<(u64, Record)>| {
            for j in 0..3 {
                let r = record(next + j, START_MS);
                match log.append(TOPIC, 0, std::slice::from_ref(&r)) {
                    Ok(info) => acked.push((info.base_offset, r)),
                    Err(_) => return,
                }
            }
            assert!(log.describe(TOPIC).unwrap()[0].segments >= 2, "the scenario rolls");
        },
        |n, log, acked| {
            let mut expected = before.clone();
            expected.extend(acked.iter().cloned());
            assert_eq!(contents(log, TOPIC)[&0], expected, "crash after {n} changes");
            // And the log goes on.
            let info = log.append(TOPIC, 0, &[record(99, START_MS)]).unwrap();
            assert_eq!(info.base_offset, expected.len() as u64, "crash after {n} changes");
        },
    );
    assert!(steps > 10, "a roll and its appends take more than {steps} changes");
}

#[test]
fn a_crash_at_every_step_of_a_retention_delete_keeps_a_suffix() {
    let (mem, clock, before) = base(30);
    let bases: Vec<u64> = {
        let log = Log::open(DATA, options(Arc::new(mem.clone()), &clock)).unwrap();
        let info = log.describe(TOPIC).unwrap()[0].clone();
        assert!(info.segments >= 4, "{info:?}");
        drop(log);
        let dir = Path::new(DATA).join("topics").join(TOPIC).join("0");
        mem.list_dir(&dir).unwrap().iter().filter_map(|n| n.strip_suffix(".log").map(|s| s.parse().unwrap())).collect()
    };
    let active_base = *bases.last().unwrap();
    clock.set_ms(START_MS + 10 * 60_000); // every closed segment has expired
    let steps = at_every_crash_point(
        &mem,
        &clock,
        |log, deleted: &mut Option<usize>| *deleted = log.enforce_retention().ok(),
        |n, log, deleted| {
            let low = log.low_watermark(TOPIC, 0).unwrap();
            assert!(bases.contains(&low), "crash after {n} changes: low watermark {low} is a segment base");
            if deleted.is_some() {
                assert_eq!(low, active_base, "crash after {n}: an acknowledged delete is durable");
            }
            let expected: Vec<_> = before.iter().filter(|(o, _)| *o >= low).cloned().collect();
            assert_eq!(contents(log, TOPIC)[&0], expected, "crash after {n} changes: no gap, no loss above {low}");
        },
    );
    assert!(steps >= bases.len() as u64, "{steps} changes");
}

#[test]
fn a_crash_at_every_step_of_a_topic_create_leaves_it_whole_or_absent() {
    let (mem, clock, before) = base(3);
    at_every_crash_point(
        &mem,
        &clock,
        |log, acked: &mut (bool, Vec<(u64, Record)>)| {
            let config = TopicConfig { partitions: 2, ..config() };
            if log.create_topic("new", config).is_err() {
                return;
            }
            acked.0 = true;
            let r = record(7, START_MS);
            if let Ok(info) = log.append("new", 1, std::slice::from_ref(&r)) {
                acked.1.push((info.base_offset, r));
            }
        },
        |n, log, (created, acked)| {
            assert_eq!(contents(log, TOPIC)[&0], before, "crash after {n}: the other topic is untouched");
            let exists = log.topics().contains(&"new".to_owned());
            assert!(exists || !created, "crash after {n}: an acknowledged create is durable");
            if exists {
                let got = contents(log, "new");
                assert_eq!(got.len(), 2, "crash after {n}: every partition is there");
                assert_eq!((got[&0].clone(), got[&1].clone()), (vec![], acked.clone()), "crash after {n}");
            }
            let leftovers: Vec<String> = log.topics().into_iter().filter(|t| t.starts_with('.')).collect();
            assert!(leftovers.is_empty(), "{leftovers:?}");
        },
    );
}

#[test]
fn a_crash_at_every_step_of_a_topic_delete_leaves_it_whole_or_absent() {
    let (mem, clock, before) = base(12);
    at_every_crash_point(
        &mem,
        &clock,
        |log, deleted: &mut bool| *deleted = log.delete_topic(TOPIC).is_ok(),
        |n, log, deleted| {
            let exists = log.topics().contains(&TOPIC.to_owned());
            assert!(!(exists && *deleted), "crash after {n}: an acknowledged delete is durable");
            if exists {
                assert_eq!(contents(log, TOPIC)[&0], before, "crash after {n}: a topic not deleted is whole");
            }
        },
    );
}

// ---------------------------------------------------------------------------
// Faults.

/// Appends one-record batches until one fails; returns the acknowledged ones and the error.
fn append_until_error(log: &Log, from: u64, max: u64) -> (Vec<(u64, Record)>, Option<Error>) {
    let mut acked = Vec::new();
    for i in from..from + max {
        let r = record(i, START_MS);
        match log.append(TOPIC, 0, std::slice::from_ref(&r)) {
            Ok(info) => acked.push((info.base_offset, r)),
            Err(e) => return (acked, Some(e)),
        }
    }
    (acked, None)
}

#[test]
fn a_failed_fsync_is_sticky_and_a_crash_keeps_exactly_the_acknowledged_prefix() {
    let mut sticky = 0;
    for seed in 0..8u64 {
        let (mem, clock, mut expected) = base(2);
        let fail_at = 1 + seed * 3;
        let faults =
            FaultStorage::new(Arc::new(mem.clone()), FaultPlan { fail_fsync: Some(fail_at), ..FaultPlan::default() });
        let log = Log::open(DATA, options(Arc::new(faults.clone()), &clock)).unwrap();
        let (acked, error) = append_until_error(&log, 100, 40);
        expected.extend(acked);
        let error = error.unwrap_or_else(|| panic!("seed {seed}: fsync {fail_at} never failed"));
        assert_eq!(faults.injected(), 1);
        faults.set_plan(FaultPlan::default());
        let Error::Io { action, path, .. } = &error else { panic!("seed {seed}: {error}") };
        let path = path.to_string_lossy().into_owned();
        if path.ends_with(".log") {
            // A segment's fsync: never retried. The partition refuses
            // further appends, even once the disk is fine again.
            assert!(action.contains("sync"), "seed {seed}: {error}");
            sticky += 1;
            for _ in 0..2 {
                let refused = log.append(TOPIC, 0, &[record(0, START_MS)]).unwrap_err();
                assert!(refused.to_string().contains("read-only until reopened"), "seed {seed}: {refused}");
            }
        } else {
            // An index file's fsync, in a roll: the index is a cache, and the
            // retried roll writes it anew (new pages, not a retried fsync).
            assert!(path.ends_with("index"), "seed {seed}: {error}");
            let r = record(300, START_MS);
            let info = log.append(TOPIC, 0, std::slice::from_ref(&r)).unwrap();
            expected.push((info.base_offset, r));
        }
        drop(log);
        mem.crash();
        let log = Log::open(DATA, options(Arc::new(mem.clone()), &clock)).unwrap();
        assert_eq!(contents(&log, TOPIC)[&0], expected, "seed {seed}");
        assert_eq!(log.append(TOPIC, 0, &[record(0, START_MS)]).unwrap().base_offset, expected.len() as u64);
    }
    assert!(sticky >= 4, "most seeds fail a segment's fsync ({sticky} did)");
}

#[test]
fn enospc_on_append_is_an_error_naming_the_file_and_appends_resume_with_space() {
    for seed in 0..6u64 {
        let (mem, clock, mut expected) = base(2);
        let plan = FaultPlan { enospc_on_write: Some(1 + seed * 2), ..FaultPlan::default() };
        let faults = FaultStorage::new(Arc::new(mem.clone()), plan);
        let log = Log::open(DATA, options(Arc::new(faults.clone()), &clock)).unwrap();
        let (acked, error) = append_until_error(&log, 100, 40);
        expected.extend(acked);
        match error {
            Some(Error::Io { path, source, .. }) => {
                assert_eq!(source.raw_os_error(), Some(28), "seed {seed}");
                // The batch's write names the segment; a roll's index write names the index.
                let name = path.to_string_lossy();
                assert!(name.ends_with(".log") || name.ends_with("index"), "seed {seed}: names the file: {path:?}");
            }
            other => panic!("seed {seed}: expected ENOSPC, got {other:?}"),
        }
        faults.set_plan(FaultPlan::default()); // space is available again
        let (more, error) = append_until_error(&log, 200, 5);
        assert!(error.is_none(), "seed {seed}: {error:?}");
        expected.extend(more);
        assert_eq!(contents(&log, TOPIC)[&0], expected, "seed {seed}");
        drop(log);
        mem.crash();
        let log = Log::open(DATA, options(Arc::new(mem.clone()), &clock)).unwrap();
        assert_eq!(contents(&log, TOPIC)[&0], expected, "seed {seed}: after a crash");
    }
}

#[test]
fn enospc_on_roll_is_an_error_naming_the_new_segment_and_the_roll_is_retried() {
    let (mem, clock, mut expected) = base(2);
    let faults =
        FaultStorage::new(Arc::new(mem.clone()), FaultPlan { enospc_on_create: Some(1), ..FaultPlan::default() });
    let log = Log::open(DATA, options(Arc::new(faults.clone()), &clock)).unwrap();
    let (acked, error) = append_until_error(&log, 100, 40);
    expected.extend(acked);
    match error {
        Some(Error::Io { action, path, source }) => {
            assert_eq!(source.raw_os_error(), Some(28));
            assert!(action.contains("creating") && path.to_string_lossy().ends_with(".log"), "{action} {path:?}");
            let base: u64 = path.file_stem().unwrap().to_str().unwrap().parse().unwrap();
            assert_eq!(base, expected.len() as u64, "names the segment it tried to create");
        }
        other => panic!("expected ENOSPC on the roll, got {other:?}"),
    }
    assert_eq!(log.describe(TOPIC).unwrap()[0].segments, 1, "the failed roll left the partition as it was");
    faults.set_plan(FaultPlan::default());
    let (more, error) = append_until_error(&log, 200, 5);
    assert!(error.is_none(), "{error:?}");
    expected.extend(more);
    assert_eq!(log.describe(TOPIC).unwrap()[0].segments, 2, "the roll happened");
    drop(log);
    mem.crash();
    let log = Log::open(DATA, options(Arc::new(mem.clone()), &clock)).unwrap();
    assert_eq!(contents(&log, TOPIC)[&0], expected);
}

#[test]
fn enospc_during_compaction_loses_nothing_and_the_next_pass_succeeds() {
    let mem = MemStorage::new();
    let clock = Arc::new(ManualClock::new(START_MS));
    let faults = FaultStorage::new(Arc::new(mem.clone()), FaultPlan::default());
    let log = Log::open(DATA, options(Arc::new(faults.clone()), &clock)).unwrap();
    let compacted = TopicConfig { cleanup_policy: CleanupPolicy::Compact, retention_ms: None, ..config() };
    log.create_topic(TOPIC, compacted).unwrap();
    let (written, error) = append_until_error(&log, 0, 60);
    assert!(error.is_none());
    let before = contents(&log, TOPIC)[&0].clone();
    assert_eq!(before, written);
    faults.set_plan(FaultPlan { enospc_on_create: Some(1), ..FaultPlan::default() });
    match log.compact() {
        Err(Error::Io { path, source, .. }) => {
            assert_eq!(source.raw_os_error(), Some(28));
            assert!(path.to_string_lossy().ends_with(".log.cleaned"), "{path:?}");
        }
        other => panic!("expected ENOSPC, got {other:?}"),
    }
    assert_eq!(contents(&log, TOPIC)[&0], before, "nothing lost");
    faults.set_plan(FaultPlan::default());
    let stats = log.compact().unwrap();
    assert!(stats.records_removed > 0);
    let after = contents(&log, TOPIC)[&0].clone();
    let latest = |records: &[(u64, Record)]| -> BTreeMap<Vec<u8>, Vec<u8>> {
        records.iter().map(|(_, r)| (r.key.clone().unwrap(), r.value.clone().unwrap())).collect()
    };
    assert_eq!(latest(&after), latest(&before), "the latest value of every key survives");
    drop(log);
    mem.crash();
    let log = Log::open(DATA, options(Arc::new(mem.clone()), &clock)).unwrap();
    assert_eq!(latest(&contents(&log, TOPIC)[&0]), latest(&before));
}

#[test]
fn a_torn_write_is_undone_and_the_log_goes_on() {
    for seed in 0..6u64 {
        let (mem, clock, mut expected) = base(2);
        let plan = FaultPlan { torn_write: Some((1 + seed, 5 + seed as usize * 7)), ..FaultPlan::default() };
        let faults = FaultStorage::new(Arc::new(mem.clone()), plan);
        let log = Log::open(DATA, options(Arc::new(faults.clone()), &clock)).unwrap();
        let (acked, _) = append_until_error(&log, 100, 10);
        expected.extend(acked);
        let (more, error) = append_until_error(&log, 200, 3);
        assert!(error.is_none(), "seed {seed}: {error:?}");
        expected.extend(more);
        assert_eq!(contents(&log, TOPIC)[&0], expected, "seed {seed}");
        drop(log);
        mem.crash();
        let log = Log::open(DATA, options(Arc::new(mem.clone()), &clock)).unwrap();
        assert_eq!(contents(&log, TOPIC)[&0], expected, "seed {seed}: after a crash");
    }
}
