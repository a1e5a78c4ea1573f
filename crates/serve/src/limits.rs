use std::path::PathBuf;
use std::time::Duration;

use crate::TlsSettings;

/// Serving limits and worker count shared by every server. Flattened into each binary's config; the env var of
/// each field is `<BINARY PREFIX>_<FIELD>` (see [`crate::parse_or_exit`]), e.g. `FLIGHT_WORKERS`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Worker threads, each with its own runtime and SO_REUSEPORT listener. Default: the CPUs this process may
    /// run on (its affinity mask), so `taskset -c 0` gives one.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub workers: Option<u16>,
    /// Seconds a client has to send a complete request head.
    #[arg(long, default_value_t = 10)]
    pub header_timeout: u64,
    /// Seconds an idle keep-alive connection (no request in flight, no bytes arriving) stays open.
    #[arg(long, default_value_t = 5)]
    pub keep_alive_timeout: u64,
    /// Seconds a request in flight may go without a byte moving in either direction (a stalled body upload,
    /// a client that stops reading the response, or a handler that never answers) before it is cut.
    #[arg(long, default_value_t = 30)]
    pub io_timeout: u64,
    /// Largest request head (request line and headers) in bytes; larger gets 431. At least 8192.
    #[arg(long, default_value_t = 16 * 1024, value_parser = clap::value_parser!(u32).range(8192..=1024 * 1024))]
    pub max_header_bytes: u32,
    /// Largest request body in bytes; larger gets 413 (before reading, when Content-Length says so).
    /// Default: 1048576. An Option, so a server with a limit of its own can tell when it was given.
    #[arg(long)]
    pub body_limit: Option<u64>,
    /// Bytes per second a request (head and body) must average over each window while it arrives; slower
    /// gets 408 and a close. 0 turns the check off.
    #[arg(long, default_value_t = 500)]
    pub min_data_rate: u64,
    /// Seconds over which the minimum data rate is averaged (at least 1).
    #[arg(long, default_value_t = 5)]
    pub min_data_rate_window: u64,
    /// Seconds to let in-flight requests finish after SIGTERM/SIGINT before connections are cut.
    #[arg(long, default_value_t = 10)]
    pub shutdown_timeout: u64,
    /// PEM certificate chain (server certificate first): serve HTTPS instead of HTTP. Needs --tls-key.
    #[arg(long, value_name = "PATH", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key matching --tls-cert. Needs --tls-cert.
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// With TLS: issue session tickets (stateless resumption), on or off.
    #[arg(long, default_value = "on", value_name = "on|off", value_parser = on_off, action = clap::ArgAction::Set)]
    pub tls_tickets: bool,
    /// With TLS: keep a session cache (stateful resumption), on or off.
    #[arg(long, default_value = "on", value_name = "on|off", value_parser = on_off, action = clap::ArgAction::Set)]
    pub tls_session_cache: bool,
    /// HTTP/2, on or off. On: with TLS, ALPN offers h2 before http/1.1; in cleartext, a connection that opens
    /// with the HTTP/2 preface (prior knowledge, h2c) speaks HTTP/2 and any other speaks HTTP/1.1, on one port.
    /// Off: HTTP/1.1 only (ALPN offers http/1.1 alone, so a client offering only h2 gets a TLS alert).
    #[arg(long, default_value = "on", value_name = "on|off", value_parser = on_off, action = clap::ArgAction::Set)]
    pub http2: bool,
    /// HTTP/2: streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS); a client
    /// that opens more gets them refused.
    #[arg(long, default_value_t = Http2Limits::DEFAULT.max_streams, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub http2_max_streams: u32,
    /// HTTP/2: each stream's initial flow-control window in bytes (how much of a request body a client may
    /// send before the handler reads it).
    #[arg(long, default_value_t = Http2Limits::DEFAULT.stream_window, value_parser = clap::value_parser!(u32).range(65_535..=WINDOW_MAX))]
    pub http2_stream_window: u32,
    /// HTTP/2: the connection's flow-control window in bytes (request body bytes buffered across all its
    /// streams).
    #[arg(long, default_value_t = Http2Limits::DEFAULT.connection_window, value_parser = clap::value_parser!(u32).range(65_535..=WINDOW_MAX))]
    pub http2_connection_window: u32,
    /// HTTP/2: seconds between keep-alive PINGs on a connection that has been quiet that long; 0 sends none.
    #[arg(long, default_value_t = Http2Limits::DEFAULT.keep_alive_interval.as_secs())]
    pub http2_keep_alive_interval: u64,
    /// HTTP/2: seconds a keep-alive PING may go unanswered before the connection is closed.
    #[arg(long, default_value_t = Http2Limits::DEFAULT.keep_alive_timeout.as_secs())]
    pub http2_keep_alive_timeout: u64,
    /// HTTP/2: streams a client may open and reset before the server has processed them, at once, before
    /// the connection is closed with GOAWAY ENHANCE_YOUR_CALM (the bound on a rapid-reset attack).
    #[arg(long, default_value_t = Http2Limits::DEFAULT.max_pending_resets, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub http2_max_pending_resets: u32,
}

/// The largest flow-control window HTTP/2 allows (2^31 - 1).
const WINDOW_MAX: i64 = (1 << 31) - 1;

fn on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("{other:?} is neither on nor off")),
    }
}

impl ServeArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            workers: self.workers.map(usize::from).unwrap_or_else(default_workers),
            header_timeout: Duration::from_secs(self.header_timeout.max(1)),
            keep_alive_timeout: Duration::from_secs(self.keep_alive_timeout.max(1)),
            io_timeout: Duration::from_secs(self.io_timeout.max(1)),
            max_header_bytes: self.max_header_bytes as usize,
            body_limit: self.body_limit.unwrap_or(DEFAULT_BODY_LIMIT),
            min_data_rate: self.min_data_rate,
            min_data_rate_window: Duration::from_secs(self.min_data_rate_window.max(1)),
            shutdown_timeout: Duration::from_secs(self.shutdown_timeout),
            peer_addr: false,
            tls: self.tls(),
            http2: self.http2.then(|| Http2Limits {
                max_streams: self.http2_max_streams,
                stream_window: self.http2_stream_window,
                connection_window: self.http2_connection_window,
                keep_alive_interval: Duration::from_secs(self.http2_keep_alive_interval),
                keep_alive_timeout: Duration::from_secs(self.http2_keep_alive_timeout.max(1)),
                max_pending_resets: self.http2_max_pending_resets,
            }),
        }
    }

    fn tls(&self) -> Option<TlsSettings> {
        let (cert, key) = (self.tls_cert.clone()?, self.tls_key.clone()?);
        Some(TlsSettings { cert, key, tickets: self.tls_tickets, session_cache: self.tls_session_cache })
    }
}

/// `--body-limit` when not given.
const DEFAULT_BODY_LIMIT: u64 = 1024 * 1024;

/// Resolved limits, as the server uses them. Tests build these directly.
#[derive(Debug, Clone)]
pub struct Limits {
    pub workers: usize,
    pub header_timeout: Duration,
    pub keep_alive_timeout: Duration,
    pub io_timeout: Duration,
    pub max_header_bytes: usize,
    pub body_limit: u64,
    /// Bytes per second a request must average over each `min_data_rate_window` while it arrives (0: off).
    pub min_data_rate: u64,
    pub min_data_rate_window: Duration,
    pub shutdown_timeout: Duration,
    /// Put the client's socket address in each request's extensions as [`crate::PeerAddr`]. Off unless a
    /// server needs it (rate limiting, request logs): it costs an allocation per request.
    pub peer_addr: bool,
    /// Serve HTTPS with these files (loaded and checked when the server starts); None: plain HTTP.
    pub tls: Option<TlsSettings>,
    /// Serve HTTP/2 beside HTTP/1.1 with these limits; None: HTTP/1.1 only. The header list is bounded by
    /// `max_header_bytes`, as an HTTP/1.1 head is, and the idle, header and shutdown deadlines apply as they
    /// do to HTTP/1.1 (http2.rs says how).
    pub http2: Option<Http2Limits>,
}

/// HTTP/2's own limits (`--http2-*`). The defaults are nginx's and hyper's where those agree, and a
/// benchmark's needs where they do not: 128 streams (nginx's `http2_max_concurrent_streams`; hyper's 200),
/// 1 MiB windows (hyper's; h2's 64 KiB would stall a 1 MiB upload for a round trip per 64 KiB), a PING after
/// 20 s of quiet answered within 20 s (hyper's timeout; its interval is off by default, which leaves a dead
/// peer's connection open until the idle deadline), and 20 pending resets (h2's own default, the bound its
/// authors chose for CVE-2023-44487).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http2Limits {
    pub max_streams: u32,
    pub stream_window: u32,
    pub connection_window: u32,
    /// Zero: no keep-alive PING.
    pub keep_alive_interval: Duration,
    pub keep_alive_timeout: Duration,
    pub max_pending_resets: u32,
}

impl Http2Limits {
    pub const DEFAULT: Http2Limits = Http2Limits {
        max_streams: 128,
        stream_window: 1024 * 1024,
        connection_window: 1024 * 1024,
        keep_alive_interval: Duration::from_secs(20),
        keep_alive_timeout: Duration::from_secs(20),
        max_pending_resets: 20,
    };
}

impl Default for Http2Limits {
    fn default() -> Self {
        Http2Limits::DEFAULT
    }
}

impl Limits {
    /// `https` or `http`, for banners and URLs.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            workers: default_workers(),
            header_timeout: Duration::from_secs(10),
            keep_alive_timeout: Duration::from_secs(5),
            io_timeout: Duration::from_secs(30),
            max_header_bytes: 16 * 1024,
            body_limit: DEFAULT_BODY_LIMIT,
            min_data_rate: 500,
            min_data_rate_window: Duration::from_secs(5),
            shutdown_timeout: Duration::from_secs(10),
            peer_addr: false,
            tls: None,
            http2: Some(Http2Limits::DEFAULT),
        }
    }
}

/// std's available_parallelism reads the affinity mask (and cgroup quota) on Linux, which is what `taskset`
/// and container CPU limits set.
fn default_workers() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
