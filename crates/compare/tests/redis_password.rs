//! compare's own Redis commands against a real redis-server that asks for a password (`--requirepass`), as a
//! user's `--redis-url redis://:password@host:port/db` would point at: the URL's password and database reach
//! the server, and a wrong or missing password fails with an error that says it is authentication.

use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use compare::system::redis::{Keyspace, command, keyspace};
use testkit::process::Guard;

const PASSWORD: &str = "s3cret";

/// A redis-server of the test's own on a free loopback port, with no persistence, that refuses every command
/// until the client authenticates with `PASSWORD`. Killed when dropped.
struct PasswordRedis {
    port: u16,
    _server: Guard,
    _dir: tempfile::TempDir,
}

impl PasswordRedis {
    fn start() -> PasswordRedis {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = testkit::free_port();
        let server = Command::new(testkit::find_binary("redis-server"))
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--requirepass", PASSWORD])
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let server = Guard(server);
        let listening =
            testkit::wait::until(Duration::from_secs(30), || TcpStream::connect(("127.0.0.1", port)).is_ok());
        assert!(listening.is_some(), "redis-server on :{port} did not listen within 30 s");
        PasswordRedis { port, _server: server, _dir: dir }
    }

    fn url(&self, credentials: &str, db: u32) -> String {
        format!("redis://{credentials}127.0.0.1:{}/{db}", self.port)
    }
}

#[test]
fn the_urls_password_and_database_reach_the_server() {
    let redis = PasswordRedis::start();
    let db0 = redis.url(&format!(":{PASSWORD}@"), 0);
    let db4 = redis.url(&format!(":{PASSWORD}@"), 4);
    assert_eq!(command(&db0, &["PING"]).expect("PING"), b"PONG");
    assert_eq!(command(&db4, &["SET", "k", "a\r\nb"]).expect("SET"), b"OK");
    assert_eq!(command(&db4, &["GET", "k"]).expect("GET"), b"a\r\nb", "a bulk string, CRLF and all");
    assert_eq!(command(&db0, &["EXISTS", "k"]).expect("EXISTS"), b"0", "the key went to database 4");
    assert_eq!(command(&db4, &["FLUSHDB"]).expect("FLUSHDB"), b"OK");
    assert_eq!(command(&db4, &["EXISTS", "k"]).expect("EXISTS"), b"0");
    // The default user named as well as the password is the same login.
    assert_eq!(command(&redis.url(&format!("default:{PASSWORD}@"), 0), &["PING"]).expect("PING"), b"PONG");

    let before = keyspace(&db4).expect("INFO stats");
    // STRLEN looks its key up as GET does, and answers an integer for a missing key too.
    assert_eq!(command(&db4, &["STRLEN", "missing"]).expect("STRLEN"), b"0");
    command(&db4, &["SET", "present", "abc"]).expect("SET");
    assert_eq!(command(&db4, &["STRLEN", "present"]).expect("STRLEN"), b"3");
    let after = keyspace(&db4).expect("INFO stats");
    assert_eq!(after, Keyspace { hits: before.hits + 1, misses: before.misses + 1 });
}

#[test]
fn a_wrong_or_missing_password_fails_naming_authentication() {
    let redis = PasswordRedis::start();
    for credentials in [":not-the-password@", ""] {
        let url = redis.url(credentials, 0);
        for err in [command(&url, &["PING"]).expect_err("PING"), keyspace(&url).expect_err("INFO stats")] {
            let message = format!("{err:#}");
            assert!(message.to_lowercase().contains("authentication"), "{credentials:?}: {message}");
            assert!(message.contains(&format!("Redis at 127.0.0.1:{}", redis.port)), "{message}");
            assert!(!message.contains("not-the-password"), "the password stays out of the error: {message}");
        }
    }
    let reply = command(&redis.url(&format!(":{PASSWORD}@"), 0), &["NOSUCHCOMMAND"]).expect_err("unknown command");
    assert!(format!("{reply:#}").contains("unknown command"), "{reply:#}");
}

#[test]
fn a_server_that_never_answers_fails_within_the_timeout() {
    // A listener nobody accepts from: the kernel completes the handshake, then nothing is ever said.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("redis://:{PASSWORD}@{}/0", silent.local_addr().expect("address"));
    let started = std::time::Instant::now();
    let err = command(&url, &["PING"]).expect_err("no answer");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}: {err:#}", started.elapsed());
}
