//! Descriptions of statements, for the extended protocol's Describe: the
//! type of each `$n` placeholder, inferred from its use, and the columns of
//! the rows a query answers.
//!
//! Invariants: describing binds but never executes (nothing is read or
//! written); a placeholder's type is the type of what it is compared with,
//! combined with, cast to or stored in (the first such use), `None` when no
//! use says; the statement is bound again, with its values, when it runs.

use std::cell::RefCell;

use sqlparser::ast;

use super::{Session, single_name, table_scope};
use crate::bind::{Binder, normalize, placeholder_index};
use crate::catalog::ObjectKind;
use crate::error::{Error, Result};
use crate::parse::{Stmt, parse};
use crate::value::Type;

/// What Describe says of a statement.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Description {
    /// Per placeholder (`$1` first), its type if a use of it says.
    pub parameters: Vec<Option<Type>>,
    /// The columns of the rows it answers; `None` for a statement that answers none.
    pub columns: Option<Vec<(String, Type)>>,
}

impl Session {
    /// Describes `sql`, one statement that may hold `$n` placeholders.
    pub fn describe(&self, sql: &str) -> Result<Description> {
        let statements = parse(sql, None)?;
        let [parsed] = statements.as_slice() else {
            return Err(Error::sql(
                statements.get(1).map(|s| s.location.clone()).unwrap_or_default(),
                "a prepared statement is one statement",
            ));
        };
        let Stmt::Sql(statement) = &parsed.stmt else { return Ok(Description::default()) };
        let mut binder = Binder::new(&self.catalog, None, parsed.location.clone());
        binder.parameters = Some(RefCell::new(Vec::new()));
        binder.nesting = parsed.nesting;
        let columns = match statement.as_ref() {
            ast::Statement::Query(query) => {
                binder.one_off = true;
                binder.system = Some(crate::system::SystemContext::default());
                binder.outermost = true;
                let bound = binder.bind_query(query)?;
                Some(bound.scope.columns.iter().map(|c| (c.name.clone(), c.ty)).collect())
            }
            ast::Statement::Insert(insert) => {
                self.describe_insert(&mut binder, insert);
                None
            }
            ast::Statement::Update(update) => {
                if let ast::TableFactor::Table { name, .. } = &update.table.relation {
                    let assignments = update.assignments.iter().filter_map(|a| match &a.target {
                        ast::AssignmentTarget::ColumnName(column) => Some((column, &a.value)),
                        ast::AssignmentTarget::Tuple(_) => None,
                    });
                    self.describe_rows(&mut binder, name, assignments.collect(), update.selection.as_ref())?;
                }
                None
            }
            ast::Statement::Delete(delete) => {
                let from = match &delete.from {
                    ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from) => from,
                };
                if let Some(ast::TableFactor::Table { name, .. }) = from.first().map(|f| &f.relation) {
                    self.describe_rows(&mut binder, name, Vec::new(), delete.selection.as_ref())?;
                }
                None
            }
            _ => None,
        };
        let parameters = binder.parameters.take().map(RefCell::into_inner).unwrap_or_default();
        Ok(Description { parameters, columns })
    }

    /// INSERT's placeholders take the types of the columns they go to.
    fn describe_insert(&self, binder: &mut Binder<'_>, insert: &ast::Insert) {
        let ast::TableObject::TableName(name) = &insert.table else { return };
        let Some(object) = single_name(name).and_then(|ident| self.catalog.get(&normalize(ident))) else { return };
        let targets: Vec<Type> = if insert.columns.is_empty() {
            object.columns.iter().map(|c| c.ty).collect()
        } else {
            let column_type = |column: &ast::ObjectName| {
                let name = single_name(column).map(normalize)?;
                object.columns.iter().find(|c| c.name == name).map(|c| c.ty)
            };
            insert.columns.iter().map(|c| column_type(c).unwrap_or(Type::Null)).collect()
        };
        let Some(ast::SetExpr::Values(values)) = insert.source.as_ref().map(|s| s.body.as_ref()) else { return };
        for row in &values.rows {
            for (expr, ty) in row.iter().zip(&targets) {
                binder.note_parameter(expr, *ty);
            }
        }
    }

    /// UPDATE's and DELETE's placeholders: an assigned value takes its
    /// column's type; the WHERE clause is bound over the table's rows.
    fn describe_rows(
        &self,
        binder: &mut Binder<'_>,
        table: &ast::ObjectName,
        assignments: Vec<(&ast::ObjectName, &ast::Expr)>,
        selection: Option<&ast::Expr>,
    ) -> Result<()> {
        let Some(object) = single_name(table).and_then(|ident| self.catalog.get(&normalize(ident))) else {
            return Ok(());
        };
        if !matches!(object.kind, ObjectKind::Table { .. }) {
            return Ok(());
        }
        let scope = table_scope(object);
        for (column, value) in assignments {
            let name = single_name(column).map(normalize);
            if let Some(column) = object.columns.iter().find(|c| Some(&c.name) == name.as_ref()) {
                binder.note_parameter(value, column.ty);
            }
            if placeholder_index(value).is_none() {
                binder.bind_scalar(value, &scope)?;
            }
        }
        if let Some(selection) = selection {
            binder.bind_scalar(selection, &scope)?;
        }
        Ok(())
    }
}
