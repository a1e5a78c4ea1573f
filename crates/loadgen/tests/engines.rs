//! The two I/O engines side by side. Every other test here runs on both (scripts/test.sh runs this crate's
//! tests again with LOADGEN_ENGINE=epoll); these ask each engine explicitly for what only a completion engine
//! can get wrong: bodies larger than the provided receive buffers, more completions in one turn than the
//! buffer ring holds, sends split by a full socket buffer, and connections closed with operations in flight.

mod common;

use std::time::Duration;

use common::*;
use sha2::{Digest, Sha256};

#[test]
fn each_engine_is_recorded_in_the_report() {
    let server = Server::routes();
    for engine in engines() {
        let ran = run(&["--engine", engine, "-c", "2", "-d", "300ms", &server.url("/")]);
        assert_eq!(ran.report.config.engine, engine);
        ran.assert_no_errors();
        assert!(ran.report.responses > 0, "{engine}: no responses");
    }
}

#[test]
fn bodies_larger_than_a_receive_buffer_arrive_whole_on_both_engines() {
    // 300 KiB: dozens of 4 KiB provided buffers per response; the checksum proves every byte and their order.
    let body: Vec<u8> = (0..300 * 1024).map(|i| (i * 7 % 251) as u8).collect();
    let sha = format!("{:x}", Sha256::digest(&body));
    let reply_body = body.clone();
    let server =
        Server::start(move |_| Reply::status(200, &[("Content-Type", "application/octet-stream")], &reply_body));
    for engine in engines() {
        let length = body.len().to_string();
        let ran = run(&[
            "--engine",
            engine,
            "-c",
            "16",
            "-d",
            "1s",
            "--expect-sha256",
            &sha,
            "--expect-length",
            &length,
            &server.url("/big"),
        ]);
        ran.assert_no_errors();
        assert!(ran.report.responses >= 16, "{engine}: {} responses", ran.report.responses);
        assert_eq!(ran.report.assertions.checked, ran.report.responses, "{engine}: every response checked");
    }
}

#[test]
fn pipelined_requests_larger_than_the_socket_buffer_are_sent_whole() {
    // A 128 KiB request body, 4 deep per connection: half a megabyte per connection waits to be written, more
    // than a fresh loopback socket takes at once, so sends complete short and are continued.
    const BODY: usize = 128 * 1024;
    let (_dir, body) = temp_file("body.bin", &vec![b'x'; BODY]);
    let body = body.to_string_lossy().into_owned();
    for engine in engines() {
        let server = Server::routes();
        let ran = run(&[
            "--engine",
            engine,
            "-m",
            "POST",
            "--body-file",
            &body,
            "--pipeline",
            "4",
            "-c",
            "2",
            "-d",
            "300ms",
            "--expect-status",
            "200",
            &server.url("/"),
        ]);
        ran.assert_no_errors();
        assert!(ran.report.responses >= 8, "{engine}: {} responses", ran.report.responses);
        let recorded = server.recorded();
        assert!(recorded.iter().all(|r| r.body.len() == BODY), "{engine}: a request body arrived cut or joined");
    }
}

#[test]
fn connections_dropped_with_requests_in_flight_are_reopened_on_both_engines() {
    // Every response is late: each request times out, its connection is closed with the receive (and maybe
    // the send) still in flight, and a new one opened. Nothing may leak, hang or be counted twice.
    let server = Server::slow(Duration::from_millis(400));
    for engine in engines() {
        let (result, _, elapsed) = try_run(&[
            "--engine",
            engine,
            "-c",
            "8",
            "-d",
            "1s",
            "--timeout",
            "100ms",
            "--allow-failures",
            &server.url("/"),
        ]);
        let report = result.unwrap_or_else(|e| panic!("{engine}: {e}"));
        assert!(report.errors.timeout >= 8, "{engine}: {} timeouts", report.errors.timeout);
        assert!(report.reconnects >= 8, "{engine}: {} reconnects", report.reconnects);
        assert_eq!(report.responses, 0, "{engine}: a late response was counted");
        assert!(elapsed < Duration::from_secs(4), "{engine}: the run took {elapsed:?}");
    }
}
