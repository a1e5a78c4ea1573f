//! Memory stays flat over a long run: loadgen keeps latencies in HDR histograms, never per-request samples,
//! so a closed loop at full rate must not grow its resident set with the number of requests. (This replaces a
//! retired Python harness that sampled VmRSS of one long run every second.)
//!
//! The real binary runs against a local server while the test samples its VmRSS from /proc; the first
//! seconds (allocator arenas, connection buffers, histograms being touched for the first time) are loadgen's
//! own --warmup and are not judged. After them, growth to the largest sample must stay small. A second test
//! turns on --log-requests, which holds one record per response in memory until the run ends, to show that
//! the same measurement does see per-request storage.
//!
//! Which engine runs comes from LOADGEN_ENGINE like every other test here (scripts/test.sh runs this crate's
//! tests once as they are, io_uring where the kernel allows it, and once with LOADGEN_ENGINE=epoll); the
//! child inherits it, and its report must name the engine asked for.

mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use loadgen::report::Report;

/// loadgen's --warmup, and the samples not judged: the allocator settles in this time.
const WARMUP: Duration = Duration::from_secs(2);
/// loadgen's measured window, after the warmup: about 8 s in all.
const MEASURE: Duration = Duration::from_secs(6);
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// Growth allowed from the first steady sample to the largest. A run here makes about 50,000 responses a
/// second (debug build, one thread), so keeping even 8 bytes per response would exceed it within the window;
/// histograms do not grow at all (a few KiB of noise).
const GROWTH_BOUND_KIB: u64 = 2 * 1024;
/// Responses the measured window must hold for the check to mean anything: a run of a few hundred requests
/// would pass any memory bound. Far below what even a busy 2-core machine does in 6 s; not a throughput check.
const MIN_RESPONSES: u64 = 20_000;
/// What one --log-requests record takes in memory (src/request_log.rs: `Record`, 40 bytes with padding).
const LOG_RECORD_BYTES: u64 = 40;
/// Longest the run may take past warmup + measure before the test kills it and fails.
const SLACK: Duration = Duration::from_secs(15);

/// VmRSS of one process at one moment.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Since the process was spawned.
    at: Duration,
    rss_kib: u64,
}

/// The samples of one run and what they say.
struct Watched {
    samples: Vec<Sample>,
    report: Report,
}

impl Watched {
    /// The samples after the warmup.
    fn steady(&self) -> &[Sample] {
        let first = self.samples.iter().position(|s| s.at >= WARMUP).unwrap_or(self.samples.len());
        &self.samples[first..]
    }

    /// Largest steady sample minus the first one, KiB.
    fn growth_kib(&self) -> u64 {
        let steady = self.steady();
        let (Some(first), Some(max)) = (steady.first(), steady.iter().map(|s| s.rss_kib).max()) else { return 0 };
        max.saturating_sub(first.rss_kib)
    }

    /// Least-squares slope of the steady samples, KiB per second: the trend, where growth is one number a
    /// single late allocation can move.
    fn slope_kib_per_s(&self) -> f64 {
        let steady = self.steady();
        let n = steady.len() as f64;
        if n < 2.0 {
            return 0.0;
        }
        let mean_t = steady.iter().map(|s| s.at.as_secs_f64()).sum::<f64>() / n;
        let mean_r = steady.iter().map(|s| s.rss_kib as f64).sum::<f64>() / n;
        let (mut cov, mut var) = (0.0, 0.0);
        for s in steady {
            let dt = s.at.as_secs_f64() - mean_t;
            cov += dt * (s.rss_kib as f64 - mean_r);
            var += dt * dt;
        }
        if var == 0.0 { 0.0 } else { cov / var }
    }

    /// One line of figures, then every sample: what a failure (or `--no-capture`) shows.
    fn describe(&self) -> String {
        let steady = self.steady();
        let (first, last) = (steady.first().map_or(0, |s| s.rss_kib), steady.last().map_or(0, |s| s.rss_kib));
        let max = steady.iter().map(|s| s.rss_kib).max().unwrap_or(0);
        let mut text = format!(
            "engine {}: {} responses ({:.0} req/s); steady VmRSS first {first} KiB, last {last} KiB, max {max} KiB, \
             growth {} KiB (bound {GROWTH_BOUND_KIB}), slope {:.1} KiB/s over {} samples\nsamples (s since spawn, KiB):",
            self.report.config.engine,
            self.report.responses,
            self.report.req_per_s,
            self.growth_kib(),
            self.slope_kib_per_s(),
            steady.len(),
        );
        for s in &self.samples {
            let judged = if s.at >= WARMUP { "" } else { " (warmup)" };
            let _ = write!(text, "\n  {:6.2} {}{judged}", s.at.as_secs_f64(), s.rss_kib);
        }
        text
    }
}

/// VmRSS of `pid`, KiB; None once it has exited (a zombie's status has no VmRSS line).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse().ok()
}

/// Runs the loadgen binary closed-loop at full rate (4 connections, one thread) against a fresh local server,
/// with `extra` arguments, sampling its VmRSS every `SAMPLE_EVERY` until it exits. The run must succeed, use
/// the engine asked for, and make at least `MIN_RESPONSES` responses without errors.
fn watch(extra: &[&str]) -> Watched {
    let server = Server::routes();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("report.json");
    let (warmup, duration) = (format!("{}ms", WARMUP.as_millis()), format!("{}ms", MEASURE.as_millis()));
    let url = server.url("/");
    let mut list = vec!["-c", "4", "--warmup", &warmup, "-d", &duration, "--timeout", "2s"];
    list.extend_from_slice(extra);
    list.extend(["--json", s(&json), &url]);
    // As the child will parse it (with LOADGEN_ENGINE from this environment); `args` adds --no-progress.
    let expected_engine = expected_engine(&args(&list));

    // Output to files, not pipes: nothing has to drain them while the loop below samples.
    let (stdout, stderr) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let file = |path: &Path| std::fs::File::create(path).expect("create an output file");
    let started = Instant::now();
    let mut child = Command::new(testkit::workspace::binary("loadgen"))
        .args(&list)
        .arg("--no-progress")
        .stdin(Stdio::null())
        .stdout(file(&stdout))
        .stderr(file(&stderr))
        .spawn()
        .expect("spawn the loadgen binary");
    let pid = child.id();
    let mut samples = Vec::new();
    let mut tick = 0;
    let deadline = WARMUP + MEASURE + SLACK;
    let status = loop {
        // Read before reaping: once `try_wait` has reaped it, the pid may belong to another process.
        let rss = rss_kib(pid);
        let at = started.elapsed();
        if let Some(status) = child.try_wait().expect("wait for loadgen") {
            break status;
        }
        if let Some(rss_kib) = rss {
            samples.push(Sample { at, rss_kib });
        }
        if at > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("loadgen {list:?} still running after {deadline:?}; killed");
        }
        // On a fixed schedule from the spawn, so a slow read does not stretch the intervals that follow.
        tick += 1;
        std::thread::sleep((SAMPLE_EVERY * tick).saturating_sub(started.elapsed()));
    };
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    assert!(status.success(), "loadgen {list:?}: {status}\nstdout:\n{}\nstderr:\n{}", read(&stdout), read(&stderr));
    let report = read_report(&json);
    let watched = Watched { samples, report };
    let r = &watched.report;
    assert_eq!(r.config.engine, expected_engine, "the run used the engine it was asked for");
    assert_eq!(r.errors.total(), 0, "errors: {:?}\n{}", r.errors, watched.describe());
    assert!(r.responses >= MIN_RESPONSES, "too few responses to judge memory by\n{}", watched.describe());
    // Enough steady samples for a trend: the measured window is 24 of them; a stalled sampler would see few.
    assert!(watched.steady().len() >= 12, "too few samples after the warmup\n{}", watched.describe());
    watched
}

#[test]
fn memory_stays_flat_over_a_long_run_at_full_rate() {
    let watched = watch(&[]);
    let summary = watched.describe();
    println!("{summary}");
    assert!(
        watched.growth_kib() < GROWTH_BOUND_KIB,
        "VmRSS grew by more than {GROWTH_BOUND_KIB} KiB after the warmup: something is kept per request\n{summary}"
    );
}

/// The opposite direction: --log-requests keeps one record per response until the run ends, and the same
/// measurement must see it grow (otherwise the test above could pass by never seeing anything).
#[test]
fn per_request_storage_shows_up_as_growth() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("requests.tsv");
    let watched = watch(&["--log-requests", s(&log)]);
    let summary = watched.describe();
    println!("{summary}");
    // The log holds every response of the measured window, which is the judged one, so the samples should
    // climb by about what it holds; half leaves room for a last sample taken before the window's end.
    let held_kib = watched.report.responses * LOG_RECORD_BYTES / 1024;
    assert!(
        watched.growth_kib() >= held_kib / 2,
        "--log-requests held {held_kib} KiB of records, yet VmRSS grew by only {} KiB\n{summary}",
        watched.growth_kib()
    );
}
