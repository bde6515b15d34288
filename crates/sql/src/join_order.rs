//! Join order: the items of a comma-separated FROM are joined in an order
//! where each item after the first meets the ones before it on an equality
//! of the WHERE clause, when the written order would cross two items first
//! (`FROM t9, t56, t53 WHERE b56 = a53 AND a9 = b53`): a cross product's
//! state grows with the product of its inputs, a join's with its matches.
//!
//! Greedy, as a first cut: the first item stays first; then, repeatedly,
//! the first remaining item (in written order) that an equality links to
//! the items joined so far, or, when none is linked, the first remaining
//! one. The WHERE clause is then applied to the reordered joins (its
//! equalities become their keys: `rewrite::apply_filter`), and a
//! projection puts the columns back in written order.
//!
//! Invariants:
//! - the rows are those of the written order, column for column: only the
//!   plan's intermediate order changes (a permutation of the items, undone
//!   by the projection above);
//! - a WHERE clause that holds a subquery is not reordered (its outer
//!   references count the written order's columns).

use crate::plan::{BinaryOp, Expr, JoinKind, Rel};
use crate::rewrite::{apply_filter, conjuncts, join, project};

/// The order to join items of `widths` columns (in written order) in, given
/// the WHERE clause's `conjuncts` over their columns.
pub(crate) fn order(widths: &[usize], conjuncts: &[Expr]) -> Vec<usize> {
    let starts: Vec<usize> = widths.iter().scan(0, |at, w| Some(std::mem::replace(at, *at + w))).collect();
    let item_of = |column: usize| starts.iter().rposition(|start| *start <= column).expect("a column of some item");
    // Per equality between columns of different items: the items it reads.
    let links: Vec<Vec<usize>> = conjuncts
        .iter()
        .filter(|c| matches!(c, Expr::Binary(BinaryOp::Eq, ..)))
        .map(|c| {
            let mut items: Vec<usize> = c.columns().into_iter().map(item_of).collect();
            items.sort_unstable();
            items.dedup();
            items
        })
        .filter(|items| items.len() >= 2)
        .collect();
    let mut joined = vec![0];
    let mut remaining: Vec<usize> = (1..widths.len()).collect();
    while !remaining.is_empty() {
        let linked = remaining.iter().position(|&candidate| {
            links
                .iter()
                .any(|items| items.contains(&candidate) && items.iter().all(|i| *i == candidate || joined.contains(i)))
        });
        joined.push(remaining.remove(linked.unwrap_or(0)));
    }
    debug_assert_eq!(joined.len(), widths.len(), "every item joined once");
    joined
}

/// `items` (plans of `widths` columns, in written order) cross-joined in
/// `order`, filtered by `predicate` (over the written order's columns),
/// with the columns in written order.
pub(crate) fn joined(items: Vec<Rel>, widths: &[usize], order: &[usize], mut predicate: Expr) -> Rel {
    assert!(!predicate.has_subquery(), "a WHERE clause with a subquery keeps the written order");
    let starts: Vec<usize> = widths.iter().scan(0, |at, w| Some(std::mem::replace(at, *at + w))).collect();
    // Where each written column lands in the reordered joins.
    let mut landed = vec![0; widths.iter().sum()];
    let mut at = 0;
    for &item in order {
        for c in 0..widths[item] {
            landed[starts[item] + c] = at + c;
        }
        at += widths[item];
    }
    let mut items: Vec<Option<Rel>> = items.into_iter().map(Some).collect();
    let mut take = |i: usize| items[i].take().expect("each item once");
    let first = take(order[0]);
    let chain =
        order[1..].iter().fold(first, |left, &i| join(JoinKind::Inner, left, take(i), (Vec::new(), Vec::new())));
    predicate.map_columns(&mut |c| landed[c]);
    let filtered = apply_filter(chain, predicate);
    project(filtered, landed.into_iter().map(Expr::Column).collect())
}

/// The WHERE clause's conjuncts (a copy).
pub(crate) fn parts(predicate: &Expr) -> Vec<Expr> {
    let mut out = Vec::new();
    conjuncts(predicate.clone(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eq(a: usize, b: usize) -> Expr {
        Expr::binary(BinaryOp::Eq, Expr::Column(a), Expr::Column(b))
    }

    #[test]
    fn each_item_joins_one_it_meets_on_an_equality() {
        // Items of 2 columns: 0 = cols 0-1, 1 = 2-3, 2 = 4-5, 3 = 6-7.
        let widths = [2, 2, 2, 2];
        // 0 meets 2, 2 meets 3, 3 meets 1: written order crosses 0 and 1.
        let conjuncts = [eq(0, 4), eq(5, 6), eq(7, 2)];
        assert_eq!(order(&widths, &conjuncts), [0, 2, 3, 1]);
        assert_eq!(order(&widths, &[]), [0, 1, 2, 3], "without equalities, as written");
        let constant = Expr::binary(BinaryOp::Eq, Expr::Column(3), Expr::Literal(crate::value::Value::Int(1)));
        assert_eq!(order(&widths, &[constant, eq(0, 6)]), [0, 3, 1, 2], "a constant links nothing");
    }

    #[test]
    fn the_columns_come_back_in_written_order() {
        let get = |name: &str| Rel::Get {
            object: name.into(),
            input: crate::plan::Input::Upsert { topic: name.into() },
            columns: vec![("a".into(), crate::value::Type::Int), ("b".into(), crate::value::Type::Int)],
        };
        let rel = joined(vec![get("x"), get("y"), get("z")], &[2, 2, 2], &[0, 2, 1], eq(0, 4));
        let Rel::Project { exprs, input } = rel else { panic!("a projection on top") };
        let columns: Vec<usize> = exprs.iter().map(|e| if let Expr::Column(c) = e { *c } else { panic!() }).collect();
        assert_eq!(columns, [0, 1, 4, 5, 2, 3], "y's columns come last in the joins");
        let Rel::Join { left, .. } = *input else { panic!("the joins under it: {input:?}") };
        let Rel::Join { left_keys, right_keys, .. } = *left else { panic!("x joined with z first") };
        assert_eq!((left_keys, right_keys), (vec![Expr::Column(0)], vec![Expr::Column(0)]), "on the equality");
    }
}
