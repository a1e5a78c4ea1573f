//! `--hdr-log` and `--hdr-interval`: the built binary writes an HdrHistogram interval log of the measured
//! window, read back here with the hdrhistogram crate's interval log iterator and V2 deserializer. Its
//! intervals add up to exactly the report's histogram (closed and open loop, HTTP/1.1 and HTTP/2, both
//! engines), step by the interval from the window's start, and bad flags are refused before any load.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use common::{engines, loadgen_bin, read_report, s};
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use loadgen::report::{Report, decode_histogram};
use serve::{Limits, Request, Response, Server};
use tower::service_fn;

/// What an interval log holds: its BaseTime and its intervals in file order.
struct Log {
    base_time: Option<Duration>,
    intervals: Vec<Interval>,
}

struct Interval {
    start: Duration,
    length: Duration,
    /// The Interval_Max column (milliseconds: the max in µs / 1000).
    max_ms: f64,
    latency: Histogram<u64>,
}

impl Log {
    fn read(path: &Path) -> Log {
        let text = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let mut log = Log { base_time: None, intervals: Vec::new() };
        for entry in IntervalLogIterator::new(&text) {
            match entry.unwrap_or_else(|e| panic!("{}: {e:?}", String::from_utf8_lossy(&text))) {
                LogEntry::BaseTime(t) => log.base_time = Some(t),
                LogEntry::StartTime(_) => {}
                LogEntry::Interval(i) => {
                    let raw = STANDARD.decode(i.encoded_histogram()).unwrap_or_else(|e| panic!("base64: {e}"));
                    let latency = Deserializer::new()
                        .deserialize(&mut raw.as_slice())
                        .unwrap_or_else(|e| panic!("V2 deflate histogram: {e:?}"));
                    log.intervals.push(Interval {
                        start: i.start_timestamp(),
                        length: i.duration(),
                        max_ms: i.max(),
                        latency,
                    });
                }
            }
        }
        log
    }

    /// Every interval added up.
    fn merged(&self) -> Histogram<u64> {
        let mut merged = loadgen::stats::new_histogram();
        for interval in &self.intervals {
            merged.add(&interval.latency).unwrap_or_else(|e| panic!("add: {e}"));
        }
        merged
    }
}

/// The workspace's server (crates/serve), which speaks HTTP/1.1 and h2c on one port.
fn hello_server() -> Server {
    let listeners = serve::bind_reuseport("127.0.0.1:0".parse::<SocketAddr>().expect("addr"), 1).expect("bind");
    Server::start(listeners, Limits { workers: 1, ..Limits::default() }, || {
        service_fn(|_req: Request| async {
            Ok::<Response, Infallible>(serve::json(http::StatusCode::OK, &serde_json::json!({ "hello": "log" })))
        })
    })
    .expect("server starts")
}

/// Runs the binary with `flags` plus `--hdr-log` and `--json` in a fresh directory; the run must pass.
fn run_logged(flags: &[&str]) -> (Report, Log) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (log, json) = (dir.path().join("run.hdr"), dir.path().join("run.json"));
    let mut list = vec!["--no-progress", "--hdr-log", s(&log), "--json", s(&json)];
    list.extend_from_slice(flags);
    let exit = loadgen_bin(&list);
    assert_eq!(exit.code, Some(0), "{list:?}: {exit:?}");
    (read_report(&json), Log::read(&log))
}

#[test]
fn the_intervals_add_up_to_the_report_s_histogram_on_both_engines_in_every_mode() {
    let server = hello_server();
    let url = format!("http://{}/", server.local_addr());
    for engine in engines() {
        for (mode, extra) in [
            ("closed loop", &[][..]),
            ("open loop", &["-R", "800"][..]),
            ("HTTP/2", &["--http2", "--streams", "4"][..]),
            ("HTTP/2 open loop", &["--http2", "-R", "800"][..]),
        ] {
            let what = format!("{engine}, {mode}");
            let mut flags = vec!["--engine", engine, "-t2", "-c4", "-d1200ms", "--warmup", "300ms"];
            flags.extend_from_slice(&["--hdr-interval", "400ms"]);
            flags.extend_from_slice(extra);
            flags.push(&url);
            let (report, log) = run_logged(&flags);
            assert_eq!(report.config.engine, engine, "{what}");
            assert!(report.responses > 50, "{what}: {} responses", report.responses);
            assert_eq!(log.intervals.len(), 3, "{what}: 1200 ms in 400 ms intervals");
            let merged = log.merged();
            let latency = &report.latency;
            // Closed loop: one value per response; open loop also the sends never sent (`missed_sends`).
            let missed = report.open_loop.as_ref().map_or(0, |o| o.missed_sends);
            assert_eq!(merged.len(), report.responses + missed, "{what}: a value per response");
            assert_eq!(merged.len(), latency.count, "{what}");
            let percentiles = (merged.value_at_quantile(0.5), merged.value_at_quantile(0.99), merged.max());
            assert_eq!(percentiles, (latency.p50_us, latency.p99_us, latency.max_us), "{what}: p50, p99, max");
            let report_histogram = decode_histogram(&latency.histogram).expect("the report's histogram");
            assert!(merged == report_histogram, "{what}: every value in the interval it was recorded in, once");
            let max_ms = log.intervals.iter().map(|i| i.max_ms).fold(0.0, f64::max);
            assert_eq!((max_ms * 1000.0).round() as u64, latency.max_us, "{what}: Interval_Max in milliseconds");
        }
    }
}

#[test]
fn intervals_step_from_the_window_s_start_and_none_is_empty_under_steady_load() {
    let server = hello_server();
    let url = format!("http://{}/", server.local_addr());
    let flags = ["-R", "400", "-c2", "-d2s", "--warmup", "500ms", "--hdr-interval", "250ms", &url];
    let (report, log) = run_logged(&flags);
    let starts: Vec<u128> = log.intervals.iter().map(|i| i.start.as_millis()).collect();
    assert_eq!(starts, (0..8).map(|k| k * 250).collect::<Vec<u128>>(), "offsets from the window's start");
    for (k, interval) in log.intervals.iter().enumerate() {
        assert_eq!(interval.length, Duration::from_millis(250), "interval {k}");
        // 400/s: about 100 responses in each 250 ms.
        let n = interval.latency.len();
        assert!((50..=150).contains(&n), "interval {k}: {n} values under a steady 400 req/s");
    }
    // The first interval starts with the measured window, after the warmup, as the report's does.
    assert_eq!(log.base_time, Some(Duration::from_millis(report.started_unix_ms)), "BaseTime is the window's start");
}

#[test]
fn a_window_that_is_not_whole_intervals_ends_with_a_shorter_one() {
    let server = hello_server();
    let url = format!("http://{}/", server.local_addr());
    // The default interval, 1 s.
    let (report, log) = run_logged(&["-c2", "-d1300ms", &url]);
    let shape: Vec<(u128, u128)> = log.intervals.iter().map(|i| (i.start.as_millis(), i.length.as_millis())).collect();
    assert_eq!(shape, [(0, 1000), (1000, 300)]);
    assert_eq!(log.merged().len(), report.responses);
}

#[test]
fn an_overloaded_open_loop_s_sends_never_sent_are_logged_as_the_report_counts_them() {
    // Two connections to a server that takes 20 ms per answer carry about 100 req/s: most of the 500 asked wait.
    let server = common::Server::slow(Duration::from_millis(20));
    let (report, log) = run_logged(&["-R", "500", "-c2", "-d1s", "--hdr-interval", "500ms", &server.url("/")]);
    let missed = report.open_loop.as_ref().map_or(0, |o| o.missed_sends);
    assert!(missed > 0, "the run left sends unsent: {missed}");
    let merged = log.merged();
    assert_eq!(merged.len(), report.responses + missed, "their waits are values too");
    let report_histogram = decode_histogram(&report.latency.histogram).expect("the report's histogram");
    assert!(merged == report_histogram, "the log holds what the report's histogram holds");
}

#[test]
fn bad_hdr_flags_are_refused_before_any_load() {
    let server = common::Server::routes();
    let url = server.url("/");
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("run.hdr");
    let log = s(&log);
    for (flags, says) in [
        (&["--hdr-log", log, "--hdr-interval", "0"][..], "--hdr-interval must be more than zero"),
        (&["--hdr-log", log, "--hdr-interval", "0ms"][..], "--hdr-interval must be more than zero"),
        (
            &["--hdr-log", log, "--hdr-interval", "1500us"][..],
            "--hdr-interval 1.5ms is not a whole number of milliseconds",
        ),
        (&["--hdr-log", log, "--hdr-interval", "ten"][..], "invalid value 'ten' for '--hdr-interval"),
        (&["--hdr-interval", "1s"][..], "--hdr-log"),
        (&["--hdr-log", "/nonexistent-dir/run.hdr"][..], "cannot write --hdr-log /nonexistent-dir/run.hdr: "),
    ] {
        let mut list = vec!["-d", "1s", "--no-progress"];
        list.extend_from_slice(flags);
        list.push(&url);
        let exit = loadgen_bin(&list);
        exit.assert_bad_input(&format!("{flags:?}"));
        assert!(exit.stderr.contains(says), "{flags:?}: {}", exit.stderr);
    }
    assert_eq!(server.requests(), 0, "no request was sent");
    assert!(!Path::new(log).exists(), "no log written for a refused run");
    let exit = loadgen_bin(&["capacity", "--p99", "10ms", "--hdr-log", log, &url]);
    exit.assert_bad_input("capacity with --hdr-log");
    assert!(exit.stderr.contains("leave out --hdr-log"), "{}", exit.stderr);
}
