//! Metadata: the one broker (this process, at its advertised address) and
//! the topics clients may read, each partition led by it.
//!
//! Listed: every topic but internal ones (`__` names, whose records only
//! their owner decodes). A topic asked for by name that does not exist is
//! created with [`super::KafkaConfig::auto_create_partitions`] partitions
//! when that is set, the request allows it (v4+; always before) and its
//! name is one clients may create (not internal, a table's, or a view's
//! changelog or dead-letter topic); otherwise it is
//! UNKNOWN_TOPIC_OR_PARTITION.
//!
//! Invariant: a listed partition's leader is [`super::NODE_ID`], the only
//! broker listed, with leader epoch 0 (there are no elections).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use millpond_dataflow::TopicSpec;

use super::Broker;
use super::errors::{WireError, wire};
use super::frame::{Body, FrameError};

/// The cluster id every Metadata names (one broker, one cluster).
const CLUSTER_ID: &str = "millpond";

pub(crate) fn answer(broker: &Broker, request: MetadataRequest, version: i16) -> Result<Body, FrameError> {
    let mut response = MetadataResponse::default();
    let mut node = MetadataResponseBroker::default();
    node.node_id = BrokerId(super::NODE_ID);
    node.host = StrBytes::from_string(broker.advertised.ip().to_string());
    node.port = i32::from(broker.advertised.port());
    response.brokers = vec![node];
    response.cluster_id = Some(StrBytes::from_static_str(CLUSTER_ID));
    response.controller_id = BrokerId(super::NODE_ID);
    let topics = broker.engine.topics();
    let names: Vec<String> = match &request.topics {
        // v0's empty list, and null from v1, ask for every topic.
        None => listed(topics),
        Some(list) if list.is_empty() && version == 0 => listed(topics),
        Some(list) => list.iter().map(|t| t.name.as_ref().map_or_else(String::new, |n| n.0.to_string())).collect(),
    };
    let may_create = version < 4 || request.allow_auto_topic_creation;
    response.topics = names.into_iter().map(|name| describe(broker, name, may_create)).collect();
    Body::encode(&response, version)
}

/// The topics a Metadata for all topics lists.
fn listed(topics: &millpond_dataflow::Topics) -> Vec<String> {
    topics.list().into_iter().filter(|t| !t.starts_with("__")).collect()
}

fn describe(broker: &Broker, name: String, may_create: bool) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.name = Some(TopicName(StrBytes::from_string(name.clone())));
    match partitions(broker, &name, may_create) {
        Ok((count, id)) => {
            topic.topic_id = uuid::Uuid::from_u128(id);
            topic.partitions = (0..count as i32).map(partition).collect();
        }
        Err(error) => topic.error_code = error.code,
    }
    topic
}

/// `name`'s partition count and id, creating it if that is allowed.
fn partitions(broker: &Broker, name: &str, may_create: bool) -> Result<(u32, u128), WireError> {
    let topics = broker.engine.topics();
    if name.starts_with("__") {
        return Err(WireError::new(ResponseError::UnknownTopicOrPartition, "internal topics are not served"));
    }
    if !topics.exists(name) {
        let create = broker.config.auto_create_partitions.filter(|_| may_create);
        let Some(count) = create.filter(|_| crate::engine::client_write_refusal(name).is_none()) else {
            return Err(WireError::new(ResponseError::UnknownTopicOrPartition, format!("no topic {name}")));
        };
        let spec = TopicSpec { partitions: count, compacted: false, compaction_bounded: false };
        topics.ensure(name, spec).map_err(|e| wire(&e))?;
    }
    let count = topics.partitions(name).map_err(|e| wire(&e))?;
    let id = topics.topic_id(name).map_err(|e| wire(&e))?;
    Ok((count, id))
}

fn partition(index: i32) -> MetadataResponsePartition {
    let mut partition = MetadataResponsePartition::default();
    partition.partition_index = index;
    partition.leader_id = BrokerId(super::NODE_ID);
    partition.leader_epoch = 0;
    partition.replica_nodes = vec![BrokerId(super::NODE_ID)];
    partition.isr_nodes = vec![BrokerId(super::NODE_ID)];
    partition
}
