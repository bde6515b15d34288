//! The Kafka wire protocol over the server's log (`millpond serve
//! --kafka-listen`): unmodified Kafka clients produce to and fetch from the
//! same topics the runtime reads and writes, and read views' changelogs.
//!
//! Module map: `frame` (size-prefixed frames, request and response
//! headers), `versions` (what is advertised, ApiVersions), `metadata`,
//! `produce`, `fetch`, `list_offsets` (one module per API), `send`
//! (response frames to the socket, stored batches with `sendfile`), `producers`
//! (idempotent producers: ids, sequence checks), `transactions` (the
//! transaction coordinator), `txn_apis` (the transaction APIs), `groups` (the group
//! coordinator's state machine), `admin` (CreateTopics, DeleteTopics,
//! DescribeConfigs), `alter` (CreatePartitions, IncrementalAlterConfigs), `group_apis` (the consumer-group APIs and
//! committed offsets), `errors`
//! (Kafka's error codes for the log's errors). The wire surface, its
//! limits and invariants are in docs/kafka-wire.md.
//!
//! Invariants: a connection's requests are answered one at a time in the
//! order they came (Kafka's ordering guarantee per connection); a frame
//! larger than [`KafkaConfig::request_bytes_max`], shorter than a header,
//! with an unknown API key, a version this endpoint does not advertise (but
//! for ApiVersions, answered UNSUPPORTED_VERSION) or a body that does not
//! decode closes its connection with nothing written for it and nothing
//! else disturbed; no request allocates for a count read off the wire
//! before the count is checked against the frame
//! (vendor/kafka-protocol/README.millpond.md).

mod admin;
mod alter;
mod errors;
mod fetch;
mod frame;
mod group_apis;
mod groups;
mod list_offsets;
mod metadata;
mod produce;
mod producers;
mod sasl;
mod send;
mod transactions;
mod txn_apis;
mod versions;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::engine::Engine;
use crate::error::{Error, Result};

pub use groups::INITIAL_REBALANCE_DELAY_MS;
pub use millpond_kafka_frame::REQUEST_BYTES_MAX_DEFAULT;

/// Kafka's `connections.max.idle.ms` default: 10 minutes.
pub(crate) const IDLE_MS_DEFAULT: u64 = 600_000;
/// How long the rest of a started request frame may take by default.
pub(crate) const FRAME_TIMEOUT_MS_DEFAULT: u64 = 30_000;

/// Client socket buffers by default: Kafka's `socket.send.buffer.bytes`
/// and `socket.receive.buffer.bytes` (100 KiB).
pub const SOCKET_BUFFER_BYTES_DEFAULT: usize = 102_400;

/// Connections served at once by default (more are closed as they come).
pub const KAFKA_CONNECTIONS_MAX_DEFAULT: usize = 1024;

/// The Kafka endpoint's settings.
#[derive(Clone, Debug)]
pub struct KafkaConfig {
    pub listen: SocketAddr,
    /// The address clients are told to connect to (Metadata's broker); the
    /// bound address when `None`.
    pub advertised: Option<SocketAddr>,
    /// The largest request frame read; a larger one closes its connection.
    pub request_bytes_max: usize,
    pub connections_max: usize,
    /// How long a connection may stay without starting a request before it
    /// is closed (Kafka's `connections.max.idle.ms`).
    pub idle_ms: u64,
    /// How long the rest of a started frame may take to arrive before its
    /// connection is closed (a client that stalls mid-frame holds nothing long).
    pub frame_timeout_ms: u64,
    /// With a password, clients authenticate with SASL/PLAIN (any user name)
    /// before any request but ApiVersions and SaslHandshake is answered.
    pub password: Option<String>,
    /// Partitions of a topic created because a client asked Metadata for it
    /// (Kafka's `auto.create.topics.enable` and `num.partitions`); `None`:
    /// unknown topics stay unknown.
    pub auto_create_partitions: Option<u32>,
    /// SO_SNDBUF of client sockets (Kafka's `socket.send.buffer.bytes`);
    /// `None`: the OS's autotuning. A small buffer keeps a large Fetch
    /// answer moving in cache-sized steps (2 x the raw fetch rate of the
    /// autotuned one on loopback, docs/performance.md).
    pub socket_send_buffer_bytes: Option<usize>,
    /// SO_RCVBUF of client sockets (Kafka's `socket.receive.buffer.bytes`).
    pub socket_receive_buffer_bytes: Option<usize>,
    /// How long the first join into an empty group waits for more members
    /// before the first generation (Kafka's `group.initial.rebalance.delay.ms`).
    pub group_initial_rebalance_delay_ms: u64,
    /// Fetch sends stored batches from their segment files with `sendfile`
    /// (true, the default) or reads them and writes the bytes (false: the
    /// buffered path, for comparison).
    pub fetch_zero_copy: bool,
}

impl KafkaConfig {
    pub fn new(listen: SocketAddr) -> KafkaConfig {
        KafkaConfig {
            listen,
            advertised: None,
            request_bytes_max: REQUEST_BYTES_MAX_DEFAULT,
            connections_max: KAFKA_CONNECTIONS_MAX_DEFAULT,
            idle_ms: IDLE_MS_DEFAULT,
            frame_timeout_ms: FRAME_TIMEOUT_MS_DEFAULT,
            auto_create_partitions: Some(1),
            password: None,
            fetch_zero_copy: true,
            group_initial_rebalance_delay_ms: groups::INITIAL_REBALANCE_DELAY_MS,
            socket_send_buffer_bytes: Some(SOCKET_BUFFER_BYTES_DEFAULT),
            socket_receive_buffer_bytes: Some(SOCKET_BUFFER_BYTES_DEFAULT),
        }
    }
}

/// What every request handler reads: the engine and the endpoint's settings.
#[derive(Debug)]
pub(crate) struct Broker {
    pub(crate) engine: Arc<Engine>,
    pub(crate) config: KafkaConfig,
    /// The address Metadata advertises.
    pub(crate) advertised: SocketAddr,
    /// Idempotent producers' ids and sequence state.
    pub(crate) producers: producers::Producers,
    /// Consumer groups' members and generations.
    pub(crate) groups: groups::Groups,
    /// Transactional ids' producers and transactions.
    pub(crate) transactions: transactions::Coordinator,
}

/// How often group sessions and rebalance deadlines are looked at.
const GROUP_TICK_MS: u64 = 50;

/// The one broker's node id.
pub(crate) const NODE_ID: i32 = 0;

/// A running Kafka endpoint; stopped when dropped.
#[derive(Debug)]
pub struct KafkaEndpoint {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl KafkaEndpoint {
    /// Binds `config.listen` and serves Kafka clients on a thread of its own.
    pub fn start(engine: Arc<Engine>, config: KafkaConfig) -> Result<KafkaEndpoint> {
        let listen = config.listen;
        let io = |action: &'static str| move |source| Error::Io { action, path: listen.to_string(), source };
        let listener = std::net::TcpListener::bind(listen).map_err(io("binding"))?;
        listener.set_nonblocking(true).map_err(io("configuring"))?;
        let addr = listener.local_addr().map_err(io("reading the address of"))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("millpond-kafka")
            .enable_all()
            .build()
            .map_err(io("starting the threads of"))?;
        let producers = producers::Producers::new(engine.data_dir());
        let groups = groups::Groups::new(config.group_initial_rebalance_delay_ms);
        // Transactions a stop left open or half-ended are finished before any client connects.
        let transactions = transactions::Coordinator::recover(&engine).map_err(|e| Error::Io {
            action: "recovering Kafka transactions of",
            path: listen.to_string(),
            source: std::io::Error::other(e.message),
        })?;
        let advertised = config.advertised.unwrap_or(addr);
        let broker = Arc::new(Broker { engine, advertised, config, producers, groups, transactions });
        let connections = Arc::new(AtomicUsize::new(0));
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let counter = connections.clone();
        let thread = std::thread::Builder::new()
            .name("millpond-kafka-accept".into())
            .spawn(move || runtime.block_on(accept(listener, broker, counter, stopped)))
            .map_err(io("spawning the accept thread of"))?;
        Ok(KafkaEndpoint { addr, connections, shutdown: Some(shutdown), thread: Some(thread) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections being served now.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }
}

impl Drop for KafkaEndpoint {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept(
    listener: std::net::TcpListener,
    broker: Arc<Broker>,
    connections: Arc<AtomicUsize>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
    let ticking = broker.clone();
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(std::time::Duration::from_millis(GROUP_TICK_MS));
        loop {
            interval.tick().await;
            ticking.groups.tick(std::time::Instant::now());
            let expiring = ticking.clone();
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            let _ = tokio::task::spawn_blocking(move || expiring.transactions.expire(&expiring.engine, now_ms)).await;
        }
    });
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = &mut stopped => return,
        };
        let Ok((socket, peer)) = accepted else { continue };
        if connections.fetch_add(1, Ordering::AcqRel) >= broker.config.connections_max {
            connections.fetch_sub(1, Ordering::AcqRel);
            drop(socket);
            continue;
        }
        configure(&socket, &broker.config);
        let (broker, connections) = (broker.clone(), connections.clone());
        tokio::spawn(async move {
            serve(socket, peer, &broker).await;
            connections.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

/// A client socket as Kafka's broker sets one: no Nagle delay, and the
/// configured socket buffers (the OS's autotuning where none is set).
fn configure(socket: &TcpStream, config: &KafkaConfig) {
    use rustix::net::sockopt;
    let _ = socket.set_nodelay(true);
    if let Some(bytes) = config.socket_send_buffer_bytes {
        let _ = sockopt::set_socket_send_buffer_size(socket, bytes);
    }
    if let Some(bytes) = config.socket_receive_buffer_bytes {
        let _ = sockopt::set_socket_recv_buffer_size(socket, bytes);
    }
}

/// Answers one connection's requests in order until it closes or sends a
/// frame that cannot be served.
async fn serve(socket: TcpStream, peer: SocketAddr, broker: &Arc<Broker>) {
    let (reader, mut writer) = socket.into_split();
    let mut reader = BufReader::new(reader);
    let (mut out, mut scratch) = (frame::Outgoing::default(), Vec::new());
    let zero_copy = broker.config.fetch_zero_copy;
    let mut authenticated = broker.config.password.is_none();
    loop {
        let limits = frame::ReadLimits {
            max_bytes: broker.config.request_bytes_max,
            idle: std::time::Duration::from_millis(broker.config.idle_ms),
            rest: std::time::Duration::from_millis(broker.config.frame_timeout_ms),
        };
        let request = match frame::read_request(&mut reader, limits).await {
            Ok(Some(request)) => request,
            Ok(None) | Err(_) => return,
        };
        out.clear();
        if !authenticated {
            match authenticate(broker, &request, &mut out) {
                Ok(done) => {
                    authenticated = done == Some(true);
                    if writer.write_all(&out.bytes).await.is_err() || done == Some(false) {
                        return;
                    }
                    continue;
                }
                Err(_) => return,
            }
        }
        match answer(broker, request, peer, &mut out).await {
            Ok(true) => {
                if send::send(&mut writer, &out, zero_copy, &mut scratch).await.is_err() {
                    return;
                }
            }
            Ok(false) => {}
            Err(_) => return,
        }
    }
}

/// A request before the connection authenticated: ApiVersions and
/// SaslHandshake answered (`None`), SaslAuthenticate answered with whether
/// the password matched; anything else an error (the connection closes).
fn authenticate(
    broker: &Broker,
    request: &frame::Request,
    out: &mut frame::Outgoing,
) -> std::result::Result<Option<bool>, frame::FrameError> {
    use kafka_protocol::messages::ApiKey;
    let password = broker.config.password.as_deref();
    let version = request.version();
    if !versions::advertised(request.api_key, version) && request.api_key != ApiKey::ApiVersions {
        return Err(frame::FrameError::Unsupported { api_key: request.header.request_api_key, version });
    }
    let (body, done) = match request.api_key {
        ApiKey::ApiVersions => (versions::answer(request)?, None),
        ApiKey::SaslHandshake => (sasl::handshake(password, &request.decode()?, version)?, None),
        ApiKey::SaslAuthenticate => {
            let (body, matched) = sasl::authenticate(password, &request.decode()?, version)?;
            (body, Some(matched))
        }
        other => return Err(frame::FrameError::Unsupported { api_key: other as i16, version }),
    };
    frame::write_response(out, &request.header, body)?;
    Ok(done)
}

/// Handles one request, writing its response frame into `out`; false: the
/// request takes no response (a Produce with acks=0).
async fn answer(
    broker: &Arc<Broker>,
    request: frame::Request,
    peer: SocketAddr,
    out: &mut frame::Outgoing,
) -> std::result::Result<bool, frame::FrameError> {
    use kafka_protocol::messages::ApiKey;
    let header = request.header.clone();
    if request.api_key != ApiKey::ApiVersions && !versions::advertised(request.api_key, request.version()) {
        return Err(frame::FrameError::Unsupported {
            api_key: header.request_api_key,
            version: header.request_api_version,
        });
    }
    let broker = broker.clone();
    let version = request.version();
    let response = match request.api_key {
        ApiKey::ApiVersions => versions::answer(&request)?,
        ApiKey::Metadata => {
            let body = request.decode()?;
            tokio::task::spawn_blocking(move || metadata::answer(&broker, body, version))
                .await
                .map_err(frame::join)??
        }
        ApiKey::Produce => {
            let body = request.decode()?;
            let answered = tokio::task::spawn_blocking(move || produce::answer(&broker, body, version)).await;
            match answered.map_err(frame::join)?? {
                Some(response) => response,
                None => return Ok(false),
            }
        }
        ApiKey::Fetch => fetch::answer(broker, request.decode()?, version).await?,
        ApiKey::ListOffsets => {
            let body = request.decode()?;
            tokio::task::spawn_blocking(move || list_offsets::answer(&broker, body, version))
                .await
                .map_err(frame::join)??
        }
        ApiKey::InitProducerId => {
            let body = request.decode()?;
            let answered = tokio::task::spawn_blocking(move || txn_apis::init_producer_id(&broker, &body, version));
            answered.await.map_err(frame::join)??
        }
        ApiKey::AddPartitionsToTxn => {
            let body = request.decode()?;
            let answered =
                tokio::task::spawn_blocking(move || txn_apis::add_partitions_to_txn(&broker, &body, version));
            answered.await.map_err(frame::join)??
        }
        ApiKey::AddOffsetsToTxn => {
            let body = request.decode()?;
            let answered = tokio::task::spawn_blocking(move || txn_apis::add_offsets_to_txn(&broker, &body, version));
            answered.await.map_err(frame::join)??
        }
        ApiKey::TxnOffsetCommit => {
            let body = request.decode()?;
            let answered = tokio::task::spawn_blocking(move || txn_apis::txn_offset_commit(&broker, &body, version));
            answered.await.map_err(frame::join)??
        }
        ApiKey::EndTxn => {
            let body = request.decode()?;
            let answered = tokio::task::spawn_blocking(move || txn_apis::end_txn(&broker, &body, version));
            answered.await.map_err(frame::join)??
        }
        ApiKey::CreatePartitions => {
            let body = request.decode()?;
            let answered = tokio::task::spawn_blocking(move || alter::create_partitions(&broker, &body, version));
            answered.await.map_err(frame::join)??
        }
        ApiKey::IncrementalAlterConfigs => {
            let body = request.decode()?;
            let answered =
                tokio::task::spawn_blocking(move || alter::incremental_alter_configs(&broker, &body, version));
            answered.await.map_err(frame::join)??
        }
        ApiKey::CreateTopics | ApiKey::DeleteTopics | ApiKey::DescribeConfigs => {
            let api_key = request.api_key;
            let answered = match api_key {
                ApiKey::CreateTopics => {
                    let body = request.decode()?;
                    tokio::task::spawn_blocking(move || admin::create_topics(&broker, &body, version)).await
                }
                ApiKey::DeleteTopics => {
                    let body = request.decode()?;
                    tokio::task::spawn_blocking(move || admin::delete_topics(&broker, &body, version)).await
                }
                _ => {
                    let body = request.decode()?;
                    tokio::task::spawn_blocking(move || admin::describe_configs(&broker, &body, version)).await
                }
            };
            answered.map_err(frame::join)??
        }
        ApiKey::SaslHandshake => sasl::handshake(broker.config.password.as_deref(), &request.decode()?, version)?,
        // Authenticated already: a second authentication is not a state SASL has.
        ApiKey::SaslAuthenticate => {
            return Err(frame::FrameError::Unsupported { api_key: header.request_api_key, version });
        }
        ApiKey::FindCoordinator => group_apis::find_coordinator(&broker, &request.decode()?, version)?,
        ApiKey::JoinGroup => {
            let client_id = header.client_id.as_ref().map_or_else(String::new, |c| c.to_string());
            group_apis::join_group(broker, request.decode()?, client_id, format!("/{}", peer.ip()), version).await?
        }
        ApiKey::SyncGroup => group_apis::sync_group(broker, request.decode()?, version).await?,
        ApiKey::Heartbeat => group_apis::heartbeat(&broker, &request.decode()?, version)?,
        ApiKey::LeaveGroup => group_apis::leave_group(&broker, &request.decode()?, version)?,
        ApiKey::OffsetCommit => {
            let body = request.decode()?;
            let answered = tokio::task::spawn_blocking(move || group_apis::offset_commit(&broker, &body, version));
            answered.await.map_err(frame::join)??
        }
        ApiKey::OffsetFetch => group_apis::offset_fetch(&broker, &request.decode()?, version)?,
        ApiKey::DescribeGroups => group_apis::describe_groups(&broker, &request.decode()?, version)?,
        ApiKey::ListGroups => group_apis::list_groups(&broker, &request.decode()?, version)?,
        other => {
            return Err(frame::FrameError::Unsupported { api_key: other as i16, version: header.request_api_version });
        }
    };
    frame::write_response(out, &header, response)?;
    Ok(true)
}
