//! Table functions in FROM (`unnest`, `generate_series`,
//! `pg_options_to_table`): the rows one call gives for its argument values,
//! shared by one-off queries (the interpreter) and views (the dataflow), so
//! that both expand a row alike.
//!
//! A call is a [`crate::plan::Rel::Expand`]: each input row, followed by
//! each row of the call over that row (LATERAL: the arguments may read the
//! FROM items before it). A call is a function of its row alone, so the
//! dataflow expands changes as they come: a retracted row retracts the
//! rows it expanded to, and no state is kept.
//!
//! Invariants:
//! - a call gives at most [`EXPANSION_ROWS_MAX`] rows: past it, a one-off
//!   query fails with an error naming the call; a view's row expands to
//!   no rows (as a run-time error is a NULL in a view: one bad row never
//!   stops it), and so does a zero step;
//! - every row of a call has [`TableFunction::width`] columns.

use crate::eval::eval;
use crate::plan::{Expr, TableFunction};
use crate::value::{Row, Type, Value};

/// The most rows one call may give.
pub(crate) const EXPANSION_ROWS_MAX: i64 = 10_000_000;

/// Why a call gives no answer.
pub(crate) type CallError = String;

impl TableFunction {
    /// The name it is called by.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TableFunction::Unnest => "unnest",
            TableFunction::OptionsToTable => "pg_options_to_table",
            TableFunction::GenerateSeries => "generate_series",
        }
    }

    /// Its output columns, a one-column function's named `alias` (as Postgres).
    pub(crate) fn columns(self, alias: &str) -> Vec<(String, Type)> {
        match self {
            TableFunction::Unnest => vec![(alias.to_owned(), Type::Text)],
            TableFunction::GenerateSeries => vec![(alias.to_owned(), Type::Int)],
            TableFunction::OptionsToTable => {
                vec![("option_name".into(), Type::Text), ("option_value".into(), Type::Text)]
            }
        }
    }

    /// How many columns each of its rows has.
    pub(crate) fn width(self) -> usize {
        match self {
            TableFunction::Unnest | TableFunction::GenerateSeries => 1,
            TableFunction::OptionsToTable => 2,
        }
    }

    /// The rows of a call with argument values `values` (arity checked by
    /// the binder).
    pub(crate) fn rows(self, values: &[Value]) -> Result<Vec<Row>, CallError> {
        let rows = match self {
            TableFunction::Unnest => elements(&values[0]).into_iter().map(|e| vec![text(e)]).collect(),
            TableFunction::OptionsToTable => elements(&values[0]).into_iter().map(option).collect(),
            TableFunction::GenerateSeries => series(values)?,
        };
        debug_assert!(rows.iter().all(|row: &Row| row.len() == self.width()), "{} rows have its width", self.name());
        Ok(rows)
    }
}

/// `row` followed by each row of `function` over `args` (evaluated on
/// `row`); with `outer`, `row` followed by NULLs when the call gives none.
pub(crate) fn expand(
    function: TableFunction,
    args: &[Expr],
    outer: bool,
    row: &[Value],
) -> Result<Vec<Row>, CallError> {
    let values: Vec<Value> = args.iter().map(|a| eval(a, row)).collect();
    let called = function.rows(&values)?;
    if called.is_empty() {
        return Ok(expand_none(function, outer, row));
    }
    Ok(called.into_iter().map(|tail| row.iter().cloned().chain(tail).collect()).collect())
}

/// What `row` expands to when its call gives no rows.
pub(crate) fn expand_none(function: TableFunction, outer: bool, row: &[Value]) -> Vec<Row> {
    match outer {
        true => vec![row.iter().cloned().chain(std::iter::repeat_n(Value::Null, function.width())).collect()],
        false => Vec::new(),
    }
}

fn text(element: Option<String>) -> Value {
    element.map_or(Value::Null, |s| Value::Text(s.into()))
}

/// The elements of an array's text form (none for NULL or a text that is
/// not an array).
fn elements(value: &Value) -> Vec<Option<String>> {
    match value {
        Value::Null => Vec::new(),
        value => crate::eval::array_elements(&value.to_string()).unwrap_or_default(),
    }
}

/// A `name=value` option as (option_name, option_value).
fn option(element: Option<String>) -> Row {
    match element {
        Some(element) => match element.split_once('=') {
            Some((name, value)) => vec![text(Some(name.to_owned())), text(Some(value.to_owned()))],
            None => vec![text(Some(element)), Value::Null],
        },
        None => vec![Value::Null, Value::Null],
    }
}

/// `generate_series(start, stop [, step])`: none when an argument is NULL.
fn series(values: &[Value]) -> Result<Vec<Row>, CallError> {
    let int = |v: Option<&Value>| match v {
        Some(Value::Int(i)) => Some(*i),
        _ => None,
    };
    let (Some(start), Some(stop)) = (int(values.first()), int(values.get(1))) else { return Ok(Vec::new()) };
    let step = if values.len() > 2 { int(values.get(2)) } else { Some(1) };
    let Some(step) = step else { return Ok(Vec::new()) };
    if step == 0 {
        return Err("step size cannot equal zero".into());
    }
    let count = ((i128::from(stop) - i128::from(start)) / i128::from(step) + 1).max(0);
    if count > i128::from(EXPANSION_ROWS_MAX) {
        return Err(format!("generate_series() of {count} rows; the limit is {EXPANSION_ROWS_MAX}"));
    }
    Ok((0..count as i64).map(|i| vec![Value::Int(start + i * step)]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(rows: Vec<Row>) -> Vec<i64> {
        rows.into_iter().map(|r| if let Value::Int(i) = r[0] { i } else { panic!("{r:?}") }).collect()
    }

    #[test]
    fn a_series_counts_by_its_step_both_ways() {
        let call =
            |args: &[i64]| TableFunction::GenerateSeries.rows(&args.iter().map(|i| Value::Int(*i)).collect::<Vec<_>>());
        assert_eq!(ints(call(&[1, 4]).unwrap()), [1, 2, 3, 4]);
        assert_eq!(ints(call(&[10, 1, -4]).unwrap()), [10, 6, 2]);
        assert!(call(&[5, 1]).unwrap().is_empty(), "a stop before the start gives no rows");
        assert!(call(&[1, 5, 0]).is_err());
        assert!(call(&[0, EXPANSION_ROWS_MAX]).is_err(), "past the limit");
        let null = TableFunction::GenerateSeries.rows(&[Value::Int(1), Value::Null]).unwrap();
        assert!(null.is_empty());
    }

    #[test]
    fn unnest_and_options_read_an_arrays_text() {
        let array = Value::Text(r#"{a,"b c",NULL}"#.into());
        let rows = TableFunction::Unnest.rows(std::slice::from_ref(&array)).unwrap();
        assert_eq!(rows, vec![vec![Value::Text("a".into())], vec![Value::Text("b c".into())], vec![Value::Null]]);
        let options = TableFunction::OptionsToTable.rows(&[Value::Text("{x=1,y}".into())]).unwrap();
        assert_eq!(options[0], vec![Value::Text("x".into()), Value::Text("1".into())]);
        assert_eq!(options[1], vec![Value::Text("y".into()), Value::Null]);
        assert!(TableFunction::Unnest.rows(&[Value::Null]).unwrap().is_empty());
    }

    #[test]
    fn a_row_is_followed_by_each_row_of_its_call_or_by_nulls_when_outer() {
        let row = vec![Value::Int(2), Value::Text("k".into())];
        let args = [Expr::Literal(Value::Int(1)), Expr::Column(0)];
        let rows = expand(TableFunction::GenerateSeries, &args, false, &row).unwrap();
        assert_eq!(
            rows,
            vec![[row.clone(), vec![Value::Int(1)]].concat(), [row.clone(), vec![Value::Int(2)]].concat()]
        );
        let none = [Expr::Literal(Value::Int(3)), Expr::Column(0)];
        assert!(expand(TableFunction::GenerateSeries, &none, false, &row).unwrap().is_empty());
        let kept = expand(TableFunction::GenerateSeries, &none, true, &row).unwrap();
        assert_eq!(kept, vec![[row.clone(), vec![Value::Null]].concat()]);
    }
}
