//! Dependencies failing: Postgres stopped, never there, or without the table; the SQLite file missing. Each must
//! answer 503 with Retry-After promptly (never hang), leave the other rungs working, and recover by itself.
//! Time bounds are generous (the machine is shared): they tell "answers promptly" from "hangs".

mod common;

use std::time::{Duration, Instant};

use common::{Dataset, Response, TestServer, assert_json, body, postgres_body, settings, sqlite_body};
use testkit::Postgres;
use testkit::wait::eventually;

const UNAVAILABLE: &str = r#"{"error":"database unavailable"}"#;

fn assert_unavailable(res: &Response, what: &str) {
    assert_json(res, 503, UNAVAILABLE, what);
    assert_eq!(res.header("retry-after"), Some("1"), "{what}: Retry-After");
}

/// Runs `f` and returns its result with how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

#[test]
fn postgres_stopped_then_back() {
    let mut pg = Postgres::start();
    let url = pg.create_database("ladder");
    let data = Dataset::generate(100);
    let id = data.sample_ids().remove(0);
    let server = TestServer::start(settings(&data.db(), Some(&url)));

    // No table yet: 503, and the same connections answer once it is seeded (no restart).
    assert_unavailable(&server.post("/ladder/postgres", &body(&id)), "before seeding");
    common::seed(&url, 1000);
    assert_json(&server.post("/ladder/postgres", &body(&id)), 200, &postgres_body(&data, &id), "seeded");

    pg.stop_immediate();
    for attempt in 0..3 {
        let (res, took) = timed(|| server.post("/ladder/postgres", &body(&id)));
        assert_unavailable(&res, &format!("Postgres down, attempt {attempt}"));
        assert!(took < Duration::from_millis(2500), "503 took {took:?}");
    }
    assert_json(&server.post("/ladder/sqlite", &body(&id)), 200, &sqlite_body(&data, &id), "sqlite rung meanwhile");
    assert_eq!(server.get("/healthz").status, 200);

    pg.restart();
    let back = eventually(Duration::from_secs(10), || {
        let res = server.post("/ladder/postgres", &body(&id));
        (res.status == 200).then_some(res)
    });
    let back = back.unwrap_or_else(|| panic!("the postgres rung did not recover within 10 s"));
    assert_json(&back, 200, &postgres_body(&data, &id), "recovered");
}

#[test]
fn starts_and_serves_without_postgres() {
    let data = Dataset::generate(50);
    let id = data.sample_ids().remove(0);
    // Nothing listens there: connections are refused.
    let nowhere = format!("postgres://postgres@127.0.0.1:{}/ladder", testkit::free_port());
    for database_url in [Some(nowhere.as_str()), None] {
        let server = TestServer::start(settings(&data.db(), database_url));
        assert_json(&server.get("/ladder/empty"), 200, r#"{"ok":true}"#, "empty");
        assert_json(&server.post("/ladder/validate", &body(&id)), 200, &format!(r#"{{"ok":true,"id":"{id}"}}"#), "");
        assert_json(&server.post("/ladder/sqlite", &body(&id)), 200, &sqlite_body(&data, &id), "sqlite");
        let (res, took) = timed(|| server.post("/ladder/postgres", &body(&id)));
        assert_unavailable(&res, &format!("{database_url:?}"));
        assert!(took < Duration::from_millis(2500), "503 took {took:?}");
        // A bad body is still a 400, not a 503: validation comes first.
        assert_eq!(server.post("/ladder/postgres", "{}").status, 400);
    }
}

#[test]
fn sqlite_missing_then_present() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("metadata.db");
    let server = TestServer::start(settings(&path, None));
    for rung in ["/ladder/sqlite", "/ladder/postgres"] {
        let (res, took) = timed(|| server.post(rung, &body("abc")));
        assert_unavailable(&res, rung);
        assert!(took < Duration::from_millis(1000), "{rung}: 503 took {took:?}");
    }
    assert_json(&server.post("/ladder/validate", &body("abc")), 200, r#"{"ok":true,"id":"abc"}"#, "validate");

    // Not a database: still 503.
    std::fs::write(&path, b"this is not a SQLite file, it is much too short to be one").expect("write");
    std::thread::sleep(Duration::from_millis(300));
    assert_unavailable(&server.post("/ladder/sqlite", &body("abc")), "not a database");

    // The dataset appears under that path: answered within the reopen interval.
    let data = Dataset::generate(50);
    std::fs::remove_file(&path).expect("remove");
    std::fs::copy(data.db(), &path).expect("copy the dataset into place");
    let id = data.sample_ids().remove(0);
    let back = eventually(Duration::from_secs(5), || {
        let res = server.post("/ladder/sqlite", &body(&id));
        (res.status == 200).then_some(res)
    });
    assert_json(&back.expect("the sqlite rung recovers"), 200, &sqlite_body(&data, &id), "recovered");
}
