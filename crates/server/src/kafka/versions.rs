//! The ApiVersions answer: the served table ([`millpond_kafka_frame::versions`]),
//! or, for a version not served, UNSUPPORTED_VERSION at v0 with the table,
//! as Kafka does. From v3 it names the features: `transaction.version`
//! supported and finalized at 1 only (clients add partitions to a
//! transaction themselves; no transaction.version 2 epoch bumps).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
pub(crate) use millpond_kafka_frame::versions::{SERVED, advertised};

use super::frame::{Body, FrameError, Request};

/// The feature that says which transaction protocol the broker speaks.
const TRANSACTION_VERSION: &str = "transaction.version";

/// The ApiVersions answer: the table, or UNSUPPORTED_VERSION at v0 for a
/// version not served.
pub(crate) fn answer(request: &Request) -> Result<Body, FrameError> {
    let mut response = ApiVersionsResponse::default();
    response.api_keys = SERVED
        .iter()
        .map(|&(key, min, max)| {
            let mut version = ApiVersion::default();
            version.api_key = key as i16;
            version.min_version = min;
            version.max_version = max;
            version
        })
        .collect();
    let mut supported = SupportedFeatureKey::default();
    supported.name = super::frame::text(TRANSACTION_VERSION);
    (supported.min_version, supported.max_version) = (1, 1);
    response.supported_features = vec![supported];
    let mut finalized = FinalizedFeatureKey::default();
    finalized.name = super::frame::text(TRANSACTION_VERSION);
    (finalized.min_version_level, finalized.max_version_level) = (1, 1);
    response.finalized_features = vec![finalized];
    response.finalized_features_epoch = 1;
    if !advertised(ApiKey::ApiVersions, request.version()) {
        response.error_code = ResponseError::UnsupportedVersion.code();
        return Body::encode(&response, 0);
    }
    // Decoded for its checks only (client name and version are not kept).
    let _: ApiVersionsRequest = request.decode()?;
    Body::encode(&response, request.version())
}
