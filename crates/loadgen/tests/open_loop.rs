//! Open loop (`-R`): the achieved rate follows the target, latency is measured from the intended send time,
//! and a server slower than the schedule shows up as late sends and a corrected tail (coordinated omission).

mod common;

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use common::*;

/// Rate tests measure time; under `cargo test` they run one at a time (nextest runs each in its own process).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn uniform_rate_is_achieved() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let server = Server::routes();
    let ran = run(&["-R", "200", "-d", "2s", "-c", "4", "--timeout", "2s", &server.url("/")]);
    let r = &ran.report;
    ran.assert_no_errors();
    let open = r.open_loop.as_ref().expect("open_loop is reported with -R");
    assert_eq!(open.target_rate, 200.0);
    assert!(within(open.achieved_rate, 200.0, 0.15), "achieved {} req/s for a target of 200", open.achieved_rate);
    assert!(within(open.scheduled as f64, 400.0, 0.15), "scheduled {} in 2 s at 200/s", open.scheduled);
    assert!(within(r.responses as f64, 400.0, 0.15), "{} responses in 2 s at 200/s", r.responses);
    assert!(r.latency.corrected, "open loop latency is corrected");
    let from_write = r.latency_from_write.as_ref().expect("latency_from_write is reported in open loop");
    assert!(!from_write.corrected);
    assert_eq!(r.latency.count, r.responses);
    assert_eq!(from_write.count, r.responses);
    assert!(r.latency.p50_us >= from_write.p50_us, "measured from the intended time, latency can only be longer");
    assert_eq!(r.config.mode, "open");
    assert_eq!(r.config.rate, Some(200.0));
    assert!(
        server.requests() <= open.scheduled + 4,
        "sent {} requests for {} scheduled",
        server.requests(),
        open.scheduled
    );
    ran.assert_returned_promptly();
}

#[test]
fn slow_server_shows_coordinated_omission() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    // 2 connections × (1 / 50 ms) = 40 req/s at most, for a schedule of 200 req/s.
    let server = Server::slow(Duration::from_millis(50));
    let ran = run(&["-R", "200", "-d", "1s", "-c", "2", "--timeout", "5s", &server.url("/")]);
    let r = &ran.report;
    let open = r.open_loop.as_ref().expect("open_loop is reported with -R");
    assert!(r.responses > 0);
    assert_eq!(r.errors.timeout, 0);
    assert!(open.late_sends > 0, "the schedule was 5× what the server can do, yet no send was late");
    assert!(open.achieved_rate < 100.0, "achieved {} req/s against a 40 req/s server", open.achieved_rate);
    let from_write = r.latency_from_write.as_ref().expect("latency_from_write is reported in open loop");
    assert!(r.latency.corrected);
    assert!(from_write.p99_us >= 50_000, "from-write p99 {} µs, but every response takes 50 ms", from_write.p99_us);
    assert!(
        r.latency.p99_us > from_write.p99_us,
        "corrected p99 {} µs is not above the from-write p99 {} µs: the queueing delay is hidden",
        r.latency.p99_us,
        from_write.p99_us
    );
    ran.assert_returned_promptly();
}

#[test]
fn poisson_schedule_averages_the_target() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let server = Server::routes();
    let ran = run(&[
        "-R",
        "200",
        "--schedule",
        "poisson",
        "--seed",
        "1",
        "-d",
        "2s",
        "-c",
        "4",
        "--timeout",
        "2s",
        &server.url("/"),
    ]);
    let r = &ran.report;
    ran.assert_no_errors();
    let open = r.open_loop.as_ref().expect("open_loop is reported with -R");
    assert!(within(open.achieved_rate, 200.0, 0.20), "achieved {} req/s for a Poisson mean of 200", open.achieved_rate);
    assert!(within(open.scheduled as f64, 400.0, 0.20), "scheduled {} in 2 s at 200/s", open.scheduled);
    assert_eq!(r.config.schedule.as_deref(), Some("poisson"));
    assert!(r.latency.corrected);
    ran.assert_returned_promptly();
}

/// The --jsonl lines of a run, parsed.
fn jsonl_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("read --jsonl");
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect()
}

#[test]
fn a_ramp_climbs_linearly_and_each_second_says_what_was_asked() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let server = Server::routes();
    let dir = tempfile::tempdir().expect("temp dir");
    let jsonl = dir.path().join("seconds.jsonl");
    let jsonl_arg = jsonl.to_string_lossy().into_owned();
    let ran = run(&["-R", "100:500", "--ramp", "2s", "-d", "3s", "-c", "8", "--jsonl", &jsonl_arg, &server.url("/")]);
    ran.assert_no_errors();
    let r = &ran.report;
    assert_eq!((r.config.rate, r.config.rate_start, r.config.ramp_s), (Some(500.0), Some(100.0), Some(2.0)));
    let open = r.open_loop.as_ref().expect("open loop");
    // The mean over 3 s: 2 s averaging 300/s, then 1 s at 500/s.
    assert!((open.target_rate - 1100.0 / 3.0).abs() < 1e-6, "target {}", open.target_rate);
    assert!(within(open.scheduled as f64, 1100.0, 0.1), "scheduled {} of 1100", open.scheduled);
    let lines = jsonl_lines(&jsonl);
    assert_eq!(lines.len(), 3, "{lines:?}");
    // Mid-second targets: 200, 400, then 500 once the ramp is over.
    for (line, (target, scheduled)) in lines.iter().zip([(200.0, 200.0), (400.0, 400.0), (500.0, 500.0)]) {
        assert_eq!(line["target_rps"].as_f64(), Some(target), "{line}");
        // Per second, counts move by whatever crosses a second's edge while a busy machine delays the loop.
        let asked = line["scheduled"].as_f64().expect("scheduled");
        assert!(within(asked, scheduled, 0.25), "second {}: {asked} scheduled, about {scheduled} due", line["second"]);
        let answered = line["responses"].as_f64().expect("responses");
        assert!(within(answered, scheduled, 0.25), "second {}: {answered} responses", line["second"]);
        for key in ["errors", "p50_us", "p99_us", "p99_9_us", "max_us"] {
            assert!(line[key].is_u64(), "{key} in {line}");
        }
    }
    ran.assert_returned_promptly();
}

#[test]
fn closed_loop_seconds_have_no_target() {
    let server = Server::routes();
    let dir = tempfile::tempdir().expect("temp dir");
    let jsonl = dir.path().join("seconds.jsonl");
    let jsonl_arg = jsonl.to_string_lossy().into_owned();
    run(&["-c", "2", "-d", "1s", "--jsonl", &jsonl_arg, &server.url("/")]);
    let lines = jsonl_lines(&jsonl);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0]["target_rps"].is_null() && lines[0]["scheduled"].is_null(), "{}", lines[0]);
    assert!(lines[0]["responses"].as_u64().is_some_and(|n| n > 0), "{}", lines[0]);
}

#[test]
fn ramps_without_their_duration_and_durations_without_a_ramp_are_refused() {
    let server = Server::routes();
    let url = server.url("/");
    for (args, says) in [
        (vec!["-R", "100:500", "-d", "1s", &url], "--ramp DURATION"),
        (vec!["-R", "100", "--ramp", "1s", "-d", "1s", &url], "--ramp needs a ramp"),
        (vec!["-R", "100:500", "--ramp", "5s", "-d", "2s", &url], "longer than the measured window"),
        (vec!["-R", "100:0", "--ramp", "1s", &url], "invalid rate"),
        (vec!["--ramp", "1s", &url], "--rate"),
    ] {
        let exit = loadgen_bin(&args);
        exit.assert_bad_input(&format!("{args:?}"));
        assert!(exit.stderr.contains(says), "{args:?}: {:?} lacks {says:?}", exit.stderr);
    }
    assert_eq!(server.requests(), 0, "nothing was sent");
}
