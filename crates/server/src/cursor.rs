//! Cursors over SUBSCRIBE: `DECLARE c CURSOR FOR SUBSCRIBE ...`, then
//! `FETCH [n | ALL] [FROM] c [WITH (timeout = '1s')]` and `CLOSE c`.
//!
//! A FETCH answers rows (`mp_epoch`, `mp_progressed` with PROGRESS,
//! `mp_diff`, the view's columns) as a query does: the changes committed
//! since the last FETCH, at most `n`. With none committed it waits for the
//! first, up to its timeout (else the statement timeout; none: until one
//! comes or the client cancels), then answers what there is (maybe nothing).
//!
//! Invariants: a cursor belongs to its connection and lives until CLOSE or
//! the connection's end; rows come in the changelog's order, each once;
//! a cursor holds one changelog reader and at most one poll of events
//! beyond what it has answered ([`crate::subscribe::EVENTS_PER_POLL_MAX`]),
//! read against the server's one checkpoint watch (`commits`), as streams are.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use millpond_dataflow::{RawEvent, Subscription};
use millpond_sql::{Type, Value};
use pgwire::api::portal::Format;
use pgwire::api::results::{QueryResponse, Response, Tag};
use pgwire::error::PgWireResult;

use crate::engine::Engine;
use crate::pg::{Settings, fields, timeout_ms, user_error};
use crate::subscribe::{IDLE_POLL_MS, SubscribeRequest, poll_at, subscription_error, tokens};

/// Cursors a connection may hold at once.
pub(crate) const CURSORS_MAX: usize = 64;

/// One cursor: its request, its reader and the rows read but not yet fetched.
struct Cursor {
    request: SubscribeRequest,
    columns: Vec<(String, Type)>,
    subscription: Subscription,
    pending: VecDeque<Vec<Value>>,
    /// UP TO reached, or the view went (then `failed` says how).
    finished: bool,
    failed: Option<millpond_dataflow::Error>,
}

/// A connection's cursors (in its session extensions).
#[derive(Default)]
pub(crate) struct Cursors {
    open: Mutex<BTreeMap<String, Cursor>>,
}

impl std::fmt::Debug for Cursors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.lock().keys()).finish()
    }
}

impl Cursors {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Cursor>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The columns of a SUBSCRIBE's rows.
fn row_columns(request: &SubscribeRequest, view: &[(String, Type)]) -> Vec<(String, Type)> {
    let mut columns = vec![("mp_epoch".to_owned(), Type::Int)];
    if request.progress {
        columns.push(("mp_progressed".to_owned(), Type::Bool));
    }
    columns.push(("mp_diff".to_owned(), Type::Int));
    columns.extend(view.iter().cloned());
    columns
}

/// `DECLARE name CURSOR FOR SUBSCRIBE ...`: opens its reader (waiting for a
/// view just created to commit, up to the statement timeout).
pub(crate) fn declare(
    engine: &Engine,
    settings: &Settings,
    name: String,
    request: SubscribeRequest,
) -> PgWireResult<Response> {
    let cursors = settings.cursors();
    if cursors.lock().contains_key(&name) {
        return Err(user_error("42P03", format!("cursor \"{name}\" already exists")));
    }
    if cursors.lock().len() >= CURSORS_MAX {
        return Err(user_error("53400", format!("a connection holds at most {CURSORS_MAX} cursors")));
    }
    let request = crate::durable::resolve(engine, request)?;
    let Some(view) = engine.view_columns(&request.view) else {
        return Err(user_error("42P01", format!("there is no materialized view \"{}\"", request.view)));
    };
    let subscription = crate::subscribe::open(engine, &request, settings.wait_ms())?;
    let columns = row_columns(&request, &view);
    let cursor = Cursor { request, columns, subscription, pending: VecDeque::new(), finished: false, failed: None };
    cursors.lock().insert(name, cursor);
    Ok(Response::Execution(Tag::new("DECLARE CURSOR")))
}

/// `CLOSE name` or `CLOSE ALL`.
pub(crate) fn close(settings: &Settings, statement: &str) -> PgWireResult<Response> {
    let words = tokens(statement);
    let cursors = settings.cursors();
    match words.get(1).map(|w| w.trim_matches('"').to_ascii_lowercase()) {
        Some(all) if all == "all" && words.len() == 2 => cursors.lock().clear(),
        Some(name) if words.len() == 2 => {
            if cursors.lock().remove(&name).is_none() {
                return Err(user_error("34000", format!("cursor \"{name}\" does not exist")));
            }
        }
        _ => return Err(user_error("42601", "expected CLOSE name or CLOSE ALL".into())),
    }
    Ok(Response::Execution(Tag::new("CLOSE CURSOR")))
}

/// A parsed FETCH: how many rows (None: ALL), from which cursor, waiting how long.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct FetchRequest {
    count: Option<usize>,
    cursor: String,
    timeout_ms: Option<u64>,
}

/// `FETCH [FORWARD] [n | ALL] [FROM | IN] name [WITH (timeout = 'T')]`.
pub(crate) fn parse_fetch(statement: &str) -> Result<FetchRequest, String> {
    let tokens = tokens(statement);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    let mut at = 1;
    let word = |at: usize| upper.get(at).map(String::as_str);
    if word(at) == Some("FORWARD") {
        at += 1;
    }
    let mut count = Some(1);
    if word(at) == Some("ALL") {
        count = None;
        at += 1;
    } else if let Some(n) = word(at).and_then(|w| w.parse::<usize>().ok()) {
        count = Some(n);
        at += 1;
    }
    if matches!(word(at), Some("FROM" | "IN")) {
        at += 1;
    }
    let cursor = tokens.get(at).ok_or("FETCH needs a cursor name")?.trim_matches('"').to_ascii_lowercase();
    at += 1;
    let mut timeout = None;
    if word(at) == Some("WITH") {
        let value = match (word(at + 1), word(at + 2), word(at + 3), tokens.get(at + 4), word(at + 5)) {
            (Some("("), Some("TIMEOUT"), Some("="), Some(value), Some(")")) => value,
            _ => return Err("FETCH takes WITH (timeout = 'duration')".into()),
        };
        timeout = Some(timeout_ms(value).ok_or_else(|| format!("invalid FETCH timeout {value}"))?);
        at += 6;
    }
    if at < tokens.len() {
        return Err(format!("unexpected \"{}\" in FETCH", tokens[at..].join(" ")));
    }
    Ok(FetchRequest { count, cursor, timeout_ms: timeout })
}

impl Cursor {
    /// Moves what is committed into `pending` (one poll), as rows.
    fn read(&mut self, commit: &crate::commits::Commit) {
        if self.finished || self.pending.len() >= crate::subscribe::EVENTS_PER_POLL_MAX {
            return;
        }
        let polled = poll_at(&mut self.subscription, commit);
        let up_to = self.request.up_to;
        for event in polled.events {
            match event {
                RawEvent::Change { epoch, .. } if up_to.is_some_and(|u| epoch >= u) => {}
                RawEvent::Change { epoch, diff, row } => {
                    let mut values = vec![Value::Int(epoch as i64)];
                    if self.request.progress {
                        values.push(Value::Bool(false));
                    }
                    values.push(Value::Int(diff));
                    let view = &self.columns[values.len()..];
                    let decoded = millpond_sql::decode_json_row(row.get().as_bytes(), view)
                        .unwrap_or_else(|_| vec![Value::Null; view.len()]);
                    values.extend(decoded);
                    self.pending.push_back(values);
                }
                RawEvent::Progress { epoch, .. } => {
                    if self.request.progress {
                        let mut values = vec![Value::Int(epoch as i64), Value::Bool(true), Value::Null];
                        values.resize(self.columns.len(), Value::Null);
                        self.pending.push_back(values);
                    }
                    if up_to.is_some_and(|u| epoch + 1 >= u) {
                        self.finished = true;
                        return;
                    }
                }
            }
        }
        if let Some(end) = polled.end {
            self.finished = true;
            self.failed = Some(end);
        }
    }
}

/// A FETCH attempt's columns, rows, and whether the cursor is done.
type Taken = (Vec<(String, Type)>, Vec<Vec<Value>>, bool);

/// One attempt: up to `count` rows now (reading once if none is pending),
/// and whether the cursor can give no more.
fn take(engine: &Engine, settings: &Settings, fetch: &FetchRequest) -> PgWireResult<Taken> {
    let cursors = settings.cursors();
    let mut open = cursors.lock();
    let cursor = open
        .get_mut(&fetch.cursor)
        .ok_or_else(|| user_error("34000", format!("cursor \"{}\" does not exist", fetch.cursor)))?;
    if cursor.pending.is_empty() {
        cursor.read(&engine.commits.subscribe().borrow());
    }
    let n = fetch.count.unwrap_or(usize::MAX).min(cursor.pending.len());
    let rows: Vec<Vec<Value>> = cursor.pending.drain(..n).collect();
    if rows.is_empty()
        && let Some(error) = cursor.failed.take()
    {
        open.remove(&fetch.cursor);
        return Err(subscription_error(error, settings.wait_ms()));
    }
    let done = cursor.finished && cursor.pending.is_empty();
    Ok((cursor.columns.clone(), rows, done))
}

/// Runs a FETCH, waiting (with `sleep`) for a first row as its timeout says.
pub(crate) async fn fetch(
    engine: &Engine,
    settings: &Settings,
    statement: &str,
    format: &Format,
) -> PgWireResult<Response> {
    let request = parse_fetch(statement).map_err(|message| user_error("42601", message))?;
    let wait_ms = request.timeout_ms.or_else(|| settings.statement_timeout_ms());
    let deadline = wait_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
    loop {
        let (columns, rows, done) = take(engine, settings, &request)?;
        let expired = deadline.is_some_and(|d| Instant::now() >= d);
        if !rows.is_empty() || done || expired || request.count == Some(0) {
            return Ok(answer(&columns, rows, format));
        }
        tokio::time::sleep(Duration::from_millis(IDLE_POLL_MS)).await;
    }
}

/// [`fetch`] from a blocking context (a FETCH among other statements):
/// waiting at most the statement timeout (30 s when none).
pub(crate) fn fetch_blocking(
    engine: &Engine,
    settings: &Settings,
    statement: &str,
    format: &Format,
) -> PgWireResult<Response> {
    let request = parse_fetch(statement).map_err(|message| user_error("42601", message))?;
    let wait_ms = request.timeout_ms.unwrap_or_else(|| settings.wait_ms());
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    loop {
        let (columns, rows, done) = take(engine, settings, &request)?;
        if !rows.is_empty() || done || Instant::now() >= deadline || request.count == Some(0) {
            return Ok(answer(&columns, rows, format));
        }
        std::thread::sleep(Duration::from_millis(IDLE_POLL_MS));
    }
}

fn answer(columns: &[(String, Type)], rows: Vec<Vec<Value>>, format: &Format) -> Response {
    let schema = std::sync::Arc::new(fields(columns, Some(format)));
    let rows: Vec<_> =
        rows.iter().map(|row| Ok(crate::cell::data_row(row, columns, |i| format.is_binary(i)))).collect();
    Response::Query(QueryResponse::new(schema, futures::stream::iter(rows)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_forms_parse() {
        let fetch = |count, cursor: &str, timeout_ms| FetchRequest { count, cursor: cursor.into(), timeout_ms };
        assert_eq!(parse_fetch("FETCH c"), Ok(fetch(Some(1), "c", None)));
        assert_eq!(parse_fetch("FETCH 10 c"), Ok(fetch(Some(10), "c", None)));
        assert_eq!(parse_fetch("fetch forward all from C"), Ok(fetch(None, "c", None)));
        assert_eq!(parse_fetch("FETCH 5 IN c WITH (timeout = '1s')"), Ok(fetch(Some(5), "c", Some(1000))));
        assert_eq!(parse_fetch("FETCH ALL c WITH (TIMEOUT = 0)"), Ok(fetch(None, "c", Some(0))));
        assert!(parse_fetch("FETCH 5 c WITH (timeout = 'soon')").is_err());
        assert!(parse_fetch("FETCH 5 c extra").is_err());
        assert!(parse_fetch("FETCH").is_err());
    }
}
