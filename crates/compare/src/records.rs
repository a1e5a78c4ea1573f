//! The record: one JSON line per run (closed, open, startup) or per cell check, appended to
//! `<out-dir>/<UTC stamp>-<hostname>.jsonl` as soon as it is measured, so an interrupted comparison keeps
//! what it measured. Schema: schemas/compare/record.schema.json. Every field is always present; what does
//! not apply is null.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::provenance::Provenance;

/// Bumped when a field changes meaning; `compare report` refuses other versions.
pub const SCHEMA: &str = "compare-record/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A cell's first start: exec→first 200, idle RSS, and the probe set compared with the reference.
    Check,
    /// One cold start: exec→first 200.
    Startup,
    /// Closed-loop load (like wrk).
    Closed,
    /// Open-loop load at a fixed rate, for latency tails.
    Open,
    /// One sample of a soak (`--soak`): a window of fixed-rate load on one long-lived server, RSS after it.
    Soak,
    /// One capacity search (`--capacity`): the highest open-loop rate that met the p99 objective.
    Capacity,
    /// One DB-only run (metadata): the lookup-and-build step timed in a loop, no HTTP, no server.
    Lookups,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Check => "check",
            Kind::Startup => "startup",
            Kind::Closed => "closed",
            Kind::Open => "open",
            Kind::Soak => "soak",
            Kind::Capacity => "capacity",
            Kind::Lookups => "lookups",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    pub cpus: u32,
    pub cpu_model: Option<String>,
    pub kernel: String,
}

/// The one way every report names the machine: `CPU model, N CPUs, kernel (host name)`.
impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cpu = self.cpu_model.as_deref().unwrap_or("unknown CPU");
        write!(f, "{cpu}, {} CPUs, {} (host {})", self.cpus, self.kernel, self.hostname)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub server_cores: String,
    pub loader_cores: String,
    pub db_cores: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyUs {
    pub p50: u64,
    /// Absent in records written before it was kept.
    #[serde(default)]
    pub p95: Option<u64>,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// What one capacity search found (`loadgen capacity`, its every step in `steps_file`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityFound {
    /// The objective: p99 (from each request's intended send time) at most this, µs.
    pub objective_p99_us: u64,
    /// The search's first rate, req/s.
    pub start_rps: f64,
    /// The highest rate that met the objective; None when not even the lowest tried did.
    pub rps: Option<f64>,
    /// That step's achieved rate and p99.
    pub achieved_rps: Option<f64>,
    pub p99_us: Option<u64>,
    /// Steps run, retries included.
    pub steps: u32,
    /// Each step's measured window and warmup, seconds.
    pub step_s: f64,
    pub warmup_s: f64,
    /// The search stopped where the loader ran out of CPU: `rps` is a lower bound, not the server's capacity.
    pub loader_bound: bool,
    /// The search still passed at loadgen's ceiling (`--max`): `rps` is a lower bound.
    pub reached_max: bool,
    /// loadgen's own result with every step, relative to the JSONL's directory.
    pub steps_file: String,
}

/// A server's database connections for a workload's queries, across all its processes: how many, and
/// whether one connection carries many queries at once (pipelined) or one at a time. Without pipelining a
/// request holds a connection for its round trips, so connections ÷ (round trip × round trips per request)
/// bounds req/s whatever the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DbPool {
    pub connections: u32,
    pub pipelined: bool,
}

/// A cache's lookups over a window (Redis's keyspace_hits and keyspace_misses, which count every GET).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CacheSeen {
    pub hits: u64,
    pub misses: u64,
}

impl CacheSeen {
    /// Hits per lookup, in percent; `None` without a lookup.
    pub fn hit_pct(self) -> Option<f64> {
        let all = self.hits + self.misses;
        (all > 0).then(|| 100.0 * self.hits as f64 / all as f64)
    }
}

/// What a TLS run's handshakes negotiated and how many there were, as loadgen counted them: each map holds
/// one key when every handshake agreed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TlsSeen {
    /// Handshakes per protocol version (`TLSv1.3`).
    pub versions: BTreeMap<String, u64>,
    /// Per cipher suite (`TLS13_AES_128_GCM_SHA256`).
    pub cipher_suites: BTreeMap<String, u64>,
    /// Per key-exchange group (`X25519`).
    pub groups: BTreeMap<String, u64>,
    /// Per ALPN protocol the server chose (`http/1.1`, or `none`).
    pub alpn: BTreeMap<String, u64>,
    pub full_handshakes: u64,
    pub resumed_handshakes: u64,
    /// From connect() to the handshake's end, µs (loadgen's handshake latency).
    pub handshake_latency_us: LatencyUs,
    /// Failed handshakes per reason, as loadgen named them (`closed by the server during the handshake`,
    /// `handshake timed out`, `alert received: HandshakeFailure`); empty when none failed. Absent from records
    /// written before it existed.
    #[serde(default)]
    pub failures: BTreeMap<String, u64>,
}

/// What an HTTP/2 run spoke, as loadgen counted it (its report's `http2`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Http2Seen {
    /// Concurrent streams per connection asked for (`--streams`).
    pub streams: u32,
    /// Connections by the protocol they spoke (`h2`; anything else voids the run).
    pub negotiated: BTreeMap<String, u64>,
    pub streams_opened: u64,
    /// RST_STREAM REFUSED_STREAM from the server.
    pub refused: u64,
    /// Other RST_STREAMs and GOAWAYs from the server, by error code.
    pub resets: BTreeMap<String, u64>,
    pub goaways: BTreeMap<String, u64>,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (None: unlimited, or no SETTINGS seen).
    pub server_max_streams: Option<u32>,
    /// `streams` was above it: the streams each connection kept open instead.
    pub capped_at: Option<u32>,
}

/// What a write run left in its database, read back after the load (run/acknowledged.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    /// Rows in the notes table (warmup and measured run together).
    pub rows: u64,
    /// Rows in its history table: one per write, in the same transaction as the write.
    pub history_rows: u64,
}

/// One DB-only run: `metadata-rs bench-lookup` or `lookup-bench.mjs`, pinned to the server cores.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LookupRun {
    pub iterations: u64,
    pub seconds: f64,
    pub ops_per_s: f64,
    /// Lookups that found their row, and the bytes of every body built: equal on every runtime, or it is void.
    pub found: u64,
    pub bytes: u64,
    /// The same process's insert loop after the lookups; null when it did not run (older records lack it).
    #[serde(default)]
    pub inserts: Option<InsertRun>,
}

/// The DB-only run's inserts: single-row autocommit INSERTs into a new file (metadata's bench_insert.rs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InsertRun {
    /// Timed inserts, after a tenth as many untimed.
    pub inserts: u64,
    pub seconds: f64,
    pub ops_per_s: f64,
    /// The table read back: rows (untimed and timed) and two sums; equal on every runtime, or it is void.
    pub rows: u64,
    pub position_sum: u64,
    pub id_chars: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub schema: String,
    /// One per invocation: `<UTC stamp>-<hostname>`, the JSONL file's stem.
    pub run_id: String,
    /// When this run (or check, or start) began, RFC 3339 UTC.
    pub started_at: String,
    /// compare's argv, exactly.
    pub command: Vec<String>,
    pub machine: Machine,
    pub layout: Layout,
    pub workload: String,
    pub runtime: String,
    pub runtime_version: Option<String>,
    pub kind: Kind,
    /// Interleaved round (1-based); the start's index for startup records; 0 for checks.
    pub round: u32,
    pub connections: Option<u32>,
    pub duration_s: Option<f64>,
    /// Open loop: the target rate, requests per second.
    pub rate: Option<f64>,
    /// Open loop: the rate loadgen achieved.
    pub rate_achieved: Option<f64>,
    pub requests: Option<u64>,
    pub req_per_s: Option<f64>,
    pub latency_us: Option<LatencyUs>,
    /// Responses per status code.
    pub statuses: BTreeMap<u16, u64>,
    /// loadgen's errors by kind (connect, tls, read, write, timeout, parse, closed, assertion).
    pub errors: BTreeMap<String, u64>,
    /// utime+stime of the server's whole process tree over the window, per response.
    pub server_cpu_us_per_resp: Option<f64>,
    /// Non-idle share of the server cores over the window (/proc/stat), percent.
    pub server_busy_pct: Option<f64>,
    /// Of that, the part not used by the server's tree (other processes, steal): contention.
    pub server_other_pct: Option<f64>,
    /// Non-idle share of the loader cores over the window (loadgen, compare, and the databases when
    /// `--db-cores` are the same), percent; absent in older records.
    #[serde(default)]
    pub loader_busy_pct: Option<f64>,
    /// Of the server tree's CPU over the window, the share spent in the kernel (stime), percent. Absent in
    /// records written before it was kept.
    #[serde(default)]
    pub server_kernel_pct: Option<f64>,
    /// utime+stime of the PostgreSQL (postmaster and backends) and Redis that compare started, over the window,
    /// per response; null where the workload does not use it or it was given by URL. Absent in older records.
    #[serde(default)]
    pub postgres_cpu_us_per_resp: Option<f64>,
    #[serde(default)]
    pub redis_cpu_us_per_resp: Option<f64>,
    /// The same for compare's upstream service, on the upstream workloads: reported, charged to no runtime.
    #[serde(default)]
    pub upstream_cpu_us_per_resp: Option<f64>,
    /// Closed loop with the server cores under 90% busy: the loader, not the server, set the req/s.
    pub loader_bound: Option<bool>,
    pub loader_cpu_us_per_resp: Option<f64>,
    pub rss_idle_kib: Option<u64>,
    pub rss_after_kib: Option<u64>,
    /// The peak RSS of the server's tree: each process's high-water mark (VmHWM) at the end of the run,
    /// summed (so an upper bound when its processes peaked at different times). Absent in older records.
    #[serde(default)]
    pub rss_peak_kib: Option<u64>,
    pub startup_ms: Option<f64>,
    /// Soak samples: seconds from the soak's first measured window to the end of this one. Absent in
    /// records written before soaks existed.
    #[serde(default)]
    pub elapsed_s: Option<f64>,
    /// Capacity searches: what the search found. Absent in records written before searches existed.
    #[serde(default)]
    pub capacity: Option<CapacityFound>,
    /// Write runs: the rows the database holds afterwards. Absent in older records.
    #[serde(default)]
    pub stored: Option<Stored>,
    /// DB-only runs: what the loop did. Absent in older records.
    #[serde(default)]
    pub lookups: Option<LookupRun>,
    /// Connections loadgen opened over the window, reconnects included (what the churn and handshake
    /// workloads cost per connection is read against it). Absent in older records.
    #[serde(default)]
    pub connections_opened: Option<u64>,
    /// TLS runs: what was negotiated, and the handshakes. Absent in older records.
    #[serde(default)]
    pub tls: Option<TlsSeen>,
    /// HTTP/2 runs: the streams asked for and what loadgen saw of the protocol. Absent elsewhere.
    #[serde(default)]
    pub http2: Option<Http2Seen>,
    /// metadata-cached: Redis lookups that hit and missed over the window. Absent elsewhere.
    #[serde(default)]
    pub cache: Option<CacheSeen>,
    /// `--db-rtt`: the round trip the delay proxies added between the server and its databases, ms; null
    /// straight to them. Absent in older records.
    #[serde(default)]
    pub db_rtt_ms: Option<f64>,
    /// The delay proxies' CPU over the window, per response (charged to no runtime).
    #[serde(default)]
    pub db_proxy_cpu_us_per_resp: Option<f64>,
    /// The database connections the server holds for this workload's queries, on workloads that wait on a
    /// database. Absent elsewhere.
    #[serde(default)]
    pub db_pool: Option<DbPool>,
    /// Which commit, compiler and profile built the Rust binaries, and the lockfiles' hashes (provenance.rs).
    /// Absent in older records.
    #[serde(default)]
    pub provenance: Option<Provenance>,
    pub void: bool,
    pub void_reason: Option<String>,
}

/// What every record of one invocation shares.
#[derive(Debug, Clone)]
pub struct RunMeta {
    pub run_id: String,
    pub command: Vec<String>,
    pub machine: Machine,
    pub layout: Layout,
    pub provenance: Option<Provenance>,
}

impl Record {
    /// A record with every measurement empty.
    pub fn new(meta: &RunMeta, workload: &str, runtime: &str, version: Option<&str>, kind: Kind, round: u32) -> Record {
        Record {
            schema: SCHEMA.to_string(),
            run_id: meta.run_id.clone(),
            started_at: now_rfc3339(),
            command: meta.command.clone(),
            machine: meta.machine.clone(),
            layout: meta.layout.clone(),
            workload: workload.to_string(),
            runtime: runtime.to_string(),
            runtime_version: version.map(str::to_string),
            kind,
            round,
            connections: None,
            duration_s: None,
            rate: None,
            rate_achieved: None,
            requests: None,
            req_per_s: None,
            latency_us: None,
            statuses: BTreeMap::new(),
            errors: BTreeMap::new(),
            server_cpu_us_per_resp: None,
            server_busy_pct: None,
            loader_busy_pct: None,
            server_other_pct: None,
            server_kernel_pct: None,
            postgres_cpu_us_per_resp: None,
            redis_cpu_us_per_resp: None,
            upstream_cpu_us_per_resp: None,
            loader_bound: None,
            loader_cpu_us_per_resp: None,
            rss_idle_kib: None,
            rss_after_kib: None,
            rss_peak_kib: None,
            startup_ms: None,
            elapsed_s: None,
            capacity: None,
            stored: None,
            lookups: None,
            connections_opened: None,
            tls: None,
            http2: None,
            cache: None,
            db_rtt_ms: None,
            db_proxy_cpu_us_per_resp: None,
            db_pool: None,
            provenance: meta.provenance.clone(),
            void: false,
            void_reason: None,
        }
    }

    /// Marks the record void, keeping every reason.
    pub fn void_because(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        self.void = true;
        self.void_reason = Some(match self.void_reason.take() {
            Some(prev) => format!("{prev}; {reason}"),
            None => reason,
        });
    }
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Appends records to a JSONL file, one line each, flushed at once.
#[derive(Debug)]
pub struct Sink {
    path: PathBuf,
    file: File,
}

impl Sink {
    pub fn create(path: &Path) -> anyhow::Result<Sink> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Sink { path: path.to_path_buf(), file })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn append(&mut self, record: &Record) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.file.write_all(&line).with_context(|| format!("writing {}", self.path.display()))?;
        self.file.flush()?;
        Ok(())
    }
}

/// Names (workloads, runtimes) in the order first recorded, each once.
pub fn ordered<'a>(items: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in items {
        if !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    }
    out
}

/// Every record of the files, in order. Blank lines are skipped; anything else that is not a record of
/// this schema is an error naming the file and line.
pub fn read_jsonl(paths: &[PathBuf]) -> anyhow::Result<Vec<Record>> {
    let mut out = Vec::new();
    for path in paths {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        for (i, line) in BufReader::new(file).lines().enumerate() {
            let line = line.with_context(|| format!("reading {}", path.display()))?;
            if line.trim().is_empty() {
                continue;
            }
            let value: serde_json::Value =
                serde_json::from_str(&line).with_context(|| format!("{}:{}: not JSON", path.display(), i + 1))?;
            if value.get("schema").and_then(|s| s.as_str()) != Some(SCHEMA) {
                bail!("{}:{}: not a {SCHEMA} record", path.display(), i + 1);
            }
            let record: Record = serde_json::from_value(value)
                .with_context(|| format!("{}:{}: malformed record", path.display(), i + 1))?;
            out.push(record);
        }
    }
    Ok(out)
}

/// The machine as /proc describes it.
pub fn machine_info() -> Machine {
    let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).ok();
    let hostname = read("/proc/sys/kernel/hostname").filter(|h| !h.is_empty()).unwrap_or_else(|| "unknown".into());
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string());
    let cpus = cpuinfo.lines().filter(|l| l.starts_with("processor")).count() as u32;
    let cpus = if cpus > 0 { cpus } else { std::thread::available_parallelism().map_or(1, |n| n.get() as u32) };
    let kernel = format!(
        "{} {}",
        read("/proc/sys/kernel/ostype").unwrap_or_else(|| "Linux".into()),
        read("/proc/sys/kernel/osrelease").unwrap_or_default()
    )
    .trim()
    .to_string();
    Machine { hostname, cpus, cpu_model, kernel }
}

/// A record of a fixed test run (host `h`, server core 0, loader and databases on core 1), for unit tests
/// that build records by hand.
#[cfg(test)]
pub fn test_record(workload: &str, runtime: &str, kind: Kind, round: u32) -> Record {
    let meta = RunMeta {
        run_id: "t".into(),
        command: vec![],
        machine: Machine { hostname: "h".into(), cpus: 2, cpu_model: None, kernel: "k".into() },
        layout: Layout { server_cores: "0".into(), loader_cores: "1".into(), db_cores: "1".into() },
        provenance: None,
    };
    Record::new(&meta, workload, runtime, None, kind, round)
}

/// A DB-only run's record of the fixed test run: `ops_per_s` lookups a second over 1000, `found` of them
/// present, 7 bytes built per found one.
#[cfg(test)]
pub fn test_lookup_record(runtime: &str, round: u32, ops_per_s: f64, found: u64) -> Record {
    let mut r = test_record("metadata", runtime, Kind::Lookups, round);
    r.lookups = Some(LookupRun {
        iterations: 1000,
        seconds: 1000.0 / ops_per_s,
        ops_per_s,
        found,
        bytes: 7 * found,
        inserts: None,
    });
    r
}

/// A DB-only record with an insert loop at `inserts_per_s` whose read-back sums are `position_sum`.
#[cfg(test)]
pub fn test_insert_record(runtime: &str, round: u32, inserts_per_s: f64, position_sum: u64) -> Record {
    let mut r = test_lookup_record(runtime, round, 100_000.0, 10);
    let run = InsertRun {
        inserts: 1000,
        seconds: 1000.0 / inserts_per_s,
        ops_per_s: inserts_per_s,
        rows: 1100,
        position_sum,
        id_chars: 11_000,
    };
    r.lookups.as_mut().expect("a lookup record").inserts = Some(run);
    r
}
