//! `millpond demo`: the README's first command. Generates a keyed stream of
//! JSON events into a topic on the embedded log, reads back what it wrote,
//! checks it, and prints a summary with a few records.

use std::time::Instant;

use anyhow::{Result, ensure};
use clap::Args;
use millpond_log::{Log, Record, TopicConfig};

/// Records per produce call.
const CHUNK_RECORDS: usize = 5_000;

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// How many events to generate.
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    #[arg(long, default_value = "events")]
    topic: String,
    /// Partitions, if the topic is created.
    #[arg(long, default_value_t = 4)]
    partitions: u32,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// A small, deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

pub(crate) fn run(log: &Log, args: &DemoArgs) -> Result<()> {
    if !log.topics().contains(&args.topic) {
        log.create_topic(&args.topic, TopicConfig { partitions: args.partitions, ..TopicConfig::default() })?;
    }
    let partitions = log.topic_config(&args.topic)?.partitions;
    let starts: Vec<u64> = (0..partitions).map(|p| log.high_watermark(&args.topic, p)).collect::<Result<_, _>>()?;

    let mut rng = Rng(args.seed.max(1));
    let actions = ["view", "click", "cart", "buy"];
    let mut progress = crate::progress::Progress::new("generating", Some(args.records));
    let started = Instant::now();
    let mut written = 0u64;
    let mut bytes = 0u64;
    while written < args.records {
        let chunk = (args.records - written).min(CHUNK_RECORDS as u64);
        let now = log.clock().now_ms();
        let records: Vec<Record> = (written..written + chunk)
            .map(|seq| {
                let user = rng.next() % 10_000;
                let action = actions[(rng.next() % 4) as usize];
                let amount = rng.next() % 10_000;
                let value = format!(r#"{{"seq":{seq},"user":"u{user}","action":"{action}","amount_cents":{amount}}}"#);
                bytes += value.len() as u64;
                Record::new(Some(format!("u{user}").as_bytes()), Some(value.as_bytes()), now)
            })
            .collect();
        log.produce(&args.topic, &records)?;
        written += chunk;
        progress.advance(chunk, chunk);
    }
    log.flush()?;
    progress.finish();
    let write_seconds = started.elapsed().as_secs_f64();

    // Read back exactly what this run appended.
    let started = Instant::now();
    let mut seen = vec![false; args.records as usize];
    let mut samples = Vec::new();
    for (partition, start) in (0..partitions).zip(starts) {
        let mut offset = start;
        loop {
            let fetch = log.fetch(&args.topic, partition, offset, 1 << 20)?;
            if fetch.is_empty() {
                break;
            }
            for record in fetch.records() {
                let value: serde_json::Value = serde_json::from_slice(record.value.unwrap_or_default())?;
                let seq = value["seq"].as_u64().unwrap_or(u64::MAX) as usize;
                ensure!(seq < seen.len() && !seen[seq], "record {seq} read back twice or unexpected");
                seen[seq] = true;
                if samples.len() < 5 && partition == 0 {
                    samples.push(format!(
                        r#"{{"partition":{partition},"offset":{},"key":{:?},"value":{}}}"#,
                        record.offset,
                        String::from_utf8_lossy(record.key.unwrap_or_default()),
                        String::from_utf8_lossy(record.value.unwrap_or_default())
                    ));
                }
            }
            offset = fetch.next_offset();
        }
    }
    let read_seconds = started.elapsed().as_secs_f64();
    let missing = seen.iter().filter(|s| !**s).count();
    ensure!(missing == 0, "{missing} records were not read back");

    println!("millpond demo: topic '{}' ({partitions} partitions) in {}", args.topic, log.dir().display());
    println!(
        "  wrote {} records ({:.1} MB) in {:.2} s: {:.0} records/s, durable (fsync per batch)",
        args.records,
        bytes as f64 / 1e6,
        write_seconds,
        args.records as f64 / write_seconds
    );
    println!(
        "  read back all {} records, each exactly once, in {:.2} s: {:.0} records/s",
        args.records,
        read_seconds,
        args.records as f64 / read_seconds
    );
    for info in log.describe(&args.topic)? {
        println!(
            "  partition {}: offsets [{}, {}), {} segment(s), {} bytes",
            info.partition, info.low_watermark, info.high_watermark, info.segments, info.size_bytes
        );
    }
    println!("  first records of partition 0 from this run:");
    for sample in samples {
        println!("    {sample}");
    }
    let exe = std::env::current_exe().map_or_else(|_| "millpond".into(), |p| p.display().to_string());
    let dir = log.dir().display();
    println!("  next: {exe} --data-dir {dir} consume {} --max 5", args.topic);
    println!("        {exe} --data-dir {dir} topic describe {}", args.topic);
    Ok(())
}
