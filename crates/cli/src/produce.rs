//! `millpond produce TOPIC`: one record per stdin line.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};

use anyhow::{Context, Result, bail};
use clap::Args;
use millpond_log::{AppendInfo, Log, Record};

/// Records are appended in batches of at most this many bytes of input
/// (or `--batch-records` records).
const BATCH_BYTES_MAX: usize = 512 * 1024;

#[derive(Debug, Args)]
pub(crate) struct ProduceArgs {
    /// The topic to append to (it must exist: `millpond topic create`).
    topic: String,
    /// Use this field of each line (a JSON object) as the key, as text.
    #[arg(long)]
    key_field: Option<String>,
    /// Append everything to this partition instead of routing by key.
    #[arg(long)]
    partition: Option<u32>,
    /// Records per append (one batch per partition).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    batch_records: u64,
    /// Print a JSON delivery report to stdout as each batch is acknowledged:
    /// {"first_line":N,"last_line":M,"appends":[{"partition":P,"base_offset":B,"last_offset":L}]}
    /// (the summary then goes to stderr).
    #[arg(long)]
    report: bool,
    /// Send the records to the server at this address (`COPY topic FROM
    /// STDIN` over the Postgres wire); by default to the one that owns the
    /// data directory, if it runs.
    #[arg(long)]
    pub(crate) server: Option<std::net::SocketAddr>,
    /// The server's password (SCRAM-SHA-256), when it has one.
    #[arg(long, env = "MILLPOND_PASSWORD", hide_env_values = true)]
    pub(crate) password: Option<String>,
}

/// Bytes of stdin sent per COPY message to a server.
const REMOTE_CHUNK_BYTES: usize = 64 * 1024;

/// `millpond produce` through a running server: stdin streamed as
/// `COPY topic FROM STDIN [WITH (KEY_FIELD 'f')]`; the server routes and
/// appends the records (docs/server.md).
pub(crate) fn run_remote(addr: std::net::SocketAddr, args: &ProduceArgs) -> Result<()> {
    if args.partition.is_some() || args.report {
        bail!(
            "--partition and --report need the log itself, and the server at {addr} owns it: \
             without them the server routes records by key"
        );
    }
    let quoted = format!("\"{}\"", args.topic.replace('"', "\"\""));
    let sql = match &args.key_field {
        Some(field) => format!("COPY {quoted} FROM STDIN WITH (KEY_FIELD '{}')", field.replace('\'', "''")),
        None => format!("COPY {quoted} FROM STDIN"),
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let produced = runtime.block_on(async {
        let mut config = tokio_postgres::Config::new();
        config.host(addr.ip().to_string()).port(addr.port()).user("millpond").dbname("millpond");
        if let Some(password) = &args.password {
            config.password(password);
        }
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .with_context(|| format!("connecting to the server at {addr}"))?;
        tokio::spawn(connection);
        let sink = client.copy_in::<_, bytes::Bytes>(&sql).await.map_err(|e| remote_error(&e))?;
        futures::pin_mut!(sink);
        let mut stdin = std::io::stdin().lock();
        let mut chunk = vec![0u8; REMOTE_CHUNK_BYTES];
        loop {
            let read = stdin.read(&mut chunk).context("reading stdin")?;
            if read == 0 {
                break;
            }
            let data = bytes::Bytes::copy_from_slice(&chunk[..read]);
            futures::SinkExt::send(&mut sink, data).await.map_err(|e| remote_error(&e))?;
        }
        sink.finish().await.map_err(|e| remote_error(&e))
    })?;
    println!("produced {produced} records to '{}' (through the server at {addr})", args.topic);
    Ok(())
}

/// A server's error as the CLI prints it: its SQLSTATE and message.
pub(crate) fn remote_error(error: &tokio_postgres::Error) -> anyhow::Error {
    match error.as_db_error() {
        Some(db) => anyhow::anyhow!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => anyhow::anyhow!("{error}"),
    }
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
    fn print(&self, topic: &str, out: &mut dyn std::io::Write) {
        let total: u64 = self.per_partition.values().map(|e| e.0).sum();
        let _ = writeln!(out, "produced {total} records to '{topic}'");
        for (partition, (count, first, last)) in &self.per_partition {
            let _ = writeln!(out, "  partition {partition}: {count} records, offsets {first}..={last}");
        }
    }
}

/// Groups records by partition: `fixed`, or Kafka's default partitioner
/// for keyed records and one partition per batch, round robin, for
/// unkeyed ones (as `Log::produce` routes). Order is kept per partition.
fn route(
    records: Vec<Record>,
    fixed: Option<u32>,
    partitions: u32,
    unkeyed: &std::cell::Cell<u32>,
) -> Vec<(u32, Vec<Record>)> {
    if let Some(partition) = fixed {
        return vec![(partition, records)];
    }
    let round_robin = unkeyed.get() % partitions;
    unkeyed.set(unkeyed.get().wrapping_add(1));
    let mut per_partition: BTreeMap<u32, Vec<Record>> = BTreeMap::new();
    for record in records {
        let partition = match &record.key {
            Some(key) => millpond_log::partitioner::partition_for_key(key, partitions),
            None => round_robin,
        };
        per_partition.entry(partition).or_default().push(record);
    }
    per_partition.into_iter().collect()
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
    // Fail before reading stdin if the topic is unknown.
    let partitions = log.topic_config(&args.topic)?.partitions;
    let unkeyed = std::cell::Cell::new(0u32);
    let stdin = std::io::stdin();
    let total = std::fs::metadata("/dev/stdin").ok().filter(|m| m.is_file()).map(|m| m.len());
    let mut progress = crate::progress::Progress::new("producing", total);
    let mut reader = BufReader::with_capacity(1 << 20, stdin.lock());
    let mut summary = Summary::default();
    let mut pending: Vec<Record> = Vec::new();
    let mut pending_bytes = 0usize;
    let mut line = Vec::new();
    let mut line_number = 0u64;
    let mut first_pending_line = 1u64;
    let flush = |pending: &mut Vec<Record>, summary: &mut Summary, first_line: u64, last_line: u64| -> Result<()> {
        if pending.is_empty() {
            return Ok(());
        }
        // Routed here, one append per partition, so that what was
        // acknowledged before an error is known and reported.
        let routed = route(std::mem::take(pending), args.partition, partitions, &unkeyed);
        let mut infos = Vec::with_capacity(routed.len());
        for (partition, records) in routed {
            match log.append(&args.topic, partition, &records) {
                Ok(info) => infos.push(info),
                Err(error) => {
                    infos.into_iter().for_each(|info| summary.add(info));
                    return Err(anyhow::Error::new(error).context(format!(
                        "appending stdin lines {first_line}..={last_line} to partition {partition} (the records \
                         of those lines in other partitions reported below were produced)"
                    )));
                }
            }
        }
        if args.report {
            let appends: Vec<_> = infos
                .iter()
                .map(|i| serde_json::json!({"partition": i.partition, "base_offset": i.base_offset, "last_offset": i.last_offset}))
                .collect();
            let line = serde_json::json!({"first_line": first_line, "last_line": last_line, "appends": appends});
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{line}").and_then(|()| stdout.flush())?;
        }
        infos.into_iter().for_each(|info| summary.add(info));
        pending.clear();
        Ok(())
    };
    let result: Result<()> = (|| loop {
        line.clear();
        let read = reader.by_ref().read_until(b'\n', &mut line).context("reading stdin")?;
        if read == 0 {
            return flush(&mut pending, &mut summary, first_pending_line, line_number);
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
                    flush(&mut pending, &mut summary, first_pending_line, line_number - 1)?;
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
        if pending_bytes >= BATCH_BYTES_MAX || pending.len() as u64 >= args.batch_records {
            flush(&mut pending, &mut summary, first_pending_line, line_number)?;
            pending_bytes = 0;
            first_pending_line = line_number + 1;
        }
    })();
    progress.finish();
    if args.report {
        summary.print(&args.topic, &mut std::io::stderr());
    } else {
        summary.print(&args.topic, &mut std::io::stdout());
    }
    result
}
