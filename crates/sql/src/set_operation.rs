//! INTERSECT and EXCEPT, with and without ALL, as joins over the inputs'
//! rows (their columns conformed to common types by the binder), so that the
//! dataflow maintains them with the operators it has.
//!
//! - `L INTERSECT R`: `DISTINCT L` joined with `DISTINCT R` on every column;
//!   each side holds a row at most once, so each match is one row.
//! - `L EXCEPT R`: `DISTINCT L` left-joined with `DISTINCT R` (and a marker
//!   column), keeping the rows the marker says found no match.
//! - `L INTERSECT ALL R`, `L EXCEPT ALL R`: each side's rows counted
//!   (GROUP BY every column, COUNT(*)), the counts joined, and each row
//!   replicated `least(m, n)` or `m - n` times (where that is at least 1).
//!
//! Invariants:
//! - Rows are compared as SQL's set operations compare them: NULL equals
//!   NULL (the joins' keys are [`null_safe`]), so `(1, NULL)` is in
//!   `(1, NULL) INTERSECT (1, NULL)`.
//! - The output has the left input's width, and each row's multiplicity is
//!   the standard's: INTERSECT and EXCEPT at most 1, INTERSECT ALL
//!   `min(m, n)`, EXCEPT ALL `max(m - n, 0)`, for a row `m` times in the
//!   left input and `n` times in the right. The interpreter computes the
//!   same plan for one-off queries, and the SQLite differential corpus
//!   checks both against SQLite.

use crate::plan::{AggregateCall, AggregateFunction, BinaryOp, Expr, Function, JoinKind, Rel};
use crate::render::width;
use crate::rewrite::{join, null_safe, project};
use crate::value::{Type, Value};

/// Which set operation, other than UNION.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetOperation {
    Intersect,
    Except,
}

/// `left OP [ALL] right`, both of the same width and column types.
pub(crate) fn set_operation(op: SetOperation, all: bool, left: Rel, right: Rel) -> Rel {
    let columns = width(&left);
    assert_eq!(columns, width(&right), "a set operation's inputs have the same width");
    let keys = || (null_safe(0..columns), null_safe(0..columns));
    let left_columns = || (0..columns).map(Expr::Column);
    match (op, all) {
        (SetOperation::Intersect, false) => {
            let joined = join(JoinKind::Inner, distinct(left), distinct(right), keys());
            project(joined, left_columns().collect())
        }
        (SetOperation::Except, false) => {
            let marked = project(distinct(right), left_columns().chain([Expr::Literal(Value::Bool(true))]).collect());
            let joined = join(JoinKind::Left, distinct(left), marked, keys());
            let unmatched = Expr::IsNull(Box::new(Expr::Column(2 * columns)));
            project(Rel::Filter { input: Box::new(joined), predicate: unmatched }, left_columns().collect())
        }
        (SetOperation::Intersect, true) => {
            // (row, m) ⋈ (row, n): the row min(m, n) times.
            let joined = join(JoinKind::Inner, counted(left), counted(right), keys());
            let (m, n) = (Expr::Column(columns), Expr::Column(2 * columns + 1));
            let copies = Expr::Call(Function::Least, vec![m, n]);
            Rel::Replicate { input: Box::new(project(joined, left_columns().chain([copies]).collect())) }
        }
        (SetOperation::Except, true) => {
            // (row, m) ⟕ (row, n): the row m - n times, where n is 0 if absent.
            let joined = join(JoinKind::Left, counted(left), counted(right), keys());
            let n = Expr::Call(Function::Coalesce, vec![Expr::Column(2 * columns + 1), Expr::Literal(Value::Int(0))]);
            let copies = Expr::binary(BinaryOp::Subtract, Expr::Column(columns), n);
            let counted = project(joined, left_columns().chain([copies]).collect());
            let positive = Expr::binary(BinaryOp::Gt, Expr::Column(columns), Expr::Literal(Value::Int(0)));
            Rel::Replicate { input: Box::new(Rel::Filter { input: Box::new(counted), predicate: positive }) }
        }
    }
}

fn distinct(input: Rel) -> Rel {
    Rel::Distinct { input: Box::new(input) }
}

/// Each distinct row of `input`, then how many times it occurs.
fn counted(input: Rel) -> Rel {
    let columns = width(&input);
    let count = AggregateCall {
        func: AggregateFunction::CountRows,
        distinct: false,
        arg: Expr::Literal(Value::Null),
        arg_type: Type::Null,
        output_type: Type::Int,
        separator: "".into(),
    };
    Rel::Aggregate { input: Box::new(input), group: (0..columns).map(Expr::Column).collect(), aggregates: vec![count] }
}
