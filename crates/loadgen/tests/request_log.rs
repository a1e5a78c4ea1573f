//! `--log-requests`: one line per response, in the documented format, bounded by `--log-every` and
//! `--log-max`; `loadgen log-chart` draws it.

mod common;

use std::path::Path;

use common::*;
use loadgen::request_log::{HEADER, read};

#[test]
fn every_response_of_the_window_is_logged_with_its_schedule() {
    let server = Server::routes();
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("requests.tsv");
    let log_arg = log.to_string_lossy().into_owned();
    let ran =
        run(&["-R", "400", "-d", "1s", "--warmup", "200ms", "-c", "4", "--log-requests", &log_arg, &server.url("/")]);
    ran.assert_no_errors();
    let records = read(&log).expect("the log reads back");
    assert_eq!(records.len() as u64, ran.report.responses, "one line per response of the window (not the warmup)");
    assert!(records.windows(2).all(|w| w[0].intended_us <= w[1].intended_us), "sorted by intended time");
    for r in &records {
        assert!(r.intended_us <= 1_000_000 && r.sent_us >= r.intended_us, "{r:?}");
        assert!(r.latency_us + 1 >= r.sent_us - r.intended_us, "latency counts from the intended time: {r:?}");
        assert_eq!((r.status, r.body_bytes), (200, HELLO.len() as u64), "{r:?}");
        assert!(r.conn < 4, "{r:?}");
    }
    // A uniform 400/s schedule: 2.5 ms apart, whatever the connection.
    let gaps: Vec<u64> = records.windows(2).map(|w| w[1].intended_us - w[0].intended_us).collect();
    let mean = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64;
    assert!((mean - 2_500.0).abs() < 100.0, "mean gap {mean} µs");
    let text = std::fs::read_to_string(&log).expect("log text");
    assert_eq!(text.lines().next(), Some(HEADER));
    assert!(!text.contains("# not logged"), "nothing was capped");
}

#[test]
fn sampling_and_the_cap_bound_the_log() {
    let server = Server::routes();
    let dir = tempfile::tempdir().expect("temp dir");
    let every = dir.path().join("every.tsv");
    let ran = run_logging(&["-R", "300", "-d", "1s", "-c", "2", "--log-every", "3"], &every, &server);
    let logged = read(&every).expect("read").len() as u64;
    assert_eq!(logged, ran.report.responses / 3, "every third of {} responses", ran.report.responses);

    let capped = dir.path().join("capped.tsv");
    let ran = run_logging(&["-c", "2", "-d", "500ms", "--log-max", "10"], &capped, &server);
    assert_eq!(read(&capped).expect("read").len(), 10);
    let text = std::fs::read_to_string(&capped).expect("text");
    let last = text.lines().last().unwrap_or_default();
    assert_eq!(last, format!("# not logged: {} responses over --log-max", ran.report.responses - 10));
}

#[test]
fn log_chart_draws_a_log_and_refuses_other_files() {
    let server = Server::routes();
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("requests.tsv");
    let svg = dir.path().join("latency.svg");
    let log_arg = log.to_str().expect("utf-8");
    let ran = loadgen_bin(&["-R", "200", "-d", "1s", "-c", "2", "--log-requests", log_arg, &server.url("/")]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let drawn = loadgen_bin(&["log-chart", log_arg, "--svg", svg.to_str().expect("utf-8"), "--bucket", "250ms"]);
    assert_eq!(drawn.code, Some(0), "{drawn:?}");
    let picture = std::fs::read_to_string(&svg).expect("svg");
    assert!(picture.starts_with("<svg") && picture.contains("<polyline") && picture.contains("bucket 250.00ms"));

    std::fs::write(&log, "not a log\n").expect("write");
    loadgen_bin(&["log-chart", log_arg, "--svg", svg.to_str().expect("utf-8")]).assert_bad_input("a foreign file");
    let unwritable = dir.path().join("missing-dir").join("log.tsv");
    let exit = loadgen_bin(&["-d", "1s", "--log-requests", unwritable.to_str().expect("utf-8"), &server.url("/")]);
    exit.assert_bad_input("an unwritable log");
    assert!(exit.stderr.contains("cannot write --log-requests"), "{}", exit.stderr);
}

/// `run` with `flags` against `server`'s `/`, logging the responses to `log` (`--log-requests`).
fn run_logging(flags: &[&str], log: &Path, server: &Server) -> Ran {
    let url = server.url("/");
    let mut list = flags.to_vec();
    list.extend(["--log-requests", log.to_str().expect("utf-8"), &url]);
    run(&list)
}
