//! `millpond consume TOPIC`: records as JSON lines (or raw values). Without
//! `--follow` the partitions are printed one after another, in partition
//! and offset order; with it, one reader thread per partition prints as
//! records arrive (in offset order within each partition).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use millpond_log::{Log, RecordView};
use serde::Serialize;

/// Bytes read per fetch.
const FETCH_BYTES_MAX: usize = 1 << 20;
/// Fetched chunks buffered between the readers and the printer.
const QUEUE_CHUNKS_MAX: usize = 4;

#[derive(Debug, Args)]
pub(crate) struct ConsumeArgs {
    /// The topic to read.
    topic: String,
    /// Read only this partition (default: all).
    #[arg(long)]
    partition: Option<u32>,
    /// Where to start in every partition read: an offset, `beginning`, `end`,
    /// or `-N` (N records before the end).
    #[arg(long, allow_hyphen_values = true, value_parser = parse_start, conflicts_with_all = ["from_beginning", "from_time"])]
    offset: Option<Start>,
    /// Start at the log start (the default unless --group has a committed offset).
    #[arg(long, conflicts_with = "from_time")]
    from_beginning: bool,
    /// Start at the first record at or after this time (ms since epoch or RFC 3339).
    #[arg(long)]
    from_time: Option<String>,
    /// Stop after this many records.
    #[arg(long)]
    max: Option<u64>,
    /// Start at the group's committed offsets and commit as records are printed.
    #[arg(long)]
    group: Option<String>,
    /// Keep waiting for new records at the end of the log.
    #[arg(long)]
    follow: bool,
    /// `json`: one object per record (partition, offset, timestamp, key,
    /// value); `raw`: each value's bytes as they are, one per line.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Json,
    Raw,
}

/// A start position given with `--offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    At(u64),
    Beginning,
    End,
    /// This many records before the end (never before the log start).
    BeforeEnd(u64),
}

fn parse_start(text: &str) -> std::result::Result<Start, String> {
    let number =
        |digits: &str| digits.parse::<u64>().map_err(|_| format!("'{text}' is not beginning, end, -N or an offset"));
    match text {
        "beginning" => Ok(Start::Beginning),
        "end" => Ok(Start::End),
        _ => match text.strip_prefix('-') {
            Some(digits) => number(digits).map(Start::BeforeEnd),
            None => number(text).map(Start::At),
        },
    }
}

/// One output line.
#[derive(Debug, Serialize)]
struct Line<'a> {
    partition: u32,
    offset: u64,
    timestamp: i64,
    key: Option<std::borrow::Cow<'a, str>>,
    value: Option<std::borrow::Cow<'a, str>>,
    /// Header name to value (lossy UTF-8), in record order; absent when none.
    #[serde(skip_serializing_if = "Headers::is_empty")]
    headers: Headers,
}

/// Headers as a JSON object in record order (a repeated name repeats).
#[derive(Debug)]
struct Headers(Vec<millpond_log::Header>);

impl Headers {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Headers {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for header in &self.0 {
            map.serialize_entry(&header.key, &header.value.as_deref().map(String::from_utf8_lossy))?;
        }
        map.end()
    }
}

fn line_of(partition: u32, record: &RecordView<'_>, format: Format) -> Result<Vec<u8>> {
    if format == Format::Raw {
        return Ok(record.value.unwrap_or_default().to_vec());
    }
    Ok(serde_json::to_vec(&Line {
        partition,
        offset: record.offset,
        timestamp: record.timestamp_ms,
        key: record.key.map(String::from_utf8_lossy),
        value: record.value.map(String::from_utf8_lossy),
        headers: Headers(record.headers()),
    })?)
}

/// What a reader thread hands to the printer.
struct Chunk {
    partition: u32,
    /// (offset, line) per record.
    lines: Vec<(u64, Vec<u8>)>,
}

pub(crate) fn run(log: &Log, args: &ConsumeArgs) -> Result<()> {
    let config = log.topic_config(&args.topic)?;
    let partitions: Vec<u32> = match args.partition {
        Some(p) if p >= config.partitions => {
            bail!("topic '{}' has no partition {p} (it has {})", args.topic, config.partitions)
        }
        Some(p) => vec![p],
        None => (0..config.partitions).collect(),
    };
    let from_time = args.from_time.as_deref().map(crate::time::parse_time_ms).transpose()?;
    let mut starts = Vec::new();
    for &partition in &partitions {
        let committed = args.group.as_deref().and_then(|g| log.committed_offset(g, &args.topic, partition));
        let low = log.low_watermark(&args.topic, partition)?;
        let high = log.high_watermark(&args.topic, partition)?;
        let start = if let Some(start) = args.offset {
            match start {
                Start::At(offset) => offset,
                Start::Beginning => low,
                Start::End => high,
                Start::BeforeEnd(n) => high.saturating_sub(n).max(low),
            }
        } else if let Some(time) = from_time {
            log.offset_for_time(&args.topic, partition, time)?
        } else if let (false, Some(committed)) = (args.from_beginning, committed) {
            if committed < low {
                eprintln!(
                    "warning: group '{}' on {}/{partition}: offsets {committed}..{low} were deleted by retention \
                     before the group read them; starting at {low}",
                    args.group.as_deref().unwrap_or_default(),
                    args.topic
                );
            }
            committed.max(low)
        } else {
            low
        };
        starts.push((partition, start));
    }

    let stop = AtomicBool::new(false);
    let (sender, receiver) = mpsc::sync_channel::<Result<Chunk>>(QUEUE_CHUNKS_MAX);
    std::thread::scope(|scope| {
        // Following: a reader per partition. Otherwise one reader, partition
        // after partition, so the output is in partition order.
        let groups: Vec<Vec<(u32, u64)>> =
            if args.follow { starts.iter().map(|s| vec![*s]).collect() } else { vec![starts.clone()] };
        for group in groups {
            let sender = sender.clone();
            let stop = &stop;
            scope.spawn(move || {
                for (partition, start) in group {
                    let result = tail(log, args, partition, start, stop, &sender);
                    if let Err(error) = result {
                        let _ = sender.send(Err(error));
                        return;
                    }
                }
            });
        }
        drop(sender);
        let result = print(log, args, &receiver);
        stop.store(true, Ordering::Release);
        drop(receiver); // unblocks readers waiting to send
        result
    })
}

fn tail(
    log: &Log,
    args: &ConsumeArgs,
    partition: u32,
    mut offset: u64,
    stop: &AtomicBool,
    sender: &mpsc::SyncSender<Result<Chunk>>,
) -> Result<()> {
    let topic = &args.topic;
    while !stop.load(Ordering::Acquire) {
        let fetch = log.fetch(topic, partition, offset, FETCH_BYTES_MAX)?;
        if fetch.is_empty() {
            if !args.follow {
                return Ok(());
            }
            log.wait_for(topic, partition, offset, Duration::from_millis(250))?;
            continue;
        }
        let lines = fetch
            .records()
            .map(|r| Ok((r.offset, line_of(partition, &r, args.format)?)))
            .collect::<Result<Vec<_>>>()?;
        offset = fetch.next_offset();
        if sender.send(Ok(Chunk { partition, lines })).is_err() {
            return Ok(()); // the printer is done
        }
    }
    Ok(())
}

fn print(log: &Log, args: &ConsumeArgs, receiver: &mpsc::Receiver<Result<Chunk>>) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut printed = 0u64;
    for chunk in receiver {
        let chunk = chunk?;
        let mut last_offset = None;
        for (offset, line) in &chunk.lines {
            if args.max.is_some_and(|max| printed >= max) {
                break;
            }
            out.write_all(line)?;
            out.write_all(b"\n")?;
            printed += 1;
            last_offset = Some(*offset);
        }
        // Commit only what reached stdout.
        out.flush()?;
        if let (Some(group), Some(last)) = (&args.group, last_offset) {
            log.commit_offset(group, &args.topic, chunk.partition, last + 1)?;
        }
        if args.max.is_some_and(|max| printed >= max) {
            break;
        }
    }
    out.flush()?;
    Ok(())
}
