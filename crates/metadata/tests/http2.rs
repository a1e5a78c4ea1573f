//! metadata-rs answers the same bytes over HTTP/2 (h2c by prior knowledge, on the port that serves HTTP/1.1) as
//! over HTTP/1.1: found ids in several regions (with the fallback to en), a missing id, malformed ids, bad
//! region parameters, near-miss paths and other methods, /healthz; without Redis, and with the Redis cache
//! both when an answer is first read from SQLite and when it comes from the cache.
//!
//! metadata's tests have no TLS setup, so ALPN h2 is left to crates/serve/tests/http2.rs.

mod common;

use std::time::Duration;

use common::{TestServer, custom_db, settings, with_redis};
use testkit::h2::{Req, same_over_h2};

/// A request and the status HTTP/1.1 answers it with (as tests/contract.rs and tests/edges.rs establish).
type Case<'a> = (Req<'a>, u16);

fn req<'a>(method: &'a str, target: &'a str) -> Req<'a> {
    Req { method, target, headers: &[], body: None }
}

/// Checks each status over HTTP/1.1 first (so a wrong fixture fails as such), then compares both protocols.
fn check(server: &TestServer, cases: &[Case<'_>]) {
    for (r, status) in cases {
        let res = testkit::http::request(server.addr, r.method, r.target, r.headers, r.body);
        assert_eq!(res.status, *status, "{} {} over HTTP/1.1: {:?}", r.method, r.target, res.text());
    }
    let requests: Vec<Req<'_>> = cases.iter().map(|(r, _)| *r).collect();
    same_over_h2(server.addr, &requests, &[])
        .unwrap_or_else(|differences| panic!("HTTP/2 answers differ from HTTP/1.1:\n{differences}"));
}

/// Rows with two locales, a trending count, escapes and non-ASCII text, NULL columns, and NULL locales (which
/// the contract answers with a 500).
fn database(dir: &std::path::Path) -> std::path::PathBuf {
    let locales = r#"{"en":{"title":"Hello \"quoted\" \\ \u2028","description":"World"},"ja":{"title":"こんにちは 🍜","description":"世界"}}"#;
    custom_db(
        dir,
        &[
            ("hot", Some("Chan é"), Some(3725), Some(500_001), Some(locales)),
            ("plain", Some("c"), Some(59), Some(7), Some(r#"{"en":{"title":"t","description":"d"}}"#)),
            ("nulls", None, None, None, Some("{}")),
            ("no-locales", Some("c"), Some(1), Some(1), None),
        ],
    )
}

/// The lookups and their error answers, GET only: HEAD is a known difference (below).
fn lookups() -> Vec<Case<'static>> {
    vec![
        (req("GET", "/v1/metadata/hot"), 200),
        (req("GET", "/v1/metadata/hot?region=ja"), 200),
        (req("GET", "/v1/metadata/hot?region=ko"), 200),
        (req("GET", "/v1/metadata/hot?region=zh-TW"), 200),
        (req("GET", "/v1/metadata/%68ot?regio%6E=j%61&region=ko"), 200),
        (req("GET", "/v1/metadata/plain?region=en"), 200),
        (req("GET", "/v1/metadata/nulls?region=ja"), 200),
        (req("GET", "/v1/metadata/no-locales"), 500),
        // A missing id: 404 with the body `null`.
        (req("GET", "/v1/metadata/absent-id?region=ja"), 404),
        (req("GET", "/v1/metadata/%27%20OR%20%271%27%3D%271"), 404),
        // Bad region parameters, and a malformed id (checked before the region).
        (req("GET", "/v1/metadata/hot?region=en_US"), 400),
        (req("GET", "/v1/metadata/hot?region=x%3Bdrop"), 400),
        (req("GET", "/v1/metadata/hot?region=%C3%A9"), 400),
        (req("GET", "/v1/metadata/hot?region=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), 400),
        (req("GET", "/v1/metadata/nope?region=bad!"), 400),
        (req("GET", "/v1/metadata/%E0%A4%A?region=bad!"), 400),
        (req("GET", "/v1/metadata/%E0%A4%A"), 400),
        (req("GET", "/v1/metadata/abc%FF"), 400),
        // Near misses of the two routes.
        (req("GET", "/v1/metadata/"), 404),
        (req("GET", "/v1/metadata"), 404),
        (req("GET", "/v1/metadata/a/b"), 404),
        (req("GET", "/v2/metadata/hot"), 404),
        (req("GET", "/"), 404),
        // Other methods: 405 with Allow.
        (Req { method: "POST", target: "/v1/metadata/hot", headers: &[], body: Some(b"{}") }, 405),
        (req("PUT", "/v1/metadata/hot"), 405),
        (req("DELETE", "/healthz"), 405),
        (req("OPTIONS", "/v1/metadata/hot"), 405),
        // HEAD: the GET's headers and no body over both (serve drops the body over HTTP/2).
        (req("HEAD", "/v1/metadata/hot"), 200),
    ]
}

#[test]
fn lookups_answer_the_same_over_http2_without_redis() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(settings(&database(dir.path())));
    let mut cases = lookups();
    cases.push((req("GET", "/healthz"), 200));
    check(&server, &cases);
}

#[test]
fn lookups_answer_the_same_over_http2_through_the_redis_cache() {
    let redis = testkit::Redis::start();
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(with_redis(settings(&database(dir.path())), &redis.url()));
    let mut cases = lookups();
    cases.push((req("GET", "/healthz"), 200));
    // The first pass reads SQLite and fills the cache in the background; the second, after a moment for those
    // writes, answers the found ids from Redis over both protocols.
    check(&server, &cases);
    std::thread::sleep(Duration::from_millis(300));
    let mut conn = redis::Client::open(redis.url()).expect("client").get_connection().expect("connect");
    let cached: Option<Vec<u8>> = redis::cmd("GET").arg("metadata:v1:ja:hot").query(&mut conn).expect("GET");
    assert!(cached.is_some(), "the first pass filled the cache");
    check(&server, &cases);
}
