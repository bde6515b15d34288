//! `COPY topic FROM STDIN [WITH (KEY_FIELD 'f')]`: records appended to a
//! topic over the wire, one per line, while the server owns the log (what
//! `millpond produce` sends when a server runs, and what psql's `\copy`
//! sends).
//!
//! Each non-empty line is one record's value, byte for byte (no COPY text-format
//! unescaping: the lines are a source's records, JSON as a producer writes
//! them); with KEY_FIELD the key is that field of the line's JSON object,
//! as text, and records are routed by key with Kafka's partitioner (unkeyed:
//! round robin), as `Log::produce` routes. Lines are appended in batches as
//! they arrive, each synced before the next; the final line needs no
//! newline. The answer is `COPY n`.
//!
//! Invariants: a line longer than [`COPY_LINE_BYTES_MAX`] fails the COPY
//! (54000) without buffering more of it; what fails a COPY (a bad line, an
//! append error, the client's CopyFail) is answered once, at its end, with
//! how many records were appended before it (they stay: the log has no
//! transactions here) and the line that failed; a COPY holds at most one
//! batch ([`COPY_BATCH_BYTES`]) and one partial line.

use millpond_dataflow::TopicRecord;

use crate::subscribe::tokens;

/// The longest line a COPY holds while waiting for its end.
pub(crate) const COPY_LINE_BYTES_MAX: usize = 16 << 20;
/// Bytes of records appended at once.
const COPY_BATCH_BYTES: usize = 512 << 10;

/// A parsed `COPY ... FROM STDIN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CopyRequest {
    pub(crate) topic: String,
    pub(crate) key_field: Option<String>,
}

/// `Some` if `statement` is a `COPY name FROM STDIN`: the request, or what is wrong.
pub(crate) fn parse_copy_from(statement: &str) -> Option<Result<CopyRequest, String>> {
    let tokens = tokens(statement);
    let upper: Vec<String> = tokens.iter().map(|t| t.to_ascii_uppercase()).collect();
    let word = |at: usize| upper.get(at).map(String::as_str);
    if word(0) != Some("COPY") || word(2) != Some("FROM") {
        return None;
    }
    if word(3) != Some("STDIN") {
        return Some(Err("COPY ... FROM takes STDIN only (the server reads no files)".into()));
    }
    let topic = tokens[1].trim_matches('"').to_owned();
    let mut request = CopyRequest { topic, key_field: None };
    match upper[4..].iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] => {}
        ["WITH", "(", "KEY_FIELD", field, ")"] | ["WITH", "(", "KEY_FIELD", "=", field, ")"] => {
            let field = tokens[upper.iter().position(|t| t == field).expect("found")].clone();
            let quoted = field.len() >= 2 && field.starts_with('\'') && field.ends_with('\'');
            if !quoted {
                return Some(Err(format!("KEY_FIELD takes a quoted field name, not {field}")));
            }
            request.key_field = Some(field[1..field.len() - 1].replace("''", "'"));
        }
        rest => {
            return Some(Err(format!(
                "expected COPY topic FROM STDIN [WITH (KEY_FIELD 'f')], found \"{}\"",
                rest.join(" ")
            )));
        }
    }
    Some(Ok(request))
}

/// A COPY in progress on one connection.
#[derive(Debug)]
pub(crate) struct CopyIn {
    pub(crate) request: CopyRequest,
    /// The bytes of a line whose newline has not come yet.
    partial: Vec<u8>,
    batch: Vec<TopicRecord>,
    batch_bytes: usize,
    /// Lines read so far (the number of the line that failed, if one did).
    pub(crate) lines: u64,
    /// Records appended so far.
    pub(crate) appended: u64,
    /// What failed the COPY (SQLSTATE and message); later data is ignored.
    pub(crate) failed: Option<(&'static str, String)>,
}

impl CopyIn {
    pub(crate) fn new(request: CopyRequest) -> CopyIn {
        CopyIn { request, partial: Vec::new(), batch: Vec::new(), batch_bytes: 0, lines: 0, appended: 0, failed: None }
    }

    /// Reads `bytes`; the batch to append now, if one is full.
    pub(crate) fn feed(&mut self, mut bytes: &[u8]) -> Option<Vec<TopicRecord>> {
        while self.failed.is_none() && !bytes.is_empty() {
            match bytes.iter().position(|b| *b == b'\n') {
                Some(end) => {
                    self.partial.extend_from_slice(&bytes[..end]);
                    bytes = &bytes[end + 1..];
                    let line = std::mem::take(&mut self.partial);
                    self.line(line);
                }
                None => {
                    if self.partial.len() + bytes.len() > COPY_LINE_BYTES_MAX {
                        let message = format!(
                            "line {} is longer than {COPY_LINE_BYTES_MAX} bytes; {} records were appended before it",
                            self.lines + 1,
                            self.appended
                        );
                        self.failed = Some(("54000", message));
                        self.partial = Vec::new();
                        return None;
                    }
                    self.partial.extend_from_slice(bytes);
                    bytes = &[];
                }
            }
        }
        (self.batch_bytes >= COPY_BATCH_BYTES).then(|| self.take_batch())
    }

    /// At the end: the last line (without its newline) and what is batched.
    pub(crate) fn finish(&mut self) -> Vec<TopicRecord> {
        if self.failed.is_none() && !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(line);
        }
        self.take_batch()
    }

    fn take_batch(&mut self) -> Vec<TopicRecord> {
        self.batch_bytes = 0;
        if self.failed.is_some() {
            self.batch.clear();
        }
        std::mem::take(&mut self.batch)
    }

    fn line(&mut self, mut line: Vec<u8>) {
        self.lines += 1;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.is_empty() {
            return; // as `millpond produce`: an empty line is no record
        }
        let key = match &self.request.key_field {
            Some(field) => match key_of(&line, field) {
                Ok(key) => key,
                Err(reason) => {
                    let message =
                        format!("line {}: {reason}; {} records were appended before it", self.lines, self.appended);
                    self.failed = Some(("22P02", message));
                    return;
                }
            },
            None => None,
        };
        self.batch_bytes += line.len();
        self.batch.push(TopicRecord { key, value: Some(line), headers: Vec::new() });
    }
}

/// The key of a JSON line: field `field` as text (strings unquoted).
fn key_of(line: &[u8], field: &str) -> Result<Option<Vec<u8>>, String> {
    let value: serde_json::Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    let object = value.as_object().ok_or("not a JSON object")?;
    Ok(match object.get(field) {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(text)) => Some(text.clone().into_bytes()),
        Some(other) => Some(other.to_string().into_bytes()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(key_field: Option<&str>) -> CopyRequest {
        CopyRequest { topic: "ev".into(), key_field: key_field.map(str::to_owned) }
    }

    #[test]
    fn copy_from_stdin_parses_and_says_what_is_wrong() {
        assert_eq!(parse_copy_from("COPY ev FROM STDIN"), Some(Ok(request(None))));
        assert_eq!(parse_copy_from("copy \"ev\" from stdin with (key_field 'id');"), Some(Ok(request(Some("id")))));
        assert_eq!(
            parse_copy_from("COPY ev FROM STDIN WITH (KEY_FIELD = 'it''s')").unwrap().unwrap().key_field.unwrap(),
            "it's"
        );
        assert!(parse_copy_from("COPY ev FROM '/etc/passwd'").unwrap().unwrap_err().contains("STDIN only"));
        assert!(
            parse_copy_from("COPY ev FROM STDIN WITH (FORMAT csv)").unwrap().unwrap_err().contains("expected COPY")
        );
        assert_eq!(parse_copy_from("COPY (SUBSCRIBE v) TO STDOUT"), None);
        assert_eq!(parse_copy_from("SELECT 1"), None);
    }

    #[test]
    fn lines_split_anywhere_become_the_same_records() {
        let input = b"{\"id\":1,\"v\":\"a\"}\n{\"id\":\"two\"}\r\n{\"v\":3}\n{\"id\":4}";
        for split in [1, 3, 7, input.len()] {
            let mut copy = CopyIn::new(request(Some("id")));
            let mut records = Vec::new();
            for chunk in input.chunks(split) {
                records.extend(copy.feed(chunk).unwrap_or_default());
            }
            records.extend(copy.finish());
            let keys: Vec<Option<&[u8]>> = records.iter().map(|r| r.key.as_deref()).collect();
            assert_eq!(keys, [Some(&b"1"[..]), Some(b"two"), None, Some(b"4")], "split {split}");
            assert_eq!(records[1].value.as_deref(), Some(&b"{\"id\":\"two\"}"[..]), "the \\r goes");
            assert_eq!((copy.lines, copy.failed.is_none()), (4, true));
        }
    }

    #[test]
    fn a_bad_or_endless_line_fails_the_copy_naming_it() {
        let mut copy = CopyIn::new(request(Some("id")));
        assert!(copy.feed(b"{\"id\":1}\nnot json\n{\"id\":3}\n").is_none());
        assert!(copy.finish().is_empty(), "nothing after a failure is appended");
        let (code, message) = copy.failed.clone().unwrap();
        assert_eq!(code, "22P02");
        assert!(message.starts_with("line 2: not JSON"), "{message}");
        let mut endless = CopyIn::new(request(None));
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..=(COPY_LINE_BYTES_MAX >> 20) {
            endless.feed(&chunk);
        }
        assert_eq!(endless.failed.as_ref().map(|f| f.0), Some("54000"));
        assert!(endless.partial.is_empty(), "the line is not kept");
    }
}
