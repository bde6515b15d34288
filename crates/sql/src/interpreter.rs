//! The interpreter: a plan (`Rel`) evaluated once, from scratch, over the
//! contents of its inputs — the answer of a one-off `SELECT`, and an oracle
//! for the rendered dataflow (the same plan must give the same rows).
//!
//! Invariants:
//! - Each operator computes what its rendered counterpart maintains, with
//!   the same helpers (`eval`, `Tuple`, `SqlAggregates`, `top_k`,
//!   `windowed`), so a one-off query and a view of the same SQL agree.
//! - Rows carry positive multiplicities; an operator never emits a row with
//!   a count of zero or less.
//! - A top-k and the projections and filters over it keep their order: the
//!   answer of an ordered query comes out in that order.

use std::collections::{BTreeMap, HashMap};

use millpond_dataflow::{Aggregate, Diff, SetUpdates, Sets};

use crate::error::{Error, Result};
use crate::eval::{eval, holds};
use crate::plan::{Expr, Input, JoinKind, Rel, SubqueryKind};
use crate::render::{SqlAggregates, Tuple, append_only, default_row, replicas, top_k, windowed};
use crate::value::{Row, Type, Value};

/// Rows with their multiplicities (each at least 1).
pub(crate) type Rows = Vec<(Row, i64)>;

/// Where a plan's leaves come from: the rows of a source, table or view
/// (read as `input`, with `columns`).
pub(crate) trait Inputs {
    fn rows(&self, input: &Input, columns: &[(String, Type)]) -> Result<Rows>;
    /// Called as an operator's rows grow (`rows` so far): an error stops the
    /// evaluation (a cancelled query, a timeout, a result past a limit).
    fn check(&self, _rows: usize) -> Result<()> {
        Ok(())
    }
}

/// Join output rows made between two checks.
const JOIN_CHECK_ROWS: usize = 4096;

/// The rows `rel` holds over `inputs`.
pub(crate) fn evaluate(rel: &Rel, inputs: &dyn Inputs) -> Result<Rows> {
    let rows = evaluate_unchecked(rel, inputs)?;
    inputs.check(rows.len())?;
    Ok(rows)
}

fn evaluate_unchecked(rel: &Rel, inputs: &dyn Inputs) -> Result<Rows> {
    Ok(match rel {
        Rel::Get { input, columns, .. } => inputs.rows(input, columns)?,
        Rel::Unit => vec![(Row::new(), 1)],
        Rel::Project { input, exprs } if exprs.iter().any(Expr::has_subquery) => {
            let mut rows = Rows::new();
            for (row, count) in evaluate(input, inputs)? {
                let exprs = exprs.iter().map(|e| answer_subqueries(e, &row, inputs)).collect::<Result<Vec<_>>>()?;
                rows.push((exprs.iter().map(|e| eval(e, &row)).collect(), count));
            }
            rows
        }
        Rel::Project { input, exprs } => evaluate(input, inputs)?
            .into_iter()
            .map(|(row, count)| (exprs.iter().map(|e| eval(e, &row)).collect(), count))
            .collect(),
        Rel::Filter { input, predicate } if predicate.has_subquery() => {
            let mut rows = Rows::new();
            for (row, count) in evaluate(input, inputs)? {
                if holds(&answer_subqueries(predicate, &row, inputs)?, &row) {
                    rows.push((row, count));
                }
            }
            rows
        }
        Rel::Filter { input, predicate } => {
            let mut rows = evaluate(input, inputs)?;
            rows.retain(|(row, _)| holds(predicate, row));
            rows
        }
        Rel::Join { kind, left, right, left_keys, right_keys, left_width, right_width } => {
            let left = evaluate(left, inputs)?;
            let right = evaluate(right, inputs)?;
            join(*kind, left, right, (left_keys, right_keys), (*left_width, *right_width), inputs)?
        }
        Rel::Aggregate { input, group, aggregates } => {
            let (aggregate, args) = SqlAggregates::new(aggregates, append_only(input));
            let mut groups: BTreeMap<Tuple, (i64, Vec<_>)> = BTreeMap::new();
            for (row, count) in evaluate(input, inputs)? {
                let (key, values) = (Tuple::eval(group, &row), Tuple::eval(&args, &row));
                let (total, state) = groups.entry(key).or_default();
                *total += count;
                aggregate.update(state, &values, count as Diff, &mut SetUpdates::none());
            }
            if group.is_empty() && groups.is_empty() {
                // SQL's global aggregate has a row even over no input.
                return Ok(vec![(default_row(aggregates), 1)]);
            }
            groups
                .into_iter()
                .map(|(key, (total, state))| {
                    let mut row = key.into_row();
                    row.extend(aggregate.output(total, &state, &Sets::none()));
                    (row, 1)
                })
                .collect()
        }
        Rel::Over { input, partition, order, calls, .. } => {
            let mut partitions: BTreeMap<Tuple, Vec<(Row, Diff)>> = BTreeMap::new();
            for (row, count) in evaluate(input, inputs)? {
                partitions.entry(Tuple::eval(partition, &row)).or_default().push((row, count as Diff));
            }
            let mut out = Vec::new();
            for rows in partitions.values() {
                crate::over::over(rows, order, calls, &mut out);
            }
            out.into_iter().map(|(row, count)| (row, count as i64)).collect()
        }
        Rel::Lateral { left, right, kind, right_width, .. } => {
            let mut rows = Rows::new();
            for (row, count) in evaluate(left, inputs)? {
                let mut per_row = right.as_ref().clone();
                per_row.map_outer(1, &mut |outer| {
                    if let Expr::Outer { column, .. } = outer {
                        *outer = Expr::Literal(row[*column].clone());
                    }
                });
                let matched = evaluate(&per_row, inputs)?;
                if matched.is_empty() && *kind == JoinKind::Left {
                    let padded = row.iter().cloned().chain(std::iter::repeat_n(Value::Null, *right_width)).collect();
                    rows.push((padded, count));
                }
                for (tail, times) in matched {
                    rows.push((row.iter().cloned().chain(tail).collect(), count * times));
                }
                inputs.check(rows.len())?;
            }
            rows
        }
        Rel::Expand { input, function, args, outer, location } => {
            let mut rows = Rows::new();
            for (row, count) in evaluate(input, inputs)? {
                let expanded = crate::table_function::expand(*function, args, *outer, &row)
                    .map_err(|message| Error::sql(location.clone(), message))?;
                rows.extend(expanded.into_iter().map(|row| (row, count)));
                inputs.check(rows.len())?;
            }
            rows
        }
        Rel::Replicate { input } => evaluate(input, inputs)?
            .into_iter()
            .map(|(mut row, count)| {
                let copies = replicas(&mut row);
                (row, count * copies)
            })
            .collect(),
        Rel::Distinct { input } => {
            let rows: BTreeMap<Row, i64> = evaluate(input, inputs)?.into_iter().collect();
            rows.into_keys().map(|row| (row, 1)).collect()
        }
        Rel::UnionAll { inputs: parts } => {
            let mut rows = Rows::new();
            for part in parts {
                rows.extend(evaluate(part, inputs)?);
            }
            rows
        }
        Rel::TopK { input, partition, order, limit, row_number, .. } => {
            let mut partitions: BTreeMap<Tuple, Vec<(Row, Diff)>> = BTreeMap::new();
            for (row, count) in evaluate(input, inputs)? {
                partitions.entry(Tuple::eval(partition, &row)).or_default().push((row, count as Diff));
            }
            let mut out = Vec::new();
            for rows in partitions.values() {
                top_k(rows, order, limit.unwrap_or(usize::MAX), *row_number, &mut out);
            }
            out.into_iter().map(|(row, count)| (row, count as i64)).collect()
        }
        Rel::Window { input, time_column, slide_micros, size_micros, cumulative } => evaluate(input, inputs)?
            .into_iter()
            .flat_map(|(row, count)| {
                windowed(row, *time_column, *slide_micros, *size_micros, *cumulative).map(move |row| (row, count))
            })
            .collect(),
    })
}

/// The largest answer a subquery in an expression may give, in rows (an
/// `IN (SELECT ...)` becomes a list of its values).
const SUBQUERY_ROWS_MAX: usize = 1_000_000;

/// `expr` over `row` with each of its subqueries answered: the subquery's
/// plan gets `row`'s values in place of its outer references, and its
/// answer takes its place (a value, or the IN list).
fn answer_subqueries(expr: &Expr, row: &[Value], inputs: &dyn Inputs) -> Result<Expr> {
    let mut expr = expr.clone();
    replace_subqueries(&mut expr, row, inputs)?;
    Ok(expr)
}

fn replace_subqueries(expr: &mut Expr, row: &[Value], inputs: &dyn Inputs) -> Result<()> {
    let Expr::Subquery { kind, operand, rel } = expr else {
        for child in expr.children_mut() {
            replace_subqueries(child, row, inputs)?;
        }
        return Ok(());
    };
    let mut rel = rel.as_ref().clone();
    rel.map_outer(1, &mut |outer| {
        if let Expr::Outer { column, .. } = outer {
            *outer = Expr::Literal(row[*column].clone());
        }
    });
    let rows = evaluate(&rel, inputs)?;
    let count: i64 = rows.iter().map(|(_, c)| *c).sum();
    if count as usize > SUBQUERY_ROWS_MAX {
        return Err(Error::Sql {
            location: crate::error::Location { file: None, line: 0, column: 0 },
            message: format!("a subquery in an expression answered {count} rows; the limit is {SUBQUERY_ROWS_MAX}"),
        });
    }
    *expr = match kind {
        SubqueryKind::Exists => Expr::Literal(Value::Bool(count > 0)),
        SubqueryKind::Scalar if count > 1 => {
            return Err(Error::Sql {
                location: crate::error::Location { file: None, line: 0, column: 0 },
                message: "more than one row returned by a subquery used as an expression".into(),
            });
        }
        SubqueryKind::Scalar => Expr::Literal(rows.into_iter().next().map_or(Value::Null, |(mut r, _)| r.remove(0))),
        SubqueryKind::Array => {
            let values: Vec<Option<String>> = rows
                .iter()
                .flat_map(|(r, c)| std::iter::repeat_n(&r[0], *c as usize))
                .map(|v| (!v.is_null()).then(|| v.to_string()))
                .collect();
            Expr::Literal(Value::Text(crate::eval::array_text(values.iter().map(Option::as_deref)).into()))
        }
        // Over no rows, IN is FALSE even for a NULL operand (an empty IN list is not).
        SubqueryKind::In if rows.is_empty() => Expr::Literal(Value::Bool(false)),
        SubqueryKind::In => {
            let mut operand = operand.take().expect("IN (subquery) has an operand");
            replace_subqueries(&mut operand, row, inputs)?;
            let list = rows.into_iter().map(|(mut r, _)| Expr::Literal(r.remove(0))).collect();
            Expr::InList { expr: operand, list }
        }
    };
    Ok(())
}

/// An equi-join of `left` and `right` on their keys: SQL's NULL never
/// equals anything, so a row whose key has a NULL matches nothing (and
/// survives an outer join unmatched).
fn join(
    kind: JoinKind,
    left: Rows,
    right: Rows,
    (left_keys, right_keys): (&[crate::plan::Expr], &[crate::plan::Expr]),
    (left_width, right_width): (usize, usize),
    inputs: &dyn Inputs,
) -> Result<Rows> {
    let mut by_key: HashMap<Tuple, Vec<usize>> = HashMap::new();
    for (index, (row, _)) in right.iter().enumerate() {
        let key = Tuple::eval(right_keys, row);
        if !key.has_null() {
            by_key.entry(key).or_default().push(index);
        }
    }
    let mut matched = vec![false; right.len()];
    let mut out = Rows::new();
    for (row, count) in left {
        let key = Tuple::eval(left_keys, &row);
        let matches = if key.has_null() { None } else { by_key.get(&key) };
        match matches {
            Some(indexes) => {
                for &index in indexes {
                    if out.len().is_multiple_of(JOIN_CHECK_ROWS) {
                        inputs.check(out.len())?;
                    }
                    matched[index] = true;
                    let (other, other_count) = &right[index];
                    let mut joined = row.clone();
                    joined.extend(other.iter().cloned());
                    out.push((joined, count * other_count));
                }
            }
            None if kind != JoinKind::Inner => {
                let mut padded = row;
                padded.extend(std::iter::repeat_n(Value::Null, right_width));
                out.push((padded, count));
            }
            None => {}
        }
    }
    if kind == JoinKind::Full {
        for ((row, count), matched) in right.into_iter().zip(matched) {
            if !matched {
                let mut padded: Row = std::iter::repeat_n(Value::Null, left_width).collect();
                padded.extend(row);
                out.push((padded, count));
            }
        }
    }
    Ok(out)
}
