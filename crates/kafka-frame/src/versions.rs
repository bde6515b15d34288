//! What the endpoint serves: each API key with its version range, as
//! ApiVersions advertises it.
//!
//! Invariants: a request is decoded only at a version advertised here;
//! every advertised version decodes with `kafka-protocol` (whose ranges
//! contain these, checked by a test), but for Produce v0-2 and
//! OffsetCommit v1, advertised as Kafka 3 did so that older librdkafka
//! (which checks for ranges from those versions) accepts the broker, and
//! refused by closing the connection (magic 2 batches need Produce v3;
//! Kafka 4 removed OffsetCommit v0-1). Those clients send their newest
//! version anyway.

use kafka_protocol::messages::ApiKey;

/// Each served API with the versions served.
pub const SERVED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 0, 11),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 6),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 4),
    (ApiKey::OffsetCommit, 1, 8),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    // Transactions, transaction.version 1: clients add partitions
    // themselves (AddPartitionsToTxn v4+ is between brokers, EndTxn v5+ is
    // transaction.version 2).
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::TxnOffsetCommit, 0, 3),
    (ApiKey::EndTxn, 0, 3),
    // From 0, as librdkafka before 2.11.1 looks for; a client that then
    // sends v0's raw, unframed tokens instead of SaslAuthenticate is closed.
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// The lowest Produce version decoded (the first with magic 2 batches).
pub const PRODUCE_VERSION_MIN_DECODED: i16 = 3;
/// The lowest OffsetCommit version decoded (Kafka 4 removed 0 and 1).
pub const OFFSET_COMMIT_VERSION_MIN_DECODED: i16 = 2;

/// The lowest version of `api_key` decoded, where it is above the lowest advertised.
pub fn decoded_from(api_key: ApiKey) -> Option<i16> {
    match api_key {
        ApiKey::Produce => Some(PRODUCE_VERSION_MIN_DECODED),
        ApiKey::OffsetCommit => Some(OFFSET_COMMIT_VERSION_MIN_DECODED),
        _ => None,
    }
}

/// Whether `version` of `api_key` is served (and so may be decoded).
pub fn advertised(api_key: ApiKey, version: i16) -> bool {
    if decoded_from(api_key).is_some_and(|min| version < min) {
        return false;
    }
    SERVED.iter().any(|&(key, min, max)| key == api_key && (min..=max).contains(&version))
}

#[cfg(test)]
mod tests {
    use super::SERVED;

    #[test]
    fn every_served_version_is_one_the_codec_knows() {
        for &(key, min, max) in SERVED {
            let known = key.valid_versions();
            let decoded_min = super::decoded_from(key).unwrap_or(min);
            assert!(known.min <= decoded_min && max <= known.max, "{key:?} {min}..={max} against {known:?}");
        }
    }
}
