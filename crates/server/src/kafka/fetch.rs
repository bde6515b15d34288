//! Fetch (v4-12): whole stored batches from each partition's fetch offset,
//! served as the log holds them (compressed ones as their producer
//! compressed them), up to the readable end: a topic's high
//! watermark, or for a view's changelog and dead-letter topic the end of
//! its last committed epoch (answered as the high watermark, so no
//! consumer sees a change of an epoch that is not committed: a changelog's
//! uncommitted tail may be cut and rewritten when the runtime restarts).
//!
//! Transactions: a read_uncommitted consumer (isolation level 0) reads to
//! that end, markers and aborted transactions included, as Kafka serves
//! them. A read_committed one (level 1) reads to the last stable offset
//! (the first offset of an open transaction), and is sent the aborted
//! transactions that overlap what it may read, which its client skips
//! (with the markers). The last stable offset is answered for both.
//!
//! Long polling: the answer waits until at least `min_bytes` are readable,
//! a partition has an error, or `max_wait_ms` (capped at
//! [`FETCH_WAIT_MS_MAX`]) has passed, looking again every few
//! milliseconds. Fetch sessions are not kept: every answer names session 0
//! (Kafka's "no session"), so clients send full fetches; a request naming
//! a session is answered FETCH_SESSION_ID_NOT_FOUND.
//!
//! Invariants: a batch is sent whole or not at all, and no batch ends past
//! the readable end; the response's partitions hold at most about
//! `max_bytes` (the first batch found is sent even if larger, as Kafka
//! does, so a large batch never blocks a consumer).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{AbortedTransaction, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, ProducerId};
use kafka_protocol::protocol::StrBytes;
use millpond_dataflow::{AbortedTxn, StoredSlice};

use super::Broker;
use super::errors::{WireError, wire};
use super::frame::{Body, FrameError};

/// The longest a fetch waits for data, whatever it asks.
pub(crate) const FETCH_WAIT_MS_MAX: u64 = 30_000;
/// The longest pause between two looks at the partitions while waiting.
const POLL_PAUSE_MS_MAX: u64 = 5;

pub(crate) async fn answer(broker: Arc<Broker>, request: FetchRequest, version: i16) -> Result<Body, FrameError> {
    if request.session_id != 0 {
        return Ok(encode(ResponseError::FetchSessionIdNotFound.code(), Vec::new(), version));
    }
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0).min(FETCH_WAIT_MS_MAX));
    let deadline = Instant::now() + wait;
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let request = Arc::new(request);
    let mut pause_ms = 1;
    loop {
        let (broker, asked) = (broker.clone(), request.clone());
        let (topics, bytes, failed) =
            tokio::task::spawn_blocking(move || gather(&broker, &asked)).await.map_err(super::frame::join)?;
        if bytes >= min_bytes || failed || Instant::now() >= deadline {
            return Ok(encode(0, topics, version));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(Duration::from_millis(pause_ms))).await;
        pause_ms = (pause_ms * 2).min(POLL_PAUSE_MS_MAX);
    }
}

/// A topic's answer: its name and each asked partition's answer (every
/// field but the records) with the stored batches to send as its records.
type TopicAnswer<R = StoredSlice> = (StrBytes, Vec<(PartitionData, Option<R>)>);

/// Every asked partition's answer, the record bytes in them, and whether
/// any partition failed.
fn gather(broker: &Broker, request: &FetchRequest) -> (Vec<TopicAnswer>, usize, bool) {
    let mut budget = usize::try_from(request.max_bytes).unwrap_or(0);
    let (mut bytes, mut failed) = (0, false);
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.topic.0.to_string();
            let partitions = topic
                .partitions
                .iter()
                .map(|asked| {
                    let allowed = if bytes == 0 { usize::MAX } else { budget };
                    let (data, stored) = read(broker, &name, asked, allowed, request.isolation_level == 1);
                    let size = stored.as_ref().map_or(0, |s| s.len() as usize);
                    (bytes, budget, failed) =
                        (bytes + size, budget.saturating_sub(size), failed || data.error_code != 0);
                    (data, stored)
                })
                .collect();
            (topic.topic.0.clone(), partitions)
        })
        .collect();
    (topics, bytes, failed)
}

/// One partition's answer, with at most `budget` bytes of batches (at
/// least one batch when there is any and the budget is not spent).
fn read(
    broker: &Broker,
    topic: &str,
    asked: &FetchPartition,
    budget: usize,
    committed: bool,
) -> (PartitionData, Option<StoredSlice>) {
    let mut data = PartitionData::default();
    data.partition_index = asked.partition;
    data.preferred_read_replica = BrokerId(-1);
    data.records = None;
    match batches(broker, topic, asked, budget, committed) {
        Ok(found) => {
            data.high_watermark = found.end as i64;
            data.last_stable_offset = found.stable as i64;
            data.log_start_offset = found.start as i64;
            data.aborted_transactions = found.aborted.map(|aborted| {
                aborted
                    .into_iter()
                    .map(|a| {
                        let mut txn = AbortedTransaction::default();
                        txn.producer_id = ProducerId(a.producer_id);
                        txn.first_offset = a.first_offset as i64;
                        txn
                    })
                    .collect()
            });
            (data, found.stored)
        }
        Err((error, end, start)) => {
            data.error_code = error.code;
            data.high_watermark = end.map_or(-1, |e| e as i64);
            data.last_stable_offset = data.high_watermark;
            data.log_start_offset = start.map_or(-1, |s| s as i64);
            (data, None)
        }
    }
}

type Failed = (WireError, Option<u64>, Option<u64>);

/// What a partition's answer holds.
struct Found {
    stored: Option<StoredSlice>,
    /// The readable end (answered as the high watermark).
    end: u64,
    /// The last stable offset.
    stable: u64,
    start: u64,
    /// Aborted transactions to send (read_committed only).
    aborted: Option<Vec<AbortedTxn>>,
}

/// Where the batches of `asked` to send lie, with the readable end, the
/// last stable offset, the log start, and for a read_committed consumer
/// the aborted transactions that overlap them.
fn batches(
    broker: &Broker,
    topic: &str,
    asked: &FetchPartition,
    budget: usize,
    committed: bool,
) -> Result<Found, Failed> {
    let unknown = || (WireError::new(ResponseError::UnknownTopicOrPartition, topic.to_owned()), None, None);
    if topic.starts_with("__") {
        return Err(unknown());
    }
    let partition = u32::try_from(asked.partition).map_err(|_| unknown())?;
    let engine = &broker.engine;
    let end = engine.readable_end(topic, partition).map_err(|e| (wire(&e), None, None))?;
    let start = engine.topics().start_offset(topic, partition).map_err(|e| (wire(&e), None, None))?;
    let offset = u64::try_from(asked.fetch_offset).unwrap_or(u64::MAX);
    if offset < start || offset > end {
        let message = format!("offset {} of {topic}/{partition}: it holds {start}..{end}", asked.fetch_offset);
        return Err((WireError::new(ResponseError::OffsetOutOfRange, message), Some(end), Some(start)));
    }
    let failed = |e: millpond_dataflow::Error| (wire(&e), Some(end), Some(start));
    let stable = engine.topics().last_stable_offset(topic, partition).map_err(failed)?.min(end);
    let readable = if committed { stable } else { end };
    let mut found = Found { stored: None, end, stable, start, aborted: committed.then(Vec::new) };
    if offset >= readable || budget == 0 {
        return Ok(found);
    }
    let max_bytes = usize::try_from(asked.partition_max_bytes).unwrap_or(0).min(budget).max(1);
    let fetch = engine.topics().fetch_slice(topic, partition, offset, max_bytes, readable).map_err(failed)?;
    found.stored = fetch.slice;
    if committed && found.stored.is_some() {
        let to = fetch.next_offset.min(readable);
        found.aborted = Some(engine.topics().aborted_transactions(topic, partition, offset, to).map_err(failed)?);
    }
    Ok(found)
}

/// The stored bytes a partition's answer carries as its records.
trait Records {
    fn records_len(&self) -> usize;
}

impl Records for StoredSlice {
    fn records_len(&self) -> usize {
        self.len() as usize
    }
}

/// The Fetch response body, encoded by hand so that each partition's
/// records are stored bytes sent after the encoded bytes before them
/// (the answer's `records` fields are not read). Byte for byte what
/// kafka-protocol encodes with those records in place (a test checks every
/// version): throttle time 0, session 0, no aborted transactions, no
/// preferred replica, no tagged fields.
fn encode_parts<R: Records>(error_code: i16, topics: Vec<TopicAnswer<R>>, version: i16) -> (BytesMut, Vec<(usize, R)>) {
    debug_assert!((4..=12).contains(&version));
    let flexible = version >= 12;
    let (mut bytes, mut stored) = (BytesMut::new(), Vec::new());
    bytes.put_i32(0); // throttle_time_ms
    if version >= 7 {
        bytes.put_i16(error_code);
        bytes.put_i32(0); // session_id
    }
    put_length(&mut bytes, topics.len(), flexible);
    for (name, partitions) in topics {
        put_string(&mut bytes, &name, flexible);
        put_length(&mut bytes, partitions.len(), flexible);
        for (data, records) in partitions {
            put_partition(&mut bytes, &data, records.as_ref().map_or(0, R::records_len), version);
            stored.extend(records.map(|records| (bytes.len(), records)));
            put_tags(&mut bytes, flexible);
        }
        put_tags(&mut bytes, flexible);
    }
    put_tags(&mut bytes, flexible);
    (bytes, stored)
}

/// The Fetch response body around its stored batches.
fn encode(error_code: i16, topics: Vec<TopicAnswer>, version: i16) -> Body {
    let (bytes, stored) = encode_parts(error_code, topics, version);
    Body::with_stored(bytes, stored)
}

/// A partition's fields up to and including its records' length.
fn put_partition(bytes: &mut BytesMut, data: &PartitionData, records_len: usize, version: i16) {
    let flexible = version >= 12;
    bytes.put_i32(data.partition_index);
    bytes.put_i16(data.error_code);
    bytes.put_i64(data.high_watermark);
    bytes.put_i64(data.last_stable_offset);
    if version >= 5 {
        bytes.put_i64(data.log_start_offset);
    }
    put_aborted(bytes, data.aborted_transactions.as_deref(), flexible);
    if version >= 11 {
        bytes.put_i32(data.preferred_read_replica.0);
    }
    put_length(bytes, records_len, flexible);
}

/// The aborted transactions: a nullable array of (producer id, first
/// offset), null for a read_uncommitted consumer (as Kafka sends).
fn put_aborted(bytes: &mut BytesMut, aborted: Option<&[AbortedTransaction]>, flexible: bool) {
    let Some(aborted) = aborted else {
        if flexible {
            put_varint(bytes, 0);
        } else {
            bytes.put_i32(-1);
        }
        return;
    };
    put_length(bytes, aborted.len(), flexible);
    for txn in aborted {
        bytes.put_i64(txn.producer_id.0);
        bytes.put_i64(txn.first_offset);
        put_tags(bytes, flexible);
    }
}

/// An array's or a bytes field's length: INT32 before the flexible
/// versions, an unsigned varint of length + 1 from them.
fn put_length(bytes: &mut BytesMut, len: usize, flexible: bool) {
    if flexible {
        put_varint(bytes, u32::try_from(len + 1).expect("a response field of less than 4 GiB"));
    } else {
        bytes.put_i32(i32::try_from(len).expect("a response field of less than 2 GiB"));
    }
}

/// A string: its length as INT16 before the flexible versions, as an
/// unsigned varint of length + 1 from them; then its bytes. A topic name
/// is at most 249 bytes (the log refuses longer ones).
fn put_string(bytes: &mut BytesMut, text: &str, flexible: bool) {
    if flexible {
        put_varint(bytes, u32::try_from(text.len() + 1).expect("a short string"));
    } else {
        bytes.put_i16(i16::try_from(text.len()).expect("a short string"));
    }
    bytes.put_slice(text.as_bytes());
}

fn put_varint(bytes: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        bytes.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    bytes.put_u8(value as u8);
}

/// No tagged fields (flexible versions only).
fn put_tags(bytes: &mut BytesMut, flexible: bool) {
    if flexible {
        bytes.put_u8(0);
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::messages::FetchResponse;
    use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
    use kafka_protocol::protocol::Encodable;
    use proptest::prelude::*;

    use super::*;

    impl Records for Bytes {
        fn records_len(&self) -> usize {
            self.len()
        }
    }

    /// Inserts each stored piece at its position, as `send` writes them.
    fn joined(bytes: &[u8], stored: &[(usize, Bytes)]) -> Vec<u8> {
        let (mut out, mut at) = (Vec::new(), 0);
        for (position, records) in stored {
            out.extend_from_slice(&bytes[at..*position]);
            out.extend_from_slice(records);
            at = *position;
        }
        out.extend_from_slice(&bytes[at..]);
        out
    }

    type Aborted = Option<Vec<(i64, i64)>>;

    fn partition_strategy() -> impl Strategy<Value = (i32, i16, i64, i64, Option<Vec<u8>>, Aborted)> {
        (
            any::<i32>(),
            any::<i16>(),
            any::<i64>(),
            any::<i64>(),
            proptest::option::of(prop::collection::vec(any::<u8>(), 0..300)),
            proptest::option::of(prop::collection::vec((any::<i64>(), any::<i64>()), 0..4)),
        )
    }

    proptest! {
        /// The hand encoding with its stored pieces put in place is byte for
        /// byte kafka-protocol's encoding of the same answer, at every
        /// served version.
        #[test]
        fn the_hand_encoding_is_kafka_protocols(
            version in 4i16..=12,
            error_code in any::<i16>(),
            topics in prop::collection::vec(("[a-z._-]{1,200}", prop::collection::vec(partition_strategy(), 0..4)), 0..4),
        ) {
            let error_code = if version >= 7 { error_code } else { 0 };
            let mut expected = FetchResponse::default();
            expected.error_code = error_code;
            let mut answers = Vec::new();
            for (name, partitions) in &topics {
                let mut topic = FetchableTopicResponse::default();
                topic.topic = kafka_protocol::messages::TopicName(StrBytes::from_string(name.clone()));
                let mut answered = Vec::new();
                for (index, error, high, stable, records, aborted) in partitions {
                    let mut data = PartitionData::default();
                    data.partition_index = *index;
                    data.error_code = *error;
                    data.high_watermark = *high;
                    data.last_stable_offset = *stable;
                    data.log_start_offset = if version >= 5 { stable / 2 } else { -1 };
                    data.preferred_read_replica = BrokerId(-1);
                    data.aborted_transactions = aborted.as_ref().map(|list| {
                        list.iter()
                            .map(|&(producer, first)| {
                                let mut txn = AbortedTransaction::default();
                                (txn.producer_id, txn.first_offset) = (ProducerId(producer), first);
                                txn
                            })
                            .collect()
                    });
                    let records = records.clone().map(Bytes::from);
                    data.records = Some(records.clone().unwrap_or_default());
                    topic.partitions.push(data.clone());
                    data.records = None;
                    answered.push((data, records));
                }
                expected.responses.push(topic);
                answers.push((StrBytes::from_string(name.clone()), answered));
            }
            let mut reference = BytesMut::new();
            expected.encode(&mut reference, version).unwrap();
            let (bytes, stored) = encode_parts(error_code, answers, version);
            prop_assert_eq!(joined(&bytes, &stored), reference.to_vec());
        }
    }
}
