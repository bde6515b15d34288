//! The admin APIs Millpond can honour: CreateTopics (partitions and the
//! Kafka-named settings the log has, `TopicConfig::set_kafka`; replication
//! factor 1 or -1, no manual assignments), DeleteTopics and DescribeConfigs
//! (a topic's settings; a broker has none listed).
//!
//! Refused: a name clients may not create or delete (internal, a table's,
//! a view's changelog or dead-letter topic: TOPIC_AUTHORIZATION_FAILED), a
//! topic that a catalog source reads (deleting it would take rows from
//! under its views without their retraction: INVALID_REQUEST, drop the
//! source first), a setting Millpond does not have or a value out of range
//! (INVALID_CONFIG), a replication factor above 1
//! (INVALID_REPLICATION_FACTOR).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, TopicName,
};

use super::Broker;
use super::errors::{WireError, refuse_protected, wire};
use super::frame::{Body, FrameError, text};

/// DescribeConfigs' resource type of a topic (2) and of a broker (4).
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// A config's source: set on the topic (1) or the default (5).
const SOURCE_TOPIC: i8 = 1;

pub(crate) fn create_topics(broker: &Broker, request: &CreateTopicsRequest, version: i16) -> Result<Body, FrameError> {
    let mut response = CreateTopicsResponse::default();
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        let mut result = CreatableTopicResult::default();
        result.name = topic.name.clone();
        let partitions = if topic.num_partitions == -1 {
            broker.config.auto_create_partitions.unwrap_or(1) as i32
        } else {
            topic.num_partitions
        };
        (result.num_partitions, result.replication_factor) = (partitions, 1);
        match create(broker, &name, topic, partitions, request.validate_only) {
            Ok(id) => result.topic_id = uuid::Uuid::from_u128(id),
            Err(error) => (result.error_code, result.error_message) = (error.code, Some(text(&error.message))),
        }
        response.topics.push(result);
    }
    Body::encode(&response, version)
}

/// Creates one topic (or only checks it, `validate_only`); its id.
fn create(
    broker: &Broker,
    name: &str,
    topic: &kafka_protocol::messages::create_topics_request::CreatableTopic,
    partitions: i32,
    validate_only: bool,
) -> Result<u128, WireError> {
    refuse_protected(name)?;
    if !matches!(topic.replication_factor, -1 | 1) {
        let message = format!("replication factor {}: one broker keeps one copy", topic.replication_factor);
        return Err(WireError::new(ResponseError::InvalidReplicationFactor, message));
    }
    if !topic.assignments.is_empty() {
        return Err(WireError::new(ResponseError::InvalidReplicaAssignment, "manual assignments are not served"));
    }
    let partitions = u32::try_from(partitions)
        .map_err(|_| WireError::new(ResponseError::InvalidPartitions, format!("{partitions} partitions")))?;
    let settings: Vec<(String, String)> =
        topic.configs.iter().filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string()))).collect();
    let topics = broker.engine.topics();
    if topics.exists(name) {
        return Err(WireError::new(ResponseError::TopicAlreadyExists, format!("topic {name} exists")));
    }
    if validate_only {
        return Ok(0);
    }
    topics.create_with(name, partitions, &settings).map_err(|e| wire(&e))?;
    topics.topic_id(name).map_err(|e| wire(&e))
}

pub(crate) fn delete_topics(broker: &Broker, request: &DeleteTopicsRequest, version: i16) -> Result<Body, FrameError> {
    let names: Vec<TopicName> = if version >= 6 {
        request.topics.iter().filter_map(|t| t.name.clone()).collect()
    } else {
        request.topic_names.clone()
    };
    let mut response = DeleteTopicsResponse::default();
    for name in names {
        let mut result = DeletableTopicResult::default();
        match delete(broker, &name.0) {
            Ok(id) => result.topic_id = uuid::Uuid::from_u128(id),
            Err(error) => (result.error_code, result.error_message) = (error.code, Some(text(&error.message))),
        }
        result.name = Some(name);
        response.responses.push(result);
    }
    Body::encode(&response, version)
}

fn delete(broker: &Broker, name: &str) -> Result<u128, WireError> {
    refuse_protected(name)?;
    if let Some(source) = broker.engine.source_reading(name) {
        let message = format!("topic {name} is read by source {source}: DROP SOURCE {source} first");
        return Err(WireError::new(ResponseError::InvalidRequest, message));
    }
    let topics = broker.engine.topics();
    let id = topics.topic_id(name).map_err(|e| wire(&e))?;
    topics.delete(name).map_err(|e| wire(&e))?;
    Ok(id)
}

pub(crate) fn describe_configs(
    broker: &Broker,
    request: &DescribeConfigsRequest,
    version: i16,
) -> Result<Body, FrameError> {
    let mut response = DescribeConfigsResponse::default();
    for resource in &request.resources {
        let mut result = DescribeConfigsResult::default();
        (result.resource_type, result.resource_name) = (resource.resource_type, resource.resource_name.clone());
        let name = resource.resource_name.to_string();
        match resource.resource_type {
            RESOURCE_TOPIC if name.starts_with("__") => {
                result.error_code = ResponseError::UnknownTopicOrPartition.code()
            }
            RESOURCE_TOPIC => match broker.engine.topics().kafka_settings(&name) {
                Ok(settings) => {
                    let wanted = |n: &str| {
                        resource.configuration_keys.as_ref().is_none_or(|keys| keys.iter().any(|k| k.as_str() == n))
                    };
                    result.configs =
                        settings.into_iter().filter(|(n, _)| wanted(n)).map(|(n, v)| entry(n, &v)).collect();
                }
                Err(error) => {
                    (result.error_code, result.error_message) = (wire(&error).code, Some(text(&error.to_string())))
                }
            },
            RESOURCE_BROKER => {}
            other => {
                result.error_code = ResponseError::InvalidRequest.code();
                result.error_message =
                    Some(text(&format!("resource type {other}: topics (2) and brokers (4) are served")));
            }
        }
        response.results.push(result);
    }
    Body::encode(&response, version)
}

fn entry(name: &str, value: &str) -> DescribeConfigsResourceResult {
    let mut entry = DescribeConfigsResourceResult::default();
    (entry.name, entry.value, entry.config_source) = (text(name), Some(text(value)), SOURCE_TOPIC);
    entry
}
