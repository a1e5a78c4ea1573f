//! Shared helpers for the scribe-rs integration tests: a blocking raw HTTP/1.1 client (every socket has read and
//! write timeouts, so no test can hang on a server that stops answering), record builders, and a `Stack` that
//! runs scribe-rs in process against real Postgres and Redis (testkit).
//!
//! Postgres: one cluster per test binary, shared through a `Weak` so it is stopped when the last test using it
//! drops its handle (statics are never dropped, and a cluster left running would outlive the tests). Each test
//! gets its own database in it. Tests that stop or restart Postgres start their own cluster instead.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::{Postgres, Redis};

/// Upper bound on any single socket read or write.
pub const IO_TIMEOUT: Duration = Duration::from_secs(15);

/// The workspace's schemas/ folder (notes.schema.json and the envelope).
pub const SCHEMAS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemas");

/// The timestamp most records are written with.
pub const T0: &str = "2026-11-29T20:00:00Z";
/// The same instant as scribe-rs serializes it (UTC, milliseconds, Z).
pub const T0_OUT: &str = "2026-11-29T20:00:00.000Z";

// ------------------------------------------------------------------------------------------------------------
// HTTP
// ------------------------------------------------------------------------------------------------------------

/// One parsed response.
#[derive(Debug)]
pub struct Res {
    pub status: u16,
    /// Names lower-cased, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Res {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): status {} {:?}", self.status, self.text()))
    }

    /// Asserts 200 and returns the JSON body.
    pub fn ok(&self) -> Value {
        assert_eq!(self.status, 200, "expected 200, got {} {:?}", self.status, self.text());
        self.json()
    }

    /// Asserts the status and returns the body text (for messages).
    pub fn expect_status(&self, status: u16, what: &str) -> String {
        assert_eq!(self.status, status, "{what}: expected {status}, got {} {:?}", self.status, self.text());
        self.text()
    }
}

/// Sends raw bytes on a new connection and reads one response. Write errors are ignored when a response
/// arrives anyway (a server may answer 413 and close before reading a body).
pub fn send_raw(addr: SocketAddr, bytes: &[u8]) -> io::Result<Res> {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let written = writer.write_all(bytes).and_then(|()| writer.flush());
    let mut reader = BufReader::new(stream);
    match read_response(&mut reader) {
        Ok(res) => Ok(res),
        Err(e) => Err(written.err().unwrap_or(e)),
    }
}

/// One request with `Connection: close`; a JSON body gets `Content-Type: application/json`.
pub fn try_request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> io::Result<Res> {
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-type")) {
            head.push_str("Content-Type: application/json\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.unwrap_or_default());
    send_raw(addr, &bytes)
}

pub fn request(addr: SocketAddr, method: &str, target: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Res {
    try_request(addr, method, target, headers, body).unwrap_or_else(|e| panic!("{method} {target}: {e}"))
}

pub fn get(addr: SocketAddr, target: &str) -> Res {
    request(addr, "GET", target, &[], None)
}

pub fn delete(addr: SocketAddr, target: &str) -> Res {
    request(addr, "DELETE", target, &[], None)
}

pub fn post(addr: SocketAddr, target: &str, body: &Value) -> Res {
    request(addr, "POST", target, &[], Some(body.to_string().as_bytes()))
}

pub fn put(addr: SocketAddr, target: &str, body: &Value) -> Res {
    request(addr, "PUT", target, &[], Some(body.to_string().as_bytes()))
}

fn read_response(reader: &mut BufReader<TcpStream>) -> io::Result<Res> {
    let status_line = read_line(reader)?;
    if status_line.is_empty() {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before a response"));
    }
    let mut parts = status_line.splitn(3, ' ');
    if !parts.next().unwrap_or_default().starts_with("HTTP/1.") {
        return Err(invalid(format!("bad status line {status_line:?}")));
    }
    let status: u16 =
        parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| invalid(format!("bad status {status_line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader)?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').ok_or_else(|| invalid(format!("bad header line {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let mut res = Res { status, headers, body: Vec::new() };
    let chunked = res.header("transfer-encoding").is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    if chunked {
        loop {
            let line = read_line(reader)?;
            let size = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size, 16).map_err(|_| invalid(format!("bad chunk size {line:?}")))?;
            if size == 0 {
                while !read_line(reader)?.is_empty() {}
                break;
            }
            let start = res.body.len();
            res.body.resize(start + size, 0);
            reader.read_exact(&mut res.body[start..])?;
            if !read_line(reader)?.is_empty() {
                return Err(invalid("chunk not followed by CRLF".into()));
            }
        }
    } else if let Some(len) = res.header("content-length") {
        let len: usize = len.parse().map_err(|_| invalid(format!("bad content-length {len:?}")))?;
        res.body = vec![0; len];
        reader.read_exact(&mut res.body)?;
    } else if !(status < 200 || status == 204 || status == 304) {
        reader.read_to_end(&mut res.body)?;
    }
    Ok(res)
}

fn read_line(reader: &mut BufReader<TcpStream>) -> io::Result<String> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// Percent-encodes everything but RFC 3986 unreserved characters (as encodeURIComponent, roughly).
pub fn enc(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() * 3);
    for b in raw.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Polls `f` every 50 ms until it returns `Some` or `within` passes.
pub fn eventually<T>(within: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ------------------------------------------------------------------------------------------------------------
// Records
// ------------------------------------------------------------------------------------------------------------

/// A record body written at T0 by `by`.
pub fn record(data: Value, by: i64) -> Value {
    record_at(data, by, T0, T0)
}

pub fn record_at(data: Value, by: i64, created: &str, modified: &str) -> Value {
    json!({ "data": data, "date_created": created, "date_modified": modified, "created_by": by, "modified_by": by })
}

/// The one row of a `[row]` answer.
pub fn single(value: &Value) -> &Value {
    let list = value.as_array().unwrap_or_else(|| panic!("expected an array, got {value}"));
    assert_eq!(list.len(), 1, "expected exactly one row, got {value}");
    &list[0]
}

/// The ids of an array of rows, in order.
pub fn ids(value: &Value) -> Vec<i64> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("expected an array of rows, got {value}"))
        .iter()
        .map(|row| row["id"].as_i64().unwrap_or_else(|| panic!("row without an integer id: {row}")))
        .collect()
}

/// The keys of a JSON object, in order.
pub fn keys(value: &Value) -> Vec<&str> {
    value.as_object().unwrap_or_else(|| panic!("expected an object, got {value}")).keys().map(String::as_str).collect()
}

// ------------------------------------------------------------------------------------------------------------
// Servers
// ------------------------------------------------------------------------------------------------------------

static SHARED_POSTGRES: Mutex<Weak<Postgres>> = Mutex::new(Weak::new());

/// The binary's shared Postgres cluster, started on first use and stopped when the last handle is dropped.
pub fn shared_postgres() -> Arc<Postgres> {
    let mut slot = SHARED_POSTGRES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(pg) = slot.upgrade() {
        return pg;
    }
    let pg = Arc::new(Postgres::start());
    *slot = Arc::downgrade(&pg);
    pg
}

/// scribe-rs running in this process on 127.0.0.1:<ephemeral>, one worker. Shut down when dropped.
pub struct App {
    pub addr: SocketAddr,
    server: Option<serve::Server>,
}

impl App {
    /// Starts scribe-rs as main.rs does, with the workspace's schemas/ and `extra` command-line arguments.
    pub fn start(database_url: &str, redis_port: u16, extra: &[&str]) -> App {
        let redis_url = format!("redis://127.0.0.1:{redis_port}/1");
        let mut args = vec!["scribe-rs", "--database-url", database_url, "--redis-url", &redis_url];
        args.extend(["--schema-dir", SCHEMAS]);
        args.extend(extra);
        let config = <scribe::Config as clap::Parser>::try_parse_from(&args)
            .unwrap_or_else(|e| panic!("arguments {args:?}: {e}"));
        let settings = config.resolve().unwrap_or_else(|e| panic!("config does not resolve: {e}"));
        let shared = scribe::Shared::new(settings).unwrap_or_else(|e| panic!("scribe state: {e}"));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
        runtime.block_on(scribe::ensure_database(&shared.settings)).unwrap_or_else(|e| panic!("database: {e}"));
        drop(runtime);
        let addr: SocketAddr = "127.0.0.1:0".parse().expect("an address");
        let listeners = serve::bind_reuseport(addr, 1).expect("bind 127.0.0.1:0");
        let limits = serve::Limits { workers: 1, shutdown_timeout: Duration::from_secs(2), ..Default::default() };
        let server = scribe::start(shared, listeners, limits).expect("scribe-rs starts");
        App { addr: server.local_addr(), server: Some(server) }
    }

    pub fn get(&self, target: &str) -> Res {
        get(self.addr, target)
    }

    pub fn delete(&self, target: &str) -> Res {
        delete(self.addr, target)
    }

    pub fn post(&self, target: &str, body: &Value) -> Res {
        post(self.addr, target, body)
    }

    pub fn put(&self, target: &str, body: &Value) -> Res {
        put(self.addr, target, body)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }
}

/// scribe-rs with its own database in the shared Postgres and its own Redis. Dropped in field order: the
/// server first, then Redis, then this test's handle on Postgres.
pub struct Stack {
    pub app: App,
    pub redis: Redis,
    pub pg: Arc<Postgres>,
    pub db: String,
}

impl Stack {
    /// `db`: this test's database name ([a-z0-9_], unique in the binary).
    pub fn start(db: &str) -> Stack {
        Stack::with_args(db, &[])
    }

    pub fn with_args(db: &str, extra: &[&str]) -> Stack {
        let pg = shared_postgres();
        let url = pg.create_database(db);
        let redis = Redis::start();
        let app = App::start(&url, redis.port(), extra);
        Stack { app, redis, pg, db: db.to_string() }
    }

    /// Another scribe-rs instance on the same database and Redis (as a second replica would be).
    pub fn second_instance(&self) -> App {
        App::start(&self.pg.url(&self.db), self.redis.port(), &[])
    }

    pub fn addr(&self) -> SocketAddr {
        self.app.addr
    }

    pub fn psql(&self, sql: &str) -> String {
        self.pg.psql(&self.db, sql)
    }

    /// Tables in the public schema.
    pub fn table_count(&self) -> i64 {
        self.psql("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'")
            .parse()
            .expect("a count")
    }

    pub fn table_exists(&self, name: &str) -> bool {
        self.psql(&format!(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name = '{name}'"
        )) == "1"
    }

    pub fn get(&self, target: &str) -> Res {
        self.app.get(target)
    }

    pub fn delete(&self, target: &str) -> Res {
        self.app.delete(target)
    }

    pub fn post(&self, target: &str, body: &Value) -> Res {
        self.app.post(target, body)
    }

    pub fn put(&self, target: &str, body: &Value) -> Res {
        self.app.put(target, body)
    }

    /// POSTs a record and returns its row.
    pub fn create(&self, component: &str, body: &Value) -> Value {
        let res = self.post(&format!("/{component}"), body);
        single(&res.ok()).clone()
    }
}
