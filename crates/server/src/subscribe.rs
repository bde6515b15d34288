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
//! the epochs before it. A stream is fed by its view's hub
//! ([`crate::fanout`]: one reader and one encoding for all subscribers) or,
//! for AS OF and durable subscriptions, by its own reader (at most
//! [`EVENTS_PER_POLL_MAX`] records a poll, no rows kept:
//! `Subscription::forget_rows`) until it has caught up and joins the hub
//! after its last progress mark; never by a dataflow. A stream that falls
//! behind the hub's ring, or whose client reads nothing for the stall
//! time, ends with 53200 and is never skipped ahead. A dropped view is
//! declared void (the rows a client holds from it), 42P01; an AS OF no
//! longer retained is SQLSTATE 22000.
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{Sink, SinkExt};
use millpond_dataflow::{Epoch, Event, RawEvent, Subscription};
use millpond_sql::Type;
use pgwire::api::ClientInfo;
use pgwire::api::results::{Response, Tag};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::copy::{CopyData, CopyDone, CopyOutResponse};
use tokio::sync::watch;

use crate::commits::Commit;
use crate::copy_line::LinesBuilder;
use crate::engine::Engine;
use crate::fanout::{Entry, Found, HubHandle, JoinError, Joined};
use crate::pg::{VIEW_READY_POLL_MS, text_of_as, user_error};

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

/// What one poll of a subscription gave: events, the error that ends it,
/// and whether it caught up with the commit (nothing read and not taken).
pub(crate) struct Polled {
    pub(crate) events: Vec<RawEvent>,
    pub(crate) end: Option<millpond_dataflow::Error>,
    pub(crate) caught_up: bool,
}

/// Takes what is queued, then reads what `commit` says is committed (about
/// [`EVENTS_PER_POLL_MAX`] records at most): one subscriber's share of a
/// commit, bounded however much was committed at once.
pub(crate) fn poll_at(subscription: &mut Subscription, commit: &crate::commits::Commit) -> Polled {
    let mut events = Vec::new();
    let take = |subscription: &mut Subscription, events: &mut Vec<RawEvent>| {
        while events.len() < EVENTS_PER_POLL_MAX
            && let Some(event) = subscription.next_raw()
        {
            events.push(event);
        }
    };
    take(subscription, &mut events);
    let mut caught_up = subscription.queued_len() == 0;
    if caught_up && let Some(meta) = commit.as_deref() {
        match subscription.poll_at_most(meta, EVENTS_PER_POLL_MAX) {
            Ok(done) => caught_up = done,
            Err(end) => return Polled { events, end: Some(end), caught_up: false },
        }
        take(subscription, &mut events);
    }
    let caught_up = caught_up && subscription.queued_len() == 0;
    Polled { events, end: None, caught_up }
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

/// The SQLSTATE and message of what ends or refuses a subscription.
pub(crate) fn error_parts(error: millpond_dataflow::Error, wait_ms: u64) -> crate::fanout::End {
    match error {
        millpond_dataflow::Error::EpochUnavailable { .. } => ("22000", error.to_string()),
        millpond_dataflow::Error::ViewDropped { view, epoch, recreated, retracted } => (
            "42P01",
            format!(
                "view \"{view}\" was {} at epoch {epoch}: {}; subscribe again for the {}",
                if recreated { "replaced" } else { "dropped" },
                if retracted { "its rows were retracted" } else { "the rows you hold from it are void" },
                if recreated { "new definition's snapshot" } else { "view once it exists" }
            ),
        ),
        millpond_dataflow::Error::UnknownView(view) => {
            ("57014", format!("view \"{view}\" has not committed its first epoch within {wait_ms} ms"))
        }
        other => ("XX000", other.to_string()),
    }
}

/// The error of what ends or refuses a subscription.
pub(crate) fn subscription_error(error: millpond_dataflow::Error, wait_ms: u64) -> PgWireError {
    let (code, message) = error_parts(error, wait_ms);
    user_error(code, message)
}

/// The COPY text line of one event (`None`: a progress mark not asked for).
pub(crate) fn line(event: &Event, columns: &[(String, millpond_sql::Type)], progress: bool) -> Option<String> {
    let mut out = String::new();
    match event {
        Event::Change { epoch, diff, row } => {
            out.push_str(&epoch.to_string());
            if progress {
                out.push_str("\tf");
            }
            out.push('\t');
            out.push_str(&diff.to_string());
            for (column, ty) in columns {
                out.push('\t');
                copy_field(&mut out, text_of_as(&row[column.as_str()], ty).as_deref());
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

/// How a server's streams are bounded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamLimits {
    /// How long a client may leave its socket full before it is dropped.
    pub(crate) stall_ms: u64,
    /// The cap of each view's shared ring (`fanout`).
    pub(crate) buffer_bytes: usize,
}

/// One thing a stream sends.
enum Item {
    Row { epoch: Epoch, line: Bytes },
    Progress(Epoch),
}

/// What a feed has for its stream next.
enum Step {
    /// Items to send, then maybe the error that ends the stream.
    Items(Vec<Item>, Option<PgWireError>),
    /// Nothing new: wait.
    Idle,
    /// The stream ends with this error.
    End(PgWireError),
}

/// Where a stream's changes come from.
enum Feed {
    /// Its own changelog reader (a stream AS OF an epoch, or a durable
    /// subscription), until it catches up and joins the hub.
    Own { subscription: Option<Box<Subscription>>, commits: watch::Receiver<Commit> },
    /// A position in the view's shared ring.
    Shared { joined: Joined },
}

impl Feed {
    /// The next items (at most a poll's or a take's worth).
    async fn next(&mut self, handle: &HubHandle, columns: &[(String, Type)], progress: bool) -> PgWireResult<Step> {
        match self {
            Feed::Own { subscription, commits } => {
                let commit = commits.borrow_and_update().clone();
                let mut own = subscription.take().expect("the reader is back after each poll");
                let columns = columns.to_vec();
                let (own, polled, items) = tokio::task::spawn_blocking(move || {
                    let polled = poll_at(&mut own, &commit);
                    let items = own_items(&polled.events, &columns, progress);
                    (own, polled, items)
                })
                .await
                .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
                let progressed = own.progressed();
                *subscription = Some(own);
                if let Some(end) = polled.end {
                    // What was read before the error goes first.
                    return Ok(Step::Items(items, Some(subscription_error(end, 0))));
                }
                if polled.caught_up
                    && let Some(joined) = handle.hub.join_after(progressed)
                {
                    *self = Feed::Shared { joined };
                }
                Ok(if items.is_empty() { Step::Idle } else { Step::Items(items, None) })
            }
            Feed::Shared { joined } => {
                let seq = joined.position.load(Ordering::Acquire);
                Ok(match handle.hub.find(seq) {
                    Found::Entries(entries) => {
                        joined.position.store(seq + entries.len() as u64, Ordering::Release);
                        if entries.iter().any(|entry| entry.epoch() > joined.skip_through) {
                            // A later epoch committed: no new subscriber joins
                            // on this snapshot any more (it wants the newest).
                            joined.snapshot = None;
                        }
                        Step::Items(shared_items(&entries, joined.skip_through, progress), None)
                    }
                    Found::Nothing => Step::Idle,
                    Found::Behind => Step::End(behind(handle.hub.view())),
                    Found::Ended((code, message)) => Step::End(user_error(code, message)),
                })
            }
        }
    }

    /// Waits up to `timeout` for something new; false if nothing came.
    async fn wait(&mut self, handle: &HubHandle, timeout: Duration) -> bool {
        match self {
            Feed::Own { commits, .. } => tokio::time::timeout(timeout, commits.changed()).await.is_ok(),
            Feed::Shared { joined } => handle.hub.changed(joined.position.load(Ordering::Acquire), timeout).await,
        }
    }
}

/// A poll's events as items, the changes encoded into one buffer.
fn own_items(events: &[RawEvent], columns: &[(String, Type)], progress: bool) -> Vec<Item> {
    let mut lines = LinesBuilder::default();
    for event in events {
        if let RawEvent::Change { epoch, diff, row } = event {
            lines
                .push_change(*epoch, *diff, row.get(), columns, progress)
                .expect("a raw row is JSON checked when read");
        }
    }
    let (buf, ends) = lines.finish();
    let mut starts = std::iter::once(0).chain(ends.iter().map(|&end| end as usize));
    let mut ends = ends.iter();
    events
        .iter()
        .map(|event| match event {
            RawEvent::Change { epoch, .. } => {
                let (start, end) = (starts.next().expect("a start per line"), *ends.next().expect("a line per change"));
                Item::Row { epoch: *epoch, line: buf.slice(start..end as usize) }
            }
            RawEvent::Progress { epoch, .. } => Item::Progress(*epoch),
        })
        .collect()
}

fn shared_items(entries: &[Arc<Entry>], skip_through: Epoch, progress: bool) -> Vec<Item> {
    let mut items = Vec::new();
    for entry in entries.iter().filter(|e| e.epoch() > skip_through) {
        match &**entry {
            Entry::Rows { epoch, lines } => {
                items.extend(lines.lines(progress).iter().map(|line| Item::Row { epoch: *epoch, line }));
            }
            Entry::Progress { epoch } => items.push(Item::Progress(*epoch)),
        }
    }
    items
}

/// The progress row of `epoch` (with PROGRESS only).
fn progress_line(epoch: Epoch, columns: &[(String, Type)]) -> Bytes {
    line(&Event::Progress { epoch, progress: true }, columns, true).expect("a progress line").into_bytes().into()
}

/// How many times a stream gets its view's hub again when a snapshot join
/// finds the hub reads a changelog the view no longer has.
const STALE_HUB_RETRIES_MAX: usize = 3;

/// The view's hub and the stream's feed on it ([`start`]); a hub found
/// stale by the snapshot join (the view was created again) is retired by
/// it, and the view's hub got again.
async fn open_feed(
    engine: &Arc<Engine>,
    request: &SubscribeRequest,
    columns: &[(String, Type)],
    wait_ms: u64,
    buffer_bytes: usize,
) -> PgWireResult<(Arc<HubHandle>, Feed, Vec<Item>)> {
    for _ in 0..STALE_HUB_RETRIES_MAX {
        let handle = engine
            .hubs
            .get(engine.data_dir(), &engine.commits, &request.view, columns.to_vec(), buffer_bytes)
            .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        if let Some((feed, first)) = start(engine, &handle, request, wait_ms).await? {
            return Ok((handle, feed, first));
        }
    }
    Err(user_error(
        "40001",
        format!("view \"{}\" was created again while this subscription started; subscribe again", request.view),
    ))
}

/// Starts a stream's feed: a snapshot join of the hub, or (AS OF, or a
/// durable subscription) its own reader; sends the snapshot's rows. None
/// when the hub is stale ([`JoinError::Stale`]).
async fn start(
    engine: &Arc<Engine>,
    handle: &HubHandle,
    request: &SubscribeRequest,
    wait_ms: u64,
) -> PgWireResult<Option<(Feed, Vec<Item>)>> {
    if request.as_of.is_some() {
        let (opener, wanted) = (engine.clone(), request.clone());
        // Each own open folds the changelog up to its snapshot: a few at a
        // time, so that a thousand resuming together do not fold at once.
        let permit = engine.opens.clone().acquire_owned().await.map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        let subscription = tokio::task::spawn_blocking(move || open(&opener, &wanted, wait_ms))
            .await
            .map_err(|e| PgWireError::ApiError(Box::new(e)))??;
        drop(permit);
        let commits = engine.commits.subscribe();
        return Ok(Some((Feed::Own { subscription: Some(Box::new(subscription)), commits }, Vec::new())));
    }
    // The snapshot is at least of the epoch committed now (read-your-writes).
    let committed = engine.committed().ok().flatten().map_or(0, |meta| meta.epoch);
    let wait = Duration::from_millis(wait_ms);
    let joined = match handle.hub.join_with_snapshot(engine.data_dir(), &engine.opens, committed, wait).await {
        Ok(joined) => joined,
        Err(JoinError::Ended((code, message))) => return Err(user_error(code, message)),
        Err(JoinError::Stale) => return Ok(None),
        Err(JoinError::NotReady) => {
            return Err(subscription_error(millpond_dataflow::Error::UnknownView(request.view.clone()), wait_ms));
        }
    };
    let mut items = Vec::new();
    if let Some(snapshot) = &joined.snapshot {
        if request.snapshot {
            let lines = snapshot.lines.lines(request.progress);
            items.extend(lines.iter().map(|line| Item::Row { epoch: snapshot.epoch, line }));
        }
        // Where the stream starts, with or without the snapshot's rows.
        items.push(Item::Progress(snapshot.epoch));
    }
    Ok(Some((Feed::Shared { joined }, items)))
}

/// Streams the subscription to `client` until UP TO is reached, the view
/// goes, or the client cancels (pgwire drops this future) or disconnects.
pub(crate) async fn stream<C>(
    client: &mut C,
    engine: Arc<Engine>,
    request: SubscribeRequest,
    wait_ms: u64,
    limits: StreamLimits,
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
    let (handle, mut feed, first) = open_feed(&engine, &request, &columns, wait_ms, limits.buffer_bytes).await?;
    let width = 2 + usize::from(request.progress) + columns.len();
    let header = CopyOutResponse::new(0, width as i16, vec![0; width]);
    client.send(PgWireBackendMessage::CopyOutResponse(header)).await?;
    let mut sender = Sender { request: &request, columns: &columns, rows: 0, last_progress: None };
    let mut step = Step::Items(first, None);
    loop {
        match step {
            Step::Items(items, end) => {
                let sent = tokio::time::timeout(Duration::from_millis(limits.stall_ms), sender.send(client, items));
                match sent.await {
                    Ok(Ok(Some(done))) => return Ok(done),
                    Ok(Ok(None)) => {}
                    Ok(Err(error)) => return Err(error),
                    Err(_) => return Err(stalled(limits.stall_ms, sender.last_progress)),
                }
                if let Some(error) = end {
                    client.flush().await?;
                    return Err(error);
                }
            }
            Step::End(error) => {
                client.flush().await?;
                return Err(error);
            }
            Step::Idle => {
                // With PROGRESS, an idle stream says so every heartbeat (a
                // dead client is noticed when the write fails).
                if !feed.wait(&handle, Duration::from_millis(HEARTBEAT_MS)).await
                    && request.progress
                    && let Some(epoch) = sender.last_progress
                {
                    let beat =
                        client.send(PgWireBackendMessage::CopyData(CopyData::new(progress_line(epoch, &columns))));
                    match tokio::time::timeout(Duration::from_millis(limits.stall_ms), beat).await {
                        Ok(result) => result?,
                        Err(_) => return Err(stalled(limits.stall_ms, sender.last_progress)),
                    }
                }
            }
        }
        step = feed.next(&handle, &columns, request.progress).await?;
    }
}

/// Writes items to one client, flushing at each epoch's end.
struct Sender<'a> {
    request: &'a SubscribeRequest,
    columns: &'a [(String, Type)],
    rows: u64,
    last_progress: Option<Epoch>,
}

impl Sender<'_> {
    /// Sends `items`; the final response once UP TO is reached.
    async fn send<C>(&mut self, client: &mut C, items: Vec<Item>) -> PgWireResult<Option<Response>>
    where
        C: Sink<PgWireBackendMessage> + Unpin + Send,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let up_to = self.request.up_to;
        for item in items {
            match item {
                // Past UP TO: the progress mark below ends the stream.
                Item::Row { epoch, .. } if up_to.is_some_and(|up_to| epoch >= up_to) => {}
                Item::Row { line, .. } => {
                    client.feed(PgWireBackendMessage::CopyData(CopyData::new(line))).await?;
                    self.rows += 1;
                }
                Item::Progress(epoch) => {
                    if self.request.progress {
                        let line = progress_line(epoch, self.columns);
                        client.feed(PgWireBackendMessage::CopyData(CopyData::new(line))).await?;
                        self.rows += 1;
                    }
                    self.last_progress = Some(epoch);
                    // The epoch is complete: out now, not when a buffer fills.
                    client.flush().await?;
                    if up_to.is_some_and(|up_to| epoch + 1 >= up_to) {
                        client.send(PgWireBackendMessage::CopyDone(CopyDone::new())).await?;
                        return Ok(Some(Response::Execution(Tag::new("COPY").with_rows(self.rows as usize))));
                    }
                }
            }
        }
        Ok(None)
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

/// The error of a subscriber that fell further behind than the view's
/// shared buffer holds.
fn behind(view: &str) -> PgWireError {
    user_error(
        "53200",
        format!(
            "the subscriber fell behind: view \"{view}\" committed more changes than the subscriber buffer holds \
             (--subscriber-buffer-bytes) before its client read them; subscribe again (AS OF its last progress \
             WITH (SNAPSHOT = false) to resume)"
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
