//! HTTPS against a real rustls server (threads over blocking sockets, a fresh ECDSA P-256 CA per test):
//! keep-alive on both engines, resumption on and off, TLS 1.2, a CA that does not match, `--insecure`, a
//! server that never answers the ClientHello, and the report's TLS part. scripts/test.sh runs this file on
//! each engine too (LOADGEN_ENGINE=epoll).

mod common;

use std::time::Duration;

use common::tls::{Certs, run_https};
use common::*;

#[test]
fn keep_alive_https_works_on_both_engines() {
    let certs = Certs::new();
    let server = Server::tls_hello(&certs);
    for engine in engines() {
        let before = server.handshakes().len();
        let ran = run_https(&certs, &server, &["--engine", engine, "-c", "4", "-d", "400ms", "--expect-body", HELLO]);
        ran.assert_no_errors();
        let r = &ran.report;
        assert!(r.responses >= 4, "{engine}: {} responses", r.responses);
        assert_eq!(r.config.engine, engine);
        assert_eq!(r.assertions.checked, r.responses, "{engine}: every body was checked");
        let tls = r.tls.as_ref().unwrap_or_else(|| panic!("{engine}: no TLS in the report"));
        let one = |key: &str| [(key.to_string(), 4u64)].into_iter().collect::<std::collections::BTreeMap<_, _>>();
        assert_eq!(tls.counts.versions, one("TLSv1.3"), "{engine}");
        assert_eq!(tls.counts.cipher_suites, one("TLS13_AES_256_GCM_SHA384"), "{engine}: rustls's first suite");
        assert_eq!(tls.counts.groups, one("X25519"), "{engine}: X25519 has the key share");
        assert_eq!(tls.counts.alpn, one("http/1.1"), "{engine}");
        assert_eq!((tls.counts.handshakes.full, tls.counts.handshakes.resumed), (4, 0), "{engine}");
        assert_eq!(tls.handshake_latency.count, 4, "{engine}");
        assert!(tls.handshake_latency.min_us > 0, "{engine}");
        assert_eq!((r.connections.established, r.connections.opened, r.reconnects), (4, 4, 0), "{engine}");
        // The server agrees: four handshakes, TLS 1.3, ALPN http/1.1, and no SNI for an IP address.
        let seen = server.handshakes();
        assert_eq!(seen.len() - before, 4, "{engine}: {seen:?}");
        for h in &seen[before..] {
            assert_eq!((h.version.as_str(), h.alpn.as_deref(), h.sni.as_deref()), ("TLSv1_3", Some("http/1.1"), None));
        }
    }
}

#[test]
fn a_host_name_is_sent_as_sni() {
    let certs = Certs::new();
    let server = Server::tls_hello(&certs);
    // Only where localhost means the IPv4 loopback the server listens on: elsewhere loadgen would connect to
    // another address, so the test says it checked nothing rather than pass silently.
    let first = std::net::ToSocketAddrs::to_socket_addrs(&("localhost", server.port())).ok().and_then(|mut a| a.next());
    if first.is_none_or(|a| !a.ip().is_loopback() || !a.is_ipv4()) {
        eprintln!("skipped: localhost resolves first to {first:?}, not the IPv4 loopback the test server listens on");
        return;
    }
    let url = format!("https://localhost:{}/", server.port());
    run(&["-c", "1", "-d", "200ms", "--cacert", certs.ca(), &url]).assert_no_errors();
    assert!(server.handshakes().iter().all(|h| h.sni.as_deref() == Some("localhost")), "{:?}", server.handshakes());
}

#[test]
fn resumption_off_makes_every_handshake_full() {
    let certs = Certs::new();
    let server = Server::tls_hello(&certs);
    let ran =
        run_https(&certs, &server, &["-c", "2", "-d", "500ms", "--requests-per-conn", "1", "--tls-resume", "off"]);
    ran.assert_no_errors();
    let r = &ran.report;
    let tls = r.tls.as_ref().unwrap_or_else(|| panic!("no TLS"));
    let h = &tls.counts.handshakes;
    assert_eq!(h.resumed, 0, "{h:?}");
    assert!(h.full >= 10, "only {} handshakes in 500 ms", h.full);
    assert_eq!(h.full, r.connections.opened);
    assert_eq!(tls.handshake_latency.count, h.full);
    // One response per connection: every connection opened answered once, but for those still in flight.
    assert!(r.responses + 2 >= r.connections.opened && r.responses <= r.connections.opened, "{r:?}");
    assert!(server.handshakes().iter().all(|h| !h.resumed), "the server saw a resumption");
    assert_eq!(r.config.tls.as_ref().map(|t| t.resume), Some(false));
}

#[test]
fn resumption_on_resumes_every_handshake_after_each_workers_first() {
    let certs = Certs::new();
    let server = Server::tls_hello(&certs);
    let ran = run_https(&certs, &server, &["-t", "2", "-c", "2", "-d", "500ms", "--requests-per-conn", "1"]);
    ran.assert_no_errors();
    let r = &ran.report;
    let h = &r.tls.as_ref().unwrap_or_else(|| panic!("no TLS")).counts.handshakes;
    // Each worker's store is its own: its first connection cannot resume, every later one does.
    assert_eq!(h.full, 2, "{h:?}");
    assert!(h.resumed >= 10, "{h:?}");
    assert_eq!(h.full + h.resumed, r.connections.opened);
    let seen = server.handshakes();
    assert_eq!(seen.iter().filter(|h| h.resumed).count() as u64, h.resumed, "the server counts the same");
}

#[test]
fn many_connections_reconnecting_at_once_still_resume() {
    // More connections on one worker than rustls's own store keeps tickets per server (8): every one of them
    // reconnects after each answer, and all but the first 32 handshakes resume.
    let certs = Certs::new();
    let server = Server::tls_hello(&certs);
    let ran = run_https(&certs, &server, &["-t", "1", "-c", "32", "-d", "700ms", "--requests-per-conn", "1"]);
    ran.assert_no_errors();
    let h = &ran.report.tls.as_ref().unwrap_or_else(|| panic!("no TLS")).counts.handshakes;
    assert_eq!(h.full, 32, "{h:?}");
    assert!(h.resumed > 32, "{h:?}");
}

#[test]
fn tls_version_1_2_is_offered_alone_and_resumes_without_a_key_exchange() {
    let certs = Certs::new();
    let server = Server::tls_hello(&certs);
    let ran =
        run_https(&certs, &server, &["-c", "1", "-d", "400ms", "--requests-per-conn", "1", "--tls-version", "1.2"]);
    ran.assert_no_errors();
    let tls = ran.report.tls.as_ref().unwrap_or_else(|| panic!("no TLS"));
    let c = &tls.counts;
    assert_eq!(c.versions.keys().collect::<Vec<_>>(), ["TLSv1.2"], "{c:?}");
    assert_eq!(c.cipher_suites.keys().collect::<Vec<_>>(), ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"], "{c:?}");
    assert_eq!(c.handshakes.full, 1, "{c:?}");
    assert!(c.handshakes.resumed > 0, "{c:?}");
    // A resumed 1.2 session exchanges no key: the groups say so.
    assert_eq!(c.groups.get("X25519"), Some(&1), "{c:?}");
    assert_eq!(c.groups.get("none"), Some(&c.handshakes.resumed), "{c:?}");
    assert!(server.handshakes().iter().all(|h| h.version == "TLSv1_2"));
}

#[test]
fn a_chosen_cipher_and_group_are_what_is_negotiated() {
    let certs = Certs::new();
    let server = Server::tls_hello(&certs);
    let ran = run_https(
        &certs,
        &server,
        &["-c", "1", "-d", "200ms", "--tls-cipher", "TLS13_AES_128_GCM_SHA256", "--tls-group", "secp256r1"],
    );
    ran.assert_no_errors();
    let c = &ran.report.tls.as_ref().unwrap_or_else(|| panic!("no TLS")).counts;
    assert_eq!(c.cipher_suites.keys().collect::<Vec<_>>(), ["TLS13_AES_128_GCM_SHA256"]);
    assert_eq!(c.groups.keys().collect::<Vec<_>>(), ["secp256r1"]);
}

#[test]
fn a_certificate_from_another_ca_fails_every_handshake_with_its_reason() {
    let (certs, other) = (Certs::new(), Certs::new());
    let server = Server::tls_hello(&certs);
    for engine in engines() {
        let (result, args, elapsed) =
            try_run(&["--engine", engine, "-c", "2", "-d", "500ms", "--cacert", other.ca(), &server.https_url("/")]);
        let r = result.unwrap_or_else(|e| panic!("{engine}: {e}"));
        assert!(elapsed < Duration::from_secs(3), "{engine}: took {elapsed:?}");
        assert_eq!(r.responses, 0, "{engine}");
        assert!(r.errors.tls >= 2, "{engine}: {:?}", r.errors);
        assert_eq!((r.connections.established, r.connections.failed), (0, 2), "{engine}");
        let failures = &r.tls.as_ref().unwrap_or_else(|| panic!("no TLS")).counts.failures;
        // Both throwaway CAs carry the same name: the chain finds "its" issuer and its signature fails.
        let reasons: Vec<&String> = failures.keys().collect();
        assert!(
            matches!(reasons.as_slice(), [one] if one.starts_with("invalid certificate: ")),
            "{engine}: {reasons:?}"
        );
        assert_eq!(failures.values().sum::<u64>(), r.errors.tls, "{engine}");
        assert!(!loadgen::failures(&r, args.allow_failures).is_empty(), "{engine}: the run must fail");
    }
    let exit =
        loadgen_bin(&["-c", "1", "-d", "300ms", "--no-progress", "--cacert", other.ca(), &server.https_url("/")]);
    assert_eq!(exit.code, Some(1), "{exit:?}");
    assert!(exit.stderr.contains("TLS with 127.0.0.1:"), "{:?}", exit.stderr);
    assert!(exit.stderr.contains("invalid peer certificate: "), "{:?}", exit.stderr);
    assert!(exit.stdout.contains("  TLS failures: invalid certificate: "), "{:?}", exit.stdout);
}

#[test]
fn insecure_accepts_a_certificate_from_any_ca() {
    let certs = Certs::new();
    let server = Server::tls_hello(&certs);
    let ran = run(&["-c", "2", "-d", "200ms", "--insecure", &server.https_url("/")]);
    ran.assert_no_errors();
    assert!(ran.report.responses > 0);
    assert_eq!(ran.report.config.tls.as_ref().map(|t| t.trust.as_str()), Some("insecure"));
}

#[test]
fn a_server_that_never_answers_the_hello_times_out_the_handshake() {
    // A plaintext server waits for an HTTP head that a ClientHello never completes.
    let server = Server::routes();
    let url = format!("https://127.0.0.1:{}/", server.port());
    let (result, _, elapsed) = try_run(&["-c", "2", "-d", "1s", "--timeout", "200ms", "--insecure", &url]);
    let r = result.unwrap_or_else(|e| panic!("{e}"));
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    assert_eq!(r.responses, 0);
    let failures = &r.tls.as_ref().unwrap_or_else(|| panic!("no TLS")).counts.failures;
    assert_eq!(failures.keys().collect::<Vec<_>>(), ["handshake timed out"], "{failures:?}");
    assert!(r.errors.tls >= 2, "{:?}", r.errors);
    assert_eq!(r.errors.connect, 0, "a handshake timeout is no connect error: {:?}", r.errors);
}

#[test]
fn https_needs_a_trust_decision() {
    let exit = loadgen_bin(&["-d", "1s", "https://127.0.0.1:1/"]);
    exit.assert_bad_input("https without --cacert or --insecure");
    assert!(exit.stderr.contains("--cacert PATH"), "{:?}", exit.stderr);
    let exit = loadgen_bin(&["-d", "1s", "--cacert", "/nonexistent.pem", "https://127.0.0.1:1/"]);
    exit.assert_bad_input("an unreadable --cacert");
}

#[test]
fn a_plaintext_run_says_nothing_of_tls() {
    let server = Server::routes();
    let ran = run(&["-c", "2", "-d", "200ms", &server.url("/")]);
    let r = &ran.report;
    assert!(r.tls.is_none() && r.config.tls.is_none() && r.config.requests_per_conn.is_none());
    let text = loadgen::render::text(r, true);
    assert!(!text.contains("TLS") && !text.contains("Handshake") && !text.contains("opened"), "{text}");
    assert_eq!(r.connections.opened, 2);
}

#[test]
fn tls_reports_merge() {
    let certs = Certs::new();
    let server = Server::tls_hello(&certs);
    // Through JSON, as `loadgen merge` reads them.
    let through_json = |r: loadgen::report::Report| {
        let text = serde_json::to_string(&r).unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_str::<loadgen::report::Report>(&text).unwrap_or_else(|e| panic!("{e}"))
    };
    let ra = through_json(run_https(&certs, &server, &["-c", "1", "-d", "300ms", "--requests-per-conn", "5"]).report);
    let rb = through_json(run_https(&certs, &server, &["-c", "1", "-d", "300ms", "--tls-version", "1.2"]).report);
    let merged = loadgen::merge::merge(vec![ra.clone(), rb.clone()]).unwrap_or_else(|e| panic!("{e}"));
    let t = |r: &loadgen::report::Report| r.tls.clone().unwrap_or_else(|| panic!("no TLS"));
    let (ta, tb, tm) = (t(&ra), t(&rb), t(&merged));
    assert_eq!(tm.counts.versions.get("TLSv1.3"), ta.counts.versions.get("TLSv1.3"));
    assert_eq!(tm.counts.versions.get("TLSv1.2"), Some(&1));
    assert_eq!(tm.counts.finished(), ta.counts.finished() + tb.counts.finished());
    assert_eq!(tm.handshake_latency.count, ta.handshake_latency.count + tb.handshake_latency.count);
    assert_eq!(merged.connections.opened, ra.connections.opened + rb.connections.opened);
    let text = loadgen::render::text(&merged, false);
    assert!(text.contains("  TLS: TLSv1.2 × 1, TLSv1.3 × "), "{text}");
}
