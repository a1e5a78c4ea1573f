//! flight-rs answers the same bytes over HTTP/2 (h2c by prior knowledge, on the port that serves HTTP/1.1) as
//! over HTTP/1.1, in each middleware profile: the routes, their 404, 405 and 413 answers, the edge layers each
//! profile adds (security headers, CORS, compression, rate limit, sessions, response cache) and the static
//! files (validators, 304, precompressed siblings, the SPA fallback). Most checks go through
//! `testkit::h2::same_over_h2`; those that cannot send one request twice and get one answer (a session's visit
//! count, the rate limit's refusal, a streamed compressed body) compare one answer per protocol by the same
//! rule, in [`assert_no_differences`].
//!
//! flight's tests have no TLS setup (flight-rs serves cleartext behind a proxy), so ALPN h2 is left to
//! crates/serve/tests/http2.rs.

mod common;

use std::time::Duration;

use flight::config::{Origins, Profile};
use testkit::h2::{Req, same_over_h2, send};
use testkit::http::Response;

use common::{Dist, TestServer, settings, start};

/// Headers whose values change from one request to the next: the rate limit's count and the seconds left in
/// its window (the window may tick between the two protocols' requests).
const RATE_LIMIT_VOLATILE: [&str; 3] = ["ratelimit-remaining", "ratelimit-reset", "retry-after"];

fn with_dist(profile: Profile) -> (Dist, TestServer) {
    let dist = common::dist();
    let mut s = settings(profile);
    s.dist_path = Some(dist.root.clone());
    (dist, start(s))
}

fn req<'a>(method: &'a str, target: &'a str, headers: &'a [(&'a str, &'a str)]) -> Req<'a> {
    Req { method, target, headers, body: None }
}

/// A request and the status HTTP/1.1 answers it with (what the other test files of this crate establish).
type Case<'a> = (Req<'a>, u16);

/// Sends every request once over HTTP/1.1 and checks its status, then compares each over both protocols.
/// The first pass also fills the production profile's response cache, so the comparison sees a hit over both
/// protocols: same_over_h2 sends HTTP/2 first, and without it HTTP/2 would get the miss and HTTP/1.1 the hit,
/// a difference of order, not of protocol.
fn check(server: &TestServer, cases: &[Case<'_>], volatile: &[&str]) {
    for (r, status) in cases {
        let res = testkit::http::request(server.addr, r.method, r.target, r.headers, r.body);
        assert_eq!(res.status, *status, "{} {} {:?} over HTTP/1.1: {:?}", r.method, r.target, r.headers, res.text());
    }
    let requests: Vec<Req<'_>> = cases.iter().map(|(r, _)| *r).collect();
    same_over_h2(server.addr, &requests, volatile)
        .unwrap_or_else(|differences| panic!("HTTP/2 answers differ from HTTP/1.1:\n{differences}"));
}

/// A body one byte past the default 1 MiB body limit. Sent whole, with its Content-Length, over both
/// protocols: HTTP/2 cannot declare a length and then send nothing, so neither side does.
fn oversized_body() -> Vec<u8> {
    vec![b'x'; 1024 * 1024 + 1]
}

const HTML: &[(&str, &str)] = &[("Accept", "text/html")];

/// The routes every profile serves, and their error answers (with a dist folder: an HTML client asking for
/// an unknown page gets the SPA index).
fn route_cases(oversized: &[u8]) -> Vec<Case<'_>> {
    vec![
        (Req::get("/api/hello"), 200),
        // HEAD: the GET's headers (content-length 32) and no body over both (serve drops the body over HTTP/2, as
        // hyper's HTTP/1.1 does; RFC 9113 §8.1.1).
        (req("HEAD", "/api/hello", &[]), 200),
        (Req::get("/api/hello?x=1"), 200),
        (Req::get("/healthz"), 200),
        // 404: an unknown path, for an HTML client too (the SPA index), and an unknown /api path for one.
        (Req::get("/no/such/route"), 404),
        (req("GET", "/no/such/route", HTML), 200),
        (req("GET", "/api/nope", HTML), 404),
        // 405 with Allow.
        (req("POST", "/api/hello", &[]), 405),
        (req("DELETE", "/healthz", &[]), 405),
        // 413, refused on the declared length before the body is read.
        (Req { method: "POST", target: "/api/hello", headers: &[], body: Some(oversized) }, 413),
    ]
}

/// The conditional request headers for /assets/app.js: its own ETag, in a list, and its Last-Modified.
struct Validators {
    etag: String,
    listed: String,
    last_modified: String,
}

impl Validators {
    fn of(server: &TestServer) -> Validators {
        let res = server.get("/assets/app.js", &[]);
        assert_eq!(res.status, 200, "{:?}", res.text());
        let etag = res.header("etag").expect("an ETag").to_string();
        let last_modified = res.header("last-modified").expect("a Last-Modified").to_string();
        Validators { listed: format!("\"other\", {etag}"), etag, last_modified }
    }
}

/// Static files (plain, precompressed siblings, HEAD, conditional, with a Range), the SPA fallback and the
/// files layer's 404s. `not_modified`: the status of a conditional GET whose validator matches; 304, but 200
/// in production, where the response cache answers from the copy the first GET stored without evaluating the
/// request's conditions (the same over both protocols, so compared all the same).
fn check_static(server: &TestServer, not_modified: u16, volatile: &[&str]) {
    let v = Validators::of(server);
    let if_none_match = [("If-None-Match", v.etag.as_str())];
    let listed = [("If-None-Match", v.listed.as_str())];
    let since = [("If-Modified-Since", v.last_modified.as_str())];
    let cases = [
        (Req::get("/assets/app.js"), 200),
        (Req::get("/small.txt"), 200),
        (Req::get("/pic.png"), 200),
        (Req::get("/index.html"), 200),
        (Req::get("/"), 200),
        (req("HEAD", "/assets/app.js", &[]), 200),
        (req("GET", "/assets/app.js", &if_none_match), not_modified),
        (req("GET", "/assets/app.js", &listed), not_modified),
        (req("GET", "/assets/app.js", &since), not_modified),
        (req("GET", "/assets/app.js", &[("If-None-Match", "W/\"something-else\"")]), 200),
        // flight-rs has no Range support: the whole file, 200, over both.
        (req("GET", "/small.txt", &[("Range", "bytes=0-9")]), 200),
        (req("GET", "/assets/app.js", &[("Accept-Encoding", "br")]), 200),
        (req("GET", "/assets/app.js", &[("Accept-Encoding", "gzip")]), 200),
        (req("GET", "/some/page", &[("Accept", "text/html,application/xhtml+xml")]), 200),
        (req("GET", "/some/page", &[("Accept", "application/json")]), 404),
        (Req::get("/missing.js"), 404),
        (req("GET", "/missing.js", HTML), 404),
        (req("POST", "/assets/app.js", &[]), 404),
    ];
    check(server, &cases, volatile);
}

/// Compression of a text file above the threshold with each codec (the compared bodies are the compressed
/// bytes), q-values, identity, and what is never compressed (small files, images, HEAD).
fn compression_cases() -> Vec<Case<'static>> {
    vec![
        (req("GET", "/big.txt", &[("Accept-Encoding", "gzip")]), 200),
        (req("GET", "/big.txt", &[("Accept-Encoding", "br")]), 200),
        (req("GET", "/big.txt", &[("Accept-Encoding", "zstd")]), 200),
        (req("GET", "/big.txt", &[("Accept-Encoding", "deflate")]), 200),
        (req("GET", "/big.txt", &[("Accept-Encoding", "gzip;q=0.1, br;q=0.9")]), 200),
        (req("GET", "/big.txt", &[("Accept-Encoding", "identity")]), 200),
        (Req::get("/big.txt"), 200),
        (req("HEAD", "/big.txt", &[("Accept-Encoding", "gzip, br")]), 200),
        (req("GET", "/small.txt", &[("Accept-Encoding", "gzip, br")]), 200),
        (req("GET", "/pic.png", &[("Accept-Encoding", "gzip, br")]), 200),
    ]
}

#[test]
fn bare_profile_answers_the_same_over_http2() {
    let (_dist, server) = with_dist(Profile::Bare);
    let oversized = oversized_body();
    let mut cases = route_cases(&oversized);
    // Bare has no CORS: OPTIONS is a 405, an Origin changes nothing; and no compression layer.
    cases.push((req("OPTIONS", "/api/hello", &[]), 405));
    cases.push((req("GET", "/api/hello", &[("Origin", "https://a.example"), ("Accept-Encoding", "gzip")]), 200));
    cases.extend(compression_cases());
    check(&server, &cases, &[]);
    check_static(&server, 304, &[]);
}

#[test]
fn default_profile_answers_the_same_over_http2() {
    let dist = common::dist();
    let mut s = settings(Profile::Default);
    s.dist_path = Some(dist.root.clone());
    // A list, so the answers echo the origin and vary on it (the default wildcard is checked below).
    s.cors_origins = Origins::List(vec![http::HeaderValue::from_static("https://a.example")]);
    let server = start(s);
    let oversized = oversized_body();
    let mut cases = route_cases(&oversized);
    let preflight = |origin| {
        [("Origin", origin), ("Access-Control-Request-Method", "GET"), ("Access-Control-Request-Headers", "x-token")]
    };
    let (allowed, refused) = (preflight("https://a.example"), preflight("https://evil.example"));
    cases.extend([
        (req("OPTIONS", "/api/hello", &[]), 204),
        (req("OPTIONS", "/api/hello", &allowed), 204),
        (req("OPTIONS", "/api/hello", &refused), 204),
        (req("GET", "/api/hello", &[("Origin", "https://a.example")]), 200),
        (req("GET", "/api/hello", &[("Origin", "https://evil.example")]), 200),
        (req("GET", "/api/nope", &[("Origin", "https://a.example")]), 404),
    ]);
    cases.extend(compression_cases());
    check(&server, &cases, &[]);
    check_static(&server, 304, &[]);

    let (_dist, wildcard) = with_dist(Profile::Default);
    check(&wildcard, &[(req("GET", "/api/hello", &[("Origin", "https://whoever.example")]), 200)], &[]);
}

#[test]
fn production_profile_answers_the_same_over_http2() {
    let (dist, server) = with_dist(Profile::Production);
    let oversized = oversized_body();
    let mut cases = route_cases(&oversized);
    cases.extend(compression_cases());
    cases.extend([
        // The response cache keys on Accept-Encoding and passes authorized and no-cache requests through.
        (req("GET", "/big.txt", &[("Authorization", "Bearer secret-token")]), 200),
        (req("GET", "/big.txt", &[("Cache-Control", "no-cache")]), 200),
        // Sessions: a new visitor gets a fresh signed cookie (its value differs per request: volatile), as does
        // one with an unknown cookie; routes that ignore the session set none.
        (Req::get("/api/session"), 200),
        (req("GET", "/api/session", &[("Cookie", "flight.sid=garbage")]), 200),
    ]);
    let volatile = [&RATE_LIMIT_VOLATILE[..], &["set-cookie"]].concat();
    check(&server, &cases, &volatile);
    let hit = server.get("/big.txt", &[("Accept-Encoding", "gzip")]);
    assert_eq!(hit.header("x-cache"), Some("hit"), "the comparison was between cache hits: {:?}", hit.headers);
    check_static(&server, 200, &volatile);

    // Files over 256 KiB stream from disk (and are not cached): the same bytes, plain.
    let content: Vec<u8> =
        (0..40_000u32).flat_map(|i| format!("{:08x}\n", i.wrapping_mul(2_654_435_761)).into_bytes()).collect();
    std::fs::write(dist.root.join("large.txt"), &content).expect("write large file");
    check(&server, &[(Req::get("/large.txt"), 200)], &volatile);
    // Compressed, a streamed body's bytes depend on when the socket took each piece (the encoder flushes at
    // the chunks it is given), so two answers over HTTP/1.1 alone already differ: five GETs of this file with
    // gzip gave five lengths from 205715 to 207497 bytes. Those are compared decoded, the rest as usual.
    for encoding in ["gzip", "br"] {
        let headers = [("Accept-Encoding", encoding)];
        let mut over_h1 = server.get("/large.txt", &headers);
        let mut over_h2 = h2_one(&server, req("GET", "/large.txt", &headers));
        for res in [&mut over_h1, &mut over_h2] {
            assert_eq!(res.header("content-encoding"), Some(encoding), "{:?}", res.headers);
            res.body = common::decode(encoding, &res.body);
        }
        assert!(over_h1.body == content, "{encoding}: the decoded body is the file");
        assert_no_differences(&format!("GET /large.txt, {encoding}"), &over_h1, &over_h2, &volatile);
    }
}

/// A returning visitor's count goes up with every request, so one request cannot be sent twice and answered
/// the same. Two sessions at the same count instead: one asks over HTTP/1.1, the other over HTTP/2.
#[test]
fn a_returning_session_answers_the_same_over_http2() {
    let server = start(settings(Profile::Production));
    let cookie = |res: &Response| {
        let set = res.header("set-cookie").unwrap_or_else(|| panic!("a session cookie: {:?}", res.headers));
        set.split(';').next().expect("a name=value pair").to_string()
    };
    let (first, second) = (cookie(&server.get("/api/session", &[])), cookie(&server.get("/api/session", &[])));
    assert_ne!(first, second, "two sessions");
    let over_h1 = server.get("/api/session", &[("Cookie", &first)]);
    let h2_headers = [("Cookie", second.as_str())];
    let over_h2 = h2_one(&server, req("GET", "/api/session", &h2_headers));
    assert_eq!(over_h1.json()["visits"], 2, "{:?}", over_h1.text());
    assert!(over_h1.header("set-cookie").is_none(), "an existing session gets no new cookie");
    assert_no_differences("GET /api/session with a cookie", &over_h1, &over_h2, &RATE_LIMIT_VOLATILE);
}

/// Over the limit, every answer is a 429 until the window ends; the two protocols share the client's count
/// (one address), so the limit is used up first and then one request goes over each.
#[test]
fn the_rate_limit_refusal_is_the_same_over_http2() {
    let mut s = settings(Profile::Production);
    s.rate_limit = 3;
    s.rate_window = Duration::from_secs(3600);
    let server = start(s);
    for _ in 0..3 {
        assert_eq!(server.get("/api/hello", &[]).status, 200);
    }
    let over_h1 = server.get("/api/hello", &[]);
    let over_h2 = h2_one(&server, Req::get("/api/hello"));
    assert_eq!(over_h1.status, 429, "{:?}", over_h1.headers);
    assert_no_differences("GET /api/hello over the limit", &over_h1, &over_h2, &RATE_LIMIT_VOLATILE);
    // And the other routes are refused alike.
    check(&server, &[(Req::get("/healthz"), 429), (Req::get("/no/such/route"), 429)], &RATE_LIMIT_VOLATILE);
}

fn h2_one(server: &TestServer, request: Req<'_>) -> Response {
    let mut exchange = send(server.addr, &[request]).unwrap_or_else(|e| panic!("h2 {}: {e}", request.target));
    exchange.responses.remove(0)
}

/// same_over_h2's rule (testkit::h2::differences) for two answers fetched apart: to two requests that differ
/// only where the server's state makes them (a cookie).
fn assert_no_differences(what: &str, over_h1: &Response, over_h2: &Response, volatile: &[&str]) {
    let found = testkit::h2::differences(what, over_h1, over_h2, volatile);
    assert!(found.is_empty(), "{}", found.join("\n"));
}
