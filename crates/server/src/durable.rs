//! The durable-subscription statements over the wire (the store is
//! `subscription`): `CREATE SUBSCRIPTION name FOR view [WITH
//! (max_retained_epochs = N)]`, `ACK SUBSCRIPTION name THROUGH epoch`,
//! `DROP SUBSCRIPTION [IF EXISTS] name`, `SHOW SUBSCRIPTIONS`, and the
//! position that `SUBSCRIBE TO SUBSCRIPTION name` reads from.
//!
//! Invariants: a subscription's view is a materialized view that has
//! committed (its start is a committed epoch); an ACK is refused past the
//! view's committed epoch (22023) and answered only once on disk.

use std::sync::Arc;
use std::time::{Duration, Instant};

use millpond_sql::{Type, Value};
use pgwire::api::results::{QueryResponse, Response, Tag};
use pgwire::error::PgWireResult;

use crate::engine::Engine;
use crate::pg::{Settings, VIEW_READY_POLL_MS, fields, user_error};
use crate::subscribe::{SubscribeRequest, tokens};
use crate::subscription::MAX_RETAINED_EPOCHS_DEFAULT;

/// Whether `statement` is one of the subscription statements.
pub(crate) fn is_subscription_statement(statement: &str) -> bool {
    let upper: Vec<String> = tokens(statement).iter().take(2).map(|t| t.to_ascii_uppercase()).collect();
    matches!(
        upper.iter().map(String::as_str).collect::<Vec<_>>().as_slice(),
        ["CREATE" | "DROP" | "ACK", "SUBSCRIPTION"] | ["SHOW", "SUBSCRIPTIONS"]
    )
}

fn syntax(message: impl Into<String>) -> pgwire::error::PgWireError {
    user_error("42601", message.into())
}

fn name_of(token: Option<&String>) -> PgWireResult<String> {
    let name = token.ok_or_else(|| syntax("a subscription needs a name"))?.trim_matches('"').to_ascii_lowercase();
    let ok = !name.is_empty()
        && name.len() <= 100
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !ok {
        return Err(syntax(format!(
            "invalid subscription name \"{name}\": up to 100 lowercase letters, digits and '_'"
        )));
    }
    Ok(name)
}

/// Runs a subscription statement (see [`is_subscription_statement`]).
pub(crate) fn execute(engine: &Engine, settings: &Settings, statement: &str) -> PgWireResult<Response> {
    let tokens = tokens(statement);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    match upper[0].as_str() {
        "CREATE" => create(engine, settings, &tokens, &upper),
        "ACK" => ack(engine, &tokens, &upper),
        "DROP" => {
            let if_exists = upper.get(2..4).is_some_and(|w| w == ["IF", "EXISTS"]);
            let at = if if_exists { 4 } else { 2 };
            if tokens.len() != at + 1 {
                return Err(syntax("expected DROP SUBSCRIPTION [IF EXISTS] name"));
            }
            let name = name_of(tokens.get(at))?;
            let dropped = engine.subscriptions.drop_subscription(&name).map_err(internal)?;
            if !dropped && !if_exists {
                return Err(user_error("42704", format!("subscription \"{name}\" does not exist")));
            }
            Ok(Response::Execution(Tag::new("DROP SUBSCRIPTION")))
        }
        _ => show(engine),
    }
}

fn internal(error: crate::Error) -> pgwire::error::PgWireError {
    user_error("XX000", error.to_string())
}

/// `CREATE SUBSCRIPTION name FOR [MATERIALIZED VIEW] view [WITH (max_retained_epochs = N)]`.
fn create(engine: &Engine, settings: &Settings, tokens: &[String], upper: &[String]) -> PgWireResult<Response> {
    let name = name_of(tokens.get(2))?;
    let mut at = 3;
    if upper.get(at).map(String::as_str) != Some("FOR") {
        return Err(syntax("expected CREATE SUBSCRIPTION name FOR view"));
    }
    at += 1;
    if upper.get(at..at + 2).is_some_and(|w| w == ["MATERIALIZED", "VIEW"]) {
        at += 2;
    }
    let view = tokens.get(at).ok_or_else(|| syntax("CREATE SUBSCRIPTION needs a view"))?.trim_matches('"');
    let view = view.to_ascii_lowercase();
    at += 1;
    let mut max_retained_epochs = MAX_RETAINED_EPOCHS_DEFAULT;
    if upper.get(at).map(String::as_str) == Some("WITH") {
        let option: Vec<&str> = upper.get(at + 1..at + 6).unwrap_or_default().iter().map(String::as_str).collect();
        let ["(", "MAX_RETAINED_EPOCHS", "=", value, ")"] = option.as_slice() else {
            return Err(syntax("CREATE SUBSCRIPTION takes WITH (max_retained_epochs = N)"));
        };
        max_retained_epochs =
            value.parse().map_err(|_| user_error("22023", format!("invalid max_retained_epochs {value}")))?;
        at += 6;
    }
    if at != tokens.len() {
        return Err(syntax(format!("unexpected \"{}\" in CREATE SUBSCRIPTION", tokens[at..].join(" "))));
    }
    if engine.view_columns(&view).is_none() {
        return Err(user_error("42P01", format!("there is no materialized view \"{view}\"")));
    }
    let start = committed_epoch(engine, &view, settings.wait_ms())?;
    if !engine.subscriptions.create(&name, &view, start, max_retained_epochs).map_err(internal)? {
        return Err(user_error("42710", format!("subscription \"{name}\" already exists")));
    }
    Ok(Response::Execution(Tag::new("CREATE SUBSCRIPTION")))
}

/// The committed epoch of `view`, waiting up to `wait_ms` for its first commit.
fn committed_epoch(engine: &Engine, view: &str, wait_ms: u64) -> PgWireResult<u64> {
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    loop {
        let meta = engine.committed().map_err(internal)?;
        if let Some(meta) = meta.filter(|m| m.views.contains_key(view)) {
            return Ok(meta.epoch);
        }
        if Instant::now() >= deadline {
            return Err(user_error(
                "57014",
                format!("view \"{view}\" has not committed its first epoch within {wait_ms} ms"),
            ));
        }
        std::thread::sleep(Duration::from_millis(VIEW_READY_POLL_MS));
    }
}

/// `ACK SUBSCRIPTION name THROUGH epoch`.
fn ack(engine: &Engine, tokens: &[String], upper: &[String]) -> PgWireResult<Response> {
    let name = name_of(tokens.get(2))?;
    let epoch = match (upper.get(3).map(String::as_str), tokens.get(4), tokens.len()) {
        (Some("THROUGH"), Some(epoch), 5) => epoch.parse::<u64>().map_err(|_| syntax("THROUGH takes an epoch"))?,
        _ => return Err(syntax("expected ACK SUBSCRIPTION name THROUGH epoch")),
    };
    let Some(durable) = engine.subscriptions.get(&name) else {
        return Err(user_error("42704", format!("subscription \"{name}\" does not exist")));
    };
    let committed = engine.committed().map_err(internal)?.map_or(0, |m| m.epoch);
    if epoch > committed {
        return Err(user_error(
            "22023",
            format!("epoch {epoch} is not committed yet (view \"{}\" is at {committed})", durable.view),
        ));
    }
    engine.subscriptions.ack(&name, epoch).map_err(internal)?;
    Ok(Response::Execution(Tag::new("ACK")))
}

/// `SHOW SUBSCRIPTIONS`: name, view, position, committed epoch, lag, state.
fn show(engine: &Engine) -> PgWireResult<Response> {
    let meta = engine.committed().map_err(internal)?;
    let columns: Vec<(String, Type)> = [
        ("name", Type::Text),
        ("view", Type::Text),
        ("acked_epoch", Type::Int),
        ("start_epoch", Type::Int),
        ("committed_epoch", Type::Int),
        ("lag_epochs", Type::Int),
        ("max_retained_epochs", Type::Int),
        ("state", Type::Text),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_owned(), t))
    .collect();
    let schema = Arc::new(fields(&columns, None));
    let rows: Vec<_> = engine
        .subscriptions
        .statuses(meta.as_ref())
        .into_iter()
        .map(|status| {
            let int = |n: u64| Value::Int(n as i64);
            let row = [
                Value::Text(status.durable.name.as_str().into()),
                Value::Text(status.durable.view.as_str().into()),
                status.durable.acked.map_or(Value::Null, int),
                int(status.durable.start),
                int(status.committed),
                int(status.lag_epochs),
                int(status.durable.max_retained_epochs),
                Value::Text(status.state.into()),
            ];
            Ok(crate::cell::data_row(&row, &columns, |_| false))
        })
        .collect();
    Ok(Response::Query(QueryResponse::new(schema, futures::stream::iter(rows))))
}

/// A SUBSCRIBE of a durable subscription, as a request on its view from
/// its position (the snapshot if nothing is acknowledged yet).
pub(crate) fn resolve(engine: &Engine, request: SubscribeRequest) -> PgWireResult<SubscribeRequest> {
    let Some(name) = request.subscription.clone() else { return Ok(request) };
    let Some(durable) = engine.subscriptions.get(&name) else {
        return Err(user_error("42704", format!("subscription \"{name}\" does not exist")));
    };
    let (as_of, snapshot) = durable.position();
    Ok(SubscribeRequest { view: durable.view, as_of: Some(as_of), snapshot, ..request })
}
