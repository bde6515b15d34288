//! `millpond`: the command-line front end.
//!
//! Every subcommand opens the data directory (`--data-dir`, env
//! `MILLPOND_DATA_DIR`, default `./millpond-data`), does its work and closes
//! it cleanly. Errors go to stderr with a non-zero exit code.

#![forbid(unsafe_code)]

mod bench;
mod bench_changelog;
mod bench_dataflow;
mod bench_flink;
mod bench_kafka;
mod bench_nexmark;
mod bench_serve;
mod bench_sql;
mod consume;
mod demo;
mod generate;
mod job;
mod produce;
mod progress;
mod remote;
mod serve;
mod signals;
mod sql;
mod time;
mod topic;
mod view;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use millpond_log::{Log, LogOptions, Repair};

/// mimalloc instead of glibc's malloc: the runtime allocates and frees many
/// small rows per record, and glibc's free-list upkeep (malloc_consolidate,
/// unlink_chunk) was about half of a worker's time (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(name = "millpond", version, about = "Millpond: a stream-processing runtime whose log is the database")]
struct Cli {
    /// The data directory.
    #[arg(long, global = true, env = "MILLPOND_DATA_DIR", default_value = "./millpond-data")]
    data_dir: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create, list, describe and delete topics.
    #[command(subcommand)]
    Topic(topic::TopicCommand),
    /// Append one record per stdin line to a topic.
    Produce(produce::ProduceArgs),
    /// Print a topic's records as JSON lines.
    Consume(consume::ConsumeArgs),
    /// Generate a Nexmark stream, run the standard views over it, print their changes.
    Demo(demo::DemoArgs),
    /// Generate a standard workload into topics.
    #[command(subcommand)]
    Gen(generate::GenCommand),
    /// Run a dataflow job that maintains views.
    #[command(subcommand)]
    Job(job::JobCommand),
    /// List and read views.
    #[command(subcommand)]
    View(view::ViewCommand),
    /// Follow a view's changes: a snapshot, then one JSON line per change.
    Subscribe(view::SubscribeArgs),
    /// Execute a SQL definition file, then maintain its materialized views.
    Run(sql::RunArgs),
    /// Execute SQL statements (DDL, INSERT, UPDATE, DELETE) against the data directory.
    Sql(sql::SqlArgs),
    /// Own the data directory: maintain its views and answer Postgres clients.
    Serve(serve::ServeArgs),
    /// Measure throughput and latency, side by side with the raw disk.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

fn open_log(cli_dir: &std::path::Path) -> anyhow::Result<Log> {
    open_log_with(cli_dir, Repair::Nothing)
}

/// Opens the log, printing one warning line on stderr per cut recovery made.
fn open_log_with(cli_dir: &std::path::Path, repair: Repair) -> anyhow::Result<Log> {
    let log = Log::open(cli_dir, LogOptions { repair, ..LogOptions::default() })?;
    for cut in log.recovery_report() {
        eprintln!("warning: {cut}");
    }
    Ok(log)
}

/// For commands whose log the runtime or a SQL session opens: opens and
/// closes it first, so that what recovery cuts is reported here (the next
/// open finds nothing left to cut).
fn recover(cli_dir: &std::path::Path) -> anyhow::Result<()> {
    if cli_dir.join("topics").is_dir() {
        open_log(cli_dir)?.close()?;
    }
    Ok(())
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Topic(topic::TopicCommand::Repair { name, partition }) => {
            let repair = Repair::Topic { topic: name.clone(), partition };
            topic::repair(&open_log_with(&cli.data_dir, repair)?, &name, partition)
        }
        Command::Topic(command) => topic::run(&open_log(&cli.data_dir)?, command),
        Command::Produce(args) => match remote::server_for(&cli.data_dir, args.server) {
            // The server owns the log: the records go through it.
            Some(server) => produce::run_remote(server, &args),
            None => produce::run(&open_log(&cli.data_dir)?, &args),
        },
        Command::Consume(args) => match remote::server_for(&cli.data_dir, args.server) {
            // The server owns the log: the records come through it.
            Some(server) => consume::run_remote(server, &args),
            None => consume::run(&open_log(&cli.data_dir)?, &args),
        },
        Command::Demo(args) => demo::run(&cli.data_dir, &args),
        Command::Gen(command) => generate::run(&open_log(&cli.data_dir)?, command),
        Command::Bench(command) => bench::run(&cli.data_dir, command),
        Command::Job(command) => {
            recover(&cli.data_dir)?;
            job::run(&cli.data_dir, command)
        }
        Command::View(command) => view::run(&cli.data_dir, command),
        Command::Subscribe(args) => view::subscribe(&cli.data_dir, &args),
        Command::Run(args) => {
            recover(&cli.data_dir)?;
            sql::run_file(&cli.data_dir, &args)
        }
        Command::Sql(args) => match remote::server_for(&cli.data_dir, args.server) {
            // The server owns the directory (and recovers it): go through it.
            Some(server) => remote::run_sql(server, &args.statement, args.password.as_deref()),
            None => {
                recover(&cli.data_dir)?;
                sql::run_statement(&cli.data_dir, &args)
            }
        },
        Command::Serve(args) => {
            recover(&cli.data_dir)?;
            serve::run(&cli.data_dir, &args)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", message(&error));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, each once: a cause that the message before it
/// already spells out (many errors print their source) is not repeated.
fn message(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// `millpond consume | head` closes our stdout early; that is not an error.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe))
}
