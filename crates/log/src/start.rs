//! [`Start`]: where a reader of a partition begins — an offset, the log
//! start or end, N records before the end, the first record at or after a
//! time, or a consumer group's committed offset — resolved against the
//! partition as it is now ([`Log::resolve_start`]). `millpond consume` and
//! the server's `COPY topic TO STDOUT` both start readers with it.
//!
//! Invariants: a resolved start lies within the partition's
//! `[low watermark, high watermark]`; an explicit offset outside it is
//! [`Error::OffsetOutOfRange`], never clamped, and so is a group's commit
//! past the end (the topic was re-created or cut); a group's committed offset
//! that retention has passed resolves to the low watermark and says which
//! offsets the group never read ([`Resolved::lost`]).

use std::ops::Range;

use crate::error::{Error, Result};
use crate::log::Log;

/// Where a reader starts in one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// This offset.
    At(u64),
    /// The log start (the low watermark).
    Beginning,
    /// The log end: only records appended from now on.
    End,
    /// This many records before the end (never before the log start).
    BeforeEnd(u64),
    /// The first record whose timestamp is at or after this (ms since epoch).
    Time(i64),
    /// The group's committed offset; the log start if it has none.
    Group(String),
}

impl Start {
    /// Parses `beginning`, `end`, `-N` or an offset.
    pub fn parse(text: &str) -> std::result::Result<Start, String> {
        let number = |digits: &str| {
            digits.parse::<u64>().map_err(|_| format!("'{text}' is not beginning, end, -N or an offset"))
        };
        match text {
            "beginning" => Ok(Start::Beginning),
            "end" => Ok(Start::End),
            _ => match text.strip_prefix('-') {
                Some(digits) => number(digits).map(Start::BeforeEnd),
                None => number(text).map(Start::At),
            },
        }
    }
}

/// A start resolved against a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub offset: u64,
    /// For [`Start::Group`]: the committed offsets that retention deleted
    /// before the group read them (the reader starts after them).
    pub lost: Option<Range<u64>>,
}

impl Log {
    /// Where a reader of `topic`'s `partition` starts for `start`.
    pub fn resolve_start(&self, topic: &str, partition: u32, start: &Start) -> Result<Resolved> {
        let low = self.low_watermark(topic, partition)?;
        let high = self.high_watermark(topic, partition)?;
        let at = |offset| Resolved { offset, lost: None };
        let resolved = match start {
            Start::At(offset) if *offset < low || *offset > high => {
                return Err(Error::OffsetOutOfRange { topic: topic.to_owned(), partition, offset: *offset, low, high });
            }
            Start::At(offset) => at(*offset),
            Start::Beginning => at(low),
            Start::End => at(high),
            Start::BeforeEnd(n) => at(high.saturating_sub(*n).max(low)),
            Start::Time(time_ms) => at(self.offset_for_time(topic, partition, *time_ms)?),
            Start::Group(group) => match self.committed_offset(group, topic, partition) {
                None => at(low),
                Some(committed) if committed < low => Resolved { offset: low, lost: Some(committed..low) },
                // Past the end: the topic was re-created or cut under the
                // group; starting at the end would skip what is there unread.
                Some(committed) if committed > high => {
                    return Err(Error::OffsetOutOfRange {
                        topic: topic.to_owned(),
                        partition,
                        offset: committed,
                        low,
                        high,
                    });
                }
                Some(committed) => at(committed),
            },
        };
        debug_assert!((low..=high).contains(&resolved.offset), "a start within the partition");
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LogOptions, Record, TopicConfig};

    fn log_with(records: usize) -> (tempfile::TempDir, Log) {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), LogOptions::default()).unwrap();
        log.create_topic("t", TopicConfig { partitions: 1, ..TopicConfig::default() }).unwrap();
        for i in 0..records {
            log.append("t", 0, &[Record::new(None, Some(format!("{i}").as_bytes()), i as i64)]).unwrap();
        }
        (dir, log)
    }

    #[test]
    fn starts_parse_and_resolve_within_the_partition() {
        let (_dir, log) = log_with(10);
        assert_eq!(Start::parse("beginning"), Ok(Start::Beginning));
        assert_eq!(Start::parse("-3"), Ok(Start::BeforeEnd(3)));
        assert_eq!(Start::parse("7"), Ok(Start::At(7)));
        assert!(Start::parse("soon").unwrap_err().contains("'soon' is not"));
        let offset = |start: Start| log.resolve_start("t", 0, &start).unwrap().offset;
        assert_eq!(offset(Start::Beginning), 0);
        assert_eq!(offset(Start::End), 10);
        assert_eq!(offset(Start::BeforeEnd(3)), 7);
        assert_eq!(offset(Start::BeforeEnd(300)), 0, "never before the log start");
        assert_eq!(offset(Start::At(10)), 10, "the end itself is a start");
        assert_eq!(offset(Start::Time(i64::MAX)), 10);
        assert!(matches!(log.resolve_start("t", 0, &Start::At(11)), Err(Error::OffsetOutOfRange { high: 10, .. })));
        assert!(matches!(log.resolve_start("t", 1, &Start::End), Err(Error::UnknownPartition { .. })));
    }

    #[test]
    fn a_group_starts_at_its_commit_or_the_log_start() {
        let (_dir, log) = log_with(10);
        let group = Start::Group("g".into());
        assert_eq!(log.resolve_start("t", 0, &group).unwrap(), Resolved { offset: 0, lost: None });
        log.commit_offset("g", "t", 0, 4).unwrap();
        assert_eq!(log.resolve_start("t", 0, &group).unwrap(), Resolved { offset: 4, lost: None });
        // A commit past the end (the topic re-created or cut) is refused, not skipped to the end.
        log.commit_offset("h", "t", 0, 50).unwrap();
        let past = log.resolve_start("t", 0, &Start::Group("h".into()));
        assert!(matches!(past, Err(Error::OffsetOutOfRange { offset: 50, high: 10, .. })), "{past:?}");
        // Retention passes the group's commit: it starts at the log start and says what it lost.
        let config = TopicConfig { segment_bytes: 600, retention_bytes: Some(600), ..TopicConfig::default() };
        log.create_topic("s", config).unwrap();
        for i in 0..100 {
            log.append("s", 0, &[Record::new(None, Some(b"0123456789"), i)]).unwrap();
        }
        log.commit_offset("g", "s", 0, 1).unwrap();
        log.enforce_retention().unwrap();
        let low = log.low_watermark("s", 0).unwrap();
        assert!(low > 1);
        assert_eq!(log.resolve_start("s", 0, &group).unwrap(), Resolved { offset: low, lost: Some(1..low) });
    }
}
