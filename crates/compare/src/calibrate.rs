//! `compare calibrate`: our loadgen against wrk on the same servers. A benchmark whose load generator comes
//! from the same project as the server under test is suspect, so this runs both loaders, pinned to the same
//! cores with the same threads, connections and duration, against the floor and the Node hello peer, and
//! says whether their req/s agree within 5% (the method of bench/loadgen_vs_wrk.py's part B).
//!
//! Per server: start it pinned, check it answers the hello contract, a discarded warmup by each loader, then
//! R rounds of one run per loader with the order alternating (odd rounds loadgen first, even rounds wrk first),
//! so a drift of the server or the machine over time does not favour either loader. The server's tree CPU
//! (/proc) is read around every run: per response it should be the same under both loaders; equal CPU per
//! response with fewer req/s means that loader left the server idle.
//!
//! Exit codes: 0 every server agrees, 1 some server disagrees, 2 a run could not be made or did not count
//! (a missing prerequisite, a server that did not start or answered wrongly, wrk or loadgen errors, non-2xx),
//! 64 bad flags, 130 interrupted.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;

use crate::cells::{self, Bench, Server};
use crate::process::{self, Spawned};
use crate::procfs;
use crate::records;
use crate::runtimes::{self, Paths, Runtime, ServerEnv};
use crate::workloads::{self, Plan};

/// The loaders agree when |loadgen ÷ wrk − 1| is at most this, in percent.
pub const AGREE_PCT: f64 = 5.0;
/// Both loaders' per-request timeout (wrk's default is 2 s; loadgen's compare runs use 5 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a server may take to its first 200.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// wrk gets this long past its own `-d` before it is killed and the run fails.
const WRK_SLACK: Duration = Duration::from_secs(30);
/// The path both loaders load.
const PATH: &str = "/api/hello";
const WRK_HINT: &str = "run `bash bench/setup.sh` (it installs wrk), or `apt-get install wrk`";

#[derive(Debug, Clone, Args)]
pub struct CalibrateArgs {
    /// Comma list of the servers to calibrate on: floor, node.
    #[arg(long, env = "COMPARE_CALIBRATE_SERVERS", default_value = "floor,node")]
    pub servers: String,
    /// Measured rounds per server (one run per loader each, the order alternating) [default: 3; --quick: 1].
    #[arg(long, env = "COMPARE_CALIBRATE_RUNS")]
    pub runs: Option<u32>,
    /// Length of every measured run, whole seconds (wrk's -d takes seconds) [default: 10s; --quick: 2s].
    #[arg(long, env = "COMPARE_CALIBRATE_DURATION")]
    pub duration: Option<String>,
    /// Discarded warmup per server and loader, whole seconds, 0 to skip [default: 5s; --quick: 1s].
    #[arg(long, env = "COMPARE_CALIBRATE_WARMUP")]
    pub warmup: Option<String>,
    /// Connections, the same for both loaders.
    #[arg(long, env = "COMPARE_CALIBRATE_CONNECTIONS", default_value_t = 100)]
    pub connections: u32,
    /// taskset list for the server.
    #[arg(long, env = "COMPARE_CALIBRATE_SERVER_CORES", default_value = "0")]
    pub server_cores: String,
    /// taskset list for both loaders (and compare itself); each loader runs one thread per core.
    #[arg(long, env = "COMPARE_CALIBRATE_LOADER_CORES", default_value = "1")]
    pub loader_cores: String,
    /// Where the Markdown goes [default: <repo>/bench/results].
    #[arg(long, env = "COMPARE_CALIBRATE_OUT_DIR")]
    pub out_dir: Option<PathBuf>,
    /// Directory of loadgen [default: $CARGO_TARGET_DIR/release or <repo>/target/release].
    #[arg(long, env = "COMPARE_CALIBRATE_BIN_DIR")]
    pub bin_dir: Option<PathBuf>,
    /// The workspace root (bench/peers lives there) [default: found from the current directory upwards].
    #[arg(long, env = "COMPARE_CALIBRATE_REPO")]
    pub repo: Option<PathBuf>,
    /// A smoke run: 1 s warmup, one round of 2 s (explicit flags win).
    #[arg(long, env = "COMPARE_CALIBRATE_QUICK")]
    pub quick: bool,
}

/// Everything a calibration needs, resolved.
#[derive(Debug, Clone)]
pub struct Config {
    pub paths: Paths,
    pub servers: Vec<Runtime>,
    pub runs: u32,
    pub duration: Duration,
    pub warmup: Duration,
    pub connections: u32,
    /// Per loader: one per loader core (at most one per connection).
    pub threads: usize,
    pub server_cores: String,
    pub loader_cores: String,
    pub out_dir: PathBuf,
    /// compare's argv, exactly.
    pub command: Vec<String>,
}

/// A duration wrk can take: whole seconds (0 only where `zero_ok`).
fn whole_seconds(flag: &str, raw: &str, zero_ok: bool) -> anyhow::Result<Duration> {
    let d = loadgen::cli::parse_duration(raw).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))?;
    if d.subsec_nanos() != 0 {
        bail!("--{flag} must be whole seconds (wrk's -d takes seconds), not {raw:?}");
    }
    if d.is_zero() && !zero_ok {
        bail!("--{flag} must be at least 1s");
    }
    Ok(d)
}

/// `floor,node` → the runtimes, in the order given; only those two are calibrated on.
pub fn parse_servers(text: &str) -> anyhow::Result<Vec<Runtime>> {
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let rt = match name {
            "floor" => Runtime::Floor,
            "node" => Runtime::Node,
            _ => bail!("--servers: unknown server {name:?}; choose from floor, node"),
        };
        if !out.contains(&rt) {
            out.push(rt);
        }
    }
    if out.is_empty() {
        bail!("--servers: none given; choose from floor, node");
    }
    Ok(out)
}

impl CalibrateArgs {
    /// Defaults, `--quick` and paths applied (as the comparison's own flags resolve them).
    pub fn resolve(&self, command: Vec<String>, compare_exe: PathBuf) -> anyhow::Result<Config> {
        let cwd = std::env::current_dir().context("current directory")?;
        let repo = match &self.repo {
            Some(r) => cwd.join(r),
            None => crate::cli::find_repo(&cwd),
        };
        let bin_dir = match &self.bin_dir {
            Some(b) => cwd.join(b),
            None => runtimes::default_bin_dir(&repo, std::env::var_os("CARGO_TARGET_DIR").as_deref().map(Path::new)),
        };
        let q = self.quick;
        let runs = self.runs.unwrap_or(if q { 1 } else { 3 });
        if runs == 0 {
            bail!("--runs must be at least 1");
        }
        let duration =
            whole_seconds("duration", self.duration.as_deref().unwrap_or(if q { "2s" } else { "10s" }), false)?;
        let warmup = whole_seconds("warmup", self.warmup.as_deref().unwrap_or(if q { "1s" } else { "5s" }), true)?;
        if self.connections == 0 {
            bail!("--connections must be at least 1");
        }
        procfs::parse_cores(&self.server_cores).context("--server-cores")?;
        let loader = procfs::parse_cores(&self.loader_cores).context("--loader-cores")?;
        let threads = threads(loader.len(), self.connections);
        Ok(Config {
            paths: Paths { repo: repo.clone(), bin_dir, compare_exe },
            servers: parse_servers(&self.servers)?,
            runs,
            duration,
            warmup,
            connections: self.connections,
            threads,
            server_cores: self.server_cores.clone(),
            loader_cores: self.loader_cores.clone(),
            out_dir: self.out_dir.as_ref().map_or_else(|| repo.join("bench/results"), |d| cwd.join(d)),
            command,
        })
    }
}

/// Threads per loader: one per loader core, never more than connections (as `cells::run_loadgen` picks).
pub fn threads(loader_cores: usize, connections: u32) -> usize {
    loader_cores.clamp(1, connections.max(1) as usize)
}

// ---------------------------------------------------------------------------------------------------------
// wrk's text output
// ---------------------------------------------------------------------------------------------------------

/// wrk's socket error counters (printed only when one is non-zero).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketErrors {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
}

impl SocketErrors {
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout
    }
}

/// What we use of wrk's output (with `--latency`).
#[derive(Debug, Clone, PartialEq)]
pub struct WrkOutput {
    /// "N requests in …": completed responses.
    pub requests: u64,
    /// The run's length as wrk measured it.
    pub duration_s: f64,
    /// "Requests/sec:".
    pub req_per_s: f64,
    /// The thread stats' average latency.
    pub latency_avg_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub socket_errors: SocketErrors,
    /// "Non-2xx or 3xx responses:" (wrk cannot tell 3xx from 2xx; the hello servers never redirect).
    pub non_2xx_3xx: u64,
}

/// A wrk time (`477.00us`, `2.34ms`, `2.00s`, `1.00m`, `1.00h`) in µs.
pub fn parse_wrk_time_us(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = text.split_at(split);
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    let value: f64 = num.parse().ok()?;
    value.is_finite().then_some(value * scale)
}

/// Parses wrk's report; an error names the line it lacks.
pub fn parse_wrk(text: &str) -> anyhow::Result<WrkOutput> {
    let mut requests = None;
    let mut req_per_s = None;
    let mut latency_avg_us = None;
    let mut p50_us = None;
    let mut p99_us = None;
    let mut socket_errors = SocketErrors::default();
    let mut non_2xx_3xx = 0;
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            // "278416 requests in 2.00s, 27.35MB read"
            [n, "requests", "in", dur, ..] => {
                let n: u64 = n.parse().with_context(|| format!("wrk: bad request count in {line:?}"))?;
                let dur = parse_wrk_time_us(dur.trim_end_matches(','))
                    .with_context(|| format!("wrk: bad duration in {line:?}"))?;
                requests = Some((n, dur / 1e6));
            }
            ["Requests/sec:", v] => {
                req_per_s = Some(v.parse::<f64>().with_context(|| format!("wrk: bad rate in {line:?}"))?);
            }
            ["Latency", avg, ..] if *avg != "Distribution" => latency_avg_us = parse_wrk_time_us(avg),
            ["50%", v] => p50_us = parse_wrk_time_us(v),
            ["99%", v] => p99_us = parse_wrk_time_us(v),
            ["Socket", "errors:", rest @ ..] => {
                // "connect 0, read 10, write 0, timeout 0"
                for pair in rest.chunks(2) {
                    let [kind, n] = pair else { bail!("wrk: bad socket error line {line:?}") };
                    let n: u64 =
                        n.trim_end_matches(',').parse().with_context(|| format!("wrk: bad count in {line:?}"))?;
                    match *kind {
                        "connect" => socket_errors.connect = n,
                        "read" => socket_errors.read = n,
                        "write" => socket_errors.write = n,
                        "timeout" => socket_errors.timeout = n,
                        other => bail!("wrk: unknown socket error kind {other:?} in {line:?}"),
                    }
                }
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => {
                non_2xx_3xx = n.parse().with_context(|| format!("wrk: bad count in {line:?}"))?;
            }
            _ => {}
        }
    }
    let missing = |what: &str| anyhow::anyhow!("wrk's output lacks {what}");
    let (requests, duration_s) = requests.ok_or_else(|| missing("the \"N requests in T\" line"))?;
    Ok(WrkOutput {
        requests,
        duration_s,
        req_per_s: req_per_s.ok_or_else(|| missing("\"Requests/sec:\""))?,
        latency_avg_us: latency_avg_us.ok_or_else(|| missing("the Latency thread stats"))?,
        p50_us: p50_us.ok_or_else(|| missing("the 50% percentile (was --latency given?)"))?,
        p99_us: p99_us.ok_or_else(|| missing("the 99% percentile (was --latency given?)"))?,
        socket_errors,
        non_2xx_3xx,
    })
}

// ---------------------------------------------------------------------------------------------------------
// Runs
// ---------------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loader {
    Loadgen,
    Wrk,
}

impl Loader {
    pub fn name(self) -> &'static str {
        match self {
            Loader::Loadgen => "loadgen",
            Loader::Wrk => "wrk",
        }
    }
}

/// Which loader goes first in a round (1-based): loadgen in odd rounds, wrk in even ones.
pub fn order(round: u32) -> [Loader; 2] {
    if round % 2 == 1 { [Loader::Loadgen, Loader::Wrk] } else { [Loader::Wrk, Loader::Loadgen] }
}

/// One measured run of one loader against one server.
#[derive(Debug, Clone, PartialEq)]
pub struct LoaderRun {
    pub loader: Loader,
    pub round: u32,
    pub req_per_s: f64,
    pub requests: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// utime+stime of the server's process tree over the loader's lifetime, per response.
    pub server_cpu_us_per_resp: Option<f64>,
    /// Non-idle share of the server cores over the run, percent.
    pub server_busy_pct: f64,
    /// Non-idle share of the loader cores over the run, percent.
    pub loader_busy_pct: f64,
}

/// One server's calibration.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerResult {
    pub server: Runtime,
    pub version: Option<String>,
    pub runs: Vec<LoaderRun>,
    /// Why the calibration on this server could not be completed; its runs so far are kept.
    pub failure: Option<String>,
    /// The last argv of each loader, as run.
    pub loadgen_argv: Vec<String>,
    pub wrk_argv: Vec<String>,
}

/// A server's verdict: the medians of each loader's req/s and their ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub loadgen_req_per_s: f64,
    pub wrk_req_per_s: f64,
    /// loadgen ÷ wrk: the median of the per-round ratios (each round's two runs are back to back on the
    /// same server, so a server that drifts over the rounds, as Node's JIT and GC do, cancels out), or the
    /// medians' ratio when no round has both.
    pub ratio: f64,
    pub agree: bool,
    /// The server cores were under 90% busy with one of the loaders: that loader set the pace, so the
    /// req/s compare the loaders' own speed, not their measurement of the server. Not judged.
    pub loader_bound: bool,
    /// Not within the tolerance, but the per-round ratios fall on both sides of 1: the server's own
    /// run-to-run variation is wider than the difference, so no difference is shown either.
    pub inconclusive: bool,
}

pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 })
}

/// The medians' ratio, `agree` when within ±[`AGREE_PCT`]; `None` without runs of both loaders or with
/// wrk at zero.
pub fn verdict(loadgen: &[f64], wrk: &[f64]) -> Option<Verdict> {
    let (l, w) = (median(loadgen)?, median(wrk)?);
    if w <= 0.0 {
        return None;
    }
    let ratio = l / w;
    // A hair of tolerance so that exactly 5% (as printed) counts as within.
    Some(Verdict {
        loadgen_req_per_s: l,
        wrk_req_per_s: w,
        ratio,
        agree: agrees(ratio),
        loader_bound: false,
        inconclusive: false,
    })
}

fn agrees(ratio: f64) -> bool {
    (ratio - 1.0).abs() <= AGREE_PCT / 100.0 + 1e-12
}

impl ServerResult {
    fn values(&self, loader: Loader, f: impl Fn(&LoaderRun) -> Option<f64>) -> Vec<f64> {
        self.runs.iter().filter(|r| r.loader == loader).filter_map(f).collect()
    }

    pub fn verdict(&self) -> Option<Verdict> {
        if self.failure.is_some() {
            return None;
        }
        let mut v = verdict(
            &self.values(Loader::Loadgen, |r| Some(r.req_per_s)),
            &self.values(Loader::Wrk, |r| Some(r.req_per_s)),
        )?;
        let rounds = self.round_ratios();
        if let Some(paired) = median(&rounds) {
            v.ratio = paired;
            v.agree = agrees(paired);
            // With n paired rounds the median lies between their min and max with probability 1 − 2^(1−n)
            // (94% for 5): a range that holds 1 shows no difference.
            let lo = rounds.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = rounds.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            v.inconclusive = !v.agree && rounds.len() >= 2 && lo <= 1.0 && hi >= 1.0;
        }
        v.loader_bound = !self.idle_under().is_empty();
        Some(v)
    }

    /// The loaders under which the server cores were (median over the rounds) less than 90% busy.
    pub fn idle_under(&self) -> Vec<Loader> {
        [Loader::Loadgen, Loader::Wrk]
            .into_iter()
            .filter(|&l| {
                median(&self.values(l, |x| Some(x.server_busy_pct))).is_some_and(|b| b < cells::LOADER_BOUND_PCT)
            })
            .collect()
    }

    /// loadgen ÷ wrk req/s per round that has both.
    pub fn round_ratios(&self) -> Vec<f64> {
        let rounds: BTreeSet<u32> = self.runs.iter().map(|r| r.round).collect();
        rounds
            .into_iter()
            .filter_map(|round| {
                let of = |l: Loader| self.runs.iter().find(|r| r.round == round && r.loader == l);
                let (a, b) = (of(Loader::Loadgen)?, of(Loader::Wrk)?);
                (b.req_per_s > 0.0).then(|| a.req_per_s / b.req_per_s)
            })
            .collect()
    }
}

/// Whether this verdict says the loaders measured the server differently (a loader-bound server is not
/// judged: there the req/s are the loaders' own speed).
fn disagrees(v: &Verdict) -> bool {
    !v.loader_bound && !v.agree && !v.inconclusive
}

/// What the exit code says: 2 when a server failed or none could be judged, else 1 when one disagrees or is
/// inconclusive (agreement is not shown), else 0.
pub fn exit_code(results: &[ServerResult]) -> u8 {
    let judged = results.iter().filter_map(ServerResult::verdict).filter(|v| !v.loader_bound).count();
    if results.iter().any(|r| r.failure.is_some() || r.verdict().is_none()) || judged == 0 {
        2
    } else if results.iter().any(|r| r.verdict().is_some_and(|v| disagrees(&v) || (v.inconclusive && !v.loader_bound)))
    {
        1
    } else {
        0
    }
}

/// wrk's path, found on PATH (taskset execs it by that path, so the run uses the wrk that was checked).
pub fn find_wrk() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("wrk")).find(|p| p.is_file())
}

/// The first line a program prints for `flag` (stdout, else stderr), whatever its exit code (`wrk -v` exits 1).
fn version_line(program: &Path, flag: &str) -> Option<String> {
    let out = Command::new(program).arg(flag).stdin(Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(if out.stdout.is_empty() { &out.stderr } else { &out.stdout }).into_owned();
    text.lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_string)
}

/// Everything missing, each with its install step; empty when all is there.
pub fn missing_prerequisites(cfg: &Config) -> Vec<String> {
    let hello = workloads::by_name("hello-bare").into_iter().collect::<Vec<_>>();
    let mut missing = runtimes::missing_prerequisites(&hello, &cfg.servers, &cfg.paths, false, false);
    if find_wrk().is_none() {
        missing.push(format!("wrk not found on PATH: {WRK_HINT}"));
    }
    missing
}

/// One wrk process and what came of it.
#[derive(Debug)]
struct WrkRun {
    argv: Vec<String>,
    output: anyhow::Result<WrkOutput>,
    exit: Option<i32>,
    timed_out: bool,
    stderr: String,
}

fn run_wrk(
    cfg: &Config,
    wrk: &Path,
    logdir: &Path,
    port: u16,
    duration: Duration,
    tag: &str,
) -> anyhow::Result<WrkRun> {
    let argv: Vec<String> = vec![
        "taskset".into(),
        "-c".into(),
        cfg.loader_cores.clone(),
        wrk.to_string_lossy().into_owned(),
        "-t".into(),
        cfg.threads.to_string(),
        "-c".into(),
        cfg.connections.to_string(),
        "-d".into(),
        format!("{}s", duration.as_secs()),
        // The same per-request timeout as loadgen's, so neither gives up on a slow answer sooner.
        "--timeout".into(),
        format!("{}s", REQUEST_TIMEOUT.as_secs()),
        "--latency".into(),
        format!("http://127.0.0.1:{port}{PATH}"),
    ];
    let out_path = logdir.join(format!("{tag}.out"));
    let err_path = logdir.join(format!("{tag}.err"));
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null()).stdout(File::create(&out_path)?).stderr(File::create(&err_path)?);
    let mut proc = Spawned::spawn(cmd, "wrk").context("starting wrk")?;
    let status = proc.wait_timeout(duration + WRK_SLACK)?;
    let timed_out = status.is_none();
    if timed_out {
        proc.kill();
    }
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    Ok(WrkRun { argv, output: parse_wrk(&stdout), exit: status.and_then(|s| s.code()), timed_out, stderr })
}

/// Why a wrk run does not count; empty when it does.
fn wrk_problems(run: &WrkRun, warmup: bool) -> Vec<String> {
    let mut reasons = Vec::new();
    if run.timed_out {
        reasons.push(format!("wrk still running {WRK_SLACK:?} after its duration; killed"));
    } else if run.exit != Some(0) {
        reasons.push(format!("wrk exited {:?}: {}", run.exit, run.stderr.trim()));
    }
    match &run.output {
        Err(e) => reasons.push(format!("{e:#}")),
        Ok(o) => {
            if o.non_2xx_3xx > 0 {
                reasons.push(format!("{} non-2xx/3xx responses", o.non_2xx_3xx));
            }
            let e = o.socket_errors;
            if e.total() > 0 {
                reasons.push(format!(
                    "socket errors: connect {}, read {}, write {}, timeout {}",
                    e.connect, e.read, e.write, e.timeout
                ));
            }
            if !warmup && o.requests == 0 {
                reasons.push("no response completed".to_string());
            }
        }
    }
    reasons
}

/// The server's CPU and both core sets' counters, read just before and just after a loader runs.
struct Window {
    server_cpu_us: Option<f64>,
    server_ticks: procfs::CoreTicks,
    loader_ticks: procfs::CoreTicks,
}

struct Cores {
    server: BTreeSet<usize>,
    loader: BTreeSet<usize>,
}

impl Window {
    fn read(pid: Option<u32>, cores: &Cores) -> anyhow::Result<Window> {
        Ok(Window {
            server_cpu_us: pid.map(|p| procfs::tree_cpu(p).total_us()),
            server_ticks: procfs::core_ticks(&cores.server)?,
            loader_ticks: procfs::core_ticks(&cores.loader)?,
        })
    }
}

/// Runs one loader once against the server; the run's figures, or why it does not count.
fn one_run(
    cfg: &Config,
    bench: &Bench,
    wrk: &Path,
    server: &Server,
    cores: &Cores,
    (loader, round, warmup): (Loader, u32, bool),
    argv_out: &mut Vec<String>,
) -> anyhow::Result<Result<LoaderRun, String>> {
    let pid = server.pid();
    let duration = if warmup { cfg.warmup } else { cfg.duration };
    let tag = format!(
        "{}-{}-{}",
        server_name(server),
        loader.name(),
        if warmup { "warmup".into() } else { round.to_string() }
    );
    let before = Window::read(pid, cores)?;
    let (result, argv) = match loader {
        Loader::Loadgen => {
            let mut load = Plan::hello(hello_workload()?).load;
            load.connections = cfg.connections;
            let run = cells::run_loadgen(bench, server.port, &load, duration, None, &tag)?;
            let reasons = cells::void_reasons(&run, &[], warmup);
            let figures = run
                .report
                .as_ref()
                .map(|r| (r.req_per_s, r.responses, r.latency.p50_us as f64, r.latency.p99_us as f64));
            (
                if reasons.is_empty() {
                    figures.ok_or_else(|| "no loadgen report".to_string())
                } else {
                    Err(reasons.join("; "))
                },
                run.argv,
            )
        }
        Loader::Wrk => {
            let run = run_wrk(cfg, wrk, &bench.logdir, server.port, duration, &tag)?;
            let reasons = wrk_problems(&run, warmup);
            let figures = run.output.as_ref().ok().map(|o| (o.req_per_s, o.requests, o.p50_us, o.p99_us));
            (
                if reasons.is_empty() {
                    figures.ok_or_else(|| "no wrk output".to_string())
                } else {
                    Err(reasons.join("; "))
                },
                run.argv,
            )
        }
    };
    let after = Window::read(pid, cores)?;
    *argv_out = argv;
    Ok(result.map(|(req_per_s, requests, p50_us, p99_us)| {
        let cpu = match (before.server_cpu_us, after.server_cpu_us) {
            (Some(a), Some(b)) if requests > 0 => Some((b - a).max(0.0) / requests as f64),
            _ => None,
        };
        LoaderRun {
            loader,
            round,
            req_per_s,
            requests,
            p50_us,
            p99_us,
            server_cpu_us_per_resp: cpu,
            server_busy_pct: procfs::busy_pct(before.server_ticks, after.server_ticks),
            loader_busy_pct: procfs::busy_pct(before.loader_ticks, after.loader_ticks),
        }
    }))
}

fn hello_workload() -> anyhow::Result<workloads::Workload> {
    workloads::by_name("hello-bare").context("the hello-bare workload is gone")
}

fn server_name(server: &Server) -> String {
    format!("server-{}", server.port)
}

/// Calibrates on one server. It is started once and serves the warmups and every round: calibration compares
/// the loaders, not the server, and one warmed server gives both the same state (heap, JIT, caches); a fresh
/// server per run would add start-to-start variance (Node's JIT decisions, heap layout) to the very difference
/// being judged. Drift of that one server over time is cancelled by alternating which loader goes first.
fn calibrate_server(
    cfg: &Config,
    bench: &Bench,
    wrk: &Path,
    rt: Runtime,
    cores: &Cores,
) -> anyhow::Result<ServerResult> {
    let workload = hello_workload()?;
    let plan = Plan::hello(workload.clone());
    let env = ServerEnv { floor_body: Some(workloads::HELLO_BODY.to_vec()), ..ServerEnv::default() };
    let spec = runtimes::server_spec(rt, &workload, &cfg.paths, &env);
    let version = match rt {
        Runtime::Floor => Some(format!("compare {}", env!("CARGO_PKG_VERSION"))),
        _ => runtimes::version(rt, workload.service, &cfg.paths),
    };
    let mut result = ServerResult {
        server: rt,
        version,
        runs: Vec::new(),
        failure: None,
        loadgen_argv: Vec::new(),
        wrk_argv: Vec::new(),
    };
    let (mut server, _) = match cells::start_ready(&spec, bench, &plan.ready_path) {
        Ok(s) => s,
        Err(e) => {
            result.failure = Some(format!("did not start: {e:#}"));
            return Ok(result);
        }
    };
    let outcome = rounds(cfg, bench, wrk, &plan, &mut server, cores, &mut result);
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
    wrk: &Path,
    plan: &Plan,
    server: &mut Server,
    cores: &Cores,
    result: &mut ServerResult,
) -> anyhow::Result<()> {
    let name = result.server.name();
    std::thread::sleep(cells::SETTLE);
    let probe = &plan.probes[plan.primary];
    if let Some(contract) = &probe.contract {
        let got = probe.ask(server.port);
        if let Some(how) = workloads::difference(probe, &got, &Ok(contract.clone()), false) {
            result.failure = Some(format!("{} answered off the hello contract: {how}", probe.request_line()));
            return Ok(());
        }
    }
    let mut steps: Vec<(Loader, u32, bool)> = Vec::new();
    if !cfg.warmup.is_zero() {
        steps.extend(order(1).map(|l| (l, 0, true)));
    }
    for round in 1..=cfg.runs {
        steps.extend(order(round).map(|l| (l, round, false)));
    }
    for (loader, round, warmup) in steps {
        process::check_interrupted()?;
        let what = if warmup { "warmup".to_string() } else { format!("round {round}/{}", cfg.runs) };
        eprintln!(
            "calibrate: {name} {what}: {} for {:?}",
            loader.name(),
            if warmup { cfg.warmup } else { cfg.duration }
        );
        let argv_out = match loader {
            Loader::Loadgen => &mut result.loadgen_argv,
            Loader::Wrk => &mut result.wrk_argv,
        };
        let run = one_run(cfg, bench, wrk, server, cores, (loader, round, warmup), argv_out)?;
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
        std::thread::sleep(cells::SETTLE);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------------------

/// Everything the Markdown shows.
#[derive(Debug, Clone)]
pub struct Calibration {
    pub command: Vec<String>,
    pub started_at: String,
    pub machine: records::Machine,
    pub wrk_version: String,
    pub loadgen_version: String,
    pub server_cores: String,
    pub loader_cores: String,
    pub threads: usize,
    pub connections: u32,
    pub runs: u32,
    pub duration: Duration,
    pub warmup: Duration,
    pub results: Vec<ServerResult>,
}

/// A shell word: as is when it is plain, else single-quoted.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

fn shell_line(argv: &[String]) -> String {
    argv.iter().map(|a| shell_word(a)).collect::<Vec<_>>().join(" ")
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".to_string(), |x| format!("{x:.digits$}"))
}

/// The Markdown summary.
pub fn render(c: &Calibration) -> String {
    let mut s = String::new();
    let m = &c.machine;
    let _ = writeln!(s, "# loadgen vs wrk calibration\n");
    let _ = writeln!(s, "- command: `{}`", shell_line(&c.command));
    let _ = writeln!(s, "- when: {} (UTC)", c.started_at);
    let _ = writeln!(
        s,
        "- machine: {}, {}, {} CPUs, {}",
        m.hostname,
        m.cpu_model.as_deref().unwrap_or("unknown CPU"),
        m.cpus,
        m.kernel
    );
    let _ = writeln!(s, "- loaders: {}; {}", c.wrk_version, c.loadgen_version);
    let _ = writeln!(
        s,
        "- layout: servers on cores {}, both loaders (and compare) on cores {} (taskset); {} thread(s), {} connections, \
         closed loop, request timeout {}s, GET {PATH}",
        c.server_cores,
        c.loader_cores,
        c.threads,
        c.connections,
        REQUEST_TIMEOUT.as_secs()
    );
    let _ = writeln!(
        s,
        "- method: per server one start; a discarded {}s warmup by each loader; then {} round(s) of {}s per loader, \
         loadgen first in odd rounds and wrk first in even ones, all on that same warmed server",
        c.warmup.as_secs(),
        c.runs,
        c.duration.as_secs()
    );
    for r in &c.results {
        if !r.loadgen_argv.is_empty() {
            let _ = writeln!(s, "- {} loadgen: `{}`", r.server.name(), shell_line(&r.loadgen_argv));
        }
        if !r.wrk_argv.is_empty() {
            let _ = writeln!(s, "- {} wrk: `{}`", r.server.name(), shell_line(&r.wrk_argv));
        }
    }

    let _ = writeln!(s, "\n## Runs\n");
    let _ = writeln!(
        s,
        "| server | round | loader | req/s | responses | p50 ms | p99 ms | server CPU µs/resp | server cores busy % \
         | loader cores busy % |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    for r in &c.results {
        for run in &r.runs {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.0} | {} | {:.3} | {:.3} | {} | {:.0} | {:.0} |",
                r.server.name(),
                run.round,
                run.loader.name(),
                run.req_per_s,
                run.requests,
                run.p50_us / 1e3,
                run.p99_us / 1e3,
                opt(run.server_cpu_us_per_resp, 2),
                run.server_busy_pct,
                run.loader_busy_pct
            );
        }
    }

    let _ = writeln!(s, "\n## Verdict\n");
    let _ = writeln!(
        s,
        "Judged on throughput only: loadgen ÷ wrk req/s, the median of the per-round ratios (each round's two runs \
         are back to back on the same server, in alternating order), `agree` when within ±{AGREE_PCT}%, `disagree` when \
         not and every round's ratio is on the same side of 1, `inconclusive` when not but the rounds fall on both \
         sides (the server's own variation is wider than the difference: more or longer rounds can settle it); a server \
         whose cores were under {:.0}% busy with either loader is `loader-bound` and not judged, since there the req/s \
         are the loaders' own speed. \
         Latencies are printed, not judged: both loaders run closed loop here, so both leave out the time a request \
         would have waited behind a slow one (coordinated omission), and each times requests its own way (wrk from its \
         per-thread histogram, loadgen from HDR histograms from its own write).\n",
        cells::LOADER_BOUND_PCT
    );
    let _ = writeln!(
        s,
        "| server | version | loadgen req/s | wrk req/s | loadgen ÷ wrk | per round | server CPU µs/resp loadgen / wrk \
         | verdict |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    let mut lines = Vec::new();
    for r in &c.results {
        let cpu = |l: Loader| median(&r.values(l, |x| x.server_cpu_us_per_resp));
        let rounds = r.round_ratios();
        let spread = match (rounds.iter().copied().reduce(f64::min), rounds.iter().copied().reduce(f64::max)) {
            (Some(lo), Some(hi)) => format!("{lo:.3}–{hi:.3}"),
            _ => "–".to_string(),
        };
        let v = r.verdict();
        let word = match (&r.failure, v) {
            (Some(_), _) | (None, None) => "failed",
            (None, Some(v)) if v.loader_bound => "loader-bound",
            (None, Some(v)) if v.agree => "agree",
            (None, Some(v)) if v.inconclusive => "inconclusive",
            (None, Some(_)) => "disagree",
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {spread} | {} / {} | {word} |",
            r.server.name(),
            r.version.as_deref().unwrap_or("unknown"),
            opt(v.map(|v| v.loadgen_req_per_s), 0),
            opt(v.map(|v| v.wrk_req_per_s), 0),
            opt(v.map(|v| v.ratio), 3),
            opt(cpu(Loader::Loadgen), 2),
            opt(cpu(Loader::Wrk), 2),
        );
        match (&r.failure, v) {
            (Some(why), _) => lines.push(format!("- {}: **failed**: {why}", r.server.name())),
            (None, None) => lines.push(format!("- {}: **failed**: no run of both loaders", r.server.name())),
            (None, Some(v)) => {
                let pct = (v.ratio - 1.0) * 100.0;
                let within = if v.agree { "within" } else { "outside" };
                lines.push(format!(
                    "- {}: **{word}** (loadgen ÷ wrk = {:.3}, {pct:+.1}%, {within} ±{AGREE_PCT}%)",
                    r.server.name(),
                    v.ratio
                ));
                let idle: Vec<&str> = r.idle_under().into_iter().map(Loader::name).collect();
                if !idle.is_empty() {
                    lines.push(format!(
                        "  - the server cores were under {:.0}% busy with {}: the loader, not the server, set the pace \
                         there, so the req/s compare the loaders' own speed (loadgen ÷ wrk = {:.3}) rather than their \
                         measurement of the server; not judged",
                        cells::LOADER_BOUND_PCT,
                        idle.join(" and "),
                        v.ratio
                    ));
                }
            }
        }
    }
    let _ = writeln!(s);
    for l in &lines {
        let _ = writeln!(s, "{l}");
    }
    let overall = match exit_code(&c.results) {
        0 => {
            let bound: Vec<&str> = c
                .results
                .iter()
                .filter(|r| r.verdict().is_some_and(|v| v.loader_bound))
                .map(|r| r.server.name())
                .collect();
            let except = if bound.is_empty() {
                String::new()
            } else {
                format!(" ({} loader-bound: not judged)", bound.join(", "))
            };
            format!("loadgen and wrk agree within ±{AGREE_PCT}% on every server they could be judged on{except}")
        }
        1 => {
            let which: Vec<&str> = c
                .results
                .iter()
                .filter(|r| r.verdict().is_some_and(|v| disagrees(&v)))
                .map(|r| r.server.name())
                .collect();
            let unsure: Vec<&str> = c
                .results
                .iter()
                .filter(|r| r.verdict().is_some_and(|v| v.inconclusive && !v.loader_bound))
                .map(|r| r.server.name())
                .collect();
            match (which.is_empty(), unsure.is_empty()) {
                (false, true) => format!("loadgen and wrk disagree by more than {AGREE_PCT}% on {}", which.join(", ")),
                (true, _) => format!(
                    "agreement within ±{AGREE_PCT}% not shown on {}: the server varied more between rounds than the \
                     loaders differ (rerun with more --runs or a longer --duration)",
                    unsure.join(", ")
                ),
                (false, false) => format!(
                    "loadgen and wrk disagree by more than {AGREE_PCT}% on {}; inconclusive on {}",
                    which.join(", "),
                    unsure.join(", ")
                ),
            }
        }
        _ => "incomplete: a run failed or every server was loader-bound (see above), so agreement is not established"
            .to_string(),
    };
    let _ = writeln!(s, "\n**Verdict: {overall}.**");
    let _ = writeln!(
        s,
        "\nServer CPU per response is the server tree's utime+stime over each loader's run (/proc) divided by the \
         responses that loader counted: the same work per response under both loaders is expected; a loader with \
         equal CPU per response but fewer req/s left the server idle."
    );
    s
}

// ---------------------------------------------------------------------------------------------------------
// The subcommand
// ---------------------------------------------------------------------------------------------------------

/// Keeps compare itself (readiness polls, /proc reads) off the server's cores.
fn pin_self(cores: &str) -> anyhow::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    for core in procfs::parse_cores(cores)? {
        set.set(core);
    }
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// Runs the calibration: prerequisites, every server, the Markdown (stdout and file). The output path.
pub fn calibrate(cfg: &Config) -> anyhow::Result<(Calibration, PathBuf)> {
    let wrk = find_wrk().with_context(|| format!("wrk not found on PATH: {WRK_HINT}"))?;
    let machine = records::machine_info();
    let started_at = records::now_rfc3339();
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let md = cfg.out_dir.join(format!("{stamp}-{}-calibrate.md", machine.hostname));
    let work = tempfile::Builder::new().prefix("compare-calibrate-").tempdir().context("temp dir")?;
    let bench = Bench {
        loadgen: cfg.paths.loadgen(),
        server_cores: cfg.server_cores.clone(),
        loader_cores: cfg.loader_cores.clone(),
        warmup: cfg.warmup,
        duration: cfg.duration,
        request_timeout: REQUEST_TIMEOUT,
        ready_timeout: READY_TIMEOUT,
        logdir: work.path().to_path_buf(),
    };
    let cores =
        Cores { server: procfs::parse_cores(&cfg.server_cores)?, loader: procfs::parse_cores(&cfg.loader_cores)? };
    let mut results = Vec::new();
    for &rt in &cfg.servers {
        let started = Instant::now();
        let r = calibrate_server(cfg, &bench, &wrk, rt, &cores)?;
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
        // `wrk -v` goes on to its copyright and usage; the version is what comes before.
        wrk_version: version_line(&wrk, "-v")
            .map(|l| l.split(" Copyright").next().unwrap_or(&l).trim().to_string())
            .unwrap_or_else(|| "wrk (version unknown)".into()),
        loadgen_version: version_line(&cfg.paths.loadgen(), "--version")
            .unwrap_or_else(|| "loadgen (version unknown)".into()),
        server_cores: cfg.server_cores.clone(),
        loader_cores: cfg.loader_cores.clone(),
        threads: cfg.threads,
        connections: cfg.connections,
        runs: cfg.runs,
        duration: cfg.duration,
        warmup: cfg.warmup,
        results,
    };
    std::fs::create_dir_all(&cfg.out_dir).with_context(|| format!("creating {}", cfg.out_dir.display()))?;
    std::fs::write(&md, render(&calibration)).with_context(|| format!("writing {}", md.display()))?;
    Ok((calibration, md))
}

/// `compare calibrate`, start to exit code.
pub fn command(args: &CalibrateArgs) -> ExitCode {
    let exe = std::env::current_exe().unwrap_or_else(|_| "compare".into());
    let cfg = match args.resolve(std::env::args().collect(), exe) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("config error: {e:#}");
            return ExitCode::from(64);
        }
    };
    let missing = missing_prerequisites(&cfg);
    if !missing.is_empty() {
        eprintln!("compare calibrate: missing prerequisites:\n  - {}", missing.join("\n  - "));
        return ExitCode::from(2);
    }
    let overlap = procfs::parse_cores(&cfg.server_cores)
        .ok()
        .zip(procfs::parse_cores(&cfg.loader_cores).ok())
        .is_some_and(|(s, l)| !s.is_disjoint(&l));
    if overlap {
        eprintln!("warning: server and loader cores overlap; the loaders will take CPU from the server");
    }
    if let Err(e) = pin_self(&cfg.loader_cores) {
        eprintln!("warning: could not pin compare to cores {}: {e}", cfg.loader_cores);
    }
    process::install_panic_hook();
    if let Err(e) = process::install_signal_handler() {
        eprintln!("compare calibrate: installing the signal handler: {e:#}");
        return ExitCode::from(2);
    }
    match calibrate(&cfg) {
        Ok((c, md)) => {
            let text = render(&c);
            {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
            }
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
    fn times() {
        assert_eq!(parse_wrk_time_us("477.00us"), Some(477.0));
        assert_eq!(parse_wrk_time_us("2.34ms"), Some(2340.0));
        assert_eq!(parse_wrk_time_us("2.00s"), Some(2e6));
        assert_eq!(parse_wrk_time_us("1.50m"), Some(90e6));
        assert_eq!(parse_wrk_time_us("-nan%"), None);
        assert_eq!(parse_wrk_time_us("12"), None);
    }

    #[test]
    fn medians_and_verdicts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        let v = verdict(&[105.0], &[100.0]).expect("verdict");
        assert!(v.agree && (v.ratio - 1.05).abs() < 1e-12);
        assert!(!verdict(&[94.0], &[100.0]).expect("verdict").agree);
        assert!(verdict(&[1.0], &[]).is_none());
        assert_eq!(order(1), [Loader::Loadgen, Loader::Wrk]);
        assert_eq!(order(2), [Loader::Wrk, Loader::Loadgen]);
        assert_eq!(threads(1, 100), 1);
        assert_eq!(threads(4, 2), 2);
    }

    #[test]
    fn paired_verdicts() {
        let run = |loader, round, req_per_s, busy| LoaderRun {
            loader,
            round,
            req_per_s,
            requests: 1,
            p50_us: 1.0,
            p99_us: 1.0,
            server_cpu_us_per_resp: None,
            server_busy_pct: busy,
            loader_busy_pct: 100.0,
        };
        let result = |pairs: &[(f64, f64)], busy: f64| ServerResult {
            server: Runtime::Node,
            version: None,
            runs: pairs
                .iter()
                .zip(1..)
                .flat_map(|(&(l, w), i)| [run(Loader::Loadgen, i, l, busy), run(Loader::Wrk, i, w, busy)])
                .collect(),
            failure: None,
            loadgen_argv: Vec::new(),
            wrk_argv: Vec::new(),
        };
        let v = |pairs: &[(f64, f64)], busy| result(pairs, busy).verdict().expect("verdict");
        // Paired: a server that drifts between rounds still agrees when each round agrees.
        let drift = v(&[(100.0, 101.0), (200.0, 199.0), (150.0, 150.0)], 100.0);
        assert!(drift.agree && !drift.inconclusive);
        let unsure = v(&[(85.0, 100.0), (116.0, 100.0), (107.0, 100.0)], 100.0);
        assert!(!unsure.agree && unsure.inconclusive);
        let apart = v(&[(110.0, 100.0), (108.0, 100.0), (112.0, 100.0)], 100.0);
        assert!(!apart.agree && !apart.inconclusive);
        assert_eq!(exit_code(&[result(&[(110.0, 100.0), (108.0, 100.0)], 100.0)]), 1);
        assert_eq!(exit_code(&[result(&[(85.0, 100.0), (116.0, 100.0), (107.0, 100.0)], 100.0)]), 1);
        assert!(v(&[(120.0, 100.0)], 80.0).loader_bound);
        assert_eq!(exit_code(&[result(&[(120.0, 100.0)], 80.0)]), 2, "nothing judged");
        assert_eq!(exit_code(&[result(&[(120.0, 100.0)], 80.0), result(&[(101.0, 100.0)], 99.0)]), 0);
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_word("--body"), "--body");
        assert_eq!(shell_word(r#"{"a":1}"#), r#"'{"a":1}'"#);
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
