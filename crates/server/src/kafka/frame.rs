//! Kafka's framing: every request and response is a 4-byte big-endian size
//! and that many bytes; a request starts with its header (API key, version,
//! correlation id, client id, and tagged fields from header version 2), a
//! response with the request's correlation id (and tagged fields from
//! response header version 1).
//!
//! Invariants: a frame is read whole before anything of it is decoded, and
//! only if its size is at least a header's and at most the configured cap;
//! a response frame's size is the bytes that follow it (asserted as it is
//! written).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, decode_request_header_from_buffer};
use millpond_dataflow::StoredSlice;
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
pub(crate) enum FrameError {
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

impl FrameError {
    pub(crate) fn join(error: tokio::task::JoinError) -> FrameError {
        FrameError::Handler(error.to_string())
    }
}

/// A request read whole: its header decoded, its body not yet.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) api_key: ApiKey,
    pub(crate) header: RequestHeader,
    body: Bytes,
}

impl Request {
    pub(crate) fn version(&self) -> i16 {
        self.header.request_api_version
    }

    /// The body as the request's message type, at its version.
    pub(crate) fn decode<T: Decodable>(&self) -> Result<T, FrameError> {
        let mut body = self.body.clone();
        T::decode(&mut body, self.version())
            .map_err(|e| FrameError::Decode(format!("{:?} v{}: {e:#}", self.api_key, self.version())))
    }
}

/// A response body, encoded at the request's version: bytes, and stored
/// batches to be sent from their segment files at positions in them.
#[derive(Debug)]
pub(crate) struct Body {
    bytes: BytesMut,
    /// Each slice goes before the byte at its position; positions ascend.
    stored: Vec<(usize, StoredSlice)>,
}

impl Body {
    pub(crate) fn encode<T: Encodable>(message: &T, version: i16) -> Result<Body, FrameError> {
        let mut bytes = BytesMut::new();
        message.encode(&mut bytes, version).map_err(|e| FrameError::Encode(format!("{e:#}")))?;
        Ok(Body { bytes, stored: Vec::new() })
    }

    /// A body encoded by hand around stored batches (a Fetch answer).
    pub(crate) fn with_stored(bytes: BytesMut, stored: Vec<(usize, StoredSlice)>) -> Body {
        assert!(stored.windows(2).all(|w| w[0].0 <= w[1].0), "stored slices in order");
        assert!(stored.last().is_none_or(|(at, _)| *at <= bytes.len()), "stored slices inside the body");
        Body { bytes, stored }
    }

    fn len(&self) -> usize {
        self.bytes.len() + self.stored.iter().map(|(_, slice)| slice.len() as usize).sum::<usize>()
    }
}

/// Response frames to send: their bytes, and stored batches to be sent
/// from their files between them ([`super::send`]).
#[derive(Debug, Default)]
pub(crate) struct Outgoing {
    pub(crate) bytes: BytesMut,
    /// Each slice goes before the byte at its position in `bytes`; positions ascend.
    pub(crate) stored: Vec<(usize, StoredSlice)>,
}

impl Outgoing {
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.stored.clear();
    }

    /// Every byte to be sent.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len() + self.stored.iter().map(|(_, slice)| slice.len() as usize).sum::<usize>()
    }
}

/// How much of a frame is read, and how long it may take.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadLimits {
    pub(crate) max_bytes: usize,
    /// Until a frame's first byte.
    pub(crate) idle: Duration,
    /// From its first byte to its last.
    pub(crate) rest: Duration,
}

/// Reads the next request frame; `None` at a clean end of the stream (no
/// byte of a next frame read).
pub(crate) async fn read_request<R: AsyncRead + Unpin>(
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
    let mut frame = BytesMut::zeroed(size as usize);
    timeout_at(deadline, reader.read_exact(&mut frame)).await.map_err(rest("the rest of a frame"))??;
    parse(frame.freeze()).map(Some)
}

/// Splits a frame into its decoded header and its body. A request for a
/// version that is not advertised keeps the raw correlation id only (an
/// ApiVersions of an unknown version is still answered).
fn parse(mut frame: Bytes) -> Result<Request, FrameError> {
    debug_assert!(frame.len() >= HEADER_BYTES_MIN);
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api_key = ApiKey::try_from(key).map_err(|()| FrameError::UnknownApi(key))?;
    if !super::versions::advertised(api_key, version) {
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

/// A string field of a response.
pub(crate) fn text(s: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.to_owned())
}

/// Appends the response frame for `request` (its size, header and body) to `out`.
pub(crate) fn write_response(out: &mut Outgoing, request: &RequestHeader, body: Body) -> Result<(), FrameError> {
    let api_key =
        ApiKey::try_from(request.request_api_key).map_err(|()| FrameError::UnknownApi(request.request_api_key))?;
    let header_version = api_key.response_header_version(request.request_api_version);
    let (start, start_len) = (out.bytes.len(), out.len());
    out.bytes.put_i32(0);
    let mut header = ResponseHeader::default();
    header.correlation_id = request.correlation_id;
    header.encode(&mut out.bytes, header_version).map_err(|e| FrameError::Encode(format!("{e:#}")))?;
    let (body_start, body_len) = (out.bytes.len(), body.len());
    out.bytes.extend_from_slice(&body.bytes);
    out.stored.extend(body.stored.into_iter().map(|(at, slice)| (body_start + at, slice)));
    let size = out.len() - start_len - 4;
    debug_assert_eq!(size, body_start - start - 4 + body_len);
    let size = i32::try_from(size).map_err(|_| FrameError::Encode(format!("a response of {size} bytes")))?;
    out.bytes[start..start + 4].copy_from_slice(&size.to_be_bytes());
    debug_assert_eq!((&out.bytes[start..]).get_i32() as usize, out.len() - start_len - 4);
    Ok(())
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::*;
    use proptest::prelude::*;

    use super::*;

    /// Decodes `request`'s body as its API's message, as the endpoint would.
    fn decode_served(request: &Request) -> Result<(), FrameError> {
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
            ApiKey::SaslHandshake => request.decode::<SaslHandshakeRequest>().map(drop),
            ApiKey::SaslAuthenticate => request.decode::<SaslAuthenticateRequest>().map(drop),
            other => panic!("{other:?} is served but not decoded here"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

        /// Any bytes after a served API key and version: the header and the
        /// body decode or fail, never panic, and never allocate for a count
        /// the frame cannot hold (that aborted the process before the patch).
        #[test]
        fn any_frame_of_a_served_api_decodes_or_fails_cleanly(
            served in 0..super::super::versions::SERVED.len(),
            version_pick in any::<u16>(),
            rest in proptest::collection::vec(any::<u8>(), 4..600),
            counts in proptest::collection::vec((any::<prop::sample::Index>(), prop_oneof![Just(0x7fff_ffffu32), Just(0x0100_0000), any::<u32>()]), 0..3),
        ) {
            let (key, min, max) = super::super::versions::SERVED[served];
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
                && super::super::versions::advertised(request.api_key, request.version())
            {
                let _ = decode_served(&request);
            }
        }
    }
}
