//! `--io-timeout`: a request in flight whose connection moves no byte for that long is cut, whichever side
//! stalls: a client that stops sending its body, or one that stops reading the response (also once the
//! responses are complete but unwritten, as with a client that pipelines requests and never reads).

mod common;

use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{start, test_limits};
use http::StatusCode;
use http_body_util::BodyExt;
use serve::{Body, Request};
use testkit::http::Conn;
use tower::service_fn;

const IO_TIMEOUT: Duration = Duration::from_secs(1);
const BOUND: Duration = Duration::from_secs(4);

async fn read_body(req: Request) -> Result<serve::Response, Infallible> {
    match req.into_body().collect().await {
        Ok(body) => Ok(serve::json(StatusCode::OK, &serde_json::json!({ "len": body.to_bytes().len() }))),
        Err(_) => Ok(serve::error(StatusCode::BAD_REQUEST, "body read failed")),
    }
}

#[test]
fn stalled_request_body_is_cut_after_io_timeout() {
    let limits = serve::Limits { io_timeout: IO_TIMEOUT, body_limit: 1 << 20, ..test_limits() };
    let server = start(limits, || service_fn(read_body));
    let mut client = Conn::connect(server.local_addr());
    // Promise 100 bytes, send 10, then nothing.
    client.send("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789");
    let closed = client.wait_closed(BOUND).expect("stalled upload cut within the bound");
    assert!(closed >= Duration::from_millis(700), "cut after {closed:?}, before the 1 s io timeout");
}

#[test]
fn a_body_that_keeps_moving_is_not_cut() {
    let limits = serve::Limits { io_timeout: IO_TIMEOUT, body_limit: 1 << 20, ..test_limits() };
    let server = start(limits, || service_fn(read_body));
    let mut client = Conn::connect(server.local_addr());
    client.send("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\n");
    // Six bytes over 2.4 s: longer than the io timeout in total, but never a 1 s gap.
    for byte in ["a", "b", "c", "d", "e", "f"] {
        std::thread::sleep(Duration::from_millis(400));
        client.send(byte);
    }
    let res = client.read_response().expect("response after a slow but steady body");
    assert_eq!(res.status, 200);
    assert_eq!(res.json()["len"], 6);
}

#[test]
fn client_that_stops_reading_is_cut_after_io_timeout() {
    let limits = serve::Limits { io_timeout: IO_TIMEOUT, ..test_limits() };
    // 32 MiB: far more than the socket buffers hold, so the write blocks once the client stops reading.
    let server = start(limits, || {
        service_fn(|_req: Request| async {
            Ok::<_, Infallible>(serve::Response::new(Body::Full(Bytes::from(vec![b'x'; 32 << 20]))))
        })
    });
    let mut client = Conn::connect(server.local_addr());
    client.send("GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
    // Do not read for a while: the server must give up on its own.
    std::thread::sleep(Duration::from_millis(2500));
    let started = Instant::now();
    // Now drain: a cut connection ends (EOF or reset) long before 32 MiB arrive at the rate we read.
    let received = client.drain_until_closed(BOUND);
    assert!(received.is_some(), "the stalled response was not cut within {BOUND:?} after draining began");
    assert!(received.unwrap_or(0) < 32 << 20, "the whole response arrived: nothing was cut");
    assert!(started.elapsed() < BOUND);
}

#[test]
fn client_that_pipelines_and_never_reads_is_cut_after_io_timeout() {
    // Only the io timeout may cut this connection: the keep-alive and header timeouts are far away.
    let limits = serve::Limits {
        io_timeout: IO_TIMEOUT,
        keep_alive_timeout: Duration::from_secs(60),
        header_timeout: Duration::from_secs(60),
        ..test_limits()
    };
    let server = start(limits, || {
        service_fn(|_req: Request| async {
            Ok::<_, Infallible>(serve::Response::new(Body::Full(Bytes::from(vec![b'x'; 1024]))))
        })
    });
    let mut client = Conn::connect(server.local_addr());
    // Every response is complete as soon as hyper takes it, so no request is in flight while hyper waits to
    // write them out, and it reads nothing meanwhile. Pipeline until the server stops taking requests (a write
    // then blocks for the client's write timeout) or cuts the connection (the write fails sooner).
    let batch = "GET / HTTP/1.1\r\nHost: t\r\n\r\n".repeat(256);
    let started = Instant::now();
    while client.write(batch.as_bytes()).is_ok() {
        assert!(started.elapsed() < Duration::from_secs(30), "the server kept taking requests for 30 s");
    }
    // Cut: reading now ends in EOF or a reset. Not cut: every response arrives, then the connection idles.
    let received = client.drain_until_closed(BOUND);
    assert!(received.is_some(), "a client that pipelined requests and never read them was not cut");
}
