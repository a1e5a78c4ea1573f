//! `compare calibrate`: our loadgen against a reference loader on the same servers. A benchmark whose load
//! generator comes from the same project as the server under test is suspect, so this runs both loaders,
//! pinned to the same cores with the same threads, connections and duration, and says whether their req/s
//! agree within 5%. Over HTTP/1.1 the reference is wrk, on the floor and the Node hello peer; with `--http2`
//! it is h2load (nghttp2's), over h2c with the same streams per connection and the same request headers, on
//! the rust, Bun and Node hello servers. `--tls` loads those three over TLS 1.3 instead (HTTPS/1.1 against
//! wrk, h2 by ALPN against h2load), each with the run's own certificate. It also says what each loader spent: responses per loader CPU-second,
//! from each loader process's own CPU time at its exit, for loadgen on its default engine (io_uring where the
//! kernel allows it), loadgen on epoll, and the reference.
//!
//! Per server: start it pinned, check it answers the hello contract, a discarded warmup by each loader, then
//! R rounds of one run per loader with the order rotating (each loader first in every third round),
//! so a drift of the server or the machine over time does not favour either loader. The server's tree CPU
//! (/proc) is read around every run: per response it should be the same under both loaders; equal CPU per
//! response with fewer req/s means that loader left the server idle.
//!
//! Exit codes: 0 every server agrees, 1 some server disagrees, 2 a run could not be made or did not count
//! (a missing prerequisite, a server that did not start or answered wrongly, wrk or loadgen errors, non-2xx),
//! 64 bad flags, 130 interrupted.

pub mod agreement;
pub mod calibration;
pub mod external;
pub mod h2load;
pub mod wrk;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;

use crate::calibrate::agreement::{Loader, LoaderRun, ServerResult, exit_code, order};
use crate::calibrate::calibration::Calibration;
use crate::measure_flags::{self, Defaults, MeasureArgs};
use crate::plan::paths::{Paths, ResultFolder};
use crate::plan::prerequisites;
use crate::plan::probe;
use crate::plan::runtimes::Runtime;
use crate::plan::server_spec::{self, ServerEnv};
use crate::plan::tls::ClientTls;
use crate::plan::versions;
use crate::plan::workload_plan::{self, Plan};
use crate::plan::workloads::Workload;
use crate::records;
use crate::report;
use crate::run::loader;
use crate::run::server::{self, Server};
use crate::run::setup::{Bench, Timing};
use crate::system::cores::Cores;
use crate::system::process;
use crate::system::procfs;

/// Both loaders' per-request timeout (wrk's default is 2 s; loadgen's compare runs use 5 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The path both loaders load.
const PATH: &str = "/api/hello";

// The shared flags under calibrate's own names and help: --runs, --duration and --warmup are whole seconds
// (wrk's -d takes seconds) with calibrate's defaults, one set of cores serves both loaders.
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg("runs", |a| a.env("COMPARE_CALIBRATE_RUNS").help(
        "Measured rounds per server (one run per loader each, the order alternating) [default: 3; --quick: 1]"
    )),
    mut_arg("duration", |a| a.env("COMPARE_CALIBRATE_DURATION").help(
        "Length of every measured run, whole seconds (wrk's -d takes seconds) [default: 10s; --quick: 2s]"
    )),
    mut_arg("warmup", |a| a.env("COMPARE_CALIBRATE_WARMUP").help(
        "Discarded warmup per server and loader, whole seconds, 0 to skip [default: 5s; --quick: 1s]"
    )),
    mut_arg("server_cores", |a| a.env("COMPARE_CALIBRATE_SERVER_CORES").help("taskset list for the server")),
    mut_arg("loader_cores", |a| a.env("COMPARE_CALIBRATE_LOADER_CORES").help(
        "taskset list for both loaders (and compare itself); each loader runs one thread per core"
    )),
    mut_arg("out_dir", |a| a.env("COMPARE_CALIBRATE_OUT_DIR").help("Where the Markdown goes [default: <repo>/bench/results]")),
    mut_arg("bin_dir", |a| a.env("COMPARE_CALIBRATE_BIN_DIR").help(
        "Directory of loadgen [default: $CARGO_TARGET_DIR/release or <repo>/target/release]"
    )),
    mut_arg("repo", |a| a.env("COMPARE_CALIBRATE_REPO")),
    mut_arg("quick", |a| a.env("COMPARE_CALIBRATE_QUICK").display_order(18).help(
        "A smoke run: 1 s warmup, one round of 2 s (explicit flags win)"
    ))
)]
pub struct CalibrateArgs {
    /// Comma list of the servers to calibrate on: floor, node over HTTP/1.1 [default: floor,node]; rust, bun,
    /// node with --http2 [default: rust,bun,node].
    #[arg(long, env = "COMPARE_CALIBRATE_SERVERS", display_order = 0)]
    pub servers: Option<String>,
    /// HTTP/2 by prior knowledge (h2c), loadgen against h2load instead of wrk.
    #[arg(long, env = "COMPARE_CALIBRATE_HTTP2", display_order = 1)]
    pub http2: bool,
    /// Over TLS 1.3 with a certificate made for the run: HTTPS/1.1 (wrk), or h2 by ALPN with --http2 (h2load);
    /// on rust, bun, node [default servers: rust,bun,node].
    #[arg(long, env = "COMPARE_CALIBRATE_TLS", display_order = 2)]
    pub tls: bool,
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Connections, the same for both loaders [default: 100; --http2: 16, as compare's HTTP/2 workloads].
    #[arg(long, env = "COMPARE_CALIBRATE_CONNECTIONS", display_order = 6)]
    pub connections: Option<u32>,
    /// Concurrent streams per connection with --http2 (loadgen's --streams, h2load's -m) [default: 16].
    #[arg(long, env = "COMPARE_CALIBRATE_STREAMS", requires = "http2", display_order = 7)]
    pub streams: Option<u32>,
}

/// Everything a calibration needs, resolved.
#[derive(Debug, Clone)]
pub struct Config {
    pub paths: Paths,
    pub servers: Vec<Runtime>,
    /// What both loaders load: hello-bare over HTTP/1.1, hello-h2c with --http2.
    pub workload: Workload,
    /// The loader loadgen is judged against: wrk, or h2load with --http2.
    pub reference: Loader,
    /// Streams per connection with --http2; None over HTTP/1.1.
    pub streams: Option<u32>,
    /// `--tls`: the servers serve TLS and the loaders speak it.
    pub tls: bool,
    /// With `--tls`, the certificate `calibrate` made for the run (its CA for loadgen's `--cacert`).
    pub certs: Option<certs::Files>,
    pub runs: u32,
    pub duration: Duration,
    pub warmup: Duration,
    pub connections: u32,
    /// Per loader: one per loader core (at most one per connection).
    pub threads: usize,
    pub server_cores: Cores,
    pub loader_cores: Cores,
    pub out_dir: PathBuf,
    /// compare's argv, exactly.
    pub command: Vec<String>,
}

/// Calibrate's defaults for the shared flags: 3 rounds of 10 s after 5 s warmup; `--quick`: 1 of 2 s after 1 s.
const DEFAULTS: Defaults = Defaults { runs: [3, 1], duration: ["10s", "2s"], warmup: ["5s", "1s"] };

/// A duration wrk can take: whole seconds (0 only where `zero_ok`).
fn whole_seconds(flag: &str, raw: &str, zero_ok: bool) -> anyhow::Result<Duration> {
    let d = textfmt::parse_duration(raw).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))?;
    if d.subsec_nanos() != 0 {
        bail!("--{flag} must be whole seconds (wrk's -d takes seconds), not {raw:?}");
    }
    if d.is_zero() && !zero_ok {
        bail!("--{flag} must be at least 1s");
    }
    Ok(d)
}

/// The servers calibrated on: over cleartext HTTP/1.1 the floor (loader-bound: the loaders' own speed) and the
/// Node peer; over HTTP/2 or TLS the three runtimes' hello servers (the floor speaks cleartext HTTP/1.1 only).
fn choices(http2_or_tls: bool) -> &'static [Runtime] {
    if http2_or_tls { &[Runtime::Rust, Runtime::Bun, Runtime::Node] } else { &[Runtime::Floor, Runtime::Node] }
}

/// `floor,node` → the runtimes, in the order given, each one `choices` allows.
pub fn parse_servers(text: &str, http2_or_tls: bool) -> anyhow::Result<Vec<Runtime>> {
    let allowed = choices(http2_or_tls);
    let names = allowed.iter().map(|r| r.name()).collect::<Vec<_>>().join(", ");
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(&rt) = allowed.iter().find(|r| r.name() == name) else {
            let mode = if http2_or_tls { "with --http2 or --tls" } else { "over cleartext HTTP/1.1" };
            bail!("--servers: {name:?} is not calibrated on {mode}; choose from {names}");
        };
        if !out.contains(&rt) {
            out.push(rt);
        }
    }
    if out.is_empty() {
        bail!("--servers: none given; choose from {names}");
    }
    Ok(out)
}

impl CalibrateArgs {
    /// Defaults, `--quick` and paths applied (as the comparison's own flags resolve them).
    pub fn resolve(&self, command: Vec<String>, compare_exe: PathBuf) -> anyhow::Result<Config> {
        let m = self.measure.resolve(&DEFAULTS, compare_exe)?;
        let duration = whole_seconds("duration", m.duration, false)?;
        let warmup = whole_seconds("warmup", m.warmup, true)?;
        // Over TLS and HTTP/1.1 the hello-bare route and servers, with the run's certificate given to them.
        let workload = match (self.http2, self.tls) {
            (true, true) => Workload::HelloH2,
            (true, false) => Workload::HelloH2c,
            (false, _) => Workload::HelloBare,
        };
        let connections = self.connections.unwrap_or(workload.connections());
        if connections == 0 {
            bail!("--connections must be at least 1");
        }
        let streams = self.http2.then(|| self.streams.unwrap_or(workload.connecting().http2_streams.unwrap_or(1)));
        if streams == Some(0) {
            bail!("--streams must be at least 1");
        }
        let servers = match &self.servers {
            Some(text) => parse_servers(text, self.http2 || self.tls)?,
            None => choices(self.http2 || self.tls).to_vec(),
        };
        let threads = threads(m.loader_cores.count(), connections);
        Ok(Config {
            paths: m.paths,
            out_dir: m.out_dir,
            servers,
            workload,
            reference: if self.http2 { Loader::H2load } else { Loader::Wrk },
            streams,
            tls: self.tls,
            certs: None,
            runs: m.runs,
            duration,
            warmup,
            connections,
            threads,
            server_cores: m.server_cores,
            loader_cores: m.loader_cores,
            command,
        })
    }
}

/// Threads per loader: one per loader core, never more than connections (as `loader::run` picks).
pub fn threads(loader_cores: usize, connections: u32) -> usize {
    loader_cores.clamp(1, connections.max(1) as usize)
}
/// The first line a program prints for `flag` (stdout, else stderr), whatever its exit code (`wrk -v` exits 1).
fn version_line(program: &Path, flag: &str) -> Option<String> {
    let out = Command::new(program).arg(flag).stdin(Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(if out.stdout.is_empty() { &out.stderr } else { &out.stdout }).into_owned();
    text.lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_string)
}
/// Everything missing, each with its install step; empty when all is there.
pub fn missing_prerequisites(cfg: &Config) -> Vec<String> {
    let mut missing = prerequisites::missing_prerequisites(&[cfg.workload], &cfg.servers, &cfg.paths, false, false);
    if let Err(e) = reference_binary(cfg.reference) {
        missing.push(format!("{e:#}"));
    }
    missing
}

/// The reference loader's path, or the install step that brings it.
fn reference_binary(reference: Loader) -> anyhow::Result<PathBuf> {
    match reference {
        Loader::H2load => h2load::find().with_context(|| format!("h2load not found on PATH: {}", h2load::H2LOAD_HINT)),
        _ => wrk::find().with_context(|| format!("wrk not found on PATH: {}", wrk::WRK_HINT)),
    }
}
/// The server's CPU and both core sets' counters, read just before and just after a loader runs.
struct Window {
    server_cpu_us: Option<f64>,
    server_ticks: procfs::CoreTicks,
    loader_ticks: procfs::CoreTicks,
}

impl Window {
    fn read(pid: Option<u32>, cfg: &Config) -> anyhow::Result<Window> {
        Ok(Window {
            server_cpu_us: pid.map(|p| procfs::tree_cpu(p).total_us()),
            server_ticks: procfs::core_ticks(cfg.server_cores.set())?,
            loader_ticks: procfs::core_ticks(cfg.loader_cores.set())?,
        })
    }
}

/// One run's figures: req/s, responses, its latencies, the loader's CPU µs.
type Figures = (f64, u64, Latencies, Option<f64>);

/// What a loader prints of latency: p50, p99 and the mean, µs, each where it prints it.
#[derive(Debug, Clone, Copy, Default)]
struct Latencies {
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    mean_us: Option<f64>,
}

/// Runs one loader once against the server; the run's figures, or why it does not count.
fn one_run(
    cfg: &Config,
    bench: &Bench,
    reference_bin: &Path,
    server: &Server,
    (loader, round, warmup): (Loader, u32, bool),
    result: &mut ServerResult,
) -> anyhow::Result<Result<LoaderRun, String>> {
    let pid = server.pid();
    let duration = if warmup { cfg.warmup } else { cfg.duration };
    let tag = format!(
        "{}-{}-{}",
        server_name(server),
        loader.name(),
        if warmup { "warmup".into() } else { round.to_string() }
    );
    let before = Window::read(pid, cfg)?;
    let (figures, argv) = match loader {
        Loader::Loadgen | Loader::LoadgenEpoll => {
            loadgen_run(cfg, bench, server, (loader, duration, warmup, &tag), result)?
        }
        Loader::Wrk => wrk_run(cfg, (bench, reference_bin), server, (duration, warmup, &tag))?,
        Loader::H2load => h2load_run(cfg, (bench, reference_bin), server, (duration, warmup, &tag))?,
    };
    let after = Window::read(pid, cfg)?;
    *match loader {
        Loader::Loadgen => &mut result.loadgen_argv,
        Loader::LoadgenEpoll => &mut result.epoll_argv,
        Loader::Wrk | Loader::H2load => &mut result.reference_argv,
    } = argv;
    Ok(figures.map(|(req_per_s, requests, latencies, loader_cpu_us)| {
        let cpu = match (before.server_cpu_us, after.server_cpu_us) {
            (Some(a), Some(b)) if requests > 0 => Some((b - a).max(0.0) / requests as f64),
            _ => None,
        };
        LoaderRun {
            loader,
            round,
            req_per_s,
            requests,
            p50_us: latencies.p50_us,
            p99_us: latencies.p99_us,
            mean_us: latencies.mean_us,
            server_cpu_us_per_resp: cpu,
            server_busy_pct: procfs::busy_pct(before.server_ticks, after.server_ticks),
            loader_busy_pct: procfs::busy_pct(before.loader_ticks, after.loader_ticks),
            loader_cpu_us,
        }
    }))
}

/// A loader's run: its figures (or why they do not count), and the argv it ran with.
type Outcome = (Result<Figures, String>, Vec<String>);

/// The run's figures when nothing voids it: else the reasons, or that `what` (its report) is missing.
fn counted(figures: Option<Figures>, reasons: Vec<String>, what: &str) -> Result<Figures, String> {
    if reasons.is_empty() { figures.ok_or_else(|| format!("no {what}")) } else { Err(reasons.join("; ")) }
}

/// loadgen (its default engine, or epoll) once against the server.
fn loadgen_run(
    cfg: &Config,
    bench: &Bench,
    server: &Server,
    (loader, duration, warmup, tag): (Loader, Duration, bool, &str),
    result: &mut ServerResult,
) -> anyhow::Result<Outcome> {
    let load = load_spec(cfg);
    let engine = (loader == Loader::LoadgenEpoll).then_some("epoll");
    let bench = Bench { loadgen_engine: engine, ..bench.clone() };
    let run = loader::run(&bench, server.port, &load, duration, None, tag)?;
    let reasons = loader::void_reasons(&run, &[], warmup);
    if loader == Loader::Loadgen {
        result.loadgen_engine = run.report.as_ref().map(|r| r.config.engine.clone());
    }
    let figures = run.report.as_ref().map(|r| {
        let latencies = Latencies {
            p50_us: Some(r.latency.p50_us as f64),
            p99_us: Some(r.latency.p99_us as f64),
            mean_us: Some(r.latency.mean_us),
        };
        (r.req_per_s, r.responses, latencies, run.cpu_us)
    });
    Ok((counted(figures, reasons, "loadgen report"), run.argv))
}

/// wrk once against the server.
fn wrk_run(
    cfg: &Config,
    (bench, wrk_bin): (&Bench, &Path),
    server: &Server,
    (duration, warmup, tag): (Duration, bool, &str),
) -> anyhow::Result<Outcome> {
    let load = wrk::Load {
        cores: cfg.loader_cores.to_string(),
        threads: cfg.threads,
        connections: cfg.connections,
        timeout: REQUEST_TIMEOUT,
        url: url(cfg, server),
    };
    let run = wrk::run(wrk_bin, &load, duration, &bench.logdir, tag)?;
    let reasons = wrk::problems(&run, warmup);
    let figures = run.output.as_ref().ok().map(|o| {
        let latencies = Latencies { p50_us: Some(o.p50_us), p99_us: Some(o.p99_us), mean_us: Some(o.latency_avg_us) };
        (o.req_per_s, o.requests, latencies, run.cpu_us)
    });
    Ok((counted(figures, reasons, "wrk output"), run.argv))
}

/// h2load once against the server, with loadgen's connections, streams and request headers.
fn h2load_run(
    cfg: &Config,
    (bench, h2load_bin): (&Bench, &Path),
    server: &Server,
    (duration, warmup, tag): (Duration, bool, &str),
) -> anyhow::Result<Outcome> {
    let spec = load_spec(cfg);
    let load = h2load::Load {
        cores: cfg.loader_cores.to_string(),
        threads: cfg.threads,
        connections: cfg.connections,
        streams: spec.http2_streams.unwrap_or(1),
        headers: spec.headers.clone(),
        url: url(cfg, server),
    };
    let run = h2load::run(h2load_bin, &load, duration, &bench.logdir, tag)?;
    let reasons = h2load::problems(&run, warmup, if cfg.tls { "h2" } else { "h2c" });
    let figures = run.output.as_ref().ok().map(|o| {
        let latencies = Latencies { mean_us: Some(o.mean_us), ..Latencies::default() };
        (o.req_per_s, o.succeeded, latencies, run.cpu_us)
    });
    Ok((counted(figures, reasons, "h2load output"), run.argv))
}

/// The TLS 1.3 suite wrk and h2load (OpenSSL 3) put first and so negotiate with every server here; loadgen
/// offers it alone, so all loaders encrypt alike (a comparison pins TLS13_AES_128_GCM_SHA256 instead).
const OPENSSL_SUITE: &str = "TLS13_AES_256_GCM_SHA384";

/// Sent by both loaders in place of their own user-agents (h2load's names its nghttp2 version, loadgen sends
/// none), so the servers decode the same header block from each.
pub const USER_AGENT: &str = "compare-calibrate";

/// What loadgen loads: the workload's hello request with calibrate's connections; over HTTP/2 its streams and
/// the shared user-agent too (h2load is given the same headers).
fn load_spec(cfg: &Config) -> crate::plan::load_spec::LoadSpec {
    let mut load = Plan::hello(cfg.workload).load;
    load.connections = cfg.connections;
    load.http2_streams = cfg.streams;
    if cfg.streams.is_some() {
        load.headers.push(format!("user-agent: {USER_AGENT}"));
    }
    load.tls =
        cfg.certs.as_ref().map(|files| ClientTls { cipher: OPENSSL_SUITE, ..ClientTls::new(files.ca.clone(), false) });
    load
}

/// The URL the outside loaders load (neither checks the certificate: both are told nothing of the CA).
fn url(cfg: &Config, server: &Server) -> String {
    format!("{}://127.0.0.1:{}{PATH}", if cfg.tls { "https" } else { "http" }, server.port)
}

fn server_name(server: &Server) -> String {
    format!("server-{}", server.port)
}

/// Calibrates on one server. It is started once and serves the warmups and every round: calibration compares
/// the loaders, not the server, and one warmed server gives both the same state (heap, JIT, caches); a fresh
/// server per run would add start-to-start variance (Node's JIT decisions, heap layout) to the very difference
/// being judged. Drift of that one server over time is cancelled by alternating which loader goes first.
fn calibrate_server(cfg: &Config, bench: &Bench, reference_bin: &Path, rt: Runtime) -> anyhow::Result<ServerResult> {
    let workload = cfg.workload;
    let plan = Plan::hello(workload);
    let env = ServerEnv {
        floor_body: Some(workload_plan::HELLO_BODY.to_vec()),
        tls: cfg.certs.clone(),
        ..ServerEnv::default()
    };
    let spec = server_spec::server_spec(rt, workload, &cfg.paths, &env);
    let version = match rt {
        Runtime::Floor => Some(format!("compare {}", env!("CARGO_PKG_VERSION"))),
        _ => versions::version(rt, workload.service(), &cfg.paths),
    };
    let mut result = ServerResult {
        server: rt,
        version,
        reference: cfg.reference,
        runs: Vec::new(),
        failure: None,
        loadgen_argv: Vec::new(),
        epoll_argv: Vec::new(),
        reference_argv: Vec::new(),
        loadgen_engine: None,
    };
    let (mut server, _) = match server::start_ready(&spec, bench, &plan.ready_path) {
        Ok(s) => s,
        Err(e) => {
            result.failure = Some(format!("did not start: {e:#}"));
            return Ok(result);
        }
    };
    let outcome = rounds(cfg, bench, reference_bin, &plan, &mut server, &mut result);
    if let Some(status) = server.exited() {
        let why = format!("exited ({status}) during the calibration{}", server.log_tail(12));
        result.failure = Some(result.failure.take().map_or(why.clone(), |f| format!("{f}; {why}")));
    }
    server.stop();
    outcome?;
    Ok(result)
}

fn rounds(
    cfg: &Config,
    bench: &Bench,
    reference_bin: &Path,
    plan: &Plan,
    server: &mut Server,
    result: &mut ServerResult,
) -> anyhow::Result<()> {
    let name = result.server.name();
    std::thread::sleep(server::SETTLE);
    let probe = &plan.probes[plan.primary];
    if let Some(contract) = &probe.contract {
        let got = probe.ask(&server.endpoint());
        if let Some(how) = probe::difference(probe, &got, &Ok(contract.clone()), false) {
            result.failure = Some(format!("{} answered off the hello contract: {how}", probe.request_line()));
            return Ok(());
        }
    }
    let mut steps: Vec<(Loader, u32, bool)> = Vec::new();
    if !cfg.warmup.is_zero() {
        steps.extend(order(1, cfg.reference).map(|l| (l, 0, true)));
    }
    for round in 1..=cfg.runs {
        steps.extend(order(round, cfg.reference).map(|l| (l, round, false)));
    }
    for (loader, round, warmup) in steps {
        process::check_interrupted()?;
        let what = if warmup { "warmup".to_string() } else { format!("round {round}/{}", cfg.runs) };
        eprintln!(
            "calibrate: {name} {what}: {} for {:?}",
            loader.name(),
            if warmup { cfg.warmup } else { cfg.duration }
        );
        let run = one_run(cfg, bench, reference_bin, server, (loader, round, warmup), result)?;
        process::check_interrupted()?;
        if let Some(status) = server.exited() {
            result.failure = Some(format!("exited ({status}) during {} {what}{}", loader.name(), server.log_tail(12)));
            return Ok(());
        }
        match run {
            Ok(run) if !warmup => {
                eprintln!("calibrate: {name} {what}: {} {:.0} req/s", loader.name(), run.req_per_s);
                result.runs.push(run);
            }
            Ok(_) => {}
            Err(why) => {
                result.failure = Some(format!("{} {what}: {why}", loader.name()));
                return Ok(());
            }
        }
        // Let the last run's connections close before the next loader opens its own.
        std::thread::sleep(server::SETTLE);
    }
    Ok(())
}

/// Runs the calibration: prerequisites, every server, the Markdown (stdout and file). The output path.
pub fn calibrate(cfg: &Config) -> anyhow::Result<(Calibration, PathBuf)> {
    let reference_bin = reference_binary(cfg.reference)?;
    let machine = records::machine_info();
    let started_at = records::now_rfc3339();
    let folder = ResultFolder::now(&cfg.out_dir);
    let md = folder.file(&machine.hostname, "-calibrate.md");
    let work = process::work_dir("compare-calibrate-").context("temp dir")?;
    let mut with_certs = cfg.clone();
    if cfg.tls {
        with_certs.certs = Some(crate::plan::tls::run_certificate(work.path())?);
    }
    let cfg = &with_certs;
    let timing = Timing { warmup: cfg.warmup, duration: cfg.duration, request_timeout: REQUEST_TIMEOUT };
    let cores = (&cfg.server_cores, &cfg.loader_cores);
    let bench = Bench::new(cfg.paths.loadgen(), cores, timing, work.path().to_path_buf());
    let mut results = Vec::new();
    for &rt in &cfg.servers {
        let started = Instant::now();
        let r = calibrate_server(cfg, &bench, &reference_bin, rt)?;
        if let Some(why) = &r.failure {
            eprintln!("calibrate: {} failed: {why}", rt.name());
        }
        eprintln!("calibrate: {} done in {:.0?}", rt.name(), started.elapsed());
        results.push(r);
    }
    let calibration = Calibration {
        command: cfg.command.clone(),
        started_at,
        machine,
        reference: cfg.reference,
        reference_version: reference_version(cfg.reference, &reference_bin),
        streams: cfg.streams,
        tls: cfg.tls,
        request_headers: load_spec(cfg).headers,
        loadgen_version: version_line(&cfg.paths.loadgen(), "--version")
            .unwrap_or_else(|| "loadgen (version unknown)".into()),
        server_cores: cfg.server_cores.to_string(),
        loader_cores: cfg.loader_cores.to_string(),
        threads: cfg.threads,
        connections: cfg.connections,
        runs: cfg.runs,
        duration: cfg.duration,
        warmup: cfg.warmup,
        request_timeout: REQUEST_TIMEOUT,
        path: PATH,
        results,
    };
    std::fs::create_dir_all(&folder.dir).with_context(|| format!("creating {}", folder.dir.display()))?;
    std::fs::write(&md, calibration::render(&calibration)).with_context(|| format!("writing {}", md.display()))?;
    Ok((calibration, md))
}

/// The reference loader's version line: `wrk -v` goes on to its copyright and usage, so the version is what
/// comes before; `h2load --version` prints "h2load nghttp2/1.52.0".
fn reference_version(reference: Loader, bin: &Path) -> String {
    let line = match reference {
        Loader::H2load => version_line(bin, "--version"),
        _ => version_line(bin, "-v").map(|l| l.split(" Copyright").next().unwrap_or(&l).trim().to_string()),
    };
    line.unwrap_or_else(|| format!("{} (version unknown)", reference.name()))
}

/// `compare calibrate`, start to exit code.
pub fn command(args: &CalibrateArgs) -> ExitCode {
    let cfg = match measure_flags::resolve_or_exit(|argv, exe| args.resolve(argv, exe)) {
        Ok(cfg) => cfg,
        Err(code) => return code,
    };
    let missing = missing_prerequisites(&cfg);
    if !missing.is_empty() {
        eprintln!("compare calibrate: missing prerequisites:\n  - {}", missing.join("\n  - "));
        return ExitCode::from(2);
    }
    if !cfg.server_cores.is_disjoint(&cfg.loader_cores) {
        eprintln!("warning: server and loader cores overlap; the loaders will take CPU from the server");
    }
    if let Err(e) = process::take_charge(&cfg.loader_cores) {
        eprintln!("compare calibrate: {e:#}");
        return ExitCode::from(2);
    }
    match calibrate(&cfg) {
        Ok((c, md)) => {
            report::print(&calibration::render(&c));
            eprintln!("compare calibrate: wrote {}", md.display());
            ExitCode::from(exit_code(&c.results))
        }
        Err(e) if process::interrupted() => {
            eprintln!("compare calibrate: interrupted ({e:#}); nothing written");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("compare calibrate: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_thread_per_loader_core_at_most_one_per_connection() {
        assert_eq!(threads(1, 100), 1);
        assert_eq!(threads(4, 2), 2);
    }
}
