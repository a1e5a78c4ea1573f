//! loadgen: a wrk-class HTTP/1.1 load generator that reports honestly.
//!
//! Threads each run their own mio event loop (optionally pinned), own their connections and their HDR
//! histograms, and merge once at the end. Closed loop (like wrk; latency uncorrected) or open loop at a fixed
//! rate (`-R`, latency from each request's intended send time). Every request has a real timer; requests still
//! in flight at the end, connections that were never established, and per-kind socket errors are reported.
//!
//! ```text
//! loadgen -t1 -c64 -d10s --latency http://127.0.0.1:3000/api/hello
//! loadgen -R 20000 -c 128 -d 30s --path '/v1/metadata/{id}?region={region}' --var id=@ids.txt --var region=ja,ko,en URL
//! loadgen merge a.json b.json --json all.json
//! ```

pub mod assertions;
pub mod capacity;
pub mod cli;
mod engine;
mod epoll;
pub mod http1;
pub mod log_chart;
pub mod merge;
pub mod render;
pub mod report;
pub mod request_log;
pub mod source;
pub mod stats;
pub mod target;
mod timer;
mod uring;
mod worker;

use std::io::Write;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cli::{EngineChoice, RunArgs};
use report::{Report, RunConfig, RunMeta};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad input: the message is one line for the user.
    #[error("{0}")]
    Input(String),
    #[error("cannot connect to {addr}: {reason}")]
    Unreachable { addr: String, reason: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Report(#[from] report::ReportError),
}

/// Runs the load described by `args` (warmup, then the measured window) and returns the report.
pub fn run(args: &RunArgs, command: Vec<String>) -> Result<Report, RunError> {
    let url = args.url.as_deref().ok_or_else(|| RunError::Input("a URL is required".into()))?;
    let target = target::parse(url).map_err(RunError::Input)?;
    let source = source::build(args, &target).map_err(RunError::Input)?;
    let assertions = assertions::Assertions::from_args(args).map_err(RunError::Input)?;
    let pins = args.pin.as_deref().map(cli::parse_cpus).transpose().map_err(RunError::Input)?;
    check_rate(args)?;
    let connections = args.connections as usize;
    let mut threads = args.threads as usize;
    if threads > connections {
        eprintln!("loadgen: warning: {threads} threads for {connections} connections; using {connections} threads");
        threads = connections;
    }

    // Fail fast and clearly when nothing listens, instead of a run full of connect errors.
    if let Err(e) = std::net::TcpStream::connect_timeout(&target.addr, args.timeout.max(Duration::from_millis(100))) {
        return Err(RunError::Unreachable { addr: target.addr.to_string(), reason: e.to_string() });
    }

    // A log that cannot be written fails now, not after the run.
    if let Some(path) = &args.log_requests {
        std::fs::File::create(path)
            .map_err(|e| RunError::Input(format!("cannot write --log-requests {}: {e}", path.display())))?;
    }
    let engine = choose_engine(args.engine)?;
    let shared = Arc::new(worker::Shared { source, assertions });
    let started = Instant::now();
    let measure_from = started + args.warmup;
    let end = measure_from + args.duration;
    let started_unix_ms =
        (SystemTime::now() + args.warmup).duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let want_ticks =
        args.jsonl.is_some() || (!args.no_progress && std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let (tick_tx, tick_rx) = mpsc::channel();

    let mut handles = Vec::with_capacity(threads);
    let mut first_conn = 0;
    let log_max = args.log_max as usize;
    for index in 0..threads {
        // Connections split as evenly as possible: the first `connections % threads` workers take one more.
        let share = connections / threads + usize::from(index < connections % threads);
        let plan = worker::Plan {
            index,
            connections: share,
            pin: pins.as_ref().map(|p| p[index % p.len()]),
            addr: target.addr,
            timeout: args.timeout,
            pipeline: args.pipeline as usize,
            rate: args.rate.map(|r| r.split(threads)),
            ramp: args.ramp,
            schedule: args.schedule,
            seed: args.seed,
            measure_from,
            end,
            log_every: if args.log_requests.is_some() { args.log_every } else { 0 },
            log_max: log_max / threads + usize::from(index < log_max % threads),
            first_conn,
        };
        first_conn += share;
        let shared = shared.clone();
        let ticks = want_ticks.then(|| tick_tx.clone());
        let handle = std::thread::Builder::new().name(format!("loadgen-{index}")).spawn(move || match engine {
            EngineChoice::Uring => worker::run(plan, shared, ticks, |p| uring::Uring::new(p.addr, p.connections)),
            _ => worker::run(plan, shared, ticks, |p| epoll::Epoll::new(p.addr, p.connections)),
        })?;
        handles.push(handle);
    }
    drop(tick_tx);
    follow_ticks(args, tick_rx, threads)?;

    let mut workers = Vec::with_capacity(threads);
    let mut last_error = None;
    for handle in handles {
        let (stats, error) = handle.join().map_err(|_| RunError::Input("a worker thread panicked".into()))??;
        last_error = last_error.or(error);
        workers.push(stats);
    }
    let measured = Instant::now().saturating_duration_since(measure_from).min(args.duration);
    let meta = RunMeta {
        command,
        target: target.url.clone(),
        config: RunConfig::new(args, threads, shared.source.description.clone(), pins.as_deref(), engine_name(engine)),
        started_unix_ms,
        duration_s: measured.as_secs_f64().max(1e-3),
    };
    let report = Report::from_workers(meta, &workers)?;
    if let Some(path) = &args.log_requests {
        let not_logged = workers.iter().map(|w| w.not_logged).sum();
        let mut records: Vec<request_log::Record> =
            workers.iter_mut().flat_map(|w| std::mem::take(&mut w.request_log)).collect();
        request_log::write(path, &mut records, not_logged).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot write --log-requests {}: {e}", path.display()))
        })?;
    }
    if report.responses == 0
        && let Some(error) = last_error
    {
        eprintln!("loadgen: no responses; last error: {error}");
    }
    Ok(report)
}

/// The open-loop rate makes sense: positive, and a ramp (`-R START:END`) comes with a `--ramp` that fits in
/// the measured window, and only then.
fn check_rate(args: &RunArgs) -> Result<(), RunError> {
    let Some(rate) = args.rate else { return Ok(()) };
    let positive = |r: f64| r.is_finite() && r > 0.0;
    if !(positive(rate.start) && positive(rate.end)) {
        return Err(RunError::Input("--rate must be a positive number of requests per second".into()));
    }
    match (rate.is_ramp(), args.ramp) {
        (true, None) => Err(RunError::Input(format!(
            "-R {}:{} is a ramp: say how long it takes with --ramp DURATION",
            rate.start, rate.end
        ))),
        (false, Some(_)) => Err(RunError::Input("--ramp needs a ramp: -R START:END".into())),
        (true, Some(ramp)) if ramp > args.duration => {
            Err(RunError::Input(format!("--ramp {ramp:?} is longer than the measured window (-d {:?})", args.duration)))
        }
        _ => Ok(()),
    }
}

/// The engine to run on: `auto` is io_uring where the kernel allows it, else epoll (said once on stderr);
/// an explicit `uring` that cannot work is bad input.
fn choose_engine(asked: EngineChoice) -> Result<EngineChoice, RunError> {
    if asked == EngineChoice::Epoll {
        return Ok(EngineChoice::Epoll); // no probe ring for a run that will not use it
    }
    match uring::unavailable() {
        None => Ok(EngineChoice::Uring),
        Some(why) if asked == EngineChoice::Uring => Err(RunError::Input(format!("--engine uring: {why}"))),
        Some(why) => {
            eprintln!("loadgen: io_uring unavailable ({why}); using the epoll engine");
            Ok(EngineChoice::Epoll)
        }
    }
}

/// Why the io_uring engine cannot run here (None when it can).
pub fn uring_unavailable() -> Option<String> {
    uring::unavailable()
}

fn engine_name(engine: EngineChoice) -> &'static str {
    match engine {
        EngineChoice::Uring => "uring",
        _ => "epoll",
    }
}

/// One second of the run, as the workers' ticks add up.
struct Second {
    workers: usize,
    responses: u64,
    errors: u64,
    scheduled: u64,
    latency: hdrhistogram::Histogram<u64>,
}

/// Writes --jsonl lines and the terminal progress line from the workers' once-a-second ticks. A line:
/// `second` (1 is the first second of the measured window), `target_rps` (open loop: the schedule's rate in
/// the middle of that second, which a ramp moves; null in closed loop), `scheduled` (open loop: sends the
/// schedule called for in it), `responses`, `errors`, and the second's latency `p50_us`, `p99_us`,
/// `p99_9_us`, `max_us` (from the intended send time in open loop).
fn follow_ticks(args: &RunArgs, ticks: mpsc::Receiver<worker::Tick>, threads: usize) -> Result<(), RunError> {
    let mut jsonl: Option<Box<dyn Write>> = match &args.jsonl {
        Some(path) if path.as_os_str() == "-" => Some(Box::new(std::io::stdout())),
        Some(path) => Some(Box::new(
            std::fs::File::create(path)
                .map_err(|e| RunError::Input(format!("cannot write --jsonl {}: {e}", path.display())))?,
        )),
        None => None,
    };
    let progress = !args.no_progress && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut pending: std::collections::BTreeMap<u64, Second> = std::collections::BTreeMap::new();
    for tick in ticks {
        let entry = pending.entry(tick.second).or_insert_with(|| Second {
            workers: 0,
            responses: 0,
            errors: 0,
            scheduled: 0,
            latency: stats::new_histogram(),
        });
        entry.workers += 1;
        entry.responses += tick.responses;
        entry.errors += tick.errors;
        entry.scheduled += tick.scheduled;
        let _ = entry.latency.add(&tick.latency);
        if entry.workers < threads {
            continue;
        }
        if let Some((second, s)) = pending.pop_first() {
            let q = |q: f64| if s.latency.is_empty() { 0 } else { s.latency.value_at_quantile(q) };
            let target = args.rate.map(|r| r.at(second as f64 - 0.5, args.ramp));
            if let Some(out) = jsonl.as_mut() {
                let line = serde_json::json!({
                    "second": second,
                    "target_rps": target,
                    "scheduled": args.rate.map(|_| s.scheduled),
                    "responses": s.responses,
                    "errors": s.errors,
                    "p50_us": q(0.5), "p99_us": q(0.99), "p99_9_us": q(0.999),
                    "max_us": if s.latency.is_empty() { 0 } else { s.latency.max() },
                });
                let _ = writeln!(out, "{line}");
            }
            if progress {
                let asked = target.map_or(String::new(), |t| format!(" of {t:.0}"));
                eprint!("\r[{second:>4}s] {:>9}{asked} req/s  {} errors  p99 {} us   ", s.responses, s.errors, q(0.99));
            }
        }
    }
    if progress {
        eprintln!();
    }
    Ok(())
}

/// Why this run should exit non-zero (empty when it passed): assertion failures, connections that were never
/// established, no responses at all. `--allow-failures` accepts all of these.
pub fn failures(report: &Report, args: &RunArgs) -> Vec<String> {
    if args.allow_failures {
        return Vec::new();
    }
    let mut why = Vec::new();
    if report.responses == 0 {
        why.push("no responses completed".to_string());
    }
    if report.assertions.failed > 0 {
        why.push(format!(
            "{} of {} checked responses failed assertions",
            report.assertions.failed, report.assertions.checked
        ));
    }
    if report.connections.failed > 0 {
        why.push(format!(
            "only {} of {} connections were established",
            report.connections.established, report.connections.asked
        ));
    }
    why
}
