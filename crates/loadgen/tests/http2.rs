//! Whole runs over HTTP/2 (`--http2`, `--streams`) against the workspace's own server (crates/serve: hyper's
//! HTTP/2 beside HTTP/1.1), in cleartext (h2c by prior knowledge) and over TLS (ALPN h2): the report says
//! what was spoken, how many streams, what the server allowed; a server that will not speak HTTP/2 fails the
//! run saying so; flags that do not fit are refused. scripts/test.sh runs this once per engine.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;

use common::{run, try_run};
use serve::{Http2Limits, Limits, Request, Response, Server};
use tower::service_fn;

fn hello_server(limits: Limits) -> Server {
    let listeners = serve::bind_reuseport("127.0.0.1:0".parse::<SocketAddr>().expect("addr"), 1).expect("bind");
    Server::start(listeners, Limits { workers: 1, ..limits }, || {
        service_fn(|_req: Request| async {
            Ok::<Response, Infallible>(serve::json(http::StatusCode::OK, &serde_json::json!({ "hello": "h2" })))
        })
    })
    .expect("server starts")
}

#[test]
fn h2c_with_streams_reports_the_protocol_and_the_server_settings() {
    let server = hello_server(Limits::default());
    let url = format!("http://{}/", server.local_addr());
    let ran =
        run(&["--http2", "--streams", "8", "-c", "4", "-d", "1s", "--warmup", "0s", "--expect-status", "200", &url]);
    ran.assert_no_errors();
    ran.assert_returned_promptly();
    let r = &ran.report;
    assert!(r.responses > 100, "responses: {}", r.responses);
    assert!(r.config.http2 && r.config.pipeline == 8);
    let h2 = r.http2.as_ref().expect("an http2 section");
    assert_eq!(h2.negotiated.get("h2"), Some(&4), "every connection spoke h2: {:?}", h2.negotiated);
    assert!(h2.streams_opened >= r.responses, "streams {} for {} responses", h2.streams_opened, r.responses);
    assert_eq!((h2.refused, h2.capped_at), (0, None));
    let settings = h2.server_settings.expect("the server's SETTINGS");
    assert_eq!(settings.max_concurrent_streams, Some(Http2Limits::DEFAULT.max_streams));
    assert!(r.assertions.checked > 0 && r.assertions.failed == 0);
}

#[test]
fn streams_above_the_server_limit_are_capped_and_said() {
    let limits = Limits { http2: Some(Http2Limits { max_streams: 4, ..Http2Limits::DEFAULT }), ..Limits::default() };
    let server = hello_server(limits);
    let url = format!("http://{}/", server.local_addr());
    let ran = run(&["--http2", "--streams", "16", "-c", "2", "-d", "1s", "--warmup", "0s", &url]);
    ran.assert_no_errors();
    let h2 = ran.report.http2.as_ref().expect("an http2 section");
    assert_eq!(h2.capped_at, Some(4), "capped at the server's 4 streams");
    assert_eq!(h2.refused, 0, "no stream opened past the limit: requests waited for the SETTINGS");
    let text = loadgen::render::text(&ran.report, false);
    assert!(text.contains("16 per connection asked, 4 allowed by the server"), "{text}");
}

#[test]
fn over_tls_alpn_chooses_h2() {
    let dir = tempfile::tempdir().expect("dir");
    let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
    let files = bundle.write(dir.path()).expect("certificate files");
    let tls = serve::TlsSettings { cert: files.chain, key: files.key.clone(), tickets: true, session_cache: true };
    let server = hello_server(Limits { tls: Some(tls), ..Limits::default() });
    let url = format!("https://localhost:{}/", server.local_addr().port());
    let ca = files.ca.display().to_string();
    let ran = run(&["--http2", "--streams", "4", "-c", "2", "-d", "1s", "--warmup", "0s", "--cacert", &ca, &url]);
    ran.assert_no_errors();
    let tls = ran.report.tls.as_ref().expect("a TLS section");
    assert_eq!(tls.counts.alpn.keys().collect::<Vec<_>>(), ["h2"]);
    assert_eq!(ran.report.http2.as_ref().and_then(|h| h.negotiated.get("h2")), Some(&2));
}

#[test]
fn a_server_without_http2_fails_the_run_saying_so() {
    let server = hello_server(Limits { http2: None, ..Limits::default() });
    let url = format!("http://{}/", server.local_addr());
    let (report, args, _) = try_run(&["--http2", "-c", "1", "-d", "500ms", "--warmup", "0s", &url]);
    let report = report.expect("the run itself completes");
    let failures = loadgen::failures(&report, args.allow_failures);
    assert!(
        failures.iter().any(|f| f.contains("--http2: the server spoke") && f.contains("instead of h2")),
        "{failures:?}"
    );
}

#[test]
fn stream_flags_that_do_not_fit_are_refused() {
    for (flags, why) in [
        (&["--http2", "--streams", "0"][..], "0 streams"),
        (&["--streams", "4"][..], "--streams without --http2"),
        (&["--http2", "--pipeline", "4"][..], "--pipeline with --http2"),
        (&["--http2", "--requests-per-conn", "10"][..], "--requests-per-conn with --http2"),
    ] {
        let mut list = flags.to_vec();
        list.push("http://127.0.0.1:1/");
        common::loadgen_bin(&list).assert_bad_input(why);
    }
}
