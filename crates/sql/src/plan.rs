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
    /// EXTRACT(field FROM x): the field is the first argument (a literal).
    Extract,
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
        }
    }
    pub(crate) fn columns(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.visit_columns(&mut |c| out.push(c));
        out
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

/// Where a relation's rows come from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Input {
    /// An append-only source: each record is a row.
    Source { topic: String },
    /// A keyed topic read as a table (upsert envelope; also every CREATE TABLE).
    Upsert { topic: String },
    /// A materialized view's committed contents. One-off queries only: a
    /// view definition inlines the views it reads (so each view's state is
    /// its own), and rendering never meets this.
    View { view: String },
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
    /// TUMBLE/HOP: each row once per window containing its time column;
    /// window_start and window_end appended (a tumble has slide == size).
    Window {
        input: Box<Rel>,
        time_column: usize,
        slide_micros: i64,
        size_micros: i64,
    },
    /// One row with no columns, once: the input of FROM-less SELECTs and of
    /// global aggregates' default row.
    Unit,
}
