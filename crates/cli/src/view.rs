//! `millpond view list|read` and `millpond subscribe`: reading views, also
//! while the job that maintains them runs in another process. Nothing here
//! opens the log or the state store; see `millpond_dataflow::view`.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, Subcommand};
use millpond_dataflow::{Error as DataflowError, Event, Subscription, list_views, read_view};
use serde_json::Value;

#[derive(Debug, Subcommand)]
pub(crate) enum ViewCommand {
    /// List the views committed in the data directory.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Print a view's rows as of the last committed epoch, one JSON object per line.
    Read { view: String },
}

#[derive(Debug, Args)]
pub(crate) struct SubscribeArgs {
    view: String,
    /// Start from this epoch (default: the last committed one).
    #[arg(long)]
    as_of: Option<u64>,
    /// Skip the snapshot: print only changes after the start epoch (to resume).
    #[arg(long)]
    no_snapshot: bool,
    /// Print `{"epoch":E,"progress":true}` when epoch E is complete.
    #[arg(long)]
    progress: bool,
    /// Stop after this many epochs past the start epoch are complete.
    #[arg(long)]
    max_epochs: Option<u64>,
    /// If --as-of is no longer available, start over with a fresh snapshot
    /// of the last committed epoch instead of failing.
    #[arg(long)]
    or_snapshot: bool,
}

/// A row for printing: a multiplicity other than 1 becomes a field.
fn with_multiplicity(row: Value, count: i64) -> Value {
    match (row, count) {
        (row, 1) => row,
        (Value::Object(mut fields), count) => {
            fields.insert("_multiplicity".into(), count.into());
            Value::Object(fields)
        }
        (row, count) => serde_json::json!({ "row": row, "_multiplicity": count }),
    }
}

pub(crate) fn run(data_dir: &Path, command: ViewCommand) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match command {
        ViewCommand::List { json } => {
            let views = list_views(data_dir)?;
            if json {
                writeln!(out, "{}", serde_json::to_string(&views)?)?;
            } else {
                writeln!(out, "{:<24} {:>10} {:>14}  changelog", "view", "epoch", "end offset")?;
                for view in views {
                    writeln!(
                        out,
                        "{:<24} {:>10} {:>14}  {}",
                        view.name, view.epoch, view.changelog_end_offset, view.changelog_topic
                    )?;
                }
            }
        }
        ViewCommand::Read { view } => {
            let snapshot = read_view(data_dir, &view)?;
            let mut lines: Vec<String> =
                snapshot.rows.into_iter().map(|(row, n)| with_multiplicity(row, n).to_string()).collect();
            lines.sort();
            for line in lines {
                writeln!(out, "{line}")?;
            }
        }
    }
    Ok(())
}

pub(crate) fn subscribe(data_dir: &Path, args: &SubscribeArgs) -> Result<()> {
    let mut subscription = match Subscription::open(data_dir, &args.view, args.as_of, !args.no_snapshot) {
        Err(DataflowError::EpochUnavailable { reason, .. }) if args.or_snapshot => {
            eprintln!(
                "note: epoch {} is not available ({reason}); starting from a fresh snapshot",
                args.as_of.unwrap_or(0)
            );
            Subscription::open(data_dir, &args.view, None, true)?
        }
        other => other?,
    };
    let start = subscription.as_of();
    let mut out = std::io::stdout().lock();
    let mut completed = 0u64;
    loop {
        let Some(event) = subscription.next_timeout(Duration::from_millis(200))? else {
            out.flush()?;
            continue;
        };
        match &event {
            Event::Change { .. } => writeln!(out, "{}", serde_json::to_string(&event)?)?,
            Event::Progress { epoch, .. } => {
                if args.progress {
                    writeln!(out, "{}", serde_json::to_string(&event)?)?;
                }
                out.flush()?;
                if *epoch > start {
                    completed += 1;
                }
                if args.max_epochs.is_some_and(|max| completed >= max) {
                    return Ok(());
                }
            }
        }
    }
}
