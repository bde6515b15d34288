//! Durations of an epoch's way to its commit, kept as lock-free histograms
//! that a metrics scrape or a benchmark reads while the runtime runs.
//!
//! A histogram's buckets are log-linear: four per power of two of
//! microseconds (below 4 µs, one per microsecond), so a quantile read from
//! it reports its bucket's upper bound: never below the true value, and at
//! most 25 % above it.
//!
//! Invariants: recording never blocks and never allocates; a snapshot's
//! count is the sum of its buckets (both asserted); a runtime restarted by
//! the same owner keeps adding to the same histograms.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Buckets of a histogram: enough for 2^40 µs (12 days), the last one open.
pub const BUCKETS: usize = 160;

/// The bucket of `us` microseconds.
fn bucket(us: u64) -> usize {
    if us < 4 {
        return us as usize;
    }
    let exponent = 63 - us.leading_zeros() as usize; // >= 2
    let mantissa = ((us >> (exponent - 2)) & 3) as usize;
    ((exponent - 1) * 4 + mantissa).min(BUCKETS - 1)
}

/// The largest value (µs) that falls in bucket `index`.
fn upper_bound_us(index: usize) -> u64 {
    if index < 4 {
        return index as u64;
    }
    let (exponent, mantissa) = (index / 4 + 1, (index % 4) as u64);
    ((4 + mantissa + 1) << (exponent - 2)) - 1
}

/// A histogram of durations.
#[derive(Debug)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS],
    sum_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: std::array::from_fn(|_| AtomicU64::new(0)), sum_us: AtomicU64::new(0) }
    }
}

impl Histogram {
    pub fn record(&self, duration: Duration) {
        let us = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX);
        self.counts[bucket(us)].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        HistogramSnapshot { count: counts.iter().sum(), counts, sum_us: self.sum_us.load(Ordering::Relaxed) }
    }
}

/// A histogram's counts at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistogramSnapshot {
    counts: Vec<u64>,
    count: u64,
    sum_us: u64,
}

impl HistogramSnapshot {
    /// What was recorded after `earlier` (a snapshot of the same histogram).
    pub fn since(&self, earlier: &HistogramSnapshot) -> HistogramSnapshot {
        let counts: Vec<u64> = self.counts.iter().zip(&earlier.counts).map(|(now, then)| now - then).collect();
        let count = counts.iter().sum();
        assert_eq!(count, self.count - earlier.count, "a later snapshot of the same histogram");
        HistogramSnapshot { counts, count, sum_us: self.sum_us - earlier.sum_us }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn sum_us(&self) -> u64 {
        self.sum_us
    }

    /// The `q` quantile (0..=1) in µs: the upper bound of the bucket that
    /// holds it (0 when nothing was recorded).
    pub fn quantile_us(&self, q: f64) -> u64 {
        assert!((0.0..=1.0).contains(&q), "a quantile is in 0..=1: {q}");
        let rank = ((q * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (index, &count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return upper_bound_us(index);
            }
        }
        0
    }
}

/// The histograms of one runtime's commit path (shared with its owner
/// through [`crate::RuntimeConfig::timings`]).
#[derive(Debug, Default)]
pub struct CommitTimings {
    /// An epoch's end (on the clock, or early: `timeline.rs`) to a view's sink handing it to
    /// its append thread: the input read and folded after the close, and
    /// the frontier's way through the dataflow.
    pub close_to_write: Histogram,
    /// A view's append thread appending one epoch: its records built and
    /// appended (not its wait in the thread's queue).
    pub sink_write: Histogram,
    /// A commit from its start to its publish (the three steps below and
    /// the bookkeeping between them).
    pub commit: Histogram,
    /// Syncing the changelogs written since the last commit.
    pub changelog_sync: Histogram,
    /// RocksDB's synced batch: operator state and the checkpoint meta.
    pub state_commit: Histogram,
    /// `checkpoint.json` written and renamed.
    pub publish: Histogram,
    /// The views' state applied from their changelogs, after the publish.
    pub view_apply: Histogram,
    /// An epoch's end (on the clock, or early: `timeline.rs`) to its commit's publish: the
    /// dataflow's part of a reader's latency.
    pub close_to_publish: Histogram,
}

impl CommitTimings {
    /// Each histogram with its name (for metrics and benchmarks).
    pub fn each(&self) -> [(&'static str, &Histogram); 8] {
        [
            ("close_to_write", &self.close_to_write),
            ("sink_write", &self.sink_write),
            ("commit", &self.commit),
            ("changelog_sync", &self.changelog_sync),
            ("state_commit", &self.state_commit),
            ("publish", &self.publish),
            ("view_apply", &self.view_apply),
            ("close_to_publish", &self.close_to_publish),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_is_in_a_bucket_whose_bounds_hold_it() {
        let mut values: Vec<u64> = (0..5000).collect();
        values.extend((0..40).flat_map(|shift| [(1u64 << shift) - 1, 1 << shift, (1 << shift) + 1, 3 << shift]));
        for us in values {
            let index = bucket(us);
            assert!(us <= upper_bound_us(index), "{us} in bucket {index}");
            assert!(index == 0 || us > upper_bound_us(index - 1), "{us} in bucket {index}");
            // At most 25 % above the value (exact below 4 µs).
            assert!(upper_bound_us(index) as f64 <= (us as f64 * 1.25).max(us as f64), "{us}");
        }
    }

    #[test]
    fn quantiles_against_the_sorted_values() {
        let histogram = Histogram::default();
        let mut values: Vec<u64> = (0..10_000u64).map(|i| (i * 7919) % 100_000).collect();
        for &us in &values {
            histogram.record(Duration::from_micros(us));
        }
        values.sort_unstable();
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.count(), 10_000);
        assert_eq!(snapshot.sum_us(), values.iter().sum::<u64>());
        for q in [0.0, 0.5, 0.9, 0.99, 1.0] {
            let exact = values[((q * values.len() as f64).ceil() as usize).max(1) - 1];
            let read = snapshot.quantile_us(q);
            assert!(read >= exact && read as f64 <= exact as f64 * 1.25 + 1.0, "q {q}: {read} for {exact}");
        }
    }

    #[test]
    fn since_subtracts_an_earlier_snapshot() {
        let histogram = Histogram::default();
        histogram.record(Duration::from_millis(5));
        let earlier = histogram.snapshot();
        histogram.record(Duration::from_millis(50));
        let later = histogram.snapshot().since(&earlier);
        assert_eq!(later.count(), 1);
        assert_eq!(later.sum_us(), 50_000);
        assert!((50_000..=62_500).contains(&later.quantile_us(0.5)));
        assert_eq!(HistogramSnapshot { counts: vec![0; BUCKETS], count: 0, sum_us: 0 }.quantile_us(0.99), 0);
    }
}
