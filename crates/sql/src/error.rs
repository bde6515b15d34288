//! The crate's one error type. SQL errors carry where they are: the file
//! (when there is one), line and column, 1-based.
use std::fmt;
use std::sync::Arc;

/// A position in SQL text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    pub file: Option<Arc<str>>,
    pub line: u64,
    pub column: u64,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}:")?;
        }
        write!(f, "{}:{}", self.line, self.column)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Malformed, unsupported or ill-typed SQL, or a statement that cannot be
    /// carried out (a duplicate key, a missing object).
    #[error("{location}: {message}")]
    Sql { location: Location, message: String },
    #[cfg(feature = "runtime")]
    #[error(transparent)]
    Dataflow(#[from] millpond_dataflow::Error),
    #[error("{action} {path}: {source}")]
    Io { action: &'static str, path: String, source: std::io::Error },
    /// The persisted catalog does not read back.
    #[error("catalog record at offset {offset}: {message}")]
    Catalog { offset: u64, message: String },
}

impl Error {
    pub(crate) fn sql(location: Location, message: impl Into<String>) -> Error {
        Error::Sql { location, message: message.into() }
    }
    /// The error with the offending line of `source` and a caret under the
    /// column, as compilers print it.
    pub fn render(&self, source: &str) -> String {
        match self {
            Error::Sql { location, message } if location.line > 0 => {
                // Past the last line (an unexpected end of input): no snippet.
                let Some(line) = source.lines().nth(location.line as usize - 1) else {
                    return format!("error: {self}");
                };
                let gutter = location.line.to_string();
                let pad = " ".repeat(gutter.len());
                let caret = " ".repeat((location.column as usize).saturating_sub(1).min(line.len()));
                format!("error: {message}\n{pad}--> {location}\n{pad} |\n{gutter} | {line}\n{pad} | {caret}^")
            }
            other => format!("error: {other}"),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
