//! One cell (a workload on a runtime): start its server pinned, time exec→first 200, verify its answers,
//! and measure runs under loadgen with the server tree's CPU and the server cores' busy share around them.
//! Every function here stops what it started before returning, whatever happened.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::plan::load_spec::LoadSpec;
use crate::plan::probe::{self, Outcome, Probe};
use crate::plan::server_spec::ServerSpec;
use crate::records::{CacheSeen, CapacityFound, Http2Seen, Kind, LatencyUs, Record, TlsSeen};
use crate::run::deps::{Database, Dependency};
use crate::run::loader;
use crate::run::server::{SETTLE, Server, millis, start_ready};
use crate::run::setup::{Bench, LOADER_BOUND_PCT};
use crate::settings::CapacitySearch;
use crate::system::procfs;

/// The reference a cell's answers are held to: whose they are, and the answers.
#[derive(Debug, Clone, Copy)]
pub struct Reference<'a> {
    pub runtime: &'a str,
    pub answers: &'a [Outcome],
}

/// What a cell's check needs besides the bench.
#[derive(Debug, Clone, Copy)]
pub struct CheckInput<'a> {
    pub spec: &'a ServerSpec,
    pub ready_path: &'a str,
    pub probes: &'a [Probe],
    /// Ask only this probe (the floor answers one thing).
    pub only: Option<usize>,
    /// Compare content types without parameters.
    pub content_type_essence: bool,
    /// Hold the answers to these; `None` for the reference itself.
    pub reference: Option<Reference<'a>>,
}

/// Starts the server, times exec→first 200, reads its idle RSS after that one request, asks the probes (all,
/// or only `only`), stops it, and voids the record when an answer fails, breaks the contract or differs
/// from the reference's. Returns the answers, in probe order (`only`: just that one).
pub fn check(bench: &Bench, input: &CheckInput<'_>, rec: &mut Record) -> Vec<Outcome> {
    let CheckInput { spec, ready_path, probes, only, content_type_essence, reference } = *input;
    let chosen: Vec<&Probe> = match only {
        Some(i) => probes.get(i).into_iter().collect(),
        None => probes.iter().collect(),
    };
    let (mut server, elapsed) = match start_ready(spec, bench, ready_path) {
        Ok(s) => s,
        Err(e) => {
            rec.void_because(format!("did not start: {e:#}"));
            return Vec::new();
        }
    };
    if spec.attach.is_none() {
        rec.startup_ms = Some(millis(elapsed));
    }
    std::thread::sleep(SETTLE);
    rec.rss_idle_kib = server.rss_kib();
    let endpoint = server.endpoint();
    let answers: Vec<Outcome> = chosen.iter().map(|p| p.ask(&endpoint)).collect();
    if let Some(status) = server.exited() {
        rec.void_because(format!("exited ({status}) during the probes{}", server.log_tail(12)));
    }
    server.stop();

    let line = |p: &Probe, how: &str| format!("{} ({}): {how}", p.label, p.request_line());
    for (p, a) in chosen.iter().zip(&answers) {
        if let Err(e) = a {
            rec.void_because(format!("probe {}", line(p, e)));
            return answers;
        }
    }
    let contract: Vec<String> = chosen
        .iter()
        .zip(&answers)
        .filter_map(|(p, a)| {
            let want = Ok(p.contract.clone()?);
            probe::difference(p, a, &want, content_type_essence).map(|how| line(p, &how))
        })
        .collect();
    if let Some(first) = contract.first() {
        rec.void_because(format!(
            "{} of {} probes differ from the contract; first: {first}",
            contract.len(),
            chosen.len()
        ));
    }
    if let Some(reference) = reference {
        let pairs: Vec<(&Probe, &Outcome)> = match only {
            Some(i) => probes.get(i).into_iter().zip(reference.answers.get(i)).collect(),
            None => probes.iter().zip(reference.answers).collect(),
        };
        let diffs: Vec<String> = pairs
            .iter()
            .zip(&answers)
            .filter_map(|((p, want), got)| probe::difference(p, got, want, content_type_essence).map(|h| line(p, &h)))
            .collect();
        if let Some(first) = diffs.first() {
            rec.void_because(format!(
                "{} of {} probes differ from {}'s answers; first: {first}",
                diffs.len(),
                chosen.len(),
                reference.runtime
            ));
        }
    }
    answers
}

/// What one measured run needs besides the bench.
#[derive(Debug, Clone)]
pub struct RunInput<'a> {
    pub spec: &'a ServerSpec,
    pub ready_path: &'a str,
    pub load: &'a LoadSpec,
    /// Sent once before any load; must answer 2xx.
    pub prime: Option<&'a Probe>,
    /// Statuses outside 2xx that are answers.
    pub also_ok: &'a [u16],
    /// Open loop at this rate; closed loop without.
    pub rate: Option<f64>,
    /// Names this run's files in the log dir.
    pub tag: &'a str,
    /// The servers compare started that this server uses (databases, the upstream service): their CPU is
    /// measured around each window, and one that exits voids the run.
    pub databases: Vec<Database>,
    /// metadata-cached: the Redis whose keyspace hits and misses over the window give the hit ratio.
    pub cache_url: Option<String>,
}

/// One measured run on a fresh server: idle RSS, priming, a discarded warmup, then the measured loadgen run
/// with the server tree's CPU and the server cores' /proc/stat counters around it, RSS after load. Fills
/// `rec`, voiding it (with every reason) when anything was wrong.
pub fn measure(bench: &Bench, input: &RunInput<'_>, rec: &mut Record) {
    measure_then(bench, input, rec, &mut |_| Ok(()));
}

/// [`measure`], then `after` while the server still runs (what a write run left in the database is read
/// back once the requests in flight when loadgen stopped have finished, not cut off by the server's stop);
/// an error from it voids the run.
pub fn measure_then(
    bench: &Bench,
    input: &RunInput<'_>,
    rec: &mut Record,
    after: &mut dyn FnMut(&mut Record) -> anyhow::Result<()>,
) {
    rec.connections = Some(input.load.connections);
    rec.rate = input.rate;
    on_fresh_server(bench, input, rec, "run", &mut |server, rec| {
        measure_on(bench, input, server, rec)?;
        after(rec)
    });
}

/// Starts the input's server, runs `work` on it, stops it; a start that fails, an error from `work`, or the
/// server exiting during `what` voids `rec`.
fn on_fresh_server(
    bench: &Bench,
    input: &RunInput<'_>,
    rec: &mut Record,
    what: &str,
    work: &mut dyn FnMut(&mut Server, &mut Record) -> anyhow::Result<()>,
) {
    let (mut server, _) = match start_ready(input.spec, bench, input.ready_path) {
        Ok(s) => s,
        Err(e) => {
            rec.void_because(format!("did not start: {e:#}"));
            return;
        }
    };
    if let Err(e) = work(&mut server, rec) {
        rec.void_because(format!("{e:#}"));
    }
    if let Some(status) = server.exited() {
        rec.void_because(format!("server exited ({status}) during the {what}{}", server.log_tail(12)));
    }
    server.stop();
}

/// A soak on one server: started once, prepared like a measured run (settle, idle RSS, priming, warmup), then
/// back-to-back windows of `interval` at the input's fixed rate until `total` has passed. Each window becomes
/// one record from `make(sample)`, handed to `emit` as soon as it is measured. Stops early when the server
/// exits (an OOM kill is the usual end of a leak), when the server could not start (one void record) or
/// when compare is interrupted.
pub fn soak(
    bench: &Bench,
    input: &RunInput<'_>,
    interval: Duration,
    total: Duration,
    make: &dyn Fn(u32) -> Record,
    emit: &mut dyn FnMut(Record) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let fill = |rec: &mut Record| {
        rec.connections = Some(input.load.connections);
        rec.rate = input.rate;
    };
    let (mut server, _) = match start_ready(input.spec, bench, input.ready_path) {
        Ok(s) => s,
        Err(e) => {
            let mut rec = make(1);
            fill(&mut rec);
            rec.void_because(format!("did not start: {e:#}"));
            return emit(rec);
        }
    };
    let result = soak_on(bench, input, &mut server, (interval, total), &fill, make, emit);
    server.stop();
    result
}

fn soak_on(
    bench: &Bench,
    input: &RunInput<'_>,
    server: &mut Server,
    (interval, total): (Duration, Duration),
    fill: &dyn Fn(&mut Record),
    make: &dyn Fn(u32) -> Record,
    emit: &mut dyn FnMut(Record) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut first = make(1);
    fill(&mut first);
    let ready = match prepare(bench, input, server, &mut first) {
        Ok(ready) => ready,
        Err(e) => {
            first.void_because(format!("{e:#}"));
            false
        }
    };
    if !ready || first.void {
        return emit(first);
    }
    let idle = first.rss_idle_kib;
    let began = Instant::now();
    let samples = (total.as_secs_f64() / interval.as_secs_f64()).ceil().max(1.0) as u32;
    for sample in 1..=samples {
        let mut rec = if sample == 1 { first.clone() } else { make(sample) };
        fill(&mut rec);
        rec.rss_idle_kib = idle;
        let tag = format!("{}-s{sample}", input.tag);
        if let Err(e) = window(bench, input, server, interval, &tag, &mut rec) {
            rec.void_because(format!("{e:#}"));
        }
        rec.elapsed_s = Some(began.elapsed().as_secs_f64());
        let exited = server.exited();
        if let Some(status) = &exited {
            rec.void_because(format!("server exited ({status}) during the soak{}", server.log_tail(12)));
        }
        emit(rec)?;
        if exited.is_some() {
            break;
        }
        crate::system::process::check_interrupted()?;
    }
    Ok(())
}

/// One capacity search on a fresh server: prepared like a measured run (settle, idle RSS, priming, the
/// closed-loop warmup), then `loadgen capacity` with the workload's load from `start` req/s, its result
/// written to `json` (named `steps_file` in the record), RSS after it. Fills `rec`, voiding it when the
/// search could not run to its end; a search in which no rate met the objective is a finding, not void.
pub fn capacity(
    bench: &Bench,
    input: &RunInput<'_>,
    search: &CapacitySearch,
    start: f64,
    json: &Path,
    steps_file: String,
    rec: &mut Record,
) {
    rec.connections = Some(input.load.connections);
    on_fresh_server(bench, input, rec, "search", &mut |server, rec| {
        if !prepare(bench, input, server, rec)? {
            return Ok(());
        }
        if let Some(dir) = json.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let run = loader::capacity(bench, server.port, input.load, search, start, json, input.tag)?;
        rec.rss_after_kib = server.rss_kib();
        rec.rss_peak_kib = server.peak_rss_kib();
        if run.timed_out {
            rec.void_because(format!("loadgen capacity still running {:?} past its bound; killed", loader::SLACK));
        }
        let Some(found) = run.report else {
            let why = run.report_error.as_deref().unwrap_or("no loadgen output");
            let stderr = loader::tail(&run.stderr, 300);
            rec.void_because(format!("{why} (loadgen exit {:?}): {stderr}", run.exit));
            return Ok(());
        };
        // 0: a rate met the objective; 1: none did (a finding). Anything else is loadgen failing.
        if !matches!(run.exit, Some(0 | 1)) {
            rec.void_because(format!("loadgen capacity exited {:?}: {}", run.exit, loader::tail(&run.stderr, 300)));
        }
        let best = found.steps.iter().filter(|s| s.verdict == "pass").max_by(|a, b| a.rate.total_cmp(&b.rate));
        rec.rate_achieved = best.map(|s| s.achieved_rps);
        rec.loader_bound = Some(found.loader_bound);
        rec.capacity = Some(CapacityFound {
            objective_p99_us: search.p99.as_micros() as u64,
            start_rps: start,
            rps: found.capacity_rps,
            achieved_rps: best.map(|s| s.achieved_rps),
            p99_us: best.map(|s| s.p99_us),
            steps: found.steps.len() as u32,
            step_s: found.step_s,
            warmup_s: found.warmup_s,
            loader_bound: found.loader_bound,
            reached_max: found.reached_max,
            steps_file: steps_file.clone(),
        });
        Ok(())
    });
}

fn measure_on(bench: &Bench, input: &RunInput<'_>, server: &mut Server, rec: &mut Record) -> anyhow::Result<()> {
    if !prepare(bench, input, server, rec)? {
        return Ok(());
    }
    window(bench, input, server, bench.duration, input.tag, rec)
}

/// Before any measured window: settle, idle RSS, priming, the discarded warmup. `false` when loadgen could not
/// run at all (bad arguments, nothing listening): a measured window would not either.
fn prepare(bench: &Bench, input: &RunInput<'_>, server: &mut Server, rec: &mut Record) -> anyhow::Result<bool> {
    std::thread::sleep(SETTLE);
    rec.rss_idle_kib = server.rss_kib();
    if let Some(prime) = input.prime {
        match prime.ask(&server.endpoint()) {
            Ok(a) if (200..300).contains(&a.status) => {}
            Ok(a) => bail!("priming {} answered {}", prime.request_line(), a.status),
            Err(e) => bail!("priming {}: {e}", prime.request_line()),
        }
    }
    if !bench.warmup.is_zero() {
        let warm =
            loader::run(bench, server.port, input.load, bench.warmup, input.rate, &format!("{}-warmup", input.tag))?;
        let reasons = loader::void_reasons(&warm, input.also_ok, true);
        if !reasons.is_empty() {
            rec.void_because(format!("warmup: {}", reasons.join("; ")));
        }
        if warm.report.is_none() {
            return Ok(false);
        }
    }
    crate::system::process::check_interrupted()?;
    Ok(true)
}

/// One measured loadgen window of `duration` on a running server, with the server tree's CPU and the server
/// cores' /proc/stat counters around it and RSS after it. Fills `rec`, voiding it with every reason.
fn window(
    bench: &Bench,
    input: &RunInput<'_>,
    server: &mut Server,
    duration: Duration,
    tag: &str,
    rec: &mut Record,
) -> anyhow::Result<()> {
    let (server_cores, loader_cores) = (bench.server_cores.set(), bench.loader_cores.set());
    let loader_ticks0 = procfs::core_ticks(loader_cores)?;
    let ticks0 = procfs::core_ticks(server_cores)?;
    let db_cpu0: Vec<procfs::TreeCpu> = input.databases.iter().map(|d| procfs::tree_cpu(d.pid)).collect();
    let keyspace = || input.cache_url.as_deref().map(crate::system::redis::keyspace).transpose();
    let keyspace0 = keyspace()?;
    let cpu0 = server.pid().map(procfs::tree_cpu);
    let run = loader::run(bench, server.port, input.load, duration, input.rate, tag)?;
    let cpu1 = server.pid().map(procfs::tree_cpu);
    let keyspace1 = keyspace()?;
    if let (Some(a), Some(b)) = (keyspace0, keyspace1) {
        rec.cache = Some(CacheSeen { hits: b.hits.saturating_sub(a.hits), misses: b.misses.saturating_sub(a.misses) });
    }
    let ticks1 = procfs::core_ticks(server_cores)?;
    let loader_ticks1 = procfs::core_ticks(loader_cores)?;
    let db_cpu1: Vec<procfs::TreeCpu> = input.databases.iter().map(|d| procfs::tree_cpu(d.pid)).collect();
    for d in &input.databases {
        // A database that died mid-run leaves a run of error answers (or of a server's fallback path):
        // nothing about it compares.
        if !matches!(procfs::process_state(d.pid), Some(state) if state != 'Z') {
            rec.void_because(format!("{} (pid {}) exited during the run", d.kind.name(), d.pid));
        }
    }
    rec.rss_after_kib = server.rss_kib();
    rec.rss_peak_kib = server.peak_rss_kib();
    crate::system::process::check_interrupted()?;

    // The loader cores' load says whether the loader, compare or a database there could keep up (a soak's
    // windows behind the rate, an open loop short of it).
    rec.loader_busy_pct = Some(procfs::busy_pct(loader_ticks0, loader_ticks1));
    let reasons = loader::void_reasons(&run, input.also_ok, false);
    if let Some(rep) = &run.report {
        rec.duration_s = Some(rep.duration_s);
        rec.requests = Some(rep.responses);
        rec.req_per_s = Some(rep.req_per_s);
        rec.latency_us = Some(latency(&rep.latency));
        rec.connections_opened = Some(rep.connections.opened);
        rec.http2 = rep.http2.as_ref().map(|h| http2_seen(h, rep.config.pipeline));
        if input.load.tls.is_some() {
            rec.tls = rep.tls.as_ref().map(tls_seen);
            for difference in crate::plan::tls::differences(rep.tls.as_ref().map(|t| &t.counts), rep.config.http2) {
                rec.void_because(difference);
            }
        }
        rec.statuses = rep.status.clone();
        rec.errors = rep.errors.by_kind().into_iter().map(|(k, n)| (k.to_string(), n)).collect();
        rec.rate_achieved = rep.open_loop.as_ref().map(|o| o.achieved_rate);
        // Without a pid (a running --target) there is no process tree to read: CPU stays unmeasured, and so
        // does the busy share, since nothing says the server runs on the server cores.
        let cpu_us = cpu0.zip(cpu1).map(|(a, b)| (b.total_us() - a.total_us()).max(0.0));
        if rep.responses > 0 {
            let per_response = |us: f64| us / rep.responses as f64;
            rec.server_cpu_us_per_resp = cpu_us.map(per_response);
            rec.loader_cpu_us_per_resp = Some(rep.cpu.us_per_response);
            for ((d, a), b) in input.databases.iter().zip(&db_cpu0).zip(&db_cpu1) {
                let us = per_response((b.total_us() - a.total_us()).max(0.0));
                match d.kind {
                    Dependency::Postgres => rec.postgres_cpu_us_per_resp = Some(us),
                    Dependency::Redis => rec.redis_cpu_us_per_resp = Some(us),
                    Dependency::Upstream => rec.upstream_cpu_us_per_resp = Some(us),
                    // One proxy per database and round trip: their sum.
                    Dependency::DbProxy => {
                        rec.db_proxy_cpu_us_per_resp = Some(rec.db_proxy_cpu_us_per_resp.unwrap_or(0.0) + us)
                    }
                }
            }
        }
        if let Some((a, b)) = cpu0.zip(cpu1) {
            let (user, sys) = ((b.user_us - a.user_us).max(0.0), (b.sys_us - a.sys_us).max(0.0));
            if user + sys > 0.0 {
                rec.server_kernel_pct = Some(100.0 * sys / (user + sys));
            }
        }
        if let Some(cpu_us) = cpu_us {
            let busy = procfs::busy_pct(ticks0, ticks1);
            let wall_us = run.wall.as_secs_f64() * 1e6 * server_cores.len().max(1) as f64;
            let own = 100.0 * cpu_us / wall_us.max(1.0);
            rec.server_busy_pct = Some(busy);
            rec.server_other_pct = Some((busy - own).max(0.0));
            // A server that waits on a delayed database or an upstream idles while it waits: there its idle
            // share says the loader set the pace only when the loader's cores were busy too.
            let waits = input.databases.iter().any(|d| matches!(d.kind, Dependency::Upstream | Dependency::DbProxy));
            let loader_busy = rec.loader_busy_pct.unwrap_or(0.0) >= LOADER_BOUND_PCT;
            let bound = busy < LOADER_BOUND_PCT && (!waits || loader_busy);
            rec.loader_bound = (rec.kind == Kind::Closed).then_some(bound);
        }
    }
    for r in reasons {
        rec.void_because(r);
    }
    Ok(())
}

fn latency(l: &loadgen::report::Latency) -> LatencyUs {
    // A report written by a loadgen before p95 was kept reads it as 0: no p95 rather than a false one.
    let p95 = (l.p95_us > 0 || l.count == 0).then_some(l.p95_us);
    LatencyUs { p50: l.p50_us, p95, p99: l.p99_us, p999: l.p99_9_us, max: l.max_us }
}

/// What a run's HTTP/2 did, as the record keeps it; `streams` is loadgen's `--streams` (its `pipeline`).
fn http2_seen(h: &loadgen::stats::Http2Counts, streams: u32) -> Http2Seen {
    Http2Seen {
        streams,
        negotiated: h.negotiated.clone(),
        streams_opened: h.streams_opened,
        refused: h.refused,
        resets: h.resets.clone(),
        goaways: h.goaways.clone(),
        server_max_streams: h.server_settings.and_then(|s| s.max_concurrent_streams),
        capped_at: h.capped_at,
    }
}

/// What a run's handshakes negotiated, as the record keeps it.
fn tls_seen(tls: &loadgen::report::Tls) -> TlsSeen {
    let c = &tls.counts;
    TlsSeen {
        versions: c.versions.clone(),
        cipher_suites: c.cipher_suites.clone(),
        groups: c.groups.clone(),
        alpn: c.alpn.clone(),
        full_handshakes: c.handshakes.full + c.handshakes.full_with_hello_retry,
        resumed_handshakes: c.handshakes.resumed,
        handshake_latency_us: latency(&tls.handshake_latency),
        failures: c.failures.clone(),
    }
}
