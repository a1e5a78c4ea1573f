use bytes::Bytes;
use http::header::{ALLOW, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
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

/// Appends `s` as a JSON string. serde_json escapes exactly what `JSON.stringify` does for well-formed
/// strings: `"`, `\`, and control characters (`\b \f \n \r \t` by name, the rest as lower-case `\u00xx`);
/// U+2028/2029 and non-ASCII stay raw. Strings with nothing to escape (most) are copied without serde_json.
pub fn push_json_str(out: &mut Vec<u8>, s: &str) {
    if !needs_escapes(s) {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else if let Err(e) = serde_json::to_writer(&mut *out, s) {
        // Writing to a Vec cannot fail; keep the body valid JSON regardless.
        tracing::error!(error = %e, "string failed to serialize");
        out.extend_from_slice(b"null");
    }
}

/// [`push_json_str`] without the quotes, for a string written in pieces.
pub fn push_json_str_contents(out: &mut Vec<u8>, s: &str) {
    if !needs_escapes(s) {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    // serde_json's escaper writes the quotes too (its quote-less one is private): write, then drop them.
    let start = out.len();
    if let Err(e) = serde_json::to_writer(&mut *out, s) {
        // Writing to a Vec cannot fail.
        tracing::error!(error = %e, "string failed to serialize");
        out.truncate(start);
        return;
    }
    let end = out.len() - 1;
    out.copy_within(start + 1..end, start);
    out.truncate(end - 1);
}

/// Whether JSON needs anything in `s` escaped: a quote, a backslash or a control character.
fn needs_escapes(s: &str) -> bool {
    s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\')
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

/// 404 `{"error":"not found"}`: no route (or no file) for this path.
pub fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "not found")
}

/// 405 `{"error":"method not allowed"}` with the path's methods in `Allow` (RFC 9110 §15.5.6 requires it).
pub fn method_not_allowed(allow: HeaderValue) -> Response {
    let mut res = error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    res.headers_mut().insert(ALLOW, allow);
    res
}

/// 503 with `Retry-After: 1`: a dependency is down, come back shortly.
pub fn unavailable(message: &str) -> Response {
    let mut res = error(StatusCode::SERVICE_UNAVAILABLE, message);
    res.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
    res
}

/// 413, closing the connection: the body was not read, so the connection cannot carry another request.
pub fn payload_too_large(limit: u64) -> Response {
    let mut res = error(StatusCode::PAYLOAD_TOO_LARGE, &format!("request body exceeds the limit of {limit} bytes"));
    res.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    res
}

/// 408, closing the connection: the request body stalled (`--io-timeout`) or arrived below
/// `--min-data-rate`, so the rest of it will never be read.
pub fn request_timeout() -> Response {
    let mut res = error(StatusCode::REQUEST_TIMEOUT, "request body arrived too slowly");
    res.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    res
}

/// The 408 written straight to the socket when a request head does not arrive in time (`--header-timeout`,
/// `--min-data-rate`): hyper answers nothing to an IO error, and no response of hyper's is in progress then.
pub(crate) const HEAD_TIMEOUT: &[u8] = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n\
content-length: 43\r\nconnection: close\r\n\r\n{\"error\":\"request head arrived too slowly\"}";

/// 501, closing the connection: a Transfer-Encoding other than exactly `chunked` (RFC 9112 §6.1: a server
/// that does not understand a transfer coding answers 501). Read as chunked, `gzip, chunked` would hand the
/// handler still-compressed bytes as if they were the body; the body was not read, so the connection closes.
pub fn unsupported_transfer_encoding() -> Response {
    let mut res = error(StatusCode::NOT_IMPLEMENTED, "only Transfer-Encoding: chunked is supported");
    res.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    res
}

#[cfg(test)]
mod tests {
    #[test]
    fn contents_are_the_string_without_its_quotes() {
        for s in ["plain", "a \"quote\" and \\", "tab\tnew\nline\u{1}", "é😀\u{2028}", ""] {
            let (mut whole, mut contents) = (Vec::new(), b"[".to_vec());
            super::push_json_str(&mut whole, s);
            super::push_json_str_contents(&mut contents, s);
            assert_eq!(
                format!("\"{}\"", String::from_utf8_lossy(&contents[1..])),
                String::from_utf8_lossy(&whole),
                "{s:?}"
            );
        }
    }

    #[test]
    fn the_head_timeout_answer_declares_its_own_length() {
        let text = std::str::from_utf8(super::HEAD_TIMEOUT).expect("ASCII");
        let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
        assert!(serde_json::from_str::<serde_json::Value>(body).is_ok(), "{body}");
    }
}
