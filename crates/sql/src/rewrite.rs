//! Plan-to-plan rewrites: a bound plan (or predicate) in, an equivalent
//! one out. They need no catalog: the binder calls them once names and
//! types are resolved, and they are tested on hand-built plans.
//!
//! - a filter's conjuncts become join keys of the inner joins below it, or
//!   bound a ROW_NUMBER below it (`rn <= k`: top-k), the rest stay a filter;
//! - a join condition splits into key pairs and the conjuncts of one side,
//!   the other, or both;
//! - DISTINCT aggregates that keep no set of values (SUM, AVG, string_agg)
//!   become aggregates over distinct (group, argument) pairs, joined back.
//!
//! Invariant: a rewritten plan computes what the plan did.
use crate::plan::{AggregateCall, AggregateFunction, BinaryOp, Expr, Function, JoinKind, Rel};
use crate::render::width;
use crate::value::Value;

/// Splits a predicate into its AND-ed parts.
pub(crate) fn conjuncts(expr: Expr, out: &mut Vec<Expr>) {
    match expr {
        Expr::Binary(BinaryOp::And, l, r) => {
            conjuncts(*l, out);
            conjuncts(*r, out);
        }
        other => out.push(other),
    }
}

pub(crate) fn and_all(mut parts: Vec<Expr>) -> Option<Expr> {
    let first = parts.pop()?;
    Some(parts.into_iter().rev().fold(first, |acc, e| Expr::binary(BinaryOp::And, e, acc)))
}

fn shift(mut expr: Expr, by: usize) -> Expr {
    expr.map_columns(&mut |c| c - by);
    expr
}

/// A join ON condition split against a left width: key pairs, and the
/// conjuncts reading only the left, only the right, or both sides.
#[derive(Default)]
pub(crate) struct JoinCondition {
    pub(crate) left_keys: Vec<Expr>,
    pub(crate) right_keys: Vec<Expr>,
    pub(crate) left_only: Vec<Expr>,
    pub(crate) right_only: Vec<Expr>,
    pub(crate) both: Vec<Expr>,
}

pub(crate) fn split_condition(parts: Vec<Expr>, left_width: usize) -> JoinCondition {
    let mut out = JoinCondition::default();
    for part in parts {
        let columns = part.columns();
        let in_left = |cols: &[usize]| cols.iter().all(|c| *c < left_width);
        let in_right = |cols: &[usize]| cols.iter().all(|c| *c >= left_width);
        // A subquery is answered above the join (decorrelated there), never in its keys.
        if let Expr::Binary(BinaryOp::Eq, a, b) = &part
            && !part.has_subquery()
        {
            let (ca, cb) = (a.columns(), b.columns());
            if !ca.is_empty() && !cb.is_empty() {
                if in_left(&ca) && in_right(&cb) {
                    out.left_keys.push((**a).clone());
                    out.right_keys.push(shift((**b).clone(), left_width));
                    continue;
                }
                if in_right(&ca) && in_left(&cb) {
                    out.left_keys.push((**b).clone());
                    out.right_keys.push(shift((**a).clone(), left_width));
                    continue;
                }
            }
        }
        if columns.is_empty() {
            out.both.push(part);
        } else if in_left(&columns) {
            out.left_only.push(part);
        } else if in_right(&columns) {
            out.right_only.push(shift(part, left_width));
        } else {
            out.both.push(part);
        }
    }
    out
}

/// Adds a filter, first using its parts where the plan can: an equality
/// across an inner join becomes a join key; `rn <= k` bounds a ROW_NUMBER.
pub(crate) fn apply_filter(mut rel: Rel, predicate: Expr) -> Rel {
    let mut parts = Vec::new();
    conjuncts(predicate, &mut parts);
    let mut kept = Vec::new();
    for part in parts {
        if let Some((column, k)) = row_number_bound(&part)
            && limit_row_number(&mut rel, column, k)
        {
            kept.push(part);
            continue;
        }
        if part.has_subquery() {
            // Answered per row where it stands (interpreter), never as a join key.
            kept.push(part);
            continue;
        }
        if let Some(rest) = push_into_join(&mut rel, part) {
            kept.push(rest);
        }
    }
    match and_all(kept) {
        Some(predicate) => Rel::Filter { input: Box::new(rel), predicate },
        None => rel,
    }
}

/// `left` joined with `right` on `keys` (the left side's, the right side's).
pub(crate) fn join(kind: JoinKind, left: Rel, right: Rel, (left_keys, right_keys): (Vec<Expr>, Vec<Expr>)) -> Rel {
    Rel::Join {
        kind,
        left_width: width(&left),
        right_width: width(&right),
        left: Box::new(left),
        right: Box::new(right),
        left_keys,
        right_keys,
    }
}

pub(crate) fn project(input: Rel, exprs: Vec<Expr>) -> Rel {
    Rel::Project { input: Box::new(input), exprs }
}

/// An outer join whose ON holds more than equalities between the sides
/// (a condition across them, on the preserved side, or no equality at
/// all): the rows matched by the keys and `condition`, then, for each
/// preserved side (`preserve`: left, right), its rows that matched nothing,
/// padded with NULLs. A side's row matched or not is its whole row,
/// compared NULL-safely, so equal rows share their fate as SQL's do.
pub(crate) fn outer_join(
    left: Rel,
    right: Rel,
    keys: (Vec<Expr>, Vec<Expr>),
    condition: Option<Expr>,
    (preserve_left, preserve_right): (bool, bool),
) -> Rel {
    let (left_width, right_width) = (width(&left), width(&right));
    let joined = join(JoinKind::Inner, left.clone(), right.clone(), keys);
    let matched = match condition {
        Some(predicate) => Rel::Filter { input: Box::new(joined), predicate },
        None => joined,
    };
    let nulls = |n: usize| std::iter::repeat_n(Expr::Literal(Value::Null), n);
    let mut parts = vec![matched.clone()];
    if preserve_left {
        let unmatched = unmatched(left, project(matched.clone(), (0..left_width).map(Expr::Column).collect()));
        parts.push(project(unmatched, (0..left_width).map(Expr::Column).chain(nulls(right_width)).collect()));
    }
    if preserve_right {
        let mine = (left_width..left_width + right_width).map(Expr::Column).collect();
        let unmatched = unmatched(right, project(matched, mine));
        parts.push(project(unmatched, nulls(left_width).chain((0..right_width).map(Expr::Column)).collect()));
    }
    Rel::UnionAll { inputs: parts }
}

/// The rows of `side` that are not among `matched` (rows of the same width).
fn unmatched(side: Rel, matched: Rel) -> Rel {
    let columns = width(&side);
    let marked = project(
        Rel::Distinct { input: Box::new(matched) },
        (0..columns).map(Expr::Column).chain([Expr::Literal(Value::Bool(true))]).collect(),
    );
    let joined = join(JoinKind::Left, side, marked, (null_safe(0..columns), null_safe(0..columns)));
    let missing = Expr::IsNull(Box::new(Expr::Column(2 * columns)));
    Rel::Filter { input: Box::new(joined), predicate: missing }
}

/// Join keys under which NULL matches NULL: per column, whether it is NULL
/// and its value (a constant in its place when it is), neither ever NULL.
pub(crate) fn null_safe(columns: impl Iterator<Item = usize>) -> Vec<Expr> {
    columns
        .flat_map(|c| {
            [
                Expr::IsNull(Box::new(Expr::Column(c))),
                Expr::Call(Function::Coalesce, vec![Expr::Column(c), Expr::Literal(Value::Bool(false))]),
            ]
        })
        .collect()
}

/// A GROUP BY whose `DISTINCT` aggregates other than COUNT, MIN and MAX
/// (which keep their values' set) are each computed over the distinct
/// (group, argument) pairs and joined back to the other aggregates on the
/// group, NULL-safely: the output is the group, then the aggregates, in
/// order, as `Rel::Aggregate`'s. Every group of the input has a row in each
/// part (a distinct pair exists for it even when its argument is NULL), and
/// a global aggregate's parts have one row each.
pub(crate) fn aggregate(input: Rel, group: Vec<Expr>, aggregates: Vec<AggregateCall>) -> Rel {
    let split = |a: &AggregateCall| {
        a.distinct && !matches!(a.func, AggregateFunction::Count | AggregateFunction::Min | AggregateFunction::Max)
    };
    if !aggregates.iter().any(split) {
        return Rel::Aggregate { input: Box::new(input), group, aggregates };
    }
    let g = group.len();
    let (kept, parted): (Vec<_>, Vec<_>) = aggregates.iter().cloned().enumerate().partition(|(_, a)| !split(a));
    let mut rel = Rel::Aggregate {
        input: Box::new(input.clone()),
        group: group.clone(),
        aggregates: kept.iter().map(|(_, a)| a.clone()).collect(),
    };
    let mut width = g + kept.len();
    // Where each call's value is in the joined row.
    let mut at = vec![0; aggregates.len()];
    for (position, (i, _)) in kept.iter().enumerate() {
        at[*i] = g + position;
    }
    for (i, call) in parted {
        let pairs = Rel::Project {
            input: Box::new(input.clone()),
            exprs: group.iter().cloned().chain([call.arg.clone()]).collect(),
        };
        let part = Rel::Aggregate {
            input: Box::new(Rel::Distinct { input: Box::new(pairs) }),
            group: (0..g).map(Expr::Column).collect(),
            aggregates: vec![AggregateCall { arg: Expr::Column(g), distinct: false, ..call }],
        };
        rel = Rel::Join {
            kind: JoinKind::Inner,
            left: Box::new(rel),
            right: Box::new(part),
            left_keys: null_safe(0..g),
            right_keys: null_safe(0..g),
            left_width: width,
            right_width: g + 1,
        };
        at[i] = width + g;
        width += g + 1;
    }
    let exprs = (0..g).chain(at).map(Expr::Column).collect();
    Rel::Project { input: Box::new(rel), exprs }
}

/// `rn <= k`, `rn < k`, `rn = 1` (and mirrored): the column and the bound.
fn row_number_bound(predicate: &Expr) -> Option<(usize, usize)> {
    let Expr::Binary(op, a, b) = predicate else { return None };
    let (column, k, op) = match (a.as_ref(), b.as_ref()) {
        (Expr::Column(c), Expr::Literal(Value::Int(k))) => (*c, *k, *op),
        (Expr::Literal(Value::Int(k)), Expr::Column(c)) => {
            let flipped = match op {
                BinaryOp::GtEq => BinaryOp::LtEq,
                BinaryOp::Gt => BinaryOp::Lt,
                BinaryOp::Eq => BinaryOp::Eq,
                _ => return None,
            };
            (*c, *k, flipped)
        }
        _ => return None,
    };
    let limit = match op {
        BinaryOp::LtEq => k,
        BinaryOp::Lt => k - 1,
        BinaryOp::Eq if k == 1 => 1,
        _ => return None,
    };
    Some((column, limit.max(0) as usize))
}

/// Sets the limit of the ROW_NUMBER whose rank is output column `column` of
/// `rel`, if there is one (and says whether there was).
fn limit_row_number(rel: &mut Rel, column: usize, k: usize) -> bool {
    match rel {
        Rel::Project { input, exprs } => match exprs.get(column) {
            Some(Expr::Column(c)) => limit_row_number(input, *c, k),
            _ => false,
        },
        Rel::Filter { input, .. } => limit_row_number(input, column, k),
        Rel::TopK { limit, row_number: true, input_width, .. } if column == *input_width => {
            *limit = Some(limit.map_or(k, |l| l.min(k)));
            true
        }
        _ => false,
    }
}

/// Makes an equality across an inner join's sides one of its keys; returns
/// the predicate when it cannot be used that way.
/// Filters `rel`, one side of an inner join, by `predicate` (over its own
/// columns): into its own joins' keys and sides where it can go, else right
/// above it, so that a side's rows are filtered before they are joined.
fn push_below(rel: &mut Rel, predicate: Expr) {
    if let Some(rest) = push_into_join(rel, predicate) {
        let input = std::mem::replace(rel, Rel::Unit);
        *rel = match input {
            Rel::Filter { input, predicate } => {
                Rel::Filter { input, predicate: Expr::binary(BinaryOp::And, predicate, rest) }
            }
            other => Rel::Filter { input: Box::new(other), predicate: rest },
        };
    }
}

fn push_into_join(rel: &mut Rel, predicate: Expr) -> Option<Expr> {
    let Rel::Join { kind: JoinKind::Inner, left, right, left_keys, right_keys, left_width, .. } = rel else {
        return Some(predicate);
    };
    let columns = predicate.columns();
    if columns.is_empty() {
        return Some(predicate);
    }
    if columns.iter().all(|c| c < left_width) {
        push_below(left, predicate);
        return None;
    }
    if columns.iter().all(|c| c >= left_width) {
        push_below(right, shift(predicate, *left_width));
        return None;
    }
    let split = split_condition(vec![predicate.clone()], *left_width);
    if split.left_keys.len() == 1 {
        left_keys.extend(split.left_keys);
        right_keys.extend(split.right_keys);
        return None;
    }
    Some(predicate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Location;
    use crate::plan::Input;
    use crate::value::Type;

    fn col(i: usize) -> Expr {
        Expr::Column(i)
    }
    fn int(i: i64) -> Expr {
        Expr::Literal(Value::Int(i))
    }
    fn op(op: BinaryOp, a: Expr, b: Expr) -> Expr {
        Expr::binary(op, a, b)
    }
    fn get(name: &str, width: usize) -> Rel {
        Rel::Get {
            object: name.into(),
            input: Input::Source { topic: name.into(), event_time: None, record_timestamp: false },
            columns: (0..width).map(|i| (format!("c{i}"), Type::Int)).collect(),
        }
    }
    fn join(kind: JoinKind, left: Rel, right: Rel, widths: (usize, usize)) -> Rel {
        Rel::Join {
            kind,
            left: Box::new(left),
            right: Box::new(right),
            left_keys: vec![],
            right_keys: vec![],
            left_width: widths.0,
            right_width: widths.1,
        }
    }

    #[test]
    fn conjuncts_and_and_all_round_trip() {
        let parts = vec![op(BinaryOp::Gt, col(0), int(1)), op(BinaryOp::Lt, col(1), int(2)), col(2)];
        let mut split = Vec::new();
        conjuncts(and_all(parts.clone()).unwrap(), &mut split);
        assert_eq!(split, parts);
        assert_eq!(and_all(vec![]), None);
    }

    #[test]
    fn a_join_condition_splits_into_keys_and_sides() {
        let parts = vec![
            op(BinaryOp::Eq, col(0), col(3)),
            op(BinaryOp::Eq, col(4), col(1)),
            op(BinaryOp::Gt, col(1), int(5)),
            op(BinaryOp::Lt, col(4), int(2)),
            op(BinaryOp::Lt, col(0), col(3)),
            op(BinaryOp::Eq, int(1), int(1)),
        ];
        let split = split_condition(parts, 3);
        assert_eq!(split.left_keys, vec![col(0), col(1)]);
        // Right-side expressions are renumbered from the right input's first column.
        assert_eq!(split.right_keys, vec![col(0), col(1)]);
        assert_eq!(split.left_only, vec![op(BinaryOp::Gt, col(1), int(5))]);
        assert_eq!(split.right_only, vec![op(BinaryOp::Lt, col(1), int(2))]);
        assert_eq!(split.both, vec![op(BinaryOp::Lt, col(0), col(3)), op(BinaryOp::Eq, int(1), int(1))]);
    }

    #[test]
    fn an_equality_across_an_inner_join_becomes_its_key() {
        let rel = join(JoinKind::Inner, get("a", 2), get("b", 2), (2, 2));
        let predicate = and_all(vec![op(BinaryOp::Eq, col(0), col(2)), op(BinaryOp::Gt, col(1), int(1))]).unwrap();
        // The equality becomes the key; the filter of one side goes below the join, onto that side.
        let Rel::Join { left, left_keys, right_keys, .. } = apply_filter(rel, predicate) else { panic!("the join") };
        assert_eq!((left_keys, right_keys), (vec![col(0)], vec![col(0)]));
        let Rel::Filter { input, predicate } = *left else { panic!("the left side filtered") };
        assert_eq!(predicate, op(BinaryOp::Gt, col(1), int(1)));
        assert!(matches!(*input, Rel::Get { .. }));
        // A filter of the right side is renumbered from its first column.
        let rel = join(JoinKind::Inner, get("a", 2), get("b", 2), (2, 2));
        let Rel::Join { right, .. } = apply_filter(rel, op(BinaryOp::Lt, col(3), int(7))) else { panic!("the join") };
        let Rel::Filter { predicate, .. } = *right else { panic!("the right side filtered") };
        assert_eq!(predicate, op(BinaryOp::Lt, col(1), int(7)));
        // Only the equality: no filter left.
        let rel = join(JoinKind::Inner, get("a", 2), get("b", 2), (2, 2));
        assert!(matches!(apply_filter(rel, op(BinaryOp::Eq, col(3), col(1))), Rel::Join { .. }));
    }

    #[test]
    fn an_equality_over_an_outer_join_stays_a_filter() {
        let rel = join(JoinKind::Left, get("a", 2), get("b", 2), (2, 2));
        let predicate = op(BinaryOp::Eq, col(0), col(2));
        let rewritten = apply_filter(rel.clone(), predicate.clone());
        assert_eq!(rewritten, Rel::Filter { input: Box::new(rel), predicate });
    }

    #[test]
    fn a_filter_on_a_row_number_bounds_it() {
        let top = |limit| Rel::TopK {
            input: Box::new(get("a", 2)),
            partition: vec![col(0)],
            order: vec![],
            limit,
            row_number: true,
            input_width: 2,
            location: Location::default(),
        };
        // The rank is column 2 of the top-k, column 1 of the projection over it.
        let rel = Rel::Project { input: Box::new(top(None)), exprs: vec![col(0), col(2)] };
        for (predicate, k) in [
            (op(BinaryOp::LtEq, col(1), int(3)), 3),
            (op(BinaryOp::Lt, col(1), int(3)), 2),
            (op(BinaryOp::GtEq, int(4), col(1)), 4),
            (op(BinaryOp::Eq, col(1), int(1)), 1),
        ] {
            let Rel::Filter { input, .. } = apply_filter(rel.clone(), predicate.clone()) else { panic!("kept") };
            assert_eq!(
                *input,
                Rel::Project { input: Box::new(top(Some(k))), exprs: vec![col(0), col(2)] },
                "{predicate:?}"
            );
        }
        // Not a bound: `rn = 2`, `rn > 3`, or a bound on another column.
        for predicate in
            [op(BinaryOp::Eq, col(1), int(2)), op(BinaryOp::Gt, col(1), int(3)), op(BinaryOp::LtEq, col(0), int(3))]
        {
            let Rel::Filter { input, .. } = apply_filter(rel.clone(), predicate) else { panic!("kept") };
            assert_eq!(*input, rel);
        }
    }
}
