//! [`Topics`]: the part of the log that higher crates may touch — create a
//! topic, append records durably, read a topic whole, delete it — without
//! knowing the log's internals. The `sql` crate writes table changes and its
//! catalog through it; jobs read topics only through sources.
//!
//! Invariant: [`Topics::append`] returns only after the records are synced
//! to disk; an acknowledged append survives a crash.
use std::path::Path;
use std::sync::Arc;

use millpond_log::{CleanupPolicy, Error as LogError, Header, Log, LogOptions, Record, TopicConfig};

use crate::error::Result;

pub use millpond_log::config::PARTITIONS_MAX;
pub use millpond_log::{
    AbortedTxn, ControlMarker, ControlType, Fetch, FetchSlice, RecordView, Resolved, Start, StoredSlice,
};

/// How a topic is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopicSpec {
    pub partitions: u32,
    /// Compacted by key (the latest record per key is kept) rather than kept whole.
    pub compacted: bool,
    /// Compaction stays below a bound its writer persists with
    /// [`Topics::set_cleanable_below`] (records past it are not committed
    /// yet, so none of them may decide "latest per key"), honoured by every
    /// process. Compacted topics only.
    pub compaction_bounded: bool,
}

/// A record to append: key, value (`None` for a tombstone) and headers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicRecord {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
}

/// A record read back, with its position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRecord {
    pub partition: u32,
    pub offset: u64,
    /// The record's timestamp (milliseconds since 1970: the producer's, or
    /// the append's for records appended here).
    pub timestamp_ms: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// Header name and value (a header without a value has an empty one).
    pub headers: Vec<(String, Vec<u8>)>,
}

/// The topics of a data directory, opened by this process (which holds the
/// directory's lock until the last clone is dropped). Clones share the one
/// open log: a server hands them to its SQL session and to the runtime
/// ([`crate::Runtime::run_on`]).
#[derive(Clone, Debug)]
pub struct Topics {
    log: Arc<Log>,
}

/// Bytes per fetch when reading a topic whole.
const READ_BYTES_MAX: usize = 1 << 20;

impl Topics {
    /// Opens the log of `data_dir`. Fails with the log's `Locked` error while
    /// another process (a running job) holds it.
    pub fn open(data_dir: &Path) -> Result<Topics> {
        Ok(Topics { log: Arc::new(Log::open(data_dir, LogOptions::default())?) })
    }

    /// [`open`](Self::open) with the log's options: another filesystem (the
    /// in-memory or fault-injecting doubles of crash tests), clock or repair.
    pub fn open_with(data_dir: &Path, options: LogOptions) -> Result<Topics> {
        Ok(Topics { log: Arc::new(Log::open(data_dir, options)?) })
    }

    /// The open log.
    pub(crate) fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// Closes the log cleanly (the next open trusts its indexes) if this is
    /// the last handle; otherwise flushes it.
    pub fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.log) {
            Ok(log) => Ok(log.close()?),
            Err(log) => Ok(log.flush()?),
        }
    }

    /// Creates `topic` unless it exists; returns whether it was created. An
    /// existing topic keeps its layout.
    pub fn ensure(&self, topic: &str, spec: TopicSpec) -> Result<bool> {
        let config = TopicConfig {
            partitions: spec.partitions,
            cleanup_policy: if spec.compacted { CleanupPolicy::Compact } else { CleanupPolicy::Delete },
            compaction_bound_required: spec.compacted && spec.compaction_bounded,
            ..TopicConfig::default()
        };
        match self.log.create_topic(topic, config) {
            Ok(()) => Ok(true),
            Err(LogError::TopicExists(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates `topic` with `partitions` and the Kafka-named `settings`
    /// (`TopicConfig::set_kafka`), or says why not: an existing topic is the
    /// log's `TopicExists`, a setting it does not have or a value out of
    /// range its `InvalidConfig`.
    pub fn create_with(&self, topic: &str, partitions: u32, settings: &[(String, String)]) -> Result<()> {
        let mut config = TopicConfig { partitions, ..TopicConfig::default() };
        for (name, value) in settings {
            config.set_kafka(name, value)?;
        }
        Ok(self.log.create_topic(topic, config)?)
    }

    /// Changes `topic`'s settings by their Kafka names: `Some(value)` sets
    /// one, `None` puts back its default. With `validate_only` nothing
    /// changes. The cleanup policy is fixed at creation (an error names it).
    pub fn alter_kafka_settings(
        &self,
        topic: &str,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<()> {
        let mut config = self.log.topic_config(topic)?;
        let defaults = TopicConfig::default().kafka_entries();
        for (name, value) in changes {
            let default = || defaults.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
            match value.clone().or_else(default) {
                Some(value) => config.set_kafka(name, &value)?,
                None => config.set_kafka(name, "")?, // not a setting: the error names it
            }
        }
        if validate_only {
            return Ok(self.log.check_topic_config(topic, &config)?);
        }
        Ok(self.log.alter_topic_config(topic, config)?)
    }

    /// Grows `topic` to `partitions` partitions (only ever more).
    pub fn add_partitions(&self, topic: &str, partitions: u32) -> Result<()> {
        Ok(self.log.add_partitions(topic, partitions)?)
    }

    /// `topic`'s settings by their Kafka names ([`millpond_log::config::KAFKA_SETTINGS`]).
    pub fn kafka_settings(&self, topic: &str) -> Result<Vec<(&'static str, String)>> {
        Ok(self.log.topic_config(topic)?.kafka_entries())
    }

    /// The names of every topic, sorted.
    pub fn list(&self) -> Vec<String> {
        self.log.topics()
    }

    pub fn exists(&self, topic: &str) -> bool {
        self.log.topics().iter().any(|t| t == topic)
    }

    /// `topic`'s id: 128 random bits given at its creation (a topic deleted
    /// and created again gets a new one).
    pub fn topic_id(&self, topic: &str) -> Result<u128> {
        Ok(self.log.topic_id(topic)?.as_u128())
    }

    /// The number of partitions of `topic`.
    pub fn partitions(&self, topic: &str) -> Result<u32> {
        Ok(self.log.describe(topic)?.len() as u32)
    }

    /// The offset the next record of `topic`'s `partition` will get.
    pub fn end_offset(&self, topic: &str, partition: u32) -> Result<u64> {
        Ok(self.log.high_watermark(topic, partition)?)
    }

    /// Where a reader of `topic`'s `partition` starts for `start`
    /// ([`millpond_log::Log::resolve_start`]).
    pub fn resolve_start(&self, topic: &str, partition: u32, start: &Start) -> Result<Resolved> {
        Ok(self.log.resolve_start(topic, partition, start)?)
    }

    /// Whole batches of `topic`'s `partition` from `offset`, about
    /// `max_bytes` (at least one batch; empty at the end).
    pub fn fetch(&self, topic: &str, partition: u32, offset: u64, max_bytes: usize) -> Result<Fetch> {
        Ok(self.log.fetch(topic, partition, offset, max_bytes)?)
    }

    /// [`Topics::fetch`] of everything to the high watermark, open and
    /// aborted transactions included (a read_uncommitted reader).
    pub fn fetch_uncommitted(&self, topic: &str, partition: u32, offset: u64, max_bytes: usize) -> Result<Fetch> {
        Ok(self.log.fetch_uncommitted(topic, partition, offset, max_bytes)?)
    }

    /// The last stable offset: where committed reads of `topic`'s
    /// `partition` end (the first offset of an open transaction, else the
    /// high watermark).
    pub fn last_stable_offset(&self, topic: &str, partition: u32) -> Result<u64> {
        Ok(self.log.last_stable_offset(topic, partition)?)
    }

    /// Aborted transactions of `topic`'s `partition` overlapping `[from, to)`.
    pub fn aborted_transactions(&self, topic: &str, partition: u32, from: u64, to: u64) -> Result<Vec<AbortedTxn>> {
        Ok(self.log.aborted_transactions(topic, partition, from, to)?)
    }

    /// Open transactions of `topic`'s `partition`: producer id and first offset.
    pub fn open_transactions(&self, topic: &str, partition: u32) -> Result<Vec<(i64, u64)>> {
        Ok(self.log.open_transactions(topic, partition)?)
    }

    /// Appends a transaction marker to `topic`'s `partition`, durably
    /// ([`millpond_log::Log::append_control`]).
    pub fn append_control(&self, topic: &str, partition: u32, marker: ControlMarker) -> Result<u64> {
        Ok(self.log.append_control(topic, partition, marker)?.base_offset)
    }

    /// Where the batches a fetch at `offset` would return lie in their
    /// segment file, as stored (compressed ones compressed), none reaching
    /// `end_offset`: what a Kafka consumer is sent, with `sendfile`.
    pub fn fetch_slice(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        max_bytes: usize,
        end_offset: u64,
    ) -> Result<FetchSlice> {
        Ok(self.log.fetch_slice(topic, partition, offset, max_bytes, end_offset)?)
    }

    /// The first offset of `topic`'s `partition` that may still be read.
    pub fn start_offset(&self, topic: &str, partition: u32) -> Result<u64> {
        Ok(self.log.low_watermark(topic, partition)?)
    }

    /// Waits up to `timeout` for `topic`'s `partition` to end past `offset`;
    /// whether it does.
    pub fn wait_for(&self, topic: &str, partition: u32, offset: u64, timeout: std::time::Duration) -> Result<bool> {
        Ok(self.log.wait_for(topic, partition, offset, timeout)?)
    }

    /// Appends a batch a Kafka producer encoded to `topic`'s `partition`,
    /// stored as produced but for its base offset
    /// ([`millpond_log::Log::append_produced`]); its first offset, once
    /// acknowledged by the topic's flush policy. Internal topics are refused.
    pub fn append_produced(&self, topic: &str, partition: u32, batch: &mut [u8]) -> Result<u64> {
        Ok(self.log.append_produced(topic, partition, batch)?.base_offset)
    }

    /// Commits `offset` (the next one to read) for consumer `group`.
    pub fn commit_group_offset(&self, group: &str, topic: &str, partition: u32, offset: u64) -> Result<()> {
        Ok(self.log.commit_offset(group, topic, partition, offset)?)
    }

    /// `group`'s committed offset of `topic`'s `partition`, if any.
    pub fn committed_offset(&self, group: &str, topic: &str, partition: u32) -> Option<u64> {
        self.log.committed_offset(group, topic, partition)
    }

    /// Every offset `group` has committed: topic, partition, offset, sorted.
    pub fn group_offsets(&self, group: &str) -> Vec<(String, u32, u64)> {
        self.log.group_offsets(group)
    }

    /// Every consumer group with a committed offset, sorted.
    pub fn groups(&self) -> Vec<String> {
        self.log.groups()
    }

    /// Appends `records` (routed by key, Kafka's partitioner) and syncs every
    /// partition written before returning. Internal topics (`__` names, like
    /// the SQL catalog) are written too: the layers above own them.
    pub fn append(&self, topic: &str, records: Vec<TopicRecord>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let now_ms = self.log.clock().now_ms();
        let records: Vec<Record> = records
            .into_iter()
            .map(|r| Record {
                key: r.key,
                value: r.value,
                timestamp_ms: now_ms,
                headers: r.headers.into_iter().map(|(key, value)| Header { key, value: Some(value) }).collect(),
            })
            .collect();
        let appended = if millpond_log::is_internal_topic(topic) {
            self.log.produce_internal(topic, &records)?
        } else {
            self.log.produce(topic, &records)?
        };
        for info in &appended {
            self.log.sync(topic, info.partition)?;
        }
        Ok(())
    }

    /// Lets compaction of `topic`'s `partition` decide only among records
    /// below `offset` (persisted for a [`TopicSpec::compaction_bounded`]
    /// topic, in memory otherwise).
    pub fn set_cleanable_below(&self, topic: &str, partition: u32, offset: u64) -> Result<()> {
        Ok(self.log.set_cleanable_below(topic, partition, offset)?)
    }

    /// Every record of `topic`, partition by partition, in offset order.
    pub fn read_all(&self, topic: &str) -> Result<Vec<StoredRecord>> {
        let mut out = Vec::new();
        for partition in 0..self.partitions(topic)? {
            let high = self.log.high_watermark(topic, partition)?;
            let mut offset = self.log.low_watermark(topic, partition)?;
            while offset < high {
                let fetch = self.log.fetch(topic, partition, offset, READ_BYTES_MAX)?;
                let before = offset;
                for record in fetch.records().filter(|r| r.offset >= before && r.offset < high) {
                    out.push(StoredRecord {
                        partition,
                        offset: record.offset,
                        timestamp_ms: record.timestamp_ms,
                        key: record.key.map(<[u8]>::to_vec),
                        value: record.value.map(<[u8]>::to_vec),
                        headers: headers(record.headers()),
                    });
                }
                offset = fetch.next_offset().max(offset);
                if offset == before {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Deletes `topic` if it exists.
    pub fn delete(&self, topic: &str) -> Result<()> {
        match self.log.delete_topic(topic) {
            Ok(()) | Err(LogError::UnknownTopic(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Bytes read per call when reading without the log.
const UNLOCKED_READ_BYTES_MAX: usize = 1 << 20;

/// Every record on disk in partition `partition` of `topic`, read from the
/// segment files without opening the log (so from any process, while
/// another holds the data directory): `None` if the topic does not exist.
/// What a writer is appending meanwhile may or may not be included.
pub fn read_partition_unlocked(data_dir: &Path, topic: &str, partition: u32) -> Result<Option<Vec<StoredRecord>>> {
    let mut reader = match millpond_log::PartitionReader::new(data_dir, topic, partition, 0) {
        Ok(reader) => reader,
        Err(LogError::UnknownTopic(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    loop {
        let records = reader.read(u64::MAX, UNLOCKED_READ_BYTES_MAX)?;
        if records.is_empty() {
            return Ok(Some(out));
        }
        out.extend(records.into_iter().map(|r| StoredRecord {
            partition,
            offset: r.offset,
            timestamp_ms: r.record.timestamp_ms,
            key: r.record.key,
            value: r.record.value,
            headers: headers(r.record.headers),
        }));
    }
}

fn headers(headers: Vec<millpond_log::Header>) -> Vec<(String, Vec<u8>)> {
    headers.into_iter().map(|h| (h.key, h.value.unwrap_or_default())).collect()
}
