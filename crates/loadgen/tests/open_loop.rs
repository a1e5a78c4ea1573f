//! Open loop (`-R`): the achieved rate follows the target, latency is measured from the intended send time,
//! and a server slower than the schedule shows up as late sends and a corrected tail (coordinated omission):
//! sends that find every connection busy wait for one, so an overloaded server's growing queue is in the
//! latency, and the sends still waiting at the end are counted with their waits.

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

/// The serial server's service time: it answers at most 1,000 requests per second.
const SERVICE: Duration = Duration::from_millis(1);

/// 1,500 req/s asked of a 1,000 req/s server: every send beyond its capacity waits for a connection, so the
/// queue (and the wait of each send) grows through the run, about half a second per second; none is dropped.
/// Judged by orders of magnitude, so a loaded machine passes: the service time is 1 ms, the waits hundreds.
#[test]
fn overload_queues_every_send_and_its_wait_is_in_the_latency() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let server = Server::serial(SERVICE);
    let dir = tempfile::tempdir().expect("temp dir");
    let jsonl = dir.path().join("seconds.jsonl");
    let jsonl_arg = jsonl.to_string_lossy().into_owned();
    let ran = run(&[
        "-R",
        "1500",
        "-c",
        "8",
        "-d",
        "2s",
        "--warmup",
        "200ms",
        "--timeout",
        "5s",
        "--jsonl",
        &jsonl_arg,
        &server.url("/"),
    ]);
    ran.assert_no_errors();
    let r = &ran.report;
    let open = r.open_loop.as_ref().expect("open loop");
    // The server's capacity, not the schedule's: at most 2,000 in 2 s (a little more: warmup sends answered).
    assert!(r.responses >= 1_000 && r.responses <= 2_300, "{} responses from a 1000 req/s server in 2 s", r.responses);
    // Every send the schedule called for (2.2 s at 1500/s) was made or is still waiting: none dropped.
    let made = server.requests() + open.missed_sends;
    assert!(
        within(made as f64, 3_300.0, 0.1),
        "{} sent + {} waiting for 3300 due",
        server.requests(),
        open.missed_sends
    );
    assert!(open.missed_sends >= 300, "about 1,100 still waiting at the end: {open:?}");
    // The waits are in the latency: responses from their intended time, the unsent to the end (lower bounds).
    assert_eq!(r.latency.count, r.responses + open.missed_sends);
    let from_write = r.latency_from_write.as_ref().expect("from write");
    assert_eq!(from_write.count, r.responses, "the unsent were never written");
    // After 2.2 s at 1.5× capacity the last sends waited about 1.1 s: p99 hundreds of service times.
    assert!(r.latency.p99_us >= 300_000 && r.latency.p99_us <= 5_000_000, "p99 {} µs", r.latency.p99_us);
    assert!(
        r.latency.p99_us > 20 * from_write.p99_us,
        "the queue is before the write: {} vs {} µs",
        r.latency.p99_us,
        from_write.p99_us
    );
    assert!(open.late_sends * 2 > open.scheduled, "most sends waited for a connection: {open:?}");
    // The queue grows over the window: each second's tail is longer than the one before.
    let lines = jsonl_lines(&jsonl);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let p99: Vec<u64> = lines.iter().map(|l| l["p99_us"].as_u64().expect("p99_us")).collect();
    assert!(p99[1] > p99[0] + 100_000, "second 2's p99 {} µs is not well above second 1's {} µs", p99[1], p99[0]);
    ran.assert_returned_promptly();
}

/// Well under the same server's capacity (a third of it) nothing waits: no send is left at the end and the
/// tail is the service time's order, not the run's.
#[test]
fn under_capacity_nothing_waits() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let server = Server::serial(SERVICE);
    let ran = run(&["-R", "300", "-c", "8", "-d", "1s", "--warmup", "200ms", "--timeout", "5s", &server.url("/")]);
    ran.assert_no_errors();
    let r = &ran.report;
    let open = r.open_loop.as_ref().expect("open loop");
    assert_eq!(open.missed_sends, 0, "{open:?}");
    assert_eq!(r.latency.count, r.responses);
    assert!(within(r.responses as f64, 300.0, 0.15), "{} responses at 300/s", r.responses);
    // Not judged: late sends. Beside other tests on 2 cores the loader's own wake-ups run over 1 ms late for
    // more than 5% of the sends, with no connection busy.
    assert!(r.latency.p99_us < 100_000, "p99 {} µs for a 1 ms service well under capacity", r.latency.p99_us);
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
