//! Priority: the dataflow first. The threads that serve clients (the
//! endpoint's I/O threads) can run at a higher nice value than the
//! runtime's threads (workers, commit, state applier), so that under CPU
//! contention a crowd of subscribers takes what the dataflow leaves,
//! instead of slowing the views they read. The fan-out hubs run at the
//! client threads' nice value ([`fanout_nice`]): below the dataflow, which
//! a hub must never slow (measured: a hub at the runtime's priority took
//! 0.3 of a core beside a saturated dataflow and, with the client threads,
//! cost it 20 % of its events/s with 1000 subscribers), and no higher than
//! the clients, because any thread woken on the worker's core takes its
//! CFS weight's share of it: with hubs at nice 9 and 1000 subscribers the
//! worker kept 0.94-0.95 of its share of the wall time alone, at 19
//! 0.98-1.02, delivering as many changes, and the 100 ms p99 at half load
//! was no different (`docs/performance.md`, stop 31).
//!
//! Invariant: niceness is only ever raised (priority lowered), per thread
//! (Linux applies `setpriority` on a thread id to that thread alone); an
//! unprivileged process may always do that, and a failure is reported, not
//! fatal.

use std::sync::Mutex;
use std::sync::mpsc::SendError;
use std::thread::JoinHandle;

/// The nice value of the client-serving threads unless configured (no change).
pub const WIRE_NICE_DEFAULT: i32 = 0;

/// The nice value `millpond serve` gives its client-serving threads unless
/// told otherwise: the lowest priority. On a machine the dataflow saturates
/// they get about 1.5 % of a contended core (CFS weight 15 against a
/// worker's 1024) and every idle cycle; at nice 10 (weight 110) a crowd of
/// subscribers took a tenth of the worker's core (measured on 2 cores with
/// 1000 subscribers in a drain: the worker's share of the wall time
/// 82-87 % at nice 10, 90-95 % at 19; delivery at half load, with idle CPU,
/// unchanged).
pub const WIRE_NICE_SERVE: i32 = 19;

/// The most I/O threads an endpoint runs.
pub const WIRE_THREADS_MAX: usize = 64;

/// How many I/O threads an endpoint runs beside a dataflow of
/// `dataflow_workers` workers: the cores those workers leave, at least one.
/// A timely worker at saturation wants a core of its own; every busy I/O
/// thread on that core takes its CFS share from it whatever its nice value
/// (measured on 2 cores with 1000 subscribers: two I/O threads cost the
/// dataflow 13-39 % of its events/s, one 5-14 %, and delivered as much).
pub fn wire_threads_default(dataflow_workers: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    cores.saturating_sub(dataflow_workers).clamp(1, WIRE_THREADS_MAX)
}

/// The nice value of the fan-out hubs for client threads at `wire_nice`:
/// the same (0 when they are at 0).
pub fn fanout_nice(wire_nice: i32) -> i32 {
    wire_nice.clamp(0, NICE_MAX)
}

/// The largest nice value (the lowest priority).
const NICE_MAX: i32 = 19;

/// Raises the calling thread's nice value to `nice`; never lowers it
/// ([`millpond_dataflow::lower_current_thread`]).
pub(crate) fn lower_current_thread(nice: i32) {
    if let Err(error) = millpond_dataflow::lower_current_thread(nice) {
        eprintln!("millpond: could not set the nice value of a thread to {nice}: {error}");
    }
}

/// A request to the spawner: a closure that starts a thread and replies.
type SpawnRequest = Box<dyn FnOnce() + Send>;

/// Starts threads at the priority of the thread that made it (the engine's
/// opener): a thread inherits its creator's nice value and may not lower it
/// again, so a thread asked for by a client thread (at the wire's nice)
/// would otherwise run at the wire's priority. The engine starts its hubs
/// and every run of the runtime (restarted when a client creates or drops
/// a view) through it.
#[derive(Debug)]
pub(crate) struct Spawner {
    requests: Mutex<std::sync::mpsc::Sender<SpawnRequest>>,
}

impl Spawner {
    /// A spawner at the calling thread's priority.
    pub(crate) fn new() -> Spawner {
        let (requests, received) = std::sync::mpsc::channel::<SpawnRequest>();
        // Ends when the spawner (and so the sender) is dropped.
        let started = std::thread::Builder::new().name("millpond-spawner".into()).spawn(move || {
            for request in received {
                request();
            }
        });
        if let Err(error) = started {
            eprintln!("millpond: no thread spawner ({error}); threads start at their caller's priority");
        }
        Spawner { requests: Mutex::new(requests) }
    }

    /// Starts `body` on a thread named `name` at the spawner's priority
    /// (or, without a spawner thread, at the caller's).
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        name: String,
        body: impl FnOnce() -> T + Send + 'static,
    ) -> std::io::Result<JoinHandle<T>> {
        let (reply, replied) = std::sync::mpsc::sync_channel(1);
        let request: SpawnRequest = Box::new(move || {
            let _ = reply.send(std::thread::Builder::new().name(name).spawn(body));
        });
        let sent = self.requests.lock().unwrap_or_else(|e| e.into_inner()).send(request);
        if let Err(SendError(request)) = sent {
            request(); // the spawner thread is gone: start it from here
        }
        replied.recv().unwrap_or_else(|_| Err(std::io::Error::other("the thread spawner stopped")))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_wire_takes_the_cores_the_dataflow_leaves_and_at_least_one() {
        let cores = std::thread::available_parallelism().unwrap().get();
        assert_eq!(super::wire_threads_default(cores), 1);
        assert_eq!(super::wire_threads_default(cores + 3), 1);
        assert_eq!(super::wire_threads_default(0), cores.min(super::WIRE_THREADS_MAX));
        if cores > 2 {
            assert_eq!(super::wire_threads_default(1), cores - 1);
        }
    }

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

    #[test]
    fn a_spawned_thread_runs_at_the_spawners_priority_not_its_callers() {
        let own = rustix::process::getpriority_process(None).unwrap();
        let spawner = std::sync::Arc::new(super::Spawner::new());
        let asking = spawner.clone();
        let nice = std::thread::spawn(move || {
            super::lower_current_thread(own.max(0) + 3);
            let spawned = asking.spawn("niced-caller".into(), || {
                rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
            });
            spawned.unwrap().join().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(nice, own, "the spawned thread has the spawner's nice value");
    }
}
