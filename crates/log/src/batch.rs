//! The on-disk record-batch format: Kafka's v2 `RecordBatch` (magic 2).
//!
//! A segment file is nothing but these batches back to back, so a later
//! Kafka-protocol endpoint can serve segment bytes as they are. The layout
//! (all integers big-endian, varints zig-zag as in protobuf) is:
//!
//! ```text
//! offset  size  field
//!      0     8  base_offset
//!      8     4  batch_length            (bytes after this field)
//!     12     4  partition_leader_epoch  (we write 0)
//!     16     1  magic                   (= 2)
//!     17     4  crc                     (CRC-32C of bytes 21..end)
//!     21     2  attributes              (we write 0: no compression, CreateTime)
//!     23     4  last_offset_delta
//!     27     8  base_timestamp
//!     35     8  max_timestamp
//!     43     8  producer_id             (we write -1)
//!     51     2  producer_epoch          (we write -1)
//!     53     4  base_sequence           (we write -1)
//!     57     4  record_count
//!     61     …  records
//! record: length varint, attributes i8, timestamp_delta varlong,
//!         offset_delta varint, key_length varint (-1 = null), key,
//!         value_length varint (-1 = null = tombstone), value,
//!         header_count varint, headers (key_length varint, key utf-8,
//!         value_length varint, value)
//! ```
//!
//! Invariant: a [`BatchView`] exists only for bytes whose length, magic, CRC
//! and every record's structure have been checked, so iterating its records
//! cannot fail. Both sides of the disk boundary go through this module: the
//! encoder asserts what it wrote parses back, and every read parses.

use std::fmt;

use crate::compression::Codec;

/// Bytes before `batch_length`'s payload: base offset (8) + batch length (4).
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// The fixed header of a v2 batch, up to the first record.
pub const BATCH_HEADER_BYTES: usize = 61;
/// The only batch format we write or accept.
pub const MAGIC: i8 = 2;
/// Upper bound on one batch; larger lengths in a header mean corruption.
pub const BATCH_BYTES_LIMIT: usize = 64 * 1024 * 1024;

const CRC_START: usize = 21;
const ATTR_COMPRESSION_MASK: i16 = 0x07;
/// Attribute bit 4: the batch belongs to a transaction.
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
/// Attribute bit 5: a control batch (a transaction marker), written only by
/// the transaction coordinator, never by a client.
pub const ATTR_CONTROL: i16 = 0x20;
/// Bytes of a control record's key: version (i16, 0) and type (i16).
const CONTROL_KEY_BYTES: usize = 4;

/// What a control batch marks (its record's key type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlType {
    /// Type 0: the producer's transaction is aborted here.
    Abort,
    /// Type 1: the producer's transaction is committed here.
    Commit,
}

/// A header attached to a record: a UTF-8 key and an optional value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    pub key: String,
    pub value: Option<Vec<u8>>,
}

/// A record to append. `value: None` is a tombstone.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Record {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub timestamp_ms: i64,
    pub headers: Vec<Header>,
}

impl Record {
    /// A record with a key and a value and no headers.
    pub fn new(key: Option<&[u8]>, value: Option<&[u8]>, timestamp_ms: i64) -> Record {
        Record { key: key.map(<[u8]>::to_vec), value: value.map(<[u8]>::to_vec), timestamp_ms, headers: Vec::new() }
    }
}

/// Why a byte range is not a valid batch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("incomplete batch: need {needed} bytes, have {available}")]
    Incomplete { needed: usize, available: usize },
    #[error("invalid batch length {length}")]
    BadLength { length: i64 },
    #[error("unsupported magic {magic} (only 2 is supported)")]
    BadMagic { magic: i8 },
    #[error("CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    #[error("unsupported attributes {attributes:#06x} (an unknown compression codec, or a malformed control batch)")]
    UnsupportedAttributes { attributes: i16 },
    #[error("{codec} batch does not decompress: {reason}")]
    Decompression { codec: &'static str, reason: String },
    #[error("malformed record {index}: {reason}")]
    BadRecord { index: usize, reason: &'static str },
    /// The base offset (outside the CRC, as in Kafka) breaks the segment's
    /// offset order or bounds.
    #[error("batch offsets {base_offset}..={last_offset} {reason}")]
    BadOffset { base_offset: u64, last_offset: u64, reason: &'static str },
}

/// The total size of the batch that starts at `bytes`, read from its header,
/// or why it cannot be (too short to tell, or an impossible length).
pub fn batch_size(bytes: &[u8]) -> Result<usize, BatchError> {
    if bytes.len() < LOG_OVERHEAD_BYTES {
        return Err(BatchError::Incomplete { needed: LOG_OVERHEAD_BYTES, available: bytes.len() });
    }
    let length = i32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let total = LOG_OVERHEAD_BYTES as i64 + i64::from(length);
    if length < (BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32 || total as usize > BATCH_BYTES_LIMIT {
        return Err(BatchError::BadLength { length: i64::from(length) });
    }
    Ok(total as usize)
}

/// The base offset in a batch header (no validation beyond length).
pub fn peek_base_offset(bytes: &[u8]) -> Option<u64> {
    bytes.get(0..8).map(|b| i64::from_be_bytes(b.try_into().expect("8 bytes")) as u64)
}

/// Copies the validated batches of `bytes` into `out` with every
/// compressed batch replaced by its uncompressed equivalent: the same
/// header (offsets, timestamps, producer fields, record count) but codec 0,
/// its length and CRC made anew, and its records decompressed and checked
/// as an uncompressed batch's are. What a reader inside Millpond iterates.
pub fn normalize_into(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), BatchError> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let batch = BatchView::from_validated(rest);
        rest = &rest[batch.size_bytes()..];
        if !batch.is_compressed() {
            out.extend_from_slice(batch.as_bytes());
            continue;
        }
        let records =
            crate::compression::decompress(batch.codec(), &batch.as_bytes()[BATCH_HEADER_BYTES..], BATCH_BYTES_LIMIT)
                .map_err(|reason| BatchError::Decompression { codec: batch.codec().name(), reason })?;
        let start = out.len();
        out.extend_from_slice(&batch.as_bytes()[..BATCH_HEADER_BYTES]);
        out.extend_from_slice(&records);
        let length = i32::try_from(out.len() - start - LOG_OVERHEAD_BYTES)
            .map_err(|_| BatchError::BadLength { length: (out.len() - start) as i64 })?;
        out[start + 8..start + 12].copy_from_slice(&length.to_be_bytes());
        let attributes = batch.attributes() & !ATTR_COMPRESSION_MASK;
        out[start + 21..start + 23].copy_from_slice(&attributes.to_be_bytes());
        let crc = crc32c::crc32c(&out[start + CRC_START..]);
        out[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
        if let Err(error) = BatchView::parse(&out[start..]) {
            out.truncate(start);
            return Err(error);
        }
    }
    Ok(())
}

/// `bytes` (validated batches) as readers see them: borrowed when no batch
/// is compressed, else [`normalize_into`] a new buffer.
pub fn normalized(bytes: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, BatchError> {
    let mut rest = bytes;
    let mut compressed = false;
    while !rest.is_empty() && !compressed {
        let batch = BatchView::from_validated(rest);
        compressed = batch.is_compressed();
        rest = &rest[batch.size_bytes()..];
    }
    if !compressed {
        return Ok(std::borrow::Cow::Borrowed(bytes));
    }
    let mut out = Vec::with_capacity(bytes.len() * 2);
    normalize_into(bytes, &mut out)?;
    Ok(std::borrow::Cow::Owned(out))
}

/// Sets a batch's base offset and partition leader epoch (0), the two
/// header fields outside its CRC, as a broker does to a produced batch.
pub fn set_base_offset(bytes: &mut [u8], base_offset: u64) {
    assert!(bytes.len() >= BATCH_HEADER_BYTES, "a batch header is {BATCH_HEADER_BYTES} bytes");
    assert!(base_offset <= i64::MAX as u64, "offsets are non-negative i64s");
    bytes[0..8].copy_from_slice(&(base_offset as i64).to_be_bytes());
    bytes[12..16].copy_from_slice(&0i32.to_be_bytes());
}

/// A validated batch borrowed from a buffer.
#[derive(Clone, Copy)]
pub struct BatchView<'a> {
    bytes: &'a [u8],
}

impl fmt::Debug for BatchView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchView")
            .field("base_offset", &self.base_offset())
            .field("last_offset", &self.last_offset())
            .field("record_count", &self.record_count())
            .field("size_bytes", &self.bytes.len())
            .finish()
    }
}

impl<'a> BatchView<'a> {
    /// Parses and fully validates the batch at the start of `bytes`; the
    /// bytes after it are ignored. Checks length, magic, CRC and every record.
    pub fn parse(bytes: &'a [u8]) -> Result<BatchView<'a>, BatchError> {
        let size = batch_size(bytes)?;
        if bytes.len() < size {
            return Err(BatchError::Incomplete { needed: size, available: bytes.len() });
        }
        let bytes = &bytes[..size];
        let magic = bytes[16] as i8;
        if magic != MAGIC {
            return Err(BatchError::BadMagic { magic });
        }
        let stored = u32::from_be_bytes(bytes[17..21].try_into().expect("4 bytes"));
        let computed = crc32c::crc32c(&bytes[CRC_START..]);
        if stored != computed {
            return Err(BatchError::BadCrc { stored, computed });
        }
        let view = BatchView { bytes };
        let attributes = view.attributes();
        if Codec::of_attributes(attributes).is_none() {
            return Err(BatchError::UnsupportedAttributes { attributes });
        }
        if view.last_offset_delta() < 0 || view.record_count() < 0 {
            return Err(BatchError::BadRecord { index: 0, reason: "negative count or offset delta" });
        }
        // Offsets are non-negative i64s on disk (as in Kafka); the batch's
        // last slot must not overflow.
        let base = view.i64_at(0);
        if base < 0 || base.checked_add(i64::from(view.last_offset_delta())).is_none() {
            return Err(BatchError::BadOffset {
                base_offset: base as u64,
                last_offset: (base as u64).wrapping_add(view.last_offset_delta() as u64),
                reason: "are outside 0..=i64::MAX",
            });
        }
        // A compressed batch's records were checked when it was appended
        // (`normalize_into`); its CRC covers them since.
        if !view.is_compressed() {
            view.check_records()?;
        }
        if view.is_control() {
            view.check_control()?;
        }
        Ok(view)
    }

    /// A control batch is transactional, uncompressed, of a producer, and
    /// holds one record whose key is version 0 and type abort or commit.
    fn check_control(&self) -> Result<(), BatchError> {
        let attributes = self.attributes();
        let bad = Err(BatchError::UnsupportedAttributes { attributes });
        if !self.is_transactional() || self.is_compressed() || self.producer_id() < 0 || self.record_count() != 1 {
            return bad;
        }
        if self.control_type().is_none() { bad } else { Ok(()) }
    }

    /// Whether this is a control batch (a transaction marker).
    pub fn is_control(&self) -> bool {
        self.attributes() & ATTR_CONTROL != 0
    }

    /// Whether this batch belongs to a transaction (data or marker).
    pub fn is_transactional(&self) -> bool {
        self.attributes() & ATTR_TRANSACTIONAL != 0
    }

    /// The producer id (-1: none).
    pub fn producer_id(&self) -> i64 {
        self.i64_at(43)
    }

    pub fn producer_epoch(&self) -> i16 {
        self.i16_at(51)
    }

    /// What a control batch marks; `None` for a data batch or an unknown type.
    pub fn control_type(&self) -> Option<ControlType> {
        if !self.is_control() || self.is_compressed() {
            return None;
        }
        let record = self.records().next()?;
        let key = record.key.filter(|key| key.len() == CONTROL_KEY_BYTES)?;
        match (i16::from_be_bytes([key[0], key[1]]), i16::from_be_bytes([key[2], key[3]])) {
            (0, 0) => Some(ControlType::Abort),
            (0, 1) => Some(ControlType::Commit),
            _ => None,
        }
    }

    /// Whether its records are compressed (readers see them through
    /// [`normalize_into`]).
    pub fn is_compressed(&self) -> bool {
        self.codec() != Codec::None
    }

    pub fn codec(&self) -> Codec {
        Codec::of_attributes(self.attributes()).expect("parse checked the codec")
    }

    /// Wraps bytes that [`BatchView::parse`] accepted before (kept in memory
    /// since), skipping the checks.
    pub fn from_validated(bytes: &'a [u8]) -> BatchView<'a> {
        let size = batch_size(bytes).expect("validated batch");
        BatchView { bytes: &bytes[..size] }
    }

    fn check_records(&self) -> Result<(), BatchError> {
        let mut cursor = Cursor { bytes: &self.bytes[BATCH_HEADER_BYTES..], pos: 0 };
        let mut previous_delta: i64 = -1;
        let count = self.record_count() as usize;
        for index in 0..count {
            let record =
                decode_record(&mut cursor, Keys::Check).map_err(|reason| BatchError::BadRecord { index, reason })?;
            let delta = i64::from(record.offset_delta);
            if delta <= previous_delta || delta > i64::from(self.last_offset_delta()) {
                return Err(BatchError::BadRecord { index, reason: "offset delta out of order or range" });
            }
            previous_delta = delta;
        }
        if cursor.pos != cursor.bytes.len() {
            return Err(BatchError::BadRecord { index: count, reason: "trailing bytes after last record" });
        }
        Ok(())
    }

    fn i16_at(&self, at: usize) -> i16 {
        i16::from_be_bytes(self.bytes[at..at + 2].try_into().expect("2 bytes"))
    }
    fn i32_at(&self, at: usize) -> i32 {
        i32::from_be_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"))
    }
    fn i64_at(&self, at: usize) -> i64 {
        i64::from_be_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"))
    }

    /// The whole batch as stored.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
    pub fn size_bytes(&self) -> usize {
        self.bytes.len()
    }
    pub fn base_offset(&self) -> u64 {
        self.i64_at(0) as u64
    }
    pub fn attributes(&self) -> i16 {
        self.i16_at(21)
    }
    pub fn last_offset_delta(&self) -> i32 {
        self.i32_at(23)
    }
    /// The offset of the batch's last slot (records may be missing below it
    /// after compaction, but no later batch reuses it).
    pub fn last_offset(&self) -> u64 {
        self.base_offset() + self.last_offset_delta() as u64
    }
    pub fn base_timestamp(&self) -> i64 {
        self.i64_at(27)
    }
    pub fn max_timestamp(&self) -> i64 {
        self.i64_at(35)
    }
    pub fn record_count(&self) -> i32 {
        self.i32_at(57)
    }
    pub fn crc(&self) -> u32 {
        u32::from_be_bytes(self.bytes[17..21].try_into().expect("4 bytes"))
    }

    /// The records of this batch, in offset order. Only for an
    /// uncompressed batch: a reader of stored bytes goes through
    /// [`normalize_into`] first.
    pub fn records(&self) -> Records<'a> {
        assert!(!self.is_compressed(), "records of a compressed batch are read after normalize_into");
        Records {
            cursor: Cursor { bytes: &self.bytes[BATCH_HEADER_BYTES..], pos: 0 },
            remaining: self.record_count() as usize,
            base_offset: self.base_offset(),
            base_timestamp: self.base_timestamp(),
        }
    }
}

/// A record borrowed from a validated batch, with its absolute offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub offset: u64,
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    headers: &'a [u8],
    header_count: usize,
}

impl<'a> RecordView<'a> {
    /// A record without headers from its parts, for a reader whose records
    /// do not come from a batch of this log (the Kafka source's messages):
    /// the same view a batch holding it would give.
    pub fn headerless(offset: u64, timestamp_ms: i64, key: Option<&'a [u8]>, value: Option<&'a [u8]>) -> Self {
        RecordView { offset, timestamp_ms, key, value, headers: &[], header_count: 0 }
    }

    /// Headers as owned values.
    pub fn headers(&self) -> Vec<Header> {
        let mut cursor = Cursor { bytes: self.headers, pos: 0 };
        (0..self.header_count)
            .map(|_| {
                let key = cursor.bytes_or_null().ok().flatten().unwrap_or_default();
                let value = cursor.bytes_or_null().ok().flatten();
                // Validated at parse time: keys are UTF-8.
                Header { key: String::from_utf8_lossy(key).into_owned(), value: value.map(<[u8]>::to_vec) }
            })
            .collect()
    }

    /// The value of the first header named `name` (`Some(None)`: a null
    /// value), borrowed from the batch.
    pub fn header(&self, name: &str) -> Option<Option<&'a [u8]>> {
        self.header_pairs().find(|(key, _)| *key == name.as_bytes()).map(|(_, value)| value)
    }

    /// Each header's key and value (None: null), in order, borrowed from
    /// the batch: one pass for a reader that wants several.
    pub fn header_pairs(&self) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + use<'a> {
        let mut cursor = Cursor { bytes: self.headers, pos: 0 };
        (0..self.header_count).map(move |_| {
            // Validated at parse time: every header decodes.
            let key = cursor.bytes_or_null().ok().flatten().unwrap_or_default();
            let value = cursor.bytes_or_null().ok().flatten();
            (key, value)
        })
    }

    /// An owned copy, as it would be appended.
    pub fn to_record(&self) -> Record {
        Record {
            key: self.key.map(<[u8]>::to_vec),
            value: self.value.map(<[u8]>::to_vec),
            timestamp_ms: self.timestamp_ms,
            headers: self.headers(),
        }
    }
}

/// Iterator over the records of a [`BatchView`].
#[derive(Debug)]
pub struct Records<'a> {
    cursor: Cursor<'a>,
    remaining: usize,
    base_offset: u64,
    base_timestamp: i64,
}

impl<'a> Iterator for Records<'a> {
    type Item = RecordView<'a>;
    fn next(&mut self) -> Option<RecordView<'a>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let raw =
            decode_record(&mut self.cursor, Keys::Trusted).expect("records were validated when the batch was parsed");
        Some(RecordView {
            offset: self.base_offset + raw.offset_delta as u64,
            timestamp_ms: self.base_timestamp.wrapping_add(raw.timestamp_delta),
            key: raw.key,
            value: raw.value,
            headers: raw.headers,
            header_count: raw.header_count,
        })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

struct RawRecord<'a> {
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: &'a [u8],
    header_count: usize,
}

#[derive(Debug)]
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn varlong(&mut self) -> Result<i64, &'static str> {
        // Most varints of a record (lengths, deltas, counts) are one byte.
        if let Some(&byte) = self.bytes.get(self.pos)
            && byte & 0x80 == 0
        {
            self.pos += 1;
            return Ok(i64::from(byte >> 1) ^ -i64::from(byte & 1));
        }
        self.varlong_long()
    }
    fn varlong_long(&mut self) -> Result<i64, &'static str> {
        let mut value: u64 = 0;
        for shift in (0..70).step_by(7) {
            let byte = *self.bytes.get(self.pos).ok_or("varint runs past the end")?;
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err("varint too long");
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err("varint too long")
    }
    #[inline]
    fn varint(&mut self) -> Result<i32, &'static str> {
        i32::try_from(self.varlong()?).map_err(|_| "varint out of i32 range")
    }
    fn take(&mut self, len: usize) -> Result<&'a [u8], &'static str> {
        let end = self.pos.checked_add(len).filter(|&end| end <= self.bytes.len()).ok_or("field runs past the end")?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn bytes_or_null(&mut self) -> Result<Option<&'a [u8]>, &'static str> {
        match self.varint()? {
            -1 => Ok(None),
            len if len < 0 => Err("negative length"),
            len => self.take(len as usize).map(Some),
        }
    }
}

/// Whether [`decode_record`] checks that header keys are UTF-8: once, when
/// a batch is parsed; a batch's records decoded again later are trusted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keys {
    Check,
    Trusted,
}

fn decode_record<'a>(cursor: &mut Cursor<'a>, keys: Keys) -> Result<RawRecord<'a>, &'static str> {
    let length = cursor.varint()?;
    if length < 0 {
        return Err("negative record length");
    }
    let body = cursor.take(length as usize)?;
    let mut inner = Cursor { bytes: body, pos: 0 };
    let _attributes = inner.take(1)?;
    let timestamp_delta = inner.varlong()?;
    let offset_delta = inner.varint()?;
    if offset_delta < 0 {
        return Err("negative offset delta");
    }
    let key = inner.bytes_or_null()?;
    let value = inner.bytes_or_null()?;
    let header_count = inner.varint()?;
    if header_count < 0 {
        return Err("negative header count");
    }
    let headers_start = inner.pos;
    for _ in 0..header_count {
        let key = inner.bytes_or_null()?.ok_or("null header key")?;
        if keys == Keys::Check {
            std::str::from_utf8(key).map_err(|_| "header key is not UTF-8")?;
        }
        inner.bytes_or_null()?;
    }
    let headers = &body[headers_start..inner.pos];
    if inner.pos != body.len() {
        return Err("record length does not match its fields");
    }
    Ok(RawRecord { timestamp_delta, offset_delta, key, value, headers, header_count: header_count as usize })
}

fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

/// Bytes `put_varlong` writes for `value`.
fn varlong_len(value: i64) -> usize {
    let zigzag = ((value << 1) ^ (value >> 63)) as u64;
    (64 - zigzag.max(1).leading_zeros() as usize).div_ceil(7)
}

fn bytes_or_null_len(bytes: Option<&[u8]>) -> usize {
    bytes.map_or(1, |b| varlong_len(b.len() as i64) + b.len())
}

fn put_bytes_or_null(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varlong(out, -1),
        Some(bytes) => {
            put_varlong(out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
    }
}

/// One record to encode, with its offset delta inside the batch.
#[derive(Clone, Copy, Debug)]
pub struct EncodeRecord<'r> {
    pub offset_delta: u32,
    pub timestamp_ms: i64,
    pub key: Option<&'r [u8]>,
    pub value: Option<&'r [u8]>,
    pub headers: &'r [Header],
}

impl<'r> From<&'r Record> for EncodeRecord<'r> {
    fn from(record: &'r Record) -> Self {
        EncodeRecord {
            offset_delta: 0,
            timestamp_ms: record.timestamp_ms,
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            headers: &record.headers,
        }
    }
}

/// Appends one batch to `out`. `records` must be non-empty with strictly
/// increasing offset deltas, the last at most `last_offset_delta`.
/// Returns the batch's size in bytes.
pub fn encode_batch<'r>(
    out: &mut Vec<u8>,
    base_offset: u64,
    last_offset_delta: u32,
    records: impl IntoIterator<Item = EncodeRecord<'r>>,
) -> usize {
    let start = out.len();
    out.resize(start + BATCH_HEADER_BYTES, 0);
    let mut count: i32 = 0;
    let mut base_timestamp = None;
    let mut max_timestamp = i64::MIN;
    let mut previous_delta: i64 = -1;
    for record in records {
        assert!(i64::from(record.offset_delta) > previous_delta, "offset deltas must increase");
        assert!(record.offset_delta <= last_offset_delta, "offset delta beyond last_offset_delta");
        previous_delta = i64::from(record.offset_delta);
        let base = *base_timestamp.get_or_insert(record.timestamp_ms);
        max_timestamp = max_timestamp.max(record.timestamp_ms);
        let timestamp_delta = record.timestamp_ms.wrapping_sub(base);
        // The length prefix comes first, so compute it, then write the
        // fields straight into `out` (no per-record buffer).
        let body_len = 1
            + varlong_len(timestamp_delta)
            + varlong_len(i64::from(record.offset_delta))
            + bytes_or_null_len(record.key)
            + bytes_or_null_len(record.value)
            + varlong_len(record.headers.len() as i64)
            + record
                .headers
                .iter()
                .map(|h| bytes_or_null_len(Some(h.key.as_bytes())) + bytes_or_null_len(h.value.as_deref()))
                .sum::<usize>();
        put_varlong(out, body_len as i64);
        let body_start = out.len();
        out.push(0); // record attributes: unused in v2
        put_varlong(out, timestamp_delta);
        put_varlong(out, i64::from(record.offset_delta));
        put_bytes_or_null(out, record.key);
        put_bytes_or_null(out, record.value);
        put_varlong(out, record.headers.len() as i64);
        for header in record.headers {
            put_bytes_or_null(out, Some(header.key.as_bytes()));
            put_bytes_or_null(out, header.value.as_deref());
        }
        debug_assert_eq!(out.len() - body_start, body_len, "record length prefix matches its body");
        count += 1;
    }
    assert!(count > 0, "a batch holds at least one record");
    let size = out.len() - start;
    let header = &mut out[start..start + BATCH_HEADER_BYTES];
    header[0..8].copy_from_slice(&(base_offset as i64).to_be_bytes());
    header[8..12].copy_from_slice(&((size - LOG_OVERHEAD_BYTES) as i32).to_be_bytes());
    header[12..16].copy_from_slice(&0i32.to_be_bytes());
    header[16] = MAGIC as u8;
    header[21..23].copy_from_slice(&0i16.to_be_bytes());
    header[23..27].copy_from_slice(&(last_offset_delta as i32).to_be_bytes());
    header[27..35].copy_from_slice(&base_timestamp.unwrap_or(0).to_be_bytes());
    header[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    header[43..51].copy_from_slice(&(-1i64).to_be_bytes());
    header[51..53].copy_from_slice(&(-1i16).to_be_bytes());
    header[53..57].copy_from_slice(&(-1i32).to_be_bytes());
    header[57..61].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&out[start + CRC_START..]);
    out[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
    debug_assert!(BatchView::parse(&out[start..]).is_ok(), "an encoded batch parses back");
    size
}

/// The producer fields and marker of a control batch ([`encode_control`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub control: ControlType,
    /// The transaction coordinator's epoch (0 for the one coordinator).
    pub coordinator_epoch: i32,
    pub timestamp_ms: i64,
}

/// Appends a control batch (Kafka's transaction marker) to `out`: one
/// record, key `[version 0, type]`, value `[version 0, coordinator epoch]`,
/// attributes transactional + control, the producer's id and epoch, base
/// sequence -1. Returns its size in bytes.
pub fn encode_control(out: &mut Vec<u8>, base_offset: u64, marker: ControlMarker) -> usize {
    assert!(marker.producer_id >= 0, "a marker belongs to a producer");
    let kind: i16 = match marker.control {
        ControlType::Abort => 0,
        ControlType::Commit => 1,
    };
    let mut key = [0u8; CONTROL_KEY_BYTES];
    key[2..].copy_from_slice(&kind.to_be_bytes());
    let mut value = [0u8; 6];
    value[2..].copy_from_slice(&marker.coordinator_epoch.to_be_bytes());
    let start = out.len();
    let record = EncodeRecord {
        offset_delta: 0,
        timestamp_ms: marker.timestamp_ms,
        key: Some(&key),
        value: Some(&value),
        headers: &[],
    };
    let size = encode_batch(out, base_offset, 0, [record]);
    let header = &mut out[start..start + BATCH_HEADER_BYTES];
    header[21..23].copy_from_slice(&(ATTR_TRANSACTIONAL | ATTR_CONTROL).to_be_bytes());
    header[43..51].copy_from_slice(&marker.producer_id.to_be_bytes());
    header[51..53].copy_from_slice(&marker.producer_epoch.to_be_bytes());
    let crc = crc32c::crc32c(&out[start + CRC_START..]);
    out[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
    let view = BatchView::parse(&out[start..]).expect("an encoded marker parses back");
    assert_eq!(view.control_type(), Some(marker.control), "the marker reads back as written");
    size
}

/// Encodes `records` (owned [`Record`]s by reference, or borrowed
/// [`EncodeRecord`]s, whose offset deltas are replaced) as one batch with
/// consecutive offsets from `base_offset`.
pub fn encode_records<'r, I, R>(out: &mut Vec<u8>, base_offset: u64, records: I) -> usize
where
    I: IntoIterator<Item = R>,
    I::IntoIter: ExactSizeIterator,
    R: Into<EncodeRecord<'r>>,
{
    let records = records.into_iter();
    let last_offset_delta = u32::try_from(records.len().saturating_sub(1)).expect("batch record count fits u32");
    encode_batch(
        out,
        base_offset,
        last_offset_delta,
        records.enumerate().map(|(delta, record)| EncodeRecord { offset_delta: delta as u32, ..record.into() }),
    )
}

/// Iterates the valid batches at the start of `bytes`; stops at the end, or
/// at the first invalid batch, which [`Batches::error`] then reports.
#[derive(Debug)]
pub struct Batches<'a> {
    bytes: &'a [u8],
    pos: usize,
    error: Option<(usize, BatchError)>,
}

impl<'a> Batches<'a> {
    pub fn new(bytes: &'a [u8]) -> Batches<'a> {
        Batches { bytes, pos: 0, error: None }
    }
    /// Position just past the last batch returned.
    pub fn position(&self) -> usize {
        self.pos
    }
    /// The first invalid batch met, with its position, if any.
    pub fn error(&self) -> Option<&(usize, BatchError)> {
        self.error.as_ref()
    }
}

impl<'a> Iterator for Batches<'a> {
    type Item = BatchView<'a>;
    fn next(&mut self) -> Option<BatchView<'a>> {
        if self.pos >= self.bytes.len() || self.error.is_some() {
            return None;
        }
        match BatchView::parse(&self.bytes[self.pos..]) {
            Ok(batch) => {
                self.pos += batch.size_bytes();
                Some(batch)
            }
            Err(error) => {
                self.error = Some((self.pos, error));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_headerless_view_is_the_view_its_batch_gives() {
        for (key, value) in [(Some(&b"k"[..]), Some(&b"v"[..])), (None, None), (Some(&b""[..]), None)] {
            let mut out = Vec::new();
            let record = EncodeRecord { offset_delta: 0, timestamp_ms: -3, key, value, headers: &[] };
            encode_batch(&mut out, 77, 0, [record]);
            let batch = BatchView::parse(&out).unwrap();
            let from_batch = batch.records().next().unwrap();
            let view = RecordView::headerless(77, -3, key, value);
            assert_eq!(view, from_batch);
            assert!(view.headers().is_empty() && view.header("h").is_none());
        }
    }

    #[test]
    fn round_trip_preserves_every_field() {
        let records = vec![
            Record {
                key: Some(b"k1".to_vec()),
                value: Some(b"v1".to_vec()),
                timestamp_ms: 1_700_000_000_000,
                headers: vec![Header { key: "h".into(), value: Some(b"x".to_vec()) }],
            },
            Record { key: None, value: None, timestamp_ms: 1_699_999_999_000, headers: vec![] },
            Record { key: Some(vec![]), value: Some(vec![]), timestamp_ms: -5, headers: vec![] },
        ];
        let mut out = Vec::new();
        let size = encode_records(&mut out, 42, &records);
        assert_eq!(size, out.len());
        let batch = BatchView::parse(&out).unwrap();
        assert_eq!(batch.base_offset(), 42);
        assert_eq!(batch.last_offset(), 44);
        assert_eq!(batch.max_timestamp(), 1_700_000_000_000);
        let back: Vec<_> = batch.records().map(|r| (r.offset, r.to_record())).collect();
        assert_eq!(back, records.into_iter().enumerate().map(|(i, r)| (42 + i as u64, r)).collect::<Vec<_>>());
    }

    #[test]
    fn header_pairs_are_every_header_in_order_and_header_takes_the_first_of_a_name() {
        let headers = vec![
            Header { key: "a".into(), value: Some(b"1".to_vec()) },
            Header { key: String::new(), value: None },
            Header { key: "a".into(), value: Some(b"2".to_vec()) },
            Header { key: "b".into(), value: None },
        ];
        let mut out = Vec::new();
        encode_records(&mut out, 0, &[Record { headers, ..Record::new(Some(b"k"), None, 1) }]);
        let batch = BatchView::parse(&out).unwrap();
        let record = batch.records().next().unwrap();
        let pairs: Vec<_> = record.header_pairs().collect();
        let expected: [(&[u8], Option<&[u8]>); 4] = [(b"a", Some(b"1")), (b"", None), (b"a", Some(b"2")), (b"b", None)];
        assert_eq!(pairs, expected);
        assert_eq!(record.header("a"), Some(Some(&b"1"[..])));
        assert_eq!(record.header("b"), Some(None), "a null value");
        assert_eq!(record.header("c"), None, "no such header");
    }

    /// A header key that is not UTF-8 (under a correct CRC) is refused
    /// when the batch is parsed: the one place keys are checked.
    #[test]
    fn a_header_key_that_is_not_utf8_is_refused_at_parse() {
        let header = Header { key: "kk".into(), value: None };
        let mut out = Vec::new();
        encode_records(&mut out, 0, &[Record { headers: vec![header], ..Record::new(Some(b"a"), Some(b"b"), 1) }]);
        let at = out.windows(2).rposition(|w| w == b"kk").expect("the key is in the batch");
        out[at..at + 2].copy_from_slice(&[0xff, 0xfe]);
        let crc = crc32c::crc32c(&out[CRC_START..]);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        let error = BatchView::parse(&out).unwrap_err().to_string();
        assert!(error.contains("not UTF-8"), "{error}");
    }

    /// The one-byte fast path and the general decoder agree on every
    /// one-byte varint, and longer ones still go the long way.
    #[test]
    fn one_byte_varints_decode_as_the_general_path_does() {
        for byte in 0u8..0x80 {
            let fast = Cursor { bytes: &[byte], pos: 0 }.varlong().unwrap();
            let long = Cursor { bytes: &[byte], pos: 0 }.varlong_long().unwrap();
            assert_eq!(fast, long, "byte {byte}");
        }
        let mut two = Cursor { bytes: &[0x80, 0x01], pos: 0 };
        assert_eq!((two.varlong().unwrap(), two.pos), (64, 2));
        assert!(Cursor { bytes: &[0x80], pos: 0 }.varlong().is_err(), "a varint cut short");
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let mut out = Vec::new();
        encode_records(&mut out, 7, &[Record::new(Some(b"key"), Some(b"value"), 1)]);
        for byte in 0..out.len() {
            for bit in 0..8 {
                let mut bad = out.clone();
                bad[byte] ^= 1 << bit;
                // Base offset and leader epoch are outside the CRC, as in Kafka.
                if byte < 8 || (12..16).contains(&byte) {
                    continue;
                }
                assert!(BatchView::parse(&bad).is_err(), "flip at byte {byte} bit {bit} accepted");
            }
        }
    }

    #[test]
    fn varint_lengths_match_what_is_written() {
        for value in [0, 1, -1, 63, 64, -65, 8191, 8192, i64::from(i32::MAX), i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            put_varlong(&mut out, value);
            assert_eq!(varlong_len(value), out.len(), "{value}");
        }
    }

    #[test]
    fn kafka_reference_varints() {
        // Zig-zag examples from the protobuf and Kafka documentation.
        for (value, encoded) in
            [(0i64, vec![0u8]), (-1, vec![1]), (1, vec![2]), (-2, vec![3]), (63, vec![126]), (64, vec![128, 1])]
        {
            let mut out = Vec::new();
            put_varlong(&mut out, value);
            assert_eq!(out, encoded);
            assert_eq!(Cursor { bytes: &out, pos: 0 }.varlong().unwrap(), value);
        }
    }
}
