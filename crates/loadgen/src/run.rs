//! One run: the settings checked against the world (files read, the target reachable, an engine chosen),
//! the worker threads started with their share of the connections and of the rate, the per-second lines
//! followed while they run, and their stats added up into the report.

use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::assertions::{Assertions, AssertionsError};
use crate::hdr_log::{HdrLogError, Interval, Recorder};
use crate::open_files::OpenFilesError;
use crate::per_second::JsonlError;
use crate::report::{self, Report, RunConfig, RunMeta};
use crate::settings::{EngineChoice, RunSettings};
use crate::source::SourceError;
use crate::stats::WorkerStats;
use crate::tls::Tls;
use crate::tls_config::{self, TlsClient, TlsConfigError};
use crate::worker::{self, Feeds, Plan, Shared, Tick};
use crate::{epoll, hdr_log, open_files, per_second, request_log, source, uring};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad input: the message is one line for the user. So are the variants from `Source` to `HdrLog`, each
    /// the error of the module that found it.
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Assertions(#[from] AssertionsError),
    #[error(transparent)]
    Tls(#[from] TlsConfigError),
    #[error(transparent)]
    OpenFiles(#[from] OpenFilesError),
    #[error(transparent)]
    Jsonl(#[from] JsonlError),
    /// The `--hdr-log` file cannot be created (before the load starts). One that fails during the run is `Io`.
    #[error(transparent)]
    HdrLog(#[from] HdrLogError),
    #[error("cannot connect to {addr}: {reason}")]
    Unreachable { addr: String, reason: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Report(#[from] report::ReportError),
}

/// What a worker thread returns: its stats, and the last error it saw (said when nothing got through).
type Finished = std::io::Result<(WorkerStats, Option<String>)>;

/// When the run's phases begin and end, fixed once before the workers start.
#[derive(Debug, Clone, Copy)]
struct Window {
    measure_from: Instant,
    end: Instant,
    /// `measure_from` on the wall clock, for the report.
    started_unix_ms: u64,
}

/// Runs the load described by `settings` (warmup, then the measured window) and returns the report.
pub fn run(settings: &RunSettings, command: Vec<String>) -> Result<Report, RunError> {
    let source = source::build(&settings.requests, &settings.target)?;
    let assertions = Assertions::from_settings(&settings.expect)?;
    let tls = match &settings.tls {
        Some(tls) => Some(tls_config::build(tls, &settings.target.server_name, settings.http2)?),
        None => None,
    };
    let threads = thread_count(settings);
    make_room_for_connections(settings.connections, threads)?;
    check_reachable(settings)?;
    // A log that cannot be written fails now, not after the run.
    if let Some(log) = &settings.output.request_log {
        std::fs::File::create(&log.path)
            .map_err(|e| RunError::Input(format!("cannot write --log-requests {}: {e}", log.path.display())))?;
    }
    let hdr_log = settings.output.hdr_log.as_ref().map(hdr_log::create).transpose()?;
    let engine = choose_engine(settings.engine)?;
    let shared = Arc::new(Shared { source, assertions });
    let window = Window::from_now(settings);
    let (tick_tx, tick_rx) = mpsc::channel();
    let ticks = per_second::wanted(settings).then_some(tick_tx);
    let header = hdr_log::Header { window_start: window.wall_start(), open_loop: settings.rate.is_some() };
    let (intervals, hdr_writer) = hdr_log.map(|log| hdr_log::start_writer(log, header, threads)).transpose()?.unzip();
    let handles = spawn_workers(settings, threads, (engine, tls.as_ref()), &shared, window, (ticks, intervals))?;
    per_second::follow(settings, tick_rx, threads)?;

    let mut workers = Vec::with_capacity(threads);
    let mut last_error = None;
    for handle in handles {
        let (stats, error) = handle.join().map_err(|_| RunError::Input("a worker thread panicked".into()))??;
        last_error = last_error.or(error);
        workers.push(stats);
    }
    // The workers are done, so every sender of the log's intervals is gone and its writer ends.
    if let Some(writer) = hdr_writer {
        writer.wait().map_err(|e| RunError::Io(std::io::Error::other(e.to_string())))?;
    }
    let measured = Instant::now().saturating_duration_since(window.measure_from).min(settings.duration);
    let meta = RunMeta {
        command,
        target: settings.target.url.clone(),
        config: RunConfig::new(settings, threads, shared.source.description.clone(), engine_name(engine)),
        started_unix_ms: window.started_unix_ms,
        duration_s: measured.as_secs_f64().max(1e-3),
    };
    let report = Report::from_workers(meta, &workers)?;
    write_request_log(settings, &mut workers)?;
    if report.responses == 0
        && let Some(error) = last_error
    {
        eprintln!("loadgen: no responses; last error: {error}");
    }
    Ok(report)
}

impl Window {
    fn from_now(settings: &RunSettings) -> Window {
        let measure_from = Instant::now() + settings.warmup;
        let started_unix_ms =
            (SystemTime::now() + settings.warmup).duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        Window { measure_from, end: measure_from + settings.duration, started_unix_ms }
    }

    /// `measure_from` on the wall clock, as the report has it (to the millisecond).
    fn wall_start(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.started_unix_ms)
    }
}

/// A thread with no connection would only idle, so there are never more threads than connections.
fn thread_count(settings: &RunSettings) -> usize {
    let connections = settings.connections;
    let threads = settings.threads;
    if threads > connections {
        eprintln!("loadgen: warning: {threads} threads for {connections} connections; using {connections} threads");
        return connections;
    }
    threads
}

/// Raises the open-file limit when the connections need it (said on stderr: it happens once per process, as
/// the limit stays raised for every later run of a capacity search); a hard limit too low is bad input.
fn make_room_for_connections(connections: usize, threads: usize) -> Result<(), RunError> {
    let needed = open_files::needed(connections, threads);
    match open_files::ensure(needed, connections)? {
        open_files::Outcome::Enough => {}
        open_files::Outcome::Raised { from, to } => eprintln!(
            "loadgen: raised the open-file limit (RLIMIT_NOFILE) from {from} to {to} for {connections} \
             connections (about {needed} files)"
        ),
    }
    Ok(())
}

/// Fail fast and clearly when nothing listens, instead of a run full of connect errors.
fn check_reachable(settings: &RunSettings) -> Result<(), RunError> {
    let addr = settings.target.addr;
    match std::net::TcpStream::connect_timeout(&addr, settings.timeout.max(Duration::from_millis(100))) {
        Ok(_) => Ok(()),
        Err(e) => Err(RunError::Unreachable { addr: addr.to_string(), reason: e.to_string() }),
    }
}

/// Starts one worker thread per plan, each running its own event loop on `engine`, under TLS when given a
/// client configuration (each worker with its own session store), sending its seconds to `ticks` and its
/// `--hdr-log` intervals to `intervals` when they are followed.
fn spawn_workers(
    settings: &RunSettings,
    threads: usize,
    (engine, tls): (EngineChoice, Option<&TlsClient>),
    shared: &Arc<Shared>,
    window: Window,
    (ticks, intervals): (Option<Sender<Tick>>, Option<Sender<Interval>>),
) -> Result<Vec<JoinHandle<Finished>>, RunError> {
    let mut handles = Vec::with_capacity(threads);
    let mut first_conn = 0;
    for index in 0..threads {
        let plan = plan(settings, threads, index, first_conn, window);
        first_conn += plan.connections;
        let shared = shared.clone();
        let hdr_log = intervals
            .as_ref()
            .zip(settings.output.hdr_log.as_ref())
            .map(|(to_writer, log)| Recorder::new(log.interval, window.measure_from, window.end, to_writer.clone()));
        let feeds = Feeds { ticks: ticks.clone(), hdr_log };
        let tls = tls.map(|client| tls_config::for_worker(client, plan.connections));
        // Four loops, one per engine with and without TLS: a plaintext loop has no TLS branch in it.
        let handle =
            std::thread::Builder::new().name(format!("loadgen-{index}")).spawn(move || match (engine, tls) {
                (EngineChoice::Uring, None) => {
                    worker::run(plan, shared, feeds, |p| uring::Uring::new(p.addr, p.connections))
                }
                (EngineChoice::Uring, Some(tls)) => worker::run(plan, shared, feeds, |p| {
                    Ok(Tls::new(uring::Uring::new(p.addr, p.connections)?, tls, p.connections))
                }),
                (_, None) => worker::run(plan, shared, feeds, |p| epoll::Epoll::new(p.addr, p.connections)),
                (_, Some(tls)) => worker::run(plan, shared, feeds, |p| {
                    Ok(Tls::new(epoll::Epoll::new(p.addr, p.connections)?, tls, p.connections))
                }),
            })?;
        handles.push(handle);
    }
    Ok(handles)
}

/// Worker `index`'s part of the run. Connections (and the request log's cap) split as evenly as possible:
/// the first `total % threads` workers take one more.
fn plan(settings: &RunSettings, threads: usize, index: usize, first_conn: usize, window: Window) -> Plan {
    let share = |total: usize| total / threads + usize::from(index < total % threads);
    let (log_every, log_max) = settings.output.request_log.as_ref().map_or((0, 0), |l| (l.every, l.max as usize));
    Plan {
        index,
        connections: share(settings.connections),
        pin: settings.pins.as_ref().map(|p| p[index % p.len()]),
        addr: settings.target.addr,
        timeout: settings.timeout,
        pipeline: settings.pipeline,
        rate: settings.rate.map(|r| r.split(threads)),
        ramp: settings.ramp,
        schedule: settings.schedule,
        seed: settings.seed,
        measure_from: window.measure_from,
        end: window.end,
        log_every,
        log_max: share(log_max),
        first_conn,
        requests_per_conn: settings.requests_per_conn,
        tls: settings.tls.is_some(),
        http2: settings.http2,
    }
}

/// `--log-requests`: the workers' records, in one file sorted by intended send time.
fn write_request_log(settings: &RunSettings, workers: &mut [WorkerStats]) -> Result<(), RunError> {
    let Some(log) = &settings.output.request_log else { return Ok(()) };
    let not_logged = workers.iter().map(|w| w.not_logged).sum();
    let mut records: Vec<request_log::Record> =
        workers.iter_mut().flat_map(|w| std::mem::take(&mut w.request_log)).collect();
    request_log::write(&log.path, &mut records, not_logged).map_err(|e| {
        std::io::Error::new(e.kind(), format!("cannot write --log-requests {}: {e}", log.path.display()))
    })?;
    Ok(())
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

/// Why this run should exit non-zero (empty when it passed): assertion failures, connections that were never
/// established, no responses at all. `--allow-failures` (`allow_failures`) accepts all of these.
pub fn failures(report: &Report, allow_failures: bool) -> Vec<String> {
    if allow_failures {
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
    if let Some(h2) = &report.http2 {
        let other: Vec<String> = h2
            .negotiated
            .iter()
            .filter(|(spoke, _)| *spoke != "h2")
            .map(|(spoke, n)| format!("{spoke} × {n}"))
            .collect();
        if !other.is_empty() {
            why.push(format!("--http2: the server spoke {} instead of h2", other.join(", ")));
        }
    }
    if report.connections.failed > 0 {
        why.push(format!(
            "only {} of {} connections were established",
            report.connections.established, report.connections.asked
        ));
    }
    why
}
