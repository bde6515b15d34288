//! Priority: the dataflow first. The threads that serve clients (the
//! endpoint's I/O threads) can run at a higher nice value than the
//! runtime's workers, so that under CPU contention a crowd of subscribers
//! takes what the dataflow leaves, instead of slowing the views they read.
//! The fan-out hubs are not among them: a hub's work is per change, not per
//! subscriber, and it runs at the runtime's priority (`fanout::Spawner`).
//!
//! Invariant: niceness is only ever raised (priority lowered), per thread
//! (Linux applies `setpriority` on a thread id to that thread alone); an
//! unprivileged process may always do that, and a failure is reported, not
//! fatal.

/// The nice value of the client-serving threads unless configured (no change).
pub const WIRE_NICE_DEFAULT: i32 = 0;

/// The largest nice value (the lowest priority).
const NICE_MAX: i32 = 19;

/// Raises the calling thread's nice value to `nice` (0: leaves it).
pub(crate) fn lower_current_thread(nice: i32) {
    if nice <= 0 {
        return;
    }
    let nice = nice.min(NICE_MAX);
    let thread = rustix::thread::gettid();
    if let Err(error) = rustix::process::setpriority_process(Some(thread), nice) {
        eprintln!("millpond: could not set the nice value of a client thread to {nice}: {error}");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_thread_lowers_its_own_priority_only() {
        let before = rustix::process::getpriority_process(None).unwrap();
        let lowered = std::thread::spawn(|| {
            super::lower_current_thread(7);
            rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, before.max(7));
        assert_eq!(rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap(), before);
    }
}
