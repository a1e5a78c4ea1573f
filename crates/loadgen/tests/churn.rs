//! `--requests-per-conn N`: each connection carries N requests, the last saying `Connection: close`, and is
//! then replaced; plaintext and TLS, with a server that closes when asked and one that does not. The close
//! the last request asks for is no error.

mod common;

use std::collections::BTreeMap;

use common::tls::{Certs, hello_honouring_close, run_https};
use common::*;

/// Requests per server connection, and whether each said `Connection: close`, by connection.
fn per_connection(server: &Server) -> BTreeMap<u64, Vec<bool>> {
    let mut conns: BTreeMap<u64, Vec<bool>> = BTreeMap::new();
    for r in server.recorded() {
        conns.entry(r.conn).or_default().push(r.header("connection") == Some("close"));
    }
    conns
}

/// Every connection carried at most `n` requests, only the nth said close, and all but the connections
/// still open at the end (one per loadgen connection at most) carried exactly `n`.
fn assert_churned(server: &Server, n: usize, connections: usize) {
    let conns = per_connection(server);
    let mut short = 0;
    for (conn, closes) in &conns {
        assert!(closes.len() <= n, "connection {conn} carried {} requests", closes.len());
        let expected: Vec<bool> = (1..=closes.len()).map(|k| k == n).collect();
        assert_eq!(closes, &expected, "connection {conn}: Connection: close on the last request only");
        short += usize::from(closes.len() < n);
    }
    assert!(short <= connections, "{short} connections carried fewer than {n} requests");
}

#[test]
fn plaintext_connections_carry_n_requests_each() {
    for n in [1u64, 10] {
        let server = Server::start(hello_honouring_close);
        let n_arg = n.to_string();
        let ran = run(&["-c", "2", "-d", "400ms", "--requests-per-conn", &n_arg, &server.url("/")]);
        ran.assert_no_errors();
        let r = &ran.report;
        assert!(r.responses >= 4 * n, "n={n}: {} responses", r.responses);
        assert_eq!(r.config.requests_per_conn, Some(n));
        // Opened: one per n responses, give or take the connections open at the end.
        let full = r.responses / n;
        assert!(
            r.connections.opened >= full && r.connections.opened <= full + 2,
            "n={n}: {:?} for {} responses",
            r.connections,
            r.responses
        );
        assert_churned(&server, n as usize, 2);
        assert_eq!(r.connections.failed, 0);
        let text = loadgen::render::text(r, false);
        assert!(text.contains(&format!(" opened ({n} requests each), ")), "{text}");
    }
}

#[test]
fn a_server_that_keeps_the_connection_open_is_left_by_loadgen() {
    // The server ignores `Connection: close`: loadgen closes after the nth response itself.
    let server = Server::routes();
    let ran = run(&["-c", "2", "-d", "400ms", "--requests-per-conn", "3", &server.url("/")]);
    ran.assert_no_errors();
    assert!(ran.report.responses >= 12);
    assert_churned(&server, 3, 2);
}

#[test]
fn pipelined_requests_stop_at_the_connections_last() {
    let server = Server::start(hello_honouring_close);
    let ran = run(&["-c", "2", "--pipeline", "4", "-d", "400ms", "--requests-per-conn", "6", &server.url("/")]);
    ran.assert_no_errors();
    assert!(ran.report.responses >= 12);
    assert_churned(&server, 6, 2);
}

#[test]
fn open_loop_churns_too() {
    let server = Server::start(hello_honouring_close);
    let ran = run(&["-c", "4", "-R", "400", "-d", "500ms", "--requests-per-conn", "2", &server.url("/")]);
    ran.assert_no_errors();
    assert!(ran.report.responses >= 100, "{} responses", ran.report.responses);
    assert_churned(&server, 2, 4);
}

#[test]
fn tls_connections_carry_n_requests_each_with_one_handshake_per_connection() {
    let certs = Certs::new();
    for n in [1u64, 10] {
        let server = Server::tls_hello(&certs);
        let n_arg = n.to_string();
        let ran = run_https(&certs, &server, &["-c", "2", "-d", "500ms", "--requests-per-conn", &n_arg]);
        ran.assert_no_errors();
        let r = &ran.report;
        assert!(r.responses >= 4 * n, "n={n}: {} responses", r.responses);
        let tls = r.tls.as_ref().unwrap_or_else(|| panic!("no TLS"));
        assert_eq!(tls.counts.finished(), r.connections.opened, "n={n}: one handshake per connection opened");
        let full = r.responses / n;
        assert!(
            r.connections.opened >= full && r.connections.opened <= full + 2,
            "n={n}: {:?}, {} responses",
            r.connections,
            r.responses
        );
        assert_churned(&server, n as usize, 2);
        // Every connection the server handshook carried requests (none was opened and left idle).
        assert!(server.handshakes().len() as u64 + 2 >= r.connections.opened);
    }
}
