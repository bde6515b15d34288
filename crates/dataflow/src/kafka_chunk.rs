//! One partition's part of a Kafka Fetch response, read as the Kafka
//! source's records: whole record batches exactly as the broker sent them
//! (Kafka's v2 format, the embedded log's own), checked, decompressed, and
//! filtered as a read_committed consumer must.
//!
//! A Fetch response names the aborted transactions that overlap what it
//! returns only by producer and first offset; as Kafka's own consumer does,
//! a producer's batches are skipped from its first aborted offset until its
//! abort marker, and control batches (markers) are never records.
//!
//! Invariants: batches are handed out in offset order, each checked
//! (length, magic, CRC, records) before any of its records is read; a
//! trailing batch the broker cut short is dropped, never read; `next_offset`
//! is one past the last offset of the last whole batch.

use std::collections::BTreeSet;

use bytes::Bytes;
use millpond_log::batch::{
    self, ATTR_CONTROL, ATTR_TRANSACTIONAL, BATCH_HEADER_BYTES, BatchError, normalize_into, peek_base_offset,
};
use millpond_log::{BatchView, ControlType, RecordView};

/// The timestamp-type attribute bit: the broker's append time, held as
/// the batch's max timestamp, is every record's timestamp.
const ATTR_LOG_APPEND_TIME: i16 = 0x08;

/// A transaction a Fetch response says was aborted: its producer and its
/// first offset in the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Aborted {
    pub first_offset: u64,
    pub producer_id: i64,
}

/// A partition's fetched batches, read from `position` on.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub partition: u32,
    /// The fetch position's generation this answers (see `kafka_fetch`).
    pub generation: u64,
    /// Whole batches only (a cut trailing batch removed).
    bytes: Bytes,
    /// By first offset.
    aborted: Vec<Aborted>,
    /// Aborted entries already moved into `aborting`.
    aborted_taken: usize,
    /// Producers whose batches are skipped until their abort marker.
    aborting: BTreeSet<i64>,
    /// Where the next batch starts in `bytes`.
    position: usize,
}

impl Chunk {
    /// The chunk of `bytes` (a partition's records field), with the
    /// response's aborted transactions. Returns it and the offset after
    /// its last whole batch (`None`: no whole batch).
    pub(crate) fn new(
        partition: u32,
        generation: u64,
        bytes: Bytes,
        mut aborted: Vec<Aborted>,
    ) -> (Chunk, Option<u64>) {
        let (whole, next_offset) = whole_batches(&bytes);
        aborted.sort_unstable();
        let chunk = Chunk {
            partition,
            generation,
            bytes: bytes.slice(..whole),
            aborted,
            aborted_taken: 0,
            aborting: BTreeSet::new(),
            position: 0,
        };
        (chunk, next_offset)
    }

    /// Whether the chunk holds no batch (its partition's data was cut
    /// short before the end of its first batch).
    pub(crate) fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub(crate) fn is_done(&self) -> bool {
        self.position >= self.bytes.len()
    }

    /// The offset of the next batch's base (for errors).
    pub(crate) fn next_base_offset(&self) -> Option<u64> {
        peek_base_offset(&self.bytes[self.position..])
    }

    /// Reads the next batch: checks it, decompresses it into `scratch` when
    /// compressed, and lends each of its records to `each` (those below the
    /// reader's offset too: the caller skips them) unless it is a marker or
    /// aborted. Returns the offset after the batch; `None` when the chunk
    /// is done.
    pub(crate) fn read_batch(
        &mut self,
        scratch: &mut Vec<u8>,
        mut each: impl FnMut(&RecordView<'_>),
    ) -> Option<Result<u64, BatchError>> {
        if self.is_done() {
            return None;
        }
        let rest = self.bytes.slice(self.position..);
        let view = match BatchView::parse(&rest) {
            Ok(view) => view,
            Err(error) => return Some(Err(error)),
        };
        self.position += view.size_bytes();
        let next_offset = view.last_offset() + 1;
        if self.skips(&view) {
            return Some(Ok(next_offset));
        }
        let view = if view.is_compressed() {
            scratch.clear();
            if let Err(error) = normalize_into(view.as_bytes(), scratch) {
                return Some(Err(error));
            }
            BatchView::from_validated(scratch)
        } else {
            view
        };
        let append_time = (view.attributes() & ATTR_LOG_APPEND_TIME != 0).then(|| view.max_timestamp());
        for mut record in view.records() {
            if let Some(timestamp_ms) = append_time {
                record.timestamp_ms = timestamp_ms;
            }
            each(&record);
        }
        Some(Ok(next_offset))
    }

    /// Whether `view` holds no records a read_committed reader sees: a
    /// control batch, or a batch of a transaction the response says was
    /// aborted (from its first offset to its abort marker).
    fn skips(&mut self, view: &BatchView<'_>) -> bool {
        while let Some(aborted) = self.aborted.get(self.aborted_taken)
            && aborted.first_offset <= view.last_offset()
        {
            self.aborting.insert(aborted.producer_id);
            self.aborted_taken += 1;
        }
        let attributes = view.attributes();
        if attributes & ATTR_CONTROL != 0 {
            if view.control_type() == Some(ControlType::Abort) {
                self.aborting.remove(&view.producer_id());
            }
            return true;
        }
        attributes & ATTR_TRANSACTIONAL != 0 && self.aborting.contains(&view.producer_id())
    }
}

/// The length of the whole batches at the start of `bytes` and the offset
/// after the last of them, read from their headers only (each batch is
/// checked when it is read). A first batch the response cut short gives
/// `(0, None)` (Kafka cuts every partition but the first of a response at
/// its byte limits); one whose header is wrong gives all of `bytes`, for
/// `read_batch` to refuse.
fn whole_batches(bytes: &[u8]) -> (usize, Option<u64>) {
    let (mut at, mut next_offset) = (0, None);
    while at < bytes.len() {
        let size = match batch::batch_size(&bytes[at..]) {
            Ok(size) if bytes.len() - at >= size.max(BATCH_HEADER_BYTES) => size,
            Ok(_) | Err(BatchError::Incomplete { .. }) => break, // Cut short.
            Err(_) if next_offset.is_none() => return (bytes.len(), None),
            Err(_) => break,
        };
        let header = &bytes[at..at + BATCH_HEADER_BYTES];
        let base = i64::from_be_bytes(header[0..8].try_into().expect("8 bytes"));
        let delta = i32::from_be_bytes(header[23..27].try_into().expect("4 bytes"));
        if base < 0 || delta < 0 {
            if next_offset.is_none() {
                return (bytes.len(), None);
            }
            break; // Fetched again, and refused then.
        }
        next_offset = Some(base as u64 + delta as u64 + 1);
        at += size;
    }
    (at, next_offset)
}

#[cfg(test)]
mod tests {
    use millpond_log::batch::{EncodeRecord, encode_batch, encode_control};
    use millpond_log::{ControlMarker, Header};

    use super::*;

    fn data(out: &mut Vec<u8>, base: u64, producer_id: Option<i64>, values: &[&str]) {
        let headers: [Header; 0] = [];
        let records = values.iter().enumerate().map(|(i, v)| EncodeRecord {
            offset_delta: i as u32,
            timestamp_ms: 10,
            key: None,
            value: Some(v.as_bytes()),
            headers: &headers,
        });
        let start = out.len();
        encode_batch(out, base, values.len() as u32 - 1, records);
        if let Some(producer_id) = producer_id {
            set_producer(&mut out[start..], producer_id);
        }
    }

    /// Makes the batch at `bytes` transactional, of `producer_id`.
    fn set_producer(bytes: &mut [u8], producer_id: i64) {
        let attributes = i16::from_be_bytes(bytes[21..23].try_into().unwrap()) | ATTR_TRANSACTIONAL;
        bytes[21..23].copy_from_slice(&attributes.to_be_bytes());
        bytes[43..51].copy_from_slice(&producer_id.to_be_bytes());
        let crc = crc32c::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    }

    fn marker(out: &mut Vec<u8>, offset: u64, producer_id: i64, commit: bool) {
        let control = if commit { ControlType::Commit } else { ControlType::Abort };
        let marker = ControlMarker { producer_id, producer_epoch: 0, control, coordinator_epoch: 0, timestamp_ms: 10 };
        encode_control(out, offset, marker);
    }

    fn values(chunk: &mut Chunk) -> (Vec<String>, u64) {
        let (mut out, mut next) = (Vec::new(), 0);
        let mut scratch = Vec::new();
        while let Some(batch) =
            chunk.read_batch(&mut scratch, |r| out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap()))
        {
            next = batch.unwrap();
        }
        (out, next)
    }

    #[test]
    fn read_committed_skips_aborted_transactions_and_markers_only() {
        let mut bytes = Vec::new();
        data(&mut bytes, 0, None, &["a", "b"]);
        data(&mut bytes, 2, Some(7), &["x1"]); // Aborted below.
        data(&mut bytes, 3, Some(8), &["c"]); // Committed below.
        data(&mut bytes, 4, Some(7), &["x2"]);
        marker(&mut bytes, 5, 7, false);
        marker(&mut bytes, 6, 8, true);
        data(&mut bytes, 7, Some(7), &["d"]); // A new transaction of 7, committed.
        marker(&mut bytes, 8, 7, true);
        let aborted = vec![Aborted { first_offset: 2, producer_id: 7 }];
        let (mut chunk, next) = Chunk::new(0, 0, Bytes::from(bytes), aborted);
        assert_eq!(next, Some(9));
        assert_eq!(values(&mut chunk), (vec!["a".into(), "b".into(), "c".into(), "d".into()], 9));
    }

    #[test]
    fn a_cut_trailing_batch_is_dropped_and_a_corrupt_one_refused() {
        let mut bytes = Vec::new();
        data(&mut bytes, 0, None, &["a"]);
        let whole = bytes.len();
        data(&mut bytes, 1, None, &["b", "c"]);
        let (mut chunk, next) = Chunk::new(3, 0, Bytes::copy_from_slice(&bytes[..bytes.len() - 3]), Vec::new());
        assert_eq!((next, chunk.bytes.len()), (Some(1), whole));
        assert_eq!(values(&mut chunk), (vec!["a".into()], 1));

        let (chunk, next) = Chunk::new(3, 0, Bytes::copy_from_slice(&bytes[whole..bytes.len() - 3]), Vec::new());
        assert!(chunk.is_empty() && next.is_none(), "a first batch cut short is no batch, not an error");
        let (chunk, next) = Chunk::new(3, 0, Bytes::copy_from_slice(&bytes[whole..whole + 20]), Vec::new());
        assert!(chunk.is_empty() && next.is_none(), "nor is a cut header");

        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        let (mut chunk, _) = Chunk::new(3, 0, Bytes::from(bytes), Vec::new());
        let mut scratch = Vec::new();
        assert!(matches!(chunk.read_batch(&mut scratch, |_| {}), Some(Ok(1))));
        assert_eq!(chunk.next_base_offset(), Some(1));
        assert!(matches!(chunk.read_batch(&mut scratch, |_| {}), Some(Err(BatchError::BadCrc { .. }))));
    }

    #[test]
    fn log_append_time_is_every_records_timestamp() {
        let mut bytes = Vec::new();
        data(&mut bytes, 0, None, &["a", "b"]);
        let attributes = i16::from_be_bytes(bytes[21..23].try_into().unwrap()) | ATTR_LOG_APPEND_TIME;
        bytes[21..23].copy_from_slice(&attributes.to_be_bytes());
        bytes[35..43].copy_from_slice(&99i64.to_be_bytes());
        let crc = crc32c::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        let (mut chunk, _) = Chunk::new(0, 0, Bytes::from(bytes), Vec::new());
        let (mut scratch, mut timestamps) = (Vec::new(), Vec::new());
        chunk.read_batch(&mut scratch, |r| timestamps.push(r.timestamp_ms)).unwrap().unwrap();
        assert_eq!(timestamps, [99, 99]);
    }
}
