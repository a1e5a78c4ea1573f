//! Test servers for loadgen and helpers to run it.
//!
//! The servers speak raw HTTP/1.1 over blocking std sockets, one thread per connection, so each test controls
//! every byte of the responses (chunk extensions, close-delimited bodies, interim responses, bodiless 304s…).
//! Each listens on 127.0.0.1:0, counts and records what it received, and stops when dropped: a flag is set,
//! the accept loop is woken by a connection to itself, and every thread is joined.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

pub mod tls;

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::Parser;
use loadgen::cli::{Cli, EngineChoice, RunArgs};
use loadgen::report::Report;

/// How often blocked server threads look at the stop flag.
const POLL: Duration = Duration::from_millis(20);
/// Requests recorded per server at most (the counter keeps counting past it).
const RECORD_MAX: usize = 100_000;
/// Longest a binary run may take before the test kills it and fails.
const BIN_DEADLINE: Duration = Duration::from_secs(20);

/// Body of the default 200 response.
pub const HELLO: &str = "hello";
/// The whole default 200 response, as written on the wire.
pub const HELLO_RESPONSE: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello";
/// JSON body served at /json.
pub const JSON_BODY: &str = "{\"ok\":true}";

/// Chunked response: chunk extensions (token and quoted), lower and upper case hex sizes, and a trailer.
pub const CHUNKED_RESPONSE: &str = concat!(
    "HTTP/1.1 200 OK\r\n",
    "Content-Type: text/plain\r\n",
    "Transfer-Encoding: chunked\r\n",
    "Trailer: X-Checksum\r\n",
    "\r\n",
    "5;ext=1\r\n",
    "hello\r\n",
    "7;name=\"quoted value\";flag\r\n",
    ", world\r\n",
    "a\r\n",
    "0123456789\r\n",
    "B\r\n",
    "abcdefghijk\r\n",
    "0\r\n",
    "X-Checksum: abc\r\n",
    "\r\n",
);
/// What the chunked response decodes to.
pub const CHUNKED_BODY: &str = "hello, world0123456789abcdefghijk";

/// Body of the close-delimited response (no Content-Length, no Transfer-Encoding; the close ends it).
pub const CLOSE_DELIMITED_BODY: &str = "this body ends when the connection does";

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Request {
    /// Which accepted connection it came on (0, 1, 2… in accept order).
    pub conn: u64,
    pub method: String,
    pub target: String,
    pub version: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// First header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }
}

/// What the server does with one request.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Written as is.
    pub bytes: Vec<u8>,
    /// Waited before writing.
    pub delay: Duration,
    /// Close the connection after writing (gracefully: shut down the write side, then drain).
    pub close: bool,
    /// With `close`: wait this long between the last byte and the FIN.
    pub fin_delay: Duration,
}

impl Reply {
    pub fn raw(bytes: impl Into<Vec<u8>>) -> Reply {
        Reply { bytes: bytes.into(), delay: Duration::ZERO, close: false, fin_delay: Duration::ZERO }
    }

    /// A response with Content-Length.
    pub fn status(code: u16, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        let mut head = format!("HTTP/1.1 {code} {}\r\n", reason(code));
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body);
        Reply::raw(bytes)
    }

    pub fn hello() -> Reply {
        Reply::raw(HELLO_RESPONSE)
    }

    pub fn delayed(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    pub fn closing(mut self) -> Reply {
        self.close = true;
        self
    }

    /// Closes, but only `fin_delay` after the response (so the FIN reaches the client on its own).
    pub fn closing_after(mut self, fin_delay: Duration) -> Reply {
        self.close = true;
        self.fin_delay = fin_delay;
        self
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        204 => "No Content",
        304 => "Not Modified",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Whatever",
    }
}

type Handler = Arc<dyn Fn(&Request) -> Reply + Send + Sync>;

struct Shared {
    stop: AtomicBool,
    requests: AtomicU64,
    connections: AtomicU64,
    recorded: Mutex<Vec<Request>>,
    /// TLS servers: what each connection's handshake was, in the order they finished.
    handshakes: Mutex<Vec<tls::ServerHandshake>>,
}

/// A test server on 127.0.0.1. Stops (all threads joined) when dropped.
pub struct Server {
    port: u16,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Answers every request with what `handler` says.
    pub fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
        Server::spawn(Some(Arc::new(handler)))
    }

    /// Closes every connection right after accepting it, without reading.
    pub fn dropping() -> Server {
        Server::spawn(None)
    }

    /// Status per path: /404 → 404, /500 → 500, /json → 200 application/json `{"ok":true}`, anything else
    /// → 200 text/plain `hello`. All with Content-Length, keep-alive.
    pub fn routes() -> Server {
        Server::start(|req| match req.path() {
            "/404" => Reply::status(404, &[("Content-Type", "text/plain")], b"not found"),
            "/500" => Reply::status(500, &[("Content-Type", "text/plain")], b"oops"),
            "/json" => Reply::status(200, &[("Content-Type", "application/json")], JSON_BODY.as_bytes()),
            _ => Reply::hello(),
        })
    }

    /// Every response is [`CHUNKED_RESPONSE`] (keep-alive).
    pub fn chunked() -> Server {
        Server::start(|_| Reply::raw(CHUNKED_RESPONSE))
    }

    /// HTTP/1.1 200 without Content-Length or Transfer-Encoding: the body ends with the connection. The FIN
    /// follows the body at once (as from any server that writes and closes), usually in the same readable event.
    pub fn close_delimited() -> Server {
        Server::close_delimited_fin_after(Duration::ZERO)
    }

    /// [`Server::close_delimited`], with the FIN sent `fin_delay` after the body.
    pub fn close_delimited_fin_after(fin_delay: Duration) -> Server {
        Server::start(move |_| {
            Reply::raw(format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n{CLOSE_DELIMITED_BODY}"))
                .closing_after(fin_delay)
        })
    }

    /// `Connection: close` (with Content-Length) on every response, then the server closes.
    pub fn connection_close() -> Server {
        Server::start(|_| Reply::status(200, &[("Connection", "close")], HELLO.as_bytes()).closing())
    }

    /// 100 Continue and 103 Early Hints before every final 200 `ok`.
    pub fn interim() -> Server {
        Server::start(|_| {
            Reply::raw(concat!(
                "HTTP/1.1 100 Continue\r\n\r\n",
                "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n",
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            ))
        })
    }

    /// Responses without a body whatever their headers say: HEAD → 200 with Content-Length: 1000 and no body;
    /// /204 → 204 (no length at all); /304 → 304 with Content-Length: 1000 and no body. A GET elsewhere gets
    /// the 1000 bytes.
    pub fn bodiless() -> Server {
        Server::start(|req| {
            if req.method == "HEAD" {
                return Reply::raw("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n");
            }
            match req.path() {
                "/204" => Reply::raw("HTTP/1.1 204 No Content\r\nX-Empty: yes\r\n\r\n"),
                "/304" => Reply::raw("HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Length: 1000\r\n\r\n"),
                _ => Reply::status(200, &[("Content-Type", "text/plain")], &[b'x'; 1000]),
            }
        })
    }

    /// Answers `hello` after `delay`, every request.
    pub fn slow(delay: Duration) -> Server {
        Server::start(move |_| Reply::hello().delayed(delay))
    }

    /// A server whose capacity is known by construction: one answer per `service`, in arrival order, on a
    /// virtual clock (each answer is due one service time after the later of its arrival and the previous
    /// answer's due time), so it serves exactly 1/service requests per second in the long run whatever the
    /// connections, and a late wake-up of one answer does not slow the next. Below that rate nothing queues;
    /// above it the queue grows until every connection waits.
    pub fn serial(service: Duration) -> Server {
        let next_free = Arc::new(Mutex::new(Instant::now()));
        Server::start(move |_| {
            let due = {
                let mut next = next_free.lock().unwrap_or_else(PoisonError::into_inner);
                *next = (*next).max(Instant::now()) + service;
                *next
            };
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            Reply::hello()
        })
    }

    fn spawn(handler: Option<Handler>) -> Server {
        Server::spawn_with(handler, None)
    }

    /// Answers every request with what `handler` says, over TLS with `config`.
    pub fn start_tls(
        config: Arc<rustls::ServerConfig>,
        handler: impl Fn(&Request) -> Reply + Send + Sync + 'static,
    ) -> Server {
        Server::spawn_with(Some(Arc::new(handler)), Some(config))
    }

    fn spawn_with(handler: Option<Handler>, tls: Option<Arc<rustls::ServerConfig>>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local addr").port();
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            requests: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            recorded: Mutex::new(Vec::new()),
            handshakes: Mutex::new(Vec::new()),
        });
        let accept = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || accept_loop(listener, shared, handler, tls))
        };
        Server { port, shared, accept: Some(accept) }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Complete requests received.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Connections accepted (including any that never carried a request, such as a reachability probe).
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Distinct connections that carried at least one recorded request.
    pub fn request_connections(&self) -> usize {
        let recorded = self.shared.recorded.lock().unwrap_or_else(PoisonError::into_inner);
        recorded.iter().map(|r| r.conn).collect::<std::collections::BTreeSet<u64>>().len()
    }

    /// TLS: the handshakes that finished, in order.
    pub fn handshakes(&self) -> Vec<tls::ServerHandshake> {
        self.shared.handshakes.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// `https://127.0.0.1:PORT{path}`.
    pub fn https_url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// The requests received so far (the first [`RECORD_MAX`]), in arrival order.
    pub fn recorded(&self) -> Vec<Request> {
        self.shared.recorded.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop; it sees the flag and stops.
        let _ = TcpStream::connect_timeout(&([127, 0, 0, 1], self.port).into(), Duration::from_secs(1));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    handler: Option<Handler>,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        let conn = shared.connections.fetch_add(1, Ordering::SeqCst);
        let Some(handler) = &handler else {
            drop(stream);
            continue;
        };
        let (shared, handler, tls) = (Arc::clone(&shared), Arc::clone(handler), tls.clone());
        threads.retain(|t| !t.is_finished());
        threads.push(std::thread::spawn(move || {
            let _ = stream.set_nodelay(true);
            let _ = stream.set_read_timeout(Some(POLL));
            let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
            match tls {
                None => serve_connection(stream, conn, &shared, &*handler),
                Some(config) => {
                    if let Some(stream) = tls::Stream::accept(config, stream) {
                        serve_connection(stream, conn, &shared, &*handler);
                    }
                }
            }
        }));
    }
    for thread in threads {
        let _ = thread.join();
    }
}

/// What a connection is carried on: TCP, or TLS over TCP.
trait Transport: Read + Write {
    /// The FIN after the last response (over TLS, a close_notify first).
    fn finish(&mut self);
    /// TLS: the handshake, once it has finished (asked after each read).
    fn handshake(&self) -> Option<tls::ServerHandshake> {
        None
    }
}

impl Transport for TcpStream {
    fn finish(&mut self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

fn serve_connection(
    mut stream: impl Transport,
    conn: u64,
    shared: &Shared,
    handler: &(dyn Fn(&Request) -> Reply + Sync),
) {
    let mut handshake_seen = false;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        while let Some((request, used)) = parse_request(&buf, conn) {
            buf.drain(..used);
            shared.requests.fetch_add(1, Ordering::SeqCst);
            let reply = handler(&request);
            {
                let mut recorded = shared.recorded.lock().unwrap_or_else(PoisonError::into_inner);
                if recorded.len() < RECORD_MAX {
                    recorded.push(request);
                }
            }
            if !sleep_unless_stopped(reply.delay, &shared.stop) || stream.write_all(&reply.bytes).is_err() {
                return;
            }
            if reply.close {
                if !sleep_unless_stopped(reply.fin_delay, &shared.stop) {
                    return;
                }
                close_gracefully(&mut stream, &shared.stop);
                return;
            }
        }
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let read = stream.read(&mut chunk);
        if !handshake_seen && let Some(handshake) = stream.handshake() {
            handshake_seen = true;
            shared.handshakes.lock().unwrap_or_else(PoisonError::into_inner).push(handshake);
        }
        match read {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(_) => return,
        }
    }
}

/// Sleeps `delay` in small steps; false if the server is stopping.
fn sleep_unless_stopped(delay: Duration, stop: &AtomicBool) -> bool {
    let deadline = Instant::now() + delay;
    loop {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep((deadline - now).min(POLL));
    }
}

/// FIN after the response, then read until the client closes too (at most 2 s), so nothing unread in the
/// receive buffer turns the close into a reset that could destroy the response.
fn close_gracefully(stream: &mut impl Transport, stop: &AtomicBool) {
    stream.finish();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut sink = [0u8; 4096];
    while Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
        match stream.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(_) => return,
        }
    }
}

/// One complete request at the start of `buf` (head, then a Content-Length body) and the bytes it used.
fn parse_request(buf: &[u8], conn: u64) -> Option<(Request, usize)> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&buf[..head_end - 4]);
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_string();
    let target = request_line.next().unwrap_or_default().to_string();
    let version = request_line.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    if buf.len() < head_end + length {
        return None;
    }
    let body = buf[head_end..head_end + length].to_vec();
    Some((Request { conn, method, target, version, headers, body }, head_end + length))
}

/// A port with nothing listening on it (bound, then released).
pub fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

// ---------------------------------------------------------------------------------------------------------
// Running loadgen
// ---------------------------------------------------------------------------------------------------------

/// `RunArgs` from a command line (without the program name; `--no-progress` is added).
pub fn args(list: &[&str]) -> RunArgs {
    let argv = std::iter::once("loadgen").chain(list.iter().copied()).chain(["--no-progress"]);
    let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{list:?} rejected: {e}"));
    assert!(cli.command.is_none(), "{list:?} parsed as a subcommand");
    cli.run
}

fn command(list: &[&str]) -> Vec<String> {
    std::iter::once("loadgen").chain(list.iter().copied()).map(String::from).collect()
}

/// A finished library run.
pub struct Ran {
    pub report: Report,
    pub args: RunArgs,
    pub elapsed: Duration,
}

impl Ran {
    pub fn failures(&self) -> Vec<String> {
        loadgen::failures(&self.report, self.args.allow_failures)
    }

    /// The run returned within warmup + duration + 3 s (nothing waited for responses that never come).
    pub fn assert_returned_promptly(&self) {
        let bound = self.args.warmup + self.args.duration + Duration::from_secs(3);
        assert!(self.elapsed <= bound, "run took {:?}, more than warmup + duration + 3 s ({bound:?})", self.elapsed);
    }

    pub fn assert_no_errors(&self) {
        let e = &self.report.errors;
        assert_eq!(
            e.total(),
            0,
            "errors: {e:?} (responses {}, status {:?})",
            self.report.responses,
            self.report.status
        );
    }
}

/// Runs loadgen in process; the run must succeed.
pub fn run(list: &[&str]) -> Ran {
    let (result, args, elapsed) = try_run(list);
    let report = result.unwrap_or_else(|e| panic!("{list:?}: run failed: {e}"));
    assert_eq!(report.config.engine, expected_engine(&args), "the run used the engine it was asked for");
    Ran { report, args, elapsed }
}

/// The engine a run must report: scripts/test.sh runs these tests once as they are (io_uring where the kernel
/// allows it) and once with LOADGEN_ENGINE=epoll, so every test here covers both engines.
pub fn expected_engine(args: &RunArgs) -> &'static str {
    match args.engine {
        EngineChoice::Epoll => "epoll",
        EngineChoice::Uring => "uring",
        EngineChoice::Auto if loadgen::uring_unavailable().is_none() => "uring",
        EngineChoice::Auto => "epoll",
    }
}

/// The engines a test that names them runs on: both where the kernel allows io_uring, else epoll alone, and
/// then it says so on stderr (nextest shows it with the test's output), so a pass is never read as covering
/// an engine that did not run.
pub fn engines() -> Vec<&'static str> {
    match loadgen::uring_unavailable() {
        None => vec!["uring", "epoll"],
        Some(why) => {
            eprintln!("the io_uring part of this test was skipped ({why}): epoll alone ran");
            vec!["epoll"]
        }
    }
}

/// Runs loadgen in process (flags that do not fit together are an input error, as in the binary).
pub fn try_run(list: &[&str]) -> (Result<Report, loadgen::RunError>, RunArgs, Duration) {
    let args = args(list);
    let started = Instant::now();
    // run sits below the command line, so its error holds the settings' error as the text the binary prints.
    let settings = args.settings().map_err(|e| loadgen::RunError::Input(e.to_string()));
    let result = settings.and_then(|s| loadgen::run(&s, command(list)));
    (result, args, started.elapsed())
}

/// How the binary exited.
#[derive(Debug)]
pub struct Exit {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Exit {
    /// Non-empty stderr lines.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr.lines().filter(|l| !l.trim().is_empty()).collect()
    }

    /// Exit code 2 with exactly one line on stderr.
    pub fn assert_bad_input(&self, what: &str) {
        assert_eq!(self.code, Some(2), "{what}: exit code (stderr {:?})", self.stderr);
        assert_eq!(self.stderr_lines().len(), 1, "{what}: one line on stderr, got {:?}", self.stderr);
    }
}

/// Runs the loadgen binary (killed, and the test failed, after 20 s).
pub fn loadgen_bin(list: &[&str]) -> Exit {
    run_command(testkit::workspace::binary("loadgen"), list)
}

/// Runs `program` (killed, and the test failed, after 20 s): the loadgen binary, or a shell that sets limits
/// before it execs loadgen.
pub fn run_command(program: impl AsRef<std::ffi::OsStr>, list: &[&str]) -> Exit {
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(list)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the loadgen binary");
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let mut raw = Vec::new();
                let _ = pipe.read_to_end(&mut raw);
                text = String::from_utf8_lossy(&raw).into_owned();
            }
            text
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for loadgen") {
            break status;
        }
        if started.elapsed() > BIN_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("loadgen {list:?} still running after {BIN_DEADLINE:?}; killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Exit {
        code: status.code(),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
        elapsed: started.elapsed(),
    }
}

/// A JSON report written by `--json`.
pub fn read_report(path: &Path) -> Report {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parse {}: {e}\n{text}", path.display()))
}

/// A file with these contents in a fresh temp dir (kept alive by the returned guard).
pub fn temp_file(name: &str, contents: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(name);
    std::fs::write(&path, contents).expect("write temp file");
    (dir, path)
}

/// `{code: count}` as the report has it.
pub fn status_map(pairs: &[(u16, u64)]) -> BTreeMap<u16, u64> {
    pairs.iter().copied().collect()
}

/// |a - b| ≤ tolerance × b.
pub fn within(a: f64, b: f64, tolerance: f64) -> bool {
    (a - b).abs() <= tolerance * b
}

/// The path as a &str (temp files are UTF-8 here).
pub fn s(path: &Path) -> &str {
    path.to_str().expect("UTF-8 temp path")
}
