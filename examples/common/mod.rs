//! What the tutorial examples share: reading `--data-dir DIR`.

use std::path::PathBuf;

/// The directory given as `--data-dir DIR`, the examples' only argument.
pub(crate) fn data_dir_arg(example: &str) -> Result<PathBuf, String> {
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next()) {
        (Some("--data-dir"), Some(dir)) => Ok(PathBuf::from(dir)),
        _ => Err(format!("usage: {example} --data-dir DIR")),
    }
}
