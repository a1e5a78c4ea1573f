//! One loadgen process pinned to the loader cores: a measured run ([`run`]) or a capacity search
//! ([`capacity`]), waited for with a bound, its JSON output read back, its own CPU taken from /proc as it
//! exits. Both build their command line from the same pieces, so a search loads a server exactly as a run
//! of the same workload does.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use loadgen::capacity::Capacity;
use loadgen::report::Report;
use serde::de::DeserializeOwned;

use crate::plan::load_spec::LoadSpec;
use crate::run::setup::Bench;
use crate::settings::CapacitySearch;
use crate::system::process::Spawned;

/// loadgen gets this long past its own bound before it is killed and the run voided.
pub const SLACK: Duration = Duration::from_secs(30);
/// A capacity search's steps are bounded by this many (doubling from the start rate to loadgen's 10M req/s
/// ceiling, bisecting to 5%, every failure retried once, stays below it); the process is killed past that.
const MAX_SEARCH_STEPS: u32 = 48;

/// One loadgen process and what came of it: `R` is its `--json` output (a run's report, a search's result).
#[derive(Debug)]
pub struct LoadgenRun<R = Report> {
    pub argv: Vec<String>,
    pub report: Option<R>,
    pub report_error: Option<String>,
    pub exit: Option<i32>,
    pub timed_out: bool,
    pub wall: Duration,
    pub stderr: String,
    /// loadgen's own CPU over its life (all threads), µs, as /proc had it at its exit; None when killed.
    pub cpu_us: Option<f64>,
}

fn dur(d: Duration) -> String {
    format!("{}ms", d.as_millis().max(1))
}

/// The flags every loadgen invocation shares: threads (one per loader core, never more than connections),
/// connections, the per-request timeout, pinning, the engine, the JSON output.
fn shared_args(bench: &Bench, load: &LoadSpec, json: &Path) -> anyhow::Result<Vec<String>> {
    let threads = bench.loader_cores.count().clamp(1, load.connections.max(1) as usize);
    let mut argv: Vec<String> = [
        "-t",
        &threads.to_string(),
        "-c",
        &load.connections.to_string(),
        "--timeout",
        &dur(bench.request_timeout),
        "--pin",
        bench.loader_cores.as_str(),
        "--no-progress",
        "--json",
        &json.to_string_lossy(),
    ]
    .map(String::from)
    .to_vec();
    if let Some(engine) = bench.loadgen_engine {
        argv.extend(["--engine".to_string(), engine.to_string()]);
    }
    Ok(argv)
}

/// Runs `taskset -c LOADER loadgen ARGS`, waits at most `limit`, reads `json` back as `R`.
fn spawn<R: DeserializeOwned>(
    bench: &Bench,
    args: Vec<String>,
    json: &Path,
    limit: Duration,
    tag: &str,
) -> anyhow::Result<LoadgenRun<R>> {
    let _ = std::fs::remove_file(json);
    let mut argv = vec!["-c".to_string(), bench.loader_cores.to_string()];
    argv.extend(bench.loadgen_wrapper.iter().cloned());
    argv.push(bench.loadgen.to_string_lossy().into());
    argv.extend(args);
    let out = File::create(bench.logdir.join(format!("{tag}.out")))?;
    let err_path = bench.logdir.join(format!("{tag}.err"));
    let err = File::create(&err_path)?;
    let mut cmd = Command::new("taskset");
    cmd.args(&argv).stdin(Stdio::null()).stdout(out).stderr(err);
    let started = Instant::now();
    let mut proc = Spawned::spawn(cmd, "loadgen").context("starting loadgen")?;
    let status = proc.wait_timeout(limit)?;
    let timed_out = status.is_none();
    if timed_out {
        proc.kill();
    }
    let wall = started.elapsed();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let (report, report_error) = match std::fs::read(json) {
        Ok(raw) => match serde_json::from_slice::<R>(&raw) {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(format!("unreadable loadgen output {}: {e}", json.display()))),
        },
        Err(e) => (None, Some(format!("no loadgen output ({e})"))),
    };
    let mut full = vec!["taskset".to_string()];
    full.extend(argv);
    let cpu_us = proc.cpu_at_exit().map(|c| c.total_us());
    let exit = status.and_then(|s| s.code());
    Ok(LoadgenRun { argv: full, report, report_error, exit, timed_out, wall, stderr, cpu_us })
}

/// Runs loadgen against `port` for `duration` (open loop at `rate`, closed without), waits for it (bounded)
/// and reads its JSON report.
pub fn run(
    bench: &Bench,
    port: u16,
    load: &LoadSpec,
    duration: Duration,
    rate: Option<f64>,
    tag: &str,
) -> anyhow::Result<LoadgenRun> {
    let json = bench.logdir.join(format!("{tag}.json"));
    let mut args = shared_args(bench, load, &json)?;
    args.extend(["-d", &dur(duration), "--warmup", "0s"].map(String::from));
    if let Some(rate) = rate {
        args.extend(["-R".to_string(), format!("{:.0}", rate.max(1.0))]);
    }
    args.extend(load.loadgen_args(port));
    spawn(bench, args, &json, duration + SLACK, tag)
}

/// Runs `loadgen capacity` against `port` with the workload's load, from `start` req/s, writing its result
/// (every step) to `json`, and reads it back.
pub fn capacity(
    bench: &Bench,
    port: u16,
    load: &LoadSpec,
    search: &CapacitySearch,
    start: f64,
    json: &Path,
    tag: &str,
) -> anyhow::Result<LoadgenRun<Capacity>> {
    let mut args = vec!["capacity".to_string()];
    args.extend(shared_args(bench, load, json)?);
    args.extend(
        ["--p99", &dur(search.p99), "--start", &format!("{:.0}", start.max(1.0)), "-d", &dur(search.step)]
            .map(String::from),
    );
    args.extend(["--warmup".to_string(), dur(search.warmup)]);
    args.extend(load.loadgen_args(port));
    // Each step opens fresh connections and waits out its warmup and window; a second on top covers both.
    let per_step = search.step + search.warmup + Duration::from_secs(1);
    spawn(bench, args, json, per_step * MAX_SEARCH_STEPS + SLACK, tag)
}

/// The last `max` characters of `text`, on one line.
pub fn tail(text: &str, max: usize) -> String {
    let t = text.trim();
    let start = t.char_indices().rev().nth(max.saturating_sub(1)).map_or(0, |(i, _)| i);
    t[start..].replace('\n', " | ")
}

/// Why a loadgen run does not count; empty when it does. Any status outside 2xx (and `also_ok`), any
/// socket error, timeout or failed assertion, and unless a warmup, fewer connections than asked or no
/// response at all.
pub fn void_reasons(run: &LoadgenRun, also_ok: &[u16], warmup: bool) -> Vec<String> {
    let mut reasons = Vec::new();
    if run.timed_out {
        reasons.push(format!("loadgen still running {SLACK:?} after its duration; killed"));
    }
    let Some(rep) = &run.report else {
        reasons.push(format!(
            "{} (loadgen exit {:?}): {}",
            run.report_error.as_deref().unwrap_or("no loadgen report"),
            run.exit,
            tail(&run.stderr, 300)
        ));
        return reasons;
    };
    let bad: Vec<String> = rep
        .status
        .iter()
        .filter(|(code, n)| **n > 0 && !(200..300).contains(*code) && !also_ok.contains(code))
        .map(|(code, n)| format!("{code}: {n}"))
        .collect();
    if !bad.is_empty() {
        reasons.push(format!("unexpected statuses {}", bad.join(", ")));
    }
    let errors: Vec<String> =
        rep.errors.by_kind().iter().filter(|(_, n)| *n > 0).map(|(k, n)| format!("{k} {n}")).collect();
    if !errors.is_empty() {
        reasons.push(format!("errors: {}", errors.join(", ")));
    }
    if let Some(why) = rep.tls.as_ref().and_then(|t| tls_failures(&t.counts)) {
        reasons.push(why);
    }
    if let Some(h2) = &rep.http2 {
        let other: Vec<String> =
            h2.negotiated.iter().filter(|(spoke, _)| *spoke != "h2").map(|(spoke, n)| format!("{spoke} {n}")).collect();
        if !other.is_empty() {
            reasons.push(format!("HTTP/2 asked, the server spoke {} instead of h2", other.join(", ")));
        }
    }
    let c = &rep.connections;
    // A warmup may end before a cold server has finished every handshake (a JIT at its first hundred TLS
    // handshakes takes hundreds of milliseconds); a connection that failed shows as an error above.
    if !warmup && (c.failed > 0 || c.established < c.asked) {
        reasons.push(format!("connections asked {}, established {}, failed {}", c.asked, c.established, c.failed));
    }
    if !warmup && rep.responses == 0 {
        reasons.push(format!("no response completed ({} in flight at the end)", rep.in_flight_at_end));
    }
    match run.exit {
        Some(0) => {}
        // 1 = failed its checks: the reasons above say which, unless it was something else. A warmup is held
        // to fewer of them than loadgen's own (its connections, a response), so its 1 may leave none.
        Some(1) if warmup || !reasons.is_empty() => {}
        other => reasons.push(format!("loadgen exited {other:?}: {}", tail(&run.stderr, 300))),
    }
    reasons
}

/// Why handshakes failed, in loadgen's words (`TLS failures: handshake timed out 3`); `None` when none did. A
/// count of `tls` errors alone does not say whether the server closed, refused or never answered.
fn tls_failures(counts: &loadgen::stats::TlsCounts) -> Option<String> {
    let why: Vec<String> = counts.failures.iter().map(|(reason, n)| format!("{reason} {n}")).collect();
    (!why.is_empty()).then(|| format!("TLS failures: {}", why.join(", ")))
}

/// Where a capacity search's own result goes: beside the records, so every step stays readable after the run
/// (`<out-dir>/<run id>-capacity/<tag>.json`, loadgen's schemas/loadgen/capacity.schema.json).
pub fn capacity_file(jsonl: &Path, tag: &str) -> PathBuf {
    let stem = jsonl.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    jsonl.with_file_name(format!("{stem}-capacity")).join(format!("{tag}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_failures_name_each_reason_with_its_count() {
        let mut counts = loadgen::stats::TlsCounts::default();
        assert_eq!(tls_failures(&counts), None);
        counts.failures.insert("handshake timed out".into(), 3);
        counts.failures.insert("closed by the server during the handshake".into(), 40);
        assert_eq!(
            tls_failures(&counts).as_deref(),
            Some("TLS failures: closed by the server during the handshake 40, handshake timed out 3")
        );
    }
}
