//! The transaction APIs on the wire (transaction.version 1: the client
//! adds partitions and groups itself): InitProducerId with a
//! transactional id, AddPartitionsToTxn (v0-3), AddOffsetsToTxn,
//! TxnOffsetCommit, EndTxn (v0-3), each answered from the coordinator
//! (`transactions`). A request's failure is its error code; nothing of a
//! failed request is recorded.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse, ProducerId, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};

use super::Broker;
use super::errors::WireError;
use super::frame::{Body, FrameError};

/// InitProducerId: an idempotent producer gets a new id at epoch 0; a
/// transactional one its id's current producer with the epoch bumped.
pub(crate) fn init_producer_id(
    broker: &Broker,
    request: &InitProducerIdRequest,
    version: i16,
) -> Result<Body, FrameError> {
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    let answered = match &request.transactional_id {
        None => broker
            .producers
            .allocate()
            .map(|id| (id, 0))
            .map_err(|e| WireError::new(ResponseError::KafkaStorageError, e.to_string())),
        Some(id) => {
            let current = (request.producer_id.0, request.producer_epoch);
            let timeout_ms = request.transaction_timeout_ms;
            broker.transactions.init(&broker.engine, &broker.producers, id, timeout_ms, current)
        }
    };
    match answered {
        Ok((id, epoch)) => (response.producer_id, response.producer_epoch) = (ProducerId(id), epoch),
        Err(error) => response.error_code = error.code,
    }
    Body::encode(&response, version)
}

/// AddPartitionsToTxn v0-3 (one transaction per request).
pub(crate) fn add_partitions_to_txn(
    broker: &Broker,
    request: &AddPartitionsToTxnRequest,
    version: i16,
) -> Result<Body, FrameError> {
    let id = request.v3_and_below_transactional_id.0.to_string();
    let producer = (request.v3_and_below_producer_id.0, request.v3_and_below_producer_epoch);
    let mut asked = Vec::new();
    for topic in &request.v3_and_below_topics {
        for &partition in &topic.partitions {
            asked.push((topic.name.0.to_string(), partition));
        }
    }
    let valid: Vec<(String, u32)> =
        asked.iter().filter_map(|(t, p)| u32::try_from(*p).ok().map(|p| (t.clone(), p))).collect();
    let codes: Vec<i16> = if valid.len() != asked.len() {
        let bad =
            |p: i32| if p < 0 { ResponseError::UnknownTopicOrPartition } else { ResponseError::OperationNotAttempted };
        asked.iter().map(|(_, p)| bad(*p).code()).collect()
    } else {
        match broker.transactions.add_partitions(&broker.engine, &id, producer, &valid) {
            Ok(results) => results.iter().map(|r| r.as_ref().map_or_else(|e| e.code, |()| 0)).collect(),
            Err(error) => vec![error.code; asked.len()],
        }
    };
    let mut response = AddPartitionsToTxnResponse::default();
    let mut by_topic: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for ((topic, partition), code) in asked.iter().zip(codes) {
        if by_topic.last().is_none_or(|t| t.name.0.as_str() != topic) {
            let mut result = AddPartitionsToTxnTopicResult::default();
            result.name = kafka_protocol::messages::TopicName(super::frame::text(topic));
            by_topic.push(result);
        }
        let mut result = AddPartitionsToTxnPartitionResult::default();
        result.partition_index = *partition;
        result.partition_error_code = code;
        by_topic.last_mut().expect("pushed above").results_by_partition.push(result);
    }
    response.results_by_topic_v3_and_below = by_topic;
    Body::encode(&response, version)
}

/// AddOffsetsToTxn: the group's offsets will commit with the transaction.
pub(crate) fn add_offsets_to_txn(
    broker: &Broker,
    request: &AddOffsetsToTxnRequest,
    version: i16,
) -> Result<Body, FrameError> {
    let producer = (request.producer_id.0, request.producer_epoch);
    let id = request.transactional_id.0.as_str();
    let answered = broker.transactions.add_offsets(&broker.engine, id, producer, request.group_id.0.as_str());
    let mut response = AddOffsetsToTxnResponse::default();
    response.error_code = answered.err().map_or(0, |e| e.code);
    Body::encode(&response, version)
}

/// TxnOffsetCommit: offsets held until the transaction ends.
pub(crate) fn txn_offset_commit(
    broker: &Broker,
    request: &TxnOffsetCommitRequest,
    version: i16,
) -> Result<Body, FrameError> {
    let producer = (request.producer_id.0, request.producer_epoch);
    let mut offsets = Vec::new();
    let mut invalid = false;
    for topic in &request.topics {
        for partition in &topic.partitions {
            match (u32::try_from(partition.partition_index), u64::try_from(partition.committed_offset)) {
                (Ok(p), Ok(offset)) if !topic.name.0.starts_with("__") => {
                    offsets.push((topic.name.0.to_string(), p, offset));
                }
                _ => invalid = true,
            }
        }
    }
    let group = request.group_id.0.as_str();
    let fenced = broker.groups.may_commit_in_txn(group, request.generation_id, &request.member_id);
    let code = if invalid {
        ResponseError::InvalidCommitOffsetSize.code()
    } else if let Some(error) = fenced {
        error.code()
    } else {
        let id = request.transactional_id.0.as_str();
        broker.transactions.commit_offsets(id, producer, group, &offsets).err().map_or(0, |e| e.code)
    };
    let mut response = TxnOffsetCommitResponse::default();
    for topic in &request.topics {
        let mut answered = TxnOffsetCommitResponseTopic::default();
        answered.name = topic.name.clone();
        for partition in &topic.partitions {
            let mut result = TxnOffsetCommitResponsePartition::default();
            result.partition_index = partition.partition_index;
            result.error_code = code;
            answered.partitions.push(result);
        }
        response.topics.push(answered);
    }
    Body::encode(&response, version)
}

/// EndTxn: commit or abort; answered after the markers are written.
pub(crate) fn end_txn(broker: &Broker, request: &EndTxnRequest, version: i16) -> Result<Body, FrameError> {
    let producer = (request.producer_id.0, request.producer_epoch);
    let id = request.transactional_id.0.as_str();
    let answered = broker.transactions.end(&broker.engine, id, producer, request.committed);
    let mut response = EndTxnResponse::default();
    response.error_code = answered.err().map_or(0, |e| e.code);
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    Body::encode(&response, version)
}
