//! The crate's one error type.

use std::path::PathBuf;

/// Everything the dataflow runtime can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("state store at {}: {message}", path.display())]
    Store { path: PathBuf, message: String },
    #[error("keyspace name '{0}' is empty or longer than 255 bytes")]
    BadKeyspaceName(String),
    #[error("the keyspace registry is damaged: {0}")]
    CorruptRegistry(String),
    #[error("state of '{what}' cannot be decoded: {reason}")]
    CorruptState { what: String, reason: String },
    #[error(transparent)]
    Log(#[from] millpond_log::Error),
    #[error("invalid job: {0}")]
    InvalidJob(String),
    #[error("no view named '{0}' has been committed in this data directory")]
    UnknownView(String),
    #[error(
        "view '{view}' was dropped{again} at epoch {epoch}; {what}. Subscribe again for the current contents",
        again = if *recreated { " and created again" } else { "" },
        what = if *retracted {
            "a subscriber's rows were retracted"
        } else {
            "the rows a subscriber holds are no longer the view's (this reader keeps no rows to retract)"
        }
    )]
    ViewDropped { view: String, epoch: u64, recreated: bool, retracted: bool },
    #[error("view '{view}': epoch {epoch} is not available: {reason}")]
    EpochUnavailable { view: String, epoch: u64, reason: String },
    #[error("view '{view}': the changelog is inconsistent at offset {offset}: {reason}")]
    CorruptChangelog { view: String, offset: u64, reason: String },
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{operator}: {source}")]
    Operator {
        operator: String,
        #[source]
        source: Box<Error>,
    },
    #[error("the log's background work failed: {0}; the job stops rather than serve stale views")]
    Background(String),
    #[error(
        "reader '{reader}' of {topic}/{partition}: offsets {from}..{to} were deleted by retention before \
         the reader read them ({lost} records lost to this view). Rerun with --on-retention-gap skip to \
         accept the gap (it is reported), or rebuild the view from what is retained"
    )]
    RetentionGap { reader: String, topic: String, partition: u32, from: u64, to: u64, lost: u64 },
    #[error("worker failed: {0}")]
    Worker(String),
    /// An external Kafka cluster's source or sink failed (`what` names it:
    /// the reader's topic or the sink, and the brokers).
    #[error("{what}: {message}")]
    Kafka { what: String, message: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// `source`, failed in `operator` (a sink, a reader, an operator).
    pub(crate) fn at(operator: impl Into<String>, source: impl Into<Error>) -> Error {
        Error::Operator { operator: operator.into(), source: Box::new(source.into()) }
    }

    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { action, path, source }
    }
}
