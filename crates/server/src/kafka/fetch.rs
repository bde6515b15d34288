//! Fetch (v4-12): whole stored batches from each partition's fetch offset,
//! served as the log holds them (compressed ones as their producer
//! compressed them), up to the readable end: a topic's high
//! watermark, or for a view's changelog and dead-letter topic the end of
//! its last committed epoch. That end is answered as both the high
//! watermark and the last stable offset, so read_committed and
//! read_uncommitted consumers alike never see a change of an epoch that is
//! not committed (a changelog's uncommitted tail may be cut and rewritten
//! when the runtime restarts).
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

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};

use super::Broker;
use super::errors::{WireError, wire};
use super::frame::{Body, FrameError};

/// The longest a fetch waits for data, whatever it asks.
pub(crate) const FETCH_WAIT_MS_MAX: u64 = 30_000;
/// The longest pause between two looks at the partitions while waiting.
const POLL_PAUSE_MS_MAX: u64 = 5;

pub(crate) async fn answer(broker: Arc<Broker>, request: FetchRequest, version: i16) -> Result<Body, FrameError> {
    let mut response = FetchResponse::default();
    if request.session_id != 0 {
        response.error_code = ResponseError::FetchSessionIdNotFound.code();
        return Body::encode(&response, version);
    }
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0).min(FETCH_WAIT_MS_MAX));
    let deadline = Instant::now() + wait;
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let request = Arc::new(request);
    let mut pause_ms = 1;
    loop {
        let (broker, asked) = (broker.clone(), request.clone());
        let (topics, bytes, failed) =
            tokio::task::spawn_blocking(move || gather(&broker, &asked)).await.map_err(FrameError::join)?;
        if bytes >= min_bytes || failed || Instant::now() >= deadline {
            response.responses = topics;
            return Body::encode(&response, version);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(left.min(Duration::from_millis(pause_ms))).await;
        pause_ms = (pause_ms * 2).min(POLL_PAUSE_MS_MAX);
    }
}

/// Every asked partition's answer, the record bytes in them, and whether
/// any partition failed.
fn gather(broker: &Broker, request: &FetchRequest) -> (Vec<FetchableTopicResponse>, usize, bool) {
    let mut budget = usize::try_from(request.max_bytes).unwrap_or(0);
    let (mut bytes, mut failed) = (0, false);
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.topic.0.to_string();
            let mut answered = FetchableTopicResponse::default();
            answered.topic = topic.topic.clone();
            answered.topic_id = topic.topic_id;
            for asked in &topic.partitions {
                let data = read(broker, &name, asked, if bytes == 0 { usize::MAX } else { budget });
                let size = data.records.as_ref().map_or(0, Bytes::len);
                (bytes, budget, failed) = (bytes + size, budget.saturating_sub(size), failed || data.error_code != 0);
                answered.partitions.push(data);
            }
            answered
        })
        .collect();
    (topics, bytes, failed)
}

/// One partition's answer, with at most `budget` bytes of batches (at
/// least one batch when there is any and the budget is not spent).
fn read(broker: &Broker, topic: &str, asked: &FetchPartition, budget: usize) -> PartitionData {
    let mut data = PartitionData::default();
    data.partition_index = asked.partition;
    data.preferred_read_replica = BrokerId(-1);
    match batches(broker, topic, asked, budget) {
        Ok((records, end, start)) => {
            data.high_watermark = end as i64;
            data.last_stable_offset = end as i64;
            data.log_start_offset = start as i64;
            data.records = Some(records);
        }
        Err((error, end, start)) => {
            data.error_code = error.code;
            data.high_watermark = end.map_or(-1, |e| e as i64);
            data.last_stable_offset = data.high_watermark;
            data.log_start_offset = start.map_or(-1, |s| s as i64);
            data.records = Some(Bytes::new());
        }
    }
    data
}

type Failed = (WireError, Option<u64>, Option<u64>);

/// The batches of `asked` to send, with the readable end and log start.
fn batches(broker: &Broker, topic: &str, asked: &FetchPartition, budget: usize) -> Result<(Bytes, u64, u64), Failed> {
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
    if offset == end || budget == 0 {
        return Ok((Bytes::new(), end, start));
    }
    let max_bytes = usize::try_from(asked.partition_max_bytes).unwrap_or(0).min(budget).max(1);
    let fetch = engine
        .topics()
        .fetch_stored(topic, partition, offset, max_bytes)
        .map_err(|e| (wire(&e), Some(end), Some(start)))?;
    let mut bytes = fetch.into_bytes();
    bytes.truncate(whole_batches_below(&bytes, end));
    Ok((Bytes::from(bytes), end, start))
}

/// The length of the longest prefix of `bytes` made of whole batches that
/// end below `end`.
pub(crate) fn whole_batches_below(bytes: &[u8], end: u64) -> usize {
    let mut at = 0;
    while let Some(header) = bytes.get(at..at + 27) {
        let length = i32::from_be_bytes(header[8..12].try_into().expect("4 bytes"));
        let size = 12 + usize::try_from(length).unwrap_or(usize::MAX - 12);
        let base = u64::from_be_bytes(header[0..8].try_into().expect("8 bytes"));
        let last_delta = u64::try_from(i32::from_be_bytes(header[23..27].try_into().expect("4 bytes"))).unwrap_or(0);
        if at + size > bytes.len() || base + last_delta >= end {
            break;
        }
        at += size;
    }
    debug_assert!(at <= bytes.len());
    at
}
