//! ListOffsets (v1-6): per partition, the offset for a timestamp: -2 the
//! log start, -1 the readable end (the high watermark, or a view
//! changelog's committed end, as Fetch serves it; for a read_committed
//! consumer the last stable offset, where an open transaction begins), and a time in ms the
//! first record whose timestamp is at or after it (Kafka's
//! `offsetsForTimes`, from the log's time index), answered with that
//! record's timestamp, or offset -1 when no record is that late.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use millpond_dataflow::Start;

use super::Broker;
use super::errors::{WireError, wire};
use super::frame::{Body, FrameError};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;

pub(crate) fn answer(broker: &Broker, request: ListOffsetsRequest, version: i16) -> Result<Body, FrameError> {
    let mut response = ListOffsetsResponse::default();
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        let mut answered = ListOffsetsTopicResponse::default();
        answered.name = topic.name.clone();
        for asked in &topic.partitions {
            let mut partition = ListOffsetsPartitionResponse::default();
            partition.partition_index = asked.partition_index;
            let committed = request.isolation_level == 1;
            match offset_for(broker, &name, asked.partition_index, asked.timestamp, committed) {
                Ok((offset, timestamp)) => (partition.offset, partition.timestamp) = (offset, timestamp),
                Err(error) => (partition.error_code, partition.offset, partition.timestamp) = (error.code, -1, -1),
            }
            answered.partitions.push(partition);
        }
        response.topics.push(answered);
    }
    Body::encode(&response, version)
}

/// The offset and its record's timestamp (-1 where Kafka answers none).
fn offset_for(
    broker: &Broker,
    topic: &str,
    partition: i32,
    timestamp: i64,
    committed: bool,
) -> Result<(i64, i64), WireError> {
    let unknown = || WireError::new(ResponseError::UnknownTopicOrPartition, format!("{topic}/{partition}"));
    if topic.starts_with("__") {
        return Err(unknown());
    }
    let partition = u32::try_from(partition).map_err(|_| unknown())?;
    let engine = &broker.engine;
    let topics = engine.topics();
    let mut end = engine.readable_end(topic, partition).map_err(|e| wire(&e))?;
    if committed {
        end = end.min(topics.last_stable_offset(topic, partition).map_err(|e| wire(&e))?);
    }
    match timestamp {
        LATEST => Ok((end as i64, -1)),
        EARLIEST => Ok((topics.start_offset(topic, partition).map_err(|e| wire(&e))? as i64, -1)),
        at if at >= 0 => {
            let offset = topics.resolve_start(topic, partition, &Start::Time(at)).map_err(|e| wire(&e))?.offset;
            if offset >= end {
                return Ok((-1, -1));
            }
            let fetch = topics.fetch(topic, partition, offset, 1).map_err(|e| wire(&e))?;
            let record = fetch.records().find(|r| r.offset >= offset);
            Ok(record.map_or((-1, -1), |r| (r.offset as i64, r.timestamp_ms)))
        }
        other => {
            Err(WireError::new(ResponseError::UnsupportedVersion, format!("timestamp {other} (-1, -2 or a time)")))
        }
    }
}
