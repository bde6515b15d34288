//! `millpond produce TOPIC`: one record per stdin line.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};

use anyhow::{Context, Result, bail};
use clap::Args;
use millpond_log::{AppendInfo, Log, Record};

/// Records are appended in batches of at most this many bytes of input...
const BATCH_BYTES_MAX: usize = 512 * 1024;
/// ...or this many records.
const BATCH_RECORDS_MAX: usize = 10_000;

#[derive(Debug, Args)]
pub(crate) struct ProduceArgs {
    topic: String,
    /// Use this field of each line (a JSON object) as the key, as text.
    #[arg(long)]
    key_field: Option<String>,
    /// Append everything to this partition instead of routing by key.
    #[arg(long)]
    partition: Option<u32>,
}

#[derive(Debug, Default)]
struct Summary {
    per_partition: BTreeMap<u32, (u64, u64, u64)>,
}

impl Summary {
    fn add(&mut self, info: AppendInfo) {
        let count = info.last_offset - info.base_offset + 1;
        let entry = self.per_partition.entry(info.partition).or_insert((0, info.base_offset, info.last_offset));
        entry.0 += count;
        entry.1 = entry.1.min(info.base_offset);
        entry.2 = entry.2.max(info.last_offset);
    }
    fn print(&self, topic: &str) {
        let total: u64 = self.per_partition.values().map(|e| e.0).sum();
        println!("produced {total} records to '{topic}'");
        for (partition, (count, first, last)) in &self.per_partition {
            println!("  partition {partition}: {count} records, offsets {first}..={last}");
        }
    }
}

/// The key named by `field` in the JSON object `line`, as text.
fn key_of(line: &[u8], field: &str) -> std::result::Result<Option<Vec<u8>>, String> {
    let value: serde_json::Value = serde_json::from_slice(line).map_err(|e| format!("not valid JSON ({e})"))?;
    let object = value.as_object().ok_or("not a JSON object")?;
    match object.get(field) {
        None => Err(format!("has no field '{field}'")),
        Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(text)) => Ok(Some(text.as_bytes().to_vec())),
        Some(other) => Ok(Some(other.to_string().into_bytes())),
    }
}

pub(crate) fn run(log: &Log, args: &ProduceArgs) -> Result<()> {
    log.topic_config(&args.topic)?; // fail before reading stdin if the topic is unknown
    let stdin = std::io::stdin();
    let total = std::fs::metadata("/dev/stdin").ok().filter(|m| m.is_file()).map(|m| m.len());
    let mut progress = crate::progress::Progress::new("producing", total);
    let mut reader = BufReader::with_capacity(1 << 20, stdin.lock());
    let mut summary = Summary::default();
    let mut pending: Vec<Record> = Vec::new();
    let mut pending_bytes = 0usize;
    let mut line = Vec::new();
    let mut line_number = 0u64;
    let flush = |pending: &mut Vec<Record>, summary: &mut Summary| -> Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        let infos = match args.partition {
            Some(partition) => vec![log.append(&args.topic, partition, pending)?],
            None => log.produce(&args.topic, pending)?,
        };
        infos.into_iter().for_each(|info| summary.add(info));
        pending.clear();
        Ok(())
    };
    let result: Result<()> = (|| loop {
        line.clear();
        let read = reader.by_ref().read_until(b'\n', &mut line).context("reading stdin")?;
        if read == 0 {
            return flush(&mut pending, &mut summary);
        }
        line_number += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.is_empty() {
            progress.advance(read as u64, 0);
            continue;
        }
        let key = match &args.key_field {
            None => None,
            Some(field) => match key_of(text, field) {
                Ok(key) => key,
                Err(reason) => {
                    flush(&mut pending, &mut summary)?;
                    bail!("stdin line {line_number}: {reason}; records before this line were produced");
                }
            },
        };
        pending_bytes += text.len();
        pending.push(Record {
            key,
            value: Some(text.to_vec()),
            timestamp_ms: log.clock().now_ms(),
            headers: Vec::new(),
        });
        progress.advance(read as u64, 1);
        if pending_bytes >= BATCH_BYTES_MAX || pending.len() >= BATCH_RECORDS_MAX {
            flush(&mut pending, &mut summary)?;
            pending_bytes = 0;
        }
    })();
    progress.finish();
    summary.print(&args.topic);
    result
}
