//! `millpond bench serve`: the server measured over the wire, each figure
//! beside its baseline in the same run. A pass-through view over one source
//! (`feed`; with `--view aggregate`, a keyed aggregate over 1000 groups
//! whose rows carry their latest event's time), appended to in-process
//! (`Engine::append`), subscribed to with tokio-postgres (`COPY (SUBSCRIBE
//! ...) TO STDOUT`):
//! - the dataflow's events/s with 0, 1, 100 and 1000 subscribers attached
//!   (the ratio to 0 is the fan-out's cost to the dataflow), and the changes/s
//!   delivered to all of them while it ran; in `--rounds` rounds of pairs, each count of
//!   subscribers run next to a run alone, in alternating order, and each
//!   ratio taken within its pair (one 500 K-event drain's CPU per event
//!   varies by ±20 % from another's, subscribers or not, and drifts over
//!   tens of seconds), reported as the median round and the range. The events are built before the clock starts and
//!   appended far faster than the dataflow reads them (the table says how
//!   much), so a run measures the dataflow's drain, not the feeder; beside each
//!   ratio, its two factors: the timely workers' CPU time per event and
//!   their CPU time over the wall time (from `/proc/self/task`);
//! - append-to-delivery latency at half of the peak, p50 and p99, with 1 s
//!   and 100 ms epochs (ratio to the epoch interval); the peak is the
//!   sustainable throughput, the highest paced rate the server keeps up
//!   with end to end, found by probes from the drains' rate down (they
//!   count delivered changes against events, so they fit the pass-through
//!   view only: give an aggregate's runs `--latency-rate`);
//! - RSS per idle subscriber; SELECT latency on a 100 K-row view.
//!
//! The server runs as `millpond serve` does, its client threads at nice
//! `--wire-nice` (19); the bench's own clients stand in for other machines
//! and run at nice 19, the feeder at 0, beside the runtime's workers. The
//! latency runs' one subscriber has a thread of its own and runs once at
//! each of `--latency-client-nice` (0: a client with its own CPU, as on
//! another machine; 19: one that gets only what the server leaves).
//!
//! Nothing here asserts a time; it prints a Markdown table for
//! `docs/performance.md`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use clap::Args;
use futures::StreamExt;
use millpond_dataflow::TopicRecord;
use millpond_server::{Engine, EngineConfig, PgConfig, PgEndpoint};

#[derive(Debug, Args)]
pub(crate) struct ServeBenchArgs {
    /// Events appended in each throughput run.
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// Subscriber counts of the throughput runs (each paired with a run alone).
    #[arg(long, value_delimiter = ',', default_value = "1,100,1000")]
    subscribers: Vec<usize>,
    /// Rounds of throughput runs: each round runs, for each count of
    /// subscribers, a pair: the dataflow alone and with that many, in
    /// alternating order; each ratio is within its pair, and the table gives
    /// the median round and the range.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Seconds of each latency run.
    #[arg(long, default_value_t = 10)]
    latency_seconds: u64,
    /// Epoch intervals of the latency runs.
    #[arg(long, value_delimiter = ',', default_value = "1000,100")]
    latency_epochs_ms: Vec<u64>,
    /// Events/s of the latency runs (default: half of the sustainable rate
    /// the probes find).
    #[arg(long)]
    latency_rate: Option<u64>,
    /// Rows of the view the SELECTs read.
    #[arg(long, default_value_t = 100_000)]
    select_rows: u64,
    /// Where to keep the runs (default: DATA_DIR/bench-serve); removed afterwards.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Nice value of the server's client threads, as `millpond serve --wire-nice`.
    #[arg(long, default_value_t = millpond_server::WIRE_NICE_SERVE)]
    wire_nice: i32,
    /// Nice values of the latency runs' one subscriber (a thread of its
    /// own), each measured in turn: 0 stands for a client with a CPU of its
    /// own, 19 for one that only gets what the server leaves.
    #[arg(long, value_delimiter = ',', default_value = "0,19")]
    latency_client_nice: Vec<i32>,
    /// The view every run maintains and subscribes to.
    #[arg(long, value_enum, default_value_t = ViewArg::PassThrough)]
    view: ViewArg,
}

/// The view `feed` over the events `(k, at)`; its rows are `(k, at)` either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ViewArg {
    /// Every event a row: `SELECT k, at FROM ev`.
    PassThrough,
    /// A keyed aggregate over 1000 groups, whose row carries its latest
    /// event's time: `SELECT k % 1000 AS k, MAX(at) AS at FROM ev GROUP BY
    /// k % 1000` (an epoch retracts and inserts each group it changes).
    Aggregate,
}

impl ViewArg {
    fn schema(self) -> &'static str {
        match self {
            ViewArg::PassThrough => SCHEMA,
            ViewArg::Aggregate => AGGREGATE_SCHEMA,
        }
    }
}

/// How the bench's servers run: their client threads' nice value and the view.
#[derive(Clone, Copy, Debug)]
struct ServerSetup {
    wire_nice: i32,
    view: ViewArg,
}

impl ServeBenchArgs {
    fn server(&self) -> ServerSetup {
        ServerSetup { wire_nice: self.wire_nice, view: self.view }
    }
}

/// The nice value of the bench's client threads (stand-ins for other machines).
const CLIENT_NICE: i32 = 19;

const SCHEMA: &str = "CREATE SOURCE ev (k BIGINT, at BIGINT) FROM TOPIC 'ev' FORMAT JSON;
CREATE MATERIALIZED VIEW feed AS SELECT k, at FROM ev";
const AGGREGATE_SCHEMA: &str = "CREATE SOURCE ev (k BIGINT, at BIGINT) FROM TOPIC 'ev' FORMAT JSON;
CREATE MATERIALIZED VIEW feed AS SELECT k % 1000 AS k, MAX(at) AS at FROM ev GROUP BY k % 1000";
/// Records per append.
const APPEND_BATCH: u64 = 5_000;
/// Streams opened at once while subscribers connect.
const OPENING_AT_ONCE: usize = 50;

/// A server on a fresh directory, with the schema.
struct Server {
    engine: Arc<Engine>,
    endpoint: PgEndpoint,
}

impl Server {
    fn start(dir: &Path, epoch_ms: u64, setup: ServerSetup) -> Result<Server> {
        let ServerSetup { wire_nice, view } = setup;
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
        let config = EngineConfig {
            epoch_interval_ms: epoch_ms,
            fanout_nice: millpond_server::fanout_nice(wire_nice),
            ..EngineConfig::new(dir)
        };
        let engine = Engine::open(config)?;
        engine.execute(view.schema())?;
        let mut pg = PgConfig::new("127.0.0.1:0".parse().expect("an address"));
        pg.connections_max = 4096;
        pg.wire_nice = wire_nice;
        let endpoint = PgEndpoint::start(engine.clone(), pg)?;
        Ok(Server { engine, endpoint })
    }

    /// Records of the source the view has read as of its last commit.
    fn committed_reads(&self) -> Result<u64> {
        let Some(meta) = self.engine.committed()? else { return Ok(0) };
        Ok(self.engine.view_stats(&meta).get("feed").map_or(0, |s| s.read_records))
    }

    fn stop(self) -> Result<()> {
        drop(self.endpoint);
        self.engine.shutdown()?;
        Ok(())
    }
}

fn now_micros() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// Events `from..to`, each carrying `at` (µs) as its append time.
fn events_between(from: u64, to: u64, at: u64) -> Vec<TopicRecord> {
    (from..to)
        .map(|k| TopicRecord {
            key: Some(k.to_string().into_bytes()),
            value: Some(format!("{{\"k\":{k},\"at\":{at}}}").into_bytes()),
            headers: vec![],
        })
        .collect()
}

/// Appends events `from..to`, each carrying its append time.
fn append(engine: &Engine, from: u64, to: u64) -> Result<()> {
    engine.append("ev", events_between(from, to, now_micros()))?;
    Ok(())
}

/// A subscriber of `feed`: counts the changes it receives into `delivered`,
/// and, when `latencies` is given, samples each one's latencies.
async fn subscribe(
    addr: std::net::SocketAddr,
    delivered: Arc<AtomicU64>,
    latencies: Option<Arc<Latencies>>,
    opened: Arc<AtomicU64>,
) -> Result<()> {
    let target = format!("host={} port={} user=bench", addr.ip(), addr.port());
    let (client, connection) = tokio_postgres::connect(&target, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let stream = client.copy_out("COPY (SUBSCRIBE feed WITH (SNAPSHOT = false)) TO STDOUT").await?;
    opened.fetch_add(1, Ordering::Relaxed);
    futures::pin_mut!(stream);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let lines = chunk.split(|b| *b == b'\n').filter(|l| !l.is_empty());
        let mut count = 0;
        let now = latencies.as_ref().map(|_| now_micros());
        let mut samples = Samples::default();
        for line in lines {
            count += 1;
            if let (Some(latencies), Some(now)) = (&latencies, now) {
                latencies.sample(line, now, &mut samples);
            }
        }
        if let Some(latencies) = &latencies {
            latencies.record(samples);
        }
        delivered.fetch_add(count, Ordering::Relaxed);
    }
    Ok(())
}

/// What the latency runs sample: per change, append to delivery; per epoch,
/// commit (as the server's checkpoint watch would see it) to delivery.
#[derive(Debug, Default)]
struct Latencies {
    /// µs from append to delivery, one per change.
    appended: std::sync::Mutex<Vec<u64>>,
    /// When each epoch was first seen committed (µs since the epoch).
    committed_at: std::sync::Mutex<std::collections::BTreeMap<u64, u64>>,
    /// µs from commit to delivery, one per change.
    committed: std::sync::Mutex<Vec<u64>>,
    /// Per epoch: its last append, its first and last line's arrival (µs).
    epochs: std::sync::Mutex<std::collections::BTreeMap<u64, EpochSeen>>,
}

/// One epoch as the subscriber saw it (µs since the Unix epoch).
#[derive(Clone, Copy, Debug)]
struct EpochSeen {
    last_append: u64,
    first_line: u64,
    last_line: u64,
}

impl EpochSeen {
    fn merge(&mut self, other: EpochSeen) {
        self.last_append = self.last_append.max(other.last_append);
        self.first_line = self.first_line.min(other.first_line);
        self.last_line = self.last_line.max(other.last_line);
    }
}

/// A field of ASCII digits as a number (None: empty, or anything else).
fn digits(field: &[u8]) -> Option<u64> {
    if field.is_empty() || field.len() > 19 {
        return None;
    }
    field.iter().try_fold(0u64, |n, &b| b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0')))
}

/// Per-epoch spans of a latency run (µs, sorted): last append to commit,
/// commit to the first line, commit to the last line.
#[derive(Debug, Default)]
struct Spans {
    append_to_commit: Vec<u64>,
    commit_to_first: Vec<u64>,
    commit_to_last: Vec<u64>,
    /// The runtime's own durations of the commit path's steps in the run
    /// (`Engine::commit_timings`).
    steps: Vec<(&'static str, millpond_dataflow::HistogramSnapshot)>,
}

/// One chunk's samples, recorded at once (the client takes one lock per
/// chunk, not three per change: its own bookkeeping must not be what it
/// measures).
#[derive(Debug, Default)]
struct Samples {
    appended: Vec<u64>,
    committed: Vec<u64>,
    /// The last epoch looked up, and when it was seen committed.
    epoch: Option<(u64, Option<u64>)>,
    /// The epoch of the lines being read, merged over them (into `epochs`
    /// when another comes).
    current: Option<(u64, EpochSeen)>,
    epochs: std::collections::BTreeMap<u64, EpochSeen>,
}

impl Latencies {
    fn sample(&self, line: &[u8], now: u64, samples: &mut Samples) {
        // mp_epoch, mp_diff, k, at: one pass over the line, digits read as
        // they are (the client's own cost is taken from the server's CPU).
        // A retraction's `at` is an older row's (an aggregate's group): not
        // this epoch's append.
        let mut fields = line.split(|b| *b == b'\t');
        let Some(epoch) = fields.next().and_then(digits) else { return };
        let inserted = fields.next() == Some(b"1".as_slice());
        if let Some(at) = fields.nth(1).and_then(digits).filter(|_| inserted) {
            samples.appended.push(now.saturating_sub(at));
            let seen = EpochSeen { last_append: at, first_line: now, last_line: now };
            match &mut samples.current {
                Some((current, merged)) if *current == epoch => merged.merge(seen),
                current => {
                    if let Some((epoch, merged)) = current.replace((epoch, seen)) {
                        samples.epochs.entry(epoch).and_modify(|e| e.merge(merged)).or_insert(merged);
                    }
                }
            }
        }
        let seen = match samples.epoch {
            Some((cached, seen)) if cached == epoch => seen,
            _ => {
                let seen = self.committed_at.lock().expect("commits").get(&epoch).copied();
                samples.epoch = Some((epoch, seen));
                seen
            }
        };
        if let Some(seen) = seen {
            samples.committed.push(now.saturating_sub(seen));
        }
    }

    fn record(&self, mut samples: Samples) {
        if let Some((epoch, merged)) = samples.current.take() {
            samples.epochs.entry(epoch).and_modify(|e| e.merge(merged)).or_insert(merged);
        }
        self.appended.lock().expect("latencies").extend(samples.appended);
        self.committed.lock().expect("latencies").extend(samples.committed);
        let mut epochs = self.epochs.lock().expect("epochs");
        for (epoch, seen) in samples.epochs {
            epochs.entry(epoch).and_modify(|e| e.merge(seen)).or_insert(seen);
        }
    }

    /// The per-epoch spans of every epoch seen committed.
    fn spans(&self) -> Spans {
        let committed_at = self.committed_at.lock().expect("commits");
        let mut spans = Spans::default();
        for (epoch, seen) in self.epochs.lock().expect("epochs").iter() {
            let Some(&commit) = committed_at.get(epoch) else { continue };
            spans.append_to_commit.push(commit.saturating_sub(seen.last_append));
            spans.commit_to_first.push(seen.first_line.saturating_sub(commit));
            spans.commit_to_last.push(seen.last_line.saturating_sub(commit));
        }
        for samples in [&mut spans.append_to_commit, &mut spans.commit_to_first, &mut spans.commit_to_last] {
            samples.sort_unstable();
        }
        spans
    }
}

/// Opens `count` subscribers and waits until all stream; each counts
/// what it receives into its own counter.
async fn open_subscribers(
    addr: std::net::SocketAddr,
    count: usize,
    latencies: Option<Arc<Latencies>>,
) -> Result<Subscribers> {
    let opened = Arc::new(AtomicU64::new(0));
    let mut subscribers = Subscribers { tasks: Vec::new(), counts: Vec::new() };
    for i in 0..count {
        let sample = if i == 0 { latencies.clone() } else { None };
        let delivered = Arc::new(AtomicU64::new(0));
        subscribers.counts.push(delivered.clone());
        subscribers.tasks.push(tokio::spawn(subscribe(addr, delivered, sample, opened.clone())));
        while (i + 1) as u64 > opened.load(Ordering::Relaxed) + OPENING_AT_ONCE as u64 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    while opened.load(Ordering::Relaxed) < count as u64 {
        if Instant::now() > deadline {
            bail!("only {} of {count} subscribers opened", opened.load(Ordering::Relaxed));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(subscribers)
}

/// The bench's subscriber tasks and what each has received.
struct Subscribers {
    tasks: Vec<tokio::task::JoinHandle<Result<()>>>,
    counts: Vec<Arc<AtomicU64>>,
}

impl Subscribers {
    fn delivered(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Subscribers whose stream ended (the server dropped them).
    fn ended(&self) -> usize {
        self.tasks.iter().filter(|t| t.is_finished()).count()
    }

    fn abort(self) {
        for task in self.tasks {
            task.abort();
        }
    }
}

/// What one throughput run measured.
struct Throughput {
    /// The dataflow's events/s.
    dataflow: f64,
    /// Changes/s delivered to all subscribers while the dataflow ran.
    delivered: f64,
    /// Subscribers the server dropped during the run (53200).
    dropped: usize,
    /// The timely workers' CPU time until the dataflow was done (None off
    /// Linux): its events/s is their share of the wall time over their CPU
    /// time per event, and these say which moved.
    workers_cpu: Option<Duration>,
    /// The feeder's appending time over the dataflow's: well below 1, or
    /// the run measured the feeder.
    fed_share: f64,
}

impl Throughput {
    /// The workers' CPU time per event, in ns.
    fn cpu_per_event_ns(&self, events: u64) -> Option<f64> {
        self.workers_cpu.map(|cpu| cpu.as_nanos() as f64 / events.max(1) as f64)
    }

    /// The workers' CPU time over the wall time until the dataflow was done
    /// (1.0: one worker always on a core).
    fn workers_share(&self, events: u64) -> Option<f64> {
        self.workers_cpu.map(|cpu| cpu.as_secs_f64() * self.dataflow / events.max(1) as f64)
    }
}

/// CPU time of this process's timely workers so far, from each thread's
/// `/proc/self/task/TID/schedstat` (nanoseconds on a CPU); None off Linux.
fn workers_cpu() -> Option<Duration> {
    let mut total_ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let path = task.path();
        let named_worker = std::fs::read_to_string(path.join("comm")).is_ok_and(|comm| comm.starts_with("timely:work"));
        // A thread gone since the listing has nothing more to count.
        if let (true, Ok(stat)) = (named_worker, std::fs::read_to_string(path.join("schedstat"))) {
            total_ns += stat.split_whitespace().next()?.parse::<u64>().ok()?;
        }
    }
    Some(Duration::from_nanos(total_ns))
}

async fn throughput(dir: &Path, subscribers: usize, events: u64, setup: ServerSetup) -> Result<Throughput> {
    let server = Server::start(dir, 100, setup)?;
    let streams = open_subscribers(server.endpoint.addr(), subscribers, None).await?;
    // Built before the clock starts: the feeder only appends, several times
    // faster than the dataflow reads, so the run measures the dataflow
    // draining what is there, not the pace of a feeder that shares its
    // machine with the subscribers (a feeder that formatted as it went took
    // 70-90 % of the dataflow's time, longer with subscribers beside it).
    let batches: Vec<Vec<TopicRecord>> = (0..events)
        .step_by(APPEND_BATCH as usize)
        .map(|from| events_between(from, (from + APPEND_BATCH).min(events), now_micros()))
        .collect();
    let started = Instant::now();
    let cpu_before = workers_cpu();
    let feeder = {
        let engine = server.engine.clone();
        std::thread::spawn(move || -> Result<Duration> {
            for batch in batches {
                engine.append("ev", batch)?;
            }
            Ok(started.elapsed())
        })
    };
    let deadline = Instant::now() + Duration::from_secs(1800);
    while server.committed_reads()? < events {
        if Instant::now() > deadline {
            bail!("the run did not finish: the dataflow read {} of {events} events", server.committed_reads()?);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The run ends with the dataflow: what the subscribers got by then is
    // what delivery does beside a dataflow at full speed (with 1000 of them
    // it is far behind, and waiting for the rest measured the fan-out alone,
    // for a minute a run).
    let dataflow = started.elapsed();
    let workers_cpu_used = workers_cpu().zip(cpu_before).map(|(now, before)| now.saturating_sub(before));
    let (delivered, dropped) = (streams.delivered(), streams.ended());
    let fed = feeder.join().map_err(|_| anyhow::anyhow!("the feeder panicked"))??;
    assert!(fed <= dataflow, "the feeder ends before the dataflow has read its last event");
    server.stop()?;
    streams.abort();
    let per_second = |n: u64, d: Duration| n as f64 / d.as_secs_f64();
    Ok(Throughput {
        dataflow: per_second(events, dataflow),
        delivered: if subscribers == 0 { 0.0 } else { per_second(delivered, dataflow) },
        dropped,
        workers_cpu: workers_cpu_used,
        fed_share: fed.as_secs_f64() / dataflow.as_secs_f64(),
    })
}

/// What one latency run measured.
struct Latency {
    /// µs from append to delivery, sorted, one per change delivered.
    appended: Vec<u64>,
    /// µs from commit to delivery, sorted.
    committed: Vec<u64>,
    spans: Spans,
    /// Events appended (each one change of the view).
    fed: u64,
}

/// Append-to-delivery and commit-to-delivery latencies of one subscriber
/// at `rate` events/s, the subscriber on a thread of its own at nice
/// `client_nice`.
async fn latency(dir: &Path, run: LatencyRun, setup: ServerSetup) -> Result<Latency> {
    let LatencyRun { epoch_ms, rate, seconds, client_nice } = run;
    let server = Server::start(dir, epoch_ms, setup)?;
    let latencies = Arc::new(Latencies::default());
    let (delivered, opened) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let addr = server.endpoint.addr();
    {
        let (delivered, opened, latencies) = (delivered.clone(), opened.clone(), latencies.clone());
        // Detached: its stream ends when the server stops.
        std::thread::spawn(move || -> Result<()> {
            let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), client_nice);
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(subscribe(addr, delivered, Some(latencies), opened))
        });
    }
    while opened.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let engine = server.engine.clone();
    let steps_before: Vec<_> = server.engine.commit_timings().each().map(|(step, h)| (step, h.snapshot())).into();
    let feeder = std::thread::spawn(move || paced_feed(&engine, rate, seconds));
    // When each epoch commits, as a server's checkpoint watch sees it: a
    // thread at the subscriber's priority, so neither sees commits late.
    let watching = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let (engine, latencies, watching) = (server.engine.clone(), latencies.clone(), watching.clone());
        std::thread::spawn(move || -> Result<()> {
            let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), client_nice);
            while watching.load(Ordering::Relaxed) {
                if let Some(meta) = engine.committed()? {
                    latencies.committed_at.lock().expect("commits").entry(meta.epoch).or_insert_with(now_micros);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        })
    };
    let next = loop {
        if feeder.is_finished() {
            break feeder.join().map_err(|_| anyhow::anyhow!("the feeder panicked"))??;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while delivered.load(Ordering::Relaxed) < next && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    watching.store(false, Ordering::Relaxed);
    watcher.join().map_err(|_| anyhow::anyhow!("the commit watcher panicked"))??;
    let steps = server
        .engine
        .commit_timings()
        .each()
        .iter()
        .zip(&steps_before)
        .map(|((step, h), (_, before))| (*step, h.snapshot().since(before)))
        .collect();
    server.stop()?;
    let sorted = |samples: &std::sync::Mutex<Vec<u64>>| {
        let mut samples = std::mem::take(&mut *samples.lock().expect("latencies"));
        samples.sort_unstable();
        samples
    };
    let spans = Spans { steps, ..latencies.spans() };
    Ok(Latency { appended: sorted(&latencies.appended), committed: sorted(&latencies.committed), spans, fed: next })
}

/// One latency run's parameters.
#[derive(Clone, Copy, Debug)]
struct LatencyRun {
    epoch_ms: u64,
    rate: u64,
    seconds: u64,
    client_nice: i32,
}

/// Digits of an append time (µs since the Unix epoch) in an event built
/// before it is appended: every such time from 2001 to 2286 has 16.
const AT_DIGITS: usize = 16;
/// The append time an event is built with, overwritten when it goes out.
const AT_PLACEHOLDER: u64 = 1_000_000_000_000_000;

/// Writes `at` over the append time of events built by [`events_between`]
/// (their value ends with it, then `}`).
fn stamp(batch: &mut [TopicRecord], at: u64) {
    let digits = at.to_string();
    assert_eq!(digits.len(), AT_DIGITS, "a µs timestamp between 2001 and 2286");
    for record in batch {
        let value = record.value.as_mut().expect("an event has a value");
        let end = value.len() - 1;
        assert!(
            value[end] == b'}' && value[end - AT_DIGITS..end].iter().all(u8::is_ascii_digit),
            "an event's value ends with its time"
        );
        value[end - AT_DIGITS..end].copy_from_slice(digits.as_bytes());
    }
}

/// Appends at `rate` events/s for `seconds`, in 100 steps a second; the
/// events appended. The events are built before the clock starts and only
/// stamped with their time as they go out: the feeder stands for producers
/// on other machines, and formatting them here took about 1 µs an event of
/// the server's two cores (a fifth of a core at 200 K events/s).
fn paced_feed(engine: &Engine, rate: u64, seconds: u64) -> Result<u64> {
    let chunk = (rate / 100).max(1);
    let chunks: Vec<Vec<TopicRecord>> =
        (0..seconds * 100).map(|i| events_between(i * chunk, (i + 1) * chunk, AT_PLACEHOLDER)).collect();
    let started = Instant::now();
    let mut next = 0;
    for mut batch in chunks {
        if started.elapsed() >= Duration::from_secs(seconds) {
            break;
        }
        stamp(&mut batch, now_micros());
        engine.append("ev", batch)?;
        next += chunk;
        let due = Duration::from_secs_f64(next as f64 / rate as f64);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    Ok(next)
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or("VmRSS: 0 kB");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// RSS per idle subscriber (KiB) over 1000 of them.
async fn idle_memory(dir: &Path, setup: ServerSetup) -> Result<f64> {
    const IDLE: usize = 1000;
    let server = Server::start(dir, 1000, setup)?;
    append(&server.engine, 0, 1000)?;
    let before = rss_kib();
    let streams = open_subscribers(server.endpoint.addr(), IDLE, None).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib();
    server.stop()?;
    streams.abort();
    // Client and server share the process: the figure holds both sides.
    Ok(after.saturating_sub(before) as f64 / IDLE as f64)
}

/// SELECT latencies (µs, sorted) of `sql` over a view of `rows` rows.
async fn select_latency(dir: &Path, rows: u64, queries: &[&str], setup: ServerSetup) -> Result<Vec<Vec<u64>>> {
    let server = Server::start(dir, 100, setup)?;
    append(&server.engine, 0, rows)?;
    while server.committed_reads()? < rows {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let addr = server.endpoint.addr();
    let target = format!("host={} port={} user=bench", addr.ip(), addr.port());
    let (client, connection) = tokio_postgres::connect(&target, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    let mut out = Vec::new();
    for sql in queries {
        let mut samples = Vec::new();
        for _ in 0..20 {
            let started = Instant::now();
            client.simple_query(sql).await?;
            samples.push(started.elapsed().as_micros() as u64);
        }
        samples.sort_unstable();
        out.push(samples);
    }
    drop(client);
    server.stop()?;
    Ok(out)
}

/// One round of throughput runs: for each count of subscribers, a pair of
/// runs next to each other, the dataflow alone and with that many.
struct Round {
    /// One per count of subscribers, in the order of `--subscribers`.
    pairs: Vec<Pair>,
    /// The share of the machine's CPU time the hypervisor took during the round.
    stolen: Option<f64>,
}

/// Two runs back to back, one alone and one with subscribers, in either
/// order: the machine's speed drifts over tens of seconds (one 500 K-event
/// drain's CPU per event varies by ±20 % from another's, and neighbouring
/// drains less), so each ratio is taken between neighbours, and the order
/// alternates so that a drift falls on both sides alike.
struct Pair {
    alone: Throughput,
    with: Throughput,
}

impl Round {
    fn runs(&self) -> impl Iterator<Item = &Throughput> {
        self.pairs.iter().flat_map(|pair| [&pair.alone, &pair.with])
    }
}

/// The machine's CPU time in ticks (`/proc/stat`'s first line), all of it
/// and what the hypervisor stole: on a VM whose host is busy a run loses
/// CPU that nothing else in the figures shows.
#[derive(Clone, Copy, Debug)]
struct CpuTicks {
    total: u64,
    steal: u64,
}

impl CpuTicks {
    /// None where `/proc/stat` is not Linux's.
    fn now() -> Option<CpuTicks> {
        CpuTicks::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    fn parse(stat: &str) -> Option<CpuTicks> {
        let line = stat.lines().next()?.strip_prefix("cpu ")?;
        let fields: Vec<u64> = line.split_whitespace().map(|f| f.parse().ok()).collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal (guest time is in user).
        let steal = *fields.get(7)?;
        Some(CpuTicks { total: fields.iter().take(8).sum(), steal })
    }

    /// The share of CPU time stolen since `before`.
    fn stolen_since(before: Option<CpuTicks>) -> Option<f64> {
        let (before, now) = (before?, CpuTicks::now()?);
        let total = now.total.checked_sub(before.total).filter(|&t| t > 0)?;
        Some(now.steal.saturating_sub(before.steal) as f64 / total as f64)
    }
}

/// A stolen share as a cell.
fn stolen_cell(stolen: Option<f64>) -> String {
    stolen.map_or_else(|| "unknown".to_owned(), |share| format!("{:.1} %", share * 100.0))
}

/// `args.rounds` rounds of pairs, the runs alone first in every other
/// pair, so that a slow spell of the machine falls on both sides of a ratio.
async fn throughput_rounds(dir: &Path, args: &ServeBenchArgs) -> Result<Vec<Round>> {
    let mut rounds = Vec::with_capacity(args.rounds.max(1));
    let mut pairs_run = 0usize;
    for _ in 0..args.rounds.max(1) {
        let before = CpuTicks::now();
        let mut pairs = Vec::with_capacity(args.subscribers.len());
        let run_dir = dir.join("run");
        for &subscribers in &args.subscribers {
            let run = |count| throughput(&run_dir, count, args.events, args.server());
            let pair = if pairs_run.is_multiple_of(2) {
                let alone = run(0).await?;
                Pair { alone, with: run(subscribers).await? }
            } else {
                let with = run(subscribers).await?;
                Pair { alone: run(0).await?, with }
            };
            pairs.push(pair);
            pairs_run += 1;
        }
        rounds.push(Round { pairs, stolen: CpuTicks::stolen_since(before) });
    }
    Ok(rounds)
}

/// The probes' epoch interval: the throughput runs' (a shorter epoch costs
/// more per event, so a rate sustained at 100 ms is sustained at 1 s).
const PROBE_EPOCH_MS: u64 = 100;
/// A probe keeps up when its p99 append-to-delivery latency is within this
/// many epochs: past the rate the server sustains, the backlog (and every
/// later event's latency) grows for as long as the probe runs.
const PROBE_P99_EPOCHS_MAX: u64 = 5;
/// Each probe that falls behind is followed by one at this share of its rate.
const PROBE_STEP_DOWN: f64 = 0.8;
/// Probes before the search gives up (0.8^8: a sixth of the first rate).
const PROBES_MAX: usize = 8;

/// The sustainable throughput: the highest paced rate the server keeps up
/// with, end to end (the benchmarking literature's definition, as in Karimov
/// et al., "Benchmarking Distributed Stream Data Processing Engines", 2018:
/// the highest load without a latency that keeps growing). A drain's rate is
/// the worker's alone; a paced run also pays the feeder's formatting, the
/// state applier and the client, on the same two cores, so half of a drain's
/// peak can be past what a fast process sustains, and a latency run there
/// measures a queue, not the path. The search starts at `first` (the drains'
/// median), steps down by [`PROBE_STEP_DOWN`] until a probe keeps up, then
/// tries once half way back up. Each probe lasts half a latency run at its
/// rate, so it appends as many events as a latency run at half the rate:
/// the view holds as many rows (its cost per event grows with them).
async fn sustainable_rate(
    dir: &Path,
    args: &ServeBenchArgs,
    first: f64,
    row: &mut impl FnMut([String; 4]),
) -> Result<u64> {
    let seconds = (args.latency_seconds / 2).max(1);
    let mut probe = async |rate: u64| -> Result<bool> {
        let run = LatencyRun { epoch_ms: PROBE_EPOCH_MS, rate, seconds, client_nice: 0 };
        let measured = latency(&dir.join("run"), run, args.server()).await?;
        let p99_ms = percentile(&measured.appended, 0.99) as f64 / 1000.0;
        let delivered = measured.appended.len() as u64;
        let kept_up = delivered == measured.fed && p99_ms <= (PROBE_P99_EPOCHS_MAX * PROBE_EPOCH_MS) as f64;
        row([
            format!(
                "sustainable-rate probe: {rate} events/s for {seconds} s, {PROBE_EPOCH_MS} ms epochs, append-to-delivery p99"
            ),
            format!("{p99_ms:.1} ms ({delivered} of {} delivered)", measured.fed),
            format!("{} ms ({PROBE_P99_EPOCHS_MAX} epochs)", PROBE_P99_EPOCHS_MAX * PROBE_EPOCH_MS),
            format!(
                "{:.2}: {}",
                p99_ms / (PROBE_P99_EPOCHS_MAX * PROBE_EPOCH_MS) as f64,
                if kept_up { "kept up" } else { "fell behind" }
            ),
        ]);
        Ok(kept_up)
    };
    let mut rate = first.max(1.0) as u64;
    let mut behind = None;
    for _ in 0..PROBES_MAX {
        if probe(rate).await? {
            break;
        }
        behind = Some(rate);
        rate = ((rate as f64 * PROBE_STEP_DOWN) as u64).max(1);
    }
    if let Some(behind) = behind {
        let between = (rate + behind) / 2;
        if between > rate && probe(between).await? {
            rate = between;
        }
    }
    row([
        "sustainable rate (the highest probe that kept up); the latency runs go at half of it".into(),
        format!("{rate} events/s"),
        format!("{first:.0} (the drains' median)"),
        format!("{:.2}", rate as f64 / first),
    ]);
    Ok((rate / 2).max(1))
}

/// What the workers' CPU says of a count of subscribers' ratio: their CPU
/// time per event and their share of the wall time, each beside its
/// pair's run alone (the events/s ratio is the share's ratio over the CPU
/// per event's). No rows where `/proc` is not Linux's.
fn workers_rows(row: &mut impl FnMut([String; 4]), rounds: &[Round], at: usize, subscribers: usize, events: u64) {
    let pairs = |f: &dyn Fn(&Throughput) -> Option<f64>| -> Option<Vec<(f64, f64)>> {
        rounds.iter().map(|round| Some((f(&round.pairs[at].with)?, f(&round.pairs[at].alone)?))).collect()
    };
    let Some(cpu) = pairs(&|run: &Throughput| run.cpu_per_event_ns(events)) else { return };
    let Some(share) = pairs(&|run: &Throughput| run.workers_share(events)) else { return };
    let cell = |pairs: &[(f64, f64)], scale: f64, unit: &str| {
        let with: Vec<f64> = pairs.iter().map(|(with, _)| with * scale).collect();
        let alone: Vec<f64> = pairs.iter().map(|(_, alone)| alone * scale).collect();
        let ratios: Vec<f64> = pairs.iter().map(|(with, alone)| with / alone).collect();
        [
            format!("{:.0}{unit} ({:.0}–{:.0})", median(&with), min(&with), max(&with)),
            format!("{:.0}{unit} (none)", median(&alone)),
            format!("{:.2} ({:.2}–{:.2})", median(&ratios), min(&ratios), max(&ratios)),
        ]
    };
    let [value, baseline, ratio] = cell(&cpu, 1.0, " ns");
    row([format!("dataflow workers' CPU time per event with {subscribers} subscribers"), value, baseline, ratio]);
    let [value, baseline, ratio] = cell(&share, 100.0, " %");
    row([
        format!("dataflow workers' CPU time over the wall time with {subscribers} subscribers"),
        value,
        baseline,
        ratio,
    ]);
}

/// The median of `values` (the upper one of an even count); 0 when empty.
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

pub(crate) fn run(data_dir: &Path, args: &ServeBenchArgs) -> Result<()> {
    let dir = args.dir.clone().unwrap_or_else(|| data_dir.join("bench-serve"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(|| {
            let tid = rustix::thread::gettid();
            let _ = rustix::process::setpriority_process(Some(tid), CLIENT_NICE);
        })
        .enable_all()
        .build()?;
    let result = runtime.block_on(measure(&dir, args));
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn measure(dir: &Path, args: &ServeBenchArgs) -> Result<()> {
    let mut table = vec!["| measure | value | baseline | ratio |".to_owned(), "|---|---|---|---|".to_owned()];
    let mut row = |cells: [String; 4]| {
        let line = format!("| {} |", cells.join(" | "));
        eprintln!("{line}");
        table.push(line);
    };
    // First, while the process has freed nothing that later allocations could reuse.
    let idle = idle_memory(&dir.join("run"), args.server()).await?;
    let rounds = throughput_rounds(dir, args).await?;
    let alone: Vec<f64> = rounds.iter().flat_map(|round| &round.pairs).map(|pair| pair.alone.dataflow).collect();
    row([
        format!("dataflow events/s, no subscriber ({} events; median of {} runs, range)", args.events, alone.len()),
        format!("{:.0} ({:.0}–{:.0})", median(&alone), min(&alone), max(&alone)),
        "—".into(),
        "1.00".into(),
    ]);
    let fed: Vec<f64> = rounds.iter().flat_map(|round| round.runs()).map(|run| run.fed_share).collect();
    row([
        "the feeder's appending time over the dataflow's, every throughput run".into(),
        format!("{:.2} ({:.2}–{:.2})", median(&fed), min(&fed), max(&fed)),
        "1 (the feeder paces the dataflow)".into(),
        format!("{:.2}", max(&fed)),
    ]);
    row([
        "CPU time stolen by the hypervisor in each throughput round (`/proc/stat`)".into(),
        rounds.iter().map(|round| stolen_cell(round.stolen)).collect::<Vec<_>>().join(", "),
        "0 % (a machine of its own)".into(),
        "—".into(),
    ]);
    for (at, &subscribers) in args.subscribers.iter().enumerate() {
        let runs: Vec<&Throughput> = rounds.iter().map(|round| &round.pairs[at].with).collect();
        let dataflow: Vec<f64> = runs.iter().map(|run| run.dataflow).collect();
        let ratios: Vec<f64> =
            rounds.iter().map(|round| round.pairs[at].with.dataflow / round.pairs[at].alone.dataflow).collect();
        row([
            format!("dataflow events/s with {subscribers} subscribers (ratio: to its pair's run alone)"),
            format!("{:.0} ({:.0}–{:.0})", median(&dataflow), min(&dataflow), max(&dataflow)),
            format!("{:.0} (none)", median(&alone)),
            format!("{:.2} ({:.2}–{:.2})", median(&ratios), min(&ratios), max(&ratios)),
        ]);
        let delivered: Vec<f64> = runs.iter().map(|run| run.delivered).collect();
        let shares: Vec<f64> = runs.iter().map(|run| run.delivered / (run.dataflow * subscribers as f64)).collect();
        let dropped: Vec<f64> = runs.iter().map(|run| run.dropped as f64).collect();
        row([
            format!(
                "changes/s delivered to {subscribers} subscribers while the dataflow ran ({:.0}–{:.0} dropped, 53200)",
                min(&dropped),
                max(&dropped)
            ),
            format!("{:.0} ({:.0}–{:.0})", median(&delivered), min(&delivered), max(&delivered)),
            format!("{:.0} (events/s × subscribers)", median(&dataflow) * subscribers as f64),
            format!("{:.2} ({:.2}–{:.2})", median(&shares), min(&shares), max(&shares)),
        ]);
        workers_rows(&mut row, &rounds, at, subscribers, args.events);
    }
    // The peak: the dataflow with one subscriber, as the latency runs have.
    let peak = match args.subscribers.iter().position(|&count| count == 1) {
        Some(at) => median(&rounds.iter().map(|round| round.pairs[at].with.dataflow).collect::<Vec<_>>()),
        None => median(&alone),
    };
    let rate = match args.latency_rate {
        Some(rate) => rate,
        None => sustainable_rate(dir, args, peak, &mut row).await?,
    };
    for &epoch_ms in &args.latency_epochs_ms {
        for &client_nice in &args.latency_client_nice {
            let run = LatencyRun { epoch_ms, rate, seconds: args.latency_seconds, client_nice };
            let before = CpuTicks::now();
            let Latency { appended, committed, spans, .. } = latency(&dir.join("run"), run, args.server()).await?;
            row([
                format!("CPU time stolen by the hypervisor, {epoch_ms} ms epochs, client at nice {client_nice}"),
                stolen_cell(CpuTicks::stolen_since(before)),
                "0 % (a machine of its own)".into(),
                "—".into(),
            ]);
            for (from, samples) in [("append", &appended), ("commit", &committed)] {
                for (name, p) in [("p50", 0.5), ("p99", 0.99)] {
                    let ms = percentile(samples, p) as f64 / 1000.0;
                    row([
                        format!(
                            "{from}-to-delivery {name}, {epoch_ms} ms epochs, {rate} events/s, client at nice \
                             {client_nice} ({} samples)",
                            samples.len()
                        ),
                        format!("{ms:.1} ms"),
                        format!("{epoch_ms} ms (the epoch)"),
                        format!("{:.2}", ms / epoch_ms as f64),
                    ]);
                }
            }
            let per_epoch = [
                ("an epoch's last append to its commit", &spans.append_to_commit),
                ("commit to an epoch's first line", &spans.commit_to_first),
                ("commit to an epoch's last line", &spans.commit_to_last),
            ];
            for (step, snapshot) in &spans.steps {
                let (p50, p99) =
                    (snapshot.quantile_us(0.5) as f64 / 1000.0, snapshot.quantile_us(0.99) as f64 / 1000.0);
                row([
                    format!(
                        "runtime step `{step}`, p50 / p99 (bucket bounds), {epoch_ms} ms epochs, client at nice \
                         {client_nice} ({} times)",
                        snapshot.count()
                    ),
                    format!("{p50:.1} / {p99:.1} ms"),
                    format!("{epoch_ms} ms (the epoch)"),
                    format!("{:.2}", p99 / epoch_ms as f64),
                ]);
            }
            for (what, samples) in per_epoch {
                let (p50, p99) = (percentile(samples, 0.5) as f64 / 1000.0, percentile(samples, 0.99) as f64 / 1000.0);
                row([
                    format!(
                        "{what}, p50 / p99, {epoch_ms} ms epochs, client at nice {client_nice} ({} epochs)",
                        samples.len()
                    ),
                    format!("{p50:.1} / {p99:.1} ms"),
                    format!("{epoch_ms} ms (the epoch)"),
                    format!("{:.2}", p99 / epoch_ms as f64),
                ]);
            }
        }
    }
    row([
        "RSS per idle subscriber (1000, client and server in one process)".into(),
        format!("{idle:.0} KiB"),
        "64 KiB (target)".into(),
        format!("{:.2}", idle / 64.0),
    ]);
    let queries = ["SELECT COUNT(*) FROM feed", "SELECT k, at FROM feed WHERE k = 42"];
    let selects = select_latency(&dir.join("run"), args.select_rows, &queries, args.server()).await?;
    let count_p50 = percentile(&selects[0], 0.5) as f64 / 1000.0;
    for (sql, samples) in queries.iter().zip(&selects) {
        let (p50, p99) = (percentile(samples, 0.5) as f64 / 1000.0, percentile(samples, 0.99) as f64 / 1000.0);
        row([
            format!("`{sql}` on {} rows, p50 / p99", args.select_rows),
            format!("{p50:.1} / {p99:.1} ms"),
            format!("{count_p50:.1} ms (COUNT p50)"),
            format!("{:.2}", p50 / count_p50),
        ]);
    }
    println!("{}", table.join("\n"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event built ahead carries the time it is stamped with, as one
    /// formatted at its append would.
    #[test]
    fn a_stamped_event_reads_as_one_built_at_that_time() {
        let at = 1_764_000_000_123_456;
        let mut batch = events_between(7, 9, AT_PLACEHOLDER);
        stamp(&mut batch, at);
        assert_eq!(batch, events_between(7, 9, at));
    }

    #[test]
    fn cpu_ticks_read_the_steal_column_of_the_first_line() {
        let stat = "cpu  100 5 20 800 10 0 5 60 30 0\ncpu0 50 2 10 400 5 0 2 30 15 0\n";
        let ticks = CpuTicks::parse(stat).unwrap();
        assert_eq!((ticks.total, ticks.steal), (1000, 60), "guest time is not counted twice");
        assert!(CpuTicks::parse("cpu0 1 2 3\n").is_none(), "not the machine's line");
        assert!(CpuTicks::parse("cpu  1 2 3 4\n").is_none(), "a kernel without a steal column");
        assert!(CpuTicks::parse("cpu  1 x 3 4 5 6 7 8\n").is_none());
    }

    /// A busy thread named as timely names its workers has its CPU time
    /// counted while it runs (read from its own `schedstat`).
    #[test]
    fn workers_cpu_counts_a_busy_thread_named_as_a_timely_worker() {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let before = workers_cpu().expect("Linux's /proc");
        let spinning = stop.clone();
        let spinner = std::thread::Builder::new()
            .name("timely:work-9".into())
            .spawn(move || {
                while !spinning.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut counted = Duration::ZERO;
        while counted < Duration::from_millis(50) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            counted = workers_cpu().unwrap().saturating_sub(before);
        }
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        assert!(counted >= Duration::from_millis(50), "the spinner's CPU time was not counted: {counted:?}");
    }

    #[test]
    fn samples_merge_each_epochs_lines_and_skip_what_is_not_a_change() {
        let latencies = Latencies::default();
        latencies.committed_at.lock().unwrap().insert(7, 1_000);
        let mut samples = Samples::default();
        // mp_epoch, mp_diff, k, at (µs); a progress line has no `at`, a
        // retraction's `at` is an older row's.
        for (line, now) in [
            (&b"7\t1\t42\t900"[..], 1_500),
            (b"7\t-1\t43\t100", 1_550),
            (b"7\t1\t43\t950", 1_600),
            (b"8\t1\t44\t1200", 1_700),
            (b"8\tt\t\\N\t\\N", 1_800),
            (b"x\t1\t45\t1300", 1_900),
        ] {
            latencies.sample(line, now, &mut samples);
        }
        latencies.record(samples);
        assert_eq!(*latencies.appended.lock().unwrap(), [600, 650, 500]);
        assert_eq!(*latencies.committed.lock().unwrap(), [500, 550, 600], "epoch 8 was never seen committed");
        let epochs = latencies.epochs.lock().unwrap();
        let seven = epochs[&7];
        assert_eq!((seven.last_append, seven.first_line, seven.last_line), (950, 1_500, 1_600));
        assert_eq!((epochs[&8].last_append, epochs[&8].first_line), (1200, 1_700));
        assert_eq!(digits(b"18446744073709551615"), None, "twenty digits");
        assert_eq!((digits(b""), digits(b"12"), digits(b"1a")), (None, Some(12), None));
    }
}
