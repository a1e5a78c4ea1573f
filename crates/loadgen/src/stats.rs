//! What one worker thread counts. Plain fields owned by the thread (no atomics, no channels per request);
//! merged once at the end.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::handshake::{Handshake, Kind};

/// Latencies are recorded in microseconds, from 1 µs to 1 hour, 3 significant digits.
pub const LATENCY_MAX_US: u64 = 3_600_000_000;

pub fn new_histogram() -> Histogram<u64> {
    // Bounds are constants that hdrhistogram accepts; failure would be a programming error.
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).unwrap_or_else(|e| unreachable!("histogram bounds: {e}"))
}

/// Socket and protocol errors, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Errors {
    /// Connection attempts that failed (refused, unreachable, reset during connect).
    pub connect: u64,
    /// Reads that failed (reset, …).
    pub read: u64,
    /// Writes that failed (broken pipe, …).
    pub write: u64,
    /// Requests with no complete response within `--timeout`.
    pub timeout: u64,
    /// Responses that were not valid HTTP/1.1 (over HTTP/2: connection errors, the report's
    /// `http2.connection_errors`).
    pub parse: u64,
    /// Connections the server closed with a request outstanding; over HTTP/2 also streams the server reset or
    /// left unprocessed after a GOAWAY (the report's `http2` says which).
    pub closed: u64,
    /// Responses that failed an assertion (status, body, header…).
    pub assertion: u64,
    /// TLS handshakes that failed or timed out, and TLS records that failed after the handshake (by reason:
    /// the report's `tls.failures`). Reports older than the field read as 0.
    #[serde(default)]
    pub tls: u64,
}

impl Errors {
    pub fn total(&self) -> u64 {
        self.by_kind().iter().map(|(_, n)| n).sum()
    }

    /// Each count with its name, in report order (for text summaries and records).
    pub fn by_kind(&self) -> [(&'static str, u64); 8] {
        [
            ("connect", self.connect),
            ("read", self.read),
            ("write", self.write),
            ("timeout", self.timeout),
            ("parse", self.parse),
            ("closed", self.closed),
            ("assertion", self.assertion),
            ("tls", self.tls),
        ]
    }

    pub fn add(&mut self, other: &Errors) {
        self.connect += other.connect;
        self.read += other.read;
        self.write += other.write;
        self.timeout += other.timeout;
        self.parse += other.parse;
        self.closed += other.closed;
        self.assertion += other.assertion;
        self.tls += other.tls;
    }
}

/// Everything a worker measured in the measured window (warmup excluded).
#[derive(Debug, Clone)]
pub struct WorkerStats {
    /// Complete responses.
    pub responses: u64,
    /// Responses per status code.
    pub status: BTreeMap<u16, u64>,
    pub errors: Errors,
    /// Response bytes read (heads and bodies).
    pub bytes_read: u64,
    /// Request bytes written.
    pub bytes_written: u64,
    /// Connections opened again after a close (server `Connection: close`, timeout, error).
    pub reconnects: u64,
    /// Connections this worker was asked to keep open.
    pub connections_asked: u64,
    /// Of those, how many were established at least once.
    pub connections_established: u64,
    /// Connections that became ready for requests (TCP connected; with TLS, handshake done), first ones and
    /// reopened ones alike.
    pub connections_opened: u64,
    /// Requests still outstanding when the run ended (not counted as responses or errors).
    pub in_flight_at_end: u64,
    /// Open loop: requests whose send was later than their scheduled time by more than a millisecond.
    pub late_sends: u64,
    /// Open loop: requests the schedule called for.
    pub scheduled: u64,
    /// Open loop: sends due (in the warmup or the window) still waiting for a free connection when the window
    /// ended, so never sent. Each one's wait until the window's end is in `latency`, a lower bound of its
    /// latency.
    pub missed_sends: u64,
    /// Assertions checked (on every response or every Nth).
    pub assertions_checked: u64,
    /// Latency in µs: closed loop from the write; open loop from the intended send time, with the waits of
    /// `missed_sends` (to the window's end) as lower bounds.
    pub latency: Histogram<u64>,
    /// Open loop only: latency in µs from the actual write (what a closed-loop tool would report).
    pub latency_from_write: Option<Histogram<u64>>,
    /// The worker thread's CPU time over the measured window, µs.
    pub cpu_user_us: u64,
    pub cpu_sys_us: u64,
    /// The whole process's CPU time over the window, µs (recorded by worker 0 only): it includes threads no
    /// worker's own clock sees, such as io_uring's io-wq workers.
    pub process_cpu_us: Option<u64>,
    /// The CPU this worker was pinned to, if any.
    pub pinned_cpu: Option<usize>,
    /// `--log-requests`: this worker's logged responses, and how many its cap left out.
    pub request_log: Vec<crate::request_log::Record>,
    pub not_logged: u64,
    /// https only: the handshakes.
    pub tls: Option<TlsStats>,
    /// `--http2` only: the protocol's own events.
    pub http2: Option<Http2Counts>,
}

impl WorkerStats {
    pub fn new(open_loop: bool) -> Self {
        WorkerStats {
            responses: 0,
            status: BTreeMap::new(),
            errors: Errors::default(),
            bytes_read: 0,
            bytes_written: 0,
            reconnects: 0,
            connections_asked: 0,
            connections_established: 0,
            connections_opened: 0,
            in_flight_at_end: 0,
            late_sends: 0,
            scheduled: 0,
            missed_sends: 0,
            assertions_checked: 0,
            latency: new_histogram(),
            latency_from_write: open_loop.then(new_histogram),
            cpu_user_us: 0,
            cpu_sys_us: 0,
            process_cpu_us: None,
            pinned_cpu: None,
            request_log: Vec::new(),
            not_logged: 0,
            tls: None,
            http2: None,
        }
    }
}

/// What HTTP/2 did over a run, beyond responses: counts that add up across workers and reports alike.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Http2Counts {
    /// Per connection, the protocol it ended up speaking: `h2` once the server's SETTINGS arrived, or what it
    /// answered instead (`http/1.1` by ALPN or as an HTTP/1.1 answer to the h2c preface, `none`).
    pub negotiated: BTreeMap<String, u64>,
    pub streams_opened: u64,
    /// RST_STREAM REFUSED_STREAM from the server: not processed (more streams than it allows at once).
    pub refused: u64,
    /// Other RST_STREAMs from the server, per error code (`CANCEL`, `INTERNAL_ERROR`…).
    pub resets: BTreeMap<String, u64>,
    /// Streams we reset because the server broke the protocol on them (a malformed response, flow control).
    pub stream_errors: u64,
    /// Streams we cancelled (RST_STREAM CANCEL) after `--timeout`.
    pub cancelled: u64,
    /// Streams above a GOAWAY's last stream id: never processed.
    pub unprocessed: u64,
    /// GOAWAYs from the server, per error code (a graceful close sends two, both `NO_ERROR`).
    pub goaways: BTreeMap<String, u64>,
    /// Connections we ended with a GOAWAY because the server broke the protocol, per reason.
    pub connection_errors: BTreeMap<String, u64>,
    /// The server's SETTINGS as they stood last (None until one arrived).
    pub server_settings: Option<Http2Settings>,
    /// `--streams` was above the server's SETTINGS_MAX_CONCURRENT_STREAMS: each connection kept this many
    /// streams open instead (None: never capped).
    pub capped_at: Option<u32>,
}

/// The server's HTTP/2 SETTINGS (the RFC's initial values for those it did not send; None: unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Http2Settings {
    pub max_concurrent_streams: Option<u32>,
    pub initial_window_size: u32,
    pub max_frame_size: u32,
    pub max_header_list_size: Option<u32>,
    pub header_table_size: u32,
}

impl Http2Counts {
    pub fn add(&mut self, other: &Http2Counts) {
        for (mine, theirs) in [
            (&mut self.negotiated, &other.negotiated),
            (&mut self.resets, &other.resets),
            (&mut self.goaways, &other.goaways),
            (&mut self.connection_errors, &other.connection_errors),
        ] {
            for (key, n) in theirs {
                *mine.entry(key.clone()).or_insert(0) += n;
            }
        }
        self.streams_opened += other.streams_opened;
        self.refused += other.refused;
        self.stream_errors += other.stream_errors;
        self.cancelled += other.cancelled;
        self.unprocessed += other.unprocessed;
        self.server_settings = self.server_settings.or(other.server_settings);
        self.capped_at = match (self.capped_at, other.capped_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// What the TLS handshakes negotiated, how they went, and why the failed ones failed: counts that add up
/// across workers and reports alike.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TlsCounts {
    /// Handshakes per negotiated protocol version (`TLSv1.3`): one key when every connection agreed.
    pub versions: BTreeMap<String, u64>,
    /// Per cipher suite (`TLS13_AES_128_GCM_SHA256`).
    pub cipher_suites: BTreeMap<String, u64>,
    /// Per key-exchange group (`X25519`; `none` for a resumed TLS 1.2 session, which exchanges no key).
    pub groups: BTreeMap<String, u64>,
    /// Per ALPN protocol the server chose (`http/1.1`, or `none`).
    pub alpn: BTreeMap<String, u64>,
    pub handshakes: Handshakes,
    /// Failed handshakes (and records) per reason: `invalid certificate: UnknownIssuer`, `alert received:
    /// HandshakeFailure`, `handshake timed out`…
    pub failures: BTreeMap<String, u64>,
}

/// Finished handshakes by kind (rustls's `handshake_kind`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Handshakes {
    pub full: u64,
    /// Full, after the server asked for another key-exchange group (a second round trip).
    pub full_with_hello_retry: u64,
    pub resumed: u64,
}

impl TlsCounts {
    pub fn add(&mut self, other: &TlsCounts) {
        for (mine, theirs) in [
            (&mut self.versions, &other.versions),
            (&mut self.cipher_suites, &other.cipher_suites),
            (&mut self.groups, &other.groups),
            (&mut self.alpn, &other.alpn),
            (&mut self.failures, &other.failures),
        ] {
            for (key, n) in theirs {
                *mine.entry(key.clone()).or_insert(0) += n;
            }
        }
        self.handshakes.full += other.handshakes.full;
        self.handshakes.full_with_hello_retry += other.handshakes.full_with_hello_retry;
        self.handshakes.resumed += other.handshakes.resumed;
    }

    /// All handshakes that finished.
    pub fn finished(&self) -> u64 {
        self.handshakes.full + self.handshakes.full_with_hello_retry + self.handshakes.resumed
    }
}

/// A worker's TLS counts and its handshake latencies.
#[derive(Debug, Clone)]
pub struct TlsStats {
    pub counts: TlsCounts,
    /// µs from the connect (the socket's `connect()`) to the handshake's end: TCP connect plus TLS handshake.
    pub handshake_latency: Histogram<u64>,
}

impl Default for TlsStats {
    fn default() -> Self {
        TlsStats { counts: TlsCounts::default(), handshake_latency: new_histogram() }
    }
}

impl TlsStats {
    /// One finished handshake, `us` after its connect began.
    pub fn record(&mut self, h: &Handshake, us: u64) {
        let c = &mut self.counts;
        for (map, key) in [
            (&mut c.versions, h.version),
            (&mut c.cipher_suites, h.cipher_suite),
            (&mut c.groups, h.group),
            (&mut c.alpn, h.alpn),
        ] {
            count(map, key);
        }
        match h.kind {
            Kind::Full => c.handshakes.full += 1,
            Kind::FullWithHelloRetry => c.handshakes.full_with_hello_retry += 1,
            Kind::Resumed => c.handshakes.resumed += 1,
        }
        self.handshake_latency.saturating_record(us.max(1));
    }

    pub fn failed(&mut self, reason: &str) {
        count(&mut self.counts.failures, reason);
    }
}

/// Adds one under `key`, allocating the key only the first time it is seen.
pub fn count(map: &mut BTreeMap<String, u64>, key: &str) {
    match map.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            map.insert(key.to_string(), 1);
        }
    }
}

/// CPU time of the calling thread so far, (user µs, system µs), from /proc/thread-self/stat (no unsafe
/// getrusage binding needed; same clock-tick resolution).
pub fn thread_cpu_us() -> (u64, u64) {
    stat_cpu_us("/proc/thread-self/stat")
}

/// CPU time of the whole process so far (every thread, live or exited), user + system µs.
pub fn process_cpu_us() -> u64 {
    let (user, sys) = stat_cpu_us("/proc/self/stat");
    user + sys
}

/// utime and stime of a /proc/…/stat file, µs; zeros when it cannot be read.
fn stat_cpu_us(path: &str) -> (u64, u64) {
    let Some(stat) = oskit::procfs::read_stat(path) else { return (0, 0) };
    // Multiplied before dividing, so a tick rate that does not divide a million (1024 on some ABIs) stays exact.
    let hz = oskit::procfs::clock_ticks_per_second();
    (stat.user_ticks * 1_000_000 / hz, stat.system_ticks * 1_000_000 / hz)
}
