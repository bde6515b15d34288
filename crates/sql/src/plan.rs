//! Plans: what a bound query computes, as a tree of relational operators
//! (`Rel`) over typed scalar expressions (`Expr`). The binder builds them,
//! `render` turns them into dataflow collections.
//!
//! Invariants: a `Column(i)` refers to column `i` of the operator's input
//! (for `Join`, of left columns followed by right columns); every `Expr`
//! was type-checked when bound, so evaluation never meets a type it did not
//! expect (a runtime failure such as division by zero yields NULL).

use crate::error::Location;
use crate::value::{Type, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum BinaryOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
    Eq,
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    And,
    Or,
    Concat,
    /// IS NOT DISTINCT FROM: equality where NULL equals NULL.
    NotDistinct,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Function {
    Coalesce,
    NullIf,
    Lower,
    Upper,
    Length,
    Substring,
    Trim,
    LTrim,
    RTrim,
    Replace,
    Concat,
    Position,
    SplitPart,
    Abs,
    Round,
    Floor,
    Ceil,
    Greatest,
    Least,
    /// date_trunc('unit', ts): the unit is the first argument (a literal).
    DateTrunc,
    /// `text ~ pattern` (POSIX regular expression, as Postgres; the regex crate's syntax).
    RegexMatch,
    /// `text ~* pattern`: case-insensitive.
    RegexIMatch,
    /// `format_type(type_oid, typmod)` (system catalog).
    FormatType,
    /// `array_to_string(array_text, separator [, null_text])`: arrays are
    /// their text form (`{a,b}`), as the system catalog holds them.
    ArrayToString,
    /// `array || array` (text forms): the elements of both; NULL is empty.
    ArrayCat,
    /// `x = ANY(array)`: whether an element equals `x` (compared as text).
    ArrayAny,
    QuoteIdent,
    QuoteLiteral,
    /// `array_upper(array, 1)`: its length (NULL when empty or another dimension).
    ArrayUpper,
    /// `array[i]` (1-based): the element's text, NULL out of range.
    ArrayElement,
    /// EXTRACT(field FROM x): the field is the first argument (a literal).
    Extract,
    /// `trunc(x [, digits])`: toward zero, as round's sibling.
    Trunc,
    /// DOUBLE results (module `function`): NULL out of their domain.
    Power,
    Sqrt,
    Cbrt,
    Exp,
    Ln,
    Log10,
    /// `log(base, x)`.
    LogBase,
    Sign,
    LPad,
    RPad,
    Left,
    Right,
    Reverse,
    Repeat,
    InitCap,
    StartsWith,
    Ascii,
    Chr,
    /// `regexp_replace(text, pattern, replacement, flags)` (flags a literal).
    RegexpReplace,
    /// `text SIMILAR TO pattern` with its escape character (a literal, `''` for none).
    SimilarTo,
    /// `to_char(timestamp, template)`.
    ToChar,
    /// An ordered aggregate's argument: `[value, flags, key, flags, key,
    /// ...]` (each `flags` an INT literal: 1 descending, 2 NULLS FIRST) as
    /// the TEXT `hex(order key):value` (`sort_key::ordered_value`), so that
    /// a multiset of them in text order is in the ORDER BY's order; NULL
    /// when the value is NULL. Bound for `string_agg(x, sep ORDER BY ...)`.
    OrderedValue,
    /// An element of `array_agg`'s result: the value's text in an array's
    /// text form (quoted where needed, `t`/`f` for booleans, `NULL` for
    /// NULL), never NULL, so that the aggregate keeps NULL elements.
    ArrayAggElement,
    /// `COUNT(DISTINCT a, b)`'s argument: the tuple as one TEXT, equal for
    /// tuples SQL calls equal (`sort_key::tuple_text`); NULL when any member is.
    TupleKey,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Expr {
    Column(usize),
    Literal(Value),
    Not(Box<Expr>),
    Negate(Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    IsNull(Box<Expr>),
    /// `CASE WHEN c THEN r ... ELSE e END` (a CASE with an operand is lowered to this).
    Case(Vec<(Expr, Expr)>, Box<Expr>),
    Cast(Box<Expr>, Type),
    Call(Function, Vec<Expr>),
    InList {
        expr: Box<Expr>,
        list: Vec<Expr>,
    },
    Like {
        expr: Box<Expr>,
        pattern: Box<Expr>,
        case_insensitive: bool,
    },
    /// A subquery in an expression: one-off queries only (the interpreter
    /// answers it per row of the operator it is in, with that row's values
    /// in place of its `Outer` references); a view never holds one.
    Subquery {
        kind: SubqueryKind,
        /// `operand IN (subquery)`: the operand.
        operand: Option<Box<Expr>>,
        rel: Box<Rel>,
    },
    /// Column `column` of an enclosing query's row, inside a subquery:
    /// `depth` 1 is the query the subquery is an expression of.
    Outer {
        depth: usize,
        column: usize,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SubqueryKind {
    /// `(SELECT x ...)`: its one value, NULL without rows, an error with more.
    Scalar,
    /// `EXISTS (SELECT ...)`.
    Exists,
    /// `operand IN (SELECT x ...)`, with IN's NULL semantics.
    In,
    /// `ARRAY(SELECT x ...)`: its values as an array's text form (`{a,b}`).
    Array,
}

/// A function in FROM (`table_function`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TableFunction {
    /// `unnest(array)`: a row per element.
    Unnest,
    /// `pg_options_to_table(options)`: `name=value` elements as (option_name, option_value).
    OptionsToTable,
    /// `generate_series(start, stop [, step])` of integers.
    GenerateSeries,
}

impl Expr {
    pub(crate) fn binary(op: BinaryOp, left: Expr, right: Expr) -> Expr {
        Expr::Binary(op, Box::new(left), Box::new(right))
    }
    /// Calls `f` on every column this expression reads.
    pub(crate) fn visit_columns(&self, f: &mut impl FnMut(usize)) {
        match self {
            Expr::Column(i) => f(*i),
            Expr::Literal(_) => {}
            Expr::Not(e) | Expr::Negate(e) | Expr::IsNull(e) | Expr::Cast(e, _) => e.visit_columns(f),
            Expr::Binary(_, l, r) => {
                l.visit_columns(f);
                r.visit_columns(f);
            }
            Expr::Case(whens, otherwise) => {
                for (c, r) in whens {
                    c.visit_columns(f);
                    r.visit_columns(f);
                }
                otherwise.visit_columns(f);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.visit_columns(f)),
            Expr::InList { expr, list } => {
                expr.visit_columns(f);
                list.iter().for_each(|a| a.visit_columns(f));
            }
            Expr::Like { expr, pattern, .. } => {
                expr.visit_columns(f);
                pattern.visit_columns(f);
            }
            // An outer reference is a column of an enclosing query, not of this input.
            Expr::Outer { .. } => {}
            Expr::Subquery { operand, rel, .. } => {
                if let Some(operand) = operand {
                    operand.visit_columns(f);
                }
                rel.visit_outer(1, &mut |column| f(column));
            }
        }
    }
    /// Rewrites every column reference.
    pub(crate) fn map_columns(&mut self, f: &mut impl FnMut(usize) -> usize) {
        match self {
            Expr::Column(i) => *i = f(*i),
            Expr::Literal(_) => {}
            Expr::Not(e) | Expr::Negate(e) | Expr::IsNull(e) | Expr::Cast(e, _) => e.map_columns(f),
            Expr::Binary(_, l, r) => {
                l.map_columns(f);
                r.map_columns(f);
            }
            Expr::Case(whens, otherwise) => {
                for (c, r) in whens {
                    c.map_columns(f);
                    r.map_columns(f);
                }
                otherwise.map_columns(f);
            }
            Expr::Call(_, args) => args.iter_mut().for_each(|a| a.map_columns(f)),
            Expr::InList { expr, list } => {
                expr.map_columns(f);
                list.iter_mut().for_each(|a| a.map_columns(f));
            }
            Expr::Like { expr, pattern, .. } => {
                expr.map_columns(f);
                pattern.map_columns(f);
            }
            Expr::Outer { .. } => {}
            Expr::Subquery { operand, rel, .. } => {
                if let Some(operand) = operand {
                    operand.map_columns(f);
                }
                rel.map_outer(1, &mut |outer| {
                    if let Expr::Outer { column, .. } = outer {
                        *column = f(*column);
                    }
                });
            }
        }
    }
    /// Adds to the depth of every `Outer` reference of an expression that
    /// holds no subquery (it is moved into a subquery: `f` is `depth + 1`).
    pub(crate) fn map_outer_depths(&mut self, f: &mut dyn FnMut(usize) -> usize) {
        assert!(!self.has_subquery(), "an expression without subqueries");
        if let Expr::Outer { depth, .. } = self {
            *depth = f(*depth);
        }
        self.children_mut().into_iter().for_each(|c| c.map_outer_depths(f));
    }
    /// Turns the columns of an expression that holds no subquery into
    /// references to the same columns one query out (it is moved into a
    /// subquery of the query it was over).
    pub(crate) fn map_columns_to_outer(&mut self) {
        assert!(!self.has_subquery(), "an expression without subqueries");
        if let Expr::Column(column) = *self {
            *self = Expr::Outer { depth: 1, column };
            return;
        }
        self.children_mut().into_iter().for_each(Expr::map_columns_to_outer);
    }
    /// Whether this expression reads an enclosing query's row (an `Outer`
    /// reference, or a subquery): it is no constant, even without columns.
    pub(crate) fn is_correlated(&self) -> bool {
        match self {
            Expr::Outer { .. } | Expr::Subquery { .. } => true,
            Expr::Column(_) | Expr::Literal(_) => false,
            other => other.clone().children_mut().into_iter().any(|c| c.is_correlated()),
        }
    }
    /// Whether a subquery is part of this expression.
    pub(crate) fn has_subquery(&self) -> bool {
        match self {
            Expr::Subquery { .. } => true,
            Expr::Column(_) | Expr::Literal(_) | Expr::Outer { .. } => false,
            Expr::Not(e) | Expr::Negate(e) | Expr::IsNull(e) | Expr::Cast(e, _) => e.has_subquery(),
            Expr::Binary(_, l, r) => l.has_subquery() || r.has_subquery(),
            Expr::Case(whens, otherwise) => {
                otherwise.has_subquery() || whens.iter().any(|(c, r)| c.has_subquery() || r.has_subquery())
            }
            Expr::Call(_, args) => args.iter().any(Expr::has_subquery),
            Expr::InList { expr, list } => expr.has_subquery() || list.iter().any(Expr::has_subquery),
            Expr::Like { expr, pattern, .. } => expr.has_subquery() || pattern.has_subquery(),
        }
    }
    /// The sub-expressions, mutably (not into subqueries' plans).
    pub(crate) fn children_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Expr::Column(_) | Expr::Literal(_) | Expr::Outer { .. } => Vec::new(),
            Expr::Not(e) | Expr::Negate(e) | Expr::IsNull(e) | Expr::Cast(e, _) => vec![e.as_mut()],
            Expr::Binary(_, l, r) => vec![l.as_mut(), r.as_mut()],
            Expr::Case(whens, otherwise) => {
                let mut out: Vec<&mut Expr> = whens.iter_mut().flat_map(|(c, r)| [c, r]).collect();
                out.push(otherwise.as_mut());
                out
            }
            Expr::Call(_, args) => args.iter_mut().collect(),
            Expr::InList { expr, list } => std::iter::once(expr.as_mut()).chain(list.iter_mut()).collect(),
            Expr::Like { expr, pattern, .. } => vec![expr.as_mut(), pattern.as_mut()],
            Expr::Subquery { operand, .. } => operand.iter_mut().map(|o| o.as_mut()).collect(),
        }
    }
    /// Calls `f` on every `Outer` reference at `level` (1: references of
    /// the query this expression is in to the query around it).
    fn map_outer(&mut self, level: usize, f: &mut dyn FnMut(&mut Expr)) {
        match self {
            Expr::Outer { depth, .. } if *depth == level => f(self),
            Expr::Subquery { operand, rel, .. } => {
                if let Some(operand) = operand {
                    operand.map_outer(level, f);
                }
                rel.map_outer(level + 1, f);
            }
            other => other.children_mut().into_iter().for_each(|c| c.map_outer(level, f)),
        }
    }

    pub(crate) fn columns(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.visit_columns(&mut |c| out.push(c));
        out
    }
}

impl Rel {
    /// This operator's expressions, mutably (not its inputs').
    pub(crate) fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            Rel::Expand { args, .. } => args.iter_mut().collect(),
            Rel::Get { .. }
            | Rel::Unit
            | Rel::Lateral { .. }
            | Rel::Distinct { .. }
            | Rel::UnionAll { .. }
            | Rel::Window { .. }
            | Rel::Replicate { .. } => Vec::new(),
            Rel::Over { partition, order, calls, .. } => partition
                .iter_mut()
                .chain(order.iter_mut().map(|k| &mut k.expr))
                .chain(calls.iter_mut().flat_map(|c| c.args.iter_mut()))
                .collect(),
            Rel::Project { exprs, .. } => exprs.iter_mut().collect(),
            Rel::Filter { predicate, .. } => vec![predicate],
            Rel::Join { left_keys, right_keys, .. } => left_keys.iter_mut().chain(right_keys.iter_mut()).collect(),
            Rel::Aggregate { group, aggregates, .. } => {
                group.iter_mut().chain(aggregates.iter_mut().map(|a| &mut a.arg)).collect()
            }
            Rel::TopK { partition, order, .. } => {
                partition.iter_mut().chain(order.iter_mut().map(|k| &mut k.expr)).collect()
            }
        }
    }
    /// This operator's inputs, mutably.
    pub(crate) fn inputs_mut(&mut self) -> Vec<&mut Rel> {
        match self {
            Rel::Get { .. } | Rel::Unit => Vec::new(),
            Rel::Project { input, .. }
            | Rel::Filter { input, .. }
            | Rel::Aggregate { input, .. }
            | Rel::Distinct { input }
            | Rel::TopK { input, .. }
            | Rel::Window { input, .. }
            | Rel::Replicate { input }
            | Rel::Expand { input, .. }
            | Rel::Over { input, .. } => vec![input.as_mut()],
            Rel::Join { left, right, .. } | Rel::Lateral { left, right, .. } => vec![left.as_mut(), right.as_mut()],
            Rel::UnionAll { inputs } => inputs.iter_mut().collect(),
        }
    }
    /// Calls `f` on every `Outer` reference of this plan at `level` (1: to
    /// the query whose expression this plan is).
    pub(crate) fn map_outer(&mut self, level: usize, f: &mut dyn FnMut(&mut Expr)) {
        if let Rel::Lateral { left, right, .. } = self {
            // The right side is a query inside this one.
            left.map_outer(level, f);
            right.map_outer(level + 1, f);
            return;
        }
        for expr in self.exprs_mut() {
            expr.map_outer(level, f);
        }
        for input in self.inputs_mut() {
            input.map_outer(level, f);
        }
    }
    /// Rewrites the depth of every `Outer` reference of a plan that holds no
    /// subquery (so that all its references count from the same query).
    pub(crate) fn map_outer_all(&mut self, f: &mut dyn FnMut(usize) -> usize) {
        fn walk(expr: &mut Expr, f: &mut dyn FnMut(usize) -> usize) {
            assert!(!matches!(expr, Expr::Subquery { .. }), "a plan whose subqueries were lifted");
            if let Expr::Outer { depth, .. } = expr {
                *depth = f(*depth);
            }
            expr.children_mut().into_iter().for_each(|c| walk(c, f));
        }
        if let Rel::Lateral { left, right, .. } = self {
            // The right side's depth d is d - 1 here; its depth 1 is the left row.
            left.map_outer_all(f);
            right.map_outer_all(&mut |depth| if depth <= 1 { depth } else { f(depth - 1) + 1 });
            return;
        }
        for expr in self.exprs_mut() {
            walk(expr, f);
        }
        for input in self.inputs_mut() {
            input.map_outer_all(f);
        }
    }
    /// Calls `f` with the column of every `Outer` reference at `level`.
    pub(crate) fn visit_outer(&self, level: usize, f: &mut dyn FnMut(usize)) {
        // Visiting through a copy keeps one walker (plans with subqueries are small, one-off).
        let mut copy = self.clone();
        copy.map_outer(level, &mut |outer| {
            if let Expr::Outer { column, .. } = outer {
                f(*column);
            }
        });
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AggregateFunction {
    CountRows,
    Count,
    Sum,
    Min,
    Max,
    Avg,
    /// `string_agg(text, 'separator')`: the non-NULL values in ascending
    /// order (SQL leaves the order to the system without an ORDER BY in the
    /// call), joined by the separator; NULL over none.
    StringAgg,
    /// `string_agg(x, sep ORDER BY ...)`: the argument is
    /// `Function::OrderedValue`'s `hex(key):x`, the multiset is joined in
    /// its text order (the ORDER BY's, ties by `x`), each part after its
    /// first ':'.
    StringAggOrdered,
    /// `array_agg(x [ORDER BY ...])`: as `StringAggOrdered` over
    /// `Function::ArrayAggElement(x)` (ordered by `x` without an ORDER BY),
    /// NULL elements included, as the array's text form `{a,b,NULL}`
    /// (TEXT: there is no ARRAY type); NULL over no rows.
    ArrayAgg,
}

/// One aggregate of a GROUP BY: `func([DISTINCT] arg)`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AggregateCall {
    pub(crate) func: AggregateFunction,
    pub(crate) distinct: bool,
    /// Over the aggregate's input; `Literal(Null)` for COUNT(*).
    pub(crate) arg: Expr,
    pub(crate) arg_type: Type,
    pub(crate) output_type: Type,
    /// STRING_AGG's separator (a constant); empty for the others.
    pub(crate) separator: Box<str>,
}

/// One window function of a `Rel::Over`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WindowCall {
    pub(crate) function: WindowFunction,
    /// Over the input row (LAG's value, offset and default; SUM's argument).
    pub(crate) args: Vec<Expr>,
    pub(crate) frame: Frame,
    pub(crate) ty: Type,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowFunction {
    Rank,
    DenseRank,
    PercentRank,
    CumeDist,
    Ntile,
    Lag,
    Lead,
    FirstValue,
    LastValue,
    NthValue,
    /// COUNT(*), COUNT, SUM, AVG, MIN, MAX over the frame.
    Aggregate(AggregateFunction),
    /// The start (or, with `end`, the end) of the row's session: the
    /// partition's rows whose times (the first argument) follow each other
    /// by less than `gap_micros`, from the first time to the last plus the
    /// gap (`SESSION(...)` in FROM; a NULL time is in no session).
    Session {
        end: bool,
        gap_micros: i64,
    },
}

/// A window frame: the rows from `start` to `end` around the current one,
/// counted in rows (`ROWS`) or in peers (`RANGE`: rows equal in ORDER BY;
/// its bounds with an offset are `RangePreceding` and `RangeFollowing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) rows: bool,
    pub(crate) start: FrameBound,
    pub(crate) end: FrameBound,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameBound {
    UnboundedPreceding,
    Preceding(u64),
    CurrentRow,
    Following(u64),
    UnboundedFollowing,
    /// A RANGE bound `offset PRECEDING`: the rows whose ORDER BY key is
    /// within `offset` of the current row's, toward the partition's start.
    RangePreceding(RangeOffset),
    RangeFollowing(RangeOffset),
}

/// A RANGE bound's offset: a non-negative value of the single ORDER BY
/// key's type (an INTERVAL for a TIMESTAMP), kept `Copy` as frames are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RangeOffset {
    Int(i64),
    /// Decimal units.
    Decimal(i128),
    Double(crate::value::OrderedF64),
    /// Microseconds.
    Interval(i64),
}

impl RangeOffset {
    pub(crate) fn of(value: &Value) -> Option<RangeOffset> {
        Some(match value {
            Value::Int(k) => RangeOffset::Int(*k),
            Value::Decimal(d) => RangeOffset::Decimal(d.get()),
            Value::Double(d) => RangeOffset::Double(*d),
            Value::Interval(i) => RangeOffset::Interval(*i),
            _ => return None,
        })
    }

    pub(crate) fn value(self) -> Value {
        match self {
            RangeOffset::Int(k) => Value::Int(k),
            RangeOffset::Decimal(units) => Value::Decimal(units.into()),
            RangeOffset::Double(d) => Value::Double(d),
            RangeOffset::Interval(i) => Value::Interval(i),
        }
    }
}

impl Frame {
    /// SQL's default: with ORDER BY, the partition up to the current row's
    /// last peer; without, the whole partition (every row a peer).
    pub(crate) const DEFAULT: Frame =
        Frame { rows: false, start: FrameBound::UnboundedPreceding, end: FrameBound::CurrentRow };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JoinKind {
    Inner,
    Left,
    Full,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SortKey {
    pub(crate) expr: Expr,
    pub(crate) descending: bool,
    pub(crate) nulls_first: bool,
}

/// What a view does with the late records of the sources it reads
/// (`CREATE MATERIALIZED VIEW v WITH (late_rows = 'drop' | 'dead_letter')`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum LateRows {
    /// Left out of the view (the default, as Flink and RisingWave do).
    #[default]
    Drop,
    /// Left out of the view and written to the source's dead-letter topic.
    DeadLetter,
}

/// A source's `WATERMARK FOR column AS column - delay`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EventTime {
    /// A TIMESTAMP column of the source.
    pub(crate) column: usize,
    pub(crate) delay_micros: i64,
}

/// Where a relation's rows come from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Input {
    /// An append-only source: each record is a row. With `event_time`,
    /// its late records are not (`millpond_dataflow::event_time`). With
    /// `record_timestamp`, the last column is the record's timestamp
    /// (`decode::decode_record`), the others its JSON value's.
    Source { topic: String, event_time: Option<EventTime>, record_timestamp: bool },
    /// A keyed topic read as a table (upsert envelope; also every CREATE TABLE).
    Upsert { topic: String },
    /// A materialized view's committed contents. One-off queries only: a
    /// view definition inlines the views it reads (so each view's state is
    /// its own), and rendering never meets this.
    View { view: String },
    /// A relation of the system catalog (`pg_catalog`, `information_schema`),
    /// generated from the catalog. One-off queries only, as `View`.
    System { table: crate::system::SystemTable },
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Rel {
    /// The rows of a source or table; `columns` names the JSON fields.
    Get {
        object: String,
        input: Input,
        columns: Vec<(String, Type)>,
    },
    Project {
        input: Box<Rel>,
        exprs: Vec<Expr>,
    },
    Filter {
        input: Box<Rel>,
        predicate: Expr,
    },
    /// Equi-join. Output: left columns, then right columns (NULLs where an
    /// outer join found no match). `residual` is checked on joined rows (inner only).
    Join {
        kind: JoinKind,
        left: Box<Rel>,
        right: Box<Rel>,
        left_keys: Vec<Expr>,
        right_keys: Vec<Expr>,
        right_width: usize,
        left_width: usize,
    },
    /// GROUP BY: output is the group expressions, then the aggregates. With
    /// no group expressions, exactly one row (as SQL's global aggregate).
    Aggregate {
        input: Box<Rel>,
        group: Vec<Expr>,
        aggregates: Vec<AggregateCall>,
    },
    Distinct {
        input: Box<Rel>,
    },
    UnionAll {
        inputs: Vec<Rel>,
    },
    /// The first `limit` rows per partition by `order`; with `row_number`,
    /// each row gets its 1-based position appended as a last column.
    TopK {
        input: Box<Rel>,
        partition: Vec<Expr>,
        order: Vec<SortKey>,
        limit: Option<usize>,
        row_number: bool,
        /// The input's width: the rank, when added, is column `input_width`.
        input_width: usize,
        location: Location,
    },
    /// TUMBLE/HOP/CUMULATE: each row once per window containing its time
    /// column; window_start and window_end appended (a tumble has slide ==
    /// size; a cumulate's windows all start at its period's start and end
    /// every `slide_micros`: `render::windowed`).
    Window {
        input: Box<Rel>,
        time_column: usize,
        slide_micros: i64,
        size_micros: i64,
        cumulative: bool,
    },
    /// One row with no columns, once: the input of FROM-less SELECTs and of
    /// global aggregates' default row.
    Unit,
    /// Window functions (`f(...) OVER (PARTITION BY ... ORDER BY ... frame)`):
    /// each input row with one value per call appended, computed over its
    /// partition in `order` (ties broken by the whole row): module `over`.
    Over {
        input: Box<Rel>,
        partition: Vec<Expr>,
        order: Vec<SortKey>,
        calls: Vec<WindowCall>,
        input_width: usize,
    },
    /// A table function in FROM (`table_function`): each input row followed
    /// by each row of `function` over `args` (which read the input row:
    /// LATERAL, and may read the enclosing query's, `Outer`). With `outer`
    /// (LEFT JOIN LATERAL ... ON TRUE), a row whose call gives no rows is
    /// kept once, with NULLs for the call's columns. `location`: where the
    /// call is written (its errors name it).
    Expand {
        input: Box<Rel>,
        function: TableFunction,
        args: Vec<Expr>,
        outer: bool,
        location: Location,
    },
    /// A LATERAL subquery in FROM: each `left` row, followed by each row of
    /// `right` for it (`right` reads the left row as `Outer` references at
    /// depth 1, and queries further out one level deeper than `left` does).
    /// `kind` is `Inner` or `Left` (a left row without rows is kept once,
    /// with NULLs). One-off queries answer it per left row; a view's is
    /// decorrelated into joins (`decorrelate`), so rendering never meets it.
    Lateral {
        left: Box<Rel>,
        right: Box<Rel>,
        kind: JoinKind,
        left_width: usize,
        right_width: usize,
    },
    /// Each input row as many times as its last column says, without that
    /// column: INTERSECT ALL and EXCEPT ALL (`set_operation`). The count is
    /// an INT of at least 1 (a filter below keeps only such rows).
    Replicate {
        input: Box<Rel>,
    },
}
