//! The comparison, end to end: prerequisites, dependencies and data, then per workload the checks (rust
//! first: its answers are the reference), the cold starts, the closed-loop rounds and the open-loop tails,
//! every runtime interleaved in a rotating order, each record appended as soon as it is measured; then the
//! Markdown and SVGs.

pub mod acknowledged;
pub mod bun_build;
pub mod capacity;
pub mod cells;
pub mod checks;
pub mod db_proxy;
pub mod deps;
pub mod estimate;
pub mod loader;
pub mod lookups;
pub mod progress;
pub mod recorder;
pub mod seeds;
pub mod server;
pub mod setup;
pub mod soak;
pub mod upstream;
pub mod workload;
pub mod workload_run;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use loadgen::open_files::{self, Outcome};

use crate::plan::dataset::MetadataData;
use crate::plan::paths::{Paths, ResultFolder};
use crate::plan::prerequisites;
use crate::plan::runtimes::Runtime;
use crate::plan::server_spec;
use crate::plan::tls;
use crate::plan::versions;
use crate::plan::workload_plan::{Plan, PlanInputs};
use crate::plan::workloads::{Service, Workload};
use crate::provenance::{self, Provenance};
use crate::records::{self, Record, RunMeta, Sink};
use crate::report;
use crate::run::checks::checked;
use crate::run::db_proxy::DbProxies;
use crate::run::deps::{Deps, DepsOptions};
use crate::run::progress::Progress;
use crate::run::recorder::Recorder;
use crate::run::setup::{Bench, Timing};
use crate::run::soak::soak_cells;
use crate::run::workload::run_workload;
use crate::run::workload_run::{LADDER_DB, WorkloadRun};
use crate::settings::Config;
use crate::system::process::{self, check_interrupted};

/// Descriptors a server needs beyond its connections: its listener, pools, logs, files and the runtime's own
/// (a Node or Bun process opens some dozens at start).
const OPEN_FILES_HEADROOM: u64 = 512;

/// What a finished comparison produced.
#[derive(Debug)]
pub struct Finished {
    pub jsonl: PathBuf,
    pub md: PathBuf,
    pub markdown: String,
    pub records: Vec<Record>,
    /// Cells that failed their check or have no valid closed-loop run, each with why.
    pub problems: Vec<String>,
}

/// The comparison, start to finish: [`prepare`] (prerequisites, the record file, dependencies and data), then
/// [`measure`] (every workload, then the report).
pub fn run(cfg: &Config) -> anyhow::Result<Finished> {
    let prepared = prepare(cfg)?;
    measure(cfg, prepared)
}

/// Everything a comparison has before its first measurement (the budget gate measures with the same).
pub struct Prepared {
    pub report_options: report::Options,
    pub md: PathBuf,
    pub sink: Sink,
    pub env: Environment,
}

/// What the servers run against: the run's identity, bench, databases, data and certificate, and the work
/// dir that holds them. Its fields drop in this order: the delay proxies stop before the databases they
/// front, and the work dir goes last.
pub struct Environment {
    pub meta: RunMeta,
    pub bench: Bench,
    pub proxies: Option<DbProxies>,
    pub deps: Option<Deps>,
    pub metadata: Option<MetadataData>,
    pub site: Option<crate::plan::site::Site>,
    pub certs: Option<certs::Files>,
    pub work: localdeps::OwnedDir,
}

/// Checks and makes everything the measurements need, refusing early: prerequisites, the claims ledger,
/// provenance, the compiled Bun peers, the open-file limit, the record file, the databases (and their
/// delay proxies), the metadata dataset, the static site and the run's certificate.
pub fn prepare(cfg: &Config) -> anyhow::Result<Prepared> {
    let own_pg = cfg.database_url.is_none();
    let own_redis = cfg.redis_url.is_none();
    let mut missing =
        prerequisites::missing_prerequisites(&cfg.workloads, &cfg.runtimes, &cfg.paths, own_pg, own_redis);
    if !cfg.db_rtt.is_empty() && !cfg.paths.delay_proxy().is_file() {
        let bin = cfg.paths.delay_proxy();
        missing.push(format!(
            "{} not found: run `bash bench/setup.sh` (cargo build --release -p delay-proxy)",
            bin.display()
        ));
    }
    if !missing.is_empty() {
        bail!("missing prerequisites:\n  - {}", missing.join("\n  - "));
    }
    // The summary's published claims: a ledger that is refused stops the run before anything is measured.
    let report_options = report::Options::with_ledger_at(&cfg.paths.repo.join(crate::ledger::DEFAULT_PATH))?;
    let binaries = prerequisites::rust_binaries(&cfg.paths, &cfg.workloads, !cfg.db_rtt.is_empty());
    let provenance = provenance::gather(&cfg.paths.repo, &binaries, cfg.allow_stale)?;
    // bun-compiled and bun-bytecode: their executables, from the current sources (a no-op when built).
    bun_build::ensure(cfg)?;
    // Servers and loadgen are compare's children: raising compare's own soft limit (loadgen's mechanism)
    // before anything starts gives every runtime the same room; Bun raises its own, Node and rust do not.
    let most = cfg.workloads.iter().flat_map(|w| cfg.connections.iter().copied().chain([w.connections()])).max();
    let most = most.unwrap_or(0);
    let needed = u64::from(most) + OPEN_FILES_HEADROOM;
    if let Outcome::Raised { from, to } = open_files::ensure(needed, most as usize)? {
        eprintln!("compare: open-file limit raised from {from} to {to} for every server and loader (needed {needed})");
    }
    let folder = ResultFolder::now(&cfg.out_dir);
    let meta = run_meta(cfg, &folder, provenance);
    let jsonl = folder.file(&meta.machine.hostname, ".jsonl");
    let md = jsonl.with_extension("md");
    let sink = Sink::create(&jsonl)?;
    eprintln!("compare: recording to {}", jsonl.display());

    let work = process::work_dir("compare-").context("temp dir")?;
    let logdir = work.path().join("logs");
    std::fs::create_dir_all(&logdir)?;
    let timing = Timing { warmup: cfg.warmup, duration: cfg.duration, request_timeout: cfg.request_timeout };
    let bench = Bench::new(cfg.paths.loadgen(), (&cfg.server_cores, &cfg.loader_cores), timing, logdir);
    let deps = start_deps(cfg)?;
    let proxies = DbProxies::start(cfg, deps.as_ref())?;
    let metadata = if cfg.workloads.iter().any(|w| w.needs_metadata_dataset()) {
        eprintln!("compare: generating the metadata dataset ({} rows)", cfg.rows);
        let (db, ids) = seeds::metadata_dataset(&work.path().join("data"), cfg.rows)?;
        Some(MetadataData::load(&db, &ids)?)
    } else {
        None
    };
    let site = if cfg.workloads.iter().any(|w| w.needs_site()) {
        Some(crate::plan::site::build(&work.path().join("site"))?)
    } else {
        None
    };
    // One certificate for every TLS server of the run, its private key only in the work dir.
    let certs = if cfg.workloads.iter().any(|w| w.tls()) { Some(tls::run_certificate(work.path())?) } else { None };
    check_interrupted()?;
    let env = Environment { meta, bench, proxies, deps, metadata, site, certs, work };
    Ok(Prepared { report_options, md, sink, env })
}

/// Every workload (or, with `--soak`, every workload checked and then all soaked at once), each record
/// appended as measured, then the report.
fn measure(cfg: &Config, prepared: Prepared) -> anyhow::Result<Finished> {
    let Prepared { report_options, md, sink, env } = prepared;
    let shared = env.shared();
    let (steps, seconds) = estimate::total(cfg);
    let mut recorder = Recorder::new(sink, Progress::new(steps, seconds));
    // `--soak`: every workload checked in turn, then all of them soaked at once.
    let mut soaking: Vec<(WorkloadRun<'_>, Vec<Runtime>)> = Vec::new();
    for w in &cfg.workloads {
        let mut wr = workload_run(cfg, &shared, *w)?;
        if cfg.soak.is_some() {
            let valid = checked(&mut wr, &mut recorder, shared.work)?;
            soaking.push((wr, valid));
        } else {
            run_workload(&mut wr, &mut recorder, shared.work)?;
        }
    }
    if let Some(soak) = cfg.soak {
        soak_cells(&soaking, soak, &mut recorder)?;
    }
    drop(soaking);
    let (jsonl, records) = recorder.finish();
    let markdown = report::write_outputs(&records, &md, &report_options)?;
    let problems = problems(&records);
    Ok(Finished { jsonl, md, markdown, records, problems })
}

/// What every workload of one invocation borrows from its [`Environment`].
pub struct Shared<'a> {
    pub meta: &'a RunMeta,
    pub bench: &'a Bench,
    pub deps: Option<&'a Deps>,
    pub proxies: Option<&'a DbProxies>,
    pub metadata: Option<&'a MetadataData>,
    pub site: Option<&'a crate::plan::site::Site>,
    pub certs: Option<&'a certs::Files>,
    pub work: &'a std::path::Path,
}

impl Environment {
    pub fn shared(&self) -> Shared<'_> {
        Shared {
            meta: &self.meta,
            bench: &self.bench,
            deps: self.deps.as_ref(),
            proxies: self.proxies.as_ref(),
            metadata: self.metadata.as_ref(),
            site: self.site.as_ref(),
            certs: self.certs.as_ref(),
            work: self.work.path(),
        }
    }
}

/// One workload's state before its checks: its plan at the headline count (or the sweep's counts), its
/// round trips, its upstream service started when it has one, the runtimes' versions.
pub fn workload_run<'a>(cfg: &'a Config, shared: &Shared<'a>, w: Workload) -> anyhow::Result<WorkloadRun<'a>> {
    let inputs = PlanInputs {
        site: shared.site,
        metadata: shared.metadata,
        seed_notes: cfg.seed_notes,
        dir: shared.work,
        certs: shared.certs,
    };
    let mut plan = Plan::new(w, &inputs)?;
    plan.load.connections = w.headline_connections(&cfg.connections);
    let counts = if cfg.connections.is_empty() { vec![plan.load.connections] } else { cfg.connections.clone() };
    let rtts = match (shared.proxies, w.waits_on_database()) {
        (Some(_), true) => cfg.db_rtt.iter().copied().map(Some).collect(),
        _ => vec![None],
    };
    // Started for this workload at its delay, stopped with it (its `Server` drops with the WorkloadRun).
    let upstream = w.upstream_delay().map(|delay| upstream::start(cfg, shared.bench, delay)).transpose()?;
    let versions = cfg.runtimes.iter().map(|&rt| (rt, versions::version(rt, w.service(), &cfg.paths))).collect();
    Ok(WorkloadRun {
        cfg,
        meta: shared.meta,
        bench: shared.bench,
        deps: shared.deps,
        metadata: shared.metadata,
        site: shared.site,
        plan,
        counts,
        shared_db: None,
        floor_body: None,
        versions,
        upstream,
        rtts,
        proxies: shared.proxies,
    })
}

/// What every record of this run carries: its id (UTC stamp and host), the command, the machine, the layout,
/// where its binaries came from.
fn run_meta(cfg: &Config, folder: &ResultFolder, provenance: Provenance) -> RunMeta {
    let machine = records::machine_info();
    RunMeta {
        run_id: format!("{}-{}", folder.stamp, machine.hostname),
        command: cfg.command.clone(),
        machine,
        layout: records::Layout {
            server_cores: cfg.server_cores.to_string(),
            loader_cores: cfg.loader_cores.to_string(),
            db_cores: cfg.db_cores.to_string(),
        },
        provenance: Some(provenance),
    }
}

/// PostgreSQL and Redis, when any workload's servers use them (started, or the ones given by URL), with the
/// ladder's table seeded.
fn start_deps(cfg: &Config) -> anyhow::Result<Option<Deps>> {
    let needs_pg = |w: &Workload| w.queries_postgres();
    let needs_redis = |w: &Workload| cfg.runtimes.iter().any(|r| r.serves(*w) && server_spec::uses_redis(*r, *w));
    if !cfg.workloads.iter().any(|w| needs_pg(w) || needs_redis(w)) {
        return Ok(None);
    }
    let d = Deps::start(&DepsOptions {
        cores: cfg.db_cores.to_string(),
        database_url: cfg.database_url.clone(),
        redis_url: cfg.redis_url.clone(),
    })?;
    eprintln!("compare: {}", d.describe());
    if cfg.workloads.iter().any(|w| w.service() == Service::Ladder) {
        d.reset_database(LADDER_DB)?;
        seed_ladder(&cfg.paths, &d.database_url(LADDER_DB)?)?;
    }
    Ok(Some(d))
}

/// `compare` without a subcommand, from resolved settings to exit code: 1 an error, 2 a cell without a valid
/// measurement, 130 interrupted (the records so far stay in the .jsonl). Bad flags (64) never get here.
pub fn command(cfg: &Config) -> ExitCode {
    if let Err(e) = process::take_charge(&cfg.loader_cores) {
        eprintln!("compare: {e:#}");
        return ExitCode::FAILURE;
    }
    match run(cfg) {
        Ok(done) => {
            report::print(&done.markdown);
            eprintln!(
                "compare: wrote {}, {} and {}",
                done.jsonl.display(),
                done.md.display(),
                report::html_path(&done.md).display()
            );
            if !done.problems.is_empty() {
                eprintln!("compare: {} cell(s) without a valid measurement:", done.problems.len());
                for p in &done.problems {
                    eprintln!("  - {p}");
                }
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) if process::interrupted() => {
            eprintln!(
                "compare: interrupted ({e:#}); the records so far are in the .jsonl (`compare report` renders them)"
            );
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("compare: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Fills ladder-postgres's table with `ladder-rs seed` (rust's own binary: the peers read what it writes).
fn seed_ladder(paths: &Paths, url: &str) -> anyhow::Result<()> {
    let bin = paths.rust_bin(Service::Ladder);
    let out = std::process::Command::new(&bin)
        .args(["seed", "--database-url", url])
        .env_remove("DATABASE_URL")
        .output()
        .with_context(|| format!("running {} seed", bin.display()))?;
    if !out.status.success() {
        bail!("{} seed failed ({}): {}", bin.display(), out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Cells that failed their check, and measured cells without a single valid closed-loop run.
pub fn problems(records: &[Record]) -> Vec<String> {
    let records = &report::judged(records);
    let mut out = Vec::new();
    for w in report::summary::workloads(records) {
        for cell in report::summary::summarize(records, &w) {
            if let Some(reason) = &cell.void_cell {
                out.push(format!("{w} {}: VOID: {reason}", cell.runtime));
            } else if cell.closed_total > 0 && cell.closed_valid == 0 {
                out.push(format!("{w} {}: every closed-loop run was void", cell.runtime));
            }
        }
    }
    out
}
