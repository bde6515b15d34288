//! A progress line on stderr, drawn only when stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(crate) struct Progress {
    label: &'static str,
    total: Option<u64>,
    done: u64,
    records: u64,
    started: Instant,
    last_draw: Instant,
    enabled: bool,
}

impl Progress {
    /// `total` is in the same unit as `advance`'s `amount` (bytes of input, say).
    pub(crate) fn new(label: &'static str, total: Option<u64>) -> Progress {
        let now = Instant::now();
        Progress {
            label,
            total,
            done: 0,
            records: 0,
            started: now,
            last_draw: now,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    pub(crate) fn advance(&mut self, amount: u64, records: u64) {
        self.done += amount;
        self.records += records;
        if self.enabled && self.last_draw.elapsed() >= Duration::from_millis(100) {
            self.last_draw = Instant::now();
            self.draw();
        }
    }

    fn draw(&self) {
        let rate = self.records as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
        let line = match self.total {
            Some(total) if total > 0 => {
                let fraction = (self.done as f64 / total as f64).min(1.0);
                let filled = (fraction * 30.0) as usize;
                format!(
                    "{} [{}{}] {:>3.0}% {} records ({:.0}/s)",
                    self.label,
                    "#".repeat(filled),
                    "-".repeat(30 - filled),
                    fraction * 100.0,
                    self.records,
                    rate
                )
            }
            _ => format!("{} {} records ({:.0}/s)", self.label, self.records, rate),
        };
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K{line}");
        let _ = stderr.flush();
    }

    pub(crate) fn finish(&self) {
        if self.enabled {
            self.draw();
            eprintln!();
        }
    }
}
