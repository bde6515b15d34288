//! DML: INSERT, UPDATE and DELETE into a table's topic: the rows as the
//! batch left them, keys and constraints, and the queued writes with their
//! markers.
use super::query::bind_one_off;
use super::*;

/// Rows per INSERT statement, and changed rows per UPDATE/DELETE.
pub(super) const STATEMENT_ROWS_MAX: usize = 1_000_000;

/// The rows of a table as DML sees them: key bytes → row.
pub(super) type TableRows = BTreeMap<Vec<u8>, Row>;

/// A table row with its key.
pub(super) type KeyedRow = (Vec<u8>, Row);

pub(super) fn row_json(columns: &[Column], row: &[Value]) -> Vec<u8> {
    let object: serde_json::Map<String, serde_json::Value> =
        columns.iter().zip(row).map(|(c, v)| (c.name.clone(), v.to_json())).collect();
    serde_json::to_vec(&object).expect("JSON values serialize")
}

pub(super) fn table_scope(object: &Object) -> Scope {
    Scope {
        columns: object
            .columns
            .iter()
            .map(|c| ScopeColumn {
                table: Some(object.name.clone()),
                name: c.name.clone(),
                ty: c.ty,
                qualified_only: false,
            })
            .collect(),
    }
}

/// Binds a scalar expression over a scope (WHERE and SET of DML).
pub(super) fn bind_scalar(
    catalog: &Catalog,
    expr: &ast::Expr,
    scope: &Scope,
    at: &Location,
) -> Result<crate::plan::Expr> {
    let mut binder = Binder::new(catalog, at.file.clone(), at.clone());
    binder.bind_scalar(expr, scope)
}

/// A constant for a column of a row being inserted.
pub(super) fn constant(catalog: &Catalog, expr: &ast::Expr, column: &Column, at: &Location) -> Result<Value> {
    let bound = bind_scalar(catalog, expr, &Scope::default(), at)?;
    let value = eval(&bound, &[]);
    let location = span_location(at, expr.span());
    let value = crate::value::cast_constant(&value, column.ty).ok_or_else(|| {
        Error::sql(location.clone(), format!("'{value}' is not a valid {} for column \"{}\"", column.ty, column.name))
    })?;
    storable(value, column, &location)
}

/// A table's rows are JSON, which has no infinities or NaN: a DOUBLE that
/// is one is refused (stored, it would read back as NULL).
pub(super) fn storable(value: Value, column: &Column, at: &Location) -> Result<Value> {
    match value.as_f64() {
        Some(x) if matches!(value, Value::Double(_)) && !x.is_finite() => Err(Error::sql(
            at.clone(),
            format!(
                "column \"{}\" cannot store {value}: a table holds JSON, which has no infinities or NaN",
                column.name
            ),
        )),
        _ => Ok(value),
    }
}

/// The rows of `INSERT ... VALUES`, whole (NULL in the columns not named).
fn values_rows(
    working: &Catalog,
    values: &ast::Values,
    object: &Object,
    targets: &[usize],
    at: &Location,
) -> Result<Vec<(Row, Location)>> {
    if values.rows.len() > STATEMENT_ROWS_MAX {
        return Err(Error::sql(at.clone(), format!("more than {STATEMENT_ROWS_MAX} rows in one INSERT")));
    }
    let mut rows = Vec::with_capacity(values.rows.len());
    for row_exprs in &values.rows {
        let row_location = span_location(at, row_exprs.span());
        if row_exprs.content.len() != targets.len() {
            return Err(Error::sql(
                row_location,
                format!("INSERT has {} columns but a row has {} values", targets.len(), row_exprs.content.len()),
            ));
        }
        let mut row = vec![Value::Null; object.columns.len()];
        for (expr, target) in row_exprs.content.iter().zip(targets) {
            row[*target] = constant(working, expr, &object.columns[*target], at)?;
        }
        rows.push((row, row_location));
    }
    Ok(rows)
}

impl Session {
    /// The rows of `INSERT ... SELECT` (and `CREATE TABLE ... AS SELECT`):
    /// the query answered once by the interpreter over the tables as this
    /// batch has left them, the materialized views' last committed
    /// snapshots and the sources' records, each value cast to its column.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn selected_rows(
        &self,
        working: &Catalog,
        tables: &mut BTreeMap<String, TableRows>,
        views: ViewReader<'_>,
        query: &ast::Query,
        object: &Object,
        targets: &[usize],
        at: &Location,
    ) -> Result<Vec<(Row, Location)>> {
        let query_at = span_location(at, query.span());
        let (bound, columns) = bind_one_off(working, query, at)?;
        if columns.len() != targets.len() {
            let message = format!("INSERT has {} columns but the query returns {}", targets.len(), columns.len());
            return Err(Error::sql(query_at, message));
        }
        for ((name, ty), target) in columns.iter().zip(targets) {
            let column = &object.columns[*target];
            if ty.common(column.ty).is_none() {
                let message = format!("column \"{}\" is {} but the query's \"{name}\" is {ty}", column.name, column.ty);
                return Err(Error::sql(query_at, message));
            }
        }
        let answer = self.answer(working, tables, views, &bound, &query_at)?;
        let mut rows = Vec::with_capacity(answer.len());
        for values in answer {
            let mut row = vec![Value::Null; object.columns.len()];
            for (value, target) in values.into_iter().zip(targets) {
                let column = &object.columns[*target];
                let cast = crate::value::cast_constant(&value, column.ty).ok_or_else(|| {
                    let message = format!("'{value}' is not a valid {} for column \"{}\"", column.ty, column.name);
                    Error::sql(query_at.clone(), message)
                })?;
                row[*target] = storable(cast, column, &query_at)?;
            }
            rows.push((row, query_at.clone()));
        }
        Ok(rows)
    }

    /// The current rows of a table: the latest record per key of its topic.
    pub(super) fn table_rows<'t>(
        &self,
        tables: &'t mut BTreeMap<String, TableRows>,
        object: &Object,
    ) -> Result<&'t mut TableRows> {
        if !tables.contains_key(&object.name) {
            let ObjectKind::Table { topic, .. } = &object.kind else { unreachable!("a table") };
            let columns: Vec<(String, Type)> = object.columns.iter().map(|c| (c.name.clone(), c.ty)).collect();
            let wanted = vec![true; columns.len()];
            // The latest record per key first, then only the live rows are
            // decoded: rows a DROP deleted (of an earlier incarnation of the
            // table, which may have had other columns) are never read.
            let mut latest: BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)> = BTreeMap::new();
            // Committed rows only (past the end: a failed batch's, taken back before any other).
            let committed = self.committed.get(topic).copied().unwrap_or(u64::MAX);
            if self.topics.exists(topic) {
                for record in self.topics.read_all(topic)?.into_iter().filter(|r| r.offset < committed) {
                    if let Some(key) = record.key {
                        latest.insert(key, (record.offset, record.value));
                    }
                }
            }
            let mut rows = TableRows::new();
            for (key, (offset, value)) in latest {
                let Some(value) = value else { continue };
                let row = decode_row(&value, &columns, &wanted).map_err(|e| Error::Catalog {
                    offset,
                    message: format!("table \"{}\" holds a bad row: {e}", object.name),
                })?;
                rows.insert(key, row);
            }
            tables.insert(object.name.clone(), rows);
        }
        Ok(tables.get_mut(&object.name).expect("inserted above"))
    }

    pub(super) fn target_table<'c>(
        &self,
        working: &'c Catalog,
        name: &ast::ObjectName,
        at: &Location,
    ) -> Result<&'c Object> {
        let Some(ident) = single_name(name) else {
            return Err(Error::sql(at.clone(), "not supported: qualified names"));
        };
        let table = normalize(ident);
        let location = span_location(at, ident.span);
        match working.get(&table) {
            Some(object @ Object { kind: ObjectKind::Table { .. }, .. }) => Ok(object),
            Some(object) => Err(Error::sql(
                location,
                format!(
                    "\"{table}\" is a {}; only tables take INSERT, UPDATE and DELETE (a source's rows come from its topic)",
                    object.kind_name()
                ),
            )),
            None => {
                let tables = working.objects.values().filter(|o| matches!(o.kind, ObjectKind::Table { .. }));
                let hint = crate::catalog::suggestion(&table, tables.map(|o| o.name.as_str()))
                    .map(|s| format!("; did you mean \"{s}\"?"))
                    .unwrap_or_default();
                Err(Error::sql(location, format!("unknown table \"{table}\"{hint}")))
            }
        }
    }

    /// Checks a row against the table's constraints and builds its key.
    pub(super) fn row_key(object: &Object, row: &[Value], rowid: u64, at: &Location) -> Result<Vec<u8>> {
        let ObjectKind::Table { primary_key, .. } = &object.kind else { unreachable!("a table") };
        match primary_key {
            Some(key) => {
                let values: Vec<serde_json::Value> = key.iter().map(|i| row[*i].to_json()).collect();
                if let Some(i) = key.iter().find(|i| row[**i].is_null()) {
                    return Err(Error::sql(
                        at.clone(),
                        format!("NULL in primary key column \"{}\" of \"{}\"", object.columns[*i].name, object.name),
                    ));
                }
                Ok(serde_json::to_vec(&values).expect("JSON values serialize"))
            }
            None => Ok(format!("{{\"rowid\":{rowid}}}").into_bytes()),
        }
    }

    pub(super) fn next_rowid(&self, object: &Object, table_ends: &mut BTreeMap<String, u64>) -> Result<u64> {
        let ObjectKind::Table { topic, .. } = &object.kind else { unreachable!("a table") };
        match table_ends.get(topic) {
            Some(end) => Ok(*end),
            None if self.topics.exists(topic) => Ok(self.topics.end_offset(topic, 0)?),
            None => Ok(0),
        }
    }

    /// Queues a table write, recording where it will start for its marker.
    pub(super) fn write_table(
        &self,
        object: &Object,
        records: Vec<TopicRecord>,
        marker: Option<MarkerKey>,
        effects: &mut Vec<Effect>,
        table_ends: &mut BTreeMap<String, u64>,
    ) -> Result<()> {
        let ObjectKind::Table { topic, .. } = &object.kind else { unreachable!("a table") };
        let start = self.next_rowid(object, table_ends)?;
        table_ends.insert(topic.clone(), start + records.len() as u64);
        if let Some(MarkerKey { key, file }) = marker {
            let marker = Marker {
                version: MARKER_VERSION,
                file,
                table: object.name.clone(),
                topic: topic.clone(),
                offset: start,
                records: records.len() as u64,
            };
            effects.push(Effect::MarkerPut { key, marker });
        }
        effects.push(Effect::TableWrite { topic: topic.clone(), start, records });
        Ok(())
    }

    pub(super) fn insert(
        &self,
        insert: &ast::Insert,
        batch: &mut PendingBatch<'_>,
        marker: Option<MarkerKey>,
        at: &Location,
    ) -> Result<Outcome> {
        let ast::TableObject::TableName(name) = &insert.table else {
            return Err(Error::sql(at.clone(), "not supported: INSERT INTO a table function"));
        };
        if insert.on.is_some() || insert.returning.is_some() || insert.or.is_some() || insert.overwrite {
            return Err(Error::sql(at.clone(), "not supported: ON CONFLICT, RETURNING, OR ... and OVERWRITE"));
        }
        let object = self.target_table(&batch.working, name, at)?.clone();
        let targets: Vec<usize> = if insert.columns.is_empty() {
            (0..object.columns.len()).collect()
        } else {
            let mut targets = Vec::new();
            for column in &insert.columns {
                let Some(ident) = single_name(column) else {
                    return Err(Error::sql(at.clone(), "INSERT lists column names"));
                };
                targets.extend(key_indexes(std::slice::from_ref(ident), &object.columns, at)?);
            }
            targets
        };
        let Some(source) = &insert.source else {
            return Err(Error::sql(at.clone(), "INSERT needs VALUES or a query"));
        };
        let new_rows = match source.body.as_ref() {
            ast::SetExpr::Values(values) if source.with.is_none() && source.order_by.is_none() => {
                values_rows(&batch.working, values, &object, &targets, at)?
            }
            _ => {
                let views = batch.views;
                let PendingBatch { working, tables, .. } = &mut *batch;
                self.selected_rows(working, tables, views, source, &object, &targets, at)?
            }
        };
        self.insert_rows(batch, &object, new_rows, marker, at)
    }

    /// Appends `new_rows` (whole rows of `object`, each with where it came
    /// from) to the table, refusing a primary key it already holds.
    pub(super) fn insert_rows(
        &self,
        batch: &mut PendingBatch<'_>,
        object: &Object,
        new_rows: Vec<(Row, Location)>,
        marker: Option<MarkerKey>,
        at: &Location,
    ) -> Result<Outcome> {
        let PendingBatch { tables, effects, table_ends, .. } = batch;
        if new_rows.len() > STATEMENT_ROWS_MAX {
            return Err(Error::sql(at.clone(), format!("more than {STATEMENT_ROWS_MAX} rows in one INSERT")));
        }
        let first_rowid = self.next_rowid(object, table_ends)?;
        let rows_now = self.table_rows(tables, object)?;
        let mut records = Vec::new();
        for (rowid, (row, row_location)) in (first_rowid..).zip(new_rows) {
            let key = Self::row_key(object, &row, rowid, &row_location)?;
            if rows_now.contains_key(&key) {
                return Err(Error::sql(
                    row_location,
                    format!("duplicate primary key {} in \"{}\"", String::from_utf8_lossy(&key), object.name),
                ));
            }
            rows_now.insert(key.clone(), row.clone());
            records.push(TopicRecord { key: Some(key), value: Some(row_json(&object.columns, &row)), headers: vec![] });
        }
        let count = records.len();
        self.write_table(object, records, marker, effects, table_ends)?;
        Ok(Outcome::tagged(format!("INSERT {count}")))
    }

    /// The table's scope and the rows matching `selection`.
    pub(super) fn matching(
        &self,
        working: &Catalog,
        object: &Object,
        rows: &TableRows,
        selection: Option<&ast::Expr>,
        at: &Location,
    ) -> Result<(Scope, Vec<KeyedRow>)> {
        let scope = table_scope(object);
        let predicate = match selection {
            None => None,
            Some(e) => Some(bind_scalar(working, e, &scope, at)?),
        };
        let matching: Vec<KeyedRow> = rows
            .iter()
            .filter(|(_, row)| predicate.as_ref().is_none_or(|p| holds(p, row)))
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect();
        if matching.len() > STATEMENT_ROWS_MAX {
            return Err(Error::sql(at.clone(), format!("the statement changes more than {STATEMENT_ROWS_MAX} rows")));
        }
        Ok((scope, matching))
    }

    pub(super) fn update(
        &self,
        update: &ast::Update,
        batch: &mut PendingBatch<'_>,
        marker: Option<MarkerKey>,
        at: &Location,
    ) -> Result<Outcome> {
        let PendingBatch { working, tables, effects, table_ends, .. } = batch;
        if update.from.is_some()
            || !update.table.joins.is_empty()
            || update.returning.is_some()
            || update.limit.is_some()
        {
            return Err(Error::sql(at.clone(), "not supported: UPDATE with FROM, joins, RETURNING or LIMIT"));
        }
        let ast::TableFactor::Table { name, .. } = &update.table.relation else {
            return Err(Error::sql(at.clone(), "UPDATE takes a table name"));
        };
        let object = self.target_table(working, name, at)?.clone();
        let rows_now = self.table_rows(tables, &object)?.clone();
        let (scope, matching) = self.matching(working, &object, &rows_now, update.selection.as_ref(), at)?;
        let mut assignments = Vec::new();
        for assignment in &update.assignments {
            let ast::AssignmentTarget::ColumnName(column) = &assignment.target else {
                return Err(Error::sql(at.clone(), "not supported: assigning a tuple of columns"));
            };
            let Some(ident) = single_name(column) else {
                return Err(Error::sql(at.clone(), "UPDATE sets column names"));
            };
            let index = key_indexes(std::slice::from_ref(ident), &object.columns, at)?[0];
            let expr = bind_scalar(working, &assignment.value, &scope, at)?;
            assignments.push((index, expr, span_location(at, assignment.value.span())));
        }
        let rows = self.table_rows(tables, &object)?;
        let mut records = Vec::new();
        for (old_key, old_row) in &matching {
            let mut row = old_row.clone();
            for (index, expr, location) in &assignments {
                let column = &object.columns[*index];
                let value = eval(expr, old_row);
                let value = crate::value::cast_constant(&value, column.ty).ok_or_else(|| {
                    Error::sql(
                        location.clone(),
                        format!("'{value}' is not a valid {} for \"{}\"", column.ty, column.name),
                    )
                })?;
                row[*index] = storable(value, column, location)?;
            }
            let rowid = std::str::from_utf8(old_key)
                .ok()
                .and_then(|k| k.strip_prefix("{\"rowid\":")?.strip_suffix('}')?.parse().ok())
                .unwrap_or(0);
            let new_key = Self::row_key(&object, &row, rowid, at)?;
            if new_key != *old_key {
                if rows.contains_key(&new_key) {
                    return Err(Error::sql(
                        at.clone(),
                        format!("duplicate primary key {} in \"{}\"", String::from_utf8_lossy(&new_key), object.name),
                    ));
                }
                rows.remove(old_key);
                records.push(TopicRecord { key: Some(old_key.clone()), value: None, headers: vec![] });
            }
            rows.insert(new_key.clone(), row.clone());
            records.push(TopicRecord {
                key: Some(new_key),
                value: Some(row_json(&object.columns, &row)),
                headers: vec![],
            });
        }
        let count = matching.len();
        self.write_table(&object, records, marker, effects, table_ends)?;
        Ok(Outcome::tagged(format!("UPDATE {count}")))
    }

    pub(super) fn delete(
        &self,
        delete: &ast::Delete,
        batch: &mut PendingBatch<'_>,
        marker: Option<MarkerKey>,
        at: &Location,
    ) -> Result<Outcome> {
        let PendingBatch { working, tables, effects, table_ends, .. } = batch;
        let from = match &delete.from {
            ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from) => from,
        };
        if from.len() != 1 || !from[0].joins.is_empty() || delete.using.is_some() || delete.returning.is_some() {
            return Err(Error::sql(at.clone(), "not supported: DELETE from several tables, USING or RETURNING"));
        }
        let ast::TableFactor::Table { name, .. } = &from[0].relation else {
            return Err(Error::sql(at.clone(), "DELETE takes a table name"));
        };
        let object = self.target_table(working, name, at)?.clone();
        let rows_now = self.table_rows(tables, &object)?.clone();
        let (_, matching) = self.matching(working, &object, &rows_now, delete.selection.as_ref(), at)?;
        let rows = self.table_rows(tables, &object)?;
        let mut records = Vec::new();
        for (key, _) in &matching {
            rows.remove(key);
            records.push(TopicRecord { key: Some(key.clone()), value: None, headers: vec![] });
        }
        let count = matching.len();
        self.write_table(&object, records, marker, effects, table_ends)?;
        Ok(Outcome::tagged(format!("DELETE {count}")))
    }
}
