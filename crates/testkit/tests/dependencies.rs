//! testkit starts the real servers, and its fault injection does what it says.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn redis_ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
    let mut buf = [0u8; 16];
    s.write_all(b"PING\r\n").is_ok() && matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

#[test]
fn redis_starts_freezes_thaws_and_restarts() {
    let mut redis = testkit::Redis::start();
    assert!(redis_ping(redis.port()));
    redis.freeze();
    assert!(!redis_ping(redis.port()), "a frozen redis must not answer");
    redis.thaw();
    assert!(redis_ping(redis.port()));
    redis.kill();
    assert!(!redis_ping(redis.port()));
    redis.restart();
    assert!(redis_ping(redis.port()));
}

#[test]
fn postgres_serves_databases_and_survives_an_immediate_stop() {
    let mut pg = testkit::Postgres::start();
    let url = pg.create_database("kit_test");
    assert!(url.ends_with("/kit_test"), "{url}");
    pg.psql("kit_test", "CREATE TABLE t (v integer); INSERT INTO t VALUES (41), (1)");
    assert_eq!(pg.psql("kit_test", "SELECT sum(v) FROM t"), "42");
    pg.stop_immediate();
    assert!(TcpStream::connect(("127.0.0.1", pg.port())).is_err(), "stopped postgres still accepts connections");
    pg.restart();
    assert_eq!(pg.psql("kit_test", "SELECT sum(v) FROM t"), "42", "committed rows survive a crash-like stop");
}
