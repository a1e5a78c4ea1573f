use bytes::Bytes;
use http::header::{CONNECTION, CONTENT_TYPE};
use http::{HeaderValue, StatusCode};

use crate::{Body, Response};

const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// A JSON response from bytes that are already serialized (the hot paths pre-serialize).
pub fn json_bytes(status: StatusCode, body: impl Into<Bytes>) -> Response {
    let mut res = Response::new(Body::Full(body.into()));
    *res.status_mut() = status;
    res.headers_mut().insert(CONTENT_TYPE, JSON);
    res
}

/// A JSON response. Serializing a `serde_json::Value` or a derived struct cannot fail, so neither can this.
pub fn json<T: serde::Serialize + ?Sized>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => json_bytes(status, bytes),
        Err(e) => {
            tracing::error!(error = %e, "response failed to serialize");
            error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
        }
    }
}

/// The error shape every server here uses: `{"error": "…"}`. Callers pass a message fit for the client;
/// 5xx details belong in the log, not here.
pub fn error(status: StatusCode, message: &str) -> Response {
    json(status, &serde_json::json!({ "error": message }))
}

/// 503 with `Retry-After: 1`: a dependency is down, come back shortly.
pub fn unavailable(message: &str) -> Response {
    let mut res = error(StatusCode::SERVICE_UNAVAILABLE, message);
    res.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    res
}

/// 413, closing the connection: the body was not read, so the connection cannot carry another request.
pub fn payload_too_large(limit: u64) -> Response {
    let mut res = error(StatusCode::PAYLOAD_TOO_LARGE, &format!("request body exceeds the limit of {limit} bytes"));
    res.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    res
}

/// 501, closing the connection: a Transfer-Encoding other than exactly `chunked` (RFC 9112 §6.1: a server
/// that does not understand a transfer coding answers 501). Read as chunked, `gzip, chunked` would hand the
/// handler still-compressed bytes as if they were the body; the body was not read, so the connection closes.
pub fn unsupported_transfer_encoding() -> Response {
    let mut res = error(StatusCode::NOT_IMPLEMENTED, "only Transfer-Encoding: chunked is supported");
    res.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    res
}
