//! Half-closed requests: a client that shuts down its sending side right after its request (HTTP/1.0-style
//! clients, `nc -N`, some proxies) still gets its answer, also from a handler that takes a while, and the
//! connection then closes. The handler's stall deadline still holds without a read to hang it on: hyper does
//! not read while a half-closed request is in flight, so `--io-timeout` is enforced on the handler itself.

mod common;

use std::convert::Infallible;
use std::net::Shutdown;
use std::time::Duration;

use common::{get, start, test_limits};
use http::StatusCode;
use serve::{Request, Response};
use testkit::http::Conn;
use tower::service_fn;

const IO_TIMEOUT: Duration = Duration::from_secs(1);
const BOUND: Duration = Duration::from_secs(4);

/// Answers after `?ms=N` milliseconds (a database call's stand-in), never when `/never`.
async fn slow(req: Request) -> Result<Response, Infallible> {
    if req.uri().path() == "/never" {
        std::future::pending::<()>().await;
    }
    let ms = req.uri().query().and_then(|q| q.strip_prefix("ms=")).and_then(|n| n.parse().ok()).unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(serve::json(StatusCode::OK, &serde_json::json!({ "path": req.uri().path() })))
}

fn half_closed(server: &serve::Server, request: &str) -> Conn {
    let mut client = Conn::connect(server.local_addr());
    client.send(request);
    client.stream().shutdown(Shutdown::Write).expect("half-close");
    client
}

#[test]
fn a_half_closed_request_is_answered_then_the_connection_closes() {
    let server = start(test_limits(), || service_fn(slow));
    let mut client = half_closed(&server, &get("/notes/1?ms=300"));
    let res = client.read_response().expect("an answer to a half-closed request");
    assert_eq!(res.status, 200);
    assert_eq!(res.json()["path"], "/notes/1");
    assert!(client.wait_closed(BOUND).is_some(), "the connection stayed open after the answer");
}

#[test]
fn pipelined_requests_before_a_half_close_are_all_answered() {
    let server = start(test_limits(), || service_fn(slow));
    let mut client = half_closed(&server, &format!("{}{}{}", get("/a?ms=50"), get("/b"), get("/c?ms=50")));
    for path in ["/a", "/b", "/c"] {
        let res = client.read_response().unwrap_or_else(|e| panic!("answer to {path}: {e}"));
        assert_eq!(res.json()["path"], path);
    }
    assert!(client.wait_closed(BOUND).is_some());
}

#[test]
fn a_body_cut_short_by_a_half_close_fails_at_once() {
    let server = start(test_limits(), || {
        service_fn(|req: Request| async move {
            Ok::<_, Infallible>(match serve::read_body(req.into_body(), 1024).await {
                Ok(body) => serve::json(StatusCode::OK, &serde_json::json!({ "len": body.len() })),
                Err(e) => e.into_response(),
            })
        })
    });
    let mut client = half_closed(&server, "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789");
    let res = client.read_response().expect("an answer");
    assert_eq!(res.status, 400, "{}", res.text());
    assert!(client.wait_closed(Duration::from_millis(500)).is_some(), "the truncated upload waited for a deadline");
}

#[test]
fn a_handler_that_never_answers_a_half_closed_request_is_cut_after_io_timeout() {
    let limits = serve::Limits { io_timeout: IO_TIMEOUT, ..test_limits() };
    let server = start(limits, || service_fn(slow));
    let mut client = half_closed(&server, &get("/never"));
    let closed = client.wait_closed(BOUND).expect("cut within the bound");
    assert!(closed >= Duration::from_millis(700), "cut after {closed:?}, before the 1 s io timeout");
}

#[test]
fn a_handler_that_never_answers_is_cut_after_io_timeout() {
    // No half-close: the client just waits. Keep-alive and header deadlines are far away.
    let limits = serve::Limits {
        io_timeout: IO_TIMEOUT,
        keep_alive_timeout: Duration::from_secs(60),
        header_timeout: Duration::from_secs(60),
        ..test_limits()
    };
    let server = start(limits, || service_fn(slow));
    let mut client = Conn::connect(server.local_addr());
    client.send(get("/never"));
    let closed = client.wait_closed(BOUND).expect("cut within the bound");
    assert!(closed >= Duration::from_millis(700), "cut after {closed:?}, before the 1 s io timeout");
}
