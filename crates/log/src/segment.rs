//! A segment: one `.log` file of back-to-back batches named by its base
//! offset, with a sparse offset index (`.index`) and time index (`.timeindex`).
//!
//! Invariants:
//! - Batches in a segment have strictly increasing base offsets, all at or
//!   above the segment's base offset; their offset ranges never overlap.
//! - Readers see only the first `visible_bytes` bytes, which always end on a
//!   batch boundary and only grow (except when a whole segment is replaced).
//! - Index entries are strictly increasing in offset and position; every
//!   position is the start of a batch whose base offset is the entry's offset.
//!   Time entries hold the largest timestamp of all batches *before* the
//!   entry's batch, so every record before it is older than that value.
//! - Index files are a cache: a missing or inconsistent one is rebuilt from
//!   the `.log` file, which is the only source of truth.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::batch::{self, BATCH_HEADER_BYTES, BatchError, BatchView, Batches, LOG_OVERHEAD_BYTES};
use crate::error::{Error, Result};
use crate::storage::{OpenMode, Storage, StorageFile};
use crate::transactions::TxnBatch;

pub(crate) const OFFSET_ENTRY_BYTES: usize = 8;
pub(crate) const TIME_ENTRY_BYTES: usize = 12;
/// Read-ahead when scanning batch headers or validating a file.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// Parses a file-name offset: exactly 20 decimal digits, at most
/// `i64::MAX` (offsets are non-negative i64s on disk). Anything else is not
/// one of our names, so two names never map to one offset.
pub(crate) fn parse_offset_name(stem: &str) -> Option<u64> {
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse::<u64>().ok().filter(|&offset| offset <= i64::MAX as u64)
}

pub(crate) fn log_path(dir: &Path, base_offset: u64) -> PathBuf {
    dir.join(format!("{base_offset:020}.log"))
}
pub(crate) fn offset_index_path(dir: &Path, base_offset: u64) -> PathBuf {
    dir.join(format!("{base_offset:020}.index"))
}
pub(crate) fn time_index_path(dir: &Path, base_offset: u64) -> PathBuf {
    dir.join(format!("{base_offset:020}.timeindex"))
}
/// The cleaner's swap file for segments `[first, end)`: `FIRST-END.swap`.
pub(crate) fn swap_path(dir: &Path, first: u64, end: u64) -> PathBuf {
    assert!(first < end, "a swap covers at least one offset: {first}..{end}");
    dir.join(format!("{first:020}-{end:020}.swap"))
}
/// Parses the stem of a swap file name (`FIRST-END`, `FIRST < END`).
pub(crate) fn parse_swap_name(stem: &str) -> Option<(u64, u64)> {
    let (first, end) = stem.split_once('-')?;
    let (first, end) = (parse_offset_name(first)?, parse_offset_name(end)?);
    (first < end).then_some((first, end))
}

/// One sparse offset-index entry: the batch with base offset
/// `segment base + relative_offset` starts at `position`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OffsetEntry {
    pub(crate) relative_offset: u32,
    pub(crate) position: u32,
}

/// One time-index entry: every record before the batch at
/// `segment base + relative_offset` has a timestamp <= `max_timestamp_before`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimeEntry {
    pub(crate) max_timestamp_before: i64,
    pub(crate) relative_offset: u32,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Indexes {
    pub(crate) offsets: Vec<OffsetEntry>,
    pub(crate) times: Vec<TimeEntry>,
}

impl Indexes {
    fn encode(&self) -> (Vec<u8>, Vec<u8>) {
        let mut offsets = Vec::with_capacity(self.offsets.len() * OFFSET_ENTRY_BYTES);
        for entry in &self.offsets {
            offsets.extend_from_slice(&entry.relative_offset.to_be_bytes());
            offsets.extend_from_slice(&entry.position.to_be_bytes());
        }
        let mut times = Vec::with_capacity(self.times.len() * TIME_ENTRY_BYTES);
        for entry in &self.times {
            times.extend_from_slice(&entry.max_timestamp_before.to_be_bytes());
            times.extend_from_slice(&entry.relative_offset.to_be_bytes());
        }
        (offsets, times)
    }

    /// Parses index files; `None` if either is malformed or inconsistent
    /// with a log of `log_bytes` bytes.
    fn decode(offsets: &[u8], times: &[u8], log_bytes: u64) -> Option<Indexes> {
        if !offsets.len().is_multiple_of(OFFSET_ENTRY_BYTES) || !times.len().is_multiple_of(TIME_ENTRY_BYTES) {
            return None;
        }
        let offsets: Vec<OffsetEntry> = offsets
            .chunks_exact(OFFSET_ENTRY_BYTES)
            .map(|c| OffsetEntry {
                relative_offset: u32::from_be_bytes(c[0..4].try_into().expect("4")),
                position: u32::from_be_bytes(c[4..8].try_into().expect("4")),
            })
            .collect();
        let times: Vec<TimeEntry> = times
            .chunks_exact(TIME_ENTRY_BYTES)
            .map(|c| TimeEntry {
                max_timestamp_before: i64::from_be_bytes(c[0..8].try_into().expect("8")),
                relative_offset: u32::from_be_bytes(c[8..12].try_into().expect("4")),
            })
            .collect();
        let offsets_ok =
            offsets.windows(2).all(|w| w[0].relative_offset < w[1].relative_offset && w[0].position < w[1].position)
                && offsets.last().is_none_or(|e| u64::from(e.position) < log_bytes);
        let times_ok = times.windows(2).all(|w| {
            w[0].relative_offset < w[1].relative_offset && w[0].max_timestamp_before <= w[1].max_timestamp_before
        });
        (offsets_ok && times_ok).then_some(Indexes { offsets, times })
    }
}

/// What the offsets of a segment's batches must satisfy. The base offset is
/// outside the batch CRC (as in Kafka), so these checks are what stops a
/// damaged base offset from moving records to other offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffsetRules {
    /// Batches follow each other with no gap, the first at the segment's
    /// base offset. True for every segment that was never compacted.
    pub(crate) contiguous: bool,
    /// Every offset in the segment is below this (the next segment's base).
    pub(crate) limit: u64,
}

impl OffsetRules {
    pub(crate) const ACTIVE: OffsetRules = OffsetRules { contiguous: true, limit: u64::MAX };
}

/// Checks batch offsets one batch at a time, in file order.
#[derive(Debug, Clone, Copy)]
struct OffsetCheck {
    segment_base: u64,
    rules: OffsetRules,
    /// One past the previous batch; `None` at the start of the file.
    next: Option<u64>,
    /// The next batch must start exactly at `next` (it was found through an
    /// index entry naming its offset).
    exact: bool,
}

impl OffsetCheck {
    fn new(segment_base: u64, rules: OffsetRules, start_offset: Option<u64>) -> OffsetCheck {
        OffsetCheck { segment_base, rules, next: start_offset, exact: start_offset.is_some() }
    }

    /// The offset the next batch should start at, as far as this check knows.
    fn expected(&self) -> u64 {
        self.next.unwrap_or(self.segment_base)
    }

    fn check(&mut self, base_offset: u64, last_offset_delta: u32) -> std::result::Result<(), BatchError> {
        let last_offset = base_offset.saturating_add(u64::from(last_offset_delta));
        let bad = |reason| Err(BatchError::BadOffset { base_offset, last_offset, reason });
        if base_offset < self.segment_base || last_offset - self.segment_base > u64::from(u32::MAX) {
            return bad("are outside the segment's offset range");
        }
        if last_offset >= self.rules.limit {
            return bad("reach the next segment's base offset");
        }
        let expected = self.next.unwrap_or(self.segment_base);
        if (self.exact || self.rules.contiguous) && base_offset != expected {
            return bad("do not follow the previous batch (or the index entry)");
        }
        if base_offset < expected {
            return bad("overlap the previous batch");
        }
        self.next = Some(last_offset + 1);
        self.exact = false;
        Ok(())
    }
}

/// A segment as readers see it. The writer's extra state lives in
/// [`crate::partition`]'s active-segment record.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) base_offset: u64,
    pub(crate) path: PathBuf,
    pub(crate) file: Arc<dyn StorageFile>,
    /// Bytes readers may see; always a batch boundary.
    visible_bytes: AtomicU64,
    /// One past the last offset of the last written batch (`base_offset` if empty).
    next_offset: AtomicU64,
    /// Largest record timestamp written (`i64::MIN` if empty).
    max_timestamp: AtomicI64,
    pub(crate) indexes: RwLock<Indexes>,
    /// Set once; `limit` moves from `u64::MAX` to the next base on roll.
    contiguous: bool,
    limit_offset: AtomicU64,
}

/// What a validating scan of a segment file found.
#[derive(Debug)]
pub(crate) struct Scan {
    /// End of the last valid batch.
    pub(crate) valid_bytes: u64,
    pub(crate) next_offset: u64,
    pub(crate) max_timestamp: i64,
    /// Max timestamp of the first batch (drives time-based rolling).
    pub(crate) first_batch_max_timestamp: Option<i64>,
    pub(crate) indexes: Indexes,
    /// Bytes after the last index entry's position (or since the start).
    pub(crate) bytes_since_index: u64,
    /// The first invalid batch, if the scan stopped before the end of file.
    pub(crate) error: Option<(u64, BatchError)>,
}

/// What [`Segment::open`] does with the first invalid batch of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tail {
    /// Keep it on disk (closed segments: reads report it).
    Keep,
    /// Cut it off if it is a torn tail (no valid batch follows it); report
    /// it, cutting nothing, if a valid batch follows.
    CutTorn,
    /// Cut it off in any case (an operator's repair).
    Repair,
}

/// The first invalid batch of a segment being recovered.
#[derive(Debug, Clone)]
pub(crate) struct TailDamage {
    /// Byte where the invalid batch starts (the end of the valid prefix).
    pub(crate) position: u64,
    /// The offset the invalid batch should have started at.
    pub(crate) offset: u64,
    /// Bytes from `position` to the end of the file.
    pub(crate) bytes: u64,
    pub(crate) error: BatchError,
    /// A valid batch after it, `(position, base offset)`: proof that this is
    /// not a torn tail.
    pub(crate) followed_by: Option<(u64, u64)>,
    /// Whether the file was truncated at `position`.
    pub(crate) cut: bool,
}

/// The first position after `from` (exclusive) holding a whole, valid batch
/// (length, magic, CRC and records checked) whose offsets come after
/// `expected_offset` and fit the segment: `(position, base offset)`. Reads
/// the tail in chunks; a candidate is parsed only if its length and magic
/// are plausible, so garbage and zeros are skipped quickly.
fn find_valid_batch_after(
    path: &Path,
    file: &dyn StorageFile,
    segment_base: u64,
    from: u64,
    file_bytes: u64,
    expected_offset: u64,
) -> Result<Option<(u64, u64)>> {
    let io = |source| Error::Io { action: "reading segment", path: path.to_path_buf(), source };
    let mut chunk = Vec::new();
    let mut candidate = Vec::new();
    let mut chunk_start = from + 1;
    while chunk_start + (BATCH_HEADER_BYTES as u64) <= file_bytes {
        let len = (file_bytes - chunk_start).min(SCAN_CHUNK_BYTES as u64 + BATCH_HEADER_BYTES as u64) as usize;
        chunk.resize(len, 0);
        file.read_exact_at(&mut chunk, chunk_start).map_err(io)?;
        let last = len - BATCH_HEADER_BYTES; // every q <= last has a whole header in the chunk
        for q in 0..=last {
            let header = &chunk[q..];
            if header[16] as i8 != batch::MAGIC {
                continue;
            }
            let Ok(size) = batch::batch_size(header) else { continue };
            let position = chunk_start + q as u64;
            if position + size as u64 > file_bytes {
                continue;
            }
            let bytes: &[u8] = if q + size <= chunk.len() {
                &chunk[q..q + size]
            } else {
                candidate.resize(size, 0);
                file.read_exact_at(&mut candidate, position).map_err(io)?;
                &candidate
            };
            if let Ok(view) = BatchView::parse(bytes)
                && view.base_offset() > expected_offset
                && view.last_offset() - segment_base <= u64::from(u32::MAX)
            {
                return Ok(Some((position, view.base_offset())));
            }
        }
        chunk_start += last as u64 + 1;
    }
    Ok(None)
}

impl Segment {
    pub(crate) fn new(
        base_offset: u64,
        path: PathBuf,
        file: Arc<dyn StorageFile>,
        scan: &Scan,
        rules: OffsetRules,
    ) -> Segment {
        Segment {
            contiguous: rules.contiguous,
            limit_offset: AtomicU64::new(rules.limit),
            base_offset,
            path,
            file,
            visible_bytes: AtomicU64::new(scan.valid_bytes),
            next_offset: AtomicU64::new(scan.next_offset),
            max_timestamp: AtomicI64::new(scan.max_timestamp),
            indexes: RwLock::new(scan.indexes.clone()),
        }
    }

    /// Creates empty `.log`, `.index` and `.timeindex` files.
    pub(crate) fn create(storage: &dyn Storage, dir: &Path, base_offset: u64) -> Result<Segment> {
        // A new segment is the active one: dense, unbounded until the next roll.
        let path = log_path(dir, base_offset);
        let file = storage.open(&path, OpenMode::CreateNew).map_err(Error::io("creating segment", &path))?;
        for index in [offset_index_path(dir, base_offset), time_index_path(dir, base_offset)] {
            storage.open(&index, OpenMode::Truncate).map_err(Error::io("creating index", &index))?;
        }
        Ok(Segment::new(base_offset, path, file, &Scan::empty(base_offset), OffsetRules::ACTIVE))
    }

    /// Opens an existing segment. With `trust_index`, valid index files are
    /// used and only the bytes after the last index entry are validated;
    /// otherwise (or if they are damaged) the whole file is validated and the
    /// indexes rebuilt. `tail` says what to do with an invalid batch (see
    /// [`Tail`]); the returned [`TailDamage`] describes it, and whether it
    /// was cut.
    pub(crate) fn open(
        storage: &dyn Storage,
        dir: &Path,
        base_offset: u64,
        trust_index: bool,
        tail: Tail,
        index_interval_bytes: u64,
        rules: OffsetRules,
    ) -> Result<(Segment, Scan, Option<TailDamage>)> {
        let path = log_path(dir, base_offset);
        let file = storage.open(&path, OpenMode::Existing).map_err(Error::io("opening segment", &path))?;
        let file_bytes = file.len().map_err(Error::io("reading size of", &path))?;
        let loaded = if trust_index { load_indexes(storage, dir, base_offset, file_bytes) } else { None };
        let loaded_lens = loaded.as_ref().map(|i| (i.offsets.len(), i.times.len()));
        let full_scan = || scan_file(&path, &*file, base_offset, None, Indexes::default(), index_interval_bytes, rules);
        let scan = match loaded {
            Some(indexes) => match scan_from_index(&path, &*file, base_offset, indexes, index_interval_bytes, rules)? {
                Some(scan) => scan,
                None => full_scan()?,
            },
            None => full_scan()?,
        };
        // Only the segment being recovered (the one being written at the
        // crash) can have a torn tail. A closed segment was synced whole
        // before the next one was created, so any damage there, even a batch
        // that seems to run past the end of file (a damaged length), stays
        // visible so that reads report it instead of silently skipping its
        // offsets. In the segment being recovered, an invalid batch is a torn
        // tail only if no valid batch follows it; otherwise it is corruption
        // of acknowledged data, cut only on request.
        let damage = if scan.valid_bytes < file_bytes && tail != Tail::Keep {
            let error = scan
                .error
                .clone()
                .map_or(BatchError::Incomplete { needed: LOG_OVERHEAD_BYTES, available: 0 }, |(_, error)| error);
            let followed_by =
                find_valid_batch_after(&path, &*file, base_offset, scan.valid_bytes, file_bytes, scan.next_offset)?;
            let cut = followed_by.is_none() || tail == Tail::Repair;
            Some(TailDamage {
                position: scan.valid_bytes,
                offset: scan.next_offset,
                bytes: file_bytes - scan.valid_bytes,
                error,
                followed_by,
                cut,
            })
        } else {
            None
        };
        let truncate = damage.as_ref().is_some_and(|d| d.cut);
        if truncate {
            file.set_len(scan.valid_bytes).map_err(Error::io("truncating segment", &path))?;
            file.sync_all().map_err(Error::io("syncing segment", &path))?;
        } else if damage.is_some() {
            // Corruption the caller reports: touch nothing.
            let segment = Segment::new(base_offset, path, file, &scan, rules);
            return Ok((segment, scan, damage));
        }
        let segment = Segment::new(base_offset, path, file, &scan, rules);
        if !truncate {
            segment.publish(file_bytes);
        }
        if loaded_lens != Some((scan.indexes.offsets.len(), scan.indexes.times.len())) {
            segment.write_indexes(storage, dir)?; // rebuilt or extended
        }
        Ok((segment, scan, damage))
    }

    /// Rewrites both index files from memory and syncs them.
    pub(crate) fn write_indexes(&self, storage: &dyn Storage, dir: &Path) -> Result<()> {
        let (offsets, times) = self.indexes.read().expect("index lock").encode();
        for (path, bytes) in
            [(offset_index_path(dir, self.base_offset), offsets), (time_index_path(dir, self.base_offset), times)]
        {
            crate::storage::write_file(storage, &path, &bytes, true).map_err(Error::io("writing index", &path))?;
        }
        Ok(())
    }

    /// Bounds this segment's offsets below the next segment's base (on roll).
    pub(crate) fn close_at(&self, next_base_offset: u64) {
        self.limit_offset.store(next_base_offset, Ordering::Release);
    }

    fn rules(&self) -> OffsetRules {
        OffsetRules { contiguous: self.contiguous, limit: self.limit_offset.load(Ordering::Acquire) }
    }

    pub(crate) fn visible_bytes(&self) -> u64 {
        self.visible_bytes.load(Ordering::Acquire)
    }
    pub(crate) fn next_offset(&self) -> u64 {
        self.next_offset.load(Ordering::Acquire)
    }
    pub(crate) fn max_timestamp(&self) -> i64 {
        self.max_timestamp.load(Ordering::Acquire)
    }
    pub(crate) fn note_written(&self, next_offset: u64, max_timestamp: i64) {
        self.next_offset.fetch_max(next_offset, Ordering::AcqRel);
        self.max_timestamp.fetch_max(max_timestamp, Ordering::AcqRel);
    }
    /// Lets readers see the first `bytes` bytes; never shrinks.
    pub(crate) fn publish(&self, bytes: u64) {
        self.visible_bytes.fetch_max(bytes, Ordering::AcqRel);
    }

    /// Position to start scanning for `offset`: the last index entry at or
    /// below it, among entries readers may see.
    /// Also returns an offset check that starts there.
    fn index_position(&self, offset: u64, visible: u64) -> (u64, OffsetCheck) {
        let indexes = self.indexes.read().expect("index lock");
        let after = indexes.offsets.partition_point(|e| {
            self.base_offset + u64::from(e.relative_offset) <= offset && u64::from(e.position) < visible
        });
        match after.checked_sub(1) {
            None => (0, OffsetCheck::new(self.base_offset, self.rules(), None)),
            Some(i) => {
                let entry = indexes.offsets[i];
                let entry_offset = self.base_offset + u64::from(entry.relative_offset);
                (u64::from(entry.position), OffsetCheck::new(self.base_offset, self.rules(), Some(entry_offset)))
            }
        }
    }

    /// Reads whole batches starting with the first whose last offset is at
    /// least `offset`: at least one batch, then more while they fit in
    /// `max_bytes`. Returns `None` if no visible batch reaches `offset`.
    /// Every returned batch has been validated; a corrupt first batch is an
    /// error, a corrupt later batch ends the read before it.
    pub(crate) fn read(
        &self,
        offset: u64,
        max_bytes: usize,
    ) -> std::result::Result<Option<Vec<u8>>, (u64, u64, BatchError)> {
        let visible = self.visible_bytes();
        let (start, check) = self.index_position(offset, visible);
        let mut headers = HeaderScanner::new(&*self.file, start, visible, check);
        let (position, first_size) = loop {
            match headers.next_header() {
                Ok(None) => return Ok(None),
                Ok(Some(header)) if header.last_offset() >= offset => break (header.position, header.size_bytes),
                Ok(Some(_)) => {}
                Err((position, error)) => return Err((headers.offset_of_error(position, &error), position, error)),
            }
        };
        let want = (first_size as u64).max(max_bytes as u64).min(visible - position) as usize;
        let mut bytes = vec![0; want];
        self.file.read_exact_at(&mut bytes, position).map_err(|e| (offset, position, io_batch_error(&e)))?;
        // The first batch's offsets were checked by the header scan; later
        // ones continue the same check.
        let mut check = headers.check;
        let mut batches = Batches::new(&bytes);
        let mut valid = 0;
        let mut error = None;
        for batch in batches.by_ref() {
            if valid > 0
                && let Err(e) = check.check(batch.base_offset(), batch.last_offset_delta() as u32)
            {
                error = Some(e);
                break;
            }
            valid += batch.size_bytes();
        }
        if valid == 0 {
            let error = error
                .or_else(|| batches.error().map(|(_, e)| e.clone()))
                .expect("an empty read of a non-empty range has an error");
            return Err((batch::peek_base_offset(&bytes).unwrap_or(offset), position, error));
        }
        bytes.truncate(valid);
        Ok(Some(bytes))
    }

    /// Where the whole batches that [`Segment::read`] would return lie in the
    /// file, without reading them: the first batch whose last offset is at
    /// least `offset`, then more while they fit in `max_bytes`, none of them
    /// reaching `end_offset`. Returns `(position, length)` (a length of 0
    /// when the first batch reaches `end_offset`), or `None` if no visible
    /// batch reaches `offset`.
    ///
    /// Only batch headers are read (sizes and offsets checked, bodies not:
    /// a consumer checks each batch's CRC, as with Kafka's zero-copy fetch),
    /// and the offset index skips over the batches between the first and
    /// the last, so a megabyte costs a few small reads.
    pub(crate) fn locate(
        &self,
        offset: u64,
        max_bytes: usize,
        end_offset: u64,
    ) -> std::result::Result<Option<SegmentSlice>, (u64, u64, BatchError)> {
        let visible = self.visible_bytes();
        let (start, check) = self.index_position(offset, visible);
        let mut headers = HeaderScanner::new(&*self.file, start, visible, check).read_ahead(LOCATE_READ_AHEAD_BYTES);
        let first = loop {
            match headers.next_header() {
                Ok(None) => return Ok(None),
                Ok(Some(header)) if header.last_offset() >= offset => break header,
                Ok(Some(_)) => {}
                Err((position, error)) => return Err((headers.offset_of_error(position, &error), position, error)),
            }
        };
        if first.last_offset() >= end_offset {
            return Ok(Some((first.position, 0, first.base_offset)));
        }
        let budget_end = first.position + (max_bytes as u64).max(first.size_bytes as u64);
        let mut end = first.position + first.size_bytes as u64;
        let mut next_offset = first.last_offset() + 1;
        if let Some((position, base)) = self.index_entry_below(budget_end, end_offset, visible)
            && position > end
        {
            // Every batch before an indexed batch start ends there, and below its base offset.
            headers.resume_at(position, OffsetCheck::new(self.base_offset, self.rules(), Some(base)));
            (end, next_offset) = (position, base);
        }
        while let Ok(Some(header)) = headers.next_header() {
            let header_end = header.position + header.size_bytes as u64;
            if header_end > budget_end || header.last_offset() >= end_offset {
                break;
            }
            (end, next_offset) = (header_end, header.last_offset() + 1);
        }
        debug_assert!(first.position < end && end <= visible);
        Ok(Some((first.position, end - first.position, next_offset)))
    }

    /// Calls `f` with each transactional batch of the segment, in order,
    /// reading headers only (and a marker's one record): how a partition
    /// rebuilds its transactions when it opens.
    pub(crate) fn for_each_txn_batch(
        &self,
        mut f: impl FnMut(TxnBatch),
    ) -> std::result::Result<(), (u64, u64, BatchError)> {
        let visible = self.visible_bytes();
        let check = OffsetCheck::new(self.base_offset, self.rules(), None);
        let mut headers = HeaderScanner::new(&*self.file, 0, visible, check);
        loop {
            let header = match headers.next_header() {
                Ok(None) => return Ok(()),
                Ok(Some(header)) => header,
                Err((position, error)) => return Err((headers.offset_of_error(position, &error), position, error)),
            };
            if header.attributes & batch::ATTR_TRANSACTIONAL == 0 {
                continue;
            }
            if header.attributes & batch::ATTR_CONTROL == 0 {
                f(TxnBatch::Data { producer_id: header.producer_id, base_offset: header.base_offset });
                continue;
            }
            let mut bytes = vec![0u8; header.size_bytes];
            let at = |e: BatchError| (header.base_offset, header.position, e);
            self.file.read_exact_at(&mut bytes, header.position).map_err(|e| at(io_batch_error(&e)))?;
            let marker = BatchView::parse(&bytes).map_err(at)?;
            f(TxnBatch::of(&marker).expect("a parsed control batch is a marker"));
        }
    }

    /// The last indexed batch start at or below `position` whose base offset
    /// is below `end_offset`, among entries readers may see: its position
    /// and base offset.
    fn index_entry_below(&self, position: u64, end_offset: u64, visible: u64) -> Option<(u64, u64)> {
        let indexes = self.indexes.read().expect("index lock");
        let after = indexes.offsets.partition_point(|e| {
            let entry = u64::from(e.position);
            entry <= position && entry < visible && self.base_offset + u64::from(e.relative_offset) < end_offset
        });
        let entry = indexes.offsets[..after].last()?;
        Some((u64::from(entry.position), self.base_offset + u64::from(entry.relative_offset)))
    }

    /// The first offset in this segment whose timestamp is >= `timestamp_ms`.
    pub(crate) fn offset_for_time(
        &self,
        timestamp_ms: i64,
    ) -> std::result::Result<Option<u64>, (u64, u64, BatchError)> {
        if self.max_timestamp() < timestamp_ms {
            return Ok(None);
        }
        let visible = self.visible_bytes();
        let start_offset = {
            let indexes = self.indexes.read().expect("index lock");
            let after = indexes.times.partition_point(|e| e.max_timestamp_before < timestamp_ms);
            after
                .checked_sub(1)
                .map_or(self.base_offset, |i| self.base_offset + u64::from(indexes.times[i].relative_offset))
        };
        let (start, check) = self.index_position(start_offset, visible);
        let mut headers = HeaderScanner::new(&*self.file, start, visible, check);
        loop {
            let header = match headers.next_header() {
                Ok(None) => return Ok(None),
                Ok(Some(header)) => header,
                Err((position, error)) => return Err((headers.offset_of_error(position, &error), position, error)),
            };
            if header.max_timestamp < timestamp_ms {
                continue;
            }
            let mut bytes = vec![0; header.size_bytes];
            self.file
                .read_exact_at(&mut bytes, header.position)
                .map_err(|e| (header.base_offset, header.position, io_batch_error(&e)))?;
            let located = |e| (header.base_offset, header.position, e);
            let batch = BatchView::parse(&bytes).map_err(located)?;
            let bytes = crate::batch::normalized(batch.as_bytes()).map_err(located)?;
            if let Some(record) = BatchView::from_validated(&bytes).records().find(|r| r.timestamp_ms >= timestamp_ms) {
                return Ok(Some(record.offset));
            }
        }
    }
}

fn io_batch_error(error: &std::io::Error) -> BatchError {
    // A short read of bytes we published means the file shrank under us.
    BatchError::Incomplete { needed: 0, available: error.raw_os_error().unwrap_or(0) as usize }
}

impl Scan {
    pub(crate) fn empty(base_offset: u64) -> Scan {
        Scan {
            valid_bytes: 0,
            next_offset: base_offset,
            max_timestamp: i64::MIN,
            first_batch_max_timestamp: None,
            indexes: Indexes::default(),
            bytes_since_index: 0,
            error: None,
        }
    }
}

fn load_indexes(storage: &dyn Storage, dir: &Path, base_offset: u64, log_bytes: u64) -> Option<Indexes> {
    let offsets = storage.read(&offset_index_path(dir, base_offset)).ok()?;
    let times = storage.read(&time_index_path(dir, base_offset)).ok()?;
    Indexes::decode(&offsets, &times, log_bytes)
}

/// Validates only the tail after the last index entry, trusting the rest.
/// `None` if the index does not match the file (the caller then rescans).
fn scan_from_index(
    path: &Path,
    file: &dyn StorageFile,
    base_offset: u64,
    mut indexes: Indexes,
    interval: u64,
    rules: OffsetRules,
) -> Result<Option<Scan>> {
    let (start, start_offset) = match indexes.offsets.last() {
        None => (0, base_offset),
        Some(e) => (u64::from(e.position), base_offset + u64::from(e.relative_offset)),
    };
    // Offset and time entries are written in pairs. If the two files do not
    // end at the same entry (one is torn or stale), the time index cannot
    // bound the records before `start`: rescan.
    if indexes.times.last().map(|e| e.relative_offset) != indexes.offsets.last().map(|e| e.relative_offset) {
        return Ok(None);
    }
    // The offset entry at `start` is re-derived by the scan. The time entry
    // there stays: the scan takes the bound on the records before `start`
    // from the last time entry, then re-creates that same entry (deduplicated
    // below).
    let max_before = indexes.times.last().map_or(i64::MIN, |e| e.max_timestamp_before);
    indexes.offsets.pop();
    indexes.times.retain(|e| base_offset + u64::from(e.relative_offset) <= start_offset);
    let resume = (start > 0).then_some((start, start_offset));
    let mut scan = scan_file(path, file, base_offset, resume, indexes, interval, rules)?;
    scan.indexes.times.dedup();
    if start > 0
        && (scan.valid_bytes == start || scan.indexes.offsets.last().map(|e| u64::from(e.position)) != Some(start))
    {
        // The last entry did not point at a valid batch with its offset.
        return Ok(None);
    }
    scan.max_timestamp = scan.max_timestamp.max(max_before);
    if scan.first_batch_max_timestamp.is_none() || start > 0 {
        scan.first_batch_max_timestamp = first_batch_max_timestamp(file);
    }
    Ok(Some(scan))
}

fn first_batch_max_timestamp(file: &dyn StorageFile) -> Option<i64> {
    let mut header = [0u8; BATCH_HEADER_BYTES];
    file.read_exact_at(&mut header, 0).ok()?;
    Some(i64::from_be_bytes(header[35..43].try_into().expect("8")))
}

/// Validates batches to the end of the file, extending `indexes`: from the
/// start of the file, or from `resume = (position, offset)`, an index entry
/// (the batch there must have that base offset; the entry is re-created).
/// Batches must also satisfy `rules`.
fn scan_file(
    path: &Path,
    file: &dyn StorageFile,
    base_offset: u64,
    resume: Option<(u64, u64)>,
    indexes: Indexes,
    index_interval_bytes: u64,
    rules: OffsetRules,
) -> Result<Scan> {
    let (start, start_offset) = resume.unwrap_or((0, base_offset));
    let mut offsets = OffsetCheck::new(base_offset, rules, resume.map(|(_, offset)| offset));
    let file_bytes =
        file.len().map_err(|source| Error::Io { action: "reading size of", path: path.to_path_buf(), source })?;
    let mut scan = Scan { indexes, ..Scan::empty(base_offset) };
    scan.next_offset = start_offset;
    scan.valid_bytes = start;
    let mut max_before = scan.indexes.times.last().map_or(i64::MIN, |e| e.max_timestamp_before);
    let mut force_entry = start > 0;
    let mut chunk_start = start;
    let mut chunk = Vec::new();
    'chunks: while chunk_start < file_bytes {
        let len = (file_bytes - chunk_start).min(SCAN_CHUNK_BYTES as u64) as usize;
        chunk.resize(len, 0);
        file.read_exact_at(&mut chunk, chunk_start).map_err(|source| Error::Io {
            action: "reading segment",
            path: path.to_path_buf(),
            source,
        })?;
        let mut pos = 0usize;
        while pos < chunk.len() {
            let rest = &chunk[pos..];
            let size = match batch::batch_size(rest) {
                Ok(size) => size,
                Err(BatchError::Incomplete { .. }) if chunk_start + (chunk.len() as u64) < file_bytes => break,
                Err(error) => {
                    scan.error = Some((chunk_start + pos as u64, error));
                    break 'chunks;
                }
            };
            if size > rest.len() {
                if chunk_start + (chunk.len() as u64) < file_bytes && pos > 0 {
                    break; // re-read with this batch at the start of the chunk
                }
                if chunk_start + pos as u64 + size as u64 > file_bytes {
                    scan.error = Some((
                        chunk_start + pos as u64,
                        BatchError::Incomplete { needed: size, available: rest.len() },
                    ));
                    break 'chunks;
                }
                // A batch larger than the read-ahead: read it whole.
                chunk.resize(pos + size, 0);
                file.read_exact_at(&mut chunk[pos..], chunk_start + pos as u64).map_err(|source| Error::Io {
                    action: "reading segment",
                    path: path.to_path_buf(),
                    source,
                })?;
            }
            let position = chunk_start + pos as u64;
            let batch = match BatchView::parse(&chunk[pos..]) {
                Ok(batch) => batch,
                Err(error) => {
                    scan.error = Some((position, error));
                    break 'chunks;
                }
            };
            if let Err(error) = offsets.check(batch.base_offset(), batch.last_offset_delta() as u32) {
                scan.error = Some((position, error));
                break 'chunks;
            }
            if force_entry || (scan.bytes_since_index >= index_interval_bytes && position > 0) {
                let relative_offset = (batch.base_offset() - base_offset) as u32;
                scan.indexes.offsets.push(OffsetEntry { relative_offset, position: position as u32 });
                scan.indexes.times.push(TimeEntry { max_timestamp_before: max_before, relative_offset });
                scan.bytes_since_index = 0;
                force_entry = false;
            }
            scan.bytes_since_index += size as u64;
            max_before = max_before.max(batch.max_timestamp());
            scan.max_timestamp = scan.max_timestamp.max(batch.max_timestamp());
            if position == 0 {
                scan.first_batch_max_timestamp = Some(batch.max_timestamp());
            }
            scan.next_offset = batch.last_offset() + 1;
            scan.valid_bytes = position + size as u64;
            pos += size;
        }
        if pos == 0 {
            // Cannot happen (a chunk holds at least one header or ends the file); fail safe.
            scan.error = Some((chunk_start, BatchError::Incomplete { needed: LOG_OVERHEAD_BYTES, available: 0 }));
            break;
        }
        chunk_start += pos as u64;
    }
    Ok(scan)
}

/// Batches located in a segment: their position and length, and the end
/// of the offsets they cover (past their last batch, at or below the next
/// batch's base).
pub(crate) type SegmentSlice = (u64, u64, u64);

/// One batch header met while scanning.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchHeader {
    pub(crate) position: u64,
    pub(crate) base_offset: u64,
    pub(crate) last_offset_delta: u32,
    pub(crate) max_timestamp: i64,
    pub(crate) size_bytes: usize,
    pub(crate) attributes: i16,
    pub(crate) producer_id: i64,
}

impl BatchHeader {
    pub(crate) fn last_offset(&self) -> u64 {
        self.base_offset + u64::from(self.last_offset_delta)
    }
}

/// Walks batch headers without validating bodies (bodies are validated when
/// read), reading ahead in chunks so a short scan costs few syscalls.
#[derive(Debug)]
struct HeaderScanner<'f> {
    file: &'f dyn StorageFile,
    position: u64,
    end: u64,
    buffer: Vec<u8>,
    buffer_start: u64,
    check: OffsetCheck,
    read_ahead_bytes: usize,
}

/// How much a header scan reads at once by default.
const SCAN_READ_AHEAD_BYTES: usize = 64 * 1024;
/// How much [`Segment::locate`]'s scan reads at once: it reads headers only,
/// and jumps over the batches between by the index.
const LOCATE_READ_AHEAD_BYTES: usize = 4 * 1024;

impl<'f> HeaderScanner<'f> {
    fn new(file: &'f dyn StorageFile, position: u64, end: u64, check: OffsetCheck) -> HeaderScanner<'f> {
        let read_ahead_bytes = SCAN_READ_AHEAD_BYTES;
        HeaderScanner { file, position, end, buffer: Vec::new(), buffer_start: position, check, read_ahead_bytes }
    }

    fn read_ahead(mut self, bytes: usize) -> HeaderScanner<'f> {
        assert!(bytes >= BATCH_HEADER_BYTES);
        self.read_ahead_bytes = bytes;
        self
    }

    /// Goes on from a batch start at `position`, whose offsets `check` expects.
    fn resume_at(&mut self, position: u64, check: OffsetCheck) {
        assert!(position <= self.end);
        self.position = position;
        self.check = check;
    }

    /// The offset to name in an error at `position`: where the batch should
    /// start if its own base offset is the damage, else its stored base.
    fn offset_of_error(&self, position: u64, error: &BatchError) -> u64 {
        let mut header = [0u8; 8];
        match (error, self.file.read_exact_at(&mut header, position)) {
            (BatchError::BadOffset { .. }, _) | (_, Err(_)) => self.check.expected(),
            (_, Ok(())) => u64::from_be_bytes(header),
        }
    }

    fn next_header(&mut self) -> std::result::Result<Option<BatchHeader>, (u64, BatchError)> {
        if self.position >= self.end {
            return Ok(None);
        }
        let position = self.position;
        let buffered_end = self.buffer_start + self.buffer.len() as u64;
        if position < self.buffer_start || position + BATCH_HEADER_BYTES as u64 > buffered_end {
            let len = (self.end - position).min(self.read_ahead_bytes as u64) as usize;
            self.buffer.resize(len, 0);
            self.file.read_exact_at(&mut self.buffer, position).map_err(|e| (position, io_batch_error(&e)))?;
            self.buffer_start = position;
        }
        let at = (position - self.buffer_start) as usize;
        let bytes = &self.buffer[at..];
        let size = batch::batch_size(bytes).map_err(|e| (position, e))?;
        if bytes.len() < BATCH_HEADER_BYTES || position + size as u64 > self.end {
            return Err((position, BatchError::Incomplete { needed: size, available: (self.end - position) as usize }));
        }
        let last_offset_delta = i32::from_be_bytes(bytes[23..27].try_into().expect("4"));
        if last_offset_delta < 0 {
            return Err((position, BatchError::BadRecord { index: 0, reason: "negative last offset delta" }));
        }
        let header = BatchHeader {
            position,
            base_offset: u64::from_be_bytes(bytes[0..8].try_into().expect("8")),
            last_offset_delta: last_offset_delta as u32,
            max_timestamp: i64::from_be_bytes(bytes[35..43].try_into().expect("8")),
            size_bytes: size,
            attributes: i16::from_be_bytes(bytes[21..23].try_into().expect("2")),
            producer_id: i64::from_be_bytes(bytes[43..51].try_into().expect("8")),
        };
        self.check.check(header.base_offset, header.last_offset_delta).map_err(|e| (position, e))?;
        debug_assert!(size >= LOG_OVERHEAD_BYTES);
        self.position += size as u64;
        Ok(Some(header))
    }
}
