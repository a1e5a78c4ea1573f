//! /healthz, and what scribe-rs does when Redis dies or hangs and when Postgres goes away and comes back.
//! Time bounds are generous (the machine is shared): they tell "answers promptly" from "hangs".

mod common;

use std::time::{Duration, Instant};

use common::{App, JsonRes, Response, Stack, ids, record};
use serde_json::json;
use testkit::wait::eventually;
use testkit::{Postgres, Redis};

fn health(addr: std::net::SocketAddr) -> Response {
    common::get(addr, "/healthz")
}

/// Runs `f` and returns its result with how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

#[test]
fn healthz_ok() {
    let s = Stack::start("t_health");
    let res = health(s.addr());
    assert_eq!(res.ok(), json!({"status": "ok", "postgres": "ok", "redis": "ok"}));
    assert_eq!(res.header("content-type"), Some("application/json"));
    assert_eq!(res.header("cache-control"), Some("no-store"));
}

#[test]
fn redis_killed() {
    let mut s = Stack::start("t_redis_killed");
    s.create("notes", &record(json!({"title": "before"}), 1));
    s.create("drafts", &record(json!({"title": "before"}), 1));
    health(s.addr()).ok();

    s.redis.kill();
    let (down, took) = timed(|| {
        eventually(Duration::from_secs(2), || {
            let res = health(s.addr());
            (res.status == 503).then_some(res)
        })
    });
    let down = down.unwrap_or_else(|| panic!("/healthz still 200 two seconds after Redis died ({took:?})"));
    assert_eq!(down.json(), json!({"status": "error", "postgres": "ok", "redis": "unavailable"}));

    // Schemas of folder components never needed Redis; others fall back to the envelope without it.
    let (res, took) = timed(|| s.post("/notes", &record(json!({"title": "during"}), 1)));
    assert_eq!(res.ok()[0]["id"], 2);
    assert!(took < Duration::from_secs(2), "POST /notes took {took:?} with Redis down");
    s.post("/notes", &record(json!({"title": 5}), 1)).expect_status(400, "notes.schema.json still applies");
    let (res, took) = timed(|| s.post("/fresh_component", &record(json!({"title": 5}), 1)));
    res.ok();
    assert!(took < Duration::from_secs(2), "a component never seen before took {took:?} with Redis down");
    assert_eq!(ids(&s.get("/notes/all").ok()), [1, 2]);
    s.put("/notes/1", &record(json!({"title": "edited"}), 1)).ok();
    assert_eq!(s.get("/notes/1/history").ok().as_array().map(Vec::len), Some(2));
    assert_eq!(s.delete("/drafts/1").ok(), json!([]));

    s.redis.restart();
    let back = eventually(Duration::from_secs(10), || (health(s.addr()).status == 200).then_some(()));
    assert!(back.is_some(), "/healthz back to 200 within 10 s of Redis returning");
}

#[test]
fn redis_frozen() {
    let s = Stack::start("t_redis_frozen");
    s.create("notes", &record(json!({"title": "before"}), 1));
    s.redis.freeze();
    // Also thawed by Redis' Drop, should an assertion fail first.
    let budget = Duration::from_secs(1);
    let (res, took) = timed(|| s.post("/notes", &record(json!({"title": "during"}), 1)));
    res.ok();
    assert!(took < budget, "POST /notes took {took:?} with Redis frozen");
    let (res, took) = timed(|| s.get("/notes/1"));
    res.ok();
    assert!(took < budget, "GET took {took:?} with Redis frozen");
    let (res, took) = timed(|| s.post("/unseen_component", &record(json!({}), 1)));
    res.ok();
    assert!(took < budget, "a component looked up in Redis took {took:?} with Redis frozen");
    let (res, took) = timed(|| s.post("/another_unseen", &record(json!({}), 1)));
    res.ok();
    assert!(took < budget, "a second lookup took {took:?} with Redis frozen");
    let (res, took) = timed(|| health(s.addr()));
    assert!(took < Duration::from_secs(3), "/healthz took {took:?} with Redis frozen");
    assert_eq!(res.status, 503, "{}", res.text());
    assert_eq!(res.json()["redis"], "unavailable");
    assert_eq!(res.json()["postgres"], "ok");

    s.redis.thaw();
    let back = eventually(Duration::from_secs(10), || (health(s.addr()).status == 200).then_some(()));
    assert!(back.is_some(), "/healthz back to 200 within 10 s of Redis thawing");
    s.post("/notes", &record(json!({"title": "after"}), 1)).ok();
}

/// Postgres crashes: requests get a prompt 503 with Retry-After (not a hang, not a 500); when it is back,
/// writes succeed again and every acknowledged record is still there.
#[test]
fn postgres_outage_and_recovery() {
    let mut pg = Postgres::start();
    let url = pg.create_database("t_pg_outage");
    let redis = Redis::start();
    let app = App::start(&url, redis.port(), &["--db-timeout-ms", "500"]);
    let mut acknowledged = Vec::new();
    for i in 0..5 {
        acknowledged.push(app.post("/notes", &record(json!({"n": i}), 1)).ok()[0]["id"].as_i64().expect("id"));
    }
    app.put("/notes/1", &record(json!({"n": "edited"}), 1)).ok();

    pg.stop_immediate();
    let (res, took) = timed(|| app.post("/notes", &record(json!({"n": "lost"}), 1)));
    assert_eq!(res.status, 503, "POST with Postgres down: {}", res.text());
    assert!(res.header("retry-after").is_some(), "503 carries Retry-After: {:?}", res.headers);
    assert!(res.json()["error"].is_string());
    assert!(took < Duration::from_secs(3), "POST took {took:?} with Postgres down");
    for (method, path) in [("GET", "/notes/1"), ("GET", "/notes/all"), ("PUT", "/notes/1"), ("DELETE", "/notes/2")] {
        let body = record(json!({"n": "lost"}), 1).to_string();
        let body = (method == "PUT").then_some(body.as_bytes());
        let (res, took) = timed(|| common::request(app.addr, method, path, &[], body));
        assert_eq!(res.status, 503, "{method} {path} with Postgres down: {}", res.text());
        assert!(res.header("retry-after").is_some(), "{method} {path}: {:?}", res.headers);
        assert!(took < Duration::from_secs(3), "{method} {path} took {took:?}");
    }
    let (res, took) = timed(|| app.get("/healthz"));
    assert_eq!(res.status, 503);
    assert_eq!(res.json(), json!({"status": "error", "postgres": "unavailable", "redis": "ok"}));
    assert!(took < Duration::from_secs(3), "/healthz took {took:?}");

    pg.restart();
    let (written, took) = timed(|| {
        eventually(Duration::from_secs(10), || {
            let res = app.post("/notes", &record(json!({"n": "after"}), 1));
            assert!(res.status == 200 || res.status == 503, "while Postgres returns: {} {}", res.status, res.text());
            (res.status == 200).then(|| res.json())
        })
    });
    let written = written.unwrap_or_else(|| panic!("no successful write within {took:?} of Postgres restarting"));
    acknowledged.push(written[0]["id"].as_i64().expect("id"));
    let all = app.get("/notes/all").ok();
    let present = ids(&all);
    for id in &acknowledged {
        assert!(present.contains(id), "acknowledged record {id} lost: {all}");
    }
    assert_eq!(all[0]["data"]["n"], "edited", "the acknowledged update survived");
    assert_eq!(app.get("/notes/1/history").ok().as_array().map(Vec::len), Some(2));
    assert_eq!(app.get("/healthz").ok()["postgres"], "ok");
    drop(app);
}
