//! Request limits over real sockets: head size → 431/414, body size → 413 (before reading when declared).

mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{get, hello, start, test_limits};
use http::StatusCode;
use http_body_util::{BodyExt, LengthLimitError};
use serve::{Request, Response, Server};
use testkit::http::Conn;
use tower::service_fn;

const BODY_LIMIT: u64 = 1024;

#[test]
fn oversized_request_head_gets_431() {
    let server = start(test_limits(), || service_fn(hello));
    let big = "a".repeat(20 * 1024);
    let res =
        Conn::connect(server.local_addr()).request(format!("GET / HTTP/1.1\r\nHost: test\r\nX-Big: {big}\r\n\r\n"));
    assert_eq!(res.status, 431);
}

#[test]
fn many_headers_over_the_byte_limit_get_431() {
    let server = start(test_limits(), || service_fn(hello));
    let headers: String = (0..200).map(|i| format!("X-Header-{i}: {}\r\n", "v".repeat(64))).collect();
    let res = Conn::connect(server.local_addr()).request(format!("GET / HTTP/1.1\r\nHost: test\r\n{headers}\r\n"));
    assert_eq!(res.status, 431);
}

#[test]
fn long_uri_gets_414_or_431() {
    let server = start(test_limits(), || service_fn(hello));
    let path = format!("/{}", "a".repeat(20 * 1024));
    let res = Conn::connect(server.local_addr()).request(get(&path));
    assert!(matches!(res.status, 414 | 431), "status {}", res.status);
}

#[test]
fn head_under_the_limit_is_served() {
    let server = start(test_limits(), || service_fn(hello));
    let value = "a".repeat(6 * 1024);
    let res =
        Conn::connect(server.local_addr()).request(format!("GET /ok HTTP/1.1\r\nHost: test\r\nX-Big: {value}\r\n\r\n"));
    assert_eq!(res.status, 200);
    assert_eq!(res.json()["path"], "/ok");
}

/// Echoes the request body; a body past the limit becomes the 413 a real handler would send.
async fn echo(req: Request) -> Result<Response, Infallible> {
    match req.into_body().collect().await {
        Ok(collected) => {
            let mut res = Response::new(serve::Body::from(collected.to_bytes()));
            res.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
            Ok(res)
        }
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Ok(serve::payload_too_large(BODY_LIMIT)),
        Err(_) => Ok(serve::error(StatusCode::BAD_REQUEST, "could not read the body")),
    }
}

/// An echo server that counts how many requests reached the handler.
fn echo_server() -> (Server, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let limits = serve::Limits { body_limit: BODY_LIMIT, ..test_limits() };
    let server = start(limits, move || {
        let counter = counter.clone();
        service_fn(move |req: Request| {
            counter.fetch_add(1, Ordering::SeqCst);
            echo(req)
        })
    });
    (server, calls)
}

fn assert_413_json(res: &testkit::http::Response) {
    assert_eq!(res.status, 413);
    assert_eq!(res.header("content-type"), Some("application/json"));
    let message = res.json()["error"].as_str().expect("{\"error\": string}").to_string();
    assert!(message.contains(&BODY_LIMIT.to_string()), "error names the limit: {message:?}");
}

#[test]
fn declared_body_over_limit_gets_413_without_reading_it() {
    let (server, calls) = echo_server();
    let mut client = Conn::connect(server.local_addr());
    // Only the head: if the server waited for the body, this read would time out.
    client.send("POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 1000000\r\n\r\n");
    let res = client.read_response().expect("413 arrives without the body being sent");
    assert_413_json(&res);
    assert_eq!(res.header("connection"), Some("close"));
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the handler never saw the request");
    assert!(client.wait_closed(Duration::from_secs(3)).is_some(), "connection closed after the unread body");
}

#[test]
fn declared_body_over_limit_gets_413_when_body_bytes_arrive_with_the_head() {
    // What clients without `Expect: 100-continue` do: the head and the start of the body in one write.
    let (server, calls) = echo_server();
    let mut client = Conn::connect(server.local_addr());
    let start_of_body = "x".repeat(2048);
    client.send(format!("POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 1000000\r\n\r\n{start_of_body}"));
    let res = client.read_response().expect("413 arrives");
    assert_413_json(&res);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the handler never saw the request");
}

#[test]
fn chunked_body_over_limit_fails_in_the_handler_with_413() {
    let (server, calls) = echo_server();
    let mut client = Conn::connect(server.local_addr());
    let chunk = format!("200\r\n{}\r\n", "a".repeat(0x200));
    let res = client.request(format!(
        "POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n{}0\r\n\r\n",
        chunk.repeat(4)
    ));
    assert_413_json(&res);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "no Content-Length, so the handler saw it");
}

#[test]
fn body_under_limit_is_echoed_and_connection_reused() {
    let (server, _) = echo_server();
    let mut client = Conn::connect(server.local_addr());

    let res = client.request("POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 11\r\n\r\nhello world");
    assert_eq!(res.status, 200);
    assert_eq!(res.text(), "hello world");

    let res = client.request(
        "POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    );
    assert_eq!(res.status, 200);
    assert_eq!(res.text(), "hello world");
}

#[test]
fn body_exactly_at_limit_is_accepted() {
    let (server, _) = echo_server();
    let body = "b".repeat(BODY_LIMIT as usize);
    let res = Conn::connect(server.local_addr())
        .request(format!("POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: {BODY_LIMIT}\r\n\r\n{body}"));
    assert_eq!(res.status, 200);
    assert_eq!(res.body.len(), BODY_LIMIT as usize);

    let (server, _) = echo_server();
    let res = Conn::connect(server.local_addr()).request(format!(
        "POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        BODY_LIMIT
    ));
    assert_eq!(res.status, 200);
    assert_eq!(res.body.len(), BODY_LIMIT as usize);
}

#[test]
fn transfer_codings_other_than_plain_chunked_get_501_and_close() {
    let (server, calls) = echo_server();
    for te in ["Transfer-Encoding: gzip, chunked", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked"] {
        let mut client = Conn::connect(server.local_addr());
        // A canary follows on the same connection: it must never be answered as a second request.
        client.send(format!(
            "POST /echo HTTP/1.1\r\nHost: test\r\n{te}\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /echo HTTP/1.1\r\nHost: test\r\n\r\n"
        ));
        let res = client.read_response().expect("501 arrives");
        assert_eq!(res.status, 501, "{te}");
        assert_eq!(res.header("connection"), Some("close"), "{te}");
        assert!(client.wait_closed(Duration::from_secs(2)).is_some(), "{te}: closed after the 501, canary unanswered");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no handler saw these requests");
    let mut client = Conn::connect(server.local_addr());
    let res =
        client.request("POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: Chunked \r\n\r\n2\r\nok\r\n0\r\n\r\n");
    assert_eq!((res.status, res.text().as_str()), (200, "ok"), "plain chunked, any case, still works");
}
