//! HTTP/2's attack surface against every server: flight-rs (production profile), scribe-rs (real Postgres and
//! Redis), metadata-rs and ladder-rs (a generated SQLite file), each as the built binary in a child process on
//! 127.0.0.1, started as hardening.rs starts them and with its small explicit limits: `--workers 1
//! --header-timeout 1 --keep-alive-timeout 3 --io-timeout 2 --max-header-bytes 8192`, a 64 KiB body limit, and
//! serve's HTTP/2 defaults (128 concurrent streams, 1 MiB windows, 20 pending-accept resets; crates/serve/src/
//! http2.rs). Every attack speaks cleartext h2c by prior knowledge, building its bytes from loadgen's frame
//! writers (`loadgen::h2_frame`) and HPACK by hand (static table and literals); the server's frames are parsed
//! back with the same module, its header blocks decoded with loadgen's HPACK decoder. One test per attack and server
//! (`<attack>::<server>`): all four servers, since the whole file runs in about 40 s on this 2-core machine
//! (two tests at a time, cargo's default here; scribe-rs's Postgres start is the largest cost). The two floods
//! take a lock so that no two run at once: each saturates a core and the server's one worker, and two side by
//! side on 2 cores starved each other (p99 up to 76 ms, a worst probe of 154 ms once, against 9-30 ms alone).
//!
//! Every attack is held to three bounds (none weakened for a server that misses one):
//! (a) meanwhile another client sends the normal GET on a fresh connection every 10 ms, alternating HTTP/1.1 and
//!     h2 (testkit::h2), each answered 200 with the body of a quiet moment; their p99 must stay under 100 ms. An
//!     attack that ends sooner is repeated on fresh connections until 1 s and 150 probes have passed (about
//!     1.7 s), so the probes overlap attacks, not the quiet after one, and the p99 is not just the worst probe;
//! (b) the attacking connection is closed, with the GOAWAY code below where the server sends one, promptly
//!     (within 1 s of the offending bytes) for a protocol violation, within its deadline plus 3 s of slack for
//!     a deadline (hardening.rs's slack);
//! (c) the server's VmRSS and VmHWM (/proc/<pid>/status) grow by less than 16 MiB over the attack.
//!
//! What the server does (hyper 1.12 with h2 0.4.21), and the figures from one run (flight-rs / scribe-rs /
//! metadata-rs / ladder-rs; `FIGURE …` lines on stderr with `--nocapture`; p99 ranges over a few whole-file
//! runs); RSS growth was at most 0.9 MiB in every attack (scribe-rs answering 129 streams), VmHWM the same:
//!
//! * `rapid_reset` (CVE-2023-44487): HEADERS (GET of the normal route) then RST_STREAM(CANCEL), up to 100,000
//!   pairs on one connection in writes of 1,000 pairs. GOAWAY ENHANCE_YOUR_CALM, debug "too_many_resets", last
//!   stream 41: the 21st stream reset before hyper accepted it passes `max_pending_accept_reset_streams` (20),
//!   no request reaches the app, and the socket closes at once (0-16 ms after the client's last byte; the
//!   client got 1,000 to 78,000 pairs into the socket buffers first). Repeated on 260-1,600 connections in
//!   1 s; p99 4.7-40 ms.
//! * `continuation_flood`: HEADERS without END_HEADERS whose last literal announces a 1 MiB value, then 1,000-
//!   byte CONTINUATION frames without END_HEADERS until the server closes. h2 allows 5 CONTINUATION frames per
//!   header block here (8,192 / 16,384 rounded up to 1, plus a quarter, at least 5): with 5 the connection
//!   stays (checked after 300 ms), the 6th gets GOAWAY ENHANCE_YOUR_CALM "too_many_continuations" and the
//!   close, 0-5 ms after the last byte. (A value length of 2^28 or more, past h2's 4-byte HPACK integers, is a
//!   PROTOCOL_ERROR at once.) Repeated on 600-2,300 connections in 1 s; p99 1.8-12.4 ms.
//! * `settings_flood` and `ping_flood`: SETTINGS (INITIAL_WINDOW_SIZE 65,535) or PING frames in writes of
//!   1,000, the client never reading, until the server closes (100,000 frames at least, unless a deadline came
//!   first). h2 reads no frame while its last ACK waits to be written, so once the socket buffers hold what
//!   they can (about 760,000 SETTINGS / 500,000 PINGs written by the client, 14,000 / 7,700 ACKs readable on
//!   its side) the server stops reading; its blocked write counts toward `--io-timeout`, and the socket is
//!   closed 1.9-2.1 s after the client's last successful write (2.3-3.6 s after it opened), no GOAWAY (it
//!   would sit behind the unread ACKs). Had the writes kept moving, the idle deadline would have ended it at
//!   3 s + 1 s: stream-0 frames are not activity. The highest p99s of the file: SETTINGS flood 10-45 ms, PING
//!   flood 5-36 ms, scribe-rs the highest (h2 decodes every frame the socket holds before it yields, up to
//!   tokio's cooperative budget of socket polls, and the other client's connection waits on the same worker;
//!   a debug build).
//! * `zero_window`: SETTINGS_INITIAL_WINDOW_SIZE 0, never a WINDOW_UPDATE, 100 GETs of the normal route (a
//!   body every time). All 100 heads of 200 come (HEADERS are not flow-controlled), not one body byte; after
//!   `--io-timeout` of nothing written while responses wait, GOAWAY NO_ERROR (last stream 2^31-1: hyper's
//!   graceful shutdown) and the close 1 s later: 3.02-3.09 s after the requests. p99 3.1-11 ms.
//! * `too_many_streams`: 1,000 HEADERS (GET, END_STREAM) written before reading anything. Exactly 128 answered
//!   200 and 872 RST_STREAM REFUSED_STREAM in every run (the batch is read before any stream ends; hyper's
//!   bound of 1,024 streams reset for errors per connection is not reached); the connection goes on
//!   (one more GET answered 200), then idle: GOAWAY NO_ERROR and the close 4.01-4.04 s later. p99 5.1-10.1 ms.
//! * `header_list`: one header of 2 x 8,192 bytes (HEADERS + CONTINUATION: a frame holds 16,384), and 200
//!   headers of 49 bytes each by HPACK's count (9,800): each answered `:status 431` with END_STREAM and no
//!   RST_STREAM, a stream error only (the next GET on the connection is answered 200). An HPACK bomb, one
//!   4,000-byte field put in the dynamic table then referenced 100 times with one byte each (4 KiB sent, 400
//!   KB decoded), passes h2's abuse bound of 4 x the header list limit: GOAWAY ENHANCE_YOUR_CALM
//!   "header_list_way_too_large" and the close, 1-2 ms after the last byte. p99 1.5-16.5 ms.
//! * `truncated_frame`: a HEADERS frame announcing 1,000 bytes, 10 sent, then the client's FIN. No GOAWAY (the
//!   end of input inside a frame is a read error to h2, not a frame to answer); the socket is closed 0-11 ms
//!   after the FIN. p99 1.2-13.6 ms.
//! * `garbage`: 64 KiB of xorshift noise where the client's SETTINGS belongs: its first 9 bytes announce a
//!   frame past 16,384 bytes (type 0xc, length 11,450,769 in round 0), GOAWAY FRAME_SIZE_ERROR (a length within
//!   the limit would be a first frame that is not SETTINGS: PROTOCOL_ERROR; the test computes which); and
//!   after a valid start, a frame of undefined type 0xfa announcing 2^24-1 bytes: GOAWAY FRAME_SIZE_ERROR too,
//!   from its header alone. Both closed at once; 140-190 rounds in 1 s; p99 1.0-7.5 ms.
//!
//! The floods first failed (a) intermittently: in whole-file runs on this shared machine (other builds running)
//! the SETTINGS flood against scribe-rs put the other client's p99 past 100 ms in 2 of 6 runs. One connection's
//! frames held the worker for as long as tokio's cooperative budget allowed (about 128 socket polls per task
//! poll): h2 has no per-poll frame budget of its own. serve now gives each HTTP/2 connection 64 KiB of reads
//! per poll of its task (`READ_BUDGET`, crates/serve/src/connection.rs), then yields the worker; in the whole-file
//! run after it, the other client's p99 during the floods was 7-40 ms on every server, and every test passes.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use loadgen::h2_frame::{self as h2, Frame};
use testkit::process::Guard;
use testkit::workspace::root;

const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
const KEEP_ALIVE: Duration = Duration::from_secs(3);
const IO_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_HEADER_BYTES: usize = 8192;
const BODY_LIMIT: usize = 64 * 1024;
/// serve closes the socket this long after a deadline's GOAWAY (crates/serve/src/serving.rs `GOAWAY_GRACE`).
const GOAWAY_GRACE: Duration = Duration::from_secs(1);
/// Scheduling slack for a deadline to fire on a shared 2-core machine (hardening.rs's).
const SLACK: Duration = Duration::from_secs(3);
/// A connection error (a GOAWAY for a protocol violation) must close the connection within this of the
/// violation: it is decided by the frame that breaks the rule, no timer involved.
const PROMPT: Duration = Duration::from_secs(1);
/// The other client's p99 while an attack runs.
const P99_BOUND: Duration = Duration::from_millis(100);
/// Growth of VmRSS, and of VmHWM (the peak), over an attack.
const RSS_BOUND_KIB: u64 = 16 * 1024;
/// Short attacks repeat on fresh connections for at least this long, so the probes overlap attacks and not the
/// quiet after one.
const MIN_WINDOW: Duration = Duration::from_secs(1);
/// At least this many probes per attack, one every `PROBE_EVERY`: with fewer than 100 the p99 is the single
/// worst probe, which on a shared 2-core machine (other builds, a Postgres starting for the next test) is
/// scheduling luck more than the attack.
const MIN_PROBES: usize = 150;
const PROBE_EVERY: Duration = Duration::from_millis(10);
/// The floods' frame counts: at least this many are written unless the server closes first.
const FLOOD_FRAMES: usize = 100_000;
/// An attack that the server never cuts off is given up on after this long (and the test fails).
const GIVE_UP: Duration = Duration::from_secs(15);

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

/// One test per server for each attack: `rapid_reset::flight_rs`, `rapid_reset::scribe_rs`, …
macro_rules! every_server {
    ($($attack:ident),* $(,)?) => {$(
        mod $attack {
            #[test]
            fn flight_rs() {
                super::$attack(super::Kind::Flight);
            }
            #[test]
            fn scribe_rs() {
                super::$attack(super::Kind::Scribe);
            }
            #[test]
            fn metadata_rs() {
                super::$attack(super::Kind::Metadata);
            }
            #[test]
            fn ladder_rs() {
                super::$attack(super::Kind::Ladder);
            }
        }
    )*};
}

every_server!(
    rapid_reset,
    continuation_flood,
    settings_flood,
    ping_flood,
    zero_window,
    too_many_streams,
    header_list,
    truncated_frame,
    garbage
);

// ------------------------------------------------------------------------------------------------------------
// The servers, as child processes (started as hardening.rs starts them, without its large static file)
// ------------------------------------------------------------------------------------------------------------

/// A server child process. Fields drop in order: the child is killed before its database, cache and files go.
struct Server {
    kind: Kind,
    addr: SocketAddr,
    child: Guard,
    /// A GET answered 200 with a body (the probes' request, and the attacks' where they need a real route), and
    /// its body from a quiet moment.
    normal: String,
    reference: Vec<u8>,
    _postgres: Option<testkit::Postgres>,
    _redis: Option<testkit::Redis>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(kind: Kind) -> Server {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut args: Vec<String> =
            ["--hostname", "127.0.0.1", "--port", "0", "--workers", "1", "--shutdown-timeout", "1"]
                .map(String::from)
                .to_vec();
        for (flag, value) in
            [("--header-timeout", HEADER_TIMEOUT), ("--keep-alive-timeout", KEEP_ALIVE), ("--io-timeout", IO_TIMEOUT)]
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
                std::fs::write(dist.join("index.html"), "<!doctype html><title>h2 attacks</title>").expect("index");
                args.extend(
                    ["--middleware", "production", "--app-secret", "hardening-secret-at-least-32-bytes-long"]
                        .map(String::from),
                );
                args.extend(["--dist-path".to_string(), dist.display().to_string()]);
                // A rapid reset is 100,000 requests from one address; 429s would hide what is tested.
                args.extend(["--rate-limit", "100000000"].map(String::from));
            }
            Kind::Scribe => {
                let pg = testkit::Postgres::start();
                let url = pg.create_database("h2_attacks");
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

        let normal = match kind {
            Kind::Flight => "/api/hello".to_string(),
            Kind::Scribe => {
                let note = serde_json::json!({
                    "data": {"title": "h2 attacks"},
                    "date_created": "2026-01-01T00:00:00.000Z",
                    "date_modified": "2026-01-01T00:00:00.000Z",
                    "created_by": 1,
                    "modified_by": 1,
                });
                let res = testkit::http::request(addr, "POST", "/notes", &[], Some(note.to_string().as_bytes()));
                assert_eq!(res.status, 200, "scribe-rs: POST /notes: {}", res.text());
                "/notes/1".to_string()
            }
            Kind::Metadata => format!("/v1/metadata/{sample_id}?region=en"),
            Kind::Ladder => "/ladder/empty".to_string(),
        };
        let res = testkit::http::send(addr, &get_close(&normal));
        assert_eq!(res.status, 200, "{}: GET {normal}: {}", kind.binary(), res.text());
        assert!(!res.body.is_empty(), "{}: GET {normal} has a body (the zero-window attack needs one)", kind.binary());
        let server =
            Server { kind, addr, child, normal, reference: res.body, _postgres: postgres, _redis: redis, _dir: dir };
        // The same answer over HTTP/2, or the h2 probes would compare against the wrong body.
        let over_h2 = server.get_h2();
        assert_eq!(over_h2.status, 200, "{}: h2 GET {}", server.name(), server.normal);
        assert_eq!(over_h2.body, server.reference, "{}: h2 GET {} answered another body", server.name(), server.normal);
        server
    }

    fn name(&self) -> &'static str {
        self.kind.binary()
    }

    fn pid(&self) -> u32 {
        self.child.0.id()
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

    /// Whether the server still holds its end of the connection from the client port `peer`: a socket on its
    /// port to that peer that a process owns (a socket the server closed keeps a table entry while it drains,
    /// FIN_WAIT and the like, but its inode is 0). Tells a close without reading the client's socket, which the
    /// floods must not do.
    fn holds(&self, peer: u16) -> bool {
        let (local, remote) = (format!(":{:04X}", self.addr.port()), format!(":{peer:04X}"));
        let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else { return true };
        table.lines().skip(1).any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address, rem_address, …, inode
            fields.len() > 9 && fields[1].ends_with(&local) && fields[2].ends_with(&remote) && fields[9] != "0"
        })
    }

    fn get_h1(&self) -> testkit::http::Response {
        testkit::http::send(self.addr, &get_close(&self.normal))
    }

    fn get_h2(&self) -> testkit::http::Response {
        let mut exchange = testkit::h2::send(self.addr, &[testkit::h2::Req::get(&self.normal)])
            .unwrap_or_else(|e| panic!("{}: h2 GET {}: {e}", self.name(), self.normal));
        exchange.responses.remove(0)
    }

    /// The normal GET on a fresh connection, HTTP/1.1 or HTTP/2 (prior knowledge): asserts the reference answer
    /// and returns how long it took.
    fn probe(&self, h2: bool, when: &str) -> Duration {
        let started = Instant::now();
        let res = if h2 { self.get_h2() } else { self.get_h1() };
        let took = started.elapsed();
        let protocol = if h2 { "h2" } else { "HTTP/1.1" };
        assert_eq!(res.status, 200, "{} {when}: {protocol} GET {}: {}", self.name(), self.normal, res.text());
        assert_eq!(
            res.body,
            self.reference,
            "{} {when}: {protocol} GET {} answered another body",
            self.name(),
            self.normal
        );
        took
    }
}

fn get_close(target: &str) -> Vec<u8> {
    testkit::http::request_bytes("GET", target.as_bytes(), &[], None)
}

// ------------------------------------------------------------------------------------------------------------
// The other client, and the bounds every attack is held to
// ------------------------------------------------------------------------------------------------------------

/// What an attack cost the server and the other client.
struct Window {
    took: Duration,
    probes: Vec<Duration>,
    rss: (u64, u64),
    hwm: (u64, u64),
}

impl Window {
    fn p99(&self) -> Duration {
        let mut sorted = self.probes.clone();
        sorted.sort_unstable();
        // The smallest value that at least 99% of the probes do not exceed.
        let rank = (sorted.len() * 99).div_ceil(100).max(1);
        sorted[rank - 1]
    }

    fn summary(&self) -> String {
        format!(
            "{} probes over {} ms, p99 {:.1} ms, max {:.1} ms; VmRSS {} -> {} KiB, VmHWM {} -> {} KiB",
            self.probes.len(),
            self.took.as_millis(),
            ms(self.p99()),
            ms(self.probes.iter().copied().max().unwrap_or_default()),
            self.rss.0,
            self.rss.1,
            self.hwm.0,
            self.hwm.1
        )
    }

    /// The bounds (a) and (c) of every attack: the other client's p99, and the server's memory.
    fn check(&self, server: &Server, attack: &str) {
        let name = server.name();
        assert!(self.probes.len() >= MIN_PROBES, "{name} {attack}: only {} probes", self.probes.len());
        assert!(
            self.p99() < P99_BOUND,
            "{name} {attack}: the other client's p99 {:.1} ms is over {} ms ({})",
            ms(self.p99()),
            P99_BOUND.as_millis(),
            self.summary()
        );
        for (what, (before, after)) in [("VmRSS", self.rss), ("VmHWM", self.hwm)] {
            assert!(
                after.saturating_sub(before) < RSS_BOUND_KIB,
                "{name} {attack}: {what} grew by {} KiB, past {RSS_BOUND_KIB} KiB ({})",
                after.saturating_sub(before),
                self.summary()
            );
        }
    }
}

/// Runs `attack` (its argument: how many times it ran before) until it has run for `MIN_WINDOW` and the
/// probes reached `MIN_PROBES`, while another client sends the normal GET on fresh connections every
/// `PROBE_EVERY`, alternating HTTP/1.1 and HTTP/2. Each run of `attack` must end with its connection closed,
/// so the memory after is the server's state once the attack is over.
fn under_attack<T>(server: &Server, mut attack: impl FnMut(usize) -> T) -> (Vec<T>, Window) {
    let rss_before = server.status_kib("VmRSS");
    let hwm_before = server.status_kib("VmHWM");
    let done = AtomicBool::new(false);
    let probed = AtomicUsize::new(0);
    let started = Instant::now();
    let (outcomes, probes) = std::thread::scope(|scope| {
        let probes = scope.spawn(|| {
            let mut took = Vec::new();
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(PROBE_EVERY);
                took.push(server.probe(took.len() % 2 == 1, &format!("probe {} during the attack", took.len())));
                probed.store(took.len(), Ordering::Relaxed);
            }
            took
        });
        // Stops the probes however the attack ends: a failed assertion in it must not leave the scope waiting
        // for a thread that probes forever.
        let stop = StopOnDrop(&done);
        let mut outcomes = Vec::new();
        while outcomes.is_empty() || started.elapsed() < MIN_WINDOW || probed.load(Ordering::Relaxed) < MIN_PROBES {
            outcomes.push(attack(outcomes.len()));
        }
        drop(stop);
        (outcomes, probes.join().expect("the probes thread panicked"))
    });
    let window = Window {
        took: started.elapsed(),
        probes,
        rss: (rss_before, server.status_kib("VmRSS")),
        hwm: (hwm_before, server.status_kib("VmHWM")),
    };
    (outcomes, window)
}

/// Sets its flag when dropped, unwinding included.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// `min / median / max` of some figures, for the FIGURE lines of attacks repeated on many connections.
fn spread(values: impl IntoIterator<Item = u128>) -> String {
    let mut sorted: Vec<u128> = values.into_iter().collect();
    sorted.sort_unstable();
    match (sorted.first(), sorted.last()) {
        (Some(min), Some(max)) => format!("{min} / {} / {max}", sorted[sorted.len() / 2]),
        _ => "none".to_string(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

// ------------------------------------------------------------------------------------------------------------
// The attacking client: raw frames out, the server's frames parsed back
// ------------------------------------------------------------------------------------------------------------

/// HPACK (RFC 7541) for the attacks' header blocks: static-table entries and literals that leave the dynamic
/// table alone (section 6.2.2), strings without Huffman coding, written with loadgen's HPACK writers.
fn hpack_int(out: &mut Vec<u8>, prefix_bits: u32, flags: u8, value: usize) {
    loadgen::hpack::write_integer(out, value, prefix_bits as u8, flags);
}

fn hpack_str(out: &mut Vec<u8>, s: &[u8]) {
    loadgen::hpack::write_string(out, s);
}

/// A literal field with a new name, without indexing (section 6.2.2).
fn hpack_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0x00);
    hpack_str(out, name);
    hpack_str(out, value);
}

/// `GET target` on authority `test`: :method GET (static 2) and :scheme http (static 6) indexed, :path (static
/// 4) and :authority (static 1) as literals with indexed names, without indexing.
fn get_block(target: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86];
    hpack_int(&mut block, 4, 0x00, 4);
    hpack_str(&mut block, target.as_bytes());
    hpack_int(&mut block, 4, 0x00, 1);
    hpack_str(&mut block, b"test");
    block
}

/// The client preface and an empty SETTINGS frame, and the connection's receive window raised to 1 GiB so that
/// no answer the attack provokes waits on it (the streams' windows stay at 65,535, plenty for one answer).
fn client_start() -> Vec<u8> {
    let mut out = h2::PREFACE.to_vec();
    h2::write_settings(&mut out, &[]);
    h2::write_window_update(&mut out, 0, 1 << 30);
    out
}

/// What the server sent on one connection.
#[derive(Debug, Default)]
struct Seen {
    frames: usize,
    settings_acks: usize,
    ping_acks: usize,
    /// (stream, :status) of every response head.
    statuses: Vec<(u32, u16)>,
    data_bytes: usize,
    /// (stream, error code) of every RST_STREAM.
    resets: Vec<(u32, u32)>,
    /// (last stream, error code, debug data) of the GOAWAY, if one came.
    goaway: Option<(u32, u32, String)>,
    goaways: usize,
}

impl Seen {
    fn goaway_code(&self) -> Option<u32> {
        self.goaway.as_ref().map(|g| g.1)
    }

    fn goaway_summary(&self) -> String {
        match &self.goaway {
            Some((last, code, debug)) => {
                format!("GOAWAY {} (last stream {last}, debug {debug:?})", h2::error_name(*code))
            }
            None => "no GOAWAY".to_string(),
        }
    }
}

/// The server's side of a connection, parsed as it arrives.
struct Reader {
    buf: Vec<u8>,
    hpack: loadgen::hpack::Decoder,
    seen: Seen,
}

impl Reader {
    fn new() -> Reader {
        Reader { buf: Vec::new(), hpack: loadgen::hpack::Decoder::new(4096), seen: Seen::default() }
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        let mut used = 0;
        while let Some((frame, len)) = h2::parse(&self.buf[used..], h2::DEFAULT_MAX_FRAME_SIZE)
            .unwrap_or_else(|e| panic!("the server sent an invalid frame: {} ({})", e.reason, h2::error_name(e.code)))
        {
            used += len;
            let seen = &mut self.seen;
            seen.frames += 1;
            match frame {
                Frame::Settings { ack: true, .. } => seen.settings_acks += 1,
                Frame::Ping { ack: true, .. } => seen.ping_acks += 1,
                Frame::Headers { stream, end_headers, block, .. } => {
                    assert!(end_headers, "a response head in CONTINUATION frames: not expected of these answers");
                    let mut status = None;
                    self.hpack
                        .decode(block, |name, value| {
                            if name == b":status" {
                                status = std::str::from_utf8(value).ok().and_then(|v| v.parse::<u16>().ok());
                            }
                        })
                        .unwrap_or_else(|e| panic!("HPACK from the server: {e}"));
                    let status = status.unwrap_or_else(|| panic!("a response head without :status on stream {stream}"));
                    seen.statuses.push((stream, status));
                }
                Frame::Data { data, .. } => seen.data_bytes += data.len(),
                Frame::RstStream { stream, code } => seen.resets.push((stream, code)),
                Frame::GoAway { last_stream, code, debug } => {
                    seen.goaways += 1;
                    seen.goaway = Some((last_stream, code, String::from_utf8_lossy(debug).into_owned()));
                }
                _ => {}
            }
        }
        self.buf.drain(..used);
    }
}

/// One attacking connection. Non-blocking: writes that would block are retried while the server is watched for
/// closing the connection; reads take whatever has arrived.
struct Attacker<'s> {
    server: &'s Server,
    stream: TcpStream,
    port: u16,
    opened: Instant,
    /// When the server closed it: EOF or a reset seen by the client, an error writing, or the server no longer
    /// holding its socket.
    closed: Option<Instant>,
    /// The client's bytes written, and when the last of them went.
    sent: usize,
    last_sent: Instant,
    reader: Reader,
}

impl<'s> Attacker<'s> {
    fn connect(server: &'s Server) -> Attacker<'s> {
        let stream = TcpStream::connect(server.addr).unwrap_or_else(|e| panic!("connect to {}: {e}", server.name()));
        stream.set_nodelay(true).expect("nodelay");
        stream.set_nonblocking(true).expect("non-blocking");
        let port = stream.local_addr().expect("local address").port();
        Attacker {
            server,
            stream,
            port,
            opened: Instant::now(),
            closed: None,
            sent: 0,
            last_sent: Instant::now(),
            reader: Reader::new(),
        }
    }

    /// Writes all of `bytes` unless the server closes the connection first (false then). `reading`: take the
    /// server's frames meanwhile; a flood that never reads leaves them to pile up on the server's side.
    fn send(&mut self, bytes: &[u8], reading: bool) -> bool {
        let mut at = 0;
        let mut checked = Instant::now();
        while at < bytes.len() {
            if self.closed.is_some() {
                return false;
            }
            match (&self.stream).write(&bytes[at..]) {
                Ok(n) => {
                    at += n;
                    self.sent += n;
                    self.last_sent = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if reading {
                        self.read_available();
                    }
                    if checked.elapsed() >= Duration::from_millis(5) {
                        checked = Instant::now();
                        if !self.server.holds(self.port) {
                            self.closed.get_or_insert_with(Instant::now);
                        }
                    }
                    assert!(
                        self.opened.elapsed() < GIVE_UP,
                        "{}: the attack was never cut off: the connection still open after {} s ({} bytes written)",
                        self.server.name(),
                        GIVE_UP.as_secs(),
                        self.sent
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // EPIPE or ECONNRESET: the server closed it.
                Err(_) => {
                    self.closed.get_or_insert_with(Instant::now);
                }
            }
        }
        true
    }

    /// Reads whatever the server sent; notes the close at EOF or a reset.
    fn read_available(&mut self) {
        let mut buf = [0u8; 64 * 1024];
        loop {
            match (&self.stream).read(&mut buf) {
                Ok(0) => {
                    self.closed.get_or_insert_with(Instant::now);
                    return;
                }
                Ok(n) => self.reader.feed(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.closed.get_or_insert_with(Instant::now);
                    return;
                }
            }
        }
    }

    /// Waits for the server to close the connection, reading meanwhile if `reading`, then reads what is left
    /// (a flood's piled-up ACKs and its GOAWAY, if the server got to write one). Fails past `GIVE_UP`.
    fn wait_closed(&mut self, reading: bool) {
        let mut checked = Instant::now();
        while self.closed.is_none() {
            if reading {
                self.read_available();
            }
            if checked.elapsed() >= Duration::from_millis(5) {
                checked = Instant::now();
                if !self.server.holds(self.port) {
                    self.closed.get_or_insert_with(Instant::now);
                }
            }
            assert!(
                self.opened.elapsed() < GIVE_UP,
                "{}: the attacking connection still open {} s after it opened ({} bytes written; seen {:?})",
                self.server.name(),
                GIVE_UP.as_secs(),
                self.sent,
                self.reader.seen
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        self.drain();
    }

    /// Everything left to read once the server closed: until EOF or a reset, bounded by a read timeout.
    fn drain(&mut self) {
        self.stream.set_nonblocking(false).expect("blocking");
        self.stream.set_read_timeout(Some(Duration::from_secs(2))).expect("read timeout");
        let mut buf = [0u8; 64 * 1024];
        loop {
            match (&self.stream).read(&mut buf) {
                Ok(0) => return,
                Ok(n) => self.reader.feed(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    fn seen(&self) -> &Seen {
        &self.reader.seen
    }

    /// How long after its last byte the server closed the connection.
    fn closed_after_last_byte(&self) -> Duration {
        self.closed.expect("closed").saturating_duration_since(self.last_sent)
    }

    /// How long after it opened the server closed the connection.
    fn lifetime(&self) -> Duration {
        self.closed.expect("closed").saturating_duration_since(self.opened)
    }
}

/// Asserts the connection was closed with a GOAWAY of `code`, within `PROMPT` of the client's last byte (a
/// connection error ends the connection at once, no deadline involved).
fn assert_cut(server: &Server, attack: &str, conn: &Attacker<'_>, code: u32) {
    assert_eq!(
        conn.seen().goaway_code(),
        Some(code),
        "{} {attack}: expected GOAWAY {}, got {} (seen {:?})",
        server.name(),
        h2::error_name(code),
        conn.seen().goaway_summary(),
        conn.seen()
    );
    assert!(
        conn.closed_after_last_byte() < PROMPT,
        "{} {attack}: closed {} ms after the client's last byte (a connection error closes at once)",
        server.name(),
        conn.closed_after_last_byte().as_millis()
    );
}

/// Asserts a connection ended by the idle deadline: a GOAWAY NO_ERROR and the close `GOAWAY_GRACE` after it, not
/// before `KEEP_ALIVE` counted from `idle_from`, not after it plus the grace plus `SLACK`.
fn assert_idle_close(server: &Server, attack: &str, conn: &Attacker<'_>, idle_from: Instant) {
    let after = conn.closed.expect("closed").saturating_duration_since(idle_from);
    assert!(
        after >= KEEP_ALIVE && after <= KEEP_ALIVE + GOAWAY_GRACE + SLACK,
        "{} {attack}: closed {} ms after it went idle (keep-alive {} s, then {} s of grace)",
        server.name(),
        after.as_millis(),
        KEEP_ALIVE.as_secs(),
        GOAWAY_GRACE.as_secs()
    );
    assert_eq!(
        conn.seen().goaway_code(),
        Some(h2::NO_ERROR),
        "{} {attack}: the idle deadline's GOAWAY: {}",
        server.name(),
        conn.seen().goaway_summary()
    );
}

// ------------------------------------------------------------------------------------------------------------
// 1. Rapid reset (CVE-2023-44487)
// ------------------------------------------------------------------------------------------------------------

const RAPID_RESETS: u32 = 100_000;
/// Pairs of HEADERS and RST_STREAM per write.
const RESET_BATCH: u32 = 1_000;

fn rapid_reset(kind: Kind) {
    let server = Server::start(kind);
    let block = get_block(&server.normal);
    let (outcomes, window) = under_attack(&server, |_| {
        let mut conn = Attacker::connect(&server);
        assert!(conn.send(&client_start(), true), "{}: the preface", server.name());
        let mut pairs = 0;
        let mut out = Vec::new();
        while pairs < RAPID_RESETS && conn.closed.is_none() {
            out.clear();
            for _ in 0..RESET_BATCH {
                let stream = 1 + 2 * pairs;
                h2::write_headers(&mut out, stream, h2::END_HEADERS | h2::END_STREAM, &block);
                h2::write_rst_stream(&mut out, stream, h2::CANCEL);
                pairs += 1;
            }
            if !conn.send(&out, true) {
                break;
            }
            conn.read_available();
        }
        conn.wait_closed(true);
        assert_cut(&server, "rapid_reset", &conn, h2::ENHANCE_YOUR_CALM);
        let last = conn.seen().goaway.as_ref().map_or(0, |g| g.0);
        (pairs, last, conn.seen().statuses.len(), conn.closed_after_last_byte())
    });
    window.check(&server, "rapid_reset");
    eprintln!(
        "FIGURE rapid_reset {}: {} connections, each GOAWAY ENHANCE_YOUR_CALM \"too_many_resets\" with last stream \
         {} (min / median / max), {} answered; pairs written before the close {}, closed {} ms after the last \
         byte; {}",
        server.name(),
        outcomes.len(),
        spread(outcomes.iter().map(|o| u128::from(o.1))),
        outcomes.iter().map(|o| o.2).sum::<usize>(),
        spread(outcomes.iter().map(|o| u128::from(o.0))),
        spread(outcomes.iter().map(|o| o.3.as_millis())),
        window.summary()
    );
}

// ------------------------------------------------------------------------------------------------------------
// 2. CONTINUATION flood
// ------------------------------------------------------------------------------------------------------------

/// The bytes of each CONTINUATION frame: pieces of one header value that never ends.
const CONTINUATION_PIECE: usize = 1_000;
const CONTINUATION_BATCH: usize = 64;

/// h2's bound on the CONTINUATION frames of one header block: the frames the header list limit could need
/// (8,192 / 16,384, at least 1) plus a quarter, at least 5 (h2 0.4.21 `calc_max_continuation_frames`).
const MAX_CONTINUATIONS: usize = 5;

fn continuation_flood(kind: Kind) {
    let server = Server::start(kind);
    // A request whose header block never ends: its last field is a literal whose value announces 1 MiB, so the
    // HPACK decoder always needs more, and no CONTINUATION carries END_HEADERS. (Not more: a length that takes
    // over 4 bytes of HPACK integer, 2^28 and up, is h2's PROTOCOL_ERROR at once.)
    let mut block = get_block(&server.normal);
    block.push(0x00);
    hpack_str(&mut block, b"x-flood");
    hpack_int(&mut block, 7, 0, 1 << 20);
    let mut start = client_start();
    h2::write_headers(&mut start, 1, h2::END_STREAM, &block);
    let mut piece = Vec::new();
    h2::write_continuation(&mut piece, 1, 0, &[b'a'; CONTINUATION_PIECE]);
    let (outcomes, window) = under_attack(&server, |round| {
        let mut conn = Attacker::connect(&server);
        assert!(conn.send(&start, true), "{}: the preface and HEADERS", server.name());
        if round == 0 {
            // The bound exactly, once: as many CONTINUATION frames as h2 allows leave the connection open
            // (given time to be read), one more ends it.
            assert!(conn.send(&piece.repeat(MAX_CONTINUATIONS), true), "{}: the allowed frames", server.name());
            std::thread::sleep(Duration::from_millis(300));
            conn.read_available();
            assert!(
                conn.closed.is_none() && conn.seen().goaway.is_none(),
                "{}: {MAX_CONTINUATIONS} CONTINUATION frames end the connection: {}",
                server.name(),
                conn.seen().goaway_summary()
            );
            let _ = conn.send(&piece, true);
            conn.wait_closed(true);
            assert_cut(&server, "continuation_flood", &conn, h2::ENHANCE_YOUR_CALM);
            return (MAX_CONTINUATIONS + 1, conn.seen().goaway_summary(), conn.closed_after_last_byte());
        }
        let batch = piece.repeat(CONTINUATION_BATCH);
        let mut frames = 0;
        while conn.closed.is_none() {
            if !conn.send(&batch, true) {
                break;
            }
            frames += CONTINUATION_BATCH;
            conn.read_available();
        }
        conn.wait_closed(true);
        assert_cut(&server, "continuation_flood", &conn, h2::ENHANCE_YOUR_CALM);
        (frames, conn.seen().goaway_summary(), conn.closed_after_last_byte())
    });
    window.check(&server, "continuation_flood");
    eprintln!(
        "FIGURE continuation_flood {}: {MAX_CONTINUATIONS} CONTINUATION frames kept the connection, the {}th ended it \
         with {}; then {} connections flooded, each ended the same way; frames written before the close {} (batches \
         of {CONTINUATION_BATCH}: the socket buffers take several), closed {} ms after the last byte; {}",
        server.name(),
        outcomes[0].0,
        outcomes[0].1,
        outcomes.len() - 1,
        spread(outcomes[1..].iter().map(|o| o.0 as u128)),
        spread(outcomes.iter().map(|o| o.2.as_millis())),
        window.summary()
    );
}

/// A flood that never reads is cut by whichever of two deadlines comes first: the server's writes (the ACKs)
/// blocked for `IO_TIMEOUT` (serve counts a write that would block toward the io timeout whatever the state of
/// the connection, and the client's last successful write is about when the server stopped reading, since h2
/// reads no frame while its ACK waits), or the idle deadline (no stream for `KEEP_ALIVE` from the connection's
/// start: frames on stream 0 do not count as activity), its GOAWAY then stuck behind the ACKs and the socket
/// closed `GOAWAY_GRACE` later. Not before `IO_TIMEOUT` from the start: no deadline is shorter.
fn assert_flood_cut(server: &Server, attack: &str, conn: &Attacker<'_>) {
    let closed = conn.closed.expect("closed");
    let latest = (conn.last_sent + IO_TIMEOUT).min(conn.opened + KEEP_ALIVE + GOAWAY_GRACE) + SLACK;
    assert!(
        conn.lifetime() >= IO_TIMEOUT && closed <= latest,
        "{} {attack}: closed {} ms after it opened, {} ms after the client's last successful write (io timeout {} \
         s, keep-alive {} s + {} s of grace)",
        server.name(),
        conn.lifetime().as_millis(),
        conn.closed_after_last_byte().as_millis(),
        IO_TIMEOUT.as_secs(),
        KEEP_ALIVE.as_secs(),
        GOAWAY_GRACE.as_secs()
    );
    if let Some(code) = conn.seen().goaway_code() {
        assert_eq!(code, h2::NO_ERROR, "{} {attack}: {}", server.name(), conn.seen().goaway_summary());
    }
}

// ------------------------------------------------------------------------------------------------------------
// 3. SETTINGS and PING floods, the client never reading
// ------------------------------------------------------------------------------------------------------------

const FLOOD_BATCH: usize = 1_000;
static FLOODS: Mutex<()> = Mutex::new(());

/// Writes `frame` (one frame) over and over, in batches, never reading, until the server closes the connection
/// (at least `FLOOD_FRAMES`, unless the idle deadline came first). The server must ACK each one; loopback's
/// socket buffers take about a million ACKs, then they pile up on the server's side, and h2 reads no further
/// frame until its ACK is written (so the flood backs up into the client's send buffer).
fn flood(kind: Kind, attack: &str, frame: impl Fn(&mut Vec<u8>, usize)) {
    // One flood at a time in this test binary: a flood keeps a core busy writing and the server's one worker
    // busy decoding, so two of them (cargo runs two tests at once on 2 cores) would starve each other's server
    // of CPU and the p99 would measure this file's own contention rather than the attack.
    let _one_flood = FLOODS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let server = Server::start(kind);
    let (outcomes, window) = under_attack(&server, |_| {
        let mut conn = Attacker::connect(&server);
        assert!(conn.send(&client_start(), false), "{}: the preface", server.name());
        let mut frames = 0;
        let mut out = Vec::new();
        while conn.closed.is_none() {
            out.clear();
            for i in 0..FLOOD_BATCH {
                frame(&mut out, frames + i);
            }
            if !conn.send(&out, false) {
                break;
            }
            frames += FLOOD_BATCH;
        }
        assert!(
            frames >= FLOOD_FRAMES || conn.lifetime() >= KEEP_ALIVE,
            "{} {attack}: the connection closed after {frames} frames, {} ms: before the idle deadline",
            server.name(),
            conn.lifetime().as_millis()
        );
        let written = conn.last_sent;
        conn.wait_closed(false);
        assert_flood_cut(&server, attack, &conn);
        (frames, conn.lifetime(), conn.closed.expect("closed").saturating_duration_since(written), conn.reader.seen)
    });
    window.check(&server, attack);
    let (frames, lifetime, after_written, seen) = &outcomes[0];
    eprintln!(
        "FIGURE {attack} {}: {frames} frames written in {} ms, closed {} ms after it opened ({} ms after the last \
         write); read after the close: {} SETTINGS ACKs, {} PING ACKs, {}; {}",
        server.name(),
        lifetime.saturating_sub(*after_written).as_millis(),
        lifetime.as_millis(),
        after_written.as_millis(),
        seen.settings_acks,
        seen.ping_acks,
        seen.goaway_summary(),
        window.summary()
    );
}

fn settings_flood(kind: Kind) {
    // A setting that changes nothing the connection has (no stream is open), but which the server must apply
    // and acknowledge.
    flood(kind, "settings_flood", |out, _| h2::write_settings(out, &[(h2::SETTINGS_INITIAL_WINDOW_SIZE, 65_535)]));
}

fn ping_flood(kind: Kind) {
    flood(kind, "ping_flood", |out, i| h2::write_ping(out, false, (i as u64).to_be_bytes()));
}

// ------------------------------------------------------------------------------------------------------------
// 4. A zero window that never opens
// ------------------------------------------------------------------------------------------------------------

const ZERO_WINDOW_STREAMS: u32 = 100;

fn zero_window(kind: Kind) {
    let server = Server::start(kind);
    let block = get_block(&server.normal);
    let (outcomes, window) = under_attack(&server, |_| {
        let mut conn = Attacker::connect(&server);
        // Every stream's window is 0 from the start, and the client never sends a WINDOW_UPDATE: the answers'
        // heads can go (HEADERS are not flow-controlled), not a byte of their bodies.
        let mut out = h2::PREFACE.to_vec();
        h2::write_settings(&mut out, &[(h2::SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
        for i in 0..ZERO_WINDOW_STREAMS {
            h2::write_headers(&mut out, 1 + 2 * i, h2::END_HEADERS | h2::END_STREAM, &block);
        }
        assert!(conn.send(&out, true), "{}: the preface and the requests", server.name());
        conn.wait_closed(true);
        let seen = conn.seen();
        let ok = seen.statuses.iter().filter(|(_, status)| *status == 200).count();
        assert_eq!(
            ok,
            ZERO_WINDOW_STREAMS as usize,
            "{}: every request answered 200 (the head): {:?}",
            server.name(),
            seen.statuses
        );
        assert_eq!(seen.data_bytes, 0, "{}: body bytes past a zero window", server.name());
        assert_eq!(
            seen.goaway_code(),
            Some(h2::NO_ERROR),
            "{}: the stall's GOAWAY: {}",
            server.name(),
            seen.goaway_summary()
        );
        // The stall deadline counts from the first answer waiting to be written (just after the requests), then
        // the grace.
        let after = conn.closed_after_last_byte();
        assert!(
            after >= IO_TIMEOUT && after <= IO_TIMEOUT + GOAWAY_GRACE + SLACK,
            "{}: closed {} ms after the requests (io timeout {} s, then {} s of grace)",
            server.name(),
            after.as_millis(),
            IO_TIMEOUT.as_secs(),
            GOAWAY_GRACE.as_secs()
        );
        (ok, seen.resets.len(), seen.goaway_summary(), after)
    });
    window.check(&server, "zero_window");
    let (heads, resets, goaway, after) = &outcomes[0];
    eprintln!(
        "FIGURE zero_window {}: {heads} heads of 200, 0 body bytes, {resets} RST_STREAM, {goaway}, closed {} ms after \
         the requests; {}",
        server.name(),
        after.as_millis(),
        window.summary()
    );
}

// ------------------------------------------------------------------------------------------------------------
// 5. More streams than the limit at once
// ------------------------------------------------------------------------------------------------------------

const STREAMS_AT_ONCE: u32 = 1_000;
/// serve's `--http2-max-streams` default, which the servers run with here.
const MAX_STREAMS: usize = 128;

fn too_many_streams(kind: Kind) {
    let server = Server::start(kind);
    let block = get_block(&server.normal);
    let (outcomes, window) = under_attack(&server, |_| {
        let mut conn = Attacker::connect(&server);
        let mut out = client_start();
        for i in 0..STREAMS_AT_ONCE {
            h2::write_headers(&mut out, 1 + 2 * i, h2::END_HEADERS | h2::END_STREAM, &block);
        }
        // All of it before reading anything.
        assert!(conn.send(&out, false), "{}: the preface and {STREAMS_AT_ONCE} requests", server.name());
        let deadline = Instant::now() + GIVE_UP;
        while conn.seen().statuses.len() + conn.seen().resets.len() < STREAMS_AT_ONCE as usize
            && conn.closed.is_none()
            && Instant::now() < deadline
        {
            conn.read_available();
            std::thread::sleep(Duration::from_millis(1));
        }
        let seen = conn.seen();
        let answered = seen.statuses.len();
        let refused = seen.resets.iter().filter(|(_, code)| *code == h2::REFUSED_STREAM).count();
        assert!(conn.closed.is_none(), "{}: a stream error, not a connection error: {seen:?}", server.name());
        assert_eq!(
            answered + refused,
            STREAMS_AT_ONCE as usize,
            "{}: every stream answered or refused (REFUSED_STREAM): resets {:?}",
            server.name(),
            seen.resets.iter().filter(|(_, code)| *code != h2::REFUSED_STREAM).collect::<Vec<_>>()
        );
        assert!(seen.statuses.iter().all(|(_, status)| *status == 200), "{}: {:?}", server.name(), seen.statuses);
        assert!(refused > 0, "{}: {STREAMS_AT_ONCE} streams at once, none refused", server.name());
        // Streams past the limit are refused, the connection goes on: one more request is answered.
        let next = 1 + 2 * STREAMS_AT_ONCE;
        out.clear();
        h2::write_headers(&mut out, next, h2::END_HEADERS | h2::END_STREAM, &block);
        assert!(conn.send(&out, true), "{}: a request after the refusals", server.name());
        let idle_from = Instant::now();
        conn.wait_closed(true);
        assert!(
            conn.seen().statuses.contains(&(next, 200)),
            "{}: the request after the refusals answered: {:?}",
            server.name(),
            conn.seen().statuses.last()
        );
        // Then the connection is idle, and the keep-alive deadline closes it.
        assert_idle_close(&server, "too_many_streams", &conn, idle_from);
        (answered, refused, conn.closed.expect("closed").saturating_duration_since(idle_from))
    });
    window.check(&server, "too_many_streams");
    let (answered, refused, idle) = &outcomes[0];
    eprintln!(
        "FIGURE too_many_streams {}: {STREAMS_AT_ONCE} HEADERS at once (limit {MAX_STREAMS}): {answered} answered 200, \
         {refused} REFUSED_STREAM; one more answered after; GOAWAY NO_ERROR and closed {} ms after going idle; {}",
        server.name(),
        idle.as_millis(),
        window.summary()
    );
}

// ------------------------------------------------------------------------------------------------------------
// 6. A header list past the limit
// ------------------------------------------------------------------------------------------------------------

/// One header of 2 × --max-header-bytes (over two frames: a frame holds 16,384 bytes), 200 small headers that
/// add up past the limit, and an HPACK bomb: one 4,000-byte field put in the dynamic table, then referenced
/// with one byte each, 100 times (400 KB decoded from 4 KB sent).
fn header_list(kind: Kind) {
    let server = Server::start(kind);
    let normal = get_block(&server.normal);
    let (outcomes, window) = under_attack(&server, |_| {
        let mut figures = Vec::new();
        let mut open = Vec::new();

        let mut big = normal.clone();
        hpack_literal(&mut big, b"x-big", &vec![b'b'; 2 * MAX_HEADER_BYTES]);
        let split = h2::DEFAULT_MAX_FRAME_SIZE as usize;
        let mut out = client_start();
        h2::write_headers(&mut out, 1, h2::END_STREAM, &big[..split]);
        h2::write_continuation(&mut out, 1, h2::END_HEADERS, &big[split..]);
        open.push(("one header of 2x the limit", out));

        let mut many = normal.clone();
        for i in 0..200 {
            hpack_literal(&mut many, format!("x-header-{i:03}").as_bytes(), b"value");
        }
        let mut out = client_start();
        h2::write_headers(&mut out, 1, h2::END_STREAM | h2::END_HEADERS, &many);
        open.push(("200 small headers", out));

        for (what, bytes) in open {
            let mut conn = Attacker::connect(&server);
            assert!(conn.send(&bytes, true), "{}: {what}", server.name());
            let deadline = Instant::now() + GIVE_UP;
            while conn.seen().statuses.is_empty() && conn.closed.is_none() && Instant::now() < deadline {
                conn.read_available();
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(conn.seen().statuses, [(1, 431)], "{} {what}: answered 431: {:?}", server.name(), conn.seen());
            // A stream error: the connection goes on.
            let mut out = Vec::new();
            h2::write_headers(&mut out, 3, h2::END_HEADERS | h2::END_STREAM, &normal);
            assert!(conn.send(&out, true), "{} {what}: a request after the 431", server.name());
            while conn.seen().statuses.len() < 2 && conn.closed.is_none() && Instant::now() < deadline {
                conn.read_available();
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(
                conn.seen().statuses,
                [(1, 431), (3, 200)],
                "{} {what}: the next request answered: {:?}",
                server.name(),
                conn.seen()
            );
            figures.push(format!("{what}: 431, resets {:?}, then 200 on the same connection", conn.seen().resets));
            // The idle close of this connection is the zero-window and stream checks' business; here it is shut.
            let _ = conn.stream.shutdown(Shutdown::Both);
        }

        let mut bomb = normal.clone();
        // A literal with incremental indexing and a new name (section 6.2.1): it enters the dynamic table at 62.
        bomb.push(0x40);
        hpack_str(&mut bomb, b"x-bomb");
        hpack_str(&mut bomb, &[b'x'; 4000]);
        bomb.extend(std::iter::repeat_n(0x80 | 62, 100));
        let mut out = client_start();
        h2::write_headers(&mut out, 1, h2::END_STREAM | h2::END_HEADERS, &bomb);
        let mut conn = Attacker::connect(&server);
        let _ = conn.send(&out, true);
        conn.wait_closed(true);
        assert_cut(&server, "header_list (HPACK bomb)", &conn, h2::ENHANCE_YOUR_CALM);
        figures.push(format!(
            "HPACK bomb ({} bytes sent): {} answers, {}, closed {} ms after its last byte",
            bomb.len(),
            conn.seen().statuses.len(),
            conn.seen().goaway_summary(),
            conn.closed_after_last_byte().as_millis()
        ));
        figures
    });
    window.check(&server, "header_list");
    eprintln!(
        "FIGURE header_list {}: {}; {} rounds; {}",
        server.name(),
        outcomes[0].join("; "),
        outcomes.len(),
        window.summary()
    );
}

// ------------------------------------------------------------------------------------------------------------
// 7. A truncated frame, then the socket shut
// ------------------------------------------------------------------------------------------------------------

fn truncated_frame(kind: Kind) {
    let server = Server::start(kind);
    let (outcomes, window) = under_attack(&server, |_| {
        let mut conn = Attacker::connect(&server);
        let mut out = client_start();
        // A HEADERS frame announcing 1,000 bytes, 10 of them sent, then the client's FIN.
        h2::write_header(&mut out, 1_000, h2::HEADERS, h2::END_HEADERS | h2::END_STREAM, 1);
        out.extend_from_slice(&[0x82; 10]);
        assert!(conn.send(&out, true), "{}: the truncated frame", server.name());
        conn.stream.shutdown(Shutdown::Write).expect("shut the client's sending side");
        conn.wait_closed(true);
        let after = conn.closed_after_last_byte();
        assert!(after < PROMPT, "{}: closed {} ms after the client's FIN", server.name(), after.as_millis());
        (conn.seen().goaway_summary(), conn.seen().frames, after)
    });
    window.check(&server, "truncated_frame");
    eprintln!(
        "FIGURE truncated_frame {}: {} connections, each: {} ({} frames read: the server's SETTINGS, its ACK of \
         ours, its WINDOW_UPDATE), closed {} ms after the FIN; {}",
        server.name(),
        outcomes.len(),
        outcomes[0].0,
        outcomes[0].1,
        spread(outcomes.iter().map(|o| o.2.as_millis())),
        window.summary()
    );
}

// ------------------------------------------------------------------------------------------------------------
// 8. Garbage after the preface
// ------------------------------------------------------------------------------------------------------------

/// xorshift64: reproducible noise, no dependency.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

fn garbage(kind: Kind) {
    let server = Server::start(kind);
    let (outcomes, window) = under_attack(&server, |round| {
        let mut figures = Vec::new();
        // Random bytes where the client's SETTINGS should be: the first 9 are read as a frame header. A length
        // past the 16,384 the server allows is a FRAME_SIZE_ERROR from the header alone; anything shorter is a
        // first frame that is not SETTINGS, a PROTOCOL_ERROR.
        let junk = noise(0x9e37_79b9_7f4a_7c15 ^ round as u64, 64 * 1024);
        let header = h2::FrameHeader::parse(&junk).expect("9 bytes");
        let expected =
            if header.length > h2::DEFAULT_MAX_FRAME_SIZE { h2::FRAME_SIZE_ERROR } else { h2::PROTOCOL_ERROR };
        let mut conn = Attacker::connect(&server);
        let _ = conn.send(&[&h2::PREFACE[..], &junk].concat(), true);
        conn.wait_closed(true);
        assert_cut(&server, "garbage (random bytes)", &conn, expected);
        figures.push(format!(
            "random bytes (first frame type {:#x}, length {}): {}",
            header.kind,
            header.length,
            conn.seen().goaway_summary()
        ));

        // A valid start, then a frame of a type no one defined announcing 2^24 - 1 bytes.
        let mut out = client_start();
        h2::write_header(&mut out, h2::MAX_FRAME_SIZE_LIMIT, 0xfa, 0xff, 0);
        out.extend_from_slice(&noise(round as u64, 1024));
        let mut conn = Attacker::connect(&server);
        let _ = conn.send(&out, true);
        conn.wait_closed(true);
        assert_cut(&server, "garbage (huge unknown frame)", &conn, h2::FRAME_SIZE_ERROR);
        figures.push(format!("unknown type 0xfa, length 2^24-1: {}", conn.seen().goaway_summary()));
        figures
    });
    window.check(&server, "garbage");
    eprintln!(
        "FIGURE garbage {}: {}; {} rounds; {}",
        server.name(),
        outcomes[0].join("; "),
        outcomes.len(),
        window.summary()
    );
}
