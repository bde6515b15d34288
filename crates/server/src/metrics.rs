//! Metrics: a Prometheus text endpoint (`--metrics-listen`, off by
//! default) over plain HTTP: `GET /metrics` (any other path is 404).
//!
//! Per view: the committed epoch, how far its readers are behind their
//! topics' high watermarks (records), and how many records they have read
//! (a counter: `rate()` gives records/s). Per run: the age of the last
//! commit and the interval between the last two; the durations of the
//! commit path's steps since the server started (a summary); the updates
//! windowed operators dropped at closed windows (a counter). Per Postgres endpoint:
//! connections and subscribers.
//!
//! Invariants: a scrape reads the published checkpoint and the topics'
//! end offsets, never the runtime's locks; a request is read up to
//! [`REQUEST_BYTES_MAX`] and answered once, then the connection closes.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::pg::Gauges;

/// Bytes of a request read before it is answered.
pub const REQUEST_BYTES_MAX: usize = 8 * 1024;

/// A running metrics endpoint; stopped when dropped.
#[derive(Debug)]
pub struct MetricsEndpoint {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsEndpoint {
    /// Serves `engine`'s metrics, and `gauges` (a Postgres endpoint's), on `listen`.
    pub fn start(engine: Arc<Engine>, gauges: Arc<Gauges>, listen: SocketAddr) -> Result<MetricsEndpoint> {
        let io = |action: &'static str| move |source| Error::Io { action, path: listen.to_string(), source };
        let listener = std::net::TcpListener::bind(listen).map_err(io("binding"))?;
        listener.set_nonblocking(true).map_err(io("configuring"))?;
        let addr = listener.local_addr().map_err(io("reading the address of"))?;
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(io("starting the thread of"))?;
        let (shutdown, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("millpond-metrics".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                    loop {
                        let accepted = tokio::select! {
                            accepted = listener.accept() => accepted,
                            _ = &mut stopped => return,
                        };
                        if let Ok((socket, _)) = accepted {
                            tokio::spawn(answer(socket, engine.clone(), gauges.clone()));
                        }
                    }
                })
            })
            .map_err(io("spawning the thread of"))?;
        Ok(MetricsEndpoint { addr, shutdown: Some(shutdown), thread: Some(thread) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn answer(mut socket: tokio::net::TcpStream, engine: Arc<Engine>, gauges: Arc<Gauges>) {
    let mut request = Vec::new();
    let mut buffer = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < REQUEST_BYTES_MAX {
        let read = tokio::time::timeout(std::time::Duration::from_secs(5), socket.read(&mut buffer)).await;
        match read {
            Ok(Ok(n)) if n > 0 => request.extend_from_slice(&buffer[..n]),
            _ => break,
        }
    }
    let line = request.split(|b| *b == b'\r').next().unwrap_or_default();
    let response = if line.starts_with(b"GET /metrics ") || line == b"GET /metrics" {
        let body = tokio::task::spawn_blocking(move || render(&engine, &gauges)).await.unwrap_or_default();
        format!(
            "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    } else {
        "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_owned()
    };
    let _ = socket.write_all(response.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// The metrics in Prometheus's text format.
pub(crate) fn render(engine: &Engine, gauges: &Gauges) -> String {
    let mut out = String::new();
    let metric = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    metric(&mut out, "millpond_pg_connections", "gauge", "Postgres connections being served.");
    let _ = writeln!(out, "millpond_pg_connections {}", gauges.connections.load(Ordering::Relaxed));
    metric(&mut out, "millpond_pg_subscribers", "gauge", "SUBSCRIBE streams being served.");
    let _ = writeln!(out, "millpond_pg_subscribers {}", gauges.subscribers.load(Ordering::Relaxed));
    let hubs: Vec<(String, crate::fanout::HubStats)> =
        engine.hubs.running().iter().map(|h| (h.hub.view().to_owned(), h.hub.stats())).collect();
    let per_hub = |out: &mut String, name: &str, value: &dyn Fn(&crate::fanout::HubStats) -> u64| {
        for (view, stats) in &hubs {
            let _ = writeln!(out, "{name}{{view=\"{view}\"}} {}", value(stats));
        }
    };
    metric(&mut out, "millpond_fanout_ring_bytes", "gauge", "Bytes of encoded changes in a view's shared ring.");
    per_hub(&mut out, "millpond_fanout_ring_bytes", &|s| s.ring_bytes as u64);
    metric(&mut out, "millpond_fanout_positions", "gauge", "Subscribers reading a view's shared ring.");
    per_hub(&mut out, "millpond_fanout_positions", &|s| s.positions as u64);
    metric(&mut out, "millpond_fanout_behind_total", "counter", "Subscribers dropped for falling behind the ring.");
    per_hub(&mut out, "millpond_fanout_behind_total", &|s| s.behind);
    metric(
        &mut out,
        "millpond_fanout_snapshot_bytes",
        "gauge",
        "Bytes of a view's last snapshot, while subscribers that joined on it hold it.",
    );
    per_hub(&mut out, "millpond_fanout_snapshot_bytes", &|s| s.snapshot_bytes as u64);
    commit_durations(&mut out, engine.commit_timings());
    let help = "Updates dropped because they fell in a window, session or join key the watermark had closed \
                (records of a partition read for the first time after the watermark passed them).";
    metric(&mut out, "millpond_closed_window_drops_total", "counter", help);
    let drops = engine.run_counters().closed_window_drops.load(Ordering::Relaxed);
    let _ = writeln!(out, "millpond_closed_window_drops_total {drops}");
    let Ok(Some(meta)) = engine.committed() else { return out };
    let stats = engine.view_stats(&meta);
    metric(&mut out, "millpond_view_committed_epoch", "gauge", "The view's last committed epoch.");
    for view in stats.keys() {
        let _ = writeln!(out, "millpond_view_committed_epoch{{view=\"{view}\"}} {}", meta.epoch);
    }
    metric(&mut out, "millpond_view_lag_records", "gauge", "Records its readers have yet to read of their topics.");
    for (view, stat) in &stats {
        let _ = writeln!(out, "millpond_view_lag_records{{view=\"{view}\"}} {}", stat.lag_records);
    }
    metric(&mut out, "millpond_view_records_read_total", "counter", "Records its readers have read (committed).");
    for (view, stat) in &stats {
        let _ = writeln!(out, "millpond_view_records_read_total{{view=\"{view}\"}} {}", stat.read_records);
    }
    let (age, interval) = engine.commit_timing();
    metric(&mut out, "millpond_checkpoint_age_seconds", "gauge", "Time since the last commit was published.");
    let _ = writeln!(out, "millpond_checkpoint_age_seconds {:.3}", age.as_secs_f64());
    if let Some(interval) = interval {
        metric(&mut out, "millpond_checkpoint_interval_seconds", "gauge", "Time between the last two commits.");
        let _ = writeln!(out, "millpond_checkpoint_interval_seconds {:.3}", interval.as_secs_f64());
    }
    out
}

/// The commit path's durations as one Prometheus summary with a `step`
/// label: quantiles 0.5, 0.9 and 0.99 (each its histogram bucket's upper
/// bound, at most 25 % above the true value), `_sum` and `_count`.
fn commit_durations(out: &mut String, timings: &millpond_dataflow::CommitTimings) {
    const NAME: &str = "millpond_checkpoint_duration_seconds";
    let _ = writeln!(
        out,
        "# HELP {NAME} Steps of the commit path since the server started: an epoch's end to a view's sink \
         handing it to its append thread (close_to_write), the thread appending it (sink_write), the commit to its publish \
         (commit) and its parts, the views' state applied (view_apply), and an epoch's end to its publish \
         (close_to_publish).\n# TYPE {NAME} summary"
    );
    for (step, histogram) in timings.each() {
        let snapshot = histogram.snapshot();
        for q in [0.5, 0.9, 0.99] {
            let seconds = snapshot.quantile_us(q) as f64 / 1e6;
            let _ = writeln!(out, "{NAME}{{step=\"{step}\",quantile=\"{q}\"}} {seconds:.6}");
        }
        let _ = writeln!(out, "{NAME}_sum{{step=\"{step}\"}} {:.6}", snapshot.sum_us() as f64 / 1e6);
        let _ = writeln!(out, "{NAME}_count{{step=\"{step}\"}} {}", snapshot.count());
    }
}
