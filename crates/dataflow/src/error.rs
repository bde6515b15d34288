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
    #[error("worker failed: {0}")]
    Worker(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { action, path, source }
    }
}
