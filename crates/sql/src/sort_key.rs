//! Order-preserving, prefix-free bytes of SQL rows: the bytes of two rows
//! compare (as byte strings) as the rows sort under an ORDER BY, so ordered
//! state (a top-k's rows) can be kept in key order and read from its start.
//!
//! An ORDER BY key ([`order_key`]) is, per sort expression, a NULL marker
//! byte (the lower one for NULL under NULLS FIRST) and, for a non-NULL
//! value, its bytes (inverted under DESC):
//! - BOOL: one byte;
//! - INT and DECIMAL: the value's decimal units (`i128`, so the two compare
//!   by value as SQL compares them), 16 bytes big-endian with the sign bit
//!   flipped; TIMESTAMP and INTERVAL: microseconds, DATE: days, 8 bytes
//!   likewise;
//! - DOUBLE: the IEEE bits, sign bit flipped when positive, all bits
//!   inverted when negative; -0 is written as +0 (they are equal) and every
//!   NaN as one NaN above +infinity (PostgreSQL's order);
//! - TEXT: its bytes with 0x00 escaped as 0x00 0xFF, ended by 0x00 0x00.
//!
//! Ties are broken by the whole row ([`row_key`]): each value's variant (in
//! `Value`'s declaration order, NULL first) then its bytes ascending, with
//! DOUBLE in IEEE totalOrder: the order of `Row`'s `Ord`.
//!
//! Invariants (property tests below, against the comparators they stand
//! for):
//! - `order_key(a) < order_key(b)` iff `a` sorts before `b` under the ORDER
//!   BY, and the keys are equal iff the rows tie on it.
//! - `row_key(a)` and `row_key(b)` compare as `a.cmp(&b)` for rows of one
//!   width, and are equal only for equal rows.
//! - Every value's bytes are prefix-free (no encoding is a proper prefix of
//!   another of the same sort expression), so keys may be concatenated and
//!   followed by other bytes without changing their order.
//! - Each sort expression has one type, as the binder types it (an INT and
//!   a DOUBLE of one expression would not compare by value).

use crate::eval::eval;
use crate::plan::{Expr, SortKey};
use crate::value::Value;

/// Appends the ORDER BY key of `row` under `order` to `out`.
pub(crate) fn order_key(order: &[SortKey], row: &[Value], out: &mut Vec<u8>) {
    for key in order {
        let value = eval(&key.expr, row);
        let null_marker = |is_null: bool| u8::from(is_null != key.nulls_first);
        if value.is_null() {
            out.push(null_marker(true));
            continue;
        }
        out.push(null_marker(false));
        let start = out.len();
        sort_bytes(&value, out);
        if key.descending {
            out[start..].iter_mut().for_each(|b| *b = !*b);
        }
    }
}

/// Appends the tie-breaking key of `row` (its `Ord`) to `out`.
pub(crate) fn row_key(row: &[Value], out: &mut Vec<u8>) {
    for value in row {
        out.push(variant(value));
        match value {
            Value::Null => {}
            Value::Double(d) => out.extend_from_slice(&total_order_bits(d.0).to_be_bytes()),
            Value::Decimal(d) => out.extend_from_slice(&flip_i128(d.get())),
            Value::Date(d) => out.extend_from_slice(&((*d as u32) ^ (1 << 31)).to_be_bytes()),
            Value::Int(i) | Value::Timestamp(i) | Value::Interval(i) => out.extend_from_slice(&flip_i64(*i)),
            Value::Bool(_) | Value::Text(_) => sort_bytes(value, out),
        }
    }
}

/// Appends the order key of one value as [`row_key`] orders it (its `Ord`),
/// inverted when `descending`.
pub(crate) fn value_key(value: &Value, descending: bool, out: &mut Vec<u8>) {
    let start = out.len();
    row_key(std::slice::from_ref(value), out);
    if descending {
        out[start..].iter_mut().for_each(|b| *b = !*b);
    }
}

/// `Function::OrderedValue`: `values` is `[value, flags, key, flags, key,
/// ...]` (flags: 1 descending, 2 NULLS FIRST); the TEXT `hex(k):value`
/// where `k` is the keys' ORDER BY key. Hex digits sort as their nibbles and
/// `k` is prefix-free, so these texts sort by the keys first, then by the
/// value; the value is what follows the first ':' ([`ordered_part`]). NULL
/// when the value is NULL (an aggregate skips it).
pub(crate) fn ordered_value(values: &[Value]) -> Value {
    let Some((value, keys)) = values.split_first() else { return Value::Null };
    if value.is_null() {
        return Value::Null;
    }
    let mut order = Vec::new();
    let mut row = Vec::new();
    for (i, pair) in keys.chunks(2).enumerate() {
        let (flags, key) = match pair {
            [Value::Int(flags), key] => (*flags, key),
            _ => return Value::Null,
        };
        order.push(SortKey { expr: Expr::Column(i), descending: flags & 1 != 0, nulls_first: flags & 2 != 0 });
        row.push(key.clone());
    }
    let mut bytes = Vec::new();
    order_key(&order, &row, &mut bytes);
    let mut text = hex(&bytes);
    text.push(':');
    text.push_str(&value.to_string());
    Value::Text(text.into())
}

/// The value of an [`ordered_value`] text: what follows its first ':'.
pub(crate) fn ordered_part(text: &str) -> &str {
    text.split_once(':').map_or(text, |(_, value)| value)
}

/// `Function::TupleKey`: the tuple's ORDER BY key (ascending) in hex, so
/// that tuples SQL calls equal (`-0 = 0`) have equal texts and only they;
/// NULL when any member is NULL.
pub(crate) fn tuple_text(values: &[Value]) -> Value {
    if values.iter().any(Value::is_null) {
        return Value::Null;
    }
    let order: Vec<SortKey> =
        (0..values.len()).map(|i| SortKey { expr: Expr::Column(i), descending: false, nulls_first: false }).collect();
    let mut bytes = Vec::new();
    order_key(&order, values, &mut bytes);
    Value::Text(hex(&bytes).into())
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        text.push(char::from(DIGITS[usize::from(b >> 4)]));
        text.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    text
}

/// `value`'s position in `Value`'s declaration (its derived order).
fn variant(value: &Value) -> u8 {
    match value {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Int(_) => 2,
        Value::Double(_) => 3,
        Value::Decimal(_) => 4,
        Value::Text(_) => 5,
        Value::Timestamp(_) => 6,
        Value::Date(_) => 7,
        Value::Interval(_) => 8,
    }
}

/// The ORDER BY bytes of a non-NULL value.
fn sort_bytes(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => unreachable!("NULL has a marker, not bytes"),
        Value::Bool(b) => out.push(u8::from(*b)),
        Value::Int(_) | Value::Decimal(_) => {
            let units = value.as_decimal_units().expect("an INT's units fit in an i128");
            out.extend_from_slice(&flip_i128(units));
        }
        Value::Double(d) => {
            let x = if d.0.is_nan() {
                f64::NAN
            } else if d.0 == 0.0 {
                0.0
            } else {
                d.0
            };
            out.extend_from_slice(&total_order_bits(x).to_be_bytes());
        }
        Value::Text(text) => {
            for &b in text.as_bytes() {
                out.push(b);
                if b == 0 {
                    out.push(0xff);
                }
            }
            out.extend_from_slice(&[0, 0]);
        }
        Value::Timestamp(micros) => out.extend_from_slice(&flip_i64(*micros)),
        Value::Date(days) => out.extend_from_slice(&flip_i64(*days as i64)),
        Value::Interval(micros) => out.extend_from_slice(&flip_i64(*micros)),
    }
}

fn flip_i64(x: i64) -> [u8; 8] {
    ((x as u64) ^ (1 << 63)).to_be_bytes()
}

fn flip_i128(x: i128) -> [u8; 16] {
    ((x as u128) ^ (1 << 127)).to_be_bytes()
}

/// Bits of `x` that compare as unsigned integers in IEEE totalOrder
/// (`f64::total_cmp`).
fn total_order_bits(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 { !bits } else { bits | (1 << 63) }
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use proptest::prelude::*;

    use super::*;
    use crate::eval::compare;
    use crate::plan::Expr;
    use crate::value::OrderedF64;

    /// ORDER BY as SQL defines it on one value: NULLs where the key says,
    /// DOUBLE with -0 = +0 and NaN above everything.
    fn sql_order(key: &SortKey, x: &Value, y: &Value) -> Ordering {
        match (x.is_null(), y.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) => {
                if key.nulls_first {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (false, true) => {
                if key.nulls_first {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            (false, false) => {
                let o = match (x, y) {
                    (Value::Double(a), Value::Double(b)) => match (a.0.is_nan(), b.0.is_nan()) {
                        (true, true) => Ordering::Equal,
                        (true, false) => Ordering::Greater,
                        (false, true) => Ordering::Less,
                        (false, false) => a.0.partial_cmp(&b.0).expect("not NaN"),
                    },
                    _ => compare(x, y).expect("non-NULL values of one type compare"),
                };
                if key.descending { o.reverse() } else { o }
            }
        }
    }

    fn double() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>(),
            Just(0.0),
            Just(-0.0),
            Just(f64::NAN),
            Just(-f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            -3.0..3.0f64,
        ]
    }

    /// A column of one type (the binder's promise), with NULLs.
    fn column(kind: u8) -> BoxedStrategy<Value> {
        let value: BoxedStrategy<Value> = match kind {
            0 => any::<bool>().prop_map(Value::Bool).boxed(),
            1 => prop_oneof![any::<i64>(), -3..3i64].prop_map(Value::Int).boxed(),
            2 => double().prop_map(|x| Value::Double(OrderedF64(x))).boxed(),
            3 => prop_oneof!["[a-c\\x00]{0,12}", ".{0,20}"].prop_map(|s: String| Value::Text(s.into())).boxed(),
            4 => prop_oneof![any::<i64>(), -3..3i64].prop_map(Value::Timestamp).boxed(),
            _ => prop_oneof![any::<i32>(), -3..3i32].prop_map(Value::Date).boxed(),
        };
        prop_oneof![1 => Just(Value::Null), 6 => value].boxed()
    }

    fn rows() -> impl Strategy<Value = (Vec<u8>, Vec<Vec<Value>>)> {
        prop::collection::vec(0u8..6, 1..4).prop_flat_map(|kinds| {
            let row: Vec<BoxedStrategy<Value>> = kinds.iter().map(|k| column(*k)).collect();
            (Just(kinds), prop::collection::vec(row, 2..12))
        })
    }

    fn keys(width: usize) -> impl Strategy<Value = Vec<SortKey>> {
        prop::collection::vec((0..width, any::<bool>(), any::<bool>()), 1..4).prop_map(|keys| {
            keys.into_iter()
                .map(|(column, descending, nulls_first)| SortKey {
                    expr: Expr::Column(column),
                    descending,
                    nulls_first,
                })
                .collect()
        })
    }

    fn column_of(key: &SortKey) -> usize {
        let Expr::Column(c) = key.expr else { unreachable!() };
        c
    }

    fn encoded(f: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut out);
        out
    }

    proptest! {
        #[test]
        fn order_keys_sort_as_order_by((rows, order) in rows().prop_flat_map(|(kinds, rows)| (Just(rows), keys(kinds.len())))) {
            for a in &rows {
                for b in &rows {
                    let expected = order.iter().map(|k| {
                        let Expr::Column(c) = k.expr else { unreachable!() };
                        sql_order(k, &a[c], &b[c])
                    }).find(|o| o.is_ne()).unwrap_or(Ordering::Equal);
                    let (ka, kb) = (encoded(|o| order_key(&order, a, o)), encoded(|o| order_key(&order, b, o)));
                    prop_assert_eq!(ka.cmp(&kb), expected, "{:?} vs {:?} under {:?}", a, b, order);
                }
            }
        }

        #[test]
        fn ordered_values_sort_by_keys_then_value((rows, order) in rows().prop_flat_map(|(kinds, rows)| (Just(rows), keys(kinds.len()))), texts in prop::collection::vec(".{0,6}", 12)) {
            // `[value, flags, key, ...]` as the binder builds it, and the text it becomes.
            let ordered = |row: &[Value], text: &str| {
                let mut args = vec![Value::Text(text.into())];
                for key in &order {
                    let Expr::Column(c) = key.expr else { unreachable!() };
                    let flags = i64::from(key.descending) | (i64::from(key.nulls_first) << 1);
                    args.extend([Value::Int(flags), row[c].clone()]);
                }
                match ordered_value(&args) {
                    Value::Text(t) => t,
                    other => panic!("not a text: {other:?}"),
                }
            };
            for (a, ta) in rows.iter().zip(&texts) {
                for (b, tb) in rows.iter().zip(&texts) {
                    let (ka, kb) = (encoded(|o| order_key(&order, a, o)), encoded(|o| order_key(&order, b, o)));
                    let expected = ka.cmp(&kb).then_with(|| ta.as_str().cmp(tb.as_str()));
                    let (oa, ob) = (ordered(a, ta), ordered(b, tb));
                    prop_assert_eq!(oa.cmp(&ob), expected, "{:?} {:?} vs {:?} {:?}", a, ta, b, tb);
                    prop_assert_eq!(ordered_part(&oa), ta.as_str());
                }
            }
        }

        #[test]
        fn tuple_texts_are_equal_for_equal_tuples((_kinds, rows) in rows()) {
            let ascending: Vec<SortKey> = (0..rows[0].len())
                .map(|c| SortKey { expr: Expr::Column(c), descending: false, nulls_first: true })
                .collect();
            for a in &rows {
                for b in &rows {
                    let (ta, tb) = (tuple_text(a), tuple_text(b));
                    if a.iter().any(Value::is_null) {
                        prop_assert_eq!(ta, Value::Null);
                        continue;
                    }
                    if b.iter().any(Value::is_null) {
                        continue;
                    }
                    let tie = ascending.iter().all(|k| sql_order(k, &a[column_of(k)], &b[column_of(k)]).is_eq());
                    prop_assert_eq!(ta == tb, tie, "{:?} vs {:?}", a, b);
                }
            }
        }

        #[test]
        fn row_keys_sort_as_rows((_kinds, rows) in rows()) {
            for a in &rows {
                for b in &rows {
                    let (ka, kb) = (encoded(|o| row_key(a, o)), encoded(|o| row_key(b, o)));
                    prop_assert_eq!(ka.cmp(&kb), a.cmp(b), "{:?} vs {:?}", a, b);
                    if ka != kb {
                        prop_assert!(!ka.starts_with(&kb) && !kb.starts_with(&ka), "prefix-free: {:?} {:?}", a, b);
                    }
                }
            }
        }
    }

    #[test]
    fn text_keys_are_prefix_free_and_ordered_through_nul_bytes() {
        let key = |s: &str| encoded(|o| sort_bytes(&Value::Text(s.into()), o));
        let words = ["", "\0", "\0\0", "\0a", "a", "a\0", "a\0b", "ab", "b"];
        for pair in words.windows(2) {
            assert!(key(pair[0]) < key(pair[1]), "{pair:?}");
        }
        for a in words {
            for b in words {
                if a != b {
                    assert!(!key(b).starts_with(&key(a)), "{a:?} is a prefix of {b:?}");
                }
            }
        }
    }
}
