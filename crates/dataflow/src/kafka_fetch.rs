//! The Kafka source's own fetch path: Fetch requests to each partition's
//! leader, answered with whole record batches that the source's decoders
//! read in place ([`Chunk`]), as they read the embedded log's.
//!
//! librdkafka hands out one message at a time, each an op its fetch thread
//! allocates and the reader frees, under a lock per message: with the
//! JSON decode behind it, that held the source to about 0.7 x the
//! embedded log's rate (docs/performance.md, issue 13). Kafka's record
//! batches are the embedded log's format, so this path sends Fetch
//! (read_committed, versions 4-12, no fetch session) over plain TCP on
//! the worker's own thread: non-blocking sockets, one request in flight
//! per broker, the next one sent as soon as a response arrives and before
//! it is read, so the broker prepares it while the worker decodes. The
//! bytes arrive in the worker's cache, as a log read's do.
//!
//! Leaders and broker addresses come from the source's metadata lookups
//! ([`Fetcher::set_leaders`]); a lost connection, a leadership error or a
//! broker that does not answer asks for a lookup ([`Fetcher::wants_metadata`])
//! and is retried after [`RETRY_BACKOFF_MS`]. Only `security.protocol`
//! PLAINTEXT is spoken here; the source reads through librdkafka otherwise.
//!
//! Invariants: a partition has at most one request in flight and at most
//! [`CHUNKS_PER_PARTITION_MAX`] chunks waiting; a response is matched to
//! its request by correlation id, and a partition's data is used only if
//! it answers the partition's current generation (a seek starts a new one)
//! at the offset asked; chunks of a partition are handed out in offset
//! order, each starting at or below the offset after the one before.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, FetchRequest, FetchResponse, MetadataRequest,
    RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::net::{AddressFamily, SocketFlags, SocketType};

use crate::kafka_chunk::{Aborted, Chunk};

/// The Fetch versions spoken: 4 (read_committed, aborted transactions) to
/// 12 (the last that names topics rather than topic ids).
const FETCH_VERSIONS: std::ops::RangeInclusive<i16> = 4..=12;
/// Bytes one partition may return per Fetch (Kafka returns at least one
/// whole batch even when it is larger).
pub(crate) const PARTITION_FETCH_BYTES: i32 = 4 << 20;
/// Bytes one Fetch response may hold in all.
const FETCH_BYTES_MAX: i32 = 64 << 20;
/// The largest response frame read: the fetch limit, one batch over it
/// (the first batch of a partition is returned whole), and headers.
const RESPONSE_BYTES_MAX: usize = FETCH_BYTES_MAX as usize + millpond_log::batch::BATCH_BYTES_LIMIT + (1 << 20);
/// How long a broker holds a Fetch that finds nothing (Kafka's long poll).
const FETCH_WAIT_MS: i32 = 100;
/// Connecting and the version handshake, at most (the topic-id lookup
/// waits this long per step; the fetch path never waits).
const CONNECT_TIMEOUT_MS: u64 = 2_000;
/// A request whose answer has not moved for this long is given up (the
/// connection is closed).
const REQUEST_TIMEOUT_MS: u64 = 30_000;
/// The wait before a failed broker or partition is tried again.
pub(crate) const RETRY_BACKOFF_MS: u64 = 500;
/// Chunks of one partition received and not yet read, at most.
const CHUNKS_PER_PARTITION_MAX: usize = 2;

/// What went wrong in a way a retry does not mend.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error("broker {broker} ({address}): {message}")]
    Broker { broker: i32, address: String, message: String },
    #[error("partition {partition}: Kafka error {code} ({name})")]
    Partition { partition: u32, code: i16, name: String },
}

/// A broker of the cluster, as metadata names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BrokerAddress {
    pub id: i32,
    pub address: String,
}

/// The client of one topic's partitions.
pub(crate) struct Fetcher {
    topic: TopicName,
    client_id: StrBytes,
    partitions: BTreeMap<u32, PartitionFetch>,
    brokers: HashMap<i32, Broker>,
    /// Received, in arrival order (per partition: offset order).
    chunks: VecDeque<Chunk>,
    /// Partitions whose offset the broker does not have.
    out_of_range: Vec<u32>,
    metadata_wanted: bool,
    /// Fetch requests sent (for the partitions' turns).
    requests: usize,
}

struct PartitionFetch {
    leader: Option<i32>,
    /// The offset the next request asks for.
    offset: u64,
    generation: u64,
    /// The last stable offset the last response gave (read_committed's end).
    end: Option<u64>,
    in_flight: bool,
    chunks: usize,
    retry_at: Option<Instant>,
    /// Its last answer was cut short: it is asked first next time.
    cut: bool,
}

struct Broker {
    address: String,
    connection: Option<Connection>,
    retry_at: Option<Instant>,
    /// Connections lost (which of the address's resolutions is tried next).
    attempts: usize,
}

struct Connection {
    stream: TcpStream,
    /// The connect finished (it is started without waiting).
    connected: bool,
    /// Agreed by ApiVersions (the first request); `None` until answered.
    fetch_version: Option<i16>,
    correlation_id: i32,
    /// Bytes of requests not yet written.
    outbox: Vec<u8>,
    inbox: Inbox,
    in_flight: Option<InFlight>,
}

/// The request a connection waits on.
struct InFlight {
    correlation_id: i32,
    /// When it was sent, or last had bytes of its answer arrive.
    heard_at: Instant,
    /// Each partition asked, with its generation and offset then.
    asked: Vec<(u32, u64, u64)>,
}

/// A response frame being read: its size, then its body.
#[derive(Default)]
struct Inbox {
    size: [u8; 4],
    size_read: usize,
    body: Vec<u8>,
    body_read: usize,
}

impl Fetcher {
    pub(crate) fn new(topic: &str, client_id: &str) -> Fetcher {
        Fetcher {
            topic: TopicName(StrBytes::from_string(topic.to_owned())),
            client_id: StrBytes::from_string(client_id.to_owned()),
            partitions: BTreeMap::new(),
            brokers: HashMap::new(),
            chunks: VecDeque::new(),
            out_of_range: Vec::new(),
            metadata_wanted: false,
            requests: 0,
        }
    }

    /// The brokers and each partition's leader (`None`: none now), from a
    /// metadata lookup. A broker whose address changed is reconnected.
    pub(crate) fn set_leaders(&mut self, brokers: &[BrokerAddress], leaders: &[(u32, Option<i32>)]) {
        for broker in brokers {
            let known = self.brokers.entry(broker.id).or_insert_with(|| Broker {
                address: broker.address.clone(),
                connection: None,
                retry_at: None,
                attempts: 0,
            });
            if known.address != broker.address {
                known.address = broker.address.clone();
                self.drop_connection(broker.id);
            }
        }
        for (partition, leader) in leaders {
            if let Some(fetch) = self.partitions.get_mut(partition) {
                fetch.leader = leader.filter(|id| self.brokers.contains_key(id));
            }
        }
        self.metadata_wanted = self.partitions.values().any(|p| p.leader.is_none());
    }

    /// Reads `partition` from `offset` on, dropping what was fetched of it
    /// before (a new generation: answers to older requests are ignored).
    pub(crate) fn seek(&mut self, partition: u32, offset: u64) {
        let fetch = self.partitions.entry(partition).or_insert(PartitionFetch {
            leader: None,
            offset,
            generation: 0,
            end: None,
            in_flight: false,
            chunks: 0,
            retry_at: None,
            cut: false,
        });
        fetch.offset = offset;
        fetch.generation += 1;
        fetch.end = None;
        fetch.chunks = 0;
        self.chunks.retain(|chunk| chunk.partition != partition);
        self.metadata_wanted |= fetch.leader.is_none();
    }

    /// Whether a metadata lookup would help (a leader unknown or lost).
    pub(crate) fn wants_metadata(&self) -> bool {
        self.metadata_wanted
    }

    /// The partitions found out of range since the last call.
    pub(crate) fn take_out_of_range(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.out_of_range)
    }

    /// Where `partition`'s committed data ends, as the last response said.
    pub(crate) fn end(&self, partition: u32) -> Option<u64> {
        self.partitions.get(&partition).and_then(|p| p.end)
    }

    /// The next chunk to read, if any.
    pub(crate) fn front(&mut self) -> Option<&mut Chunk> {
        self.chunks.front_mut()
    }

    /// Drops the front chunk (read to its end).
    pub(crate) fn pop_front(&mut self) {
        if let Some(chunk) = self.chunks.pop_front()
            && let Some(fetch) = self.partitions.get_mut(&chunk.partition)
            && fetch.generation == chunk.generation
        {
            assert!(fetch.chunks > 0, "a waiting chunk is counted");
            fetch.chunks -= 1;
        }
    }

    /// Waits up to `timeout` for a response that has begun to arrive to
    /// arrive whole, when nothing is left to read: the worker would
    /// otherwise sleep a poll interval while the broker is mid-answer.
    pub(crate) fn wait_for_response(&mut self, timeout: Duration) -> Result<(), FetchError> {
        let deadline = Instant::now() + timeout;
        while self.chunks.is_empty() {
            let arriving: Vec<i32> = self
                .brokers
                .iter()
                .filter(|(_, b)| b.connection.as_ref().is_some_and(|c| c.inbox.size_read > 0))
                .map(|(id, _)| *id)
                .collect();
            let left = deadline.saturating_duration_since(Instant::now());
            if arriving.is_empty() || left.is_zero() {
                return Ok(());
            }
            let mut fds: Vec<PollFd<'_>> = arriving
                .iter()
                .filter_map(|id| self.brokers[id].connection.as_ref())
                .map(|c| PollFd::new(&c.stream, PollFlags::IN))
                .collect();
            let timeout = Timespec::try_from(left).unwrap_or(Timespec { tv_sec: 0, tv_nsec: 1_000_000 });
            // An error (an interrupted wait) is a short wait: the loop looks again.
            let _ = poll(&mut fds, Some(&timeout));
            drop(fds);
            for id in arriving {
                self.receive(id)?;
            }
        }
        Ok(())
    }

    /// Reads what the sockets hold and sends the requests now due; never
    /// waits on a broker (except to connect to one).
    pub(crate) fn poll(&mut self) -> Result<(), FetchError> {
        let ids: Vec<i32> = self.brokers.keys().copied().collect();
        for id in &ids {
            self.receive(*id)?;
        }
        for id in &ids {
            self.send(*id)?;
        }
        Ok(())
    }

    /// Reads the responses `broker`'s socket holds.
    fn receive(&mut self, broker: i32) -> Result<(), FetchError> {
        loop {
            let Some(connection) = self.brokers.get_mut(&broker).and_then(|b| b.connection.as_mut()) else {
                return Ok(());
            };
            if !connection.connected {
                if connection.timed_out() {
                    self.lose(broker);
                }
                return Ok(());
            }
            let frame = match connection.read_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => {
                    if connection.timed_out() {
                        self.lose(broker);
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::InvalidData => {
                    return Err(self.broker_error(broker, e.to_string()));
                }
                Err(_) => {
                    self.lose(broker);
                    return Ok(());
                }
            };
            let Some(in_flight) = connection.in_flight.take() else {
                return Err(self.broker_error(broker, "a response to no request".into()));
            };
            let Some(version) = connection.fetch_version else {
                let agreed = decode_response::<ApiVersionsResponse>(frame, 0, in_flight.correlation_id)
                    .and_then(|versions| version(&versions, ApiKey::Fetch, &FETCH_VERSIONS))
                    .map_err(|message| self.broker_error(broker, format!("ApiVersions: {message}")))?;
                let connection = self.brokers.get_mut(&broker).and_then(|b| b.connection.as_mut());
                connection.expect("the connection answered").fetch_version = Some(agreed);
                continue;
            };
            let response = decode_response::<FetchResponse>(frame, version, in_flight.correlation_id)
                .map_err(|message| self.broker_error(broker, format!("Fetch v{version} response: {message}")))?;
            self.take_response(broker, in_flight, response)?;
        }
    }

    fn take_response(&mut self, broker: i32, in_flight: InFlight, response: FetchResponse) -> Result<(), FetchError> {
        for (partition, _, _) in &in_flight.asked {
            if let Some(fetch) = self.partitions.get_mut(partition) {
                fetch.in_flight = false;
            }
        }
        if let Some(error) = ResponseError::try_from_code(response.error_code) {
            if !error.is_retriable() {
                return Err(self.broker_error(broker, format!("Fetch failed: Kafka error {error}")));
            }
            for (partition, _, _) in &in_flight.asked {
                if let Some(fetch) = self.partitions.get_mut(partition) {
                    fetch.retry_at = Some(backoff());
                }
            }
            self.metadata_wanted = true;
            return Ok(());
        }
        for topic in response.responses {
            if topic.topic != self.topic {
                continue;
            }
            for data in topic.partitions {
                let partition = data.partition_index as u32;
                let asked = in_flight.asked.iter().find(|(p, _, _)| *p == partition);
                if let Some(&(_, generation, offset)) = asked {
                    let first = in_flight.asked.first().is_some_and(|a| a.0 == partition);
                    self.take_partition(broker, (partition, generation, offset), first, data)?;
                }
            }
        }
        Ok(())
    }

    /// Takes one partition's answer, if it answers the current generation.
    fn take_partition(
        &mut self,
        broker: i32,
        (partition, generation, offset): (u32, u64, u64),
        first: bool,
        data: kafka_protocol::messages::fetch_response::PartitionData,
    ) -> Result<(), FetchError> {
        let Some(fetch) = self.partitions.get_mut(&partition) else { return Ok(()) };
        if fetch.generation != generation || fetch.offset != offset {
            return Ok(()); // Sought elsewhere since.
        }
        match ResponseError::try_from_code(data.error_code) {
            None => {}
            Some(ResponseError::OffsetOutOfRange) => {
                self.out_of_range.push(partition);
                fetch.retry_at = Some(backoff());
                return Ok(());
            }
            Some(error)
                if error.is_retriable() || is_leadership(error) || error == ResponseError::UnknownServerError =>
            {
                fetch.retry_at = Some(backoff());
                fetch.leader = None;
                self.metadata_wanted = true;
                return Ok(());
            }
            Some(error) => {
                return Err(FetchError::Partition { partition, code: error.code(), name: error.to_string() });
            }
        }
        let end = if data.last_stable_offset >= 0 { data.last_stable_offset } else { data.high_watermark };
        fetch.end = Some(end.max(0) as u64);
        let records = data.records.unwrap_or_default();
        if records.is_empty() {
            return Ok(());
        }
        let aborted = data
            .aborted_transactions
            .unwrap_or_default()
            .into_iter()
            .map(|a| Aborted { first_offset: a.first_offset.max(0) as u64, producer_id: a.producer_id.0 });
        let (chunk, next_offset) = Chunk::new(partition, generation, records, aborted.collect());
        if chunk.is_empty() {
            // Cut short by the response's byte limits: asked for first next
            // time, when Kafka returns the first batch whole.
            if first {
                let message = format!(
                    "partition {partition} at offset {offset}: the first batch of a Fetch came back cut short, \
                     though it was asked first (a broker without KIP-74?)"
                );
                return Err(self.broker_error(broker, message));
            }
            self.partitions.get_mut(&partition).expect("a fetched partition").cut = true;
            return Ok(());
        }
        let fetch = self.partitions.get_mut(&partition).expect("a fetched partition");
        fetch.cut = false;
        if let Some(next_offset) = next_offset {
            if next_offset <= fetch.offset {
                let message = format!(
                    "a Fetch of partition {partition} at offset {} returned batches that end before it (at {next_offset})",
                    fetch.offset
                );
                return Err(self.broker_error(broker, message));
            }
            fetch.offset = next_offset;
        }
        fetch.chunks += 1;
        self.chunks.push_back(chunk);
        Ok(())
    }

    /// Sends `broker` a Fetch for its partitions that are due, connecting
    /// first if needed, and writes what the connection has not written.
    fn send(&mut self, broker: i32) -> Result<(), FetchError> {
        let now = Instant::now();
        let mut due: Vec<(u32, u64, u64)> = self
            .partitions
            .iter()
            .filter(|(_, f)| f.leader == Some(broker) && !f.in_flight && f.chunks < CHUNKS_PER_PARTITION_MAX)
            .filter(|(_, f)| f.retry_at.is_none_or(|at| at <= now))
            .map(|(p, f)| (*p, f.generation, f.offset))
            .collect();
        // Kafka returns the first partition's first batch whole and cuts the
        // rest at its byte limits: each partition takes its turn first, and
        // one cut short last time goes first.
        if !due.is_empty() {
            let turn = self.requests % due.len();
            due.rotate_left(turn);
            due.sort_by_key(|(p, _, _)| !self.partitions[p].cut);
        }
        let Some(entry) = self.brokers.get_mut(&broker) else { return Ok(()) };
        if !due.is_empty() && entry.connection.is_none() && entry.retry_at.is_none_or(|at| at <= now) {
            match Connection::start(&entry.address, entry.attempts, &self.client_id) {
                Ok(connection) => entry.connection = Some(connection),
                Err(_) => {
                    self.lose(broker);
                    return Ok(());
                }
            }
        }
        let ready = entry.connection.as_ref().is_some_and(|c| c.is_ready() && c.in_flight.is_none());
        if !due.is_empty() && ready {
            let connection = entry.connection.as_mut().expect("connected");
            connection.request_fetch(&self.topic, &due, &self.client_id);
            self.requests = self.requests.wrapping_add(1);
            for (partition, _, _) in &due {
                self.partitions.get_mut(partition).expect("a due partition").in_flight = true;
            }
        }
        let Some(connection) = self.brokers.get_mut(&broker).and_then(|b| b.connection.as_mut()) else {
            return Ok(());
        };
        if connection.flush().is_err() {
            self.lose(broker);
        }
        Ok(())
    }

    /// Drops `broker`'s connection after a failure: what it had in flight
    /// is asked again (elsewhere, if leadership moved) after a backoff.
    fn lose(&mut self, broker: i32) {
        self.drop_connection(broker);
        if let Some(entry) = self.brokers.get_mut(&broker) {
            entry.retry_at = Some(backoff());
            entry.attempts = entry.attempts.wrapping_add(1);
        }
        self.metadata_wanted = true;
    }

    fn drop_connection(&mut self, broker: i32) {
        let Some(connection) = self.brokers.get_mut(&broker).and_then(|b| b.connection.take()) else { return };
        for (partition, _, _) in connection.in_flight.map(|f| f.asked).unwrap_or_default() {
            if let Some(fetch) = self.partitions.get_mut(&partition) {
                fetch.in_flight = false;
            }
        }
    }

    fn broker_error(&self, broker: i32, message: String) -> FetchError {
        let address = self.brokers.get(&broker).map(|b| b.address.clone()).unwrap_or_default();
        FetchError::Broker { broker, address, message }
    }
}

fn backoff() -> Instant {
    Instant::now() + Duration::from_millis(RETRY_BACKOFF_MS)
}

/// Errors that mean "ask someone else": the partition's leader moved.
fn is_leadership(error: ResponseError) -> bool {
    matches!(
        error,
        ResponseError::NotLeaderOrFollower
            | ResponseError::FencedLeaderEpoch
            | ResponseError::UnknownLeaderEpoch
            | ResponseError::UnknownTopicOrPartition
            | ResponseError::LeaderNotAvailable
            | ResponseError::ReplicaNotAvailable
            | ResponseError::KafkaStorageError
            | ResponseError::OffsetNotAvailable
    )
}

impl Connection {
    /// Starts connecting to `address` (its `attempt`-th resolution, so a
    /// retry tries the next) without waiting, with ApiVersions v0 queued:
    /// [`Connection::flush`] finishes the connect, and the answer sets the
    /// Fetch version. Only name resolution blocks.
    fn start(address: &str, attempt: usize, client_id: &StrBytes) -> std::io::Result<Connection> {
        let resolved: Vec<std::net::SocketAddr> = address.to_socket_addrs()?.collect();
        let Some(socket) = resolved.get(attempt % resolved.len().max(1)) else {
            return Err(std::io::Error::new(ErrorKind::NotFound, format!("{address} resolves to nothing")));
        };
        let family = if socket.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
        let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
        let fd = rustix::net::socket_with(family, SocketType::STREAM, flags, Some(rustix::net::ipproto::TCP))?;
        match rustix::net::connect(&fd, socket) {
            Ok(()) | Err(rustix::io::Errno::INPROGRESS) => {}
            Err(e) => return Err(e.into()),
        }
        let stream = TcpStream::from(fd);
        stream.set_nodelay(true)?;
        let versions = InFlight { correlation_id: 1, heard_at: Instant::now(), asked: Vec::new() };
        Ok(Connection {
            stream,
            connected: false,
            fetch_version: None,
            correlation_id: 1,
            outbox: encode_request(&ApiVersionsRequest::default(), 0, 1, client_id),
            inbox: Inbox::default(),
            in_flight: Some(versions),
        })
    }

    /// Whether the request in flight (the connect and ApiVersions first)
    /// has heard nothing for longer than its limit.
    fn timed_out(&self) -> bool {
        let limit_ms = if self.is_ready() { REQUEST_TIMEOUT_MS } else { CONNECT_TIMEOUT_MS };
        self.in_flight.as_ref().is_some_and(|f| f.heard_at.elapsed() >= Duration::from_millis(limit_ms))
    }

    /// Whether the connect and ApiVersions are done.
    fn is_ready(&self) -> bool {
        self.fetch_version.is_some()
    }

    /// Queues a Fetch of `asked` (partition, generation, offset).
    fn request_fetch(&mut self, topic: &TopicName, asked: &[(u32, u64, u64)], client_id: &StrBytes) {
        assert!(self.in_flight.is_none(), "one request in flight per connection");
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let request = fetch_request(topic, asked);
        let version = self.fetch_version.expect("a Fetch is sent once the version is agreed");
        self.outbox.extend_from_slice(&encode_request(&request, version, self.correlation_id, client_id));
        self.in_flight =
            Some(InFlight { correlation_id: self.correlation_id, heard_at: Instant::now(), asked: asked.to_vec() });
    }

    /// Writes what the socket takes of the outbox.
    fn flush(&mut self) -> std::io::Result<()> {
        if !self.connected {
            if let Some(error) = self.stream.take_error()? {
                return Err(error);
            }
            if self.stream.peer_addr().is_err() {
                return Ok(()); // Still connecting.
            }
            self.connected = true;
        }
        while !self.outbox.is_empty() {
            match self.stream.write(&self.outbox) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(written) => drop(self.outbox.drain(..written)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The next whole response frame, once the socket has given all of it.
    fn read_frame(&mut self) -> std::io::Result<Option<Bytes>> {
        let inbox = &mut self.inbox;
        while inbox.size_read < 4 {
            match read_some(&mut self.stream, &mut inbox.size[inbox.size_read..])? {
                Some(read) => inbox.size_read += read,
                None => return Ok(None),
            }
            if let Some(in_flight) = self.in_flight.as_mut() {
                in_flight.heard_at = Instant::now();
            }
            if inbox.size_read == 4 {
                inbox.body = vec![0u8; frame_size(inbox.size)?];
                inbox.body_read = 0;
            }
        }
        while inbox.body_read < inbox.body.len() {
            match read_some(&mut self.stream, &mut inbox.body[inbox.body_read..])? {
                Some(read) => inbox.body_read += read,
                None => return Ok(None),
            }
            if let Some(in_flight) = self.in_flight.as_mut() {
                in_flight.heard_at = Instant::now();
            }
        }
        let frame = std::mem::take(&mut inbox.body);
        *inbox = Inbox::default();
        Ok(Some(Bytes::from(frame)))
    }
}

/// Reads into `buffer`: `None` when the socket has nothing now; an error
/// when the peer closed it.
fn read_some(stream: &mut TcpStream, buffer: &mut [u8]) -> std::io::Result<Option<usize>> {
    loop {
        return match stream.read(buffer) {
            Ok(0) => Err(ErrorKind::UnexpectedEof.into()),
            Ok(read) => Ok(Some(read)),
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(None),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
    }
}

fn frame_size(size: [u8; 4]) -> std::io::Result<usize> {
    let size = i32::from_be_bytes(size);
    if size < 0 || size as usize > RESPONSE_BYTES_MAX {
        let message = format!("a response frame of {size} bytes (at most {RESPONSE_BYTES_MAX})");
        return Err(std::io::Error::new(ErrorKind::InvalidData, message));
    }
    Ok(size as usize)
}

/// The version of `api` both sides speak (the highest in `ours` the broker
/// serves), from the broker's ApiVersions.
fn version(versions: &ApiVersionsResponse, api: ApiKey, ours: &std::ops::RangeInclusive<i16>) -> Result<i16, String> {
    if let Some(error) = ResponseError::try_from_code(versions.error_code) {
        return Err(format!("ApiVersions failed: Kafka error {error}"));
    }
    let served = versions.api_keys.iter().find(|k| k.api_key == api as i16);
    let Some(served) = served else { return Err(format!("the broker serves no {api:?}")) };
    let version = served.max_version.min(*ours.end());
    if version < served.min_version || !ours.contains(&version) {
        return Err(format!(
            "the broker serves {api:?} v{}-{}; the source speaks v{}-{}",
            served.min_version,
            served.max_version,
            ours.start(),
            ours.end()
        ));
    }
    Ok(version)
}

/// Connects to `address` (each address it resolves to, in turn) and reads
/// the broker's ApiVersions (v0), blocking up to [`CONNECT_TIMEOUT_MS`] for
/// each step; the stream is left blocking, with that timeout.
fn handshake(address: &str, client_id: &StrBytes) -> std::io::Result<(TcpStream, ApiVersionsResponse)> {
    let timeout = Duration::from_millis(CONNECT_TIMEOUT_MS);
    let mut last = std::io::Error::new(ErrorKind::NotFound, format!("{address} resolves to nothing"));
    let mut connected = None;
    for socket in address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&socket, timeout) {
            Ok(stream) => {
                connected = Some(stream);
                break;
            }
            Err(e) => last = e,
        }
    }
    let mut stream = connected.ok_or(last)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let versions = call(&mut stream, &ApiVersionsRequest::default(), 0, client_id)?;
    Ok((stream, versions))
}

/// Sends `request` at `version` on a blocking stream and reads its answer.
fn call<R: Request>(
    stream: &mut TcpStream,
    request: &R,
    version: i16,
    client_id: &StrBytes,
) -> std::io::Result<R::Response>
where
    R::Response: Decodable + HeaderVersion,
{
    stream.write_all(&encode_request(request, version, 1, client_id))?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size)?;
    let mut body = vec![0u8; frame_size(size)?];
    stream.read_exact(&mut body)?;
    decode_response::<R::Response>(Bytes::from(body), version, 1).map_err(std::io::Error::other)
}

/// The Metadata versions that carry topic ids.
const TOPIC_ID_METADATA_VERSIONS: std::ops::RangeInclusive<i16> = 10..=12;

/// The id of `topic` (32 hex digits, as the embedded log writes its own)
/// as the broker at `address` gives it in Metadata v10-12. `Ok(None)`: the
/// broker predates topic ids (Kafka < 2.8), or has no id for the topic.
pub(crate) fn topic_id(address: &str, topic: &str, client_id: &str) -> Result<Option<String>, String> {
    let client_id = StrBytes::from_string(client_id.to_owned());
    let (mut stream, versions) = handshake(address, &client_id).map_err(|e| format!("{address}: {e}"))?;
    let Ok(version) = version(&versions, ApiKey::Metadata, &TOPIC_ID_METADATA_VERSIONS) else { return Ok(None) };
    let mut asked = MetadataRequestTopic::default();
    asked.name = Some(TopicName(StrBytes::from_string(topic.to_owned())));
    let mut request = MetadataRequest::default();
    request.topics = Some(vec![asked]);
    request.allow_auto_topic_creation = false;
    let response = call(&mut stream, &request, version, &client_id).map_err(|e| format!("{address}: Metadata: {e}"))?;
    let found = response.topics.iter().find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic));
    Ok(found.filter(|t| t.error_code == 0 && !t.topic_id.is_nil()).map(|t| t.topic_id.simple().to_string()))
}

fn fetch_request(topic: &TopicName, asked: &[(u32, u64, u64)]) -> FetchRequest {
    let partitions = asked.iter().map(|&(partition, _, offset)| {
        let mut fetch = FetchPartition::default();
        fetch.partition = partition as i32;
        fetch.fetch_offset = offset as i64;
        fetch.partition_max_bytes = PARTITION_FETCH_BYTES;
        fetch.current_leader_epoch = -1;
        fetch.last_fetched_epoch = -1;
        fetch.log_start_offset = -1;
        fetch
    });
    let mut fetch_topic = FetchTopic::default();
    fetch_topic.topic = topic.clone();
    fetch_topic.partitions = partitions.collect();
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(-1);
    request.max_wait_ms = FETCH_WAIT_MS;
    request.min_bytes = 1;
    request.max_bytes = FETCH_BYTES_MAX;
    request.isolation_level = 1; // read_committed
    request.session_id = 0;
    request.session_epoch = -1; // A full fetch, no session.
    request.topics = vec![fetch_topic];
    request
}

/// A request frame: size, header, body.
fn encode_request<R: Request>(request: &R, version: i16, correlation_id: i32, client_id: &StrBytes) -> Vec<u8> {
    let mut header = RequestHeader::default();
    header.request_api_key = R::KEY;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = Some(client_id.clone());
    let mut body = BytesMut::new();
    header.encode(&mut body, R::header_version(version)).expect("a request header encodes");
    request.encode(&mut body, version).expect("a request the source builds encodes");
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// Decodes a response frame (after its size) answering `correlation_id`.
fn decode_response<R: Decodable + HeaderVersion>(
    mut frame: Bytes,
    version: i16,
    correlation_id: i32,
) -> Result<R, String> {
    let header =
        ResponseHeader::decode(&mut frame, R::header_version(version)).map_err(|e| format!("bad header: {e}"))?;
    if header.correlation_id != correlation_id {
        return Err(format!("correlation id {} answers no request (expected {correlation_id})", header.correlation_id));
    }
    R::decode(&mut frame, version).map_err(|e| format!("bad body: {e}"))
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use millpond_log::batch::{EncodeRecord, encode_batch};

    use super::*;

    /// What the fake broker does with the next request.
    enum Reply {
        /// ApiVersions: Fetch v4-12.
        Versions,
        /// A Fetch answered with this body.
        Fetch(FetchResponse),
        /// A response header, then these bytes as the body.
        Garbage(Vec<u8>),
        /// A frame size and nothing else.
        Size(i32),
        /// The connection is closed.
        Close,
    }

    /// A broker on loopback that answers one connection's requests with
    /// `replies`, in order; returns its address.
    fn fake_broker(replies: Vec<Reply>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            for reply in replies {
                let mut size = [0u8; 4];
                if stream.read_exact(&mut size).is_err() {
                    return;
                }
                let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
                stream.read_exact(&mut body).unwrap();
                let version = i16::from_be_bytes([body[2], body[3]]);
                let correlation_id = i32::from_be_bytes(body[4..8].try_into().unwrap());
                let mut out = BytesMut::new();
                let mut header = ResponseHeader::default();
                header.correlation_id = correlation_id;
                match reply {
                    Reply::Versions => {
                        header.encode(&mut out, 0).unwrap();
                        let mut fetch = ApiVersion::default();
                        fetch.api_key = ApiKey::Fetch as i16;
                        fetch.min_version = 4;
                        fetch.max_version = 17;
                        let mut response = ApiVersionsResponse::default();
                        response.api_keys = vec![fetch];
                        response.encode(&mut out, 0).unwrap();
                    }
                    Reply::Fetch(response) => {
                        header.encode(&mut out, FetchResponse::header_version(version)).unwrap();
                        response.encode(&mut out, version).unwrap();
                    }
                    Reply::Garbage(bytes) => {
                        header.encode(&mut out, FetchResponse::header_version(version)).unwrap();
                        out.extend_from_slice(&bytes);
                    }
                    Reply::Size(size) => {
                        stream.write_all(&size.to_be_bytes()).unwrap();
                        continue;
                    }
                    Reply::Close => return,
                }
                stream.write_all(&(out.len() as i32).to_be_bytes()).unwrap();
                stream.write_all(&out).unwrap();
            }
            // Held open until the test ends.
            std::thread::sleep(Duration::from_secs(30));
        });
        address
    }

    /// A fetcher of topic `t` partition 0 from `offset`, led by the broker at `address`.
    fn client(address: &str, offset: u64) -> Fetcher {
        let mut fetcher = Fetcher::new("t", "test");
        fetcher.seek(0, offset);
        fetcher.set_leaders(&[BrokerAddress { id: 1, address: address.to_owned() }], &[(0, Some(1))]);
        fetcher
    }

    /// Polls until `done` or 10 s, returning the first error.
    fn poll_until(fetcher: &mut Fetcher, done: impl Fn(&mut Fetcher) -> bool) -> Result<(), FetchError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(fetcher) {
            assert!(Instant::now() < deadline, "timed out");
            fetcher.poll()?;
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }

    fn fetch_response(error_code: i16, records: Option<Vec<u8>>, last_stable_offset: i64) -> FetchResponse {
        fetch_responses(vec![(0, error_code, records, last_stable_offset)])
    }

    /// A response of (partition, error, records, last stable offset)s.
    fn fetch_responses(partitions: Vec<(i32, i16, Option<Vec<u8>>, i64)>) -> FetchResponse {
        let mut topic = FetchableTopicResponse::default();
        topic.topic = TopicName(StrBytes::from_static_str("t"));
        topic.partitions = partitions.into_iter().map(|(p, e, r, lso)| partition_data(p, e, r, lso)).collect();
        let mut response = FetchResponse::default();
        response.responses = vec![topic];
        response
    }

    fn partition_data(index: i32, error_code: i16, records: Option<Vec<u8>>, last_stable_offset: i64) -> PartitionData {
        let mut partition = PartitionData::default();
        partition.partition_index = index;
        partition.error_code = error_code;
        partition.high_watermark = last_stable_offset;
        partition.last_stable_offset = last_stable_offset;
        partition.records = records.map(Bytes::from);
        partition
    }

    fn batch(base: u64, values: &[&str]) -> Vec<u8> {
        let records = values.iter().enumerate().map(|(i, v)| EncodeRecord {
            offset_delta: i as u32,
            timestamp_ms: 1,
            key: None,
            value: Some(v.as_bytes()),
            headers: &[],
        });
        let mut out = Vec::new();
        encode_batch(&mut out, base, values.len() as u32 - 1, records);
        out
    }

    #[test]
    fn batches_arrive_as_chunks_and_the_next_fetch_asks_after_them() {
        let mut records = batch(5, &["a", "b"]);
        records.extend(batch(7, &["c"]));
        let address = fake_broker(vec![
            Reply::Versions,
            Reply::Fetch(fetch_response(0, Some(records), 8)),
            Reply::Fetch(fetch_response(0, None, 8)),
        ]);
        let mut fetcher = client(&address, 5);
        poll_until(&mut fetcher, |f| f.front().is_some()).unwrap();
        assert_eq!(fetcher.end(0), Some(8));
        assert_eq!(fetcher.partitions[&0].offset, 8, "the next fetch starts after the last whole batch");
        let (mut scratch, mut seen) = (Vec::new(), Vec::new());
        let chunk = fetcher.front().unwrap();
        while let Some(next) = chunk.read_batch(&mut scratch, |r| seen.push((r.offset, r.value.unwrap().to_vec()))) {
            next.unwrap();
        }
        assert_eq!(seen, [(5, b"a".to_vec()), (6, b"b".to_vec()), (7, b"c".to_vec())]);
    }

    #[test]
    fn a_malformed_response_is_an_error_that_names_the_broker_not_a_panic() {
        let address = fake_broker(vec![Reply::Versions, Reply::Garbage(vec![0xff; 7])]);
        let mut fetcher = client(&address, 0);
        let error = poll_until(&mut fetcher, |_| false).unwrap_err();
        let message = error.to_string();
        assert!(message.contains(&address) && message.contains("Fetch v12 response"), "{message}");
    }

    #[test]
    fn batches_that_end_before_the_offset_asked_are_an_error_not_a_refetch_loop() {
        let address = fake_broker(vec![Reply::Versions, Reply::Fetch(fetch_response(0, Some(batch(0, &["a"])), 9))]);
        let mut fetcher = client(&address, 5);
        let message = poll_until(&mut fetcher, |_| false).unwrap_err().to_string();
        assert!(message.contains("at offset 5 returned batches that end before it (at 1)"), "{message}");
    }

    #[test]
    fn a_partition_cut_short_is_fetched_again_first_and_one_cut_when_first_fails() {
        let big = batch(0, &["a"; 50]);
        let address = fake_broker(vec![
            Reply::Versions,
            Reply::Fetch(fetch_responses(vec![
                (0, 0, Some(batch(0, &["x"])), 1),
                (1, 0, Some(big[..100].to_vec()), 50),
            ])),
        ]);
        let mut fetcher = Fetcher::new("t", "test");
        fetcher.seek(0, 0);
        fetcher.seek(1, 0);
        let leaders = [(0, Some(1)), (1, Some(1))];
        fetcher.set_leaders(&[BrokerAddress { id: 1, address: address.clone() }], &leaders);
        let asked = |f: &mut Fetcher| {
            let in_flight = f.brokers[&1].connection.as_ref().and_then(|c| c.in_flight.as_ref());
            in_flight.map(|i| i.asked.iter().map(|a| (a.0, a.2)).collect::<Vec<_>>())
        };
        poll_until(&mut fetcher, |f| f.partitions[&1].cut).unwrap();
        assert_eq!(fetcher.partitions[&1].offset, 0, "nothing of a cut batch is taken");
        assert_eq!(fetcher.chunks.len(), 1, "partition 0's batch only");
        poll_until(&mut fetcher, |f| asked(f).is_some()).unwrap();
        assert_eq!(asked(&mut fetcher), Some(vec![(1, 0), (0, 1)]), "the cut partition goes first");

        let address =
            fake_broker(vec![Reply::Versions, Reply::Fetch(fetch_response(0, Some(big[..100].to_vec()), 50))]);
        let mut fetcher = client(&address, 0);
        let message = poll_until(&mut fetcher, |_| false).unwrap_err().to_string();
        assert!(message.contains("cut short, though it was asked first"), "{message}");
    }

    #[test]
    fn a_retriable_error_for_the_whole_fetch_backs_its_partitions_off() {
        let mut response = fetch_response(0, None, -1);
        response.error_code = ResponseError::FetchSessionIdNotFound.code();
        assert!(ResponseError::FetchSessionIdNotFound.is_retriable());
        let address = fake_broker(vec![Reply::Versions, Reply::Fetch(response)]);
        let mut fetcher = client(&address, 0);
        poll_until(&mut fetcher, |f| f.partitions[&0].retry_at.is_some()).unwrap();
        for _ in 0..20 {
            fetcher.poll().unwrap();
            assert!(!fetcher.partitions[&0].in_flight, "not asked again before the backoff");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(fetcher.wants_metadata());
    }

    #[test]
    fn a_broker_that_does_not_answer_never_blocks_the_worker() {
        let address = fake_broker(Vec::new()); // Accepts, then says nothing.
        let mut fetcher = client(&address, 0);
        let started = Instant::now();
        while !fetcher.wants_metadata() {
            let poll_started = Instant::now();
            fetcher.poll().unwrap();
            assert!(poll_started.elapsed() < Duration::from_millis(200), "a poll waited on the broker");
            assert!(started.elapsed() < Duration::from_secs(10), "never given up");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(started.elapsed() >= Duration::from_millis(CONNECT_TIMEOUT_MS), "given up after the connect timeout");
        assert!(fetcher.brokers[&1].connection.is_none());
    }

    #[test]
    fn an_oversized_frame_is_refused_before_it_is_read() {
        let address = fake_broker(vec![Reply::Versions, Reply::Size(i32::MAX)]);
        let mut fetcher = client(&address, 0);
        let message = poll_until(&mut fetcher, |_| false).unwrap_err().to_string();
        assert!(message.contains(&format!("{} bytes", i32::MAX)), "{message}");
    }

    #[test]
    fn a_lost_connection_or_a_moved_leader_asks_for_metadata_and_is_retried() {
        let address = fake_broker(vec![Reply::Versions, Reply::Close]);
        let mut fetcher = client(&address, 0);
        assert!(!fetcher.wants_metadata());
        poll_until(&mut fetcher, |f| f.wants_metadata()).unwrap();
        assert!(fetcher.brokers[&1].connection.is_none() && fetcher.brokers[&1].retry_at.is_some());

        let not_leader = ResponseError::NotLeaderOrFollower.code();
        let address = fake_broker(vec![Reply::Versions, Reply::Fetch(fetch_response(not_leader, None, -1))]);
        let mut fetcher = client(&address, 0);
        poll_until(&mut fetcher, |f| f.wants_metadata()).unwrap();
        assert_eq!(fetcher.partitions[&0].leader, None, "the leader is looked up again");
        assert!(fetcher.front().is_none());
    }

    #[test]
    fn out_of_range_is_reported_and_other_partition_errors_fail() {
        let out_of_range = ResponseError::OffsetOutOfRange.code();
        let address = fake_broker(vec![Reply::Versions, Reply::Fetch(fetch_response(out_of_range, None, -1))]);
        let mut fetcher = client(&address, 9);
        poll_until(&mut fetcher, |f| !f.out_of_range.is_empty()).unwrap();
        assert_eq!(fetcher.take_out_of_range(), [0]);

        let denied = ResponseError::TopicAuthorizationFailed.code();
        let address = fake_broker(vec![Reply::Versions, Reply::Fetch(fetch_response(denied, None, -1))]);
        let mut fetcher = client(&address, 0);
        let message = poll_until(&mut fetcher, |_| false).unwrap_err().to_string();
        assert!(message.contains(&format!("partition 0: Kafka error {denied}")), "{message}");
    }

    #[test]
    fn an_answer_to_a_position_sought_away_from_is_dropped() {
        let address = fake_broker(vec![Reply::Versions, Reply::Fetch(fetch_response(0, Some(batch(0, &["a"])), 1))]);
        let mut fetcher = client(&address, 0);
        poll_until(&mut fetcher, |f| f.partitions[&0].in_flight).unwrap(); // Connected, the Fetch at 0 sent.
        fetcher.seek(0, 100);
        let asked_at = |f: &mut Fetcher| {
            let in_flight = f.brokers[&1].connection.as_ref().and_then(|c| c.in_flight.as_ref());
            in_flight.map(|i| i.asked.iter().map(|a| a.2).collect::<Vec<_>>())
        };
        // The answer for offset 0 came, was dropped, and 100 was asked for.
        poll_until(&mut fetcher, |f| asked_at(f) == Some(vec![100])).unwrap();
        assert!(fetcher.front().is_none(), "the answer for offset 0 is not read at 100");
        assert_eq!((fetcher.partitions[&0].offset, fetcher.end(0)), (100, None));
    }
}
