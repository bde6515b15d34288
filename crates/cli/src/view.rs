//! `millpond view list|read` and `millpond subscribe`: reading views, also
//! while the job that maintains them runs in another process. Nothing here
//! opens the log or the state store; see `millpond_dataflow::view`.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use millpond_dataflow::{Error as DataflowError, Event, Subscription, list_views, read_view};
use serde_json::Value;

#[derive(Debug, Subcommand)]
pub(crate) enum ViewCommand {
    /// List the views committed in the data directory.
    List {
        /// Print one JSON array of {name, changelog_topic, epoch, changelog_end_offset}.
        #[arg(long)]
        json: bool,
    },
    /// Print a view's rows as of the last committed epoch, one JSON object per
    /// line, sorted; a row held N times is printed N times.
    Read {
        /// The view's name (`millpond view list`).
        view: String,
        /// Print each distinct row once, as `{"row":ROW,"count":N}`.
        #[arg(long)]
        counts: bool,
    },
}

#[derive(Debug, Args)]
pub(crate) struct SubscribeArgs {
    /// The view's name (`millpond view list`).
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

/// The lines `view read` prints for one row held `count` times: the row
/// `count` times, as SQL prints a bag (no field is added to a row, so no
/// column name can collide with ours); with `counts`, one line
/// `{"row":ROW,"count":N}`. A negative count (a view that retracts more than
/// it inserted) cannot be printed as a bag.
fn row_lines(view: &str, row: &Value, count: i64, counts: bool, out: &mut Vec<String>) -> Result<()> {
    if counts {
        out.push(serde_json::json!({ "row": row, "count": count }).to_string());
        return Ok(());
    }
    if count < 0 {
        bail!("view '{view}' holds row {row} {count} times (a negative multiplicity); read it with --counts");
    }
    out.extend(std::iter::repeat_n(row.to_string(), count as usize));
    Ok(())
}

/// Refuses a view that a job committed but the SQL catalog dropped since
/// (no job has run to drop its changelog yet).
fn check_not_dropped(data_dir: &Path, view: &str) -> Result<()> {
    if millpond_sql::catalog_names(data_dir)?.is_some_and(|names| !names.contains(view)) {
        bail!(
            "view '{view}' was dropped from the SQL catalog (DROP VIEW or a dropped dependency); no job has run \
             since, so its changelog still exists, but its rows are no longer served"
        );
    }
    Ok(())
}

pub(crate) fn run(data_dir: &Path, command: ViewCommand) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match command {
        ViewCommand::List { json } => {
            let mut views = list_views(data_dir)?;
            if let Some(names) = millpond_sql::catalog_names(data_dir)? {
                views.retain(|view| names.contains(&view.name));
            }
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
        ViewCommand::Read { view, counts } => {
            check_not_dropped(data_dir, &view)?;
            let snapshot = read_view(data_dir, &view)?;
            let mut lines = Vec::with_capacity(snapshot.rows.len());
            for (row, count) in &snapshot.rows {
                row_lines(&view, row, *count, counts, &mut lines)?;
            }
            lines.sort();
            for line in lines {
                writeln!(out, "{line}")?;
            }
        }
    }
    Ok(())
}

pub(crate) fn subscribe(data_dir: &Path, args: &SubscribeArgs) -> Result<()> {
    check_not_dropped(data_dir, &args.view)?;
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
