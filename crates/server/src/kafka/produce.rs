//! Produce (v3+): each partition's data is one magic-2 record batch, which
//! is validated and appended as produced (`Topics::append_produced`: only
//! its base offset changes) and acknowledged as the topic's flush policy
//! says; acks=0 gets no response, acks=1 and acks=-1 (all) are the same
//! on one broker.
//!
//! Refused per partition, with nothing of that partition written: a topic
//! that does not exist (UNKNOWN_TOPIC_OR_PARTITION; Produce creates none),
//! one that clients may not write (TOPIC_AUTHORIZATION_FAILED), data that
//! is not exactly one valid batch (CORRUPT_MESSAGE: bad CRC, magic, record
//! structure or offset deltas, a codec past zstd or a batch that does not
//! decompress, an unkeyed record on a compacted topic), a batch over the topic's limit
//! (MESSAGE_TOO_LARGE). A batch of an idempotent producer (producer id
//! ≥ 0) goes through its sequence checks (`producers`). A request with a
//! transactional id carries transactional batches only, each checked by
//! the coordinator (current producer and epoch, the partition added to the
//! open transaction) and appended under the transactional id's lock; a
//! transactional batch without one is INVALID_TXN_STATE.
//!
//! Invariant: a partition answered without an error holds the batch at the
//! base offset answered.

use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;

use super::Broker;
use super::errors::{WireError, wire};
use super::frame::{Body, FrameError};
use super::producers::BatchProducer;

/// The response, or `None` for acks=0.
pub(crate) fn answer(broker: &Broker, request: ProduceRequest, version: i16) -> Result<Option<Body>, FrameError> {
    let acks = request.acks;
    let refusal = match acks {
        -1..=1 => None,
        _ => Some(WireError::new(ResponseError::InvalidRequiredAcks, format!("acks={acks} (0, 1 or -1)"))),
    };
    let transactional_id = request.transactional_id.as_ref().map(|id| id.0.to_string());
    let mut response = ProduceResponse::default();
    for topic in request.topic_data {
        let name = topic.name.0.to_string();
        let mut answered = TopicProduceResponse::default();
        answered.name = topic.name.clone();
        for data in topic.partition_data {
            let result = match &refusal {
                Some(error) => Err(error.clone()),
                None => append(broker, transactional_id.as_deref(), &name, data.index, data.records),
            };
            answered.partition_responses.push(partition_response(data.index, result));
        }
        response.responses.push(answered);
    }
    if acks == 0 {
        return Ok(None);
    }
    Body::encode(&response, version).map(Some)
}

fn partition_response(index: i32, result: Result<u64, WireError>) -> PartitionProduceResponse {
    let mut response = PartitionProduceResponse::default();
    response.index = index;
    response.log_append_time_ms = -1;
    match result {
        Ok(base_offset) => response.base_offset = base_offset as i64,
        Err(error) => {
            response.error_code = error.code;
            response.base_offset = -1;
            response.error_message = Some(StrBytes::from_string(error.message));
        }
    }
    response
}

/// Appends one partition's batch; its base offset.
fn append(
    broker: &Broker,
    transactional_id: Option<&str>,
    topic: &str,
    partition: i32,
    records: Option<Bytes>,
) -> Result<u64, WireError> {
    if let Some(reason) = crate::engine::client_write_refusal(topic) {
        return Err(WireError::new(ResponseError::TopicAuthorizationFailed, format!("{topic}: {reason}")));
    }
    let partition = u32::try_from(partition)
        .map_err(|_| WireError::new(ResponseError::UnknownTopicOrPartition, format!("partition {partition}")))?;
    let records = records.unwrap_or_default();
    let mut batch = records.to_vec();
    let producer = BatchProducer::of(&batch);
    match (producer, transactional_id) {
        (Some(producer), Some(id)) if producer.transactional => {
            let append = || broker.producers.append(&broker.engine, topic, partition, producer, &mut batch);
            broker.transactions.produce(id, producer, (topic, partition), append)
        }
        (_, Some(id)) => {
            let message = format!("{id}: a transactional producer's batch must be transactional, with a producer id");
            Err(WireError::new(ResponseError::InvalidTxnState, message))
        }
        (Some(producer), None) if producer.transactional => {
            let message = format!("producer {}: a transactional batch needs its transactional id", producer.id);
            Err(WireError::new(ResponseError::InvalidTxnState, message))
        }
        (Some(producer), None) => broker.producers.append(&broker.engine, topic, partition, producer, &mut batch),
        (None, None) => broker.engine.topics().append_produced(topic, partition, &mut batch).map_err(|e| wire(&e)),
    }
}
