//! The durable compaction bound: a topic with `compaction_bound_required`
//! is compacted only below the bound persisted by `set_cleanable_below`, by
//! whichever process opens the log next (tested by closing and reopening:
//! two handles on one directory are impossible, the lock forbids it).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use millpond_log::{CleanupPolicy, Log, LogOptions, ManualClock, Record, TopicConfig};

const TOPIC: &str = "view.v";
const START_MS: i64 = 1_000_000;

fn options() -> LogOptions {
    LogOptions { clock: Arc::new(ManualClock::new(START_MS)), background: false, ..LogOptions::default() }
}

fn config(bound_required: bool) -> TopicConfig {
    TopicConfig {
        segment_bytes: 600,
        retention_ms: None,
        cleanup_policy: CleanupPolicy::Compact,
        compaction_bound_required: bound_required,
        ..TopicConfig::default()
    }
}

fn bound_file(dir: &Path) -> PathBuf {
    dir.join("topics").join(TOPIC).join("0").join("cleanable-below")
}

/// 120 updates of 4 keys, one batch each: several closed segments, each full
/// of superseded values.
fn fill(dir: &Path, bound_required: bool) -> Vec<(u64, Record)> {
    let log = Log::open(dir, options()).unwrap();
    log.create_topic(TOPIC, config(bound_required)).unwrap();
    let mut written = Vec::new();
    for i in 0..120u64 {
        let record =
            Record::new(Some(format!("k{}", i % 4).as_bytes()), Some(format!("value {i}").as_bytes()), START_MS);
        let info = log.append(TOPIC, 0, std::slice::from_ref(&record)).unwrap();
        written.push((info.base_offset, record));
    }
    assert!(log.describe(TOPIC).unwrap()[0].segments >= 5, "several closed segments");
    log.close().unwrap();
    written
}

fn read_all(log: &Log) -> Vec<(u64, Record)> {
    let mut out = Vec::new();
    let mut offset = log.low_watermark(TOPIC, 0).unwrap();
    loop {
        let fetch = log.fetch(TOPIC, 0, offset, 1 << 20).unwrap();
        if fetch.is_empty() {
            return out;
        }
        out.extend(fetch.records().map(|r| (r.offset, r.to_record())));
        offset = fetch.next_offset();
    }
}

/// The bases of the partition's segments, from the file names.
fn bases(log: &Log) -> Vec<u64> {
    let dir = log.dir().join("topics").join(TOPIC).join("0");
    let mut bases: Vec<u64> = fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().unwrap().strip_suffix(".log").map(|s| s.parse().unwrap()))
        .collect();
    bases.sort_unstable();
    bases
}

#[test]
fn a_persisted_bound_limits_compaction_in_the_next_process() {
    let dir = tempfile::tempdir().unwrap();
    let written = fill(dir.path(), true);
    let log = Log::open(dir.path(), options()).unwrap();
    let segment_bases = bases(&log);
    let bound = segment_bases[2]; // the first two segments may be cleaned
    log.set_cleanable_below(TOPIC, 0, bound).unwrap();
    assert!(bound_file(dir.path()).exists());
    log.close().unwrap();

    // "Another process": a fresh open, with its own maintenance.
    let log = Log::open(dir.path(), options()).unwrap();
    assert_eq!(log.cleanable_below(TOPIC, 0).unwrap(), bound, "the bound came back from disk");
    let stats = log.compact().unwrap();
    assert!(stats.records_removed > 0, "below the bound is compacted: {stats:?}");
    let after = read_all(&log);
    let above: Vec<_> = written.iter().filter(|(o, _)| *o >= bound).cloned().collect();
    assert_eq!(
        after.iter().filter(|(o, _)| *o >= bound).cloned().collect::<Vec<_>>(),
        above,
        "above the bound survives"
    );
    assert!(after.iter().filter(|(o, _)| *o < bound).count() < bound as usize, "some records below it were removed");
    // Raising the bound lets the next pass go further.
    let new_bound = segment_bases[segment_bases.len() - 1];
    log.set_cleanable_below(TOPIC, 0, new_bound).unwrap();
    drop(log);
    let log = Log::open(dir.path(), options()).unwrap();
    assert_eq!(log.cleanable_below(TOPIC, 0).unwrap(), new_bound);
    assert!(log.compact().unwrap().records_removed > 0);
    let after = read_all(&log);
    assert_eq!(
        after.iter().filter(|(o, _)| *o >= new_bound).cloned().collect::<Vec<_>>(),
        written.iter().filter(|(o, _)| *o >= new_bound).cloned().collect::<Vec<_>>()
    );
}

#[test]
fn a_flagged_topic_without_a_bound_is_never_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let written = fill(dir.path(), true);
    assert!(!bound_file(dir.path()).exists());
    // A process that runs the background cleaner often (a `consume --follow`).
    let busy = LogOptions { background: true, maintenance_interval_ms: 5, flush_tick_ms: 1, ..options() };
    let log = Log::open(dir.path(), busy).unwrap();
    assert_eq!(log.cleanable_below(TOPIC, 0).unwrap(), 0);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(log.compact().unwrap().records_removed, 0);
    assert_eq!(read_all(&log), written, "nothing compacted");
    assert!(log.background_error().is_none());
}

#[test]
fn without_the_flag_the_bound_is_in_memory_only() {
    let dir = tempfile::tempdir().unwrap();
    let written = fill(dir.path(), false);
    let log = Log::open(dir.path(), options()).unwrap();
    assert_eq!(log.cleanable_below(TOPIC, 0).unwrap(), u64::MAX);
    log.set_cleanable_below(TOPIC, 0, 10).unwrap();
    assert_eq!(log.cleanable_below(TOPIC, 0).unwrap(), 10);
    assert!(!bound_file(dir.path()).exists());
    drop(log);
    let log = Log::open(dir.path(), options()).unwrap();
    assert_eq!(log.cleanable_below(TOPIC, 0).unwrap(), u64::MAX, "forgotten at reopen");
    assert!(log.compact().unwrap().records_removed > 0);
    assert!(read_all(&log).len() < written.len());
}

#[test]
fn lowered_damaged_and_truncated_bounds_fall_back_safely() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), true);
    let log = Log::open(dir.path(), options()).unwrap();
    log.set_cleanable_below(TOPIC, 0, 100).unwrap();
    log.set_cleanable_below(TOPIC, 0, 60).unwrap();
    drop(log);
    let log = Log::open(dir.path(), options()).unwrap();
    assert_eq!(log.cleanable_below(TOPIC, 0).unwrap(), 60, "a lowered bound is persisted too");
    // Truncation clamps the bound to the cut: the offsets above it will be reused.
    log.truncate(TOPIC, 0, 50).unwrap();
    assert_eq!(log.cleanable_below(TOPIC, 0).unwrap(), 50);
    drop(log);
    let log = Log::open(dir.path(), options()).unwrap();
    assert_eq!(log.cleanable_below(TOPIC, 0).unwrap(), 50);
    drop(log);

    // A torn or lost write of the file (it is not fsynced when it grows)
    // means "compact nothing"; a leftover temp file is removed.
    let file = bound_file(dir.path());
    let good = fs::read(&file).unwrap();
    assert_eq!(good.len(), 12);
    let tmp = file.with_file_name("cleanable-below.tmp");
    let damaged: Vec<Vec<u8>> = vec![Vec::new(), good[..7].to_vec(), {
        let mut flipped = good.clone();
        flipped[3] ^= 1;
        flipped
    }];
    for bytes in damaged {
        fs::write(&file, &bytes).unwrap();
        fs::write(&tmp, b"partial").unwrap();
        let log = Log::open(dir.path(), options()).unwrap();
        assert_eq!(log.cleanable_below(TOPIC, 0).unwrap(), 0, "{bytes:?}");
        assert!(!tmp.exists());
        assert_eq!(log.compact().unwrap().records_removed, 0);
    }
}
