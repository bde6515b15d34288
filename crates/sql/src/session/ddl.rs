//! DDL: CREATE and DROP of sources, tables and views against a batch's
//! working catalog (every view must still bind), and the objects a
//! definition makes.
use super::*;

/// Object names become topic names and JSON: keep them plain.
pub(super) fn check_name(name: &str, location: &Location) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.starts_with("__");
    if ok {
        Ok(())
    } else {
        Err(Error::sql(
            location.clone(),
            format!(
                "invalid name \"{name}\": use up to 100 lowercase letters, digits and '_' (not starting with '__')"
            ),
        ))
    }
}

pub(super) fn view_object(create: &ast::CreateView, at: &Location, nesting: usize) -> Result<Object> {
    let Some(ident) = single_name(&create.name) else {
        return Err(Error::sql(at.clone(), "not supported: qualified view names"));
    };
    let name = normalize(ident);
    check_name(&name, &span_location(at, ident.span))?;
    let mut canonical = create.clone();
    canonical.or_replace = false;
    canonical.if_not_exists = false;
    let mut query = create.query.clone();
    if !create.columns.is_empty() {
        // CREATE VIEW v (a, b) AS ...: rename through a derived table.
        let alias = ast::TableAlias {
            explicit: true,
            at: None,
            name: ast::Ident::new("v"),
            columns: create.columns.iter().map(|c| ast::TableAliasColumnDef::from_name(c.name.value.clone())).collect(),
        };
        let select = ast::Select {
            select_token: ast::helpers::attached_token::AttachedToken::empty(),
            optimizer_hints: vec![],
            distinct: None,
            select_modifiers: None,
            top: None,
            top_before_distinct: false,
            projection: vec![ast::SelectItem::Wildcard(ast::WildcardAdditionalOptions::default())],
            exclude: None,
            into: None,
            from: vec![ast::TableWithJoins {
                relation: ast::TableFactor::Derived {
                    lateral: false,
                    subquery: query,
                    alias: Some(alias),
                    sample: None,
                },
                joins: vec![],
            }],
            lateral_views: vec![],
            prewhere: None,
            selection: None,
            connect_by: vec![],
            group_by: ast::GroupByExpr::Expressions(vec![], vec![]),
            cluster_by: vec![],
            distribute_by: vec![],
            sort_by: vec![],
            having: None,
            named_window: vec![],
            qualify: None,
            window_before_qualify: false,
            value_table_mode: None,
            flavor: ast::SelectFlavor::Standard,
        };
        query = Box::new(ast::Query {
            with: None,
            body: Box::new(ast::SetExpr::Select(Box::new(select))),
            order_by: None,
            limit_clause: None,
            fetch: None,
            locks: vec![],
            for_clause: None,
            settings: None,
            format_clause: None,
            pipe_operators: vec![],
        });
    }
    Ok(Object {
        name,
        kind: ObjectKind::View { query, materialized: create.materialized, nesting, late_rows: late_rows(create, at)? },
        columns: Vec::new(),
        definition: ast::Statement::CreateView(canonical).to_string(),
    })
}

/// A view's `WITH (late_rows = 'drop' | 'dead_letter')`, the one option a
/// view takes (materialized only).
fn late_rows(create: &ast::CreateView, at: &Location) -> Result<LateRows> {
    let options = match &create.options {
        ast::CreateTableOptions::None => return Ok(LateRows::default()),
        ast::CreateTableOptions::With(options) if create.materialized => options,
        other => return Err(Error::sql(at.clone(), format!("not supported: view options {other}"))),
    };
    let mut late = None;
    for option in options {
        let ast::SqlOption::KeyValue { key, value } = option else {
            return Err(Error::sql(at.clone(), format!("not supported: the view option {option}")));
        };
        let value = match value {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::SingleQuotedString(s) => s.to_ascii_lowercase(),
                other => other.to_string(),
            },
            other => other.to_string(),
        };
        let location = span_location(at, key.span());
        match (key.to_string().to_ascii_lowercase().as_str(), value.as_str()) {
            ("late_rows", _) if late.is_some() => {
                return Err(Error::sql(location, "late_rows is given twice"));
            }
            ("late_rows", "drop") => late = Some(LateRows::Drop),
            ("late_rows", "dead_letter") => late = Some(LateRows::DeadLetter),
            ("late_rows", other) => {
                return Err(Error::sql(location, format!("late_rows is 'drop' or 'dead_letter', not {other}")));
            }
            (other, _) => {
                return Err(Error::sql(location, format!("not supported: the view option {other} (late_rows is)")));
            }
        }
    }
    Ok(late.unwrap_or_default())
}

/// A bound view: its plan, output columns, the catalog objects it reads
/// (through views too) and the notices binding it gave.
pub(super) type BoundView = (crate::plan::Rel, Vec<(String, Type)>, BTreeSet<String>, Vec<(Location, String)>);

/// Binds a view's query.
pub(super) fn bind_view(catalog: &Catalog, object: &Object, at: Option<&Location>) -> Result<BoundView> {
    let ObjectKind::View { query, nesting, .. } = &object.kind else { unreachable!("a view") };
    let location = at.cloned().unwrap_or_default();
    let mut binder = Binder::new(catalog, location.file.clone(), location);
    binder.nesting = *nesting;
    if binder.dependencies.contains(&object.name) {
        unreachable!("no dependencies before binding");
    }
    binder.defining = Some(object.name.clone());
    let bound = binder.bind_view_query(query)?;
    if binder.dependencies.contains(&object.name) {
        return Err(Error::sql(at.cloned().unwrap_or_default(), format!("view \"{}\" reads itself", object.name)));
    }
    let columns = bound.scope.columns.iter().map(|c| (c.name.clone(), c.ty)).collect();
    // A view maintains its subqueries as joins (a one-off query answers them per row).
    let rel = crate::decorrelate::decorrelate(bound.rel)
        .map_err(|what| Error::sql(at.cloned().unwrap_or_default(), format!("not supported: {what}")))?;
    Ok((rel, columns, binder.dependencies, binder.notices))
}

impl Session {
    /// The catalog object a CREATE statement defines (unchecked against others).
    pub(super) fn object_of(&self, parsed: &Parsed) -> Result<Object> {
        let at = &parsed.location;
        match &parsed.stmt {
            Stmt::CreateSource(source) => self.source_object(source, at),
            Stmt::Sql(statement) => match statement.as_ref() {
                ast::Statement::CreateTable(create) => self.table_object(create, at),
                ast::Statement::CreateView(create) => view_object(create, at, parsed.nesting),
                _ => Err(Error::sql(at.clone(), "not a CREATE statement")),
            },
            Stmt::CreateSink(sink) => self.sink_object(sink, at),
            Stmt::DropSource { .. } | Stmt::DropSink { .. } => Err(Error::sql(at.clone(), "not a CREATE statement")),
        }
    }

    /// A sink of a materialized view into a Kafka topic: the view must
    /// exist (in `working`, the catalog as the batch has it) and be materialized.
    pub(super) fn sink_object_in(working: &Catalog, sink: &CreateSink, at: &Location) -> Result<Object> {
        let name = normalize(&sink.name);
        check_name(&name, &span_location(at, sink.name.span))?;
        let view = normalize(&sink.view);
        let view_at = span_location(at, sink.view.span);
        match working.get(&view).map(|o| &o.kind) {
            Some(ObjectKind::View { materialized: true, .. }) => {}
            Some(_) => {
                return Err(Error::sql(view_at, format!("\"{view}\" is not a materialized view: a sink ships one")));
            }
            None => return Err(Error::sql(view_at, format!("there is no materialized view \"{view}\""))),
        }
        if sink.topic.is_empty()
            || sink.topic.len() > 200
            || !sink.topic.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return Err(Error::sql(
                sink.topic_location.clone(),
                format!("invalid topic name '{}': use ASCII letters, digits, '.', '_' and '-'", sink.topic),
            ));
        }
        let envelope = match &sink.envelope {
            None => None,
            Some((kind, key)) => {
                let view_object = working.get(&view).expect("checked above");
                let (_, columns, _, _) = bind_view(working, view_object, None)?;
                let mut names = Vec::new();
                for ident in key {
                    let column = normalize(ident);
                    if !columns.iter().any(|(name, _)| *name == column) {
                        let at = span_location(at, ident.span);
                        return Err(Error::sql(at, format!("view \"{view}\" has no column \"{column}\"")));
                    }
                    names.push(column);
                }
                Some((kind.clone(), names))
            }
        };
        let canonical = CreateSink { if_not_exists: false, ..sink.clone() };
        Ok(Object {
            name,
            kind: ObjectKind::Sink { view, brokers: sink.brokers.clone(), topic: sink.topic.clone(), envelope },
            columns: Vec::new(),
            definition: canonical.to_string(),
        })
    }

    fn sink_object(&self, sink: &CreateSink, at: &Location) -> Result<Object> {
        Session::sink_object_in(&self.catalog, sink, at)
    }

    pub(super) fn columns(&self, defs: &[ast::ColumnDef], at: &Location) -> Result<Vec<Column>> {
        let mut columns: Vec<Column> = Vec::new();
        for def in defs {
            let name = normalize(&def.name);
            let location = span_location(at, def.name.span);
            let Some(ty) = data_type(&def.data_type) else {
                return Err(Error::sql(
                    location,
                    format!("not supported: the type {} (column \"{name}\")", def.data_type),
                ));
            };
            if columns.iter().any(|c| c.name == name) {
                return Err(Error::sql(location, format!("column \"{name}\" is declared twice")));
            }
            for option in &def.options {
                match &option.option {
                    ast::ColumnOption::Null | ast::ColumnOption::NotNull | ast::ColumnOption::PrimaryKey(_) => {}
                    other => {
                        return Err(Error::sql(location, format!("not supported: the column option {other}")));
                    }
                }
            }
            columns.push(Column { name, ty });
        }
        Ok(columns)
    }

    pub(super) fn source_object(&self, source: &CreateSource, at: &Location) -> Result<Object> {
        let name = normalize(&source.name);
        check_name(&name, &span_location(at, source.name.span))?;
        let mut columns = self.columns(&source.columns, at)?;
        if let Some(column) = &source.include_timestamp {
            let name = normalize(column);
            let location = span_location(at, column.span);
            if source.upsert_key.is_some() {
                return Err(Error::sql(location, "INCLUDE TIMESTAMP is for append-only sources, not ENVELOPE UPSERT"));
            }
            if columns.iter().any(|c| c.name == name) {
                return Err(Error::sql(location, format!("the source declares a column \"{name}\" already")));
            }
            columns.push(Column { name, ty: Type::Timestamp });
        }
        let upsert_key = match &source.upsert_key {
            None => None,
            Some(key) => Some(key_indexes(key, &columns, at)?),
        };
        if source.topic.is_empty()
            || source.topic.len() > 200
            || !source.topic.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            || (source.kafka_brokers.is_some() && (source.topic == "." || source.topic == ".."))
        {
            return Err(Error::sql(
                source.topic_location.clone(),
                format!("invalid topic name '{}': use ASCII letters, digits, '.', '_' and '-'", source.topic),
            ));
        }
        let event_time = self.event_time(source, &columns)?;
        let canonical = CreateSource { or_replace: false, if_not_exists: false, ..source.clone() };
        Ok(Object {
            name,
            kind: ObjectKind::Source {
                topic: match &source.kafka_brokers {
                    Some(_) => millpond_dataflow::kafka_source::label(&source.topic),
                    None => source.topic.clone(),
                },
                upsert_key,
                kafka_brokers: source.kafka_brokers.clone(),
                event_time,
                record_timestamp: source.include_timestamp.is_some(),
            },
            columns,
            definition: canonical.to_string(),
        })
    }

    /// A source's `WATERMARK FOR col AS col [- INTERVAL ...]`: a TIMESTAMP
    /// column of an append-only source, and a constant delay of at least 0.
    fn event_time(&self, source: &CreateSource, columns: &[Column]) -> Result<Option<EventTime>> {
        let Some(watermark) = &source.watermark else { return Ok(None) };
        let at = &watermark.location;
        let fail = |message: String| Err(Error::sql(at.clone(), message));
        if source.upsert_key.is_some() {
            return fail("a WATERMARK is for an append-only source, not one with ENVELOPE UPSERT".to_owned());
        }
        let name = normalize(&watermark.column);
        let Some(column) = columns.iter().position(|c| c.name == name) else {
            return fail(format!("WATERMARK FOR {name}: the source has no column \"{name}\""));
        };
        if columns[column].ty != Type::Timestamp {
            return fail(format!("WATERMARK FOR {name}: the column is {}, not a TIMESTAMP", columns[column].ty));
        }
        let is_column = |e: &ast::Expr| matches!(e, ast::Expr::Identifier(i) if normalize(i) == name);
        let delay = match &watermark.expr {
            e if is_column(e) => Some(0),
            ast::Expr::BinaryOp { left, op: ast::BinaryOperator::Minus, right } if is_column(left) => {
                let mut binder = Binder::new(&self.catalog, at.file.clone(), at.clone());
                binder.interval_constant(right)?
            }
            _ => None,
        };
        match delay {
            Some(delay_micros) if delay_micros >= 0 => Ok(Some(EventTime { column, delay_micros })),
            _ => fail(format!("a watermark is `{name}` or `{name} - INTERVAL '...'` (a constant delay of at least 0)")),
        }
    }

    /// `CREATE TABLE name AS query`: a table with the query's columns (no
    /// primary key), holding the query's answer now (as `INSERT ... SELECT`
    /// computes it). A table that exists already with the same columns is
    /// left as it is (a definition file run again inserts nothing twice).
    pub(super) fn create_table_as(
        &self,
        create: &ast::CreateTable,
        batch: &mut PendingBatch<'_>,
        at: &Location,
    ) -> Result<Outcome> {
        let query = create.query.as_deref().expect("CREATE TABLE ... AS");
        if !create.columns.is_empty() || !create.constraints.is_empty() {
            return Err(Error::sql(at.clone(), "not supported: column definitions in CREATE TABLE ... AS"));
        }
        let (rel, columns) = super::query::bind_one_off(&batch.working, query, at)?;
        let mut defs = Vec::new();
        for (i, (name, ty)) in columns.iter().enumerate() {
            if columns[..i].iter().any(|(other, _)| other == name) {
                let message = format!("the query has two columns named \"{name}\"; give one of them an alias with AS");
                return Err(Error::sql(span_location(at, query.span()), message));
            }
            // A column of NULLs only is TEXT, as in PostgreSQL.
            let ty = if *ty == Type::Null { Type::Text } else { *ty };
            defs.push(format!("\"{}\" {ty}", name.replace('"', "\"\"")));
        }
        let sql = format!("CREATE TABLE {} ({})", create.name, defs.join(", "));
        let statement = sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::PostgreSqlDialect {}, &sql)
            .map_err(|e| Error::sql(at.clone(), format!("CREATE TABLE ... AS: {e} in {sql}")))?;
        let [ast::Statement::CreateTable(plain)] = statement.as_slice() else { unreachable!("one CREATE TABLE") };
        let plain =
            ast::CreateTable { if_not_exists: create.if_not_exists, or_replace: create.or_replace, ..plain.clone() };
        let object = self.table_object(&plain, at)?;
        let fresh = batch.working.get(&object.name).is_none();
        let topic = table_topic(&object.name);
        let name_at = name_location(at, &create.name);
        let created =
            self.create(&mut batch.working, object.clone(), false, create.if_not_exists, &name_at, &mut batch.effects)?;
        if !fresh {
            return Ok(created);
        }
        if !self.topics.exists(&topic) {
            batch.effects.push(Effect::CreateTopic { topic, spec: TABLE_TOPIC_SPEC });
        } else {
            self.clear_leftover_rows(batch, &object)?;
        }
        let query_at = span_location(at, query.span());
        let answer = {
            let PendingBatch { working, tables, views, .. } = &mut *batch;
            self.answer(working, tables, *views, &rel, &query_at)?
        };
        let mut rows: Vec<(Row, Location)> = Vec::with_capacity(answer.len());
        for row in answer {
            let row =
                row.into_iter().zip(&object.columns).map(|(v, c)| storable(v, c, &query_at)).collect::<Result<_>>()?;
            rows.push((row, query_at.clone()));
        }
        let count = rows.len();
        self.insert_rows(batch, &object, rows, None, at)?;
        Ok(Outcome::tagged(format!("SELECT {count}")))
    }

    pub(super) fn table_object(&self, create: &ast::CreateTable, at: &Location) -> Result<Object> {
        let Some(ident) = single_name(&create.name) else {
            return Err(Error::sql(at.clone(), "not supported: qualified table names"));
        };
        let name = normalize(ident);
        check_name(&name, &span_location(at, ident.span))?;
        if create.query.is_some()
            || create.like.is_some()
            || create.clone.is_some()
            || create.temporary
            || create.external
        {
            return Err(Error::sql(
                at.clone(),
                "not supported: CREATE TABLE AS/LIKE/CLONE, TEMPORARY and EXTERNAL tables",
            ));
        }
        let columns = self.columns(&create.columns, at)?;
        let mut primary_key: Option<Vec<usize>> = None;
        for def in &create.columns {
            if def.options.iter().any(|o| matches!(o.option, ast::ColumnOption::PrimaryKey(_))) {
                let index = columns.iter().position(|c| c.name == normalize(&def.name)).expect("declared");
                primary_key.get_or_insert_with(Vec::new).push(index);
            }
        }
        for constraint in &create.constraints {
            match constraint {
                ast::TableConstraint::PrimaryKey(pk) if primary_key.is_none() => {
                    let mut key = Vec::new();
                    for column in &pk.columns {
                        let ast::Expr::Identifier(ident) = &column.column.expr else {
                            return Err(Error::sql(at.clone(), "PRIMARY KEY lists column names"));
                        };
                        key.extend(key_indexes(std::slice::from_ref(ident), &columns, at)?);
                    }
                    primary_key = Some(key);
                }
                ast::TableConstraint::PrimaryKey(_) => {
                    return Err(Error::sql(at.clone(), "a table has at most one PRIMARY KEY"));
                }
                other => return Err(Error::sql(at.clone(), format!("not supported: the constraint {other}"))),
            }
        }
        let mut canonical = create.clone();
        canonical.or_replace = false;
        canonical.if_not_exists = false;
        Ok(Object {
            name: name.clone(),
            kind: ObjectKind::Table { topic: table_topic(&name), primary_key },
            columns,
            definition: ast::Statement::CreateTable(canonical).to_string(),
        })
    }

    pub(super) fn create(
        &self,
        working: &mut Catalog,
        object: Object,
        or_replace: bool,
        if_not_exists: bool,
        at: &Location,
        effects: &mut Vec<Effect>,
    ) -> Result<Outcome> {
        let tag = format!("CREATE {} {}", object.kind_name().to_uppercase(), object.name);
        if let Some(existing) = working.get(&object.name) {
            if existing.definition == object.definition || if_not_exists {
                return Ok(Outcome::tagged(format!("{tag} (unchanged)")));
            }
            if !or_replace {
                return Err(Error::sql(
                    at.clone(),
                    format!(
                        "{} \"{}\" already exists with another definition; use CREATE OR REPLACE, or DROP it first",
                        existing.kind_name(),
                        object.name
                    ),
                ));
            }
            if existing.kind_name() != object.kind_name() {
                return Err(Error::sql(
                    at.clone(),
                    format!("\"{}\" is a {}, not a {}", object.name, existing.kind_name(), object.kind_name()),
                ));
            }
        }
        let replaced = working.objects.insert(object.name.clone(), object.clone()).is_some();
        // Every view must still bind against the changed catalog.
        for view in working.objects.values().filter(|o| matches!(o.kind, ObjectKind::View { .. })) {
            if let Err(e) = bind_view(working, view, None) {
                // The view's own position would be in its stored definition, which the user does not see.
                let reason = match e {
                    Error::Sql { message, .. } => message,
                    other => other.to_string(),
                };
                return Err(Error::sql(at.clone(), format!("this change breaks view \"{}\": {reason}", view.name)));
            }
        }
        effects.push(Effect::CatalogPut { name: object.name.clone(), definition: object.definition.clone() });
        Ok(Outcome::tagged(if replaced { format!("{tag} (replaced)") } else { tag }))
    }

    /// A table created under the name of one whose DROP crashed after its
    /// catalog record and before its rows' tombstones finds those rows in
    /// its topic: they are not the new table's, so they are deleted in the
    /// same batch (a table always starts empty). Keys only: the old rows
    /// may not decode under the new columns.
    pub(super) fn clear_leftover_rows(&self, batch: &mut PendingBatch<'_>, object: &Object) -> Result<()> {
        let PendingBatch { tables, effects, table_ends, .. } = batch;
        if tables.contains_key(&object.name) {
            return Ok(()); // dropped earlier in this batch: its tombstones are pending
        }
        let ObjectKind::Table { topic, .. } = &object.kind else { unreachable!("a table") };
        let mut live = BTreeSet::new();
        for record in self.topics.read_all(topic)? {
            let Some(key) = record.key else { continue };
            if record.value.is_some() {
                live.insert(key);
            } else {
                live.remove(&key);
            }
        }
        tables.insert(object.name.clone(), TableRows::new());
        if live.is_empty() {
            return Ok(());
        }
        let records = live.into_iter().map(|key| TopicRecord { key: Some(key), value: None, headers: vec![] });
        self.write_table(object, records.collect(), None, effects, table_ends)
    }

    pub(super) fn drop(
        &self,
        batch: &mut PendingBatch<'_>,
        name: &str,
        kind: &str,
        if_exists: bool,
        cascade: bool,
        at: &Location,
    ) -> Result<Outcome> {
        let PendingBatch { working, tables, effects, table_ends, .. } = batch;
        let tag = format!("DROP {} {name}", kind.to_uppercase());
        let Some(object) = working.get(name) else {
            if if_exists {
                return Ok(Outcome::tagged(format!("{tag} (did not exist)")));
            }
            return Err(Error::sql(at.clone(), format!("there is no {kind} \"{name}\"")));
        };
        if object.kind_name() != kind {
            return Err(Error::sql(at.clone(), format!("\"{name}\" is a {}, not a {kind}", object.kind_name())));
        }
        let mut doomed: BTreeSet<String> = BTreeSet::from([name.to_owned()]);
        // Dependents, transitively: views whose definition reads a doomed
        // object, and sinks of a doomed view.
        loop {
            let mut more: Vec<String> = working
                .objects
                .values()
                .filter(|o| matches!(&o.kind, ObjectKind::Sink { view, .. } if doomed.contains(view)))
                .filter(|o| !doomed.contains(&o.name))
                .map(|o| o.name.clone())
                .collect();
            for view in working.objects.values().filter(|o| matches!(o.kind, ObjectKind::View { .. })) {
                if doomed.contains(&view.name) {
                    continue;
                }
                let mut binder = Binder::new(working, None, Location::default());
                let ObjectKind::View { query, .. } = &view.kind else { unreachable!("a view") };
                if binder.bind_view_query(query).is_ok() && binder.dependencies.iter().any(|d| doomed.contains(d)) {
                    more.push(view.name.clone());
                }
            }
            if more.is_empty() {
                break;
            }
            if !cascade {
                return Err(Error::sql(
                    at.clone(),
                    format!(
                        "cannot drop \"{name}\": {} \"{}\" depends on it (drop that first, or use CASCADE)",
                        match working.get(&more[0]).map(|o| &o.kind) {
                            Some(ObjectKind::Sink { .. }) => "sink",
                            _ => "view",
                        },
                        more[0]
                    ),
                ));
            }
            doomed.extend(more);
        }
        for gone in &doomed {
            let object = working.objects.remove(gone).expect("doomed objects exist");
            effects.push(Effect::CatalogDelete { name: gone.clone() });
            if let ObjectKind::Table { .. } = &object.kind {
                // Its markers go with it: a table created again takes the files' DML again.
                let mut markers: Vec<String> =
                    self.markers.iter().filter(|(_, m)| m.table == *gone).map(|(k, _)| k.clone()).collect();
                markers.extend(effects.iter().filter_map(|e| match e {
                    Effect::MarkerPut { key, marker } if marker.table == *gone => Some(key.clone()),
                    _ => None,
                }));
                for key in markers {
                    effects.push(Effect::CatalogDelete { name: key });
                }
                // Its rows are deleted and its topic kept: a table created again
                // under the name continues its offsets, so the readers of views
                // over it (created again too, they may resume) see the rows go.
                let keys: Vec<Vec<u8>> = self.table_rows(tables, &object)?.keys().cloned().collect();
                // Empty from here on: a table created again in this batch starts without
                // the rows (their tombstones are not written yet).
                tables.insert(gone.clone(), TableRows::new());
                let records = keys.into_iter().map(|key| TopicRecord { key: Some(key), value: None, headers: vec![] });
                self.write_table(&object, records.collect(), None, effects, table_ends)?;
            }
        }
        Ok(Outcome::tagged(if doomed.len() > 1 { format!("{tag} (and {} dependents)", doomed.len() - 1) } else { tag }))
    }
}
