//! How operator state and checkpoint metadata are encoded: postcard 1.x
//! (serde; a documented, stable wire format; see docs/state.md).
//!
//! Invariant: `decode(encode(x)) == x`, and equal values encode to equal
//! bytes (state keys are compared as bytes).

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};

pub(crate) fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    postcard::to_stdvec(value).expect("in-memory postcard encoding cannot fail")
}

pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T> {
    postcard::from_bytes(bytes).map_err(|e| Error::CorruptState { what: what.to_owned(), reason: e.to_string() })
}

/// `encode(&count)` for an `i64`, without serde: postcard's zigzag LEB128
/// varint (a view fold writes one per changed row).
pub(crate) fn encode_count(count: i64) -> Vec<u8> {
    let mut zigzag = ((count << 1) ^ (count >> 63)) as u64;
    let mut out = Vec::with_capacity(10);
    while zigzag >= 0x80 {
        out.push(zigzag as u8 | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
    out
}

#[cfg(test)]
mod tests {
    use super::{encode, encode_count};

    #[test]
    fn a_count_encodes_as_postcard_encodes_it() {
        let edges = [0, 1, -1, 63, 64, -64, -65, 127, 128, 8191, 8192, i64::MAX, i64::MIN, i64::MAX - 1, i64::MIN + 1];
        let powers = (0..63).flat_map(|shift| [1i64 << shift, -(1i64 << shift), (1i64 << shift) - 1]);
        for count in edges.into_iter().chain(powers) {
            assert_eq!(encode_count(count), encode(&count), "{count}");
        }
    }
}
