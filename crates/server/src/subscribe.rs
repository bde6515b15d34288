//! `COPY (SUBSCRIBE [TO] view [AS OF e] [UP TO e] [WITH (SNAPSHOT = b,
//! PROGRESS)]) TO STDOUT`: a view's changes streamed over the Postgres wire
//! as COPY text rows, each epoch flushed as soon as it commits.
//!
//! Columns: `mp_epoch`, `mp_progressed` (with PROGRESS), `mp_diff`, then
//! the view's columns. A change row has `mp_progressed` false; a progress
//! row (with PROGRESS, one per committed epoch) has it true and NULL diff
//! and columns, and says every change at or before its epoch was sent.
//! Without AS OF the snapshot is of the last committed epoch.
//!
//! Invariants: rows of one epoch are flushed together, after every row of
//! the epochs before it; a subscriber holds one changelog reader and a
//! bounded batch of events at a time ([`EVENTS_PER_POLL_MAX`]), never a
//! dataflow, and holds no rows (`Subscription::forget_rows`: its memory
//! does not grow with the view), so a dropped view ends the stream with
//! 42P01 telling the client its rows are void (no retractions); an AS OF
//! no longer retained is SQLSTATE 22000.
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Sink, SinkExt};
use millpond_dataflow::{Epoch, Event, Subscription};
use pgwire::api::ClientInfo;
use pgwire::api::results::{Response, Tag};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::copy::{CopyData, CopyDone, CopyOutResponse};

use crate::engine::Engine;
use crate::pg::{VIEW_READY_POLL_MS, text_of, user_error};

/// Events taken from the changelog per poll: a subscriber's memory bound.
pub(crate) const EVENTS_PER_POLL_MAX: usize = 4096;

/// How long a cursor's FETCH waits between polls when nothing was committed.
pub(crate) const IDLE_POLL_MS: u64 = 20;
/// How often an idle stream with PROGRESS repeats its last progress row.
pub(crate) const HEARTBEAT_MS: u64 = 1_000;
/// How long a subscriber's client may leave its buffer full (read nothing)
/// before the subscriber is dropped with 53200, unless configured.
pub const SUBSCRIBER_STALL_MS_DEFAULT: u64 = 30_000;

/// A parsed `COPY (SUBSCRIBE ...) TO STDOUT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SubscribeRequest {
    pub(crate) view: String,
    pub(crate) as_of: Option<Epoch>,
    /// Exclusive: changes of earlier epochs only, then the stream ends.
    pub(crate) up_to: Option<Epoch>,
    pub(crate) snapshot: bool,
    pub(crate) progress: bool,
    /// `SUBSCRIBE TO SUBSCRIPTION name`: the view and position are the
    /// durable subscription's (`durable::resolve` fills them in).
    pub(crate) subscription: Option<String>,
}

/// Splits SQL into words and the punctuation `(`, `)`, `,` and `=`.
pub(crate) fn tokens(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in sql.chars() {
        if c.is_whitespace() || matches!(c, '(' | ')' | ',' | '=' | ';') {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if matches!(c, '(' | ')' | ',' | '=') {
                out.push(c.to_string());
            }
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// `Some` if `statement` is a `COPY (SUBSCRIBE ...) TO STDOUT`: the request,
/// or what is wrong with it.
pub(crate) fn parse_copy_subscribe(statement: &str) -> Option<Result<SubscribeRequest, String>> {
    let tokens = tokens(statement);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    if upper.len() >= 3 && upper[0] == "COPY" && upper[1] == "(" && upper[2] == "SUBSCRIBE" {
        return Some(parse_tokens(&tokens, &upper, 3, &[")", "TO", "STDOUT"]));
    }
    // A plain SUBSCRIBE is streamed the same way (psql shows COPY output).
    if upper.first().map(String::as_str) == Some("SUBSCRIBE") {
        return Some(parse_tokens(&tokens, &upper, 1, &[]));
    }
    None
}

/// The `SUBSCRIBE ...` of `DECLARE c CURSOR FOR SUBSCRIBE ...`, from its
/// SUBSCRIBE on: the cursor's name and request, or what is wrong.
pub(crate) fn parse_declare(statement: &str) -> Option<Result<(String, SubscribeRequest), String>> {
    let tokens = tokens(statement);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    if upper.first().map(String::as_str) != Some("DECLARE") {
        return None;
    }
    let Some(name) = tokens.get(1).map(|n| n.trim_matches('"').to_ascii_lowercase()) else {
        return Some(Err("DECLARE needs a cursor name".into()));
    };
    let Some(at) = upper.iter().position(|t| t == "SUBSCRIBE") else {
        return Some(Err("not supported: a cursor over anything but SUBSCRIBE".into()));
    };
    let between: Vec<&str> = upper[2..at].iter().map(String::as_str).collect();
    let plain = matches!(between.as_slice(), ["CURSOR", "FOR"] | ["CURSOR", "WITH" | "WITHOUT", "HOLD", "FOR"]);
    if !plain {
        return Some(Err(format!("expected DECLARE {name} CURSOR FOR SUBSCRIBE ..., found \"{}\"", between.join(" "))));
    }
    Some(parse_tokens(&tokens, &upper, at + 1, &[]).map(|request| (name, request)))
}

fn parse_tokens(tokens: &[String], upper: &[String], start: usize, tail: &[&str]) -> Result<SubscribeRequest, String> {
    let mut at = start;
    let word = |at: usize| upper.get(at).map(String::as_str);
    if word(at) == Some("TO") {
        at += 1;
    }
    let mut subscription = None;
    if word(at) == Some("SUBSCRIPTION") && tokens.get(at + 1).is_some_and(|t| t != ")") {
        subscription = tokens.get(at + 1).map(|n| n.trim_matches('"').to_ascii_lowercase());
        at += 1;
    }
    let view = tokens.get(at).ok_or("SUBSCRIBE needs a view name")?;
    let view = if subscription.is_some() { String::new() } else { view.trim_matches('"').to_ascii_lowercase() };
    at += 1;
    let mut request =
        SubscribeRequest { view, as_of: None, up_to: None, snapshot: true, progress: false, subscription };
    let epoch = |at: usize, what: &str| -> Result<Epoch, String> {
        tokens.get(at).and_then(|t| t.parse().ok()).ok_or_else(|| format!("{what} takes an epoch number"))
    };
    loop {
        match (word(at), word(at + 1)) {
            (Some("AS"), Some("OF")) => {
                request.as_of = Some(epoch(at + 2, "AS OF")?);
                at += 3;
            }
            (Some("UP"), Some("TO")) => {
                request.up_to = Some(epoch(at + 2, "UP TO")?);
                at += 3;
            }
            (Some("WITH"), Some("(")) => at = parse_options(upper, at + 2, &mut request)?,
            _ => break,
        }
    }
    let rest: Vec<&str> = upper[at.min(upper.len())..].iter().map(String::as_str).collect();
    if rest != tail {
        return Err(format!(
            "expected SUBSCRIBE view [AS OF e] [UP TO e] [WITH (SNAPSHOT = bool, PROGRESS)]{}, found \"{}\"",
            if tail.is_empty() { String::new() } else { format!(" then {}", tail.join(" ")) },
            rest.join(" ")
        ));
    }
    if request.subscription.is_some() && (request.as_of.is_some() || !request.snapshot) {
        return Err("a subscription reads from its own position: no AS OF or SNAPSHOT with SUBSCRIPTION".into());
    }
    if let (Some(as_of), Some(up_to)) = (request.as_of, request.up_to)
        && up_to <= as_of
    {
        return Err(format!("UP TO {up_to} must be greater than AS OF {as_of}"));
    }
    Ok(request)
}

/// Reads `SNAPSHOT [= bool]` and `PROGRESS [= bool]` up to the closing `)`.
fn parse_options(upper: &[String], mut at: usize, request: &mut SubscribeRequest) -> Result<usize, String> {
    loop {
        let option = upper.get(at).map(String::as_str).ok_or("an unclosed WITH (")?;
        at += 1;
        let mut value = true;
        if upper.get(at).map(String::as_str) == Some("=") {
            value = match upper.get(at + 1).map(String::as_str) {
                Some("TRUE" | "ON" | "1") => true,
                Some("FALSE" | "OFF" | "0") => false,
                other => return Err(format!("{option} takes true or false, not {}", other.unwrap_or("nothing"))),
            };
            at += 2;
        }
        match option {
            "SNAPSHOT" => request.snapshot = value,
            "PROGRESS" => request.progress = value,
            other => return Err(format!("unknown SUBSCRIBE option {other} (SNAPSHOT, PROGRESS)")),
        }
        match upper.get(at).map(String::as_str) {
            Some(",") => at += 1,
            Some(")") => return Ok(at + 1),
            _ => return Err("WITH options are separated by commas and closed by )".into()),
        }
    }
}

/// One field in COPY's text format: `\N` for NULL, and backslash, tab,
/// newline and carriage return escaped.
pub(crate) fn copy_field(out: &mut String, value: Option<&str>) {
    let Some(value) = value else {
        out.push_str("\\N");
        return;
    };
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
}

/// What one poll of a subscription gave: events, and the error that ends it.
pub(crate) struct Polled {
    pub(crate) events: Vec<Event>,
    pub(crate) end: Option<millpond_dataflow::Error>,
}

/// Takes what is queued, then reads what `commit` says is committed (at
/// most [`EVENTS_PER_POLL_MAX`] events): one subscriber's share of a commit.
pub(crate) fn poll_at(subscription: &mut Subscription, commit: &crate::commits::Commit) -> Polled {
    let mut events = Vec::new();
    let mut read = false;
    while events.len() < EVENTS_PER_POLL_MAX {
        if let Some(event) = subscription.next_queued() {
            events.push(event);
            continue;
        }
        let Some(meta) = commit.as_deref().filter(|_| !read) else { break };
        read = true;
        if let Err(end) = subscription.poll_at(meta) {
            return Polled { events, end: Some(end) };
        }
    }
    Polled { events, end: None }
}

/// Opens the subscription, waiting up to `wait_ms` (the statement timeout,
/// or 30 s) for a view just created to commit its first epoch.
pub(crate) fn open(engine: &Engine, request: &SubscribeRequest, wait_ms: u64) -> PgWireResult<Subscription> {
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    loop {
        match Subscription::open(engine.data_dir(), &request.view, request.as_of, request.snapshot) {
            Ok(mut subscription) => {
                subscription.poll_interval = Duration::from_millis(IDLE_POLL_MS);
                // A subscriber's memory must not grow with the view (fan-out).
                subscription.forget_rows();
                return Ok(subscription);
            }
            Err(millpond_dataflow::Error::UnknownView(_)) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(VIEW_READY_POLL_MS));
            }
            Err(error) => return Err(subscription_error(error, wait_ms)),
        }
    }
}

/// The SQLSTATE of what ends or refuses a subscription.
pub(crate) fn subscription_error(error: millpond_dataflow::Error, wait_ms: u64) -> PgWireError {
    match error {
        millpond_dataflow::Error::EpochUnavailable { .. } => user_error("22000", error.to_string()),
        millpond_dataflow::Error::ViewDropped { view, epoch, recreated, retracted } => user_error(
            "42P01",
            format!(
                "view \"{view}\" was {} at epoch {epoch}: {}; subscribe again for the {}",
                if recreated { "replaced" } else { "dropped" },
                if retracted { "its rows were retracted" } else { "the rows you hold from it are void" },
                if recreated { "new definition's snapshot" } else { "view once it exists" }
            ),
        ),
        millpond_dataflow::Error::UnknownView(view) => {
            user_error("57014", format!("view \"{view}\" has not committed its first epoch within {wait_ms} ms"))
        }
        other => user_error("XX000", other.to_string()),
    }
}

/// The COPY text line of one event (`None`: a progress mark not asked for).
fn line(event: &Event, columns: &[(String, millpond_sql::Type)], progress: bool) -> Option<String> {
    let mut out = String::new();
    match event {
        Event::Change { epoch, diff, row } => {
            out.push_str(&epoch.to_string());
            if progress {
                out.push_str("\tf");
            }
            out.push('\t');
            out.push_str(&diff.to_string());
            for (column, _) in columns {
                out.push('\t');
                copy_field(&mut out, text_of(&row[column.as_str()]).as_deref());
            }
        }
        Event::Progress { epoch, .. } if progress => {
            out.push_str(&epoch.to_string());
            out.push_str("\tt\t\\N");
            for _ in columns {
                out.push_str("\t\\N");
            }
        }
        Event::Progress { .. } => return None,
    }
    out.push('\n');
    Some(out)
}

/// Streams the subscription to `client` until UP TO is reached, the view
/// goes, or the client cancels (pgwire drops this future) or disconnects.
pub(crate) async fn stream<C>(
    client: &mut C,
    engine: Arc<Engine>,
    request: SubscribeRequest,
    wait_ms: u64,
    stall_ms: u64,
) -> PgWireResult<Response>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: std::fmt::Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let request = crate::durable::resolve(&engine, request)?;
    let Some(columns) = engine.view_columns(&request.view) else {
        return Err(user_error("42P01", format!("there is no materialized view \"{}\"", request.view)));
    };
    let (opener, wanted) = (engine.clone(), request.clone());
    // Each open folds the changelog up to its snapshot: a few at a time, so
    // that a thousand subscribers arriving together do not fold at once.
    let permit = engine.opens.clone().acquire_owned().await.map_err(|e| PgWireError::ApiError(Box::new(e)))?;
    let mut subscription = tokio::task::spawn_blocking(move || open(&opener, &wanted, wait_ms))
        .await
        .map_err(|e| PgWireError::ApiError(Box::new(e)))??;
    drop(permit);
    let width = 2 + usize::from(request.progress) + columns.len();
    let header = CopyOutResponse::new(0, width as i16, vec![0; width]);
    client.send(PgWireBackendMessage::CopyOutResponse(header)).await?;
    let mut rows = 0u64;
    let mut commits = engine.commits.subscribe();
    let mut last_progress: Option<Epoch> = None;
    loop {
        let commit = commits.borrow_and_update().clone();
        let (back, polled) = tokio::task::spawn_blocking(move || {
            let polled = poll_at(&mut subscription, &commit);
            (subscription, polled)
        })
        .await
        .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        subscription = back;
        let idle = polled.events.is_empty();
        let sent = tokio::time::timeout(Duration::from_millis(stall_ms), async {
            for event in &polled.events {
                let epoch = match event {
                    Event::Change { epoch, .. } | Event::Progress { epoch, .. } => *epoch,
                };
                if matches!(event, Event::Change { .. }) && request.up_to.is_some_and(|up_to| epoch >= up_to) {
                    continue; // past UP TO: the progress mark below ends the stream
                }
                if let Some(text) = line(event, &columns, request.progress) {
                    client.feed(PgWireBackendMessage::CopyData(CopyData::new(text.into_bytes().into()))).await?;
                    rows += 1;
                }
                if let Event::Progress { .. } = event {
                    last_progress = Some(epoch);
                    // The epoch is complete: out now, not when a buffer fills.
                    client.flush().await?;
                    if request.up_to.is_some_and(|up_to| epoch + 1 >= up_to) {
                        client.send(PgWireBackendMessage::CopyDone(CopyDone::new())).await?;
                        return Ok(Some(Response::Execution(Tag::new("COPY").with_rows(rows as usize))));
                    }
                }
            }
            Ok::<_, PgWireError>(None)
        })
        .await;
        match sent {
            Ok(Ok(Some(done))) => return Ok(done),
            Ok(Ok(None)) => {}
            Ok(Err(error)) => return Err(error),
            Err(_) => return Err(stalled(stall_ms, last_progress)),
        }
        if let Some(end) = polled.end {
            client.flush().await?;
            return Err(subscription_error(end, wait_ms));
        }
        if idle {
            // Wait for the next commit; with PROGRESS, an idle stream says
            // so every heartbeat (a dead client is noticed when it fails).
            let heartbeat = Duration::from_millis(HEARTBEAT_MS);
            if tokio::time::timeout(heartbeat, commits.changed()).await.is_err()
                && request.progress
                && let Some(epoch) = last_progress
            {
                let text = line(&Event::Progress { epoch, progress: true }, &columns, true).expect("a progress line");
                let beat = client.send(PgWireBackendMessage::CopyData(CopyData::new(text.into_bytes().into())));
                match tokio::time::timeout(Duration::from_millis(stall_ms), beat).await {
                    Ok(result) => result?,
                    Err(_) => return Err(stalled(stall_ms, last_progress)),
                }
            }
        }
    }
}

/// The error of a subscriber whose client stopped reading.
fn stalled(stall_ms: u64, last_progress: Option<Epoch>) -> PgWireError {
    let resume = last_progress.map(|e| format!(" (resume with AS OF {e} WITH (SNAPSHOT = false))")).unwrap_or_default();
    user_error(
        "53200",
        format!(
            "the subscriber fell behind: its client read nothing for {stall_ms} ms while its buffer was full{resume}"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> Result<SubscribeRequest, String> {
        parse_copy_subscribe(sql).expect("a COPY (SUBSCRIBE ...)")
    }

    /// `SUBSCRIBE v` with every option at its default.
    fn plain_request() -> SubscribeRequest {
        SubscribeRequest {
            view: "v".into(),
            as_of: None,
            up_to: None,
            snapshot: true,
            progress: false,
            subscription: None,
        }
    }

    #[test]
    fn the_copy_subscribe_forms_parse() {
        let plain = plain_request();
        assert_eq!(parse("COPY (SUBSCRIBE v) TO STDOUT"), Ok(plain.clone()));
        assert_eq!(parse("copy (subscribe to V) to stdout;"), Ok(plain.clone()));
        assert_eq!(
            parse("COPY (SUBSCRIBE v AS OF 3 UP TO 9 WITH (SNAPSHOT = false, PROGRESS)) TO STDOUT"),
            Ok(SubscribeRequest { as_of: Some(3), up_to: Some(9), snapshot: false, progress: true, ..plain })
        );
        assert_eq!(parse_copy_subscribe("COPY t TO STDOUT"), None);
        assert_eq!(parse_copy_subscribe("SELECT 1"), None);
    }

    #[test]
    fn a_bad_copy_subscribe_says_what_is_wrong() {
        for (sql, says) in [
            ("COPY (SUBSCRIBE) TO STDOUT", "expected SUBSCRIBE"),
            ("COPY (SUBSCRIBE v AS OF x) TO STDOUT", "AS OF takes an epoch"),
            ("COPY (SUBSCRIBE v WITH (COLOR)) TO STDOUT", "unknown SUBSCRIBE option COLOR"),
            ("COPY (SUBSCRIBE v WITH (SNAPSHOT = maybe)) TO STDOUT", "SNAPSHOT takes true or false"),
            ("COPY (SUBSCRIBE v) TO '/tmp/file'", "then ) TO STDOUT"),
            ("SUBSCRIBE v TO STDOUT", "found \"TO STDOUT\""),
            ("COPY (SUBSCRIBE v AS OF 5 UP TO 5) TO STDOUT", "must be greater than AS OF"),
        ] {
            let error = parse(sql).unwrap_err();
            assert!(error.contains(says), "{sql}: {error}");
        }
    }

    #[test]
    fn plain_subscribes_and_cursors_parse() {
        let plain = plain_request();
        assert_eq!(parse("SUBSCRIBE TO v"), Ok(plain.clone()));
        assert_eq!(parse("subscribe v with (progress)"), Ok(SubscribeRequest { progress: true, ..plain.clone() }));
        let declared = parse_declare("DECLARE c CURSOR FOR SUBSCRIBE v AS OF 4").unwrap().unwrap();
        assert_eq!(declared, ("c".into(), SubscribeRequest { as_of: Some(4), ..plain.clone() }));
        let held = parse_declare("declare \"C\" cursor with hold for subscribe to v").unwrap().unwrap();
        assert_eq!(held, ("c".into(), plain));
        assert!(parse_declare("DECLARE c CURSOR FOR SELECT 1").unwrap().unwrap_err().contains("not supported"));
        assert!(parse_declare("DECLARE c SCROLL CURSOR FOR SUBSCRIBE v").unwrap().is_err());
        assert!(parse_declare("SELECT 1").is_none());
        let durable = parse("SUBSCRIBE TO SUBSCRIPTION s WITH (PROGRESS)").unwrap();
        assert_eq!((durable.subscription.as_deref(), durable.progress), (Some("s"), true));
        assert!(parse("SUBSCRIBE TO SUBSCRIPTION s AS OF 3").unwrap_err().contains("own position"));
        assert_eq!(parse("SUBSCRIBE subscription").unwrap().view, "subscription", "a view may be named so");
    }

    #[test]
    fn copy_text_escapes_what_would_break_a_row() {
        let mut out = String::new();
        copy_field(&mut out, Some("a\tb\nc\\d\re"));
        out.push('\t');
        copy_field(&mut out, None);
        assert_eq!(out, "a\\tb\\nc\\\\d\\re\t\\N");
    }
}
