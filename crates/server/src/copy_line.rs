//! COPY text lines of a view's changes, encoded straight from the
//! changelog's JSON text: the hot path of every subscriber stream (a hub
//! encodes each change once for all its subscribers, an own reader for
//! one). No JSON tree is built per change: the row's fields are found as
//! borrowed slices of the text, and each is written by its first byte.
//!
//! Invariant: [`LinesBuilder::push_change`] writes byte for byte what
//! [`crate::subscribe::line`] writes for the same change parsed into a tree
//! (tested below against it on rows of every JSON shape). A row the fast
//! path does not take (not an object, an escaped key, a nested value) goes
//! through the tree.

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use millpond_dataflow::json_check::Checked;
use millpond_dataflow::{Epoch, Event};
use millpond_sql::Type;
use serde::de::{DeserializeSeed, Error as _, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::flat_row::{self, is_plain_integer};
use crate::subscribe::line;

/// COPY text lines being written into one buffer (see `fanout::Lines`).
#[derive(Debug, Default)]
pub(crate) struct LinesBuilder {
    buf: BytesMut,
    ends: Vec<u32>,
}

impl LinesBuilder {
    /// Appends the line of one change: `mp_epoch`, `mp_progressed` (when
    /// `flagged`), `mp_diff`, then the view's `columns` from `row`. Its one
    /// pass over `row` is also its check: a row that a parse into a tree
    /// refuses is refused with that parse's error, and nothing is appended.
    pub(crate) fn push_change(
        &mut self,
        epoch: Epoch,
        diff: i64,
        row: &str,
        columns: &[(String, Type)],
        flagged: bool,
    ) -> Result<(), serde_json::Error> {
        let start = self.buf.len();
        self.buf.extend_from_slice(itoa::Buffer::new().format(epoch).as_bytes());
        if flagged {
            self.buf.extend_from_slice(b"\tf");
        }
        if encode_fields(&mut self.buf, diff, row, columns) {
            self.end_line();
            return Ok(());
        }
        // Not a flat row object, or not JSON: the tree says which.
        self.buf.truncate(start);
        let row = serde_json::from_str(row)?;
        let text = line(&Event::Change { epoch, diff, row }, columns, flagged).expect("a change has a line");
        self.push_line(text.as_bytes());
        Ok(())
    }

    /// Appends a line of `epoch` (its first field) with `mp_progressed`
    /// (`f`) before `rest` (the tab-led fields after it and the newline).
    pub(crate) fn push_flagged(&mut self, epoch: &[u8], rest: &[u8]) {
        debug_assert!(rest.starts_with(b"\t") && rest.ends_with(b"\n"), "fields after mp_epoch");
        self.buf.extend_from_slice(epoch);
        self.buf.extend_from_slice(b"\tf");
        self.buf.extend_from_slice(rest);
        self.end_line();
    }

    /// Appends a line already encoded (ending in a newline).
    pub(crate) fn push_line(&mut self, line: &[u8]) {
        debug_assert!(line.ends_with(b"\n"), "a COPY line ends in a newline");
        self.buf.extend_from_slice(line);
        self.end_line();
    }

    fn end_line(&mut self) {
        self.ends.push(u32::try_from(self.buf.len()).expect("an entry's lines stay far below 4 GiB"));
    }

    /// Lines written so far.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes written so far.
    pub(crate) fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// The buffer and the end of each line in it. A buffer that grew well
    /// past what it holds is copied to its size, so that what a ring counts
    /// (the lines' bytes) is about what it keeps allocated.
    pub(crate) fn finish(mut self) -> (Bytes, Vec<u32>) {
        let buf = if self.buf.capacity() > self.buf.len() + self.buf.len() / 4 {
            Bytes::copy_from_slice(&self.buf)
        } else {
            self.buf.freeze()
        };
        self.ends.shrink_to_fit();
        (buf, self.ends)
    }
}

/// Writes `\t diff`, then `\t field` per column and the newline; false
/// (with `out` in any state) when the row needs the tree. Never true for a
/// row the tree refuses: the values it writes are parsed strictly, the ones
/// it skips checked ([`Checked`]), and a duplicate key sends it to the tree.
fn encode_fields(out: &mut BytesMut, diff: i64, row: &str, columns: &[(String, Type)]) -> bool {
    if let Some(slots) = flat_row::scan(row, columns) {
        return encode_slots(out, diff, slots.into_iter(), columns);
    }
    let mut deserializer = serde_json::Deserializer::from_str(row);
    let Ok(slots) = (Slots { columns, slots: vec![None; columns.len()] }).deserialize(&mut deserializer) else {
        return false;
    };
    if deserializer.end().is_err() {
        return false;
    }
    encode_slots(out, diff, slots.into_iter().map(|slot| slot.map(RawValue::get)), columns)
}

/// Writes `\t diff`, then `\t field` per column (each value the text of
/// one JSON value, syntax checked) and the newline; false for a value
/// [`encode_field`] does not take.
fn encode_slots<'r>(
    out: &mut BytesMut,
    diff: i64,
    slots: impl Iterator<Item = Option<&'r str>>,
    columns: &[(String, Type)],
) -> bool {
    out.put_u8(b'\t');
    out.extend_from_slice(itoa::Buffer::new().format(diff).as_bytes());
    for (slot, (_, ty)) in slots.zip(columns) {
        out.put_u8(b'\t');
        if !encode_field(out, slot, ty) {
            return false;
        }
    }
    out.put_u8(b'\n');
    true
}

/// One field as `text_of_as` + `copy_field` write it, from the text of
/// one syntax-checked JSON value; false for a nested value.
fn encode_field(out: &mut BytesMut, value: Option<&str>, ty: &Type) -> bool {
    let Some(text) = value else {
        out.extend_from_slice(b"\\N");
        return true;
    };
    if let Type::Decimal { scale, .. } = ty {
        return encode_decimal(out, text, *scale);
    }
    match text.as_bytes().first() {
        Some(b'n') => out.extend_from_slice(b"\\N"),
        Some(b't') => out.put_u8(b't'),
        Some(b'f') => out.put_u8(b'f'),
        // Checked syntax without a backslash: no control character and no
        // escape, so the text between the quotes is the value, and COPY
        // escapes nothing in it.
        Some(b'"') if !text.contains('\\') => out.extend_from_slice(&text.as_bytes()[1..text.len() - 1]),
        Some(b'"') => match serde_json::from_str::<String>(text) {
            Ok(unescaped) => escape(out, &unescaped),
            Err(_) => return false,
        },
        Some(b'-' | b'0'..=b'9') if is_plain_integer(text) => out.extend_from_slice(text.as_bytes()),
        Some(b'-' | b'0'..=b'9') => match serde_json::from_str::<serde_json::Number>(text) {
            Ok(number) => out.extend_from_slice(number.to_string().as_bytes()),
            Err(_) => return false,
        },
        _ => return false,
    }
    true
}

/// A decimal column's field (a JSON string as views write decimals, or a
/// number) at the column's scale; false for anything else.
fn encode_decimal(out: &mut BytesMut, text: &str, scale: u8) -> bool {
    let number: std::borrow::Cow<'_, str> = match text.as_bytes().first() {
        Some(b'"') => match serde_json::from_str::<&str>(text) {
            Ok(plain) => plain.into(),
            Err(_) => match serde_json::from_str::<String>(text) {
                Ok(unescaped) => unescaped.into(),
                Err(_) => return false,
            },
        },
        Some(b'-' | b'0'..=b'9') if is_plain_integer(text) => text.into(),
        Some(b'-' | b'0'..=b'9') => match serde_json::from_str::<serde_json::Number>(text) {
            Ok(number) => number.to_string().into(),
            Err(_) => return false,
        },
        Some(b'n') => {
            out.extend_from_slice(b"\\N");
            return true;
        }
        _ => return false,
    };
    escape(out, &millpond_sql::decimal_text_at_scale(&number, scale));
    true
}

/// COPY's text escaping: backslash, tab, newline and carriage return
/// (runs without them copied whole).
fn escape(out: &mut BytesMut, text: &str) {
    let bytes = text.as_bytes();
    let mut from = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        let escaped: &[u8] = match byte {
            b'\\' => b"\\\\",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            _ => continue,
        };
        out.extend_from_slice(&bytes[from..at]);
        out.extend_from_slice(escaped);
        from = at + 1;
    }
    out.extend_from_slice(&bytes[from..]);
}

/// Finds each column's value in a row object, as borrowed JSON text.
struct Slots<'c, 'de> {
    columns: &'c [(String, Type)],
    slots: Vec<Option<&'de RawValue>>,
}

impl<'de> DeserializeSeed<'de> for Slots<'_, 'de> {
    type Value = Vec<Option<&'de RawValue>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Slots<'_, 'de> {
    type Value = Vec<Option<&'de RawValue>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a row object")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Self::Value, A::Error> {
        // A key with escapes cannot be borrowed: the caller takes the tree.
        while let Some(key) = map.next_key::<&'de str>()? {
            match self.columns.iter().position(|(name, _)| name == key) {
                // The last of duplicate keys wins in the tree, whose parse
                // checks the first: the tree takes such a row.
                Some(at) if self.slots[at].is_some() => return Err(A::Error::custom("a duplicate key")),
                Some(at) => self.slots[at] = Some(map.next_value::<&'de RawValue>()?),
                None => {
                    map.next_value::<Checked>()?;
                }
            }
        }
        Ok(self.slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns(names: &[&str]) -> Vec<(String, Type)> {
        names.iter().map(|n| ((*n).to_owned(), Type::Text)).collect()
    }

    fn both(row: &str, columns: &[(String, Type)], flagged: bool) -> (String, String) {
        let mut builder = LinesBuilder::default();
        builder.push_change(7, -2, row, columns, flagged).unwrap();
        let (buf, ends) = builder.finish();
        assert_eq!(ends, vec![buf.len() as u32]);
        let event = Event::Change { epoch: 7, diff: -2, row: serde_json::from_str(row).unwrap() };
        (String::from_utf8(buf.to_vec()).unwrap(), line(&event, columns, flagged).unwrap())
    }

    #[test]
    fn the_fast_line_is_the_trees_line_for_every_json_shape() {
        let columns = columns(&["a", "b", "c"]);
        let rows = [
            r#"{"a":1,"b":"x","c":null}"#,
            r#"{"a":-0,"b":"tab\there","c":true}"#,
            r#"{"a":-12,"b":"new\nline\\ and \r","c":false}"#,
            r#"{"a":1.5,"b":"\u00e9\u4e2d\ud83d\ude00","c":1e300}"#,
            r#"{"a":007,"b":"","c":-0.0}"#,
            r#"{"a":123456789012345678901234,"b":"q\"uote","c":2.50}"#,
            r#"{"c":3,"a":4}"#,
            r#"{"a":[1,"two",{"x":null}],"b":{"k":"v\tw"},"c":"é"}"#,
            r#"{"a\u0062":1,"b":2,"c":3}"#,
            r#"{"a":1,"a":2,"zz":{"deep":[1]}}"#,
            r#"{}"#,
            r#"[1,2,3]"#,
            r#""a scalar row""#,
            r#"9223372036854775807"#,
            r#" {"a" : 1 , "b" : "spaced" } "#,
        ];
        for row in rows {
            for flagged in [false, true] {
                // `007` is not JSON: skip rows the parser refuses.
                if serde_json::from_str::<serde_json::Value>(row).is_err() {
                    continue;
                }
                let (fast, tree) = both(row, &columns, flagged);
                assert_eq!(fast, tree, "row {row}, flagged {flagged}");
            }
        }
    }

    /// The hub's rows come unchecked: a line is written exactly when a parse
    /// into a tree takes the row, and then it is the tree's line.
    #[test]
    fn a_line_is_written_for_exactly_the_rows_a_tree_takes() {
        let columns = columns(&["a", "b"]);
        let rows = [
            r#"{"a":1,"b":"x"}"#,
            r#"{"a":"\ud800","b":1}"#,
            r#"{"a":1e400,"b":1}"#,
            r#"{"a":1,"zz":1e400}"#,
            r#"{"a":1,"zz":"\ud800"}"#,
            r#"{"a":1,"zz":"\ud83d\ude00","yy":[1e300,{"x":-0}]}"#,
            r#"{"a":1,"zz":[1,{"x":"\udc00"}]}"#,
            r#"{"a":1e400,"a":2}"#,
            r#"{"a":"\ud800","a":"ok"}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"a":123456789012345678901234567890}"#,
            r#"{"a":-1e400}"#,
            r#"{"a":1e-400,"b":-0.0}"#,
            r#"{"a":1,}"#,
            r#"{"a":01}"#,
            "{\"a\":\"tab\traw\"}",
            r#"{"a":1} {"b":2}"#,
            r#"{"a":1"#,
            r#""#,
            r#"nul"#,
            r#"{"a":"\x"}"#,
            r#"{"\ud800":1}"#,
            r#"[1e400]"#,
            r#"  {"a" : true , "b" : null }  "#,
        ];
        for row in rows {
            let tree = serde_json::from_str::<serde_json::Value>(row);
            let mut builder = LinesBuilder::default();
            builder.push_line(b"before\n");
            let fast = builder.push_change(7, -2, row, &columns, false);
            assert_eq!(fast.is_ok(), tree.is_ok(), "row {row}: {fast:?} / {tree:?}");
            let (buf, ends) = builder.finish();
            match tree {
                Ok(tree) => {
                    let want = line(&Event::Change { epoch: 7, diff: -2, row: tree }, &columns, false).unwrap();
                    assert_eq!(&buf[7..], want.as_bytes(), "row {row}");
                    assert_eq!(ends, [7, buf.len() as u32]);
                }
                Err(_) => assert_eq!((&buf[..], ends), (&b"before\n"[..], vec![7]), "row {row}: nothing appended"),
            }
        }
    }

    /// Generated rows, flat and not, valid and not, against the tree: the
    /// same acceptance and the same line (`flat_row`'s invariant), with
    /// the flat scan taking a good part of them.
    #[test]
    fn generated_rows_write_the_trees_line_whichever_path_takes_them() {
        let columns = vec![
            ("a".to_owned(), Type::Text),
            ("b".to_owned(), Type::Int),
            ("c".to_owned(), Type::Decimal { precision: 10, scale: 2 }),
        ];
        let keys = [r#""a""#, r#""b""#, r#""c""#, r#""zz""#, r#""a\u0062""#, r#""é""#, r#""""#];
        let values = [
            "0",
            "-7",
            "42",
            "123456789012345678",
            "1234567890123456789",
            "-0",
            "01",
            "1.5",
            "1e3",
            "1e400",
            "-",
            r#""x""#,
            r#""""#,
            "\"tab\traw\"",
            r#""q\"uote""#,
            r#""\u00e9""#,
            r#""é中""#,
            r#""\ud800""#,
            "true",
            "false",
            "null",
            "tru",
            "nul",
            "[1,2]",
            r#"{"x":1}"#,
            r#""a\\b""#,
            r#""\n""#,
            r#""2.5""#,
            "\"\u{7f}\"",
        ];
        let spaces = ["", "", "", " ", "\n", "\t ", "\r"];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let (mut flat, mut accepted) = (0, 0);
        for _ in 0..20_000 {
            let mut row = String::from(spaces[next(spaces.len())]);
            row.push('{');
            for at in 0..next(5) {
                if at > 0 {
                    row.push(',');
                }
                row.push_str(spaces[next(spaces.len())]);
                row.push_str(keys[next(keys.len())]);
                row.push_str(spaces[next(spaces.len())]);
                row.push(':');
                row.push_str(spaces[next(spaces.len())]);
                row.push_str(values[next(values.len())]);
                row.push_str(spaces[next(spaces.len())]);
            }
            row.push_str(["}", "}", "}", "}", ",}", "} x", "}}", ""][next(8)]);
            row.push_str(spaces[next(spaces.len())]);
            let tree = serde_json::from_str::<serde_json::Value>(&row);
            if flat_row::scan(&row, &columns).is_some() {
                assert!(tree.is_ok(), "the flat scan took a row the tree refuses: {row:?}");
                flat += 1;
            }
            let mut builder = LinesBuilder::default();
            let fast = builder.push_change(9, 1, &row, &columns, false);
            assert_eq!(fast.is_ok(), tree.is_ok(), "row {row:?}: {fast:?} / {tree:?}");
            if let Ok(tree) = tree {
                accepted += 1;
                let want = line(&Event::Change { epoch: 9, diff: 1, row: tree }, &columns, false).unwrap();
                let (buf, _) = builder.finish();
                assert_eq!(String::from_utf8(buf.to_vec()).unwrap(), want, "row {row:?}");
            }
        }
        assert!(flat > 1_000 && accepted > flat + 1_000, "flat {flat}, accepted {accepted}: both paths exercised");
    }

    #[test]
    fn a_decimal_column_prints_at_its_scale_in_both_paths() {
        let columns = vec![
            ("a".to_owned(), Type::Decimal { precision: 10, scale: 2 }),
            ("b".to_owned(), Type::Decimal { precision: 10, scale: 0 }),
            ("c".to_owned(), Type::Decimal { precision: 38, scale: 3 }),
        ];
        let rows = [
            (r#"{"a":"0.1","b":"7","c":"-12.5"}"#, "7\t-2\t0.10\t7\t-12.500\n"),
            (r#"{"a":"2","b":"1.5","c":null}"#, "7\t-2\t2.00\t1.5\t\\N\n"),
            (r#"{"a":3,"b":"0.0625","c":1.25}"#, "7\t-2\t3.00\t0.0625\t1.250\n"),
            (r#"{"a":"0.0625"}"#, "7\t-2\t0.0625\t\\N\t\\N\n"),
            (r#"{"a":"x","b":[1],"c":{"d":1}}"#, "7\t-2\tx\t[1]\t{\"d\":1}\n"),
        ];
        for (row, want) in rows {
            let (fast, tree) = both(row, &columns, false);
            assert_eq!(fast, tree, "row {row}");
            assert_eq!(fast, want, "row {row}");
        }
    }

    #[test]
    fn lines_share_one_buffer_and_end_where_each_ends() {
        let columns = columns(&["k"]);
        let mut builder = LinesBuilder::default();
        for k in 0..3 {
            builder.push_change(1, 1, &format!(r#"{{"k":{k}}}"#), &columns, false).unwrap();
        }
        builder.push_line(b"2\tt\t\\N\t\\N\n");
        let (buf, ends) = builder.finish();
        assert_eq!(&buf[..], b"1\t1\t0\n1\t1\t1\n1\t1\t2\n2\tt\t\\N\t\\N\n");
        assert_eq!(ends, vec![6, 12, 18, 28]);
    }
}
