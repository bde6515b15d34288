//! Decoding a source record's JSON value into a row of declared types.
//!
//! A record is one JSON object in UTF-8 (RFC 8259: bytes that are not
//! UTF-8, anywhere in it, fail it). A missing field is NULL; a field of the
//! wrong type fails the record (it goes to the source's dead-letter topic,
//! with this message and its offset); fields not declared are ignored.
//!
//! Invariant: the verdict on a record (accepted, or the error) depends on
//! the declared columns only, never on which of them a view reads: every
//! declared column is validated, by the same rules, but only the columns
//! the view reads are kept (the others are NULL, and a TEXT value that is
//! not kept is never copied). So all the views of a source agree on which
//! records are its dead letters.
//!
//! JSON conventions: a TIMESTAMP is an ISO 8601 string or a number of
//! milliseconds since 1970-01-01; a DATE is a "YYYY-MM-DD" string; an
//! INTERVAL a string such as "10 seconds" or a number of milliseconds; a
//! DECIMAL a number or a numeric string, both read exactly from their
//! digits (never through a binary floating point).
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use crate::time;
use crate::value::{Row, Type, Value, cast, parse_decimal};

/// Decodes `json` (an object) into a row of `columns`; `wanted[i]` says
/// whether column `i` is kept (every column is validated).
pub(crate) fn decode_row(json: &[u8], columns: &[(String, Type)], wanted: &[bool]) -> Result<Row, String> {
    let mut row = Row::new();
    decode_row_into(json, columns, wanted, &mut row)?;
    Ok(row)
}

/// A record's row: with `stamped`, the last column is the record's
/// timestamp (`INCLUDE TIMESTAMP`) and the others come from its value;
/// otherwise every column does.
pub(crate) fn decode_record(
    value: &[u8],
    timestamp_ms: i64,
    columns: &[(String, Type)],
    wanted: &[bool],
    stamped: bool,
) -> Result<Row, String> {
    let mut row = Row::new();
    decode_record_into(value, timestamp_ms, columns, wanted, stamped, &mut row)?;
    Ok(row)
}

/// [`decode_record`] into a row the caller reuses.
pub(crate) fn decode_record_into(
    value: &[u8],
    timestamp_ms: i64,
    columns: &[(String, Type)],
    wanted: &[bool],
    stamped: bool,
    row: &mut Row,
) -> Result<(), String> {
    if !stamped {
        return decode_row_into(value, columns, wanted, row);
    }
    let last = columns.len() - 1;
    decode_row_into(value, &columns[..last], &wanted[..last], row)?;
    let micros = timestamp_ms.saturating_mul(crate::time::MICROS_PER_SECOND / 1000);
    row.push(if wanted[last] { Value::Timestamp(micros) } else { Value::Null });
    Ok(())
}

/// [`decode_row`] into a row the caller reuses (no allocation per record).
pub(crate) fn decode_row_into(
    json: &[u8],
    columns: &[(String, Type)],
    wanted: &[bool],
    row: &mut Row,
) -> Result<(), String> {
    row.clear();
    row.resize(columns.len(), Value::Null);
    // Checked once for the whole record (cheaper than string by string).
    let json = std::str::from_utf8(json).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut deserializer = serde_json::Deserializer::from_str(json);
    RowSeed { columns, wanted, row }.deserialize(&mut deserializer).map_err(|e| e.to_string())?;
    deserializer.end().map_err(|e| e.to_string())
}

struct RowSeed<'a> {
    columns: &'a [(String, Type)],
    wanted: &'a [bool],
    /// Holds one NULL per column on entry.
    row: &'a mut Row,
}

impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let row = self.row;
        // Fields usually come in the declared order: try the next column first.
        let mut guess = 0;
        while let Some(index) = map.next_key_seed(KeySeed { columns: self.columns, guess })? {
            match index {
                Some(i) => {
                    guess = i + 1;
                    let (name, ty) = &self.columns[i];
                    let keep = self.wanted.get(i).copied().unwrap_or(true);
                    let value = map
                        .next_value_seed(ValueSeed { ty: *ty, keep })
                        .map_err(|e| de::Error::custom(format!("column \"{name}\": {e}")))?;
                    if keep {
                        row[i] = value;
                    }
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// Finds a field's column without allocating the key, trying column
/// `guess` first.
struct KeySeed<'a> {
    columns: &'a [(String, Type)],
    guess: usize,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Option<usize>;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeySeed<'_> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        if self.columns.get(self.guess).is_some_and(|(name, _)| name == key) {
            return Ok(Some(self.guess));
        }
        Ok(self.columns.iter().position(|(name, _)| name == key))
    }
}

/// Reads one field as a value of `ty`; a value not kept is validated by
/// the same rules and returned as NULL (a TEXT is then never copied).
struct ValueSeed {
    ty: Type,
    keep: bool,
}

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        if let Type::Decimal { .. } = self.ty {
            // The number's own text: through an f64, 1234567890123.456789 would lose digits.
            let raw = <&serde_json::value::RawValue>::deserialize(deserializer)?;
            return self.decimal(raw.get());
        }
        deserializer.deserialize_any(self)
    }
}

impl ValueSeed {
    fn wrong<E: de::Error>(&self, found: impl fmt::Display) -> E {
        E::custom(format!("expected {}, found {found}", self.ty))
    }

    /// A DECIMAL from a JSON value's text (valid JSON: the parser checked it).
    fn decimal<E: de::Error>(self, json: &str) -> Result<Value, E> {
        match json.as_bytes().first() {
            Some(b'-' | b'0'..=b'9') => parse_decimal(json)
                .and_then(|units| cast(&Value::Decimal(units.into()), self.ty))
                .ok_or_else(|| self.wrong(format_args!("{}, out of range", shown(json)))),
            Some(b'"') => {
                let text: std::borrow::Cow<'_, str> = serde_json::from_str(json).map_err(E::custom)?;
                self.visit_str(&text)
            }
            Some(b'n') => Ok(Value::Null),
            Some(b't' | b'f') => Err(self.wrong(format_args!("boolean {json}"))),
            Some(b'[') => Err(self.wrong("an array")),
            _ => Err(self.wrong("an object")),
        }
    }
}

/// At most 40 characters of a value, for an error.
fn shown(text: &str) -> String {
    text.chars().take(40).collect()
}

impl<'de> Visitor<'de> for ValueSeed {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {} value", self.ty)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        match self.ty {
            Type::Bool => Ok(Value::Bool(b)),
            _ => Err(self.wrong(format_args!("boolean {b}"))),
        }
    }
    fn visit_i64<E: de::Error>(self, i: i64) -> Result<Value, E> {
        match self.ty {
            Type::Int => Ok(Value::Int(i)),
            Type::Double => Ok(Value::double(i as f64)),
            Type::Timestamp => {
                i.checked_mul(1000).map(Value::Timestamp).ok_or_else(|| self.wrong(format_args!("{i}, out of range")))
            }
            Type::Interval => {
                i.checked_mul(1000).map(Value::Interval).ok_or_else(|| self.wrong(format_args!("{i}, out of range")))
            }
            _ => Err(self.wrong(format_args!("number {i}"))),
        }
    }
    fn visit_u64<E: de::Error>(self, u: u64) -> Result<Value, E> {
        match i64::try_from(u) {
            Ok(i) => self.visit_i64(i),
            Err(_) if self.ty == Type::Double => Ok(Value::double(u as f64)),
            Err(_) => Err(self.wrong(format_args!("{u}, out of range"))),
        }
    }
    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Value, E> {
        match self.ty {
            Type::Double => Ok(Value::double(x)),
            // An integer column accepts 12.0, not 12.5.
            Type::Int if x.fract() == 0.0 && x.abs() < 9.2e18 => Ok(Value::Int(x as i64)),
            _ => Err(self.wrong(format_args!("number {x}"))),
        }
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        let parsed = match self.ty {
            Type::Text if !self.keep => Some(Value::Null),
            Type::Text => Some(Value::Text(s.into())),
            Type::Timestamp => time::parse_timestamp(s).map(Value::Timestamp),
            Type::Date => time::parse_date(s).map(Value::Date),
            Type::Interval => time::parse_interval(s).map(Value::Interval),
            Type::Decimal { .. } => parse_decimal(s).and_then(|units| cast(&Value::Decimal(units.into()), self.ty)),
            _ => None,
        };
        parsed.ok_or_else(|| self.wrong(format_args!("string \"{}\"", shown(s))))
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Value, A::Error> {
        Err(self.wrong("an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Value, A::Error> {
        Err(self.wrong("an object"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn columns() -> Vec<(String, Type)> {
        vec![("id".into(), Type::Int), ("name".into(), Type::Text), ("at".into(), Type::Timestamp)]
    }

    #[test]
    fn decodes_declared_fields_and_skips_others() {
        let row =
            decode_row(br#"{"id": 7, "extra": [1, {"x": 2}], "at": "2024-01-01 00:00:01"}"#, &columns(), &[true; 3])
                .unwrap();
        assert_eq!(row[0], Value::Int(7));
        assert_eq!(row[1], Value::Null);
        assert_eq!(row[2], Value::Timestamp(time::parse_timestamp("2024-01-01 00:00:01").unwrap()));
        let row = decode_row(br#"{"id": 7, "name": "x"}"#, &columns(), &[true, false, true]).unwrap();
        assert_eq!(row[1], Value::Null, "an unread column is not decoded");
    }

    #[test]
    fn an_unread_column_is_validated_with_the_same_verdict() {
        for json in [&br#"{"id": 1, "name": 5}"#[..], br#"{"at": "noon", "name": "x"}"#, br#"{"name": "x\u00e9"}"#] {
            let read = decode_row(json, &columns(), &[true; 3]).map(|_| ());
            for wanted in [[true, false, true], [false, false, false], [false, true, false]] {
                assert_eq!(decode_row(json, &columns(), &wanted).map(|_| ()), read, "{wanted:?}");
            }
        }
        // Bytes that are not UTF-8 fail the record, in any field.
        for json in [&b"{\"name\": \"\xff\"}"[..], b"{\"other\": \"\xc3\"}"] {
            let error = decode_row(json, &columns(), &[false; 3]).unwrap_err();
            assert!(error.starts_with("not UTF-8"), "{error}");
        }
        let error = decode_row(br#"{"id": 1, "name": 5}"#, &columns(), &[true, false, false]).unwrap_err();
        assert!(error.contains("column \"name\": expected TEXT, found number 5"), "{error}");
    }

    #[test]
    fn wrong_types_fail_with_the_column_name() {
        let error = decode_row(br#"{"id": "seven"}"#, &columns(), &[true; 3]).unwrap_err();
        assert!(error.contains("column \"id\": expected BIGINT, found string \"seven\""), "{error}");
        assert!(decode_row(b"[1, 2]", &columns(), &[true; 3]).is_err());
        assert!(decode_row(b"{\"id\": 1} trailing", &columns(), &[true; 3]).is_err());
        assert!(decode_row(br#"{"id": 1.5}"#, &columns(), &[true; 3]).is_err());
    }

    #[test]
    fn decimals_read_exactly_from_numbers_and_strings() {
        let columns = vec![("d".to_owned(), Type::Decimal { precision: 38, scale: 6 })];
        let decode = |json: &str| decode_row(json.as_bytes(), &columns, &[true]).map(|row| row[0].to_string());
        // Through an f64 this was 1234567890123.456768.
        assert_eq!(decode(r#"{"d": 1234567890123.456789}"#).unwrap(), "1234567890123.456789");
        assert_eq!(decode(r#"{"d": "1234567890123.456789"}"#).unwrap(), "1234567890123.456789");
        assert_eq!(decode(r#"{"d": 1.5e3}"#).unwrap(), "1500");
        assert_eq!(decode(r#"{"d": -12}"#).unwrap(), "-12");
        assert_eq!(decode(r#"{"d": null}"#).unwrap(), "NULL");
        // Up to 10^32 - 10^-6, from a number and from a string (was: about 1.7e26).
        let max = "99999999999999999999999999999999.999999";
        assert_eq!(decode(&format!(r#"{{"d": {max}}}"#)).unwrap(), max);
        assert_eq!(decode(&format!(r#"{{"d": "-{max}"}}"#)).unwrap(), format!("-{max}"));
        let error = decode(r#"{"d": 100000000000000000000000000000000}"#).unwrap_err();
        assert!(error.contains("column \"d\": expected DECIMAL") && error.contains("out of range"), "{error}");
        assert!(decode(r#"{"d": true}"#).unwrap_err().contains("found boolean true"));
        assert!(decode(r#"{"d": [1]}"#).unwrap_err().contains("found an array"));
        assert!(decode(r#"{"d": {"x": 1}}"#).unwrap_err().contains("found an object"));
        let columns = vec![("d".to_owned(), Type::Decimal { precision: 10, scale: 2 })];
        let decode = |json: &str| decode_row(json.as_bytes(), &columns, &[true]).map(|row| row[0].to_string());
        assert_eq!(decode(r#"{"d": 12345678.125}"#).unwrap(), "12345678.13");
        assert!(decode(r#"{"d": 123456789.5}"#).is_err());
    }
}
