//! Millpond's embedded log: Kafka's model on local disk.
//!
//! A [`Log`] is a data directory of topics; a topic is a fixed number of
//! partitions; a partition is a chain of segment files holding record
//! batches in Kafka's v2 format, each with a sparse offset index and a time
//! index. A record's identity is its offset. The log keeps no per-reader
//! state: a reader holds a partition and an offset (committed consumer
//! offsets are ordinary records in an internal compacted topic).
//!
//! Module map:
//! - [`batch`]: the record-batch format (encode, validate, iterate).
//! - [`partitioner`]: Kafka's murmur2 key routing.
//! - [`config`]: topic configuration and its limits.
//! - `segment`: one segment file and its indexes; scanning and recovery.
//! - `partition`: appends, group commit, reads, retention.
//! - `cleaner`: compaction and its crash-atomic swap.
//! - `meta`: topic metadata (`meta.json`) and topic incarnation ids.
//! - `offsets`: the consumer-offsets topic.
//! - `start`: where a reader starts (offset, end, time, a group's commit).
//! - `transactions`: a partition's open transactions, its last stable
//!   offset and aborted ranges (Kafka's transactions, read committed).
//! - [`clock`]: time behind a trait, with a manual clock for tests.
//! - [`storage`]: file I/O behind a trait: the filesystem, an in-memory
//!   double that models crashes, and fault injection.
//!
//! The on-disk format and durability rules are in `docs/log.md`.

#![forbid(unsafe_code)]

pub mod batch;
mod cleaner;
pub mod clock;
pub mod compression;
pub mod config;
mod error;
mod log;
mod meta;
mod offsets;
mod partition;
pub mod partitioner;
pub mod reader;
mod segment;
mod start;
pub mod storage;
mod transactions;

pub use batch::{BatchView, ControlMarker, ControlType, EncodeRecord, Header, Record, RecordView};
pub use cleaner::CompactionStats;
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{CleanupPolicy, FlushPolicy, TopicConfig};
pub use error::{Error, Result};
pub use log::{
    CONSUMER_OFFSETS_TOPIC, Fetch, FetchSlice, INTERNAL_TOPIC_PREFIX, Log, LogOptions, Repair, StoredSlice,
    is_internal_topic,
};
pub use meta::{TopicId, read_topic_id};
pub use partition::{AppendInfo, CutReason, PartitionInfo, RecoveryCut};
pub use reader::{OffsetRecord, PartitionReader};
pub use start::{Resolved, Start};
pub use storage::{FaultPlan, FaultStorage, MemStorage, RealStorage, Storage};
pub use transactions::AbortedTxn;
