//! compare's command line: the comparison itself (no subcommand) and the subcommands, whose own flags live
//! with them (floor, report, calibrate, images). The comparison's flags are resolved into a
//! [`Config`](crate::settings::Config) (defaults, `--quick`, paths) before anything starts; a bad value is one
//! line on stderr and exit 64. Nothing in the library imports this module: it parses into settings.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};

use crate::measure_flags::{Defaults, MeasureArgs};
use crate::plan::runtimes::{self, Runtime};
use crate::plan::workloads;
use crate::settings::{CapacitySearch, Config, Soak};
use crate::system::cores::Cores;

#[derive(Debug, Parser)]
#[command(
    name = "compare",
    version,
    about = "Runs rust, bun, node and the floor per workload on pinned cores, checks they answer alike, measures \
             them interleaved, and writes JSONL records plus a Markdown summary",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Cmd>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Serve one pre-serialized JSON response to every request: the floor runtime
    Floor(crate::floor::FloorArgs),
    /// Re-render the Markdown summary (and the SVGs) from recorded JSONL files
    Report(crate::report::command::ReportArgs),
    /// Judge one or more runs' records by the repeatability rule: a verdict per workload, runtime and metric
    Verdict(crate::report::verdicts::VerdictArgs),
    /// Judge each published claim of the ledger (bench/claims.toml) on runs' records: one verdict per claim
    Claims(crate::report::claims::ClaimsArgs),
    /// Run loadgen and wrk against the same servers (the floor, the Node hello peer) and say whether they agree
    Calibrate(crate::calibrate::CalibrateArgs),
    /// Container image size and start time of docker-compose.yml's images, with the local Docker engine
    Images(crate::images::ImagesArgs),
    /// Export runs' closed-loop medians as JSON another tool reads: Bencher Metric Format (`--format bmf`)
    ///
    /// One benchmark per cell, keyed workload/runtime (`hello-bare/rust`), with the measures cpu_us_per_resp,
    /// req_per_s, p99_ms and rss_peak_mib: each the median over the cell's valid closed-loop rounds (at the
    /// workload's headline connection count and round trip, as `compare report` reads them) as `value`, their
    /// min and max as `lower_value` and `upper_value`. A measure no round measured is left out; a cell with no
    /// valid closed-loop round is left out and named on stderr. The JSON goes to stdout.
    Export(crate::export::ExportArgs),
    /// The performance gate: each budgeted cell's instructions and system calls per response (callgrind,
    /// strace) against bench/budget.toml; exit 1 over budget, 2 unable to measure; --update rewrites it
    Budget(crate::budget::BudgetArgs),
    /// Internal: the reaper compare starts for itself (kills compare's children if compare dies)
    #[command(hide = true)]
    Reap,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    // --workloads and --runtimes: their help is built from the types' own lists (workloads::list_help,
    // runtimes::list_help), so a workload or runtime added there is listed in `compare --help` too.
    #[arg(long, env = "COMPARE_WORKLOADS", default_value = "default", display_order = 0, help = workloads::list_help())]
    pub workloads: String,
    #[arg(long, env = "COMPARE_RUNTIMES", default_value = "all", display_order = 1, help = runtimes::list_help())]
    pub runtimes: String,
    /// One more cell per workload, repeatable: `NAME=http://127.0.0.1:PORT[,pid=PID]` for a server already
    /// running (CPU and RSS only with its pid; never restarted, no cold starts), or `NAME=cmd:COMMAND` for
    /// one compare starts per run with `sh -c` (PORT set, `{port}` replaced) like the built-in runtimes.
    #[arg(long = "target", value_name = "NAME=URL[,pid=PID]|NAME=cmd:COMMAND", display_order = 2)]
    pub targets: Vec<String>,
    // --runs, --duration, --warmup, --server-cores, --loader-cores, --out-dir, --quick, --bin-dir, --repo.
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Connections for every workload, instead of each workload's own (100, 50 for notes-write, 128 for metadata).
    /// A list (`16,64,256,512,1024`) sweeps: every closed-loop and open-loop round runs each runtime at each
    /// count, interleaved; the workload's tables use the count nearest its own, and a sweep section shows all.
    #[arg(long, env = "COMPARE_CONNECTIONS", value_delimiter = ',', value_name = "N[,N...]", display_order = 6)]
    pub connections: Vec<u32>,
    /// taskset list for the PostgreSQL and Redis compare starts.
    #[arg(long, env = "COMPARE_DB_CORES", default_value = "1", display_order = 9)]
    pub db_cores: String,
    /// Cold starts (exec→first 200) per runtime and workload [default: 15; --quick: 2].
    #[arg(long, env = "COMPARE_STARTUP_RUNS", display_order = 10)]
    pub startup_runs: Option<u32>,
    /// Open-loop rate for the latency tails, req/s; 0 skips them [default: half the slowest runtime's median
    /// closed-loop req/s].
    #[arg(long, env = "COMPARE_TAIL_RATE", display_order = 11)]
    pub tail_rate: Option<f64>,
    /// Put this round trip (half each way) between the servers and PostgreSQL and Redis, through a delay
    /// proxy on the database cores, on the workloads that query a database (ladder-postgres, notes-read,
    /// notes-write, metadata-cached). A list (`1ms,10ms,40ms`) runs every round at each value, interleaved;
    /// `0ms` is the proxy without delay [default: no proxy].
    #[arg(long, env = "COMPARE_DB_RTT", value_delimiter = ',', value_name = "RTT[,RTT...]", display_order = 7)]
    pub db_rtt: Vec<String>,
    /// Use this PostgreSQL (its databases named compare_* are created and dropped) instead of starting one.
    #[arg(long, env = "COMPARE_DATABASE_URL", display_order = 13)]
    pub database_url: Option<String>,
    /// Use this Redis instead of starting one.
    #[arg(long, env = "COMPARE_REDIS_URL", display_order = 14)]
    pub redis_url: Option<String>,
    /// Rows of the generated metadata dataset [default: 100000; --quick: 20000].
    #[arg(long, env = "COMPARE_ROWS", display_order = 18)]
    pub rows: Option<u64>,
    /// Notes seeded for notes-read.
    #[arg(long, env = "COMPARE_SEED_NOTES", default_value_t = 1000, display_order = 19)]
    pub seed_notes: u32,
    /// loadgen's per-request timeout; any timeout voids the run.
    #[arg(long, env = "COMPARE_REQUEST_TIMEOUT", default_value = "5s", display_order = 20)]
    pub request_timeout: String,
    /// Soak instead of comparing: per workload and runtime, one server under a fixed open-loop rate for this
    /// long (e.g. 1h), every server at the same time, each with its own loader; sampled every
    /// --soak-interval: RSS over time, its slope and a leak verdict. Checks still run first (one at a
    /// time); cold starts and closed/open rounds do not. To soak one server alone, name one runtime and
    /// one workload.
    #[arg(long, env = "COMPARE_SOAK", display_order = 21)]
    pub soak: Option<String>,
    /// Window between soak samples.
    #[arg(long, env = "COMPARE_SOAK_INTERVAL", default_value = "5s", display_order = 22)]
    pub soak_interval: String,
    /// The soak's fixed rate, req/s: low enough for every runtime (a soak looks for growth, not capacity).
    #[arg(long, env = "COMPARE_SOAK_RATE", default_value_t = 1000.0, display_order = 23)]
    pub soak_rate: f64,
    /// After the rounds, search each runtime's capacity at this p99 objective (e.g. 10ms): the highest
    /// open-loop rate whose p99 stays within it (`loadgen capacity`), a column and a chart per workload.
    /// Steps are --duration long (at most 5s) after a --warmup (at most 1s) of their own.
    #[arg(long, env = "COMPARE_CAPACITY", value_name = "P99", display_order = 24)]
    pub capacity: Option<String>,
    /// Capacity searches per runtime and workload, interleaved like the rounds.
    #[arg(long, env = "COMPARE_CAPACITY_RUNS", default_value_t = 1, display_order = 25)]
    pub capacity_runs: u32,
    /// metadata: lookups per DB-only run (the lookup and the JSON build in a loop, no HTTP: `metadata-rs
    /// bench-lookup`, bench/peers/metadata/lookup-bench.mjs), one run per round on rust, bun and node; 0 skips
    /// them [default: 100000 per second of --duration].
    #[arg(long, env = "COMPARE_LOOKUPS", display_order = 26)]
    pub lookups: Option<u64>,
    /// Measure the Rust binaries even when one is older than the sources it was built from (or was built in
    /// another checkout); without it compare refuses, since the records name the checkout's commit. The
    /// records list each such binary.
    #[arg(long, env = "COMPARE_ALLOW_STALE", display_order = 27)]
    pub allow_stale: bool,
    /// The published method: 3 rounds of 20 s after 10 s warmups per cell (the default is 3 of 10 s after 3 s;
    /// explicit --runs, --duration and --warmup win).
    #[arg(long, env = "COMPARE_FULL", conflicts_with = "quick", display_order = 15)]
    pub full: bool,
}

/// The longest capacity step: a search runs a dozen of them, so the comparison's 20 s runs would make one
/// search take five minutes; 5 s steps after 1 s warmups are loadgen's own defaults.
const CAPACITY_STEP_MAX: Duration = Duration::from_secs(5);
const CAPACITY_WARMUP_MAX: Duration = Duration::from_secs(1);

/// The comparison's defaults for the shared flags: 3 rounds of 10 s after 3 s warmups, so every workload and
/// runtime fits in about 2 hours on a 2-core machine (crates/compare/README.md, "How long"); `--quick`: 1 of
/// 2 s after 1 s.
const DEFAULTS: Defaults = Defaults { runs: [3, 1], duration: ["10s", "2s"], warmup: ["3s", "1s"] };

/// `--full`: the seeds' published method, 3 rounds of 20 s after 10 s warmups (about twice as long).
const FULL: Defaults = Defaults { runs: [3, 3], duration: ["20s", "20s"], warmup: ["10s", "10s"] };

fn parse_dur(flag: &str, raw: &str) -> anyhow::Result<Duration> {
    textfmt::parse_duration(raw).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
}

/// `--connections`: empty (each workload's own), one count, or a sweep of distinct counts in the order given.
fn connection_counts(given: &[u32]) -> anyhow::Result<Vec<u32>> {
    if given.contains(&0) {
        bail!("--connections must be at least 1");
    }
    if let Some(twice) = given.iter().enumerate().find_map(|(i, c)| given[..i].contains(c).then_some(c)) {
        bail!("--connections lists {twice} twice");
    }
    Ok(given.to_vec())
}

impl RunArgs {
    /// Defaults, `--quick` and paths applied; `compare_exe` is the binary the floor runs.
    pub fn resolve(&self, command: Vec<String>, compare_exe: PathBuf) -> anyhow::Result<Config> {
        let m = self.measure.resolve(if self.full { &FULL } else { &DEFAULTS }, compare_exe)?;
        let q = self.measure.quick;
        let duration = parse_dur("duration", m.duration)?;
        if duration < Duration::from_millis(100) {
            bail!("--duration must be at least 100ms");
        }
        let warmup = parse_dur("warmup", m.warmup)?;
        let request_timeout = parse_dur("request-timeout", &self.request_timeout)?;
        let connections = connection_counts(&self.connections)?;
        let mut db_rtt: Vec<Duration> = Vec::new();
        for raw in &self.db_rtt {
            let rtt = parse_dur("db-rtt", raw)?;
            if db_rtt.contains(&rtt) {
                bail!("--db-rtt lists {raw} twice");
            }
            if rtt > Duration::from_secs(1) {
                bail!("--db-rtt {raw}: at most 1s (a round trip that long times out the servers' database calls)");
            }
            db_rtt.push(rtt);
        }
        if self.tail_rate.is_some_and(|rate| !rate.is_finite() || rate < 0.0) {
            bail!("--tail-rate must be a non-negative number");
        }
        let server = &m.server_cores;
        let runtimes = self.runtimes(server.count())?;
        let db_cores = Cores::parse(&self.db_cores).context("--db-cores")?;
        if !server.is_disjoint(&m.loader_cores) {
            eprintln!("warning: server and loader cores overlap; figures will mix server and loader work");
        }
        if self.seed_notes < 2 {
            bail!("--seed-notes must be at least 2");
        }
        let soak = self.soak()?;
        if soak.is_some() && connections.len() > 1 {
            bail!("--soak holds one connection count; --connections lists {}", connections.len());
        }
        let capacity = self.capacity(duration, warmup, soak.is_some())?;
        let rows = self.rows.unwrap_or(if q { 20_000 } else { 100_000 });
        if rows < 100 {
            bail!("--rows must be at least 100");
        }
        Ok(Config {
            server_processes: server.count(),
            paths: m.paths,
            out_dir: m.out_dir,
            workloads: workloads::parse_list(&self.workloads)?,
            runtimes,
            runs: m.runs,
            duration,
            warmup,
            connections,
            server_cores: m.server_cores.clone(),
            loader_cores: m.loader_cores.clone(),
            db_cores,
            startup_runs: self.startup_runs.unwrap_or(if q { 2 } else { 15 }),
            tail_rate: self.tail_rate,
            database_url: self.database_url.clone(),
            db_rtt,
            redis_url: self.redis_url.clone(),
            rows,
            seed_notes: self.seed_notes,
            request_timeout,
            lookups: self.lookups.unwrap_or((duration.as_secs_f64() * 100_000.0).round() as u64),
            soak,
            capacity,
            allow_stale: self.allow_stale,
            command,
        })
    }
    /// `--runtimes` and `--target`, minus the runtimes that cannot fill `server_cores` cores.
    fn runtimes(&self, server_cores: usize) -> anyhow::Result<Vec<Runtime>> {
        let mut runtimes = runtimes::parse_list(&self.runtimes)?;
        if server_cores > 1 {
            // N cores: rust runs N workers, Node and Flight a cluster of N, Bun N processes sharing the port. koa
            // (one process) and the floor (one thread) would leave cores idle and their ratios would mean nothing.
            let dropped: Vec<&str> = runtimes.iter().filter(|r| !r.scales_to_cores()).map(|r| r.name()).collect();
            if !dropped.is_empty() {
                eprintln!(
                    "compare: {} run as one process; left out of this {}-core layout",
                    dropped.join(", "),
                    server_cores
                );
            }
            runtimes.retain(|r| r.scales_to_cores());
        }
        for spec in &self.targets {
            let target = runtimes::leak_target(crate::plan::target::parse(spec)?);
            if runtimes.iter().any(|r| r.name() == target.name()) {
                bail!("--target {spec:?}: the name {:?} is taken", target.name());
            }
            runtimes.push(target);
        }
        if runtimes.is_empty() {
            bail!("no runtime left to measure");
        }
        Ok(runtimes)
    }

    /// `--soak`, `--soak-interval` and `--soak-rate`, checked.
    fn soak(&self) -> anyhow::Result<Option<Soak>> {
        Ok(match &self.soak {
            None => None,
            Some(raw) => {
                let duration = parse_dur("soak", raw)?;
                let interval = parse_dur("soak-interval", &self.soak_interval)?;
                if interval < Duration::from_millis(200) {
                    bail!("--soak-interval must be at least 200ms");
                }
                if duration < interval {
                    bail!("--soak must be at least one --soak-interval long");
                }
                if !self.soak_rate.is_finite() || self.soak_rate < 1.0 {
                    bail!("--soak-rate must be at least 1 req/s");
                }
                Some(Soak { duration, interval, rate: self.soak_rate })
            }
        })
    }

    /// `--capacity` and `--capacity-runs`, checked; steps no longer than the run's own duration and warmup.
    fn capacity(&self, duration: Duration, warmup: Duration, soaking: bool) -> anyhow::Result<Option<CapacitySearch>> {
        Ok(match &self.capacity {
            None => None,
            Some(_) if soaking => bail!("--capacity and --soak exclude each other: a soak runs no rounds"),
            Some(raw) => {
                let p99 = parse_dur("capacity", raw)?;
                if p99 < Duration::from_micros(100) {
                    bail!("--capacity is a p99 objective of at least 100us, e.g. 10ms");
                }
                if self.capacity_runs == 0 {
                    bail!("--capacity-runs must be at least 1");
                }
                let (step, warmup) = (duration.min(CAPACITY_STEP_MAX), warmup.min(CAPACITY_WARMUP_MAX));
                Some(CapacitySearch { p99, runs: self.capacity_runs, step, warmup })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::FloorArgs;
    use crate::plan::runtimes::Runtime;
    use crate::report::command::ReportArgs;

    fn parse(args: &[&str]) -> anyhow::Result<Config> {
        let cli = Cli::try_parse_from(std::iter::once("compare").chain(args.iter().copied()))?;
        cli.run.resolve(vec!["compare".into()], "/bin/compare".into())
    }

    #[test]
    fn defaults_and_quick() {
        let c = parse(&[]).expect("defaults");
        assert_eq!(
            (c.runs, c.duration, c.warmup, c.startup_runs, c.rows),
            (3, Duration::from_secs(10), Duration::from_secs(3), 15, 100_000)
        );
        let f = parse(&["--full"]).expect("full");
        assert_eq!((f.runs, f.duration, f.warmup), (3, Duration::from_secs(20), Duration::from_secs(10)));
        let f = parse(&["--full", "--runs", "5"]).expect("full with a flag");
        assert_eq!((f.runs, f.duration), (5, Duration::from_secs(20)));
        assert!(parse(&["--full", "--quick"]).is_err());
        assert_eq!(c.workloads, workloads::Workload::default_run());
        assert_eq!(c.runtimes, runtimes::ALL.to_vec());
        let q = parse(&["--quick"]).expect("quick");
        assert_eq!(
            (q.runs, q.duration, q.warmup, q.startup_runs, q.rows),
            (1, Duration::from_secs(2), Duration::from_secs(1), 2, 20_000)
        );
        let q = parse(&["--quick", "--runs", "2", "--warmup", "0"]).expect("quick with flags");
        assert_eq!((q.runs, q.warmup), (2, Duration::ZERO));
    }

    /// The layout the four-core claims need (bench/claims.toml's 000K, 000L, 000M and 003C): four server
    /// cores, two for the loader, two for the databases. Checked here, on a machine that may not have them:
    /// rust runs four workers, Node a cluster of four, Bun four processes sharing the port, and the one-process
    /// runtimes are left out.
    #[test]
    fn the_four_core_layout_of_the_ledgers_command() {
        use crate::plan::server_spec::{ServerEnv, server_spec};
        let c = parse(&["--server-cores", "0-3", "--loader-cores", "4-5", "--db-cores", "6-7"]).expect("layout");
        assert_eq!(c.server_processes, 4);
        assert_eq!((c.server_cores.count(), c.loader_cores.count(), c.db_cores.count()), (4, 2, 2));
        assert!(c.server_cores.is_disjoint(&c.loader_cores) && c.loader_cores.is_disjoint(&c.db_cores));
        assert!(!c.runtimes.contains(&Runtime::Koa) && !c.runtimes.contains(&Runtime::Floor), "one process each");
        let paths = crate::plan::paths::Paths::resolve(
            std::path::Path::new("/repo"),
            Some(std::path::Path::new("/repo")),
            Some(std::path::Path::new("/bin")),
            "/bin/compare".into(),
        );
        let env = ServerEnv { processes: c.server_processes, ..ServerEnv::default() };
        let w = workloads::Workload::HelloDefault;
        let has = |rt: Runtime, k: &str| server_spec(rt, w, &paths, &env).env.contains(&(k.into(), "4".into()));
        assert!(has(Runtime::Rust, "FLIGHT_WORKERS"), "rust: four workers");
        assert!(has(Runtime::Node, "PEER_PROCESSES"), "node: a cluster of four");
        assert!(has(Runtime::Bun, "PEER_PROCESSES"), "bun: four processes on one port");
    }

    /// The default run's budget (crates/compare/README.md, "How long"): every workload and runtime in about 2
    /// hours by the progress bar's estimate, which measured runs have come in under. A workload or runtime
    /// that breaks it needs shorter defaults, not a longer main job.
    #[test]
    fn the_default_run_fits_in_about_two_hours() {
        let hours = |args: &[&str]| crate::run::estimate::total(&parse(args).expect("parses")).1 / 3600.0;
        let (default, full, quick) = (hours(&[]), hours(&["--full"]), hours(&["--quick"]));
        assert!(default <= 2.0, "default run estimated at {default:.2} h");
        assert!(full > 1.5 * default, "--full {full:.2} h against the default's {default:.2} h");
        assert!(quick * 60.0 <= 15.0, "--quick estimated at {:.0} min", quick * 60.0);
        eprintln!("estimates: default {default:.2} h, --full {full:.2} h, --quick {:.1} min", quick * 60.0);
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(parse(&["--runs", "0"]).is_err());
        assert!(parse(&["--duration", "soon"]).is_err());
        assert!(parse(&["--server-cores", "x"]).is_err());
        assert!(parse(&["--workloads", "hello"]).is_err());
        assert!(parse(&["--tail-rate", "-1"]).is_err());
        assert!(parse(&["--target", "rust=http://127.0.0.1:1"]).is_err());
        assert!(parse(&["--target", "a=cmd:x", "--target", "a=cmd:y"]).is_err());
        assert!(parse(&["--soak", "1s", "--soak-interval", "5s"]).is_err());
        assert!(parse(&["--soak", "1h", "--soak-interval", "10ms"]).is_err());
        assert!(parse(&["--soak", "1h", "--soak-rate", "0"]).is_err());
        assert!(parse(&["--soak", "forever"]).is_err());
        assert!(parse(&["--connections", "0"]).is_err());
        assert!(parse(&["--connections", "16,64,16"]).is_err());
        assert!(parse(&["--connections", "16,x"]).is_err());
        assert!(parse(&["--soak", "1h", "--connections", "16,64"]).is_err());
        assert!(parse(&["--db-rtt", "10ms,10ms"]).is_err());
        assert!(parse(&["--db-rtt", "soon"]).is_err());
        assert!(parse(&["--db-rtt", "2s"]).is_err());
    }

    #[test]
    fn connections_take_one_count_or_a_sweep() {
        assert!(parse(&[]).expect("defaults").connections.is_empty());
        assert_eq!(parse(&["--connections", "32"]).expect("one").connections, [32]);
        let c = parse(&["--connections", "16,64,256,512,1024"]).expect("sweep");
        assert_eq!(c.connections, [16, 64, 256, 512, 1024]);
        let ms = Duration::from_millis;
        assert_eq!(parse(&["--db-rtt", "0ms,1ms,10ms,40ms"]).expect("rtts").db_rtt, [ms(0), ms(1), ms(10), ms(40)]);
        assert!(parse(&[]).expect("defaults").db_rtt.is_empty());
    }

    #[test]
    fn soak_takes_a_duration_and_an_interval() {
        assert_eq!(parse(&[]).expect("defaults").soak, None);
        let c = parse(&["--soak", "1h"]).expect("soak");
        assert_eq!(
            c.soak,
            Some(Soak { duration: Duration::from_secs(3600), interval: Duration::from_secs(5), rate: 1000.0 })
        );
    }

    #[test]
    fn capacity_takes_a_p99_objective_and_its_search_settings() {
        assert_eq!(parse(&[]).expect("defaults").capacity, None);
        let c = parse(&["--capacity", "10ms"]).expect("capacity");
        let five = Duration::from_secs(5);
        let expected =
            CapacitySearch { p99: Duration::from_millis(10), runs: 1, step: five, warmup: Duration::from_secs(1) };
        assert_eq!(c.capacity, Some(expected));
        let q = parse(&["--quick", "--capacity", "50ms", "--capacity-runs", "3"]).expect("quick capacity");
        let q = q.capacity.expect("a search");
        assert_eq!((q.runs, q.step, q.warmup), (3, Duration::from_secs(2), Duration::from_secs(1)));
        assert!(parse(&["--capacity", "soon"]).is_err());
        assert!(parse(&["--capacity", "0"]).is_err());
        assert!(parse(&["--capacity", "10ms", "--capacity-runs", "0"]).is_err());
        assert!(parse(&["--capacity", "10ms", "--soak", "1h"]).is_err());
    }

    #[test]
    fn targets_and_layouts() {
        let c = parse(&["--runtimes", "rust", "--target", "mine=http://127.0.0.1:8080"]).expect("target");
        assert_eq!(c.runtimes.iter().map(|r| r.name()).collect::<Vec<_>>(), ["rust", "mine"]);
        let c = parse(&["--server-cores", "0,1", "--loader-cores", "1"]).expect("two cores");
        assert_eq!(c.server_processes, 2);
        let scaling = [Runtime::Rust, Runtime::Bun, Runtime::Node, Runtime::FlightNode];
        assert_eq!(c.runtimes, scaling, "koa and floor are one process");
        assert!(parse(&["--server-cores", "0,1", "--runtimes", "floor"]).is_err());
    }

    #[test]
    fn floor_and_report_subcommands_parse_their_arguments() {
        let cli = Cli::try_parse_from(["compare", "floor", "--port", "0", "--body", "{\"a\":1}"]).expect("floor");
        assert!(matches!(cli.command, Some(Cmd::Floor(FloorArgs { port: 0, .. }))));
        let cli = Cli::try_parse_from(["compare", "report", "a.jsonl", "b.jsonl"]).expect("report");
        assert!(matches!(cli.command, Some(Cmd::Report(ReportArgs { ref files, .. })) if files.len() == 2));
        assert!(Cli::try_parse_from(["compare", "report"]).is_err());
    }
}
