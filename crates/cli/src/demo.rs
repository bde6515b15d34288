//! `millpond demo`: the README's first command, live. Starts the server on
//! the data directory (the embedded log, the runtime, the Postgres endpoint
//! on 127.0.0.1:6875), defines the Nexmark sources and the `sql/nexmark`
//! views, feeds the topics at a steady rate from the Nexmark generator, and
//! prints the psql lines to watch a view change, until Ctrl-C.
//!
//! Run it again and the stream continues where it stopped; the views
//! resume from their last checkpoint. `--once` runs the batch demo instead
//! (generate, catch up, print, exit).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use millpond_dataflow::{Event, Subscription, read_view};
use millpond_log::{Log, LogOptions};

use crate::job::JobArgs;

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// How many Nexmark events to append (persons, auctions and bids, 1:3:46).
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// Timely worker threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Checkpoint interval.
    #[arg(long, default_value_t = 250)]
    epoch_ms: u64,
    /// Run the batch demo: generate --events, catch up, print, exit.
    #[arg(long)]
    once: bool,
    /// Live: events appended per second.
    #[arg(long, default_value_t = 2_000)]
    rate: u64,
    /// Live: the Postgres endpoint's address.
    #[arg(long, default_value = "127.0.0.1:6875")]
    pg_listen: std::net::SocketAddr,
}

/// Events already in the Nexmark topics (the next event number).
fn events_so_far(data_dir: &Path) -> Result<u64> {
    let log = Log::open(data_dir, LogOptions { background: false, ..LogOptions::default() })?;
    let mut total = 0;
    for topic in ["person", "auction", "bid"] {
        if log.topics().iter().any(|t| t == topic) {
            total += log.describe(topic)?.iter().map(|p| p.high_watermark).sum::<u64>();
        }
    }
    log.close()?;
    Ok(total)
}

pub(crate) fn run(data_dir: &Path, args: &DemoArgs) -> Result<()> {
    if !args.once {
        return live::run(data_dir, args.workers, args.epoch_ms, args.rate, args.pg_listen);
    }
    let start = events_so_far(data_dir)?;
    println!("1. generating Nexmark events {start}..{} into {}", start + args.events, data_dir.display());
    {
        let log = Log::open(data_dir, LogOptions::default())?;
        crate::generate::nexmark(&log, start, args.events, 0, None, 4)?;
        log.close()?;
    }

    println!("2. running the views bid_stats, bidder_stats, category_stats, top_bids ({} ms epochs)", args.epoch_ms);
    println!("   live changes of category_stats, one line per change, as each epoch commits:");
    let job_args = JobArgs::until_caught_up(args.workers, args.epoch_ms);
    let started = Instant::now();
    let dir = data_dir.to_path_buf();
    let job =
        std::thread::spawn(move || crate::job::run_nexmark(&dir, &job_args, false, Arc::new(AtomicBool::new(false))));

    // Follow category_stats from its current contents (a snapshot) on.
    let mut subscription = None;
    let mut printed_epochs = 0;
    loop {
        let finished = job.is_finished();
        if subscription.is_none() {
            subscription = Subscription::open(data_dir, "category_stats", None, true).ok();
        }
        if let Some(subscription) = subscription.as_mut() {
            while let Some(event) = subscription.next_timeout(Duration::from_millis(20))? {
                match event {
                    Event::Change { epoch, diff, row } => {
                        println!("   epoch {epoch:>5} {diff:>+3} {row}");
                    }
                    Event::Progress { epoch, .. } => {
                        println!("   epoch {epoch:>5} complete");
                        printed_epochs += 1;
                    }
                }
            }
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
        if finished {
            break;
        }
    }
    let stats = job.join().expect("the job thread does not panic")?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "3. caught up: {} records in {seconds:.2} s ({:.0} records/s), {} dead letters, epochs {}..={} ({printed_epochs} shown)",
        stats.records,
        stats.records as f64 / seconds.max(1e-9),
        stats.dead_letters,
        stats.first_epoch,
        stats.committed_epoch
    );
    let mut bid_stats = read_view(data_dir, "bid_stats")?.rows;
    bid_stats.sort_by_key(|(row, _)| std::cmp::Reverse(row["volume"].as_i64().unwrap_or(0)));
    println!("   bid_stats has {} auctions; the top 3 by volume:", bid_stats.len());
    for (row, _) in bid_stats.iter().take(3) {
        println!("   {row}");
    }
    println!("next: millpond view list | millpond view read top_bids | millpond subscribe bid_stats --progress");
    Ok(())
}

/// The live demo: the server, fed at a steady rate.
mod live {
    use std::net::SocketAddr;
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use anyhow::{Context, Result};

    use super::super::{serve, signals};
    use millpond_dataflow::TopicRecord;
    use millpond_nexmark::{Config, Generator};
    use millpond_server::{Engine, EngineConfig, PgConfig, PgEndpoint};

    /// The Nexmark topics, in the generator's order.
    const TOPICS: [&str; 3] = ["person", "auction", "bid"];

    /// The definitions the demo runs: the sources, then the Nexmark queries.
    const DEFINITIONS: [(&str, &str); 6] = [
        ("sql/nexmark/sources.sql", include_str!("../../../sql/nexmark/sources.sql")),
        ("sql/nexmark/q3.sql", include_str!("../../../sql/nexmark/q3.sql")),
        ("sql/nexmark/q4.sql", include_str!("../../../sql/nexmark/q4.sql")),
        ("sql/nexmark/q5.sql", include_str!("../../../sql/nexmark/q5.sql")),
        ("sql/nexmark/q6.sql", include_str!("../../../sql/nexmark/q6.sql")),
        ("sql/nexmark/q7.sql", include_str!("../../../sql/nexmark/q7.sql")),
    ];

    /// Events already in the Nexmark topics: where the stream continues.
    fn events_so_far(engine: &Engine) -> Result<u64> {
        let mut total = 0;
        for topic in TOPICS {
            total += engine.records_in(topic)?;
        }
        Ok(total)
    }

    pub(crate) fn run(data_dir: &Path, workers: usize, epoch_ms: u64, rate: u64, pg_listen: SocketAddr) -> Result<()> {
        let stop = signals::stop_flag()?;
        let config = EngineConfig { workers, epoch_interval_ms: epoch_ms, ..EngineConfig::new(data_dir) };
        let engine = Engine::open(config).context("opening the data directory")?;
        for (file, sql) in DEFINITIONS {
            engine.execute_file(sql, file).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        }
        let endpoint = PgEndpoint::start(engine.clone(), PgConfig::new(pg_listen))?;
        let address = data_dir.join(serve::SERVER_FILE);
        let record = serde_json::json!({ "pg": endpoint.addr().to_string(), "pid": std::process::id() });
        std::fs::write(&address, record.to_string()).with_context(|| format!("writing {}", address.display()))?;
        let start = events_so_far(&engine)?;
        let (ip, port) = (endpoint.addr().ip(), endpoint.addr().port());
        println!(
            "serving {} on postgres://{}: Nexmark events from {start} on, {rate}/s",
            data_dir.display(),
            endpoint.addr()
        );
        println!("views: nexmark_q3 .. nexmark_q7 (sql/nexmark); watch one change as each epoch commits:");
        println!("  psql -h {ip} -p {port} -c \"COPY (SUBSCRIBE nexmark_q5 WITH (PROGRESS)) TO STDOUT\"");
        println!("  psql -h {ip} -p {port} -c \"SELECT * FROM nexmark_q4 ORDER BY category\"");
        println!("Ctrl-C stops (the next run continues the stream).");
        let feeding = Arc::new(AtomicBool::new(false));
        let feeder = {
            let (engine, stop, feeding) = (engine.clone(), stop.clone(), feeding.clone());
            std::thread::spawn(move || feed(&engine, start, rate, &stop, &feeding))
        };
        while !stop.load(Ordering::Relaxed) && !feeder.is_finished() {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        let fed = feeder.join().expect("the feeder does not panic");
        drop(endpoint);
        let _ = std::fs::remove_file(&address);
        engine.shutdown()?;
        let events = fed?;
        println!("stopped after {events} events");
        Ok(())
    }

    /// Appends the stream from event `start` on at `rate` events/s until `stop`.
    fn feed(engine: &Engine, start: u64, rate: u64, stop: &AtomicBool, feeding: &AtomicBool) -> Result<u64> {
        let generator = Generator::new(Config { events_per_second: rate, ..Config::default() });
        let chunk = (rate / 10).max(1);
        let started = Instant::now();
        let mut next = start;
        feeding.store(true, Ordering::Relaxed);
        while !stop.load(Ordering::Relaxed) {
            let mut per_topic: [Vec<TopicRecord>; 3] = Default::default();
            for n in next..next + chunk {
                let event = generator.event(n);
                let index = TOPICS.iter().position(|t| *t == event.topic()).expect("a Nexmark topic");
                let key = Some(event.key().to_string().into_bytes());
                per_topic[index].push(TopicRecord { key, value: Some(event.to_json().into_bytes()), headers: vec![] });
            }
            for (topic, records) in TOPICS.iter().zip(per_topic) {
                engine.append(topic, records)?;
            }
            next += chunk;
            let due = Duration::from_secs_f64((next - start) as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        Ok(next - start)
    }
}
