//! `compare budget`: the performance gate. For each cell of the budget file (bench/budget.toml), the rust
//! server's user-space instructions per response under callgrind and its system calls per response under
//! strace, measured on a fixed short load with the warmup left out; compared with the budget, a cell over it
//! fails the gate (exit 1) and the functions whose instructions or allocations grew are printed against the profile
//! committed beside the budget. `--update` measures each cell over several rounds and rewrites both files.
//!
//! Instructions, not time: this VM's wall-clock figures move ±20% from round to round, while callgrind's
//! count of a server's instructions repeats to well under 1% (the budget file records each cell's spread).
//! Cells are started by the comparison's own machinery (run::prepare, run::workload_run, the rust check),
//! so a budgeted server is the one the comparison measures.

pub mod callgrind;
pub mod file;
pub mod judge;
pub mod meter;
pub mod report;
pub mod syscalls;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;

use crate::budget::file::Cell;
use crate::budget::judge::{Measurement, Verdict};
use crate::plan::paths::Paths;
use crate::plan::runtimes::Runtime;
use crate::plan::workloads::Workload;
use crate::run::progress::Progress;
use crate::run::recorder::Recorder;
use crate::settings::Config;
use crate::system::cores::Cores;

#[derive(Debug, Clone, Args)]
pub struct BudgetArgs {
    /// The budget file [default: <repo>/bench/budget.toml]; its profile is the same path ending in
    /// .profile.tsv.
    #[arg(long, env = "COMPARE_BUDGET_FILE")]
    pub file: Option<PathBuf>,
    /// Measure every cell over --rounds and rewrite the budget and its profile (say why in the commit).
    #[arg(long)]
    pub update: bool,
    /// Measurements per cell, the median judged [default: 1; --update: 5]. A cell over its budget is
    /// measured up to three times before it fails.
    #[arg(long, env = "COMPARE_BUDGET_ROUNDS")]
    pub rounds: Option<u32>,
    /// taskset list for the servers.
    #[arg(long, env = "COMPARE_BUDGET_SERVER_CORES", default_value = "0")]
    pub server_cores: String,
    /// taskset list for loadgen and compare itself.
    #[arg(long, env = "COMPARE_BUDGET_LOADER_CORES", default_value = "1")]
    pub loader_cores: String,
    /// Directory of the release binaries [default: $CARGO_TARGET_DIR/release or <repo>/target/release].
    #[arg(long, env = "COMPARE_BUDGET_BIN_DIR")]
    pub bin_dir: Option<PathBuf>,
    /// The workspace root [default: found from the current directory upwards].
    #[arg(long, env = "COMPARE_BUDGET_REPO")]
    pub repo: Option<PathBuf>,
    /// Measure binaries older than their sources (a gate on them says nothing about the sources).
    #[arg(long)]
    pub allow_stale: bool,
    /// Where the record goes [default: <repo>/bench/results]: <dir>/<stamp>/<stamp>-<host>-budget.md.
    #[arg(long, env = "COMPARE_BUDGET_OUT_DIR")]
    pub out_dir: Option<PathBuf>,
}

/// The tools the gate measures with, each with the package that has it.
const TOOLS: [(&str, &str); 3] = [("valgrind", "valgrind"), ("callgrind_control", "valgrind"), ("strace", "strace")];

/// Runs the gate (or the update); exit 0 within budget or updated, 1 over budget, 2 unable to measure,
/// 64 a bad flag or budget file.
pub fn command(args: &BudgetArgs) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let exe = std::env::current_exe().unwrap_or_else(|_| "compare".into());
    let paths = Paths::resolve(&cwd, args.repo.as_deref(), args.bin_dir.as_deref(), exe);
    let path = args.file.clone().map_or_else(|| paths.repo.join(file::DEFAULT_PATH), |f| cwd.join(f));
    let cells = match file::read(&path) {
        Ok(cells) => cells,
        Err(e) => {
            eprintln!("budget: {e:#}");
            return ExitCode::from(64);
        }
    };
    let rounds = args.rounds.unwrap_or(if args.update { 5 } else { 1 });
    let cores = Cores::parse(&args.server_cores).and_then(|s| Ok((s, Cores::parse(&args.loader_cores)?)));
    let (server_cores, loader_cores) = match (cores, rounds) {
        (Ok(c), 1..) => c,
        (Err(e), _) => {
            eprintln!("budget: {e:#}");
            return ExitCode::from(64);
        }
        (_, 0) => {
            eprintln!("budget: --rounds must be at least 1");
            return ExitCode::from(64);
        }
    };
    let missing: Vec<String> = TOOLS
        .iter()
        .filter(|(tool, _)| !crate::plan::prerequisites::on_path(tool))
        .map(|(tool, package)| format!("{tool} (Debian: {package})"))
        .collect();
    if !missing.is_empty() {
        eprintln!("budget: cannot measure, missing {}: run bash scripts/install-test-deps.sh", missing.join(", "));
        return ExitCode::from(2);
    }
    let results_dir = crate::plan::paths::results_dir(&paths.repo, &cwd, args.out_dir.as_deref());
    let folder = crate::plan::paths::ResultFolder::now(&results_dir);
    let cfg = Config { allow_stale: args.allow_stale, ..config(paths, &cells, server_cores, loader_cores) };
    let run = match measure_all(&cfg, &cells, rounds, args.update) {
        Ok(run) => run,
        Err(e) => {
            eprintln!("budget: cannot measure: {e:#}");
            return ExitCode::from(2);
        }
    };
    let measured = &run.measurements;
    let (outcome, body, code) = if args.update {
        if let Err(e) = judge::update(&path, &cells, measured) {
            eprintln!("budget: {e:#}");
            return ExitCode::from(2);
        }
        eprintln!("budget: wrote {} and its profile", path.display());
        let updated = file::read(&path).unwrap_or(cells);
        (format!("{} rewritten", path.display()), judge::table(&updated, measured, None), ExitCode::SUCCESS)
    } else {
        let profile = judge::read_profile(&judge::profile_path(&path)).unwrap_or_default();
        let verdicts: Vec<Verdict> = cells.iter().zip(measured).map(|(c, m)| judge::verdict(c, m)).collect();
        let mut body = judge::table(&cells, measured, Some(&verdicts));
        let mut over = Vec::new();
        for ((cell, m), v) in cells.iter().zip(measured).zip(&verdicts) {
            if v.instructions_over() || v.allocations_over() {
                body.push_str(&judge::growth(cell, m, &profile, v));
            }
            if !v.passed() {
                over.push(cell.name());
            }
        }
        match over.len() {
            0 => (format!("every cell within budget ({})", cells.len()), body, ExitCode::SUCCESS),
            n => (format!("{n} of {} cells over budget: {}", cells.len(), over.join(", ")), body, ExitCode::from(1)),
        }
    };
    println!("{body}");
    let record = report::Record { meta: &run.meta, outcome, body: &body, rounds: &run.rounds };
    match report::write(&folder, &record) {
        Ok(file) => eprintln!("budget: recorded in {}", file.display()),
        Err(e) => eprintln!("budget: {e:#}"),
    }
    code
}

/// What [`measure_all`] measured: each cell's rounds, the run's identity (command, machine, build), and one
/// line per measurement as printed.
struct Run {
    measurements: Vec<Measurement>,
    meta: crate::records::RunMeta,
    rounds: Vec<String>,
}

/// A comparison's settings for the cells' workloads on rust alone: the databases, data and checks the
/// comparison would give them.
fn config(paths: Paths, cells: &[Cell], server_cores: Cores, loader_cores: Cores) -> Config {
    let mut workloads: Vec<Workload> = Vec::new();
    for c in cells {
        if !workloads.contains(&c.workload) {
            workloads.push(c.workload);
        }
    }
    Config {
        workloads,
        runtimes: vec![Runtime::Rust],
        runs: 1,
        duration: meter::WINDOW,
        warmup: meter::WARMUP,
        connections: Vec::new(),
        server_processes: server_cores.count(),
        db_cores: loader_cores.clone(),
        server_cores,
        loader_cores,
        startup_runs: 0,
        tail_rate: Some(0.0),
        // prepare's record file: the checks' records, in the work dir's results folder, gone with it.
        out_dir: std::env::temp_dir(),
        database_url: None,
        db_rtt: Vec::new(),
        redis_url: None,
        rows: 20_000,
        seed_notes: 1_000,
        request_timeout: Duration::from_secs(5),
        soak: None,
        capacity: None,
        lookups: 0,
        allow_stale: false,
        command: std::env::args().collect(),
        paths,
    }
}

/// Every cell measured `rounds` times (a cell over budget, up to three), in the file's order.
fn measure_all(cfg: &Config, cells: &[Cell], rounds: u32, update: bool) -> anyhow::Result<Run> {
    let records = tempfile::tempdir().context("temp dir")?;
    let cfg = Config { out_dir: records.path().to_path_buf(), ..cfg.clone() };
    let prepared = crate::run::prepare(&cfg)?;
    let crate::run::Prepared { sink, env, .. } = prepared;
    let shared = env.shared();
    // The steps it counts are the checks, one per workload (rust only): `[2/5] hello-default rust check`.
    let mut recorder = Recorder::new(sink, Progress::new(cfg.workloads.len() * cfg.runtimes.len(), 0.0));
    let dir = shared.work.join("budget");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut out: Vec<Option<Measurement>> = vec![None; cells.len()];
    let mut lines = Vec::new();
    for &w in &cfg.workloads {
        let mut wr = crate::run::workload_run(&cfg, &shared, w)?;
        let valid = crate::run::checks::checked(&mut wr, &mut recorder, shared.work)?;
        if !valid.contains(&Runtime::Rust) {
            bail!("{}: rust failed its check (above)", w.name());
        }
        for (i, cell) in cells.iter().enumerate().filter(|(_, c)| c.workload == w) {
            let mut m = Measurement::default();
            let mut round = 0;
            // A cell over budget (either figure) after its rounds is measured up to three times and judged on
            // the median: one outlier never fails the gate, a real regression fails all three.
            while round < rounds || (!update && round < 3 && !judge::verdict(cell, &m).passed()) {
                round += 1;
                let tag = format!("{}-{}-{round}", cell.server, w.name());
                let ins = meter::instructions(&wr, cell, &dir, &tag).with_context(|| cell.name())?;
                let sys = meter::syscalls(&wr, cell, &dir, &tag).with_context(|| cell.name())?;
                let line = format!(
                    "budget: {} round {round}: {:.0} instructions outside the allocator ({:.0} in it), {:.2} \
                     allocations, {:.2} syscalls per response",
                    cell.name(),
                    ins.per_response(),
                    ins.allocator_per_response(),
                    ins.allocations_per_response(),
                    sys.per_response()
                );
                eprintln!("{line}");
                lines.push(line);
                m.push(ins, sys);
            }
            out[i] = Some(m);
        }
    }
    let measurements = out.into_iter().map(Option::unwrap_or_default).collect();
    Ok(Run { measurements, meta: shared.meta.clone(), rounds: lines })
}
