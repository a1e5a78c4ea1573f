//! Response framing over real sockets: Content-Length keep-alive, chunked (extensions, trailer),
//! close-delimited, `Connection: close`, 1xx interim responses, bodiless HEAD/204/304, pipelining, warmup.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn content_length_keep_alive() {
    let server = Server::routes();
    let ran = run(&["-c", "4", "-d", "500ms", "--timeout", "2s", &server.url("/")]);
    let r = &ran.report;
    assert!(r.responses > 0, "no responses");
    assert_eq!(r.status, status_map(&[(200, r.responses)]));
    assert_eq!(r.non_2xx_3xx, 0);
    ran.assert_no_errors();
    assert_eq!(r.reconnects, 0, "keep-alive connections were reopened");
    assert_eq!((r.connections.asked, r.connections.established, r.connections.failed), (4, 4, 0));
    assert_eq!(server.request_connections(), 4, "requests came on one TCP connection per asked connection");
    assert_eq!(r.latency.count, r.responses, "one latency sample per response");
    assert!(!r.latency.corrected, "closed loop latency is from the write");
    assert!(r.latency_from_write.is_none(), "latency_from_write is open loop only");
    assert!(r.open_loop.is_none());
    assert!(r.latency.min_us > 0 && r.latency.min_us <= r.latency.p50_us && r.latency.p50_us <= r.latency.max_us);
    assert!(r.bytes_read >= r.responses * HELLO_RESPONSE.len() as u64, "bytes_read {}", r.bytes_read);
    assert!(r.bytes_written > 0);
    assert!(
        server.requests() >= r.responses,
        "server saw {} requests for {} responses",
        server.requests(),
        r.responses
    );
    assert_eq!(r.assertions.checked, 0, "no assertions were asked for");
    assert!(ran.failures().is_empty(), "failures: {:?}", ran.failures());
    ran.assert_returned_promptly();
}

#[test]
fn chunked_with_extensions_and_trailer() {
    let server = Server::chunked();
    let ran = run(&["-c", "2", "-d", "500ms", "--timeout", "2s", "--expect-body", CHUNKED_BODY, &server.url("/")]);
    let r = &ran.report;
    assert!(r.responses > 0, "no responses (errors {:?})", r.errors);
    assert_eq!(r.errors.parse, 0, "chunk extensions or the trailer were not understood");
    ran.assert_no_errors();
    assert_eq!(r.status, status_map(&[(200, r.responses)]));
    assert_eq!(r.reconnects, 0, "chunked responses keep the connection");
    assert!(r.bytes_read >= r.responses * CHUNKED_RESPONSE.len() as u64, "bytes_read {}", r.bytes_read);
    assert_eq!(r.assertions.failed, 0, "the decoded body is not {CHUNKED_BODY:?}");
    assert!(r.assertions.checked > 0);
    ran.assert_returned_promptly();
}

/// A close-delimited response on `server`: the body read until the close is a complete response.
fn assert_close_delimited(server: &Server) {
    let ran =
        run(&["-c", "2", "-d", "500ms", "--timeout", "2s", "--expect-body", CLOSE_DELIMITED_BODY, &server.url("/")]);
    let r = &ran.report;
    assert!(
        r.responses > 0,
        "no responses (errors {:?}, in flight at end {}, bytes read {})",
        r.errors,
        r.in_flight_at_end,
        r.bytes_read
    );
    ran.assert_no_errors();
    assert_eq!(r.status, status_map(&[(200, r.responses)]));
    assert!(
        r.reconnects + 2 >= r.responses,
        "every response closes its connection: {} reconnects for {} responses",
        r.reconnects,
        r.responses
    );
    assert!(server.connections() >= r.responses, "{} connections for {} responses", server.connections(), r.responses);
    assert_eq!(r.assertions.failed, 0, "the body read until the close is not {CLOSE_DELIMITED_BODY:?}");
    assert_eq!(r.connections.established, 2);
    assert!(ran.failures().is_empty(), "failures: {:?}", ran.failures());
    ran.assert_returned_promptly();
}

#[test]
fn close_delimited_body_reconnects_every_response() {
    assert_close_delimited(&Server::close_delimited());
}

#[test]
fn close_delimited_body_with_a_late_fin() {
    // The FIN 20 ms after the body: a readable event of its own.
    assert_close_delimited(&Server::close_delimited_fin_after(Duration::from_millis(20)));
}

#[test]
fn connection_close_reconnects_every_response() {
    let server = Server::connection_close();
    let ran = run(&["-c", "2", "-d", "500ms", "--timeout", "2s", "--expect-body", HELLO, &server.url("/")]);
    let r = &ran.report;
    assert!(r.responses > 0, "no responses (errors {:?})", r.errors);
    ran.assert_no_errors();
    assert_eq!(r.status, status_map(&[(200, r.responses)]));
    assert!(
        r.reconnects + 2 >= r.responses,
        "Connection: close on every response: {} reconnects for {} responses",
        r.reconnects,
        r.responses
    );
    assert!(server.connections() >= r.responses, "{} connections for {} responses", server.connections(), r.responses);
    assert_eq!(r.assertions.failed, 0);
    assert!(ran.failures().is_empty(), "failures: {:?}", ran.failures());
    ran.assert_returned_promptly();
}

#[test]
fn interim_responses_are_skipped() {
    let server = Server::interim();
    let ran = run(&["-c", "2", "-d", "500ms", "--timeout", "2s", "--expect-body", "ok", &server.url("/")]);
    let r = &ran.report;
    assert!(r.responses > 0, "no responses (errors {:?})", r.errors);
    assert_eq!(r.status, status_map(&[(200, r.responses)]), "100 and 103 are not final responses");
    ran.assert_no_errors();
    assert_eq!(r.reconnects, 0);
    assert_eq!(r.assertions.failed, 0);
    assert_eq!(r.latency.count, r.responses);
    ran.assert_returned_promptly();
}

#[test]
fn head_response_has_no_body_despite_content_length() {
    let server = Server::bodiless();
    let ran = run(&["-c", "2", "-d", "500ms", "--timeout", "300ms", "-m", "HEAD", &server.url("/")]);
    let r = &ran.report;
    assert!(server.recorded().iter().all(|req| req.method == "HEAD"), "loadgen sent something other than HEAD");
    assert_eq!(r.errors.timeout, 0, "waited for the 1000 body bytes a HEAD response never has");
    assert!(r.responses > 0, "no responses (errors {:?})", r.errors);
    ran.assert_no_errors();
    assert_eq!(r.status, status_map(&[(200, r.responses)]));
    assert_eq!(r.reconnects, 0);
    ran.assert_returned_promptly();
}

#[test]
fn no_content_and_not_modified_have_no_body() {
    let server = Server::bodiless();
    for code in [204u16, 304] {
        let ran = run(&["-c", "2", "-d", "400ms", "--timeout", "300ms", &server.url(&format!("/{code}"))]);
        let r = &ran.report;
        assert_eq!(r.errors.timeout, 0, "{code}: waited for a body a {code} never has");
        assert!(r.responses > 0, "{code}: no responses (errors {:?})", r.errors);
        ran.assert_no_errors();
        assert_eq!(r.status, status_map(&[(code, r.responses)]), "{code}");
        assert_eq!(r.reconnects, 0, "{code}: the connection stays open");
        assert_eq!(r.non_2xx_3xx, 0, "{code} is 2xx/3xx");
        ran.assert_returned_promptly();
    }
}

#[test]
fn pipelined_requests_all_get_answers() {
    let server = Server::routes();
    let ran = run(&["-c", "2", "--pipeline", "4", "-d", "500ms", "--timeout", "2s", &server.url("/")]);
    let r = &ran.report;
    assert!(r.responses > 0);
    ran.assert_no_errors();
    assert_eq!(r.status, status_map(&[(200, r.responses)]));
    assert_eq!(r.reconnects, 0);
    assert_eq!(server.request_connections(), 2);
    assert!(r.in_flight_at_end <= 8, "at most 2 × 4 requests can be outstanding, {} reported", r.in_flight_at_end);
    // Everything the server received was either answered in the window or still outstanding at the end.
    assert!(server.requests() >= r.responses);
    ran.assert_returned_promptly();
}

#[test]
fn warmup_is_run_but_not_counted() {
    let server = Server::routes();
    let ran = run(&["-c", "2", "--warmup", "400ms", "-d", "400ms", "--timeout", "2s", &server.url("/")]);
    let r = &ran.report;
    assert!(r.responses > 0);
    ran.assert_no_errors();
    assert!(
        server.requests() > r.responses,
        "the server answered {} requests, as many as the {} counted: the warmup was not run or not excluded",
        server.requests(),
        r.responses
    );
    assert!(ran.elapsed >= Duration::from_millis(700), "warmup + duration took only {:?}", ran.elapsed);
    assert!((r.duration_s - 0.4).abs() < 0.2, "measured window {} s, expected about 0.4", r.duration_s);
    ran.assert_returned_promptly();
}
