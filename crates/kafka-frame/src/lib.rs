//! The Kafka endpoint's request side, alone: frames read whole under a
//! size cap and deadlines (`request`), headers parsed, and the table of
//! served APIs and versions (`versions`). It has no storage and no runtime
//! behind it, so the fuzz target (`fuzz/fuzz_targets/kafka_request.rs`)
//! drives exactly the decoder the server runs. Responses, and everything a
//! request does, are in `millpond-server`'s `kafka` module.

#![forbid(unsafe_code)]

pub mod request;
pub mod versions;

pub use request::{FrameError, REQUEST_BYTES_MAX_DEFAULT, ReadLimits, Request, decode_served, parse, read_request};
