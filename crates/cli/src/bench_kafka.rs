//! `millpond bench kafka --brokers HOST:PORT`: `bid_stats` with an Apache
//! Kafka cluster on both sides, against the same job on the embedded log,
//! in one run (`benches/kafka/pipeline.sh` starts a Kafka broker from the
//! jars and runs it).
//!
//! Throughput: the same Nexmark bids (generated once into `DIR/input`,
//! produced once into the Kafka topic `bench-bid-N`), read to their end by
//! one worker with 1 s epochs (events/s per core): from the embedded log,
//! and from Kafka (the Kafka source) with the view shipped to Kafka by the
//! transactional sink until Kafka holds its last epoch.
//!
//! Flink (`--flink`, `bench_flink`): the same pipeline as a Flink SQL job
//! over the same input topic (`benches/kafka/flink`), its job time beside
//! Millpond's.
//!
//! Latency: the Kafka pipeline running, a producer writes bids at a fixed
//! rate with a probe bid (an auction of its own) every 50 ms; a
//! read_committed consumer of the sink's topic reads each probe's row. A
//! probe's latency is from its producer's ack to that read.
//!
//! Invariant: a figure is reported only for a run that read every bid (the
//! records counted equal the bids) and, for the sink, whose Kafka progress
//! reached the job's last committed epoch.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use millpond_dataflow::{Count, KafkaSink, KafkaTopic, Max, Multiplicity, Runtime, RuntimeConfig, Sum, json};
use millpond_log::{Log, LogOptions};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientConfig, ClientContext, Message, Offset, TopicPartitionList};

use crate::bench_flink::{Flink, FlinkMode, FlinkRun};
use crate::job::{Bid, BidStats};

#[derive(Debug, Args)]
pub(crate) struct KafkaBenchArgs {
    /// The Kafka cluster's `bootstrap.servers`.
    #[arg(long)]
    brokers: String,
    /// Bids to process in the throughput runs.
    #[arg(long, default_value_t = 5_000_000)]
    bids: u64,
    #[arg(long, default_value_t = 1000)]
    epoch_ms: u64,
    /// Bids per second while latency is measured.
    #[arg(long, default_value_t = 20_000)]
    rate: u64,
    /// How long latency is measured, seconds.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Where to put the input and the runs (default: DATA_DIR/bench-kafka).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Run the same pipeline in Flink too (benches/kafka/flink: Flink SQL,
    /// the Kafka connector exactly once, RocksDB, 1 s checkpoints): auto =
    /// where the machine has java (and mvn until the runner is built).
    #[arg(long, value_enum, default_value = "auto")]
    flink: FlinkMode,
    /// The Flink runner's directory.
    #[arg(long, default_value = "benches/kafka/flink")]
    flink_dir: PathBuf,
    /// How long the Flink run may take, seconds.
    #[arg(long, default_value_t = 900)]
    flink_timeout_s: u64,
}

const PARTITIONS: i32 = 4;
/// Probe auctions start here (Nexmark's are far below).
const PROBE_AUCTION_BASE: u64 = 1 << 50;

fn client(brokers: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers);
    config
}

/// Produces the input's bids into `topic` unless it holds them already.
fn ensure_kafka_input(input: &Path, brokers: &str, topic: &str, bids: u64) -> Result<()> {
    let consumer: BaseConsumer = client(brokers).create()?;
    let held: i64 = (0..PARTITIONS)
        .map(|p| consumer.fetch_watermarks(topic, p, Duration::from_secs(10)).map_or(0, |(_, high)| high))
        .sum();
    if held as u64 == bids {
        return Ok(());
    }
    if held != 0 {
        bail!("Kafka topic {topic} holds {held} records, not {bids}: delete it");
    }
    create_topic(brokers, topic, PARTITIONS)?;
    let producer: BaseProducer = client(brokers)
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("compression.type", "lz4")
        .set("enable.idempotence", "true")
        .create()?;
    let log = Log::open(input, LogOptions { background: false, ..LogOptions::default() })?;
    let mut progress = crate::progress::Progress::new("producing bids into Kafka", Some(bids));
    for info in log.describe("bid")? {
        let mut offset = info.low_watermark;
        while offset < info.high_watermark {
            let fetch = log.fetch("bid", info.partition, offset, 1 << 20)?;
            let mut sent = 0;
            for record in fetch.records() {
                let mut next =
                    BaseRecord::to(topic).key(record.key.unwrap_or_default()).payload(record.value.unwrap_or_default());
                loop {
                    match producer.send(next) {
                        Ok(()) => break,
                        Err((_, back)) => {
                            producer.poll(Duration::from_millis(5));
                            next = back;
                        }
                    }
                }
                sent += 1;
            }
            producer.poll(Duration::ZERO);
            progress.advance(sent, sent);
            offset = fetch.next_offset();
        }
    }
    producer.flush(Duration::from_secs(300))?;
    progress.finish();
    log.close()?;
    Ok(())
}

/// `bid_stats` over `bids`, materialized (as the Nexmark job declares it).
fn bid_stats_job(job: &mut millpond_dataflow::Job<'_>, source: Option<&KafkaTopic>) {
    let bids = match source {
        Some(topic) => job.kafka_source("bid", "bid", topic, json::<Bid>()),
        None => job.source("bid", json::<Bid>()),
    };
    let stats = bids
        .map(|b| (b.auction, b.price))
        .aggregate("bid_stats", (Count, Sum(|p: &u64| *p as i64), Max(|p: &u64| *p)))
        .map(|(auction, (bids, volume, top))| BidStats { auction, bids, volume, top });
    job.materialize_view("bid_stats", "", Multiplicity::Unique, stats);
}

fn config(dir: &Path, epoch_ms: u64, stop: Option<Arc<AtomicBool>>) -> RuntimeConfig {
    let config = RuntimeConfig::new(dir).workers(1).epoch_interval_ms(epoch_ms);
    match stop {
        Some(stop) => config.stop(stop),
        None => config.stop_when_caught_up(true),
    }
}

fn sink(brokers: &str, topic: &str) -> KafkaSink {
    KafkaSink {
        name: topic.to_owned(),
        view: "bid_stats".to_owned(),
        brokers: brokers.to_owned(),
        topic: topic.to_owned(),
        progress_topic: millpond_dataflow::kafka_sink::PROGRESS_TOPIC_DEFAULT.to_owned(),
        properties: vec![("linger.ms".into(), "20".into()), ("compression.type".into(), "lz4".into())],
        envelope: millpond_dataflow::Envelope::Changes,
    }
}

fn committed_epoch(dir: &Path) -> u64 {
    millpond_dataflow::CheckpointMeta::read_published(dir).ok().flatten().map_or(0, |m| m.epoch)
}

/// Seconds for the job to read every bid from Kafka, and for the sink to
/// ship the view's last epoch.
fn kafka_run(run: &Path, args: &KafkaBenchArgs, topic: &str, sink_topic: &str) -> Result<(f64, f64)> {
    let source = KafkaTopic { brokers: args.brokers.clone(), topic: topic.to_owned(), properties: Vec::new() };
    let stop = Arc::new(AtomicBool::new(false));
    let sink = sink(&args.brokers, sink_topic);
    let mut progress = ProgressWatch::new(&args.brokers)?;
    let shipping = {
        let (sink, run, stop) = (sink.clone(), run.to_owned(), stop.clone());
        std::thread::spawn(move || sink.run(&run, &stop))
    };
    let started = Instant::now();
    let stats = Runtime::run(config(run, args.epoch_ms, None), move |job| bid_stats_job(job, Some(&source)))?;
    let job_seconds = started.elapsed().as_secs_f64();
    if stats.records != args.bids {
        stop.store(true, Ordering::Relaxed);
        bail!("the Kafka run read {} records, expected {}", stats.records, args.bids);
    }
    let last = committed_epoch(run);
    let deadline = Instant::now() + Duration::from_secs(600);
    while progress.next_epoch(sink_topic)? < Some(last) {
        if Instant::now() > deadline || shipping.is_finished() {
            stop.store(true, Ordering::Relaxed);
            bail!("the sink did not ship epoch {last}: {:?}", shipping.join());
        }
    }
    let sink_seconds = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    shipping.join().map_err(|_| anyhow::anyhow!("the sink's thread panicked"))??;
    Ok((job_seconds, sink_seconds))
}

/// A read_committed reader of the progress topic, kept open so that the
/// moment the sink's last epoch lands is seen within a poll.
struct ProgressWatch {
    consumer: BaseConsumer,
    last: HashMap<String, u64>,
}

impl ProgressWatch {
    fn new(brokers: &str) -> Result<ProgressWatch> {
        let consumer: BaseConsumer = client(brokers)
            .set("group.id", "bench-progress")
            .set("isolation.level", "read_committed")
            .set("fetch.wait.max.ms", "5")
            .create()?;
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(millpond_dataflow::kafka_sink::PROGRESS_TOPIC_DEFAULT, 0, Offset::Beginning)?;
        consumer.assign(&list)?;
        Ok(ProgressWatch { consumer, last: HashMap::new() })
    }

    /// Reads for up to 10 ms; the last epoch `sink` has recorded.
    fn next_epoch(&mut self, sink: &str) -> Result<Option<u64>> {
        if let Some(Ok(m)) = self.consumer.poll(Duration::from_millis(10)) {
            let value: serde_json::Value = serde_json::from_slice(m.payload().unwrap_or_default())?;
            if let (Some(name), Some(epoch)) = (value["sink"].as_str(), value["epoch"].as_u64()) {
                let entry = self.last.entry(name.to_owned()).or_default();
                *entry = (*entry).max(epoch);
            }
        }
        Ok(self.last.get(sink).copied())
    }
}

/// Ack times of probe bids (by probe index), from the producer's delivery reports.
#[derive(Default)]
struct Acks(Mutex<HashMap<usize, Instant>>);

impl ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = Box<usize>;
    fn delivery(&self, result: &DeliveryResult<'_>, probe: Box<usize>) {
        if result.is_ok() && *probe != usize::MAX {
            self.0.lock().expect("acks lock").insert(*probe, Instant::now());
        }
    }
}

/// Probe latencies (ms) through the running Kafka pipeline.
fn latencies(run: &Path, args: &KafkaBenchArgs, topic: &str, sink_topic: &str) -> Result<Vec<f64>> {
    let source = KafkaTopic { brokers: args.brokers.clone(), topic: topic.to_owned(), properties: Vec::new() };
    let stop = Arc::new(AtomicBool::new(false));
    let job = {
        let (run, stop, epoch_ms) = (run.to_owned(), stop.clone(), args.epoch_ms);
        std::thread::spawn(move || {
            Runtime::run(config(&run, epoch_ms, Some(stop)), move |job| bid_stats_job(job, Some(&source)))
        })
    };
    let shipping = {
        let (sink, run, stop) = (sink(&args.brokers, sink_topic), run.to_owned(), stop.clone());
        std::thread::spawn(move || sink.run(&run, &stop))
    };
    // Read the sink's topic from its end (what earlier runs left is not a probe).
    let consumer: BaseConsumer =
        client(&args.brokers).set("group.id", "bench-latency").set("isolation.level", "read_committed").create()?;
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(sink_topic, 0, Offset::End)?;
    consumer.assign(&list)?;
    let producer: ThreadedProducer<Acks> =
        client(&args.brokers).set("linger.ms", "5").create_with_context(Acks::default())?;
    let (started, mut sent, mut probes) = (Instant::now(), 0u64, 0usize);
    let mut read: HashMap<usize, Instant> = HashMap::new();
    let end = started + Duration::from_secs(args.seconds);
    while Instant::now() < end {
        let due = (started.elapsed().as_secs_f64() * args.rate as f64) as u64;
        while sent < due {
            let bid = format!(r#"{{"auction":{},"bidder":1,"price":{sent}}}"#, sent % 10_000);
            let _ = producer.send(BaseRecord::with_opaque_to(topic, Box::new(usize::MAX)).key("k").payload(&bid));
            sent += 1;
        }
        if started.elapsed() >= Duration::from_millis(50 * probes as u64) {
            let bid = format!(r#"{{"auction":{},"bidder":1,"price":1}}"#, PROBE_AUCTION_BASE + probes as u64);
            let _ = producer.send(BaseRecord::with_opaque_to(topic, Box::new(probes)).key("probe").payload(&bid));
            probes += 1;
        }
        while let Some(Ok(message)) = consumer.poll(Duration::ZERO) {
            let change: serde_json::Value = serde_json::from_slice(message.payload().unwrap_or_default())?;
            if let Some(auction) = change["row"]["auction"].as_u64().filter(|a| *a >= PROBE_AUCTION_BASE) {
                read.entry((auction - PROBE_AUCTION_BASE) as usize).or_insert_with(Instant::now);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // The last probes' rows arrive within a few epochs.
    let drain = Instant::now() + Duration::from_millis(5 * args.epoch_ms);
    while Instant::now() < drain {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(10)) {
            let change: serde_json::Value = serde_json::from_slice(message.payload().unwrap_or_default())?;
            if let Some(auction) = change["row"]["auction"].as_u64().filter(|a| *a >= PROBE_AUCTION_BASE) {
                read.entry((auction - PROBE_AUCTION_BASE) as usize).or_insert_with(Instant::now);
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    job.join().map_err(|_| anyhow::anyhow!("the job panicked"))??;
    shipping.join().map_err(|_| anyhow::anyhow!("the sink panicked"))??;
    let acks = producer.context().0.lock().expect("acks lock").clone();
    let mut samples: Vec<f64> = read
        .iter()
        .filter_map(|(probe, at)| acks.get(probe).map(|acked| at.saturating_duration_since(*acked).as_secs_f64() * 1e3))
        .collect();
    samples.sort_by(f64::total_cmp);
    if samples.len() < probes / 2 {
        bail!("only {} of {probes} probes came back through the sink", samples.len());
    }
    Ok(samples)
}

/// Creates `topic` (an existing one is fine).
fn create_topic(brokers: &str, topic: &str, partitions: i32) -> Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = client(brokers).create()?;
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for result in futures::executor::block_on(admin.create_topics([&new], &options))? {
        match result {
            Ok(_) | Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => bail!("creating Kafka topic {name}: {code}"),
        }
    }
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

pub(crate) fn run(data_dir: &Path, args: &KafkaBenchArgs) -> Result<()> {
    let dir = args.dir.clone().unwrap_or_else(|| data_dir.join("bench-kafka"));
    let input = dir.join("input");
    crate::bench_dataflow::ensure_input(&input, args.bids)?;
    let topic = format!("bench-bid-{}", args.bids);
    ensure_kafka_input(&input, &args.brokers, &topic, args.bids).context("the Kafka input")?;
    crate::bench_dataflow::warm_page_cache(&input)?;
    let nonce = std::process::id();
    println!(
        "bid_stats over {} Nexmark bids, 1 worker, {} ms epochs, Kafka at {}",
        args.bids, args.epoch_ms, args.brokers
    );
    println!("{:<58} {:>10} {:>16} {:>8}", "run", "seconds", "events/s/core", "ratio");
    let run = dir.join("run");
    crate::bench_dataflow::fresh_run_dir_with(&input, &run, &["bid"])?;
    let started = Instant::now();
    let stats = Runtime::run(config(&run, args.epoch_ms, None), |job| bid_stats_job(job, None))?;
    let embedded = started.elapsed().as_secs_f64();
    if stats.records != args.bids {
        bail!("the embedded run read {} records, expected {}", stats.records, args.bids);
    }
    std::fs::remove_dir_all(&run).ok();
    let sink_topic = format!("bench-bid-stats-{nonce}");
    create_topic(&args.brokers, &sink_topic, 1)?;
    let (job, shipped) = kafka_run(&run, args, &topic, &sink_topic)?;
    let rate = |seconds: f64| args.bids as f64 / seconds;
    println!("{:<58} {embedded:>10.2} {:>16.0} {:>8.2}", "embedded log -> bid_stats", rate(embedded), 1.0);
    println!("{:<58} {job:>10.2} {:>16.0} {:>8.2}", "Kafka source -> bid_stats", rate(job), embedded / job);
    println!(
        "{:<58} {shipped:>10.2} {:>16.0} {:>8.2}",
        "Kafka source -> bid_stats -> Kafka sink (last epoch shipped)",
        rate(shipped),
        embedded / shipped
    );
    println!("Kafka pipeline / embedded log: {:.2}x (target >= 0.7x)", embedded / shipped);
    if let Some(flink) =
        Flink::detect(args.flink, &args.flink_dir, crate::bench_flink::KAFKA_JAR, args.flink_timeout_s)?
    {
        let flink_sink = format!("flink-bid-stats-{nonce}");
        create_topic(&args.brokers, &flink_sink, 1)?;
        let label = "Flink: Kafka -> bid_stats -> Kafka (exactly once, p=1)";
        match flink.run_kafka(&args.brokers, &topic, &flink_sink, args.bids)? {
            FlinkRun::Done { job_seconds } => {
                println!("{label:<58} {job_seconds:>10.2} {:>16.0} {:>8.2}", rate(job_seconds), embedded / job_seconds);
                println!("Millpond's Kafka pipeline / Flink's: {:.2}x", job_seconds / shipped);
            }
            FlinkRun::Timeout => println!("{label:<58} timed out after {} s", args.flink_timeout_s),
            FlinkRun::Failed => println!("{label:<58} failed (its output is above)"),
        }
    }
    std::fs::remove_dir_all(&run).ok();
    std::fs::create_dir_all(&run)?;
    let latency_topic = format!("bench-latency-{nonce}");
    create_topic(&args.brokers, &latency_topic, 1)?;
    let latency_sink = format!("bench-latency-stats-{nonce}");
    create_topic(&args.brokers, &latency_sink, 1)?;
    let samples = latencies(&run, args, &latency_topic, &latency_sink)?;
    println!(
        "end-to-end latency at {} bids/s ({} probes, producer ack -> sink consumer read): p50 {:.0} ms, p99 {:.0} ms \
         (target p99 <= 2 x {} ms)",
        args.rate,
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        args.epoch_ms
    );
    std::fs::remove_dir_all(&run).ok();
    Ok(())
}
