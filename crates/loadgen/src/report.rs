//! The run's report: built from the workers' stats, written as text (wrk-like) or JSON, and merged across
//! runs. Histograms travel inside the JSON (HDR V2 + deflate, base64), so `loadgen merge` is exact.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

use crate::rate::Rate;
use crate::settings::{RunSettings, Trust};
use crate::stats::{Errors, Http2Counts, TlsCounts, TlsStats, WorkerStats};

/// Bumped when a field changes meaning; readers refuse other versions.
pub const SCHEMA: &str = "loadgen-report/1";

/// A loader thread busier than this over the window was probably the bottleneck itself.
pub const SATURATED_PCT: f64 = 90.0;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub schema: String,
    pub loadgen_version: String,
    /// Start of the measured window, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// The command line as given.
    pub command: Vec<String>,
    pub target: String,
    pub config: RunConfig,
    /// Measured window, seconds (warmup excluded).
    pub duration_s: f64,
    /// Complete responses in the window (any status).
    pub responses: u64,
    pub req_per_s: f64,
    /// Responses per status code.
    pub status: BTreeMap<u16, u64>,
    /// Responses with a status outside 200–399.
    pub non_2xx_3xx: u64,
    pub errors: Errors,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub connections: Connections,
    pub reconnects: u64,
    /// Requests outstanding when the run ended: neither responses nor errors, reported so nothing hides.
    pub in_flight_at_end: u64,
    pub open_loop: Option<OpenLoop>,
    pub assertions: Assertions,
    /// Closed loop: from the write (uncorrected). Open loop: from the intended send time (corrected), the
    /// sends never sent included with their waits to the window's end (`open_loop.missed_sends`, lower
    /// bounds), so `count` is responses plus those.
    pub latency: Latency,
    /// Open loop only: from the actual write.
    pub latency_from_write: Option<Latency>,
    pub cpu: Cpu,
    /// How many reports were merged into this one (1 for a single run).
    pub merged_from: u64,
    /// https only (null for http): what the handshakes negotiated, how many were full or resumed, their
    /// latency, and why the failed ones failed.
    #[serde(default)]
    pub tls: Option<Tls>,
    /// `--http2` only (null otherwise): what each connection spoke, streams opened, refused, reset and
    /// cancelled, the GOAWAYs and connection errors by code, the server's SETTINGS, and whether `--streams` was
    /// capped by them.
    #[serde(default)]
    pub http2: Option<Http2Counts>,
}

/// The TLS side of a run: counts (see [`TlsCounts`]) and the handshake latency.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Tls {
    #[serde(flatten)]
    pub counts: TlsCounts,
    /// From each connection's `connect()` to the end of its TLS handshake (TCP connect + handshake, the
    /// server's share included), in µs; apart from the request latency, which starts at the write.
    pub handshake_latency: Latency,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunConfig {
    pub threads: u32,
    pub connections: u32,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub timeout_ms: u64,
    pub method: String,
    pub pipeline: u32,
    /// "closed" or "open".
    pub mode: String,
    /// Open loop: requests per second (with a ramp: where it ends).
    pub rate: Option<f64>,
    /// With a ramp (`-R START:END --ramp D`): the rate it starts from, and how long it takes (seconds).
    #[serde(default)]
    pub rate_start: Option<f64>,
    #[serde(default)]
    pub ramp_s: Option<f64>,
    pub schedule: Option<String>,
    /// What requests were sent: "url", "template …" or "replay FILE (N requests)".
    pub source: String,
    /// CPUs the threads were pinned to, in thread order.
    pub pin: Option<Vec<usize>>,
    /// The I/O engine: "uring" or "epoll" (merged from both: "mixed"). Reports older than the field read as "epoll".
    #[serde(default = "epoll_engine")]
    pub engine: String,
    /// `--requests-per-conn`: each connection closed after this many responses (null: keep-alive).
    #[serde(default)]
    pub requests_per_conn: Option<u64>,
    /// https only (null for http): what was trusted and offered.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// `--http2`: HTTP/2 (h2 over TLS, h2c in cleartext), with `pipeline` the streams per connection asked for.
    /// Reports older than the field read as false.
    #[serde(default)]
    pub http2: bool,
}

/// The TLS flags of a run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TlsConfig {
    /// `cacert PATH` or `insecure`.
    pub trust: String,
    /// Session resumption (`--tls-resume`).
    pub resume: bool,
    /// The one version offered (`1.2`, `1.3`), or null for both.
    pub version: Option<String>,
    /// Cipher suites asked for by `--tls-cipher` (empty: rustls's defaults).
    pub cipher_suites: Vec<String>,
    /// Key-exchange groups asked for by `--tls-group` (empty: X25519, then P-256).
    pub groups: Vec<String>,
}

fn epoll_engine() -> String {
    "epoll".to_string()
}

impl RunConfig {
    /// How a run was asked for (`settings`) and started: `threads` threads sending `source` on `engine`.
    pub fn new(settings: &RunSettings, threads: usize, source: String, engine: &str) -> RunConfig {
        let rate = settings.rate;
        let ramp = rate.filter(|r| r.is_ramp());
        RunConfig {
            threads: threads as u32,
            connections: settings.connections as u32,
            duration_s: settings.duration.as_secs_f64(),
            warmup_s: settings.warmup.as_secs_f64(),
            timeout_ms: settings.timeout.as_millis() as u64,
            method: settings.requests.method.to_ascii_uppercase(),
            pipeline: settings.pipeline as u32,
            mode: if rate.is_some() { "open" } else { "closed" }.to_string(),
            rate: rate.map(|r| r.end),
            rate_start: ramp.map(|r| r.start),
            ramp_s: ramp.and(settings.ramp).map(|d| d.as_secs_f64()),
            schedule: rate.map(|_| settings.schedule.name().to_string()),
            source,
            pin: settings.pins.as_ref().map(|p| (0..threads).map(|i| p[i % p.len()]).collect()),
            engine: engine.to_string(),
            requests_per_conn: settings.requests_per_conn,
            tls: settings.tls.as_ref().map(|tls| TlsConfig {
                trust: match &tls.trust {
                    Trust::CaFile(path) => format!("cacert {}", path.display()),
                    Trust::Insecure => "insecure".to_string(),
                },
                resume: tls.resume,
                version: tls.version.map(|v| v.name().to_string()),
                cipher_suites: tls.ciphers.clone(),
                groups: tls.groups.clone(),
            }),
            http2: settings.http2,
        }
    }
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Connections {
    pub asked: u64,
    pub established: u64,
    /// Asked but never established.
    pub failed: u64,
    /// Connections that became ready for requests in the window (TCP connected; with TLS, handshake done),
    /// reopened ones included: with `--requests-per-conn N`, about responses / N.
    #[serde(default)]
    pub opened: u64,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct OpenLoop {
    /// The rate asked for, requests per second (with a ramp: its mean over the window).
    pub target_rate: f64,
    pub achieved_rate: f64,
    /// Requests the schedule called for in the window.
    pub scheduled: u64,
    /// Requests sent more than 1 ms after their scheduled time (they waited for a free connection, or the
    /// loader was late).
    pub late_sends: u64,
    /// Sends due (in the warmup or the window) still waiting for a free connection when the window ended, so
    /// never sent; each one's wait to the end is in `latency` as a lower bound.
    pub missed_sends: u64,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Assertions {
    pub checked: u64,
    pub failed: u64,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Latency {
    /// True when measured from the intended send time (no coordinated omission).
    pub corrected: bool,
    pub count: u64,
    pub min_us: u64,
    pub mean_us: f64,
    pub stdev_us: f64,
    pub p50_us: u64,
    pub p75_us: u64,
    pub p90_us: u64,
    /// Absent in reports written before it was kept (read as 0).
    #[serde(default)]
    pub p95_us: u64,
    pub p99_us: u64,
    pub p99_9_us: u64,
    pub p99_99_us: u64,
    pub max_us: u64,
    /// The whole histogram, HDR V2 with deflate, base64: what `merge` adds up.
    pub histogram: String,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Cpu {
    pub threads: Vec<ThreadCpu>,
    /// The worker threads' CPU over the window, summed.
    pub total_us: u64,
    /// The whole process's CPU over the window: the workers plus anything else the process ran (the main
    /// thread, io_uring's io-wq workers if the kernel started any). Older reports read as `total_us`.
    #[serde(default)]
    pub process_us: u64,
    /// Loader CPU per response (the larger of `total_us` and `process_us`): the loader's own efficiency.
    pub us_per_response: f64,
    /// Responses per loader CPU-second.
    pub responses_per_cpu_s: f64,
    /// Some thread was busier than 90% of the window: the loader may have been the bottleneck.
    pub saturated: bool,
}

impl Cpu {
    /// The loader's CPU from its threads' and the whole process's (`process_us`, read as at least the
    /// threads' sum: both clocks tick every 10 ms, so the process's can read a little below it), and what
    /// that cost per response.
    pub fn new(threads: Vec<ThreadCpu>, process_us: u64, responses: u64) -> Cpu {
        let total_us: u64 = threads.iter().map(|t| t.user_us + t.sys_us).sum();
        let process_us = process_us.max(total_us);
        Cpu {
            saturated: threads.iter().any(|t| t.busy_pct > SATURATED_PCT),
            threads,
            total_us,
            process_us,
            us_per_response: if responses > 0 { process_us as f64 / responses as f64 } else { 0.0 },
            responses_per_cpu_s: if process_us > 0 { responses as f64 / (process_us as f64 / 1e6) } else { 0.0 },
        }
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ThreadCpu {
    pub cpu: Option<usize>,
    pub user_us: u64,
    pub sys_us: u64,
    pub busy_pct: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("histogram could not be encoded: {0}")]
    Encode(String),
    #[error("histogram could not be decoded: {0}")]
    Decode(String),
    #[error("report schema {found:?} is not {SCHEMA:?}")]
    Schema { found: String },
    #[error("reports disagree on {0}; they cannot be merged")]
    Mismatch(&'static str),
}

pub fn encode_histogram(h: &Histogram<u64>) -> Result<String, ReportError> {
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut buf).map_err(|e| ReportError::Encode(format!("{e:?}")))?;
    Ok(STANDARD.encode(buf))
}

pub fn decode_histogram(encoded: &str) -> Result<Histogram<u64>, ReportError> {
    let raw = STANDARD.decode(encoded).map_err(|e| ReportError::Decode(e.to_string()))?;
    Deserializer::new().deserialize(&mut raw.as_slice()).map_err(|e| ReportError::Decode(format!("{e:?}")))
}

impl Latency {
    pub fn from_histogram(h: &Histogram<u64>, corrected: bool) -> Result<Latency, ReportError> {
        let empty = h.is_empty();
        let q = |q: f64| if empty { 0 } else { h.value_at_quantile(q) };
        Ok(Latency {
            corrected,
            count: h.len(),
            min_us: if empty { 0 } else { h.min() },
            mean_us: if empty { 0.0 } else { h.mean() },
            stdev_us: if empty { 0.0 } else { h.stdev() },
            p50_us: q(0.50),
            p75_us: q(0.75),
            p90_us: q(0.90),
            p95_us: q(0.95),
            p99_us: q(0.99),
            p99_9_us: q(0.999),
            p99_99_us: q(0.9999),
            max_us: if empty { 0 } else { h.max() },
            histogram: encode_histogram(h)?,
        })
    }
}

/// What the run was, for the report (everything but the measurements).
#[derive(Debug, Clone)]
pub struct RunMeta {
    pub command: Vec<String>,
    pub target: String,
    pub config: RunConfig,
    pub started_unix_ms: u64,
    pub duration_s: f64,
}

impl Report {
    /// Adds up the workers' stats.
    pub fn from_workers(meta: RunMeta, workers: &[WorkerStats]) -> Result<Report, ReportError> {
        let open_loop = meta.config.rate.is_some();
        let sum = Sum::of(workers, open_loop)?;
        let window_us = (meta.duration_s * 1e6).max(1.0);
        let threads = workers.iter().map(|w| ThreadCpu::of(w, window_us)).collect();
        let process_us = workers.iter().filter_map(|w| w.process_cpu_us).sum::<u64>();
        let s = sum.stats;
        let non_2xx_3xx = s.status.iter().filter(|(c, _)| !(200..400).contains(*c)).map(|(_, n)| n).sum();
        let req_per_s = s.responses as f64 / meta.duration_s.max(1e-9);
        Ok(Report {
            schema: SCHEMA.to_string(),
            loadgen_version: env!("CARGO_PKG_VERSION").to_string(),
            started_unix_ms: meta.started_unix_ms,
            command: meta.command,
            target: meta.target,
            open_loop: meta.config.rate.map(|end| OpenLoop {
                target_rate: target_rate(end, &meta.config, meta.duration_s),
                achieved_rate: req_per_s,
                scheduled: s.scheduled,
                late_sends: s.late_sends,
                missed_sends: s.missed_sends,
            }),
            config: meta.config,
            duration_s: meta.duration_s,
            responses: s.responses,
            req_per_s,
            non_2xx_3xx,
            status: s.status,
            assertions: Assertions { checked: s.assertions_checked, failed: s.errors.assertion },
            errors: s.errors,
            bytes_read: s.bytes_read,
            bytes_written: s.bytes_written,
            connections: Connections {
                asked: s.connections_asked,
                established: s.connections_established,
                failed: s.connections_asked.saturating_sub(s.connections_established),
                opened: s.connections_opened,
            },
            reconnects: s.reconnects,
            in_flight_at_end: s.in_flight_at_end,
            latency: Latency::from_histogram(&s.latency, open_loop)?,
            latency_from_write: sum.from_write.map(|h| Latency::from_histogram(&h, false)).transpose()?,
            cpu: Cpu::new(threads, process_us, s.responses),
            merged_from: 1,
            tls: sum.tls.map(|t| Tls::from_stats(&t)).transpose()?,
            http2: sum.http2,
        })
    }
}

/// The open loop's asked rate over the window: with a ramp (ending at `end`), its mean; else `end`.
fn target_rate(end: f64, config: &RunConfig, window_s: f64) -> f64 {
    match (config.rate_start, config.ramp_s) {
        (Some(start), Some(over)) => Rate { start, end }.mean(window_s, Some(std::time::Duration::from_secs_f64(over))),
        _ => end,
    }
}

impl Tls {
    pub fn from_stats(t: &TlsStats) -> Result<Tls, ReportError> {
        Ok(Tls { counts: t.counts.clone(), handshake_latency: Latency::from_histogram(&t.handshake_latency, false)? })
    }
}

/// The workers' counts and histograms added up (the per-thread CPU stays per thread).
struct Sum {
    stats: WorkerStats,
    /// Open loop only: latency from the write.
    from_write: Option<Histogram<u64>>,
    /// https only.
    tls: Option<TlsStats>,
    /// `--http2` only.
    http2: Option<Http2Counts>,
}

impl Sum {
    fn of(workers: &[WorkerStats], open_loop: bool) -> Result<Sum, ReportError> {
        let mut s = WorkerStats::new(false);
        let mut from_write = open_loop.then(crate::stats::new_histogram);
        let mut tls: Option<TlsStats> = None;
        let mut http2: Option<Http2Counts> = None;
        for w in workers {
            if let Some(h) = &w.http2 {
                http2.get_or_insert_with(Http2Counts::default).add(h);
            }
            if let Some(t) = &w.tls {
                let sum = tls.get_or_insert_with(TlsStats::default);
                sum.counts.add(&t.counts);
                sum.handshake_latency.add(&t.handshake_latency).map_err(|e| ReportError::Encode(format!("{e:?}")))?;
            }
            s.latency.add(&w.latency).map_err(|e| ReportError::Encode(format!("{e:?}")))?;
            if let (Some(sum), Some(h)) = (&mut from_write, &w.latency_from_write) {
                sum.add(h).map_err(|e| ReportError::Encode(format!("{e:?}")))?;
            }
            for (code, n) in &w.status {
                *s.status.entry(*code).or_insert(0) += n;
            }
            s.errors.add(&w.errors);
            s.responses += w.responses;
            s.bytes_read += w.bytes_read;
            s.bytes_written += w.bytes_written;
            s.reconnects += w.reconnects;
            s.in_flight_at_end += w.in_flight_at_end;
            s.connections_asked += w.connections_asked;
            s.connections_established += w.connections_established;
            s.connections_opened += w.connections_opened;
            s.late_sends += w.late_sends;
            s.scheduled += w.scheduled;
            s.missed_sends += w.missed_sends;
            s.assertions_checked += w.assertions_checked;
        }
        Ok(Sum { stats: s, from_write, tls, http2 })
    }
}

impl ThreadCpu {
    /// A worker's CPU over a window of `window_us`.
    fn of(w: &WorkerStats, window_us: f64) -> ThreadCpu {
        ThreadCpu {
            cpu: w.pinned_cpu,
            user_us: w.cpu_user_us,
            sys_us: w.cpu_sys_us,
            busy_pct: 100.0 * (w.cpu_user_us + w.cpu_sys_us) as f64 / window_us,
        }
    }
}
