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

/// Appends `value`'s encoding to `bytes`: [`encode`] without a new vector.
pub(crate) fn encode_into<T: Serialize + ?Sized>(value: &T, bytes: &mut Vec<u8>) {
    let buffer = std::mem::take(bytes);
    *bytes = postcard::to_extend(value, buffer).expect("in-memory postcard encoding cannot fail");
}

pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T> {
    postcard::from_bytes(bytes).map_err(|e| Error::CorruptState { what: what.to_owned(), reason: e.to_string() })
}
