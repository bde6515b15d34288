//! The Kafka endpoint spoken to as a Kafka client speaks it (requests
//! encoded and responses decoded with `kafka-protocol`'s client side):
//! ApiVersions, Metadata with auto-creation, Produce, Fetch with long
//! polling, ListOffsets, a view's changelog read to its committed end, and
//! the refusals each names.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest, InitProducerIdRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use millpond_server::{Engine, EngineConfig, KafkaConfig, KafkaEndpoint};

/// A blocking Kafka client of one connection.
struct Client {
    stream: TcpStream,
    correlation_id: i32,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Client { stream, correlation_id: 0 }
    }

    /// Sends `request` at `version` and reads its response.
    fn send<R: Request>(&mut self, request: &R, version: i16) -> R::Response {
        self.correlation_id += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = self.correlation_id;
        header.client_id = Some(StrBytes::from_static_str("kafka_wire"));
        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version)).unwrap();
        request.encode(&mut body, version).unwrap();
        self.write_frame(&body);
        let mut frame = self.read_frame().expect("a response");
        let header = ResponseHeader::decode(&mut frame, R::Response::header_version(version)).unwrap();
        assert_eq!(header.correlation_id, self.correlation_id, "responses come in request order");
        let response = R::Response::decode(&mut frame, version).unwrap();
        assert!(!frame.has_remaining(), "the response is read whole");
        response
    }

    /// Sends `request` at `version` and returns its whole response frame,
    /// read only after `delay` (so a large answer fills the socket first).
    fn send_for_frame<R: Request>(&mut self, request: &R, version: i16, delay: Duration) -> Bytes {
        self.correlation_id += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = self.correlation_id;
        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version)).unwrap();
        request.encode(&mut body, version).unwrap();
        self.write_frame(&body);
        std::thread::sleep(delay);
        self.read_frame().expect("a response")
    }

    fn write_frame(&mut self, body: &[u8]) {
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        self.stream.write_all(&frame).unwrap();
    }

    /// The next frame, or `None` once the server closed the connection.
    fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).ok()?;
        let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut frame).ok()?;
        Some(Bytes::from(frame))
    }
}

fn start(dir: &std::path::Path) -> (Arc<Engine>, KafkaEndpoint) {
    let engine = Engine::open(EngineConfig { epoch_interval_ms: 50, ..EngineConfig::new(dir) }).unwrap();
    let mut config = KafkaConfig::new("127.0.0.1:0".parse().unwrap());
    config.frame_timeout_ms = 500;
    let endpoint = KafkaEndpoint::start(engine.clone(), config).unwrap();
    (engine, endpoint)
}

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// One v2 batch of `records` (key, value) at one time, as a producer encodes it.
fn batch(records: &[(&str, &str)], timestamp_ms: i64) -> Bytes {
    idempotent_batch(records, timestamp_ms, -1, -1, -1)
}

/// [`batch`] of an idempotent producer: its id, epoch and first sequence.
fn idempotent_batch(records: &[(&str, &str)], timestamp_ms: i64, id: i64, epoch: i16, first_sequence: i32) -> Bytes {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // offset − sequence constant keeps one batch.
            sequence: first_sequence + i as i32,
            timestamp: timestamp_ms,
            key: Some(Bytes::from(k.to_string())),
            value: Some(Bytes::from(v.to_string())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, &records, &RecordEncodeOptions { version: 2, compression: Compression::None })
        .unwrap();
    buf.freeze()
}

fn produce(client: &mut Client, topic: &str, partition: i32, records: Bytes, version: i16) -> (i16, i64) {
    let mut data = PartitionProduceData::default();
    data.index = partition;
    data.records = Some(records);
    let mut topic_data = TopicProduceData::default();
    topic_data.name = name(topic);
    topic_data.partition_data = vec![data];
    let mut request = ProduceRequest::default();
    request.acks = -1;
    request.timeout_ms = 5000;
    request.topic_data = vec![topic_data];
    let response = client.send(&request, version);
    let partition = &response.responses[0].partition_responses[0];
    if partition.error_code != 0 {
        eprintln!("produce to {topic}/{}: {:?}", partition.index, partition.error_message);
    }
    (partition.error_code, partition.base_offset)
}

fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    let mut asked = FetchPartition::default();
    asked.partition = partition;
    asked.fetch_offset = offset;
    asked.partition_max_bytes = 1 << 20;
    let mut fetch_topic = FetchTopic::default();
    fetch_topic.topic = name(topic);
    fetch_topic.partitions = vec![asked];
    let mut request = FetchRequest::default();
    request.replica_id = kafka_protocol::messages::BrokerId(-1);
    request.max_wait_ms = max_wait_ms;
    request.min_bytes = 1;
    request.max_bytes = 50 << 20;
    request.isolation_level = 1;
    request.session_epoch = -1;
    request.topics = vec![fetch_topic];
    request
}

/// Each record's offset, key and value in a fetched partition's bytes.
fn records_of(bytes: &Bytes) -> Vec<(i64, String, String)> {
    let mut bytes = bytes.clone();
    let mut out = Vec::new();
    while bytes.has_remaining() {
        let set = RecordBatchDecoder::decode(&mut bytes).unwrap();
        for record in set.records {
            let text = |b: Option<Bytes>| String::from_utf8(b.unwrap_or_default().to_vec()).unwrap();
            out.push((record.offset, text(record.key), text(record.value)));
        }
    }
    out
}

fn metadata(client: &mut Client, topics: Option<&[&str]>, create: bool, version: i16) -> Vec<(String, i16, usize)> {
    let mut request = MetadataRequest::default();
    request.allow_auto_topic_creation = create;
    request.topics = topics.map(|names| {
        names
            .iter()
            .map(|n| {
                let mut topic = MetadataRequestTopic::default();
                topic.name = Some(name(n));
                topic
            })
            .collect()
    });
    let response = client.send(&request, version);
    assert_eq!(response.brokers.len(), 1);
    response.topics.iter().map(|t| (t.name.as_ref().unwrap().0.to_string(), t.error_code, t.partitions.len())).collect()
}

#[test]
fn api_versions_advertises_what_is_served_and_answers_an_unknown_version_at_v0() {
    let dir = tempfile::tempdir().unwrap();
    let (_engine, endpoint) = start(dir.path());
    let mut client = Client::connect(endpoint.addr());
    for version in 0..=4 {
        let response = client.send(&ApiVersionsRequest::default(), version);
        assert_eq!(response.error_code, 0);
        let fetch = response.api_keys.iter().find(|k| k.api_key == ApiKey::Fetch as i16).unwrap();
        assert_eq!((fetch.min_version, fetch.max_version), (4, 12));
        let produce = response.api_keys.iter().find(|k| k.api_key == ApiKey::Produce as i16).unwrap();
        assert_eq!(produce.min_version, 0, "older librdkafka wants Produce from 0");
    }
    // A version past what is served: UNSUPPORTED_VERSION, answered at v0.
    let mut header = RequestHeader::default();
    header.request_api_key = ApiKey::ApiVersions as i16;
    header.request_api_version = 9;
    header.correlation_id = 77;
    let mut body = BytesMut::new();
    header.encode(&mut body, 2).unwrap();
    client.write_frame(&body);
    let mut frame = client.read_frame().unwrap();
    assert_eq!(ResponseHeader::decode(&mut frame, 0).unwrap().correlation_id, 77);
    let response = kafka_protocol::messages::ApiVersionsResponse::decode(&mut frame, 0).unwrap();
    assert_eq!(response.error_code, ResponseError::UnsupportedVersion.code());
    assert!(!response.api_keys.is_empty(), "the table comes with the error");
}

#[test]
fn a_produced_batch_is_fetched_back_by_offset_and_found_by_time() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = start(dir.path());
    let mut client = Client::connect(endpoint.addr());
    assert_eq!(metadata(&mut client, Some(&["events"]), false, 9), vec![("events".into(), 3, 0)]);
    assert_eq!(metadata(&mut client, Some(&["events"]), true, 9), vec![("events".into(), 0, 1)]);
    assert_eq!(metadata(&mut client, None, false, 12), vec![("events".into(), 0, 1)]);
    assert_eq!(produce(&mut client, "events", 0, batch(&[("a", "1"), ("b", "2")], 1_000), 3), (0, 0));
    assert_eq!(produce(&mut client, "events", 0, batch(&[("c", "3")], 5_000), 11), (0, 2));
    for version in [4, 11, 12] {
        let response = client.send(&fetch_request("events", 0, 1, 0), version);
        let data = &response.responses[0].partitions[0];
        assert_eq!((data.error_code, data.high_watermark, data.last_stable_offset), (0, 3, 3), "Fetch v{version}");
        let records = records_of(data.records.as_ref().unwrap());
        // The whole first batch comes back (offset 0 too), as Kafka sends it.
        let keys: Vec<_> = records.iter().map(|(o, k, v)| (*o, k.as_str(), v.as_str())).collect();
        assert_eq!(keys, vec![(0, "a", "1"), (1, "b", "2"), (2, "c", "3")]);
    }
    // Offsets by time: the first record at or after it, with its timestamp.
    let offsets = |client: &mut Client, timestamp: i64| {
        let mut partition = ListOffsetsPartition::default();
        partition.timestamp = timestamp;
        let mut topic = ListOffsetsTopic::default();
        topic.name = name("events");
        topic.partitions = vec![partition];
        let mut request = ListOffsetsRequest::default();
        request.replica_id = kafka_protocol::messages::BrokerId(-1);
        request.topics = vec![topic];
        let response = client.send(&request, 6);
        let p = &response.topics[0].partitions[0];
        (p.error_code, p.offset, p.timestamp)
    };
    assert_eq!(offsets(&mut client, -2), (0, 0, -1));
    assert_eq!(offsets(&mut client, -1), (0, 3, -1));
    assert_eq!(offsets(&mut client, 1_000), (0, 0, 1_000));
    assert_eq!(offsets(&mut client, 1_001), (0, 2, 5_000));
    assert_eq!(offsets(&mut client, 9_000), (0, -1, -1));
    // Past the end: OFFSET_OUT_OF_RANGE with the partition's bounds.
    let response = client.send(&fetch_request("events", 0, 4, 0), 11);
    let data = &response.responses[0].partitions[0];
    assert_eq!((data.error_code, data.high_watermark, data.log_start_offset), (1, 3, 0));
    drop(engine);
}

#[test]
fn a_long_poll_answers_when_a_record_arrives_and_not_before() {
    let dir = tempfile::tempdir().unwrap();
    let (_engine, endpoint) = start(dir.path());
    let mut client = Client::connect(endpoint.addr());
    metadata(&mut client, Some(&["t"]), true, 9);
    let addr = endpoint.addr();
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let mut client = Client::connect(addr);
        produce(&mut client, "t", 0, batch(&[("k", "v")], 1), 9)
    });
    let started = Instant::now();
    let response = client.send(&fetch_request("t", 0, 0, 10_000), 11);
    let waited = started.elapsed();
    assert_eq!(producer.join().unwrap(), (0, 0));
    let data = &response.responses[0].partitions[0];
    assert_eq!(records_of(data.records.as_ref().unwrap()).len(), 1);
    assert!(waited >= Duration::from_millis(250), "answered before the record came: {waited:?}");
    assert!(waited < Duration::from_secs(5), "the record did not end the wait: {waited:?}");
    // With nothing to read, the wait ends at max_wait_ms with no records.
    let started = Instant::now();
    let response = client.send(&fetch_request("t", 0, 1, 200), 11);
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert!(response.responses[0].partitions[0].records.as_ref().unwrap().is_empty());
}

#[test]
fn writes_to_topics_clients_may_not_write_and_invalid_batches_are_refused_by_code() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = start(dir.path());
    engine.execute("CREATE TABLE t (a INT)").unwrap();
    let mut client = Client::connect(endpoint.addr());
    metadata(&mut client, Some(&["ok"]), true, 9);
    let good = batch(&[("k", "v")], 1);
    assert_eq!(produce(&mut client, "nope", 0, good.clone(), 9).0, ResponseError::UnknownTopicOrPartition.code());
    assert_eq!(produce(&mut client, "ok", 3, good.clone(), 9).0, ResponseError::UnknownTopicOrPartition.code());
    for refused in ["table.t", "view.v", "__catalog"] {
        assert_eq!(produce(&mut client, refused, 0, good.clone(), 9).0, ResponseError::TopicAuthorizationFailed.code());
    }
    let mut flipped = good.to_vec();
    *flipped.last_mut().unwrap() ^= 0x55;
    assert_eq!(produce(&mut client, "ok", 0, Bytes::from(flipped), 9).0, ResponseError::CorruptMessage.code());
    let mut two = good.to_vec();
    two.extend_from_slice(&good);
    assert_eq!(produce(&mut client, "ok", 0, Bytes::from(two), 9).0, ResponseError::CorruptMessage.code());
    // Nothing refused was written; the connection still serves.
    assert_eq!(produce(&mut client, "ok", 0, good, 9), (0, 0));
    assert_eq!(metadata(&mut client, Some(&["view.v"]), true, 9)[0].1, ResponseError::UnknownTopicOrPartition.code());
}

#[test]
fn a_views_changelog_is_fetched_to_its_committed_end_only() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = start(dir.path());
    engine.execute("CREATE TABLE t (a INT); CREATE MATERIALIZED VIEW v AS SELECT a FROM t").unwrap();
    engine.execute("INSERT INTO t VALUES (1), (2), (3)").unwrap();
    let mut client = Client::connect(endpoint.addr());
    let deadline = Instant::now() + Duration::from_secs(30);
    let records = loop {
        let response = client.send(&fetch_request("view.v", 0, 0, 500), 11);
        let data = &response.responses[0].partitions[0];
        if data.error_code == ResponseError::UnknownTopicOrPartition.code() && Instant::now() < deadline {
            continue; // the runtime creates the changelog as it starts
        }
        assert_eq!(data.error_code, 0);
        let committed = engine.committed().unwrap().and_then(|m| m.sinks.get("view.v").copied()).unwrap_or(0);
        assert!(
            data.high_watermark as u64 <= committed,
            "the answer's end {} is past the commit {committed}",
            data.high_watermark
        );
        let records = records_of(data.records.as_ref().unwrap());
        assert!(records.iter().all(|(o, _, _)| (*o as u64) < committed), "a record past the committed end");
        if records.len() == 3 || Instant::now() > deadline {
            break records;
        }
    };
    // A changelog record: the row's JSON as its key (docs/kafka-wire.md).
    let mut rows: Vec<&str> = records.iter().map(|(_, key, _)| key.as_str()).collect();
    rows.sort_unstable();
    assert_eq!(rows, vec![r#"{"a":1}"#, r#"{"a":2}"#, r#"{"a":3}"#]);
    // A tail past the committed end (what an epoch appends before its
    // commit, cut if the process dies first), planted here: neither Fetch
    // nor ListOffsets shows it, to read_committed and read_uncommitted alike.
    let committed = engine.committed().unwrap().unwrap().sinks["view.v"];
    let uncommitted = millpond_dataflow::TopicRecord {
        key: Some(br#"{"a":99}"#.to_vec()),
        value: Some(1i64.to_be_bytes().to_vec()),
        headers: vec![],
    };
    engine.append("view.v", vec![uncommitted]).unwrap();
    assert_eq!(engine.records_in("view.v").unwrap(), committed + 1, "the tail is in the log");
    for isolation in [0, 1] {
        let mut request = fetch_request("view.v", 0, 0, 0);
        request.isolation_level = isolation;
        let response = client.send(&request, 11);
        let data = &response.responses[0].partitions[0];
        assert_eq!((data.high_watermark as u64, data.last_stable_offset as u64), (committed, committed));
        assert!(records_of(data.records.as_ref().unwrap()).iter().all(|(_, key, _)| !key.contains("99")));
        let past = client.send(&fetch_request("view.v", 0, committed as i64 + 1, 0), 11);
        assert_eq!(past.responses[0].partitions[0].error_code, ResponseError::OffsetOutOfRange.code());
    }
}

/// Whether the server closed `stream` without writing anything to it.
fn closed_silently(mut stream: TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(stream.read(&mut buf), Ok(0))
        || matches!(stream.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
}

fn send_raw(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(bytes).unwrap();
    stream
}

/// A frame: size, then a v1 request header (key, version, correlation id,
/// null client id), then `body`.
fn frame(api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut inner = Vec::new();
    inner.extend_from_slice(&api_key.to_be_bytes());
    inner.extend_from_slice(&version.to_be_bytes());
    inner.extend_from_slice(&7i32.to_be_bytes());
    inner.extend_from_slice(&(-1i16).to_be_bytes());
    inner.extend_from_slice(body);
    let mut out = (inner.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&inner);
    out
}

#[test]
fn hostile_frames_close_only_their_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (_engine, endpoint) = start(dir.path());
    let addr = endpoint.addr();
    let mut bystander = Client::connect(addr);
    let hostile: Vec<(&str, Vec<u8>)> = vec![
        ("a huge length", 0x7fff_ffffi32.to_be_bytes().to_vec()),
        ("a negative length", (-5i32).to_be_bytes().to_vec()),
        ("a length shorter than a header", 3i32.to_be_bytes().iter().chain(&[0, 0, 0]).copied().collect()),
        ("an unknown API key", frame(999, 0, &[])),
        ("a version not served", frame(ApiKey::Fetch as i16, 2, &[])),
        ("Produce v0", frame(ApiKey::Produce as i16, 0, &[0, 1, 0, 0, 0, 0])),
        // Metadata v0 whose topic array claims 2^31 - 1 entries in 0 bytes:
        // decoded unchecked, that is a reservation of about 100 GB.
        ("an array count past the frame", frame(ApiKey::Metadata as i16, 0, &0x7fff_ffffi32.to_be_bytes())),
        ("a compact array count past the frame", frame(ApiKey::Metadata as i16, 9, &[0, 0xff, 0xff, 0xff, 0x07])),
        ("a body that does not decode", frame(ApiKey::Produce as i16, 9, &[0xff; 3])),
        ("garbage", 60i32.to_be_bytes().iter().copied().chain((0..60u8).map(|i| i.wrapping_mul(37))).collect()),
    ];
    for (what, bytes) in hostile {
        let stream = send_raw(addr, &bytes);
        assert!(closed_silently(stream), "{what}: the connection was not closed silently");
        let response = bystander.send(&ApiVersionsRequest::default(), 3);
        assert_eq!(response.error_code, 0, "after {what}, another connection is still served");
    }
    // Half a frame that stays half: closed once the frame's time is up.
    let stalled = send_raw(addr, &frame(ApiKey::ApiVersions as i16, 0, &[])[..9]);
    let started = Instant::now();
    assert!(closed_silently(stalled), "a stalled frame was not closed");
    assert!(started.elapsed() < Duration::from_secs(5), "closed after {:?}", started.elapsed());
    // Half a frame, then the client goes away: nothing else is disturbed.
    let mut half = send_raw(addr, &frame(ApiKey::ApiVersions as i16, 0, &[])[..6]);
    half.flush().unwrap();
    drop(half);
    assert_eq!(bystander.send(&ApiVersionsRequest::default(), 0).error_code, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while endpoint.connections() > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(endpoint.connections(), 1, "only the bystander's connection is left");
}

fn init_producer_id(client: &mut Client) -> i64 {
    let mut request = InitProducerIdRequest::default();
    request.transactional_id = None;
    request.transaction_timeout_ms = 60_000;
    let response = client.send(&request, 0);
    assert_eq!((response.error_code, response.producer_epoch), (0, 0));
    response.producer_id.0
}

#[test]
fn an_idempotent_producers_retries_are_written_once_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = start(dir.path());
    let mut client = Client::connect(endpoint.addr());
    metadata(&mut client, Some(&["t"]), true, 9);
    let id = init_producer_id(&mut client);
    let first = idempotent_batch(&[("a", "1"), ("b", "2"), ("c", "3")], 1, id, 0, 0);
    assert_eq!(produce(&mut client, "t", 0, first.clone(), 9), (0, 0));
    assert_eq!(produce(&mut client, "t", 0, first.clone(), 9), (0, 0), "a retry is answered with its first offset");
    let second = idempotent_batch(&[("d", "4")], 2, id, 0, 3);
    assert_eq!(produce(&mut client, "t", 0, second.clone(), 9), (0, 3));
    let gap = idempotent_batch(&[("x", "9")], 3, id, 0, 10);
    assert_eq!(produce(&mut client, "t", 0, gap, 9).0, ResponseError::OutOfOrderSequenceNumber.code());
    assert_eq!(engine.records_in("t").unwrap(), 4, "retries and refusals wrote nothing");
    drop(client);
    drop(endpoint);
    engine.shutdown().unwrap();
    drop(engine);

    // A new server rebuilds the producer's state from the log.
    let (engine, endpoint) = start(dir.path());
    let mut client = Client::connect(endpoint.addr());
    assert_eq!(produce(&mut client, "t", 0, second, 9), (0, 3), "a retry after the restart is still a retry");
    assert_eq!(produce(&mut client, "t", 0, first, 9), (0, 0));
    let third = idempotent_batch(&[("e", "5")], 4, id, 0, 4);
    assert_eq!(produce(&mut client, "t", 0, third, 9), (0, 4));
    let older = idempotent_batch(&[("e", "5")], 4, id, 1, 0);
    assert_eq!(produce(&mut client, "t", 0, older, 9), (0, 5), "a new epoch starts at sequence 0");
    let fenced = idempotent_batch(&[("f", "6")], 4, id, 0, 5);
    assert_eq!(produce(&mut client, "t", 0, fenced, 9).0, ResponseError::InvalidProducerEpoch.code());
    let next = init_producer_id(&mut client);
    assert!(next > id, "producer ids are not handed out again: {next} after {id}");
    assert_eq!(engine.records_in("t").unwrap(), 6);
}

fn create_topic(
    client: &mut Client,
    topic: &str,
    replication: i16,
    settings: &[(&str, &str)],
) -> (i16, Option<String>) {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    let mut creatable = CreatableTopic::default();
    creatable.name = name(topic);
    creatable.num_partitions = 2;
    creatable.replication_factor = replication;
    creatable.configs = settings
        .iter()
        .map(|(n, v)| {
            let mut config = CreatableTopicConfig::default();
            config.name = StrBytes::from_string((*n).to_owned());
            config.value = Some(StrBytes::from_string((*v).to_owned()));
            config
        })
        .collect();
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![creatable];
    request.timeout_ms = 5000;
    let response = client.send(&request, 5);
    let result = &response.topics[0];
    (result.error_code, result.error_message.as_ref().map(|m| m.to_string()))
}

fn delete_topic(client: &mut Client, topic: &str) -> (i16, Option<String>) {
    let mut request = DeleteTopicsRequest::default();
    request.topic_names = vec![name(topic)];
    request.timeout_ms = 5000;
    let response = client.send(&request, 5);
    let result = &response.responses[0];
    (result.error_code, result.error_message.as_ref().map(|m| m.to_string()))
}

#[test]
fn admin_requests_millpond_cannot_honour_are_refused_by_code_and_name_why() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = start(dir.path());
    engine.execute("CREATE SOURCE ev (k BIGINT) FROM TOPIC 'ev' FORMAT JSON; CREATE TABLE t (a INT)").unwrap();
    let mut client = Client::connect(endpoint.addr());
    assert_eq!(create_topic(&mut client, "fine", 1, &[("retention.ms", "1000")]).0, 0);
    let (code, message) = create_topic(&mut client, "copies", 3, &[]);
    assert_eq!(code, ResponseError::InvalidReplicationFactor.code(), "{message:?}");
    let (code, message) = create_topic(&mut client, "odd", 1, &[("compression.type", "zstd")]);
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert!(message.unwrap().contains("compression.type"));
    assert_eq!(
        create_topic(&mut client, "small", 1, &[("segment.bytes", "10")]).0,
        ResponseError::InvalidConfig.code()
    );
    assert_eq!(create_topic(&mut client, "view.x", 1, &[]).0, ResponseError::TopicAuthorizationFailed.code());
    let listed: Vec<String> = metadata(&mut client, None, false, 12).into_iter().map(|(n, _, _)| n).collect();
    assert!(listed.contains(&"fine".to_owned()) && !listed.contains(&"odd".to_owned()), "{listed:?}");
    // A source's topic stays while the source reads it; a table's always.
    let (code, message) = delete_topic(&mut client, "ev");
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert!(message.unwrap().contains("DROP SOURCE ev"));
    assert_eq!(delete_topic(&mut client, "table.t").0, ResponseError::TopicAuthorizationFailed.code());
    assert_eq!(delete_topic(&mut client, "fine").0, 0);
    assert_eq!(delete_topic(&mut client, "fine").0, ResponseError::UnknownTopicOrPartition.code());
}

/// The records of every partition in a Fetch response frame, in order.
/// A record as fetched: its offset, key and value.
type Fetched = (i64, String, String);

fn fetched_records(mut frame: Bytes, version: i16) -> Vec<(i32, Vec<Fetched>)> {
    use kafka_protocol::messages::FetchResponse;
    ResponseHeader::decode(&mut frame, FetchResponse::header_version(version)).unwrap();
    let response = FetchResponse::decode(&mut frame, version).unwrap();
    assert!(!frame.has_remaining(), "the response is read whole");
    let partitions = response.responses.iter().flat_map(|t| t.partitions.iter());
    partitions.map(|p| (p.partition_index, records_of(p.records.as_ref().unwrap()))).collect()
}

#[test]
fn fetch_sends_the_same_frames_with_sendfile_and_buffered_across_segments_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, zero_copy) = start(dir.path());
    let mut config = KafkaConfig::new("127.0.0.1:0".parse().unwrap());
    config.fetch_zero_copy = false;
    let buffered = KafkaEndpoint::start(engine.clone(), config).unwrap();
    let (mut client, mut other) = (Client::connect(zero_copy.addr()), Client::connect(buffered.addr()));
    let settings = [("segment.bytes", "65536"), ("index.interval.bytes", "1024")];
    assert_eq!(create_topic(&mut client, "s", 1, &settings).0, 0);
    // ~6 MiB over ~100 segments, in batches of 1..40 records of 0..2000 bytes.
    let mut rng = 7u64;
    let mut next = move || {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (rng >> 33) as usize
    };
    let mut produced = vec![Vec::new(), Vec::new()];
    while produced.iter().map(Vec::len).sum::<usize>() < 6_000 {
        let partition = next() % 2;
        let records: Vec<(String, String)> =
            (0..1 + next() % 40).map(|i| (format!("k{i}"), "v".repeat(next() % 2000))).collect();
        produced[partition].extend(produce_now(&mut client, "s", partition as i32, records));
    }
    for version in [4, 7, 11, 12] {
        for (partition_max_bytes, max_bytes) in [(1, 1), (100_000, 300_000), (16 << 20, 50 << 20)] {
            let fetched = fetch_both(&mut client, &mut other, "s", 2, version, partition_max_bytes, max_bytes);
            assert_eq!(fetched, produced, "v{version} max {partition_max_bytes}/{max_bytes}");
        }
    }
    // 16 MiB in one answer, read late: more than the loopback socket's
    // buffers hold, so sendfile sends part, meets a full socket and resumes.
    assert_eq!(create_topic(&mut client, "big", 1, &[]).0, 0);
    let mut big = Vec::new();
    for _ in 0..250 {
        let records: Vec<(String, String)> = (0..64).map(|i| (format!("k{i}"), "b".repeat(1000))).collect();
        big.extend(produce_now(&mut client, "big", 0, records));
    }
    let request = fetch_all_request("big", &[0], 16 << 20, 50 << 20);
    let sent = client.send_for_frame(&request, 12, Duration::from_millis(300));
    assert!(sent.len() > 16_000_000, "one answer of {} bytes", sent.len());
    assert!(sent.len() < 16 << 20, "the whole partition in one answer: {} bytes", sent.len());
    let read = other.send_for_frame(&request, 12, Duration::ZERO);
    assert!(sent[4..] == read[4..], "the same frame but for the correlation id");
    assert!(fetched_records(sent, 12) == vec![(0, big)], "every record of the big answer");
}

/// Produces `records` to `topic`'s `partition` stamped now (retention keeps
/// them); their offsets, keys and values.
fn produce_now(client: &mut Client, topic: &str, partition: i32, records: Vec<(String, String)>) -> Vec<Fetched> {
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let pairs: Vec<(&str, &str)> = records.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (error, base) = produce(client, topic, partition, batch(&pairs, now_ms), 8);
    assert_eq!(error, 0);
    records.into_iter().enumerate().map(|(i, (k, v))| (base + i as i64, k, v)).collect()
}

/// A Fetch of `partitions` from their `offsets`.
fn fetch_all_request(topic: &str, offsets: &[i64], partition_max_bytes: i32, max_bytes: i32) -> FetchRequest {
    let mut request = fetch_request(topic, 0, offsets[0], 0);
    request.max_bytes = max_bytes;
    let template = request.topics[0].partitions[0].clone();
    request.topics[0].partitions = offsets
        .iter()
        .enumerate()
        .map(|(p, offset)| {
            let mut asked = template.clone();
            (asked.partition, asked.fetch_offset, asked.partition_max_bytes) = (p as i32, *offset, partition_max_bytes);
            asked
        })
        .collect();
    request
}

/// Every record of `topic`'s `partitions`, fetched at `version` from both
/// endpoints in the same steps; each step's frames must be the same bytes.
fn fetch_both(
    client: &mut Client,
    other: &mut Client,
    topic: &str,
    partitions: usize,
    version: i16,
    partition_max_bytes: i32,
    max_bytes: i32,
) -> Vec<Vec<Fetched>> {
    let mut fetched = vec![Vec::new(); partitions];
    let mut offsets = vec![0i64; partitions];
    loop {
        let request = fetch_all_request(topic, &offsets, partition_max_bytes, max_bytes);
        let sent = client.send_for_frame(&request, version, Duration::ZERO);
        let read = other.send_for_frame(&request, version, Duration::ZERO);
        assert!(sent[4..] == read[4..], "v{version}: the same frame but for the correlation id");
        let mut any = false;
        for (partition, records) in fetched_records(sent, version) {
            let p = partition as usize;
            let new: Vec<_> = records.into_iter().filter(|r| r.0 >= offsets[p]).collect();
            offsets[p] = new.last().map_or(offsets[p], |r| r.0 + 1);
            any |= !new.is_empty();
            fetched[p].extend(new);
        }
        if !any {
            return fetched;
        }
    }
}

/// Grows `topic` to `count` partitions; the answer's code and message.
fn create_partitions(client: &mut Client, topic: &str, count: i32, validate_only: bool) -> (i16, Option<String>) {
    use kafka_protocol::messages::CreatePartitionsRequest;
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    let mut asked = CreatePartitionsTopic::default();
    (asked.name, asked.count) = (name(topic), count);
    let mut request = CreatePartitionsRequest::default();
    (request.topics, request.timeout_ms, request.validate_only) = (vec![asked], 5000, validate_only);
    let response = client.send(&request, 3);
    let result = &response.results[0];
    (result.error_code, result.error_message.as_ref().map(|m| m.to_string()))
}

/// Alters one resource's settings: (name, operation, value) each.
fn alter_configs(
    client: &mut Client,
    resource_type: i8,
    resource: &str,
    changes: &[(&str, i8, Option<&str>)],
    validate_only: bool,
) -> (i16, Option<String>) {
    use kafka_protocol::messages::IncrementalAlterConfigsRequest;
    use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let mut asked = AlterConfigsResource::default();
    (asked.resource_type, asked.resource_name) = (resource_type, StrBytes::from_string(resource.to_owned()));
    asked.configs = changes
        .iter()
        .map(|(n, op, value)| {
            let mut config = AlterableConfig::default();
            config.name = StrBytes::from_string((*n).to_owned());
            config.config_operation = *op;
            config.value = value.map(|v| StrBytes::from_string(v.to_owned()));
            config
        })
        .collect();
    let mut request = IncrementalAlterConfigsRequest::default();
    (request.resources, request.validate_only) = (vec![asked], validate_only);
    let response = client.send(&request, 1);
    let result = &response.responses[0];
    (result.error_code, result.error_message.as_ref().map(|m| m.to_string()))
}

/// A topic's setting as DescribeConfigs answers it.
fn described(client: &mut Client, topic: &str, setting: &str) -> String {
    use kafka_protocol::messages::DescribeConfigsRequest;
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    let mut resource = DescribeConfigsResource::default();
    (resource.resource_type, resource.resource_name) = (2, StrBytes::from_string(topic.to_owned()));
    resource.configuration_keys = None;
    let mut request = DescribeConfigsRequest::default();
    request.resources = vec![resource];
    let response = client.send(&request, 4);
    let configs = &response.results[0].configs;
    let found = configs.iter().find(|c| c.name.as_str() == setting).unwrap_or_else(|| panic!("{setting} described"));
    found.value.as_ref().unwrap().to_string()
}

#[test]
fn topics_grow_partitions_and_change_settings_live_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, endpoint) = start(dir.path());
    engine.execute("CREATE SOURCE ev (k BIGINT) FROM TOPIC 'ev' FORMAT JSON").unwrap();
    let mut client = Client::connect(endpoint.addr());
    assert_eq!(create_topic(&mut client, "g", 1, &[]).0, 0);
    assert_eq!(produce(&mut client, "g", 1, batch(&[("a", "1")], 1_000), 8), (0, 0));
    // Only ever more partitions; a check changes nothing.
    assert_eq!(create_partitions(&mut client, "g", 4, true).0, 0);
    assert_eq!(metadata(&mut client, Some(&["g"]), false, 12), vec![("g".to_owned(), 0, 2)]);
    assert_eq!(create_partitions(&mut client, "g", 4, false).0, 0);
    assert_eq!(metadata(&mut client, Some(&["g"]), false, 12), vec![("g".to_owned(), 0, 4)]);
    assert_eq!(produce(&mut client, "g", 3, batch(&[("b", "2")], 1_000), 8), (0, 0));
    for (count, code) in [(4, ResponseError::InvalidPartitions), (2, ResponseError::InvalidPartitions)] {
        let (got, message) = create_partitions(&mut client, "g", count, false);
        assert_eq!(got, code.code(), "{count}: {message:?}");
        assert!(message.unwrap().contains("has 4 partitions"));
    }
    let (code, message) = create_partitions(&mut client, "ev", 3, false);
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert!(message.unwrap().contains("DROP SOURCE ev"));
    assert_eq!(create_partitions(&mut client, "view.x", 3, false).0, ResponseError::TopicAuthorizationFailed.code());
    assert_eq!(create_partitions(&mut client, "nope", 3, false).0, ResponseError::UnknownTopicOrPartition.code());

    // SET and DELETE (back to the default); a check changes nothing.
    let set = |value| vec![("retention.ms", 0i8, Some(value)), ("segment.bytes", 0, Some("100000"))];
    assert_eq!(alter_configs(&mut client, 2, "g", &set("5000"), true).0, 0);
    assert_eq!(described(&mut client, "g", "retention.ms"), "604800000");
    assert_eq!(alter_configs(&mut client, 2, "g", &set("5000"), false).0, 0);
    assert_eq!(described(&mut client, "g", "retention.ms"), "5000");
    assert_eq!(described(&mut client, "g", "segment.bytes"), "100000");
    assert_eq!(alter_configs(&mut client, 2, "g", &[("segment.bytes", 1, None)], false).0, 0);
    assert_eq!(described(&mut client, "g", "segment.bytes"), "1073741824");
    for (changes, needle) in [
        (vec![("cleanup.policy", 0i8, Some("compact"))], "fixed at creation"),
        (vec![("compression.type", 0, Some("zstd"))], "compression.type"),
        (vec![("segment.bytes", 0, Some("10"))], "segment_bytes"),
        (vec![("retention.ms", 2, Some("1"))], "APPEND and SUBTRACT"),
    ] {
        let (code, message) = alter_configs(&mut client, 2, "g", &changes, false);
        assert_eq!(code, ResponseError::InvalidConfig.code(), "{changes:?}: {message:?}");
        assert!(message.as_deref().unwrap_or("").contains(needle), "{changes:?}: {message:?}");
    }
    assert_eq!(described(&mut client, "g", "retention.ms"), "5000", "a refused change changes nothing");
    assert_eq!(alter_configs(&mut client, 4, "0", &set("1"), false).0, ResponseError::InvalidRequest.code());
    assert_eq!(
        alter_configs(&mut client, 2, "table.t", &set("1"), false).0,
        ResponseError::TopicAuthorizationFailed.code()
    );

    // Both outlive a restart, and the grown partitions hold their records.
    drop((client, endpoint, engine));
    let (_engine, endpoint) = start(dir.path());
    let mut client = Client::connect(endpoint.addr());
    assert_eq!(metadata(&mut client, Some(&["g"]), false, 12), vec![("g".to_owned(), 0, 4)]);
    assert_eq!(described(&mut client, "g", "retention.ms"), "5000");
    let response = client.send(&fetch_request("g", 3, 0, 0), 12);
    let records = records_of(response.responses[0].partitions[0].records.as_ref().unwrap());
    assert_eq!(records, vec![(0, "b".to_owned(), "2".to_owned())]);
}
