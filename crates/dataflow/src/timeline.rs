//! The epochs of a run in time. The run's first epoch lasts at most
//! [`FIRST_EPOCH_MS_MAX`]; after it the clock starts an epoch every
//! `interval_ms`. A source that reads its limit of records in one epoch
//! ([`crate::RuntimeConfig::epoch_records_max`]) closes that epoch early,
//! and the epochs after it follow the clock again, numbered one further
//! on. So a backlog is read in bounded epochs: what an epoch holds
//! downstream (stashes, overlays of uncommitted writes, a join's output)
//! follows the limit, not how fast the sources read.
//!
//! Invariants:
//! - [`Timeline::epoch_now`] never decreases;
//! - an epoch is closed early at most once, and only while it is the
//!   current one; each early close moves every later epoch one on;
//! - [`Timeline::epoch_end`] of an epoch that ended never changes
//!   (exactly, for epochs after the oldest of the last
//!   [`EARLY_CLOSES_KEPT`] early closes).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::Epoch;

/// The longest first epoch of a run.
pub(crate) const FIRST_EPOCH_MS_MAX: u64 = 100;

/// Early closes remembered with their time, for the end of each epoch
/// (older ones are counted only).
pub(crate) const EARLY_CLOSES_KEPT: usize = 4096;

/// A run's epochs on its clock.
#[derive(Debug)]
pub(crate) struct Timeline {
    clock: Clock,
    first: Epoch,
    first_ms: u64,
    interval_ms: u64,
    /// Early closes so far: added to the clock's epoch.
    shift: AtomicU64,
    early: Mutex<EarlyCloses>,
}

/// Time since the run's start: the real clock, or one a test moves.
#[derive(Debug)]
enum Clock {
    Real(Instant),
    #[cfg(test)]
    Manual(std::sync::Arc<AtomicU64>),
}

impl Clock {
    fn elapsed(&self) -> Duration {
        match self {
            Clock::Real(start) => start.elapsed(),
            #[cfg(test)]
            Clock::Manual(ms) => Duration::from_millis(ms.load(Ordering::Acquire)),
        }
    }
}

/// The epochs closed early (increasing) and when, since the run's start.
#[derive(Debug, Default)]
struct EarlyCloses {
    closes: VecDeque<(Epoch, Duration)>,
    /// Early closes no longer in `closes` (all before its first).
    forgotten: u64,
}

impl Timeline {
    pub(crate) fn new(first: Epoch, interval_ms: u64) -> Timeline {
        Self::with_clock(Clock::Real(Instant::now()), first, interval_ms)
    }

    fn with_clock(clock: Clock, first: Epoch, interval_ms: u64) -> Timeline {
        assert!(interval_ms >= 1, "an epoch lasts at least 1 ms");
        Timeline {
            clock,
            first,
            first_ms: interval_ms.min(FIRST_EPOCH_MS_MAX),
            interval_ms,
            shift: AtomicU64::new(0),
            early: Mutex::new(EarlyCloses::default()),
        }
    }

    pub(crate) fn first(&self) -> Epoch {
        self.first
    }

    /// The epoch the run is in now.
    pub(crate) fn epoch_now(&self) -> Epoch {
        self.clock_epoch(self.clock.elapsed()) + self.shift.load(Ordering::Acquire)
    }

    /// Closes `epoch` now if it is still the current epoch; whether it did.
    pub(crate) fn close_early(&self, epoch: Epoch) -> bool {
        let mut early = self.early.lock().unwrap_or_else(|e| e.into_inner());
        if self.epoch_now() != epoch {
            return false; // the clock or another source closed it
        }
        assert!(early.closes.back().is_none_or(|&(last, _)| last < epoch), "epochs close in order");
        early.closes.push_back((epoch, self.clock.elapsed()));
        if early.closes.len() > EARLY_CLOSES_KEPT {
            early.closes.pop_front();
            early.forgotten += 1;
        }
        self.shift.fetch_add(1, Ordering::AcqRel);
        debug_assert_eq!(self.epoch_now(), epoch + 1, "an early close moves the run to the next epoch");
        true
    }

    /// Time left in `epoch` (zero once it ended).
    pub(crate) fn until_epoch_end(&self, epoch: Epoch) -> Duration {
        self.epoch_end(epoch).saturating_sub(self.clock.elapsed())
    }

    /// Time since `epoch` ended (zero while it runs).
    pub(crate) fn since_epoch_end(&self, epoch: Epoch) -> Duration {
        self.clock.elapsed().saturating_sub(self.epoch_end(epoch))
    }

    /// When `epoch` ends (or ended), from the run's start: when it was
    /// closed early, else where the clock ends it, given the early closes
    /// before it.
    fn epoch_end(&self, epoch: Epoch) -> Duration {
        let early = self.early.lock().unwrap_or_else(|e| e.into_inner());
        let before = early.closes.partition_point(|&(closed, _)| closed < epoch);
        if let Some(&(closed, at)) = early.closes.get(before)
            && closed == epoch
        {
            return at;
        }
        let shifted = early.forgotten + before as u64;
        self.clock_end(epoch.saturating_sub(shifted))
    }

    /// The clock's epoch at `elapsed` (no early closes).
    fn clock_epoch(&self, elapsed: Duration) -> Epoch {
        let elapsed_ms = elapsed.as_millis() as u64;
        if elapsed_ms < self.first_ms {
            self.first
        } else {
            self.first + 1 + (elapsed_ms - self.first_ms) / self.interval_ms
        }
    }

    /// When the clock ends its epoch `epoch` (no early closes).
    fn clock_end(&self, epoch: Epoch) -> Duration {
        let epochs = epoch.saturating_sub(self.first);
        Duration::from_millis(self.first_ms + epochs * self.interval_ms)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use super::{Clock, Timeline};

    fn manual(first: u64, interval_ms: u64) -> (Timeline, Arc<AtomicU64>) {
        let ms = Arc::new(AtomicU64::new(0));
        (Timeline::with_clock(Clock::Manual(ms.clone()), first, interval_ms), ms)
    }

    #[test]
    fn an_early_close_moves_the_run_on_and_the_clock_ends_the_next_epoch() {
        let (timeline, ms) = manual(10, 1000);
        assert_eq!(timeline.epoch_now(), 10);
        assert_eq!(timeline.until_epoch_end(10), Duration::from_millis(100), "a short first epoch");
        ms.store(40, Ordering::Release);
        assert!(timeline.close_early(10));
        assert!(!timeline.close_early(10), "an epoch closes once");
        assert_eq!(timeline.epoch_now(), 11);
        ms.store(70, Ordering::Release);
        assert_eq!(timeline.since_epoch_end(10), Duration::from_millis(30), "it ended at its early close");
        // Epoch 11 runs until the clock's boundary at 100 ms.
        assert_eq!(timeline.until_epoch_end(11), Duration::from_millis(30));
        ms.store(100, Ordering::Release);
        assert_eq!(timeline.epoch_now(), 12, "the clock moves the run on again");
        ms.store(600, Ordering::Release);
        assert!(timeline.close_early(12));
        assert!(!timeline.close_early(12));
        assert_eq!(timeline.epoch_now(), 13);
        assert_eq!(timeline.until_epoch_end(13), Duration::from_millis(500), "to the clock's next boundary");
        ms.store(1100, Ordering::Release);
        assert_eq!(timeline.epoch_now(), 14);
        // Each epoch's end, looked at later, is where it was.
        let ends: Vec<_> = (10..14).map(|epoch| timeline.epoch_end(epoch).as_millis()).collect();
        assert_eq!(ends, vec![40, 100, 600, 1100]);
    }

    #[test]
    fn the_epoch_never_goes_back_while_sources_close_epochs_from_threads() {
        let timeline = Arc::new(Timeline::new(1, 2));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let timeline = timeline.clone();
                std::thread::spawn(move || {
                    let mut last = 0;
                    for _ in 0..1000 {
                        let now = timeline.epoch_now();
                        assert!(now >= last, "{now} after {last}");
                        timeline.close_early(now);
                        last = now;
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().expect("no thread panics"));
        let ends: Vec<_> = (1..timeline.epoch_now()).map(|epoch| timeline.epoch_end(epoch)).collect();
        assert!(ends.windows(2).all(|w| w[0] <= w[1]), "earlier epochs end no later");
    }
}
