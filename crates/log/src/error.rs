//! The log's one error type.

use std::io;
use std::path::PathBuf;

use crate::batch::BatchError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("I/O error {action} {}: {source}", path.display())]
    Io { action: &'static str, path: PathBuf, source: io::Error },
    #[error("the data directory {} is in use by another process (lock file {})", dir.display(), dir.join("lock").display())]
    Locked { dir: PathBuf },
    #[error("topic '{0}' already exists")]
    TopicExists(String),
    #[error("unknown topic '{0}'")]
    UnknownTopic(String),
    #[error("invalid topic name '{name}': {reason}")]
    InvalidTopicName { name: String, reason: &'static str },
    #[error("invalid topic config: {field} {reason}")]
    InvalidConfig { field: &'static str, reason: String },
    #[error("topic '{topic}' has no partition {partition} (it has {count})")]
    UnknownPartition { topic: String, partition: u32, count: u32 },
    #[error("offset {offset} is out of range for {topic}/{partition}: the log holds [{low}, {high})")]
    OffsetOutOfRange { topic: String, partition: u32, offset: u64, low: u64, high: u64 },
    #[error("corrupt batch in {topic}/{partition} at offset {offset} (segment {}, byte {position}): {reason}", segment.display())]
    CorruptBatch { topic: String, partition: u32, offset: u64, segment: PathBuf, position: u64, reason: BatchError },
    #[error(
        "corrupt batch in the last segment of {topic}/{partition} (file {}, byte {position}, offset {offset}): {reason}; \
         a valid batch follows it (offset {next_valid_offset}, byte {next_valid_position}), so it is not a torn write and \
         nothing was cut; `millpond topic repair {topic} --partition {partition}` cuts the partition there (offsets from \
         {offset} on are lost)",
        path.display()
    )]
    CorruptSegment {
        topic: String,
        partition: u32,
        path: PathBuf,
        position: u64,
        offset: u64,
        /// Boxed: the error enum stays small on every `Result`'s path.
        reason: Box<BatchError>,
        next_valid_offset: u64,
        next_valid_position: u64,
    },
    #[error("topic '{topic}' is internal (its name starts with '__'): it cannot be {action} from outside its owner")]
    InternalTopic { topic: String, action: &'static str },
    #[error("batch of {size_bytes} bytes exceeds the topic's max_batch_bytes {max_bytes}")]
    BatchTooLarge { size_bytes: usize, max_bytes: usize },
    #[error("invalid produced batch for {topic}/{partition}: {reason}")]
    InvalidBatch { topic: String, partition: u32, reason: BatchError },
    #[error("an append needs at least one record")]
    EmptyBatch,
    #[error("topic '{0}' is compacted: every record needs a key")]
    KeyRequired(String),
    #[error("invalid metadata file {}: {reason}", path.display())]
    BadMetadata { path: PathBuf, reason: String },
    #[error("cannot truncate {topic}/{partition} to offset {offset}: {reason}")]
    BadTruncation { topic: String, partition: u32, offset: u64, reason: String },
    #[error("the log is closed")]
    Closed,
    #[error("invalid consumer group '{group}': it must be 1 to 1024 bytes, it is {bytes}")]
    InvalidGroup { group: String, bytes: usize },
    #[error("offsets {from}..{to} of {topic}/{partition} are missing (a segment file was lost or damaged)")]
    MissingOffsets { topic: String, partition: u32, from: u64, to: u64 },
}

impl Error {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { action, path, source }
    }
}
