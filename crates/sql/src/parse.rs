//! Parsing: SQL text to statements, with `sqlparser` (pinned to 0.64.x)
//! and one extension of our own, `CREATE SOURCE`:
//!
//! ```sql
//! CREATE [OR REPLACE] SOURCE [IF NOT EXISTS] name (col type, ... [, WATERMARK FOR col AS col - INTERVAL '...'])
//!     FROM TOPIC 'topic' FORMAT JSON [INCLUDE TIMESTAMP [AS col]] [ENVELOPE UPSERT KEY (col, ...)];
//! CREATE [OR REPLACE] SOURCE [IF NOT EXISTS] name (col type, ...)
//!     FROM KAFKA (BROKERS 'host:port[,...]', TOPIC 'topic') FORMAT JSON [ENVELOPE UPSERT KEY (col, ...)];
//! ```
//!
//! `FROM KAFKA` reads a topic of an external Kafka cluster
//! (`millpond_dataflow::kafka_source`); `FROM TOPIC` a topic of the log.
//! And sinks, which ship a materialized view's committed changes to a
//! topic of an external Kafka cluster (`millpond_dataflow::kafka_sink`):
//!
//! ```sql
//! CREATE SINK [IF NOT EXISTS] name FROM view INTO KAFKA (BROKERS 'host:port[,...]', TOPIC 'topic') [FORMAT JSON]
//!     [ENVELOPE {UPSERT | DEBEZIUM} KEY (col, ...)];
//! DROP SINK [IF EXISTS] name;
//! ```
//!
//! Every statement keeps the location of its first token, and parse errors
//! name line and column.
use std::fmt;
use std::sync::Arc;

use sqlparser::ast::{ColumnDef, Ident, Statement};
use sqlparser::dialect::GenericDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Location as SqlLocation, Token, TokenWithSpan, Tokenizer, Word};

use crate::error::{Error, Location, Result};

/// A parsed statement with where it starts.
#[derive(Clone, Debug)]
pub(crate) struct Parsed {
    pub(crate) stmt: Stmt,
    pub(crate) location: Location,
    /// How deep the statement nests (at most [`NESTING_MAX`]; see [`check_nesting`]).
    pub(crate) nesting: usize,
}

#[derive(Clone, Debug)]
pub(crate) enum Stmt {
    CreateSource(CreateSource),
    /// `DROP SOURCE [IF EXISTS] name [CASCADE]` (sqlparser has no SOURCE object).
    DropSource {
        name: Ident,
        if_exists: bool,
        cascade: bool,
    },
    CreateSink(CreateSink),
    DropSink {
        name: Ident,
        if_exists: bool,
    },
    Sql(Box<Statement>),
}

/// `CREATE SINK name FROM view INTO KAFKA (BROKERS '…', TOPIC '…')`.
#[derive(Clone, Debug)]
pub(crate) struct CreateSink {
    pub(crate) name: Ident,
    pub(crate) view: Ident,
    pub(crate) brokers: String,
    pub(crate) topic: String,
    pub(crate) topic_location: Location,
    /// `ENVELOPE UPSERT | DEBEZIUM KEY (…)`: the kind (upper case) and the key.
    pub(crate) envelope: Option<(String, Vec<Ident>)>,
    pub(crate) if_not_exists: bool,
}

impl fmt::Display for CreateSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CREATE SINK ")?;
        if self.if_not_exists {
            f.write_str("IF NOT EXISTS ")?;
        }
        write!(
            f,
            "{} FROM {} INTO KAFKA (BROKERS '{}', TOPIC '{}') FORMAT JSON",
            self.name,
            self.view,
            self.brokers.replace('\'', "''"),
            self.topic.replace('\'', "''")
        )?;
        if let Some((kind, key)) = &self.envelope {
            let key: Vec<String> = key.iter().map(ToString::to_string).collect();
            write!(f, " ENVELOPE {kind} KEY ({})", key.join(", "))?;
        }
        Ok(())
    }
}

impl fmt::Display for Stmt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stmt::CreateSource(source) => source.fmt(f),
            Stmt::DropSource { name, if_exists, cascade } => write!(
                f,
                "DROP SOURCE {}{name}{}",
                if *if_exists { "IF EXISTS " } else { "" },
                if *cascade { " CASCADE" } else { "" }
            ),
            Stmt::CreateSink(sink) => sink.fmt(f),
            Stmt::DropSink { name, if_exists } => {
                write!(f, "DROP SINK {}{name}", if *if_exists { "IF EXISTS " } else { "" })
            }
            Stmt::Sql(statement) => statement.fmt(f),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct CreateSource {
    pub(crate) name: Ident,
    pub(crate) columns: Vec<ColumnDef>,
    pub(crate) topic: String,
    pub(crate) topic_location: Location,
    /// `FROM KAFKA`: the cluster's `bootstrap.servers`.
    pub(crate) kafka_brokers: Option<String>,
    pub(crate) upsert_key: Option<Vec<Ident>>,
    /// `WATERMARK FOR col AS expr` among the columns.
    pub(crate) watermark: Option<Box<WatermarkDef>>,
    /// `INCLUDE TIMESTAMP [AS col]`: a last column holding each record's
    /// timestamp (where the name is written).
    pub(crate) include_timestamp: Option<Ident>,
    pub(crate) or_replace: bool,
    pub(crate) if_not_exists: bool,
}

/// `WATERMARK FOR column AS expr`: the column's event time, and how far
/// behind the greatest time seen a record may come (`column - INTERVAL ...`).
#[derive(Clone, Debug)]
pub(crate) struct WatermarkDef {
    pub(crate) column: Ident,
    pub(crate) expr: sqlparser::ast::Expr,
    /// Where `expr` is written.
    pub(crate) location: Location,
}

impl fmt::Display for CreateSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CREATE {}SOURCE ", if self.or_replace { "OR REPLACE " } else { "" })?;
        if self.if_not_exists {
            f.write_str("IF NOT EXISTS ")?;
        }
        let mut columns: Vec<String> = self.columns.iter().map(ToString::to_string).collect();
        if let Some(watermark) = &self.watermark {
            columns.push(format!("WATERMARK FOR {} AS {}", watermark.column, watermark.expr));
        }
        let topic = self.topic.replace('\'', "''");
        match &self.kafka_brokers {
            None => write!(f, "{} ({}) FROM TOPIC '{topic}' FORMAT JSON", self.name, columns.join(", "))?,
            Some(brokers) => write!(
                f,
                "{} ({}) FROM KAFKA (BROKERS '{}', TOPIC '{topic}') FORMAT JSON",
                self.name,
                columns.join(", "),
                brokers.replace('\'', "''")
            )?,
        }
        if let Some(column) = &self.include_timestamp {
            write!(f, " INCLUDE TIMESTAMP AS {column}")?;
        }
        if let Some(key) = &self.upsert_key {
            let key: Vec<String> = key.iter().map(ToString::to_string).collect();
            write!(f, " ENVELOPE UPSERT KEY ({})", key.join(", "))?;
        }
        Ok(())
    }
}

pub(crate) fn location(file: &Option<Arc<str>>, at: SqlLocation) -> Location {
    Location { file: file.clone(), line: at.line, column: at.column }
}

/// Turns a sqlparser error ("... at Line: 3, Column: 14") into ours. An
/// error without a position is placed at `fallback`, except one that found
/// the end of the input ("found: EOF"), which is placed there.
fn parse_error(file: &Option<Arc<str>>, error: ParserError, fallback: SqlLocation, sql: &str) -> Error {
    let message = match error {
        ParserError::TokenizerError(m) | ParserError::ParserError(m) => m,
        ParserError::RecursionLimitExceeded => "the statement nests too deeply".to_owned(),
    };
    let (message, at) = match message.rfind(" at Line: ") {
        Some(i) => {
            let position = &message[i + " at Line: ".len()..];
            let parsed = position.split_once(", Column: ").and_then(|(l, c)| Some((l.parse().ok()?, c.parse().ok()?)));
            match parsed {
                Some((line, column)) => (message[..i].to_owned(), SqlLocation { line, column }),
                None => (message, fallback),
            }
        }
        None if message.ends_with("found: EOF") => (message, end_of(sql)),
        None => (message, fallback),
    };
    Error::sql(location(file, at), format!("syntax error: {message}"))
}

/// Where the end of `sql` is: just past its last character, as
/// sqlparser counts lines and columns (from 1, in characters).
fn end_of(sql: &str) -> SqlLocation {
    let line = sql.split('\n').count().max(1);
    let last = sql.rsplit('\n').next().unwrap_or("");
    SqlLocation { line: line as u64, column: last.chars().count() as u64 + 1 }
}

/// Parses every statement of `sql`; `file` names it in errors.
pub(crate) fn parse(sql: &str, file: Option<Arc<str>>) -> Result<Vec<Parsed>> {
    let dialect = GenericDialect {};
    let start = SqlLocation { line: 1, column: 1 };
    let tokens = Tokenizer::new(&dialect, sql)
        .with_unescape(true)
        .tokenize_with_location()
        .map_err(|e| parse_error(&file, e.into(), start, sql))?;
    // Before the parser builds a tree too deep for the passes after it.
    let depths = check_nesting(&tokens, &file)?;
    let mut parser = Parser::new(&dialect).with_tokens_with_locations(tokens);
    let mut out = Vec::new();
    loop {
        while parser.consume_token(&Token::SemiColon) {}
        let next = parser.peek_token();
        if next.token == Token::EOF {
            break;
        }
        let at = location(&file, next.span.start);
        let stmt = if is_word_pair(&parser, "DROP", "SINK") {
            parse_drop_sink(&mut parser).map_err(|e| parse_error(&file, e, next.span.start, sql))?
        } else if is_word_pair(&parser, "CREATE", "SINK") {
            Stmt::CreateSink(
                parse_create_sink(&mut parser, &file).map_err(|e| parse_error(&file, e, next.span.start, sql))?,
            )
        } else if is_drop_source(&parser) {
            parse_drop_source(&mut parser).map_err(|e| parse_error(&file, e, next.span.start, sql))?
        } else if is_create_source(&parser) {
            Stmt::CreateSource(
                parse_create_source(&mut parser, &file).map_err(|e| parse_error(&file, e, next.span.start, sql))?,
            )
        } else {
            Stmt::Sql(Box::new(parser.parse_statement().map_err(|e| parse_error(&file, e, next.span.start, sql))?))
        };
        let nesting = depths
            .iter()
            .find(|(start, _)| *start == next.span.start)
            .or(depths.iter().max_by_key(|(_, depth)| *depth))
            .map_or(0, |(_, depth)| *depth);
        out.push(Parsed { stmt, location: at, nesting });
        let after = parser.peek_token();
        if after.token != Token::EOF && after.token != Token::SemiColon {
            return Err(Error::sql(
                location(&file, after.span.start),
                format!("syntax error: expected ';' after the statement, found {}", after.token),
            ));
        }
    }
    Ok(out)
}

/// How deep a statement may nest (see [`check_nesting`]).
pub(crate) const NESTING_MAX: usize = 500;

/// One parenthesized group of a statement's tokens, as [`check_nesting`] scans it.
#[derive(Default)]
struct Group {
    /// Operators in the current comma-separated item.
    item_operators: usize,
    /// The deepest group nested in the current item.
    item_inner: usize,
    /// The deepest item so far.
    deepest_item: usize,
    /// Set operations and joins: they chain across commas.
    chain: usize,
    /// Between FROM and the clause after it, where a comma is a join.
    in_from: bool,
}

impl Group {
    fn end_item(&mut self) {
        self.deepest_item = self.deepest_item.max(self.item_operators + self.item_inner);
        self.item_operators = 0;
        self.item_inner = 0;
    }
    fn depth(mut self) -> usize {
        self.end_item();
        self.deepest_item + self.chain
    }
}

/// Infix and postfix keywords: sqlparser builds a chain of them in a loop,
/// one tree level each (the tokens are sqlparser's infix precedence table).
fn is_operator_keyword(word: &Word) -> bool {
    use Keyword as K;
    word.quote_style.is_none()
        && matches!(
            word.keyword,
            K::AND
                | K::OR
                | K::XOR
                | K::NOT
                | K::IS
                | K::IN
                | K::BETWEEN
                | K::OVERLAPS
                | K::LIKE
                | K::ILIKE
                | K::RLIKE
                | K::REGEXP
                | K::MATCH
                | K::GLOB
                | K::SIMILAR
                | K::MEMBER
                | K::OPERATOR
                | K::DIV
                | K::NOTNULL
                | K::GLOBAL
                | K::AT
                | K::COLLATE
        )
}

/// Refuses a statement that nests deeper than [`NESTING_MAX`], before it
/// is parsed: every pass over a statement (parsing's tree, binding,
/// rendering, evaluation, printing, and dropping the trees) recurses once
/// per level, and a long chain of operators (`a + b + ...`, `x AND y AND
/// ...`), set operations or joins is one level per link. sqlparser bounds
/// its own recursion (parentheses, subqueries, CASE) but builds chains in a
/// loop, so the chains are bounded here, from the tokens, without building
/// a tree. Returns each statement's start and depth.
///
/// The depth counted is an upper bound of the tree's: for each
/// parenthesized group, the operators of its deepest comma-separated item
/// plus the depth of the deepest group inside that item, plus the group's
/// set operations and joins, plus one per parenthesis.
fn check_nesting(tokens: &[TokenWithSpan], file: &Option<Arc<str>>) -> Result<Vec<(SqlLocation, usize)>> {
    let mut depths = Vec::new();
    let mut groups = vec![Group::default()];
    // The depth of the current position, counted on the way in: where it first
    // passes the limit is where the error points.
    let mut running = 0usize;
    let mut first_over: Option<SqlLocation> = None;
    let mut statement_start: Option<SqlLocation> = None;
    for token in tokens {
        if statement_start.is_none() && !matches!(token.token, Token::Whitespace(_) | Token::SemiColon) {
            statement_start = Some(token.span.start);
        }
        let nested = groups.len() > 1;
        let group = groups.last_mut().expect("the statement's group stays");
        match &token.token {
            Token::Whitespace(_)
            | Token::EOF
            | Token::Period
            | Token::Number(..)
            | Token::Char(_)
            | Token::Placeholder(_)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::NationalStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::RBracket => {}
            Token::Word(word) if is_operator_keyword(word) => {
                group.item_operators += 1;
                running += 1;
            }
            Token::Word(word) if word.quote_style.is_none() => match word.keyword {
                Keyword::UNION | Keyword::EXCEPT | Keyword::INTERSECT | Keyword::MINUS => {
                    group.chain += 1;
                    group.in_from = false;
                    running += 1;
                }
                Keyword::JOIN => {
                    group.chain += 1;
                    running += 1;
                }
                Keyword::FROM => group.in_from = true,
                Keyword::WHERE
                | Keyword::GROUP
                | Keyword::HAVING
                | Keyword::ORDER
                | Keyword::LIMIT
                | Keyword::OFFSET
                | Keyword::FETCH
                | Keyword::WINDOW
                | Keyword::QUALIFY
                | Keyword::SELECT => group.in_from = false,
                _ => {}
            },
            Token::Word(_) => {}
            Token::Comma if group.in_from => {
                group.chain += 1;
                running += 1;
            }
            Token::Comma => {
                running = running.saturating_sub(group.item_operators);
                group.end_item();
            }
            Token::LParen => {
                groups.push(Group::default());
                running += 1;
            }
            Token::RParen if nested => {
                let inner = groups.pop().expect("more than one");
                running = running.saturating_sub(inner.item_operators + inner.chain + 1);
                let outer = groups.last_mut().expect("the statement's group stays");
                outer.item_inner = outer.item_inner.max(inner.depth() + 1);
            }
            // Unbalanced: the parser reports it.
            Token::RParen => {}
            Token::SemiColon => {
                depths.extend(end_statement(&mut groups, &mut first_over, &mut statement_start, file)?);
                running = 0;
            }
            _ => {
                group.item_operators += 1;
                running += 1;
            }
        }
        if running > NESTING_MAX && first_over.is_none() {
            first_over = Some(token.span.start);
        }
    }
    depths.extend(end_statement(&mut groups, &mut first_over, &mut statement_start, file)?);
    Ok(depths)
}

fn end_statement(
    groups: &mut Vec<Group>,
    first_over: &mut Option<SqlLocation>,
    statement_start: &mut Option<SqlLocation>,
    file: &Option<Arc<str>>,
) -> Result<Option<(SqlLocation, usize)>> {
    // Groups left open are closed (the parser reports the missing parenthesis).
    let mut depth = 0;
    while let Some(mut group) = groups.pop() {
        group.item_inner = group.item_inner.max(depth);
        depth = group.depth() + usize::from(!groups.is_empty());
    }
    groups.push(Group::default());
    let start = statement_start.take();
    let at = first_over.take().or(start).unwrap_or(SqlLocation { line: 1, column: 1 });
    if depth > NESTING_MAX {
        return Err(Error::sql(
            location(file, at),
            format!(
                "the statement nests {depth} levels deep (a chain of operators, set operations or joins is one \
                 level per link, a parenthesis one more); the limit is {NESTING_MAX}: split it, e.g. into views"
            ),
        ));
    }
    Ok(start.map(|start| (start, depth)))
}

fn word_is(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.value.eq_ignore_ascii_case(word) && w.quote_style.is_none())
}

/// `CREATE [OR REPLACE] SOURCE`, looking ahead without consuming.
fn is_create_source(parser: &Parser<'_>) -> bool {
    let tokens = parser.peek_tokens_with_location::<4>();
    word_is(&tokens[0].token, "CREATE")
        && (word_is(&tokens[1].token, "SOURCE")
            || (word_is(&tokens[1].token, "OR")
                && word_is(&tokens[2].token, "REPLACE")
                && word_is(&tokens[3].token, "SOURCE")))
}

/// Whether the next two tokens are the words `first` and `second`.
fn is_word_pair(parser: &Parser<'_>, first: &str, second: &str) -> bool {
    let tokens = parser.peek_tokens_with_location::<2>();
    word_is(&tokens[0].token, first) && word_is(&tokens[1].token, second)
}

fn parse_drop_sink(parser: &mut Parser<'_>) -> std::result::Result<Stmt, ParserError> {
    parser.expect_keyword(Keyword::DROP)?;
    expect_word(parser, "SINK")?;
    let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = parser.parse_identifier()?;
    Ok(Stmt::DropSink { name, if_exists })
}

fn parse_create_sink(parser: &mut Parser<'_>, file: &Option<Arc<str>>) -> std::result::Result<CreateSink, ParserError> {
    parser.expect_keyword(Keyword::CREATE)?;
    expect_word(parser, "SINK")?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_identifier()?;
    parser.expect_keyword(Keyword::FROM)?;
    let view = parser.parse_identifier()?;
    parser.expect_keyword(Keyword::INTO)?;
    expect_word(parser, "KAFKA")?;
    let (topic, topic_at, brokers) = parse_kafka_options(parser)?;
    if word_is(&parser.peek_token().token, "FORMAT") {
        parser.next_token();
        expect_word(parser, "JSON")?;
    }
    let envelope = if word_is(&parser.peek_token().token, "ENVELOPE") {
        parser.next_token();
        let token = parser.next_token();
        let kind = match &token.token {
            Token::Word(word) if matches!(word.value.to_ascii_uppercase().as_str(), "UPSERT" | "DEBEZIUM") => {
                word.value.to_ascii_uppercase()
            }
            other => {
                return Err(ParserError::ParserError(format!(
                    "Expected: UPSERT or DEBEZIUM, found: {other}{}",
                    token.span.start
                )));
            }
        };
        expect_word(parser, "KEY")?;
        parser.expect_token(&Token::LParen)?;
        let key = parser.parse_comma_separated(|p| p.parse_identifier())?;
        parser.expect_token(&Token::RParen)?;
        Some((kind, key))
    } else {
        None
    };
    Ok(CreateSink {
        name,
        view,
        brokers: brokers.expect("parse_kafka_options names the brokers"),
        topic,
        topic_location: location(file, topic_at),
        envelope,
        if_not_exists,
    })
}

fn is_drop_source(parser: &Parser<'_>) -> bool {
    let tokens = parser.peek_tokens_with_location::<2>();
    word_is(&tokens[0].token, "DROP") && word_is(&tokens[1].token, "SOURCE")
}

fn parse_drop_source(parser: &mut Parser<'_>) -> std::result::Result<Stmt, ParserError> {
    parser.expect_keyword(Keyword::DROP)?;
    expect_word(parser, "SOURCE")?;
    let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
    let name = parser.parse_identifier()?;
    let cascade = parser.parse_keyword(Keyword::CASCADE);
    if !cascade {
        let _restrict = parser.parse_keyword(Keyword::RESTRICT);
    }
    Ok(Stmt::DropSource { name, if_exists, cascade })
}

fn expect_word(parser: &mut Parser<'_>, word: &str) -> std::result::Result<(), ParserError> {
    let token = parser.next_token();
    if word_is(&token.token, word) {
        Ok(())
    } else {
        Err(ParserError::ParserError(format!("Expected: {word}, found: {}{}", token.token, token.span.start)))
    }
}

fn parse_create_source(
    parser: &mut Parser<'_>,
    file: &Option<Arc<str>>,
) -> std::result::Result<CreateSource, ParserError> {
    parser.expect_keyword(Keyword::CREATE)?;
    let or_replace = parser.parse_keywords(&[Keyword::OR, Keyword::REPLACE]);
    expect_word(parser, "SOURCE")?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_identifier()?;
    let (columns, watermark) = parse_source_columns(parser, file)?;
    if columns.is_empty() {
        return Err(ParserError::ParserError(format!("Expected: at least one column{}", name.span.start)));
    }
    parser.expect_keyword(Keyword::FROM)?;
    let (topic, topic_at, kafka_brokers) = if word_is(&parser.peek_token().token, "KAFKA") {
        parser.next_token();
        parse_kafka_options(parser)?
    } else {
        expect_word(parser, "TOPIC")?;
        let topic_at = parser.peek_token().span.start;
        (parser.parse_literal_string()?, topic_at, None)
    };
    expect_word(parser, "FORMAT")?;
    expect_word(parser, "JSON")?;
    let include_timestamp = if word_is(&parser.peek_token().token, "INCLUDE") {
        parser.next_token();
        let at = parser.peek_token().span;
        expect_word(parser, "TIMESTAMP")?;
        match parser.parse_keyword(Keyword::AS) {
            true => Some(parser.parse_identifier()?),
            false => Some(Ident::with_span(at, "timestamp")),
        }
    } else {
        None
    };
    let upsert_key = if word_is(&parser.peek_token().token, "ENVELOPE") {
        parser.next_token();
        expect_word(parser, "UPSERT")?;
        expect_word(parser, "KEY")?;
        parser.expect_token(&Token::LParen)?;
        let key = parser.parse_comma_separated(|p| p.parse_identifier())?;
        parser.expect_token(&Token::RParen)?;
        Some(key)
    } else {
        None
    };
    Ok(CreateSource {
        name,
        columns,
        topic,
        topic_location: location(file, topic_at),
        kafka_brokers,
        upsert_key,
        watermark,
        include_timestamp,
        or_replace,
        if_not_exists,
    })
}

/// A source's `(col type, ..., [WATERMARK FOR col AS expr])`.
fn parse_source_columns(
    parser: &mut Parser<'_>,
    file: &Option<Arc<str>>,
) -> std::result::Result<(Vec<ColumnDef>, Option<Box<WatermarkDef>>), ParserError> {
    parser.expect_token(&Token::LParen)?;
    let (mut columns, mut watermark) = (Vec::new(), None);
    loop {
        let next = parser.peek_token();
        if word_is(&next.token, "WATERMARK") {
            parser.next_token();
            if watermark.is_some() {
                return Err(ParserError::ParserError(format!(
                    "Expected: one WATERMARK clause, found a second{}",
                    next.span.start
                )));
            }
            parser.expect_keyword(Keyword::FOR)?;
            let column = parser.parse_identifier()?;
            parser.expect_keyword(Keyword::AS)?;
            let expr_at = parser.peek_token().span.start;
            let expr = parser.parse_expr()?;
            watermark = Some(Box::new(WatermarkDef { column, expr, location: location(file, expr_at) }));
        } else if ["CONSTRAINT", "PRIMARY", "UNIQUE", "FOREIGN", "CHECK"].iter().any(|w| word_is(&next.token, w)) {
            return Err(ParserError::ParserError(format!(
                "Expected: a column definition (a source has no constraints; use ENVELOPE UPSERT KEY (...)), \
                 found: {}{}",
                next.token, next.span.start
            )));
        } else {
            columns.push(parser.parse_column_def()?);
        }
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    parser.expect_token(&Token::RParen)?;
    Ok((columns, watermark))
}

/// `(BROKERS 'host:port[,...]', TOPIC 'topic')` after `FROM KAFKA`, in
/// either order: the topic, where it is written, and the brokers.
fn parse_kafka_options(
    parser: &mut Parser<'_>,
) -> std::result::Result<(String, SqlLocation, Option<String>), ParserError> {
    let opened = parser.peek_token().span.start;
    parser.expect_token(&Token::LParen)?;
    let (mut brokers, mut topic) = (None, None);
    loop {
        let token = parser.next_token();
        let name = match &token.token {
            Token::Word(word) => word.value.to_ascii_uppercase(),
            other => {
                return Err(ParserError::ParserError(format!(
                    "Expected: BROKERS or TOPIC, found: {other}{}",
                    token.span.start
                )));
            }
        };
        let at = parser.peek_token().span.start;
        let value = parser.parse_literal_string()?;
        let slot = match name.as_str() {
            "BROKERS" => &mut brokers,
            "TOPIC" => &mut topic,
            _ => {
                return Err(ParserError::ParserError(format!(
                    "Expected: BROKERS or TOPIC (the Kafka source's options), found: {name}{}",
                    token.span.start
                )));
            }
        };
        if slot.replace((value, at)).is_some() {
            return Err(ParserError::ParserError(format!(
                "Expected: {name} once, found: a second {name}{}",
                token.span.start
            )));
        }
        if !parser.consume_token(&Token::Comma) {
            break;
        }
    }
    parser.expect_token(&Token::RParen)?;
    let missing =
        |what: &str| ParserError::ParserError(format!("Expected: {what} in FROM KAFKA (...), found: none{opened}"));
    let (brokers, _) = brokers.ok_or_else(|| missing("BROKERS 'host:port'"))?;
    let (topic, topic_at) = topic.ok_or_else(|| missing("TOPIC 'name'"))?;
    if brokers.trim().is_empty() {
        return Err(ParserError::ParserError(format!("Expected: BROKERS 'host:port[,...]', found: ''{opened}")));
    }
    Ok((topic, topic_at, Some(brokers)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_source_parses_and_prints_back() {
        let sql = "create source bids (auction bigint, price bigint) from topic 'bid' format json;\n\
                   CREATE OR REPLACE SOURCE t (k INT, v TEXT) FROM TOPIC 't' FORMAT JSON ENVELOPE UPSERT KEY (k)";
        let parsed = parse(sql, None).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[1].location.line, 2);
        let text = parsed[1].stmt.to_string();
        assert_eq!(
            text,
            "CREATE OR REPLACE SOURCE t (k INT, v TEXT) FROM TOPIC 't' FORMAT JSON ENVELOPE UPSERT KEY (k)"
        );
        assert_eq!(parse(&text, None).unwrap()[0].stmt.to_string(), text);
    }

    #[test]
    fn a_watermark_parses_prints_back_and_refuses_constraints() {
        let sql = "CREATE SOURCE b (a INT, at TIMESTAMP, watermark for at as at - interval '5' second) \
                   FROM TOPIC 'b' FORMAT JSON";
        let text = parse(sql, None).unwrap()[0].stmt.to_string();
        assert_eq!(
            text,
            "CREATE SOURCE b (a INT, at TIMESTAMP, WATERMARK FOR at AS at - INTERVAL '5' SECOND) FROM TOPIC 'b' \
             FORMAT JSON"
        );
        assert_eq!(parse(&text, None).unwrap()[0].stmt.to_string(), text);
        let stamped = "CREATE SOURCE b (a INT) FROM TOPIC 'b' FORMAT JSON INCLUDE TIMESTAMP AS seen";
        assert_eq!(parse(stamped, None).unwrap()[0].stmt.to_string(), stamped);
        let default = parse("CREATE SOURCE b (a INT) FROM TOPIC 'b' FORMAT JSON include timestamp", None).unwrap();
        assert!(default[0].stmt.to_string().ends_with("INCLUDE TIMESTAMP AS timestamp"));
        let error = parse("CREATE SOURCE b (a INT, PRIMARY KEY (a)) FROM TOPIC 'b' FORMAT JSON", None).unwrap_err();
        assert!(error.to_string().contains("a source has no constraints"), "{error}");
    }

    #[test]
    fn a_kafka_source_parses_prints_back_and_names_its_mistakes() {
        let sql = "create source ev (k bigint) from kafka (topic 'e''v', brokers 'h1:9092,h2:9092') format json";
        let text = parse(sql, None).unwrap()[0].stmt.to_string();
        assert_eq!(
            text,
            "CREATE SOURCE ev (k BIGINT) FROM KAFKA (BROKERS 'h1:9092,h2:9092', TOPIC 'e''v') FORMAT JSON"
        );
        assert_eq!(parse(&text, None).unwrap()[0].stmt.to_string(), text);
        for (sql, expected) in [
            ("CREATE SOURCE s (a INT) FROM KAFKA (TOPIC 't') FORMAT JSON", "1:36: syntax error: Expected: BROKERS"),
            ("CREATE SOURCE s (a INT) FROM KAFKA (BROKERS 'b') FORMAT JSON", "1:36: syntax error: Expected: TOPIC"),
            (
                "CREATE SOURCE s (a INT) FROM KAFKA (BROKERS 'b', GROUP 'g') FORMAT JSON",
                "1:50: syntax error: Expected: BROKERS or TOPIC",
            ),
            (
                "CREATE SOURCE s (a INT) FROM KAFKA (TOPIC 'a', TOPIC 'b', BROKERS 'c') FORMAT JSON",
                "1:48: syntax error: Expected: TOPIC once",
            ),
        ] {
            let error = parse(sql, None).unwrap_err().to_string();
            assert!(error.starts_with(expected), "{sql}: {error}");
        }
    }

    #[test]
    fn a_sink_parses_and_prints_back() {
        let sql = "create sink s from v into kafka (brokers 'h:1', topic 'out'); drop sink if exists s";
        let parsed = parse(sql, None).unwrap();
        let text = parsed[0].stmt.to_string();
        assert_eq!(text, "CREATE SINK s FROM v INTO KAFKA (BROKERS 'h:1', TOPIC 'out') FORMAT JSON");
        assert_eq!(parse(&text, None).unwrap()[0].stmt.to_string(), text);
        assert_eq!(parsed[1].stmt.to_string(), "DROP SINK IF EXISTS s");
        let sql = "CREATE SINK s FROM v INTO KAFKA (BROKERS 'b', TOPIC 't') FORMAT JSON ENVELOPE DEBEZIUM KEY (a, b)";
        assert_eq!(parse(sql, None).unwrap()[0].stmt.to_string(), sql);
        let error =
            parse("CREATE SINK s FROM v INTO KAFKA (BROKERS 'b', TOPIC 't') ENVELOPE UPSERT", None).unwrap_err();
        assert!(error.to_string().starts_with("1:73: syntax error: Expected: KEY"), "{error}");
        let error = parse("CREATE SINK s FROM v INTO KAFKA (BROKERS 'b', TOPIC 't') ENVELOPE NONE", None).unwrap_err();
        assert!(error.to_string().starts_with("1:67: syntax error: Expected: UPSERT or DEBEZIUM"), "{error}");
    }

    #[test]
    fn errors_name_line_and_column() {
        let error = parse("CREATE VIEW v AS\nSELECT FROM WHERE;", Some("f.sql".into())).unwrap_err();
        assert!(error.to_string().starts_with("f.sql:2:"), "{error}");
        let error = parse("CREATE SOURCE s (a INT) FROM TOPIC 'x' FORMAT CSV;", None).unwrap_err();
        assert!(error.to_string().starts_with("1:47: syntax error: Expected: JSON, found: CSV"), "{error}");
    }

    /// An input that ends too early is an error at its end, not at the
    /// statement's start (psql puts its caret there).
    #[test]
    fn an_unexpected_end_is_placed_at_the_end() {
        let error = parse("SELECT * FROM v WHERE", None).unwrap_err();
        assert!(error.to_string().starts_with("1:22: syntax error:"), "{error}");
        let error = parse("SELECT a\nFROM v\nWHERE é =", None).unwrap_err();
        assert!(error.to_string().starts_with("3:10: syntax error:"), "characters, not bytes: {error}");
        assert_eq!((end_of("").line, end_of("").column), (1, 1));
    }
}
