//! `millpond gen nexmark`: the Nexmark event stream into the topics
//! `person`, `auction` and `bid` (JSON values, keyed by id; bids by auction,
//! so every bid of an auction lands in one partition).

use std::time::{Duration, Instant};

use anyhow::Result;
use clap::{Args, Subcommand};
use millpond_log::{Log, Record, TopicConfig};
use millpond_nexmark::{Config, Generator};

/// Events generated and appended per step.
const CHUNK_EVENTS: u64 = 10_000;
/// Largest event number (event times stay far from overflow).
const EVENT_NUMBER_MAX: u64 = 1 << 48;

#[derive(Debug, Subcommand)]
pub(crate) enum GenCommand {
    /// Persons, auctions and bids (1:3:46) with hot auctions, sellers and bidders.
    Nexmark(NexmarkArgs),
}

#[derive(Debug, Args)]
pub(crate) struct NexmarkArgs {
    /// How many events.
    #[arg(long)]
    events: u64,
    /// Emit at most this many events per second of wall-clock time (and space
    /// event times by it); default: as fast as possible, event time 10 000/s.
    /// A continuation (--start) must use the same rate to get the same stream.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    rate: Option<u64>,
    /// The stream's seed: the same seed gives the same events.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// First event number: continue an earlier run with `--start` = its end.
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Partitions of each topic, if it is created.
    #[arg(long, default_value_t = 4)]
    partitions: u32,
}

pub(crate) fn run(log: &Log, command: GenCommand) -> Result<()> {
    let GenCommand::Nexmark(args) = command;
    nexmark(log, args.start, args.events, args.seed, args.rate, args.partitions)
}

/// Appends Nexmark events `start..start + events` of the stream `seed` to the
/// topics person, auction and bid (created with `partitions` if missing).
pub(crate) fn nexmark(log: &Log, start: u64, events: u64, seed: u64, rate: Option<u64>, partitions: u32) -> Result<()> {
    let args = NexmarkArgs { events, rate, seed, start, partitions };
    let topics = ["person", "auction", "bid"];
    for topic in topics {
        if !log.topics().iter().any(|t| t == topic) {
            // Event times are fixed in the past (reproducible runs), so time
            // retention would delete the data: keep it until deleted.
            let config = TopicConfig { partitions: args.partitions, retention_ms: None, ..TopicConfig::default() };
            log.create_topic(topic, config)?;
        }
    }
    let config = Config { seed: args.seed, events_per_second: args.rate.unwrap_or(10_000), ..Config::default() };
    let generator = Generator::new(config);
    let mut progress = crate::progress::Progress::new("generating", Some(args.events));
    let started = Instant::now();
    let mut counts = [0u64; 3];
    let end = args
        .start
        .checked_add(args.events)
        .filter(|&end| end <= EVENT_NUMBER_MAX)
        .ok_or_else(|| anyhow::anyhow!("--start + --events must be at most {EVENT_NUMBER_MAX}"))?;
    // Below the chunk size, pace in tenths of a second rather than bursts.
    let chunk_events = args.rate.map_or(CHUNK_EVENTS, |rate| (rate / 10).clamp(1, CHUNK_EVENTS));
    let mut next = args.start;
    while next < end {
        let chunk_end = (next + chunk_events).min(end);
        let mut per_topic: [Vec<Record>; 3] = Default::default();
        for n in next..chunk_end {
            let event = generator.event(n);
            let index = topics.iter().position(|t| *t == event.topic()).expect("known topic");
            let key = event.key().to_string();
            per_topic[index].push(Record::new(
                Some(key.as_bytes()),
                Some(event.to_json().as_bytes()),
                event.date_time(),
            ));
        }
        for (index, records) in per_topic.iter().enumerate() {
            if !records.is_empty() {
                log.produce(topics[index], records)?;
                counts[index] += records.len() as u64;
            }
        }
        progress.advance(chunk_end - next, chunk_end - next);
        next = chunk_end;
        if let Some(rate) = args.rate {
            // Pace against the start, so the average rate holds over the run.
            let due = Duration::from_secs_f64((next - args.start) as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    }
    log.flush()?;
    progress.finish();
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "generated events {}..{} (seed {}): {} persons, {} auctions, {} bids in {:.2} s ({:.0} events/s)",
        args.start,
        end,
        args.seed,
        counts[0],
        counts[1],
        counts[2],
        seconds,
        args.events as f64 / seconds.max(1e-9)
    );
    // Event times depend on the rate, so a continuation must repeat it.
    let rate = args.rate.map(|r| format!(" --rate {r}")).unwrap_or_default();
    println!("continue with: millpond gen nexmark --start {end} --seed {}{rate} --events N", args.seed);
    Ok(())
}
