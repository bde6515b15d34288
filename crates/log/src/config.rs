//! Per-topic configuration, persisted with the topic (`meta.json`).
//!
//! Invariant: a [`TopicConfig`] that reaches a partition has passed
//! [`TopicConfig::validate`]; every limit here is enforced there.

use serde::{Deserialize, Serialize};

use crate::batch::BATCH_BYTES_LIMIT;
use crate::error::{Error, Result};

/// What the cleaner does with old segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CleanupPolicy {
    /// Drop whole segments by age and size.
    #[default]
    Delete,
    /// Keep the latest record per key; tombstones go after `delete_retention_ms`.
    Compact,
    /// Both: compact, and also drop whole segments by age and size.
    CompactDelete,
}

impl CleanupPolicy {
    pub fn deletes(self) -> bool {
        matches!(self, CleanupPolicy::Delete | CleanupPolicy::CompactDelete)
    }
    pub fn compacts(self) -> bool {
        matches!(self, CleanupPolicy::Compact | CleanupPolicy::CompactDelete)
    }
}

impl std::str::FromStr for CleanupPolicy {
    type Err = Error;
    fn from_str(text: &str) -> Result<CleanupPolicy> {
        match text {
            "delete" => Ok(CleanupPolicy::Delete),
            "compact" => Ok(CleanupPolicy::Compact),
            "compact,delete" | "delete,compact" | "compact_delete" => Ok(CleanupPolicy::CompactDelete),
            other => Err(Error::InvalidConfig {
                field: "cleanup_policy",
                reason: format!("'{other}' is not one of delete, compact, compact,delete"),
            }),
        }
    }
}

/// When an append is acknowledged, and when data reaches the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum FlushPolicy {
    /// Acknowledge after fdatasync. Concurrent appenders share one sync
    /// (group commit). Readers see a batch only once it is durable.
    #[default]
    Durable,
    /// Acknowledge after the write to the page cache; a background flusher
    /// syncs every `interval_ms`, and an appender syncs once `records`
    /// records are unsynced. Readers see a batch as soon as it is written.
    Interval { interval_ms: u64, records: u64 },
}

/// A topic's configuration. Field names follow Kafka's topic configs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopicConfig {
    pub partitions: u32,
    /// Delete closed segments whose newest record is older than this; `None` keeps forever.
    pub retention_ms: Option<u64>,
    /// Delete the oldest closed segments while a partition exceeds this; `None`: no limit.
    pub retention_bytes: Option<u64>,
    /// Roll the active segment when the next batch would make it larger than this.
    pub segment_bytes: u64,
    /// Roll the active segment when its first batch is older than this.
    pub segment_ms: u64,
    pub cleanup_policy: CleanupPolicy,
    /// How long a tombstone stays readable after its timestamp, in a compacted topic.
    pub delete_retention_ms: u64,
    pub flush: FlushPolicy,
    /// Largest accepted batch.
    pub max_batch_bytes: u64,
    /// Bytes of log between two sparse index entries.
    pub index_interval_bytes: u64,
    /// The cleaner compacts this topic's partitions only below the bound
    /// persisted by [`crate::Log::set_cleanable_below`] (a partition without
    /// one is never compacted), in every process that opens the log. For
    /// writers that commit in steps (the dataflow's view changelogs): records
    /// above the last commit must survive until it covers them.
    pub compaction_bound_required: bool,
}

pub const PARTITIONS_MAX: u32 = 10_000;
pub const SEGMENT_BYTES_MIN: u64 = 512;
/// Segment positions are stored as u32 in the offset index.
pub const SEGMENT_BYTES_MAX: u64 = i32::MAX as u64;

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            partitions: 1,
            retention_ms: Some(7 * 24 * 3600 * 1000),
            retention_bytes: None,
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: 24 * 3600 * 1000,
            flush: FlushPolicy::Durable,
            max_batch_bytes: 8 << 20,
            index_interval_bytes: 4096,
            compaction_bound_required: false,
        }
    }
}

impl TopicConfig {
    /// Checks every field; the error names the field and the bound.
    pub fn validate(&self) -> Result<()> {
        fn bad(field: &'static str, reason: String) -> Result<()> {
            Err(Error::InvalidConfig { field, reason })
        }
        if self.partitions == 0 || self.partitions > PARTITIONS_MAX {
            return bad("partitions", format!("must be in 1..={PARTITIONS_MAX}, got {}", self.partitions));
        }
        if self.retention_ms == Some(0) {
            return bad("retention_ms", "must be positive (omit it to keep forever)".into());
        }
        if !(SEGMENT_BYTES_MIN..=SEGMENT_BYTES_MAX).contains(&self.segment_bytes) {
            return bad(
                "segment_bytes",
                format!("must be in {SEGMENT_BYTES_MIN}..={SEGMENT_BYTES_MAX}, got {}", self.segment_bytes),
            );
        }
        if self.segment_ms == 0 {
            return bad("segment_ms", "must be positive".into());
        }
        // Times are compared as i64 milliseconds.
        for (field, value) in [
            ("retention_ms", self.retention_ms.unwrap_or(0)),
            ("segment_ms", self.segment_ms),
            ("delete_retention_ms", self.delete_retention_ms),
            ("flush", if let FlushPolicy::Interval { interval_ms, .. } = self.flush { interval_ms } else { 0 }),
        ] {
            if value > i64::MAX as u64 {
                return bad(field, format!("must be at most {} ms, got {value}", i64::MAX));
            }
        }
        if self.max_batch_bytes == 0 || self.max_batch_bytes > BATCH_BYTES_LIMIT as u64 {
            return bad("max_batch_bytes", format!("must be in 1..={BATCH_BYTES_LIMIT}, got {}", self.max_batch_bytes));
        }
        if self.index_interval_bytes == 0 {
            return bad("index_interval_bytes", "must be positive".into());
        }
        if let FlushPolicy::Interval { interval_ms, records } = self.flush
            && (interval_ms == 0 || records == 0)
        {
            return bad("flush", "interval_ms and records must be positive".into());
        }
        Ok(())
    }
}

/// The Kafka topic settings a [`TopicConfig`] has, by Kafka's names.
pub const KAFKA_SETTINGS: [&str; 10] = [
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "delete.retention.ms",
    "max.message.bytes",
    "index.interval.bytes",
    "flush.messages",
    "flush.ms",
];

impl TopicConfig {
    /// Each of [`KAFKA_SETTINGS`] with its value, as Kafka writes it (-1:
    /// no limit; `flush.messages` 1 for a durable topic, synced on every
    /// append).
    pub fn kafka_entries(&self) -> Vec<(&'static str, String)> {
        let limit = |v: Option<u64>| v.map_or_else(|| "-1".to_owned(), |v| v.to_string());
        let (flush_messages, flush_ms) = match self.flush {
            FlushPolicy::Durable => ("1".to_owned(), "0".to_owned()),
            FlushPolicy::Interval { interval_ms, records } => (records.to_string(), interval_ms.to_string()),
        };
        let policy = match self.cleanup_policy {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactDelete => "compact,delete",
        };
        let values = [
            policy.to_owned(),
            limit(self.retention_ms),
            limit(self.retention_bytes),
            self.segment_bytes.to_string(),
            self.segment_ms.to_string(),
            self.delete_retention_ms.to_string(),
            self.max_batch_bytes.to_string(),
            self.index_interval_bytes.to_string(),
            flush_messages,
            flush_ms,
        ];
        KAFKA_SETTINGS.into_iter().zip(values).collect()
    }

    /// Sets the setting Kafka calls `name` from its text (as CreateTopics
    /// and the config APIs carry it); the config is checked whole by
    /// [`TopicConfig::validate`] after. An unknown name or a value that does
    /// not read is [`Error::InvalidConfig`].
    pub fn set_kafka(&mut self, name: &str, value: &str) -> Result<()> {
        let bad = |reason: String| Error::InvalidConfig {
            field: "kafka setting",
            reason: format!("{name}={value}: {reason}"),
        };
        let number = || value.trim().parse::<i64>().map_err(|_| bad("not an integer".into()));
        let positive = || number().and_then(|n| u64::try_from(n).map_err(|_| bad("must not be negative".into())));
        let limit = || number().map(|n| u64::try_from(n).ok());
        match name {
            "cleanup.policy" => self.cleanup_policy = value.parse().map_err(|e: Error| bad(e.to_string()))?,
            "retention.ms" => self.retention_ms = limit()?,
            "retention.bytes" => self.retention_bytes = limit()?,
            "segment.bytes" => self.segment_bytes = positive()?,
            "segment.ms" => self.segment_ms = positive()?,
            "delete.retention.ms" => self.delete_retention_ms = positive()?,
            "max.message.bytes" => self.max_batch_bytes = positive()?,
            "index.interval.bytes" => self.index_interval_bytes = positive()?,
            "flush.messages" => {
                self.flush = match (positive()?, self.flush) {
                    (1, _) => FlushPolicy::Durable,
                    (records, FlushPolicy::Interval { interval_ms, .. }) => {
                        FlushPolicy::Interval { interval_ms, records }
                    }
                    (records, FlushPolicy::Durable) => FlushPolicy::Interval { interval_ms: 1_000, records },
                }
            }
            "flush.ms" => {
                let interval_ms = positive()?;
                self.flush = match self.flush {
                    FlushPolicy::Interval { records, .. } => FlushPolicy::Interval { interval_ms, records },
                    FlushPolicy::Durable if interval_ms == 0 => FlushPolicy::Durable,
                    FlushPolicy::Durable => FlushPolicy::Interval { interval_ms, records: u64::MAX },
                }
            }
            _ => return Err(bad(format!("not a setting Millpond has (it has {})", KAFKA_SETTINGS.join(", ")))),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_settings_read_back_as_written() {
        let mut config = TopicConfig::default();
        for (name, value) in [
            ("cleanup.policy", "compact,delete"),
            ("retention.ms", "-1"),
            ("retention.bytes", "1048576"),
            ("segment.bytes", "4096"),
            ("max.message.bytes", "2000000"),
            ("flush.messages", "100"),
            ("flush.ms", "50"),
        ] {
            config.set_kafka(name, value).unwrap();
            let entries = config.kafka_entries();
            assert_eq!(entries.iter().find(|(n, _)| *n == name).unwrap().1, value, "{name}");
        }
        config.validate().unwrap();
        assert_eq!(config.flush, FlushPolicy::Interval { interval_ms: 50, records: 100 });
        assert!(config.set_kafka("compression.type", "lz4").unwrap_err().to_string().contains("compression.type"));
        assert!(config.set_kafka("segment.bytes", "-3").is_err());
        assert!(config.set_kafka("retention.ms", "soon").is_err());
        config.set_kafka("flush.messages", "1").unwrap();
        assert_eq!(config.flush, FlushPolicy::Durable);
    }

    #[test]
    fn invalid_configs_name_the_field() {
        let cases = [
            (TopicConfig { partitions: 0, ..Default::default() }, "partitions"),
            (TopicConfig { segment_bytes: 1, ..Default::default() }, "segment_bytes"),
            (TopicConfig { retention_ms: Some(0), ..Default::default() }, "retention_ms"),
            (
                TopicConfig { flush: FlushPolicy::Interval { interval_ms: 0, records: 1 }, ..Default::default() },
                "flush",
            ),
        ];
        for (config, field) in cases {
            let error = config.validate().unwrap_err().to_string();
            assert!(error.contains(field), "{error}");
        }
        TopicConfig::default().validate().unwrap();
    }

    #[test]
    fn json_round_trip_and_unknown_fields() {
        let config = TopicConfig {
            flush: FlushPolicy::Interval { interval_ms: 5, records: 10 },
            cleanup_policy: CleanupPolicy::Compact,
            ..Default::default()
        };
        let text = serde_json::to_string(&config).unwrap();
        assert_eq!(serde_json::from_str::<TopicConfig>(&text).unwrap(), config);
        assert!(serde_json::from_str::<TopicConfig>(r#"{"partitons": 3}"#).is_err());
    }
}
