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
