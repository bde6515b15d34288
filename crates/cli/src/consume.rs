//! `millpond consume TOPIC`: records as JSON lines (or raw values). Without
//! `--follow` the partitions are printed one after another, in partition
//! and offset order; with it, one reader thread per partition prints as
//! records arrive (in offset order within each partition). While a server
//! owns the log, the records come through it (`COPY topic TO STDOUT`, and
//! `ACK GROUP` on a second connection for `--group`: docs/server.md).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use millpond_log::{Log, RecordView, Start};
use millpond_server::RecordFormat;

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
    /// Read through the server at this address (`COPY topic TO STDOUT` over
    /// the Postgres wire); by default through the one that owns the data
    /// directory, if it runs.
    #[arg(long)]
    pub(crate) server: Option<std::net::SocketAddr>,
    /// The server's password (SCRAM-SHA-256), when it has one.
    #[arg(long, env = "MILLPOND_PASSWORD", hide_env_values = true)]
    password: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Json,
    Raw,
}

fn parse_start(text: &str) -> std::result::Result<Start, String> {
    Start::parse(text)
}

fn line_of(partition: u32, record: &RecordView<'_>, format: Format) -> Vec<u8> {
    let mut line = Vec::new();
    millpond_server::record_line(partition, record, format.into(), &mut line);
    line
}

impl From<Format> for RecordFormat {
    fn from(format: Format) -> RecordFormat {
        match format {
            Format::Json => RecordFormat::Json,
            Format::Raw => RecordFormat::Raw,
        }
    }
}

/// Where `args` start each partition.
fn start_of(args: &ConsumeArgs) -> Result<Start> {
    Ok(if let Some(start) = &args.offset {
        start.clone()
    } else if let Some(time) = &args.from_time {
        Start::Time(crate::time::parse_time_ms(time)?)
    } else if let (false, Some(group)) = (args.from_beginning, &args.group) {
        Start::Group(group.clone())
    } else {
        Start::Beginning
    })
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
    let start = start_of(args)?;
    let mut starts = Vec::new();
    for &partition in &partitions {
        let resolved = log.resolve_start(&args.topic, partition, &start)?;
        if let Some(lost) = resolved.lost {
            eprintln!(
                "warning: group '{}' on {}/{partition}: offsets {}..{} were deleted by retention before the group \
                 read them; starting at {}",
                args.group.as_deref().unwrap_or_default(),
                args.topic,
                lost.start,
                lost.end,
                resolved.offset
            );
        }
        starts.push((partition, resolved.offset));
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
        let lines = fetch.records().map(|r| (r.offset, line_of(partition, &r, args.format))).collect::<Vec<_>>();
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

/// Acknowledgements a remote `--group` consumer holds back at most: after
/// this many records printed it flushes stdout and acknowledges them, even
/// while more are arriving.
const ACK_RECORDS_MAX: u64 = 4096;

/// SQL text for a name, quoted as an identifier.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// SQL text for a string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The `COPY topic TO STDOUT` that reads what `args` ask for, each line
/// with its partition and offset in front (`POSITIONS`).
fn copy_statement(args: &ConsumeArgs) -> Result<String> {
    let format = match args.format {
        Format::Json => "json",
        Format::Raw => "raw",
    };
    let mut options = vec!["POSITIONS".to_owned(), format!("FORMAT {format}")];
    if let Some(partition) = args.partition {
        options.push(format!("PARTITION {partition}"));
    }
    options.push(match start_of(args)? {
        Start::At(offset) => format!("OFFSET {offset}"),
        Start::Beginning => "OFFSET 'beginning'".to_owned(),
        Start::End => "OFFSET 'end'".to_owned(),
        Start::BeforeEnd(n) => format!("OFFSET '-{n}'"),
        Start::Time(ms) => format!("FROM_TIME {ms}"),
        Start::Group(group) => format!("GROUP {}", literal(&group)),
    });
    if args.follow {
        options.push("FOLLOW".to_owned());
    }
    if let Some(max) = args.max {
        options.push(format!("MAX {max}"));
    }
    Ok(format!("COPY {} TO STDOUT WITH ({})", quoted(&args.topic), options.join(", ")))
}

/// Connects to the server; its notices (a group's offsets lost to
/// retention) are printed on stderr as warnings.
async fn connect(addr: std::net::SocketAddr, args: &ConsumeArgs) -> Result<tokio_postgres::Client> {
    let mut config = tokio_postgres::Config::new();
    config.host(addr.ip().to_string()).port(addr.port()).user("millpond").dbname("millpond");
    if let Some(password) = &args.password {
        config.password(password);
    }
    let (client, mut connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| anyhow::anyhow!("connecting to the server at {addr}: {e}"))?;
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(Ok(message)) = futures::StreamExt::next(&mut messages).await {
            if let tokio_postgres::AsyncMessage::Notice(notice) = message {
                eprintln!("warning: {}", notice.message());
            }
        }
    });
    Ok(client)
}

/// `millpond consume` through a running server: the records come as
/// `COPY topic TO STDOUT` lines; with `--group`, what reached stdout is
/// acknowledged on a second connection (`ACK GROUP`), as the local path
/// commits after each flush.
pub(crate) fn run_remote(addr: std::net::SocketAddr, args: &ConsumeArgs) -> Result<()> {
    let sql = copy_statement(args)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let reader = connect(addr, args).await?;
        let acker = match &args.group {
            Some(_) => Some(connect(addr, args).await?),
            None => None,
        };
        let stream = reader.copy_out(&sql).await.map_err(|e| crate::produce::remote_error(&e))?;
        futures::pin_mut!(stream);
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let mut pending = std::collections::BTreeMap::<u32, u64>::new();
        let mut unacked = 0u64;
        loop {
            use futures::{FutureExt, StreamExt};
            // Acknowledge once nothing more is waiting (or enough is held).
            let ready = match stream.next().now_or_never() {
                Some(message) => Some(message),
                None => {
                    acknowledge(&mut out, acker.as_ref(), args, &mut pending).await?;
                    unacked = 0;
                    Some(stream.next().await)
                }
            };
            let Some(Some(message)) = ready else { break };
            let line = message.map_err(|e| crate::produce::remote_error(&e))?;
            let (partition, offset, rest) = positioned(&line)?;
            out.write_all(rest)?;
            pending.insert(partition, offset);
            unacked += 1;
            if unacked >= ACK_RECORDS_MAX {
                acknowledge(&mut out, acker.as_ref(), args, &mut pending).await?;
                unacked = 0;
            }
        }
        acknowledge(&mut out, acker.as_ref(), args, &mut pending).await
    })
}

/// A `POSITIONS` line: its partition, offset and the rest (the record's
/// line with its newline).
fn positioned(line: &[u8]) -> Result<(u32, u64, &[u8])> {
    let mut fields = line.splitn(3, |b| *b == b'\t');
    let mut number = || -> Option<u64> { std::str::from_utf8(fields.next()?).ok()?.parse().ok() };
    let (partition, offset) = (number(), number());
    match (partition, offset, fields.next()) {
        (Some(partition), Some(offset), Some(rest)) => Ok((partition as u32, offset, rest)),
        _ => bail!("the server sent a line without its partition and offset: {:?}", String::from_utf8_lossy(line)),
    }
}

/// Flushes stdout, then (with `--group`) acknowledges the last offset
/// printed of each partition.
async fn acknowledge(
    out: &mut impl Write,
    acker: Option<&tokio_postgres::Client>,
    args: &ConsumeArgs,
    pending: &mut std::collections::BTreeMap<u32, u64>,
) -> Result<()> {
    out.flush()?;
    let (Some(acker), Some(group)) = (acker, &args.group) else { return Ok(()) };
    if pending.is_empty() {
        return Ok(());
    }
    let statements: Vec<String> = std::mem::take(pending)
        .into_iter()
        .map(|(partition, offset)| {
            format!("ACK GROUP {} TOPIC {} PARTITION {partition} THROUGH {offset}", literal(group), quoted(&args.topic))
        })
        .collect();
    acker.batch_execute(&statements.join(";\n")).await.map_err(|e| crate::produce::remote_error(&e))
}
