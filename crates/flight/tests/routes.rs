//! Route table, profiles, security headers, CORS, config checks and serving limits, over real sockets.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use clap::Parser;
use flight::config::{ConfigError, Origins, Profile};
use flight::routes::{Fragment, RouteTable};
use serve::Reply;

use common::{int_header, settings, start, start_with_limits};
use testkit::http::Conn;

const HELLO: &str = r#"{"message":"Hello from Flight!"}"#;

#[test]
fn hello_answers_exact_json_in_every_profile() {
    for profile in [Profile::Bare, Profile::Default, Profile::Production] {
        let server = start(settings(profile));
        let res = server.get("/api/hello", &[]);
        assert_eq!(res.status, 200, "{profile:?}");
        assert_eq!(res.text(), HELLO, "{profile:?}");
        assert!(res.header("content-type").is_some_and(|v| v.starts_with("application/json")), "{profile:?}");
    }
}

#[test]
fn head_hello_has_no_body() {
    let server = start(settings(Profile::Default));
    let mut conn = Conn::open(server.addr).expect("connect");
    // Keep-alive: if HEAD wrongly carried a body, the next response would be garbage.
    let head = b"HEAD /api/hello HTTP/1.1\r\nHost: x\r\n\r\n";
    conn.send(head);
    let res = conn.read_head_response().expect("HEAD response");
    assert_eq!(res.status, 200);
    let res = conn.request(b"GET /api/hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(res.status, 200);
    assert_eq!(res.text(), HELLO);
}

#[test]
fn healthz_reports_ok() {
    let server = start(settings(Profile::Default));
    let res = server.get("/healthz", &[]);
    assert_eq!(res.status, 200);
    let body = res.json();
    assert_eq!(body["status"], "ok");
    assert_eq!(body["profile"], "default");
    assert_eq!(body["redis"], "disabled");
}

#[test]
fn wrong_method_is_405_with_allow() {
    for profile in [Profile::Bare, Profile::Default] {
        let server = start(settings(profile));
        let res = server.request("POST", "/api/hello", &[]);
        assert_eq!(res.status, 405, "{profile:?}");
        assert!(res.header_has_token("allow", "GET"), "{profile:?}: {:?}", res.headers);
        assert!(res.json()["error"].is_string());
    }
}

#[test]
fn options_is_204_with_allow_in_default_and_405_in_bare() {
    let server = start(settings(Profile::Default));
    let res = server.request("OPTIONS", "/api/hello", &[]);
    assert_eq!(res.status, 204);
    assert!(res.header_has_token("allow", "GET"), "{:?}", res.headers);
    assert!(res.header_has_token("allow", "OPTIONS"), "{:?}", res.headers);

    let server = start(settings(Profile::Bare));
    let res = server.request("OPTIONS", "/api/hello", &[]);
    assert_eq!(res.status, 405);
    assert!(res.header_has_token("allow", "GET"), "{:?}", res.headers);
}

#[test]
fn unknown_path_is_json_404() {
    for profile in [Profile::Bare, Profile::Default, Profile::Production] {
        let server = start(settings(profile));
        let res = server.get("/no/such/route", &[("Accept", "text/html")]);
        assert_eq!(res.status, 404, "{profile:?}");
        assert!(res.header("content-type").is_some_and(|v| v.starts_with("application/json")));
        assert!(res.json()["error"].is_string());
    }
}

#[test]
fn duplicate_routes_name_both_backends() {
    let handler = |_req| Reply::now(serve::not_found());
    let merged =
        RouteTable::merge(vec![Fragment::new("a").get("/x", handler), Fragment::new("b").get("/x", handler)], false);
    let Err(err) = merged else { panic!("duplicate GET /x was accepted") };
    assert_eq!((err.first.as_str(), err.second.as_str(), err.path.as_str()), ("a", "b", "/x"));
    let message = err.to_string();
    assert!(message.contains("`a`") && message.contains("`b`") && message.contains("/x"), "{message}");

    // Distinct methods on one path, or one path in two fragments with different methods, are fine.
    let ok = RouteTable::merge(
        vec![Fragment::new("a").get("/x", handler), Fragment::new("b").route(http::Method::POST, "/x", handler)],
        false,
    );
    assert!(ok.is_ok_and(|t| t.len() == 2));
}

const SECURITY: [&str; 3] = ["x-content-type-options", "x-frame-options", "referrer-policy"];

#[test]
fn bare_profile_has_no_edge_headers() {
    let server = start(settings(Profile::Bare));
    let res = server.get("/api/hello", &[("Origin", "https://a.example"), ("Accept-Encoding", "gzip")]);
    assert_eq!(res.status, 200);
    for name in SECURITY.iter().chain(&["access-control-allow-origin", "ratelimit-limit", "content-security-policy"]) {
        assert!(res.header(name).is_none(), "bare sent {name}: {:?}", res.headers);
    }
}

#[test]
fn default_profile_has_security_headers_but_no_rate_limit() {
    let server = start(settings(Profile::Default));
    let res = server.get("/api/hello", &[]);
    assert_eq!(res.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(res.header("x-frame-options"), Some("DENY"));
    assert!(res.header("referrer-policy").is_some());
    for name in ["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "x-cache", "set-cookie"] {
        assert!(res.header(name).is_none(), "default sent {name}");
    }
}

#[test]
fn production_profile_adds_rate_limit_headers() {
    let server = start(settings(Profile::Production));
    let res = server.get("/api/hello", &[]);
    assert_eq!(res.status, 200);
    for name in SECURITY.iter().chain(&["ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"]) {
        assert!(res.header(name).is_some(), "production lacks {name}: {:?}", res.headers);
    }
    assert_eq!(int_header(&res, "ratelimit-limit"), 1200);
}

#[test]
fn csp_on_html_not_on_json() {
    let dist = common::dist();
    let mut s = settings(Profile::Default);
    s.dist_path = Some(dist.root.clone());
    let server = start(s);
    let html = server.get("/index.html", &[]);
    assert_eq!(html.status, 200);
    assert!(html.header("content-type").is_some_and(|v| v.starts_with("text/html")));
    assert!(html.header("content-security-policy").is_some_and(|v| v.contains("default-src")), "{:?}", html.headers);
    let json = server.get("/api/hello", &[]);
    assert!(json.header("content-security-policy").is_none());
}

// ---- CORS ----

#[test]
fn cors_wildcard_allows_any_origin() {
    let server = start(settings(Profile::Default));
    let res = server.get("/api/hello", &[("Origin", "https://whoever.example")]);
    assert_eq!(res.header("access-control-allow-origin"), Some("*"));
    assert!(res.header("access-control-allow-credentials").is_none());
}

fn list_server() -> common::TestServer {
    let mut s = settings(Profile::Default);
    s.cors_origins = Origins::List(vec![http::HeaderValue::from_static("https://a.example")]);
    start(s)
}

#[test]
fn cors_list_echoes_allowed_origin_and_varies() {
    let server = list_server();
    let res = server.get("/api/hello", &[("Origin", "https://a.example")]);
    assert_eq!(res.status, 200);
    assert_eq!(res.header_all("access-control-allow-origin"), vec!["https://a.example"]);
    assert!(res.header_has_token("vary", "Origin"), "{:?}", res.headers);

    let res = server.get("/api/hello", &[("Origin", "https://evil.example")]);
    assert_eq!(res.status, 200);
    assert!(res.header("access-control-allow-origin").is_none(), "{:?}", res.headers);
    assert!(res.header_has_token("vary", "Origin"));
}

#[test]
fn cors_preflight_allowed_and_refused() {
    let server = list_server();
    let preflight = |origin: &str| {
        server.request(
            "OPTIONS",
            "/api/hello",
            &[
                ("Origin", origin),
                ("Access-Control-Request-Method", "GET"),
                ("Access-Control-Request-Headers", "x-token"),
            ],
        )
    };
    let res = preflight("https://a.example");
    assert_eq!(res.status, 204);
    assert_eq!(res.header("access-control-allow-origin"), Some("https://a.example"));
    assert!(res.header("access-control-allow-methods").is_some_and(|v| v.contains("GET")));
    assert!(res.header("access-control-allow-headers").is_some_and(|v| v.contains("x-token")));
    assert!(int_header(&res, "access-control-max-age") > 0);

    let res = preflight("https://evil.example");
    assert_eq!(res.status, 204);
    for name in ["access-control-allow-origin", "access-control-allow-methods", "access-control-allow-headers"] {
        assert!(res.header(name).is_none(), "refused preflight sent {name}");
    }
}

#[test]
fn cors_credentials_with_wildcard_is_a_config_error() {
    let config = flight::Config::try_parse_from(["flight-rs", "--cors-credentials", "true"]).expect("parses");
    assert!(matches!(config.resolve(), Err(ConfigError::CredentialsWithWildcard)));

    let config = flight::Config::try_parse_from([
        "flight-rs",
        "--cors-credentials",
        "true",
        "--cors-origins",
        "https://a.example,https://b.example",
    ])
    .expect("parses");
    let settings = config.resolve().expect("credentials with a list are fine");
    assert!(matches!(settings.cors_origins, Origins::List(ref l) if l.len() == 2));
}

#[test]
fn cors_entries_are_kept_as_browsers_send_origin() {
    let config = flight::Config::try_parse_from([
        "flight-rs",
        "--cors-origins",
        "HTTPS://A.Example:443/,http://b.example:80,https://c.example:8443",
    ])
    .expect("parses");
    let settings = config.resolve().expect("valid origins");
    let Origins::List(list) = settings.cors_origins else { panic!("a list") };
    let list: Vec<&str> = list.iter().map(|v| v.to_str().expect("ASCII")).collect();
    assert_eq!(list, ["https://a.example", "http://b.example", "https://c.example:8443"]);
}

#[test]
fn production_needs_its_own_secret() {
    let resolve = |args: &[&str]| {
        let mut argv = vec!["flight-rs", "--middleware", "production"];
        argv.extend_from_slice(args);
        flight::Config::try_parse_from(argv).expect("parses").resolve()
    };
    assert!(matches!(resolve(&[]), Err(ConfigError::BuiltInSecret)));
    assert!(matches!(resolve(&["--app-secret", flight::config::BUILT_IN_SECRET]), Err(ConfigError::BuiltInSecret)));
    assert!(matches!(resolve(&["--app-secret", "short"]), Err(ConfigError::ShortSecret(5))));
    assert!(resolve(&["--app-secret", common::SECRET]).is_ok());
    // Outside production no secret is needed.
    let config = flight::Config::try_parse_from(["flight-rs"]).expect("parses");
    assert!(config.resolve().is_ok());
}

// ---- serving limits through flight ----

#[test]
fn oversized_headers_get_431() {
    let server = start(settings(Profile::Default));
    let big = "a".repeat(20 * 1024);
    let res = testkit::http::try_request(server.addr, "GET", "/api/hello", &[("X-Big", &big)], None)
        .expect("a 431 response, not a bare close");
    assert_eq!(res.status, 431);
    assert_eq!(server.get("/api/hello", &[]).status, 200);
}

#[test]
fn malformed_request_gets_400() {
    let server = start(settings(Profile::Default));
    let raw = b"GET /api/hello HTTP/1.1\r\nHost: x\r\nNot a header line\r\n\r\n";
    let res = testkit::http::send_raw(server.addr, raw).expect("a 400 response, not a bare close");
    assert_eq!(res.status, 400);
}

#[test]
fn slow_header_is_cut_while_others_are_served() {
    let limits = serve::Limits { header_timeout: Duration::from_secs(1), ..common::limits() };
    let server = start_with_limits(settings(Profile::Default), limits);
    let mut slow = Conn::open(server.addr).expect("connect");
    slow.write(b"GET /api/hello HTTP/1.1\r\nHost: x\r\n").expect("partial head");
    let started = Instant::now();

    // Meanwhile another client is served.
    let res = server.get("/api/hello", &[]);
    assert_eq!(res.status, 200);

    // The slow connection is closed (EOF or reset; a 408 first is fine too).
    let mut stream = slow.stream().try_clone().expect("clone");
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut buf = Vec::new();
    let outcome = stream.read_to_end(&mut buf);
    let elapsed = started.elapsed();
    match outcome {
        Ok(_) => {
            let text = String::from_utf8_lossy(&buf);
            assert!(buf.is_empty() || text.starts_with("HTTP/1.1 408"), "unexpected bytes: {text:?}");
        }
        Err(e) => assert!(
            matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted),
            "connection was not closed: {e}"
        ),
    }
    assert!(elapsed < Duration::from_secs(3), "slow header connection lived {elapsed:?}");
    // And the server still answers.
    assert_eq!(server.get("/api/hello", &[]).status, 200);
}

#[test]
fn declared_oversized_body_gets_413_before_it_is_sent() {
    let server = start(settings(Profile::Default));
    let res = testkit::http::request(server.addr, "POST", "/api/hello", &[("Content-Length", "2000000")], None);
    assert_eq!(res.status, 413);
    assert!(res.json()["error"].is_string());
    assert!(res.header_has_token("connection", "close"));
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = start(settings(Profile::Default));
    let mut conn = Conn::open(server.addr).expect("connect");
    conn.write(
        b"GET /api/hello HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .expect("write");
    let first = conn.read_response().expect("first");
    let second = conn.read_response().expect("second");
    let third = conn.read_response().expect("third");
    assert_eq!((first.status, second.status, third.status), (200, 200, 404));
    assert_eq!(first.text(), HELLO);
    assert_eq!(second.json()["status"], "ok");
}
