//! SQL values and types: what a row holds, how values compare, convert and
//! print as JSON.
//!
//! Invariants:
//! - A `Value` of a column always has the column's type, or is `Null`.
//! - `Ord` on values of one type is SQL's order, with `Null` least (as in
//!   SQLite); it is also the order of top-k and MIN/MAX.
//! - `Decimal` is fixed point with [`DECIMAL_SCALE`] fractional digits, so
//!   equal numbers have equal representations (and hash equally); for the
//!   same reason a `Double` is never -0.0 and all NaNs are one (`Value::double`).
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::time;

/// Fractional digits kept by every DECIMAL value.
pub(crate) const DECIMAL_SCALE: u32 = 6;
pub(crate) const DECIMAL_ONE: i128 = 10i128.pow(DECIMAL_SCALE);

/// An `f64` with a total order (IEEE 754 `totalOrder`), so that a DOUBLE
/// can be part of a key. `Value::double` makes -0.0 0.0 and every NaN one
/// NaN first, so values SQL finds equal are equal here too. (The dataflow
/// crate has the same type; this crate keeps its own so that its parser and
/// decoder build without the dataflow crate, for the fuzz targets.)
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OrderedF64(pub f64);

impl PartialEq for OrderedF64 {
    fn eq(&self, other: &Self) -> bool {
        self.0.total_cmp(&other.0).is_eq()
    }
}
impl Eq for OrderedF64 {}
impl PartialOrd for OrderedF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrderedF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}
impl std::hash::Hash for OrderedF64 {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

/// A SQL type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Type {
    Bool,
    Int,
    Double,
    /// NUMERIC(precision, scale): values are rounded to `scale` digits when cast.
    Decimal {
        precision: u8,
        scale: u8,
    },
    Text,
    Timestamp,
    Date,
    Interval,
    /// The type of a bare NULL literal: converts to any type.
    Null,
}

impl Type {
    pub fn is_numeric(self) -> bool {
        matches!(self, Type::Int | Type::Double | Type::Decimal { .. })
    }
    /// The type that two numeric types meet at (INT < DECIMAL < DOUBLE).
    pub(crate) fn numeric_join(self, other: Type) -> Option<Type> {
        use Type::*;
        Some(match (self, other) {
            (Null, t) | (t, Null) if t.is_numeric() || t == Null => t,
            (Int, Int) => Int,
            (Double, _) | (_, Double) if self.is_numeric() && other.is_numeric() => Double,
            (Decimal { precision: p1, scale: s1 }, Decimal { precision: p2, scale: s2 }) => {
                Decimal { precision: p1.max(p2), scale: s1.max(s2) }
            }
            (Decimal { .. }, Int) => self,
            (Int, Decimal { .. }) => other,
            _ => return None,
        })
    }
    /// The common type of two branches (CASE, COALESCE, UNION, IN lists).
    pub(crate) fn common(self, other: Type) -> Option<Type> {
        if self == other {
            return Some(self);
        }
        match (self, other) {
            (Type::Null, t) | (t, Type::Null) => Some(t),
            (Type::Timestamp, Type::Date) | (Type::Date, Type::Timestamp) => Some(Type::Timestamp),
            _ => self.numeric_join(other),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Bool => f.write_str("BOOLEAN"),
            Type::Int => f.write_str("BIGINT"),
            Type::Double => f.write_str("DOUBLE"),
            Type::Decimal { precision, scale } => write!(f, "DECIMAL({precision},{scale})"),
            Type::Text => f.write_str("TEXT"),
            Type::Timestamp => f.write_str("TIMESTAMP"),
            Type::Date => f.write_str("DATE"),
            Type::Interval => f.write_str("INTERVAL"),
            Type::Null => f.write_str("NULL"),
        }
    }
}

/// One SQL value. Variant order matters: `Null` sorts first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Double(OrderedF64),
    /// Fixed point: the number times 10^DECIMAL_SCALE.
    Decimal(Dec),
    Text(Box<str>),
    /// Microseconds since 1970-01-01 00:00:00 (no time zone).
    Timestamp(i64),
    /// Days since 1970-01-01.
    Date(i32),
    /// Microseconds.
    Interval(i64),
}

/// A DECIMAL's fixed-point units, an `i128` stored as two 64-bit halves so
/// that a `Value` is 24 bytes, not 32 (an `i128` is 16-byte aligned). The
/// derived order (signed high half, then unsigned low half) is the `i128`'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Dec {
    high: i64,
    low: u64,
}

impl Dec {
    pub fn get(self) -> i128 {
        ((self.high as i128) << 64) | self.low as i128
    }
}

impl From<i128> for Dec {
    fn from(units: i128) -> Dec {
        Dec { high: (units >> 64) as i64, low: units as u64 }
    }
}

// Rows are vectors of values: their size is what every row and every key
// costs in memory and in the operators' sorts.
const _: () = assert!(std::mem::size_of::<Value>() == 24);

/// Hashes the payload alone (one hasher write for a number, where the
/// derived hash writes the variant too): keys are hashed once per record to
/// pick their worker. Values of different variants may collide, never two
/// equal values differ.
impl std::hash::Hash for Value {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Value::Null => state.write_u8(0),
            Value::Bool(b) => state.write_u8(*b as u8 + 1),
            Value::Int(i) | Value::Timestamp(i) | Value::Interval(i) => state.write_i64(*i),
            Value::Double(d) => d.hash(state),
            Value::Decimal(d) => d.hash(state),
            Value::Text(t) => t.hash(state),
            Value::Date(d) => state.write_i32(*d),
        }
    }
}

/// A row: one value per column.
pub type Row = Vec<Value>;

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
    /// A DOUBLE, with -0.0 made 0.0 and every NaN one NaN: values SQL finds
    /// equal must be equal here too, as keys of groups, joins and DISTINCT.
    pub(crate) fn double(x: f64) -> Value {
        let x = if x == 0.0 {
            0.0
        } else if x.is_nan() {
            f64::NAN
        } else {
            x
        };
        Value::Double(OrderedF64(x))
    }
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Double(d) => Some(d.0),
            Value::Decimal(d) => Some(d.get() as f64 / DECIMAL_ONE as f64),
            _ => None,
        }
    }
    /// The value as a decimal's fixed-point units.
    pub(crate) fn as_decimal_units(&self) -> Option<i128> {
        match self {
            Value::Int(i) => (*i as i128).checked_mul(DECIMAL_ONE),
            Value::Decimal(d) => Some(d.get()),
            Value::Double(d) => {
                let scaled = (d.0 * DECIMAL_ONE as f64).round();
                (scaled.is_finite() && scaled.abs() < 1e38).then_some(scaled as i128)
            }
            _ => None,
        }
    }

    /// The value as JSON, as views and subscriptions show it.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            // JSON has no infinities or NaN: they are null (docs/sql.md).
            Value::Double(d) => serde_json::Number::from_f64(d.0).map_or(J::Null, J::Number),
            Value::Decimal(_) | Value::Timestamp(_) | Value::Date(_) | Value::Interval(_) => {
                J::String(self.to_string())
            }
            Value::Text(s) => J::String(s.to_string()),
        }
    }

    /// Reads a JSON value without a type (rows read back from a changelog).
    pub fn from_json_untyped(json: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        match json {
            J::Null => Value::Null,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => n.as_i64().map_or_else(|| Value::double(n.as_f64().unwrap_or(f64::NAN)), Value::Int),
            J::String(s) => Value::Text(s.as_str().into()),
            other => Value::Text(other.to_string().into()),
        }
    }
}

/// Formats a decimal's units with its fractional digits, trailing zeros dropped.
pub(crate) fn format_decimal(units: i128) -> String {
    let sign = if units < 0 { "-" } else { "" };
    let abs = units.unsigned_abs();
    let one = DECIMAL_ONE as u128;
    let (int, frac) = (abs / one, abs % one);
    if frac == 0 {
        return format!("{sign}{int}");
    }
    let digits = format!("{frac:0width$}", width = DECIMAL_SCALE as usize);
    format!("{sign}{int}.{}", digits.trim_end_matches('0'))
}

/// A decimal's text (`-12.5`, as [`Value`]'s `Display` writes it) with at
/// least `scale` fractional digits (`-12.50`), as Postgres prints a value of
/// a `NUMERIC(p, s)` column. Digits are only ever added, never dropped; text
/// that is not a plain decimal is returned as it is.
pub fn decimal_text_at_scale(text: &str, scale: u8) -> std::borrow::Cow<'_, str> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let is_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let plain = !whole.is_empty()
        && is_digits(whole)
        && is_digits(fraction)
        && (digits.len() > whole.len() + 1 || !digits.contains('.'));
    let missing = usize::from(scale).saturating_sub(fraction.len());
    if !plain || missing == 0 {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + missing + 1);
    out.push_str(text);
    if fraction.is_empty() {
        out.push('.');
    }
    out.extend(std::iter::repeat_n('0', missing));
    std::borrow::Cow::Owned(out)
}

/// Rounds decimal units to `scale` fractional digits (half away from zero).
pub(crate) fn round_decimal(units: i128, scale: u8) -> i128 {
    if scale as u32 >= DECIMAL_SCALE {
        return units;
    }
    let step = 10i128.pow(DECIMAL_SCALE - scale as u32);
    let rem = units % step;
    let base = units - rem;
    if rem.abs() * 2 >= step { base + step * rem.signum() } else { base }
}

/// Parses a decimal number ("-12.5", "1.5e3", "+.5") into units, exactly:
/// from its digits, rounded half away from zero at the sixth fractional
/// digit. `None`: not a number, or beyond what the units can hold.
pub(crate) fn parse_decimal(text: &str) -> Option<i128> {
    let text = text.trim();
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let exponent: i64 = match exponent {
        None => 0,
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Beyond any i128's digits either way: clamped, the value is 0 or out of range.
            let magnitude: i64 = digits.parse::<i64>().unwrap_or(i64::MAX).min(1000);
            if e.starts_with('-') { -magnitude } else { magnitude }
        }
    };
    // The value is DIGITS x 10^shift, in units DIGITS x 10^(shift + scale).
    let digits: String = int.chars().chain(frac.chars()).skip_while(|c| *c == '0').collect();
    if digits.is_empty() {
        return Some(0);
    }
    let shift = exponent - frac.len() as i64 + DECIMAL_SCALE as i64;
    let units = if shift >= 0 {
        let digits: i128 = digits.parse().ok()?;
        digits.checked_mul(10i128.checked_pow(u32::try_from(shift).ok()?)?)?
    } else {
        let dropped = usize::try_from(-shift).unwrap_or(usize::MAX);
        if dropped > digits.len() {
            0
        } else {
            let (kept, rest) = digits.split_at(digits.len() - dropped);
            let kept: i128 = if kept.is_empty() { 0 } else { kept.parse().ok()? };
            // Round on the first dropped digit.
            if rest.as_bytes()[0] >= b'5' { kept.checked_add(1)? } else { kept }
        }
    };
    Some(if negative { -units } else { units })
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("NULL"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Double(d) => write!(f, "{}", d.0),
            Value::Decimal(d) => f.write_str(&format_decimal(d.get())),
            Value::Text(s) => f.write_str(s),
            Value::Timestamp(t) => f.write_str(&time::format_timestamp(*t)),
            Value::Date(d) => f.write_str(&time::format_date(*d)),
            Value::Interval(i) => f.write_str(&time::format_interval(*i)),
        }
    }
}

/// Converts `value` to `to` (SQL CAST). `None`: the value does not convert
/// (the caller reports it, or yields NULL where SQL would).
/// [`cast`] of a constant written in SQL (a literal, an inserted value):
/// a text read as a TIMESTAMP or DATE may carry a zone offset, ignored as
/// Postgres does for types without time zone. (Records read by sources use
/// `cast`, strict: a shifted clock must not pass as a local one.)
pub(crate) fn cast_constant(value: &Value, to: Type) -> Option<Value> {
    match (value, to) {
        (Value::Text(text), Type::Timestamp | Type::Date) => {
            cast(&Value::Text(crate::time::without_zone(text).into()), to)
        }
        _ => cast(value, to),
    }
}

pub(crate) fn cast(value: &Value, to: Type) -> Option<Value> {
    use Value as V;
    if value.is_null() {
        return Some(V::Null);
    }
    Some(match (to, value) {
        (Type::Null, _) => V::Null,
        (Type::Bool, V::Bool(b)) => V::Bool(*b),
        (Type::Bool, V::Int(i)) => V::Bool(*i != 0),
        (Type::Bool, V::Text(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "t" | "yes" | "y" | "on" | "1" => V::Bool(true),
            "false" | "f" | "no" | "n" | "off" | "0" => V::Bool(false),
            _ => return None,
        },
        (Type::Int, V::Int(i)) => V::Int(*i),
        (Type::Int, V::Bool(b)) => V::Int(*b as i64),
        (Type::Int, V::Double(d)) => {
            let r = d.0.round();
            if !r.is_finite() || r.abs() >= 9.2e18 {
                return None;
            }
            V::Int(r as i64)
        }
        (Type::Int, V::Decimal(d)) => {
            let r = round_decimal(d.get(), 0) / DECIMAL_ONE;
            V::Int(i64::try_from(r).ok()?)
        }
        (Type::Int, V::Text(s)) => V::Int(s.trim().parse().ok()?),
        (Type::Double, V::Text(s)) => V::double(s.trim().parse().ok()?),
        (Type::Double, v) => V::double(v.as_f64()?),
        (Type::Decimal { scale, precision }, v) => {
            let units = match v {
                V::Text(s) => parse_decimal(s)?,
                v => v.as_decimal_units()?,
            };
            let units = round_decimal(units, scale);
            // Digits before the point must fit precision - scale (past 10^38,
            // every value the units can hold does).
            let limit = 10i128.checked_pow((precision.saturating_sub(scale)) as u32 + DECIMAL_SCALE);
            if limit.is_some_and(|limit| units.abs() >= limit) {
                return None;
            }
            V::Decimal(units.into())
        }
        (Type::Text, v) => V::Text(v.to_string().into()),
        (Type::Timestamp, V::Timestamp(t)) => V::Timestamp(*t),
        (Type::Timestamp, V::Date(d)) => V::Timestamp(*d as i64 * time::MICROS_PER_DAY),
        (Type::Timestamp, V::Text(s)) => V::Timestamp(time::parse_timestamp(s)?),
        (Type::Date, V::Date(d)) => V::Date(*d),
        (Type::Date, V::Timestamp(t)) => V::Date(t.div_euclid(time::MICROS_PER_DAY) as i32),
        (Type::Date, V::Text(s)) => V::Date(time::parse_date(s)?),
        (Type::Interval, V::Interval(i)) => V::Interval(*i),
        (Type::Interval, V::Text(s)) => V::Interval(time::parse_interval(s)?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infinite_and_nan_doubles_are_null_in_json() {
        // Were the strings "inf", "-inf" and "NaN".
        for x in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
            assert_eq!(Value::double(x).to_json(), serde_json::Value::Null, "{x}");
        }
        assert_eq!(Value::double(1.5).to_json(), serde_json::json!(1.5));
    }

    #[test]
    fn decimal_38_6_holds_up_to_10_pow_32_less_one_unit() {
        let ty = Type::Decimal { precision: 38, scale: 6 };
        let max = 10i128.pow(38) - 1;
        assert_eq!(cast(&Value::Decimal(max.into()), ty), Some(Value::Decimal(max.into())));
        assert_eq!(cast(&Value::Decimal((max + 1).into()), ty), None);
        // Was refused past 1e31.
        assert!(cast(&Value::double(9e31), ty).is_some());
        assert_eq!(cast(&Value::double(1e33), ty), None);
    }

    #[test]
    fn decimals_parse_round_and_print() {
        assert_eq!(parse_decimal("12.5"), Some(12_500_000));
        assert_eq!(parse_decimal("-0.0000005"), Some(-1));
        assert_eq!(parse_decimal("1234567890123.456789"), Some(1_234_567_890_123_456_789));
        assert_eq!(parse_decimal("1.5e3"), Some(1_500_000_000));
        assert_eq!(parse_decimal("15E-7"), Some(2));
        assert_eq!(parse_decimal("-.5"), Some(-500_000));
        assert_eq!(parse_decimal("0.0000004999999"), Some(0));
        assert_eq!(parse_decimal("1e-2000"), Some(0));
        assert_eq!(parse_decimal("0e5000"), Some(0));
        assert_eq!(parse_decimal("1e5000"), None);
        assert_eq!(parse_decimal("99999999999999999999999999999999.999999"), Some(10i128.pow(38) - 1));
        for bad in ["", ".", "e5", "1e", "1e+", "1.2.3", "--1", "1 2", "0x10", "inf", "NaN"] {
            assert_eq!(parse_decimal(bad), None, "{bad}");
        }
        assert_eq!(format_decimal(12_500_000), "12.5");
        assert_eq!(format_decimal(-1), "-0.000001");
        assert_eq!(round_decimal(12_345_000, 2), 12_350_000);
        assert_eq!(round_decimal(-12_345_000, 2), -12_350_000);
        assert_eq!(cast(&Value::Text("99.999".into()), Type::Decimal { precision: 4, scale: 2 }), None);
        assert_eq!(
            cast(&Value::Text("9.999".into()), Type::Decimal { precision: 4, scale: 2 }),
            Some(Value::Decimal(10_000_000.into()))
        );
        // DECIMAL(38, 2), the type of a literal such as 0.15, holds every value.
        assert_eq!(
            cast(&Value::Decimal(150_000.into()), Type::Decimal { precision: 38, scale: 2 }),
            Some(Value::Decimal(150_000.into()))
        );
    }
}
