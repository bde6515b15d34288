//! A model-based property test of the log: random sequences of appends,
//! produces, fetches, time lookups, clock moves, retention, compaction,
//! offset commits and restarts (clean, unclean, and with damaged index files)
//! are run against a real data directory and an in-memory model of each
//! partition (its watermarks and its `(offset, record)` list).
//!
//! Appends, reads, watermarks, time lookups and restarts are compared
//! exactly. Retention and compaction depend on where segments rolled, which
//! the model does not track; for them the test reads the segment boundaries
//! from the partition directory, checks the outcome against the documented
//! rules and invariants ("validate"), and then replaces the model with what
//! the log holds ("adopt").

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use millpond_log::batch::encode_records;
use millpond_log::partitioner::partition_for_key;
use millpond_log::{CleanupPolicy, Error, FlushPolicy, Header, Log, LogOptions, ManualClock, Record, TopicConfig};
use proptest::prelude::*;

const TOPIC: &str = "t";
const GROUP: &str = "g";
const KEYS: [&[u8]; 4] = [b"a", b"b", b"c", b"d"];
const START_MS: i64 = 1_700_000_000_000;
const DAY_MS: u64 = 24 * 3600 * 1000;

// ---------------------------------------------------------------------------
// Operations and their strategies.

/// A record to build at the time the operation runs (timestamps are relative
/// to the clock then).
#[derive(Clone, Debug)]
struct RecordSpec {
    key: Option<usize>,
    value: Option<Vec<u8>>,
    ts_delta: i64,
    headers: Vec<(u8, Option<Vec<u8>>)>,
}

/// Where a fetch starts, relative to the model's watermarks.
#[derive(Clone, Copy, Debug)]
enum At {
    /// Anywhere in `[0, high + 3)`.
    Anywhere(u64),
    /// 1 to 3 below the low watermark (when there is room).
    BelowLow(u64),
    High,
    /// 1 to 3 above the high watermark.
    AboveHigh(u64),
}

#[derive(Clone, Copy, Debug)]
enum Restart {
    /// `Log::close`.
    Close,
    /// Drop the `Log` (its `Drop` also shuts down cleanly).
    Drop,
    /// Drop, then remove the clean-shutdown marker, so the next open
    /// recovers as after a crash (rescanning the active segments).
    Crash,
    /// Drop, then delete or truncate index files (a cache that must be
    /// rebuilt from the segments), and maybe remove the marker too.
    DamageIndexes(u64),
}

/// One step of a test case. `Append` appends `records` as one batch,
/// `repeat` times; partitions are taken modulo the topic's count.
#[derive(Clone, Debug)]
enum Op {
    Append { partition: u32, records: Vec<RecordSpec>, repeat: usize },
    AppendEmpty { partition: u32 },
    Produce { records: Vec<RecordSpec> },
    Fetch { partition: u32, at: At, max_bytes: usize },
    ReadAll { partition: u32 },
    OffsetForTime { partition: u32, ts_delta: i64 },
    Advance { ms: i64 },
    Retention,
    Compact,
    Flush,
    Commit { partition: u32, offset: u64 },
    Restart(Restart),
}

fn record_strategy() -> impl Strategy<Value = RecordSpec> {
    (
        prop_oneof![12 => (0..KEYS.len()).prop_map(Some), 1 => Just(None)],
        prop_oneof![4 => prop::collection::vec(any::<u8>(), 0..48).prop_map(Some), 1 => Just(None)],
        -30_000i64..=2_000,
        prop_oneof![
            3 => Just(Vec::new()),
            1 => prop::collection::vec((0u8..3, prop::option::of(prop::collection::vec(any::<u8>(), 0..8))), 1..=2),
        ],
    )
        .prop_map(|(key, value, ts_delta, headers)| RecordSpec { key, value, ts_delta, headers })
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let partition = 0u32..2;
    let at = prop_oneof![
        4 => any::<u64>().prop_map(At::Anywhere),
        1 => (1u64..=3).prop_map(At::BelowLow),
        1 => Just(At::High),
        1 => (1u64..=3).prop_map(At::AboveHigh),
    ];
    let restart = prop_oneof![
        Just(Restart::Close),
        Just(Restart::Drop),
        Just(Restart::Crash),
        any::<u64>().prop_map(Restart::DamageIndexes),
    ];
    prop_oneof![
        30 => (
            partition.clone(),
            prop::collection::vec(record_strategy(), 1..=5),
            prop_oneof![3 => Just(1usize), 1 => 2usize..=8],
        )
            .prop_map(|(partition, records, repeat)| Op::Append { partition, records, repeat }),
        1 => partition.clone().prop_map(|partition| Op::AppendEmpty { partition }),
        6 => prop::collection::vec(record_strategy(), 1..=5).prop_map(|records| Op::Produce { records }),
        14 => (partition.clone(), at, 1usize..=1_500)
            .prop_map(|(partition, at, max_bytes)| Op::Fetch { partition, at, max_bytes }),
        3 => partition.clone().prop_map(|partition| Op::ReadAll { partition }),
        6 => (partition.clone(), -35_000i64..=5_000)
            .prop_map(|(partition, ts_delta)| Op::OffsetForTime { partition, ts_delta }),
        6 => (0i64..=15_000).prop_map(|ms| Op::Advance { ms }),
        5 => Just(Op::Retention),
        5 => Just(Op::Compact),
        2 => Just(Op::Flush),
        3 => (partition.clone(), 0u64..1_000).prop_map(|(partition, offset)| Op::Commit { partition, offset }),
        5 => restart.prop_map(Op::Restart),
    ]
}

fn config_strategy() -> impl Strategy<Value = TopicConfig> {
    (
        prop_oneof![Just(CleanupPolicy::Delete), Just(CleanupPolicy::Compact), Just(CleanupPolicy::CompactDelete)],
        1u32..=2,
        prop_oneof![3 => 512u64..=1_024, 1 => 1_025u64..=2_048],
        prop_oneof![Just(60_000u64), Just(7 * DAY_MS)],
        prop::option::of(1_000u64..=20_000),
        prop::option::of(500u64..=4_000),
        0u64..=10_000,
        prop_oneof![
            Just(FlushPolicy::Durable),
            (1u64..=20).prop_map(|records| FlushPolicy::Interval { interval_ms: 3_600_000, records }),
        ],
        64u64..=1_024,
        prop_oneof![3 => Just(8u64 << 20), 1 => 300u64..=1_500],
    )
        .prop_map(
            |(
                cleanup_policy,
                partitions,
                segment_bytes,
                segment_ms,
                retention_ms,
                retention_bytes,
                delete_retention_ms,
                flush,
                index_interval_bytes,
                max_batch_bytes,
            )| TopicConfig {
                partitions,
                retention_ms,
                retention_bytes,
                segment_bytes,
                segment_ms,
                cleanup_policy,
                delete_retention_ms,
                flush,
                max_batch_bytes,
                index_interval_bytes,
                compaction_bound_required: false,
            },
        )
}

// ---------------------------------------------------------------------------
// The model and the harness that runs operations against both sides.

#[derive(Debug, Default, Clone)]
struct Part {
    low: u64,
    high: u64,
    records: Vec<(u64, Record)>,
}

impl Part {
    fn from(&self, offset: u64) -> Vec<(u64, Record)> {
        self.records.iter().filter(|(o, _)| *o >= offset).cloned().collect()
    }
    fn offset_for_time(&self, timestamp_ms: i64) -> u64 {
        self.records.iter().find(|(_, r)| r.timestamp_ms >= timestamp_ms).map_or(self.high, |(o, _)| *o)
    }
}

struct Harness {
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    config: TopicConfig,
    log: Option<Log>,
    parts: Vec<Part>,
    committed: BTreeMap<u32, u64>,
}

fn options(clock: &Arc<ManualClock>) -> LogOptions {
    LogOptions { clock: clock.clone(), background: false, ..LogOptions::default() }
}

fn partition_dir(dir: &Path, partition: u32) -> PathBuf {
    dir.join("topics").join(TOPIC).join(partition.to_string())
}

/// `(base offset, size in bytes)` of each segment of a partition, sorted.
fn segments_on_disk(dir: &Path, partition: u32) -> Vec<(u64, u64)> {
    let mut segments: Vec<(u64, u64)> = fs::read_dir(partition_dir(dir, partition))
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            let base = name.strip_suffix(".log")?.parse().expect("segment names are base offsets");
            Some((base, entry.metadata().unwrap().len()))
        })
        .collect();
    segments.sort_unstable();
    assert!(!segments.is_empty(), "a partition always has an active segment");
    segments
}

/// Latest value per key (tombstones fold to `None`).
fn fold(records: &[(u64, Record)]) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    records.iter().map(|(_, r)| (r.key.clone().expect("compacted records are keyed"), r.value.clone())).collect()
}

/// Whether `sub` is a subsequence of `full` (same offsets and contents).
fn is_subsequence(sub: &[(u64, Record)], full: &[(u64, Record)]) -> bool {
    let mut rest = full.iter();
    sub.iter().all(|item| rest.any(|candidate| candidate == item))
}

fn read_from(log: &Log, partition: u32, from: u64, max_bytes: usize) -> Vec<(u64, Record)> {
    let mut out = Vec::new();
    let mut offset = from;
    loop {
        let fetch = log.fetch(TOPIC, partition, offset, max_bytes).unwrap();
        if fetch.is_empty() {
            return out;
        }
        let next = fetch.next_offset();
        assert!(next > offset, "a non-empty fetch moves forward ({offset} -> {next})");
        out.extend(fetch.records().map(|r| (r.offset, r.to_record())));
        offset = next;
    }
}

impl Harness {
    fn new(config: TopicConfig) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(START_MS));
        let log = Log::open(dir.path(), options(&clock)).unwrap();
        log.create_topic(TOPIC, config.clone()).unwrap();
        let parts = vec![Part::default(); config.partitions as usize];
        Harness { dir, clock, config, log: Some(log), parts, committed: BTreeMap::new() }
    }

    fn log(&self) -> &Log {
        self.log.as_ref().expect("the log is open")
    }

    fn now(&self) -> i64 {
        use millpond_log::Clock;
        self.clock.now_ms()
    }

    fn partition(&self, partition: u32) -> u32 {
        partition % self.config.partitions
    }

    fn build(&self, specs: &[RecordSpec]) -> Vec<Record> {
        let now = self.now();
        specs
            .iter()
            .map(|spec| Record {
                key: spec.key.map(|k| KEYS[k].to_vec()),
                value: spec.value.clone(),
                timestamp_ms: now + spec.ts_delta,
                headers: spec
                    .headers
                    .iter()
                    .map(|(key, value)| Header { key: format!("h{key}"), value: value.clone() })
                    .collect(),
            })
            .collect()
    }

    fn batch_size(records: &[Record]) -> u64 {
        encode_records(&mut Vec::new(), 0, records) as u64
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Append { partition, records, repeat } => {
                for _ in 0..*repeat {
                    self.append(self.partition(*partition), records);
                }
            }
            Op::AppendEmpty { partition } => {
                let result = self.log().append(TOPIC, self.partition(*partition), &[]);
                assert!(matches!(result, Err(Error::EmptyBatch)), "{result:?}");
            }
            Op::Produce { records } => self.produce(records),
            Op::Fetch { partition, at, max_bytes } => {
                let p = self.partition(*partition);
                let part = &self.parts[p as usize];
                let offset = match *at {
                    At::Anywhere(raw) => raw % (part.high + 3),
                    At::BelowLow(d) => part.low.saturating_sub(d),
                    At::High => part.high,
                    At::AboveHigh(d) => part.high + d,
                };
                self.check_fetch(p, offset, *max_bytes);
            }
            Op::ReadAll { partition } => self.check_partition(self.partition(*partition)),
            Op::OffsetForTime { partition, ts_delta } => {
                self.check_offset_for_time(self.partition(*partition), self.now() + ts_delta)
            }
            Op::Advance { ms } => self.clock.advance_ms(*ms),
            Op::Retention => self.retention(),
            Op::Compact => self.compact(),
            Op::Flush => self.log().flush().unwrap(),
            Op::Commit { partition, offset } => {
                let p = self.partition(*partition);
                self.log().commit_offset(GROUP, TOPIC, p, *offset).unwrap();
                self.committed.insert(p, *offset);
                assert_eq!(self.log().committed_offset(GROUP, TOPIC, p), Some(*offset));
            }
            Op::Restart(kind) => self.restart(*kind),
        }
        self.check_watermarks();
    }

    fn append(&mut self, p: u32, specs: &[RecordSpec]) {
        let records = self.build(specs);
        let result = self.log().append(TOPIC, p, &records);
        if self.config.cleanup_policy.compacts() && records.iter().any(|r| r.key.is_none()) {
            assert!(matches!(result, Err(Error::KeyRequired(_))), "{result:?}");
            return;
        }
        let size = Harness::batch_size(&records);
        if size > self.config.max_batch_bytes {
            assert!(
                matches!(result, Err(Error::BatchTooLarge { size_bytes, .. }) if size_bytes as u64 == size),
                "{result:?}"
            );
            return;
        }
        let info = result.unwrap();
        let part = &mut self.parts[p as usize];
        assert_eq!(info.partition, p);
        assert_eq!(info.base_offset, part.high, "offsets are assigned consecutively");
        assert_eq!(info.last_offset, part.high + records.len() as u64 - 1);
        for record in records {
            part.records.push((part.high, record));
            part.high += 1;
        }
    }

    fn produce(&mut self, specs: &[RecordSpec]) {
        let mut records = self.build(specs);
        if self.config.cleanup_policy.compacts() {
            // Unkeyed records are covered by `append`; here every record routes by key.
            records.retain(|r| r.key.is_some());
            if records.is_empty() {
                return;
            }
        }
        // Every per-partition batch is at most a few bytes (timestamp deltas)
        // larger than the sub-batch it is cut from; stay clear of the limit.
        if Harness::batch_size(&records) + 64 > self.config.max_batch_bytes {
            return;
        }
        let count = self.config.partitions;
        let infos = self.log().produce(TOPIC, &records).unwrap();
        let mut keyed = vec![0u64; count as usize];
        for record in &records {
            if let Some(key) = &record.key {
                keyed[partition_for_key(key, count) as usize] += 1;
            }
        }
        let unkeyed = records.iter().filter(|r| r.key.is_none()).count() as u64;
        assert!(infos.windows(2).all(|w| w[0].partition < w[1].partition), "one batch per partition: {infos:?}");
        // Unkeyed records of one call all go to one partition: the one whose
        // batch is larger than its keyed records.
        let mut unkeyed_partition = None;
        for info in &infos {
            let appended = info.last_offset - info.base_offset + 1;
            let extra = appended.checked_sub(keyed[info.partition as usize]).expect("at least the keyed records");
            if extra > 0 {
                assert_eq!(extra, unkeyed, "all unkeyed records of a call go to one partition: {infos:?}");
                assert!(unkeyed_partition.replace(info.partition).is_none(), "{infos:?}");
            }
        }
        assert_eq!(unkeyed_partition.is_some(), unkeyed > 0, "{infos:?}");
        let touched: Vec<u32> = infos.iter().map(|i| i.partition).collect();
        let expected_touched: Vec<u32> =
            (0..count).filter(|&p| keyed[p as usize] > 0 || unkeyed_partition == Some(p)).collect();
        assert_eq!(touched, expected_touched);
        for info in &infos {
            let part = &mut self.parts[info.partition as usize];
            assert_eq!(info.base_offset, part.high);
            for record in &records {
                let target = match &record.key {
                    Some(key) => partition_for_key(key, count),
                    None => unkeyed_partition.expect("unkeyed records were routed"),
                };
                if target == info.partition {
                    part.records.push((part.high, record.clone()));
                    part.high += 1;
                }
            }
            assert_eq!(info.last_offset + 1, part.high);
        }
    }

    fn check_watermarks(&self) {
        for (p, part) in self.parts.iter().enumerate() {
            let p = p as u32;
            assert_eq!(self.log().low_watermark(TOPIC, p).unwrap(), part.low, "low watermark of {p}");
            assert_eq!(self.log().high_watermark(TOPIC, p).unwrap(), part.high, "high watermark of {p}");
        }
    }

    fn check_fetch(&self, p: u32, offset: u64, max_bytes: usize) {
        let part = &self.parts[p as usize];
        let result = self.log().fetch(TOPIC, p, offset, max_bytes);
        if offset < part.low || offset > part.high {
            match result {
                Err(Error::OffsetOutOfRange { topic, partition, offset: o, low, high }) => {
                    assert_eq!((topic.as_str(), partition, o, low, high), (TOPIC, p, offset, part.low, part.high));
                }
                other => panic!("fetch at {offset} outside [{}, {}] gave {other:?}", part.low, part.high),
            }
            return;
        }
        let fetch = result.unwrap_or_else(|e| panic!("fetch at {offset} in [{}, {}]: {e}", part.low, part.high));
        assert_eq!((fetch.partition, fetch.offset), (p, offset));
        assert_eq!((fetch.low_watermark, fetch.end_offset), (part.low, part.high));
        let next = fetch.next_offset();
        if offset == part.high {
            assert!(fetch.is_empty(), "a fetch at the high watermark is empty");
            assert_eq!(next, part.high);
            return;
        }
        assert!(next > offset && next <= part.high, "next offset {next} after a fetch at {offset}");
        let batches: Vec<_> = fetch.batches().collect();
        assert!(batches.windows(2).all(|w| w[0].last_offset() < w[1].base_offset()), "batches in order");
        if let Some(first) = batches.first() {
            assert!(first.last_offset() >= offset, "the first batch reaches the requested offset");
            assert!(
                fetch.bytes().len() <= max_bytes.max(first.size_bytes()),
                "{} bytes for max_bytes {max_bytes}",
                fetch.bytes().len()
            );
        }
        let got: Vec<(u64, Record)> = fetch.records().map(|r| (r.offset, r.to_record())).collect();
        let expected: Vec<(u64, Record)> = part.from(offset).into_iter().filter(|(o, _)| *o < next).collect();
        assert_eq!(got, expected, "fetch at {offset} (max_bytes {max_bytes}), next offset {next}");
        for end_offset in [u64::MAX, next - 1, offset + 1] {
            self.check_slice(p, offset, max_bytes, end_offset);
        }
    }

    /// A located slice holds the bytes a stored fetch reads, but for the
    /// batches that reach `end_offset`.
    fn check_slice(&self, p: u32, offset: u64, max_bytes: usize, end_offset: u64) {
        let stored = self.log().fetch_stored(TOPIC, p, offset, max_bytes).unwrap();
        let below: usize = stored.batches().take_while(|b| b.last_offset() < end_offset).map(|b| b.size_bytes()).sum();
        let located = self.log().fetch_slice(TOPIC, p, offset, max_bytes, end_offset).unwrap();
        assert_eq!((located.low_watermark, located.high_watermark), (stored.low_watermark, stored.end_offset));
        // The slice covers its batches' offsets and stops at or before the next batch.
        let inside = stored.batches().take_while(|b| b.last_offset() < end_offset).count();
        let past_last = stored.batches().take(inside).last().map_or(offset, |b| b.last_offset() + 1);
        let following = stored.batches().nth(inside).map_or(u64::MAX, |b| b.base_offset());
        if inside == 0 {
            assert_eq!(located.next_offset, offset, "an empty slice covers nothing");
        } else {
            assert!(
                (past_last..=following).contains(&located.next_offset),
                "the slice covers {past_last}..{following} at most, not {}",
                located.next_offset
            );
        }
        let mut bytes = Vec::new();
        if let Some(slice) = &located.slice {
            assert!(slice.os_file().is_some(), "a real data directory's slice is a file");
            slice.read_into(&mut bytes).unwrap();
        }
        assert_eq!(bytes, stored.bytes()[..below], "slice at {offset} (max_bytes {max_bytes}, end {end_offset})");
    }

    fn check_offset_for_time(&self, p: u32, timestamp_ms: i64) {
        let expected = self.parts[p as usize].offset_for_time(timestamp_ms);
        let got = self.log().offset_for_time(TOPIC, p, timestamp_ms).unwrap();
        assert_eq!(got, expected, "offset_for_time({timestamp_ms}) in partition {p}");
    }

    /// Everything observable about a partition, compared with the model.
    fn check_partition(&self, p: u32) {
        let part = &self.parts[p as usize];
        for max_bytes in [1, 700] {
            assert_eq!(read_from(self.log(), p, part.low, max_bytes), part.records, "partition {p}");
        }
        for offset in [part.low.saturating_sub(1), part.high, part.high + 1] {
            self.check_fetch(p, offset, 100);
        }
        let mut times: Vec<i64> = part.records.iter().map(|(_, r)| r.timestamp_ms).collect();
        times.sort_unstable();
        times.dedup();
        let step = times.len() / 12 + 1;
        for &t in times.iter().step_by(step) {
            for t in [t - 1, t, t + 1] {
                self.check_offset_for_time(p, t);
            }
        }
        if let (Some(first), Some(last)) = (times.first(), times.last()) {
            self.check_offset_for_time(p, first - 1_000);
            self.check_offset_for_time(p, last + 1_000);
        }
    }

    fn check_all(&self) {
        self.check_watermarks();
        for p in 0..self.config.partitions {
            self.check_partition(p);
            assert_eq!(self.log().committed_offset(GROUP, TOPIC, p), self.committed.get(&p).copied());
        }
    }

    fn retention(&mut self) {
        let now = self.now();
        // Predict, from the segment boundaries on disk, what the documented
        // rules delete: the longest prefix of the closed segments that are
        // past retention_ms (by their newest record), or that can go, oldest
        // first, while the partition exceeds retention_bytes without going
        // below it.
        let mut expected_deleted = 0;
        let mut expected_low = Vec::new();
        for (p, part) in self.parts.iter().enumerate() {
            let segments = segments_on_disk(self.dir.path(), p as u32);
            assert_eq!(segments[0].0, part.low, "the first segment starts at the low watermark");
            let closed = &segments[..segments.len() - 1];
            let mut count = 0;
            if self.config.cleanup_policy.deletes() {
                let by_time = match self.config.retention_ms {
                    Some(ms) => closed
                        .iter()
                        .enumerate()
                        .take_while(|&(i, &(base, _))| {
                            let end = segments[i + 1].0;
                            let newest = part
                                .records
                                .iter()
                                .filter(|(o, _)| (base..end).contains(o))
                                .map(|(_, r)| r.timestamp_ms)
                                .max()
                                .unwrap_or(i64::MIN);
                            newest < now.saturating_sub(ms as i64)
                        })
                        .count(),
                    None => 0,
                };
                let by_size = match self.config.retention_bytes {
                    Some(limit) => {
                        let total: u64 = segments.iter().map(|s| s.1).sum();
                        let mut excess = total.saturating_sub(limit);
                        closed
                            .iter()
                            .take_while(|&&(_, size)| {
                                let fits = excess > 0 && excess >= size;
                                excess = excess.saturating_sub(size);
                                fits
                            })
                            .count()
                    }
                    None => 0,
                };
                count = by_time.max(by_size);
            }
            expected_deleted += count;
            expected_low.push(segments[count].0);
        }

        let deleted = self.log().enforce_retention().unwrap();

        // Validate, then adopt.
        assert_eq!(deleted, expected_deleted, "segments deleted");
        for p in 0..self.config.partitions {
            let part = &self.parts[p as usize];
            let low = self.log().low_watermark(TOPIC, p).unwrap();
            let high = self.log().high_watermark(TOPIC, p).unwrap();
            assert_eq!(low, expected_low[p as usize], "low watermark after retention in {p}");
            assert!(low >= part.low, "the low watermark only grows");
            assert!(low <= part.high);
            assert_eq!(high, part.high, "retention never moves the high watermark");
            let remaining = read_from(self.log(), p, low, 700);
            assert_eq!(remaining, part.from(low), "retention removes exactly the records below the low watermark");
            if let Some(limit) = self.config.retention_bytes
                && self.config.retention_ms.is_none()
                && low > part.low
            {
                let size = self.log().describe(TOPIC).unwrap()[p as usize].size_bytes;
                assert!(size >= limit, "size retention stops at the limit ({size} < {limit})");
            }
            let part = &mut self.parts[p as usize];
            part.low = low;
            part.records = remaining;
        }
        // With one rule, a pass leaves nothing for the next. (With both, a
        // young segment that holds back the time-expired ones behind it may
        // go by size, and those go on the next pass.)
        if self.config.retention_ms.is_none() || self.config.retention_bytes.is_none() {
            assert_eq!(self.log().enforce_retention().unwrap(), 0, "retention is idempotent");
        }
    }

    fn compact(&mut self) {
        let now = self.now();
        let compacts = self.config.cleanup_policy.compacts();
        let delete_retention_ms = self.config.delete_retention_ms as i64;
        let expired = |r: &Record| r.value.is_none() && r.timestamp_ms.saturating_add(delete_retention_ms) <= now;
        let mut expected_all = Vec::new();
        let mut active_bases = Vec::new();
        for (p, part) in self.parts.iter().enumerate() {
            let segments = segments_on_disk(self.dir.path(), p as u32);
            let active_base = segments.last().unwrap().0;
            active_bases.push(active_base);
            // The cleaner keeps, in closed segments, the latest record per key
            // (among the closed segments) unless it is an expired tombstone.
            let mut latest: BTreeMap<&[u8], u64> = BTreeMap::new();
            for (offset, record) in part.records.iter().filter(|(o, _)| compacts && *o < active_base) {
                latest.insert(record.key.as_deref().unwrap(), *offset);
            }
            let expected: Vec<(u64, Record)> = part
                .records
                .iter()
                .filter(|(offset, record)| {
                    !compacts
                        || *offset >= active_base
                        || (latest[record.key.as_deref().unwrap()] == *offset && !expired(record))
                })
                .cloned()
                .collect();
            expected_all.push(expected);
        }

        let stats = self.log().compact().unwrap();

        let mut removed = 0;
        for p in 0..self.config.partitions {
            let part = &self.parts[p as usize];
            let active_base = active_bases[p as usize];
            let high = self.log().high_watermark(TOPIC, p).unwrap();
            let low = self.log().low_watermark(TOPIC, p).unwrap();
            assert_eq!((low, high), (part.low, part.high), "compaction never moves the watermarks");
            let remaining = read_from(self.log(), p, low, 700);
            assert!(is_subsequence(&remaining, &part.records), "survivors keep their offsets and contents");
            if compacts {
                let active_before: Vec<_> = part.from(active_base);
                let active_after: Vec<_> = remaining.iter().filter(|(o, _)| *o >= active_base).cloned().collect();
                assert_eq!(active_after, active_before, "the active segment is never cleaned");
                let mut expected_fold = fold(&part.records);
                for (offset, record) in &part.records {
                    let key = record.key.as_ref().unwrap();
                    let is_latest =
                        part.records.iter().rev().find(|(_, r)| r.key.as_ref() == Some(key)).unwrap().0 == *offset;
                    if is_latest && *offset < active_base && expired(record) {
                        expected_fold.remove(key);
                    } else if is_latest {
                        assert!(remaining.iter().any(|(o, _)| o == offset), "latest record at {offset} was removed");
                    }
                }
                assert_eq!(fold(&remaining), expected_fold, "reading the partition rebuilds every key's latest value");
            }
            assert_eq!(remaining, expected_all[p as usize], "records kept by compaction in partition {p}");
            removed += (part.records.len() - remaining.len()) as u64;
            self.parts[p as usize].records = remaining;
        }
        assert_eq!(stats.records_removed, removed, "{stats:?}");
        if !compacts {
            assert_eq!(stats.segments_rewritten, 0, "{stats:?}");
        }
    }

    fn restart(&mut self, kind: Restart) {
        let log = self.log.take().expect("the log is open");
        let marker = self.dir.path().join("clean-shutdown");
        match kind {
            Restart::Close => log.close().unwrap(),
            Restart::Drop => drop(log),
            Restart::Crash => {
                drop(log);
                fs::remove_file(&marker).unwrap();
            }
            Restart::DamageIndexes(seed) => {
                drop(log);
                let mut state = seed | 1;
                let mut next = move || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                if next() % 2 == 0 {
                    fs::remove_file(&marker).unwrap();
                }
                for p in 0..self.config.partitions {
                    let mut paths: Vec<PathBuf> = fs::read_dir(partition_dir(self.dir.path(), p))
                        .unwrap()
                        .map(|e| e.unwrap().path())
                        .filter(|path| matches!(path.extension().and_then(|e| e.to_str()), Some("index" | "timeindex")))
                        .collect();
                    paths.sort();
                    for path in paths {
                        let len = fs::metadata(&path).unwrap().len();
                        let entry = if path.extension().unwrap() == "index" { 8 } else { 12 };
                        let new_len = match next() % 4 {
                            0 => continue,
                            1 => {
                                fs::remove_file(&path).unwrap();
                                continue;
                            }
                            // A prefix of whole entries (a stale cache).
                            2 => (next() % (len / entry + 1)) * entry,
                            // A torn entry.
                            _ => next() % (len + 1),
                        };
                        OpenOptions::new().write(true).open(&path).unwrap().set_len(new_len).unwrap();
                    }
                }
            }
        }
        self.log = Some(Log::open(self.dir.path(), options(&self.clock)).unwrap());
        assert_eq!(self.log().topic_config(TOPIC).unwrap(), self.config);
        self.check_all();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn log_matches_model(config in config_strategy(), ops in prop::collection::vec(op_strategy(), 1..80)) {
        let mut harness = Harness::new(config);
        for op in &ops {
            harness.apply(op);
        }
        harness.check_all();
        harness.restart(Restart::Close);
    }
}

// ---------------------------------------------------------------------------
// Fixed regressions for bugs this model found.

/// Opens a log on `dir` with a manual clock and one topic `t`.
fn open_with_topic(dir: &Path, clock: &Arc<ManualClock>, config: TopicConfig) -> Log {
    let log = Log::open(dir, options(clock)).unwrap();
    log.create_topic(TOPIC, config).unwrap();
    log
}

/// A reopened segment re-derives its last index entry; the time entry there
/// must keep bounding the records before it (it used to become `i64::MIN`,
/// so time lookups skipped every batch before the last index entry).
#[test]
fn time_lookups_survive_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(START_MS));
    let log = open_with_topic(dir.path(), &clock, TopicConfig { index_interval_bytes: 64, ..Default::default() });
    for i in 0..4 {
        log.append(TOPIC, 0, &[Record::new(Some(b"k"), Some(b"v"), START_MS + 10 * i)]).unwrap();
    }
    log.close().unwrap();
    let log = Log::open(dir.path(), options(&clock)).unwrap();
    for i in 0..4 {
        assert_eq!(log.offset_for_time(TOPIC, 0, START_MS + 10 * i - 5).unwrap(), i as u64);
        assert_eq!(log.offset_for_time(TOPIC, 0, START_MS + 10 * i).unwrap(), i as u64);
    }
}

/// Index files are a cache: a time index shorter than its offset index (a
/// torn write) must be rebuilt, not trusted to bound the earlier records.
#[test]
fn a_time_index_shorter_than_its_offset_index_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(START_MS));
    let log = open_with_topic(dir.path(), &clock, TopicConfig { index_interval_bytes: 64, ..Default::default() });
    for i in 0..4 {
        log.append(TOPIC, 0, &[Record::new(Some(b"k"), Some(b"v"), START_MS + 10 * i)]).unwrap();
    }
    log.close().unwrap();
    let time_index = partition_dir(dir.path(), 0).join(format!("{:020}.timeindex", 0));
    assert!(fs::metadata(&time_index).unwrap().len() >= 24, "the segment has several index entries");
    OpenOptions::new().write(true).open(&time_index).unwrap().set_len(12).unwrap();
    let log = Log::open(dir.path(), options(&clock)).unwrap();
    for i in 0..4 {
        assert_eq!(log.offset_for_time(TOPIC, 0, START_MS + 10 * i - 5).unwrap(), i as u64);
    }
}

/// Size retention deletes only while the partition exceeds retention_bytes:
/// a segment emptied by compaction is not excess (it used to be deleted,
/// moving the low watermark of a partition far below its limit).
#[test]
fn size_retention_leaves_a_partition_under_its_limit_alone() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(START_MS));
    let config = TopicConfig {
        segment_bytes: 512,
        retention_ms: None,
        retention_bytes: Some(1 << 20),
        cleanup_policy: CleanupPolicy::CompactDelete,
        ..Default::default()
    };
    let log = open_with_topic(dir.path(), &clock, config);
    for i in 0..30 {
        log.append(TOPIC, 0, &[Record::new(Some(b"k"), Some(&[i; 40]), START_MS)]).unwrap();
    }
    log.compact().unwrap();
    let segments = segments_on_disk(dir.path(), 0);
    assert!(segments.len() > 2 && segments[0] == (0, 0), "the first segment was compacted empty: {segments:?}");
    assert_eq!(log.enforce_retention().unwrap(), 0);
    assert_eq!(log.low_watermark(TOPIC, 0).unwrap(), 0);
}
