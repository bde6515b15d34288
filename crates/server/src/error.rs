//! The server's one error type.

/// Why a server operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A statement failed (its error names where, for SQL).
    #[error(transparent)]
    Sql(#[from] millpond_sql::Error),
    #[error(transparent)]
    Dataflow(#[from] millpond_dataflow::Error),
    #[error("{action} {path}: {source}")]
    Io { action: &'static str, path: String, source: std::io::Error },
    /// The runtime's run failed.
    #[error("the runtime failed: {0}")]
    Run(String),
    #[error("invalid server configuration: {0}")]
    Config(String),
    /// A topic that clients may not write.
    #[error("topic \"{topic}\": {reason}")]
    TopicRefused { topic: String, reason: String },
    #[error("there is no topic \"{0}\" (create it, or a source of it, first)")]
    NoTopic(String),
    /// A stored record that does not read.
    #[error("{what} at offset {offset}: {message}")]
    Corrupt { what: &'static str, offset: u64, message: String },
}

pub type Result<T> = std::result::Result<T, Error>;
