//! Compression, rate limit, sessions and the response cache, over real sockets, without Redis.

mod common;

use std::time::Duration;

use flight::config::Profile;

use common::{Dist, TestServer, big_text, decode, int_header, settings, start};
use testkit::http::Response;

fn with_dist(profile: Profile) -> (Dist, TestServer) {
    let dist = common::dist();
    let mut s = settings(profile);
    s.dist_path = Some(dist.root.clone());
    let server = start(s);
    (dist, server)
}

// ---- compression ----

fn big(server: &TestServer, accept_encoding: &str) -> Response {
    let res = server.get("/big.txt", &[("Accept-Encoding", accept_encoding)]);
    assert_eq!(res.status, 200, "{accept_encoding}");
    res
}

#[test]
fn compresses_with_each_codec_and_round_trips() {
    let (_dist, server) = with_dist(Profile::Default);
    let original = big_text();
    assert!(original.len() > 4000);
    for encoding in ["gzip", "br", "zstd"] {
        let res = big(&server, encoding);
        assert_eq!(res.header("content-encoding"), Some(encoding), "{:?}", res.headers);
        assert!(res.body.len() < original.len(), "{encoding} did not shrink the body");
        assert_eq!(decode(encoding, &res.body), original.as_bytes(), "{encoding} round trip");
        assert!(res.header_has_token("vary", "Accept-Encoding"), "{:?}", res.headers);
        assert!(res.header("content-type").is_some_and(|v| v.starts_with("text/plain")));
    }
}

/// RFC 9110 8.4.1.2: the `deflate` content-coding is the zlib format (RFC 1950), which is what Koa's
/// compress (zlib.createDeflate) sends. Raw deflate is what some old servers got wrong.
#[test]
fn deflate_is_zlib_wrapped() {
    let (_dist, server) = with_dist(Profile::Default);
    let res = big(&server, "deflate");
    assert_eq!(res.header("content-encoding"), Some("deflate"));
    assert_eq!(decode("deflate", &res.body), big_text().as_bytes());
}

#[test]
fn deflate_is_chosen_when_it_is_the_only_codec() {
    let (_dist, server) = with_dist(Profile::Default);
    let res = big(&server, "deflate");
    assert_eq!(res.header("content-encoding"), Some("deflate"));
    assert!(res.body.len() < big_text().len());
}

#[test]
fn q_values_are_respected() {
    let (_dist, server) = with_dist(Profile::Default);
    let res = big(&server, "gzip;q=0.1, br;q=0.9");
    assert_eq!(res.header("content-encoding"), Some("br"));
    assert_eq!(decode("br", &res.body), big_text().as_bytes());

    let res = big(&server, "br;q=0");
    assert_eq!(res.header("content-encoding"), None);
    assert_eq!(res.body, big_text().as_bytes());

    let res = big(&server, "br;q=0, gzip");
    assert_eq!(res.header("content-encoding"), Some("gzip"));
    assert_eq!(decode("gzip", &res.body), big_text().as_bytes());

    let res = big(&server, "identity");
    assert_eq!(res.header("content-encoding"), None);
    assert_eq!(res.body, big_text().as_bytes());
}

#[test]
fn small_images_head_and_bare_are_not_compressed() {
    let (_dist, server) = with_dist(Profile::Default);
    let small = server.get("/small.txt", &[("Accept-Encoding", "gzip, br")]);
    assert_eq!(small.status, 200);
    assert_eq!(small.header("content-encoding"), None);
    assert_eq!(small.text(), common::SMALL_TXT);

    let png = server.get("/pic.png", &[("Accept-Encoding", "gzip, br")]);
    assert_eq!(png.status, 200);
    assert_eq!(png.header("content-type"), Some("image/png"));
    assert_eq!(png.header("content-encoding"), None);
    assert_eq!(png.body, common::png_bytes());

    let head = server.request("HEAD", "/big.txt", &[("Accept-Encoding", "gzip, br")]);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-encoding"), None);

    let (_dist, bare) = with_dist(Profile::Bare);
    let res = big(&bare, "gzip");
    assert_eq!(res.header("content-encoding"), None);
    assert_eq!(res.body, big_text().as_bytes());
}

// ---- rate limit ----

/// Production, limit 5, a window long enough that no test straddles two.
fn limited(trust_proxy: bool) -> TestServer {
    let mut s = settings(Profile::Production);
    s.rate_limit = 5;
    s.rate_window = Duration::from_secs(3600);
    s.trust_proxy = trust_proxy;
    start(s)
}

fn assert_429(res: &Response) {
    assert_eq!(res.status, 429, "{:?}", res.headers);
    assert!(int_header(res, "retry-after") > 0);
    assert!(res.json()["error"].is_string());
    assert_eq!(int_header(res, "ratelimit-remaining"), 0);
}

#[test]
fn rate_limit_counts_down_then_429() {
    let server = limited(false);
    for expected_remaining in (0..5).rev() {
        let res = server.get("/api/hello", &[]);
        assert_eq!(res.status, 200);
        assert_eq!(int_header(&res, "ratelimit-limit"), 5);
        assert_eq!(int_header(&res, "ratelimit-remaining"), expected_remaining);
        assert!(res.header("ratelimit-reset").is_some());
    }
    assert_429(&server.get("/api/hello", &[]));
    // Over the limit, other routes are refused too (the limit is per client, not per route).
    assert_429(&server.get("/healthz", &[]));
}

#[test]
fn forwarded_for_is_ignored_without_trust_proxy() {
    let server = limited(false);
    for i in 0..5 {
        let xff = format!("203.0.113.{i}");
        assert_eq!(server.get("/api/hello", &[("X-Forwarded-For", &xff)]).status, 200);
    }
    assert_429(&server.get("/api/hello", &[("X-Forwarded-For", "198.51.100.77")]));
}

#[test]
fn forwarded_for_separates_clients_with_trust_proxy() {
    let server = limited(true);
    for i in 0..8 {
        let xff = format!("203.0.113.{i}, 10.0.0.1");
        let res = server.get("/api/hello", &[("X-Forwarded-For", &xff)]);
        assert_eq!(res.status, 200, "client {xff}");
        assert_eq!(int_header(&res, "ratelimit-remaining"), 4);
    }
    // One forwarded client still gets its own limit.
    for _ in 0..4 {
        assert_eq!(server.get("/api/hello", &[("X-Forwarded-For", "203.0.113.0")]).status, 200);
    }
    assert_429(&server.get("/api/hello", &[("X-Forwarded-For", "203.0.113.0")]));
}

// ---- sessions ----

/// The `flight.sid=<value>` pair from a Set-Cookie, after checking its attributes.
fn session_cookie(res: &Response) -> String {
    let cookies = res.header_all("set-cookie");
    assert_eq!(cookies.len(), 1, "expected one Set-Cookie: {:?}", res.headers);
    let cookie = cookies[0];
    assert!(cookie.starts_with("flight.sid="), "{cookie}");
    let attrs: Vec<&str> = cookie.split(';').map(str::trim).collect();
    assert!(attrs.iter().any(|a| a.eq_ignore_ascii_case("HttpOnly")), "{cookie}");
    assert!(attrs.iter().any(|a| a.eq_ignore_ascii_case("SameSite=Strict")), "{cookie}");
    attrs[0].to_string()
}

#[test]
fn sessions_count_visits_with_a_signed_cookie() {
    let server = start(settings(Profile::Production));
    let first = server.get("/api/session", &[]);
    assert_eq!(first.status, 200);
    assert_eq!(first.json()["visits"], 1);
    let cookie = session_cookie(&first);

    let second = server.get("/api/session", &[("Cookie", &cookie)]);
    assert_eq!(second.status, 200);
    assert_eq!(second.json()["visits"], 2);
    assert!(second.header("set-cookie").is_none(), "an existing session needs no new cookie");
    let third = server.get("/api/session", &[("Cookie", &format!("other=1; {cookie}"))]);
    assert_eq!(third.json()["visits"], 3);

    // Tampered: one character changed in the middle of the signature, then in the id.
    let value_start = "flight.sid=".len();
    let dot = value_start + cookie[value_start..].find('.').expect("cookie value is <id>.<signature>");
    let sig_middle = dot + (cookie.len() - dot) / 2;
    for at in [sig_middle, value_start + 5] {
        let mut tampered = cookie.clone().into_bytes();
        tampered[at] = if tampered[at] == b'x' { b'y' } else { b'x' };
        let tampered = String::from_utf8(tampered).expect("ascii");
        let res = server.get("/api/session", &[("Cookie", &tampered)]);
        assert_eq!(res.status, 200, "{tampered}");
        assert_eq!(res.json()["visits"], 1, "{tampered}");
        assert_ne!(session_cookie(&res), cookie);
    }

    // Garbage does not break anything either.
    for junk in ["flight.sid=", "flight.sid=garbage", "flight.sid=a.b.c", "flight.sid=\"\""] {
        let res = server.get("/api/session", &[("Cookie", junk)]);
        assert_eq!(res.status, 200, "{junk}");
        assert_eq!(res.json()["visits"], 1, "{junk}");
    }

    // The original session is untouched by all that.
    assert_eq!(server.get("/api/session", &[("Cookie", &cookie)]).json()["visits"], 4);
}

#[test]
fn routes_that_ignore_the_session_set_no_cookie() {
    let server = start(settings(Profile::Production));
    let res = server.get("/api/hello", &[]);
    assert_eq!(res.status, 200);
    assert!(res.header("set-cookie").is_none());
}

#[test]
fn sessions_are_off_outside_production() {
    let server = start(settings(Profile::Default));
    let res = server.get("/api/session", &[]);
    assert_eq!(res.status, 404);
    assert!(res.json()["error"].is_string());
    assert!(res.header("set-cookie").is_none());
}

#[test]
fn a_cookie_signed_with_another_secret_is_refused() {
    let a = start(settings(Profile::Production));
    let cookie = session_cookie(&a.get("/api/session", &[]));
    let mut s = settings(Profile::Production);
    s.secret = b"another secret, also 32 bytes or longer....".to_vec();
    let b = start(s);
    let res = b.get("/api/session", &[("Cookie", &cookie)]);
    assert_eq!(res.json()["visits"], 1);
    assert!(res.header("set-cookie").is_some());
}

// ---- response cache ----

#[test]
fn static_file_is_cached_then_hit() {
    let (_dist, server) = with_dist(Profile::Production);
    let first = server.get("/big.txt", &[]);
    assert_eq!(first.status, 200);
    assert_eq!(first.header("x-cache"), Some("miss"));
    let second = server.get("/big.txt", &[]);
    assert_eq!(second.status, 200);
    assert_eq!(second.header("x-cache"), Some("hit"));
    assert_eq!(second.body, first.body);
    assert_eq!(second.header("content-type"), first.header("content-type"));
    assert_eq!(second.header("etag"), first.header("etag"));
    // The edge layers outside the cache still run on a hit.
    assert!(second.header("ratelimit-remaining").is_some());
    assert_eq!(second.header("x-content-type-options"), Some("nosniff"));
}

#[test]
fn authorized_requests_bypass_the_cache() {
    let (_dist, server) = with_dist(Profile::Production);
    for _ in 0..2 {
        let res = server.get("/big.txt", &[("Authorization", "Bearer secret-token")]);
        assert_eq!(res.status, 200);
        assert_ne!(res.header("x-cache"), Some("hit"));
    }
    // Not stored by the authorized requests: the first anonymous one is a miss.
    assert_eq!(server.get("/big.txt", &[]).header("x-cache"), Some("miss"));
    assert_eq!(server.get("/big.txt", &[]).header("x-cache"), Some("hit"));
    // And not served from the cache to an authorized request.
    let res = server.get("/big.txt", &[("Authorization", "Bearer secret-token")]);
    assert_ne!(res.header("x-cache"), Some("hit"));
}

#[test]
fn not_found_is_not_cached() {
    let (_dist, server) = with_dist(Profile::Production);
    for _ in 0..2 {
        let res = server.get("/nope.txt", &[]);
        assert_eq!(res.status, 404);
        assert_ne!(res.header("x-cache"), Some("hit"));
    }
}

#[test]
fn session_responses_are_not_cached() {
    let server = start(settings(Profile::Production));
    let first = server.get("/api/session", &[]);
    let second = server.get("/api/session", &[]);
    for res in [&first, &second] {
        assert_eq!(res.status, 200);
        assert_ne!(res.header("x-cache"), Some("hit"));
        assert_eq!(res.json()["visits"], 1);
    }
    assert_ne!(session_cookie(&first), session_cookie(&second));
    // A request with a session cookie is not answered from anyone's cached copy either.
    let cookie = session_cookie(&first);
    let res = server.get("/api/session", &[("Cookie", &cookie)]);
    assert_eq!(res.json()["visits"], 2);
}

#[test]
fn accept_encoding_gets_its_own_entry() {
    let (_dist, server) = with_dist(Profile::Production);
    let gzip = server.get("/big.txt", &[("Accept-Encoding", "gzip")]);
    assert_eq!(gzip.header("x-cache"), Some("miss"));
    assert_eq!(gzip.header("content-encoding"), Some("gzip"));
    let br = server.get("/big.txt", &[("Accept-Encoding", "br")]);
    assert_eq!(br.header("x-cache"), Some("miss"), "br must not reuse the gzip entry");
    assert_eq!(br.header("content-encoding"), Some("br"));
    let identity = server.get("/big.txt", &[]);
    assert_eq!(identity.header("x-cache"), Some("miss"));
    assert_eq!(identity.header("content-encoding"), None);

    let gzip_hit = server.get("/big.txt", &[("Accept-Encoding", "gzip")]);
    assert_eq!(gzip_hit.header("x-cache"), Some("hit"));
    assert_eq!(gzip_hit.header("content-encoding"), Some("gzip"));
    assert_eq!(decode("gzip", &gzip_hit.body), big_text().as_bytes());
    let br_hit = server.get("/big.txt", &[("Accept-Encoding", "br")]);
    assert_eq!(br_hit.header("x-cache"), Some("hit"));
    assert_eq!(decode("br", &br_hit.body), big_text().as_bytes());
    let identity_hit = server.get("/big.txt", &[]);
    assert_eq!(identity_hit.header("x-cache"), Some("hit"));
    assert_eq!(identity_hit.body, big_text().as_bytes());
}

#[test]
fn head_and_no_cache_requests_are_not_answered_from_cache() {
    let (_dist, server) = with_dist(Profile::Production);
    assert_eq!(server.get("/big.txt", &[]).header("x-cache"), Some("miss"));
    let head = server.request("HEAD", "/big.txt", &[]);
    assert_eq!(head.status, 200);
    assert_ne!(head.header("x-cache"), Some("hit"));
    let res = server.get("/big.txt", &[("Cache-Control", "no-cache")]);
    assert_ne!(res.header("x-cache"), Some("hit"));
}

/// /healthz reports live state (Redis reachability): a cached copy makes it lie for the cache TTL.
#[test]
fn healthz_is_never_served_from_cache() {
    let server = start(settings(Profile::Production));
    for _ in 0..3 {
        let res = server.get("/healthz", &[]);
        assert_eq!(res.status, 200);
        assert_ne!(res.header("x-cache"), Some("hit"), "{:?}", res.headers);
    }
}

/// The SPA fallback answers by the Accept header (HTML clients get index.html, others a JSON 404), so a
/// cached copy must not cross that line.
#[test]
fn spa_fallback_cached_for_html_is_not_served_to_json_clients() {
    let (_dist, server) = with_dist(Profile::Production);
    let html = server.get("/some/page", &[("Accept", "text/html")]);
    assert_eq!(html.status, 200);
    assert_eq!(html.text(), common::INDEX_HTML);
    let json = server.get("/some/page", &[("Accept", "application/json")]);
    assert_eq!(json.status, 404, "got {} x-cache {:?}", json.status, json.header("x-cache"));
}

#[test]
fn session_cookie_is_secure_when_configured() {
    let mut settings = settings(Profile::Production);
    settings.secure_cookies = true;
    let server = start(settings);
    let res = server.get("/api/session", &[]);
    let cookie = res.header("set-cookie").expect("a session cookie").to_string();
    assert!(cookie.split(';').any(|a| a.trim() == "Secure"), "{cookie}");
}
