//! The catalog's Kafka sinks (`CREATE SINK … INTO KAFKA`), each on a thread
//! of its own that follows its view's committed changelog and ships each
//! committed epoch in one Kafka transaction
//! (`millpond_dataflow::KafkaSink`, docs/kafka.md).
//!
//! Invariants: at most one thread of this process runs a sink of a name;
//! a sink dropped from the catalog (or changed) is told to stop, and a new
//! one of the same name fences it in Kafka if it has not stopped yet; a
//! sink that stopped with an error stays stopped, its error kept, until
//! the catalog changes it or the server restarts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use millpond_dataflow::{KafkaSink, SinkStats};

#[derive(Debug)]
struct Running {
    spec: KafkaSink,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<SinkStats, String>>>,
    /// The error it stopped with.
    failure: Option<String>,
}

/// The running sinks of one data directory.
#[derive(Debug)]
pub(crate) struct Sinks {
    data_dir: PathBuf,
    running: Mutex<BTreeMap<String, Running>>,
}

impl Sinks {
    pub(crate) fn new(data_dir: PathBuf) -> Sinks {
        Sinks { data_dir, running: Mutex::new(BTreeMap::new()) }
    }

    /// Runs exactly the sinks of `wanted`: new or changed ones started,
    /// others stopped.
    pub(crate) fn sync(&self, wanted: &[KafkaSink]) {
        let mut running = self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let stale: Vec<String> = running
            .iter()
            .filter(|(name, sink)| !wanted.iter().any(|w| &w.name == *name && *w == sink.spec))
            .map(|(name, _)| name.clone())
            .collect();
        for name in stale {
            let sink = running.remove(&name).expect("listed above");
            // Not joined here (a producer may wait on a broker for a while):
            // it stops at its next look at the flag, or is fenced by its successor.
            sink.stop.store(true, Ordering::Relaxed);
        }
        for spec in wanted {
            if running.contains_key(&spec.name) {
                continue;
            }
            let stop = Arc::new(AtomicBool::new(false));
            let (sink, dir, flag) = (spec.clone(), self.data_dir.clone(), stop.clone());
            let thread = std::thread::Builder::new()
                .name(format!("millpond-sink-{}", spec.name))
                .spawn(move || sink.run(&dir, &flag).map_err(|e| e.to_string()));
            let (thread, failure) = match thread {
                Ok(thread) => (Some(thread), None),
                Err(e) => (None, Some(format!("starting its thread: {e}"))),
            };
            running.insert(spec.name.clone(), Running { spec: spec.clone(), stop, thread, failure });
        }
    }

    /// Each sink's name and, if it stopped with one, its error.
    pub(crate) fn status(&self) -> Vec<(String, Option<String>)> {
        let mut running = self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        running
            .iter_mut()
            .map(|(name, sink)| {
                if sink.thread.as_ref().is_some_and(JoinHandle::is_finished) {
                    let joined = sink.thread.take().expect("finished").join();
                    sink.failure = match joined {
                        Ok(Ok(_)) => None,
                        Ok(Err(e)) => Some(e),
                        Err(_) => Some("its thread panicked".to_owned()),
                    };
                }
                (name.clone(), sink.failure.clone())
            })
            .collect()
    }
}

impl Drop for Sinks {
    fn drop(&mut self) {
        let running = std::mem::take(self.running.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner));
        for sink in running.values() {
            sink.stop.store(true, Ordering::Relaxed);
        }
        for mut sink in running.into_values() {
            if let Some(thread) = sink.thread.take() {
                let _ = thread.join();
            }
        }
    }
}
