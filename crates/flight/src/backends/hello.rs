//! Flight's hello route, the benchmark's subject.

use bytes::Bytes;
use http::StatusCode;
use serve::Reply;

use crate::routes::Fragment;

/// Serialized once: the body never changes, so serializing per request would only measure serde.
const HELLO: &[u8] = br#"{"message":"Hello from Flight!"}"#;

pub fn routes() -> Fragment {
    Fragment::new("hello")
        .get("/api/hello", |_req| Reply::now(serve::json_bytes(StatusCode::OK, Bytes::from_static(HELLO))))
}
