//! Window functions over a partition: RANK, DENSE_RANK, PERCENT_RANK,
//! CUME_DIST, NTILE, LAG/LEAD, FIRST_VALUE/LAST_VALUE/NTH_VALUE and the
//! aggregates COUNT/SUM/AVG/MIN/MAX over a frame (`ROWS` or `RANGE`
//! between `UNBOUNDED PRECEDING`, `n PRECEDING`, `CURRENT ROW`,
//! `n FOLLOWING` and `UNBOUNDED FOLLOWING`; a RANGE offset moves the single
//! ORDER BY key's value, an INTERVAL a TIMESTAMP's), as SQL defines them.
//! (ROW_NUMBER is a top-k with its rank: `Rel::TopK`.)
//!
//! The dataflow keeps each partition's rows in order in a top-k's state with
//! no limit and computes [`over`] of a partition each epoch it changes, so an
//! epoch costs the rows of the partitions it changes; the interpreter calls
//! the same function for one-off queries.
//!
//! Invariants:
//! - Rows are ordered by the ORDER BY keys, ties broken by the whole row
//!   (as a top-k's), so the answer is a function of the partition's
//!   multiset of rows: each copy of a row is one row of the answer.
//! - Peers (rows equal in every ORDER BY key) share RANK, DENSE_RANK,
//!   PERCENT_RANK and CUME_DIST, and a `RANGE` frame's `CURRENT ROW` bound
//!   reaches the last (or first) of them; without ORDER BY every row is a
//!   peer of every other.
//! - A RANGE offset bound reaches the rows whose key is within the offset
//!   of the current row's (found by binary search: the keys are in order);
//!   a NULL key's frame is its NULL peers, and NULL keys are in no non-NULL
//!   key's range.
//! - SUM and AVG of integers are exact (an overflow is NULL), as elsewhere.

use std::cmp::Ordering;

use millpond_dataflow::Diff;

use crate::eval::{compare, eval};
use crate::plan::{AggregateFunction, BinaryOp, Expr, Frame, FrameBound, SortKey, WindowCall, WindowFunction};
use crate::sort_key;
use crate::value::{DECIMAL_ONE, Row, Value};

/// Each row of a partition (rows with positive counts; each copy a row),
/// with one value per call appended, with count 1.
pub(crate) fn over(rows: &[(Row, Diff)], order: &[SortKey], calls: &[WindowCall], out: &mut Vec<(Row, Diff)>) {
    let mut keyed: Vec<(Vec<u8>, Vec<u8>, &Row, Diff)> = rows
        .iter()
        .filter(|(_, count)| *count > 0)
        .map(|(row, count)| {
            let mut peer_key = Vec::new();
            sort_key::order_key(order, row, &mut peer_key);
            let mut full = peer_key.clone();
            sort_key::row_key(row, &mut full);
            (full, peer_key, row, *count)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut sorted: Vec<&Row> = Vec::new();
    let mut peer_keys: Vec<&[u8]> = Vec::new();
    for (_, peer_key, row, count) in &keyed {
        for _ in 0..*count {
            sorted.push(row);
            peer_keys.push(peer_key);
        }
    }
    let mut peers = Peers::of(&peer_keys);
    // A RANGE frame with an offset has one ORDER BY key: its values, in order.
    if let [key] = order {
        let keys = sorted.iter().map(|row| eval(&key.expr, row)).collect();
        peers.ranged = Ranged { keys, descending: key.descending };
    }
    let columns: Vec<Vec<Value>> = calls.iter().map(|call| values(call, &sorted, &peers)).collect();
    for (i, row) in sorted.iter().enumerate() {
        let mut output = (*row).clone();
        output.extend(columns.iter().map(|c| c[i].clone()));
        out.push((output, 1));
    }
}

/// Each row's peer group, as the range `[start, end)` of rows in it, and
/// the group's number (from 0); the single ORDER BY key's values, for
/// RANGE offsets.
struct Peers {
    bounds: Vec<(usize, usize)>,
    group: Vec<usize>,
    ranged: Ranged,
}

impl Peers {
    fn of(keys: &[&[u8]]) -> Peers {
        let (mut bounds, mut group) = (vec![(0, 0); keys.len()], vec![0; keys.len()]);
        let (mut start, mut number) = (0, 0);
        for i in 0..=keys.len() {
            if i == keys.len() || (i > start && keys[i] != keys[start]) {
                (start..i).for_each(|j| {
                    bounds[j] = (start, i);
                    group[j] = number;
                });
                start = i;
                number += 1;
            }
        }
        Peers { bounds, group, ranged: Ranged::default() }
    }
}

/// The ORDER BY key's values of a partition's rows in order, for RANGE
/// frames with offsets (empty without a single key).
#[derive(Default)]
struct Ranged {
    keys: Vec<Value>,
    descending: bool,
}

impl Ranged {
    /// The frame bound of row `i` at `offset` from its key (`preceding`:
    /// toward the partition's start), as a row index: a start is the first
    /// row in range, an end the first past it. A NULL key is a peer of
    /// NULLs only: its bound is its peer group's; a sum past the type's
    /// range reaches the end of the non-NULL rows.
    fn bound(&self, i: usize, offset: &Value, preceding: bool, is_start: bool, peers: (usize, usize)) -> usize {
        let keys = &self.keys;
        if keys[i].is_null() {
            return if is_start { peers.0 } else { peers.1 };
        }
        let lo = keys.iter().position(|k| !k.is_null()).unwrap_or(0);
        let hi = keys.iter().rposition(|k| !k.is_null()).map_or(lo, |j| j + 1);
        let op = if preceding != self.descending { BinaryOp::Subtract } else { BinaryOp::Add };
        let target = eval(&Expr::binary(op, Expr::Literal(keys[i].clone()), Expr::Literal(offset.clone())), &[]);
        if target.is_null() {
            return if preceding { lo } else { hi };
        }
        // Rows before the range (for a start) or not past it (for an end).
        let (below, above) =
            if self.descending { (Ordering::Greater, Ordering::Less) } else { (Ordering::Less, Ordering::Greater) };
        let before = |k: &Value| {
            let order = compare(k, &target);
            if is_start { order == Some(below) } else { order != Some(above) }
        };
        lo + keys[lo..hi].partition_point(before)
    }
}

fn values(call: &WindowCall, rows: &[&Row], peers: &Peers) -> Vec<Value> {
    if let WindowFunction::Session { end, gap_micros } = call.function {
        return sessions(call, rows, end, gap_micros);
    }
    let n = rows.len();
    let arg = |i: usize, row: &Row| call.args.get(i).map_or(Value::Null, |e| eval(e, row));
    (0..n)
        .map(|i| match call.function {
            WindowFunction::Rank => Value::Int(peers.bounds[i].0 as i64 + 1),
            WindowFunction::DenseRank => Value::Int(peers.group[i] as i64 + 1),
            WindowFunction::PercentRank if n > 1 => Value::double(peers.bounds[i].0 as f64 / (n - 1) as f64),
            WindowFunction::PercentRank => Value::double(0.0),
            WindowFunction::CumeDist => Value::double(peers.bounds[i].1 as f64 / n as f64),
            WindowFunction::Ntile => ntile(arg(0, rows[i]), i, n),
            WindowFunction::Lag | WindowFunction::Lead => {
                let offset = match call.args.get(1) {
                    Some(e) => match eval(e, rows[i]) {
                        Value::Int(k) => k,
                        _ => return Value::Null,
                    },
                    None => 1,
                };
                let offset = if call.function == WindowFunction::Lag { -offset } else { offset };
                match i64::try_from(i).ok().and_then(|i| i.checked_add(offset)).filter(|j| (0..n as i64).contains(j)) {
                    Some(j) => arg(0, rows[j as usize]),
                    None => arg(2, rows[i]),
                }
            }
            function => {
                let (mut start, mut end) = frame(call.frame, i, n, peers.bounds[i]);
                let ranged = |bound: FrameBound, is_start: bool| match bound {
                    FrameBound::RangePreceding(offset) => {
                        Some(peers.ranged.bound(i, &offset.value(), true, is_start, peers.bounds[i]))
                    }
                    FrameBound::RangeFollowing(offset) => {
                        Some(peers.ranged.bound(i, &offset.value(), false, is_start, peers.bounds[i]))
                    }
                    _ => None,
                };
                start = ranged(call.frame.start, true).unwrap_or(start);
                end = ranged(call.frame.end, false).unwrap_or(end);
                let mut framed = rows[start.min(end)..end].iter().map(|row| arg(0, row));
                match function {
                    WindowFunction::FirstValue => framed.next().unwrap_or(Value::Null),
                    WindowFunction::LastValue => framed.next_back().unwrap_or(Value::Null),
                    WindowFunction::NthValue => match arg(1, rows[i]) {
                        Value::Int(k) if k >= 1 => framed.nth(k as usize - 1).unwrap_or(Value::Null),
                        _ => Value::Null,
                    },
                    WindowFunction::Aggregate(aggregate) => fold(aggregate, call, framed),
                    _ => unreachable!("ranking functions are matched above"),
                }
            }
        })
        .collect()
}

/// Each row's session start (or end), rows in time order: a row joins the
/// session of the row before it when its time is less than `gap` after
/// that row's (so sessions are the unions of overlapping `[time, time +
/// gap)`); a session ends at its last time plus the gap. NULL times are in
/// no session (NULL).
fn sessions(call: &WindowCall, rows: &[&Row], end: bool, gap: i64) -> Vec<Value> {
    let times: Vec<Option<i64>> = rows
        .iter()
        .map(|row| match call.args.first().map(|e| eval(e, row)) {
            Some(Value::Timestamp(t)) => Some(t),
            _ => None,
        })
        .collect();
    let mut bounds = vec![Value::Null; rows.len()];
    let mut session: Vec<usize> = Vec::new();
    let close = |session: &mut Vec<usize>, bounds: &mut Vec<Value>| {
        if let (Some(&first), Some(&last)) = (session.first(), session.last()) {
            let (start, stop) = (times[first].expect("timed"), times[last].expect("timed").saturating_add(gap));
            for &i in session.iter() {
                bounds[i] = Value::Timestamp(if end { stop } else { start });
            }
        }
        session.clear();
    };
    for (i, time) in times.iter().enumerate() {
        let Some(t) = time else { continue };
        let last = session.last().map(|&j| times[j].expect("timed"));
        debug_assert!(last.is_none_or(|l| l <= *t), "rows come in time order");
        if last.is_some_and(|l| *t >= l.saturating_add(gap)) {
            close(&mut session, &mut bounds);
        }
        session.push(i);
    }
    close(&mut session, &mut bounds);
    bounds
}

/// NTILE(buckets): the row's bucket, the first `n % buckets` a row larger.
fn ntile(buckets: Value, i: usize, n: usize) -> Value {
    let Value::Int(buckets) = buckets else { return Value::Null };
    if buckets <= 0 {
        return Value::Null;
    }
    let buckets = buckets as usize;
    let (size, larger) = (n / buckets, n % buckets);
    let bucket =
        if i < larger * (size + 1) { i / (size + 1) } else { larger + (i - larger * (size + 1)) / size.max(1) };
    Value::Int(bucket as i64 + 1)
}

/// The frame of row `i` of `n`, as a range of rows `[start, end)` (empty
/// when start is past end); `peers` is the row's peer group.
fn frame(frame: Frame, i: usize, n: usize, peers: (usize, usize)) -> (usize, usize) {
    let at = |bound: FrameBound, is_start: bool| -> usize {
        match bound {
            FrameBound::UnboundedPreceding => 0,
            FrameBound::UnboundedFollowing => n,
            FrameBound::Preceding(k) => {
                let k = usize::try_from(k).unwrap_or(usize::MAX);
                match (is_start, i.checked_sub(k)) {
                    (true, j) => j.unwrap_or(0),
                    (false, j) => j.map_or(0, |j| j + 1),
                }
            }
            FrameBound::Following(k) => {
                let j = i.saturating_add(usize::try_from(k).unwrap_or(usize::MAX));
                if is_start { j.min(n) } else { j.saturating_add(1).min(n) }
            }
            FrameBound::CurrentRow if frame.rows => {
                if is_start {
                    i
                } else {
                    i + 1
                }
            }
            // Found from the keys' values (`Ranged::bound`) by the caller.
            FrameBound::CurrentRow | FrameBound::RangePreceding(_) | FrameBound::RangeFollowing(_) => {
                if is_start {
                    peers.0
                } else {
                    peers.1
                }
            }
        }
    };
    (at(frame.start, true), at(frame.end, false))
}

/// An aggregate over a frame's values.
fn fold(aggregate: AggregateFunction, call: &WindowCall, values: impl Iterator<Item = Value>) -> Value {
    match aggregate {
        AggregateFunction::CountRows => Value::Int(values.count() as i64),
        AggregateFunction::Count => Value::Int(values.filter(|v| !v.is_null()).count() as i64),
        AggregateFunction::Min | AggregateFunction::Max => {
            let wanted = if aggregate == AggregateFunction::Min { Ordering::Less } else { Ordering::Greater };
            values
                .filter(|v| !v.is_null())
                .reduce(|best, v| if compare(&v, &best) == Some(wanted) { v } else { best })
                .unwrap_or(Value::Null)
        }
        AggregateFunction::Sum | AggregateFunction::Avg => {
            let present: Vec<Value> = values.filter(|v| !v.is_null()).collect();
            sum_or_average(aggregate == AggregateFunction::Avg, &present, call)
        }
        other => unreachable!("the binder allows no {other:?} over a window"),
    }
}

/// SUM (exact for integers and decimals: NULL past their range) or AVG
/// (a DOUBLE of integers and doubles, a DECIMAL of decimals).
fn sum_or_average(average: bool, values: &[Value], call: &WindowCall) -> Value {
    if values.is_empty() {
        return Value::Null;
    }
    let count = values.len() as i128;
    if values.iter().any(|v| matches!(v, Value::Double(_))) {
        let sum: f64 = values.iter().filter_map(Value::as_f64).sum();
        return Value::double(if average { sum / count as f64 } else { sum });
    }
    let units: Option<i128> = values.iter().try_fold(0i128, |acc, v| acc.checked_add(v.as_decimal_units()?));
    let Some(units) = units else { return Value::Null };
    match (average, call.ty) {
        (true, crate::value::Type::Double) => Value::double(units as f64 / DECIMAL_ONE as f64 / count as f64),
        (true, _) => {
            crate::eval::round_decimal_division(units, count).map_or(Value::Null, |u| Value::Decimal(u.into()))
        }
        (false, crate::value::Type::Int) => i64::try_from(units / DECIMAL_ONE).map_or(Value::Null, Value::Int),
        (false, _) => Value::Decimal(units.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_peers_follow_sql() {
        let peers = Peers::of(&[b"a".as_slice(), b"a", b"b", b"c", b"c"]);
        assert_eq!(peers.bounds, [(0, 2), (0, 2), (2, 3), (3, 5), (3, 5)]);
        assert_eq!(peers.group, [0, 0, 1, 2, 2]);
        let range = Frame::DEFAULT;
        assert_eq!(frame(range, 0, 5, (0, 2)), (0, 2), "RANGE reaches the current row's last peer");
        let rows = |start, end| Frame { rows: true, start, end };
        let sliding = rows(FrameBound::Preceding(1), FrameBound::Following(1));
        assert_eq!(frame(sliding, 0, 5, (0, 2)), (0, 2));
        assert_eq!(frame(sliding, 4, 5, (3, 5)), (3, 5));
        let ahead = rows(FrameBound::Following(1), FrameBound::Following(3));
        assert_eq!(frame(ahead, 3, 5, (3, 5)), (4, 5));
        let empty = rows(FrameBound::Following(2), FrameBound::Preceding(1));
        let (start, end) = frame(empty, 1, 5, (0, 2));
        assert!(start >= end, "an empty frame");
        let before = rows(FrameBound::UnboundedPreceding, FrameBound::Preceding(2));
        assert_eq!(frame(before, 1, 5, (0, 2)), (0, 0), "no row two before the second");
        assert_eq!(frame(before, 3, 5, (3, 5)), (0, 2));
        let ascending = [Value::Null, Value::Int(1), Value::Int(3), Value::Int(5), Value::Int(9)];
        let ranged = Ranged { keys: ascending.to_vec(), descending: false };
        let two = Value::Int(2);
        assert_eq!(ranged.bound(2, &two, true, true, (2, 3)), 1, "3 - 2 reaches 1");
        assert_eq!(ranged.bound(2, &two, false, false, (2, 3)), 4, "3 + 2 reaches 5, not 9");
        assert_eq!(ranged.bound(1, &two, true, true, (1, 2)), 1, "NULL is in no range");
        assert_eq!((ranged.bound(0, &two, true, true, (0, 1)), ranged.bound(0, &two, false, false, (0, 1))), (0, 1));
        let descending = [Value::Int(9), Value::Int(5), Value::Int(3), Value::Int(1), Value::Null];
        let ranged = Ranged { keys: descending.to_vec(), descending: true };
        assert_eq!(ranged.bound(2, &two, true, true, (2, 3)), 1, "preceding a descending 3: up to 5");
        assert_eq!(ranged.bound(2, &two, false, false, (2, 3)), 4, "following it: down to 1, not NULL");
        let ntiles: Vec<Value> = (0..7).map(|i| ntile(Value::Int(3), i, 7)).collect();
        assert_eq!(ntiles, [1, 1, 1, 2, 2, 3, 3].map(Value::Int));
    }
}
