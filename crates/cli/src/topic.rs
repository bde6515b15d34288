//! `millpond topic create|list|describe|delete|repair`.

use anyhow::Result;
use clap::{Args, Subcommand};
use millpond_log::{CleanupPolicy, FlushPolicy, Log, TopicConfig};
use serde_json::json;

#[derive(Debug, Subcommand)]
pub(crate) enum TopicCommand {
    /// Create a topic.
    Create(CreateArgs),
    /// List topics.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show a topic's config and, per partition, watermarks, segments and bytes.
    Describe {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Delete a topic and its data. Internal topics (names starting with
    /// `__`) need --force, and their owner (the SQL catalog, a running job)
    /// must be gone for good.
    Delete {
        name: String,
        #[arg(long)]
        force: bool,
    },
    /// Open the log cutting this topic's partitions at a corrupt batch of
    /// their last segment (losing every record from it on), and print what
    /// was cut. Torn tails are cut by every open; this also cuts corruption
    /// that valid data follows, which an ordinary open refuses.
    Repair {
        name: String,
        /// Only this partition.
        #[arg(long)]
        partition: Option<u32>,
    },
}

/// Prints what the repair open (`log` was opened with repair of `name`) cut.
pub(crate) fn repair(log: &Log, name: &str, partition: Option<u32>) -> Result<()> {
    let count = log.topic_config(name)?.partitions;
    if let Some(p) = partition
        && p >= count
    {
        anyhow::bail!("topic '{name}' has no partition {p} (it has {count})");
    }
    let cuts: Vec<_> = log.recovery_report().iter().filter(|c| c.topic == name).collect();
    if cuts.is_empty() {
        println!("nothing to repair in topic '{name}'");
    }
    for cut in cuts {
        println!(
            "cut {}/{} at offset {}: {} bytes from byte {} of {} ({:?}: {})",
            cut.topic,
            cut.partition,
            cut.first_offset,
            cut.bytes,
            cut.position,
            cut.path.display(),
            cut.reason,
            cut.error
        );
    }
    Ok(())
}

#[derive(Debug, Args)]
pub(crate) struct CreateArgs {
    name: String,
    #[arg(long, default_value_t = 1)]
    partitions: u32,
    /// Delete segments older than this; default 7 days. 0 or less keeps forever.
    #[arg(long, allow_negative_numbers = true)]
    retention_ms: Option<i64>,
    #[arg(long)]
    retention_bytes: Option<u64>,
    #[arg(long)]
    segment_bytes: Option<u64>,
    #[arg(long)]
    segment_ms: Option<u64>,
    /// delete, compact, or compact,delete.
    #[arg(long, default_value = "delete")]
    cleanup_policy: String,
    #[arg(long)]
    delete_retention_ms: Option<u64>,
    /// Acknowledge appends after the write and fsync every this many ms
    /// (default: acknowledge only after fsync, with group commit).
    #[arg(long)]
    flush_ms: Option<u64>,
    /// With --flush-ms: also fsync once this many records are unsynced.
    #[arg(long, requires = "flush_ms")]
    flush_records: Option<u64>,
}

pub(crate) fn run(log: &Log, command: TopicCommand) -> Result<()> {
    match command {
        TopicCommand::Create(args) => {
            let defaults = TopicConfig::default();
            let config = TopicConfig {
                partitions: args.partitions,
                retention_ms: match args.retention_ms {
                    None => defaults.retention_ms,
                    Some(ms) if ms <= 0 => None,
                    Some(ms) => Some(ms as u64),
                },
                retention_bytes: args.retention_bytes,
                segment_bytes: args.segment_bytes.unwrap_or(defaults.segment_bytes),
                segment_ms: args.segment_ms.unwrap_or(defaults.segment_ms),
                cleanup_policy: args.cleanup_policy.parse::<CleanupPolicy>()?,
                delete_retention_ms: args.delete_retention_ms.unwrap_or(defaults.delete_retention_ms),
                flush: match args.flush_ms {
                    None => FlushPolicy::Durable,
                    Some(interval_ms) => {
                        FlushPolicy::Interval { interval_ms, records: args.flush_records.unwrap_or(u64::MAX) }
                    }
                },
                ..defaults
            };
            log.create_topic(&args.name, config)?;
            println!("created topic '{}' with {} partition(s)", args.name, args.partitions);
        }
        TopicCommand::List { json } => {
            let topics = log.topics();
            if json {
                let list: Vec<_> = topics
                    .iter()
                    .map(|name| {
                        let partitions = log.topic_config(name).map(|c| c.partitions).unwrap_or(0);
                        json!({ "name": name, "partitions": partitions, "internal": millpond_log::is_internal_topic(name) })
                    })
                    .collect();
                println!("{}", serde_json::to_string(&list)?);
            } else {
                for name in topics {
                    println!("{name}");
                }
            }
        }
        TopicCommand::Describe { name, json } => {
            let config = log.topic_config(&name)?;
            let partitions = log.describe(&name)?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&json!({ "name": name, "config": config, "partitions": partitions }))?
                );
            } else {
                println!(
                    "topic {name}: partitions={} cleanup_policy={:?} retention_ms={:?} retention_bytes={:?} segment_bytes={}",
                    config.partitions,
                    config.cleanup_policy,
                    config.retention_ms,
                    config.retention_bytes,
                    config.segment_bytes
                );
                println!("{:>9} {:>14} {:>14} {:>8} {:>14}", "partition", "low", "high", "segments", "bytes");
                for p in partitions {
                    println!(
                        "{:>9} {:>14} {:>14} {:>8} {:>14}",
                        p.partition, p.low_watermark, p.high_watermark, p.segments, p.size_bytes
                    );
                }
            }
        }
        TopicCommand::Delete { name, force } => {
            if force {
                log.delete_topic_forced(&name)?;
            } else {
                log.delete_topic(&name)?;
            }
            println!("deleted topic '{name}'");
        }
        TopicCommand::Repair { name, partition } => repair(log, &name, partition)?,
    }
    Ok(())
}
