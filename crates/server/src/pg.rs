//! The Postgres wire endpoint (the `pgwire` crate's protocol codec and
//! handlers; the accept loop and its limits are ours).
//!
//! Served so far: the simple query protocol; the definition language and
//! DML as one batch per query (`Engine::execute`); `SELECT * FROM view`
//! (its rows as of the last committed epoch, a row held N times sent N
//! times); `BEGIN`/`COMMIT` accepted (each statement takes effect when it
//! runs, so `ROLLBACK` is refused); `SET` of a session setting accepted;
//! `SHOW` of the catalog's objects by kind and of the startup parameters.
//! Anything else is refused with SQLSTATE 0A000, never answered wrongly.
//!
//! Invariants: a client's error never ends another client's connection or
//! the server; more than `connections_max` connections at once are
//! refused with SQLSTATE 53300 before their startup is read; every error a
//! statement gets carries a SQLSTATE (42601 with the position for syntax,
//! 42P01 for an unknown relation, 0A000 for what is not supported).

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use async_trait::async_trait;
use futures::stream;
use futures::{Sink, SinkExt};
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::sasl::scram::{ScramAuth, gen_salted_password};
use pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler, finish_authentication,
    protocol_negotiation, save_startup_parameters_to_metadata,
};
use pgwire::api::cancel::{CancelHandler, DefaultCancelHandler};
use pgwire::api::portal::Format;
use pgwire::api::query::SimpleQueryHandler;
use pgwire::api::results::{DataRowEncoder, FieldFormat, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::store::PortalStore;
use pgwire::api::{
    ClientInfo, ClientPortalStore, ConnectionHandle, ConnectionManager, PgWireServerHandlers, PidSecretKeyGenerator,
    RandomPidSecretKeyGenerator, Type,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use tokio::io::AsyncWriteExt;
use tokio::sync::Semaphore;

use crate::cell;
use crate::engine::Engine;
use crate::error::{Error, Result};

/// What the server says it is: drivers and psql read the major version.
const SERVER_VERSION: &str = concat!("15.0 (Millpond ", env!("CARGO_PKG_VERSION"), ")");
/// How long a read waits for a view that exists but has not committed yet.
pub(crate) const VIEW_READY_WAIT_MS: u64 = 30_000;

/// A connection's session settings (`SET`). Shared by its queries.
#[derive(Debug, Default)]
pub(crate) struct Settings {
    /// `statement_timeout` in ms; 0 (the default) means none. It bounds how
    /// long a read waits for a view's first commit (else [`VIEW_READY_WAIT_MS`]).
    statement_timeout_ms: std::sync::atomic::AtomicU64,
    /// `read_your_writes = off`: reads do not wait for this connection's writes.
    read_your_writes_off: std::sync::atomic::AtomicBool,
    /// What this connection wrote, for read-your-writes (`Engine::covers`).
    written: std::sync::Mutex<crate::engine::Writes>,
    /// Its cursors over SUBSCRIBE.
    cursors: crate::cursor::Cursors,
    /// The database and user it connected as (the startup packet's).
    database: String,
    user: String,
    /// Other settings `SET` gave (lower-case names): kept for `SHOW`, they
    /// change nothing (at most [`OTHER_SETTINGS_MAX`]).
    others: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
    /// Whether a statement changed anything since the last BEGIN: then a
    /// ROLLBACK cannot be honoured (each statement took effect when it ran).
    wrote_since_begin: std::sync::atomic::AtomicBool,
    /// Set when the query running on the connection is abandoned (its
    /// client cancelled it): a one-off SELECT computing on stops then.
    interrupted: std::sync::atomic::AtomicBool,
    /// The `COPY topic FROM STDIN` in progress, if any.
    copy_in: std::sync::Mutex<Option<crate::copy_in::CopyIn>>,
    /// Notices of the statements just executed (with their position in
    /// the query), sent before their responses.
    notices: std::sync::Mutex<Vec<(String, Option<String>)>>,
}

/// Held by a running query's future: dropped (cancelled, or done), it
/// tells whatever still computes for the query to stop.
pub(crate) struct Running(Arc<Settings>);

impl Running {
    pub(crate) fn start(settings: &Arc<Settings>) -> Running {
        settings.interrupted.store(false, std::sync::atomic::Ordering::Relaxed);
        Running(settings.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.interrupted.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Settings of other names a connection may keep, and the longest value.
const OTHER_SETTINGS_MAX: usize = 256;
const SETTING_VALUE_BYTES_MAX: usize = 4096;

/// The settings of `client`'s connection, made at its first statement.
pub(crate) fn settings_of<C: ClientInfo>(client: &C) -> Arc<Settings> {
    let metadata = client.metadata();
    let user = metadata.get("user").cloned().unwrap_or_else(|| "millpond".to_owned());
    let database = metadata.get("database").cloned().unwrap_or_else(|| user.clone());
    client.session_extensions().get_or_insert_with(|| Settings { database, user, ..Settings::default() })
}

impl Settings {
    /// What the system catalog shows this connection: its database, user
    /// and the settings `SHOW` reports.
    pub(crate) fn system_context(&self) -> millpond_sql::SystemContext {
        let mut settings: Vec<(String, String)> = REPORTED_PARAMETERS
            .iter()
            .filter_map(|name| Some((name.to_string(), parameter_value(&name.to_ascii_lowercase())?)))
            .collect();
        let timeout_ms = self.statement_timeout_ms.load(std::sync::atomic::Ordering::Relaxed);
        settings.push(("statement_timeout".into(), format!("{timeout_ms}ms")));
        let off = self.read_your_writes_off.load(std::sync::atomic::Ordering::Relaxed);
        settings.push(("read_your_writes".into(), if off { "off" } else { "on" }.into()));
        millpond_sql::SystemContext { database: self.database.clone(), user: self.user.clone(), settings }
    }

    pub(crate) fn cursors(&self) -> &crate::cursor::Cursors {
        &self.cursors
    }

    /// The statement timeout, if one is set.
    pub(crate) fn statement_timeout_ms(&self) -> Option<u64> {
        Some(self.statement_timeout_ms.load(std::sync::atomic::Ordering::Relaxed)).filter(|ms| *ms > 0)
    }

    /// Notes a batch's writes: later reads wait until their views cover them.
    fn wrote(&self, writes: crate::engine::Writes) {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        for (topic, end) in writes {
            let entry = written.entry(topic).or_default();
            *entry = (*entry).max(end);
        }
    }

    /// How long a read may wait for a view to commit.
    pub(crate) fn wait_ms(&self) -> u64 {
        match self.statement_timeout_ms.load(std::sync::atomic::Ordering::Relaxed) {
            0 => VIEW_READY_WAIT_MS,
            ms => ms,
        }
    }
}

/// A `statement_timeout` value: a number of ms, or a string with a unit
/// (`ms`, `s`, `min`, `h`), or `DEFAULT` (0: none).
pub(crate) fn timeout_ms(value: &str) -> Option<u64> {
    let value = value.trim().trim_matches('\'').trim();
    if value.eq_ignore_ascii_case("default") {
        return Some(0);
    }
    let split = value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let number: u64 = number.parse().ok()?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "ms" => 1,
        "s" => 1_000,
        "min" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    number.checked_mul(scale)
}

/// `SET name [=|TO] value`: `statement_timeout` is kept; other settings are
/// accepted and change nothing.
fn set(settings: &Settings, statement: &str) -> PgWireResult<Response> {
    let rest = statement.trim().trim_end_matches(';');
    let rest = rest.get(3..).unwrap_or_default().trim_start();
    let rest = rest.strip_prefix("SESSION ").or_else(|| rest.strip_prefix("session ")).unwrap_or(rest);
    let (name, value) = match rest.find(|c: char| c == '=' || c.is_whitespace()) {
        Some(at) => (&rest[..at], rest[at..].trim_start()),
        None => (rest, ""),
    };
    let value = value
        .strip_prefix('=')
        .map(str::trim_start)
        .unwrap_or_else(|| value.strip_prefix("TO ").or_else(|| value.strip_prefix("to ")).unwrap_or(value));
    if name.eq_ignore_ascii_case("read_your_writes") {
        let off = match value.trim().trim_matches('\'').to_ascii_lowercase().as_str() {
            "on" | "true" | "default" => false,
            "off" | "false" => true,
            other => {
                return Err(user_error(
                    "22023",
                    format!("invalid value for parameter \"read_your_writes\": \"{other}\""),
                ));
            }
        };
        settings.read_your_writes_off.store(off, std::sync::atomic::Ordering::Relaxed);
    }
    if name.eq_ignore_ascii_case("statement_timeout") {
        let ms = timeout_ms(value).ok_or_else(|| {
            user_error("22023", format!("invalid value for parameter \"statement_timeout\": \"{}\"", value.trim()))
        })?;
        settings.statement_timeout_ms.store(ms, std::sync::atomic::Ordering::Relaxed);
    } else if !name.eq_ignore_ascii_case("read_your_writes") {
        let value = value.trim().trim_matches('\'').to_owned();
        let mut others = settings.others.lock().unwrap_or_else(|e| e.into_inner());
        let known = others.contains_key(&name.to_ascii_lowercase());
        if value.len() > SETTING_VALUE_BYTES_MAX || (!known && others.len() >= OTHER_SETTINGS_MAX) {
            return Err(user_error(
                "54000",
                format!("setting \"{name}\" is past the limits of a connection's settings"),
            ));
        }
        others.insert(name.to_ascii_lowercase(), value);
    }
    Ok(Response::Execution(Tag::new("SET")))
}
pub(crate) const VIEW_READY_POLL_MS: u64 = 10;
/// Connections served at once unless configured.
pub const CONNECTIONS_MAX_DEFAULT: usize = 256;

/// Where and how the endpoint listens.
#[derive(Clone)]
pub struct PgConfig {
    pub listen: SocketAddr,
    pub connections_max: usize,
    /// When set, clients authenticate with SCRAM-SHA-256 with this password
    /// (any user name); a wrong one is refused with 28P01. Unset: trust.
    pub password: Option<String>,
    /// How long a subscriber's client may read nothing while its buffer is
    /// full before the subscriber is dropped (53200).
    pub subscriber_stall_ms: u64,
    /// How many bytes of encoded changes each view keeps for its slowest
    /// subscribers (one ring shared by all of them): a subscriber further
    /// behind than that is dropped (53200).
    pub subscriber_buffer_bytes: usize,
    /// The nice value of the endpoint's threads (and the fan-out hubs they
    /// start, which inherit it): above 0, clients get what CPU the
    /// dataflow leaves when the machine is saturated (`priority`).
    pub wire_nice: i32,
    /// The endpoint's I/O threads (1 to [`crate::WIRE_THREADS_MAX`]);
    /// [`crate::wire_threads_default`] of the dataflow's workers unless set.
    pub wire_threads: usize,
    /// How long a client has to send its first packet (startup, SSL or
    /// cancel request) in full; a slower one gets 08P01 and is closed.
    pub startup_timeout_ms: u64,
    /// The largest frontend message after the startup packet (a Query,
    /// Parse or Bind); a longer one gets 54000 and a closed connection.
    pub message_bytes_max: usize,
}

/// [`PgConfig::startup_timeout_ms`] unless configured.
pub const STARTUP_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// The largest first packet read (pgwire refuses startup packets past 10 000 bytes).
const FIRST_PACKET_BYTES_MAX: usize = 16 * 1024;
/// How often a partial first packet is looked at again.
const FIRST_PACKET_POLL_MS: u64 = 10;

/// What an endpoint counts, for its metrics and tests.
#[derive(Debug, Default)]
pub struct Gauges {
    /// Connections being served.
    pub connections: std::sync::atomic::AtomicUsize,
    /// Streams of SUBSCRIBE (COPY) being served.
    pub subscribers: std::sync::atomic::AtomicUsize,
}

/// Counts one on `gauge` while alive.
pub(crate) struct Counted<'g>(&'g std::sync::atomic::AtomicUsize);

impl<'g> Counted<'g> {
    pub(crate) fn new(gauge: &'g std::sync::atomic::AtomicUsize) -> Counted<'g> {
        gauge.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Counted(gauge)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl std::fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConfig")
            .field("listen", &self.listen)
            .field("connections_max", &self.connections_max)
            .field("password", &self.password.as_ref().map(|_| "<set>"))
            .field("subscriber_stall_ms", &self.subscriber_stall_ms)
            .field("subscriber_buffer_bytes", &self.subscriber_buffer_bytes)
            .field("wire_nice", &self.wire_nice)
            .field("wire_threads", &self.wire_threads)
            .field("startup_timeout_ms", &self.startup_timeout_ms)
            .field("message_bytes_max", &self.message_bytes_max)
            .finish()
    }
}

impl PgConfig {
    pub fn new(listen: SocketAddr) -> PgConfig {
        PgConfig {
            listen,
            connections_max: CONNECTIONS_MAX_DEFAULT,
            password: None,
            subscriber_stall_ms: crate::subscribe::SUBSCRIBER_STALL_MS_DEFAULT,
            subscriber_buffer_bytes: crate::fanout::SUBSCRIBER_BUFFER_BYTES_DEFAULT,
            wire_nice: crate::priority::WIRE_NICE_DEFAULT,
            wire_threads: crate::priority::wire_threads_default(1),
            startup_timeout_ms: STARTUP_TIMEOUT_MS_DEFAULT,
            message_bytes_max: crate::connection::MESSAGE_BYTES_MAX_DEFAULT,
        }
    }
}

/// A running endpoint; stopped when dropped.
#[derive(Debug)]
pub struct PgEndpoint {
    addr: SocketAddr,
    gauges: Arc<Gauges>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl PgEndpoint {
    /// Binds `config.listen` and serves `engine` on its own threads.
    pub fn start(engine: Arc<Engine>, config: PgConfig) -> Result<PgEndpoint> {
        let io = |action: &'static str| {
            let path = config.listen.to_string();
            move |source| Error::Io { action, path, source }
        };
        if !(1..=crate::priority::WIRE_THREADS_MAX).contains(&config.wire_threads) {
            return Err(Error::Config(format!(
                "wire_threads must be 1 to {}, not {}",
                crate::priority::WIRE_THREADS_MAX,
                config.wire_threads
            )));
        }
        let listener = std::net::TcpListener::bind(config.listen).map_err(io("binding"))?;
        listener.set_nonblocking(true).map_err(io("configuring"))?;
        let addr = listener.local_addr().map_err(io("reading the address of"))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.wire_threads)
            .thread_name("millpond-pg")
            .on_thread_start({
                let nice = config.wire_nice;
                move || crate::priority::lower_current_thread(nice)
            })
            .enable_all()
            .build()
            .map_err(io("starting the I/O threads of"))?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel();
        let connections = Arc::new(ConnectionManager::new());
        let gauges = Arc::new(Gauges::default());
        let limits = crate::subscribe::StreamLimits {
            stall_ms: config.subscriber_stall_ms,
            buffer_bytes: config.subscriber_buffer_bytes,
        };
        let handlers = Arc::new(Handlers {
            extended: Arc::new(crate::extended::Extended::new(engine.clone(), gauges.clone(), limits)),
            queries: Arc::new(Queries { engine, gauges: gauges.clone(), limits }),
            startup: Arc::new(Startup::new(connections.clone(), config.password.as_deref())),
            cancel: Arc::new(DefaultCancelHandler::new(connections)),
        });
        let counted = gauges.clone();
        let thread = std::thread::Builder::new()
            .name("millpond-pg-accept".into())
            .spawn(move || {
                crate::priority::lower_current_thread(config.wire_nice);
                let limits = crate::connection::ConnectionLimits {
                    message_bytes_max: config.message_bytes_max,
                    startup_timeout_ms: config.startup_timeout_ms,
                };
                let limits = (config.connections_max, limits);
                runtime.block_on(accept_loop(listener, handlers, limits, counted, stopped))
            })
            .map_err(io("spawning the accept thread of"))?;
        Ok(PgEndpoint { addr, gauges, shutdown: Some(shutdown), thread: Some(thread) })
    }

    /// The address it listens on (the port chosen, if 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it serves now: connections and subscribers.
    pub fn gauges(&self) -> &Arc<Gauges> {
        &self.gauges
    }
}

impl Drop for PgEndpoint {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    handlers: Arc<Handlers>,
    (connections_max, limits): (usize, crate::connection::ConnectionLimits),
    gauges: Arc<Gauges>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    let slots = Arc::new(Semaphore::new(connections_max));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut stopped => return,
        };
        let Ok((mut socket, _)) = accepted else { continue };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Refused before its startup is read: an ErrorResponse, then close.
            tokio::spawn(async move {
                let _ = socket.write_all(&error_response("FATAL", "53300", "too many connections")).await;
                let _ = socket.shutdown().await;
            });
            continue;
        };
        let (handlers, gauges) = (handlers.clone(), gauges.clone());
        tokio::spawn(async move {
            let _served = Counted::new(&gauges.connections);
            // A client too slow with its first packet is closed: it holds a slot.
            let deadline = std::time::Duration::from_millis(limits.startup_timeout_ms);
            if !matches!(tokio::time::timeout(deadline, first_packet(&socket)).await, Ok(Ok(()))) {
                let message = "the startup packet did not arrive in time, or is not one";
                let _ = socket.write_all(&error_response("FATAL", "08P01", message)).await;
                let _ = socket.shutdown().await;
                drop(slot);
                return;
            }
            // A client's protocol error ends its connection only.
            crate::connection::serve(socket, handlers, limits).await;
            drop(slot);
        });
    }
}

/// Waits until the client's first packet (a length, then that many bytes
/// in all) is there to read, without reading it: pgwire reads it then.
async fn first_packet(socket: &tokio::net::TcpStream) -> std::io::Result<()> {
    let mut buffer = vec![0u8; FIRST_PACKET_BYTES_MAX];
    loop {
        let seen = socket.peek(&mut buffer).await?;
        if seen == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if seen >= 4 {
            let length = u32::from_be_bytes([buffer[0], buffer[1], buffer[2], buffer[3]]) as usize;
            if !(8..=FIRST_PACKET_BYTES_MAX).contains(&length) {
                return Err(std::io::ErrorKind::InvalidData.into());
            }
            if seen >= length {
                return Ok(());
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(FIRST_PACKET_POLL_MS)).await;
    }
}

/// An ErrorResponse message ('E') with severity, SQLSTATE and message fields.
pub(crate) fn error_response(severity: &str, code: &str, message: &str) -> Vec<u8> {
    let mut fields = Vec::new();
    for (tag, value) in [(b'S', severity), (b'V', severity), (b'C', code), (b'M', message)] {
        fields.push(tag);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut out = vec![b'E'];
    out.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(&fields);
    out
}

struct Handlers {
    queries: Arc<Queries>,
    extended: Arc<crate::extended::Extended>,
    startup: Arc<Startup>,
    /// A CancelRequest (psql's Ctrl-C) stops the query running on its connection.
    cancel: Arc<DefaultCancelHandler>,
}

/// The COPY sub-protocol: `COPY topic FROM STDIN` ([`crate::copy_in`]).
#[async_trait]
impl pgwire::api::copy::CopyHandler for Queries {
    async fn on_copy_data<C>(&self, client: &mut C, data: pgwire::messages::copy::CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let settings = settings_of(client);
        let batch =
            settings.copy_in.lock().unwrap_or_else(|e| e.into_inner()).as_mut().and_then(|c| c.feed(&data.data));
        if let Some(batch) = batch {
            append_copied(&self.engine, &settings, batch).await;
        }
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: pgwire::messages::copy::CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let settings = settings_of(client);
        let last = settings.copy_in.lock().unwrap_or_else(|e| e.into_inner()).as_mut().map(|c| c.finish());
        if let Some(batch) = last {
            append_copied(&self.engine, &settings, batch).await;
        }
        let Some(copy) = settings.copy_in.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return Err(user_error("08P01", "CopyDone without a COPY in progress".into()));
        };
        if let Some((code, message)) = copy.failed {
            return Err(user_error(code, message));
        }
        pgwire::api::query::send_execution_response(client, Tag::new("COPY").with_rows(copy.appended as usize)).await
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: pgwire::messages::copy::CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let copy = settings_of(client).copy_in.lock().unwrap_or_else(|e| e.into_inner()).take();
        let appended = copy.map_or(0, |c| c.appended);
        user_error(
            "57014",
            format!("COPY ended by the client ({}); {appended} records were appended before it", fail.message),
        )
    }
}

/// Starts `COPY topic FROM STDIN` on the connection (the statement must be
/// one). A topic that may not be written is refused at once, or, with
/// `defer_refusal` (the extended protocol: tokio-postgres loses its place
/// in the exchange when Execute of a COPY fails), at the COPY's end.
pub(crate) fn start_copy_in(
    engine: &Engine,
    settings: &Settings,
    statement: &str,
    defer_refusal: bool,
) -> PgWireResult<Response> {
    let Some(request) = crate::copy_in::parse_copy_from(statement) else {
        return Err(user_error("42601", "expected COPY topic FROM STDIN".into()));
    };
    let (request, refused) = match request {
        Ok(request) => {
            // An empty append checks the topic before any data is sent.
            let refused = engine.produce(&request.topic, Vec::new()).err();
            (request, refused.map(|error| (topic_error_code(&error), error.to_string())))
        }
        Err(message) => {
            (crate::copy_in::CopyRequest { topic: String::new(), key_field: None }, Some(("42601", message)))
        }
    };
    let mut copy = crate::copy_in::CopyIn::new(request);
    if let Some((code, message)) = refused {
        if !defer_refusal {
            return Err(user_error(code, message));
        }
        copy.failed = Some((code, message));
    }
    *settings.copy_in.lock().unwrap_or_else(|e| e.into_inner()) = Some(copy);
    let empty = futures::stream::empty::<PgWireResult<pgwire::messages::copy::CopyData>>();
    Ok(Response::CopyIn(pgwire::api::results::CopyResponse::new(0, 1, empty)))
}

/// The SQLSTATE of a refused append.
fn topic_error_code(error: &Error) -> &'static str {
    match error {
        Error::NoTopic(_) => "42P01",
        Error::TopicRefused { .. } => "42501",
        _ => "XX000",
    }
}

/// Appends one batch of a COPY (synced before it returns); an error fails the COPY.
async fn append_copied(engine: &Arc<Engine>, settings: &Settings, batch: Vec<millpond_dataflow::TopicRecord>) {
    let Some(topic) =
        settings.copy_in.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|c| c.request.topic.clone())
    else {
        return;
    };
    let count = batch.len() as u64;
    let engine = engine.clone();
    let appended = tokio::task::spawn_blocking(move || engine.produce(&topic, batch)).await;
    let mut copy = settings.copy_in.lock().unwrap_or_else(|e| e.into_inner());
    let Some(copy) = copy.as_mut() else { return };
    match appended {
        Ok(Ok(())) => copy.appended += count,
        Ok(Err(error)) => {
            let message = format!("{error}; {} records were appended before it", copy.appended);
            copy.failed.get_or_insert((topic_error_code(&error), message));
        }
        Err(error) => {
            copy.failed.get_or_insert(("XX000", error.to_string()));
        }
    }
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.queries.clone()
    }
    fn extended_query_handler(&self) -> Arc<impl pgwire::api::query::ExtendedQueryHandler> {
        self.extended.clone()
    }
    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.startup.clone()
    }
    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        self.cancel.clone()
    }
    fn copy_handler(&self) -> Arc<impl pgwire::api::copy::CopyHandler> {
        self.queries.clone()
    }
}

/// Startup: trust, or SCRAM-SHA-256 when a password is configured; either
/// way the parameters drivers check are sent (a Postgres 15
/// server_version, UTF8 encodings, ISO dates, integer datetimes,
/// standard-conforming strings, UTC) and the connection is registered for
/// cancel requests.
enum Startup {
    Trust {
        parameters: DefaultServerParameterProvider,
        pids: RandomPidSecretKeyGenerator,
        connections: Arc<ConnectionManager>,
    },
    Scram(SASLAuthStartupHandler<DefaultServerParameterProvider>),
}

/// SCRAM's iteration count (Postgres's default).
const SCRAM_ITERATIONS: usize = 4096;

/// The one configured password, salted once per server start.
#[derive(Debug)]
struct PasswordSource {
    salt: Vec<u8>,
    salted_password: Vec<u8>,
}

// The trait spells `&LoginInfo` with its lifetime elided (late-bound): so must we.
#[allow(elided_lifetimes_in_paths)]
#[async_trait]
impl AuthSource for PasswordSource {
    async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
        Ok(Password::new(Some(self.salt.clone()), self.salted_password.clone()))
    }
}

/// 16 bytes no one can predict: std's hasher keys are random per process.
fn random_salt() -> Vec<u8> {
    use std::hash::{BuildHasher, Hasher};
    (0..2u64)
        .flat_map(|i| {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u64(i ^ std::process::id() as u64);
            hasher.finish().to_le_bytes()
        })
        .collect()
}

impl Startup {
    fn new(connections: Arc<ConnectionManager>, password: Option<&str>) -> Startup {
        let mut parameters = DefaultServerParameterProvider::default();
        parameters.server_version = SERVER_VERSION.to_owned();
        parameters.server_encoding = "UTF8".to_owned();
        parameters.client_encoding = Some("UTF8".to_owned());
        parameters.date_style = "ISO, MDY".to_owned();
        parameters.time_zone = "UTC".to_owned();
        parameters.integer_datetimes = true;
        parameters.standard_conforming_strings = true;
        let Some(password) = password else {
            return Startup::Trust { parameters, pids: RandomPidSecretKeyGenerator::default(), connections };
        };
        let salt = random_salt();
        let salted_password = gen_salted_password(password, &salt, SCRAM_ITERATIONS);
        let mut scram = ScramAuth::new(Arc::new(PasswordSource { salt, salted_password }));
        scram.set_iterations(SCRAM_ITERATIONS);
        Startup::Scram(
            SASLAuthStartupHandler::new(Arc::new(parameters)).with_scram(scram).with_connection_manager(connections),
        )
    }
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let (parameters, pids, connections) = match self {
            Startup::Scram(handler) => return handler.on_startup(client, message).await,
            Startup::Trust { parameters, pids, connections } => (parameters, pids, connections),
        };
        if let PgWireFrontendMessage::Startup(ref startup) = message {
            protocol_negotiation(client, startup).await?;
            save_startup_parameters_to_metadata(client, startup);
            let (pid, secret_key) = pids.generate(client);
            client.set_pid_and_secret_key(pid, secret_key.clone());
            // Registered, so that a CancelRequest with this key reaches its queries.
            let (handle, guard) = connections.register(pid, secret_key);
            client.session_extensions().insert::<Arc<ConnectionHandle>>(handle);
            client.session_extensions().insert(guard);
            finish_authentication(client, parameters).await?;
        }
        Ok(())
    }
}

struct Queries {
    engine: Arc<Engine>,
    gauges: Arc<Gauges>,
    limits: crate::subscribe::StreamLimits,
}

#[async_trait]
impl SimpleQueryHandler for Queries {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: std::fmt::Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let engine = self.engine.clone();
        let settings = settings_of(client);
        let statements = split_statements(query);
        if statements.iter().any(|s| crate::copy_in::parse_copy_from(s).is_some()) {
            let [statement] = statements.as_slice() else {
                return Err(user_error("0A000", "send COPY ... FROM STDIN as a query of its own".into()));
            };
            return start_copy_in(&engine, &settings, statement, false).map(|response| vec![response]);
        }
        if let Some(request) = statements.iter().find_map(|s| crate::consume::parse_copy_to(s)) {
            if statements.len() > 1 {
                return Err(user_error("0A000", "send COPY topic TO STDOUT as a query of its own".into()));
            }
            let request = request.map_err(|message| user_error("42601", message))?;
            return Ok(vec![crate::consume::stream(client, engine, request, self.limits).await?]);
        }
        if let Some(request) = statements.iter().find_map(|s| crate::subscribe::parse_copy_subscribe(s)) {
            if statements.len() > 1 {
                return Err(user_error("0A000", "send COPY (SUBSCRIBE ...) TO STDOUT as a query of its own".into()));
            }
            let request = request.map_err(|message| user_error("42601", message))?;
            let (waiter, waiting, view) = (engine.clone(), settings.clone(), request.view.clone());
            tokio::task::spawn_blocking(move || await_writes(&waiter, &waiting, &[view.as_str()]))
                .await
                .map_err(|e| PgWireError::ApiError(Box::new(e)))??;
            let _subscriber = Counted::new(&self.gauges.subscribers);
            let streamed = crate::subscribe::stream(client, engine, request, settings.wait_ms(), self.limits).await?;
            return Ok(vec![streamed]);
        }
        if let [statement] = statements.as_slice()
            && first_word(statement) == "FETCH"
        {
            // Alone, a FETCH waits as long as it is told (a cancel ends the wait).
            return Ok(vec![crate::cursor::fetch(&engine, &settings, statement, &Format::UnifiedText).await?]);
        }
        let query = query.to_owned();
        let _running = Running::start(&settings);
        let answering = settings.clone();
        let answered = tokio::task::spawn_blocking(move || answer(&engine, &answering, &query, &Format::UnifiedText))
            .await
            .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        send_notices(client, &settings).await?;
        answered
    }
}

/// Sends the notices the connection's last statements left (severity
/// NOTICE, SQLSTATE 00000), as PostgreSQL sends them before the statement
/// completes.
pub(crate) async fn send_notices<C>(client: &mut C, settings: &Settings) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin + Send,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let notices = std::mem::take(&mut *settings.notices.lock().unwrap_or_else(|e| e.into_inner()));
    for (notice, position) in notices {
        let mut info = pgwire::error::ErrorInfo::new("NOTICE".into(), "00000".into(), notice);
        info.position = position;
        client.send(PgWireBackendMessage::NoticeResponse(info.into())).await?;
    }
    Ok(())
}

/// The first word of a statement, upper-cased.
pub(crate) fn first_word(query: &str) -> String {
    query.split_whitespace().next().unwrap_or_default().trim_end_matches(';').to_ascii_uppercase()
}

/// Answers a simple query: its statements in order, runs of definition and
/// DML statements as one batch each (applied whole or not at all).
pub(crate) fn answer(
    engine: &Engine,
    settings: &Settings,
    query: &str,
    format: &Format,
) -> PgWireResult<Vec<Response>> {
    let mut responses = Vec::new();
    let mut batch: Vec<&str> = Vec::new();
    let flush = |batch: &mut Vec<&str>, responses: &mut Vec<Response>| -> PgWireResult<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let sql = batch.join(";\n");
        batch.clear();
        let (outcomes, writes) = engine.execute_tracked(&sql).map_err(|e| statement_error(&e, &sql))?;
        settings.wrote_since_begin.store(true, std::sync::atomic::Ordering::Relaxed);
        settings.wrote(writes);
        let notices = outcomes.iter().flat_map(|outcome| &outcome.notices);
        let notices = notices.map(|(location, message)| (message.clone(), position(&sql, location)));
        settings.notices.lock().unwrap_or_else(|e| e.into_inner()).extend(notices);
        responses.extend(outcomes.iter().map(|outcome| Response::Execution(command_tag(&outcome.tag))));
        Ok(())
    };
    for statement in split_statements(query) {
        if crate::consume::is_group_ack(statement) {
            flush(&mut batch, &mut responses)?;
            responses.push(crate::consume::ack(engine, statement)?);
            continue;
        }
        if crate::durable::is_subscription_statement(statement) {
            flush(&mut batch, &mut responses)?;
            responses.push(crate::durable::execute(engine, settings, statement)?);
            continue;
        }
        let response = match first_word(statement).as_str() {
            "BEGIN" | "START" => {
                flush(&mut batch, &mut responses)?;
                settings.wrote_since_begin.store(false, std::sync::atomic::Ordering::Relaxed);
                Response::TransactionStart(Tag::new("BEGIN"))
            }
            "COMMIT" | "END" => Response::TransactionEnd(Tag::new("COMMIT")),
            "ROLLBACK" | "ABORT" => {
                flush(&mut batch, &mut responses)?;
                // Nothing to undo is a rollback honoured; writes cannot be taken back.
                if settings.wrote_since_begin.load(std::sync::atomic::Ordering::Relaxed) {
                    return Err(user_error(
                        "0A000",
                        "not supported: ROLLBACK after a write (each statement took effect when it ran; nothing \
                         was rolled back)"
                            .into(),
                    ));
                }
                Response::TransactionEnd(Tag::new("ROLLBACK"))
            }
            "SET" => set(settings, statement)?,
            "DECLARE" => match crate::subscribe::parse_declare(statement) {
                Some(Ok((name, request))) => {
                    await_writes(engine, settings, &[request.view.as_str()])?;
                    crate::cursor::declare(engine, settings, name, request)?
                }
                Some(Err(message)) if message.starts_with("not supported") => return Err(user_error("0A000", message)),
                Some(Err(message)) => return Err(user_error("42601", message)),
                None => unreachable!("the statement starts with DECLARE"),
            },
            "FETCH" => crate::cursor::fetch_blocking(engine, settings, statement, format)?,
            "CLOSE" => crate::cursor::close(settings, statement)?,
            "SHOW" => show(engine, settings, statement)?,
            "SELECT" | "VALUES" | "WITH" => select(engine, settings, statement, format)?,
            _ => {
                batch.push(statement);
                continue;
            }
        };
        flush(&mut batch, &mut responses)?;
        responses.push(response);
    }
    flush(&mut batch, &mut responses)?;
    Ok(responses)
}

/// The `;`-separated statements of a query, without empty ones; a `;`
/// inside quotes or a comment separates nothing.
pub(crate) fn split_statements(query: &str) -> Vec<&str> {
    let bytes = query.as_bytes();
    let (mut statements, mut start, mut i) = (Vec::new(), 0, 0);
    while i < bytes.len() {
        if let Some(end) = cell::skip_quoted(bytes, i) {
            i = end;
            continue;
        }
        if bytes[i] == b';' {
            statements.push(&query[start..i]);
            start = i + 1;
        }
        i += 1;
    }
    statements.push(&query[start.min(query.len())..]);
    statements.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// `SHOW SOURCES|TABLES|VIEWS|MATERIALIZED VIEWS` (their names, sorted) and
/// `SHOW parameter` (the startup parameters).
pub(crate) fn show(engine: &Engine, settings: &Settings, statement: &str) -> PgWireResult<Response> {
    let words: Vec<String> = statement.split_whitespace().skip(1).map(str::to_ascii_lowercase).collect();
    let kind = match words.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["sources"] => Some("source"),
        ["tables"] => Some("table"),
        ["views"] => Some("view"),
        ["materialized", "views"] => Some("materialized view"),
        _ => None,
    };
    if words.first().map(String::as_str) == Some("create") {
        return show_create(engine, statement, &words[1..]);
    }
    if words == ["subscriptions"] {
        return crate::durable::execute(engine, settings, statement);
    }
    let (column, values): (&str, Vec<String>) = match (kind, words.as_slice()) {
        (Some(kind), _) => {
            ("name", engine.objects().into_iter().filter(|(_, k)| *k == kind).map(|(name, _)| name).collect())
        }
        (None, [parameter]) if parameter == "read_your_writes" => {
            let off = settings.read_your_writes_off.load(std::sync::atomic::Ordering::Relaxed);
            (parameter.as_str(), vec![if off { "off" } else { "on" }.to_owned()])
        }
        (None, [parameter]) if parameter == "statement_timeout" => {
            let ms = settings.statement_timeout_ms.load(std::sync::atomic::Ordering::Relaxed);
            (parameter.as_str(), vec![format!("{ms}ms")])
        }
        (None, [t, i, l]) if (t.as_str(), i.as_str(), l.as_str()) == ("transaction", "isolation", "level") => {
            ("transaction_isolation", vec![TRANSACTION_ISOLATION.to_owned()])
        }
        (None, [parameter]) if parameter == "transaction_isolation" => {
            (parameter.as_str(), vec![TRANSACTION_ISOLATION.to_owned()])
        }
        (None, [parameter]) => {
            let set = settings.others.lock().unwrap_or_else(|e| e.into_inner()).get(parameter.as_str()).cloned();
            match set.or_else(|| parameter_value(parameter)) {
                Some(value) => (parameter.as_str(), vec![value]),
                None => {
                    return Err(user_error("42704", format!("unrecognized configuration parameter \"{parameter}\"")));
                }
            }
        }
        _ => return Err(not_supported(statement)),
    };
    let schema = Arc::new(vec![FieldInfo::new(column.to_owned(), None, None, Type::TEXT, FieldFormat::Text)]);
    let mut rows = Vec::new();
    for value in values {
        let mut encoder = DataRowEncoder::new(schema.clone());
        encoder.encode_field(&value)?;
        rows.push(Ok(encoder.take_row()));
    }
    Ok(Response::Query(QueryResponse::new(schema, stream::iter(rows))))
}

/// `SHOW CREATE SOURCE|TABLE|VIEW|MATERIALIZED VIEW name`: one row, the
/// name and the statement that defines it (as the catalog keeps it).
fn show_create(engine: &Engine, statement: &str, words: &[String]) -> PgWireResult<Response> {
    let (kind, name) = match words.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["materialized", "view", name] => ("materialized view", name.to_string()),
        [kind @ ("source" | "table" | "view"), name] => (*kind, name.to_string()),
        _ => return Err(not_supported(statement)),
    };
    let name = name.trim_end_matches(';').trim_matches('"').to_owned();
    let definition = match engine.definition(&name) {
        Some((found, definition)) if found == kind => definition,
        Some((found, _)) => return Err(user_error("42809", format!("\"{name}\" is a {found}, not a {kind}"))),
        None => return Err(user_error("42P01", format!("there is no {kind} \"{name}\""))),
    };
    let schema = Arc::new(vec![
        FieldInfo::new("name".to_owned(), None, None, Type::TEXT, FieldFormat::Text),
        FieldInfo::new("create_sql".to_owned(), None, None, Type::TEXT, FieldFormat::Text),
    ]);
    let mut encoder = DataRowEncoder::new(schema.clone());
    encoder.encode_field(&name)?;
    encoder.encode_field(&definition)?;
    Ok(Response::Query(QueryResponse::new(schema, stream::iter(vec![Ok(encoder.take_row())]))))
}

/// What a transaction sees: each statement reads committed contents, and
/// each statement's writes take effect when it runs (no multi-statement
/// transactions), which is Postgres's READ COMMITTED in autocommit.
const TRANSACTION_ISOLATION: &str = "read committed";

/// The parameters the server reports at startup, as `pg_settings` names them.
const REPORTED_PARAMETERS: &[&str] = &[
    "server_version",
    "server_encoding",
    "client_encoding",
    "DateStyle",
    "TimeZone",
    "integer_datetimes",
    "standard_conforming_strings",
];

/// The value of a parameter the server reports (lower-case name).
fn parameter_value(name: &str) -> Option<String> {
    Some(
        match name {
            "server_version" => SERVER_VERSION,
            "server_encoding" | "client_encoding" => "UTF8",
            "datestyle" => "ISO, MDY",
            "timezone" => "UTC",
            "integer_datetimes" | "standard_conforming_strings" => "on",
            _ => return None,
        }
        .to_owned(),
    )
}

/// A one-off `SELECT` (or `VALUES`, `WITH`): answered by the interpreter
/// over the views' last committed epochs and the tables' last committed
/// batches (`millpond_sql::Query`), in text format.
fn select(engine: &Engine, settings: &Settings, query: &str, format: &Format) -> PgWireResult<Response> {
    let started = std::time::Instant::now();
    let wait_ms = settings.wait_ms();
    let bound = engine.query(query, &settings.system_context()).map_err(|e| statement_error(&e, query))?;
    await_writes(engine, settings, &bound.views().collect::<Vec<_>>())?;
    let views: Vec<&str> = bound.views().collect();
    let snapshots = consistent_rows(engine, &views, wait_ms)?;
    // The statement timeout cuts a one-off query while it computes, as a cancel does.
    let deadline = settings.statement_timeout_ms().map(|ms| started + std::time::Duration::from_millis(ms));
    let stop = || {
        settings.interrupted.load(std::sync::atomic::Ordering::Relaxed)
            || deadline.is_some_and(|d| std::time::Instant::now() >= d)
    };
    let answer = bound.run_until(&snapshots, &stop).map_err(|e| match e {
        e @ millpond_sql::Error::Sql { .. } => statement_error(&crate::Error::Sql(e), query),
        other => user_error("XX000", format!("answering the query: {other}")),
    })?;
    let schema = Arc::new(fields(&bound.columns, Some(format)));
    let rows: Vec<_> =
        answer.iter().map(|row| Ok(cell::data_row(row, &bound.columns, |i| format.is_binary(i)))).collect();
    Ok(Response::Query(QueryResponse::new(schema, stream::iter(rows))))
}

/// The row description of `columns`, each in its format (text when none is asked).
pub(crate) fn fields(columns: &[(String, millpond_sql::Type)], format: Option<&Format>) -> Vec<FieldInfo> {
    let format_of = |i| format.map_or(FieldFormat::Text, |f| f.format_for(i));
    columns
        .iter()
        .enumerate()
        .map(|(i, (name, ty))| FieldInfo::new(name.clone(), None, None, cell::pg_type(ty), format_of(i)))
        .collect()
}

/// Read-your-writes: waits until every view of `views` has committed an
/// epoch that covers this connection's writes, up to the statement timeout
/// (then 57014). `SET read_your_writes = off` reads without waiting.
pub(crate) fn await_writes(engine: &Engine, settings: &Settings, views: &[&str]) -> PgWireResult<()> {
    if settings.read_your_writes_off.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    // Only views the catalog has are waited for: an unknown name is the
    // statement's own error (42P01) at once, and `SUBSCRIBE TO SUBSCRIPTION
    // name` names no view here (the durable subscription's is resolved
    // later), so it does not wait.
    let views: Vec<&str> = views.iter().copied().filter(|view| engine.definition(view).is_some()).collect();
    let written = settings.written.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let reads = engine.topics_read(&views);
    let wait_ms = settings.wait_ms();
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(wait_ms);
    loop {
        match engine.covers(&reads, &written) {
            Ok(true) => return Ok(()),
            Ok(false) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(VIEW_READY_POLL_MS));
            }
            Ok(false) => {
                return Err(user_error(
                    "57014",
                    format!(
                        "the views read ({}) have not caught up with this connection's writes within {wait_ms} ms \
                         (SET read_your_writes = off reads without waiting)",
                        views.join(", ")
                    ),
                ));
            }
            Err(e) => return Err(user_error("XX000", format!("reading the committed checkpoint: {e}"))),
        }
    }
}

/// The rows of every view in `views`, all as of one committed epoch (every
/// view commits in the same checkpoint), through the engine's cache of
/// view rows (`view_cache`): a query reads what committed since the last.
/// A view in the catalog that the runtime has not committed yet (just
/// created) is waited for, up to `wait_ms` (then 57014, as a statement
/// timeout).
fn consistent_rows(
    engine: &Engine,
    views: &[&str],
    wait_ms: u64,
) -> PgWireResult<std::collections::BTreeMap<String, Arc<millpond_dataflow::RawSnapshot>>> {
    use crate::view_cache::ReadError;
    engine.view_cache.rows(engine.data_dir(), views, wait_ms).map_err(|error| match error {
        ReadError::NotCommitted(view) => {
            user_error("57014", format!("view \"{view}\" has not committed its first epoch within {wait_ms} ms"))
        }
        ReadError::Inconsistent(epochs) => {
            user_error("40001", format!("could not read the views at one epoch ({epochs}); run the query again"))
        }
        ReadError::Failed(view, e) => user_error("XX000", format!("reading view \"{view}\": {e}")),
    })
}

/// A JSON value of a view row in Postgres's text format (None: NULL).
fn text_of(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::Null => None,
        serde_json::Value::Bool(b) => Some(if *b { "t" } else { "f" }.to_owned()),
        serde_json::Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// [`text_of`] for a column of type `ty`: a decimal at the column's scale
/// (`2.50` in a `DECIMAL(10, 2)`), as Postgres prints it.
pub(crate) fn text_of_as(value: &serde_json::Value, ty: &millpond_sql::Type) -> Option<String> {
    let text = text_of(value)?;
    match ty {
        millpond_sql::Type::Decimal { scale, .. } => {
            Some(millpond_sql::decimal_text_at_scale(&text, *scale).into_owned())
        }
        _ => Some(text),
    }
}

/// Our outcome tag as Postgres's command tag: `INSERT 2` is `INSERT 0 2`,
/// `CREATE TABLE t` is `CREATE TABLE`.
fn command_tag(tag: &str) -> Tag {
    let words: Vec<&str> = tag.split_whitespace().collect();
    let count = words.get(1).and_then(|n| n.parse::<usize>().ok());
    match (words.first().copied(), count) {
        (Some("INSERT"), Some(n)) => Tag::new("INSERT").with_oid(0).with_rows(n),
        // CREATE TABLE ... AS reports the rows it stored, as Postgres does.
        (Some(verb @ ("UPDATE" | "DELETE" | "SELECT")), Some(n)) => Tag::new(verb).with_rows(n),
        (Some(verb @ ("INSERT" | "UPDATE" | "DELETE")), None) => Tag::new(verb).with_rows(0),
        _ => {
            let kind: Vec<&str> =
                words.iter().take_while(|w| w.chars().all(|c| c.is_ascii_uppercase())).copied().collect();
            Tag::new(&kind.join(" "))
        }
    }
}

pub(crate) fn user_error(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("ERROR".into(), code.into(), message)))
}

fn not_supported(query: &str) -> PgWireError {
    let head: String = query.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
    user_error("0A000", format!("not supported over the wire: \"{head} ...\" (docs/server.md lists what is)"))
}

/// A statement's error with its SQLSTATE, and the position for SQL errors.
/// Where `location` is in `query`, as Postgres counts it: characters
/// from 1 (none when the location is unknown).
fn position(query: &str, location: &millpond_sql::Location) -> Option<String> {
    if location.line == 0 {
        return None;
    }
    let before: usize = query.split_inclusive('\n').take(location.line as usize - 1).map(|l| l.chars().count()).sum();
    Some((before + location.column as usize).to_string())
}

pub(crate) fn statement_error(error: &Error, query: &str) -> PgWireError {
    let Error::Sql(millpond_sql::Error::Sql { location, message }) = error else {
        return user_error("XX000", error.to_string());
    };
    let code = if message.starts_with("there is no parameter") {
        "42P02"
    } else if message.starts_with("more than one row returned by a subquery") {
        "21000"
    } else if message.starts_with("canceling statement") {
        "57014"
    } else if message.starts_with("program limit exceeded") {
        "54000"
    } else if message.starts_with("unknown relation") {
        "42P01"
    } else if message.starts_with("not supported") {
        "0A000"
    } else if message.starts_with("unknown source, table or view") || message.starts_with("there is no") {
        "42P01"
    } else if message.starts_with("unknown column") {
        "42703"
    } else if message.contains("but the query's") {
        // INSERT ... SELECT of a value whose type the column cannot take.
        "42804"
    } else {
        "42601"
    };
    let mut info = ErrorInfo::new("ERROR".into(), code.into(), message.clone());
    info.position = position(query, location);
    PgWireError::UserError(Box::new(info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_tags_become_postgres_command_tags() {
        let render = |tag: &str| {
            let tag = command_tag(tag);
            format!("{tag:?}")
        };
        assert!(render("INSERT 2").contains("INSERT") && render("INSERT 2").contains('2'));
        assert!(render("CREATE TABLE item").contains("CREATE TABLE") && !render("CREATE TABLE item").contains("item"));
        assert!(render("CREATE MATERIALIZED VIEW v").contains("CREATE MATERIALIZED VIEW"));
    }

    #[test]
    fn a_query_splits_at_semicolons_outside_quotes_and_comments() {
        let query = "BEGIN; INSERT INTO t VALUES ('a;b', \"c;\"); -- x;y\n/* ; */ COMMIT;;";
        let statements: Vec<&str> = split_statements(query).into_iter().map(str::trim).collect();
        assert_eq!(statements, ["BEGIN", "INSERT INTO t VALUES ('a;b', \"c;\")", "-- x;y\n/* ; */ COMMIT"]);
        assert!(split_statements(" ; ;").is_empty());
        assert_eq!(split_statements("SELECT 'unterminated;"), ["SELECT 'unterminated;"]);
    }

    #[test]
    fn an_error_response_is_a_well_formed_message() {
        let bytes = error_response("FATAL", "53300", "too many connections");
        assert_eq!(bytes[0], b'E');
        let length = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
        assert_eq!(length + 1, bytes.len());
        assert_eq!(*bytes.last().unwrap(), 0);
        assert!(bytes.windows(6).any(|w| w == b"C53300"));
    }
}
