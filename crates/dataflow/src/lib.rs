//! Millpond's dataflow runtime: sources that tail the log, keyed operators
//! with state in RocksDB, barrier checkpoints, and views that live in the
//! log as changelogs. Exactly once: every view reflects each input record
//! once, across crashes.
//!
//! A job in a few lines (see `examples/bid_stats.rs` for a complete one):
//!
//! ```no_run
//! use millpond_dataflow::{json, Count, Max, Runtime, RuntimeConfig, Sum};
//!
//! #[derive(Clone, Debug, serde::Deserialize)]
//! struct Bid { auction: u64, price: i64 }
//!
//! Runtime::run(RuntimeConfig::new("data"), |job| {
//!     let bids = job.source("bid", json::<Bid>());
//!     let stats = bids
//!         .map(|b| (b.auction, b.price))
//!         .aggregate("bid_stats", (Count, Sum(|p: &i64| *p), Max(|p: &i64| *p)));
//!     job.materialize("bid_stats", stats);
//! })?;
//! # Ok::<(), millpond_dataflow::Error>(())
//! ```
//!
//! Module map: [`runtime`] (workers, epochs, the commit loop), `source`
//! (tailing partitions), `keyed` and `join` (stateful operators),
//! [`aggregate`] (accumulators), `sink` (exactly-once topic writes),
//! [`dead_letter`] (one dead-letter topic per source, one letter per record),
//! `checkpoint` (the barrier commit), [`timing`] (its durations), [`view`] (reading views from any
//! process), [`state`] (the store). docs/checkpoints.md has the protocol.
//!
//! Invariant (architecture): this crate depends on `millpond-log` and on no
//! higher Millpond crate; it is the only crate that knows about RocksDB.

#![deny(unsafe_code)]

pub mod aggregate;
mod append_thread;
mod applier;
mod checkpoint;
mod codec;
mod collection;
mod config;
mod context;
pub mod dead_letter;
mod epoch_writes;
mod error;
pub mod event_time;
mod held_filter;
mod join;
pub mod json_check;
mod kafka_chunk;
mod kafka_fetch;
mod kafka_queue;
pub mod kafka_sink;
pub mod kafka_source;
mod keyed;
mod multiset;
mod naming;
mod opstate;
mod order_key;
mod ordered_set;
mod row_counts;
pub mod runtime;
pub mod session_window;
mod set_aggregate;
mod sink;
mod source;
pub mod source_group;
mod stash;
pub mod state;
mod timeline;
pub mod timing;
mod top_k;
pub mod topics;
pub mod view;
mod view_fold;
mod view_index;
mod view_sink;
mod view_state;
pub mod window_join;

/// A timestamp: the number of a checkpoint epoch. Epoch 0 is "nothing".
pub type Epoch = u64;
/// A change of multiplicity.
pub type Diff = isize;

pub use aggregate::{Aggregate, Avg, Count, Fold, Max, Min, OrderedF64, SetUpdates, Sets, Sum};
pub use applier::lower_current_thread;
pub use checkpoint::{CHECKPOINT_FILE, CHECKPOINT_VERSION, CheckpointMeta, DeadLetterMarks, ViewChangelog};
pub use collection::{Collection, Data, Key};
pub use config::{ChangelogHold, ChangelogHolds, CommitBell, EPOCH_RECORDS_MAX_DEFAULT, RunCounters};
pub use dead_letter::DeadLetter;
pub use error::{Error, Result};
pub use kafka_sink::{Envelope, KafkaSink, SinkStats};
pub use kafka_source::KafkaTopic;
/// The log's error, for callers that tell its cases apart (an unknown
/// topic, an offset out of range).
pub use millpond_log::Error as LogError;
pub use naming::{changelog_topic, dead_letter_topic, is_sink_topic_name};
pub use opstate::StateReads;
pub use order_key::OrderKey;
pub use runtime::{Job, RetentionGap, RetentionGapPolicy, RunStats, Runtime, RuntimeConfig, StateBackend};
pub use set_aggregate::{SETS_MAX, SetAggregate, SetChanges, SetSummary};
pub use source::{RawRecord, json, raw};
pub use timing::{CommitTimings, Histogram, HistogramSnapshot};
pub use topics::{
    AbortedTxn, ControlMarker, ControlType, Fetch, FetchSlice, PARTITIONS_MAX, RecordView, Resolved, Start,
    StoredRecord, StoredSlice, TopicRecord, TopicSpec, Topics, read_partition_unlocked,
};
pub use view::{
    Event, RawEvent, RawRow, RawSnapshot, Snapshot, Subscription, TailEvent, UncheckedRow, ViewInfo, list_views,
    read_view, read_view_at, read_view_raw, read_view_raw_at,
};
pub use view_fold::Multiplicity;
