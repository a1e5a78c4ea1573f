//! Timeouts, servers that drop connections, requests outstanding at the end, connection accounting and an
//! unreachable target.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn slow_server_times_out_on_a_real_timer() {
    let server = Server::slow(Duration::from_secs(5));
    let ran = run(&["-c", "2", "-d", "1s", "--timeout", "200ms", &server.url("/")]);
    let r = &ran.report;
    assert_eq!(r.responses, 0, "the server never answers within 5 s");
    assert!(r.errors.timeout > 0, "no timeouts counted: {:?}", r.errors);
    // 2 connections × 1 s / 200 ms ≈ 10 expiries; at least a couple per connection even on a busy machine.
    assert!(r.errors.timeout >= 4, "only {} timeouts in 1 s with a 200 ms timeout on 2 connections", r.errors.timeout);
    assert!(r.reconnects > 0, "a timed-out connection is closed and reopened");
    assert!(server.connections() > 2, "the server saw no reconnections after timeouts");
    assert!(r.in_flight_at_end <= 2);
    assert_eq!(r.latency.count, 0);
    assert!(!ran.failures().is_empty(), "a run without responses must fail");
    ran.assert_returned_promptly();
}

#[test]
fn server_that_drops_every_connection_fails_the_run() {
    let server = Server::dropping();
    let (result, args, elapsed) = try_run(&["-c", "2", "-d", "500ms", "--timeout", "300ms", &server.url("/")]);
    assert!(elapsed <= Duration::from_millis(3500), "run took {elapsed:?}");
    match result {
        Err(e) => assert!(!e.to_string().is_empty(), "the error says nothing"),
        Ok(r) => {
            assert_eq!(r.responses, 0);
            assert!(
                r.errors.closed + r.errors.read + r.errors.write > 0,
                "closed connections were not counted: {:?}",
                r.errors
            );
            let failures = loadgen::failures(&r, args.allow_failures);
            assert!(!failures.is_empty(), "no responses at all, yet no failure: {r:?}");
        }
    }
    let exit = loadgen_bin(&["-c", "2", "-d", "500ms", "--timeout", "300ms", "--no-progress", &server.url("/")]);
    assert!(matches!(exit.code, Some(1 | 2)), "binary exit code {:?} (stderr {:?})", exit.code, exit.stderr);
    assert!(!exit.stderr_lines().is_empty(), "the binary failed without saying why");
}

#[test]
fn allow_failures_empties_failures() {
    let server = Server::dropping();
    let (result, args, _) =
        try_run(&["-c", "2", "-d", "300ms", "--timeout", "300ms", "--allow-failures", &server.url("/")]);
    if let Ok(r) = result {
        assert_eq!(loadgen::failures(&r, args.allow_failures), Vec::<String>::new());
    }
}

#[test]
fn outstanding_requests_are_reported_in_flight_at_end() {
    let server = Server::slow(Duration::from_secs(5));
    let ran = run(&["-c", "3", "-d", "500ms", "--timeout", "10s", &server.url("/")]);
    let r = &ran.report;
    assert_eq!(r.in_flight_at_end, 3, "one request outstanding per connection (errors {:?})", r.errors);
    assert_eq!(r.responses, 0);
    assert_eq!(r.errors.timeout, 0, "the 10 s timeout cannot expire in a 500 ms run");
    ran.assert_no_errors();
    ran.assert_returned_promptly();
}

#[test]
fn connections_are_spread_over_threads() {
    let server = Server::routes();
    let ran = run(&["-c", "8", "-t", "3", "-d", "500ms", "--timeout", "2s", &server.url("/")]);
    let r = &ran.report;
    assert!(r.responses > 0);
    ran.assert_no_errors();
    assert_eq!((r.connections.asked, r.connections.established, r.connections.failed), (8, 8, 0));
    assert_eq!(r.cpu.threads.len(), 3, "one CPU entry per worker thread");
    assert_eq!(r.config.threads, 3);
    assert_eq!(r.config.connections, 8);
    assert_eq!(server.request_connections(), 8, "requests came on one TCP connection per asked connection");
    ran.assert_returned_promptly();
}

#[test]
fn unreachable_target_names_the_address() {
    let port = closed_port();
    let url = format!("http://127.0.0.1:{port}/");
    let addr = format!("127.0.0.1:{port}");

    let exit = loadgen_bin(&["-c", "2", "-d", "1s", "--timeout", "500ms", "--no-progress", &url]);
    match exit.code {
        Some(2) => exit.assert_bad_input("connection refused"),
        Some(1) => {}
        other => panic!("exit code {other:?} for an unreachable target (stderr {:?})", exit.stderr),
    }
    assert!(exit.stderr.contains(&addr), "stderr does not name {addr}: {:?}", exit.stderr);
    assert!(exit.elapsed < Duration::from_secs(5), "took {:?} to give up", exit.elapsed);

    let (result, args, _) = try_run(&["-c", "2", "-d", "1s", "--timeout", "500ms", &url]);
    match result {
        Err(e) => assert!(e.to_string().contains(&addr), "error does not name {addr}: {e}"),
        Ok(r) => {
            assert!(r.errors.connect > 0, "{:?}", r.errors);
            assert_eq!(r.connections.established, 0);
            assert_eq!(r.connections.failed, 2);
            assert!(!loadgen::failures(&r, args.allow_failures).is_empty());
        }
    }
}
