//! Kafka's response frames: a 4-byte big-endian size and that many bytes,
//! the request's correlation id first (and tagged fields from response
//! header version 1). Requests are read by `millpond-kafka-frame`.
//!
//! Invariant: a response frame's size is the bytes that follow it,
//! stored batches included (asserted as it is written, and by `send` as it
//! is sent).

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::Encodable;
use millpond_dataflow::StoredSlice;
pub(crate) use millpond_kafka_frame::{FrameError, ReadLimits, Request, read_request};

/// A handler that panicked or was cancelled closes its connection.
pub(crate) fn join(error: tokio::task::JoinError) -> FrameError {
    FrameError::Handler(error.to_string())
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
