//! Concurrency: tailing readers against a live writer, and concurrent
//! appenders sharing a durable partition (group commit).
//!
//! Readers tail with `fetch` and block in `wait_for` when they are caught
//! up; nothing here sleeps to poll.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use millpond_log::{AppendInfo, FlushPolicy, Log, LogOptions, ManualClock, Record, TopicConfig};

const TOPIC: &str = "t";
const START_MS: i64 = 1_700_000_000_000;
/// How long a reader waits for the next offset before declaring the writer stuck.
const STALL: Duration = Duration::from_secs(60);

fn options(background: bool) -> LogOptions {
    // A manual clock keeps retention and time-based rolling out of the way;
    // the background thread (for the interval flusher) ticks on real time.
    LogOptions {
        clock: Arc::new(ManualClock::new(START_MS)),
        background,
        maintenance_interval_ms: 3_600_000,
        flush_tick_ms: 1,
        ..LogOptions::default()
    }
}

fn topic_config(flush: FlushPolicy) -> TopicConfig {
    TopicConfig {
        segment_bytes: 32 * 1024,
        index_interval_bytes: 1024,
        retention_ms: None,
        flush,
        ..Default::default()
    }
}

/// A deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The value written at `offset`: the offset itself, then a padding whose
/// length also depends on the offset, so batch sizes vary.
fn value_at(offset: u64) -> Vec<u8> {
    let mut value = offset.to_be_bytes().to_vec();
    value.extend(std::iter::repeat_n(offset as u8, (offset % 23) as usize));
    value
}

/// The one writer's batches: `(base offset, record count)`, covering `[0, total)`.
fn batch_layout(total: u64, seed: u64) -> Vec<(u64, u64)> {
    let mut rng = Rng(seed);
    let mut layout = Vec::new();
    let mut base = 0;
    while base < total {
        // Mostly small batches, sometimes large ones.
        let size = if rng.below(8) == 0 { 1 + rng.below(400) } else { 1 + rng.below(16) };
        let size = size.min(total - base);
        layout.push((base, size));
        base += size;
    }
    layout
}

fn batch_records(index: usize, base: u64, count: u64) -> Vec<Record> {
    (base..base + count)
        .map(|offset| Record {
            key: Some((index as u32).to_be_bytes().to_vec()),
            value: Some(value_at(offset)),
            timestamp_ms: START_MS + offset as i64,
            headers: Vec::new(),
        })
        .collect()
}

/// Tails partition 0 from offset 0 until it has seen every batch of
/// `layout`, checking each batch is whole and each record is the one written
/// at its offset. Returns the number of fetches made.
fn tail(log: &Log, layout: &[(u64, u64)], max_bytes: usize) -> usize {
    let total = layout.last().map_or(0, |&(base, count)| base + count);
    let mut offset = 0u64;
    let mut next_batch = 0usize;
    let mut fetches = 0;
    while offset < total {
        let fetch = log.fetch(TOPIC, 0, offset, max_bytes).unwrap_or_else(|e| panic!("fetch at {offset}: {e}"));
        fetches += 1;
        assert_eq!(fetch.low_watermark, 0);
        if fetch.is_empty() {
            assert!(fetch.end_offset <= offset, "an empty fetch at {offset} below the high watermark {fetch:?}");
            assert!(log.wait_for(TOPIC, 0, offset, STALL).unwrap(), "no offset {offset} after {STALL:?}");
            continue;
        }
        for batch in fetch.batches() {
            // Nothing past the high watermark the fetch reports, so the next
            // fetch (at `next_offset`) is never out of range.
            assert!(
                batch.last_offset() < fetch.end_offset,
                "batch {}..={} returned with high watermark {}",
                batch.base_offset(),
                batch.last_offset(),
                fetch.end_offset
            );
            let (base, count) = layout[next_batch];
            assert_eq!(
                (batch.base_offset(), batch.last_offset(), batch.record_count() as u64),
                (base, base + count - 1, count),
                "batch {next_batch} is seen whole and at its offsets"
            );
            let mut expected = base;
            for record in batch.records() {
                assert_eq!(record.offset, expected, "offsets inside batch {next_batch} are consecutive");
                assert_eq!(record.key, Some(&(next_batch as u32).to_be_bytes()[..]));
                assert_eq!(record.value, Some(&value_at(expected)[..]), "value at {expected}");
                assert_eq!(record.timestamp_ms, START_MS + expected as i64);
                expected += 1;
            }
            assert_eq!(expected, base + count);
            next_batch += 1;
            offset = base + count;
        }
        assert_eq!(fetch.next_offset(), offset, "the next fetch starts right after the last batch");
    }
    assert_eq!(next_batch, layout.len(), "every batch seen exactly once");
    fetches
}

fn writer_and_tailing_readers(flush: FlushPolicy) {
    const TOTAL: u64 = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let layout = batch_layout(TOTAL, 0x9e37_79b9_7f4a_7c15);
    let started = Instant::now();
    {
        let log = Log::open(dir.path(), options(true)).unwrap();
        log.create_topic(TOPIC, topic_config(flush)).unwrap();
        thread::scope(|s| {
            let (log, layout) = (&log, &layout);
            let readers: Vec<_> = [1usize, 700, 16 * 1024, 1 << 20]
                .into_iter()
                .map(|max_bytes| s.spawn(move || tail(log, layout, max_bytes)))
                .collect();
            let writer = s.spawn(|| {
                for (index, &(base, count)) in layout.iter().enumerate() {
                    let info = log.append(TOPIC, 0, &batch_records(index, base, count)).unwrap();
                    assert_eq!((info.base_offset, info.last_offset), (base, base + count - 1));
                }
            });
            writer.join().unwrap();
            for reader in readers {
                let fetches = reader.join().unwrap();
                assert!(fetches >= 1);
            }
        });
        assert_eq!(log.high_watermark(TOPIC, 0).unwrap(), TOTAL);
        assert!(log.describe(TOPIC).unwrap()[0].segments > 5, "the readers crossed segment rolls");
        assert_eq!(log.background_error(), None);
        log.close().unwrap();
    }
    // Everything acknowledged is there after a restart, read the same way.
    let log = Log::open(dir.path(), options(false)).unwrap();
    assert_eq!(log.high_watermark(TOPIC, 0).unwrap(), TOTAL);
    tail(&log, &layout, 64 * 1024);
    eprintln!("{flush:?}: {TOTAL} records in {} batches, 4 tailing readers: {:?}", layout.len(), started.elapsed());
}

#[test]
fn tailing_readers_see_every_durable_batch_once_in_order() {
    writer_and_tailing_readers(FlushPolicy::Durable);
}

#[test]
fn tailing_readers_see_every_interval_flushed_batch_once_in_order() {
    writer_and_tailing_readers(FlushPolicy::Interval { interval_ms: 5, records: 1000 });
}

#[test]
fn concurrent_appenders_share_a_durable_partition() {
    const THREADS: u32 = 8;
    const BATCHES: u32 = 150;
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(dir.path(), options(false)).unwrap();
    log.create_topic(TOPIC, topic_config(FlushPolicy::Durable)).unwrap();
    // Each record's value is (thread, batch, index in batch).
    let encode =
        |thread: u32, batch: u32, index: u32| [thread.to_be_bytes(), batch.to_be_bytes(), index.to_be_bytes()].concat();
    let started = Instant::now();
    let appended: Vec<Vec<(AppendInfo, u32)>> = thread::scope(|s| {
        let appenders: Vec<_> = (0..THREADS)
            .map(|thread| {
                let log = &log;
                s.spawn(move || {
                    let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ u64::from(thread + 1));
                    (0..BATCHES)
                        .map(|batch| {
                            let count = 1 + rng.below(5) as u32;
                            let records: Vec<Record> = (0..count)
                                .map(|index| {
                                    Record::new(None, Some(&encode(thread, batch, index)), START_MS + i64::from(batch))
                                })
                                .collect();
                            let info = log
                                .append(TOPIC, 0, &records)
                                .unwrap_or_else(|e| panic!("thread {thread} batch {batch}: {e}"));
                            // Acknowledged means durable means visible.
                            assert!(log.high_watermark(TOPIC, 0).unwrap() > info.last_offset);
                            (info, count)
                        })
                        .collect()
                })
            })
            .collect();
        appenders.into_iter().map(|a| a.join().unwrap()).collect()
    });
    let elapsed = started.elapsed();

    // The batches' offset ranges are disjoint and together cover [0, total).
    let mut ranges: BTreeMap<u64, (u64, u32, u32)> = BTreeMap::new();
    for (thread, batches) in appended.iter().enumerate() {
        // Each thread's batches are in its own append order.
        assert!(batches.windows(2).all(|w| w[0].0.last_offset < w[1].0.base_offset), "thread {thread} order");
        for (batch, (info, count)) in batches.iter().enumerate() {
            assert_eq!(info.partition, 0);
            assert_eq!(info.last_offset - info.base_offset + 1, u64::from(*count), "a batch gets consecutive offsets");
            let previous = ranges.insert(info.base_offset, (info.last_offset, thread as u32, batch as u32));
            assert!(previous.is_none(), "two batches at offset {}", info.base_offset);
        }
    }
    let mut next = 0;
    for (&base, &(last, _, _)) in &ranges {
        assert_eq!(base, next, "no gap or overlap at offset {next}");
        next = last + 1;
    }
    let total = next;
    let expected_total: u64 = appended.iter().flatten().map(|(_, count)| u64::from(*count)).sum();
    assert_eq!(total, expected_total);
    assert_eq!(log.high_watermark(TOPIC, 0).unwrap(), total);

    // The log holds each batch's records at the offsets its append returned.
    let mut offset = 0;
    let mut by_offset = ranges.iter().peekable();
    while offset < total {
        let fetch = log.fetch(TOPIC, 0, offset, 64 * 1024).unwrap();
        for batch in fetch.batches() {
            let (&base, &(last, thread, index)) = by_offset.next().expect("a batch for every range");
            assert_eq!((batch.base_offset(), batch.last_offset()), (base, last), "batches are stored whole");
            for (i, record) in batch.records().enumerate() {
                assert_eq!(record.offset, base + i as u64);
                assert_eq!(record.value, Some(&encode(thread, index, i as u32)[..]), "record at {}", record.offset);
            }
        }
        offset = fetch.next_offset();
    }
    assert!(by_offset.peek().is_none());
    eprintln!(
        "{THREADS} appenders, {} batches, {total} records, durable: {elapsed:?}",
        appended.iter().map(Vec::len).sum::<usize>()
    );
}
