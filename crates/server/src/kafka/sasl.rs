//! SASL/PLAIN when the server has a password (`millpond serve --password`,
//! the one the Postgres endpoint's SCRAM uses): SaslHandshake v1 names the
//! mechanism, SaslAuthenticate carries `authzid NUL user NUL password`; any
//! user name is accepted with the password. Until a connection has
//! authenticated, only ApiVersions, SaslHandshake and SaslAuthenticate are
//! answered; anything else closes it. A wrong password is answered
//! SASL_AUTHENTICATION_FAILED and the connection closed.
//!
//! PLAIN sends the password as it is: bind to loopback (the default) or put
//! TLS in front. Without a password, SaslHandshake answers
//! UNSUPPORTED_SASL_MECHANISM and every connection is trusted.
//!
//! Invariant: a connection serves no request but those three before its
//! password matched; the comparison takes the same time wherever the
//! bytes differ.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::frame::{Body, FrameError};

const MECHANISM: &str = "PLAIN";

pub(crate) fn handshake(
    password: Option<&str>,
    request: &SaslHandshakeRequest,
    version: i16,
) -> Result<Body, FrameError> {
    let mut response = SaslHandshakeResponse::default();
    if password.is_some() {
        response.mechanisms = vec![StrBytes::from_static_str(MECHANISM)];
        if request.mechanism.as_str() != MECHANISM {
            response.error_code = ResponseError::UnsupportedSaslMechanism.code();
        }
    } else {
        response.error_code = ResponseError::UnsupportedSaslMechanism.code();
    }
    Body::encode(&response, version)
}

/// The answer, and whether the connection is now authenticated.
pub(crate) fn authenticate(
    password: Option<&str>,
    request: &SaslAuthenticateRequest,
    version: i16,
) -> Result<(Body, bool), FrameError> {
    let mut response = SaslAuthenticateResponse::default();
    let given = request.auth_bytes.split(|b| *b == 0).nth(2);
    let matched = match (password, given) {
        (Some(password), Some(given)) => same(password.as_bytes(), given),
        _ => false,
    };
    if !matched {
        response.error_code = ResponseError::SaslAuthenticationFailed.code();
        response.error_message = Some(StrBytes::from_static_str("authentication failed: wrong password, or not PLAIN"));
    }
    Ok((Body::encode(&response, version)?, matched))
}

/// Compares in time that depends on the lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    let mut differ = u8::from(a.len() != b.len());
    for (i, x) in a.iter().enumerate() {
        differ |= x ^ b.get(i).copied().unwrap_or(!x);
    }
    differ == 0
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn passwords_match_only_when_equal() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret!"));
        assert!(!same(b"secret", b"secre"));
        assert!(!same(b"", b"x"));
        assert!(same(b"", b""));
    }
}
