//! Cells: Millpond's values in Postgres's wire formats (text and binary),
//! and bound parameters read back into SQL literals.
//!
//! Invariants:
//! - A column's Postgres type follows from its SQL type alone
//!   ([`pg_type`]), and a value is encoded in the format its column was
//!   described with; both formats of a value say the same thing.
//! - A parameter becomes a literal of its type that the binder reads back
//!   as the same value (quoted text, parenthesized negatives, typed
//!   timestamps): a parameter can never change the shape of the statement.
//!   One that does not read as its type is an error naming it (22P02).

use bytes::{BufMut, BytesMut};
use millpond_sql::Value;
use pgwire::api::Type;
use pgwire::messages::data::DataRow;

/// Microseconds from the Unix epoch to Postgres's (2000-01-01).
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
/// Days from the Unix epoch to Postgres's.
const PG_EPOCH_DAYS: i32 = 10_957;

/// The Postgres type of a column of SQL type `ty`.
pub(crate) fn pg_type(ty: &millpond_sql::Type) -> Type {
    use millpond_sql::Type as T;
    match ty {
        T::Bool => Type::BOOL,
        T::Int => Type::INT8,
        T::Double => Type::FLOAT8,
        T::Decimal { .. } => Type::NUMERIC,
        // A column of NULL literals only: Postgres calls it text too.
        T::Text | T::Null => Type::TEXT,
        T::Timestamp => Type::TIMESTAMP,
        T::Date => Type::DATE,
        T::Interval => Type::INTERVAL,
    }
}

/// A value of a column of type `ty` in Postgres's text format (None: NULL).
/// A `DECIMAL(p, s)` value has `s` fractional digits at least, as in
/// Postgres (`2.50`, not `2.5`).
pub(crate) fn text(value: &Value, ty: &millpond_sql::Type) -> Option<String> {
    match value {
        Value::Null => None,
        Value::Decimal(_) => Some(decimal_text(value, ty)),
        Value::Bool(b) => Some(if *b { "t" } else { "f" }.to_owned()),
        Value::Double(d) => Some(float_text(d.0)),
        other => Some(other.to_string()),
    }
}

/// A DOUBLE as Postgres prints a float8: shortest round-trip digits, an
/// exponent (two digits at least) below 1e-4 and from 1e15.
fn float_text(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if x != 0.0 && (x.abs() >= 1e15 || x.abs() < 1e-4) {
        let formatted = format!("{x:e}");
        let (mantissa, exponent) = formatted.split_once('e').expect("{:e} has an exponent");
        let (sign, digits) = exponent.strip_prefix('-').map_or(("+", exponent), |d| ("-", d));
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    x.to_string()
}

/// A decimal's text at its column's scale (see [`text`]).
fn decimal_text(value: &Value, ty: &millpond_sql::Type) -> String {
    let text = value.to_string();
    match ty {
        millpond_sql::Type::Decimal { scale, .. } => millpond_sql::decimal_text_at_scale(&text, *scale).into_owned(),
        _ => text,
    }
}

/// A value of a column of type `ty` in Postgres's binary format (None:
/// NULL); a decimal's display scale is its column's, as in [`text`].
pub(crate) fn binary(value: &Value, ty: &millpond_sql::Type) -> Option<Vec<u8>> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => vec![u8::from(*b)],
        Value::Int(i) => i.to_be_bytes().to_vec(),
        Value::Double(d) => d.0.to_be_bytes().to_vec(),
        Value::Text(s) => s.as_bytes().to_vec(),
        Value::Timestamp(micros) => micros.saturating_sub(PG_EPOCH_MICROS).to_be_bytes().to_vec(),
        Value::Date(days) => days.saturating_sub(PG_EPOCH_DAYS).to_be_bytes().to_vec(),
        Value::Interval(micros) => {
            let mut out = micros.to_be_bytes().to_vec();
            out.extend_from_slice(&[0; 8]); // days and months: all of it is in the microseconds
            out
        }
        Value::Decimal(_) => numeric_binary(&decimal_text(value, ty)),
    })
}

/// A decimal's text (`-12.5`) as Postgres's binary NUMERIC: base-10000
/// digit groups around the decimal point, with weight, sign and scale.
fn numeric_binary(text: &str) -> Vec<u8> {
    let (negative, digits) = text.strip_prefix('-').map_or((false, text), |d| (true, d));
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let whole = whole.trim_start_matches('0');
    let pad_left = (4 - whole.len() % 4) % 4;
    let pad_right = (4 - fraction.len() % 4) % 4;
    let padded = format!("{}{whole}{fraction}{}", "0".repeat(pad_left), "0".repeat(pad_right));
    let mut groups: Vec<i16> =
        padded.as_bytes().chunks(4).map(|c| std::str::from_utf8(c).unwrap_or("0").parse().unwrap_or(0)).collect();
    let mut weight = ((pad_left + whole.len()) / 4) as i16 - 1;
    while groups.first() == Some(&0) {
        groups.remove(0);
        weight -= 1;
    }
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    let mut out = Vec::with_capacity(8 + 2 * groups.len());
    out.extend_from_slice(&(groups.len() as i16).to_be_bytes());
    out.extend_from_slice(&weight.to_be_bytes());
    out.extend_from_slice(&(if negative && !groups.is_empty() { 0x4000u16 } else { 0 }).to_be_bytes());
    out.extend_from_slice(&(fraction.len() as u16).to_be_bytes());
    for group in groups {
        out.extend_from_slice(&group.to_be_bytes());
    }
    out
}

/// A DataRow of `values`, column `i` in binary when `binary(i)`.
pub(crate) fn data_row(
    values: &[Value],
    columns: &[(String, millpond_sql::Type)],
    is_binary: impl Fn(usize) -> bool,
) -> DataRow {
    assert_eq!(values.len(), columns.len(), "a row has a value per column");
    let mut data = BytesMut::with_capacity(16 * values.len());
    for (i, (value, (_, ty))) in values.iter().zip(columns).enumerate() {
        let bytes = if is_binary(i) { binary(value, ty) } else { text(value, ty).map(String::into_bytes) };
        match bytes {
            Some(bytes) => {
                data.put_i32(bytes.len() as i32);
                data.put_slice(&bytes);
            }
            None => data.put_i32(-1),
        }
    }
    DataRow::new(data, values.len() as i16)
}

/// Why a parameter was refused: its SQLSTATE and message.
pub(crate) type ParameterError = (&'static str, String);

/// Parameter `$index` (1-based) of type `ty` as an SQL literal, from its
/// bytes in the text or binary format (None: NULL).
pub(crate) fn literal(index: usize, ty: &Type, binary: bool, bytes: Option<&[u8]>) -> Result<String, ParameterError> {
    let Some(bytes) = bytes else { return Ok("NULL".to_owned()) };
    let bad = |what: &str| ("22P02", format!("parameter ${index} is not a valid {}: {what}", ty.name()));
    if binary {
        return binary_literal(ty, bytes).ok_or_else(|| bad(&format!("{} bytes in the binary format", bytes.len())));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8"))?;
    let number = |text: &str| -> Result<String, ParameterError> {
        let text = text.trim();
        let plain = text.strip_prefix('-').unwrap_or(text);
        let ok = !plain.is_empty()
            && plain.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
            && plain.starts_with(|c: char| c.is_ascii_digit() || c == '.');
        if !ok {
            return Err(bad(text));
        }
        Ok(if text.starts_with('-') { format!("({text})") } else { text.to_owned() })
    };
    match *ty {
        Type::INT2 | Type::INT4 | Type::INT8 | Type::OID => {
            text.trim().parse::<i64>().map_err(|_| bad(text))?;
            number(text)
        }
        Type::NUMERIC => number(text),
        Type::FLOAT4 | Type::FLOAT8 => match text.trim().parse::<f64>() {
            Ok(x) if x.is_finite() => number(&format!("{x:e}")),
            Ok(_) => Ok(format!("CAST({} AS DOUBLE PRECISION)", quote(text.trim()))),
            Err(_) => Err(bad(text)),
        },
        Type::BOOL => match text.trim().to_ascii_lowercase().as_str() {
            "t" | "true" | "on" | "yes" | "y" | "1" => Ok("TRUE".to_owned()),
            "f" | "false" | "off" | "no" | "n" | "0" => Ok("FALSE".to_owned()),
            _ => Err(bad(text)),
        },
        // As Postgres, a zone offset on a timestamp (or date) without time zone is ignored.
        Type::TIMESTAMP | Type::TIMESTAMPTZ => Ok(format!("TIMESTAMP {}", quote(millpond_sql::without_zone(text)))),
        Type::DATE => Ok(format!("DATE {}", quote(millpond_sql::without_zone(text)))),
        Type::INTERVAL => Ok(format!("INTERVAL {}", quote(text))),
        _ => Ok(quote(text)),
    }
}

/// A binary-format parameter as a literal (None: the bytes do not read).
fn binary_literal(ty: &Type, bytes: &[u8]) -> Option<String> {
    let int = |bytes: &[u8]| -> Option<i64> {
        Some(match bytes.len() {
            2 => i16::from_be_bytes(bytes.try_into().ok()?) as i64,
            4 => i32::from_be_bytes(bytes.try_into().ok()?) as i64,
            8 => i64::from_be_bytes(bytes.try_into().ok()?),
            _ => return None,
        })
    };
    let signed = |i: i64| if i < 0 { format!("({i})") } else { i.to_string() };
    Some(match *ty {
        Type::INT2 | Type::INT4 | Type::INT8 | Type::OID => signed(int(bytes)?),
        Type::FLOAT4 if bytes.len() == 4 => float_literal(f32::from_be_bytes(bytes.try_into().ok()?) as f64),
        Type::FLOAT8 if bytes.len() == 8 => float_literal(f64::from_be_bytes(bytes.try_into().ok()?)),
        Type::BOOL if bytes.len() == 1 => if bytes[0] != 0 { "TRUE" } else { "FALSE" }.to_owned(),
        Type::TIMESTAMP | Type::TIMESTAMPTZ if bytes.len() == 8 => {
            let micros = i64::from_be_bytes(bytes.try_into().ok()?).checked_add(PG_EPOCH_MICROS)?;
            format!("TIMESTAMP '{}'", Value::Timestamp(micros))
        }
        Type::DATE if bytes.len() == 4 => {
            let days = i32::from_be_bytes(bytes.try_into().ok()?).checked_add(PG_EPOCH_DAYS)?;
            format!("DATE '{}'", Value::Date(days))
        }
        Type::NUMERIC => {
            let text = numeric_text(bytes)?;
            if text.starts_with('-') { format!("({text})") } else { text }
        }
        _ => quote(std::str::from_utf8(bytes).ok()?),
    })
}

/// The most digits a binary NUMERIC parameter may have after its point
/// (Postgres's own display-scale limit).
const NUMERIC_SCALE_MAX: usize = 1000;

/// Postgres's binary NUMERIC (ndigits, weight, sign, dscale, then base-10000
/// digits) as decimal text; None when the bytes are not one (or NaN).
fn numeric_text(bytes: &[u8]) -> Option<String> {
    let word = |i: usize| -> Option<u16> { Some(u16::from_be_bytes(bytes.get(2 * i..2 * i + 2)?.try_into().ok()?)) };
    let (ndigits, weight, sign, scale) = (word(0)? as usize, word(1)? as i16 as i64, word(2)?, word(3)? as usize);
    if bytes.len() != 8 + 2 * ndigits || !(sign == 0 || sign == 0x4000) || scale > NUMERIC_SCALE_MAX {
        return None;
    }
    let digits: Vec<u16> = (0..ndigits).map(|i| word(4 + i)).collect::<Option<_>>()?;
    if digits.iter().any(|d| *d > 9999) || weight.unsigned_abs() as usize > NUMERIC_SCALE_MAX {
        return None;
    }
    // Group i counts 10000^(weight - i).
    let group = |i: i64| usize::try_from(i).ok().and_then(|i| digits.get(i)).copied().unwrap_or(0);
    let whole: String = (0..=weight).map(|i| format!("{:04}", group(i))).collect();
    let whole = whole.trim_start_matches('0');
    let fraction_groups = scale.div_ceil(4) as i64;
    let fraction: String = (1..=fraction_groups).map(|p| format!("{:04}", group(weight + p))).collect();
    let mut text = String::new();
    if sign == 0x4000 {
        text.push('-');
    }
    text.push_str(if whole.is_empty() { "0" } else { whole });
    if scale > 0 {
        text.push('.');
        text.push_str(&fraction[..scale]);
    }
    Some(text)
}

fn float_literal(x: f64) -> String {
    if x.is_finite() {
        let text = format!("{x:e}");
        if x < 0.0 { format!("({text})") } else { text }
    } else {
        format!("CAST('{}' AS DOUBLE PRECISION)", float_text(x))
    }
}

/// `text` as an SQL string literal.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `sql` with each `$n` placeholder (outside quotes and comments) replaced
/// by `literals[n - 1]`; a placeholder past the literals is an error (42P02).
pub(crate) fn substitute(sql: &str, literals: &[String]) -> Result<String, ParameterError> {
    let bytes = sql.as_bytes();
    let (mut out, mut i) = (String::with_capacity(sql.len()), 0);
    while i < bytes.len() {
        let start = i;
        if let Some(end) = skip_quoted(bytes, i) {
            i = end;
        } else if bytes[i] == b'$' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i += 1;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let index: usize = sql[start + 1..i].parse().unwrap_or(0);
            let literal = index
                .checked_sub(1)
                .and_then(|n| literals.get(n))
                .ok_or_else(|| ("42P02", format!("there is no parameter ${index} ({} were bound)", literals.len())))?;
            out.push_str(literal);
            continue;
        } else {
            i += sql[i..].chars().next().map_or(1, char::len_utf8);
        }
        out.push_str(&sql[start..i]);
    }
    Ok(out)
}

/// When a quoted string or identifier or a comment starts at `bytes[i]`:
/// the index just past it (or the end, when it is not closed).
pub(crate) fn skip_quoted(bytes: &[u8], i: usize) -> Option<usize> {
    let end = |at: Option<usize>| Some(at.unwrap_or(bytes.len()));
    let rest = &bytes[i..];
    match rest {
        [quote @ (b'\'' | b'"'), tail @ ..] => end(tail.iter().position(|b| b == quote).map(|p| i + p + 2)),
        [b'-', b'-', ..] => end(rest.iter().position(|b| *b == b'\n').map(|p| i + p)),
        [b'/', b'*', tail @ ..] => end(tail.windows(2).position(|w| w == b"*/").map(|p| i + p + 4)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_outside_quotes_and_comments_are_replaced() {
        let literals = vec!["5".to_owned(), "'it''s'".to_owned()];
        let sql = "SELECT '$1', \"$2\" FROM t WHERE a = $1 AND b = $2 -- $1\n/* $2 */";
        let expected = "SELECT '$1', \"$2\" FROM t WHERE a = 5 AND b = 'it''s' -- $1\n/* $2 */";
        assert_eq!(substitute(sql, &literals).unwrap(), expected);
        assert_eq!(substitute("SELECT $3", &literals).unwrap_err().0, "42P02");
        assert_eq!(substitute("SELECT 'é' || $1", &literals).unwrap(), "SELECT 'é' || 5");
    }

    #[test]
    fn parameters_become_literals_that_keep_the_statements_shape() {
        assert_eq!(literal(1, &Type::INT8, false, Some(b"-5")).unwrap(), "(-5)", "never a comment after a minus");
        assert_eq!(literal(1, &Type::INT8, true, Some(&(-7i64).to_be_bytes())).unwrap(), "(-7)");
        assert_eq!(literal(1, &Type::INT4, true, Some(&9i32.to_be_bytes())).unwrap(), "9");
        assert_eq!(literal(1, &Type::TEXT, false, Some(b"a'); DROP TABLE t; --")).unwrap(), "'a''); DROP TABLE t; --'");
        assert_eq!(literal(1, &Type::BOOL, true, Some(&[1])).unwrap(), "TRUE");
        assert_eq!(literal(1, &Type::INT8, false, None).unwrap(), "NULL");
        assert_eq!(literal(2, &Type::INT8, false, Some(b"12; DROP")).unwrap_err().0, "22P02");
        assert_eq!(literal(1, &Type::NUMERIC, false, Some(b"1) OR (1")).unwrap_err().0, "22P02");
        assert_eq!(literal(1, &Type::FLOAT8, true, Some(&1.5f64.to_be_bytes())).unwrap(), "1.5e0");
        let ts = literal(1, &Type::TIMESTAMP, true, Some(&0i64.to_be_bytes())).unwrap();
        assert_eq!(ts, "TIMESTAMP '2000-01-01 00:00:00'");
    }

    #[test]
    fn values_print_as_postgres_prints_them() {
        use millpond_sql::Type as T;
        let double = |x: f64| text(&Value::Double(millpond_sql::OrderedF64(x)), &T::Double).unwrap();
        assert_eq!(double(1.5), "1.5");
        assert_eq!(double(1e20), "1e+20");
        assert_eq!(double(1.5e-7), "1.5e-07");
        assert_eq!(double(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(text(&Value::Bool(true), &T::Bool).unwrap(), "t");
        assert_eq!(text(&Value::Null, &T::Int), None);
    }

    #[test]
    fn a_decimal_prints_at_its_columns_scale_in_both_formats() {
        use millpond_sql::Type as T;
        let decimal = |units: i128| Value::Decimal(units.into());
        let at = |scale: u8| T::Decimal { precision: 10, scale };
        // Units are millionths (`DECIMAL_SCALE`): 0.1, 2, -12.5, 0.0625.
        let cases = [
            (100_000, at(2), "0.10"),
            (2_000_000, at(2), "2.00"),
            (-12_500_000, at(3), "-12.500"),
            (2_000_000, at(0), "2"),
            (62_500, at(2), "0.0625"), // digits beyond the scale are kept
            (100_000, at(8), "0.10000000"),
        ];
        for (units, ty, want) in cases {
            assert_eq!(text(&decimal(units), &ty).unwrap(), want, "{units} as {ty:?}");
            let binary = binary(&decimal(units), &ty).unwrap();
            assert_eq!(numeric_text(&binary).unwrap(), want, "binary {units} as {ty:?}");
        }
        assert_eq!(millpond_sql::decimal_text_at_scale("abc", 2), "abc");
        assert_eq!(millpond_sql::decimal_text_at_scale("1.", 2), "1.");
        assert_eq!(millpond_sql::decimal_text_at_scale("-7", 1), "-7.0");
        assert_eq!(millpond_sql::decimal_text_at_scale("1e5", 2), "1e5");
    }

    #[test]
    fn numerics_encode_as_base_10000_groups() {
        // 12345.678: groups 1, 2345, 6780; weight 1; scale 3.
        for text in ["12345.678", "-0.05", "0", "1.50", "100000000", "0.0001", "-98765432.10"] {
            let back = numeric_text(&numeric_binary(text)).unwrap();
            assert_eq!(back, text, "binary NUMERIC reads back");
        }
        assert_eq!(millpond_sql::without_zone("2024-05-06 07:08:09+00"), "2024-05-06 07:08:09");
        assert_eq!(millpond_sql::without_zone("2024-05-06 07:08:09.5-07:30"), "2024-05-06 07:08:09.5");
        assert_eq!(millpond_sql::without_zone("2024-05-06 +00"), "2024-05-06");
        assert_eq!(millpond_sql::without_zone("2024-05-06"), "2024-05-06");
        assert_eq!(numeric_text(&[0, 1, 0, 0, 0xC0, 0, 0, 0, 0, 1]), None, "NaN does not read");
        assert_eq!(numeric_text(&[0, 2, 0, 0, 0, 0, 0, 0, 0, 1]), None, "a short digit list does not read");
        let bytes = numeric_binary("12345.678");
        let words: Vec<i16> = bytes.chunks(2).map(|c| i16::from_be_bytes([c[0], c[1]])).collect();
        assert_eq!(words, [3, 1, 0, 3, 1, 2345, 6780]);
        let words: Vec<i16> = numeric_binary("-0.05").chunks(2).map(|c| i16::from_be_bytes([c[0], c[1]])).collect();
        assert_eq!(words, [1, -1, 0x4000, 2, 500]);
        assert_eq!(numeric_binary("0"), [0, 0, 0, 0, 0, 0, 0, 0]);
    }
}
