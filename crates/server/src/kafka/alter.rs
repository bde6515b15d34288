//! Changes to topics that exist: CreatePartitions (a topic grows, never
//! shrinks; the new partitions start empty and keys route over the new
//! count from then on, as in Kafka) and IncrementalAlterConfigs (SET and
//! DELETE of the Kafka-named settings the log has, in effect for the next
//! append, retention pass and compaction).
//!
//! Refused: a name clients may not change (internal, a table's, a view's
//! changelog or dead-letter topic: TOPIC_AUTHORIZATION_FAILED); partitions
//! for a topic a catalog source reads (its reader was planned over the
//! partitions it has; records routed to new ones would never reach its
//! views: INVALID_REQUEST, naming the source); a count not above the
//! current one (INVALID_PARTITIONS); manual assignments
//! (INVALID_REPLICA_ASSIGNMENT); a setting Millpond does not have, a value
//! out of range, `cleanup.policy` changed (fixed at creation), APPEND or
//! SUBTRACT (for list settings, of which Millpond has none it may change):
//! INVALID_CONFIG; a broker's settings (INVALID_REQUEST: it has none).
//!
//! Invariant: every resource of a request is answered, in order; a
//! validate_only request changes nothing.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};

use super::Broker;
use super::errors::{WireError, refuse_protected, wire};
use super::frame::{Body, FrameError, text};

/// IncrementalAlterConfigs' resource types: a topic (2), a broker (4).
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Its operations: SET (0), DELETE (1), APPEND (2), SUBTRACT (3).
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

pub(crate) fn create_partitions(
    broker: &Broker,
    request: &CreatePartitionsRequest,
    version: i16,
) -> Result<Body, FrameError> {
    let mut response = CreatePartitionsResponse::default();
    for topic in &request.topics {
        let mut result = CreatePartitionsTopicResult::default();
        result.name = topic.name.clone();
        let assigned = topic.assignments.as_ref().is_some_and(|a| !a.is_empty());
        if let Err(error) = grow(broker, &topic.name.0, topic.count, assigned, request.validate_only) {
            (result.error_code, result.error_message) = (error.code, Some(text(&error.message)));
        }
        response.results.push(result);
    }
    Body::encode(&response, version)
}

/// Grows one topic to `count` partitions (or only checks that it may).
fn grow(broker: &Broker, name: &str, count: i32, assigned: bool, validate_only: bool) -> Result<(), WireError> {
    refuse_protected(name)?;
    if assigned {
        return Err(WireError::new(ResponseError::InvalidReplicaAssignment, "manual assignments are not served"));
    }
    if let Some(source) = broker.engine.source_reading(name) {
        let message = format!(
            "topic {name} is read by source {source}, planned over the partitions it has: \
             DROP SOURCE {source} first, or create a topic with more partitions"
        );
        return Err(WireError::new(ResponseError::InvalidRequest, message));
    }
    let topics = broker.engine.topics();
    let current = topics.partitions(name).map_err(|e| wire(&e))?;
    let max = millpond_dataflow::PARTITIONS_MAX;
    let count = u32::try_from(count).ok().filter(|c| (current + 1..=max).contains(c)).ok_or_else(|| {
        let message = format!("{name} has {current} partitions; asked for {count} (more, and at most {max})");
        WireError::new(ResponseError::InvalidPartitions, message)
    })?;
    if validate_only {
        return Ok(());
    }
    topics.add_partitions(name, count).map_err(|e| wire(&e))
}

pub(crate) fn incremental_alter_configs(
    broker: &Broker,
    request: &IncrementalAlterConfigsRequest,
    version: i16,
) -> Result<Body, FrameError> {
    let mut response = IncrementalAlterConfigsResponse::default();
    for resource in &request.resources {
        let mut result = AlterConfigsResourceResponse::default();
        (result.resource_type, result.resource_name) = (resource.resource_type, resource.resource_name.clone());
        if let Err(error) = alter(broker, resource, request.validate_only) {
            (result.error_code, result.error_message) = (error.code, Some(text(&error.message)));
        }
        response.responses.push(result);
    }
    Body::encode(&response, version)
}

/// Applies one resource's changes (or only checks them).
fn alter(broker: &Broker, resource: &AlterConfigsResource, validate_only: bool) -> Result<(), WireError> {
    let name = resource.resource_name.to_string();
    match resource.resource_type {
        RESOURCE_TOPIC => {}
        RESOURCE_BROKER => {
            let message = "a broker's settings are Millpond's command-line flags, not changed over the wire";
            return Err(WireError::new(ResponseError::InvalidRequest, message));
        }
        other => {
            let message = format!("resource type {other}: topics (2) are altered here");
            return Err(WireError::new(ResponseError::InvalidRequest, message));
        }
    }
    refuse_protected(&name)?;
    let changes = resource
        .configs
        .iter()
        .map(|config| match config.config_operation {
            OP_SET => {
                Ok((config.name.to_string(), Some(config.value.as_ref().map_or_else(String::new, |v| v.to_string()))))
            }
            OP_DELETE => Ok((config.name.to_string(), None)),
            op => {
                let message = format!("{}: operation {op} (APPEND and SUBTRACT are for list settings)", config.name);
                Err(WireError::new(ResponseError::InvalidConfig, message))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    broker.engine.topics().alter_kafka_settings(&name, &changes, validate_only).map_err(|e| wire(&e))
}
