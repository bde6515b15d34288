//! Decorrelation: a view's subqueries in expressions (scalar, `EXISTS`,
//! `IN`; of a filter or a projection: WHERE, SELECT items, HAVING and
//! JOIN ... ON, an aggregated query's over its output, reading its group
//! columns) turned into joins and aggregates, so that the dataflow maintains
//! them incrementally (one-off queries answer them per row instead, in the
//! interpreter, which is the oracle for this rewrite).
//!
//! A subquery over the rows `R` of the operator it is an expression of, that
//! reads the columns `C` of `R` (its outer references), is computed once per
//! distinct value of `C` (the domain `D = DISTINCT R[C]`): the subquery's plan
//! is rewritten to carry `D`'s columns in front of its own ([`apply`]), and
//! its answer is joined back to `R` on `C`. As in Neumann and Kemper's
//! "Unnesting Arbitrary Queries" and Materialize's decorrelation:
//! - a leaf that reads no outer column is crossed with `D` (a filter above it
//!   that equates an outer column with one of its columns becomes the join's
//!   key: `apply_filter`);
//! - a GROUP BY groups by `D`'s columns too; a global aggregate keeps its row
//!   per domain value even over no rows (COUNT 0), through a left join from
//!   `D`;
//! - joins, top-k partitions and unions carry `D`'s columns through.
//!
//! Invariants:
//! - The rewritten plan computes what the interpreter computes for the
//!   original plan, row for row, NULLs included: the domain is joined back
//!   with NULL-safe keys ([`null_safe`]), since a subquery is answered for an
//!   outer NULL too; `x IN (SELECT v ...)` is TRUE on a match, NULL when there
//!   is none but `x` or some `v` is NULL (and the subquery has rows), FALSE
//!   otherwise.
//! - A scalar subquery in a view is one the binder proved to return at most
//!   one row ([`at_most_one_row`]); a view cannot stop on a second row as a
//!   one-off query does.
//! - No `Expr::Subquery` survives: rendering never meets one.

use std::collections::BTreeSet;

use crate::plan::{AggregateCall, AggregateFunction, BinaryOp, Expr, Function, JoinKind, Rel, SubqueryKind};
use crate::render::{default_row, width};
use crate::rewrite::{apply_filter, join, null_safe, project};
use crate::value::{Type, Value};

/// The depth of a lifted subquery's references to the rows it is answered
/// for, once its nested subqueries are lifted (references further out are
/// at depth 1 and up, as in the query around it).
const HERE: usize = 0;

/// What decorrelation cannot rewrite: said as "not supported: ..." by the caller.
pub(crate) type Unsupported = String;

/// `rel` with every subquery in its expressions replaced by joins.
pub(crate) fn decorrelate(mut rel: Rel) -> Result<Rel, Unsupported> {
    for input in rel.inputs_mut() {
        let taken = std::mem::replace(input, Rel::Unit);
        *input = decorrelate(taken)?;
    }
    match rel {
        Rel::Filter { input, mut predicate } if predicate.has_subquery() => {
            let input_width = width(&input);
            let mut lifted = *input;
            lift(&mut lifted, &mut predicate)?;
            let filtered = Rel::Filter { input: Box::new(lifted), predicate };
            Ok(project(filtered, (0..input_width).map(Expr::Column).collect()))
        }
        Rel::Lateral { left, right, kind, .. } => lateral(*left, *right, kind),
        Rel::Project { input, mut exprs } if exprs.iter().any(Expr::has_subquery) => {
            let mut lifted = *input;
            for expr in &mut exprs {
                lift(&mut lifted, expr)?;
            }
            Ok(project(lifted, exprs))
        }
        mut other => {
            if other.exprs_mut().iter().any(|e| e.has_subquery()) {
                return Err("a subquery in this clause (only in WHERE, SELECT items, HAVING and JOIN ... ON)".into());
            }
            Ok(other)
        }
    }
}

/// Whether `rel` returns at most one row, whatever its inputs hold: a
/// global aggregate, `LIMIT 1`, a FROM-less SELECT, and what filters,
/// projects or joins such rows.
pub(crate) fn at_most_one_row(rel: &Rel) -> bool {
    match rel {
        Rel::Aggregate { group, .. } => group.is_empty(),
        Rel::TopK { limit: Some(limit), partition, row_number: false, .. } => *limit <= 1 && partition.is_empty(),
        Rel::Unit => true,
        Rel::Project { input, .. } | Rel::Filter { input, .. } | Rel::Distinct { input } => at_most_one_row(input),
        Rel::Join { left, right, .. } => at_most_one_row(left) && at_most_one_row(right),
        Rel::UnionAll { inputs } => inputs.len() == 1 && at_most_one_row(&inputs[0]),
        Rel::Get { .. }
        | Rel::TopK { .. }
        | Rel::Window { .. }
        | Rel::Replicate { .. }
        | Rel::Over { .. }
        | Rel::Lateral { .. }
        | Rel::Expand { .. } => false,
    }
}

/// Replaces each subquery in `expr` (innermost first) by a column that
/// joins added to `rel` compute.
fn lift(rel: &mut Rel, expr: &mut Expr) -> Result<(), Unsupported> {
    for child in expr.children_mut() {
        lift(rel, child)?;
    }
    if !matches!(expr, Expr::Subquery { .. }) {
        return Ok(());
    }
    let Expr::Subquery { kind, operand, rel: subquery } = std::mem::replace(expr, Expr::Literal(Value::Null)) else {
        unreachable!("matched above")
    };
    // Its own subqueries first; then its references to the rows it is
    // answered for are at depth 0, and those to queries further out one
    // level nearer (they now stand in this query's plan).
    let mut subquery = Box::new(decorrelate(*subquery)?);
    subquery.map_outer_all(&mut |depth| depth - 1);
    let outer = std::mem::replace(rel, Rel::Unit);
    let (joined, value) = match kind {
        SubqueryKind::Scalar => scalar(outer, *subquery)?,
        SubqueryKind::Exists => exists(outer, *subquery)?,
        SubqueryKind::In => {
            let operand = *operand.expect("IN (subquery) has an operand");
            in_subquery(outer, operand, *subquery)?
        }
        SubqueryKind::Array => return Err("ARRAY(subquery) in a view".into()),
    };
    *rel = joined;
    *expr = value;
    Ok(())
}

/// The outer columns a subquery reads, and its plan with the domain's
/// columns in front (the plan itself when it reads none).
struct Correlated {
    columns: Vec<usize>,
    plan: Rel,
}

fn correlate(outer: &Rel, subquery: Rel) -> Result<Correlated, Unsupported> {
    let mut columns = BTreeSet::new();
    subquery.visit_outer(HERE, &mut |c| {
        columns.insert(c);
    });
    let columns: Vec<usize> = columns.into_iter().collect();
    if columns.is_empty() {
        return Ok(Correlated { columns, plan: subquery });
    }
    let domain =
        Rel::Distinct { input: Box::new(project(outer.clone(), columns.iter().copied().map(Expr::Column).collect())) };
    let plan = apply(&domain, &columns, subquery)?;
    Ok(Correlated { columns, plan })
}

/// `left` joined with a LATERAL subquery `right` (whose own subqueries are
/// lifted): computed once per distinct value of the left columns it reads,
/// and joined back on them (NULL-safely); a LEFT join keeps left rows
/// without rows, with NULLs.
fn lateral(left: Rel, mut right: Rel, kind: JoinKind) -> Result<Rel, Unsupported> {
    let (left_width, right_width) = (width(&left), width(&right));
    // Its references to the left row at depth 0, those further out nearer.
    right.map_outer_all(&mut |depth| depth - 1);
    let Correlated { columns, plan } = correlate(&left, right)?;
    let k = columns.len();
    let keys = (null_safe(columns.iter().copied()), null_safe(0..k));
    let joined = join(kind, left, plan, keys);
    // Drop the right side's copy of the domain's columns.
    let kept = (0..left_width).chain(left_width + k..left_width + k + right_width);
    Ok(project(joined, kept.map(Expr::Column).collect()))
}

/// `(SELECT v ...)`: its value, NULL without rows.
fn scalar(outer: Rel, subquery: Rel) -> Result<(Rel, Expr), Unsupported> {
    let outer_width = width(&outer);
    let Correlated { columns, plan } = correlate(&outer, subquery)?;
    let k = columns.len();
    let joined = left_join_on_domain(outer, plan, &columns, Vec::new(), Vec::new());
    Ok((joined, Expr::Column(outer_width + k)))
}

/// `EXISTS (SELECT ...)`: whether it has a row.
fn exists(outer: Rel, subquery: Rel) -> Result<(Rel, Expr), Unsupported> {
    let outer_width = width(&outer);
    let Correlated { columns, plan } = correlate(&outer, subquery)?;
    let k = columns.len();
    let domain_columns = || (0..k).map(Expr::Column);
    let present = Rel::Distinct { input: Box::new(project(plan, domain_columns().collect())) };
    let marked = project(present, domain_columns().chain([Expr::Literal(Value::Bool(true))]).collect());
    let joined = left_join_on_domain(outer, marked, &columns, Vec::new(), Vec::new());
    let value = Expr::Call(Function::Coalesce, vec![Expr::Column(outer_width + k), Expr::Literal(Value::Bool(false))]);
    Ok((joined, value))
}

/// `operand IN (SELECT v ...)`: a join on `operand = v` for the matches,
/// and per domain value the number of rows and of non-NULL `v`s for SQL's
/// NULL answers.
fn in_subquery(outer: Rel, operand: Expr, subquery: Rel) -> Result<(Rel, Expr), Unsupported> {
    let outer_width = width(&outer);
    let Correlated { columns, plan } = correlate(&outer, subquery)?;
    let k = columns.len();
    let domain_columns = || (0..k).map(Expr::Column);
    let value = Expr::Column(k);
    // The distinct non-NULL values per domain value, each marked TRUE.
    let non_null = Rel::Filter {
        input: Box::new(plan.clone()),
        predicate: Expr::Not(Box::new(Expr::IsNull(Box::new(value.clone())))),
    };
    let values =
        Rel::Distinct { input: Box::new(project(non_null, domain_columns().chain([value.clone()]).collect())) };
    let marked = project(values, domain_columns().chain([Expr::Column(k), Expr::Literal(Value::Bool(true))]).collect());
    let matched = left_join_on_domain(outer, marked, &columns, vec![operand.clone()], vec![Expr::Column(k)]);
    let marker = Expr::Column(outer_width + k + 1);
    // Rows and non-NULL values per domain value.
    let count = |func, arg| AggregateCall {
        func,
        distinct: false,
        arg,
        arg_type: Type::Null,
        output_type: Type::Int,
        separator: "".into(),
    };
    let counts = Rel::Aggregate {
        input: Box::new(plan),
        group: domain_columns().collect(),
        aggregates: vec![
            count(AggregateFunction::CountRows, Expr::Literal(Value::Null)),
            count(AggregateFunction::Count, value),
        ],
    };
    let counted_at = outer_width + k + 2;
    let joined = left_join_on_domain(matched, counts, &columns, Vec::new(), Vec::new());
    let rows = Expr::Call(Function::Coalesce, vec![Expr::Column(counted_at + k), Expr::Literal(Value::Int(0))]);
    let non_null_values = Expr::Column(counted_at + k + 1);
    let answer = Expr::Case(
        vec![
            (Expr::Not(Box::new(Expr::IsNull(Box::new(marker)))), Expr::Literal(Value::Bool(true))),
            (Expr::binary(BinaryOp::Eq, rows.clone(), Expr::Literal(Value::Int(0))), Expr::Literal(Value::Bool(false))),
            (
                Expr::binary(
                    BinaryOp::Or,
                    Expr::IsNull(Box::new(operand)),
                    Expr::binary(BinaryOp::Gt, rows, non_null_values),
                ),
                Expr::Literal(Value::Null),
            ),
        ],
        Box::new(Expr::Literal(Value::Bool(false))),
    );
    Ok((joined, answer))
}

/// `outer` LEFT JOIN `answer` where `outer`'s `columns` equal (NULL-safely)
/// the answer's first `columns.len()` columns, and the extra keys are equal.
fn left_join_on_domain(
    outer: Rel,
    answer: Rel,
    columns: &[usize],
    extra_outer_keys: Vec<Expr>,
    extra_answer_keys: Vec<Expr>,
) -> Rel {
    let k = columns.len();
    let mut left_keys = null_safe(columns.iter().copied());
    left_keys.extend(extra_outer_keys);
    let mut right_keys = null_safe(0..k);
    right_keys.extend(extra_answer_keys);
    join(JoinKind::Left, outer, answer, (left_keys, right_keys))
}

fn is_correlated(rel: &Rel) -> bool {
    let mut any = false;
    rel.visit_outer(HERE, &mut |_| any = true);
    any
}

/// `rel` (which reads the outer columns `columns`) computed for every row
/// of `domain` at once: the domain's columns first, then `rel`'s.
fn apply(domain: &Rel, columns: &[usize], rel: Rel) -> Result<Rel, Unsupported> {
    let k = columns.len();
    if !is_correlated(&rel) {
        return Ok(join(JoinKind::Inner, domain.clone(), rel, (Vec::new(), Vec::new())));
    }
    let remap = |mut e: Expr| {
        e.map_columns(&mut |c| c + k);
        replace_outer(&mut e, columns);
        e
    };
    let domain_columns = || (0..k).map(Expr::Column);
    Ok(match rel {
        Rel::Filter { input, predicate } => apply_filter(apply(domain, columns, *input)?, remap(predicate)),
        Rel::Project { input, exprs } => {
            project(apply(domain, columns, *input)?, domain_columns().chain(exprs.into_iter().map(remap)).collect())
        }
        Rel::Aggregate { input, group, aggregates } => {
            let global = group.is_empty();
            let aggregates: Vec<AggregateCall> =
                aggregates.into_iter().map(|a| AggregateCall { arg: remap(a.arg.clone()), ..a }).collect();
            let grouped = Rel::Aggregate {
                input: Box::new(apply(domain, columns, *input)?),
                group: domain_columns().chain(group.into_iter().map(remap)).collect(),
                aggregates: aggregates.clone(),
            };
            if global { with_default_rows(domain, grouped, &aggregates) } else { grouped }
        }
        Rel::Distinct { input } => Rel::Distinct { input: Box::new(apply(domain, columns, *input)?) },
        Rel::Replicate { input } => Rel::Replicate { input: Box::new(apply(domain, columns, *input)?) },
        // The call's arguments may read the outer row: the domain's columns.
        Rel::Expand { input, function, args, outer, location } => Rel::Expand {
            input: Box::new(apply(domain, columns, *input)?),
            function,
            args: args.into_iter().map(remap).collect(),
            outer,
            location,
        },
        Rel::Over { input, partition, order, calls, input_width } => Rel::Over {
            input: Box::new(apply(domain, columns, *input)?),
            partition: domain_columns().chain(partition.into_iter().map(remap)).collect(),
            order: order.into_iter().map(|key| crate::plan::SortKey { expr: remap(key.expr.clone()), ..key }).collect(),
            calls: calls
                .into_iter()
                .map(|c| crate::plan::WindowCall { args: c.args.into_iter().map(remap).collect(), ..c })
                .collect(),
            input_width: input_width + k,
        },
        Rel::UnionAll { inputs } => {
            Rel::UnionAll { inputs: inputs.into_iter().map(|i| apply(domain, columns, i)).collect::<Result<_, _>>()? }
        }
        Rel::TopK { input, partition, order, limit, row_number, input_width, location } => Rel::TopK {
            input: Box::new(apply(domain, columns, *input)?),
            partition: domain_columns().chain(partition.into_iter().map(remap)).collect(),
            order: order.into_iter().map(|key| crate::plan::SortKey { expr: remap(key.expr.clone()), ..key }).collect(),
            limit,
            row_number,
            input_width: input_width + k,
            location,
        },
        Rel::Window { input, time_column, slide_micros, size_micros, cumulative } => Rel::Window {
            input: Box::new(apply(domain, columns, *input)?),
            time_column: time_column + k,
            slide_micros,
            size_micros,
            cumulative,
        },
        Rel::Join { kind, left, right, left_keys, right_keys, left_width, right_width } => {
            if kind == JoinKind::Full {
                return Err("a FULL JOIN inside a correlated subquery".into());
            }
            // Both sides computed per domain value, and joined on it too.
            let left = apply(domain, columns, *left)?;
            let right = apply(domain, columns, *right)?;
            let side_keys = |keys: Vec<Expr>| keys.into_iter().map(remap);
            let keys = (
                null_safe(0..k).into_iter().chain(side_keys(left_keys)).collect(),
                null_safe(0..k).into_iter().chain(side_keys(right_keys)).collect(),
            );
            let joined = join(kind, left, right, keys);
            // Drop the right side's copy of the domain's columns.
            let kept = (0..k + left_width).chain(2 * k + left_width..2 * k + left_width + right_width);
            project(joined, kept.map(Expr::Column).collect())
        }
        Rel::Lateral { .. } => unreachable!("LATERAL subqueries are decorrelated first (bottom up)"),
        Rel::Get { .. } | Rel::Unit => unreachable!("a leaf reads no outer column"),
    })
}

/// A global aggregate grouped by the domain has no row for a domain value
/// without rows: those get SQL's default row (COUNT 0, the rest NULL).
fn with_default_rows(domain: &Rel, grouped: Rel, aggregates: &[AggregateCall]) -> Rel {
    let k = width(domain);
    let defaults = default_row(aggregates);
    let keys = (null_safe(0..k), null_safe(0..k));
    let joined = join(JoinKind::Left, domain.clone(), grouped, keys);
    let values = defaults.into_iter().enumerate().map(|(i, default)| {
        let value = Expr::Column(2 * k + i);
        match default {
            Value::Null => value,
            default => Expr::Call(Function::Coalesce, vec![value, Expr::Literal(default)]),
        }
    });
    project(joined, (0..k).map(Expr::Column).chain(values).collect())
}

/// Outer references (to the columns `columns` of the enclosing rows) become
/// references to the domain's columns, which come first.
fn replace_outer(expr: &mut Expr, columns: &[usize]) {
    if let Expr::Outer { depth: HERE, column } = expr {
        let at = columns.iter().position(|c| c == column).expect("the domain holds every outer column read");
        *expr = Expr::Column(at);
        return;
    }
    for child in expr.children_mut() {
        replace_outer(child, columns);
    }
}
