//! `Log::truncate` and the read-only `PartitionReader`, through the public API.
//!
//! Truncation is checked at every batch boundary of a multi-segment
//! partition (each cut on a fresh copy of one template directory), inside
//! batches (an error that must change nothing) and above the high
//! watermark. The reader is checked against the records the log was given:
//! exact `[offset, upto)` ranges, calls that continue one another, a writer
//! appending in the same process, and compacted topics.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use millpond_log::{
    CleanupPolicy, Error, FlushPolicy, Log, LogOptions, ManualClock, OffsetRecord, PartitionReader, Record, TopicConfig,
};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};

const TOPIC: &str = "t";
const START_MS: i64 = 1_700_000_000_000;
/// Batch sizes of the template partition, cycled.
const BATCH_SIZES: [usize; 7] = [1, 3, 2, 5, 1, 4, 2];
const TEMPLATE_BATCHES: usize = 42;

fn options(clock: &Arc<ManualClock>) -> LogOptions {
    LogOptions { clock: clock.clone(), background: false, ..LogOptions::default() }
}

fn open(dir: &Path) -> Log {
    Log::open(dir, options(&Arc::new(ManualClock::new(START_MS)))).unwrap()
}

/// Small segments, and no fsync per append (rolls still sync).
fn small_segments(partitions: u32) -> TopicConfig {
    TopicConfig {
        partitions,
        retention_ms: None,
        segment_bytes: 512,
        flush: FlushPolicy::Interval { interval_ms: 60_000, records: u64::MAX },
        ..TopicConfig::default()
    }
}

/// Record number `i`: a key from a small set, a value of varying length and
/// a header every few records.
fn record(i: u64) -> Record {
    let mut r = Record::new(
        Some(format!("k{}", i % 7).as_bytes()),
        Some(format!("value-{i}-{}", "x".repeat((i % 5) as usize * 3)).as_bytes()),
        START_MS + i as i64,
    );
    if i.is_multiple_of(4) {
        r.headers.push(millpond_log::Header { key: "h".into(), value: Some(i.to_be_bytes().to_vec()) });
    }
    r
}

/// Reads a partition through the log's own fetch API.
fn fetch_all(log: &Log, topic: &str, partition: u32) -> Vec<(u64, Record)> {
    let mut out = Vec::new();
    let mut offset = log.low_watermark(topic, partition).unwrap();
    loop {
        let fetch = log.fetch(topic, partition, offset, 300).unwrap();
        if fetch.is_empty() {
            return out;
        }
        out.extend(fetch.records().map(|r| (r.offset, r.to_record())));
        offset = fetch.next_offset();
    }
}

/// Reads `[from, upto)` with a fresh reader, `max_bytes` per call, until
/// it is at `upto` or calls keep returning nothing. Checks the per-call
/// invariants on the way. (A call may return nothing while it skips batches
/// below its offset: see `a_read_returns_records_whenever_some_are_readable`.)
fn reader_range(dir: &Path, topic: &str, partition: u32, from: u64, upto: u64, max_bytes: usize) -> Vec<(u64, Record)> {
    let mut reader = PartitionReader::new(dir, topic, partition, from).unwrap();
    let mut out: Vec<(u64, Record)> = Vec::new();
    let mut empty_calls = 0;
    for _ in 0..100_000 {
        let before = reader.next_offset();
        let records = reader.read(upto, max_bytes).unwrap();
        if records.is_empty() {
            empty_calls += 1;
            if reader.next_offset() >= upto || empty_calls >= 64 {
                return out;
            }
            continue;
        }
        empty_calls = 0;
        check_call(&records, before, upto, out.last().map(|(o, _)| *o));
        assert!(reader.next_offset() > records.last().unwrap().offset, "next_offset moves past what was returned");
        out.extend(records.into_iter().map(|r| (r.offset, r.record)));
    }
    panic!("the reader never ran out of records");
}

/// One call's records: in `[before, upto)`, strictly increasing, after the previous call's.
fn check_call(records: &[OffsetRecord], before: u64, upto: u64, previous: Option<u64>) {
    for pair in records.windows(2) {
        assert!(pair[0].offset < pair[1].offset, "offsets strictly increase within a call");
    }
    let (first, last) = (records[0].offset, records.last().unwrap().offset);
    assert!(first >= before, "record {first} is below the reader's next offset {before}");
    assert!(last < upto, "record {last} is at or past upto {upto}");
    assert!(previous.is_none_or(|p| first > p), "record {first} repeats or precedes the previous call's {previous:?}");
}

/// Base offsets of the `.log` files of a partition directory.
fn segment_bases(dir: &Path, topic: &str, partition: u32) -> Vec<u64> {
    let mut bases: Vec<u64> = fs::read_dir(dir.join("topics").join(topic).join(partition.to_string()))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".log")?.parse().ok())
        .collect();
    bases.sort_unstable();
    bases
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A closed data directory with topic `t`: partition 0 holds
/// `TEMPLATE_BATCHES` batches over several segments, partition 1 a few.
struct Template {
    dir: tempfile::TempDir,
    /// Partition 0's records, offset = index.
    records: Vec<Record>,
    /// Offsets at which a batch starts, plus the high watermark.
    boundaries: Vec<u64>,
    /// Partition 1's records.
    other: Vec<(u64, Record)>,
}

impl Template {
    fn build() -> Template {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path());
        log.create_topic(TOPIC, small_segments(2)).unwrap();
        let mut records = Vec::new();
        let mut boundaries = vec![0];
        for b in 0..TEMPLATE_BATCHES {
            let n = BATCH_SIZES[b % BATCH_SIZES.len()];
            let batch: Vec<Record> = (0..n).map(|j| record((records.len() + j) as u64)).collect();
            let info = log.append(TOPIC, 0, &batch).unwrap();
            assert_eq!(info.base_offset, records.len() as u64);
            records.extend(batch);
            boundaries.push(records.len() as u64);
        }
        let other: Vec<(u64, Record)> = (0..5).map(|i| (i, record(1000 + i))).collect();
        for (_, r) in &other {
            log.append(TOPIC, 1, std::slice::from_ref(r)).unwrap();
        }
        assert!(log.describe(TOPIC).unwrap()[0].segments >= 5, "the template spans several segments");
        log.close().unwrap();
        Template { dir, records, boundaries, other }
    }

    fn copy(&self) -> tempfile::TempDir {
        let copy = tempfile::tempdir().unwrap();
        copy_dir(self.dir.path(), copy.path());
        copy
    }

    fn expected_below(&self, offset: u64) -> Vec<(u64, Record)> {
        self.records.iter().take(offset as usize).cloned().enumerate().map(|(i, r)| (i as u64, r)).collect()
    }

    fn high(&self) -> u64 {
        self.records.len() as u64
    }
}

// ---------------------------------------------------------------------------
// Truncation.

#[test]
fn truncation_at_every_batch_boundary_keeps_exactly_the_records_below_it() {
    let template = Template::build();
    let bases = segment_bases(template.dir.path(), TOPIC, 0);
    assert!(bases.len() >= 5);
    // Every segment base is a batch boundary; the cuts include them, 0 and the high watermark.
    assert!(bases.iter().all(|b| template.boundaries.contains(b)));
    for &cut in &template.boundaries {
        let copy = template.copy();
        let dir = copy.path();
        let expected = template.expected_below(cut);
        let log = open(dir);
        log.truncate(TOPIC, 0, cut).unwrap();
        assert_eq!(log.high_watermark(TOPIC, 0).unwrap(), cut, "cut {cut}");
        assert_eq!(fetch_all(&log, TOPIC, 0), expected, "cut {cut}: fetch after truncation");
        assert_eq!(reader_range(dir, TOPIC, 0, 0, u64::MAX, 200), expected, "cut {cut}: reader after truncation");
        assert!(
            segment_bases(dir, TOPIC, 0).iter().all(|&b| b <= cut),
            "cut {cut}: no segment starts above the cut: {:?}",
            segment_bases(dir, TOPIC, 0)
        );
        assert_eq!(fetch_all(&log, TOPIC, 1), template.other, "cut {cut}: the other partition is untouched");
        log.close().unwrap();

        // Survives close and reopen, then continues at the cut.
        let log = open(dir);
        assert_eq!(log.high_watermark(TOPIC, 0).unwrap(), cut, "cut {cut}: after reopen");
        assert_eq!(fetch_all(&log, TOPIC, 0), expected, "cut {cut}: after reopen");
        let new: Vec<Record> = (0..3).map(|i| record(5000 + i)).collect();
        let info = log.append(TOPIC, 0, &new).unwrap();
        assert_eq!((info.base_offset, info.last_offset), (cut, cut + 2), "cut {cut}: appends continue at the cut");
        let info = log.append(TOPIC, 0, &[record(6000)]).unwrap();
        assert_eq!(info.base_offset, cut + 3);
        let mut after = expected.clone();
        after.extend(new.into_iter().chain([record(6000)]).enumerate().map(|(i, r)| (cut + i as u64, r)));
        assert_eq!(fetch_all(&log, TOPIC, 0), after, "cut {cut}: old records then new ones");
        log.close().unwrap();
        let log = open(dir);
        assert_eq!(fetch_all(&log, TOPIC, 0), after, "cut {cut}: new records survive a reopen");
        assert_eq!(log.high_watermark(TOPIC, 0).unwrap(), cut + 4);
        assert_eq!(fetch_all(&log, TOPIC, 1), template.other);
        drop(log);
        assert_eq!(reader_range(dir, TOPIC, 0, 0, u64::MAX, 1), after, "cut {cut}: reader after reopen");
    }
}

#[test]
fn truncation_without_a_reopen_continues_at_the_cut_and_can_cut_again() {
    let template = Template::build();
    let copy = template.copy();
    let dir = copy.path();
    let log = open(dir);
    let mut expected = template.expected_below(template.high());
    // Cut from the top down through a few boundaries, appending after each cut.
    for (n, &cut) in template.boundaries.iter().rev().step_by(5).enumerate() {
        let cut = cut.min(expected.len() as u64);
        log.truncate(TOPIC, 0, cut).unwrap();
        expected.truncate(cut as usize);
        assert_eq!(fetch_all(&log, TOPIC, 0), expected, "cut {cut}");
        let batch: Vec<Record> = (0..2).map(|i| record(10_000 + n as u64 * 10 + i)).collect();
        assert_eq!(log.append(TOPIC, 0, &batch).unwrap().base_offset, cut, "the same handle appends at the cut");
        expected.extend(batch.into_iter().enumerate().map(|(i, r)| (cut + i as u64, r)));
        assert_eq!(fetch_all(&log, TOPIC, 0), expected, "cut {cut} then an append");
    }
    log.close().unwrap();
    let log = open(dir);
    assert_eq!(fetch_all(&log, TOPIC, 0), expected);
}

#[test]
fn truncation_at_the_high_watermark_is_a_no_op_and_above_it_an_error() {
    let template = Template::build();
    let copy = template.copy();
    let dir = copy.path();
    let log = open(dir);
    let high = template.high();
    let all = template.expected_below(high);
    log.truncate(TOPIC, 0, high).unwrap();
    assert_eq!(fetch_all(&log, TOPIC, 0), all);
    for offset in [high + 1, high + 2, high + 1000, u64::MAX] {
        match log.truncate(TOPIC, 0, offset) {
            Err(Error::OffsetOutOfRange { offset: o, high: h, .. }) => assert_eq!((o, h), (offset, high)),
            other => panic!("truncate({offset}) above the high watermark {high}: {other:?}"),
        }
        assert_eq!(log.high_watermark(TOPIC, 0).unwrap(), high);
        assert_eq!(fetch_all(&log, TOPIC, 0), all, "a failed truncate({offset}) changes nothing");
    }
    assert!(matches!(log.truncate("nope", 0, 0), Err(Error::UnknownTopic(_))));
    assert!(matches!(log.truncate(TOPIC, 7, 0), Err(Error::UnknownPartition { .. })));
    assert_eq!(log.append(TOPIC, 0, &[record(9)]).unwrap().base_offset, high, "appends still work");
    log.close().unwrap();
    let log = open(dir);
    assert_eq!(log.high_watermark(TOPIC, 0).unwrap(), high + 1);
    assert_eq!(fetch_all(&log, TOPIC, 0)[..high as usize], all[..]);
}

/// Offsets strictly inside multi-record batches of the template, each with
/// whether its batch is in the last segment.
fn offsets_inside_batches(template: &Template) -> Vec<(u64, bool)> {
    let bases = segment_bases(template.dir.path(), TOPIC, 0);
    let last_base = *bases.last().unwrap();
    template.boundaries.windows(2).flat_map(|w| (w[0] + 1..w[1]).map(move |o| (o, w[0] >= last_base))).collect()
}

#[test]
fn truncation_inside_a_batch_is_an_error_and_leaves_the_data_alone() {
    let template = Template::build();
    let all = template.expected_below(template.high());
    let inside = offsets_inside_batches(&template);
    assert!(inside.iter().any(|(_, last)| *last) && inside.iter().any(|(_, last)| !*last));
    let mut failures = Vec::new();
    for &(offset, in_last_segment) in &inside {
        let copy = template.copy();
        let dir = copy.path();
        let log = open(dir);
        let segments = segment_bases(dir, TOPIC, 0);
        let result = log.truncate(TOPIC, 0, offset);
        let segments_after = segment_bases(dir, TOPIC, 0);
        drop(log);
        let log = open(dir);
        let (high, records) = (log.high_watermark(TOPIC, 0).unwrap(), fetch_all(&log, TOPIC, 0));
        if result.is_ok() || segments_after != segments || high != template.high() || records != all {
            failures.push(format!(
                "truncate({offset}) (a batch in {}): result {:?}, segments {} -> {}, \
                 after reopen high watermark {high} (was {}), {} of {} records left",
                if in_last_segment { "the last segment" } else { "a closed segment" },
                result.map_err(|e| e.to_string()),
                segments.len(),
                segments_after.len(),
                template.high(),
                records.len(),
                all.len(),
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} truncations inside a batch changed the partition (first 6 shown):\n{}",
        failures.len(),
        inside.len(),
        failures.iter().take(6).cloned().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn after_a_failed_truncation_inside_a_batch_the_same_handle_still_reads_and_appends() {
    let template = Template::build();
    let all = template.expected_below(template.high());
    // One offset inside a batch of the last segment: nothing needs deleting.
    let (offset, _) = *offsets_inside_batches(&template).iter().rev().find(|(_, last)| *last).unwrap();
    let copy = template.copy();
    let dir = copy.path();
    let log = open(dir);
    assert!(log.truncate(TOPIC, 0, offset).is_err(), "truncate({offset}) inside a batch must fail");
    assert_eq!(log.high_watermark(TOPIC, 0).unwrap(), template.high());
    assert_eq!(fetch_all(&log, TOPIC, 0), all, "reads after a failed truncate({offset})");
    let appended = log.append(TOPIC, 0, &[record(7777)]);
    assert_eq!(
        appended.as_ref().map(|i| i.base_offset).map_err(ToString::to_string),
        Ok(template.high()),
        "appends after a failed truncate({offset}) must still work: nothing changed"
    );
}

// ---------------------------------------------------------------------------
// PartitionReader.

#[test]
fn reader_returns_exactly_the_records_in_the_range_across_segments() {
    let template = Template::build();
    let dir = template.dir.path();
    let high = template.high();
    let all = template.expected_below(high);
    let bases = segment_bases(dir, TOPIC, 0);
    // Interesting offsets: 0, segment bases and their neighbours, batch
    // boundaries, offsets inside batches, the high watermark.
    let mut points: Vec<u64> = vec![0, 1, high - 1, high];
    points.extend(bases.iter().flat_map(|&b| [b.saturating_sub(1), b, b + 1]));
    points.extend(template.boundaries.iter().step_by(4));
    points.retain(|&p| p <= high);
    points.sort_unstable();
    points.dedup();
    for &from in &points {
        for &upto in points.iter().filter(|&&u| u >= from) {
            for max_bytes in [1, 150, 1 << 20] {
                let got = reader_range(dir, TOPIC, 0, from, upto, max_bytes);
                assert_eq!(got, all[from as usize..upto as usize], "[{from}, {upto}) by {max_bytes} bytes");
            }
        }
    }
    // Past the high watermark there is nothing more.
    assert_eq!(reader_range(dir, TOPIC, 0, 0, high + 100, 1 << 20), all);
    assert_eq!(reader_range(dir, TOPIC, 0, high, u64::MAX, 1 << 20), vec![]);
    assert_eq!(reader_range(dir, TOPIC, 1, 0, u64::MAX, 1 << 20), template.other);
    assert!(matches!(PartitionReader::new(dir, "nope", 0, 0), Err(Error::UnknownTopic(_))));
    assert!(PartitionReader::new(dir, TOPIC, 9, 0).is_err(), "no partition 9");
}

#[test]
fn reader_never_reads_past_upto_even_when_more_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    log.create_topic(TOPIC, small_segments(1)).unwrap();
    let mut all = Vec::new();
    let append = |n: usize, all: &mut Vec<(u64, Record)>| {
        let batch: Vec<Record> = (0..n).map(|j| record((all.len() + j) as u64)).collect();
        let info = log.append(TOPIC, 0, &batch).unwrap();
        all.extend(batch.into_iter().enumerate().map(|(j, r)| (info.base_offset + j as u64, r)));
    };
    for n in [3, 1, 4, 2] {
        append(n, &mut all);
    }
    let mut reader = PartitionReader::new(dir.path(), TOPIC, 0, 0).unwrap();
    let mut got: Vec<(u64, Record)> = Vec::new();
    // upto = 5 cuts the third batch (offsets 4..=7).
    let first = reader.read(5, 1 << 20).unwrap();
    assert_eq!(first.iter().map(|r| r.offset).collect::<Vec<_>>(), (0..5).collect::<Vec<_>>());
    assert_eq!(reader.next_offset(), 5);
    got.extend(first.into_iter().map(|r| (r.offset, r.record)));
    // More is written (including segment rolls); the bound still holds.
    for n in [5, 1, 2, 6, 3, 1, 4, 4, 2] {
        append(n, &mut all);
    }
    assert!(log.describe(TOPIC).unwrap()[0].segments > 2);
    for _ in 0..3 {
        assert!(reader.read(5, 1 << 20).unwrap().is_empty(), "nothing below upto is left");
        assert_eq!(reader.next_offset(), 5);
    }
    // Raising upto continues exactly where the last call stopped, inside the cut batch.
    let mut upto = 5;
    for step in [1, 2, 7, 1, 13, 100] {
        upto = (upto + step).min(all.len() as u64);
        loop {
            let before = reader.next_offset();
            let records = reader.read(upto, 64).unwrap();
            if records.is_empty() {
                break;
            }
            check_call(&records, before, upto, got.last().map(|(o, _)| *o));
            got.extend(records.into_iter().map(|r| (r.offset, r.record)));
        }
        assert_eq!(got, all[..upto as usize], "upto {upto}");
        assert_eq!(reader.next_offset(), upto);
    }
    assert_eq!(got, all);
}

#[test]
fn reader_calls_continue_each_other_without_gaps_or_duplicates() {
    let template = Template::build();
    let dir = template.dir.path();
    let high = template.high();
    let all = template.expected_below(high);
    // Each call: how far to move upto (0 allowed) and a byte budget.
    let calls = proptest::collection::vec((0u64..12, prop_oneof![Just(1usize), 1usize..400, Just(1 << 20)]), 1..80);
    let mut runner = TestRunner::new(RunnerConfig { cases: 64, failure_persistence: None, ..RunnerConfig::default() });
    runner
        .run(&(0..high, calls), |(from, calls)| {
            let mut reader = PartitionReader::new(dir, TOPIC, 0, from).unwrap();
            let mut got: Vec<(u64, Record)> = Vec::new();
            let mut upto = from;
            for (step, max_bytes) in calls {
                upto += step;
                let before = reader.next_offset();
                let records = reader.read(upto, max_bytes).unwrap();
                if !records.is_empty() {
                    check_call(&records, before, upto, got.last().map(|(o, _)| *o));
                }
                got.extend(records.into_iter().map(|r| (r.offset, r.record)));
                // No gaps: what has been read is a prefix of [from, high).
                let end = (from as usize + got.len()).min(all.len());
                prop_assert_eq!(&got[..], &all[from as usize..end]);
                prop_assert!(reader.next_offset() <= upto.max(from));
            }
            // Finish: everything up to the high watermark, once.
            loop {
                let records = reader.read(u64::MAX, 1 << 20).unwrap();
                if records.is_empty() {
                    break;
                }
                got.extend(records.into_iter().map(|r| (r.offset, r.record)));
            }
            prop_assert_eq!(&got[..], &all[from as usize..]);
            Ok(())
        })
        .unwrap();
}

#[test]
fn reader_tails_a_log_appending_in_the_same_process() {
    for flush in [FlushPolicy::Interval { interval_ms: 60_000, records: u64::MAX }, FlushPolicy::Durable] {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(open(dir.path()));
        let config = TopicConfig { segment_bytes: 1024, flush, ..small_segments(1) };
        log.create_topic(TOPIC, config).unwrap();
        let total: u64 = if flush == FlushPolicy::Durable { 400 } else { 3000 };
        let done = Arc::new(AtomicBool::new(false));
        let writer = {
            let (log, done) = (log.clone(), done.clone());
            std::thread::spawn(move || {
                let mut next = 0u64;
                while next < total {
                    let n = (next % 7 + 1).min(total - next);
                    let batch: Vec<Record> = (next..next + n).map(record).collect();
                    assert_eq!(log.append(TOPIC, 0, &batch).unwrap().base_offset, next);
                    next += n;
                }
                done.store(true, Ordering::SeqCst);
            })
        };
        let mut reader = PartitionReader::new(dir.path(), TOPIC, 0, 0).unwrap();
        let mut got: Vec<OffsetRecord> = Vec::new();
        let mut calls = 0u64;
        while (got.len() as u64) < total {
            // The writer guarantees whole batches below its high watermark.
            let upto = log.high_watermark(TOPIC, 0).unwrap();
            let before = reader.next_offset();
            let records = reader.read(upto, 100 + (calls % 5) as usize * 300).unwrap();
            calls += 1;
            if records.is_empty() {
                assert!(calls < 10_000_000, "the reader stopped making progress at {before}");
                std::thread::yield_now();
                continue;
            }
            check_call(&records, before, upto, got.last().map(|r| r.offset));
            got.extend(records);
        }
        writer.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
        assert!(log.describe(TOPIC).unwrap()[0].segments > 10, "the writer rolled segments while being read");
        let expected: Vec<(u64, Record)> = (0..total).map(|i| (i, record(i))).collect();
        assert_eq!(got.into_iter().map(|r| (r.offset, r.record)).collect::<Vec<_>>(), expected, "{flush:?}");
        assert!(reader.read(u64::MAX, 1 << 20).unwrap().is_empty());
    }
}

// ---------------------------------------------------------------------------
// Compacted topics.

/// A compacted topic in `dir`, written and compacted once: returns the log
/// and every record appended (with its offset), before compaction.
fn compacted(dir: &Path, clock: &Arc<ManualClock>, count: u64) -> (Log, Vec<(u64, Record)>) {
    let log = Log::open(dir, options(clock)).unwrap();
    let config =
        TopicConfig { cleanup_policy: CleanupPolicy::Compact, delete_retention_ms: 1_000, ..small_segments(1) };
    log.create_topic(TOPIC, config).unwrap();
    let mut appended = Vec::new();
    let mut i = 0u64;
    while i < count {
        let n = (i % 3 + 1).min(count - i);
        let batch: Vec<Record> = (i..i + n)
            .map(|j| {
                // Every third record updates one of 4 hot keys; the others
                // have keys of their own (some are tombstones).
                let key = if j % 3 == 0 { format!("hot{}", j % 4) } else { format!("u{j}") };
                let value = (j % 13 != 5).then(|| format!("v{j}"));
                Record::new(Some(key.as_bytes()), value.as_deref().map(str::as_bytes), START_MS)
            })
            .collect();
        let info = log.append(TOPIC, 0, &batch).unwrap();
        appended.extend(batch.into_iter().enumerate().map(|(k, r)| (info.base_offset + k as u64, r)));
        i += n;
    }
    (log, appended)
}

/// What compaction keeps: the latest record per key among the closed
/// segments (tombstones included, as their retention has not passed), and
/// everything in the active segment, which starts at `active_base`.
fn survivors(appended: &[(u64, Record)], active_base: u64) -> Vec<(u64, Record)> {
    let mut latest: BTreeMap<&[u8], u64> = BTreeMap::new();
    for (offset, r) in appended.iter().filter(|(o, _)| *o < active_base) {
        latest.insert(r.key.as_deref().unwrap(), *offset);
    }
    appended
        .iter()
        .filter(|(o, r)| *o >= active_base || latest.get(r.key.as_deref().unwrap()) == Some(o))
        .cloned()
        .collect()
}

#[test]
fn reader_returns_the_survivors_of_a_compacted_topic_in_offset_order() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(START_MS));
    let (log, appended) = compacted(dir.path(), &clock, 400);
    let stats = log.compact().unwrap();
    assert!(stats.records_removed > 100, "{stats:?}");
    let high = log.high_watermark(TOPIC, 0).unwrap();
    let active_base = *segment_bases(dir.path(), TOPIC, 0).last().unwrap();
    let expected = survivors(&appended, active_base);
    assert_eq!(fetch_all(&log, TOPIC, 0), expected, "the log's own fetch agrees with the model");
    let path = dir.path();
    for max_bytes in [1, 100, 1 << 20] {
        assert_eq!(reader_range(path, TOPIC, 0, 0, high, max_bytes), expected, "by {max_bytes} bytes");
    }
    // Any sub-range, including bounds inside the gaps compaction left.
    for from in (0..=high).step_by(17) {
        for upto in (from..=high).step_by(23).chain([high]) {
            let want: Vec<_> = expected.iter().filter(|(o, _)| (from..upto).contains(o)).cloned().collect();
            assert_eq!(reader_range(path, TOPIC, 0, from, upto, 150), want, "[{from}, {upto})");
        }
    }
    // Tombstones expire; a second pass removes them and the reader agrees again.
    clock.advance_ms(1_000);
    log.compact().unwrap();
    let after = fetch_all(&log, TOPIC, 0);
    assert!(after.len() < expected.len(), "expired tombstones are removed");
    assert!(after.iter().all(|(o, r)| r.value.is_some() || *o >= active_base));
    assert_eq!(reader_range(path, TOPIC, 0, 0, high, 200), after);
}

#[test]
fn reader_keeps_its_place_when_compaction_rewrites_the_segment_it_is_in() {
    // Stop a reader at several places, compact under it, and let it go on:
    // it must continue with exactly the survivors past its place.
    let mut failures = Vec::new();
    for stop_after in [1usize, 2, 4, 7, 12, 30, 80, 150] {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(START_MS));
        let (log, appended) = compacted(dir.path(), &clock, 400);
        let high = log.high_watermark(TOPIC, 0).unwrap();
        let active_base = *segment_bases(dir.path(), TOPIC, 0).last().unwrap();
        let mut reader = PartitionReader::new(dir.path(), TOPIC, 0, 0).unwrap();
        let mut got: Vec<(u64, Record)> = Vec::new();
        while got.len() < stop_after {
            let records = reader.read(high, 1).unwrap();
            assert!(!records.is_empty());
            got.extend(records.into_iter().map(|r| (r.offset, r.record)));
        }
        let place = reader.next_offset();
        assert_eq!(got, appended.iter().filter(|(o, _)| *o < place).cloned().collect::<Vec<_>>());
        assert!(log.compact().unwrap().records_removed > 0);
        let mut empty_calls = 0;
        let mut error = None;
        while empty_calls < 64 && reader.next_offset() < high {
            match reader.read(high, 150) {
                Ok(records) if records.is_empty() => empty_calls += 1,
                Ok(records) => {
                    empty_calls = 0;
                    got.extend(records.into_iter().map(|r| (r.offset, r.record)));
                }
                Err(e) => {
                    error = Some(e.to_string());
                    break;
                }
            }
        }
        let mut want: Vec<(u64, Record)> = appended.iter().filter(|(o, _)| *o < place).cloned().collect();
        want.extend(survivors(&appended, active_base).into_iter().filter(|(o, _)| *o >= place));
        if error.is_some() || got != want {
            let offsets =
                |v: &[(u64, Record)]| v.iter().map(|(o, _)| *o).filter(|o| *o >= place).take(8).collect::<Vec<_>>();
            failures.push(format!(
                "stopped at offset {place}: error {error:?}; read next {:?}, expected {:?}",
                offsets(&got),
                offsets(&want)
            ));
        }
    }
    assert!(failures.is_empty(), "{} of 8 stop points went wrong:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn reader_next_offset_reaches_upto_when_upto_falls_in_a_compaction_gap() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(START_MS));
    let (log, appended) = compacted(dir.path(), &clock, 400);
    log.compact().unwrap();
    let active_base = *segment_bases(dir.path(), TOPIC, 0).last().unwrap();
    let kept: Vec<u64> = survivors(&appended, active_base).iter().map(|(o, _)| *o).collect();
    // Bounds just past a gap that compaction left between two surviving records.
    let gaps: Vec<u64> = kept.windows(2).filter(|w| w[1] > w[0] + 1).map(|w| w[1]).collect();
    assert!(gaps.len() > 5, "compaction left gaps: {gaps:?}");
    let mut stuck = Vec::new();
    for &upto in &gaps {
        let mut reader = PartitionReader::new(dir.path(), TOPIC, 0, 0).unwrap();
        let mut count = 0;
        while !reader.read(upto, 1 << 20).unwrap().is_empty() {
            count += 1;
            assert!(count < 10_000);
        }
        // Everything below upto has been read: a caller (the view reader)
        // checks next_offset() against upto to tell "done" from "missing".
        if reader.next_offset() != upto {
            stuck.push((upto, reader.next_offset()));
        }
    }
    assert!(stuck.is_empty(), "(upto, next_offset) after reading everything below upto: {stuck:?}");
}

#[test]
fn a_read_returns_records_whenever_some_are_readable() {
    // `read` documents: "Returns an empty vector when nothing below upto is
    // readable yet." Start readers inside segments, with small budgets.
    let template = Template::build();
    let dir = template.dir.path();
    let high = template.high();
    let mut empty = Vec::new();
    for from in 0..high {
        for max_bytes in [1, 100] {
            let mut reader = PartitionReader::new(dir, TOPIC, 0, from).unwrap();
            let records = reader.read(high, max_bytes).unwrap();
            match records.first() {
                Some(first) => assert_eq!(first.offset, from),
                None => empty.push((from, max_bytes)),
            }
        }
    }
    assert!(empty.is_empty(), "(offset, max_bytes) of first calls that returned nothing: {empty:?}");
}

#[test]
fn compaction_stops_at_the_cleanable_limit() {
    use millpond_log::{CleanupPolicy, Log, LogOptions, Record, TopicConfig};
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), LogOptions { background: false, ..LogOptions::default() }).unwrap();
    let config = TopicConfig { segment_bytes: 512, cleanup_policy: CleanupPolicy::Compact, ..TopicConfig::default() };
    log.create_topic("c", config).unwrap();
    // Every record rewrites one of three keys: almost everything is superseded.
    for i in 0..300u64 {
        let key = format!("k{}", i % 3);
        log.append("c", 0, &[Record::new(Some(key.as_bytes()), Some(format!("v{i}").as_bytes()), 0)]).unwrap();
    }
    let limit = 150;
    log.set_cleanable_below("c", 0, limit).unwrap();
    let stats = log.compact().unwrap();
    assert!(stats.records_removed > 0, "{stats:?}");
    let mut offsets = Vec::new();
    let mut offset = 0;
    while offset < log.high_watermark("c", 0).unwrap() {
        let fetch = log.fetch("c", 0, offset, 1 << 20).unwrap();
        offsets.extend(fetch.records().map(|r| r.offset));
        offset = fetch.next_offset();
    }
    let first_kept = offsets.iter().position(|&o| o >= limit).unwrap();
    // At and above the limit, nothing was touched...
    assert_eq!(offsets[first_kept..].to_vec(), (offsets[first_kept]..300).collect::<Vec<_>>());
    assert!(offsets[first_kept] <= limit + 10, "only segments wholly below the limit were cleaned");
    // ...and below it, records were removed only when a later record of the
    // same key below the limit superseded them: each key keeps its latest one there.
    let below: Vec<u64> = offsets[..first_kept].to_vec();
    assert!(below.len() < limit as usize, "something below the limit was compacted");
    for key in 0..3u64 {
        let latest_below = (0..offsets[first_kept]).filter(|o| o % 3 == key).max().unwrap();
        assert!(below.contains(&latest_below), "key {key}: its latest record below the limit survives");
    }
    log.close().unwrap();
}
