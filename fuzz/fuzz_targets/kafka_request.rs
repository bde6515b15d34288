//! Bytes as a Kafka request frame (what follows its size): the header is
//! parsed and, at a served version, the body decoded as its API's message
//! (`millpond_kafka_frame`, the decoder `millpond serve --kafka-listen`
//! runs). An error, never a panic, and never an allocation past libFuzzer's
//! malloc limit (kafka-protocol 0.18 reserved counts read off the wire;
//! vendor/kafka-protocol checks them against the bytes left).
#![no_main]

use libfuzzer_sys::fuzz_target;
use millpond_kafka_frame::{decode_served, parse, versions};

fuzz_target!(|data: &[u8]| {
    let Ok(request) = parse(bytes::Bytes::copy_from_slice(data)) else { return };
    if versions::advertised(request.api_key, request.version()) {
        let _ = decode_served(&request);
    }
});
