//! flight-rs with a real redis-server (testkit): state shared across processes, and faults (kill, restart,
//! freeze) that must degrade the service, never hang it.

mod common;

use std::time::{Duration, Instant};

use flight::config::{Profile, Settings};

use common::{Dist, TestServer, settings, start};
use testkit::http::Response;

/// Production on the given Redis. A generous command timeout for the sharing tests, so a loaded machine
/// does not silently fall back to memory and split the counts.
fn on_redis(redis: &testkit::Redis, dist: Option<&Dist>, timeout: Duration) -> Settings {
    let mut s = settings(Profile::Production);
    s.redis_url = Some(redis.url());
    s.redis_timeout = timeout;
    s.rate_window = Duration::from_secs(3600);
    s.dist_path = dist.map(|d| d.root.clone());
    s
}

/// GET /healthz past the response cache, which (bug, see `healthz_recovers_without_cache_bypass`) would
/// otherwise answer with a copy up to 30 s old.
fn health(server: &TestServer) -> Response {
    server.get("/healthz", &[("Cache-Control", "no-cache")])
}

/// Waits until /healthz reports the wanted Redis state (connects lazily, so the first call may not).
fn wait_redis(server: &TestServer, want: &str, within: Duration) -> Response {
    wait_health(server, want, within, &[("Cache-Control", "no-cache")])
}

fn wait_health(server: &TestServer, want: &str, within: Duration, headers: &[(&str, &str)]) -> Response {
    let deadline = Instant::now() + within;
    loop {
        let res = server.get("/healthz", headers);
        assert_eq!(res.status, 200, "healthz must stay 200 whatever Redis does");
        if res.json()["redis"] == want || Instant::now() >= deadline {
            assert_eq!(res.json()["redis"], want, "redis state after {within:?}");
            return res;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn cookie_of(res: &Response) -> String {
    let cookie = res.header("set-cookie").unwrap_or_else(|| panic!("no Set-Cookie: {:?}", res.headers));
    cookie.split(';').next().unwrap_or("").to_string()
}

#[test]
fn rate_limit_is_shared_across_servers() {
    let redis = testkit::Redis::start();
    let mut s = on_redis(&redis, None, Duration::from_secs(1));
    s.rate_limit = 5;
    let a = start(s.clone());
    let b = start(s);
    for server in [&a, &a, &a, &b, &b] {
        assert_eq!(server.get("/api/hello", &[]).status, 200);
    }
    let res = b.get("/api/hello", &[]);
    assert_eq!(res.status, 429, "6th request across both servers");
    assert!(res.header("retry-after").is_some());
    assert_eq!(a.get("/api/hello", &[]).status, 429);
}

#[test]
fn sessions_move_between_servers() {
    let redis = testkit::Redis::start();
    let s = on_redis(&redis, None, Duration::from_secs(1));
    let a = start(s.clone());
    let b = start(s);
    let first = a.get("/api/session", &[]);
    assert_eq!(first.status, 200);
    assert_eq!(first.json()["visits"], 1);
    let cookie = cookie_of(&first);
    let second = b.get("/api/session", &[("Cookie", &cookie)]);
    assert_eq!(second.status, 200);
    assert_eq!(second.json()["visits"], 2);
    assert!(second.header("set-cookie").is_none());
    assert_eq!(a.get("/api/session", &[("Cookie", &cookie)]).json()["visits"], 3);
}

#[test]
fn cache_entries_are_shared_across_servers() {
    let redis = testkit::Redis::start();
    let dist = common::dist();
    let s = on_redis(&redis, Some(&dist), Duration::from_secs(1));
    let a = start(s.clone());
    let b = start(s);
    let miss = a.get("/big.txt", &[]);
    assert_eq!(miss.header("x-cache"), Some("miss"));
    let hit = b.get("/big.txt", &[]);
    assert_eq!(hit.header("x-cache"), Some("hit"), "B should answer from A's entry");
    assert_eq!(hit.body, miss.body);
    assert_eq!(hit.header("content-type"), miss.header("content-type"));
    // The stored copy keeps its encoding key: a gzip client on B is a miss, then a hit on A.
    assert_eq!(b.get("/big.txt", &[("Accept-Encoding", "gzip")]).header("x-cache"), Some("miss"));
    let gz = a.get("/big.txt", &[("Accept-Encoding", "gzip")]);
    assert_eq!(gz.header("x-cache"), Some("hit"));
    assert_eq!(common::decode("gzip", &gz.body), common::big_text().as_bytes());
}

#[test]
fn redis_killed_then_restarted() {
    let mut redis = testkit::Redis::start();
    let server = start(on_redis(&redis, None, Duration::from_millis(100)));
    wait_redis(&server, "ok", Duration::from_secs(5));
    let cookie = cookie_of(&server.get("/api/session", &[]));

    redis.kill();
    let started = Instant::now();
    let res = server.get("/api/hello", &[]);
    assert_eq!(res.status, 200);
    assert!(started.elapsed() < Duration::from_secs(1), "hello took {:?} with Redis dead", started.elapsed());
    assert!(res.header("ratelimit-remaining").is_some(), "the limiter falls back to memory, it does not switch off");
    assert_eq!(health(&server).json()["redis"], "unavailable");

    for headers in [vec![], vec![("Cookie", cookie.as_str())]] {
        let res = server.get("/api/session", &headers);
        assert_eq!(res.status, 503, "sessions need Redis once configured");
        assert!(res.header("retry-after").is_some());
        assert!(res.json()["error"].is_string());
        assert!(res.header("set-cookie").is_none());
    }
    // Still serving plain routes after a few failures.
    for _ in 0..3 {
        assert_eq!(server.get("/api/hello", &[]).status, 200);
    }

    redis.restart();
    wait_redis(&server, "ok", Duration::from_secs(10));
    let first = server.get("/api/session", &[]);
    assert_eq!(first.status, 200);
    assert_eq!(first.json()["visits"], 1);
    let cookie = cookie_of(&first);
    assert_eq!(server.get("/api/session", &[("Cookie", &cookie)]).json()["visits"], 2);
}

#[test]
fn redis_frozen_does_not_hang_requests() {
    let redis = testkit::Redis::start();
    let dist = common::dist();
    let server = start(on_redis(&redis, Some(&dist), Duration::from_millis(100)));
    wait_redis(&server, "ok", Duration::from_secs(5));

    redis.freeze();
    for path in ["/api/hello", "/big.txt", "/api/hello"] {
        let started = Instant::now();
        let res = server.get(path, &[]);
        let took = started.elapsed();
        assert_eq!(res.status, 200, "{path}");
        assert!(took < Duration::from_secs(1), "{path} took {took:?} with Redis frozen");
    }
    let started = Instant::now();
    let res = health(&server);
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(res.json()["redis"], "unavailable");
    let started = Instant::now();
    assert_eq!(server.get("/api/session", &[]).status, 503);
    assert!(started.elapsed() < Duration::from_secs(1));

    redis.thaw();
    wait_redis(&server, "ok", Duration::from_secs(10));
    let first = server.get("/api/session", &[]);
    assert_eq!(first.status, 200);
    assert_eq!(server.get("/api/session", &[("Cookie", &cookie_of(&first))]).json()["visits"], 2);
}

#[test]
fn healthz_names_redis_state() {
    let redis = testkit::Redis::start();
    let server = start(on_redis(&redis, None, Duration::from_secs(1)));
    let res = wait_redis(&server, "ok", Duration::from_secs(5));
    assert_eq!(res.json()["status"], "ok");
    assert_eq!(res.json()["profile"], "production");
}

/// A load balancer polls /healthz without cache headers. In production the response cache keeps the copy
/// taken while Redis was frozen (its SET lands in Redis on thaw), so /healthz says "unavailable" for the
/// whole cache TTL (30 s) after Redis is back; likewise it can say "ok" for 30 s after Redis died.
#[test]
fn healthz_recovers_without_cache_bypass() {
    let redis = testkit::Redis::start();
    let server = start(on_redis(&redis, None, Duration::from_millis(100)));
    wait_redis(&server, "ok", Duration::from_secs(5));
    redis.freeze();
    assert_eq!(server.get("/healthz", &[]).json()["redis"], "unavailable");
    redis.thaw();
    wait_health(&server, "ok", Duration::from_secs(5), &[]);
}
