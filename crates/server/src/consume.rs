//! A topic's records over the wire, while the server owns the log (what
//! `millpond consume` sends when a server runs): `COPY topic TO STDOUT
//! [WITH (...)]` streams them, one record per CopyData line, and `ACK GROUP
//! 'g' TOPIC t PARTITION p THROUGH offset` commits a consumer group's
//! offset once the client has processed a record (a COPY OUT stream cannot
//! carry the client's word back, so the acknowledgement is a statement of
//! its own, on another connection while the stream runs).
//!
//! Options: `PARTITION n` (default all), a start — `OFFSET 'beginning' |
//! 'end' | '-N' | N`, `FROM_TIME ms` or `GROUP 'g'` (its committed offsets;
//! the log start where it has none) — at most one; `FOLLOW` (wait for new
//! records instead of ending at the ends the partitions had when the COPY
//! began), `MAX n`, `FORMAT json | raw`, `POSITIONS` (each line starts with
//! `partition<TAB>offset<TAB>`).
//!
//! Invariants: lines are records byte for byte (JSON as `millpond consume`
//! prints it, or the raw value), with no COPY text escaping, each ending in
//! `\n`; within a partition in offset order, and without FOLLOW partition
//! after partition; a stream holds at most one fetch
//! ([`FETCH_BYTES_MAX`]) of lines; a client that leaves its socket full
//! for the stall limit is dropped with 53200; an ACK is refused (22023)
//! past the partition's end, and answered only once it is on disk.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{Sink, SinkExt};
use millpond_dataflow::{RecordView, Start};
use pgwire::api::results::{Response, Tag};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::copy::{CopyData, CopyDone, CopyOutResponse};
use pgwire::messages::response::NoticeResponse;
use serde::Serialize;

use crate::engine::Engine;
use crate::pg::user_error;
use crate::subscribe::{IDLE_POLL_MS, StreamLimits, tokens};

/// Bytes read per fetch (one partition at a time).
pub(crate) const FETCH_BYTES_MAX: usize = 1 << 20;

/// How a record is written as a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordFormat {
    /// One JSON object: partition, offset, timestamp, key, value (lossy
    /// UTF-8, null when absent) and headers (when there are any).
    Json,
    /// The value's bytes as they are.
    Raw,
}

/// A parsed `COPY topic TO STDOUT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConsumeRequest {
    pub(crate) topic: String,
    pub(crate) partition: Option<u32>,
    pub(crate) start: Start,
    pub(crate) follow: bool,
    pub(crate) max: Option<u64>,
    pub(crate) format: RecordFormat,
    pub(crate) positions: bool,
}

/// One JSON line.
#[derive(Serialize)]
struct Line<'a> {
    partition: u32,
    offset: u64,
    timestamp: i64,
    key: Option<std::borrow::Cow<'a, str>>,
    value: Option<std::borrow::Cow<'a, str>>,
    /// Header name to value (lossy UTF-8), in record order; absent when none.
    #[serde(skip_serializing_if = "Headers::is_empty")]
    headers: Headers,
}

/// Headers as a JSON object in record order (a repeated name repeats).
struct Headers(Vec<(String, Option<Vec<u8>>)>);

impl Headers {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Headers {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, &value.as_deref().map(String::from_utf8_lossy))?;
        }
        map.end()
    }
}

/// Writes `record` of `partition` as one line (without its newline) to `out`.
pub fn record_line(partition: u32, record: &RecordView<'_>, format: RecordFormat, out: &mut Vec<u8>) {
    if format == RecordFormat::Raw {
        out.extend_from_slice(record.value.unwrap_or_default());
        return;
    }
    let line = Line {
        partition,
        offset: record.offset,
        timestamp: record.timestamp_ms,
        key: record.key.map(String::from_utf8_lossy),
        value: record.value.map(String::from_utf8_lossy),
        headers: Headers(record.headers().into_iter().map(|h| (h.key, h.value)).collect()),
    };
    serde_json::to_writer(out, &line).expect("writing JSON to memory cannot fail");
}

/// `Some` if `statement` is a `COPY name TO STDOUT`: the request, or what is wrong.
pub(crate) fn parse_copy_to(statement: &str) -> Option<Result<ConsumeRequest, String>> {
    let tokens = tokens(statement);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    let word = |at: usize| upper.get(at).map(String::as_str);
    if word(0) != Some("COPY") || word(1) == Some("(") || word(2) != Some("TO") {
        return None;
    }
    if word(3) != Some("STDOUT") {
        return Some(Err("COPY ... TO takes STDOUT only (the server writes no files)".into()));
    }
    let topic = tokens[1].trim_matches('"').to_owned();
    let mut request = ConsumeRequest {
        topic,
        partition: None,
        start: Start::Beginning,
        follow: false,
        max: None,
        format: RecordFormat::Json,
        positions: false,
    };
    let result = match upper.get(4..).unwrap_or_default() {
        [] => Ok(()),
        [with, open, ..] if with == "WITH" && open == "(" => parse_options(&tokens[6..], &upper[6..], &mut request),
        rest => Err(format!("expected COPY topic TO STDOUT [WITH (options)], found \"{}\"", rest.join(" "))),
    };
    Some(result.map(|()| request))
}

/// The options inside `WITH ( ... )`, through the closing parenthesis.
fn parse_options(tokens: &[String], upper: &[String], request: &mut ConsumeRequest) -> Result<(), String> {
    let mut at = 0;
    let mut starts = 0;
    loop {
        let option = upper.get(at).ok_or("an unclosed WITH (")?.as_str();
        at += 1;
        if upper.get(at).map(String::as_str) == Some("=") {
            at += 1;
        }
        let flag = !matches!(upper.get(at).map(String::as_str), Some("," | ")") | None);
        let value = if flag { tokens.get(at).map(|t| unquote(t)) } else { None };
        let number = |what: &str| -> Result<u64, String> {
            value.as_deref().and_then(|v| v.parse().ok()).ok_or_else(|| format!("{what} takes a number"))
        };
        match option {
            "PARTITION" => {
                let partition = number("PARTITION")?;
                request.partition = Some(u32::try_from(partition).map_err(|_| format!("no partition {partition}"))?);
            }
            "MAX" => request.max = Some(number("MAX")?),
            "OFFSET" => request.start = Start::parse(value.as_deref().unwrap_or_default())?,
            "FROM_TIME" => {
                let ms = number("FROM_TIME (ms since the epoch)")?;
                request.start = Start::Time(i64::try_from(ms).map_err(|_| format!("FROM_TIME {ms} is too large"))?);
            }
            "GROUP" => request.start = Start::Group(value.clone().ok_or("GROUP takes a group name")?),
            "FOLLOW" => request.follow = boolean(value.as_deref(), "FOLLOW")?,
            "POSITIONS" => request.positions = boolean(value.as_deref(), "POSITIONS")?,
            "FORMAT" => {
                request.format = match value.as_deref().map(str::to_ascii_lowercase).as_deref() {
                    Some("json") => RecordFormat::Json,
                    Some("raw") => RecordFormat::Raw,
                    other => return Err(format!("FORMAT takes json or raw, not {}", other.unwrap_or("nothing"))),
                }
            }
            other => {
                return Err(format!(
                    "unknown COPY ... TO STDOUT option {other} (PARTITION, OFFSET, FROM_TIME, GROUP, FOLLOW, MAX, \
                     FORMAT, POSITIONS)"
                ));
            }
        }
        starts += usize::from(matches!(option, "OFFSET" | "FROM_TIME" | "GROUP"));
        if starts > 1 {
            return Err("at most one of OFFSET, FROM_TIME and GROUP says where to start".into());
        }
        at += usize::from(flag);
        match upper.get(at).map(String::as_str) {
            Some(",") => at += 1,
            Some(")") if at + 1 == upper.len() => return Ok(()),
            _ => return Err("WITH options are separated by commas and closed by ), at the end".into()),
        }
    }
}

fn unquote(token: &str) -> String {
    match token.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
        Some(inner) => inner.replace("''", "'"),
        None => token.to_owned(),
    }
}

fn boolean(value: Option<&str>, what: &str) -> Result<bool, String> {
    match value.map(str::to_ascii_lowercase).as_deref() {
        None | Some("true" | "on" | "1") => Ok(true),
        Some("false" | "off" | "0") => Ok(false),
        Some(other) => Err(format!("{what} takes true or false, not {other}")),
    }
}

/// The SQLSTATE of a log operation that failed for what the client asked.
fn log_error(error: millpond_dataflow::Error) -> PgWireError {
    use millpond_dataflow::LogError;
    let code = match &error {
        millpond_dataflow::Error::Log(LogError::UnknownTopic(_)) => "42P01",
        millpond_dataflow::Error::Log(
            LogError::UnknownPartition { .. } | LogError::OffsetOutOfRange { .. } | LogError::InvalidGroup { .. },
        ) => "22023",
        _ => "XX000",
    };
    user_error(code, error.to_string())
}

/// Where readers of `topic`'s `partition` must stop ([`Engine::readable_end`]).
fn readable_end(engine: &Engine, topic: &str, partition: u32) -> PgWireResult<u64> {
    engine.readable_end(topic, partition).map_err(log_error)
}

/// One partition being read.
#[derive(Debug)]
struct Cursor {
    partition: u32,
    offset: u64,
    /// Without FOLLOW: where the partition ended when the COPY began.
    end: Option<u64>,
}

/// Where each partition starts, and the notices to send first (offsets a
/// group lost to retention).
fn open(engine: &Engine, request: &ConsumeRequest) -> PgWireResult<(Vec<Cursor>, Vec<String>)> {
    let topics = engine.topics();
    let count = topics.partitions(&request.topic).map_err(log_error)?;
    let partitions: Vec<u32> = match request.partition {
        Some(p) if p >= count => {
            return Err(user_error(
                "22023",
                format!("topic '{}' has no partition {p} (it has {count})", request.topic),
            ));
        }
        Some(p) => vec![p],
        None => (0..count).collect(),
    };
    let mut cursors = Vec::new();
    let mut notices = Vec::new();
    for partition in partitions {
        let resolved = topics.resolve_start(&request.topic, partition, &request.start).map_err(log_error)?;
        if let (Some(lost), Start::Group(group)) = (&resolved.lost, &request.start) {
            notices.push(format!(
                "group '{group}' on {}/{partition}: offsets {}..{} were deleted by retention before the group read \
                 them; starting at {}",
                request.topic, lost.start, lost.end, resolved.offset
            ));
        }
        let readable = readable_end(engine, &request.topic, partition)?;
        if resolved.offset > readable {
            return Err(user_error(
                "22023",
                format!(
                    "{}/{partition} is committed up to offset {readable}: offset {} is past it",
                    request.topic, resolved.offset
                ),
            ));
        }
        let end = if request.follow { None } else { Some(readable) };
        cursors.push(Cursor { partition, offset: resolved.offset, end });
    }
    Ok((cursors, notices))
}

/// The next lines: one fetch of the first partition that has records to
/// give (without FOLLOW, partitions in order; with it, round robin, so that
/// no partition starves the others), at most `budget` of them: one buffer
/// and where each line ends in it. No lines: nothing to read now.
fn next_lines(
    engine: &Engine,
    request: &ConsumeRequest,
    cursors: &mut [Cursor],
    budget: u64,
) -> PgWireResult<(Bytes, Vec<usize>)> {
    let mut out = Vec::new();
    let mut ends = Vec::new();
    for turn in 0..cursors.len() {
        let cursor = &mut cursors[turn];
        // With FOLLOW, up to what is readable now (a changelog's committed end).
        let end = match cursor.end {
            Some(end) => end,
            None => readable_end(engine, &request.topic, cursor.partition)?,
        };
        if cursor.offset >= end {
            continue;
        }
        let fetch = engine
            .topics()
            .fetch(&request.topic, cursor.partition, cursor.offset, FETCH_BYTES_MAX)
            .map_err(log_error)?;
        let from = cursor.offset;
        let mut cut = false;
        for record in fetch.records().filter(|r| r.offset >= from && r.offset < end) {
            if ends.len() as u64 >= budget {
                cut = true;
                break;
            }
            if request.positions {
                write!(out, "{}\t{}\t", cursor.partition, record.offset).expect("writing to memory");
            }
            record_line(cursor.partition, &record, request.format, &mut out);
            out.push(b'\n');
            ends.push(out.len());
            cursor.offset = record.offset + 1;
        }
        if !cut {
            // Past what compaction removed, and (without FOLLOW) done at a
            // partition that ends early (a changelog's uncommitted tail cut).
            cursor.offset = cursor.offset.max(fetch.next_offset().min(end));
            if fetch.is_empty() && cursor.end.is_some() {
                cursor.end = Some(cursor.offset);
            }
        }
        if request.follow {
            if !ends.is_empty() {
                cursors.rotate_left(turn + 1); // the next fetch starts at the next partition
                break;
            }
        } else if cursor.end.is_some_and(|end| cursor.offset < end) || !ends.is_empty() {
            // Partition after partition: this one again until it is done
            // (a fetch inside a compacted batch may move on without lines).
            break;
        }
    }
    debug_assert!(ends.windows(2).all(|w| w[0] < w[1]) && ends.last().is_none_or(|&e| e == out.len()));
    Ok((Bytes::from(out), ends))
}

/// Whether every cursor has reached its end (never with FOLLOW).
fn all_read(cursors: &[Cursor]) -> bool {
    cursors.iter().all(|c| c.end.is_some_and(|end| c.offset >= end))
}

async fn unblock<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> PgWireResult<T> {
    tokio::task::spawn_blocking(work).await.map_err(|e| PgWireError::ApiError(Box::new(e)))
}

/// Streams the topic's records to `client` until the ends are reached (or
/// MAX), the client cancels (pgwire drops this future) or disconnects.
pub(crate) async fn stream<C>(
    client: &mut C,
    engine: Arc<Engine>,
    request: ConsumeRequest,
    limits: StreamLimits,
) -> PgWireResult<Response>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let request = Arc::new(request);
    let (opener, opened) = (engine.clone(), request.clone());
    let (mut cursors, notices) = unblock(move || open(&opener, &opened)).await??;
    for notice in notices {
        let info = pgwire::error::ErrorInfo::new("WARNING".into(), "01000".into(), notice);
        client.send(PgWireBackendMessage::NoticeResponse(NoticeResponse::from(info))).await?;
    }
    client.send(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(0, 1, vec![0]))).await?;
    let mut sent = 0u64;
    loop {
        let budget = request.max.map_or(u64::MAX, |max| max - sent);
        if budget == 0 || all_read(&cursors) {
            client.send(PgWireBackendMessage::CopyDone(CopyDone::new())).await?;
            return Ok(Response::Execution(Tag::new("COPY").with_rows(sent as usize)));
        }
        let (reader, reading) = (engine.clone(), request.clone());
        let (back, lines) = unblock(move || {
            let lines = next_lines(&reader, &reading, &mut cursors, budget);
            (cursors, lines)
        })
        .await?;
        cursors = back;
        let (buf, ends) = lines?;
        if ends.is_empty() {
            if request.follow {
                tokio::time::sleep(Duration::from_millis(IDLE_POLL_MS)).await;
            }
            continue;
        }
        sent += ends.len() as u64;
        let send = async {
            let mut start = 0;
            for &end in &ends {
                client.feed(PgWireBackendMessage::CopyData(CopyData::new(buf.slice(start..end)))).await?;
                start = end;
            }
            client.flush().await
        };
        match tokio::time::timeout(Duration::from_millis(limits.stall_ms), send).await {
            Ok(result) => result?,
            Err(_) => {
                return Err(user_error(
                    "53200",
                    format!("the consumer fell behind: its client read nothing for {} ms", limits.stall_ms),
                ));
            }
        }
    }
}

/// Whether `statement` is an `ACK GROUP ...`.
pub(crate) fn is_group_ack(statement: &str) -> bool {
    let upper: Vec<String> = tokens(statement).iter().take(2).map(|t| t.to_ascii_uppercase()).collect();
    upper == ["ACK", "GROUP"]
}

/// `ACK GROUP 'g' TOPIC t PARTITION p THROUGH offset`: the group has
/// processed `t`/`p` through `offset`; its committed offset becomes the
/// next one (Kafka's meaning: where the group reads next).
pub(crate) fn ack(engine: &Engine, statement: &str) -> PgWireResult<Response> {
    let tokens = tokens(statement);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    let shape: Vec<&str> = upper.iter().map(String::as_str).collect();
    let ["ACK", "GROUP", _, "TOPIC", _, "PARTITION", _, "THROUGH", _] = shape.as_slice() else {
        return Err(user_error("42601", "expected ACK GROUP 'group' TOPIC topic PARTITION p THROUGH offset".into()));
    };
    let quoted = tokens[2].len() >= 2 && tokens[2].starts_with('\'') && tokens[2].ends_with('\'');
    if !quoted {
        return Err(user_error("42601", format!("ACK GROUP takes a quoted group name, not {}", tokens[2])));
    }
    let (group, topic) = (unquote(&tokens[2]), tokens[4].trim_matches('"'));
    let number = |at: usize, what: &str| {
        tokens[at].parse::<u64>().map_err(|_| user_error("42601", format!("{what} takes a number, not {}", tokens[at])))
    };
    let (partition, through) = (number(6, "PARTITION")?, number(8, "THROUGH")?);
    let partition = u32::try_from(partition).map_err(|_| user_error("22023", format!("no partition {partition}")))?;
    let topics = engine.topics();
    let end = readable_end(engine, topic, partition)?;
    if through >= end {
        return Err(user_error(
            "22023",
            format!(
                "ACK GROUP '{group}' THROUGH {through}: {topic}/{partition} ends (or is committed) before it, at {end}"
            ),
        ));
    }
    topics.commit_group_offset(&group, topic, partition, through + 1).map_err(log_error)?;
    Ok(Response::Execution(Tag::new("ACK")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(sql: &str) -> Result<ConsumeRequest, String> {
        parse_copy_to(sql).expect("a COPY topic TO STDOUT")
    }

    #[test]
    fn the_copy_to_forms_parse() {
        let plain = parse("COPY clicks TO STDOUT").unwrap();
        assert_eq!(
            (plain.topic.as_str(), &plain.start, plain.follow, plain.format),
            ("clicks", &Start::Beginning, false, RecordFormat::Json)
        );
        let full = parse(
            "copy \"view.v\" to stdout with (PARTITION 2, OFFSET '-5', FOLLOW, MAX = 7, FORMAT raw, POSITIONS = false);",
        )
        .unwrap();
        assert_eq!(
            full,
            ConsumeRequest {
                topic: "view.v".into(),
                partition: Some(2),
                start: Start::BeforeEnd(5),
                follow: true,
                max: Some(7),
                format: RecordFormat::Raw,
                positions: false,
            }
        );
        assert_eq!(parse("COPY t TO STDOUT WITH (GROUP 'it''s')").unwrap().start, Start::Group("it's".into()));
        assert_eq!(parse("COPY t TO STDOUT WITH (OFFSET 12)").unwrap().start, Start::At(12));
        assert_eq!(parse("COPY t TO STDOUT WITH (FROM_TIME 99)").unwrap().start, Start::Time(99));
        assert!(parse_copy_to("COPY (SUBSCRIBE v) TO STDOUT").is_none());
        assert!(parse_copy_to("COPY t FROM STDIN").is_none());
    }

    #[test]
    fn a_bad_copy_to_says_what_is_wrong() {
        for (sql, says) in [
            ("COPY t TO '/tmp/x'", "STDOUT only"),
            ("COPY t TO STDOUT WITH (COLOR)", "unknown COPY ... TO STDOUT option COLOR"),
            ("COPY t TO STDOUT WITH (OFFSET 'soon')", "'soon' is not beginning"),
            ("COPY t TO STDOUT WITH (MAX many)", "MAX takes a number"),
            ("COPY t TO STDOUT WITH (OFFSET 1, GROUP 'g')", "at most one of OFFSET"),
            ("COPY t TO STDOUT WITH (FORMAT csv)", "FORMAT takes json or raw"),
            ("COPY t TO STDOUT WITH (FOLLOW", "closed by )"),
            ("COPY t TO STDOUT WITH (FOLLOW) now", "closed by ), at the end"),
            ("COPY t TO STDOUT now", "expected COPY topic TO STDOUT"),
        ] {
            let error = parse(sql).unwrap_err();
            assert!(error.contains(says), "{sql}: {error}");
        }
    }

    #[test]
    fn a_record_is_a_json_line_or_its_raw_value() {
        let record = millpond_dataflow::TopicRecord {
            key: Some(b"k".to_vec()),
            value: Some(b"{\"a\":1}".to_vec()),
            headers: vec![("h".into(), b"x".to_vec())],
        };
        let dir = tempfile::tempdir().unwrap();
        let topics = millpond_dataflow::Topics::open(dir.path()).unwrap();
        let spec = millpond_dataflow::TopicSpec { partitions: 1, compacted: false, compaction_bounded: false };
        topics.ensure("t", spec).unwrap();
        topics.append("t", vec![record]).unwrap();
        let fetch = topics.fetch("t", 0, 0, 1 << 20).unwrap();
        let view = fetch.records().next().unwrap();
        let (mut json, mut raw) = (Vec::new(), Vec::new());
        record_line(0, &view, RecordFormat::Json, &mut json);
        record_line(0, &view, RecordFormat::Raw, &mut raw);
        let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"partition": 0, "offset": 0, "timestamp": view.timestamp_ms, "key": "k",
                "value": "{\"a\":1}", "headers": {"h": "x"}})
        );
        assert_eq!(raw, b"{\"a\":1}");
    }
}
