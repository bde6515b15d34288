//! Transactions on the log against a from-scratch recomputation: random
//! interleavings of transactional batches of a few producers, plain
//! batches, commit and abort markers, restarts (clean and unclean),
//! compaction and small segments. After every step the committed read
//! (`Log::fetch`) must equal the records of plain batches and of committed
//! transactions below the first open transaction, in offset order; the
//! uncommitted read everything but markers; the last stable offset and the
//! aborted ranges what the model says.

use std::collections::BTreeMap;
use std::sync::Arc;

use millpond_log::batch::encode_records;
use millpond_log::{
    AbortedTxn, CleanupPolicy, ControlMarker, ControlType, Log, LogOptions, ManualClock, Record, TopicConfig,
};
use proptest::prelude::*;

const TOPIC: &str = "t";
const START_MS: i64 = 1_700_000_000_000;

#[derive(Clone, Debug)]
enum Op {
    /// A transactional batch of producer `producer` (keys from `keys`).
    Data {
        producer: i64,
        keys: Vec<u8>,
    },
    Plain {
        keys: Vec<u8>,
    },
    End {
        producer: i64,
        commit: bool,
    },
    Restart {
        clean: bool,
    },
    Compact,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let keys = prop::collection::vec(0u8..6, 1..4);
    prop_oneof![
        6 => (0i64..3, keys.clone()).prop_map(|(producer, keys)| Op::Data { producer, keys }),
        3 => keys.prop_map(|keys| Op::Plain { keys }),
        4 => (0i64..3, any::<bool>()).prop_map(|(producer, commit)| Op::End { producer, commit }),
        1 => any::<bool>().prop_map(|clean| Op::Restart { clean }),
        1 => Just(Op::Compact),
    ]
}

/// A batch as a transactional producer encodes it: attribute bit 4, its
/// producer id and epoch, a base sequence.
fn transactional_batch(records: &[Record], producer: i64, sequence: i32) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_records(&mut bytes, 0, records.iter());
    bytes[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    bytes[43..51].copy_from_slice(&producer.to_be_bytes());
    bytes[51..53].copy_from_slice(&0i16.to_be_bytes());
    bytes[53..57].copy_from_slice(&sequence.to_be_bytes());
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    bytes
}

/// One stored batch as the model sees it.
#[derive(Clone, Debug)]
struct Stored {
    base: u64,
    /// `None`: plain; `Some(p)`: transactional of producer p.
    producer: Option<i64>,
    records: Vec<Record>,
    /// For transactional batches: committed (`Some(true)`), aborted, or open.
    outcome: Option<bool>,
    marker: bool,
}

struct Harness {
    dir: tempfile::TempDir,
    clock: Arc<ManualClock>,
    compacted: bool,
    log: Option<Log>,
    batches: Vec<Stored>,
    sequence: i32,
}

impl Harness {
    fn new(compacted: bool) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(START_MS));
        let log = Log::open(dir.path(), options(&clock)).unwrap();
        let config = TopicConfig {
            partitions: 1,
            segment_bytes: 512,
            cleanup_policy: if compacted { CleanupPolicy::Compact } else { CleanupPolicy::Delete },
            delete_retention_ms: 0,
            ..TopicConfig::default()
        };
        log.create_topic(TOPIC, config).unwrap();
        Harness { dir, clock, compacted, log: Some(log), batches: Vec::new(), sequence: 0 }
    }

    fn log(&self) -> &Log {
        self.log.as_ref().unwrap()
    }

    fn records(&mut self, keys: &[u8]) -> Vec<Record> {
        keys.iter()
            .map(|k| {
                self.sequence += 1;
                Record::new(Some(&[b'k', *k]), Some(format!("v{}", self.sequence).as_bytes()), START_MS)
            })
            .collect()
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Data { producer, keys } => {
                let records = self.records(keys);
                let mut bytes = transactional_batch(&records, *producer, self.sequence);
                let info = self.log().append_produced(TOPIC, 0, &mut bytes).unwrap();
                let stored =
                    Stored { base: info.base_offset, producer: Some(*producer), records, outcome: None, marker: false };
                self.batches.push(stored);
            }
            Op::Plain { keys } => {
                let records = self.records(keys);
                let info = self.log().append(TOPIC, 0, &records).unwrap();
                let stored = Stored { base: info.base_offset, producer: None, records, outcome: None, marker: false };
                self.batches.push(stored);
            }
            Op::End { producer, commit } => {
                let control = if *commit { ControlType::Commit } else { ControlType::Abort };
                let marker = ControlMarker {
                    producer_id: *producer,
                    producer_epoch: 0,
                    control,
                    coordinator_epoch: 0,
                    timestamp_ms: START_MS,
                };
                let info = self.log().append_control(TOPIC, 0, marker).unwrap();
                for batch in self.batches.iter_mut().filter(|b| b.producer == Some(*producer) && !b.marker) {
                    batch.outcome.get_or_insert(*commit);
                }
                let stored = Stored {
                    base: info.base_offset,
                    producer: Some(*producer),
                    records: Vec::new(),
                    outcome: Some(*commit),
                    marker: true,
                };
                self.batches.push(stored);
            }
            Op::Restart { clean } => {
                let log = self.log.take().unwrap();
                if *clean {
                    log.close().unwrap();
                } else {
                    drop(log);
                    let _ = std::fs::remove_file(self.dir.path().join("clean-shutdown"));
                }
                self.log = Some(Log::open(self.dir.path(), options(&self.clock)).unwrap());
            }
            Op::Compact => {
                self.log().compact().unwrap();
            }
        }
        self.check();
    }

    fn high(&self) -> u64 {
        self.batches.last().map_or(0, |b| b.base + b.records.len().max(1) as u64)
    }

    fn stable(&self) -> u64 {
        let first_open =
            self.batches.iter().filter(|b| b.producer.is_some() && b.outcome.is_none()).map(|b| b.base).min();
        first_open.unwrap_or(self.high())
    }

    fn committed(&self) -> Vec<(u64, Record)> {
        let stable = self.stable();
        self.batches
            .iter()
            .filter(|b| !b.marker && b.base < stable && (b.producer.is_none() || b.outcome == Some(true)))
            .flat_map(|b| b.records.iter().cloned().enumerate().map(move |(i, r)| (b.base + i as u64, r)))
            .collect()
    }

    fn check(&self) {
        let log = self.log();
        assert_eq!(log.high_watermark(TOPIC, 0).unwrap(), self.high());
        assert_eq!(log.last_stable_offset(TOPIC, 0).unwrap(), self.stable(), "the last stable offset");
        let read = read_all(log, |offset| log.fetch(TOPIC, 0, offset, 300).unwrap());
        let expected = self.committed();
        if self.compacted {
            // Compaction may have removed older values of a key: what is read is
            // a subsequence of the committed records with the same latest values.
            let mut rest = expected.iter();
            assert!(read.iter().all(|r| rest.any(|e| e == r)), "committed reads are committed records, in order");
            assert_eq!(latest(&read), latest(&expected), "and keep each key's latest committed value");
        } else {
            assert_eq!(read, expected, "the committed read");
            let everything = read_all(log, |offset| log.fetch_uncommitted(TOPIC, 0, offset, 300).unwrap());
            let all: Vec<_> = self
                .batches
                .iter()
                .flat_map(|b| b.records.iter().cloned().enumerate().map(move |(i, r)| (b.base + i as u64, r)))
                .collect();
            assert_eq!(everything, all, "the uncommitted read holds every record but markers");
            let aborted = log.aborted_transactions(TOPIC, 0, 0, u64::MAX).unwrap();
            assert_eq!(aborted, self.aborted(), "aborted ranges");
        }
    }

    /// Each aborted transaction: its producer, first data offset, marker offset.
    fn aborted(&self) -> Vec<AbortedTxn> {
        let mut out = Vec::new();
        let mut open: BTreeMap<i64, u64> = BTreeMap::new();
        for batch in &self.batches {
            let producer = match batch.producer {
                Some(p) => p,
                None => continue,
            };
            if !batch.marker {
                open.entry(producer).or_insert(batch.base);
            } else if let Some(first) = open.remove(&producer)
                && batch.outcome == Some(false)
            {
                out.push(AbortedTxn { producer_id: producer, first_offset: first, last_offset: batch.base });
            }
        }
        out
    }
}

fn options(clock: &Arc<ManualClock>) -> LogOptions {
    LogOptions { clock: clock.clone(), background: false, ..LogOptions::default() }
}

fn read_all(log: &Log, fetch: impl Fn(u64) -> millpond_log::Fetch) -> Vec<(u64, Record)> {
    let mut out = Vec::new();
    let mut offset = log.low_watermark(TOPIC, 0).unwrap();
    loop {
        let fetched = fetch(offset);
        if fetched.is_empty() {
            return out;
        }
        let next = fetched.next_offset();
        assert!(next > offset, "a non-empty fetch moves forward");
        out.extend(fetched.records().map(|r| (r.offset, r.to_record())));
        offset = next;
    }
}

fn latest(records: &[(u64, Record)]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    records.iter().map(|(_, r)| (r.key.clone().unwrap(), r.value.clone().unwrap())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn committed_reads_match_a_recomputation(compacted in any::<bool>(), ops in prop::collection::vec(op_strategy(), 1..60)) {
        let mut harness = Harness::new(compacted);
        for op in &ops {
            harness.apply(op);
        }
        harness.apply(&Op::Restart { clean: false });
    }
}

#[test]
fn clients_may_not_write_markers() {
    let harness = Harness::new(false);
    let mut bytes = Vec::new();
    let marker = ControlMarker {
        producer_id: 1,
        producer_epoch: 0,
        control: ControlType::Commit,
        coordinator_epoch: 0,
        timestamp_ms: 0,
    };
    millpond_log::batch::encode_control(&mut bytes, 0, marker);
    let refused = harness.log().append_produced(TOPIC, 0, &mut bytes).unwrap_err();
    assert!(refused.to_string().contains("control"), "{refused}");
    assert_eq!(harness.log().high_watermark(TOPIC, 0).unwrap(), 0);
}

#[test]
fn a_committed_reader_waits_at_an_open_transaction() {
    let mut harness = Harness::new(false);
    harness.apply(&Op::Data { producer: 7, keys: vec![1] });
    let log = harness.log();
    assert!(!log.wait_for(TOPIC, 0, 0, std::time::Duration::from_millis(20)).unwrap(), "nothing committed yet");
    harness.apply(&Op::End { producer: 7, commit: true });
    assert!(harness.log().wait_for(TOPIC, 0, 0, std::time::Duration::from_millis(20)).unwrap());
}
