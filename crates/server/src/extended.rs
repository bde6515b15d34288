//! The extended query protocol: Parse, Bind, Describe (of statements and
//! portals), Execute, Sync — what drivers (tokio-postgres, psycopg 3,
//! pgJDBC) speak.
//!
//! A statement is described when parsed: its placeholders' types inferred
//! by the binder from their uses (`Session::describe`), its answer's
//! columns bound. Executing a portal reads each bound parameter in its
//! format and type into an SQL literal (`cell::literal`), puts them in
//! place of the placeholders, and runs the statement as the simple protocol
//! runs it; rows go out in the formats the portal asked for.
//!
//! Invariants: a parameter is a value, never SQL (a literal of its type,
//! checked: 22P02 otherwise); a statement's parameter types are the
//! client's where it gave them, else the inferred ones, else text; Describe
//! and Execute agree on the columns and their formats.

use std::sync::Arc;

use async_trait::async_trait;
use futures::{Sink, SinkExt};
use pgwire::api::DEFAULT_NAME;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::ExtendedQueryHandler;
use pgwire::api::results::{FieldInfo, Response};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::Entry;
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, Type};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::data::{NoData, ParameterDescription};
use pgwire::messages::extendedquery::{Describe, TARGET_TYPE_BYTE_STATEMENT};

use crate::cell;
use crate::engine::Engine;
use crate::pg::{
    Settings, answer, await_writes, fields, first_word, show, split_statements, statement_error, user_error,
};

/// A parsed statement: its text, its parameters' types, its answer's columns.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    sql: String,
    parameters: Vec<Type>,
    /// None: it answers no rows.
    columns: Option<Vec<FieldInfo>>,
}

pub(crate) struct Parser {
    engine: Arc<Engine>,
}

#[async_trait]
impl QueryParser for Parser {
    type Statement = Prepared;

    async fn parse_sql<C>(&self, client: &C, sql: &str, _types: &[Option<Type>]) -> PgWireResult<Option<Prepared>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let engine = self.engine.clone();
        let settings = crate::pg::settings_of(client);
        let sql = sql.to_owned();
        let prepared = tokio::task::spawn_blocking(move || describe(&engine, &settings, sql))
            .await
            .map_err(|e| PgWireError::ApiError(Box::new(e)))??;
        Ok(Some(prepared))
    }

    fn get_parameter_types(&self, statement: &Prepared) -> PgWireResult<Vec<Type>> {
        Ok(statement.parameters.clone())
    }

    fn get_result_schema(&self, statement: &Prepared, format: Option<&Format>) -> PgWireResult<Vec<FieldInfo>> {
        let format_of = |i| format.map_or(pgwire::api::results::FieldFormat::Text, |f: &Format| f.format_for(i));
        Ok(statement
            .columns
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, f)| FieldInfo::new(f.name().to_owned(), None, None, f.datatype().clone(), format_of(i)))
            .collect())
    }
}

/// Describes `sql`: the binder's view of queries and DML; SHOW's columns
/// from running it (it reads nothing that costs); the rest answers no rows.
fn describe(engine: &Engine, settings: &Settings, sql: String) -> PgWireResult<Prepared> {
    if split_statements(&sql).len() > 1 {
        return Err(user_error("42601", "cannot insert multiple commands into a prepared statement".into()));
    }
    let word = first_word(&sql);
    let (parameters, columns) = match word.as_str() {
        "SELECT" | "VALUES" | "WITH" | "INSERT" | "UPDATE" | "DELETE" => {
            let description = engine.describe(&sql).map_err(|e| statement_error(&e, &sql))?;
            let parameters =
                description.parameters.iter().map(|ty| ty.as_ref().map_or(Type::TEXT, cell::pg_type)).collect();
            (parameters, description.columns.map(|columns| fields(&columns, None)))
        }
        "SHOW" => match show(engine, settings, &sql)? {
            Response::Query(response) => (Vec::new(), Some(response.row_schema().as_ref().clone())),
            _ => (Vec::new(), None),
        },
        _ => (Vec::new(), None),
    };
    Ok(Prepared { sql, parameters, columns })
}

pub(crate) struct Extended {
    engine: Arc<Engine>,
    parser: Arc<Parser>,
    gauges: Arc<crate::pg::Gauges>,
    limits: crate::subscribe::StreamLimits,
}

impl Extended {
    pub(crate) fn new(
        engine: Arc<Engine>,
        gauges: Arc<crate::pg::Gauges>,
        limits: crate::subscribe::StreamLimits,
    ) -> Extended {
        Extended { parser: Arc::new(Parser { engine: engine.clone() }), engine, gauges, limits }
    }
}

/// The portal's statement with its parameters in place.
fn bound_sql(portal: &Portal<Prepared>) -> PgWireResult<String> {
    let statement = &portal.statement;
    let mut literals = Vec::with_capacity(portal.parameter_len());
    for (i, bytes) in portal.parameters.iter().enumerate() {
        let ty = statement
            .parameter_types
            .get(i)
            .cloned()
            .flatten()
            .filter(|ty| *ty != Type::UNKNOWN)
            .or_else(|| statement.statement.parameters.get(i).cloned())
            .unwrap_or(Type::TEXT);
        let binary = portal.parameter_format.is_binary(i);
        let literal = cell::literal(i + 1, &ty, binary, bytes.as_deref()).map_err(|(code, m)| user_error(code, m))?;
        literals.push(literal);
    }
    cell::substitute(&statement.statement.sql, &literals).map_err(|(code, m)| user_error(code, m))
}

#[async_trait]
impl ExtendedQueryHandler for Extended {
    type Statement = Prepared;
    type QueryParser = Parser;

    fn query_parser(&self) -> Arc<Parser> {
        self.parser.clone()
    }

    /// As pgwire's, but a statement with parameters and no result columns
    /// is described as Postgres does: ParameterDescription, then NoData
    /// (pgwire sends an empty RowDescription, which pgJDBC reads as a result).
    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if message.target_type == TARGET_TYPE_BYTE_STATEMENT {
            let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
            if let Some(Entry::Value(statement)) = client.portal_store().get_statement(name) {
                let described = self.do_describe_statement(client, &statement).await?;
                if described.fields.is_empty() && !described.parameters.is_empty() {
                    let types = described.parameters.iter().map(Type::oid).collect();
                    client.send(PgWireBackendMessage::ParameterDescription(ParameterDescription::new(types))).await?;
                    client.send(PgWireBackendMessage::NoData(NoData::new())).await?;
                    return Ok(());
                }
            }
        }
        self._on_describe(client, message).await
    }

    async fn do_query<C>(&self, client: &mut C, portal: &Portal<Prepared>, _max_rows: usize) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let sql = bound_sql(portal)?;
        let engine = self.engine.clone();
        let settings = crate::pg::settings_of(client);
        if crate::copy_in::parse_copy_from(&sql).is_some() {
            return crate::pg::start_copy_in(&engine, &settings, &sql, true);
        }
        if let Some(request) = crate::consume::parse_copy_to(&sql) {
            let request = request.map_err(|message| user_error("42601", message))?;
            return crate::consume::stream(client, engine, request, self.limits).await;
        }
        if let Some(request) = crate::subscribe::parse_copy_subscribe(&sql) {
            let request = request.map_err(|message| user_error("42601", message))?;
            let (waiter, waiting, view) = (engine.clone(), settings.clone(), request.view.clone());
            tokio::task::spawn_blocking(move || await_writes(&waiter, &waiting, &[view.as_str()]))
                .await
                .map_err(|e| PgWireError::ApiError(Box::new(e)))??;
            let _subscriber = crate::pg::Counted::new(&self.gauges.subscribers);
            return crate::subscribe::stream(client, engine, request, settings.wait_ms(), self.limits).await;
        }
        let format = portal.result_column_format.clone();
        if first_word(&sql) == "FETCH" {
            return crate::cursor::fetch(&self.engine, &settings, &sql, &format).await;
        }
        let _running = crate::pg::Running::start(&settings);
        let answering = settings.clone();
        let answered = tokio::task::spawn_blocking(move || answer(&engine, &answering, &sql, &format))
            .await
            .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        crate::pg::send_notices(client, &settings).await?;
        let mut responses = answered?;
        debug_assert!(responses.len() <= 1, "a prepared statement is one statement (checked when parsed)");
        Ok(responses.pop().unwrap_or(Response::EmptyQuery))
    }
}
