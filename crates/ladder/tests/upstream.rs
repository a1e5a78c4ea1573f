//! `GET /ladder/upstream` against real upstreams on 127.0.0.1: the upstream service (crates/upstream) in
//! process for the 200, the timeout and keep-alive; a port nothing listens on and a canned-answer server for
//! the failures. Time bounds are generous (the machine is shared): they tell "answers promptly" from "hangs".

mod common;

use std::time::{Duration, Instant};

use common::canned::{Canned, response};
use common::{Dataset, TestServer, UpstreamServer, assert_json, request, settings, upstream_body};

const FAILED: &str = r#"{"error":"upstream failed"}"#;

/// ladder-rs calling `url` with `timeout` (no database needed: the route uses none).
fn ladder(url: Option<&str>, timeout: Duration) -> (TestServer, Dataset) {
    let data = Dataset::generate(10);
    let mut settings = settings(&data.db(), None);
    settings.upstream = url.map(|u| ladder::upstream::parse_upstream_url(u).expect("an http URL"));
    settings.upstream_timeout = timeout;
    (TestServer::start(settings), data)
}

#[test]
fn answers_the_upstream_token_and_keeps_one_connection_alive() {
    let upstream = UpstreamServer::start(Duration::ZERO);
    let (server, _data) = ladder(Some(&upstream.url()), Duration::from_secs(2));
    assert_json(&server.get("/ladder/upstream"), 200, &upstream_body(), "GET");
    assert_json(&server.get("/ladder/upstream?x=1"), 200, &upstream_body(), "GET, query ignored");
    let head = request(server.addr, "HEAD", "/ladder/upstream", &[], None);
    assert_eq!((head.status, head.header("content-type")), (200, Some("application/json")), "HEAD");
    assert_eq!(head.header("content-length"), Some(upstream_body().len().to_string().as_str()), "HEAD's length");
    let post = request(server.addr, "POST", "/ladder/upstream", &[], Some(b"{}"));
    assert_json(&post, 405, r#"{"error":"method not allowed"}"#, "POST");
    assert_eq!(post.header("allow"), Some("GET, HEAD"));
    assert_json(&server.get("/ladder/upstream/"), 404, r#"{"error":"not found"}"#, "trailing slash");

    // 100 more, one after another (each on a new connection to ladder-rs): every one reaches the upstream, and
    // the worker's pooled client carries them all on the connection it already has.
    for i in 0..100 {
        assert_json(&server.get("/ladder/upstream"), 200, &upstream_body(), &format!("call {i}"));
    }
    let (requests, connections) = upstream.stats();
    assert_eq!(requests, 103, "GET, GET with a query, HEAD and 100 calls");
    assert_eq!(connections, 1, "ladder-rs opened {connections} connections for {requests} calls");
}

#[test]
fn not_configured_is_503() {
    for url in [None, Some("")] {
        let data = Dataset::generate(10);
        let mut settings = settings(&data.db(), None);
        settings.upstream = url.and_then(|u| ladder::upstream::parse_upstream_url(u).ok());
        let server = TestServer::start(settings);
        let res = server.get("/ladder/upstream");
        assert_json(&res, 503, r#"{"error":"upstream not configured"}"#, &format!("{url:?}"));
        assert_eq!(res.header("retry-after"), None, "an unset URL does not come back in a second");
    }
}

#[test]
fn nothing_listening_is_502_at_once() {
    let nowhere = format!("http://127.0.0.1:{}/upstream", testkit::free_port());
    let (server, _data) = ladder(Some(&nowhere), Duration::from_secs(2));
    for attempt in 0..3 {
        let started = Instant::now();
        assert_json(&server.get("/ladder/upstream"), 502, FAILED, &format!("attempt {attempt}"));
        assert!(started.elapsed() < Duration::from_secs(1), "a refused connect took {:?}", started.elapsed());
    }
    assert_json(&server.get("/ladder/empty"), 200, r#"{"ok":true}"#, "the other routes meanwhile");
}

#[test]
fn answers_without_a_string_token_are_502() {
    let canned = Canned::start(None);
    let (server, _data) = ladder(Some(&canned.url()), Duration::from_secs(2));
    for (what, answer) in [
        ("500 with a token", response("500 Internal Server Error", r#"{"token":"t"}"#)),
        ("302", response("302 Found", r#"{"token":"t"}"#)),
        ("not JSON", response("200 OK", "<html>token</html>")),
        ("no token", response("200 OK", r#"{"service":"upstream"}"#)),
        ("a number token", response("200 OK", r#"{"token":7}"#)),
        ("an array", response("200 OK", r#"["token"]"#)),
        ("a short body", b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"token\":\"t\"}".to_vec()),
        ("garbage", b"SSH-2.0-OpenSSH_9.6\r\n\r\n".to_vec()),
    ] {
        canned.set(Some(answer));
        assert_json(&server.get("/ladder/upstream"), 502, FAILED, what);
    }
    // The same server with a good answer: the route itself works, so the 502s above were the answers'.
    canned.set(Some(response("200 OK", r#"{"token":"a \"quoted\" \u00e9 token"}"#)));
    assert_json(&server.get("/ladder/upstream"), 200, r#"{"ok":true,"token":"a \"quoted\" é token"}"#, "good");
}

#[test]
fn a_slow_upstream_is_504_within_the_timeout() {
    let timeout = Duration::from_millis(200);
    let upstream = UpstreamServer::start(Duration::from_secs(1));
    let (server, _data) = ladder(Some(&upstream.url()), timeout);
    for attempt in 0..2 {
        let started = Instant::now();
        assert_json(&server.get("/ladder/upstream"), 504, r#"{"error":"upstream timed out"}"#, "delay 1 s");
        let took = started.elapsed();
        assert!(
            took >= timeout && took < timeout + Duration::from_millis(500),
            "attempt {attempt}: 504 after {took:?}"
        );
    }
    // An upstream that never answers at all: the same.
    let silent = Canned::start(None);
    let (server, _data) = ladder(Some(&silent.url()), timeout);
    let started = Instant::now();
    assert_json(&server.get("/ladder/upstream"), 504, r#"{"error":"upstream timed out"}"#, "silent");
    assert!(started.elapsed() < timeout + Duration::from_millis(500), "504 after {:?}", started.elapsed());
}
