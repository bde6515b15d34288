//! Committed consumer offsets, kept like Kafka's `__consumer_offsets`: one
//! record per commit in an internal compacted topic, the latest per key wins.
//!
//! Record format (version 1, big-endian):
//! - key: `u16 version=1, u16 len, group utf-8, u16 len, topic utf-8, u32 partition`
//! - value: `u16 version=1, u64 offset, i64 commit_timestamp_ms`
//!
//! A pure codec: the log scans the topic at open and folds each record with
//! [`apply`]. Invariant: the in-memory map equals the fold of the topic's
//! records in offset order.

use std::collections::HashMap;

use crate::batch::Record;
use crate::config::{CleanupPolicy, FlushPolicy, TopicConfig};

const VERSION: u16 = 1;

/// (group, topic, partition) -> next offset to consume.
pub(crate) type GroupOffsets = HashMap<(String, String, u32), u64>;

pub(crate) fn topic_config() -> TopicConfig {
    TopicConfig {
        partitions: 1,
        retention_ms: None,
        cleanup_policy: CleanupPolicy::Compact,
        segment_bytes: 16 << 20,
        flush: FlushPolicy::Durable,
        ..TopicConfig::default()
    }
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    let len = u16::try_from(text.len()).expect("group and topic names are short");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(text.as_bytes());
}

pub(crate) fn encode(group: &str, topic: &str, partition: u32, offset: u64, timestamp_ms: i64) -> Record {
    let mut key = VERSION.to_be_bytes().to_vec();
    put_str(&mut key, group);
    put_str(&mut key, topic);
    key.extend_from_slice(&partition.to_be_bytes());
    let mut value = VERSION.to_be_bytes().to_vec();
    value.extend_from_slice(&offset.to_be_bytes());
    value.extend_from_slice(&timestamp_ms.to_be_bytes());
    Record { key: Some(key), value: Some(value), timestamp_ms, headers: Vec::new() }
}

fn take<'a>(bytes: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
    let (head, rest) = bytes.split_at_checked(len)?;
    *bytes = rest;
    Some(head)
}

fn take_str(bytes: &mut &[u8]) -> Option<String> {
    let len = u16::from_be_bytes(take(bytes, 2)?.try_into().ok()?) as usize;
    String::from_utf8(take(bytes, len)?.to_vec()).ok()
}

pub(crate) fn decode_key(mut key: &[u8]) -> Option<(String, String, u32)> {
    if u16::from_be_bytes(take(&mut key, 2)?.try_into().ok()?) != VERSION {
        return None;
    }
    let group = take_str(&mut key)?;
    let topic = take_str(&mut key)?;
    let partition = u32::from_be_bytes(take(&mut key, 4)?.try_into().ok()?);
    key.is_empty().then_some((group, topic, partition))
}

pub(crate) fn decode_value(mut value: &[u8]) -> Option<u64> {
    if u16::from_be_bytes(take(&mut value, 2)?.try_into().ok()?) != VERSION {
        return None;
    }
    let offset = u64::from_be_bytes(take(&mut value, 8)?.try_into().ok()?);
    take(&mut value, 8)?;
    value.is_empty().then_some(offset)
}

/// Folds one `__consumer_offsets` record into `offsets` (a tombstone
/// removes the key). `Err(())` if the record is not ours: the caller names
/// where it is.
pub(crate) fn apply(offsets: &mut GroupOffsets, key: Option<&[u8]>, value: Option<&[u8]>) -> Result<(), ()> {
    let key = key.and_then(decode_key).ok_or(())?;
    match value {
        None => {
            offsets.remove(&key);
        }
        Some(value) => {
            offsets.insert(key, decode_value(value).ok_or(())?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let record = encode("g", "topic", 7, 42, 1_000);
        assert_eq!(decode_key(record.key.as_deref().unwrap()), Some(("g".into(), "topic".into(), 7)));
        assert_eq!(decode_value(record.value.as_deref().unwrap()), Some(42));
        // Every strict prefix is rejected; every single-byte change decodes
        // to something or nothing, without panicking.
        let (key, value) = (record.key.unwrap(), record.value.unwrap());
        for len in 0..key.len() {
            assert!(decode_key(&key[..len]).is_none(), "key prefix of {len} bytes");
        }
        for len in 0..value.len() {
            assert!(decode_value(&value[..len]).is_none(), "value prefix of {len} bytes");
        }
        for bytes in [key, value] {
            for at in 0..bytes.len() {
                let mut changed = bytes.clone();
                changed[at] ^= 0xff;
                let _ = (decode_key(&changed), decode_value(&changed));
            }
        }
    }
}
