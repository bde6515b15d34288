//! SIGINT and SIGTERM end a long-running command cleanly: the first sets
//! the runtime's stop flag (the job stops at the next epoch boundary,
//! commits what it finished and closes the log, so the next start needs no
//! recovery); a second one exits at once with status 130, as a shell
//! expects of a twice-interrupted command (a crash: recovery is exactly
//! once too).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use signal_hook::consts::{SIGINT, SIGTERM};

/// Exit status of a command stopped by a second signal.
const SECOND_SIGNAL_EXIT_CODE: i32 = 130;

/// A stop flag that SIGINT and SIGTERM set.
pub(crate) fn stop_flag() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        // Order matters: the conditional exit sees the flag as the previous
        // signal left it, so only a second signal exits.
        signal_hook::flag::register_conditional_shutdown(signal, SECOND_SIGNAL_EXIT_CODE, stop.clone())
            .and_then(|_| signal_hook::flag::register(signal, stop.clone()))
            .with_context(|| format!("installing the handler of signal {signal}"))?;
    }
    Ok(stop)
}
