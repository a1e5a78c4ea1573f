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
}

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
        }
    }
}

/// std's available_parallelism reads the affinity mask (and cgroup quota) on Linux, which is what `taskset`
/// and container CPU limits set.
fn default_workers() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
