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
        /// Print one JSON array of {name, partitions}.
        #[arg(long)]
        json: bool,
    },
    /// Show a topic's config and, per partition, watermarks, segments and bytes.
    Describe {
        /// The topic.
        name: String,
        /// Print one JSON object {name, id, config, partitions}.
        #[arg(long)]
        json: bool,
    },
    /// Delete a topic and its data. Internal topics (names starting with
    /// `__`) need --force, and their owner (the SQL catalog, a running job)
    /// must be gone for good.
    Delete {
        /// The topic.
        name: String,
        /// Delete even a topic that a job's reader or the SQL catalog reads
        /// (their views then refuse to resume), or an internal topic.
        #[arg(long)]
        force: bool,
    },
    /// Open the log cutting this topic's partitions at a corrupt batch of
    /// their last segment (losing every record from it on), and print what
    /// was cut. Torn tails are cut by every open; this also cuts corruption
    /// that valid data follows, which an ordinary open refuses.
    Repair {
        /// The topic.
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
                let id = log.topic_id(&name)?.to_string();
                println!(
                    "{}",
                    serde_json::to_string(
                        &json!({ "name": name, "id": id, "config": config, "partitions": partitions })
                    )?
                );
            } else {
                println!("topic {name} (id {}): {}", log.topic_id(&name)?, settings(&config));
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
            if !force {
                refuse_if_read(log, &name)?;
            }
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

/// A topic's settings as `topic create` spells them (`--retention-ms 5` is
/// `retention-ms=5`); "none" for a setting that is off.
fn settings(config: &TopicConfig) -> String {
    let or_none = |value: Option<String>| value.unwrap_or_else(|| "none".to_owned());
    let policy = match config.cleanup_policy {
        CleanupPolicy::Delete => "delete",
        CleanupPolicy::Compact => "compact",
        CleanupPolicy::CompactDelete => "compact,delete",
    };
    let flush = match config.flush {
        FlushPolicy::Durable => "durable".to_owned(),
        FlushPolicy::Interval { interval_ms, records } => format!("flush-ms={interval_ms} flush-records={records}"),
    };
    format!(
        "partitions={} cleanup-policy={policy} retention-ms={} retention-bytes={} segment-bytes={} segment-ms={} \
         delete-retention-ms={} flush={flush}",
        config.partitions,
        or_none(config.retention_ms.map(|ms| ms.to_string())),
        or_none(config.retention_bytes.map(|b| b.to_string())),
        config.segment_bytes,
        config.segment_ms,
        config.delete_retention_ms,
    )
}

/// Refuses to delete a topic that something still reads: a job's committed
/// reader (its views would resume at offsets of a topic that is gone) or a
/// source or table of the SQL catalog.
fn refuse_if_read(log: &Log, name: &str) -> Result<()> {
    let readers: Vec<String> = millpond_dataflow::CheckpointMeta::read_published(log.dir())?
        .map(|meta| meta.readers.into_iter().filter(|(_, topic)| topic == name).map(|(reader, _)| reader).collect())
        .unwrap_or_default();
    if !readers.is_empty() {
        anyhow::bail!(
            "topic '{name}' is read by the committed reader(s) {} of this data directory's job: deleting it would \
             leave their views unable to resume. Drop those views first, or pass --force",
            readers.join(", ")
        );
    }
    if let Some(source) = millpond_sql::topic_reader(log.dir(), name)? {
        anyhow::bail!("topic '{name}' is read by {source} in the SQL catalog: drop it first, or pass --force");
    }
    Ok(())
}
