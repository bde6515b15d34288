//! Kafka's request frames: every request is a 4-byte big-endian size and
//! that many bytes, starting with its header (API key, version,
//! correlation id, client id, and tagged fields from header version 2).
//!
//! Invariants: a frame is read whole before anything of it is decoded, and
//! only if its size is at least a header's and at most the configured cap;
//! a body is decoded only at a version [`crate::versions`] serves, by
//! kafka-protocol patched to check every count it reads against the bytes
//! left (vendor/kafka-protocol/README.millpond.md), so no frame allocates
//! more than its own size.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, decode_request_header_from_buffer};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::{timeout, timeout_at};

/// The largest request read by default: a produced batch is at most 1 MiB
/// in Kafka's defaults (`max.request.size`), 16 leaves room for larger ones.
pub const REQUEST_BYTES_MAX_DEFAULT: usize = 16 * 1024 * 1024;

/// API key (2), version (2) and correlation id (4): the shortest header.
const HEADER_BYTES_MIN: usize = 8;

/// Why a connection is closed without an answer.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("reading the socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("a frame of {size} bytes (allowed: {min}..={max})")]
    Size { size: i64, min: usize, max: usize },
    #[error("waited too long for {0}")]
    Timeout(&'static str),
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    #[error("API key {api_key} version {version} is not served here")]
    Unsupported { api_key: i16, version: i16 },
    #[error("a request that does not decode: {0}")]
    Decode(String),
    #[error("a response that does not encode: {0}")]
    Encode(String),
    #[error("a request's handler failed: {0}")]
    Handler(String),
}

/// A request read whole: its header decoded, its body not yet.
#[derive(Debug)]
pub struct Request {
    pub api_key: ApiKey,
    pub header: RequestHeader,
    body: Bytes,
}

impl Request {
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }

    /// The body as the request's message type, at its version.
    pub fn decode<T: Decodable>(&self) -> Result<T, FrameError> {
        let mut body = self.body.clone();
        T::decode(&mut body, self.version())
            .map_err(|e| FrameError::Decode(format!("{:?} v{}: {e:#}", self.api_key, self.version())))
    }
}

/// How much of a frame is read, and how long it may take.
#[derive(Clone, Copy, Debug)]
pub struct ReadLimits {
    pub max_bytes: usize,
    /// Until a frame's first byte.
    pub idle: Duration,
    /// From its first byte to its last.
    pub rest: Duration,
}

/// Reads the next request frame; `None` at a clean end of the stream (no
/// byte of a next frame read).
pub async fn read_request<R: AsyncRead + Unpin>(
    reader: &mut R,
    limits: ReadLimits,
) -> Result<Option<Request>, FrameError> {
    let mut size = [0u8; 4];
    let first = timeout(limits.idle, reader.read_u8()).await.map_err(|_| FrameError::Timeout("a request"))?;
    size[0] = match first {
        Ok(byte) => byte,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let deadline = tokio::time::Instant::now() + limits.rest;
    let rest = |what| move |_| FrameError::Timeout(what);
    timeout_at(deadline, reader.read_exact(&mut size[1..])).await.map_err(rest("a frame's size"))??;
    let size = i32::from_be_bytes(size);
    if size < HEADER_BYTES_MIN as i32 || size as usize > limits.max_bytes {
        return Err(FrameError::Size { size: i64::from(size), min: HEADER_BYTES_MIN, max: limits.max_bytes });
    }
    // Read into spare capacity, never zeroed first (a produced batch is
    // hundreds of KiB), and never past the frame (the next one follows).
    let size = size as usize;
    let mut frame = BytesMut::with_capacity(size);
    let mut limited = reader.take(size as u64);
    while frame.len() < size {
        let read = timeout_at(deadline, limited.read_buf(&mut frame)).await.map_err(rest("the rest of a frame"))??;
        if read == 0 {
            return Err(FrameError::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
    }
    debug_assert_eq!(frame.len(), size);
    parse(frame.freeze()).map(Some)
}

/// Splits a frame (without its size) into its decoded header and its body. A request for a
/// version that is not advertised keeps the raw correlation id only (an
/// ApiVersions of an unknown version is still answered).
pub fn parse(mut frame: Bytes) -> Result<Request, FrameError> {
    if frame.len() < HEADER_BYTES_MIN {
        return Err(FrameError::Size { size: frame.len() as i64, min: HEADER_BYTES_MIN, max: usize::MAX });
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api_key = ApiKey::try_from(key).map_err(|()| FrameError::UnknownApi(key))?;
    if !crate::versions::advertised(api_key, version) {
        let mut header = RequestHeader::default();
        header.request_api_key = key;
        header.request_api_version = version;
        header.correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
        return Ok(Request { api_key, header, body: Bytes::new() });
    }
    let header =
        decode_request_header_from_buffer(&mut frame).map_err(|e| FrameError::Decode(format!("header: {e:#}")))?;
    Ok(Request { api_key, header, body: frame })
}

/// Decodes `request`'s body as its served API's message type (the types
/// the endpoint's handlers decode), for tests and the fuzz target.
pub fn decode_served(request: &Request) -> Result<(), FrameError> {
    use kafka_protocol::messages::*;
    match request.api_key {
        ApiKey::Produce => request.decode::<ProduceRequest>().map(drop),
        ApiKey::Fetch => request.decode::<FetchRequest>().map(drop),
        ApiKey::ListOffsets => request.decode::<ListOffsetsRequest>().map(drop),
        ApiKey::Metadata => request.decode::<MetadataRequest>().map(drop),
        ApiKey::ApiVersions => request.decode::<ApiVersionsRequest>().map(drop),
        ApiKey::InitProducerId => request.decode::<InitProducerIdRequest>().map(drop),
        ApiKey::FindCoordinator => request.decode::<FindCoordinatorRequest>().map(drop),
        ApiKey::JoinGroup => request.decode::<JoinGroupRequest>().map(drop),
        ApiKey::SyncGroup => request.decode::<SyncGroupRequest>().map(drop),
        ApiKey::Heartbeat => request.decode::<HeartbeatRequest>().map(drop),
        ApiKey::LeaveGroup => request.decode::<LeaveGroupRequest>().map(drop),
        ApiKey::OffsetCommit => request.decode::<OffsetCommitRequest>().map(drop),
        ApiKey::OffsetFetch => request.decode::<OffsetFetchRequest>().map(drop),
        ApiKey::DescribeGroups => request.decode::<DescribeGroupsRequest>().map(drop),
        ApiKey::ListGroups => request.decode::<ListGroupsRequest>().map(drop),
        ApiKey::CreateTopics => request.decode::<CreateTopicsRequest>().map(drop),
        ApiKey::DeleteTopics => request.decode::<DeleteTopicsRequest>().map(drop),
        ApiKey::DescribeConfigs => request.decode::<DescribeConfigsRequest>().map(drop),
        ApiKey::CreatePartitions => request.decode::<CreatePartitionsRequest>().map(drop),
        ApiKey::IncrementalAlterConfigs => request.decode::<IncrementalAlterConfigsRequest>().map(drop),
        ApiKey::AddPartitionsToTxn => request.decode::<AddPartitionsToTxnRequest>().map(drop),
        ApiKey::AddOffsetsToTxn => request.decode::<AddOffsetsToTxnRequest>().map(drop),
        ApiKey::TxnOffsetCommit => request.decode::<TxnOffsetCommitRequest>().map(drop),
        ApiKey::EndTxn => request.decode::<EndTxnRequest>().map(drop),
        ApiKey::SaslHandshake => request.decode::<SaslHandshakeRequest>().map(drop),
        ApiKey::SaslAuthenticate => request.decode::<SaslAuthenticateRequest>().map(drop),
        other => Err(FrameError::Unsupported { api_key: other as i16, version: request.version() }),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn limits() -> ReadLimits {
        ReadLimits { max_bytes: 1 << 20, idle: Duration::from_secs(5), rest: Duration::from_secs(5) }
    }

    /// A Heartbeat v0 frame (size included) with `correlation_id`.
    fn heartbeat(correlation_id: i32) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&12i16.to_be_bytes());
        body.extend_from_slice(&0i16.to_be_bytes());
        body.extend_from_slice(&correlation_id.to_be_bytes());
        body.extend_from_slice(&(-1i16).to_be_bytes()); // no client id
        for text in ["group", "member"] {
            body.extend_from_slice(&(text.len() as i16).to_be_bytes());
            body.extend_from_slice(text.as_bytes());
            if text == "group" {
                body.extend_from_slice(&7i32.to_be_bytes()); // generation
            }
        }
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        frame
    }

    #[tokio::test]
    async fn frames_are_read_one_at_a_time_whole_and_a_cut_one_is_an_error() {
        let mut bytes = [heartbeat(1), heartbeat(2)].concat();
        let cut = heartbeat(3);
        bytes.extend_from_slice(&cut[..cut.len() - 3]);
        let mut reader = &bytes[..];
        for expected in [1, 2] {
            let request = read_request(&mut reader, limits()).await.unwrap().expect("a frame");
            assert_eq!(request.header.correlation_id, expected, "no byte of the next frame is taken");
            decode_served(&request).unwrap();
        }
        let cut = read_request(&mut reader, limits()).await;
        assert!(matches!(cut, Err(FrameError::Io(ref e)) if e.kind() == std::io::ErrorKind::UnexpectedEof), "{cut:?}");
        let mut empty: &[u8] = &[];
        assert!(read_request(&mut empty, limits()).await.unwrap().is_none(), "a clean end");
    }

    #[test]
    fn every_served_api_has_a_message_type_to_decode() {
        for &(api_key, _, max) in crate::versions::SERVED {
            let mut header = RequestHeader::default();
            (header.request_api_key, header.request_api_version) = (api_key as i16, max);
            let request = Request { api_key, header, body: Bytes::new() };
            let decoded = decode_served(&request);
            assert!(!matches!(decoded, Err(FrameError::Unsupported { .. })), "{api_key:?}: {decoded:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

        /// Any bytes after a served API key and version: the header and the
        /// body decode or fail, never panic, and never allocate for a count
        /// the frame cannot hold (that aborted the process before the patch).
        #[test]
        fn any_frame_of_a_served_api_decodes_or_fails_cleanly(
            served in 0..crate::versions::SERVED.len(),
            version_pick in any::<u16>(),
            rest in proptest::collection::vec(any::<u8>(), 4..600),
            counts in proptest::collection::vec((any::<prop::sample::Index>(), prop_oneof![Just(0x7fff_ffffu32), Just(0x0100_0000), any::<u32>()]), 0..3),
        ) {
            let (key, min, max) = crate::versions::SERVED[served];
            let version = min + (version_pick % (max - min + 1) as u16) as i16;
            let mut frame = Vec::new();
            frame.extend_from_slice(&(key as i16).to_be_bytes());
            frame.extend_from_slice(&version.to_be_bytes());
            frame.extend_from_slice(&rest);
            // Plant large counts where an array length may sit.
            for (at, count) in counts {
                let at = 4 + at.index(frame.len() - 4);
                let end = (at + 4).min(frame.len());
                frame[at..end].copy_from_slice(&count.to_be_bytes()[..end - at]);
            }
            if let Ok(request) = parse(Bytes::from(frame))
                && crate::versions::advertised(request.api_key, request.version())
            {
                let _ = decode_served(&request);
            }
        }
    }

    /// The fuzz target's seeds are served requests that decode (a seed the
    /// decoder refuses would start the fuzzer from nothing).
    #[test]
    fn every_fuzz_seed_is_a_served_request_that_decodes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/kafka_request");
        let mut seeds = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let request = super::parse(bytes::Bytes::from(std::fs::read(&path).unwrap())).unwrap();
            assert!(crate::versions::advertised(request.api_key, request.version()), "{}", path.display());
            super::decode_served(&request).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
            seeds += 1;
        }
        assert!(seeds >= 10, "{seeds} seeds in {}", dir.display());
    }
}
