//! A partition: a chain of segments, one writer, any number of readers.
//!
//! Invariants:
//! - Offsets are assigned consecutively by the single writer (appends are
//!   serialized by `writer`); a batch's offsets are never reused or changed
//!   once readers could see it.
//! - `high_watermark` (the next offset readers may ask for) is published only
//!   after the bytes holding every offset below it are visible in their
//!   segment; under [`FlushPolicy::Durable`] only after they are synced.
//! - Only the last segment is written to. A segment is synced before the next
//!   one is created, so after a crash only the last segment can be torn.
//! - `segments` is sorted by base offset; the low watermark is the first
//!   segment's base offset; the last (active) segment is never deleted.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::batch::{self, EncodeRecord, Record};
use crate::clock::Clock;
use crate::config::{FlushPolicy, TopicConfig};
use crate::error::{Error, Result};
use crate::segment::{self, OffsetEntry, OffsetRules, Segment, Tail, TimeEntry};
use crate::storage::{OpenMode, Storage, StorageFile};
use crate::transactions::{self, AbortedTxn, Transactions, TxnBatch};

/// Syncs of one partition that may run at once. Measured (`millpond bench
/// log`, ext4 on virtio): allowing 2 did not lower ack latency, because the
/// kernel serializes `fdatasync` on one inode; so one leader syncs while the
/// others wait for it (publication is `fetch_max`, so more would be safe).
const SYNCS_IN_FLIGHT_MAX: usize = 1;

/// The durable compaction bound of a partition (topics with
/// `compaction_bound_required`): 8 bytes big-endian offset, then the CRC-32C
/// of those 8 bytes. Absent or unreadable means 0 (compact nothing).
pub(crate) const CLEANABLE_BELOW_FILE: &str = "cleanable-below";
const CLEANABLE_BELOW_TMP_FILE: &str = "cleanable-below.tmp";
const CLEANABLE_BELOW_BYTES: usize = 12;

/// Where an appended batch landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    pub partition: u32,
    pub base_offset: u64,
    pub last_offset: u64,
}

/// Sizes and watermarks of one partition.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PartitionInfo {
    pub partition: u32,
    pub low_watermark: u64,
    pub high_watermark: u64,
    pub segments: usize,
    pub size_bytes: u64,
}

/// Why recovery cut the end of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CutReason {
    /// The first invalid batch had no valid batch after it: a write torn by
    /// a crash (or damage to the last batch, which looks the same).
    TornTail,
    /// A valid batch followed the invalid one (corruption of data that was
    /// written whole), and the log was opened with [`crate::Repair`] for
    /// this partition: everything from the invalid batch on was cut.
    Repair {
        /// The valid batch that followed: its base offset and byte position.
        next_valid_offset: u64,
        next_valid_position: u64,
    },
}

/// What recovery removed from the end of a partition's last segment, as
/// listed by [`crate::Log::recovery_report`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryCut {
    pub topic: String,
    pub partition: u32,
    /// The segment file that was cut.
    pub path: PathBuf,
    /// The byte the file was cut at (its new length).
    pub position: u64,
    /// The first offset cut: the next append gets it.
    pub first_offset: u64,
    /// Bytes removed.
    pub bytes: u64,
    /// Why the first removed batch was invalid.
    pub error: batch::BatchError,
    pub reason: CutReason,
}

impl std::fmt::Display for RecoveryCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = match &self.reason {
            CutReason::TornTail => "torn tail".to_owned(),
            CutReason::Repair { next_valid_offset, next_valid_position } => format!(
                "repair of a corrupt batch (a valid batch at offset {next_valid_offset}, byte {next_valid_position}, was cut too)"
            ),
        };
        write!(
            f,
            "recovery cut {}/{} at offset {} ({why}): {} bytes from byte {} of {} ({})",
            self.topic,
            self.partition,
            self.first_offset,
            self.bytes,
            self.position,
            self.path.display(),
            self.error
        )
    }
}

/// The writer's view of the active segment.
#[derive(Debug)]
struct Active {
    segment: Arc<Segment>,
    index_files: IndexAppender,
    written_bytes: u64,
    bytes_since_index: u64,
    /// Largest timestamp of everything written to this segment so far.
    max_timestamp: i64,
    first_batch_max_timestamp: Option<i64>,
}

#[derive(Debug)]
struct Writer {
    active: Active,
    next_offset: u64,
    unsynced_records: u64,
    buffer: Vec<u8>,
}

#[derive(Debug)]
pub(crate) struct Partition {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) topic: String,
    pub(crate) id: u32,
    pub(crate) dir: PathBuf,
    /// The topic's settings; all but the partition count, the cleanup
    /// policy and the compaction bound may change while the log is open
    /// ([`crate::Log::alter_topic_config`]).
    config: RwLock<TopicConfig>,
    /// The cleanup policy compacts (fixed for the partition's life).
    compacts: bool,
    clock: Arc<dyn Clock>,
    pub(crate) segments: RwLock<Arc<Vec<Arc<Segment>>>>,
    writer: Mutex<Writer>,
    /// Group commit: how many syncs are running now, and a condition
    /// variable waiting appenders sleep on.
    syncs_in_flight: Mutex<usize>,
    synced: Condvar,
    /// Everything below this offset is on disk.
    durable_offset: AtomicU64,
    last_sync_ms: AtomicU64,
    high_watermark: AtomicU64,
    /// Serializes retention and compaction.
    pub(crate) maintenance: Mutex<()>,
    waiters: AtomicUsize,
    wake: (Mutex<()>, Condvar),
    /// Set after an I/O failure that leaves the file in an unknown state.
    failed: AtomicBool,
    /// The cleaner only touches segments wholly below this offset (and builds
    /// its key map from them only): a writer that commits in steps (the
    /// dataflow's changelogs) keeps uncommitted records out of compaction.
    /// `u64::MAX` (no limit) when opened, unless the topic has
    /// `compaction_bound_required`: then it starts at the bound persisted in
    /// `cleanable-below` (0 if there is none).
    pub(crate) cleanable_below: AtomicU64,
    /// What `cleanable-below` holds (flagged topics only; changed under the
    /// maintenance lock).
    persisted_cleanable_below: AtomicU64,
    /// What recovery cut from the last segment when this handle opened.
    pub(crate) recovery_cut: Option<RecoveryCut>,
    /// Open transactions and aborted ranges (changed under the writer lock,
    /// before the high watermark covers the batch that changes them).
    transactions: Mutex<Transactions>,
    /// The `transactional` marker file exists.
    transactional: AtomicBool,
    /// Set when the topic is deleted: this handle may outlive the directory
    /// (a background pass or an appender may hold it) and must not touch a
    /// directory that a new topic of the same name may own.
    retired: AtomicBool,
}

/// Batches located in a segment file: the file, their position and length,
/// and the end of the offsets they cover (`FetchSlice::next_offset`).
pub(crate) type Located = (Arc<dyn StorageFile>, u64, u64, u64);

impl Partition {
    /// The topic's settings now.
    pub(crate) fn config(&self) -> TopicConfig {
        self.config.read().expect("config lock").clone()
    }

    /// The topic grew to `partitions` partitions.
    pub(crate) fn set_config_partitions(&self, partitions: u32) {
        let mut current = self.config.write().expect("config lock");
        assert!(partitions > current.partitions, "partitions are only added");
        current.partitions = partitions;
    }

    /// Takes new settings; the fixed ones must not change.
    pub(crate) fn set_config(&self, config: TopicConfig) {
        let mut current = self.config.write().expect("config lock");
        assert_eq!(current.partitions, config.partitions, "partitions change by adding partitions only");
        assert_eq!(current.cleanup_policy, config.cleanup_policy, "the cleanup policy is fixed");
        assert_eq!(current.compaction_bound_required, config.compaction_bound_required, "the bound rule is fixed");
        *current = config;
    }

    /// Opens (recovering) or creates the partition in `dir`. The last
    /// segment's torn tail is cut; a corrupt batch followed by a valid one is
    /// [`Error::CorruptSegment`] (nothing is changed) unless `repair`, which
    /// cuts there. Either cut is kept in `recovery_cut`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        storage: Arc<dyn Storage>,
        topic: &str,
        id: u32,
        dir: PathBuf,
        config: TopicConfig,
        clock: Arc<dyn Clock>,
        clean_shutdown: bool,
        repair: bool,
    ) -> Result<Partition> {
        let st = &*storage;
        if !st.exists(&dir) {
            st.create_dir_all(&dir).map_err(Error::io("creating partition directory", &dir))?;
            if let Some(parent) = dir.parent() {
                sync_dir(st, parent)?;
            }
        }
        let mut bases = recover_directory(st, &dir)?;
        let cleanable_below = if config.compaction_bound_required { read_cleanable_below(st, &dir)? } else { u64::MAX };
        if bases.is_empty() {
            Segment::create(st, &dir, 0)?;
            sync_dir(st, &dir)?;
            bases.push(0);
        }
        let mut segments = Vec::with_capacity(bases.len());
        let mut last_scan = None;
        let mut recovery_cut = None;
        for (i, &base) in bases.iter().enumerate() {
            let is_last = i + 1 == bases.len();
            let trust_index = !is_last || clean_shutdown;
            // Only closed segments of compacted topics may have offset gaps.
            let rules = OffsetRules {
                contiguous: is_last || !config.cleanup_policy.compacts(),
                limit: bases.get(i + 1).copied().unwrap_or(u64::MAX),
            };
            let tail = match (is_last, repair) {
                (false, _) => Tail::Keep,
                (true, false) => Tail::CutTorn,
                (true, true) => Tail::Repair,
            };
            let (segment, scan, damage) =
                Segment::open(st, &dir, base, trust_index, tail, config.index_interval_bytes, rules)?;
            if let Some(damage) = damage {
                if !damage.cut {
                    let (next_valid_position, next_valid_offset) =
                        damage.followed_by.expect("only corruption followed by a valid batch is kept");
                    return Err(Error::CorruptSegment {
                        topic: topic.to_owned(),
                        partition: id,
                        path: segment.path.clone(),
                        position: damage.position,
                        offset: damage.offset,
                        reason: Box::new(damage.error),
                        next_valid_offset,
                        next_valid_position,
                    });
                }
                recovery_cut = Some(RecoveryCut {
                    topic: topic.to_owned(),
                    partition: id,
                    path: segment.path.clone(),
                    position: damage.position,
                    first_offset: damage.offset,
                    bytes: damage.bytes,
                    error: damage.error,
                    reason: match damage.followed_by {
                        None => CutReason::TornTail,
                        Some((next_valid_position, next_valid_offset)) => {
                            CutReason::Repair { next_valid_offset, next_valid_position }
                        }
                    },
                });
            }
            if let Some(previous) = segments.last() {
                let previous: &Arc<Segment> = previous;
                assert!(previous.base_offset < base, "segment bases are sorted and distinct");
            }
            segments.push(Arc::new(segment));
            if is_last {
                last_scan = Some(scan);
            }
        }
        let scan = last_scan.expect("at least one segment");
        let active_segment = segments.last().expect("at least one segment").clone();
        // Every closed segment's offsets lie below the next base (checked by
        // the scans), so the active segment alone decides the next offset.
        let next_offset = active_segment.next_offset();
        assert!(next_offset >= active_segment.base_offset);
        let active = Active {
            index_files: IndexAppender::open(st, &dir, active_segment.base_offset)?,
            written_bytes: scan.valid_bytes,
            bytes_since_index: scan.bytes_since_index,
            max_timestamp: scan.max_timestamp,
            first_batch_max_timestamp: scan.first_batch_max_timestamp,
            segment: active_segment,
        };
        Ok(Partition {
            storage,
            topic: topic.to_owned(),
            id,
            dir,
            compacts: config.cleanup_policy.compacts(),
            config: RwLock::new(config),
            last_sync_ms: AtomicU64::new(clock.now_ms().max(0) as u64),
            clock,
            segments: RwLock::new(Arc::new(segments)),
            writer: Mutex::new(Writer { active, next_offset, unsynced_records: 0, buffer: Vec::new() }),
            syncs_in_flight: Mutex::new(0),
            synced: Condvar::new(),
            durable_offset: AtomicU64::new(next_offset),
            high_watermark: AtomicU64::new(next_offset),
            maintenance: Mutex::new(()),
            waiters: AtomicUsize::new(0),
            wake: (Mutex::new(()), Condvar::new()),
            failed: AtomicBool::new(false),
            cleanable_below: AtomicU64::new(cleanable_below),
            persisted_cleanable_below: AtomicU64::new(cleanable_below),
            recovery_cut,
            transactions: Mutex::new(Transactions::default()),
            transactional: AtomicBool::new(false),
            retired: AtomicBool::new(false),
        })
        .and_then(Partition::load_transactions)
    }

    /// Rebuilds the open transactions and aborted ranges from the batch
    /// headers, if the partition ever held a transactional batch.
    fn load_transactions(self) -> Result<Partition> {
        let marker = self.dir.join(transactions::MARKER_FILE);
        if !self.storage.exists(&marker) {
            return Ok(self);
        }
        self.transactional.store(true, Ordering::Release);
        let mut txns = Transactions::default();
        for segment in self.segments().iter() {
            segment
                .for_each_txn_batch(|batch| {
                    txns.apply(batch);
                })
                .map_err(|e| self.corrupt(segment, e))?;
        }
        *self.transactions.lock().expect("transactions lock") = txns;
        Ok(self)
    }

    /// Creates the `transactional` marker file durably, once, before the
    /// first transactional batch is written (the writer lock is held).
    fn mark_transactional(&self) -> Result<()> {
        if self.transactional.load(Ordering::Acquire) {
            return Ok(());
        }
        let path = self.dir.join(transactions::MARKER_FILE);
        let file = self.storage.open(&path, OpenMode::Truncate).map_err(Error::io("creating", &path))?;
        file.sync_all().map_err(Error::io("syncing", &path))?;
        sync_dir(&*self.storage, &self.dir)?;
        self.transactional.store(true, Ordering::Release);
        Ok(())
    }

    /// The last stable offset: the first offset of the earliest open
    /// transaction, or the high watermark (read first: a batch's effect on
    /// the transactions precedes the high watermark covering it).
    pub(crate) fn last_stable_offset(&self) -> u64 {
        let high = self.high_watermark();
        let first_open = self.transactions.lock().expect("transactions lock").first_open_offset();
        first_open.map_or(high, |first| first.min(high))
    }

    /// Open transactions here: producer id and first offset.
    pub(crate) fn open_transactions(&self) -> Vec<(i64, u64)> {
        self.transactions.lock().expect("transactions lock").open()
    }

    /// Aborted ranges that overlap `[from, to)`.
    pub(crate) fn aborted_in(&self, from: u64, to: u64) -> Vec<AbortedTxn> {
        self.transactions.lock().expect("transactions lock").aborted_in(from, to)
    }

    /// Writes `bytes` (one batch at the next offset) after applying what it
    /// does to the transactions, undone if the write fails.
    fn write_txn_locked(
        &self,
        writer: &mut Writer,
        bytes: &[u8],
        count: u64,
        max_timestamp: i64,
        txn: Option<TxnBatch>,
    ) -> Result<(AppendInfo, bool)> {
        let Some(txn) = txn else { return self.write_locked(writer, bytes, count, max_timestamp) };
        self.mark_transactional()?;
        let applied = self.transactions.lock().expect("transactions lock").apply(txn);
        let written = self.write_locked(writer, bytes, count, max_timestamp);
        if written.is_err() {
            self.transactions.lock().expect("transactions lock").undo(applied);
        }
        written
    }

    /// Appends a transaction marker (a control batch) for `marker`'s
    /// producer: it ends the producer's open transaction here (recording
    /// the aborted range for an abort). Only the transaction coordinator
    /// writes markers; one for a producer with nothing open here is
    /// written and changes nothing.
    pub(crate) fn write_control(&self, marker: batch::ControlMarker) -> Result<(AppendInfo, bool)> {
        self.check_healthy()?;
        let mut guard = self.writer.lock().expect("writer lock");
        let writer = &mut *guard;
        let offset = writer.next_offset;
        let mut buffer = std::mem::take(&mut writer.buffer);
        buffer.clear();
        batch::encode_control(&mut buffer, offset, marker);
        let txn = TxnBatch::Marker { producer_id: marker.producer_id, offset, control: marker.control };
        let written = self.write_txn_locked(writer, &buffer, 1, marker.timestamp_ms, Some(txn));
        writer.buffer = buffer;
        written
    }

    pub(crate) fn segments(&self) -> Arc<Vec<Arc<Segment>>> {
        self.segments.read().expect("segments lock").clone()
    }

    pub(crate) fn high_watermark(&self) -> u64 {
        self.high_watermark.load(Ordering::SeqCst)
    }

    pub(crate) fn low_watermark(&self) -> u64 {
        self.segments().first().map_or(0, |s| s.base_offset)
    }

    pub(crate) fn info(&self) -> PartitionInfo {
        let segments = self.segments();
        PartitionInfo {
            partition: self.id,
            low_watermark: segments.first().map_or(0, |s| s.base_offset),
            high_watermark: self.high_watermark(),
            segments: segments.len(),
            size_bytes: segments.iter().map(|s| s.visible_bytes()).sum(),
        }
    }

    /// Stops this handle from changing files, and waits for any append,
    /// retention or compaction in progress to finish. Called before the
    /// topic's directory is removed.
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
        drop(self.maintenance.lock().expect("maintenance lock"));
        drop(self.writer.lock().expect("writer lock"));
    }

    /// Sets the retired flag only (the caller holds the maintenance lock).
    pub(crate) fn mark_retired(&self) {
        self.retired.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    fn check_healthy(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::Io {
                action: "writing (an earlier I/O failure left this partition read-only until reopened)",
                path: self.dir.clone(),
                source: std::io::Error::other("partition failed"),
            });
        }
        Ok(())
    }

    /// Appends `records` as one batch with consecutive offsets. Returns once
    /// the flush policy's acknowledgement condition holds.
    pub(crate) fn append(&self, records: &[&Record]) -> Result<AppendInfo> {
        let records: Vec<EncodeRecord<'_>> = records.iter().map(|&record| record.into()).collect();
        self.append_encoded(&records)
    }

    /// [`Partition::append`] of borrowed records.
    pub(crate) fn append_encoded(&self, records: &[EncodeRecord<'_>]) -> Result<AppendInfo> {
        let (info, needs_sync) = self.write_encoded(records)?;
        if needs_sync {
            // Outside the writer lock, so other appenders can join this sync.
            self.sync_until(info.last_offset + 1)?;
        }
        Ok(info)
    }

    /// Writes `records` as one batch, without the sync the flush policy may
    /// call for (true: the caller must `sync_until` past the batch before
    /// acknowledging it; readers do not see it until then).
    pub(crate) fn write(&self, records: &[&Record]) -> Result<(AppendInfo, bool)> {
        let records: Vec<EncodeRecord<'_>> = records.iter().map(|&record| record.into()).collect();
        self.write_encoded(&records)
    }

    /// [`Partition::write`] of records borrowed from the caller (their
    /// offset deltas are assigned here, in order).
    pub(crate) fn write_encoded(&self, records: &[EncodeRecord<'_>]) -> Result<(AppendInfo, bool)> {
        if records.is_empty() {
            return Err(Error::EmptyBatch);
        }
        if self.compacts && records.iter().any(|r| r.key.is_none()) {
            return Err(Error::KeyRequired(self.topic.clone()));
        }
        self.check_healthy()?;
        let max_timestamp = records.iter().map(|r| r.timestamp_ms).max().expect("non-empty");
        let mut guard = self.writer.lock().expect("writer lock");
        let writer = &mut *guard;
        let base_offset = writer.next_offset;
        let mut buffer = std::mem::take(&mut writer.buffer);
        buffer.clear();
        batch::encode_records(&mut buffer, base_offset, records.iter().copied());
        let written = self.write_locked(writer, &buffer, records.len() as u64, max_timestamp);
        writer.buffer = buffer;
        written
    }

    /// Writes a batch a producer encoded (Kafka's Produce), as
    /// [`Partition::write`] does records: the batch is validated whole
    /// ([`batch::BatchView::parse`]: length, magic, CRC, every record), its
    /// offset deltas must be 0, 1, … with no gap (as Kafka asks of a v2
    /// batch from a client), then its base offset becomes the partition's
    /// next offset and its partition leader epoch 0. Those fields lie
    /// outside the CRC; every other byte is stored as produced.
    pub(crate) fn write_produced(&self, bytes: &mut [u8]) -> Result<(AppendInfo, bool)> {
        let invalid = |reason| Error::InvalidBatch { topic: self.topic.clone(), partition: self.id, reason };
        let (count, max_timestamp, transactional_producer) = {
            let view = batch::BatchView::parse(bytes).map_err(invalid)?;
            if view.size_bytes() != bytes.len() {
                return Err(invalid(batch::BatchError::BadRecord { index: 0, reason: "bytes after the batch" }));
            }
            // A compressed batch is checked decompressed; it is stored as produced.
            let normalized = batch::normalized(bytes).map_err(invalid)?;
            let view = batch::BatchView::from_validated(&normalized);
            check_produced(&view).map_err(invalid)?;
            if self.compacts && view.records().any(|r| r.key.is_none()) {
                return Err(Error::KeyRequired(self.topic.clone()));
            }
            let producer = view.is_transactional().then_some(view.producer_id());
            (view.record_count() as u64, view.max_timestamp(), producer)
        };
        self.check_healthy()?;
        let mut guard = self.writer.lock().expect("writer lock");
        let writer = &mut *guard;
        let base_offset = writer.next_offset;
        batch::set_base_offset(bytes, base_offset);
        debug_assert!(batch::BatchView::parse(bytes).is_ok(), "the rewritten header keeps the batch valid");
        let txn = transactional_producer.map(|producer_id| TxnBatch::Data { producer_id, base_offset });
        self.write_txn_locked(writer, bytes, count, max_timestamp, txn)
    }

    /// The part of an append under the writer lock: `bytes` is one batch
    /// of `count` records whose base offset is the partition's next offset.
    fn write_locked(
        &self,
        writer: &mut Writer,
        bytes: &[u8],
        count: u64,
        max_timestamp: i64,
    ) -> Result<(AppendInfo, bool)> {
        if self.is_retired() {
            return Err(Error::UnknownTopic(self.topic.clone()));
        }
        let base_offset = writer.next_offset;
        debug_assert_eq!(batch::peek_base_offset(bytes), Some(base_offset));
        let config = self.config();
        if bytes.len() as u64 > config.max_batch_bytes {
            return Err(Error::BatchTooLarge { size_bytes: bytes.len(), max_bytes: config.max_batch_bytes as usize });
        }
        let last_offset = base_offset + count - 1;
        self.maybe_roll(writer, bytes.len() as u64, last_offset, max_timestamp)?;
        self.write_batch(writer, bytes, base_offset, last_offset, max_timestamp)?;
        let needs_sync = match config.flush {
            FlushPolicy::Durable => true,
            FlushPolicy::Interval { records: records_max, .. } => {
                writer.active.segment.publish(writer.active.written_bytes);
                self.publish_high_watermark(last_offset + 1);
                writer.unsynced_records += count;
                writer.unsynced_records >= records_max
            }
        };
        Ok((AppendInfo { partition: self.id, base_offset, last_offset }, needs_sync))
    }

    fn write_batch(
        &self,
        writer: &mut Writer,
        bytes: &[u8],
        base_offset: u64,
        last_offset: u64,
        max_timestamp: i64,
    ) -> Result<()> {
        let active = &mut writer.active;
        let segment = &active.segment;
        let position = active.written_bytes;
        debug_assert_eq!(batch::peek_base_offset(bytes), Some(base_offset));
        if let Err(source) = segment.file.write_all_at(bytes, position) {
            // Undo a partial write so the file ends on a batch boundary.
            if segment.file.set_len(position).is_err() {
                self.failed.store(true, Ordering::Release);
            }
            return Err(Error::Io { action: "appending to", path: segment.path.clone(), source });
        }
        if active.bytes_since_index >= self.config().index_interval_bytes && position > 0 {
            let relative_offset =
                u32::try_from(base_offset - segment.base_offset).expect("roll keeps relative offsets in u32");
            let position = u32::try_from(position).expect("segment_bytes keeps positions in u32");
            let mut indexes = segment.indexes.write().expect("index lock");
            indexes.offsets.push(OffsetEntry { relative_offset, position });
            indexes.times.push(TimeEntry { max_timestamp_before: active.max_timestamp, relative_offset });
            drop(indexes);
            // The batch is already written: an index failure must not fail
            // the append. The file is a cache; a missing entry only makes it
            // sparser, and the in-memory copy is written whole at close.
            active.index_files.append(relative_offset, position, active.max_timestamp);
            active.bytes_since_index = 0;
        }
        active.bytes_since_index += bytes.len() as u64;
        active.written_bytes += bytes.len() as u64;
        active.max_timestamp = active.max_timestamp.max(max_timestamp);
        active.first_batch_max_timestamp.get_or_insert(max_timestamp);
        segment.note_written(last_offset + 1, max_timestamp);
        writer.next_offset = last_offset + 1;
        Ok(())
    }

    /// Starts a new segment if the next batch does not fit the active one:
    /// by size, by offset range, or by time. Time is measured as Kafka does:
    /// from the first batch's timestamp to the incoming batch's, so data with
    /// old timestamps does not roll on every append.
    fn maybe_roll(&self, writer: &mut Writer, batch_bytes: u64, last_offset: u64, batch_timestamp: i64) -> Result<()> {
        let active = &writer.active;
        if active.written_bytes == 0 {
            return Ok(());
        }
        let config = self.config();
        let too_big = active.written_bytes + batch_bytes > config.segment_bytes;
        let too_old = active
            .first_batch_max_timestamp
            .is_some_and(|t| batch_timestamp.saturating_sub(t) >= config.segment_ms as i64);
        let offsets_overflow = last_offset - active.segment.base_offset > u64::from(u32::MAX);
        if too_big || too_old || offsets_overflow {
            self.roll(writer)?;
        }
        Ok(())
    }

    /// Closes the active segment and starts the next. Every fallible step
    /// comes before any state changes, so a failed roll leaves the partition
    /// as it was (and a stray new file is removed), ready to retry.
    fn roll(&self, writer: &mut Writer) -> Result<()> {
        let old = writer.active.segment.clone();
        old.file.sync_data().map_err(|source| {
            self.failed.store(true, Ordering::Release);
            Error::Io { action: "syncing", path: old.path.clone(), source }
        })?;
        // Synced: publishing it is right whether or not the roll goes on.
        old.publish(writer.active.written_bytes);
        self.durable_offset.fetch_max(writer.next_offset, Ordering::AcqRel);
        self.publish_high_watermark(writer.next_offset);
        let st = &*self.storage;
        old.write_indexes(st, &self.dir)?;
        let base = writer.next_offset;
        let created = Segment::create(st, &self.dir, base).and_then(|segment| {
            let index_files = IndexAppender::open(st, &self.dir, base)?;
            sync_dir(st, &self.dir)?;
            Ok((segment, index_files))
        });
        let (segment, index_files) = match created {
            Ok(created) => created,
            Err(error) => {
                let _ = delete_segment_files(st, &self.dir, base); // best effort; recovery ignores no-op
                return Err(error);
            }
        };
        let segment = Arc::new(segment);
        old.close_at(base);
        {
            let mut segments = self.segments.write().expect("segments lock");
            let mut list = Vec::clone(&segments);
            list.push(segment.clone());
            *segments = Arc::new(list);
        }
        writer.active = Active {
            index_files,
            segment,
            written_bytes: 0,
            bytes_since_index: 0,
            max_timestamp: i64::MIN,
            first_batch_max_timestamp: None,
        };
        writer.unsynced_records = 0;
        Ok(())
    }

    /// Makes every offset below `target` durable, sharing syncs with the
    /// appenders waiting at the same time (group commit). An appender that
    /// is not covered by a finished sync starts one, unless
    /// `SYNCS_IN_FLIGHT_MAX` are running: then it sleeps until one ends and
    /// looks again. Each sync covers everything written before it started,
    /// so one sync acknowledges every appender that was waiting for it.
    pub(crate) fn sync_until(&self, target: u64) -> Result<()> {
        if self.durable_offset.load(Ordering::Acquire) >= target {
            return Ok(());
        }
        let mut in_flight = self.syncs_in_flight.lock().expect("sync lock");
        loop {
            if self.durable_offset.load(Ordering::Acquire) >= target {
                return Ok(()); // a sync covered us
            }
            self.check_healthy()?; // a failed sync is not retried
            if *in_flight >= SYNCS_IN_FLIGHT_MAX {
                in_flight = self.synced.wait(in_flight).expect("sync lock");
                continue;
            }
            *in_flight += 1;
            drop(in_flight);
            let result = self.sync_now();
            in_flight = self.syncs_in_flight.lock().expect("sync lock");
            *in_flight -= 1;
            self.synced.notify_all();
            result?;
        }
    }

    /// Syncs everything written so far and publishes it.
    fn sync_now(&self) -> Result<()> {
        let (segment, bytes, next_offset) = {
            let mut writer = self.writer.lock().expect("writer lock");
            writer.unsynced_records = 0;
            (writer.active.segment.clone(), writer.active.written_bytes, writer.next_offset)
        };
        if let Err(source) = segment.file.sync_data() {
            // After a failed fsync the page cache state is unknown; stop writing.
            self.failed.store(true, Ordering::Release);
            return Err(Error::Io { action: "syncing", path: segment.path.clone(), source });
        }
        self.last_sync_ms.store(self.clock.now_ms().max(0) as u64, Ordering::Release);
        segment.publish(bytes);
        self.durable_offset.fetch_max(next_offset, Ordering::AcqRel);
        self.publish_high_watermark(next_offset);
        Ok(())
    }

    /// Syncs unsynced data if the interval flush policy says it is due (or
    /// always, with `force`).
    pub(crate) fn flush(&self, force: bool) -> Result<()> {
        let next = self.writer.lock().expect("writer lock").next_offset;
        if self.durable_offset.load(Ordering::Acquire) >= next {
            return Ok(());
        }
        let due = match self.config().flush {
            FlushPolicy::Durable => true,
            FlushPolicy::Interval { interval_ms, .. } => {
                let now = self.clock.now_ms().max(0) as u64;
                now.saturating_sub(self.last_sync_ms.load(Ordering::Acquire)) >= interval_ms
            }
        };
        if force || due { self.sync_until(next) } else { Ok(()) }
    }

    /// Flushes and writes index files, for a clean shutdown.
    pub(crate) fn close(&self) -> Result<()> {
        self.flush(true)?;
        let writer = self.writer.lock().expect("writer lock");
        // Written whole and fsynced.
        writer.active.segment.write_indexes(&*self.storage, &self.dir)?;
        Ok(())
    }

    fn publish_high_watermark(&self, next_offset: u64) {
        self.high_watermark.fetch_max(next_offset, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.wake.0.lock().expect("wake lock");
            self.wake.1.notify_all();
        }
    }

    /// Waits until the last stable offset (the high watermark, unless a
    /// transaction is open) is above `offset` or `timeout` passes. Returns
    /// whether committed data at `offset` is available.
    pub(crate) fn wait_for(&self, offset: u64, timeout: Duration) -> bool {
        if self.last_stable_offset() > offset {
            return true;
        }
        // Far-future timeouts (Duration::MAX) wait in slices instead of overflowing.
        let deadline = Instant::now().checked_add(timeout);
        // SeqCst pairs with publish_high_watermark: either it sees this waiter
        // or this waiter sees its new high watermark (no lost wake-up).
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let mut guard = self.wake.0.lock().expect("wake lock");
        let available = loop {
            if self.last_stable_offset() > offset {
                break true;
            }
            let now = Instant::now();
            let wait = match deadline {
                Some(deadline) if now >= deadline => break false,
                Some(deadline) => deadline - now,
                None => Duration::from_secs(3600),
            };
            guard = self.wake.1.wait_timeout(guard, wait).expect("wake lock").0;
        };
        drop(guard);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        available
    }

    fn out_of_range(&self, offset: u64, low: u64, high: u64) -> Error {
        Error::OffsetOutOfRange { topic: self.topic.clone(), partition: self.id, offset, low, high }
    }

    fn corrupt(&self, segment: &Segment, (offset, position, reason): (u64, u64, batch::BatchError)) -> Error {
        Error::CorruptBatch {
            topic: self.topic.clone(),
            partition: self.id,
            offset,
            segment: segment.path.clone(),
            position,
            reason,
        }
    }

    /// Whole, validated batches from the first one holding an offset >=
    /// `offset`, up to about `max_bytes` (always at least one batch).
    /// Returns the bytes and the high watermark read before the lookup.
    pub(crate) fn read(&self, offset: u64, max_bytes: usize) -> Result<(Vec<u8>, u64, u64)> {
        let (bytes, high, low) = self.in_segments(offset, |segment, high| {
            let Some(mut bytes) = segment.read(offset, max_bytes)? else { return Ok(None) };
            // Bytes become visible just before the high watermark covers
            // them. Return only batches below the `high` read first, so a
            // fetch's `next_offset` never passes the high watermark it
            // reports (the next fetch there would be out of range).
            let mut end = 0;
            while end < bytes.len() {
                let batch = batch::BatchView::from_validated(&bytes[end..]);
                if batch.base_offset() >= high {
                    break;
                }
                end += batch.size_bytes();
            }
            bytes.truncate(end);
            Ok(Some(bytes))
        })?;
        Ok((bytes.unwrap_or_default(), high, low))
    }

    /// [`Partition::read`] for a read_committed reader: no batch reaching
    /// the last stable offset (read before the batches), and the aborted
    /// ranges that overlap what is returned. Returns the bytes, the last
    /// stable offset, the low watermark and those ranges.
    pub(crate) fn read_committed(&self, offset: u64, max_bytes: usize) -> Result<(Vec<u8>, u64, u64, Vec<AbortedTxn>)> {
        let stable = self.last_stable_offset();
        let (mut bytes, high, low) = self.read(offset, max_bytes)?;
        debug_assert!(stable <= high, "the stable offset never passes the high watermark");
        let mut end = 0;
        while end < bytes.len() {
            let batch = batch::BatchView::from_validated(&bytes[end..]);
            if batch.last_offset() >= stable {
                break;
            }
            end += batch.size_bytes();
        }
        bytes.truncate(end);
        let aborted = match batch::Batches::new(&bytes).last() {
            Some(last) if self.transactional.load(Ordering::Acquire) => self.aborted_in(offset, last.last_offset() + 1),
            _ => Vec::new(),
        };
        Ok((bytes, stable, low, aborted))
    }

    /// Where [`Partition::read`]'s batches lie in their segment file, none
    /// reaching `end_offset` (nor the high watermark): the file, the
    /// position and the length, and the high and low watermarks.
    pub(crate) fn locate(&self, offset: u64, max_bytes: usize, end_offset: u64) -> Result<(Option<Located>, u64, u64)> {
        let (found, high, low) = self.in_segments(offset, |segment, high| {
            let found = segment.locate(offset, max_bytes, end_offset.min(high))?;
            Ok(found.map(|(position, len, next)| (segment.file.clone(), position, len, next)))
        })?;
        Ok((found.filter(|(_, _, len, _)| *len > 0), high, low))
    }

    /// The first segment's answer for `offset` from the segment holding it
    /// on (`None`: nothing at or after `offset` there, a compaction gap),
    /// with the high watermark read first and the low watermark. An offset
    /// outside them is [`Error::OffsetOutOfRange`]; at the high watermark
    /// the answer is `None`.
    fn in_segments<T>(
        &self,
        offset: u64,
        mut answer: impl FnMut(&Segment, u64) -> std::result::Result<Option<T>, (u64, u64, batch::BatchError)>,
    ) -> Result<(Option<T>, u64, u64)> {
        let high = self.high_watermark();
        let segments = self.segments();
        let low = segments.first().map_or(0, |s| s.base_offset);
        if offset < low || offset > high {
            return Err(self.out_of_range(offset, low, high));
        }
        if offset == high {
            return Ok((None, high, low));
        }
        let first = segments.partition_point(|s| s.base_offset <= offset).saturating_sub(1);
        for (i, segment) in segments.iter().enumerate().skip(first) {
            if segment.base_offset >= high {
                break;
            }
            // Moving past a segment that ended early: in a topic that was never
            // compacted every offset exists, so skipping some is data loss.
            if i > first && offset < segment.base_offset && !self.compacts {
                return Err(Error::MissingOffsets {
                    topic: self.topic.clone(),
                    partition: self.id,
                    from: offset,
                    to: segment.base_offset,
                });
            }
            match answer(segment, high) {
                Ok(Some(found)) => return Ok((Some(found), high, low)),
                Ok(None) => continue,
                Err(error) => return Err(self.corrupt(segment, error)),
            }
        }
        Ok((None, high, low))
    }

    /// The first offset whose record timestamp is >= `timestamp_ms`, or the
    /// high watermark if there is none.
    pub(crate) fn offset_for_time(&self, timestamp_ms: i64) -> Result<u64> {
        let high = self.high_watermark();
        for segment in self.segments().iter() {
            match segment.offset_for_time(timestamp_ms) {
                Ok(Some(offset)) if offset < high => return Ok(offset),
                Ok(Some(_)) => break,
                Ok(None) => {}
                Err(error) => return Err(self.corrupt(segment, error)),
            }
        }
        Ok(high)
    }

    /// Deletes closed segments past `retention_ms` (by their newest
    /// timestamp) or beyond `retention_bytes`, oldest first. Returns how many.
    pub(crate) fn apply_retention(&self) -> Result<usize> {
        if !self.config().cleanup_policy.deletes() {
            return Ok(0);
        }
        let _maintenance = self.maintenance.lock().expect("maintenance lock");
        if self.is_retired() {
            return Ok(0);
        }
        let segments = self.segments();
        let closed = &segments[..segments.len() - 1];
        let now = self.clock.now_ms();
        let config = self.config();
        let by_time = match config.retention_ms {
            Some(ms) => closed.iter().take_while(|s| s.max_timestamp() < now.saturating_sub(ms as i64)).count(),
            None => 0,
        };
        let by_size = match config.retention_bytes {
            Some(limit) => {
                let mut excess = segments.iter().map(|s| s.visible_bytes()).sum::<u64>().saturating_sub(limit);
                closed
                    .iter()
                    .take_while(|s| {
                        // Only while the partition exceeds the limit: an empty
                        // segment (all compacted away) is no excess.
                        let fits = excess > 0 && excess >= s.visible_bytes();
                        excess = excess.saturating_sub(s.visible_bytes());
                        fits
                    })
                    .count()
            }
            None => 0,
        };
        let count = by_time.max(by_size);
        if count > 0 {
            self.remove_segments(count)?;
        }
        Ok(count)
    }

    /// Drops the first `count` segments: from the list (readers holding them
    /// keep reading their open files), then from disk, oldest first.
    fn remove_segments(&self, count: usize) -> Result<()> {
        let removed: Vec<Arc<Segment>> = {
            let mut segments = self.segments.write().expect("segments lock");
            assert!(count < segments.len(), "the active segment is never deleted");
            let mut list = Vec::clone(&segments);
            let removed = list.drain(..count).collect();
            *segments = Arc::new(list);
            removed
        };
        for segment in removed {
            delete_segment_files(&*self.storage, &self.dir, segment.base_offset)?;
        }
        self.transactions.lock().expect("transactions lock").forget_below(self.low_watermark());
        sync_dir(&*self.storage, &self.dir)
    }

    /// Replaces the segments with base offsets in `[first, end)` by `segment`
    /// (whose base offset is `first`). Used by the cleaner after its swap.
    pub(crate) fn replace_segments(&self, first: u64, end: u64, segment: Arc<Segment>) {
        let mut segments = self.segments.write().expect("segments lock");
        let mut list: Vec<Arc<Segment>> =
            segments.iter().filter(|s| s.base_offset < first || s.base_offset >= end).cloned().collect();
        let at = list.partition_point(|s| s.base_offset < first);
        list.insert(at, segment);
        assert!(list.windows(2).all(|w| w[0].base_offset < w[1].base_offset), "segments stay sorted");
        *segments = Arc::new(list);
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Sets the compaction bound (see [`crate::Log::set_cleanable_below`]).
    /// With `compaction_bound_required` it is also persisted, only when it
    /// differs from what is on disk: a larger bound without any fsync (if a
    /// crash loses it, the older, smaller bound or 0 comes back: safe), a
    /// smaller one durably (file fsync, rename, directory fsync) and in
    /// memory first, so no process ever compacts above it again.
    pub(crate) fn set_cleanable_below(&self, offset: u64) -> Result<()> {
        // Under the maintenance lock: a pass in progress finishes first.
        let _maintenance = self.maintenance.lock().expect("maintenance lock");
        if !self.config().compaction_bound_required {
            self.cleanable_below.store(offset, Ordering::Release);
            return Ok(());
        }
        let persisted = self.persisted_cleanable_below.load(Ordering::Acquire);
        if offset < persisted {
            self.cleanable_below.store(offset, Ordering::Release);
            write_cleanable_below(&*self.storage, &self.dir, offset, true)?;
        } else if offset > persisted {
            write_cleanable_below(&*self.storage, &self.dir, offset, false)?;
            self.cleanable_below.store(offset, Ordering::Release);
        } else {
            self.cleanable_below.store(offset, Ordering::Release);
            return Ok(());
        }
        self.persisted_cleanable_below.store(offset, Ordering::Release);
        Ok(())
    }

    pub(crate) fn cleanable_below(&self) -> u64 {
        self.cleanable_below.load(Ordering::Acquire)
    }
}

/// The persisted compaction bound in `dir`: 0 when the file is absent, the
/// wrong size or fails its CRC (a write that a crash tore or lost: falling
/// back to "compact nothing" is always safe). A leftover temp file is removed.
fn read_cleanable_below(storage: &dyn Storage, dir: &Path) -> Result<u64> {
    let tmp = dir.join(CLEANABLE_BELOW_TMP_FILE);
    match storage.remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io("removing", &tmp)(e)),
        _ => {}
    }
    let path = dir.join(CLEANABLE_BELOW_FILE);
    let bytes = match storage.read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io("reading", &path)(e)),
    };
    if bytes.len() != CLEANABLE_BELOW_BYTES {
        return Ok(0);
    }
    let (offset, crc) = bytes.split_at(8);
    if crc32c::crc32c(offset).to_be_bytes() != crc {
        return Ok(0);
    }
    Ok(u64::from_be_bytes(offset.try_into().expect("8 bytes")))
}

/// Replaces `cleanable-below` in `dir` by `offset` (temp file, rename); with
/// `durable`, the temp file is fsynced before the rename and the directory
/// after it.
fn write_cleanable_below(storage: &dyn Storage, dir: &Path, offset: u64, durable: bool) -> Result<()> {
    let tmp = dir.join(CLEANABLE_BELOW_TMP_FILE);
    let path = dir.join(CLEANABLE_BELOW_FILE);
    let mut bytes = [0u8; CLEANABLE_BELOW_BYTES];
    bytes[..8].copy_from_slice(&offset.to_be_bytes());
    let crc = crc32c::crc32c(&bytes[..8]);
    bytes[8..].copy_from_slice(&crc.to_be_bytes());
    crate::storage::write_file(storage, &tmp, &bytes, durable).map_err(Error::io("writing", &tmp))?;
    storage.rename(&tmp, &path).map_err(Error::io("replacing", &path))?;
    if durable {
        sync_dir(storage, dir)?;
    }
    Ok(())
}

/// Open append handles on the active segment's two index files. Index files
/// are a cache (rebuilt on recovery), so entries are not synced here.
#[derive(Debug)]
struct IndexAppender {
    offsets: Arc<dyn StorageFile>,
    times: Arc<dyn StorageFile>,
}

impl IndexAppender {
    fn open(storage: &dyn Storage, dir: &Path, base_offset: u64) -> Result<IndexAppender> {
        let open = |path: PathBuf| storage.open(&path, OpenMode::Append).map_err(Error::io("opening index", &path));
        Ok(IndexAppender {
            offsets: open(segment::offset_index_path(dir, base_offset))?,
            times: open(segment::time_index_path(dir, base_offset))?,
        })
    }

    fn append(&mut self, relative_offset: u32, position: u32, max_timestamp_before: i64) {
        let mut offset_entry = [0u8; segment::OFFSET_ENTRY_BYTES];
        offset_entry[..4].copy_from_slice(&relative_offset.to_be_bytes());
        offset_entry[4..].copy_from_slice(&position.to_be_bytes());
        let mut time_entry = [0u8; segment::TIME_ENTRY_BYTES];
        time_entry[..8].copy_from_slice(&max_timestamp_before.to_be_bytes());
        time_entry[8..].copy_from_slice(&relative_offset.to_be_bytes());
        // Both or neither: a time entry without its offset entry would make
        // the pair inconsistent (recovery would rebuild, but need not).
        if self.offsets.append(&offset_entry).is_ok() {
            let _ = self.times.append(&time_entry);
        }
    }
}

/// What Kafka asks of a batch a client produced, beyond it being valid: at
/// least one record, offset deltas 0, 1, …, count − 1, and none of what
/// only a broker writes (control batches). `view` is uncompressed.
fn check_produced(view: &batch::BatchView<'_>) -> std::result::Result<(), batch::BatchError> {
    if view.is_control() {
        return Err(batch::BatchError::UnsupportedAttributes { attributes: view.attributes() });
    }
    if view.is_transactional() && view.producer_id() < 0 {
        return Err(batch::BatchError::BadRecord { index: 0, reason: "a transactional batch without a producer id" });
    }
    let count = view.record_count();
    if count == 0 || view.last_offset_delta() != count - 1 {
        return Err(batch::BatchError::BadRecord { index: 0, reason: "record count and last offset delta disagree" });
    }
    for (index, record) in view.records().enumerate() {
        if record.offset - view.base_offset() != index as u64 {
            return Err(batch::BatchError::BadRecord { index, reason: "offset deltas are not 0, 1, ..." });
        }
    }
    Ok(())
}

pub(crate) fn delete_segment_files(storage: &dyn Storage, dir: &Path, base_offset: u64) -> Result<()> {
    // The .log goes first: without it the index files are orphans that
    // recovery removes, never a segment without data.
    for path in [
        segment::log_path(dir, base_offset),
        segment::offset_index_path(dir, base_offset),
        segment::time_index_path(dir, base_offset),
    ] {
        match storage.remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(Error::Io { action: "deleting", path, source }),
        }
    }
    Ok(())
}

pub(crate) fn sync_dir(storage: &dyn Storage, dir: &Path) -> Result<()> {
    storage.sync_dir(dir).map_err(Error::io("syncing directory", dir))
}

/// Finishes or discards what a crash interrupted (cleaner swaps, partial
/// files) and returns the base offsets of the segments, sorted.
fn recover_directory(storage: &dyn Storage, dir: &Path) -> Result<Vec<u64>> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    let mut swaps = Vec::new();
    for name in storage.list_dir(dir).map_err(Error::io("listing", dir))? {
        let path = dir.join(&name);
        if name.ends_with(".cleaned") {
            storage.remove_file(&path).map_err(Error::io("removing partial cleaner output", &path))?;
        } else if let Some(stem) = name.strip_suffix(".swap") {
            swaps.push((
                crate::segment::parse_swap_name(stem).ok_or_else(|| Error::BadMetadata {
                    path: path.clone(),
                    reason: "unrecognized swap file name".into(),
                })?,
                path,
            ));
        } else if let Some(stem) = name.strip_suffix(".log") {
            logs.push(parse_base(stem, &path)?);
        } else if let Some(stem) = name.strip_suffix(".index").or_else(|| name.strip_suffix(".timeindex")) {
            indexes.push((parse_base(stem, &path)?, path));
        }
    }
    // The cleaner finishes one swap before it starts the next, so two swaps
    // can only overlap if something else wrote here: refuse to guess.
    swaps.sort_unstable_by_key(|&((first, _), _)| first);
    if let Some(pair) = swaps.windows(2).find(|w| w[0].0.1 > w[1].0.0) {
        return Err(Error::BadMetadata {
            path: pair[1].1.clone(),
            reason: format!("cleaner swap overlaps {}", pair[0].1.display()),
        });
    }
    for ((first, end), swap_path) in swaps {
        // The swap file is the cleaner's commit point: finish the swap.
        for &base in logs.iter().filter(|&&b| b >= first && b < end) {
            delete_segment_files(storage, dir, base)?;
        }
        logs.retain(|&b| b < first || b >= end);
        sync_dir(storage, dir)?; // deletions durable before the rename (see cleaner.rs)
        let target = segment::log_path(dir, first);
        storage.rename(&swap_path, &target).map_err(Error::io("completing cleaner swap", &swap_path))?;
        for path in [segment::offset_index_path(dir, first), segment::time_index_path(dir, first)] {
            let _ = storage.remove_file(&path); // rebuilt when the segment opens
        }
        logs.push(first);
    }
    logs.sort_unstable();
    for (base, path) in indexes {
        if logs.binary_search(&base).is_err() {
            match storage.remove_file(&path) {
                // Already gone: a completed swap deleted its old segments' indexes.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                result => result.map_err(Error::io("removing orphan index", &path))?,
            }
        }
    }
    sync_dir(storage, dir)?;
    Ok(logs)
}

fn parse_base(stem: &str, path: &Path) -> Result<u64> {
    segment::parse_offset_name(stem).ok_or_else(|| Error::BadMetadata {
        path: path.to_path_buf(),
        reason: "file name is not a base offset (20 digits, at most i64::MAX)".into(),
    })
}

/// Where a truncation to `offset` cuts: the base of the segment that is
/// kept last, the byte length it keeps, and the bases of the segments after
/// it (to delete).
#[derive(Debug)]
pub(crate) struct TruncationPlan {
    keep_base: u64,
    keep_bytes: u64,
    delete_bases: Vec<u64>,
}

/// Checks that `offset` is a batch boundary between the first segment's base
/// and the partition's end, and says where to cut. Reads only; the error is
/// the reason, for the caller to wrap.
pub(crate) fn plan_truncation(
    storage: &dyn Storage,
    dir: &Path,
    offset: u64,
) -> std::result::Result<TruncationPlan, String> {
    let bases = list_segment_bases(storage, dir).map_err(|e| e.to_string())?;
    let keep = bases.iter().rposition(|&b| b <= offset).ok_or("it is below the first segment")?;
    let base = bases[keep];
    let path = segment::log_path(dir, base);
    let bytes = storage.read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut batches = crate::batch::Batches::new(&bytes);
    let mut start = 0;
    let mut next = base;
    while let Some(batch) = batches.next() {
        if batch.base_offset() >= offset {
            return Ok(TruncationPlan {
                keep_base: base,
                keep_bytes: start as u64,
                delete_bases: bases[keep + 1..].to_vec(),
            });
        }
        if batch.last_offset() >= offset {
            return Err(format!("batch {}..={} spans it", batch.base_offset(), batch.last_offset()));
        }
        start = batches.position();
        next = batch.last_offset() + 1;
    }
    // Every valid batch of the kept segment lies below `offset`.
    if next != offset {
        return Err(format!("the segment at base {base} ends at offset {next}"));
    }
    Ok(TruncationPlan { keep_base: base, keep_bytes: start as u64, delete_bases: bases[keep + 1..].to_vec() })
}

/// The bases of the `.log` files in a partition directory, sorted.
fn list_segment_bases(storage: &dyn Storage, dir: &Path) -> Result<Vec<u64>> {
    let mut bases = Vec::new();
    for name in storage.list_dir(dir).map_err(Error::io("listing", dir))? {
        if let Some(base) = name.strip_suffix(".log").and_then(segment::parse_offset_name) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// Applies a truncation plan: segments above the cut are deleted (the
/// highest first, so a crash part way leaves a contiguous prefix), then the
/// kept segment is cut and its indexes emptied (the reopen rebuilds them).
/// No handle may be open on the directory.
pub(crate) fn truncate_directory(storage: &dyn Storage, dir: &Path, plan: &TruncationPlan) -> Result<()> {
    for &base in plan.delete_bases.iter().rev() {
        delete_segment_files(storage, dir, base)?;
    }
    let path = segment::log_path(dir, plan.keep_base);
    let file = storage.open(&path, OpenMode::Existing).map_err(Error::io("opening segment", &path))?;
    file.set_len(plan.keep_bytes).and_then(|()| file.sync_all()).map_err(Error::io("truncating segment", &path))?;
    for index in [segment::offset_index_path(dir, plan.keep_base), segment::time_index_path(dir, plan.keep_base)] {
        crate::storage::write_file(storage, &index, &[], true).map_err(Error::io("emptying index", &index))?;
    }
    sync_dir(storage, dir)
}
