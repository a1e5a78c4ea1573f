//! The Redis cache against a real redis-server: cache-aside with a TTL when it is up; straight to SQLite,
//! with correct bodies and no hang, when it is killed or frozen; back to caching when it returns.

mod common;

use std::time::{Duration, Instant};

use common::{Dataset, TestServer, assert_json, settings, with_redis};
use testkit::Redis;

fn redis_conn(redis: &Redis) -> redis::Connection {
    redis::Client::open(redis.url()).expect("client").get_connection().expect("connect")
}

fn cached(conn: &mut redis::Connection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(key).query(conn).expect("GET")
}

fn present_id(data: &Dataset) -> String {
    data.open_rw().query_row("SELECT id FROM videos LIMIT 1", [], |r| r.get(0)).expect("an id")
}

#[test]
fn responses_are_cached_per_id_and_region_with_a_ttl() {
    let redis = Redis::start();
    let data = Dataset::generate(30, 5, 9);
    let id = present_id(&data);
    let server = TestServer::start(with_redis(settings(&data.db()), &redis.url()));
    let mut conn = redis_conn(&redis);

    let first = server.get(&format!("/v1/metadata/{id}?region=ja"));
    assert_eq!(first.status, 200);
    let key = format!("metadata:v1:ja:{id}");
    assert!(
        testkit::wait::until(Duration::from_secs(5), || cached(&mut conn, &key).is_some()).is_some(),
        "the body lands in Redis"
    );
    assert_eq!(cached(&mut conn, &key).as_deref(), Some(first.body.as_slice()), "the rendered body is cached");
    let ttl: i64 = redis::cmd("TTL").arg(&key).query(&mut conn).expect("TTL");
    assert!((1..=60).contains(&ttl), "a TTL is set: {ttl}");

    // Change the row behind the cache: the cached region still answers the old body, another region reads
    // SQLite and sees the change. That is what cache-aside with a TTL means.
    data.open_rw().execute("UPDATE videos SET views = 123456789 WHERE id = ?1", [&id]).expect("update");
    assert_eq!(server.get(&format!("/v1/metadata/{id}?region=ja")).body, first.body, "served from Redis");
    let ko = server.get(&format!("/v1/metadata/{id}?region=ko"));
    assert!(ko.text().contains(r#""views":123456789"#), "a miss reads SQLite: {}", ko.text());

    // Absent ids are not cached.
    assert_json(&server.get("/v1/metadata/absent-id?region=ja"), 404, "null", "absent");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(cached(&mut conn, "metadata:v1:ja:absent-id"), None, "404s are not cached");
    assert_json(&server.get("/healthz"), 200, r#"{"status":"ok","sqlite":"ok","redis":"ok"}"#, "healthz");
}

#[test]
fn redis_killed_then_restarted() {
    let mut redis = Redis::start();
    let data = Dataset::generate(30, 5, 9);
    let id = present_id(&data);
    let server = TestServer::start(with_redis(settings(&data.db()), &redis.url()));
    let path = format!("/v1/metadata/{id}?region=en");
    let body = server.get(&path).body;

    redis.kill();
    for _ in 0..20 {
        let started = Instant::now();
        let res = server.get(&path);
        assert_eq!((res.status, &res.body), (200, &body), "SQLite answers while Redis is down");
        // The bound is the 100 ms Redis timeout plus slack for a loaded machine: no request hangs.
        assert!(started.elapsed() < Duration::from_secs(2), "answered after {:?}", started.elapsed());
    }
    assert_json(&server.get("/healthz"), 200, r#"{"status":"ok","sqlite":"ok","redis":"down"}"#, "healthz, Redis down");

    redis.restart();
    let mut conn = redis_conn(&redis);
    let key = format!("metadata:v1:en:{id}");
    assert!(
        testkit::wait::until(Duration::from_secs(10), || {
            server.get(&path);
            cached(&mut conn, &key).is_some()
        })
        .is_some(),
        "caching resumes after Redis returns"
    );
    assert_eq!(server.get("/healthz").status, 200);
}

#[test]
fn redis_frozen_does_not_hang_requests() {
    let redis = Redis::start();
    let data = Dataset::generate(30, 5, 9);
    let id = present_id(&data);
    let server = TestServer::start(with_redis(settings(&data.db()), &redis.url()));
    let path = format!("/v1/metadata/{id}?region=th");
    let body = server.get(&path).body;

    redis.freeze();
    for _ in 0..10 {
        let started = Instant::now();
        let res = server.get(&path);
        assert_eq!((res.status, &res.body), (200, &body), "answers while Redis is frozen");
        assert!(started.elapsed() < Duration::from_secs(2), "answered after {:?}", started.elapsed());
    }
    let health = server.get("/healthz");
    assert_json(&health, 200, r#"{"status":"ok","sqlite":"ok","redis":"down"}"#, "healthz, Redis frozen");
    redis.thaw();
    assert!(
        testkit::wait::until(Duration::from_secs(10), || server.get("/healthz").text().contains(r#""redis":"ok""#))
            .is_some(),
        "healthz sees Redis again"
    );
}
