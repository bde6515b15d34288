//! `millpond run FILE.sql` and `millpond sql "STATEMENT"`: SQL definition
//! files and statements over the data directory.
//!
//! `run` executes the file's statements against the catalog (idempotent:
//! the same definitions again change nothing, and the file's INSERT, UPDATE
//! and DELETE statements are applied once per data directory), then runs
//! every materialized view of the catalog until interrupted, resuming from
//! the last checkpoint after a crash.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use clap::Args;
use millpond_sql::Session;

use crate::job::{JobArgs, config};

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The SQL definition file.
    file: PathBuf,
    #[command(flatten)]
    job: JobArgs,
}

#[derive(Debug, Args)]
pub(crate) struct SqlArgs {
    /// One or more statements (CREATE, DROP, INSERT, UPDATE, DELETE; through
    /// a running server also SELECT, SHOW, subscriptions).
    pub(crate) statement: String,
    /// Send the statements to the server at this address (Postgres wire);
    /// by default to the one that owns the data directory, if it runs.
    #[arg(long)]
    pub(crate) server: Option<std::net::SocketAddr>,
    /// The server's password (SCRAM-SHA-256), when it has one.
    #[arg(long, env = "MILLPOND_PASSWORD", hide_env_values = true)]
    pub(crate) password: Option<String>,
}

/// Executes `sql` in a session, rendering an SQL error against the text.
fn execute(data_dir: &Path, sql: &str, file: Option<&str>, once: bool) -> Result<Session> {
    let mut session = Session::open(data_dir)?;
    // INSERT ... SELECT reads views as their last checkpoints left them.
    let views = |names: &[&str]| {
        let read =
            |name: &&str| millpond_dataflow::read_view_raw(data_dir, name).map(|s| (name.to_string(), Arc::new(s)));
        names.iter().map(|name| read(name).map_err(|e| format!("reading view \"{name}\": {e}"))).collect()
    };
    match session.execute_reading(sql, file, once, &views) {
        Ok(outcomes) => {
            for outcome in outcomes {
                for (location, notice) in &outcome.notices {
                    eprintln!("notice: {location}: {notice}");
                }
                eprintln!("{outcome}");
            }
            Ok(session)
        }
        // main prints "error: " itself.
        Err(e) => Err(anyhow!("{}", e.render(sql).trim_start_matches("error: "))),
    }
}

pub(crate) fn run_file(data_dir: &Path, args: &RunArgs) -> Result<()> {
    let sql = std::fs::read_to_string(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let session = execute(data_dir, &sql, Some(&args.file.display().to_string()), true)?;
    let views = session.compile()?;
    // The job opens the log itself.
    drop(session);
    if views.views.is_empty() {
        eprintln!("no materialized views to maintain");
        return Ok(());
    }
    let names: Vec<&str> = views.views.iter().map(|v| v.name.as_str()).collect();
    eprintln!("maintaining {}", names.join(", "));
    let stats = millpond_sql::run(config(data_dir, &args.job, crate::signals::stop_flag()?), views)?;
    crate::job::report(&stats);
    Ok(())
}

/// Runs the statements on the data directory itself (no server owns it).
pub(crate) fn run_statement(data_dir: &Path, args: &SqlArgs) -> Result<()> {
    execute(data_dir, &args.statement, None, false)?;
    Ok(())
}
