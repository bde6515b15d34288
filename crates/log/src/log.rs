//! The log: a data directory of topics, each a fixed set of partitions.
//!
//! Layout (see `docs/log.md`):
//! ```text
//! DATA_DIR/lock                         exclusive lock of the opening process
//! DATA_DIR/clean-shutdown               present only after a clean close
//! DATA_DIR/topics/NAME/meta.json        topic name, id and config (versioned JSON, see `meta`)
//! DATA_DIR/topics/NAME/P/               partition P's segments
//! ```
//! Invariants: a topic directory exists under its name only once complete
//! (it is built under `.tmp-NAME` and renamed); a deleted topic is renamed to
//! `.deleted-NAME-…` first, so recovery never sees half a topic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::batch::{self, BatchView, ControlMarker, EncodeRecord, Record, RecordView};
use crate::cleaner::{self, CompactionStats};
use crate::clock::{Clock, SystemClock};
use crate::config::TopicConfig;
use crate::error::{Error, Result};
use crate::meta::{self, TopicId};
use crate::offsets::{self, GroupOffsets};
use crate::partition::{self, AppendInfo, Partition, PartitionInfo, RecoveryCut};
use crate::partitioner;
use crate::storage::{self, LockGuard, RealStorage, Storage};
use crate::transactions::AbortedTxn;

/// The internal compacted topic holding committed consumer offsets.
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Longest topic name (Kafka's limit).
pub(crate) const TOPIC_NAME_BYTES_MAX: usize = 249;
/// Longest consumer group name (stored with a u16 length).
pub(crate) const GROUP_NAME_BYTES_MAX: usize = 1024;

/// How a [`Log`] runs.
#[derive(Debug, Clone)]
pub struct LogOptions {
    pub clock: Arc<dyn Clock>,
    /// Run a background thread for interval flushes, retention and compaction.
    pub background: bool,
    /// How often the background thread applies retention and compaction.
    pub maintenance_interval_ms: u64,
    /// How often the background thread checks interval flush policies.
    pub flush_tick_ms: u64,
    /// Where recovery may cut at a corrupt batch that a valid batch follows
    /// (by default nowhere: [`Log::open`] fails with
    /// [`Error::CorruptSegment`]). Torn tails are always cut.
    pub repair: Repair,
    /// The filesystem (tests use [`crate::MemStorage`] or [`crate::FaultStorage`]).
    pub storage: Arc<dyn Storage>,
}

/// Which partitions [`Log::open`] may cut at a corrupt batch of their last
/// segment, losing every record from it on (see [`Log::recovery_report`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Repair {
    /// None: corruption followed by valid data fails the open.
    #[default]
    Nothing,
    /// Every partition.
    All,
    /// One topic's partitions (all of them, or one).
    Topic { topic: String, partition: Option<u32> },
}

impl Repair {
    fn covers(&self, topic: &str, partition: u32) -> bool {
        match self {
            Repair::Nothing => false,
            Repair::All => true,
            Repair::Topic { topic: t, partition: p } => t == topic && p.is_none_or(|p| p == partition),
        }
    }
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            clock: Arc::new(SystemClock),
            background: true,
            maintenance_interval_ms: 30_000,
            flush_tick_ms: 10,
            repair: Repair::Nothing,
            storage: Arc::new(RealStorage),
        }
    }
}

#[derive(Debug)]
struct Topic {
    id: TopicId,
    /// At least one; each holds the topic's settings.
    partitions: Vec<Arc<Partition>>,
    /// Unkeyed records of one produce call go to one partition; the next
    /// call moves on (Kafka's sticky partitioning, per call).
    next_unkeyed: AtomicU32,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Held for the life of the log; the OS lock goes with the file.
    _lock: Box<dyn LockGuard>,
    offsets: Mutex<GroupOffsets>,
    stop: (Mutex<bool>, Condvar),
    background_error: Mutex<Option<String>>,
    closed: AtomicBool,
    /// What recovery cut at open, in topic and partition order.
    recovery_report: Vec<RecoveryCut>,
}

/// An open data directory. Cheap to share across threads (`&Log` is enough).
#[derive(Debug)]
pub struct Log {
    inner: Arc<Inner>,
    background: Option<JoinHandle<()>>,
}

/// The result of [`Log::fetch_slice`]: where whole batches lie in a
/// segment file.
#[derive(Debug, Clone)]
pub struct FetchSlice {
    pub partition: u32,
    pub offset: u64,
    pub high_watermark: u64,
    pub low_watermark: u64,
    /// `None`: nothing to send (at the end, or the next batch reaches the end asked for).
    pub slice: Option<StoredSlice>,
    /// An offset past every batch of the slice and at or below the base of
    /// the batch that follows it (one past the slice's last batch, or that
    /// next batch's base when compaction left a gap between them; `offset`
    /// when the slice is empty): the end of the range the slice covers.
    pub next_offset: u64,
}

/// Whole stored batches in a segment file, located and not read. The file
/// stays open while this lives, so its bytes stay readable even if
/// retention or compaction removes the segment meanwhile.
#[derive(Debug, Clone)]
pub struct StoredSlice {
    file: Arc<dyn storage::StorageFile>,
    position: u64,
    len: u64,
}

impl StoredSlice {
    /// Where the batches start in the file.
    pub fn position(&self) -> u64 {
        self.position
    }
    pub fn len(&self) -> u64 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The operating system's file, where the log's storage is the real
    /// filesystem (`sendfile` applies); `None` for the test doubles.
    pub fn os_file(&self) -> Option<&std::fs::File> {
        self.file.os_file()
    }
    /// Appends the batches' bytes to `out` (the buffered path).
    pub fn read_into(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        let start = out.len();
        let len = usize::try_from(self.len).map_err(std::io::Error::other)?;
        out.resize(start + len, 0);
        self.file.read_exact_at(&mut out[start..], self.position)?;
        debug_assert!(batch::Batches::new(&out[start..]).count() > 0);
        Ok(())
    }
}

/// The result of a fetch: whole, validated batches.
#[derive(Debug, Clone)]
pub struct Fetch {
    pub partition: u32,
    /// The offset asked for; records below it in the first batch are skipped by [`Fetch::records`].
    pub offset: u64,
    /// Where this fetch could read to: the last stable offset for a
    /// committed read ([`Log::fetch`]), the high watermark for an
    /// uncommitted one ([`Log::fetch_uncommitted`]).
    pub end_offset: u64,
    pub low_watermark: u64,
    /// Aborted transactions overlapping the batches (committed reads only).
    pub aborted: Vec<AbortedTxn>,
    bytes: Vec<u8>,
}

impl Fetch {
    /// The batches exactly as stored (Kafka v2 format).
    /// The fetched batches, owned (a server sends them as they are).
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    pub fn batches(&self) -> impl Iterator<Item = BatchView<'_>> {
        let mut rest = &self.bytes[..];
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let batch = BatchView::from_validated(rest);
            rest = &rest[batch.size_bytes()..];
            Some(batch)
        })
    }
    /// The batches that hold records a reader sees: not control batches
    /// (transaction markers), not batches of an aborted transaction.
    pub fn data_batches(&self) -> impl Iterator<Item = BatchView<'_>> {
        self.batches().filter(|b| !b.is_control() && !self.aborted.iter().any(|a| a.covers(b)))
    }
    /// Records at or after the requested offset, in offset order: those of
    /// [`Fetch::data_batches`].
    pub fn records(&self) -> impl Iterator<Item = RecordView<'_>> {
        let from = self.offset;
        self.data_batches().flat_map(|b| b.records()).filter(move |r| r.offset >= from)
    }
    /// Where the next fetch should start.
    pub fn next_offset(&self) -> u64 {
        self.batches().last().map_or(self.end_offset.max(self.offset), |b| b.last_offset() + 1)
    }
}

/// Whether `name` is an internal topic: one whose records only its owner
/// writes (the log's own, or a layer above's, like the SQL catalog).
pub fn is_internal_topic(name: &str) -> bool {
    name.starts_with(INTERNAL_TOPIC_PREFIX)
}

/// Names of internal topics start with this.
pub const INTERNAL_TOPIC_PREFIX: &str = "__";

fn refuse_internal(topic: &str, action: &'static str) -> Result<()> {
    if is_internal_topic(topic) { Err(Error::InternalTopic { topic: topic.to_owned(), action }) } else { Ok(()) }
}

fn validate_topic_name(name: &str) -> Result<()> {
    let bad = |reason| Err(Error::InvalidTopicName { name: name.to_owned(), reason });
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > TOPIC_NAME_BYTES_MAX {
        return bad("it is longer than 249 bytes");
    }
    if name == "." || name == ".." || name.starts_with('.') {
        return bad("it may not start with '.'");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
        return bad("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

impl Log {
    /// Opens (creating if needed) the data directory, recovering after a crash.
    pub fn open(dir: impl AsRef<Path>, options: LogOptions) -> Result<Log> {
        let dir = dir.as_ref().to_path_buf();
        let topics_dir = dir.join("topics");
        let st = &*options.storage;
        st.create_dir_all(&topics_dir).map_err(Error::io("creating data directory", &topics_dir))?;
        // The data directory's own entry, for a directory created just now
        // (the open syncs the directory itself, and with it `topics`, below).
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            partition::sync_dir(st, parent)?;
        }
        let lock_path = dir.join("lock");
        let lock = match st.lock(&lock_path, format!("{}\n", std::process::id()).as_bytes()) {
            Ok(lock) => lock,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Err(Error::Locked { dir }),
            Err(source) => return Err(Error::Io { action: "locking", path: lock_path, source }),
        };

        let marker = dir.join("clean-shutdown");
        let clean_shutdown = st.exists(&marker);
        let mut topics = BTreeMap::new();
        for name in st.list_dir(&topics_dir).map_err(Error::io("listing", &topics_dir))? {
            let path = topics_dir.join(&name);
            if name.starts_with(".tmp-") || name.starts_with(".deleted-") {
                st.remove_dir_all(&path).map_err(Error::io("removing unfinished topic directory", &path))?;
                continue;
            }
            let topic = open_topic(&options.storage, &path, &name, &options.clock, clean_shutdown, &options.repair)?;
            topics.insert(name, Arc::new(topic));
        }
        if clean_shutdown {
            // From here on a crash is unclean again.
            st.remove_file(&marker).map_err(Error::io("removing", &marker))?;
        }
        partition::sync_dir(st, &dir)?;
        let recovery_report =
            topics.values().flat_map(|t| t.partitions.iter().filter_map(|p| p.recovery_cut.clone())).collect();
        let inner = Arc::new(Inner {
            dir,
            storage: options.storage.clone(),
            clock: options.clock.clone(),
            topics: RwLock::new(topics),
            _lock: lock,
            offsets: Mutex::new(GroupOffsets::default()),
            stop: (Mutex::new(false), Condvar::new()),
            background_error: Mutex::new(None),
            closed: AtomicBool::new(false),
            recovery_report,
        });
        let mut log = Log { inner, background: None };
        if !log.inner.topics.read().expect("topics lock").contains_key(CONSUMER_OFFSETS_TOPIC) {
            log.create_topic_unchecked(CONSUMER_OFFSETS_TOPIC, offsets::topic_config())?;
        }
        let loaded = load_group_offsets(&log)?;
        *log.inner.offsets.lock().expect("offsets lock") = loaded;
        if options.background {
            let inner = log.inner.clone();
            let background = std::thread::Builder::new().name("millpond-log".into());
            let started = background.spawn(move || background_loop(&inner, &options));
            log.background = Some(started.map_err(Error::io("starting the background thread of", &topics_dir))?);
        }
        Ok(log)
    }

    /// What recovery cut from the end of partitions when this log opened:
    /// torn tails, and corrupt tails cut by [`LogOptions::repair`]. Empty
    /// after a clean shutdown of an undamaged log. Callers should show it:
    /// the first offset of each cut is given to new records.
    pub fn recovery_report(&self) -> &[RecoveryCut] {
        &self.inner.recovery_report
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    fn topic(&self, name: &str) -> Result<Arc<Topic>> {
        self.inner
            .topics
            .read()
            .expect("topics lock")
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownTopic(name.to_owned()))
    }

    fn partition(&self, topic: &str, partition: u32) -> Result<Arc<Partition>> {
        let handle = self.topic(topic)?;
        handle.partitions.get(partition as usize).cloned().ok_or_else(|| Error::UnknownPartition {
            topic: topic.to_owned(),
            partition,
            count: handle.partitions.len() as u32,
        })
    }

    /// Creates a topic; an existing name or an invalid config is an error.
    pub fn create_topic(&self, name: &str, config: TopicConfig) -> Result<()> {
        validate_topic_name(name)?;
        self.create_topic_unchecked(name, config)
    }

    fn create_topic_unchecked(&self, name: &str, config: TopicConfig) -> Result<()> {
        config.validate()?;
        let mut topics = self.inner.topics.write().expect("topics lock");
        if topics.contains_key(name) {
            return Err(Error::TopicExists(name.to_owned()));
        }
        let topics_dir = self.inner.dir.join("topics");
        let tmp = topics_dir.join(format!(".tmp-{name}"));
        let st = &*self.inner.storage;
        let _ = st.remove_dir_all(&tmp);
        st.create_dir_all(&tmp).map_err(Error::io("creating", &tmp))?;
        meta::write_new(st, &tmp, name, TopicId::random(), &config)?;
        // Partition directories exist before the rename, so the topic is
        // complete (and durable) the moment it appears under its name.
        for partition in 0..config.partitions {
            let dir = tmp.join(partition.to_string());
            st.create_dir(&dir).map_err(Error::io("creating", &dir))?;
        }
        partition::sync_dir(st, &tmp)?;
        let path = topics_dir.join(name);
        st.rename(&tmp, &path).map_err(Error::io("renaming new topic directory", &tmp))?;
        partition::sync_dir(st, &topics_dir)?;
        let topic = open_topic(&self.inner.storage, &path, name, &self.inner.clock, false, &Repair::Nothing)?;
        topics.insert(name.to_owned(), Arc::new(topic));
        Ok(())
    }

    /// Gives `name` new settings, in effect for every later append,
    /// retention pass and compaction. The partition count, the cleanup
    /// policy and the compaction bound rule are fixed
    /// ([`Log::add_partitions`] adds partitions): changing them is
    /// [`Error::InvalidConfig`]. `meta.json` is replaced atomically (temp +
    /// fsync, rename, directory fsync) before the partitions see the change.
    pub fn alter_topic_config(&self, name: &str, config: TopicConfig) -> Result<()> {
        self.check_open()?;
        // Held for writing: two alters of one topic apply in one order to the file and the partitions.
        let topics = self.inner.topics.write().expect("topics lock");
        let handle = topics.get(name).cloned().ok_or_else(|| Error::UnknownTopic(name.to_owned()))?;
        check_config_change(&handle.partitions[0].config(), &config)?;
        let path = self.inner.dir.join("topics").join(name);
        meta::replace(&*self.inner.storage, &path, name, handle.id, &config)?;
        for partition in &handle.partitions {
            partition.set_config(config.clone());
        }
        Ok(())
    }

    /// Whether [`Log::alter_topic_config`] would take `config` for `name`;
    /// changes nothing.
    pub fn check_topic_config(&self, name: &str, config: &TopicConfig) -> Result<()> {
        check_config_change(&self.topic_config(name)?, config)
    }

    /// Grows `name` to `partitions` partitions (Kafka's CreatePartitions):
    /// the new ones are empty, and keys route over the new count from now
    /// on. The new partition directories are made and synced first, then
    /// `meta.json` is replaced atomically with the new count; a crash
    /// between the two leaves directories that the next open removes.
    /// Fewer partitions than now is [`Error::InvalidConfig`].
    pub fn add_partitions(&self, name: &str, partitions: u32) -> Result<()> {
        self.check_open()?;
        let mut topics = self.inner.topics.write().expect("topics lock");
        let handle = topics.get(name).cloned().ok_or_else(|| Error::UnknownTopic(name.to_owned()))?;
        let current = handle.partitions.len() as u32;
        let mut config = handle.partitions[0].config();
        config.partitions = partitions;
        config.validate()?;
        if partitions <= current {
            let reason = format!("{name} has {current} partitions; asked for {partitions} (partitions are only added)");
            return Err(Error::InvalidConfig { field: "partitions", reason });
        }
        let path = self.inner.dir.join("topics").join(name);
        let st = &*self.inner.storage;
        for partition in current..partitions {
            let dir = path.join(partition.to_string());
            // Left by an earlier call that failed before meta.json counted it: empty.
            let _ = st.remove_dir_all(&dir);
            st.create_dir(&dir).map_err(Error::io("creating", &dir))?;
        }
        partition::sync_dir(st, &path)?;
        meta::replace(st, &path, name, handle.id, &config)?;
        let mut opened = handle.partitions.clone();
        for partition in current..partitions {
            let dir = path.join(partition.to_string());
            let clock = self.inner.clock.clone();
            let fresh =
                Partition::open(self.inner.storage.clone(), name, partition, dir, config.clone(), clock, false, false)?;
            opened.push(Arc::new(fresh));
        }
        for partition in &handle.partitions {
            partition.set_config_partitions(partitions);
        }
        let next_unkeyed = AtomicU32::new(handle.next_unkeyed.load(Ordering::Relaxed));
        topics.insert(name.to_owned(), Arc::new(Topic { id: handle.id, partitions: opened, next_unkeyed }));
        Ok(())
    }

    /// Deletes a topic and all its data. Internal topics (names starting
    /// with `__`) are refused with [`Error::InternalTopic`]: their owner
    /// deletes them with [`Log::delete_topic_forced`].
    pub fn delete_topic(&self, name: &str) -> Result<()> {
        refuse_internal(name, "deleted")?;
        self.delete_topic_unchecked(name)
    }

    /// Deletes a topic, internal or not: for an internal topic's owner (or an
    /// operator who knows its owner is gone: `millpond topic delete --force`).
    /// [`CONSUMER_OFFSETS_TOPIC`] belongs to the log itself and is refused.
    pub fn delete_topic_forced(&self, name: &str) -> Result<()> {
        if name == CONSUMER_OFFSETS_TOPIC {
            return Err(Error::InternalTopic { topic: name.to_owned(), action: "deleted, even by force" });
        }
        self.delete_topic_unchecked(name)
    }

    fn delete_topic_unchecked(&self, name: &str) -> Result<()> {
        let mut topics = self.inner.topics.write().expect("topics lock");
        let Some(topic) = topics.remove(name) else {
            return Err(Error::UnknownTopic(name.to_owned()));
        };
        // Handles held elsewhere (the background thread, appenders) must not
        // touch the directory once a new topic may take the name.
        for partition in &topic.partitions {
            partition.retire();
        }
        let topics_dir = self.inner.dir.join("topics");
        let path = topics_dir.join(name);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let doomed = topics_dir.join(format!(".deleted-{name}-{nanos}"));
        let st = &*self.inner.storage;
        st.rename(&path, &doomed).map_err(Error::io("renaming deleted topic", &path))?;
        partition::sync_dir(st, &topics_dir)?;
        st.remove_dir_all(&doomed).map_err(Error::io("removing", &doomed))
    }

    /// Topic names, sorted (including internal topics, which start with `__`).
    pub fn topics(&self) -> Vec<String> {
        self.inner.topics.read().expect("topics lock").keys().cloned().collect()
    }

    /// The id of this incarnation of topic `name` (a topic deleted and
    /// created again has a new one). Other processes read it with
    /// [`crate::read_topic_id`].
    pub fn topic_id(&self, name: &str) -> Result<TopicId> {
        Ok(self.topic(name)?.id)
    }

    pub fn topic_config(&self, name: &str) -> Result<TopicConfig> {
        Ok(self.topic(name)?.partitions[0].config())
    }

    /// Watermarks, segment counts and sizes of every partition.
    pub fn describe(&self, name: &str) -> Result<Vec<PartitionInfo>> {
        Ok(self.topic(name)?.partitions.iter().map(|p| p.info()).collect())
    }

    /// Appends `records` to one partition as one batch. Internal topics
    /// (names starting with `__`) are refused with [`Error::InternalTopic`]:
    /// their records have formats only their owner writes (a foreign record
    /// there would make every later open fail to decode it).
    pub fn append(&self, topic: &str, partition: u32, records: &[Record]) -> Result<AppendInfo> {
        refuse_internal(topic, "appended to")?;
        self.append_internal(topic, partition, records)
    }

    /// [`Log::append`] of records borrowed from the caller (a sink that
    /// builds many records from rows it holds need not own a copy of each).
    pub fn append_encoded(&self, topic: &str, partition: u32, records: &[EncodeRecord<'_>]) -> Result<AppendInfo> {
        refuse_internal(topic, "appended to")?;
        self.check_open()?;
        self.partition(topic, partition)?.append_encoded(records)
    }

    /// Appends a batch a Kafka producer encoded, stored as produced except
    /// for its base offset (see `Partition::write_produced` for what is
    /// checked), and returns once the flush policy acknowledges it. Internal
    /// topics are refused, as by [`Log::append`].
    pub fn append_produced(&self, topic: &str, partition: u32, batch: &mut [u8]) -> Result<AppendInfo> {
        refuse_internal(topic, "produced to")?;
        self.check_open()?;
        let partition = self.partition(topic, partition)?;
        let (info, needs_sync) = partition.write_produced(batch)?;
        if needs_sync {
            partition.sync_until(info.last_offset + 1)?;
        }
        Ok(info)
    }

    /// [`Log::append`] for any topic, internal ones included. Only for an
    /// internal topic's owner, which writes its own record format (the log
    /// for [`CONSUMER_OFFSETS_TOPIC`], the SQL layer for its catalog).
    pub fn append_internal(&self, topic: &str, partition: u32, records: &[Record]) -> Result<AppendInfo> {
        self.check_open()?;
        self.partition(topic, partition)?.append(&records.iter().collect::<Vec<_>>())
    }

    /// Routes each record to its partition (by key, with Kafka's default
    /// partitioner; unkeyed records of one call to one partition) and appends
    /// one batch per partition. Order is kept within each partition.
    /// Internal topics are refused, as by [`Log::append`].
    pub fn produce(&self, topic: &str, records: &[Record]) -> Result<Vec<AppendInfo>> {
        refuse_internal(topic, "produced to")?;
        self.produce_internal(topic, records)
    }

    /// [`Log::produce`] for any topic, internal ones included. Only for an
    /// internal topic's owner (see [`Log::append_internal`]).
    pub fn produce_internal(&self, topic: &str, records: &[Record]) -> Result<Vec<AppendInfo>> {
        self.check_open()?;
        let handle = self.topic(topic)?;
        let count = handle.partitions.len() as u32;
        let unkeyed = handle.next_unkeyed.fetch_add(1, Ordering::Relaxed) % count;
        let mut per_partition: BTreeMap<u32, Vec<&Record>> = BTreeMap::new();
        for record in records {
            let partition = match &record.key {
                Some(key) => partitioner::partition_for_key(key, count),
                None => unkeyed,
            };
            per_partition.entry(partition).or_default().push(record);
        }
        // Every partition is written before the first is synced: on a
        // journaling file system the first sync commits the others' new
        // lengths with it, so k partitions cost about one sync, not k.
        let written = per_partition
            .into_iter()
            .map(|(p, records)| Ok((p, handle.partitions[p as usize].write(&records)?)))
            .collect::<Result<Vec<_>>>()?;
        for (p, (info, needs_sync)) in &written {
            if *needs_sync {
                handle.partitions[*p as usize].sync_until(info.last_offset + 1)?;
            }
        }
        Ok(written.into_iter().map(|(_, (info, _))| info).collect())
    }

    /// Reads whole batches starting at the one holding `offset` (or the next
    /// offset present), up to about `max_bytes` but always at least one
    /// batch, committed data only: no batch reaching the last stable offset
    /// (the first offset of an open transaction; the high watermark when
    /// none is open), with the aborted transactions among them, which
    /// [`Fetch::records`] skips (as it skips transaction markers). An
    /// offset below the low watermark or above the high watermark is
    /// [`Error::OffsetOutOfRange`]; at the last stable offset the fetch is
    /// empty.
    ///
    /// Compressed batches come decompressed ([`batch::normalize_into`]), so
    /// [`Fetch::records`] reads any batch; [`Log::fetch_stored`] gives the
    /// bytes as stored.
    pub fn fetch(&self, topic: &str, partition: u32, offset: u64, max_bytes: usize) -> Result<Fetch> {
        let (bytes, end_offset, low_watermark, aborted) =
            self.partition(topic, partition)?.read_committed(offset, max_bytes)?;
        let fetch = Fetch { partition, offset, end_offset, low_watermark, aborted, bytes };
        Self::normalize(topic, fetch)
    }

    /// [`Log::fetch`] of everything up to the high watermark, open and
    /// aborted transactions included (a read_uncommitted reader; the
    /// producer state a Kafka endpoint rebuilds). Markers are still not records.
    pub fn fetch_uncommitted(&self, topic: &str, partition: u32, offset: u64, max_bytes: usize) -> Result<Fetch> {
        Self::normalize(topic, self.fetch_stored(topic, partition, offset, max_bytes)?)
    }

    /// `fetch` with its compressed batches decompressed.
    fn normalize(topic: &str, mut fetch: Fetch) -> Result<Fetch> {
        let (partition, offset) = (fetch.partition, fetch.offset);
        if let std::borrow::Cow::Owned(bytes) =
            batch::normalized(&fetch.bytes).map_err(|reason| Error::CorruptBatch {
                topic: topic.to_owned(),
                partition,
                offset,
                segment: std::path::PathBuf::new(),
                position: 0,
                reason,
            })?
        {
            fetch.bytes = bytes;
        }
        Ok(fetch)
    }

    /// [`Log::fetch`] of the batches as they are stored (compressed ones
    /// compressed): what a Kafka consumer is sent.
    pub fn fetch_stored(&self, topic: &str, partition: u32, offset: u64, max_bytes: usize) -> Result<Fetch> {
        let (bytes, end_offset, low_watermark) = self.partition(topic, partition)?.read(offset, max_bytes)?;
        debug_assert!(batch::Batches::new(&bytes).count() > 0 || bytes.is_empty());
        Ok(Fetch { partition, offset, end_offset, low_watermark, aborted: Vec::new(), bytes })
    }

    /// Where the batches [`Log::fetch_stored`] would return lie, without
    /// reading them, none reaching `end_offset` (a view changelog's
    /// committed end; `u64::MAX` for the high watermark): what a server
    /// sends from the page cache with `sendfile`. Batch headers are checked,
    /// bodies are not (consumers check each batch's CRC).
    pub fn fetch_slice(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        max_bytes: usize,
        end_offset: u64,
    ) -> Result<FetchSlice> {
        let (found, high_watermark, low_watermark) =
            self.partition(topic, partition)?.locate(offset, max_bytes, end_offset)?;
        let next_offset = found.as_ref().map_or(offset, |(_, _, _, next)| *next);
        let slice = found.map(|(file, position, len, _)| StoredSlice { file, position, len });
        Ok(FetchSlice { partition, offset, high_watermark, low_watermark, slice, next_offset })
    }

    /// The log start offset: the first offset that may still be read.
    pub fn low_watermark(&self, topic: &str, partition: u32) -> Result<u64> {
        Ok(self.partition(topic, partition)?.low_watermark())
    }

    /// The next offset to be written (and the end of what readers may read).
    pub fn high_watermark(&self, topic: &str, partition: u32) -> Result<u64> {
        Ok(self.partition(topic, partition)?.high_watermark())
    }

    /// The last stable offset: the first offset of the earliest open
    /// transaction, the high watermark when none is open. Committed
    /// readers ([`Log::fetch`]) read up to it.
    pub fn last_stable_offset(&self, topic: &str, partition: u32) -> Result<u64> {
        Ok(self.partition(topic, partition)?.last_stable_offset())
    }

    /// Aborted transactions of one partition that overlap `[from, to)`:
    /// what a Kafka Fetch answer lists for a read_committed consumer.
    pub fn aborted_transactions(&self, topic: &str, partition: u32, from: u64, to: u64) -> Result<Vec<AbortedTxn>> {
        Ok(self.partition(topic, partition)?.aborted_in(from, to))
    }

    /// Open transactions of one partition: producer id and first offset.
    pub fn open_transactions(&self, topic: &str, partition: u32) -> Result<Vec<(i64, u64)>> {
        Ok(self.partition(topic, partition)?.open_transactions())
    }

    /// Appends a transaction marker ([`batch::encode_control`]) that ends
    /// `marker`'s producer's transaction in this partition, and returns once
    /// it is durable (synced, whatever the topic's flush policy: a
    /// coordinator records a transaction complete only after its markers
    /// are). Only a transaction coordinator calls this; internal topics are
    /// refused, as by [`Log::append`].
    pub fn append_control(&self, topic: &str, partition: u32, marker: ControlMarker) -> Result<AppendInfo> {
        refuse_internal(topic, "given a transaction marker")?;
        self.check_open()?;
        let partition = self.partition(topic, partition)?;
        let (info, _) = partition.write_control(marker)?;
        partition.sync_until(info.last_offset + 1)?;
        Ok(info)
    }

    /// The first offset whose timestamp is >= `timestamp_ms`, or the high
    /// watermark if there is none.
    pub fn offset_for_time(&self, topic: &str, partition: u32, timestamp_ms: i64) -> Result<u64> {
        self.partition(topic, partition)?.offset_for_time(timestamp_ms)
    }

    /// Blocks until `offset` is readable or `timeout` passes; true if readable.
    pub fn wait_for(&self, topic: &str, partition: u32, offset: u64, timeout: Duration) -> Result<bool> {
        Ok(self.partition(topic, partition)?.wait_for(offset, timeout))
    }

    fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.inner.topics.read().expect("topics lock").values().flat_map(|t| t.partitions.iter().cloned()).collect()
    }

    /// Applies time and size retention to every topic. Returns the number of
    /// segments deleted.
    pub fn enforce_retention(&self) -> Result<usize> {
        self.all_partitions().iter().map(|p| p.apply_retention()).sum()
    }

    /// Runs one compaction pass over every compacted topic.
    pub fn compact(&self) -> Result<CompactionStats> {
        let mut total = CompactionStats::default();
        for partition in self.all_partitions() {
            let stats = cleaner::compact(&partition)?;
            total.segments_rewritten += stats.segments_rewritten;
            total.records_removed += stats.records_removed;
            total.bytes_before += stats.bytes_before;
            total.bytes_after += stats.bytes_after;
        }
        Ok(total)
    }

    /// Removes every record at or after `offset` from one partition, so that
    /// the next append gets `offset`. Used by the dataflow runtime to cut a
    /// sink topic back to its last committed position after a crash. The
    /// old handle is retired (anyone still holding it gets errors, never a
    /// write into the cut files) and a fresh one is opened. `offset` must be
    /// a batch boundary between the first segment's base and the high
    /// watermark.
    pub fn truncate(&self, topic: &str, partition: u32, offset: u64) -> Result<()> {
        self.check_open()?;
        let mut topics = self.inner.topics.write().expect("topics lock");
        let handle = topics.get(topic).cloned().ok_or_else(|| Error::UnknownTopic(topic.to_owned()))?;
        let old = handle.partitions.get(partition as usize).cloned().ok_or_else(|| Error::UnknownPartition {
            topic: topic.to_owned(),
            partition,
            count: handle.partitions.len() as u32,
        })?;
        let high = old.high_watermark();
        if offset > high {
            return Err(Error::OffsetOutOfRange {
                topic: topic.to_owned(),
                partition,
                offset,
                low: old.low_watermark(),
                high,
            });
        }
        if offset == high {
            return Ok(());
        }
        // Validate before touching anything: a bad cut changes nothing and
        // leaves the handle usable.
        let bad = |reason: String| Error::BadTruncation { topic: topic.to_owned(), partition, offset, reason };
        // The plan must stay true until the cut: hold off the cleaner and
        // retention (maintenance lock) until this handle is retired, after
        // which they skip it.
        let maintenance = old.maintenance.lock().expect("maintenance lock");
        old.flush(true)?;
        let plan = partition::plan_truncation(&*self.inner.storage, &old.dir, offset).map_err(bad)?;
        old.close()?;
        old.mark_retired();
        drop(maintenance);
        old.retire();
        partition::truncate_directory(&*self.inner.storage, &old.dir, &plan)?;
        // The cut ends on a batch boundary: nothing for recovery to cut.
        let fresh = Partition::open(
            self.inner.storage.clone(),
            topic,
            partition,
            old.dir.clone(),
            old.config(),
            self.inner.clock.clone(),
            false,
            false,
        )?;
        assert_eq!(fresh.high_watermark(), offset, "truncation leaves the partition ending at the cut");
        // New records will take the cut offsets: a persisted bound above the
        // cut would let them be compacted before they are committed.
        if fresh.config().compaction_bound_required && fresh.cleanable_below() > offset {
            fresh.set_cleanable_below(offset)?;
        }
        let mut partitions = handle.partitions.clone();
        partitions[partition as usize] = Arc::new(fresh);
        let next_unkeyed = AtomicU32::new(handle.next_unkeyed.load(Ordering::Relaxed));
        topics.insert(topic.to_owned(), Arc::new(Topic { id: handle.id, partitions, next_unkeyed }));
        Ok(())
    }

    /// Lets compaction touch only segments that end at or below `offset` (and
    /// decide "latest per key" among their records only), like Kafka's last
    /// stable offset for the cleaner. For a topic with
    /// [`TopicConfig::compaction_bound_required`] the bound is persisted in
    /// the partition directory (written only when it changes) and honoured
    /// by every process that opens the log later; otherwise it is kept in
    /// memory only, and a reopened log has no limit until it is set again.
    pub fn set_cleanable_below(&self, topic: &str, partition: u32, offset: u64) -> Result<()> {
        self.partition(topic, partition)?.set_cleanable_below(offset)
    }

    /// The compaction bound in force (`u64::MAX`: none; see
    /// [`Log::set_cleanable_below`]).
    pub fn cleanable_below(&self, topic: &str, partition: u32) -> Result<u64> {
        Ok(self.partition(topic, partition)?.cleanable_below())
    }

    /// Syncs one partition's unsynced data (a no-op when all is synced).
    pub fn sync(&self, topic: &str, partition: u32) -> Result<()> {
        self.partition(topic, partition)?.flush(true)
    }

    /// Syncs every partition's unsynced data.
    pub fn flush(&self) -> Result<()> {
        self.all_partitions().iter().try_for_each(|p| p.flush(true))
    }

    /// Commits `offset` (the next offset to consume) for a consumer group.
    pub fn commit_offset(&self, group: &str, topic: &str, partition: u32, offset: u64) -> Result<()> {
        if group.is_empty() || group.len() > GROUP_NAME_BYTES_MAX {
            return Err(Error::InvalidGroup { group: group.chars().take(64).collect(), bytes: group.len() });
        }
        self.partition(topic, partition)?;
        let record = offsets::encode(group, topic, partition, offset, self.inner.clock.now_ms());
        let mut committed = self.inner.offsets.lock().expect("offsets lock");
        self.produce_internal(CONSUMER_OFFSETS_TOPIC, &[record])?;
        committed.insert((group.to_owned(), topic.to_owned(), partition), offset);
        Ok(())
    }

    /// The offset a group last committed for a partition.
    /// Every offset `group` has committed: topic, partition, offset, sorted.
    pub fn group_offsets(&self, group: &str) -> Vec<(String, u32, u64)> {
        let committed = self.inner.offsets.lock().expect("offsets lock");
        let mut out: Vec<(String, u32, u64)> = committed
            .iter()
            .filter(|((g, _, _), _)| g == group)
            .map(|((_, topic, partition), offset)| (topic.clone(), *partition, *offset))
            .collect();
        out.sort();
        out
    }

    /// Every group that has committed an offset, sorted.
    pub fn groups(&self) -> Vec<String> {
        let committed = self.inner.offsets.lock().expect("offsets lock");
        let mut groups: Vec<String> = committed.keys().map(|(group, _, _)| group.clone()).collect();
        groups.sort();
        groups.dedup();
        groups
    }

    pub fn committed_offset(&self, group: &str, topic: &str, partition: u32) -> Option<u64> {
        self.inner.offsets.lock().expect("offsets lock").get(&(group.to_owned(), topic.to_owned(), partition)).copied()
    }

    /// The last error the background thread met, if any.
    pub fn background_error(&self) -> Option<String> {
        self.inner.background_error.lock().expect("error lock").clone()
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) { Err(Error::Closed) } else { Ok(()) }
    }

    /// Flushes everything and marks the shutdown clean, so the next open
    /// trusts the index files instead of rescanning the active segments.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        *self.inner.stop.0.lock().expect("stop lock") = true;
        self.inner.stop.1.notify_all();
        if let Some(handle) = self.background.take() {
            let _ = handle.join();
        }
        for partition in self.all_partitions() {
            partition.close()?;
        }
        let marker = self.inner.dir.join("clean-shutdown");
        let st = &*self.inner.storage;
        storage::write_file(st, &marker, &[], true).map_err(Error::io("writing", &marker))?;
        partition::sync_dir(st, &self.inner.dir)
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        // Errors here mean the next open recovers as after a crash.
        let _ = self.shutdown();
    }
}

fn open_topic(
    storage: &Arc<dyn Storage>,
    path: &Path,
    name: &str,
    clock: &Arc<dyn Clock>,
    clean_shutdown: bool,
    repair: &Repair,
) -> Result<Topic> {
    let meta = meta::load_or_upgrade(&**storage, path, name)?;
    let partitions = (0..meta.config.partitions)
        .map(|p| {
            let dir = path.join(p.to_string());
            let repair = repair.covers(name, p);
            Partition::open(storage.clone(), name, p, dir, meta.config.clone(), clock.clone(), clean_shutdown, repair)
                .map(Arc::new)
        })
        .collect::<Result<Vec<_>>>()?;
    remove_unfinished_partitions(&**storage, path, meta.config.partitions)?;
    Ok(Topic { id: meta.id, partitions, next_unkeyed: AtomicU32::new(0) })
}

/// A topic's settings may go from `current` to `config`: valid, and the
/// fixed ones unchanged.
fn check_config_change(current: &TopicConfig, config: &TopicConfig) -> Result<()> {
    config.validate()?;
    let fixed = |field: &'static str, reason: &str| Err(Error::InvalidConfig { field, reason: reason.to_owned() });
    if config.partitions != current.partitions {
        return fixed("partitions", "partitions are added with add_partitions, never removed");
    }
    if config.cleanup_policy != current.cleanup_policy {
        let reason = "fixed at creation (a compacted topic's segments have gaps that a deleting topic's may not have)";
        return fixed("cleanup_policy", reason);
    }
    if config.compaction_bound_required != current.compaction_bound_required {
        return fixed("compaction_bound_required", "fixed at creation");
    }
    Ok(())
}

/// Removes partition directories numbered at or past `partitions`: made by
/// a [`Log::add_partitions`] that crashed before its `meta.json` counted
/// them (so nothing was ever written into them).
fn remove_unfinished_partitions(storage: &dyn Storage, path: &Path, partitions: u32) -> Result<()> {
    let names = storage.list_dir(path).map_err(Error::io("listing", path))?;
    let mut removed = false;
    for name in names {
        if name.parse::<u32>().is_ok_and(|p| p >= partitions) && name.bytes().all(|b| b.is_ascii_digit()) {
            let dir = path.join(&name);
            storage.remove_dir_all(&dir).map_err(Error::io("removing an unfinished partition", &dir))?;
            removed = true;
        }
    }
    if removed { partition::sync_dir(storage, path) } else { Ok(()) }
}

fn background_loop(inner: &Inner, options: &LogOptions) {
    let tick = Duration::from_millis(options.flush_tick_ms.max(1));
    let mut since_maintenance_ms = 0u64;
    loop {
        let stop = inner.stop.0.lock().expect("stop lock");
        let (stop, _) = inner.stop.1.wait_timeout(stop, tick).expect("stop lock");
        if *stop {
            return;
        }
        drop(stop);
        let partitions: Vec<_> =
            inner.topics.read().expect("topics lock").values().flat_map(|t| t.partitions.iter().cloned()).collect();
        since_maintenance_ms += tick.as_millis() as u64;
        let maintenance = since_maintenance_ms >= options.maintenance_interval_ms;
        if maintenance {
            since_maintenance_ms = 0;
        }
        // Each partition on its own: one failing partition must not stop the
        // others' flushes. A panic is recorded, not allowed to end the thread.
        let pass = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut first_error = None;
            for partition in &partitions {
                let mut result = partition.flush(false);
                if maintenance {
                    result = result
                        .and_then(|()| partition.apply_retention().map(drop))
                        .and_then(|()| cleaner::compact(partition).map(drop));
                }
                if let Err(error) = result {
                    first_error.get_or_insert(error.to_string());
                }
            }
            first_error
        }));
        let error = match pass {
            Ok(error) => error,
            Err(panic) => Some(format!(
                "background pass panicked: {}",
                panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or(panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("?")
            )),
        };
        if let Some(error) = error {
            *inner.background_error.lock().expect("error lock") = Some(error);
        }
    }
}

/// Records per partition read when scanning a whole topic.
pub(crate) const SCAN_FETCH_BYTES: usize = 1 << 20;

/// Reads every record of every partition of `topic`, calling `f` on each.
pub(crate) fn scan_topic(log: &Log, topic: &str, mut f: impl FnMut(u32, &RecordView<'_>)) -> Result<()> {
    let count = log.topic(topic)?.partitions.len() as u32;
    for partition in 0..count {
        let mut offset = log.low_watermark(topic, partition)?;
        loop {
            let fetch = log.fetch(topic, partition, offset, SCAN_FETCH_BYTES)?;
            if fetch.is_empty() {
                break;
            }
            fetch.records().for_each(|r| f(partition, &r));
            offset = fetch.next_offset();
        }
    }
    Ok(())
}

/// Rebuilds the committed offsets from `__consumer_offsets` (the fold of
/// its records, `offsets::apply`); a record that is not ours is an error
/// naming its partition and offset.
fn load_group_offsets(log: &Log) -> Result<offsets::GroupOffsets> {
    let mut loaded = offsets::GroupOffsets::new();
    let mut bad = None;
    scan_topic(log, CONSUMER_OFFSETS_TOPIC, |partition, record| {
        if offsets::apply(&mut loaded, record.key, record.value).is_err() {
            bad.get_or_insert((partition, record.offset));
        }
    })?;
    if let Some((partition, offset)) = bad {
        return Err(Error::BadMetadata {
            path: log.dir().join("topics").join(CONSUMER_OFFSETS_TOPIC).join(partition.to_string()),
            reason: format!("undecodable consumer-offset record at offset {offset}"),
        });
    }
    Ok(loaded)
}
