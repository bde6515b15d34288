//! A view's append thread: worker 0 hands each finished epoch's changelog
//! changes to a thread of the view's own, which encodes and appends them
//! ([`crate::view_sink`]'s `append_changes`) while the worker goes on.
//!
//! Why: the append is mostly memory traffic (the records' encoding into a
//! batch and the kernel's copy of each batch into the page cache, about a
//! fifth of a pass-through view's worker, docs/performance.md stop 40), and
//! it needs nothing of the dataflow but the changes.
//!
//! Invariants:
//! - epochs are appended in the order they are handed over, one at a time,
//!   each whole before the next (one thread per view, a FIFO queue);
//! - each handed-over epoch is answered once, in that order, with the
//!   topic's end after it or the error that stopped it (a panic of the
//!   append included); nothing is appended after an error, nor once the
//!   job has failed elsewhere (those epochs go unanswered: the job ends);
//! - at most [`APPEND_QUEUE_EPOCHS_MAX`] epochs wait: handing over another
//!   blocks the worker until the thread takes one (backpressure, bounded
//!   memory);
//! - dropping it lets the thread finish the epoch in hand (and the ones
//!   queued, unless the job failed) and joins it, so
//!   no append outlives the operator (the runtime closes the log after);
//!   what it appends past the last commit is cut at the next start, as any
//!   uncommitted epoch's records are ([`crate::sink::prepare_topic`]).

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::thread::JoinHandle;
use std::time::Instant;

use timely::scheduling::SyncActivator;

use crate::context::Shared;
use crate::error::Result;
use crate::view_fold::Change;
use crate::view_sink::append_changes;
use crate::{Epoch, Error};

/// Epochs handed over and not yet taken by the thread.
pub(crate) const APPEND_QUEUE_EPOCHS_MAX: usize = 4;

/// The worker's end of a view's append thread.
pub(crate) struct AppendThread {
    epochs: Option<SyncSender<(Epoch, Vec<Change>)>>,
    written: Receiver<(Epoch, Result<u64>)>,
    handle: Option<JoinHandle<()>>,
    /// Handed over and not yet answered, in order.
    in_flight: std::collections::VecDeque<Epoch>,
    topic: String,
}

impl AppendThread {
    /// Starts the thread for changelog `topic`; it activates the sink
    /// operator through `activator` after each epoch it answers.
    pub(crate) fn start(shared: Arc<Shared>, topic: &str, activator: SyncActivator) -> Result<AppendThread> {
        let (epochs, queue) = sync_channel::<(Epoch, Vec<Change>)>(APPEND_QUEUE_EPOCHS_MAX);
        let (answer, written) = std::sync::mpsc::channel();
        let thread_topic = topic.to_owned();
        let handle = std::thread::Builder::new()
            .name("millpond-append".into())
            .spawn(move || {
                // However the thread ends (a panic included), the operator
                // runs once more and finds it gone rather than waiting.
                let wake = Wake(activator);
                for (epoch, changes) in queue {
                    // The job failed elsewhere: nothing more to append.
                    if shared.failed() {
                        return;
                    }
                    let writing = Instant::now();
                    let appended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        append_changes(&shared, &thread_topic, epoch, &changes)
                    }));
                    let end = appended.unwrap_or_else(|_| {
                        Err(Error::Worker(format!("appending epoch {epoch} to {thread_topic} panicked")))
                    });
                    shared.checkpoints.timings.sink_write.record(writing.elapsed());
                    let failed = end.is_err();
                    // The operator may be gone (a failed job): nobody to tell.
                    if answer.send((epoch, end)).is_err() || wake.0.activate().is_err() || failed {
                        return;
                    }
                }
            })
            .map_err(|e| Error::InvalidJob(format!("starting the append thread of {topic}: {e}")))?;
        Ok(AppendThread {
            epochs: Some(epochs),
            written,
            handle: Some(handle),
            in_flight: Default::default(),
            topic: topic.to_owned(),
        })
    }

    /// Hands epoch `epoch`'s changes (sorted, one per row) to the thread.
    pub(crate) fn append(&mut self, epoch: Epoch, changes: Vec<Change>) -> Result<()> {
        assert!(self.in_flight.back().is_none_or(|&last| last < epoch), "epochs are appended in order");
        let epochs = self.epochs.as_ref().expect("the queue is open until drop");
        if epochs.send((epoch, changes)).is_err() {
            return Err(self.failure());
        }
        self.in_flight.push_back(epoch);
        Ok(())
    }

    /// The epochs answered since the last call, in order, each with the
    /// topic's end after it.
    pub(crate) fn written(&mut self) -> Result<Vec<(Epoch, u64)>> {
        let mut done = Vec::new();
        loop {
            match self.written.try_recv() {
                Ok((epoch, end)) => {
                    let expected = self.in_flight.pop_front();
                    assert_eq!(expected, Some(epoch), "epochs are answered in the order handed over");
                    done.push((epoch, end?));
                }
                Err(TryRecvError::Empty) => return Ok(done),
                Err(TryRecvError::Disconnected) if self.in_flight.is_empty() => return Ok(done),
                Err(TryRecvError::Disconnected) => return Err(self.stopped()),
            }
        }
    }

    /// Why the thread stopped taking epochs: the error it answered last
    /// (sent before it stopped), else that it stopped.
    fn failure(&mut self) -> Error {
        while let Ok((_, answer)) = self.written.try_recv() {
            if let Err(e) = answer {
                return e;
            }
        }
        self.stopped()
    }

    fn stopped(&self) -> Error {
        Error::InvalidJob(format!("the append thread of {} stopped", self.topic))
    }
}

/// Activates the operator when dropped.
struct Wake(SyncActivator);

impl Drop for Wake {
    fn drop(&mut self) {
        self.0.activate().ok();
    }
}

impl Drop for AppendThread {
    fn drop(&mut self) {
        drop(self.epochs.take());
        if let Some(handle) = self.handle.take() {
            handle.join().ok();
        }
    }
}
