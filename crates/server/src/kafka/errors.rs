//! Kafka's error code for each way a request on the log fails, with the
//! message Kafka clients print beside it (Produce and others carry it).

use kafka_protocol::ResponseError;
use millpond_dataflow::{Error, LogError};

/// A request's failure on one topic or partition, as the wire says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireError {
    pub(crate) code: i16,
    pub(crate) message: String,
}

impl WireError {
    pub(crate) fn new(error: ResponseError, message: impl Into<String>) -> WireError {
        WireError { code: error.code(), message: message.into() }
    }
}

/// The code of a log operation's error.
pub(crate) fn code_of(error: &Error) -> ResponseError {
    match error {
        Error::Log(log) => match log {
            LogError::UnknownTopic(_) | LogError::UnknownPartition { .. } => ResponseError::UnknownTopicOrPartition,
            LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
            LogError::InvalidBatch { .. } | LogError::KeyRequired(_) | LogError::EmptyBatch => {
                ResponseError::CorruptMessage
            }
            LogError::BatchTooLarge { .. } => ResponseError::MessageTooLarge,
            LogError::InvalidTopicName { .. } => ResponseError::InvalidTopicException,
            LogError::InvalidConfig { .. } => ResponseError::InvalidConfig,
            LogError::TopicExists(_) => ResponseError::TopicAlreadyExists,
            LogError::InternalTopic { .. } => ResponseError::TopicAuthorizationFailed,
            LogError::Io { .. }
            | LogError::CorruptBatch { .. }
            | LogError::CorruptSegment { .. }
            | LogError::MissingOffsets { .. } => ResponseError::KafkaStorageError,
            _ => ResponseError::UnknownServerError,
        },
        _ => ResponseError::UnknownServerError,
    }
}

/// The wire form of a log operation's error.
pub(crate) fn wire(error: &Error) -> WireError {
    WireError::new(code_of(error), error.to_string())
}

/// TOPIC_AUTHORIZATION_FAILED for a topic whose partitions and settings
/// are the server's alone (internal, a table's, a view's changelog or
/// dead-letter topic), naming why.
pub(crate) fn refuse_protected(name: &str) -> Result<(), WireError> {
    match crate::engine::client_write_refusal(name) {
        Some(reason) => Err(WireError::new(ResponseError::TopicAuthorizationFailed, format!("{name}: {reason}"))),
        None => Ok(()),
    }
}
