//! HTTP hardening against every server: flight-rs (production profile, a dist folder), scribe-rs (real Postgres
//! and Redis), metadata-rs (a generated SQLite file) and ladder-rs (the same kind of file, no Postgres). Each
//! check runs once per server (`<check>::<server>`), against the built binary as a child process on 127.0.0.1,
//! with small explicit limits: `--workers 1 --header-timeout 1 --keep-alive-timeout 3 --io-timeout 2
//! --max-header-bytes 8192` and a 64 KiB body limit (scribe-rs takes it as `--payload-limit`). A child process,
//! so its descriptors (/proc/<pid>/fd, and /proc/net/tcp to tell its clients' connections from its own to
//! Postgres and Redis) and its memory (/proc/<pid>/status) are its own. The binaries are the ones cargo built
//! for this profile (`testkit::workspace::binary`, which fails on a binary older than its sources). flight-rs runs with `--rate-limit 100000000`: the checks send thousands of
//! requests from one address and 429s would hide what they test.
//!
//! Bounds are generous (a shared 2-core machine): a deadline must fire within its value plus 3 s, and a normal
//! GET on a fresh connection during an attack must be answered within 1 s, with the same body as at rest.
//! Nothing here is a benchmark; the figures are from one serial run (`--no-capture`) on this machine, while a
//! benchmark soak ran, and every test prints its own (`FIGURE …` on stderr).
//!
//! What each check proves, and the figures it reached (flight-rs / scribe-rs / metadata-rs / ladder-rs):
//!
//! * `slowloris`: 500 sockets each send a partial head, 10 of them trickling a byte every 200 ms. Every one is
//!   closed by the header timeout counted from its first byte (not before half of it, not after it + 3 s),
//!   trickling or not; normal GETs are answered meanwhile; no client connection is left. Figures: closed
//!   1.00-1.04 s after their first byte on every server, all 500 gone 1.05 s after the attack began; the worst
//!   normal GET 0-1 ms.
//! * `slow_body`: 50 uploads declare 1,000 bytes, trickle 3 more 400 ms apart, then stop. Where the handler reads
//!   the body (scribe-rs, ladder-rs) the io timeout cuts each one after its last byte (the handler then answers
//!   400 and the connection closes); where it reads none (flight-rs, metadata-rs) the 405 comes at once and the
//!   connection closes when hyper cannot discard the rest. Figures: cut 2.005-2.015 s after the last byte
//!   (scribe-rs, ladder-rs), 0-12 ms (flight-rs, metadata-rs); the worst normal GET 0-2 ms.
//! * `slow_reader`: a client with a 4 KiB receive buffer that never reads is dropped by the server: a large
//!   streamed response (flight-rs: a 16 MiB static file), and on every server pipelined requests for the normal
//!   route until the server stops taking them. Figures: the file dropped 2.08 s after the request (io timeout);
//!   the pipelining client dropped 3.3 / 1.2 / 3.1 / 1.2 s after its last byte (1,280 / 19,004 / 1,280 / 39,601
//!   requests sent; the server stopped earlier than our last byte).
//! * `limits`: 431 and a close for a 9,000-byte header and for 200 headers; 431 for a 10,000-byte URI (414 would
//!   do); 413 with `Connection: close` for Content-Length 65,537 and 2^50 with no body sent, so before any body
//!   was read; 431 for Content-Length u64::MAX (hyper keeps the top values for its own framing) and 400 past
//!   u64; chunked past the limit: 413 where the handler reads bodies, 405 where none does; a gzip body of 48,867
//!   bytes that would expand to 48 MiB, sent with `Content-Encoding: gzip`: a 4xx at once and the peak RSS
//!   (VmHWM) unmoved, since nothing decompresses request bodies. Figures: the bomb got 405 / 400 / 405 / 400 in
//!   at most 4 ms; VmHWM +0 / +32 / +0 / +108 KiB.
//! * `smuggling`: each vector below with a canary GET (`Connection: close`) in the same write: never more
//!   answers than requests, never the request hidden in a body answered, never the canary swallowed, no 5xx,
//!   and the connection always ends, promptly rather than by a deadline.
//! * `idle_connections`: 5,000 connections that send nothing (keep-alive 5 s for this one, time to open and
//!   measure them all; RLIMIT_NOFILE is raised up to the hard limit if needed, and a hard limit too low fails
//!   saying so). All are accepted, the fds grow by exactly 5,000, RSS by at most 4 MiB per 1,000 (4 KiB each), a
//!   normal GET is still answered, then the keep-alive timeout closes every one and the fds return to their
//!   baseline. Figures: opened in 0.18-0.28 s; fds 16 -> 5,016 / 22 -> 5,022 / 19 -> 5,019 / 19 -> 5,019 and
//!   back; RSS +1.33 to +1.38 MiB per 1,000 (serve hands a connection to hyper at its first byte; before that
//!   change, 10.9 to 11.1 MiB); GET 0-1 ms; all closed 5.01-5.31 s after opening began.
//! * `half_close`: the normal GET sent, then the client's sending side shut (`nc -N`): answered with the
//!   reference body, then closed; on scribe-rs also `GET /healthz` and `POST /notes`, which await PostgreSQL
//!   and Redis after the FIN, and where a handler reads bodies a POST. Figures: 200 on every GET and on
//!   scribe-rs's POST (ladder-rs's validator answers its 400).
//! * `trickle`: the minimum data rate at its default (500 bytes/s over 5 s windows). A head trickled at 10
//!   bytes/s gets 408 from the header timeout (1.10-1.20 s); where the handler reads bodies, a body at 10
//!   bytes/s gets 408 and a close after one window (5.11 s), and 60 KiB at 10 KiB/s passes (6.11 s).
//!
//! The smuggling vectors and what each server answered: `N` is one answer, then the connection closed; `N + c`
//! is one answer, then the canary's 200, then closed. On the body-carrying vectors, where the route reads no
//! body (flight-rs `POST /api/hello`, metadata-rs `POST /v1/metadata/{id}`) the handler answers 405 before hyper
//! meets the bad framing, then hyper closes; where it reads (scribe-rs `POST /notes`, ladder-rs `POST
//! /ladder/validate`) the body read fails or the body is empty, the handler answers 400, the connection closes.
//! For CL + TE hyper frames by Transfer-Encoding (RFC 9112 section 6.3) and closes after answering (section 6.1),
//! so what follows `0\r\n\r\n` is never read as a request.
//!
//! | vector | flight | scribe | metadata | ladder |
//! |---|---|---|---|---|
//! | Content-Length + Transfer-Encoding: chunked, either order | 405 | 400 | 405 | 400 |
//! | two differing Content-Length; `N, N`; `+N`; `0xN` | 400 | 400 | 400 | 400 |
//! | TE `chunked, gzip`; TE lines `chunked` then `gzip`; TE `xchunked` + CL | 400 | 400 | 400 | 400 |
//! | HTTP/1.0 with TE chunked | 400 | 400 | 400 | 400 |
//! | TE `gzip, chunked`; TE lines `chunked` and `chunked` (serve accepts only exactly `chunked`) | 501 | 501 | 501 | 501 |
//! | chunk size `ffffffffffffffffff`; `10000000000000005` (2^64 + 5) | 405 | 400 | 405 | 400 |
//! | obs-fold: `Transfer-Encoding:` then ` chunked` on a continuation line, with CL | 400 | 400 | 400 | 400 |
//! | obs-fold: a tab continuation of a harmless header | 400 | 400 | 400 | 400 |
//! | `Transfer-Encoding : chunked` (space before the colon) + CL | 400 | 400 | 400 | 400 |
//! | bare LF line endings in the head (RFC 9112 section 2.2 allows them) | 200 + c | 200 + c | 200 + c | 200 + c |
//! | bare LF in the chunked framing | 405 | 400 | 405 | 400 |
//! | bare CR in the head; NUL in a header value | 400 | 400 | 400 | 400 |
//!
//! Found by these tests and fixed in `serve`: a client that pipelined requests and never read the answers was
//! never dropped when hyper was left waiting to write responses that were already complete (no request in
//! flight, so `--io-timeout` did not count, and hyper does not poll the socket for reads then, so no read
//! deadline fired); scribe-rs kept such a connection open for good, metadata-rs in some runs. A write that
//! would block now counts toward the io timeout whatever the request state (crates/serve/tests/stalls.rs has
//! the regression test).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::http::{Conn, Response, request_bytes, send};
use testkit::process::Guard;
use testkit::wait::until;
use testkit::workspace::root;

const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
const KEEP_ALIVE: Duration = Duration::from_secs(3);
const IO_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_HEADER_BYTES: usize = 8192;
const BODY_LIMIT: usize = 64 * 1024;
/// Scheduling slack for a deadline to fire on a shared 2-core machine.
const SLACK: Duration = Duration::from_secs(3);
/// A normal request during an attack must be answered within this. Generous on purpose: not a benchmark.
const RESPONSIVE: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Flight,
    Scribe,
    Metadata,
    Ladder,
}

impl Kind {
    fn binary(self) -> &'static str {
        match self {
            Kind::Flight => "flight-rs",
            Kind::Scribe => "scribe-rs",
            Kind::Metadata => "metadata-rs",
            Kind::Ladder => "ladder-rs",
        }
    }
}

/// One test per server for each check: `slowloris::flight_rs`, `slowloris::scribe_rs`, …
macro_rules! every_server {
    ($($check:ident),* $(,)?) => {$(
        mod $check {
            #[test]
            fn flight_rs() {
                super::$check(super::Kind::Flight);
            }
            #[test]
            fn scribe_rs() {
                super::$check(super::Kind::Scribe);
            }
            #[test]
            fn metadata_rs() {
                super::$check(super::Kind::Metadata);
            }
            #[test]
            fn ladder_rs() {
                super::$check(super::Kind::Ladder);
            }
        }
    )*};
}

every_server!(slowloris, slow_body, slow_reader, limits, smuggling, idle_connections, half_close, trickle);

// ------------------------------------------------------------------------------------------------------------
// The servers, as child processes
// ------------------------------------------------------------------------------------------------------------

/// A server child process and what the checks need to know about it. Fields drop in order: the child is
/// killed before its database, cache and files go.
struct Server {
    kind: Kind,
    addr: SocketAddr,
    child: Guard,
    /// A GET every check expects 200 for, and its body from a quiet moment (the canary of the checks).
    normal: String,
    reference: Vec<u8>,
    /// Where request bodies go, and whether the handler there reads them (otherwise it answers 404/405 and
    /// hyper discards the body).
    body_target: String,
    reads_body: bool,
    /// A target with a large streamed response, where the server has one.
    large: Option<String>,
    _postgres: Option<testkit::Postgres>,
    _redis: Option<testkit::Redis>,
    _dir: tempfile::TempDir,
}

/// The size of flight-rs's large static file: far more than the socket buffers of a client that stops reading.
const LARGE_FILE: usize = 16 << 20;

impl Server {
    fn start(kind: Kind, keep_alive: Duration) -> Server {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut args: Vec<String> =
            ["--hostname", "127.0.0.1", "--port", "0", "--workers", "1", "--shutdown-timeout", "1"]
                .map(String::from)
                .to_vec();
        for (flag, value) in
            [("--header-timeout", HEADER_TIMEOUT), ("--keep-alive-timeout", keep_alive), ("--io-timeout", IO_TIMEOUT)]
        {
            args.extend([flag.to_string(), value.as_secs().to_string()]);
        }
        // scribe-rs takes its body limit from --payload-limit (the original's option), not --body-limit.
        let body_flag = if kind == Kind::Scribe { "--payload-limit" } else { "--body-limit" };
        args.extend([body_flag.to_string(), BODY_LIMIT.to_string()]);
        args.extend(["--max-header-bytes".to_string(), MAX_HEADER_BYTES.to_string()]);

        let (mut postgres, mut redis) = (None, None);
        let mut sample_id = String::new();
        match kind {
            Kind::Flight => {
                let dist = dir.path().join("dist");
                std::fs::create_dir(&dist).expect("create dist");
                std::fs::write(dist.join("index.html"), "<!doctype html><title>hardening</title>").expect("index");
                // Incompressible enough not to matter: the file streams either way.
                let large: Vec<u8> = (0..LARGE_FILE).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
                std::fs::write(dist.join("large.bin"), large).expect("large file");
                args.extend(
                    ["--middleware", "production", "--app-secret", "hardening-secret-at-least-32-bytes-long"]
                        .map(String::from),
                );
                args.extend(["--dist-path".to_string(), dist.display().to_string()]);
                // The checks send thousands of requests from one address; 429s would hide what they test.
                args.extend(["--rate-limit", "100000000"].map(String::from));
            }
            Kind::Scribe => {
                let pg = testkit::Postgres::start();
                let url = pg.create_database("hardening");
                let cache = testkit::Redis::start();
                args.extend(["--database-url".to_string(), url]);
                args.extend(["--redis-url".to_string(), format!("redis://127.0.0.1:{}/1", cache.port())]);
                args.extend(["--schema-dir".to_string(), root().join("schemas").display().to_string()]);
                postgres = Some(pg);
                redis = Some(cache);
            }
            Kind::Metadata | Kind::Ladder => {
                let gen_args = metadata_dataset::GenDataArgs {
                    db: dir.path().join("metadata.db"),
                    ids: dir.path().join("sample_ids.txt"),
                    rows: 200,
                    seed: 8,
                    samples: 5,
                    absent_percent: 0.0,
                    force: false,
                };
                metadata_dataset::run(&gen_args).expect("gen-data");
                let ids = std::fs::read_to_string(&gen_args.ids).expect("sample ids");
                sample_id = ids.lines().next().expect("a sample id").trim().to_string();
                args.extend(["--db".to_string(), gen_args.db.display().to_string()]);
            }
        }

        let mut child = Guard(
            Command::new(testkit::workspace::binary(kind.binary()))
                .env_clear()
                .env("RUST_LOG", "warn")
                .current_dir(dir.path())
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {}: {e}", kind.binary())),
        );
        let stdout = child.0.stdout.take().expect("piped stdout");
        let line = testkit::first_line(stdout, Duration::from_secs(20)).unwrap_or_else(|| {
            let exited = child.0.try_wait().ok().flatten();
            panic!("{}: no listening line within 20 s (exited: {exited:?}); args {args:?}", kind.binary())
        });
        let addr: SocketAddr = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("http://"))
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in the listening line {line:?}"));

        let (normal, body_target, reads_body, large) = match kind {
            Kind::Flight => ("/api/hello".to_string(), "/api/hello".to_string(), false, Some("/large.bin".to_string())),
            Kind::Scribe => {
                let record = accepted_body(Kind::Scribe, "title", "hardening");
                let res = testkit::http::request(addr, "POST", "/notes", &[], Some(record.as_bytes()));
                assert_eq!(res.status, 200, "scribe-rs: POST /notes: {}", res.text());
                ("/notes/1".to_string(), "/notes".to_string(), true, None)
            }
            Kind::Metadata => {
                let target = format!("/v1/metadata/{sample_id}?region=en");
                (target.clone(), target, false, None)
            }
            Kind::Ladder => ("/ladder/empty".to_string(), "/ladder/validate".to_string(), true, None),
        };
        let res = send(addr, &get_close(&normal));
        assert_eq!(res.status, 200, "{}: GET {normal}: {}", kind.binary(), res.text());
        let reference = res.body;
        Server {
            kind,
            addr,
            child,
            normal,
            reference,
            body_target,
            reads_body,
            large,
            _postgres: postgres,
            _redis: redis,
            _dir: dir,
        }
    }

    fn name(&self) -> &'static str {
        self.kind.binary()
    }

    fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// Open file descriptors of the server process.
    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .unwrap_or_else(|e| panic!("{}: /proc/{}/fd: {e}", self.name(), self.pid()))
            .count()
    }

    /// Connections from clients the server holds: its descriptors that are TCP sockets on its listening port
    /// (its own connections to Postgres and Redis do not count, and neither does the listener).
    fn clients(&self) -> usize {
        let port = format!(":{:04X}", self.addr.port());
        let mut inodes = std::collections::HashSet::new();
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            let Ok(text) = std::fs::read_to_string(table) else { continue };
            for line in text.lines().skip(1) {
                let fields: Vec<&str> = line.split_whitespace().collect();
                // local_address, state (0A: listening), inode
                if fields.len() > 9 && fields[1].ends_with(&port) && fields[3] != "0A" {
                    inodes.insert(format!("socket:[{}]", fields[9]));
                }
            }
        }
        let fds = std::fs::read_dir(format!("/proc/{}/fd", self.pid())).expect("/proc/<pid>/fd");
        fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .filter(|target| inodes.contains(target.to_string_lossy().as_ref()))
            .count()
    }

    /// What the server's descriptors point at, for failure messages.
    fn fd_targets(&self) -> Vec<String> {
        let fds = std::fs::read_dir(format!("/proc/{}/fd", self.pid())).expect("/proc/<pid>/fd");
        fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok()).map(|t| t.display().to_string()).collect()
    }

    /// Waits until the server holds no client connection; how long that took, or `None`.
    fn wait_no_clients(&self, within: Duration) -> Option<Duration> {
        until(within, || self.clients() == 0)
    }

    /// A `kB` line of /proc/<pid>/status (VmRSS, VmHWM), in KiB.
    fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("/proc/<pid>/status");
        status
            .lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc/{}/status", self.pid()))
    }

    /// The normal GET on a fresh connection: asserts the reference answer and returns how long it took.
    fn check_normal(&self, when: &str) -> Duration {
        let started = Instant::now();
        let res = send(self.addr, &get_close(&self.normal));
        let took = started.elapsed();
        assert_eq!(res.status, 200, "{} {when}: GET {}: {}", self.name(), self.normal, res.text());
        assert_eq!(res.body, self.reference, "{} {when}: GET {} answered another body", self.name(), self.normal);
        took
    }
}

/// Makes sure this process (and so every server it spawns afterwards) may hold `needed` descriptors, raising the
/// soft limit up to the hard one if needed. Fails, saying so, when the hard limit is too low.
fn ensure_nofile(needed: u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let (soft, hard) = (limit.current.unwrap_or(u64::MAX), limit.maximum.unwrap_or(u64::MAX));
    if soft >= needed {
        return;
    }
    assert!(
        hard >= needed,
        "RLIMIT_NOFILE hard limit is {hard}: this machine cannot hold the {needed} descriptors the 5,000-connection \
         check needs (raise it, e.g. `ulimit -Hn {needed}` as root, rather than lowering the check)"
    );
    setrlimit(Resource::Nofile, Rlimit { current: Some(needed.max(soft)), maximum: limit.maximum })
        .unwrap_or_else(|e| panic!("raise RLIMIT_NOFILE from {soft} to {needed} (hard {hard}): {e}"));
}

// ------------------------------------------------------------------------------------------------------------
// Raw HTTP/1.1
// ------------------------------------------------------------------------------------------------------------

/// A request body the server's body route takes: a scribe-rs note whose `data` holds `field: text`, or
/// ladder-rs's `{"id": text}` (others read no body).
fn accepted_body(kind: Kind, field: &str, text: &str) -> String {
    let body = if kind == Kind::Scribe {
        serde_json::json!({
            "data": {field: text},
            "date_created": "2026-01-01T00:00:00.000Z",
            "date_modified": "2026-01-01T00:00:00.000Z",
            "created_by": 1,
            "modified_by": 1,
        })
    } else {
        serde_json::json!({ "id": text })
    };
    body.to_string()
}

fn get_close(target: &str) -> Vec<u8> {
    request_bytes("GET", target.as_bytes(), &[], None)
}

/// A fresh client socket (testkit's timeouts, Nagle off) to drive by hand.
fn connect(addr: SocketAddr) -> TcpStream {
    Conn::connect(addr).into_stream()
}

/// A client socket watched without blocking: bytes the server sends are counted and dropped, and the moment
/// the server closed it (EOF or reset) is noted.
struct Watched {
    stream: TcpStream,
    /// When it was handed over to watching: just after the client's first bytes, if it sent any.
    opened: Instant,
    /// When the client last sent a byte: the deadline the server enforces counts from here or earlier.
    last_sent: Instant,
    received: usize,
    closed: Option<Instant>,
}

impl Watched {
    fn new(stream: TcpStream) -> Watched {
        stream.set_nonblocking(true).expect("non-blocking");
        Watched { stream, opened: Instant::now(), last_sent: Instant::now(), received: 0, closed: None }
    }

    fn poll(&mut self) {
        let mut buf = [0u8; 16 * 1024];
        while self.closed.is_none() {
            match (&self.stream).read(&mut buf) {
                Ok(0) => self.closed = Some(Instant::now()),
                Ok(n) => self.received += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.closed = Some(Instant::now()),
            }
        }
    }

    fn trickle(&mut self, bytes: &[u8]) {
        if self.closed.is_none() && (&self.stream).write_all(bytes).is_ok() {
            self.last_sent = Instant::now();
        }
    }

    /// How long after the client's last byte the server closed the connection.
    fn closed_after(&self) -> Option<Duration> {
        self.closed.map(|at| at.saturating_duration_since(self.last_sent))
    }

    /// How long after its first byte (or its connection) the server closed it.
    fn lifetime(&self) -> Option<Duration> {
        self.closed.map(|at| at.saturating_duration_since(self.opened))
    }
}

/// Polls `sockets` until every one is closed or `within` passes, running `tick` between rounds.
fn watch_until_closed(sockets: &mut [Watched], within: Duration, mut tick: impl FnMut(&mut [Watched])) -> bool {
    let started = Instant::now();
    loop {
        tick(sockets);
        for socket in sockets.iter_mut() {
            socket.poll();
        }
        if sockets.iter().all(|s| s.closed.is_some()) {
            return true;
        }
        if started.elapsed() >= within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `probe` `times` times, `every` apart, on a thread while `attack` runs on this one.
fn during<T>(server: &Server, times: usize, every: Duration, attack: impl FnOnce() -> T) -> (T, Vec<Duration>) {
    std::thread::scope(|scope| {
        let probes = scope.spawn(|| {
            (0..times)
                .map(|i| {
                    std::thread::sleep(every);
                    server.check_normal(&format!("probe {i} during the attack"))
                })
                .collect::<Vec<_>>()
        });
        let out = attack();
        (out, probes.join().expect("the probes thread panicked"))
    })
}

fn max<T: Ord + Default>(values: impl IntoIterator<Item = T>) -> T {
    values.into_iter().max().unwrap_or_default()
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

// ------------------------------------------------------------------------------------------------------------
// slowloris
// ------------------------------------------------------------------------------------------------------------

fn slowloris(kind: Kind) {
    const SOCKETS: usize = 500;
    const TRICKLERS: usize = 10;
    let server = Server::start(kind, KEEP_ALIVE);
    let partial = format!("GET {} HTTP/1.1\r\nHost: t\r\nUser-Agent: slowloris\r\nX-Pad: ", server.normal);

    let started = Instant::now();
    let ((sockets, all_closed), probes) = during(&server, 3, Duration::from_millis(300), || {
        let mut sockets: Vec<Watched> = (0..SOCKETS)
            .map(|_| {
                let mut stream = connect(server.addr);
                stream.write_all(partial.as_bytes()).expect("send a partial head");
                Watched::new(stream)
            })
            .collect();
        let mut next_trickle = Instant::now();
        let all_closed = watch_until_closed(&mut sockets, HEADER_TIMEOUT + SLACK + Duration::from_secs(1), |s| {
            if Instant::now() >= next_trickle {
                s[..TRICKLERS].iter_mut().for_each(|t| t.trickle(b"a"));
                next_trickle += Duration::from_millis(200);
            }
        });
        (sockets, all_closed)
    });
    let open = sockets.iter().filter(|s| s.closed.is_none()).count();
    assert!(
        all_closed,
        "{}: {open} of {SOCKETS} slowloris sockets still open after {:?}",
        server.name(),
        started.elapsed()
    );
    // From each socket's first byte (the trickling ones kept sending until they were cut).
    let lifetimes: Vec<Duration> = sockets.iter().filter_map(Watched::lifetime).collect();
    let (shortest, longest) = (lifetimes.iter().min().copied().unwrap_or_default(), max(lifetimes.clone()));
    assert!(
        longest <= HEADER_TIMEOUT + SLACK,
        "{}: a slowloris socket was closed {} ms after its first byte (header timeout {} ms)",
        server.name(),
        ms(longest),
        ms(HEADER_TIMEOUT)
    );
    // Not dropped on sight either: a slow but honest client gets the header timeout.
    assert!(
        shortest >= HEADER_TIMEOUT / 2,
        "{}: a partial head was dropped {} ms after its first byte, before the header timeout ({} ms)",
        server.name(),
        ms(shortest),
        ms(HEADER_TIMEOUT)
    );
    let tricklers = max(lifetimes[..TRICKLERS].iter().copied());
    let attack = max(sockets.iter().filter_map(|s| s.closed.map(|at| at.duration_since(started))));
    let worst_probe = max(probes.iter().copied());
    assert!(
        worst_probe < RESPONSIVE,
        "{}: a normal GET took {} ms during the slowloris attack",
        server.name(),
        ms(worst_probe)
    );
    let answered = sockets.iter().filter(|s| s.received > 0).count();
    let back = server.wait_no_clients(SLACK);
    assert!(back.is_some(), "{}: {} client connections left after the attack", server.name(), server.clients());
    eprintln!(
        "FIGURE slowloris {}: {SOCKETS} sockets closed {}..{} ms after their first byte (tricklers by {} ms; \
         {answered} got bytes back), all gone {} ms after the attack began; normal GET worst {} ms",
        server.name(),
        ms(shortest),
        ms(longest),
        ms(tricklers),
        ms(attack),
        ms(worst_probe)
    );
}

// ------------------------------------------------------------------------------------------------------------
// slow request body
// ------------------------------------------------------------------------------------------------------------

fn slow_body(kind: Kind) {
    const UPLOADS: usize = 50;
    let server = Server::start(kind, KEEP_ALIVE);
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"id\":",
        server.body_target
    );
    let ((sockets, all_closed), probes) = during(&server, 3, Duration::from_millis(400), || {
        let mut sockets: Vec<Watched> = (0..UPLOADS)
            .map(|_| {
                let mut stream = connect(server.addr);
                stream.write_all(head.as_bytes()).expect("send the head");
                Watched::new(stream)
            })
            .collect();
        // Three more bytes, 400 ms apart (never a gap as long as the io timeout), then nothing.
        let mut trickled = 0;
        let mut next = Instant::now() + Duration::from_millis(400);
        let all_closed = watch_until_closed(&mut sockets, Duration::from_millis(1200) + IO_TIMEOUT + SLACK, |s| {
            if trickled < 3 && Instant::now() >= next {
                s.iter_mut().for_each(|u| u.trickle(b" "));
                trickled += 1;
                next += Duration::from_millis(400);
            }
        });
        (sockets, all_closed)
    });
    let open = sockets.iter().filter(|s| s.closed.is_none()).count();
    assert!(all_closed, "{}: {open} of {UPLOADS} stalled uploads still open", server.name());
    let after_last_byte: Vec<Duration> = sockets.iter().filter_map(Watched::closed_after).collect();
    let (first, last) = (after_last_byte.iter().min().copied().unwrap_or_default(), max(after_last_byte.clone()));
    assert!(
        last <= IO_TIMEOUT + SLACK,
        "{}: a stalled upload was cut {} ms after its last byte (io timeout {} ms)",
        server.name(),
        ms(last),
        ms(IO_TIMEOUT)
    );
    let answered = sockets.iter().filter(|s| s.received > 0).count();
    let worst_probe = max(probes);
    assert!(
        worst_probe < RESPONSIVE,
        "{}: a normal GET took {} ms during the stalled uploads",
        server.name(),
        ms(worst_probe)
    );
    let back = server.wait_no_clients(SLACK);
    assert!(back.is_some(), "{}: {} client connections left after the uploads", server.name(), server.clients());
    server.check_normal("after the stalled uploads");
    eprintln!(
        "FIGURE slow_body {}: {UPLOADS} stalled uploads cut {}..{} ms after their last byte ({answered} got an \
         answer first; reads body: {}); normal GET worst {} ms",
        server.name(),
        ms(first),
        ms(last),
        server.reads_body,
        ms(worst_probe)
    );
}

// ------------------------------------------------------------------------------------------------------------
// slow reader
// ------------------------------------------------------------------------------------------------------------

/// A connection whose client will not read: receive and send buffers shrunk to 4 KiB (so the server cannot
/// park a whole response in our kernel, and our own writes block as soon as the server stops taking requests).
fn stubborn_client(addr: SocketAddr) -> TcpStream {
    let stream = connect(addr);
    rustix::net::sockopt::set_socket_recv_buffer_size(&stream, 4096).expect("SO_RCVBUF");
    rustix::net::sockopt::set_socket_send_buffer_size(&stream, 4096).expect("SO_SNDBUF");
    stream
}

/// Pipelines `request` on `stream` without reading until the server stops taking requests (nothing accepted
/// for a second) or drops the connection (20 s at most). Returns how many requests went out and when the last
/// byte did.
fn flood(stream: &TcpStream, request: &[u8]) -> (usize, Instant) {
    stream.set_nonblocking(true).expect("non-blocking");
    let batch = request.repeat(256);
    let (mut written, mut offset) = (0usize, 0usize);
    let started = Instant::now();
    let mut last_progress = started;
    while started.elapsed() < Duration::from_secs(20) && last_progress.elapsed() < Duration::from_secs(1) {
        match (&*stream).write(&batch[offset..]) {
            Ok(n) => {
                written += n;
                offset = (offset + n) % batch.len();
                last_progress = Instant::now();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Reset: the server already gave up on us.
            Err(_) => break,
        }
    }
    assert!(started.elapsed() < Duration::from_secs(20), "the server kept taking requests for 20 s");
    (written / request.len(), last_progress)
}

fn slow_reader(kind: Kind) {
    let server = Server::start(kind, KEEP_ALIVE);
    let bound = IO_TIMEOUT + SLACK;

    // A large streamed response the client stops reading after its first bytes. It cannot all fit in the
    // buffers (4 KiB here, at most 4 MiB of send buffer there), so the server giving the connection up is the
    // only way its descriptor goes.
    let large = server.large.as_ref().map(|target| {
        let mut stream = stubborn_client(server.addr);
        stream.write_all(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()).expect("send");
        let asked = Instant::now();
        let probe = server.check_normal("while a large response is stuck");
        let dropped = server.wait_no_clients(bound);
        assert!(
            dropped.is_some(),
            "{}: still {} client connections {} ms after asking for {target} and reading nothing: the \
             stuck response was not cut",
            server.name(),
            server.clients(),
            ms(asked.elapsed())
        );
        assert!(probe < RESPONSIVE, "{}: a normal GET took {} ms", server.name(), ms(probe));
        drop(stream);
        asked.elapsed()
    });

    // Pipelined requests for the normal route, never reading a response, until the server stops taking them:
    // its send buffer is full, hyper's write buffer too, and every response so far was complete.
    let stream = stubborn_client(server.addr);
    let (sent, stalled) = flood(&stream, format!("GET {} HTTP/1.1\r\nHost: t\r\n\r\n", server.normal).as_bytes());
    let probe = server.check_normal("while a pipelining client reads nothing");
    let dropped = server.wait_no_clients(bound);
    assert!(
        dropped.is_some(),
        "{}: still {} client connections {} ms after a client pipelined {sent} requests and read no \
         response: a connection whose client stopped reading is never dropped",
        server.name(),
        server.clients(),
        ms(stalled.elapsed())
    );
    let cut_after = stalled.elapsed();
    assert!(probe < RESPONSIVE, "{}: a normal GET took {} ms", server.name(), ms(probe));
    drop(stream);
    server.check_normal("after the clients that stopped reading");
    eprintln!(
        "FIGURE slow_reader {}: {}pipelined {sent} requests without reading until the server stopped taking \
         them; dropped {} ms after our last byte",
        server.name(),
        large.map(|d| format!("large response dropped {} ms after the request; ", ms(d))).unwrap_or_default(),
        ms(cut_after)
    );
}

// ------------------------------------------------------------------------------------------------------------
// limits
// ------------------------------------------------------------------------------------------------------------

/// Sends `bytes` on a fresh connection; the response, how long it took, and the connection.
fn exchange_timed(addr: SocketAddr, bytes: &[u8]) -> (Response, Duration, Conn) {
    let mut conn = Conn::connect(addr);
    let started = Instant::now();
    let written = conn.write(bytes);
    let res = match conn.next_response(false) {
        Ok(Some(res)) => res,
        other => panic!("{addr}: no response ({other:?}; write: {written:?})"),
    };
    (res, started.elapsed(), conn)
}

/// Sends `bytes` on a fresh connection; the response and whether the server closed the connection right after
/// it (within the io timeout; a kept-alive connection would stay open for the keep-alive timeout).
fn exchange_then_closed(addr: SocketAddr, bytes: &[u8]) -> (Response, bool) {
    let (res, _, mut conn) = exchange_timed(addr, bytes);
    conn.stream().set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
    let closed = match conn.next_response(false) {
        Ok(None) => true,
        Ok(Some(_)) => false,
        Err(e) => !matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut),
    };
    (res, closed)
}

/// `expanded` zero bytes, gzip-compressed by the system's gzip (about 1,000 to 1).
fn gzip_bomb(expanded: usize) -> Vec<u8> {
    let mut gzip = Guard(
        Command::new("gzip")
            .args(["-9", "-c", "-n"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("gzip (the gzip package) runs"),
    );
    let mut stdin = gzip.0.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || {
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..expanded / zeros.len() {
            stdin.write_all(&zeros).expect("feed gzip");
        }
    });
    let mut out = Vec::new();
    gzip.0.stdout.take().expect("stdout").read_to_end(&mut out).expect("read gzip");
    feeder.join().expect("feeder");
    assert!(gzip.0.wait().expect("gzip exits").success());
    out
}

fn limits(kind: Kind) {
    let server = Server::start(kind, KEEP_ALIVE);
    let name = server.name();
    let addr = server.addr;

    let big_header = format!("GET {} HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n", server.normal, "a".repeat(9000));
    let (res, closed) = exchange_then_closed(addr, big_header.as_bytes());
    assert_eq!((res.status, closed), (431, true), "{name}: a 9,000-byte header: {}", res.text());

    let many: String = (0..200).map(|i| format!("X-Many-{i}: v\r\n")).collect();
    let many_headers = format!("GET {} HTTP/1.1\r\nHost: t\r\n{many}\r\n", server.normal);
    let (res, closed) = exchange_then_closed(addr, many_headers.as_bytes());
    assert_eq!((res.status, closed), (431, true), "{name}: 200 headers: {}", res.text());

    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "u".repeat(10_000));
    let (res, closed) = exchange_then_closed(addr, long_uri.as_bytes());
    assert!(matches!(res.status, 414 | 431) && closed, "{name}: a 10,000-byte URI: {} {}", res.status, res.text());
    let uri_status = res.status;

    // Declared over the limit, body never sent: the 413 can only come before the body was read.
    let post = |headers: &str| {
        format!("POST {} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n{headers}\r\n", server.body_target)
    };
    for declared in [BODY_LIMIT as u64 + 1, 1 << 50] {
        let started = Instant::now();
        let (res, closed) = exchange_then_closed(addr, post(&format!("Content-Length: {declared}\r\n")).as_bytes());
        assert_eq!((res.status, closed), (413, true), "{name}: Content-Length {declared}: {}", res.text());
        assert_eq!(res.header("connection"), Some("close"), "{name}: 413 says Connection: close");
        assert!(started.elapsed() < IO_TIMEOUT, "{name}: 413 only after {:?}", started.elapsed());
    }
    // hyper keeps the top values of u64 for its own framing and answers 431 for them; past u64, 400.
    let (res, closed) = exchange_then_closed(addr, post(&format!("Content-Length: {}\r\n", u64::MAX)).as_bytes());
    assert_eq!((res.status, closed), (431, true), "{name}: Content-Length u64::MAX: {}", res.text());
    let (res, closed) = exchange_then_closed(addr, post("Content-Length: 99999999999999999999\r\n").as_bytes());
    assert_eq!((res.status, closed), (400, true), "{name}: a Content-Length over u64: {}", res.text());

    // Chunked, 1 KiB chunks to 1 KiB past the limit.
    let chunk = format!("400\r\n{}\r\n", "c".repeat(1024));
    let chunked = format!("{}{}0\r\n\r\n", post("Transfer-Encoding: chunked\r\n"), chunk.repeat(BODY_LIMIT / 1024 + 1));
    let (res, _, _) = exchange_timed(addr, chunked.as_bytes());
    if server.reads_body {
        assert_eq!(res.status, 413, "{name}: a chunked body over the limit at {}: {}", server.body_target, res.text());
    } else {
        assert!((400..500).contains(&res.status), "{name}: chunked over the limit: {} {}", res.status, res.text());
    }
    let chunked_status = res.status;

    // A gzip bomb under the limit: 48 MiB of zeros in about 47 KiB.
    let bomb = gzip_bomb(48 << 20);
    assert!(bomb.len() < BODY_LIMIT, "the bomb must fit under the limit: {} bytes", bomb.len());
    let peak_before = server.status_kib("VmHWM");
    let mut request = post(&format!("Content-Encoding: gzip\r\nContent-Length: {}\r\n", bomb.len())).into_bytes();
    request.extend_from_slice(&bomb);
    let (res, took, _) = exchange_timed(addr, &request);
    let peak_after = server.status_kib("VmHWM");
    assert!((400..500).contains(&res.status), "{name}: a gzip bomb: {} {}", res.status, res.text());
    assert!(
        peak_after.saturating_sub(peak_before) < 16 * 1024,
        "{name}: peak RSS grew from {peak_before} KiB to {peak_after} KiB on a gzip bomb: was it expanded?"
    );

    let back = server.wait_no_clients(SLACK);
    assert!(back.is_some(), "{name}: {} client connections left after the limit checks", server.clients());
    server.check_normal("after the limit checks");
    eprintln!(
        "FIGURE limits {name}: 431 header, 431 many headers, {uri_status} URI, 413 declared, 400 CL overflow, \
         {chunked_status} chunked over limit, gzip bomb ({} bytes) {} in {} ms, peak RSS {peak_before} -> \
         {peak_after} KiB",
        bomb.len(),
        res.status,
        ms(took)
    );
}

// ------------------------------------------------------------------------------------------------------------
// smuggling
// ------------------------------------------------------------------------------------------------------------

/// What a request smuggled inside another one's body would be: if it is ever answered, the framing split.
const SMUGGLED: &str = "GET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n";

/// How a vector may be answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Framing the server cannot trust (or a head it must not parse): one 4xx, then the connection closed,
    /// the canary unanswered. Whatever follows the head is never read as a request.
    OneErrorThenClose,
    /// Unusual but with one possible framing: the request answered and the canary after it; or one 4xx, closed.
    AnsweredThenCanary,
}

/// The vectors: a name, what is acceptable, and the request bytes (the canary follows in the same write).
fn vectors(server: &Server) -> Vec<(&'static str, Expect, Vec<u8>)> {
    use Expect::{AnsweredThenCanary as Canary, OneErrorThenClose as Close};
    let post = |headers: &str, body: &str| {
        format!("POST {} HTTP/1.1\r\nHost: t\r\n{headers}\r\n{body}", server.body_target).into_bytes()
    };
    let get = |head_rest: &str| format!("GET {} HTTP/1.1{head_rest}", server.normal).into_bytes();
    // Chunked, this body ends after `0\r\n\r\n` and a request follows; by its Content-Length it is all body.
    let te_body = format!("0\r\n\r\n{SMUGGLED}");
    let n = te_body.len();
    let s = SMUGGLED.len();
    vec![
        ("CL + TE", Close, post(&format!("Content-Length: {n}\r\nTransfer-Encoding: chunked\r\n"), &te_body)),
        ("TE + CL", Close, post(&format!("Transfer-Encoding: chunked\r\nContent-Length: {n}\r\n"), &te_body)),
        (
            "two differing Content-Length",
            Close,
            post(&format!("Content-Length: 0\r\nContent-Length: {s}\r\n"), SMUGGLED),
        ),
        ("Content-Length: N, N", Close, post(&format!("Content-Length: {s}, {s}\r\n"), SMUGGLED)),
        ("Content-Length: +N", Close, post(&format!("Content-Length: +{s}\r\n"), SMUGGLED)),
        ("Content-Length: 0xN", Close, post(&format!("Content-Length: 0x{s:x}\r\n"), SMUGGLED)),
        ("TE: chunked, gzip", Close, post("Transfer-Encoding: chunked, gzip\r\n", &te_body)),
        (
            "TE: chunked + TE: gzip (two lines)",
            Close,
            post("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n", &te_body),
        ),
        ("TE: gzip, chunked", Close, post("Transfer-Encoding: gzip, chunked\r\n", "5\r\nhello\r\n0\r\n\r\n")),
        (
            "TE: chunked + TE: chunked (two lines)",
            Close,
            post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"),
        ),
        (
            "TE: xchunked + CL",
            Close,
            post(&format!("Transfer-Encoding: xchunked\r\nContent-Length: {n}\r\n"), &te_body),
        ),
        (
            "HTTP/1.0 + TE: chunked",
            Close,
            format!("POST {} HTTP/1.0\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n{te_body}", server.body_target)
                .into_bytes(),
        ),
        (
            "chunk size ffffffffffffffffff",
            Close,
            post("Transfer-Encoding: chunked\r\n", &format!("ffffffffffffffffff\r\nhello\r\n{te_body}")),
        ),
        (
            "chunk size 2^64 + 5 (wraps to 5)",
            Close,
            post("Transfer-Encoding: chunked\r\n", &format!("10000000000000005\r\nhello\r\n{te_body}")),
        ),
        (
            "obs-fold: TE on a continuation line + CL",
            Close,
            post(&format!("Content-Length: {n}\r\nTransfer-Encoding:\r\n chunked\r\n"), &te_body),
        ),
        ("obs-fold: tab continuation", Close, get("\r\nHost: t\r\nX-Folded: a\r\n\tb\r\n\r\n")),
        (
            "space before colon: TE + CL",
            Close,
            post(&format!("Transfer-Encoding : chunked\r\nContent-Length: {n}\r\n"), &te_body),
        ),
        ("bare LF line endings in the head", Canary, get("\nHost: t\n\n")),
        (
            "bare LF in chunked framing",
            Close,
            post("Transfer-Encoding: chunked\r\n", &format!("5\nhello\n0\n\n{SMUGGLED}")),
        ),
        ("bare CR in the head", Close, get("\rHost: t\r\n\r\n")),
        ("NUL in a header value", Close, get("\r\nHost: t\r\nX-Nul: a\0b\r\n\r\n")),
    ]
}

/// One vector's result, as the table records it.
#[derive(Debug)]
struct Outcome {
    statuses: Vec<u16>,
    /// The canary was answered with its reference answer (as the last response).
    canary: bool,
    /// How the connection ended: "closed" or an error.
    end: String,
    /// From sending to the end of the connection.
    took: Duration,
}

impl Outcome {
    fn summary(&self) -> String {
        let mut parts: Vec<String> = self.statuses.iter().map(u16::to_string).collect();
        if self.canary
            && let Some(last) = parts.last_mut()
        {
            *last = format!("canary {last}");
        }
        if parts.is_empty() {
            parts.push("no answer".into());
        }
        let waited = if self.waited() {
            format!(" after {} ms: it waited for more bytes", ms(self.took))
        } else {
            String::new()
        };
        format!("{}, {}{waited}", parts.join(" + "), self.end)
    }

    /// The connection ended only when a deadline cut it: the server was waiting for bytes that, by the framing
    /// it should have chosen, were never due (the canary read as body, say).
    fn waited(&self) -> bool {
        self.took >= IO_TIMEOUT.min(KEEP_ALIVE)
    }
}

fn try_vector(server: &Server, bytes: &[u8]) -> Outcome {
    let mut conn = Conn::connect(server.addr);
    let mut all = bytes.to_vec();
    all.extend_from_slice(&get_close(&server.normal));
    let started = Instant::now();
    let _ = conn.write(&all);
    let mut responses = Vec::new();
    let end = loop {
        match conn.next_response(false) {
            Ok(Some(res)) => responses.push(res),
            Ok(None) => break "closed".to_string(),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break "reset".to_string(),
            Err(e) => break format!("error: {e}"),
        }
    };
    let canary = responses.last().is_some_and(|r| r.status == 200 && r.body == server.reference);
    Outcome { statuses: responses.iter().map(|r| r.status).collect(), canary, end, took: started.elapsed() }
}

fn smuggling(kind: Kind) {
    let server = Server::start(kind, KEEP_ALIVE);
    let mut table = Vec::new();
    let mut wrong = Vec::new();
    for (name, expect, bytes) in vectors(&server) {
        let outcome = try_vector(&server, &bytes);
        let ended = matches!(outcome.end.as_str(), "closed" | "reset");
        // 501 is serve's answer to a transfer coding other than exactly `chunked` (RFC 9112 section 6.1).
        let error = |status: &u16| (400..500).contains(status) || *status == 501;
        let fine = ended
            && !outcome.waited()
            && match (expect, outcome.statuses.as_slice()) {
                (_, [status]) => error(status),
                (Expect::AnsweredThenCanary, [first, _]) => outcome.canary && *first < 500,
                _ => false,
            };
        if !fine {
            wrong.push(format!("{name} ({expect:?}): {}", outcome.summary()));
        }
        table.push(format!("{name} | {}", outcome.summary()));
    }
    eprintln!("FIGURE smuggling {}:\n  {}", server.name(), table.join("\n  "));
    assert!(
        wrong.is_empty(),
        "{}: request framing went wrong (more answers than requests, the canary swallowed or unanswered on a kept \
         connection, a 5xx, or no end):\n  {}\nall vectors:\n  {}",
        server.name(),
        wrong.join("\n  "),
        table.join("\n  ")
    );
    let back = server.wait_no_clients(SLACK);
    assert!(back.is_some(), "{}: {} client connections left after the vectors", server.name(), server.clients());
    server.check_normal("after the smuggling vectors");
}

// ------------------------------------------------------------------------------------------------------------
// half-closed requests
// ------------------------------------------------------------------------------------------------------------

/// Sends `request`, half-closes, and returns what came back before the server closed, and whether it closed
/// within the slack.
fn half_closed_exchange(addr: SocketAddr, request: &[u8]) -> (Response, bool) {
    let mut conn = Conn::connect(addr);
    conn.send(request);
    conn.stream().shutdown(std::net::Shutdown::Write).expect("half-close");
    let res = conn.read_response().unwrap_or_else(|e| panic!("no answer to a half-closed request: {e}"));
    (res, conn.wait_closed(SLACK).is_some())
}

fn half_close(kind: Kind) {
    let server = Server::start(kind, KEEP_ALIVE);
    let normal = format!("GET {} HTTP/1.1\r\nHost: t\r\n\r\n", server.normal);
    let (res, closed) = half_closed_exchange(server.addr, normal.as_bytes());
    assert_eq!(res.status, 200, "{}: half-closed GET {}: {}", server.name(), server.normal, res.text());
    assert_eq!(
        res.body,
        server.reference,
        "{}: half-closed GET {} answered another body",
        server.name(),
        server.normal
    );
    assert!(closed, "{}: the connection stayed open after answering a half-closed request", server.name());
    let mut answered = vec![format!("GET {} {}", server.normal, res.status)];
    if kind == Kind::Scribe {
        // Awaits PostgreSQL and Redis before answering.
        let (res, closed) = half_closed_exchange(server.addr, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(res.status, 200, "scribe-rs: half-closed GET /healthz: {}", res.text());
        assert!(closed);
        answered.push(format!("GET /healthz {}", res.status));
    }
    if server.reads_body {
        let body = accepted_body(kind, "title", "half-closed");
        let post = format!(
            "POST {} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            server.body_target,
            body.len()
        );
        let (res, closed) = half_closed_exchange(server.addr, post.as_bytes());
        assert!(
            res.status < 500,
            "{}: half-closed POST {}: {} {}",
            server.name(),
            server.body_target,
            res.status,
            res.text()
        );
        if kind == Kind::Scribe {
            assert_eq!(res.status, 200, "scribe-rs: half-closed POST /notes: {}", res.text());
        }
        assert!(closed);
        answered.push(format!("POST {} {}", server.body_target, res.status));
    }
    server.check_normal("after the half-closed requests");
    eprintln!("FIGURE half_close {}: answered {}, then closed", server.name(), answered.join(", "));
}

// ------------------------------------------------------------------------------------------------------------
// trickled requests, the minimum data rate
// ------------------------------------------------------------------------------------------------------------

/// `--min-data-rate` at its default, 500 bytes/s averaged over 5 s windows.
const RATE_WINDOW: Duration = Duration::from_secs(5);

/// Writes `bytes` in `chunk`-sized pieces every `every` until done or the server answers or closes; what it
/// sent back, and when (from the first write).
fn paced(
    addr: SocketAddr,
    head: &[u8],
    bytes: &[u8],
    chunk: usize,
    every: Duration,
    within: Duration,
) -> (Vec<u8>, Duration) {
    let mut stream = connect(addr);
    stream.write_all(head).expect("send the head");
    let started = Instant::now();
    let mut sent = 0;
    let mut answer = Vec::new();
    stream.set_nonblocking(true).expect("nonblocking");
    while started.elapsed() < within {
        let mut buf = [0u8; 4096];
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
        if answer.windows(4).any(|w| w == b"\r\n\r\n") && sent >= bytes.len() {
            break;
        }
        if sent < bytes.len() && answer.is_empty() {
            let end = (sent + chunk).min(bytes.len());
            match stream.write(&bytes[sent..end]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => break,
            }
        }
        std::thread::sleep(every);
    }
    stream.set_nonblocking(false).expect("blocking");
    stream.set_read_timeout(Some(Duration::from_millis(500))).expect("read timeout");
    let took = started.elapsed();
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    answer.extend_from_slice(&rest);
    (answer, took)
}

fn trickle(kind: Kind) {
    let server = Server::start(kind, KEEP_ALIVE);
    // A head trickled at 10 bytes/s: the header timeout (1 s here) answers 408 first.
    let (answer, took) = paced(
        server.addr,
        b"G",
        b"ET / HTTP/1.1\r\nHost: t\r\nX-Pad: aaaaaaaaaaaaaaaa",
        1,
        Duration::from_millis(100),
        HEADER_TIMEOUT + SLACK,
    );
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408 "), "{}: a trickled head got {text:?} after {took:?}", server.name());
    let mut figures = vec![format!("trickled head 408 after {} ms", ms(took))];
    if server.reads_body {
        // A body trickled at 10 bytes/s: 408 and a close after one rate window (io timeout 2 s never fires:
        // a byte moves every 100 ms).
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n",
            server.body_target
        );
        let (answer, took) =
            paced(server.addr, head.as_bytes(), &[b' '; 60000], 1, Duration::from_millis(100), RATE_WINDOW * 2 + SLACK);
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 408 "), "{}: a trickled body got {text:?} after {took:?}", server.name());
        assert!(text.to_ascii_lowercase().contains("connection: close"), "{}: {text:?}", server.name());
        assert!(
            took >= RATE_WINDOW - Duration::from_millis(500),
            "{}: cut after {took:?}, before a window",
            server.name()
        );
        figures.push(format!("trickled body 408 after {} ms", ms(took)));

        // An honest slow upload, 10 KiB/s for 6 s: more than a window, and not cut.
        let body = accepted_body(kind, "body", &"s".repeat(60 * 1024));
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            server.body_target,
            body.len()
        );
        let (answer, took) = paced(
            server.addr,
            head.as_bytes(),
            body.as_bytes(),
            1024,
            Duration::from_millis(100),
            Duration::from_secs(20),
        );
        let text = String::from_utf8_lossy(&answer);
        let status: u16 = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        assert!(
            status != 0 && status != 408,
            "{}: a 10 KiB/s upload got {:?} after {took:?}",
            server.name(),
            text.get(..200)
        );
        if kind == Kind::Scribe {
            assert_eq!(
                status,
                200,
                "scribe-rs: a 10 KiB/s note upload: {:?}",
                text.chars().take(400).collect::<String>()
            );
        }
        figures.push(format!("{} KiB at 10 KiB/s answered {status} after {} ms", body.len() / 1024, ms(took)));
    }
    server.check_normal("after the trickles");
    eprintln!("FIGURE trickle {}: {}", server.name(), figures.join("; "));
}

// ------------------------------------------------------------------------------------------------------------
// 5,000 idle connections
// ------------------------------------------------------------------------------------------------------------

/// What 1,000 idle connections may add to a server's RSS, in KiB: 4 KiB each.
const IDLE_KIB_PER_THOUSAND: u64 = 4 * 1024;

fn idle_connections(kind: Kind) {
    const CONNECTIONS: usize = 5000;
    ensure_nofile(CONNECTIONS as u64 + 1024);
    let keep_alive = Duration::from_secs(5);
    let server = Server::start(kind, keep_alive);
    server.check_normal("warm-up");
    std::thread::sleep(Duration::from_millis(200));
    let (fds_before, rss_before) = (server.fds(), server.status_kib("VmRSS"));

    let opening = Instant::now();
    let mut sockets: Vec<Watched> = (0..CONNECTIONS).map(|_| Watched::new(connect(server.addr))).collect();
    let opened = opening.elapsed();
    let accepted = until(keep_alive, || server.clients() >= CONNECTIONS);
    assert!(accepted.is_some(), "{}: accepted {} of {CONNECTIONS} connections", server.name(), server.clients());
    let probe = server.check_normal("with 5,000 idle connections");
    let (fds_open, rss_open) = (server.fds(), server.status_kib("VmRSS"));
    let measured_at = opening.elapsed();
    assert!(measured_at < keep_alive, "{}: opening and measuring took {measured_at:?}", server.name());
    assert!(probe < RESPONSIVE, "{}: a normal GET took {} ms with 5,000 idle connections", server.name(), ms(probe));
    assert!(
        (fds_before + CONNECTIONS..=fds_before + CONNECTIONS + 4).contains(&fds_open),
        "{}: {fds_open} fds with {CONNECTIONS} connections open, {fds_before} before",
        server.name()
    );
    let grown = rss_open.saturating_sub(rss_before);
    let per_thousand = grown * 1000 / CONNECTIONS as u64;
    // serve hands a connection to hyper only once its first byte is in, so an idle one costs its socket and a
    // small task. Before that it was about 10.9 MiB per 1,000 on every server (hyper's 8 KiB read buffer,
    // allocated on the first poll, and the connection's state); the bound catches a return to that.
    assert!(
        per_thousand <= IDLE_KIB_PER_THOUSAND,
        "{}: RSS grew {grown} KiB for {CONNECTIONS} idle connections ({per_thousand} KiB per 1,000; bound \
         {IDLE_KIB_PER_THOUSAND})",
        server.name()
    );

    let all_closed = watch_until_closed(&mut sockets, keep_alive + SLACK, |_| {});
    let open = sockets.iter().filter(|s| s.closed.is_none()).count();
    assert!(
        all_closed,
        "{}: {open} of {CONNECTIONS} idle connections still open after {:?}",
        server.name(),
        opening.elapsed()
    );
    let first = sockets.iter().filter_map(|s| s.closed).min().expect("closed").duration_since(opening);
    let last = sockets.iter().filter_map(|s| s.closed).max().expect("closed").duration_since(opening);
    let back = server.wait_no_clients(SLACK);
    assert!(back.is_some(), "{}: {} client connections left", server.name(), server.clients());
    let fds_after = server.fds();
    assert!(
        fds_after <= fds_before + 2,
        "{}: {fds_after} fds after the idle connections closed, {fds_before} before: {:?}",
        server.name(),
        server.fd_targets()
    );
    server.check_normal("after the idle connections closed");
    eprintln!(
        "FIGURE idle {}: {CONNECTIONS} opened in {} ms; fds {fds_before} -> {fds_open}; RSS {rss_before} -> \
         {rss_open} KiB ({per_thousand} KiB per 1,000); normal GET {} ms; closed {}..{} ms after opening began \
         (keep-alive {} ms); fds back to {fds_after}",
        server.name(),
        ms(opened),
        ms(probe),
        ms(first),
        ms(last),
        ms(keep_alive)
    );
}
