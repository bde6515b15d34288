//! The idempotent producer: InitProducerId hands out producer ids that are
//! never handed out again (blocks of [`ID_BLOCK`] reserved in
//! `DATA_DIR/kafka-producer-ids`, synced before any id of a block is
//! given), and Produce checks each batch of a producer id against the last
//! [`BATCHES_KEPT`] batches that id wrote to the partition, as Kafka does:
//! a batch seen before is answered as success with its first offset (not
//! written again), one that follows the last (sequence + 1, or 0 in a new
//! epoch) is appended, an older epoch is INVALID_PRODUCER_EPOCH and a gap
//! OUT_OF_ORDER_SEQUENCE_NUMBER (UNKNOWN_PRODUCER_ID when retention may
//! have taken the producer's batches).
//!
//! The state is the log's own: a stored batch keeps its producer id, epoch
//! and base sequence as produced, so a partition's state is rebuilt by
//! reading its batches' headers the first time a producer id writes to it
//! after the server starts, whatever way it stopped (kill -9 included).
//!
//! Invariants: a partition's check and append run under its lock, so two
//! connections with one producer id cannot both append a sequence; a
//! producer's kept batches are in sequence order and at most
//! [`BATCHES_KEPT`]; a producer id is never handed out twice by one data
//! directory.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kafka_protocol::ResponseError;

use super::errors::{WireError, wire};
use crate::engine::Engine;

/// Batches of a producer kept per partition (Kafka's in-flight bound).
pub(crate) const BATCHES_KEPT: usize = 5;
/// Producer ids reserved on disk at a time.
pub(crate) const ID_BLOCK: i64 = 1000;
/// The file that holds the first producer id not yet reserved.
pub(crate) const IDS_FILE: &str = "kafka-producer-ids";

/// A producer id's epoch and base sequence as a batch's header carries them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchProducer {
    pub(crate) id: i64,
    pub(crate) epoch: i16,
    pub(crate) first_sequence: i32,
    pub(crate) records: i32,
    /// Attribute bit 4: the batch belongs to a transaction.
    pub(crate) transactional: bool,
}

impl BatchProducer {
    /// The producer fields of a v2 batch's header (None: not idempotent).
    pub(crate) fn of(batch: &[u8]) -> Option<BatchProducer> {
        let header = batch.get(..61)?;
        let id = i64::from_be_bytes(header[43..51].try_into().expect("8 bytes"));
        let epoch = i16::from_be_bytes(header[51..53].try_into().expect("2 bytes"));
        let first_sequence = i32::from_be_bytes(header[53..57].try_into().expect("4 bytes"));
        let records = i32::from_be_bytes(header[57..61].try_into().expect("4 bytes"));
        let attributes = i16::from_be_bytes(header[21..23].try_into().expect("2 bytes"));
        let transactional = attributes & 0x10 != 0;
        (id >= 0).then_some(BatchProducer { id, epoch, first_sequence, records, transactional })
    }

    fn last_sequence(&self) -> i32 {
        // Sequences wrap at i32::MAX to 0, as Kafka's do.
        ((i64::from(self.first_sequence) + i64::from(self.records) - 1) % (i64::from(i32::MAX) + 1)) as i32
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Kept {
    first_sequence: i32,
    last_sequence: i32,
    base_offset: u64,
}

#[derive(Debug, Default)]
struct Producer {
    epoch: i16,
    batches: VecDeque<Kept>,
}

/// The producers that wrote to one partition.
#[derive(Debug, Default)]
struct Partition {
    loaded: bool,
    producers: HashMap<i64, Producer>,
}

impl Partition {
    fn remember(&mut self, producer: BatchProducer, base_offset: u64) {
        let entry = self.producers.entry(producer.id).or_default();
        if producer.epoch != entry.epoch {
            entry.batches.clear();
            entry.epoch = producer.epoch;
        }
        entry.batches.push_back(Kept {
            first_sequence: producer.first_sequence,
            last_sequence: producer.last_sequence(),
            base_offset,
        });
        while entry.batches.len() > BATCHES_KEPT {
            entry.batches.pop_front();
        }
        debug_assert!(entry.batches.len() <= BATCHES_KEPT);
    }

    /// What to do with a batch of `producer`: `Ok(Some(offset))` a
    /// duplicate of the batch at `offset`, `Ok(None)` append it.
    fn check(&self, producer: BatchProducer, log_trimmed: bool) -> Result<Option<u64>, WireError> {
        let Some(entry) = self.producers.get(&producer.id) else {
            return match producer.first_sequence {
                0 => Ok(None),
                _ if log_trimmed => Err(unknown_producer(producer)),
                _ => Err(out_of_order(producer, None)),
            };
        };
        if producer.epoch < entry.epoch {
            let message = format!("producer {} epoch {} is older than {}", producer.id, producer.epoch, entry.epoch);
            return Err(WireError::new(ResponseError::InvalidProducerEpoch, message));
        }
        if producer.epoch > entry.epoch {
            return if producer.first_sequence == 0 { Ok(None) } else { Err(out_of_order(producer, None)) };
        }
        let duplicate = entry.batches.iter().find(|kept| {
            kept.first_sequence == producer.first_sequence && kept.last_sequence == producer.last_sequence()
        });
        if let Some(kept) = duplicate {
            return Ok(Some(kept.base_offset));
        }
        let last = entry.batches.back().map_or(-1, |kept| kept.last_sequence);
        let next = if last == i32::MAX { 0 } else { last + 1 };
        if producer.first_sequence == next { Ok(None) } else { Err(out_of_order(producer, Some(last))) }
    }
}

fn out_of_order(producer: BatchProducer, last: Option<i32>) -> WireError {
    let after = last.map_or_else(|| "none".to_owned(), |l| l.to_string());
    let message = format!(
        "producer {} epoch {}: sequence {} does not follow the last one written ({after})",
        producer.id, producer.epoch, producer.first_sequence
    );
    WireError::new(ResponseError::OutOfOrderSequenceNumber, message)
}

fn unknown_producer(producer: BatchProducer) -> WireError {
    let message = format!("producer {}: its earlier batches are no longer in the log", producer.id);
    WireError::new(ResponseError::UnknownProducerId, message)
}

type SharedPartition = Arc<Mutex<Partition>>;

/// Every partition's producer state, and the id allocator.
#[derive(Debug)]
pub(crate) struct Producers {
    /// By topic id and partition.
    partitions: Mutex<HashMap<(u128, u32), SharedPartition>>,
    ids: Mutex<IdBlock>,
}

#[derive(Debug)]
struct IdBlock {
    path: PathBuf,
    next: i64,
    reserved_end: i64,
}

impl Producers {
    pub(crate) fn new(data_dir: &Path) -> Producers {
        let ids = IdBlock { path: data_dir.join(IDS_FILE), next: 0, reserved_end: 0 };
        Producers { partitions: Mutex::new(HashMap::new()), ids: Mutex::new(ids) }
    }

    /// A producer id no one was given before.
    pub(crate) fn allocate(&self) -> std::io::Result<i64> {
        let mut ids = self.ids.lock().expect("producer ids lock");
        if ids.next >= ids.reserved_end {
            let start = read_next_id(&ids.path)?.max(ids.reserved_end);
            write_next_id(&ids.path, start + ID_BLOCK)?;
            (ids.next, ids.reserved_end) = (start, start + ID_BLOCK);
        }
        let id = ids.next;
        ids.next += 1;
        debug_assert!(ids.next <= ids.reserved_end);
        Ok(id)
    }

    /// Appends `batch` of `producer` to `topic`'s `partition` once: its base
    /// offset (the earlier one for a duplicate).
    pub(crate) fn append(
        &self,
        engine: &Engine,
        topic: &str,
        partition: u32,
        producer: BatchProducer,
        batch: &mut [u8],
    ) -> Result<u64, WireError> {
        let topics = engine.topics();
        let id = topics.topic_id(topic).map_err(|e| wire(&e))?;
        let state = {
            let mut partitions = self.partitions.lock().expect("producers lock");
            partitions.entry((id, partition)).or_default().clone()
        };
        let mut state = state.lock().expect("partition producers lock");
        if !state.loaded {
            load(engine, topic, partition, &mut state)?;
        }
        let trimmed = topics.start_offset(topic, partition).map_err(|e| wire(&e))? > 0;
        if let Some(offset) = state.check(producer, trimmed)? {
            return Ok(offset);
        }
        let base_offset = topics.append_produced(topic, partition, batch).map_err(|e| wire(&e))?;
        state.remember(producer, base_offset);
        Ok(base_offset)
    }
}

/// Rebuilds a partition's producers from its stored batches' headers,
/// open and aborted transactions' included (markers carry no sequence).
fn load(engine: &Engine, topic: &str, partition: u32, state: &mut Partition) -> Result<(), WireError> {
    let topics = engine.topics();
    let mut offset = topics.start_offset(topic, partition).map_err(|e| wire(&e))?;
    let end = topics.end_offset(topic, partition).map_err(|e| wire(&e))?;
    while offset < end {
        let fetch = topics.fetch_uncommitted(topic, partition, offset, 1 << 20).map_err(|e| wire(&e))?;
        let next = fetch.next_offset();
        for batch in fetch.batches().filter(|b| !b.is_control()) {
            if let Some(producer) = BatchProducer::of(batch.as_bytes()) {
                state.remember(producer, batch.base_offset());
            }
        }
        assert!(next > offset, "a fetch below the end moves forward");
        offset = next;
    }
    state.loaded = true;
    Ok(())
}

fn read_next_id(path: &Path) -> std::io::Result<i64> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .trim()
            .parse()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// Writes the next id durably: a temporary file synced, renamed over the
/// old one, the directory synced.
fn write_next_id(path: &Path, next: i64) -> std::io::Result<()> {
    use std::io::Write;
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(format!("{next}\n").as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(id: i64, epoch: i16, first_sequence: i32, records: i32) -> BatchProducer {
        BatchProducer { id, epoch, first_sequence, records, transactional: false }
    }

    #[test]
    fn a_batch_follows_duplicates_or_is_refused_as_kafka_decides() {
        let mut partition = Partition::default();
        assert_eq!(partition.check(batch(7, 0, 0, 3), false), Ok(None));
        assert_eq!(partition.check(batch(7, 0, 3, 1), false).unwrap_err().code, 45, "no state: only sequence 0");
        assert_eq!(partition.check(batch(7, 0, 3, 1), true).unwrap_err().code, 59, "trimmed log: unknown producer");
        partition.remember(batch(7, 0, 0, 3), 10);
        assert_eq!(partition.check(batch(7, 0, 0, 3), false), Ok(Some(10)), "a retry is the same batch");
        assert_eq!(partition.check(batch(7, 0, 3, 2), false), Ok(None));
        assert_eq!(partition.check(batch(7, 0, 4, 2), false).unwrap_err().code, 45, "a gap or overlap");
        for (i, offset) in (1..=6).zip(20..) {
            partition.remember(batch(7, 0, 3 * i, 3), offset);
        }
        assert_eq!(partition.producers[&7].batches.len(), BATCHES_KEPT);
        assert_eq!(partition.check(batch(7, 0, 18, 3), false), Ok(Some(25)));
        assert_eq!(partition.check(batch(7, 0, 3, 3), false).unwrap_err().code, 45, "older than the kept batches");
        assert_eq!(partition.check(batch(7, 1, 0, 1), false), Ok(None), "a new epoch starts at 0");
        assert_eq!(partition.check(batch(7, 1, 5, 1), false).unwrap_err().code, 45);
        partition.remember(batch(7, 1, 0, 1), 40);
        assert_eq!(partition.check(batch(7, 0, 21, 1), false).unwrap_err().code, 47, "an older epoch is fenced");
    }

    #[test]
    fn sequences_wrap_at_the_largest_i32() {
        let mut partition = Partition::default();
        partition.producers.insert(1, Producer::default());
        partition.remember(batch(1, 0, i32::MAX - 1, 2), 5);
        assert_eq!(partition.producers[&1].batches[0].last_sequence, i32::MAX);
        assert_eq!(partition.check(batch(1, 0, 0, 1), false), Ok(None));
        partition.remember(batch(1, 0, i32::MAX, 3), 6);
        assert_eq!(partition.producers[&1].batches[1].last_sequence, 1);
    }

    #[test]
    fn producer_ids_are_never_handed_out_twice_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let first = Producers::new(dir.path());
        let a: Vec<i64> = (0..3).map(|_| first.allocate().unwrap()).collect();
        let second = Producers::new(dir.path());
        let b = second.allocate().unwrap();
        assert_eq!(a, vec![0, 1, 2]);
        assert_eq!(b, ID_BLOCK, "a new open starts past the block the last one reserved");
        assert_eq!(read_next_id(&dir.path().join(IDS_FILE)).unwrap(), 2 * ID_BLOCK);
    }
}
