//! The shared response helpers and body type, without a socket.

use http::StatusCode;
use http_body::Body as _;
use http_body_util::BodyExt;
use serve::Body;

fn body_json(res: serve::Response) -> serde_json::Value {
    let bytes = res.into_body().as_full().expect("helpers build in-memory bodies").to_vec();
    serde_json::from_slice(&bytes).expect("JSON body")
}

#[test]
fn json_serializes_with_content_type() {
    let res = serve::json(StatusCode::CREATED, &serde_json::json!({ "a": 1, "b": [true] }));
    assert_eq!(res.status(), StatusCode::CREATED);
    assert_eq!(res.headers()[http::header::CONTENT_TYPE], "application/json");
    assert_eq!(body_json(res), serde_json::json!({ "a": 1, "b": [true] }));
}

#[test]
fn json_bytes_sends_bytes_as_given() {
    let res = serve::json_bytes(StatusCode::OK, &b"{\"message\":\"hi\"}"[..]);
    assert_eq!(res.headers()[http::header::CONTENT_TYPE], "application/json");
    assert_eq!(res.body().as_full(), Some(&b"{\"message\":\"hi\"}"[..]));
    assert_eq!(res.body().size_hint().exact(), Some(16), "exact length, so hyper sends Content-Length");
}

#[test]
fn error_has_the_shared_shape() {
    let res = serve::error(StatusCode::NOT_FOUND, "no such \"thing\"");
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert_eq!(res.headers()[http::header::CONTENT_TYPE], "application/json");
    assert_eq!(body_json(res), serde_json::json!({ "error": "no such \"thing\"" }));
}

#[test]
fn payload_too_large_closes_the_connection() {
    let res = serve::payload_too_large(2048);
    assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(res.headers()[http::header::CONNECTION], "close");
    let message = body_json(res)["error"].as_str().expect("error message").to_string();
    assert!(message.contains("2048"), "{message:?}");
}

#[test]
fn body_variants_yield_their_bytes() {
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    rt.block_on(async {
        assert!(Body::empty().is_end_stream());
        assert_eq!(Body::empty().collect().await.expect("empty").to_bytes().len(), 0);
        assert!(Body::from("").is_end_stream(), "an empty full body is already at its end");
        assert_eq!(Body::from("abc").collect().await.expect("full").to_bytes(), "abc");
        assert_eq!(Body::from(String::from("de")).size_hint().exact(), Some(2));

        let streamed = Body::stream(http_body_util::Full::new(bytes::Bytes::from_static(b"xyz")));
        assert!(streamed.as_full().is_none());
        assert_eq!(streamed.collect().await.expect("stream").to_bytes(), "xyz");
    });
}
