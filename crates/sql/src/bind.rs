//! Binding: a parsed query against the catalog, to a typed [`Rel`] plan.
//!
//! Names are resolved here (with a suggestion when one is misspelled),
//! types are checked and implicit conversions made explicit, views are
//! inlined, and SQL shapes the dataflow runs differently are recognised:
//! `ROW_NUMBER() ... WHERE rn <= k` and `ORDER BY ... LIMIT k` become top-k,
//! equalities in `ON`/`WHERE` become join keys.
//!
//! Invariant: whatever binds is computed exactly as SQL defines it; what
//! cannot be is refused with "not supported: ...", never approximated.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use sqlparser::ast::{self, Spanned};

use crate::catalog::{Catalog, ObjectKind, suggestion};
use crate::decorrelate::at_most_one_row;
use crate::error::{Error, Location, Result};
use crate::eval::eval;
use crate::parse::NESTING_MAX;
use crate::plan::{
    AggregateCall, AggregateFunction, BinaryOp, Expr, Frame, FrameBound, Function, Input, JoinKind, Rel, SortKey,
    SubqueryKind, TableFunction, WindowCall, WindowFunction,
};
use crate::rewrite::{JoinCondition, aggregate, and_all, apply_filter, conjuncts, split_condition};
use crate::set_operation::{SetOperation, set_operation};
use crate::time;
use crate::value::{Type, Value, cast, parse_decimal};

/// Views inline views; this bounds the nesting (and catches cycles).
/// The most windows a HOP or CUMULATE puts one row in.
const WINDOWS_PER_ROW_MAX: i64 = 1000;
const VIEW_DEPTH_MAX: usize = 32;

#[derive(Clone, Debug)]
pub(crate) struct ScopeColumn {
    pub(crate) table: Option<String>,
    pub(crate) name: String,
    pub(crate) ty: Type,
    /// A side's copy of a `JOIN ... USING` column: reached by its qualified
    /// name only, and left out of `SELECT *` (the merged column stands for it).
    pub(crate) qualified_only: bool,
}

/// The columns visible at a point of a query, in the order of the rows.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scope {
    pub(crate) columns: Vec<ScopeColumn>,
}

/// A bound relation: its plan and its output columns.
#[derive(Clone, Debug)]
pub(crate) struct Bound {
    pub(crate) rel: Rel,
    pub(crate) scope: Scope,
}

/// How expressions are bound: over rows, or over groups.
enum Context<'a> {
    Rows(&'a Scope),
    Groups { input: &'a Scope, group: &'a [(Expr, Type)], aggregates: &'a mut Vec<AggregateCall> },
}

/// What an aggregated query's SELECT items and HAVING bind to
/// (`Binder::bind_grouped_items`).
struct GroupedItems {
    exprs: Vec<Expr>,
    columns: Vec<ScopeColumn>,
    aggregates: Vec<AggregateCall>,
    having: Option<Expr>,
    /// The window functions over the groups, in the order of their columns.
    windows: Vec<WindowParts>,
}

/// Where an aggregated query's items read its window functions while its
/// aggregates are still being found: column `WINDOW_PLACEHOLDER + i` is
/// window `i`, moved after the aggregates once they are all known.
const WINDOW_PLACEHOLDER: usize = usize::MAX / 2;

/// A bound window function: `Rel::TopK` with its rank for ROW_NUMBER
/// (`call` None), else `Rel::Over` with its call.
struct WindowParts {
    partition: Vec<Expr>,
    order: Vec<SortKey>,
    call: Option<WindowCall>,
    location: Location,
}

impl WindowParts {
    fn ty(&self) -> Type {
        self.call.as_ref().map_or(Type::Int, |call| call.ty)
    }

    /// `input` with the window's value appended as column `at` (its width).
    fn over(self, input: Rel, at: usize) -> Rel {
        let WindowParts { partition, order, call, location } = self;
        match call {
            None => Rel::TopK {
                input: Box::new(input),
                partition,
                order,
                limit: None,
                row_number: true,
                input_width: at,
                location,
            },
            Some(call) => Rel::Over { input: Box::new(input), partition, order, calls: vec![call], input_width: at },
        }
    }
}

/// A CTE: its position in its WITH, its query and its alias.
type Cte = (usize, ast::Query, Option<ast::TableAlias>);

pub(crate) struct Binder<'a> {
    pub(crate) catalog: &'a Catalog,
    file: Option<Arc<str>>,
    /// Where the statement starts, for nodes that carry no span.
    statement: Location,
    /// The CTEs in scope, one map per WITH.
    ctes: Vec<BTreeMap<String, Cte>>,
    view_depth: usize,
    /// How deep the query bound so far nests, with the views inlined into
    /// it (at most `NESTING_MAX`: every pass over the plan recurses).
    pub(crate) nesting: usize,
    /// Every catalog object the bound query reads, directly or through views.
    pub(crate) dependencies: BTreeSet<String>,
    /// The view whose definition is bound, if any: naming it in its own
    /// query is an error there.
    pub(crate) defining: Option<String>,
    /// Binding a one-off query (a SELECT answered once, not a view):
    /// materialized views are read as their committed snapshots
    /// (`Input::View`), and the outermost query may ORDER BY without LIMIT
    /// and have an OFFSET.
    pub(crate) one_off: bool,
    /// The outermost query's OFFSET (one-off queries only): rows the answer skips.
    pub(crate) offset: usize,
    /// Set by the caller of a one-off query; taken by its outermost query.
    pub(crate) outermost: bool,
    /// Describing a statement of the extended protocol: its `$n`
    /// placeholders bind as NULLs, and each gets the type of what it is
    /// compared with, combined with or cast to (`None`: placeholders are
    /// refused, as a statement without parameters has none).
    pub(crate) parameters: Option<std::cell::RefCell<Vec<Option<Type>>>>,
    /// What a one-off query sees besides the catalog (its connection's
    /// database, user and settings): the system catalog and functions such
    /// as current_database() need it; `None` outside one-off queries.
    pub(crate) system: Option<crate::system::SystemContext>,
    /// The scopes of the queries a subquery being bound is in, innermost
    /// last (one-off queries only): its `Outer` references resolve there.
    outer: Vec<Scope>,
    /// Whether the expression being bound may hold a subquery (WHERE and
    /// SELECT items, over rows).
    subqueries: bool,
    /// What the statement should be told of what was accepted but changes
    /// nothing (an ORDER BY a view cannot keep), in the order found.
    pub(crate) notices: Vec<(Location, String)>,
    /// Set for the query of an `ARRAY(SELECT ...)`, taken by it: its ORDER
    /// BY orders the array, so it needs no LIMIT.
    ordered: bool,
    /// The window functions of the SELECT items being bound, each with the
    /// column it was appended as (`bind_rows`), and its type.
    windows: Vec<(ast::Function, usize, Type)>,
}

/// Why a subquery is refused where expressions may not hold one.
const SUBQUERY_REFUSED: &str = "subqueries in expressions (use a join or a subquery in FROM)";

/// Placeholders a statement may have (`$1` to `$65535`: the Bind message
/// counts its parameters in 16 bits).
pub(crate) const PARAMETERS_MAX: usize = u16::MAX as usize;

/// The 1-based index of a `$n` placeholder.
pub(crate) fn placeholder_index(expr: &ast::Expr) -> Option<usize> {
    match expr {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Placeholder(p) => parameter_number(p),
            _ => None,
        },
        ast::Expr::Nested(inner) => placeholder_index(inner),
        _ => None,
    }
}

/// `$n` as `n`, if it is a placeholder number in 1..=[`PARAMETERS_MAX`].
fn parameter_number(placeholder: &str) -> Option<usize> {
    placeholder.strip_prefix('$')?.parse().ok().filter(|n| (1..=PARAMETERS_MAX).contains(n))
}

/// An identifier as SQL compares it: unquoted names are case-insensitive.
pub(crate) fn normalize(ident: &ast::Ident) -> String {
    if ident.quote_style.is_some() { ident.value.clone() } else { ident.value.to_lowercase() }
}

fn object_name(name: &ast::ObjectName) -> Option<&ast::Ident> {
    match name.0.as_slice() {
        [ast::ObjectNamePart::Identifier(ident)] => Some(ident),
        _ => None,
    }
}

/// `'name'::regclass`: the name, when `expr` is a text constant cast so.
fn regclass_literal(expr: &ast::Expr, target: &ast::DataType) -> Option<String> {
    let last = match target {
        ast::DataType::Regclass => "regclass".to_owned(),
        ast::DataType::Custom(type_name, _) => type_name.0.last()?.to_string().to_lowercase(),
        _ => return None,
    };
    let ast::Expr::Value(value) = expr else { return None };
    match (&value.value, last.as_str()) {
        (ast::Value::SingleQuotedString(name), "regclass") if name.parse::<i64>().is_err() => Some(name.clone()),
        _ => None,
    }
}

/// `ARRAY(SELECT ...)`.
fn is_array_subquery(function: &ast::Function) -> bool {
    matches!(function.args, ast::FunctionArguments::Subquery(_)) && function_name(function) == "array"
}

/// The binary operator a symbol names (in `OPERATOR(pg_catalog.symbol)`).
fn operator_symbol(symbol: &str) -> Option<ast::BinaryOperator> {
    use ast::BinaryOperator as B;
    Some(match symbol {
        "=" => B::Eq,
        "<>" | "!=" => B::NotEq,
        "<" => B::Lt,
        "<=" => B::LtEq,
        ">" => B::Gt,
        ">=" => B::GtEq,
        "+" => B::Plus,
        "-" => B::Minus,
        "*" => B::Multiply,
        "/" => B::Divide,
        "%" => B::Modulo,
        "||" => B::StringConcat,
        "~" => B::PGRegexMatch,
        "~*" => B::PGRegexIMatch,
        "!~" => B::PGRegexNotMatch,
        "!~*" => B::PGRegexNotIMatch,
        _ => return None,
    })
}

fn is_aggregate_name(name: &str) -> bool {
    matches!(
        name,
        "count"
            | "sum"
            | "min"
            | "max"
            | "avg"
            | "string_agg"
            | "array_agg"
            | "bool_and"
            | "bool_or"
            | "every"
            | "total"
            | "variance"
            | "var_samp"
            | "var_pop"
            | "stddev"
            | "stddev_samp"
            | "stddev_pop"
    )
}

fn function_name(function: &ast::Function) -> String {
    match function.name.0.as_slice() {
        [ast::ObjectNamePart::Identifier(schema), ast::ObjectNamePart::Identifier(name)]
            if normalize(schema) == "pg_catalog" =>
        {
            normalize(name)
        }
        _ => object_name(&function.name).map(normalize).unwrap_or_else(|| function.name.to_string().to_lowercase()),
    }
}

/// Whether an expression contains an aggregate call (outside subqueries).
fn contains_aggregate(expr: &ast::Expr) -> bool {
    let mut found = Vec::new();
    calls(expr, &mut found);
    found.iter().any(|f| f.over.is_none() && is_aggregate_name(&function_name(f)))
}

/// The window function calls of an expression (outside subqueries).
/// The distinct window function calls of `items`' expressions, in order of
/// first appearance (each is computed once, however often it is written).
fn item_window_calls<'i>(items: &'i [(Item<'_>, String)]) -> Vec<&'i ast::Function> {
    let mut calls: Vec<&ast::Function> = Vec::new();
    for (item, _) in items {
        let Item::Expr(e) = item else { continue };
        for function in window_calls(e) {
            if !calls.contains(&function) {
                calls.push(function);
            }
        }
    }
    calls
}

fn window_calls(expr: &ast::Expr) -> Vec<&ast::Function> {
    let mut found = Vec::new();
    calls(expr, &mut found);
    found.retain(|f| f.over.is_some());
    found
}

/// Every function call of an expression, nested ones too, outside subqueries.
fn calls<'e>(expr: &'e ast::Expr, out: &mut Vec<&'e ast::Function>) {
    use ast::Expr as E;
    match expr {
        E::Function(f) => {
            out.push(f);
            for arg in function_args(f) {
                if let FunctionArgument::Expr(e) = arg {
                    calls(e, out);
                }
            }
        }
        E::BinaryOp { left, right, .. } => {
            calls(left, out);
            calls(right, out);
        }
        E::UnaryOp { expr, .. }
        | E::Nested(expr)
        | E::IsNull(expr)
        | E::IsNotNull(expr)
        | E::IsTrue(expr)
        | E::IsFalse(expr)
        | E::IsNotTrue(expr)
        | E::IsNotFalse(expr)
        | E::Cast { expr, .. }
        | E::Extract { expr, .. }
        | E::Ceil { expr, .. }
        | E::Floor { expr, .. } => calls(expr, out),
        E::Case { operand, conditions, else_result, .. } => {
            operand.iter().for_each(|o| calls(o, out));
            for c in conditions {
                calls(&c.condition, out);
                calls(&c.result, out);
            }
            else_result.iter().for_each(|e| calls(e, out));
        }
        E::Between { expr, low, high, .. } => [expr, low, high].into_iter().for_each(|e| calls(e, out)),
        // IN's and ANY's operands are outside their subqueries.
        E::In { expr, target, .. } => {
            calls(expr, out);
            if let ast::InTarget::List(list) = target {
                list.iter().for_each(|e| calls(e, out));
            }
        }
        E::AnyOp { left, right, .. } | E::AllOp { left, right, .. } => {
            calls(left, out);
            if !matches!(right.as_ref(), E::Subquery(_)) {
                calls(right, out);
            }
        }
        E::Like { expr, pattern, .. } | E::ILike { expr, pattern, .. } | E::SimilarTo { expr, pattern, .. } => {
            calls(expr, out);
            calls(pattern, out);
        }
        E::IsDistinctFrom(a, b) | E::IsNotDistinctFrom(a, b) => {
            calls(a, out);
            calls(b, out);
        }
        E::Substring { expr, substring_from, substring_for, .. } => {
            calls(expr, out);
            substring_from.iter().chain(substring_for).for_each(|e| calls(e, out));
        }
        E::Trim { expr, trim_what, .. } => {
            calls(expr, out);
            trim_what.iter().for_each(|e| calls(e, out));
        }
        E::Position { expr, r#in } => {
            calls(expr, out);
            calls(r#in, out);
        }
        _ => {}
    }
}

enum FunctionArgument<'e> {
    Expr(&'e ast::Expr),
    Star,
}

fn function_args(function: &ast::Function) -> Vec<FunctionArgument<'_>> {
    match &function.args {
        ast::FunctionArguments::List(list) => list
            .args
            .iter()
            .map(|arg| match arg {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))
                | ast::FunctionArg::Named { arg: ast::FunctionArgExpr::Expr(e), .. } => FunctionArgument::Expr(e),
                _ => FunctionArgument::Star,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Maps a declared SQL type to ours.
pub(crate) fn data_type(data_type: &ast::DataType) -> Option<Type> {
    use ast::DataType as D;
    Some(match data_type {
        D::Bool | D::Boolean => Type::Bool,
        D::TinyInt(_)
        | D::SmallInt(_)
        | D::Int(_)
        | D::Int2(_)
        | D::Int4(_)
        | D::Int8(_)
        | D::Int16
        | D::Int32
        | D::Int64
        | D::Integer(_)
        | D::BigInt(_) => Type::Int,
        D::Float(_) | D::Float4 | D::Float8 | D::Float32 | D::Float64 | D::Real | D::Double(_) | D::DoublePrecision => {
            Type::Double
        }
        D::Numeric(info) | D::Decimal(info) | D::Dec(info) => {
            let (precision, scale) = match info {
                ast::ExactNumberInfo::None => (38, 6),
                ast::ExactNumberInfo::Precision(p) => (*p, 0),
                ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p, u64::try_from(*s).ok()?),
            };
            if !(1..=38).contains(&precision) || scale > precision || scale > 6 {
                return None;
            }
            Type::Decimal { precision: precision as u8, scale: scale as u8 }
        }
        D::Text
        | D::String(_)
        | D::Varchar(_)
        | D::CharVarying(_)
        | D::CharacterVarying(_)
        | D::Char(_)
        | D::Character(_) => Type::Text,
        D::Timestamp(_, ast::TimezoneInfo::None | ast::TimezoneInfo::WithoutTimeZone) | D::Datetime(_) => {
            Type::Timestamp
        }
        D::Date => Type::Date,
        D::Interval { .. } => Type::Interval,
        D::Custom(name, modifiers) if modifiers.is_empty() => return custom_type(name),
        D::Regclass => Type::Int,
        _ => return None,
    })
}

/// Postgres's own type names (`oid`, `name`, `"char"`, ...), possibly
/// qualified with `pg_catalog`: object ids are numbers (BIGINT), names text.
fn custom_type(name: &ast::ObjectName) -> Option<Type> {
    let parts: Vec<String> = name.0.iter().map(|p| p.to_string().trim_matches('"').to_lowercase()).collect();
    let base = match parts.as_slice() {
        [base] => base,
        [schema, base] if schema == "pg_catalog" => base,
        _ => return None,
    };
    Some(match base.as_str() {
        "oid" | "regclass" | "regtype" | "regproc" | "regprocedure" | "regnamespace" | "regrole" | "xid" => Type::Int,
        "name" | "char" | "bpchar" | "text" | "varchar" => Type::Text,
        "int2" | "int4" | "int8" => Type::Int,
        "float4" | "float8" => Type::Double,
        "bool" => Type::Bool,
        _ => return None,
    })
}

fn literal_int(expr: &Expr) -> Option<i64> {
    match expr {
        Expr::Literal(Value::Int(i)) => Some(*i),
        _ => None,
    }
}

impl<'a> Binder<'a> {
    pub(crate) fn new(catalog: &'a Catalog, file: Option<Arc<str>>, statement: Location) -> Binder<'a> {
        Binder {
            catalog,
            file,
            statement,
            ctes: Vec::new(),
            view_depth: 0,
            nesting: 0,
            dependencies: BTreeSet::new(),
            defining: None,
            one_off: false,
            system: None,
            outer: Vec::new(),
            subqueries: false,
            windows: Vec::new(),
            notices: Vec::new(),
            ordered: false,
            offset: 0,
            outermost: false,
            parameters: None,
        }
    }

    fn location(&self, span: sqlparser::tokenizer::Span) -> Location {
        if span.start.line == 0 {
            return self.statement.clone();
        }
        Location { file: self.file.clone(), line: span.start.line, column: span.start.column }
    }
    pub(crate) fn error(&self, span: sqlparser::tokenizer::Span, message: impl Into<String>) -> Error {
        Error::sql(self.location(span), message)
    }
    pub(crate) fn unsupported(&self, span: sqlparser::tokenizer::Span, what: impl std::fmt::Display) -> Error {
        Error::sql(self.location(span), format!("not supported: {what}"))
    }

    /// Binds a query to a plan; output column names must be unique when
    /// `unique_names` (a view's columns become JSON fields).
    pub(crate) fn bind_view_query(&mut self, query: &ast::Query) -> Result<Bound> {
        let mut bound = self.bind_query(query)?;
        // A view's rows are keyed by column name: a repeated name is given
        // the first free `name_N`, and the statement told so.
        for (i, name, renamed) in rename_repeated(&mut bound.scope) {
            let at = self.location(item_span(&query.body, i).unwrap_or(query.span()));
            self.notices.push((
                at,
                format!(
                    "the view has two columns named \"{name}\": column {} is named \"{renamed}\" (give it an alias \
                     with AS to choose)",
                    i + 1
                ),
            ));
        }
        self.check_top_k(&bound.rel)?;
        Ok(bound)
    }

    /// Binds a row-level expression (no aggregates) over `scope`.
    pub(crate) fn bind_scalar(&mut self, expr: &ast::Expr, scope: &Scope) -> Result<Expr> {
        if contains_aggregate(expr) {
            return Err(self.error(expr.span(), "aggregate functions are not allowed here"));
        }
        Ok(self.bind_expr(expr, &mut Context::Rows(scope))?.0)
    }

    /// Every ROW_NUMBER() must have been limited by an outer filter.
    fn check_top_k(&self, rel: &Rel) -> Result<()> {
        match rel {
            Rel::Get { .. } | Rel::Unit => Ok(()),
            Rel::Project { input, .. }
            | Rel::Filter { input, .. }
            | Rel::Aggregate { input, .. }
            | Rel::Distinct { input }
            | Rel::TopK { input, .. }
            | Rel::Window { input, .. }
            | Rel::Replicate { input }
            | Rel::Expand { input, .. }
            | Rel::Over { input, .. } => self.check_top_k(input),
            Rel::Join { left, right, .. } | Rel::Lateral { left, right, .. } => {
                self.check_top_k(left)?;
                self.check_top_k(right)
            }
            Rel::UnionAll { inputs } => inputs.iter().try_for_each(|i| self.check_top_k(i)),
        }
    }

    pub(crate) fn bind_query(&mut self, query: &ast::Query) -> Result<Bound> {
        if let Some(with) = &query.with {
            if with.recursive {
                return Err(self.unsupported(query.span(), "WITH RECURSIVE"));
            }
            let mut ctes = BTreeMap::new();
            for (position, cte) in with.cte_tables.iter().enumerate() {
                let name = normalize(&cte.alias.name);
                if ctes.contains_key(&name) {
                    return Err(self.error(cte.alias.name.span, format!("WITH names \"{name}\" twice")));
                }
                ctes.insert(name, (position, *cte.query.clone(), Some(cte.alias.clone())));
            }
            self.ctes.push(ctes);
        }
        let result = self.bind_query_body(query);
        if query.with.is_some() {
            self.ctes.pop();
        }
        result
    }

    fn bind_query_body(&mut self, query: &ast::Query) -> Result<Bound> {
        if query.fetch.is_some() || !query.locks.is_empty() || query.for_clause.is_some() {
            return Err(self.unsupported(query.span(), "FETCH, FOR and locking clauses"));
        }
        // A one-off query's outermost ORDER BY and OFFSET order and page its answer.
        let paged = std::mem::take(&mut self.outermost) && self.one_off;
        let ordered = std::mem::take(&mut self.ordered) && self.one_off;
        let bound = self.bind_set_expr(&query.body)?;
        let limit = match &query.limit_clause {
            None => None,
            Some(ast::LimitClause::LimitOffset { limit, offset, limit_by }) => {
                if let Some(offset) = offset
                    && paged
                {
                    let (value, _) = self.bind_expr(&offset.value, &mut Context::Rows(&Scope::default()))?;
                    self.note_parameter(&offset.value, Type::Int);
                    match literal_int(&value).or(self.described(&offset.value, 0)) {
                        Some(k) if k >= 0 => self.offset = k as usize,
                        _ => return Err(self.error(offset.value.span(), "OFFSET takes a non-negative integer")),
                    }
                } else if let Some(offset) = offset {
                    return Err(self.unsupported(
                        offset.value.span(),
                        "OFFSET: a view keeps the first rows of an order (ORDER BY ... LIMIT k), not a page of them",
                    ));
                }
                if !limit_by.is_empty() {
                    return Err(self.unsupported(query.span(), "LIMIT BY"));
                }
                match limit {
                    None => None,
                    Some(limit) => {
                        let (value, _) = self.bind_expr(limit, &mut Context::Rows(&Scope::default()))?;
                        self.note_parameter(limit, Type::Int);
                        match literal_int(&value).or(self.described(limit, i64::MAX)) {
                            Some(k) if k >= 0 => Some((k as usize, limit.span())),
                            _ => return Err(self.error(limit.span(), "LIMIT takes a non-negative integer")),
                        }
                    }
                }
            }
            Some(other) => return Err(self.unsupported(query.span(), format!("{other}"))),
        };
        let order = match &query.order_by {
            None => Vec::new(),
            Some(order_by) => match &order_by.kind {
                ast::OrderByKind::Expressions(exprs) => exprs.clone(),
                ast::OrderByKind::All(_) => return Err(self.unsupported(query.span(), "ORDER BY ALL")),
            },
        };
        let limit = match limit {
            // The rows an OFFSET skips are among those the top-k keeps.
            Some((k, span)) if paged => Some((k.saturating_add(self.offset), span)),
            other => other,
        };
        match (order.is_empty(), limit) {
            (true, None) => {}
            (false, None) if !paged && !ordered => {
                // A view (or a subquery) is an unordered set of rows: the order
                // is checked, then dropped, and the statement told so.
                self.bind_order(&query.body, &order, bound.clone())?;
                let at = self.location(order[0].expr.span());
                self.notices.push((
                    at,
                    "ORDER BY without LIMIT orders nothing here: a view (or a subquery) is an unordered set of \
                     rows; order them when you read it, or add LIMIT k to keep the first k rows"
                        .into(),
                ));
                return Ok(bound);
            }
            (_, limit) => {
                let k = limit.map(|(k, _)| k);
                let scope = bound.scope.clone();
                let (input, keys) = self.bind_order(&query.body, &order, bound)?;
                let input_width = input.scope.columns.len();
                let mut rel = Rel::TopK {
                    input: Box::new(input.rel),
                    partition: Vec::new(),
                    order: keys,
                    limit: k,
                    row_number: false,
                    input_width,
                    location: self.location(query.span()),
                };
                if input_width > scope.columns.len() {
                    // Drop the hidden sort columns.
                    let exprs = (0..scope.columns.len()).map(Expr::Column).collect();
                    rel = Rel::Project { input: Box::new(rel), exprs };
                }
                return Ok(Bound { rel, scope });
            }
        }
        Ok(bound)
    }

    /// The ORDER BY keys over a query's output. In a SELECT (not DISTINCT), a
    /// key that is not over the output columns is computed from the input, as
    /// in `SELECT name FROM t ORDER BY t.price LIMIT 3`: the SELECT is bound
    /// again with it as a hidden last column (returned in the scope).
    fn bind_order(
        &mut self,
        body: &ast::SetExpr,
        order: &[ast::OrderByExpr],
        bound: Bound,
    ) -> Result<(Bound, Vec<SortKey>)> {
        let first_error = match self.bind_sort_keys(order, &bound.scope) {
            Ok(keys) => return Ok((bound, keys)),
            Err(e) => e,
        };
        let ast::SetExpr::Select(select) = body else { return Err(first_error) };
        if matches!(select.distinct, Some(ast::Distinct::Distinct)) {
            return Err(first_error);
        }
        let mut select = (**select).clone();
        let mut items = order.to_vec();
        for item in &mut items {
            let positional = matches!(&item.expr, ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..)));
            if positional || self.bind_sort_keys(std::slice::from_ref(item), &bound.scope).is_ok() {
                continue;
            }
            let hidden = ast::Ident::new(format!("__order_{}", select.projection.len()));
            let expr = std::mem::replace(&mut item.expr, ast::Expr::Identifier(hidden.clone()));
            select.projection.push(ast::SelectItem::ExprWithAlias { expr, alias: hidden });
        }
        let extended = self.bind_select(&select)?;
        let keys = self.bind_sort_keys(&items, &extended.scope)?;
        Ok((extended, keys))
    }

    /// An ORDER BY item's direction and NULLs placement: (descending, nulls_first).
    fn sort_options(&self, item: &ast::OrderByExpr) -> Result<(bool, bool)> {
        if matches!(item.options.sort, Some(ast::OrderBySort::Using(_))) {
            return Err(self.unsupported(item.expr.span(), "ORDER BY ... USING"));
        }
        if item.with_fill.is_some() {
            return Err(self.unsupported(item.expr.span(), "WITH FILL"));
        }
        let descending = matches!(item.options.sort, Some(ast::OrderBySort::Desc));
        // NULLs sort first ascending (they are the least value), as in SQLite.
        Ok((descending, item.options.nulls_first.unwrap_or(!descending)))
    }

    fn bind_sort_keys(&mut self, order: &[ast::OrderByExpr], scope: &Scope) -> Result<Vec<SortKey>> {
        let mut keys = Vec::new();
        for item in order {
            let (descending, nulls_first) = self.sort_options(item)?;
            // ORDER BY 2: the second output column.
            let expr = match &item.expr {
                ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..)) => {
                    let (e, _) = self.bind_expr(&item.expr, &mut Context::Rows(&Scope::default()))?;
                    match literal_int(&e) {
                        Some(n) if n >= 1 && (n as usize) <= scope.columns.len() => Expr::Column(n as usize - 1),
                        _ => return Err(self.error(item.expr.span(), "ORDER BY position is not a column number")),
                    }
                }
                other => self.bind_expr(other, &mut Context::Rows(scope))?.0,
            };
            keys.push(SortKey { expr, descending, nulls_first });
        }
        Ok(keys)
    }

    fn bind_set_expr(&mut self, body: &ast::SetExpr) -> Result<Bound> {
        match body {
            ast::SetExpr::Select(select) => self.bind_select(select),
            ast::SetExpr::Query(query) => self.bind_query(query),
            ast::SetExpr::SetOperation { left, op, set_quantifier, right: right_body } => {
                let op_span = body.span();
                let operation = match op {
                    ast::SetOperator::Union => None,
                    ast::SetOperator::Intersect => Some(SetOperation::Intersect),
                    ast::SetOperator::Except | ast::SetOperator::Minus => Some(SetOperation::Except),
                };
                let all = match set_quantifier {
                    ast::SetQuantifier::All => true,
                    ast::SetQuantifier::None | ast::SetQuantifier::Distinct => false,
                    other => return Err(self.unsupported(op_span, format!("{op} {other}"))),
                };
                let left = self.bind_set_expr(left)?;
                let right = self.bind_set_expr(right_body)?;
                if left.scope.columns.len() != right.scope.columns.len() {
                    return Err(self.error(
                        right_body.span(),
                        format!(
                            "each {op} input must have the same number of columns: {} and {}",
                            left.scope.columns.len(),
                            right.scope.columns.len()
                        ),
                    ));
                }
                let mut types = Vec::new();
                for (i, (l, r)) in left.scope.columns.iter().zip(&right.scope.columns).enumerate() {
                    let Some(common) = l.ty.common(r.ty) else {
                        return Err(self.error(
                            item_span(right_body, i).unwrap_or(right_body.span()),
                            format!("{op} column \"{}\" is {} on one side and {} on the other", l.name, l.ty, r.ty),
                        ));
                    };
                    types.push(common);
                }
                let conform = |bound: Bound| -> Rel {
                    if bound.scope.columns.iter().zip(&types).all(|(c, t)| c.ty == *t) {
                        return bound.rel;
                    }
                    let exprs = bound
                        .scope
                        .columns
                        .iter()
                        .zip(&types)
                        .enumerate()
                        .map(
                            |(i, (c, t))| {
                                if c.ty == *t { Expr::Column(i) } else { Expr::Cast(Box::new(Expr::Column(i)), *t) }
                            },
                        )
                        .collect();
                    Rel::Project { input: Box::new(bound.rel), exprs }
                };
                let mut scope = left.scope.clone();
                for (column, ty) in scope.columns.iter_mut().zip(&types) {
                    column.ty = *ty;
                    column.table = None;
                }
                let (left, right) = (conform(left), conform(right));
                let rel = match operation {
                    Some(operation) => set_operation(operation, all, left, right),
                    None if all => Rel::UnionAll { inputs: vec![left, right] },
                    None => Rel::Distinct { input: Box::new(Rel::UnionAll { inputs: vec![left, right] }) },
                };
                Ok(Bound { rel, scope })
            }
            ast::SetExpr::Values(_) => {
                Err(self.unsupported(body.span(), "VALUES in a query (insert rows into a table instead)"))
            }
            other => Err(self.unsupported(other.span(), "this kind of query")),
        }
    }

    fn bind_select(&mut self, select: &ast::Select) -> Result<Bound> {
        let span = select.select_token.0.span;
        if select.top.is_some() {
            return Err(self.unsupported(span, "TOP (use ORDER BY ... LIMIT)"));
        }
        if select.into.is_some()
            || !select.lateral_views.is_empty()
            || select.prewhere.is_some()
            || !select.cluster_by.is_empty()
            || !select.distribute_by.is_empty()
            || !select.sort_by.is_empty()
            || select.qualify.is_some()
            || !select.named_window.is_empty()
            || !select.connect_by.is_empty()
        {
            return Err(self.unsupported(span, "INTO, LATERAL VIEW, QUALIFY, WINDOW and other dialect clauses"));
        }
        let distinct = match &select.distinct {
            None | Some(ast::Distinct::All) => false,
            Some(ast::Distinct::Distinct) => true,
            Some(other) => return Err(self.unsupported(span, format!("{other}"))),
        };

        // FROM: a cross product of its items; a LATERAL item (or a table
        // function whose arguments read the items before it) joins them.
        let mut from: Option<Bound> = None;
        // Items after the last LATERAL one, not joined yet.
        let mut pending: Vec<Bound> = Vec::new();
        for item in &select.from {
            if from.is_some() || !pending.is_empty() {
                let left_scope = Scope {
                    columns: from.iter().chain(&pending).flat_map(|b| b.scope.columns.iter().cloned()).collect(),
                };
                if let Some(lateral) = self.lateral_item(&item.relation, &left_scope, &item.joins)? {
                    let left = self.cross_all(from.take().into_iter().chain(pending.drain(..)).collect());
                    from = Some(self.bind_lateral_join(left, lateral, "inner", None, item.relation.span())?);
                    continue;
                }
            }
            pending.push(self.bind_table_with_joins(item)?);
        }
        let scope =
            Scope { columns: from.iter().chain(&pending).flat_map(|b| b.scope.columns.iter().cloned()).collect() };
        let predicate = match &select.selection {
            Some(selection) => {
                if contains_aggregate(selection) {
                    return Err(self.error(
                        selection.span(),
                        "aggregate functions are not allowed in WHERE (filter groups with HAVING)",
                    ));
                }
                let allowed = std::mem::replace(&mut self.subqueries, true);
                let bound = self.bind_expr(selection, &mut Context::Rows(&scope));
                self.subqueries = allowed;
                let (predicate, ty) = bound?;
                self.expect_bool(ty, selection.span(), "WHERE")?;
                Some(predicate)
            }
            None => None,
        };
        let from = match predicate {
            // Comma items joined where the WHERE clause links them (`join_order`).
            Some(predicate) if from.is_none() && pending.len() >= 3 && !predicate.has_subquery() => {
                let widths: Vec<usize> = pending.iter().map(|b| b.scope.columns.len()).collect();
                let order = crate::join_order::order(&widths, &crate::join_order::parts(&predicate));
                let items = pending.into_iter().map(|b| b.rel).collect();
                Bound { rel: crate::join_order::joined(items, &widths, &order, predicate), scope }
            }
            predicate => {
                let mut from = self.cross_all(from.into_iter().chain(pending).collect());
                if let Some(predicate) = predicate {
                    from.rel = apply_filter(from.rel, predicate);
                }
                from
            }
        };

        let group_exprs: &[ast::Expr] = match &select.group_by {
            ast::GroupByExpr::Expressions(exprs, modifiers) => {
                if !modifiers.is_empty() {
                    return Err(self.unsupported(span, "GROUP BY modifiers (ROLLUP, CUBE, ...)"));
                }
                exprs
            }
            ast::GroupByExpr::All(_) => return Err(self.unsupported(span, "GROUP BY ALL")),
        };
        let items = self.expand_projection(&select.projection, &from.scope)?;
        let aggregating = !group_exprs.is_empty()
            || select.having.is_some()
            || items.iter().any(|(e, _)| matches!(e, Item::Expr(e) if contains_aggregate(e)));

        let (rel, scope) = if aggregating {
            self.bind_grouped(from, group_exprs, &items, select.having.as_ref())?
        } else {
            let allowed = std::mem::replace(&mut self.subqueries, true);
            let bound = self.bind_rows(from, &items);
            self.subqueries = allowed;
            bound?
        };
        let rel = if distinct { Rel::Distinct { input: Box::new(rel) } } else { rel };
        Ok(Bound { rel, scope })
    }

    /// SELECT items with `*` expanded: expressions with their output names.
    fn expand_projection<'q>(
        &mut self,
        projection: &'q [ast::SelectItem],
        scope: &Scope,
    ) -> Result<Vec<(Item<'q>, String)>> {
        let mut items = Vec::new();
        for item in projection {
            match item {
                ast::SelectItem::UnnamedExpr(expr) => items.push((Item::Expr(expr), output_name(expr))),
                ast::SelectItem::ExprWithAlias { expr, alias } => items.push((Item::Expr(expr), normalize(alias))),
                ast::SelectItem::Wildcard(options) => {
                    if options.opt_exclude.is_some() || options.opt_except.is_some() || options.opt_replace.is_some() {
                        return Err(self.unsupported(item.span(), "wildcard options"));
                    }
                    if scope.columns.is_empty() {
                        return Err(self.error(item.span(), "SELECT * with no FROM clause"));
                    }
                    let span = item.span();
                    let visible = scope.columns.iter().enumerate().filter(|(_, c)| !c.qualified_only);
                    items.extend(visible.map(|(i, c)| (Item::Column(i, span), c.name.clone())));
                }
                ast::SelectItem::QualifiedWildcard(ast::SelectItemQualifiedWildcardKind::ObjectName(name), _) => {
                    let table = object_name(name).map(normalize).unwrap_or_default();
                    let before = items.len();
                    items.extend(
                        scope
                            .columns
                            .iter()
                            .enumerate()
                            .filter(|(_, c)| c.table.as_deref() == Some(table.as_str()))
                            .map(|(i, c)| (Item::Column(i, item.span()), c.name.clone())),
                    );
                    if items.len() == before {
                        return Err(self.unknown_table(&table, item.span(), scope));
                    }
                }
                other => return Err(self.unsupported(other.span(), "this select item")),
            }
        }
        Ok(items)
    }

    fn unknown_table(&self, table: &str, span: sqlparser::tokenizer::Span, scope: &Scope) -> Error {
        let tables: BTreeSet<&str> = scope.columns.iter().filter_map(|c| c.table.as_deref()).collect();
        let hint =
            suggestion(table, tables.iter().copied()).map(|s| format!("; did you mean \"{s}\"?")).unwrap_or_default();
        self.error(span, format!("no table \"{table}\" in FROM{hint}"))
    }

    fn bind_rows(&mut self, from: Bound, items: &[(Item<'_>, String)]) -> Result<(Rel, Scope)> {
        let width = from.scope.columns.len();
        let mut rel = from.rel;
        // Window functions first: each a column appended to the rows, which
        // the items then read (an item may compute with several).
        let mut windows: Vec<(ast::Function, usize, Type)> = Vec::new();
        for function in item_window_calls(items) {
            let at = width + windows.len();
            let allowed = std::mem::replace(&mut self.subqueries, false);
            let bound = self.bind_window_call(rel, function, &from.scope, at);
            self.subqueries = allowed;
            let (windowed, ty) = bound?;
            rel = windowed;
            windows.push((function.clone(), at, ty));
        }
        let outer_windows = std::mem::replace(&mut self.windows, windows);
        let bound = self.bind_items(&from.scope, items);
        let windowed = !std::mem::replace(&mut self.windows, outer_windows).is_empty();
        let (exprs, columns) = bound?;
        let identity = exprs.len() == width && exprs.iter().enumerate().all(|(i, e)| *e == Expr::Column(i));
        let rel = if identity && !windowed { rel } else { Rel::Project { input: Box::new(rel), exprs } };
        Ok((rel, Scope { columns }))
    }

    fn bind_items(&mut self, scope: &Scope, items: &[(Item<'_>, String)]) -> Result<(Vec<Expr>, Vec<ScopeColumn>)> {
        let mut exprs = Vec::new();
        let mut columns = Vec::new();
        for (item, name) in items {
            let (expr, ty, table) = match item {
                Item::Column(i, _) => (Expr::Column(*i), scope.columns[*i].ty, scope.columns[*i].table.clone()),
                Item::Expr(e) => {
                    let (expr, ty) = self.bind_expr(e, &mut Context::Rows(scope))?;
                    (expr, ty, None)
                }
            };
            exprs.push(expr);
            columns.push(ScopeColumn { table, name: name.clone(), ty, qualified_only: false });
        }
        Ok((exprs, columns))
    }

    /// `input` with the window function `function` appended as column `at`
    /// (ROW_NUMBER as a top-k with its rank, the others as `Rel::Over`).
    fn bind_window_call(
        &mut self,
        input: Rel,
        function: &ast::Function,
        scope: &Scope,
        at: usize,
    ) -> Result<(Rel, Type)> {
        let parts = self.bind_window_parts(function, &mut Context::Rows(scope))?;
        let ty = parts.ty();
        Ok((parts.over(input, at), ty))
    }

    /// A window function's PARTITION BY, ORDER BY and call, over rows or
    /// (in an aggregated query) over groups.
    fn bind_window_parts(&mut self, function: &ast::Function, context: &mut Context<'_>) -> Result<WindowParts> {
        let name = function_name(function);
        let span = function.span();
        let spec = match &function.over {
            Some(ast::WindowType::WindowSpec(spec)) => spec,
            _ => return Err(self.unsupported(span, "named windows")),
        };
        let partition =
            spec.partition_by.iter().map(|e| Ok(self.bind_expr(e, context)?.0)).collect::<Result<Vec<_>>>()?;
        let order = match context {
            Context::Rows(scope) => self.bind_sort_keys(&spec.order_by, scope)?,
            Context::Groups { .. } => self.bind_group_sort_keys(&spec.order_by, context)?,
        };
        let location = self.location(span);
        if name == "row_number" {
            if !function_args(function).is_empty() {
                return Err(self.error(span, "ROW_NUMBER() takes no arguments"));
            }
            return Ok(WindowParts { partition, order, call: None, location });
        }
        let (frame, offsets) = match &spec.window_frame {
            None => (Frame::DEFAULT, [None, None]),
            Some(frame) => self.bind_frame(frame, span)?,
        };
        let mut call = self.bind_over_function(&name, function, context, frame, span)?;
        if offsets.iter().any(Option::is_some) {
            let (start, end) = self.bind_range_offsets(&spec.order_by, offsets, context, span)?;
            call.frame.start = range_bound(call.frame.start, &start);
            call.frame.end = range_bound(call.frame.end, &end);
        }
        Ok(WindowParts { partition, order, call: Some(call), location })
    }

    /// A RANGE frame's offsets: constants of the single ORDER BY key's type
    /// (numbers; an INTERVAL for a TIMESTAMP), not negative.
    fn bind_range_offsets(
        &mut self,
        order: &[ast::OrderByExpr],
        offsets: [Option<&ast::Expr>; 2],
        context: &mut Context<'_>,
        span: sqlparser::tokenizer::Span,
    ) -> Result<(Value, Value)> {
        let [key] = order else {
            return Err(self.error(span, "a RANGE frame with an offset needs exactly one ORDER BY key"));
        };
        if matches!(&key.expr, ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..))) {
            return Err(self.unsupported(key.expr.span(), "a RANGE frame with an offset over an ORDER BY position"));
        }
        let (_, key_ty) = self.bind_expr(&key.expr, context)?;
        let mut values = [Value::Null, Value::Null];
        for (value, offset) in values.iter_mut().zip(offsets) {
            let Some(offset) = offset else { continue };
            let (bound, ty) = self.bind_expr(offset, &mut Context::Rows(&Scope::default()))?;
            let Expr::Literal(constant) = fold(bound) else {
                return Err(self.error(offset.span(), "a RANGE offset is a constant"));
            };
            let fits = match (key_ty, ty) {
                (Type::Int, Type::Int) => true,
                (Type::Decimal { .. } | Type::Double, t) => t.is_numeric(),
                (Type::Timestamp, Type::Interval) => true,
                _ => false,
            };
            if !fits {
                return Err(self.unsupported(
                    offset.span(),
                    format!(
                        "a RANGE offset of {ty} over an ORDER BY key of {key_ty} (numbers take a number of \
                         their type, TIMESTAMP an INTERVAL)"
                    ),
                ));
            }
            let constant = cast(&constant, if key_ty == Type::Timestamp { Type::Interval } else { key_ty });
            let negative = match &constant {
                Some(Value::Int(k) | Value::Interval(k)) => *k < 0,
                Some(Value::Decimal(d)) => d.get() < 0,
                Some(Value::Double(d)) => d.0 < 0.0 || d.0.is_nan(),
                _ => true,
            };
            match constant {
                Some(constant) if !negative => *value = constant,
                _ => return Err(self.error(offset.span(), "a RANGE offset is a non-negative value")),
            }
        }
        Ok((values[0].clone(), values[1].clone()))
    }

    /// A window's ORDER BY over groups: expressions (aggregates too), no positions.
    fn bind_group_sort_keys(&mut self, order: &[ast::OrderByExpr], context: &mut Context<'_>) -> Result<Vec<SortKey>> {
        let mut keys = Vec::new();
        for item in order {
            if matches!(&item.expr, ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..))) {
                return Err(self.unsupported(item.expr.span(), "a number in a window's ORDER BY over groups"));
            }
            let (descending, nulls_first) = self.sort_options(item)?;
            let (expr, _) = self.bind_expr(&item.expr, context)?;
            keys.push(SortKey { expr, descending, nulls_first });
        }
        Ok(keys)
    }

    /// A frame, and a RANGE frame's offset expressions (start, end).
    fn bind_frame<'f>(
        &self,
        frame: &'f ast::WindowFrame,
        span: sqlparser::tokenizer::Span,
    ) -> Result<(Frame, [Option<&'f ast::Expr>; 2])> {
        let rows = match frame.units {
            ast::WindowFrameUnits::Rows => true,
            ast::WindowFrameUnits::Range => false,
            ast::WindowFrameUnits::Groups => return Err(self.unsupported(span, "GROUPS frames")),
        };
        let bound = |b: &ast::WindowFrameBound| -> Result<FrameBound> {
            let offset = |e: &Option<Box<ast::Expr>>| -> Result<Option<u64>> {
                let Some(e) = e else { return Ok(None) };
                if !rows {
                    // Its value is bound with the ORDER BY key's type (bind_range_offsets).
                    return Ok(Some(0));
                }
                match e.as_ref() {
                    ast::Expr::Value(v) => match &v.value {
                        ast::Value::Number(n, _) => n
                            .parse()
                            .map(Some)
                            .map_err(|_| self.error(e.span(), "a frame offset is a non-negative integer constant")),
                        _ => Err(self.error(e.span(), "a frame offset is a non-negative integer constant")),
                    },
                    _ => Err(self.error(e.span(), "a frame offset is a non-negative integer constant")),
                }
            };
            Ok(match b {
                ast::WindowFrameBound::CurrentRow => FrameBound::CurrentRow,
                ast::WindowFrameBound::Preceding(e) => match offset(e)? {
                    None => FrameBound::UnboundedPreceding,
                    Some(k) => FrameBound::Preceding(k),
                },
                ast::WindowFrameBound::Following(e) => match offset(e)? {
                    None => FrameBound::UnboundedFollowing,
                    Some(k) => FrameBound::Following(k),
                },
            })
        };
        let start = bound(&frame.start_bound)?;
        let end = match &frame.end_bound {
            Some(end) => bound(end)?,
            None => FrameBound::CurrentRow,
        };
        if start == FrameBound::UnboundedFollowing || end == FrameBound::UnboundedPreceding {
            return Err(self.error(span, "a frame cannot start at UNBOUNDED FOLLOWING or end at UNBOUNDED PRECEDING"));
        }
        let offset_of = |bound: &'f ast::WindowFrameBound| match bound {
            ast::WindowFrameBound::Preceding(Some(e)) | ast::WindowFrameBound::Following(Some(e)) if !rows => {
                Some(e.as_ref())
            }
            _ => None,
        };
        let offsets = [offset_of(&frame.start_bound), frame.end_bound.as_ref().and_then(offset_of)];
        Ok((Frame { rows, start, end }, offsets))
    }

    /// A window function other than ROW_NUMBER: its arguments and type.
    fn bind_over_function(
        &mut self,
        name: &str,
        function: &ast::Function,
        context: &mut Context<'_>,
        frame: Frame,
        span: sqlparser::tokenizer::Span,
    ) -> Result<WindowCall> {
        let args = function_args(function);
        let mut bound = Vec::new();
        for arg in &args {
            match arg {
                FunctionArgument::Expr(e) if !window_calls(e).is_empty() => {
                    return Err(self.error(e.span(), "a window function's arguments cannot hold windows"));
                }
                FunctionArgument::Expr(e) if contains_aggregate(e) && matches!(context, Context::Rows(_)) => {
                    return Err(
                        self.error(e.span(), "a window function's arguments hold an aggregate only with GROUP BY")
                    );
                }
                FunctionArgument::Expr(e) => bound.push(self.bind_expr(e, context)?),
                FunctionArgument::Star => {}
            }
        }
        let star = matches!(args.as_slice(), [FunctionArgument::Star]);
        let arity = |range: std::ops::RangeInclusive<usize>| -> Result<()> {
            match range.contains(&bound.len()) && (!star || name == "count") {
                true => Ok(()),
                false => Err(self.error(span, format!("{name}() does not take these arguments"))),
            }
        };
        let int_arg = |i: usize| -> Result<()> {
            match bound.get(i) {
                Some((_, Type::Int | Type::Null)) | None => Ok(()),
                Some((_, ty)) => {
                    Err(self.error(span, format!("argument {} of {name}() is an integer, not {ty}", i + 1)))
                }
            }
        };
        let distinct = matches!(&function.args, ast::FunctionArguments::List(l) if l.duplicate_treatment.is_some());
        if distinct || function.filter.is_some() {
            return Err(self.unsupported(span, "DISTINCT and FILTER in window functions"));
        }
        let first_ty = bound.first().map_or(Type::Null, |(_, t)| *t);
        use WindowFunction as W;
        let (function, ty) = match name {
            "rank" | "dense_rank" | "percent_rank" | "cume_dist" => {
                arity(0..=0)?;
                match name {
                    "rank" => (W::Rank, Type::Int),
                    "dense_rank" => (W::DenseRank, Type::Int),
                    "percent_rank" => (W::PercentRank, Type::Double),
                    _ => (W::CumeDist, Type::Double),
                }
            }
            "ntile" => {
                arity(1..=1)?;
                int_arg(0)?;
                (W::Ntile, Type::Int)
            }
            "lag" | "lead" => {
                arity(1..=3)?;
                int_arg(1)?;
                let mut ty = first_ty;
                if let Some((default, default_ty)) = bound.get(2).cloned() {
                    ty = self.common_type(ty, default_ty, span, &format!("{name}() value and default"))?;
                    bound[2] = (conform(default, ty), ty);
                }
                bound[0] = (conform(bound[0].0.clone(), ty), ty);
                (if name == "lag" { W::Lag } else { W::Lead }, ty)
            }
            "first_value" | "last_value" => {
                arity(1..=1)?;
                (if name == "first_value" { W::FirstValue } else { W::LastValue }, first_ty)
            }
            "nth_value" => {
                arity(2..=2)?;
                int_arg(1)?;
                (W::NthValue, first_ty)
            }
            "count" if star => (W::Aggregate(AggregateFunction::CountRows), Type::Int),
            "count" => {
                arity(1..=1)?;
                (W::Aggregate(AggregateFunction::Count), Type::Int)
            }
            "min" | "max" => {
                arity(1..=1)?;
                (W::Aggregate(if name == "min" { AggregateFunction::Min } else { AggregateFunction::Max }), first_ty)
            }
            "sum" | "avg" => {
                arity(1..=1)?;
                if !first_ty.is_numeric() && first_ty != Type::Null {
                    return Err(self.error(span, format!("{name}() over a window adds numbers, not {first_ty}")));
                }
                let ty = match (name, first_ty) {
                    ("avg", Type::Decimal { .. }) => first_ty,
                    ("avg", _) => Type::Double,
                    (_, Type::Null) => Type::Int,
                    _ => first_ty,
                };
                (W::Aggregate(if name == "sum" { AggregateFunction::Sum } else { AggregateFunction::Avg }), ty)
            }
            other => {
                return Err(self.unsupported(
                    span,
                    format!("the window function {other}() (ROW_NUMBER, RANK, DENSE_RANK, PERCENT_RANK, CUME_DIST, NTILE, LAG, LEAD, FIRST_VALUE, LAST_VALUE, NTH_VALUE, COUNT, SUM, AVG, MIN, MAX are)"),
                ));
            }
        };
        Ok(WindowCall { function, args: bound.into_iter().map(|(e, _)| e).collect(), frame, ty })
    }

    fn bind_grouped(
        &mut self,
        from: Bound,
        group_exprs: &[ast::Expr],
        items: &[(Item<'_>, String)],
        having: Option<&ast::Expr>,
    ) -> Result<(Rel, Scope)> {
        let mut group: Vec<(Expr, Type)> = Vec::new();
        for e in group_exprs {
            if contains_aggregate(e) {
                return Err(self.error(e.span(), "aggregate functions are not allowed in GROUP BY"));
            }
            // GROUP BY 1, or by an output alias when no input column has the name.
            let bound = match e {
                ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..)) => {
                    let (n, _) = self.bind_expr(e, &mut Context::Rows(&Scope::default()))?;
                    match literal_int(&n).and_then(|n| items.get((n as usize).wrapping_sub(1))) {
                        Some((Item::Expr(item), _)) if !contains_aggregate(item) => {
                            self.bind_expr(item, &mut Context::Rows(&from.scope))?
                        }
                        Some((Item::Column(i, _), _)) => (Expr::Column(*i), from.scope.columns[*i].ty),
                        _ => return Err(self.error(e.span(), "GROUP BY position is not a column of the SELECT list")),
                    }
                }
                ast::Expr::Identifier(ident)
                    if !from.scope.columns.iter().any(|c| c.name == normalize(ident))
                        && items.iter().any(|(_, name)| *name == normalize(ident)) =>
                {
                    let (item, _) = items.iter().find(|(_, name)| *name == normalize(ident)).expect("found above");
                    match item {
                        Item::Expr(item) if !contains_aggregate(item) => {
                            self.bind_expr(item, &mut Context::Rows(&from.scope))?
                        }
                        _ => return Err(self.error(e.span(), "GROUP BY cannot name an aggregate")),
                    }
                }
                _ => self.bind_expr(e, &mut Context::Rows(&from.scope))?,
            };
            if !group.iter().any(|(g, _)| *g == bound.0) {
                group.push(bound);
            }
        }
        let allowed = std::mem::replace(&mut self.subqueries, true);
        let bound = self.bind_grouped_items(&from.scope, &group, items, having);
        self.subqueries = allowed;
        let GroupedItems { mut exprs, columns, aggregates, having, windows } = bound?;
        // Window functions over the groups (after HAVING), each a column after the aggregates.
        let width = group.len() + aggregates.len();
        let mut rel = aggregate(from.rel, group.into_iter().map(|(e, _)| e).collect(), aggregates);
        if let Some(predicate) = having {
            rel = Rel::Filter { input: Box::new(rel), predicate };
        }
        for (i, parts) in windows.into_iter().enumerate() {
            rel = parts.over(rel, width + i);
        }
        for expr in &mut exprs {
            expr.map_columns(&mut |c| if c >= WINDOW_PLACEHOLDER { width + (c - WINDOW_PLACEHOLDER) } else { c });
        }
        Ok((Rel::Project { input: Box::new(rel), exprs }, Scope { columns }))
    }

    /// An aggregated query's SELECT items and HAVING over its groups (each
    /// may hold subqueries, which read the group columns): the items, their
    /// columns, the aggregates they call, the HAVING predicate.
    fn bind_grouped_items(
        &mut self,
        input: &Scope,
        group: &[(Expr, Type)],
        items: &[(Item<'_>, String)],
        having: Option<&ast::Expr>,
    ) -> Result<GroupedItems> {
        let mut aggregates = Vec::new();
        // Window functions first (their parts may call aggregates): the items
        // read each as a placeholder column until the aggregates are known.
        let mut windows = Vec::new();
        let mut seen: Vec<(ast::Function, usize, Type)> = Vec::new();
        for function in item_window_calls(items) {
            let mut context = Context::Groups { input, group, aggregates: &mut aggregates };
            let allowed = std::mem::replace(&mut self.subqueries, false);
            let bound = self.bind_window_parts(function, &mut context);
            self.subqueries = allowed;
            let parts = bound?;
            seen.push((function.clone(), WINDOW_PLACEHOLDER + windows.len(), parts.ty()));
            windows.push(parts);
        }
        let outer_windows = std::mem::replace(&mut self.windows, seen);
        let bound = self.bind_group_select_items(input, group, items, &mut aggregates);
        self.windows = outer_windows;
        let (exprs, columns) = bound?;
        let having = match having {
            None => None,
            Some(h) => {
                let mut context = Context::Groups { input, group, aggregates: &mut aggregates };
                let (predicate, ty) = self.bind_expr(h, &mut context)?;
                self.expect_bool(ty, h.span(), "HAVING")?;
                Some(predicate)
            }
        };
        Ok(GroupedItems { exprs, columns, aggregates, having, windows })
    }

    /// An aggregated query's SELECT items over its groups.
    fn bind_group_select_items(
        &mut self,
        input: &Scope,
        group: &[(Expr, Type)],
        items: &[(Item<'_>, String)],
        aggregates: &mut Vec<AggregateCall>,
    ) -> Result<(Vec<Expr>, Vec<ScopeColumn>)> {
        let mut exprs = Vec::new();
        let mut columns = Vec::new();
        for (item, name) in items {
            let (expr, ty) = match item {
                Item::Column(i, span) => {
                    let column = Expr::Column(*i);
                    match group.iter().position(|(g, _)| *g == column) {
                        Some(g) => (Expr::Column(g), group[g].1),
                        None => return Err(self.not_grouped(&input.columns[*i].name, self.location(*span))),
                    }
                }
                Item::Expr(e) => {
                    let mut context = Context::Groups { input, group, aggregates };
                    self.bind_expr(e, &mut context)?
                }
            };
            exprs.push(expr);
            columns.push(ScopeColumn { table: None, name: name.clone(), ty, qualified_only: false });
        }
        Ok((exprs, columns))
    }

    fn not_grouped(&self, column: &str, location: Location) -> Error {
        Error::sql(location, format!("column \"{column}\" must appear in GROUP BY or be used in an aggregate function"))
    }

    fn expect_bool(&self, ty: Type, span: sqlparser::tokenizer::Span, clause: &str) -> Result<()> {
        if matches!(ty, Type::Bool | Type::Null) {
            Ok(())
        } else {
            Err(self.error(span, format!("{clause} needs a BOOLEAN condition, not {ty}")))
        }
    }

    /// `items` cross-joined left to right (no items: the one empty row).
    fn cross_all(&self, items: Vec<Bound>) -> Bound {
        let unit = || Bound { rel: Rel::Unit, scope: Scope::default() };
        items.into_iter().reduce(|left, right| self.cross_join(left, right)).unwrap_or_else(unit)
    }

    fn cross_join(&self, left: Bound, right: Bound) -> Bound {
        let (left_width, right_width) = (left.scope.columns.len(), right.scope.columns.len());
        let mut scope = left.scope;
        scope.columns.extend(right.scope.columns);
        Bound {
            rel: Rel::Join {
                kind: JoinKind::Inner,
                left: Box::new(left.rel),
                right: Box::new(right.rel),
                left_keys: Vec::new(),
                right_keys: Vec::new(),
                left_width,
                right_width,
            },
            scope,
        }
    }

    fn bind_table_with_joins(&mut self, item: &ast::TableWithJoins) -> Result<Bound> {
        let left = self.bind_table_factor(&item.relation)?;
        self.bind_joins(left, &item.joins)
    }

    /// `left` joined with each of `joins` in turn.
    fn bind_joins(&mut self, mut left: Bound, joins: &[ast::Join]) -> Result<Bound> {
        for join in joins {
            use ast::JoinOperator as J;
            let (kind, constraint) = match &join.join_operator {
                J::Join(c) | J::Inner(c) => ("inner", Some(c)),
                J::Left(c) | J::LeftOuter(c) => ("left", Some(c)),
                J::Right(c) | J::RightOuter(c) => ("right", Some(c)),
                J::FullOuter(c) => ("full", Some(c)),
                J::CrossJoin(ast::JoinConstraint::None) => ("inner", None),
                other => return Err(self.unsupported(join.relation.span(), format!("this join ({other:?})"))),
            };
            if let Some(item) = self.lateral_item(&join.relation, &left.scope, &[])? {
                left = self.bind_lateral_join(left, item, kind, constraint, join.relation.span())?;
                continue;
            }
            let right = self.bind_table_factor(&join.relation)?;
            left = self.bind_join(left, right, kind, constraint, join.relation.span())?;
        }
        Ok(left)
    }

    /// `left` joined with a FROM item that reads it (LATERAL): a table
    /// function whose arguments read it, or a LATERAL subquery. CROSS JOIN
    /// and JOIN ... ON pair each left row with the item's rows for it; LEFT
    /// JOIN ... ON also keeps a left row without any, with NULLs.
    fn bind_lateral_join(
        &mut self,
        left: Bound,
        item: LateralItem<'_>,
        kind: &str,
        constraint: Option<&ast::JoinConstraint>,
        span: sqlparser::tokenizer::Span,
    ) -> Result<Bound> {
        let on = match constraint {
            None | Some(ast::JoinConstraint::None) => None,
            Some(ast::JoinConstraint::On(on)) => Some(on),
            Some(_) => return Err(self.unsupported(span, "USING or NATURAL with a LATERAL item")),
        };
        if !matches!(kind, "inner" | "left") {
            let message = format!(
                "a {} JOIN cannot read its left side (LATERAL, or a table function's arguments): only CROSS JOIN, \
                 JOIN ... ON and LEFT JOIN may",
                kind.to_uppercase()
            );
            return Err(self.error(span, message));
        }
        let outer = kind == "left";
        // ON TRUE is no condition.
        let on = on.filter(|on| !matches!(on, ast::Expr::Value(v) if v.value == ast::Value::Boolean(true)));
        let joined = match item {
            LateralItem::Call(call) if outer && on.is_some() => {
                // The condition picks the call's rows per left row: the call
                // as a LATERAL subquery of its own, filtered.
                self.outer.push(left.scope.clone());
                let called = self.bind_expand(Bound { rel: Rel::Unit, scope: Scope::default() }, &call, false);
                self.outer.pop();
                self.lateral_join(left, called?, outer, on)?
            }
            LateralItem::Call(call) => self.bind_expand(left, &call, outer)?,
            LateralItem::Subquery(query, alias) => {
                self.bind_lateral_subquery(left, (query, alias), outer, on.filter(|_| outer))?
            }
        };
        match on {
            Some(on) if !outer => {
                let predicate = self.bind_on(on, &joined.scope)?;
                Ok(Bound { rel: apply_filter(joined.rel, predicate), scope: joined.scope })
            }
            _ => Ok(joined),
        }
    }

    /// A join's ON condition over `scope` (subqueries allowed).
    fn bind_on(&mut self, on: &ast::Expr, scope: &Scope) -> Result<Expr> {
        if contains_aggregate(on) {
            return Err(self.error(on.span(), "aggregate functions are not allowed in ON"));
        }
        let allowed = std::mem::replace(&mut self.subqueries, true);
        let bound = self.bind_expr(on, &mut Context::Rows(scope));
        self.subqueries = allowed;
        let (predicate, ty) = bound?;
        self.expect_bool(ty, on.span(), "ON")?;
        Ok(predicate)
    }

    /// `left` joined with a LATERAL subquery, which reads `left`'s columns as
    /// an enclosing query's (`Rel::Lateral`). With `outer`, a left row
    /// without rows is kept, with NULLs; `on` (LEFT JOIN only) then picks
    /// the subquery's rows per left row: a filter inside it.
    fn bind_lateral_subquery(
        &mut self,
        left: Bound,
        (query, alias): (&ast::Query, Option<&ast::TableAlias>),
        outer: bool,
        on: Option<&ast::Expr>,
    ) -> Result<Bound> {
        let bound = self.bind_inner_query(left.scope.clone(), query)?;
        let scope = match alias {
            Some(_) => self.alias_scope(bound.scope, "", alias)?,
            None => bound.scope,
        };
        self.lateral_join(left, Bound { rel: bound.rel, scope }, outer, on)
    }

    /// `left` joined with `right`, bound as a query inside one over
    /// `left`'s rows (`Rel::Lateral`; `on`: as in
    /// [`Binder::bind_lateral_subquery`]).
    fn lateral_join(&mut self, left: Bound, right: Bound, outer: bool, on: Option<&ast::Expr>) -> Result<Bound> {
        let (left_width, right_width) = (left.scope.columns.len(), right.scope.columns.len());
        let mut scope = left.scope;
        scope.columns.extend(right.scope.columns);
        let mut right = right.rel;
        if let Some(on) = on {
            let mut predicate = self.bind_on(on, &scope)?;
            if predicate.has_subquery() {
                return Err(self.unsupported(on.span(), "a subquery in the ON of a LEFT JOIN LATERAL"));
            }
            predicate.map_outer_depths(&mut |depth| depth + 1);
            into_lateral_side(&mut predicate, left_width);
            right = apply_filter(right, predicate);
        }
        let kind = if outer { JoinKind::Left } else { JoinKind::Inner };
        let rel = Rel::Lateral { left: Box::new(left.rel), right: Box::new(right), kind, left_width, right_width };
        Ok(Bound { rel, scope })
    }

    /// `query` bound as a query inside one over rows of `scope` (which it
    /// reads as `Outer` references at depth 1), without that query's window
    /// columns.
    fn bind_inner_query(&mut self, scope: Scope, query: &ast::Query) -> Result<Bound> {
        self.outer.push(scope);
        let allowed = std::mem::replace(&mut self.subqueries, false);
        let windows = std::mem::take(&mut self.windows);
        let bound = self.bind_query(query);
        self.windows = windows;
        self.subqueries = allowed;
        self.outer.pop();
        bound
    }

    /// The FROM item `factor` when it reads the items before it (`left`):
    /// a LATERAL subquery, or a table function whose arguments read them.
    /// `joins`: those after it in its FROM item.
    fn lateral_item<'f>(
        &mut self,
        factor: &'f ast::TableFactor,
        left: &Scope,
        joins: &[ast::Join],
    ) -> Result<Option<LateralItem<'f>>> {
        if let ast::TableFactor::Derived { lateral: true, subquery, alias, .. } = factor {
            if !joins.is_empty() {
                return Err(self.unsupported(factor.span(), "joins after a LATERAL subquery in the same FROM item"));
            }
            return Ok(Some(LateralItem::Subquery(subquery, alias.as_ref())));
        }
        let Some(call) = self.table_call(factor) else { return Ok(None) };
        let call = call?;
        Ok(self.reads_left(&call, left, joins)?.then_some(LateralItem::Call(call)))
    }

    fn bind_join(
        &mut self,
        left: Bound,
        right: Bound,
        kind: &str,
        constraint: Option<&ast::JoinConstraint>,
        span: sqlparser::tokenizer::Span,
    ) -> Result<Bound> {
        let left_width = left.scope.columns.len();
        let mut scope = left.scope.clone();
        scope.columns.extend(right.scope.columns.iter().cloned());
        let mut parts = Vec::new();
        match constraint {
            None | Some(ast::JoinConstraint::None) => {}
            Some(ast::JoinConstraint::On(on)) => {
                if contains_aggregate(on) {
                    return Err(self.error(on.span(), "aggregate functions are not allowed in ON"));
                }
                let allowed = std::mem::replace(&mut self.subqueries, true);
                let bound = self.bind_expr(on, &mut Context::Rows(&scope));
                self.subqueries = allowed;
                let (predicate, ty) = bound?;
                self.expect_bool(ty, on.span(), "ON")?;
                conjuncts(predicate, &mut parts);
            }
            Some(ast::JoinConstraint::Using(_) | ast::JoinConstraint::Natural) => {
                for &(l, r, _) in &self.using_columns(&left.scope, &right.scope, constraint, span)? {
                    let pair = (Expr::Column(l), left.scope.columns[l].ty);
                    let equal = self.bind_binary(
                        &ast::BinaryOperator::Eq,
                        pair,
                        (Expr::Column(left_width + r), right.scope.columns[r].ty),
                        span,
                    )?;
                    parts.push(equal.0);
                }
            }
            Some(ast::JoinConstraint::UsingAlias(..)) => return Err(self.unsupported(span, "USING (...) AS alias")),
        }
        let split = split_condition(parts, left_width);
        let JoinCondition { left_keys, right_keys, left_only, right_only, both } = split;
        let right_width = right.scope.columns.len();
        let join = |kind, left: Rel, right: Rel, left_keys, right_keys| Rel::Join {
            kind,
            left: Box::new(left),
            right: Box::new(right),
            left_keys,
            right_keys,
            left_width,
            right_width,
        };
        let filtered = |rel: Rel, parts: Vec<Expr>| match and_all(parts) {
            Some(predicate) => Rel::Filter { input: Box::new(rel), predicate },
            None => rel,
        };
        let rel = match kind {
            "inner" => {
                let left_rel = filtered(left.rel, left_only);
                let right_rel = filtered(right.rel, right_only);
                filtered(join(JoinKind::Inner, left_rel, right_rel, left_keys, right_keys), both)
            }
            "left" | "right" | "full" => {
                let preserved_side_condition = match kind {
                    "left" => !left_only.is_empty(),
                    "right" => !right_only.is_empty(),
                    _ => !left_only.is_empty() || !right_only.is_empty(),
                };
                if !both.is_empty() || preserved_side_condition || left_keys.is_empty() {
                    // Matches by every condition, then each preserved side's
                    // rows that found none (rewrite::outer_join).
                    let mut condition = left_only;
                    condition.extend(right_only.into_iter().map(|mut e| {
                        e.map_columns(&mut |c| c + left_width);
                        e
                    }));
                    condition.extend(both);
                    let preserve = (kind != "right", kind != "left");
                    let keys = (left_keys, right_keys);
                    let rel = crate::rewrite::outer_join(left.rel, right.rel, keys, and_all(condition), preserve);
                    let bound = Bound { rel, scope };
                    return match constraint {
                        Some(ast::JoinConstraint::Using(_) | ast::JoinConstraint::Natural) => {
                            let using = self.using_columns(&left.scope, &right.scope, constraint, span)?;
                            self.merge_using(bound, &using, kind, left_width, span)
                        }
                        _ => Ok(bound),
                    };
                }
                match kind {
                    "left" => join(JoinKind::Left, left.rel, filtered(right.rel, right_only), left_keys, right_keys),
                    "full" => join(JoinKind::Full, left.rel, right.rel, left_keys, right_keys),
                    _ => {
                        // A RIGHT JOIN is a LEFT JOIN with the sides swapped, then the columns put back.
                        let swapped = Rel::Join {
                            kind: JoinKind::Left,
                            left: Box::new(right.rel),
                            right: Box::new(filtered(left.rel, left_only)),
                            left_keys: right_keys,
                            right_keys: left_keys,
                            left_width: right_width,
                            right_width: left_width,
                        };
                        let exprs = (0..left_width)
                            .map(|i| Expr::Column(right_width + i))
                            .chain((0..right_width).map(Expr::Column))
                            .collect();
                        Rel::Project { input: Box::new(swapped), exprs }
                    }
                }
            }
            _ => unreachable!("join kinds are listed above"),
        };
        let bound = Bound { rel, scope };
        match constraint {
            Some(ast::JoinConstraint::Using(_) | ast::JoinConstraint::Natural) => {
                let using = self.using_columns(&left.scope, &right.scope, constraint, span)?;
                self.merge_using(bound, &using, kind, left_width, span)
            }
            _ => Ok(bound),
        }
    }

    /// The column pairs (left, right, name) a USING or NATURAL join equates
    /// and merges: each named column, found once on each side (NATURAL: the
    /// names both sides have, in the left side's order).
    fn using_columns(
        &self,
        left: &Scope,
        right: &Scope,
        constraint: Option<&ast::JoinConstraint>,
        span: sqlparser::tokenizer::Span,
    ) -> Result<Vec<(usize, usize, String)>> {
        let find = |scope: &Scope, name: &str| -> Vec<usize> {
            let visible = scope.columns.iter().enumerate().filter(|(_, c)| !c.qualified_only && c.name == name);
            visible.map(|(i, _)| i).collect()
        };
        let names: Vec<(String, sqlparser::tokenizer::Span)> = match constraint {
            Some(ast::JoinConstraint::Using(names)) => names
                .iter()
                .map(|name| match object_name(name) {
                    Some(ident) => Ok((normalize(ident), ident.span)),
                    None => Err(self.error(span, "USING takes column names")),
                })
                .collect::<Result<_>>()?,
            _ => {
                let mut seen = BTreeSet::new();
                let common = left.columns.iter().filter(|c| !c.qualified_only && !find(right, &c.name).is_empty());
                common.filter(|c| seen.insert(c.name.clone())).map(|c| (c.name.clone(), span)).collect()
            }
        };
        let mut pairs = Vec::new();
        for (name, at) in names {
            match (find(left, &name).as_slice(), find(right, &name).as_slice()) {
                ([l], [r]) => pairs.push((*l, *r, name)),
                ([], _) | (_, []) => {
                    return Err(self.error(at, format!("USING column \"{name}\" is not on both sides")));
                }
                _ => return Err(self.error(at, format!("USING column \"{name}\" is ambiguous on one side"))),
            }
        }
        Ok(pairs)
    }

    /// A USING or NATURAL join's output as SQL has it: each USING column
    /// once, first (the left side's value; the right side's for a RIGHT
    /// JOIN; either for a FULL JOIN), then each side's columns, whose
    /// copies of the USING columns are reached by qualified name only.
    fn merge_using(
        &self,
        joined: Bound,
        using: &[(usize, usize, String)],
        kind: &str,
        left_width: usize,
        span: sqlparser::tokenizer::Span,
    ) -> Result<Bound> {
        let mut exprs = Vec::new();
        let mut columns = Vec::new();
        for (l, r, name) in using {
            let r = left_width + r;
            let (lt, rt) = (joined.scope.columns[*l].ty, joined.scope.columns[r].ty);
            let ty = self.common_type(lt, rt, span, &format!("USING column \"{name}\""))?;
            let (left_value, right_value) = (conform(Expr::Column(*l), ty), conform(Expr::Column(r), ty));
            exprs.push(match kind {
                "right" => right_value,
                "full" => Expr::Call(Function::Coalesce, vec![left_value, right_value]),
                _ => left_value,
            });
            columns.push(ScopeColumn { table: None, name: name.clone(), ty, qualified_only: false });
        }
        let mut sides = joined.scope.columns;
        for (l, r, _) in using {
            sides[*l].qualified_only = true;
            sides[left_width + r].qualified_only = true;
        }
        exprs.extend((0..sides.len()).map(Expr::Column));
        columns.extend(sides);
        Ok(Bound { rel: Rel::Project { input: Box::new(joined.rel), exprs }, scope: Scope { columns } })
    }

    fn alias_scope(&self, mut scope: Scope, table: &str, alias: Option<&ast::TableAlias>) -> Result<Scope> {
        let name = alias.map(|a| normalize(&a.name)).unwrap_or_else(|| table.to_owned());
        if let Some(alias) = alias
            && !alias.columns.is_empty()
        {
            if alias.columns.len() > scope.columns.len() {
                return Err(self.error(
                    alias.name.span,
                    format!("\"{name}\" has {} columns but {} are named", scope.columns.len(), alias.columns.len()),
                ));
            }
            for (column, def) in scope.columns.iter_mut().zip(&alias.columns) {
                column.name = normalize(&def.name);
            }
        }
        for column in &mut scope.columns {
            column.table = Some(name.clone());
        }
        Ok(scope)
    }

    fn bind_table_factor(&mut self, factor: &ast::TableFactor) -> Result<Bound> {
        match factor {
            ast::TableFactor::Table { name, alias, args, .. } => {
                let (schema, ident) = match name.0.as_slice() {
                    [ast::ObjectNamePart::Identifier(ident)] => (None, ident),
                    [ast::ObjectNamePart::Identifier(schema), ast::ObjectNamePart::Identifier(ident)] => {
                        (Some(normalize(schema)), ident)
                    }
                    _ => return Err(self.unsupported(name.span(), "names with more than two parts")),
                };
                if let Some(args) = args {
                    if let Some(call) = self.table_call(factor) {
                        let unit = Bound { rel: Rel::Unit, scope: Scope::default() };
                        return self.bind_expand(unit, &call?, false);
                    }
                    if schema.is_some() {
                        return Err(self.unsupported(name.span(), "a qualified table function"));
                    }
                    return self.bind_window_function(ident, &args.args, alias.as_ref());
                }
                let bound = match schema.as_deref() {
                    None if !self.names_relation(&normalize(ident)) => {
                        self.bind_system_table(None, ident).unwrap_or_else(|| self.bind_relation(ident))?
                    }
                    None | Some("public") => self.bind_relation(ident)?,
                    Some(schema) => match self.bind_system_table(Some(schema), ident) {
                        Some(bound) => bound?,
                        None => {
                            let what = format!("{schema}.{}", normalize(ident));
                            return Err(self.error(ident.span, format!("unknown relation \"{what}\"")));
                        }
                    },
                };
                let scope = self.alias_scope(bound.scope, &normalize(ident), alias.as_ref())?;
                Ok(Bound { rel: bound.rel, scope })
            }
            // LATERAL first in FROM has nothing before it to read.
            ast::TableFactor::Derived { subquery, alias, .. } => {
                let bound = self.bind_query(subquery)?;
                let scope = match alias {
                    Some(_) => self.alias_scope(bound.scope, "", alias.as_ref())?,
                    None => bound.scope,
                };
                Ok(Bound { rel: bound.rel, scope })
            }
            ast::TableFactor::NestedJoin { table_with_joins, alias } => {
                let bound = self.bind_table_with_joins(table_with_joins)?;
                let scope = match alias {
                    Some(_) => self.alias_scope(bound.scope, "", alias.as_ref())?,
                    None => bound.scope,
                };
                Ok(Bound { rel: bound.rel, scope })
            }
            ast::TableFactor::Function { .. } | ast::TableFactor::UNNEST { .. } => {
                let call = self.table_call(factor).expect("a call or its error")?;
                let unit = Bound { rel: Rel::Unit, scope: Scope::default() };
                self.bind_expand(unit, &call, false)
            }
            other => Err(self.unsupported(other.span(), "this kind of FROM item")),
        }
    }

    /// Whether `name` is a CTE in scope or a catalog object (which hide
    /// the system catalog's relations of the same name).
    fn names_relation(&self, name: &str) -> bool {
        self.ctes.iter().any(|level| level.contains_key(name)) || self.catalog.get(name).is_some()
    }

    /// A relation of the system catalog, if `schema.ident` names one
    /// (unqualified: of `pg_catalog`); one-off queries only.
    fn bind_system_table(&mut self, schema: Option<&str>, ident: &ast::Ident) -> Option<Result<Bound>> {
        let table = crate::system::SystemTable::lookup(schema, &normalize(ident))?;
        if !self.one_off {
            let message = format!(
                "{}: the system catalog is read by one-off queries only (a view's rows come from the log)",
                table.name()
            );
            return Some(Err(self.unsupported(ident.span, message)));
        }
        let columns = table.columns();
        let name = normalize(ident);
        let scope = Scope {
            columns: columns
                .iter()
                .map(|(n, t)| ScopeColumn { table: Some(name.clone()), name: n.clone(), ty: *t, qualified_only: false })
                .collect(),
        };
        let rel = Rel::Get { object: table.name(), input: Input::System { table }, columns };
        Some(Ok(Bound { rel, scope }))
    }

    /// The table function `factor` calls, if it calls one (`unnest(array)`,
    /// `pg_options_to_table(options)`, `generate_series(start, stop [,
    /// step])`; `LATERAL name(...)` must be one), with its arguments.
    fn table_call<'f>(&self, factor: &'f ast::TableFactor) -> Option<Result<TableCall<'f>>> {
        let unnamed = |args: &'f [ast::FunctionArg], span| -> Result<Vec<&'f ast::Expr>> {
            args.iter()
                .map(|arg| match arg {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Ok(e),
                    _ => Err(self.unsupported(span, "this argument of a table function")),
                })
                .collect()
        };
        let (function, span, args, alias) = match factor {
            ast::TableFactor::Table { name, args: Some(args), alias, .. } => {
                let function = table_function(name)?;
                let span = name.span();
                (function, span, unnamed(&args.args, span), alias)
            }
            ast::TableFactor::Function { name, args, alias, with_ordinality, .. } => {
                let span = name.span();
                let Some(function) = table_function(name) else {
                    return Some(Err(self.unsupported(span, format!("the table function {name}"))));
                };
                if *with_ordinality {
                    return Some(Err(self.unsupported(span, "WITH ORDINALITY")));
                }
                (function, span, unnamed(args, span), alias)
            }
            ast::TableFactor::UNNEST { alias, array_exprs, with_offset, with_ordinality, .. } => {
                let span = factor.span();
                if *with_offset || *with_ordinality {
                    return Some(Err(self.unsupported(span, "unnest() WITH ORDINALITY or WITH OFFSET")));
                }
                (TableFunction::Unnest, span, Ok(array_exprs.iter().collect()), alias)
            }
            _ => return None,
        };
        Some(args.map(|args| TableCall { function, span, args, alias: alias.as_ref() }))
    }

    /// Whether `call`'s arguments read the columns of `left` (a LATERAL
    /// call), or a join after it does (`joins`: those of its FROM item).
    fn reads_left(&mut self, call: &TableCall<'_>, left: &Scope, joins: &[ast::Join]) -> Result<bool> {
        let mut reads = false;
        for arg in &call.args {
            let (expr, _) = self.bind_expr(arg, &mut Context::Rows(left))?;
            reads |= !expr.columns().is_empty();
        }
        if reads && !joins.is_empty() {
            return Err(self.unsupported(call.span, "joins after a LATERAL table function in the same FROM item"));
        }
        Ok(reads)
    }

    /// `call` over each row of `input`: its rows, each followed by the
    /// call's rows over it (`Rel::Expand`); with `outer`, a row whose call
    /// gives none is kept once, with NULLs.
    fn bind_expand(&mut self, input: Bound, call: &TableCall<'_>, outer: bool) -> Result<Bound> {
        let name = call.function.name();
        let (arity, arg_type) = match call.function {
            TableFunction::Unnest | TableFunction::OptionsToTable => (1..=1, Type::Text),
            TableFunction::GenerateSeries => (2..=3, Type::Int),
        };
        if !arity.contains(&call.args.len()) {
            let message = format!("{name}() takes {} to {} arguments", arity.start(), arity.end());
            return Err(self.error(call.span, message));
        }
        let mut args = Vec::new();
        for arg in &call.args {
            let (expr, ty) = self.bind_expr(arg, &mut Context::Rows(&input.scope))?;
            if ty != arg_type && ty != Type::Null {
                return Err(self.error(arg.span(), format!("{name}() takes {arg_type}, not {ty}")));
            }
            args.push(expr);
        }
        let table = call.alias.map(|a| normalize(&a.name)).unwrap_or_else(|| name.to_owned());
        let columns = call.function.columns(&table);
        let scope = Scope {
            columns: columns
                .iter()
                .map(|(n, t)| ScopeColumn {
                    table: Some(table.clone()),
                    name: n.clone(),
                    ty: *t,
                    qualified_only: false,
                })
                .collect(),
        };
        let called = self.alias_scope(scope, &table, call.alias)?;
        let mut scope = input.scope;
        scope.columns.extend(called.columns);
        let location = self.location(call.span);
        let rel = Rel::Expand { input: Box::new(input.rel), function: call.function, args, outer, location };
        Ok(Bound { rel, scope })
    }

    /// A name in FROM: a CTE, a source, a table or a view (inlined).
    fn bind_relation(&mut self, ident: &ast::Ident) -> Result<Bound> {
        let name = normalize(ident);
        for level in (0..self.ctes.len()).rev() {
            if let Some((position, query, alias)) = self.ctes[level].get(&name).cloned() {
                // A CTE sees the CTEs defined before it: the outer levels' and
                // the earlier ones of its own WITH.
                let hidden = self.ctes.split_off(level);
                let mut earlier = hidden[0].clone();
                earlier.retain(|_, (p, ..)| *p < position);
                self.ctes.push(earlier);
                // A CTE's query sees no columns of the query that reads it.
                let outer = std::mem::take(&mut self.outer);
                let bound = self.bind_query(&query);
                self.outer = outer;
                self.ctes.pop();
                self.ctes.extend(hidden);
                let bound = bound?;
                let scope = self.alias_scope(bound.scope, &name, alias.as_ref())?;
                return Ok(Bound { rel: bound.rel, scope });
            }
        }
        if self.view_depth == 0 && self.defining.as_deref() == Some(name.as_str()) {
            return Err(self.error(ident.span, format!("view \"{name}\" reads itself")));
        }
        let Some(object) = self.catalog.get(&name) else {
            let hint =
                suggestion(&name, self.catalog.names()).map(|s| format!("; did you mean \"{s}\"?")).unwrap_or_default();
            return Err(self.error(ident.span, format!("unknown source, table or view \"{name}\"{hint}")));
        };
        if let ObjectKind::Sink { .. } = object.kind {
            return Err(self.error(
                ident.span,
                format!("\"{name}\" is a sink: it ships a view's changes and has no rows to read"),
            ));
        }
        self.dependencies.insert(name.clone());
        let columns = |object: &crate::catalog::Object| -> Vec<(String, Type)> {
            object.columns.iter().map(|c| (c.name.clone(), c.ty)).collect()
        };
        let scope_of = |cols: &[(String, Type)]| Scope {
            columns: cols
                .iter()
                .map(|(n, t)| ScopeColumn { table: Some(name.clone()), name: n.clone(), ty: *t, qualified_only: false })
                .collect(),
        };
        match &object.kind {
            ObjectKind::Source { topic, upsert_key, event_time, record_timestamp, .. } => {
                let cols = columns(object);
                let input = match upsert_key {
                    Some(_) => Input::Upsert { topic: topic.clone() },
                    None => Input::Source {
                        topic: topic.clone(),
                        event_time: *event_time,
                        record_timestamp: *record_timestamp,
                    },
                };
                Ok(Bound {
                    rel: Rel::Get { object: name.clone(), input, columns: cols.clone() },
                    scope: scope_of(&cols),
                })
            }
            ObjectKind::Table { topic, .. } => {
                let cols = columns(object);
                let input = Input::Upsert { topic: topic.clone() };
                Ok(Bound {
                    rel: Rel::Get { object: name.clone(), input, columns: cols.clone() },
                    scope: scope_of(&cols),
                })
            }
            ObjectKind::Sink { .. } => unreachable!("refused above"),
            ObjectKind::View { query, nesting, materialized, .. } => {
                if self.view_depth >= VIEW_DEPTH_MAX {
                    return Err(
                        self.error(ident.span, format!("views nest more than {VIEW_DEPTH_MAX} deep at \"{name}\""))
                    );
                }
                let outer_nesting = self.nesting;
                if outer_nesting + nesting > NESTING_MAX {
                    return Err(self.error(
                        ident.span,
                        format!(
                            "reading view \"{name}\" ({nesting} levels deep) here nests {} levels deep; the limit \
                             is {NESTING_MAX}: split the views differently",
                            outer_nesting + nesting
                        ),
                    ));
                }
                self.nesting += nesting;
                let query = query.clone();
                // A view's own query is bound on its own: no CTEs of the using query.
                let saved = std::mem::take(&mut self.ctes);
                let view_location = self.location(ident.span);
                let statement = std::mem::replace(&mut self.statement, view_location);
                let file = self.file.take();
                self.view_depth += 1;
                let outer = std::mem::take(&mut self.outer);
                let bound = self.bind_query(&query);
                self.outer = outer;
                self.view_depth -= 1;
                self.nesting = outer_nesting;
                self.ctes = saved;
                self.statement = statement;
                self.file = file;
                let bound = bound.map_err(|e| match e {
                    Error::Sql { message, .. } => {
                        self.error(ident.span, format!("view \"{name}\" no longer binds: {message}"))
                    }
                    other => other,
                })?;
                let mut scope = bound.scope;
                // The view's columns as it named them (see bind_view_query).
                rename_repeated(&mut scope);
                for column in &mut scope.columns {
                    column.table = Some(name.clone());
                }
                if *materialized && self.one_off {
                    // A one-off query reads what the view has committed.
                    let columns = scope.columns.iter().map(|c| (c.name.clone(), c.ty)).collect();
                    let input = Input::View { view: name.clone() };
                    return Ok(Bound { rel: Rel::Get { object: name.clone(), input, columns }, scope });
                }
                Ok(Bound { rel: bound.rel, scope })
            }
        }
    }

    /// The microseconds of a constant INTERVAL expression (None: not one).
    pub(crate) fn interval_constant(&mut self, e: &ast::Expr) -> Result<Option<i64>> {
        let (value, ty) = self.bind_expr(e, &mut Context::Rows(&Scope::default()))?;
        Ok(match (ty, eval(&value, &[])) {
            (Type::Interval, Value::Interval(micros)) => Some(micros),
            _ => None,
        })
    }

    /// A window's source (its first argument, a source, table or view
    /// name) and its time column (the second, a TIMESTAMP column of it):
    /// the source bound, its name, its scope, and the column.
    fn bind_window_input(&mut self, relation: &ast::Expr, time: &ast::Expr) -> Result<(Rel, String, Scope, usize)> {
        let ast::Expr::Identifier(relation) = relation else {
            return Err(self.error(relation.span(), "the first argument of a window is a source, table or view name"));
        };
        let bound = self.bind_relation(relation)?;
        let relation_name = normalize(relation);
        let inner_scope = self.alias_scope(bound.scope, &relation_name, None)?;
        let (column, ty) = self.bind_expr(time, &mut Context::Rows(&inner_scope))?;
        let Expr::Column(time_column) = column else {
            return Err(self.error(time.span(), "the second argument of a window is a column"));
        };
        if ty != Type::Timestamp {
            return Err(self.error(time.span(), format!("a window's time column must be a TIMESTAMP, not {ty}")));
        }
        Ok((bound.rel, relation_name, inner_scope, time_column))
    }

    /// A window's scope: its source's columns, then window_start and window_end.
    fn window_scope(&self, mut scope: Scope, relation_name: &str, alias: Option<&ast::TableAlias>) -> Result<Scope> {
        for column in ["window_start", "window_end"] {
            scope.columns.push(ScopeColumn {
                table: None,
                name: column.to_owned(),
                ty: Type::Timestamp,
                qualified_only: false,
            });
        }
        self.alias_scope(scope, relation_name, alias)
    }

    /// TUMBLE(rel, time_col, size), HOP(rel, time_col, slide, size) and
    /// CUMULATE(rel, time_col, step, size).
    fn bind_window_function(
        &mut self,
        function: &ast::Ident,
        args: &[ast::FunctionArg],
        alias: Option<&ast::TableAlias>,
    ) -> Result<Bound> {
        let name = normalize(function);
        let arity = match name.as_str() {
            "tumble" => 3,
            "hop" | "cumulate" => 4,
            "session" => return self.bind_session(function, args, alias),
            _ => {
                return Err(self.unsupported(
                    function.span,
                    format!("the table function {name}() (TUMBLE, HOP, CUMULATE and SESSION are)"),
                ));
            }
        };
        let exprs = unnamed_args(args);
        if exprs.len() != arity || args.len() != arity {
            let shape = match name.as_str() {
                "tumble" => "TUMBLE(source, time_column, size)",
                "hop" => "HOP(source, time_column, slide, size)",
                _ => "CUMULATE(source, time_column, step, size)",
            };
            return Err(self.error(function.span, format!("{} takes {arity} arguments: {shape}", name.to_uppercase())));
        }
        let (input, relation_name, inner_scope, time_column) = self.bind_window_input(exprs[0], exprs[1])?;
        let mut intervals = Vec::new();
        for e in &exprs[2..] {
            match self.interval_constant(e)? {
                Some(micros) if micros > 0 => intervals.push(micros),
                _ => return Err(self.error(e.span(), "a window size or slide is a positive INTERVAL constant")),
            }
        }
        let (slide_micros, size_micros) =
            if arity == 3 { (intervals[0], intervals[0]) } else { (intervals[0], intervals[1]) };
        let (kind, step) = if name == "cumulate" { ("CUMULATE", "step") } else { ("HOP", "slide") };
        if size_micros % slide_micros != 0 {
            return Err(self
                .unsupported(exprs[arity - 1].span(), format!("a {kind} size that is not a multiple of its {step}")));
        }
        if size_micros / slide_micros > WINDOWS_PER_ROW_MAX {
            let message =
                format!("a {kind} puts each row in more than {WINDOWS_PER_ROW_MAX} windows; widen the {step}");
            return Err(self.error(exprs[2].span(), message));
        }
        let scope = self.window_scope(inner_scope, &relation_name, alias)?;
        let cumulative = name == "cumulate";
        let rel = Rel::Window { input: Box::new(input), time_column, slide_micros, size_micros, cumulative };
        Ok(Bound { rel, scope })
    }

    /// SESSION(rel, time_col, gap [, key, ...]): each row with a time, with
    /// the start and end of its session among the rows with its keys (a
    /// window function per key, module `over`).
    fn bind_session(
        &mut self,
        function: &ast::Ident,
        args: &[ast::FunctionArg],
        alias: Option<&ast::TableAlias>,
    ) -> Result<Bound> {
        let exprs = unnamed_args(args);
        if exprs.len() < 3 || exprs.len() != args.len() {
            let shape = "SESSION(source, time_column, gap [, key_column, ...])";
            return Err(self.error(function.span, format!("SESSION takes 3 or more arguments: {shape}")));
        }
        let (input, relation_name, inner_scope, time_column) = self.bind_window_input(exprs[0], exprs[1])?;
        let gap_micros = match self.interval_constant(exprs[2])? {
            Some(micros) if micros > 0 => micros,
            _ => return Err(self.error(exprs[2].span(), "a session gap is a positive INTERVAL constant")),
        };
        let mut keys = Vec::new();
        for e in &exprs[3..] {
            keys.push(self.bind_expr(e, &mut Context::Rows(&inner_scope))?.0);
        }
        let input_width = inner_scope.columns.len();
        let whole = Frame { rows: false, start: FrameBound::UnboundedPreceding, end: FrameBound::UnboundedFollowing };
        let call = |end| WindowCall {
            function: WindowFunction::Session { end, gap_micros },
            args: vec![Expr::Column(time_column)],
            frame: whole,
            ty: Type::Timestamp,
        };
        let order = vec![SortKey { expr: Expr::Column(time_column), descending: false, nulls_first: false }];
        let over = Rel::Over {
            input: Box::new(input),
            partition: keys,
            order,
            calls: vec![call(false), call(true)],
            input_width,
        };
        let timed = Expr::Not(Box::new(Expr::IsNull(Box::new(Expr::Column(time_column)))));
        let rel = Rel::Filter { input: Box::new(over), predicate: timed };
        let scope = self.window_scope(inner_scope, &relation_name, alias)?;
        Ok(Bound { rel, scope })
    }

    fn resolve_column(&self, parts: &[ast::Ident], scope: &Scope, span: sqlparser::tokenizer::Span) -> Result<usize> {
        let (table, column) = match parts {
            [column] => (None, normalize(column)),
            [table, column] => (Some(normalize(table)), normalize(column)),
            _ => return Err(self.unsupported(span, "names with more than two parts")),
        };
        let matches: Vec<usize> = scope
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.name == column && if table.is_none() { !c.qualified_only } else { c.table == table })
            .map(|(i, _)| i)
            .collect();
        match matches.as_slice() {
            [i] => Ok(*i),
            [] => {
                if let Some(table) = &table
                    && !scope.columns.iter().any(|c| c.table.as_ref() == Some(table))
                {
                    return Err(self.unknown_table(table, span, scope));
                }
                let candidates =
                    scope.columns.iter().filter(|c| table.is_none() || c.table == table).map(|c| c.name.as_str());
                let hint =
                    suggestion(&column, candidates).map(|s| format!("; did you mean \"{s}\"?")).unwrap_or_default();
                let what = match &table {
                    Some(t) => format!("{t}.{column}"),
                    None => column.clone(),
                };
                Err(self.error(span, format!("unknown column \"{what}\"{hint}")))
            }
            _ => Err(self.error(span, format!("column \"{column}\" is ambiguous; qualify it with its table name"))),
        }
    }

    fn bind_expr(&mut self, expr: &ast::Expr, context: &mut Context<'_>) -> Result<(Expr, Type)> {
        // Over groups, a sub-expression equal to a GROUP BY expression is that group column.
        if let Context::Groups { input, group, .. } = context
            && !contains_aggregate(expr)
            && window_calls(expr).is_empty()
        {
            let input: &Scope = input;
            let notices = self.notices.len();
            let (bound, ty) = self.bind_expr(expr, &mut Context::Rows(input))?;
            if let Some(i) = group.iter().position(|(g, _)| *g == bound) {
                return Ok((Expr::Column(i), ty));
            }
            if bound.columns().is_empty() {
                return Ok((bound, ty));
            }
            if let Expr::Column(c) = bound {
                return Err(self.not_grouped(&input.columns[c].name, self.location(expr.span())));
            }
            // Bound again over the groups below: its notices once.
            self.notices.truncate(notices);
        }
        use ast::Expr as E;
        let span = expr.span();
        match expr {
            E::Identifier(ident) => self.bind_column(std::slice::from_ref(ident), context, span),
            E::CompoundIdentifier(parts) => self.bind_column(parts, context, span),
            E::Nested(inner) => self.bind_expr(inner, context),
            E::Value(value) => self.bind_literal(&value.value, span),
            E::TypedString(typed) => {
                let Some(ty) = data_type(&typed.data_type) else {
                    return Err(self.unsupported(span, format!("the type {}", typed.data_type)));
                };
                let text = match &typed.value.value {
                    ast::Value::SingleQuotedString(s) => s.clone(),
                    other => other.to_string(),
                };
                match crate::value::cast_constant(&Value::Text(text.as_str().into()), ty) {
                    Some(v) => Ok((Expr::Literal(v), ty)),
                    None => Err(self.error(span, format!("invalid {ty} literal '{text}'"))),
                }
            }
            E::Interval(interval) => self.bind_interval(interval, span),
            E::UnaryOp { op, expr: inner } => {
                let (e, ty) = self.bind_expr(inner, context)?;
                match op {
                    ast::UnaryOperator::Not => {
                        self.expect_bool(ty, inner.span(), "NOT")?;
                        Ok((Expr::Not(Box::new(e)), Type::Bool))
                    }
                    ast::UnaryOperator::Minus if ty.is_numeric() || ty == Type::Interval || ty == Type::Null => {
                        Ok((fold(Expr::Negate(Box::new(e))), ty))
                    }
                    // Identity on every type, as in SQLite (`+ col` of TEXT or NULL).
                    ast::UnaryOperator::Plus => Ok((e, ty)),
                    _ => Err(self.error(span, format!("operator {op} does not apply to {ty}"))),
                }
            }
            E::BinaryOp { left, op: ast::BinaryOperator::StringConcat, right }
                if [left, right].iter().any(|e| matches!(e.as_ref(), E::Function(f) if is_array_subquery(f))) =>
            {
                let (l, _) = self.bind_expr(left, context)?;
                let (r, _) = self.bind_expr(right, context)?;
                Ok((Expr::Call(Function::ArrayCat, vec![l, r]), Type::Text))
            }
            E::BinaryOp { left, op, right } => {
                let l = self.bind_expr(left, context)?;
                let r = self.bind_expr(right, context)?;
                self.note_parameter(left, r.1);
                self.note_parameter(right, l.1);
                self.bind_binary(op, l, r, span)
            }
            E::IsNull(inner) => Ok((Expr::IsNull(Box::new(self.bind_expr(inner, context)?.0)), Type::Bool)),
            E::IsNotNull(inner) => {
                Ok((Expr::Not(Box::new(Expr::IsNull(Box::new(self.bind_expr(inner, context)?.0)))), Type::Bool))
            }
            E::IsTrue(inner) | E::IsFalse(inner) | E::IsNotTrue(inner) | E::IsNotFalse(inner) => {
                let (e, ty) = self.bind_expr(inner, context)?;
                self.expect_bool(ty, inner.span(), "IS TRUE/FALSE")?;
                let wanted = matches!(expr, E::IsTrue(_) | E::IsNotTrue(_));
                let test = Expr::binary(BinaryOp::NotDistinct, e, Expr::Literal(Value::Bool(wanted)));
                let negate = matches!(expr, E::IsNotTrue(_) | E::IsNotFalse(_));
                Ok((if negate { Expr::Not(Box::new(test)) } else { test }, Type::Bool))
            }
            E::IsDistinctFrom(a, b) | E::IsNotDistinctFrom(a, b) => {
                let (a, b) = (self.bind_expr(a, context)?, self.bind_expr(b, context)?);
                let (a, b) = self.coerce_pair(a, b, span, "IS DISTINCT FROM")?;
                let test = Expr::binary(BinaryOp::NotDistinct, a, b);
                let negate = matches!(expr, E::IsDistinctFrom(..));
                Ok((if negate { Expr::Not(Box::new(test)) } else { test }, Type::Bool))
            }
            E::Between { expr: inner, negated, low, high } => {
                let x = self.bind_expr(inner, context)?;
                let low_ast = low;
                let low = self.bind_expr(low, context)?;
                let high_ast = high;
                let high = self.bind_expr(high, context)?;
                self.note_parameter(low_ast, x.1);
                self.note_parameter(high_ast, x.1);
                self.note_parameter(inner, low.1);
                let op = ast::BinaryOperator::GtEq;
                let (ge, _) = self.bind_binary(&op, x.clone(), low, span)?;
                let (le, _) = self.bind_binary(&ast::BinaryOperator::LtEq, x, high, span)?;
                let between = Expr::binary(BinaryOp::And, ge, le);
                Ok((if *negated { Expr::Not(Box::new(between)) } else { between }, Type::Bool))
            }
            E::In { expr: inner, target: ast::InTarget::List(list), negated, .. } => {
                let (mut e, mut ty) = self.bind_expr(inner, context)?;
                let mut items = Vec::new();
                for item in list {
                    let (mut item_expr, item_ty) = self.bind_expr(item, context)?;
                    self.note_parameter(item, ty);
                    match (ty, item_ty) {
                        (a, b) if a == b || b == Type::Null => {}
                        (a, Type::Text) if matches!(item_expr, Expr::Literal(_)) => {
                            item_expr = self.coerce_literal(item_expr, a, item.span())?;
                        }
                        (a, b) => match a.common(b) {
                            Some(common) => {
                                if common != a {
                                    e = Expr::Cast(Box::new(e), common);
                                    ty = common;
                                }
                            }
                            None => return Err(self.error(item.span(), format!("IN list item of type {b} for a {a}"))),
                        },
                    }
                    items.push(item_expr);
                }
                let test = Expr::InList { expr: Box::new(e), list: items };
                Ok((if *negated { Expr::Not(Box::new(test)) } else { test }, Type::Bool))
            }
            E::Function(f) if is_array_subquery(f) && self.subqueries && self.one_off => {
                self.bind_subquery(expr, context)
            }
            E::AnyOp { left, compare_op, right, .. } | E::AllOp { left, compare_op, right }
                if matches!(right.as_ref(), E::Subquery(_)) && self.subqueries =>
            {
                let E::Subquery(query) = right.as_ref() else { unreachable!("matched above") };
                let all = matches!(expr, E::AllOp { .. });
                self.bind_quantified(left, compare_op, query, all, context, span)
            }
            E::AnyOp { left, compare_op: ast::BinaryOperator::Eq, right, .. } if self.one_off => {
                let (l, lt) = self.bind_expr(left, context)?;
                let (r, rt) = self.bind_expr(right, context)?;
                if !matches!(rt, Type::Text | Type::Null) {
                    return Err(self.error(right.span(), format!("= ANY reads an array, not {rt}")));
                }
                let l = if lt == Type::Text { l } else { Expr::Cast(Box::new(l), Type::Text) };
                Ok((Expr::Call(Function::ArrayAny, vec![l, r]), Type::Bool))
            }
            E::In { .. } | E::Exists { .. } | E::Subquery(_) if self.subqueries => self.bind_subquery(expr, context),
            E::In { .. } | E::Exists { .. } | E::Subquery(_) => {
                let at = match expr {
                    E::In { target: ast::InTarget::Subquery(query), .. } | E::Subquery(query) => query.span(),
                    _ => span,
                };
                Err(self.unsupported(at, SUBQUERY_REFUSED))
            }
            E::Like { negated, any, expr: inner, pattern, escape_char }
            | E::ILike { negated, any, expr: inner, pattern, escape_char } => {
                if *any {
                    return Err(self.unsupported(span, "LIKE ANY"));
                }
                let (e, ty) = self.bind_expr(inner, context)?;
                let (mut p, pty) = self.bind_expr(pattern, context)?;
                for (t, s) in [(ty, inner.span()), (pty, pattern.span())] {
                    if !matches!(t, Type::Text | Type::Null) {
                        return Err(self.error(s, format!("LIKE compares TEXT, not {t}")));
                    }
                }
                if let Some(escape) = self.escape_char(escape_char.as_deref(), span)? {
                    // The pattern rewritten to LIKE's own escape character, `\`.
                    match &p {
                        Expr::Literal(Value::Text(text)) => {
                            p = Expr::Literal(Value::Text(crate::function::like_with_escape(text, escape).into()));
                        }
                        Expr::Literal(Value::Null) => {}
                        _ => {
                            return Err(
                                self.unsupported(pattern.span(), "ESCAPE with a pattern that is not a constant")
                            );
                        }
                    }
                }
                let case_insensitive = matches!(expr, E::ILike { .. });
                let test = Expr::Like { expr: Box::new(e), pattern: Box::new(p), case_insensitive };
                Ok((if *negated { Expr::Not(Box::new(test)) } else { test }, Type::Bool))
            }
            E::SimilarTo { negated, expr: inner, pattern, escape_char } => {
                let (e, ty) = self.bind_expr(inner, context)?;
                let (p, pty) = self.bind_expr(pattern, context)?;
                for (t, s) in [(ty, inner.span()), (pty, pattern.span())] {
                    if !matches!(t, Type::Text | Type::Null) {
                        return Err(self.error(s, format!("SIMILAR TO compares TEXT, not {t}")));
                    }
                }
                let escape = match escape_char {
                    None => Some('\\'),
                    Some(_) => self.escape_char(escape_char.as_deref(), span)?.flatten(),
                };
                if let Expr::Literal(Value::Text(text)) = &p
                    && let Err(e) = crate::eval::compile_regex(&crate::function::similar_to_regex(text, escape), false)
                {
                    return Err(self.error(pattern.span(), format!("invalid SIMILAR TO pattern '{text}': {e}")));
                }
                let escape = Expr::Literal(Value::Text(escape.map(String::from).unwrap_or_default().into()));
                let test = fold(Expr::Call(Function::SimilarTo, vec![e, p, escape]));
                Ok((if *negated { Expr::Not(Box::new(test)) } else { test }, Type::Bool))
            }
            E::Case { operand, conditions, else_result, .. } => {
                let operand = operand.as_ref().map(|o| self.bind_expr(o, context)).transpose()?;
                let mut whens = Vec::new();
                let mut result_type = Type::Null;
                let mut results = Vec::new();
                for when in conditions {
                    let condition = match &operand {
                        Some(o) => {
                            let c = self.bind_expr(&when.condition, context)?;
                            self.bind_binary(&ast::BinaryOperator::Eq, o.clone(), c, when.condition.span())?.0
                        }
                        None => {
                            let (c, ty) = self.bind_expr(&when.condition, context)?;
                            self.expect_bool(ty, when.condition.span(), "WHEN")?;
                            c
                        }
                    };
                    let (r, rt) = self.bind_expr(&when.result, context)?;
                    result_type = self.common_type(result_type, rt, when.result.span(), "CASE branches")?;
                    whens.push(condition);
                    results.push(r);
                }
                let otherwise = match else_result {
                    Some(e) => {
                        let (r, rt) = self.bind_expr(e, context)?;
                        result_type = self.common_type(result_type, rt, e.span(), "CASE branches")?;
                        r
                    }
                    None => Expr::Literal(Value::Null),
                };
                let conform = |e: Expr, t: Type| conform(e, t);
                let whens = whens.into_iter().zip(results).map(|(c, r)| (c, conform(r, result_type))).collect();
                Ok((Expr::Case(whens, Box::new(conform(otherwise, result_type))), result_type))
            }
            E::Cast { kind, expr: inner, data_type: target, format, .. } => {
                if format.is_some() || matches!(kind, ast::CastKind::TryCast | ast::CastKind::SafeCast) {
                    return Err(self.unsupported(span, "TRY_CAST, SAFE_CAST and CAST ... FORMAT"));
                }
                if let ast::DataType::Array(_) = target
                    && self.one_off
                {
                    // An array is its text form (the system catalog's arrays).
                    let (e, from) = self.bind_expr(inner, context)?;
                    if !matches!(from, Type::Text | Type::Null) {
                        return Err(self.error(span, format!("cannot cast {from} to {target}")));
                    }
                    return Ok((e, Type::Text));
                }
                if let Some(name) = regclass_literal(inner, target)
                    && self.one_off
                {
                    return match crate::system::regclass(self.catalog, &name) {
                        Some(oid) => Ok((Expr::Literal(Value::Int(oid)), Type::Int)),
                        None => Err(self.error(span, format!("unknown relation \"{name}\""))),
                    };
                }
                let Some(ty) = data_type(target) else {
                    return Err(self.unsupported(span, format!("the type {target}")));
                };
                let (e, from) = self.bind_expr(inner, context)?;
                self.note_parameter(inner, ty);
                let allowed = from == ty
                    || from == Type::Null
                    || from == Type::Text
                    || ty == Type::Text
                    || (from.is_numeric() && ty.is_numeric())
                    || matches!((from, ty), (Type::Bool, Type::Int) | (Type::Int, Type::Bool))
                    || matches!((from, ty), (Type::Timestamp, Type::Date) | (Type::Date, Type::Timestamp));
                if !allowed {
                    return Err(self.error(span, format!("cannot cast {from} to {ty}")));
                }
                if let Expr::Literal(v) = &e {
                    return match crate::value::cast_constant(v, ty) {
                        Some(v) => Ok((Expr::Literal(v), ty)),
                        None => Err(self.error(span, format!("'{v}' is not a valid {ty}"))),
                    };
                }
                Ok((Expr::Cast(Box::new(e), ty), ty))
            }
            E::Extract { field, expr: inner, .. } => {
                let (e, ty) = self.bind_expr(inner, context)?;
                if !matches!(ty, Type::Timestamp | Type::Date | Type::Null | Type::Interval) {
                    return Err(self.error(inner.span(), format!("EXTRACT reads a TIMESTAMP or DATE, not {ty}")));
                }
                let field = field.to_string().to_lowercase();
                if time::extract(&field, 0).is_none() {
                    return Err(self.unsupported(span, format!("EXTRACT field {field}")));
                }
                let result = if matches!(field.as_str(), "second" | "epoch") { Type::Double } else { Type::Int };
                Ok((Expr::Call(Function::Extract, vec![Expr::Literal(Value::Text(field.into())), e]), result))
            }
            E::Substring { expr: inner, substring_from, substring_for, .. } => {
                let mut args = vec![self.bind_text_arg(inner, context)?];
                let from = match substring_from {
                    Some(f) => self.bind_int_arg(f, context)?,
                    None => Expr::Literal(Value::Int(1)),
                };
                args.push(from);
                if let Some(f) = substring_for {
                    args.push(self.bind_int_arg(f, context)?);
                }
                Ok((Expr::Call(Function::Substring, args), Type::Text))
            }
            E::Trim { expr: inner, trim_where, trim_what, trim_characters } => {
                // trim(s, 'chars') parses as a character list: one item is btrim's second argument.
                let what = match (trim_what, trim_characters.as_deref()) {
                    (what, None) => what.as_deref(),
                    (None, Some([chars])) => Some(chars),
                    _ => return Err(self.unsupported(span, "TRIM with a character list")),
                };
                let function = match trim_where {
                    None | Some(ast::TrimWhereField::Both) => Function::Trim,
                    Some(ast::TrimWhereField::Leading) => Function::LTrim,
                    Some(ast::TrimWhereField::Trailing) => Function::RTrim,
                };
                let mut args = vec![self.bind_text_arg(inner, context)?];
                if let Some(what) = what {
                    args.push(self.bind_text_arg(what, context)?);
                }
                Ok((Expr::Call(function, args), Type::Text))
            }
            E::Position { expr: needle, r#in } => {
                let needle = self.bind_text_arg(needle, context)?;
                let haystack = self.bind_text_arg(r#in, context)?;
                Ok((Expr::Call(Function::Position, vec![needle, haystack]), Type::Int))
            }
            E::Ceil { expr: inner, field } | E::Floor { expr: inner, field } => {
                if !matches!(field, ast::CeilFloorKind::DateTimeField(ast::DateTimeField::NoDateTime)) {
                    return Err(self.unsupported(span, "CEIL/FLOOR with a scale or unit"));
                }
                let (e, ty) = self.bind_expr(inner, context)?;
                if !(ty.is_numeric() || ty == Type::Null) {
                    return Err(self.error(inner.span(), format!("CEIL/FLOOR take a number, not {ty}")));
                }
                let function = if matches!(expr, E::Ceil { .. }) { Function::Ceil } else { Function::Floor };
                Ok((Expr::Call(function, vec![e]), ty))
            }
            E::Function(function) => self.bind_function(function, context),
            E::CompoundFieldAccess { root, access_chain } if self.one_off => {
                let [ast::AccessExpr::Subscript(ast::Subscript::Index { index })] = access_chain.as_slice() else {
                    return Err(self.unsupported(span, "array slices and field access"));
                };
                let (array, ty) = self.bind_expr(root, context)?;
                let (index, index_ty) = self.bind_expr(index, context)?;
                if !matches!(ty, Type::Text | Type::Null) || !matches!(index_ty, Type::Int | Type::Null) {
                    return Err(
                        self.error(span, format!("a subscript reads an array by an integer, not {ty}[{index_ty}]"))
                    );
                }
                Ok((Expr::Call(Function::ArrayElement, vec![array, index]), Type::Text))
            }
            E::Collate { expr: inner, collation } => {
                // Text compares by code point: the collations that mean that are accepted.
                let name = collation.0.last().map(|p| p.to_string().trim_matches('"').to_owned()).unwrap_or_default();
                if !matches!(name.as_str(), "default" | "C" | "POSIX" | "ucs_basic") {
                    return Err(
                        self.unsupported(span, format!("the collation {collation} (text compares by code point)"))
                    );
                }
                self.bind_expr(inner, context)
            }
            other => Err(self.unsupported(span, format!("the expression `{other}`"))),
        }
    }

    fn bind_column(
        &mut self,
        parts: &[ast::Ident],
        context: &mut Context<'_>,
        span: sqlparser::tokenizer::Span,
    ) -> Result<(Expr, Type)> {
        let scope = match context {
            Context::Rows(scope) => scope,
            Context::Groups { input, .. } => input,
        };
        let i = match self.resolve_column(parts, scope, span) {
            Ok(i) => i,
            Err(unknown) => return self.resolve_outer(parts, span).ok_or(unknown),
        };
        match context {
            Context::Rows(scope) => Ok((Expr::Column(i), scope.columns[i].ty)),
            // Reached only when the column is not a GROUP BY expression.
            Context::Groups { input, .. } => Err(self.not_grouped(&input.columns[i].name, self.location(span))),
        }
    }

    /// A column of an enclosing query (inside a subquery), innermost first.
    fn resolve_outer(&self, parts: &[ast::Ident], span: sqlparser::tokenizer::Span) -> Option<(Expr, Type)> {
        self.outer.iter().rev().enumerate().find_map(|(i, scope)| {
            let column = self.resolve_column(parts, scope, span).ok()?;
            Some((Expr::Outer { depth: i + 1, column }, scope.columns[column].ty))
        })
    }

    /// `(SELECT ...)`, `EXISTS (SELECT ...)`, `x [NOT] IN (SELECT ...)` over
    /// rows of `scope` (one-off queries): bound with `scope` as its outer scope.
    fn bind_subquery(&mut self, expr: &ast::Expr, context: &mut Context<'_>) -> Result<(Expr, Type)> {
        let scope = context_rows(context).clone();
        // SQLite's `x IN name`: `x IN (SELECT * FROM name)`.
        let table_query;
        let (query, operand, negated) = match expr {
            ast::Expr::In { expr: operand, target: ast::InTarget::Table { name, args: None }, negated, .. } => {
                let text = format!("SELECT * FROM {name}");
                let parsed = sqlparser::parser::Parser::new(&sqlparser::dialect::GenericDialect {})
                    .try_with_sql(&text)
                    .and_then(|mut parser| parser.parse_query());
                table_query = parsed.map_err(|e| self.error(expr.span(), format!("IN {name}: {e}")))?;
                (&table_query, Some(operand), *negated)
            }
            ast::Expr::Subquery(query) => (query, None, false),
            ast::Expr::Function(ast::Function { args: ast::FunctionArguments::Subquery(query), .. }) => {
                (query, None, false)
            }
            ast::Expr::Exists { subquery, negated } => (subquery, None, *negated),
            ast::Expr::In { expr: operand, target: ast::InTarget::Subquery(query), negated, .. } => {
                (query, Some(operand), *negated)
            }
            other => return Err(self.unsupported(other.span(), "this subquery")),
        };
        // Where the subquery's own errors point (a generated one's are the IN's).
        let generated = matches!(expr, ast::Expr::In { target: ast::InTarget::Table { .. }, .. });
        let query_span = if generated { expr.span() } else { query.span() };
        let operand = match operand {
            Some(o) => Some(self.bind_expr(o, context)?),
            None => None,
        };
        self.outer.push(scope);
        let allowed = std::mem::replace(&mut self.subqueries, false);
        // The enclosing query's window columns are not the subquery's.
        let windows = std::mem::take(&mut self.windows);
        self.ordered = matches!(expr, ast::Expr::Function(_));
        let bound = self.bind_query(query);
        self.ordered = false;
        self.windows = windows;
        self.subqueries = allowed;
        self.outer.pop();
        // A generated `SELECT * FROM name` has no place in the text: its errors are the IN's.
        let bound = bound.map_err(|e| match e {
            Error::Sql { message, .. } if generated => Error::sql(self.location(expr.span()), message),
            other => other,
        })?;
        let kind = match (expr, &operand) {
            (ast::Expr::Exists { .. }, _) => SubqueryKind::Exists,
            (ast::Expr::Function(_), _) => SubqueryKind::Array,
            (_, Some(_)) => SubqueryKind::In,
            _ => SubqueryKind::Scalar,
        };
        let ty = match bound.scope.columns.as_slice() {
            _ if kind == SubqueryKind::Exists => Type::Bool,
            [column] => column.ty,
            columns => {
                let message = format!("a subquery used as an expression returns one column, not {}", columns.len());
                return Err(self.error(query_span, message));
            }
        };
        if kind == SubqueryKind::Scalar && !self.one_off && !at_most_one_row(&bound.rel) {
            return Err(self.unsupported(
                query_span,
                "a scalar subquery in a view that may return more than one row (a view cannot stop at a \
                 second row as a query does): aggregate it (MAX(...)) or add LIMIT 1",
            ));
        }
        let mut rel = bound.rel;
        self.outer_to_groups(&mut rel, context, query_span)?;
        let operand = match (operand, kind) {
            (Some((e, operand_ty)), SubqueryKind::In) => {
                let Some(common) = operand_ty.common(ty) else {
                    return Err(self.error(expr.span(), format!("IN compares {operand_ty} with a subquery of {ty}")));
                };
                // Both sides as one type, so that equal values are equal keys.
                if ty != common {
                    rel = Rel::Project {
                        input: Box::new(rel),
                        exprs: vec![Expr::Cast(Box::new(Expr::Column(0)), common)],
                    };
                }
                Some(Box::new(if operand_ty == common { e } else { Expr::Cast(Box::new(e), common) }))
            }
            _ => None,
        };
        let subquery = Expr::Subquery { kind, operand, rel: Box::new(rel) };
        let result = match kind {
            SubqueryKind::Scalar => ty,
            SubqueryKind::Array => Type::Text,
            SubqueryKind::Exists | SubqueryKind::In => Type::Bool,
        };
        Ok((if negated { Expr::Not(Box::new(subquery)) } else { subquery }, result))
    }

    /// A subquery of an aggregated query was bound over its input rows: its
    /// references to them (at any depth of its own subqueries) become
    /// references to the group columns they are, which the operator above
    /// the aggregate reads (PostgreSQL's rule: a subquery may read the
    /// groups' keys only).
    fn outer_to_groups(&self, rel: &mut Rel, context: &Context<'_>, span: sqlparser::tokenizer::Span) -> Result<()> {
        let Context::Groups { input, group, .. } = context else { return Ok(()) };
        let mut ungrouped = None;
        rel.map_outer(1, &mut |outer| {
            if let Expr::Outer { column, .. } = outer {
                match group.iter().position(|(g, _)| *g == Expr::Column(*column)) {
                    Some(g) => *column = g,
                    None => ungrouped = ungrouped.or(Some(*column)),
                }
            }
        });
        match ungrouped {
            None => Ok(()),
            Some(c) => Err(self.error(
                span,
                format!(
                    "subquery uses ungrouped column \"{}\" from outer query (it must appear in GROUP BY)",
                    input.columns[c].name
                ),
            )),
        }
    }

    /// `operand op ANY (subquery)` (or SOME), `operand op ALL (subquery)`:
    /// as `EXISTS` subqueries over the subquery's rows, with SQL's answers.
    /// ANY is TRUE if the comparison is TRUE for some row, else NULL if it is
    /// NULL for some row, else FALSE (over no rows too); ALL is FALSE if it
    /// is FALSE for some row, else NULL if it is NULL for some, else TRUE.
    fn bind_quantified(
        &mut self,
        operand: &ast::Expr,
        op: &ast::BinaryOperator,
        query: &ast::Query,
        all: bool,
        context: &mut Context<'_>,
        span: sqlparser::tokenizer::Span,
    ) -> Result<(Expr, Type)> {
        let (operand_expr, operand_ty) = self.bind_expr(operand, context)?;
        if operand_expr.has_subquery() {
            return Err(self.unsupported(operand.span(), "a subquery as the operand of ANY or ALL"));
        }
        let mut bound = self.bind_inner_query(context_rows(context).clone(), query)?;
        let [column] = bound.scope.columns.as_slice() else {
            let message = format!("the subquery of ANY or ALL returns one column, not {}", bound.scope.columns.len());
            return Err(self.error(query.span(), message));
        };
        self.outer_to_groups(&mut bound.rel, context, query.span())?;
        // The operand, read from inside the subquery: one level further out.
        let mut inner = operand_expr;
        inner.map_outer_depths(&mut |depth| depth + 1);
        inner.map_columns_to_outer();
        let (compare, _) = self.bind_binary(op, (inner, operand_ty), (Expr::Column(0), column.ty), span)?;
        let exists = |predicate: Expr| Expr::Subquery {
            kind: SubqueryKind::Exists,
            operand: None,
            rel: Box::new(Rel::Filter { input: Box::new(bound.rel.clone()), predicate }),
        };
        let some_null = exists(Expr::IsNull(Box::new(compare.clone())));
        let (decisive, answer) = match all {
            false => (exists(compare), true),
            true => (exists(Expr::Not(Box::new(compare))), false),
        };
        let whens = vec![(decisive, Expr::Literal(Value::Bool(answer))), (some_null, Expr::Literal(Value::Null))];
        Ok((Expr::Case(whens, Box::new(Expr::Literal(Value::Bool(!answer)))), Type::Bool))
    }

    /// An `ESCAPE` clause's character: `None` without the clause,
    /// `Some(None)` for `ESCAPE ''` (no escape character at all).
    fn escape_char(
        &self,
        escape: Option<&ast::Expr>,
        span: sqlparser::tokenizer::Span,
    ) -> Result<Option<Option<char>>> {
        let Some(escape) = escape else { return Ok(None) };
        let text = match escape {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::SingleQuotedString(s) | ast::Value::EscapedStringLiteral(s) => s.as_str(),
                other => return Err(self.error(span, format!("ESCAPE takes a one-character string, not {other}"))),
            },
            other => return Err(self.error(other.span(), "ESCAPE takes a constant one-character string")),
        };
        let mut chars = text.chars();
        match (chars.next(), chars.next()) {
            (None, _) => Ok(Some(None)),
            (Some(c), None) => Ok(Some(Some(c))),
            _ => Err(self.error(span, format!("ESCAPE takes one character, not '{text}'"))),
        }
    }

    fn bind_text_arg(&mut self, e: &ast::Expr, context: &mut Context<'_>) -> Result<Expr> {
        let (expr, ty) = self.bind_expr(e, context)?;
        match ty {
            Type::Text | Type::Null => Ok(expr),
            other => Err(self.error(e.span(), format!("expected TEXT here, not {other}"))),
        }
    }
    fn bind_int_arg(&mut self, e: &ast::Expr, context: &mut Context<'_>) -> Result<Expr> {
        let (expr, ty) = self.bind_expr(e, context)?;
        match ty {
            Type::Int | Type::Null => Ok(expr),
            other => Err(self.error(e.span(), format!("expected an integer here, not {other}"))),
        }
    }

    /// When describing, a placeholder stands for `value` where a constant
    /// is needed (the statement is bound again with the values when run).
    fn described(&self, expr: &ast::Expr, value: i64) -> Option<i64> {
        (self.parameters.is_some() && placeholder_index(expr).is_some()).then_some(value)
    }

    /// When describing, a placeholder `expr` takes type `ty` (its first known type wins).
    pub(crate) fn note_parameter(&self, expr: &ast::Expr, ty: Type) {
        let (Some(parameters), Some(index)) = (&self.parameters, placeholder_index(expr)) else { return };
        let mut parameters = parameters.borrow_mut();
        if parameters.len() < index {
            parameters.resize(index, None);
        }
        if ty != Type::Null && parameters[index - 1].is_none() {
            parameters[index - 1] = Some(ty);
        }
    }

    fn bind_literal(&self, value: &ast::Value, span: sqlparser::tokenizer::Span) -> Result<(Expr, Type)> {
        Ok(match value {
            ast::Value::Number(text, _) => {
                if let Ok(i) = text.parse::<i64>() {
                    (Expr::Literal(Value::Int(i)), Type::Int)
                } else if text.contains(['e', 'E']) {
                    match text.parse::<f64>() {
                        Ok(x) => (Expr::Literal(Value::double(x)), Type::Double),
                        Err(_) => return Err(self.error(span, format!("invalid number {text}"))),
                    }
                } else {
                    match parse_decimal(text) {
                        Some(units) => {
                            let scale = text.split_once('.').map_or(0, |(_, f)| f.len().min(6)) as u8;
                            (Expr::Literal(Value::Decimal(units.into())), Type::Decimal { precision: 38, scale })
                        }
                        None => return Err(self.error(span, format!("number {text} is out of range"))),
                    }
                }
            }
            ast::Value::SingleQuotedString(s) | ast::Value::EscapedStringLiteral(s) => {
                (Expr::Literal(Value::Text(s.as_str().into())), Type::Text)
            }
            ast::Value::Boolean(b) => (Expr::Literal(Value::Bool(*b)), Type::Bool),
            ast::Value::Null => (Expr::Literal(Value::Null), Type::Null),
            ast::Value::Placeholder(p) => {
                let index = parameter_number(p);
                match (&self.parameters, index) {
                    (Some(parameters), Some(index)) => {
                        let mut parameters = parameters.borrow_mut();
                        if parameters.len() < index {
                            parameters.resize(index, None);
                        }
                        (Expr::Literal(Value::Null), Type::Null)
                    }
                    _ => return Err(self.error(span, format!("there is no parameter {p}"))),
                }
            }
            other => return Err(self.unsupported(span, format!("the literal {other}"))),
        })
    }

    fn bind_interval(&self, interval: &ast::Interval, span: sqlparser::tokenizer::Span) -> Result<(Expr, Type)> {
        let text = match interval.value.as_ref() {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::SingleQuotedString(s) => s.clone(),
                ast::Value::Number(n, _) => n.clone(),
                _ => return Err(self.error(span, "an INTERVAL takes a string, as in INTERVAL '10' SECOND")),
            },
            _ => return Err(self.error(span, "an INTERVAL takes a string, as in INTERVAL '10' SECOND")),
        };
        if interval.last_field.is_some() {
            return Err(self.unsupported(span, "INTERVAL ... TO ..."));
        }
        let micros = match &interval.leading_field {
            Some(field) => {
                let unit = field.to_string().to_lowercase();
                if unit.starts_with("month") || unit.starts_with("year") {
                    return Err(self.unsupported(span, "intervals of months or years (they have no fixed length)"));
                }
                let amount: f64 =
                    text.trim().parse().map_err(|_| self.error(span, format!("invalid INTERVAL amount '{text}'")))?;
                match time::unit_micros(&unit) {
                    Some(u) => (amount * u as f64).round() as i64,
                    None => return Err(self.unsupported(span, format!("the interval unit {unit}"))),
                }
            }
            None => {
                let lower = text.to_lowercase();
                if lower.contains("mon") || lower.contains("year") {
                    return Err(self.unsupported(span, "intervals of months or years (they have no fixed length)"));
                }
                time::parse_interval(&text).ok_or_else(|| {
                    self.error(span, format!("invalid INTERVAL '{text}' (e.g. '10 seconds', '1 day')"))
                })?
            }
        };
        Ok((Expr::Literal(Value::Interval(micros)), Type::Interval))
    }

    fn common_type(&self, a: Type, b: Type, span: sqlparser::tokenizer::Span, what: &str) -> Result<Type> {
        a.common(b).ok_or_else(|| self.error(span, format!("{what} have incompatible types {a} and {b}")))
    }

    /// A text literal compared with a typed value is read as that type.
    fn coerce_literal(&self, expr: Expr, to: Type, span: sqlparser::tokenizer::Span) -> Result<Expr> {
        match &expr {
            Expr::Literal(v @ Value::Text(text)) => match crate::value::cast_constant(v, to) {
                Some(value) => Ok(Expr::Literal(value)),
                None => Err(self.error(span, format!("'{text}' is not a valid {to}"))),
            },
            _ => Ok(expr),
        }
    }

    /// Makes two operands comparable: same type, or numeric, or a text
    /// literal read as the other side's type.
    fn coerce_pair(
        &self,
        (a, at): (Expr, Type),
        (b, bt): (Expr, Type),
        span: sqlparser::tokenizer::Span,
        what: &str,
    ) -> Result<(Expr, Expr)> {
        if at == bt || at == Type::Null || bt == Type::Null {
            return Ok((a, b));
        }
        if at == Type::Text && matches!(a, Expr::Literal(_)) {
            return Ok((self.coerce_literal(a, bt, span)?, b));
        }
        if bt == Type::Text && matches!(b, Expr::Literal(_)) {
            return Ok((a, self.coerce_literal(b, at, span)?));
        }
        // An array element is text of the array's element type: it takes the other side's.
        if at == Type::Text && matches!(a, Expr::Call(Function::ArrayElement, _)) {
            return Ok((Expr::Cast(Box::new(a), bt), b));
        }
        if bt == Type::Text && matches!(b, Expr::Call(Function::ArrayElement, _)) {
            return Ok((a, Expr::Cast(Box::new(b), at)));
        }
        // Operands of a comparison get one type, so that an equality can be
        // a join key (values of different types never compare equal there).
        match at.common(bt) {
            Some(common) => Ok((conform(a, common), conform(b, common))),
            None => Err(self.error(span, format!("cannot compare {at} with {bt} in {what}"))),
        }
    }

    fn bind_binary(
        &self,
        op: &ast::BinaryOperator,
        (a, at): (Expr, Type),
        (b, bt): (Expr, Type),
        span: sqlparser::tokenizer::Span,
    ) -> Result<(Expr, Type)> {
        use ast::BinaryOperator as B;
        let comparison = match op {
            B::Eq => Some(BinaryOp::Eq),
            B::NotEq => Some(BinaryOp::NotEq),
            B::Lt => Some(BinaryOp::Lt),
            B::LtEq => Some(BinaryOp::LtEq),
            B::Gt => Some(BinaryOp::Gt),
            B::GtEq => Some(BinaryOp::GtEq),
            _ => None,
        };
        if let Some(cmp) = comparison {
            let (a, b) = self.coerce_pair((a, at), (b, bt), span, &format!("`{op}`"))?;
            return Ok((fold(Expr::binary(cmp, a, b)), Type::Bool));
        }
        match op {
            B::And | B::Or => {
                self.expect_bool(at, span, &op.to_string())?;
                self.expect_bool(bt, span, &op.to_string())?;
                let op = if *op == B::And { BinaryOp::And } else { BinaryOp::Or };
                Ok((Expr::binary(op, a, b), Type::Bool))
            }
            B::StringConcat => Ok((fold(Expr::binary(BinaryOp::Concat, a, b)), Type::Text)),
            B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo => {
                let arith = match op {
                    B::Plus => BinaryOp::Add,
                    B::Minus => BinaryOp::Subtract,
                    B::Multiply => BinaryOp::Multiply,
                    B::Divide => BinaryOp::Divide,
                    _ => BinaryOp::Modulo,
                };
                use Type as T;
                let result = match (at, bt, arith) {
                    (T::Null, T::Null, _) => Some(T::Null),
                    (x, y, _) if x.is_numeric() && y.is_numeric() => x.numeric_join(y),
                    (T::Null, y, _) if y.is_numeric() => Some(y),
                    (x, T::Null, _) if x.is_numeric() => Some(x),
                    (T::Timestamp, T::Interval, BinaryOp::Add | BinaryOp::Subtract) => Some(T::Timestamp),
                    (T::Interval, T::Timestamp, BinaryOp::Add) => Some(T::Timestamp),
                    (T::Timestamp, T::Timestamp, BinaryOp::Subtract) => Some(T::Interval),
                    (T::Date, T::Int, BinaryOp::Add | BinaryOp::Subtract) => Some(T::Date),
                    (T::Date, T::Date, BinaryOp::Subtract) => Some(T::Int),
                    (T::Date, T::Interval, BinaryOp::Add | BinaryOp::Subtract) => Some(T::Timestamp),
                    (T::Interval, T::Interval, BinaryOp::Add | BinaryOp::Subtract) => Some(T::Interval),
                    (T::Interval, y, BinaryOp::Multiply | BinaryOp::Divide) if y.is_numeric() => Some(T::Interval),
                    (x, T::Interval, BinaryOp::Multiply) if x.is_numeric() => Some(T::Interval),
                    (T::Timestamp | T::Date | T::Interval, T::Null, _) => Some(at),
                    (T::Null, T::Timestamp | T::Date | T::Interval, _) => Some(bt),
                    _ => None,
                };
                match result {
                    Some(ty) => Ok((fold(Expr::binary(arith, a, b)), ty)),
                    None => Err(self.error(span, format!("operator {op} does not apply to {at} and {bt}"))),
                }
            }
            B::PGRegexMatch | B::PGRegexIMatch | B::PGRegexNotMatch | B::PGRegexNotIMatch => {
                for (ty, side) in [(at, "left"), (bt, "right")] {
                    if !matches!(ty, Type::Text | Type::Null) {
                        return Err(self.error(span, format!("`{op}` matches TEXT, not {ty} ({side} side)")));
                    }
                }
                if let Expr::Literal(Value::Text(pattern)) = &b {
                    let ci = matches!(op, B::PGRegexIMatch | B::PGRegexNotIMatch);
                    if let Err(e) = crate::eval::compile_regex(pattern, ci) {
                        return Err(self.error(span, format!("invalid regular expression '{pattern}': {e}")));
                    }
                }
                let function = match op {
                    B::PGRegexMatch | B::PGRegexNotMatch => Function::RegexMatch,
                    _ => Function::RegexIMatch,
                };
                let test = Expr::Call(function, vec![a, b]);
                let negated = matches!(op, B::PGRegexNotMatch | B::PGRegexNotIMatch);
                Ok((if negated { Expr::Not(Box::new(test)) } else { test }, Type::Bool))
            }
            // OPERATOR(pg_catalog.op) is op.
            B::PGCustomBinaryOperator(parts) => match parts.as_slice() {
                [schema, symbol] if schema.eq_ignore_ascii_case("pg_catalog") => match operator_symbol(symbol) {
                    Some(op) => self.bind_binary(&op, (a, at), (b, bt), span),
                    None => Err(self.unsupported(span, format!("the operator {symbol}"))),
                },
                _ => Err(self.unsupported(span, format!("the operator {op}"))),
            },
            other => Err(self.unsupported(span, format!("the operator {other}"))),
        }
    }

    fn bind_function(&mut self, function: &ast::Function, context: &mut Context<'_>) -> Result<(Expr, Type)> {
        let span = function.span();
        let name = function_name(function);
        if function.over.is_some() {
            if let Some((_, column, ty)) = self.windows.iter().find(|(f, _, _)| f == function) {
                return Ok((Expr::Column(*column), *ty));
            }
            return Err(self.unsupported(span, "window functions outside SELECT items"));
        }
        if !function.within_group.is_empty() || function.null_treatment.is_some() {
            return Err(self.unsupported(span, "WITHIN GROUP and NULL treatment clauses"));
        }
        if function.filter.is_some() && !is_aggregate_name(&name) {
            return Err(self.error(span, format!("FILTER is only for aggregate functions, not {name}()")));
        }
        let (distinct, clauses) = match &function.args {
            ast::FunctionArguments::List(list) => {
                (matches!(list.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct)), list.clauses.as_slice())
            }
            ast::FunctionArguments::None => (false, &[][..]),
            ast::FunctionArguments::Subquery(_) => return Err(self.unsupported(span, "a subquery as an argument")),
        };
        let order = match clauses {
            [] => &[][..],
            [ast::FunctionArgumentClause::OrderBy(order)] if is_aggregate_name(&name) => order.as_slice(),
            _ => {
                return Err(
                    self.unsupported(span, "clauses inside a function's arguments other than an aggregate's ORDER BY")
                );
            }
        };
        let args = function_args(function);
        if is_aggregate_name(&name) {
            return self.bind_aggregate(&name, (distinct, function.filter.as_deref(), order), &args, context, span);
        }
        if distinct {
            return Err(self.error(span, format!("DISTINCT is only for aggregate functions, not {name}()")));
        }
        let mut bound = Vec::new();
        for arg in &args {
            match arg {
                FunctionArgument::Expr(e) => bound.push((self.bind_expr(e, context)?, e.span())),
                FunctionArgument::Star => return Err(self.error(span, format!("{name}() does not take *"))),
            }
        }
        let arity = |range: std::ops::RangeInclusive<usize>| -> Result<()> {
            if range.contains(&bound.len()) {
                Ok(())
            } else {
                let count = if range.start() == range.end() {
                    range.start().to_string()
                } else {
                    format!("{} to {}", range.start(), range.end())
                };
                Err(self.error(span, format!("{name}() takes {count} arguments, not {}", bound.len())))
            }
        };
        let expect = |i: usize, ok: &dyn Fn(Type) -> bool, what: &str| -> Result<()> {
            let ((_, ty), s) = &bound[i];
            if ok(*ty) || *ty == Type::Null {
                Ok(())
            } else {
                Err(self.error(*s, format!("argument {} of {name}() must be {what}, not {ty}", i + 1)))
            }
        };
        let is_text = |t: Type| t == Type::Text;
        let is_int = |t: Type| t == Type::Int;
        let is_num = |t: Type| t.is_numeric();
        let exprs = || bound.iter().map(|((e, _), _)| e.clone()).collect::<Vec<_>>();
        let (function, ty) = match name.as_str() {
            "coalesce" | "greatest" | "least" => {
                if bound.is_empty() {
                    return Err(self.error(span, format!("{name}() needs at least one argument")));
                }
                let mut ty = Type::Null;
                for ((_, t), s) in &bound {
                    ty = self.common_type(ty, *t, *s, &format!("{name}() arguments"))?;
                }
                let args = bound.iter().map(|((e, _), _)| conform(e.clone(), ty)).collect();
                let f = match name.as_str() {
                    "coalesce" => Function::Coalesce,
                    "greatest" => Function::Greatest,
                    _ => Function::Least,
                };
                return Ok((Expr::Call(f, args), ty));
            }
            "nullif" => {
                arity(2..=2)?;
                let ((a, at), _) = bound[0].clone();
                let ((b, bt), s) = bound[1].clone();
                let (a, b) = self.coerce_pair((a, at), (b, bt), s, "NULLIF")?;
                return Ok((Expr::Call(Function::NullIf, vec![a, b]), at));
            }
            "lower" | "upper" | "length" | "char_length" | "character_length" => {
                arity(1..=1)?;
                expect(0, &is_text, "TEXT")?;
                match name.as_str() {
                    "lower" => (Function::Lower, Type::Text),
                    "upper" => (Function::Upper, Type::Text),
                    _ => (Function::Length, Type::Int),
                }
            }
            "substr" | "substring" => {
                arity(2..=3)?;
                expect(0, &is_text, "TEXT")?;
                expect(1, &is_int, "an integer")?;
                if bound.len() == 3 {
                    expect(2, &is_int, "an integer")?;
                }
                (Function::Substring, Type::Text)
            }
            "trim" | "btrim" | "ltrim" | "rtrim" => {
                arity(1..=2)?;
                (0..bound.len()).try_for_each(|i| expect(i, &is_text, "TEXT"))?;
                let f = match name.as_str() {
                    "ltrim" => Function::LTrim,
                    "rtrim" => Function::RTrim,
                    _ => Function::Trim,
                };
                (f, Type::Text)
            }
            "replace" => {
                arity(3..=3)?;
                (0..3).try_for_each(|i| expect(i, &is_text, "TEXT"))?;
                (Function::Replace, Type::Text)
            }
            "concat" => (Function::Concat, Type::Text),
            "strpos" | "instr" => {
                arity(2..=2)?;
                (0..2).try_for_each(|i| expect(i, &is_text, "TEXT"))?;
                let mut args = exprs();
                args.swap(0, 1);
                return Ok((Expr::Call(Function::Position, args), Type::Int));
            }
            "split_part" => {
                arity(3..=3)?;
                expect(0, &is_text, "TEXT")?;
                expect(1, &is_text, "TEXT")?;
                expect(2, &is_int, "an integer")?;
                (Function::SplitPart, Type::Text)
            }
            "abs" => {
                arity(1..=1)?;
                expect(0, &|t| is_num(t) || t == Type::Interval, "a number")?;
                (Function::Abs, bound[0].0.1)
            }
            "round" | "floor" | "ceil" | "ceiling" | "trunc" => {
                arity(1..=2)?;
                expect(0, &is_num, "a number")?;
                if bound.len() == 2 {
                    expect(1, &is_int, "an integer")?;
                }
                let f = match name.as_str() {
                    "round" => Function::Round,
                    "floor" => Function::Floor,
                    "trunc" => Function::Trunc,
                    _ => Function::Ceil,
                };
                (f, bound[0].0.1)
            }
            "date_trunc" => {
                arity(2..=2)?;
                let unit = match &bound[0].0.0 {
                    Expr::Literal(Value::Text(unit)) if time::trunc_timestamp(unit, 0).is_some() => unit.to_lowercase(),
                    _ => {
                        return Err(self.error(
                            bound[0].1,
                            "date_trunc's first argument is a unit such as 'second', 'minute', 'hour', 'day', 'week', \
                             'month', 'quarter' or 'year'",
                        ));
                    }
                };
                expect(1, &|t| matches!(t, Type::Timestamp | Type::Date), "a TIMESTAMP")?;
                return Ok((
                    Expr::Call(
                        Function::DateTrunc,
                        vec![Expr::Literal(Value::Text(unit.into())), bound[1].0.0.clone()],
                    ),
                    Type::Timestamp,
                ));
            }
            "mod" => {
                arity(2..=2)?;
                let (a, b) = (bound[0].0.clone(), bound[1].0.clone());
                return self.bind_binary(&ast::BinaryOperator::Modulo, a, b, span);
            }
            "power" | "pow" | "sqrt" | "cbrt" | "exp" | "ln" | "log" | "log10" => {
                let two = matches!(name.as_str(), "power" | "pow") || (name == "log" && bound.len() == 2);
                arity(if name == "log" {
                    1..=2
                } else if two {
                    2..=2
                } else {
                    1..=1
                })?;
                (0..bound.len()).try_for_each(|i| expect(i, &is_num, "a number"))?;
                let f = match name.as_str() {
                    "power" | "pow" => Function::Power,
                    "sqrt" => Function::Sqrt,
                    "cbrt" => Function::Cbrt,
                    "exp" => Function::Exp,
                    "ln" => Function::Ln,
                    "log" if two => Function::LogBase,
                    _ => Function::Log10,
                };
                (f, Type::Double)
            }
            "sign" => {
                arity(1..=1)?;
                expect(0, &is_num, "a number")?;
                (Function::Sign, bound[0].0.1)
            }
            "pi" => {
                arity(0..=0)?;
                return Ok((Expr::Literal(Value::double(std::f64::consts::PI)), Type::Double));
            }
            "lpad" | "rpad" => {
                arity(2..=3)?;
                expect(0, &is_text, "TEXT")?;
                expect(1, &is_int, "an integer")?;
                if bound.len() == 3 {
                    expect(2, &is_text, "TEXT")?;
                }
                (if name == "lpad" { Function::LPad } else { Function::RPad }, Type::Text)
            }
            "left" | "right" | "repeat" => {
                arity(2..=2)?;
                expect(0, &is_text, "TEXT")?;
                expect(1, &is_int, "an integer")?;
                let f = match name.as_str() {
                    "left" => Function::Left,
                    "right" => Function::Right,
                    _ => Function::Repeat,
                };
                (f, Type::Text)
            }
            "reverse" | "initcap" | "ascii" => {
                arity(1..=1)?;
                expect(0, &is_text, "TEXT")?;
                match name.as_str() {
                    "reverse" => (Function::Reverse, Type::Text),
                    "initcap" => (Function::InitCap, Type::Text),
                    _ => (Function::Ascii, Type::Int),
                }
            }
            "chr" => {
                arity(1..=1)?;
                expect(0, &is_int, "an integer")?;
                (Function::Chr, Type::Text)
            }
            "starts_with" => {
                arity(2..=2)?;
                (0..2).try_for_each(|i| expect(i, &is_text, "TEXT"))?;
                (Function::StartsWith, Type::Bool)
            }
            "regexp_replace" => {
                arity(3..=4)?;
                (0..bound.len()).try_for_each(|i| expect(i, &is_text, "TEXT"))?;
                let flags = match bound.get(3) {
                    None => String::new(),
                    Some(((Expr::Literal(Value::Text(flags)), _), s)) => {
                        if crate::function::regexp_flags(flags).is_none() {
                            let message = format!("regexp_replace's flags are g (every match), i and c, not '{flags}'");
                            return Err(self.error(*s, message));
                        }
                        flags.to_string()
                    }
                    Some((_, s)) => return Err(self.unsupported(*s, "regexp_replace flags that are not a constant")),
                };
                let case_insensitive = crate::function::regexp_flags(&flags).is_some_and(|(_, ci)| ci);
                if let Expr::Literal(Value::Text(pattern)) = &bound[1].0.0
                    && let Err(e) = crate::eval::compile_regex(pattern, case_insensitive)
                {
                    return Err(self.error(bound[1].1, format!("invalid regular expression '{pattern}': {e}")));
                }
                let mut args = exprs();
                args.truncate(3);
                args.push(Expr::Literal(Value::Text(flags.into())));
                return Ok((fold(Expr::Call(Function::RegexpReplace, args)), Type::Text));
            }
            "to_char" => {
                arity(2..=2)?;
                expect(
                    0,
                    &|t| matches!(t, Type::Timestamp | Type::Date),
                    "a TIMESTAMP or DATE (to_char of numbers is not supported)",
                )?;
                expect(1, &is_text, "TEXT")?;
                (Function::ToChar, Type::Text)
            }
            "date_part" => {
                arity(2..=2)?;
                let field = match &bound[0].0.0 {
                    Expr::Literal(Value::Text(field)) if time::extract(field, 0).is_some() => field.to_lowercase(),
                    _ => {
                        return Err(self.error(
                            bound[0].1,
                            "date_part's first argument is a field such as 'year', 'month', 'day', 'hour', 'minute', \
                             'second', 'dow', 'doy' or 'epoch'",
                        ));
                    }
                };
                expect(1, &|t| matches!(t, Type::Timestamp | Type::Date | Type::Interval), "a TIMESTAMP")?;
                let extract =
                    Expr::Call(Function::Extract, vec![Expr::Literal(Value::Text(field.into())), bound[1].0.0.clone()]);
                // date_part is a DOUBLE (PostgreSQL's double precision), whatever the field.
                return Ok((fold(Expr::Cast(Box::new(extract), Type::Double)), Type::Double));
            }
            "age" => {
                return Err(self.unsupported(
                    span,
                    "age(): it counts years and months, which intervals here do not hold; subtract the \
                     timestamps (a - b) for an interval in days and time",
                ));
            }
            "now" | "current_timestamp" | "random" => {
                return Err(self.unsupported(
                    span,
                    format!("{name}(): a view must compute the same rows every time it replays its input"),
                ));
            }
            _ => {
                let args: Vec<_> = bound.iter().map(|((e, t), _)| (e.clone(), *t)).collect();
                if let Some(call) = self.bind_system_function(&name, args, span) {
                    return call;
                }
                let known = [
                    "coalesce",
                    "nullif",
                    "lower",
                    "upper",
                    "length",
                    "substring",
                    "trim",
                    "ltrim",
                    "rtrim",
                    "replace",
                    "concat",
                    "strpos",
                    "split_part",
                    "abs",
                    "round",
                    "floor",
                    "ceil",
                    "date_trunc",
                    "greatest",
                    "least",
                    "trunc",
                    "mod",
                    "power",
                    "sqrt",
                    "cbrt",
                    "exp",
                    "ln",
                    "log",
                    "log10",
                    "sign",
                    "pi",
                    "lpad",
                    "rpad",
                    "left",
                    "right",
                    "repeat",
                    "reverse",
                    "initcap",
                    "ascii",
                    "chr",
                    "starts_with",
                    "regexp_replace",
                    "to_char",
                    "date_part",
                    "count",
                    "sum",
                    "min",
                    "max",
                    "avg",
                ];
                let hint = suggestion(&name, known.iter().copied())
                    .map(|s| format!("; did you mean {s}()?"))
                    .unwrap_or_default();
                return Err(self.error(span, format!("unknown function {name}(){hint}")));
            }
        };
        Ok((fold(Expr::Call(function, exprs())), ty))
    }

    fn bind_aggregate(
        &mut self,
        name: &str,
        clauses: (bool, Option<&ast::Expr>, &[ast::OrderByExpr]),
        args: &[FunctionArgument<'_>],
        context: &mut Context<'_>,
        span: sqlparser::tokenizer::Span,
    ) -> Result<(Expr, Type)> {
        // An aggregate's arguments are over its input rows: no subqueries there.
        let allowed = std::mem::replace(&mut self.subqueries, false);
        let bound = self.bind_aggregate_call(name, clauses, args, context, span);
        self.subqueries = allowed;
        bound.map_err(|e| match e {
            Error::Sql { location, message } if message == format!("not supported: {SUBQUERY_REFUSED}") => {
                let message = "not supported: a subquery in an aggregate's argument (compute it in FROM and join it)";
                Error::sql(location, message)
            }
            other => other,
        })
    }

    fn bind_aggregate_call(
        &mut self,
        name: &str,
        (distinct, filter, order): (bool, Option<&ast::Expr>, &[ast::OrderByExpr]),
        args: &[FunctionArgument<'_>],
        context: &mut Context<'_>,
        span: sqlparser::tokenizer::Span,
    ) -> Result<(Expr, Type)> {
        if matches!(name, "variance" | "var_samp" | "var_pop" | "stddev" | "stddev_samp" | "stddev_pop") {
            // The order of the values changes no variance: the ORDER BY is checked, then dropped.
            if let Context::Groups { input, .. } = &*context {
                let input: Scope = (*input).clone();
                self.bind_aggregate_order(order, &input)?;
            }
            return self.bind_variance(name, (distinct, filter), args, context, span);
        }
        let Context::Groups { input, group, aggregates } = context else {
            return Err(self.error(span, format!("the aggregate {name}() is not allowed here")));
        };
        // FILTER (WHERE c): the rows where c is TRUE, as the argument NULL elsewhere.
        let filter = match filter {
            Some(f) if contains_aggregate(f) => {
                return Err(self.error(f.span(), "aggregate functions are not allowed in FILTER"));
            }
            Some(f) => {
                let input: &Scope = input;
                let (predicate, ty) = self.bind_expr(f, &mut Context::Rows(input))?;
                self.expect_bool(ty, f.span(), "FILTER")?;
                Some(predicate)
            }
            None => None,
        };
        let mut separator: Box<str> = "".into();
        let input_scope: &Scope = input;
        let keys = self.bind_aggregate_order(order, input_scope)?;
        let (func, arg, arg_type) = match (name, args) {
            ("count", [FunctionArgument::Star]) if !distinct => {
                (AggregateFunction::CountRows, Expr::Literal(Value::Null), Type::Null)
            }
            ("count", [FunctionArgument::Expr(ast::Expr::Tuple(_))]) => {
                return Err(self.unsupported(
                    span,
                    "COUNT of a row value ((a, b)); COUNT(DISTINCT a, b) counts the distinct tuples with no NULL \
                     member",
                ));
            }
            ("count", [_, _, ..]) if !distinct => {
                return Err(
                    self.error(span, "count() takes one argument (COUNT(DISTINCT a, b) counts distinct tuples)")
                );
            }
            ("count", [_, _, ..]) => {
                let mut members = Vec::new();
                for arg in args {
                    let FunctionArgument::Expr(e) = arg else {
                        return Err(self.error(span, "COUNT(DISTINCT a, b) takes expressions, not *"));
                    };
                    if contains_aggregate(e) {
                        return Err(self.error(e.span(), "aggregate functions cannot be nested"));
                    }
                    members.push(self.bind_expr(e, &mut Context::Rows(input_scope))?.0);
                }
                (AggregateFunction::Count, Expr::Call(Function::TupleKey, members), Type::Text)
            }
            ("string_agg", [FunctionArgument::Expr(e), FunctionArgument::Expr(sep)]) => {
                if contains_aggregate(e) {
                    return Err(self.error(e.span(), "aggregate functions cannot be nested"));
                }
                let input: &Scope = input;
                let (arg, ty) = self.bind_expr(e, &mut Context::Rows(input))?;
                if !matches!(ty, Type::Text | Type::Null) {
                    return Err(self.error(e.span(), format!("string_agg() joins TEXT, not {ty} (cast it)")));
                }
                let constant = match sep {
                    ast::Expr::Value(_) => self.bind_expr(sep, &mut Context::Rows(&Scope::default()))?.0,
                    _ => Expr::Literal(Value::Null),
                };
                match constant {
                    Expr::Literal(Value::Text(s)) => separator = s,
                    _ => {
                        return Err(self.unsupported(sep.span(), "a string_agg() separator other than a text constant"));
                    }
                }
                match keys.is_empty() {
                    true => (AggregateFunction::StringAgg, arg, Type::Text),
                    false => {
                        if distinct && keys.iter().any(|key| key.expr != arg) {
                            return Err(self.error(
                                span,
                                "in an aggregate with DISTINCT, ORDER BY expressions must appear in its argument list",
                            ));
                        }
                        (AggregateFunction::StringAggOrdered, ordered_argument(arg, &keys), Type::Text)
                    }
                }
            }
            ("array_agg", [FunctionArgument::Expr(e)]) => {
                if contains_aggregate(e) {
                    return Err(self.error(e.span(), "aggregate functions cannot be nested"));
                }
                let input: &Scope = input;
                let (arg, _) = self.bind_expr(e, &mut Context::Rows(input))?;
                if distinct && keys.iter().any(|key| key.expr != arg) {
                    return Err(self.error(
                        span,
                        "in an aggregate with DISTINCT, ORDER BY expressions must appear in its argument list",
                    ));
                }
                // Without an ORDER BY, in the values' order (SQL leaves it to the system).
                let by_value = [SortKey { expr: arg.clone(), descending: false, nulls_first: false }];
                let keys = if keys.is_empty() { &by_value[..] } else { &keys[..] };
                let element = Expr::Call(Function::ArrayAggElement, vec![arg]);
                (AggregateFunction::ArrayAgg, ordered_argument(element, keys), Type::Text)
            }
            (_, [FunctionArgument::Expr(e)]) => {
                if contains_aggregate(e) {
                    return Err(self.error(e.span(), "aggregate functions cannot be nested"));
                }
                let input: &Scope = input;
                let (arg, ty) = self.bind_expr(e, &mut Context::Rows(input))?;
                let func = match name {
                    "count" => AggregateFunction::Count,
                    "sum" | "total" => AggregateFunction::Sum,
                    "min" => AggregateFunction::Min,
                    "max" => AggregateFunction::Max,
                    "avg" => AggregateFunction::Avg,
                    // FALSE orders before TRUE: all TRUE is the least, any TRUE the greatest.
                    "bool_and" | "every" => AggregateFunction::Min,
                    "bool_or" => AggregateFunction::Max,
                    _ => return Err(self.error(span, format!("{name}() takes two arguments"))),
                };
                if matches!(name, "bool_and" | "bool_or" | "every") && !matches!(ty, Type::Bool | Type::Null) {
                    return Err(self.error(e.span(), format!("{name}() needs a BOOLEAN, not {ty}")));
                }
                if matches!(func, AggregateFunction::Sum | AggregateFunction::Avg)
                    && !(ty.is_numeric() || ty == Type::Null)
                {
                    return Err(self.error(e.span(), format!("{name}() needs a number, not {ty}")));
                }
                if name == "total" {
                    (func, Expr::Cast(Box::new(arg), Type::Double), Type::Double)
                } else {
                    (func, arg, ty)
                }
            }
            _ => return Err(self.error(span, format!("{name}() takes one argument"))),
        };
        // SQL computes an aggregate of an enclosing query's columns only in
        // that query, not per row of this (sub)query's input.
        if arg.columns().is_empty() && arg.is_correlated() {
            return Err(self.unsupported(
                span,
                format!(
                    "{name}() of only an enclosing query's columns inside a subquery (SQL computes it in that query)"
                ),
            ));
        }
        // MIN and MAX of the distinct values are MIN and MAX.
        let distinct = distinct && !matches!(func, AggregateFunction::Min | AggregateFunction::Max);
        let (func, arg, arg_type) = match filter {
            None => (func, arg, arg_type),
            Some(predicate) => {
                let (func, arg, arg_type) = match func {
                    AggregateFunction::CountRows => (AggregateFunction::Count, Expr::Literal(Value::Int(1)), Type::Int),
                    other => (other, arg, arg_type),
                };
                (func, Expr::Case(vec![(predicate, arg)], Box::new(Expr::Literal(Value::Null))), arg_type)
            }
        };
        let output_type = match func {
            AggregateFunction::CountRows | AggregateFunction::Count => Type::Int,
            AggregateFunction::Sum => match arg_type {
                Type::Null => Type::Int,
                t => t,
            },
            AggregateFunction::Avg => match arg_type {
                Type::Decimal { .. } => Type::Decimal { precision: 38, scale: 6 },
                _ => Type::Double,
            },
            AggregateFunction::Min | AggregateFunction::Max => arg_type,
            AggregateFunction::StringAgg | AggregateFunction::StringAggOrdered | AggregateFunction::ArrayAgg => {
                Type::Text
            }
        };
        let call = AggregateCall { func, distinct, arg, arg_type, output_type, separator };
        let index = match aggregates.iter().position(|a| *a == call) {
            Some(i) => i,
            None => {
                aggregates.push(call);
                aggregates.len() - 1
            }
        };
        let value = Expr::Column(group.len() + index);
        if name == "total" {
            // SQLite's total(): SUM as a DOUBLE, 0.0 over no values.
            return Ok((Expr::Call(Function::Coalesce, vec![value, Expr::Literal(Value::double(0.0))]), output_type));
        }
        Ok((value, output_type))
    }
}

impl Binder<'_> {
    /// An aggregate's `ORDER BY` keys, over its input rows. Only
    /// string_agg's result depends on them; the other aggregates check them
    /// and drop them.
    fn bind_aggregate_order(&mut self, order: &[ast::OrderByExpr], input: &Scope) -> Result<Vec<SortKey>> {
        for item in order {
            if contains_aggregate(&item.expr) {
                return Err(self.error(item.expr.span(), "aggregate functions cannot be nested"));
            }
            if matches!(&item.expr, ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..))) {
                return Err(self.unsupported(
                    item.expr.span(),
                    "a number in an aggregate's ORDER BY (it orders by expressions, not output positions)",
                ));
            }
        }
        self.bind_sort_keys(order, input)
    }

    /// VARIANCE/VAR_SAMP/VAR_POP and STDDEV/STDDEV_SAMP/STDDEV_POP: from
    /// SUM(x * x), SUM(x) and COUNT(x) (sums exact for integers and
    /// decimals), as a DOUBLE: `(Σx² - (Σx)²/n) / (n - 1)` (or `/ n`), never
    /// below 0; NULL over no values (and VAR_SAMP over one), and NULL when a
    /// square is past its type's range (COUNT(x * x) falls short of COUNT(x)).
    fn bind_variance(
        &mut self,
        name: &str,
        (distinct, filter): (bool, Option<&ast::Expr>),
        args: &[FunctionArgument<'_>],
        context: &mut Context<'_>,
        span: sqlparser::tokenizer::Span,
    ) -> Result<(Expr, Type)> {
        if distinct {
            return Err(self.unsupported(span, format!("{name}(DISTINCT ...)")));
        }
        let [FunctionArgument::Expr(e)] = args else {
            return Err(self.error(span, format!("{name}() takes one argument")));
        };
        let Context::Groups { input, .. } = &*context else {
            return Err(self.error(span, format!("the aggregate {name}() is not allowed here")));
        };
        let input: &Scope = input;
        let (_, ty) = self.bind_expr(e, &mut Context::Rows(input))?;
        if !ty.is_numeric() && ty != Type::Null {
            return Err(self.error(e.span(), format!("{name}() needs a number, not {ty}")));
        }
        // The parts as aggregates of the same argument (their own FILTER kept).
        let square = ast::Expr::BinaryOp {
            left: Box::new(ast::Expr::Nested(Box::new((*e).clone()))),
            op: ast::BinaryOperator::Multiply,
            right: Box::new(ast::Expr::Nested(Box::new((*e).clone()))),
        };
        let part = |this: &mut Self, func: &str, arg: &ast::Expr, context: &mut Context<'_>| -> Result<Expr> {
            let expr_args = [FunctionArgument::Expr(arg)];
            let (value, _) = this.bind_aggregate(func, (false, filter, &[]), &expr_args, context, span)?;
            Ok(Expr::Cast(Box::new(value), Type::Double))
        };
        let squares = part(self, "sum", &square, context)?;
        let sum = part(self, "sum", e, context)?;
        let n = part(self, "count", e, context)?;
        let n_squares = part(self, "count", &square, context)?;
        let population = matches!(name, "var_pop" | "stddev_pop");
        let divisor = if population {
            n.clone()
        } else {
            Expr::binary(BinaryOp::Subtract, n.clone(), Expr::Literal(Value::double(1.0)))
        };
        let spread = Expr::binary(
            BinaryOp::Subtract,
            squares,
            Expr::binary(BinaryOp::Divide, Expr::binary(BinaryOp::Multiply, sum.clone(), sum), n.clone()),
        );
        // Never below 0 (rounding), and NULL stays NULL (GREATEST would make it 0).
        let raw = Expr::binary(BinaryOp::Divide, spread, divisor);
        let negative = Expr::binary(BinaryOp::Lt, raw.clone(), Expr::Literal(Value::double(0.0)));
        let variance = Expr::Case(vec![(negative, Expr::Literal(Value::double(0.0)))], Box::new(raw));
        let value = if name.starts_with("stddev") { Expr::Call(Function::Sqrt, vec![variance]) } else { variance };
        let complete = Expr::binary(BinaryOp::Eq, n_squares, n);
        Ok((Expr::Case(vec![(complete, value)], Box::new(Expr::Literal(Value::Null))), Type::Double))
    }
}

/// A RANGE frame's bound with its offset, where it has one (`Preceding(0)`
/// from `bind_frame` and the offset's value).
fn range_bound(bound: FrameBound, offset: &Value) -> FrameBound {
    match (bound, crate::plan::RangeOffset::of(offset)) {
        (FrameBound::Preceding(_), Some(offset)) => FrameBound::RangePreceding(offset),
        (FrameBound::Following(_), Some(offset)) => FrameBound::RangeFollowing(offset),
        (other, _) => other,
    }
}

/// The rows an expression is over: its own, or an aggregated query's input.
fn context_rows<'s>(context: &'s Context<'_>) -> &'s Scope {
    match context {
        Context::Rows(scope) => scope,
        Context::Groups { input, .. } => input,
    }
}

/// string_agg's argument under `ORDER BY keys`: `Function::OrderedValue`
/// of the value and each key with its flags (1 descending, 2 NULLS FIRST).
fn ordered_argument(value: Expr, keys: &[SortKey]) -> Expr {
    let mut args = vec![value];
    for key in keys {
        let flags = i64::from(key.descending) | (i64::from(key.nulls_first) << 1);
        args.extend([Expr::Literal(Value::Int(flags)), key.expr.clone()]);
    }
    Expr::Call(Function::OrderedValue, args)
}

/// Gives each repeated column name of a view's output the first free
/// `name_N`, as a view's rows are keyed by name: (column, old, new) per
/// rename. Wherever a view's columns are named (defining it, reading it).
fn rename_repeated(scope: &mut Scope) -> Vec<(usize, String, String)> {
    let mut taken: BTreeSet<String> = scope.columns.iter().map(|c| c.name.clone()).collect();
    let mut seen = BTreeSet::new();
    let mut renames = Vec::new();
    for (i, column) in scope.columns.iter_mut().enumerate() {
        if seen.insert(column.name.clone()) {
            continue;
        }
        let renamed = (2..).map(|n| format!("{}_{n}", column.name)).find(|n| !taken.contains(n)).expect("unbounded");
        taken.insert(renamed.clone());
        seen.insert(renamed.clone());
        renames.push((i, std::mem::replace(&mut column.name, renamed.clone()), renamed));
    }
    renames
}

/// A SELECT item after `*` expansion.
enum Item<'q> {
    Expr(&'q ast::Expr),
    /// A column that `*` (or `t.*`, at the span) stands for.
    Column(usize, sqlparser::tokenizer::Span),
}

/// Where the `i`th output column of a SELECT is written, when each item
/// is one column (no `*`).
fn item_span(body: &ast::SetExpr, i: usize) -> Option<sqlparser::tokenizer::Span> {
    let ast::SetExpr::Select(select) = body else { return None };
    let one_each = select
        .projection
        .iter()
        .all(|item| matches!(item, ast::SelectItem::UnnamedExpr(_) | ast::SelectItem::ExprWithAlias { .. }));
    one_each.then(|| select.projection.get(i).map(|item| item.span())).flatten()
}

/// The column name SQL gives an unaliased expression.
fn output_name(expr: &ast::Expr) -> String {
    match expr {
        ast::Expr::Identifier(ident) => normalize(ident),
        ast::Expr::CompoundIdentifier(parts) => parts.last().map(normalize).unwrap_or_default(),
        ast::Expr::Function(f) => function_name(f),
        ast::Expr::Nested(inner) => output_name(inner),
        ast::Expr::Cast { expr, .. } => output_name(expr),
        ast::Expr::Extract { field, .. } => field.to_string().to_lowercase(),
        ast::Expr::Case { .. } => "case".to_owned(),
        _ => "?column?".to_owned(),
    }
}

/// Casts `expr` to `ty` unless it already is (a NULL literal stays).
fn conform(expr: Expr, ty: Type) -> Expr {
    match &expr {
        Expr::Literal(Value::Null) => expr,
        Expr::Literal(v) => cast(v, ty).map_or(expr.clone(), Expr::Literal),
        _ => Expr::Cast(Box::new(expr), ty),
    }
}

/// Evaluates an expression without columns once, at bind time.
fn fold(expr: Expr) -> Expr {
    if expr.columns().is_empty() && !expr.is_correlated() { Expr::Literal(eval(&expr, &[])) } else { expr }
}

/// A function's unnamed arguments (named ones are left out: callers compare
/// the count with the arguments given).
fn unnamed_args(args: &[ast::FunctionArg]) -> Vec<&ast::Expr> {
    args.iter()
        .filter_map(|a| match a {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect()
}

/// A table function called in FROM, with its unbound arguments.
struct TableCall<'f> {
    function: TableFunction,
    span: sqlparser::tokenizer::Span,
    args: Vec<&'f ast::Expr>,
    alias: Option<&'f ast::TableAlias>,
}

/// The table function `name` names (unqualified or in `pg_catalog`).
fn table_function(name: &ast::ObjectName) -> Option<TableFunction> {
    let (schema, ident) = match name.0.as_slice() {
        [ast::ObjectNamePart::Identifier(ident)] => (None, ident),
        [ast::ObjectNamePart::Identifier(schema), ast::ObjectNamePart::Identifier(ident)] => {
            (Some(normalize(schema)), ident)
        }
        _ => return None,
    };
    match (schema.as_deref(), normalize(ident).as_str()) {
        (None | Some("pg_catalog"), "unnest") => Some(TableFunction::Unnest),
        (None | Some("pg_catalog"), "pg_options_to_table") => Some(TableFunction::OptionsToTable),
        (None | Some("pg_catalog"), "generate_series") => Some(TableFunction::GenerateSeries),
        _ => None,
    }
}

/// A FROM item that reads the items before it.
enum LateralItem<'f> {
    Call(TableCall<'f>),
    Subquery(&'f ast::Query, Option<&'f ast::TableAlias>),
}

/// A condition over (left, right) columns as one inside the right side of a
/// LATERAL join: left columns become references one query out, right ones
/// its own (the caller has moved its outer references one level out).
fn into_lateral_side(expr: &mut Expr, left_width: usize) {
    match expr {
        Expr::Column(column) if *column < left_width => *expr = Expr::Outer { depth: 1, column: *column },
        Expr::Column(column) => *column -= left_width,
        other => other.children_mut().into_iter().for_each(|child| into_lateral_side(child, left_width)),
    }
}
