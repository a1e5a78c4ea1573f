//! What a run or a capacity search was asked to do, as plain values: durations, rates and CPU lists already
//! parsed, the target already resolved. cli.rs builds these from the command line (and checks that the flags
//! fit together); the rest of loadgen reads only these, so nothing below the command line knows about clap,
//! and a library caller or a test can build a run without going through flags.
//!
//! What still needs files read (request bodies, template values, replays, expected bodies) stays as given
//! here and is read where it is used: `source` and `assertions`, which say which flag a bad file came from.

use std::path::PathBuf;
use std::time::Duration;

use crate::rate::{Rate, Schedule};
use crate::target::Target;

/// One run: the shape of the load, what is sent, what is checked, and where the results go.
#[derive(Debug, Clone)]
pub struct RunSettings {
    pub target: Target,
    /// Worker threads asked for (the run uses no more than `connections`).
    pub threads: usize,
    pub connections: usize,
    /// The measured window, after `warmup`.
    pub duration: Duration,
    pub warmup: Duration,
    /// Per request: on expiry the connection is closed, reopened and a timeout counted.
    pub timeout: Duration,
    /// Requests in flight per connection: the HTTP/1.1 pipelining depth (1: none), or with `http2` the
    /// concurrent streams asked for (`--streams`).
    pub pipeline: usize,
    /// Speak HTTP/2 (h2 by ALPN over TLS, h2c by prior knowledge in cleartext).
    pub http2: bool,
    /// CPUs the worker threads are pinned to, round-robin.
    pub pins: Option<Vec<usize>>,
    pub engine: EngineChoice,
    /// Open loop: the total rate over all threads (None: closed loop).
    pub rate: Option<Rate>,
    /// How long a ramping `rate` takes, from the start of the measured window.
    pub ramp: Option<Duration>,
    /// Kept even in closed loop: a capacity search sets the rate of each step but keeps the schedule asked.
    pub schedule: Schedule,
    /// Seeds random template draws and the Poisson schedule (same seed, same sequence).
    pub seed: u64,
    /// Close each connection after this many responses and open a new one (connection churn); the last
    /// request on a connection carries `Connection: close`. None: keep-alive for as long as the server does.
    pub requests_per_conn: Option<u64>,
    /// How to speak TLS: Some exactly when the target is `https://`.
    pub tls: Option<TlsSettings>,
    pub requests: RequestSettings,
    pub expect: ExpectSettings,
    pub output: OutputSettings,
    /// Exit 0 even when the run failed its checks.
    pub allow_failures: bool,
}

/// What each request is, as given on the command line; `source` renders it and reads the files it names.
#[derive(Debug, Clone)]
pub struct RequestSettings {
    pub method: String,
    /// Extra headers, `Name: value`.
    pub headers: Vec<String>,
    pub body_file: Option<PathBuf>,
    /// A path template replacing the URL's path.
    pub path: Option<String>,
    /// Template variables: `NAME=@FILE` or `NAME=a,b,c`.
    pub vars: Vec<String>,
    pub pick: Pick,
    /// Raw requests to replay instead of the URL's path.
    pub replay: Option<PathBuf>,
}

/// What every response (or every `every`th) must be; `assertions` parses and checks it.
#[derive(Debug, Clone)]
pub struct ExpectSettings {
    /// Allowed statuses (empty: any).
    pub status: Vec<u16>,
    pub body: Option<String>,
    pub body_file: Option<PathBuf>,
    pub contains: Option<String>,
    /// SHA-256 of the body, hex.
    pub sha256: Option<String>,
    pub length: Option<u64>,
    /// `Name` or `Name: value`.
    pub headers: Vec<String>,
    pub every: u64,
}

/// Where the run's results go besides the report loadgen returns.
#[derive(Debug, Clone)]
pub struct OutputSettings {
    /// The JSON report (`-`: stdout).
    pub json: Option<PathBuf>,
    /// One JSON line per second (`-`: stdout).
    pub jsonl: Option<PathBuf>,
    /// The latency distribution table in the text.
    pub latency: bool,
    /// The live progress line, which is shown only on a terminal anyway.
    pub progress: bool,
    pub request_log: Option<RequestLogSettings>,
    pub hdr_log: Option<HdrLogSettings>,
}

/// `--log-requests`: one line per response of the measured window.
#[derive(Debug, Clone)]
pub struct RequestLogSettings {
    pub path: PathBuf,
    /// Keep every Nth response.
    pub every: u64,
    /// At most this many over all threads (they are held in memory until the run ends).
    pub max: u64,
}

/// `--hdr-log`: the measured window's latency as an HdrHistogram interval log (see `hdr_log`).
#[derive(Debug, Clone)]
pub struct HdrLogSettings {
    pub path: PathBuf,
    /// One histogram per interval: a whole number of milliseconds, the log's timestamp resolution.
    pub interval: Duration,
}

/// TLS for an `https://` target: whom to trust and what to offer. `tls_config` turns it into rustls's client
/// configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub trust: Trust,
    /// Resume sessions (TLS 1.3 tickets, TLS 1.2 tickets or ids) from an in-memory store per worker; off: a
    /// full handshake on every new connection.
    pub resume: bool,
    /// Offer exactly this version (None: 1.3 and 1.2).
    pub version: Option<TlsVersion>,
    /// Cipher suites to offer, by rustls's names (`TLS13_AES_128_GCM_SHA256`); empty: rustls's defaults.
    pub ciphers: Vec<String>,
    /// Key-exchange groups to offer, by name (`x25519`, `secp256r1`), the first with a key share; empty:
    /// X25519, then P-256 (see `tls_config`).
    pub groups: Vec<String>,
}

/// How the server's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Chains ending at a CA certificate in this PEM file, valid for the URL's host.
    CaFile(PathBuf),
    /// Any certificate (the handshake's signature is still verified, so the handshake costs what it costs).
    Insecure,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    V1_2,
    V1_3,
}

impl TlsVersion {
    /// As the flag takes it: `1.2`, `1.3`.
    pub fn name(self) -> &'static str {
        match self {
            TlsVersion::V1_2 => "1.2",
            TlsVersion::V1_3 => "1.3",
        }
    }
}

/// A capacity search: the latency objective, how the rate is searched, and the run each step repeats.
#[derive(Debug, Clone)]
pub struct CapacitySettings {
    /// The objective: at least one of these is set.
    pub p99: Option<Duration>,
    pub p999: Option<Duration>,
    /// The first rate tried, requests per second.
    pub start: f64,
    /// Where the doubling stops.
    pub max: f64,
    /// Bisect until the bracket is within this many percent.
    pub precision: f64,
    /// How many times a failed step is run again at the same rate.
    pub retries: u32,
    /// Every step's run, without a rate (the search sets it), per-second lines or a JSON report of its own.
    pub run: RunSettings,
}

/// The I/O engine asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineChoice {
    /// io_uring where the kernel allows it, else epoll.
    Auto,
    Uring,
    Epoll,
}

/// How template values are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pick {
    Random,
    RoundRobin,
}
