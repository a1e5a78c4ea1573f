//! The comparison, end to end: prerequisites, dependencies and data, then per workload the checks (rust
//! first: its answers are the reference), the cold starts, the closed-loop rounds and the open-loop tails,
//! every runtime interleaved in a rotating order, each record appended as soon as it is measured; then the
//! Markdown and SVGs.

pub mod bench;
pub mod cells;
pub mod deps;
pub mod loader;
pub mod lookups;
pub mod progress;
pub mod seeds;
pub mod server;
pub mod stored;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::format::num;
use crate::plan::runtimes::{self, Runtime, ServerEnv};
use crate::plan::site::Site;
use crate::plan::workloads::{MetadataData, Outcome, Plan, PlanInputs, Service, Workload};
use crate::records::{self, Kind, Record, RunMeta, Sink};
use crate::report;
use crate::run::bench::Bench;
use crate::run::cells::{Reference, RunInput};
use crate::run::deps::{Deps, DepsOptions};
use crate::run::progress::Progress;
use crate::settings::Config;
use crate::stats::rotated;
use crate::system::process::{self, check_interrupted};

/// How long a server may take to its first 200 (Node with a cold disk cache and a Postgres pool).
const READY_TIMEOUT_S: u64 = 30;
/// The database ladder-postgres reads, seeded by `ladder-rs seed`.
const LADDER_DB: &str = "compare_ladder";

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

/// Why a server is being started: notes-write gives checks and runs a fresh database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Check,
    Startup,
    Run,
}

/// One workload's shared state while it runs.
struct WorkloadRun<'a> {
    cfg: &'a Config,
    meta: &'a RunMeta,
    bench: &'a Bench,
    deps: Option<&'a Deps>,
    metadata: Option<&'a MetadataData>,
    /// The static workload's built SPA.
    site: Option<&'a Site>,
    plan: Plan,
    /// notes-read: the seeded database everyone reads.
    shared_db: Option<String>,
    floor_body: Option<Vec<u8>>,
    versions: HashMap<Runtime, Option<String>>,
}

impl WorkloadRun<'_> {
    fn workload(&self) -> Workload {
        self.plan.workload
    }

    fn server_env(&self, rt: Runtime, purpose: Purpose) -> anyhow::Result<ServerEnv> {
        let mut env = ServerEnv {
            floor_body: self.floor_body.clone(),
            processes: self.cfg.server_processes,
            ..ServerEnv::default()
        };
        if self.workload().needs_site() {
            env.dist_path = self.site.map(|s| s.root.clone());
        }
        match self.workload().service() {
            // Flight keeps its sessions (and in production its rate limit and cache) in Redis.
            Service::Flight if runtimes::uses_redis(rt, self.workload()) => {
                let deps = self.deps.context("this workload needs Redis")?;
                env.redis_url = Some(deps.redis_url());
            }
            Service::Flight => {}
            Service::Metadata => env.metadata_db = self.metadata.map(|m| m.db.clone()),
            Service::Ladder => {
                env.metadata_db = self.metadata.map(|m| m.db.clone());
                // Every rung gets the database (a server must start whatever its rung), seeded once.
                if let Some(deps) = self.deps {
                    env.database_url = Some(deps.database_url(LADDER_DB)?);
                }
            }
            Service::Scribe => {
                let deps = self.deps.context("the notes workloads need PostgreSQL and Redis")?;
                env.redis_url = Some(deps.redis_url());
                env.database_url = Some(match (&self.shared_db, purpose) {
                    (Some(db), _) => deps.database_url(db)?,
                    (None, Purpose::Startup) => deps.database_url("compare_write_startup")?,
                    (None, _) => {
                        // Every check and run writes into an empty database: ids start at 1 and no run
                        // inherits the previous one's rows.
                        let db = write_db(rt);
                        deps.reset_database(&db)?;
                        deps.database_url(&db)?
                    }
                });
            }
        }
        Ok(env)
    }

    /// The databases compare started that `rt`'s server uses on this workload (as `server_env` hands them
    /// out): measured around its windows.
    fn databases(&self, rt: Runtime) -> Vec<crate::run::deps::Database> {
        let w = self.workload();
        // The floor answers from memory and a target is not handed our databases.
        if matches!(rt, Runtime::Floor | Runtime::Target(_)) {
            return Vec::new();
        }
        let uses = |d: &crate::run::deps::Database| match d.name {
            // Every ladder rung is given the database, but only the postgres rung queries it.
            "postgres" => w.queries_postgres(),
            "redis" => w.service() == Service::Scribe || runtimes::uses_redis(rt, w),
            _ => false,
        };
        self.deps.map(|d| d.started().into_iter().filter(uses).collect()).unwrap_or_default()
    }

    fn spec(&self, rt: Runtime, purpose: Purpose) -> anyhow::Result<crate::plan::server_spec::ServerSpec> {
        let env = self.server_env(rt, purpose)?;
        Ok(runtimes::server_spec(rt, self.workload(), &self.cfg.paths, &env))
    }

    /// What one measured run (or soak) of this workload on `rt` needs besides the bench.
    fn run_input<'s>(
        &'s self,
        rt: Runtime,
        spec: &'s crate::plan::server_spec::ServerSpec,
        rate: Option<f64>,
        tag: &'s str,
    ) -> RunInput<'s> {
        RunInput {
            databases: self.databases(rt),
            spec,
            ready_path: &self.plan.ready_path,
            load: &self.plan.load,
            prime: self.plan.prime.as_ref(),
            also_ok: self.workload().also_ok(),
            rate,
            tag,
        }
    }

    fn record(&self, rt: Runtime, kind: Kind, round: u32) -> Record {
        let version = self.versions.get(&rt).cloned().flatten();
        Record::new(self.meta, self.workload().name(), rt.name(), version.as_deref(), kind, round)
    }
}

/// Estimated seconds per step, for the progress bar.
fn estimates(cfg: &Config) -> (f64, f64, f64) {
    let run = cfg.warmup.as_secs_f64() + cfg.duration.as_secs_f64() + 2.0;
    (3.0, 0.5, run)
}

/// DB-only runs for a workload (rust, bun and node per round, on metadata), and the seconds each is
/// expected to take (a release build's 180k lookups a second, bun's half that, node's a third).
fn lookups_estimate(cfg: &Config, w: Workload) -> (usize, f64) {
    if w != Workload::Metadata || cfg.lookups == 0 || cfg.soak.is_some() {
        return (0, 0.0);
    }
    let rts = cfg.runtimes.iter().filter(|r| crate::run::lookups::runs_on(**r)).count();
    (rts * cfg.runs as usize, 1.0 + cfg.lookups as f64 * 1.1 / 90_000.0)
}

/// Capacity searches per cell, and the seconds each is expected to take: about a dozen steps (three
/// doublings from an eighth of the closed-loop rate, then bisection to 5%, a retry or two), plus the
/// server's start and warmup.
fn capacity_estimate(cfg: &Config) -> (usize, f64) {
    cfg.capacity.map_or((0, 0.0), |c| {
        let step = c.step.as_secs_f64() + c.warmup.as_secs_f64() + 0.5;
        (c.runs as usize, 12.0 * step + cfg.warmup.as_secs_f64() + 2.0)
    })
}

/// Measured kinds per round: closed, and open unless `--tail-rate 0`.
fn kinds(cfg: &Config) -> usize {
    if cfg.tail_rate == Some(0.0) { 1 } else { 2 }
}

pub fn run(cfg: &Config) -> anyhow::Result<Finished> {
    let own_pg = cfg.database_url.is_none();
    let own_redis = cfg.redis_url.is_none();
    let missing = runtimes::missing_prerequisites(&cfg.workloads, &cfg.runtimes, &cfg.paths, own_pg, own_redis);
    if !missing.is_empty() {
        bail!("missing prerequisites:\n  - {}", missing.join("\n  - "));
    }
    let machine = records::machine_info();
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let run_id = format!("{stamp}-{}", machine.hostname);
    let jsonl = cfg.out_dir.join(format!("{run_id}.jsonl"));
    let md = jsonl.with_extension("md");
    let meta = RunMeta {
        run_id,
        command: cfg.command.clone(),
        machine,
        layout: records::Layout {
            server_cores: cfg.server_cores.clone(),
            loader_cores: cfg.loader_cores.clone(),
            db_cores: cfg.db_cores.clone(),
        },
    };
    let mut sink = Sink::create(&jsonl)?;
    eprintln!("compare: recording to {}", jsonl.display());

    let work = process::work_dir("compare-").context("temp dir")?;
    let logdir = work.path().join("logs");
    std::fs::create_dir_all(&logdir)?;
    let bench = Bench {
        loadgen: cfg.paths.loadgen(),
        server_cores: cfg.server_cores.clone(),
        loader_cores: cfg.loader_cores.clone(),
        warmup: cfg.warmup,
        duration: cfg.duration,
        request_timeout: cfg.request_timeout,
        ready_timeout: std::time::Duration::from_secs(READY_TIMEOUT_S),
        logdir,
        loadgen_engine: None,
    };

    // Stopped when this function returns, however it returns (Deps' drop).
    let needs_pg = |w: &Workload| w.queries_postgres();
    let needs_redis = |w: &Workload| cfg.runtimes.iter().any(|r| r.serves(*w) && runtimes::uses_redis(*r, *w));
    let deps = if cfg.workloads.iter().any(|w| needs_pg(w) || needs_redis(w)) {
        let d = Deps::start(&DepsOptions {
            cores: cfg.db_cores.clone(),
            database_url: cfg.database_url.clone(),
            redis_url: cfg.redis_url.clone(),
        })?;
        eprintln!("compare: {}", d.describe());
        if cfg.workloads.iter().any(|w| w.service() == Service::Ladder) {
            d.reset_database(LADDER_DB)?;
            seed_ladder(&cfg.paths, &d.database_url(LADDER_DB)?)?;
        }
        Some(d)
    } else {
        None
    };
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
    check_interrupted()?;

    let (check_s, startup_s, run_s) = estimates(cfg);
    let (mut steps, mut seconds) = (0, 0.0);
    if let Some(soak) = &cfg.soak {
        // Every cell soaks at once: the checks take their turns, the soak's time passes once.
        seconds += cfg.warmup.as_secs_f64() + soak.duration.as_secs_f64() + soak.interval.as_secs_f64();
    }
    for w in &cfg.workloads {
        let n = cfg.runtimes.iter().filter(|r| r.serves(*w)).count();
        if let Some(soak) = &cfg.soak {
            steps += n + n * soak_samples(soak);
            seconds += n as f64 * check_s;
            continue;
        }
        let (searches, search_s) = capacity_estimate(cfg);
        let (lookups, lookup_s) = lookups_estimate(cfg, *w);
        steps += lookups;
        seconds += lookups as f64 * lookup_s;
        steps += n + n * cfg.startup_runs as usize + n * cfg.runs as usize * kinds(cfg) + n * searches;
        seconds += n as f64 * check_s
            + (n * cfg.startup_runs as usize) as f64 * startup_s
            + (n * cfg.runs as usize * kinds(cfg)) as f64 * run_s
            + (n * searches) as f64 * search_s;
    }
    let mut progress = Progress::new(steps, seconds);

    let mut all = Vec::new();
    // `--soak`: every workload checked in turn, then all of them soaked at once.
    let mut soaking: Vec<(WorkloadRun<'_>, Vec<Runtime>)> = Vec::new();
    for w in &cfg.workloads {
        let inputs = PlanInputs {
            site: site.as_ref(),
            metadata: metadata.as_ref(),
            seed_notes: cfg.seed_notes,
            dir: work.path(),
        };
        let mut plan = Plan::new(*w, &inputs)?;
        if let Some(c) = cfg.connections {
            plan.load.connections = c;
        }
        let versions = cfg.runtimes.iter().map(|&rt| (rt, runtimes::version(rt, w.service(), &cfg.paths))).collect();
        let mut wr = WorkloadRun {
            cfg,
            meta: &meta,
            bench: &bench,
            deps: deps.as_ref(),
            metadata: metadata.as_ref(),
            site: site.as_ref(),
            plan,
            shared_db: None,
            floor_body: None,
            versions,
        };
        if cfg.soak.is_some() {
            let valid = checked(&mut wr, &mut sink, &mut progress, work.path(), &mut all)?;
            soaking.push((wr, valid));
        } else {
            all.extend(run_workload(&mut wr, &mut sink, &mut progress, work.path())?);
        }
    }
    if let Some(soak) = cfg.soak {
        soak_cells(&soaking, soak, &mut sink, &mut progress, &mut all)?;
    }
    drop(soaking);
    progress.clear();
    drop(progress);
    let markdown = report::write_outputs(&all, &md)?;
    let problems = problems(&all);
    Ok(Finished { jsonl: sink.path().to_path_buf(), md, markdown, records: all, problems })
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
fn seed_ladder(paths: &runtimes::Paths, url: &str) -> anyhow::Result<()> {
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
    let mut out = Vec::new();
    for w in report::workloads(records) {
        for cell in report::summarize(records, &w) {
            if let Some(reason) = &cell.void_cell {
                out.push(format!("{w} {}: VOID: {reason}", cell.runtime));
            } else if cell.closed_total > 0 && cell.closed_valid == 0 {
                out.push(format!("{w} {}: every closed-loop run was void", cell.runtime));
            }
        }
    }
    out
}

/// Seeds notes-read's database through the first runtime that can serve notes (rust when measured), so every
/// runtime reads rows written the same way.
fn seed_notes(wr: &mut WorkloadRun<'_>, progress: &mut Progress) -> anyhow::Result<()> {
    let deps = wr.deps.context("the notes workloads need PostgreSQL and Redis")?;
    let db = "compare_notes_read";
    deps.reset_database(db)?;
    wr.shared_db = Some(db.to_string());
    let rts = &wr.cfg.runtimes;
    let seeder = if rts.contains(&Runtime::Rust) {
        Runtime::Rust
    } else {
        let can = |r: &Runtime| matches!(r, Runtime::Bun | Runtime::Node);
        rts.iter().copied().find(can).unwrap_or(Runtime::Rust)
    };
    progress.line(&format!("notes-read: seeding {} notes through {}", wr.cfg.seed_notes, seeder.name()));
    let spec = wr.spec(seeder, Purpose::Check)?;
    let (server, _) = crate::run::server::start_ready(&spec, wr.bench, &wr.plan.ready_path)
        .with_context(|| format!("starting {} to seed notes", seeder.name()))?;
    let seeded = seeds::seed_notes(&format!("http://127.0.0.1:{}", server.port), wr.cfg.seed_notes);
    server.stop();
    seeded
}

/// 1. A workload's data (notes-read's seeded notes), then its checks: the runtimes that passed.
fn checked(
    wr: &mut WorkloadRun<'_>,
    sink: &mut Sink,
    progress: &mut Progress,
    workdir: &std::path::Path,
    out: &mut Vec<Record>,
) -> anyhow::Result<Vec<Runtime>> {
    if wr.workload() == Workload::NotesRead {
        seed_notes(wr, progress)?;
    }
    check_cells(wr, sink, progress, workdir, out)
}

fn run_workload(
    wr: &mut WorkloadRun<'_>,
    sink: &mut Sink,
    progress: &mut Progress,
    workdir: &std::path::Path,
) -> anyhow::Result<Vec<Record>> {
    let cfg = wr.cfg;
    let name = wr.workload().name();
    let (_, startup_s, run_s) = estimates(cfg);
    let mut out: Vec<Record> = Vec::new();
    let push = |rec: Record, sink: &mut Sink, out: &mut Vec<Record>| -> anyhow::Result<()> {
        sink.append(&rec)?;
        out.push(rec);
        Ok(())
    };
    let valid = checked(wr, sink, progress, workdir, &mut out)?;

    // 2. Cold starts, interleaved (not for a server compare did not start).
    let startable: Vec<Runtime> = valid.iter().copied().filter(|r| r.started_by_compare()).collect();
    progress.skip(
        (valid.len() - startable.len()) * cfg.startup_runs as usize,
        ((valid.len() - startable.len()) * cfg.startup_runs as usize) as f64 * startup_s,
    );
    for i in 0..cfg.startup_runs {
        for rt in rotated(&startable, i as usize) {
            check_interrupted()?;
            progress.begin(&format!("{name} {} start {}/{}", rt.name(), i + 1, cfg.startup_runs));
            let mut rec = wr.record(rt, Kind::Startup, i + 1);
            let spec = wr.spec(rt, Purpose::Startup)?;
            match crate::run::server::startup(&spec, wr.bench, &wr.plan.ready_path) {
                Ok(ms) => rec.startup_ms = Some(ms),
                Err(e) => rec.void_because(format!("{e:#}")),
            }
            check_interrupted()?;
            progress.end(startup_s, &rec.startup_ms.map_or_else(|| "VOID".to_string(), |ms| format!("{ms:.1} ms")));
            push(rec, sink, &mut out)?;
        }
    }

    // 3. Closed loop, then 4. the open-loop tails.
    run_rounds(wr, Kind::Closed, None, &valid, sink, progress, &mut out)?;

    let rate = match cfg.tail_rate {
        Some(0.0) => None,
        Some(r) => Some(r),
        None => valid
            .iter()
            .filter_map(|rt| {
                let closed = out.iter().filter(|r| r.runtime == rt.name() && r.kind == Kind::Closed && !r.void);
                crate::stats::spread(closed.filter_map(|r| r.req_per_s)).map(|s| s.median)
            })
            .min_by(f64::total_cmp)
            .map(|slowest| (slowest / 2.0).max(1.0)),
    };
    match rate {
        Some(rate) => {
            progress.line(&format!("{name}: open loop at {rate:.0} req/s"));
            run_rounds(wr, Kind::Open, Some(rate), &valid, sink, progress, &mut out)?;
        }
        // `--tail-rate 0`: the open rounds were never counted (`kinds`), so there is nothing to skip.
        None if cfg.tail_rate == Some(0.0) => {}
        None => {
            progress.skip(valid.len() * cfg.runs as usize, (valid.len() * cfg.runs as usize) as f64 * run_s);
            if !valid.is_empty() {
                progress.line(&format!("{name}: no valid closed-loop run to set the open-loop rate; tails skipped"));
            }
        }
    }
    if let Some(search) = cfg.capacity {
        capacity_rounds(wr, &search, &valid, sink, progress, &mut out)?;
    }
    if let (1.., lookup_s) = lookups_estimate(cfg, wr.workload()) {
        let data = wr.metadata.context("metadata dataset")?;
        let record = |rt: Runtime, round: u32| wr.record(rt, Kind::Lookups, round);
        crate::run::lookups::rounds(cfg, wr.bench, data, lookup_s, &record, sink, progress, &mut out)?;
    }
    Ok(out)
}

/// Where a runtime's capacity search starts: an eighth of its median closed-loop req/s (three doublings to
/// pass it, then bisection), to two significant digits; loadgen's own 1000 without a valid closed run.
fn capacity_start(out: &[Record], rt: Runtime) -> f64 {
    let closed = out.iter().filter(|r| r.runtime == rt.name() && r.kind == Kind::Closed && !r.void);
    match crate::stats::median(closed.filter_map(|r| r.req_per_s)) {
        Some(rps) if rps >= 8.0 => {
            let eighth = rps / 8.0;
            let unit = 10f64.powf(eighth.log10().floor() - 1.0);
            (eighth / unit).round() * unit
        }
        Some(_) => 1.0,
        None => 1000.0,
    }
}

/// `--capacity`: `runs` searches per valid runtime, one fresh server each, the order rotated per round,
/// every record appended as found; loadgen's own result (every step) kept beside the records.
fn capacity_rounds(
    wr: &WorkloadRun<'_>,
    search: &crate::settings::CapacitySearch,
    valid: &[Runtime],
    sink: &mut Sink,
    progress: &mut Progress,
    out: &mut Vec<Record>,
) -> anyhow::Result<()> {
    let name = wr.workload().name();
    let (_, search_s) = capacity_estimate(wr.cfg);
    progress.line(&format!(
        "{name}: capacity at {} ({} s steps after {} s warmups)",
        crate::report::capacity::objective_label(search.p99.as_micros() as u64),
        num(search.step.as_secs_f64(), 1),
        num(search.warmup.as_secs_f64(), 1)
    ));
    let jsonl = sink.path().to_path_buf();
    for round in 1..=search.runs {
        for rt in rotated(valid, round as usize - 1) {
            check_interrupted()?;
            progress.begin(&format!("{name} {} capacity search {round}/{}", rt.name(), search.runs));
            let mut rec = wr.record(rt, Kind::Capacity, round);
            let spec = wr.spec(rt, Purpose::Run)?;
            let tag = format!("{name}-{}-capacity-r{round}", rt.name());
            let input = wr.run_input(rt, &spec, None, &tag);
            let json = crate::run::loader::capacity_file(&jsonl, &tag);
            let dir = jsonl.parent().unwrap_or(std::path::Path::new(""));
            let steps_file = json.strip_prefix(dir).unwrap_or(&json).to_string_lossy().into_owned();
            let start = capacity_start(out, rt);
            cells::capacity(wr.bench, &input, search, start, &json, steps_file, &mut rec);
            check_interrupted()?;
            progress.end(search_s, &crate::report::capacity::summary_line(&rec));
            sink.append(&rec)?;
            out.push(rec);
        }
    }
    Ok(())
}

/// Checks, rust first (its answers are the reference), the floor last (it serves the reference's answer); each
/// check's record appended. The runtimes that passed, in the order given; where the workload has one body
/// under load, that body is what loadgen must see on every response.
fn check_cells(
    wr: &mut WorkloadRun<'_>,
    sink: &mut Sink,
    progress: &mut Progress,
    workdir: &std::path::Path,
    out: &mut Vec<Record>,
) -> anyhow::Result<Vec<Runtime>> {
    let cfg = wr.cfg;
    let name = wr.workload().name();
    let (check_s, startup_s, run_s) = estimates(cfg);
    let push = |rec: Record, sink: &mut Sink, out: &mut Vec<Record>| -> anyhow::Result<()> {
        sink.append(&rec)?;
        out.push(rec);
        Ok(())
    };

    let runtimes: Vec<Runtime> = cfg.runtimes.iter().copied().filter(|r| r.serves(wr.workload())).collect();
    let mut order: Vec<Runtime> = runtimes.iter().copied().filter(|r| *r == Runtime::Rust).collect();
    order.extend(runtimes.iter().copied().filter(|r| !matches!(r, Runtime::Rust | Runtime::Floor)));
    order.extend(runtimes.iter().copied().filter(|r| *r == Runtime::Floor));
    let mut reference: Option<(Runtime, Vec<Outcome>)> = None;
    let mut valid: Vec<Runtime> = Vec::new();
    for rt in order {
        check_interrupted()?;
        progress.begin(&format!("{name} {} check", rt.name()));
        let mut rec = wr.record(rt, Kind::Check, 0);
        if rt == Runtime::Floor {
            wr.floor_body = match &reference {
                Some((_, answers)) => {
                    answers.get(wr.plan.primary).and_then(|a| a.as_ref().ok()).map(|a| a.body.clone())
                }
                None => wr.plan.probes.get(wr.plan.primary).and_then(|p| p.contract.as_ref()).map(|c| c.body.clone()),
            };
        }
        let redis_down = match rt {
            Runtime::FlightNode => {
                wr.server_env(rt, Purpose::Check)?.redis_url.and_then(|url| deps::redis_unanswered(&url))
            }
            _ => None,
        };
        if rt == Runtime::Floor && wr.floor_body.is_none() {
            rec.void_because("no reference answer for the floor to serve (every other runtime's check failed)");
        } else if let Some(why) = redis_down {
            // Flight waits on Redis without a deadline (ioredis queues commands while it reconnects), so a
            // dead Redis would show up as hung requests; fail the cell up front instead.
            rec.void_because(why);
        } else {
            let spec = wr.spec(rt, Purpose::Check)?;
            let only = (rt == Runtime::Floor).then_some(wr.plan.primary);
            let refs = reference.as_ref().map(|(r, a)| Reference { runtime: r.name(), answers: a });
            let input = cells::CheckInput {
                spec: &spec,
                ready_path: &wr.plan.ready_path,
                probes: &wr.plan.probes,
                only,
                content_type_essence: wr.workload().content_type_essence(),
                reference: refs,
            };
            let answers = cells::check(wr.bench, &input, &mut rec);
            if !rec.void && reference.is_none() && rt != Runtime::Floor {
                reference = Some((rt, answers));
            }
        }
        check_interrupted()?;
        if rec.void {
            progress.end(check_s, &format!("VOID: {}", rec.void_reason.as_deref().unwrap_or("")));
            let (searches, search_s) = capacity_estimate(cfg);
            progress.skip(
                cfg.startup_runs as usize + cfg.runs as usize * kinds(cfg) + searches,
                cfg.startup_runs as f64 * startup_s
                    + (cfg.runs as usize * kinds(cfg)) as f64 * run_s
                    + searches as f64 * search_s,
            );
        } else {
            progress.end(check_s, &format!("answers agree; first 200 after {:.1} ms", rec.startup_ms.unwrap_or(0.0)));
            valid.push(rt);
        }
        push(rec, sink, out)?;
    }
    // Measured in the order given, not the check order.
    let valid: Vec<Runtime> = runtimes.iter().copied().filter(|r| valid.contains(r)).collect();

    // Every response under load must be the reference's, where the workload has one body.
    let expected = reference.as_ref().and_then(|(_, a)| a.get(wr.plan.primary)?.as_ref().ok().map(|a| a.body.clone()));
    if let (true, Some(body)) = (wr.workload().one_body_under_load(), expected) {
        let file = workdir.join(format!("{name}-expected-body"));
        std::fs::write(&file, body)?;
        wr.plan.load.expect_body_file = Some(file);
    }

    Ok(valid)
}

/// `--soak`: every valid runtime of every workload at once, one long-lived server each under its own loader
/// (a soak looks for growth, not capacity, and at its fixed rate a server needs a small share of a core).
/// Each cell runs in a thread of its own, its start a `--soak-interval` / cells later than the one before, so
/// the loaders' windows (and their loadgen starts) interleave rather than line up. Every sample is appended as
/// measured. A notes-write soak's last sample also accounts for every write acknowledged during the soak.
fn soak_cells(
    runs: &[(WorkloadRun<'_>, Vec<Runtime>)],
    soak: crate::settings::Soak,
    sink: &mut Sink,
    progress: &mut Progress,
    out: &mut Vec<Record>,
) -> anyhow::Result<()> {
    let cells: Vec<(&WorkloadRun<'_>, Runtime)> =
        runs.iter().flat_map(|(wr, valid)| valid.iter().map(move |&rt| (wr, rt))).collect();
    if cells.is_empty() {
        return Ok(());
    }
    // In this thread, before any server starts: a notes-write spec empties its runtime's database.
    let specs = cells.iter().map(|(wr, rt)| wr.spec(*rt, Purpose::Run)).collect::<anyhow::Result<Vec<_>>>()?;
    let samples = soak_samples(&soak);
    let stagger = soak.interval / cells.len() as u32;
    let names: Vec<String> = cells.iter().map(|(wr, rt)| format!("{} {}", wr.workload().name(), rt.name())).collect();
    progress.line(&format!(
        "soak: {} servers at once ({}) for {:.0} s, each at {:.0} req/s, a sample every {:.1} s, starts {:.2} s apart",
        cells.len(),
        names.join(", "),
        soak.duration.as_secs_f64(),
        soak.rate,
        soak.interval.as_secs_f64(),
        stagger.as_secs_f64(),
    ));
    let shared = std::sync::Mutex::new((sink, progress, out));
    let outcomes: Vec<anyhow::Result<()>> = std::thread::scope(|scope| {
        let threads: Vec<_> = cells
            .iter()
            .zip(&specs)
            .enumerate()
            .map(|(i, (&(wr, rt), spec))| {
                let shared = &shared;
                scope.spawn(move || -> anyhow::Result<()> {
                    std::thread::sleep(stagger * i as u32);
                    check_interrupted()?;
                    let name = wr.workload().name();
                    let tag = format!("{name}-{}-soak", rt.name());
                    let input = wr.run_input(rt, spec, Some(soak.rate), &tag);
                    let make = |sample: u32| wr.record(rt, Kind::Soak, sample);
                    let (mut taken, mut acknowledged) = (0, 0);
                    let mut emit = |mut rec: Record| -> anyhow::Result<()> {
                        taken += 1;
                        if rec.round as usize == samples
                            && let Err(e) = audit_writes(wr, rt, &mut rec, acknowledged)
                        {
                            rec.void_because(format!("{e:#}"));
                        }
                        acknowledged += acknowledged_writes(&rec);
                        let summary = soak_summary(&rec);
                        let mut guard = shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                        let (sink, progress, out) = &mut *guard;
                        progress.begin(&format!("{name} {} soak sample {}/{samples}", rt.name(), rec.round));
                        progress.end(soak.interval.as_secs_f64(), &summary);
                        sink.append(&rec)?;
                        out.push(rec);
                        Ok(())
                    };
                    let soaked = cells::soak(wr.bench, &input, soak.interval, soak.duration, &make, &mut emit);
                    // A soak cut short (the server exited) leaves its remaining samples' time unspent.
                    let left = samples.saturating_sub(taken);
                    let mut guard = shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    guard.1.skip(left, left as f64 * soak.interval.as_secs_f64());
                    soaked
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a soak thread panicked"))))
            .collect()
    });
    outcomes.into_iter().collect()
}

fn soak_samples(soak: &crate::settings::Soak) -> usize {
    (soak.duration.as_secs_f64() / soak.interval.as_secs_f64()).ceil().max(1.0) as usize
}

fn soak_summary(rec: &Record) -> String {
    let rss = rec.rss_after_kib.map_or("—".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
    if rec.void {
        return format!("RSS {rss}; VOID: {}", rec.void_reason.as_deref().unwrap_or(""));
    }
    format!(
        "RSS {rss}, p99 {} ms, {} CPU-µs/resp",
        num(rec.latency_us.map_or(0.0, |l| l.p99 as f64 / 1e3), 3),
        num(rec.server_cpu_us_per_resp.unwrap_or(0.0), 2)
    )
}

/// `cfg.runs` rounds of one kind, every valid runtime once per round, the order rotated each round.
fn run_rounds(
    wr: &WorkloadRun<'_>,
    kind: Kind,
    rate: Option<f64>,
    valid: &[Runtime],
    sink: &mut Sink,
    progress: &mut Progress,
    out: &mut Vec<Record>,
) -> anyhow::Result<()> {
    let cfg = wr.cfg;
    let name = wr.workload().name();
    let (_, _, run_s) = estimates(cfg);
    for round in 1..=cfg.runs {
        for rt in rotated(valid, round as usize - 1) {
            check_interrupted()?;
            progress.begin(&format!("{name} {} {} round {round}/{}", rt.name(), kind.as_str(), cfg.runs));
            let mut rec = wr.record(rt, kind, round);
            let spec = wr.spec(rt, Purpose::Run)?;
            let tag = format!("{name}-{}-{}-r{round}", rt.name(), kind.as_str());
            let input = wr.run_input(rt, &spec, rate, &tag);
            cells::measure_then(wr.bench, &input, &mut rec, &mut |rec| audit_writes(wr, rt, rec, 0));
            check_interrupted()?;
            progress.end(run_s, &run_summary(&rec));
            sink.append(&rec)?;
            out.push(rec);
        }
    }
    Ok(())
}

/// The database a notes-write run on `rt` writes into, emptied before each run.
fn write_db(rt: Runtime) -> String {
    format!("compare_write_{}", rt.name().replace('-', "_"))
}

/// notes-write: every acknowledged write must be in the database with its history row (stored.rs).
/// `earlier`: writes acknowledged before `rec`'s window on the same database (a soak's earlier samples).
fn audit_writes(wr: &WorkloadRun<'_>, rt: Runtime, rec: &mut Record, earlier: u64) -> anyhow::Result<()> {
    let (Service::Scribe, None, Some(deps)) = (wr.workload().service(), &wr.shared_db, wr.deps) else { return Ok(()) };
    if wr.databases(rt).is_empty() {
        return Ok(()); // the floor writes nothing
    }
    if rec.requests.is_none() {
        return Ok(()); // the run never got as far as load: nothing to account for
    }
    let stored = crate::run::stored::read_back(deps, &write_db(rt)).context("reading the rows back")?;
    let acknowledged = earlier + acknowledged_writes(rec);
    rec.stored = Some(stored);
    for problem in crate::run::stored::problems(stored, acknowledged) {
        rec.void_because(problem);
    }
    Ok(())
}

/// The 2xx answers the loader counted in `rec`'s window.
fn acknowledged_writes(rec: &Record) -> u64 {
    rec.statuses.iter().filter(|(s, _)| (200..300).contains(*s)).map(|(_, n)| n).sum()
}

fn run_summary(rec: &Record) -> String {
    if rec.void {
        return format!("VOID: {}", rec.void_reason.as_deref().unwrap_or(""));
    }
    let mut s = format!(
        "{} req/s, {} CPU-µs/resp, p99 {} ms, server cores {}% busy",
        num(rec.req_per_s.unwrap_or(0.0), 0),
        num(rec.server_cpu_us_per_resp.unwrap_or(0.0), 2),
        num(rec.latency_us.map_or(0.0, |l| l.p99 as f64 / 1e3), 3),
        num(rec.server_busy_pct.unwrap_or(0.0), 0)
    );
    if rec.loader_bound == Some(true) {
        s.push_str(" (loader-bound)");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_starts_at_an_eighth_of_the_closed_rate() {
        let meta = RunMeta {
            run_id: "r".into(),
            command: vec!["compare".into()],
            machine: records::machine_info(),
            layout: records::Layout { server_cores: "0".into(), loader_cores: "1".into(), db_cores: "1".into() },
        };
        let closed = |rps: f64, void: bool| {
            let mut r = Record::new(&meta, "hello-bare", "rust", None, Kind::Closed, 1);
            (r.req_per_s, r.void) = (Some(rps), void);
            r
        };
        let out = [closed(100_000.0, false), closed(123_456.0, false), closed(110_000.0, false), closed(1.0, true)];
        assert_eq!(capacity_start(&out, Runtime::Rust), 14_000.0, "110000 / 8 = 13750, two digits");
        assert_eq!(capacity_start(&out, Runtime::Bun), 1000.0, "no closed run: loadgen's default");
        assert_eq!(capacity_start(&[closed(4.0, false)], Runtime::Rust), 1.0);
    }

    #[test]
    fn rotation() {
        assert_eq!(rotated(&[1, 2, 3], 0), [1, 2, 3]);
        assert_eq!(rotated(&[1, 2, 3], 1), [2, 3, 1]);
        assert_eq!(rotated(&[1, 2, 3], 5), [3, 1, 2]);
        assert!(rotated::<u8>(&[], 1).is_empty());
    }
}
