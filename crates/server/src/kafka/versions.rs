//! The ApiVersions answer: the served table ([`millpond_kafka_frame::versions`]),
//! or, for a version not served, UNSUPPORTED_VERSION at v0 with the table,
//! as Kafka does.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
pub(crate) use millpond_kafka_frame::versions::{SERVED, advertised};

use super::frame::{Body, FrameError, Request};

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
    if !advertised(ApiKey::ApiVersions, request.version()) {
        response.error_code = ResponseError::UnsupportedVersion.code();
        return Body::encode(&response, 0);
    }
    // Decoded for its checks only (client name and version are not kept).
    let _: ApiVersionsRequest = request.decode()?;
    Body::encode(&response, request.version())
}
