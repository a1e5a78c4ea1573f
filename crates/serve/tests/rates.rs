//! `--min-data-rate`: while a request arrives (its head, then its body), each window of
//! `--min-data-rate-window` must bring the minimum rate on average. A trickle is answered 408 and closed within
//! two windows; a slow but steady upload passes; a head trickled under the rate gets the same 408 before its
//! header deadline, and a head past `--header-timeout` gets it too.

mod common;

use std::convert::Infallible;
use std::time::{Duration, Instant};

use common::{start, test_limits};
use http::StatusCode;
use serve::{Limits, Request, Response};
use testkit::http::Conn;
use tower::service_fn;

const WINDOW: Duration = Duration::from_secs(1);
const SLACK: Duration = Duration::from_secs(2);

async fn upload(req: Request) -> Result<Response, Infallible> {
    Ok(match serve::read_body(req.into_body(), 1 << 20).await {
        Ok(body) => serve::json(StatusCode::OK, &serde_json::json!({ "len": body.len() })),
        Err(e) => e.into_response(),
    })
}

/// The rate at its default (500 bytes/s) over a 1 s window; every other deadline far away.
fn rate_limits() -> Limits {
    Limits {
        min_data_rate_window: WINDOW,
        header_timeout: Duration::from_secs(60),
        keep_alive_timeout: Duration::from_secs(60),
        io_timeout: Duration::from_secs(60),
        body_limit: 1 << 20,
        ..test_limits()
    }
}

/// Sends one byte every 100 ms (10 bytes/s) until the server answers or closes, for at most two windows
/// and the slack: how long it went on, and what the server sent before closing (None: it still had not).
fn trickle(client: &mut Conn, byte: &[u8]) -> (Duration, Option<Vec<u8>>) {
    let started = Instant::now();
    let mut answered = false;
    while started.elapsed() < WINDOW * 2 + SLACK && !answered {
        if client.write(byte).is_err() {
            answered = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        let stream = client.stream();
        stream.set_nonblocking(true).expect("nonblocking");
        let mut peek = [0u8; 1];
        // Bytes or the end of the stream; not WouldBlock.
        answered = stream.peek(&mut peek).is_ok();
        stream.set_nonblocking(false).expect("blocking");
    }
    let took = started.elapsed();
    (took, answered.then(|| client.read_until_close()))
}

#[test]
fn a_trickled_body_gets_408_and_a_close_within_two_windows() {
    let server = start(rate_limits(), || service_fn(upload));
    let mut client = Conn::connect(server.local_addr());
    client.send("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n");
    let (took, answer) = trickle(&mut client, b"x");
    let answer = String::from_utf8_lossy(&answer.expect("cut within two windows")).into_owned();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
    assert!(answer.contains("request body arrived too slowly"), "{answer}");
    assert!(took >= WINDOW - Duration::from_millis(200), "cut after {took:?}, before one window");
    assert!(took < WINDOW * 2 + SLACK, "cut after {took:?}");
}

#[test]
fn a_slow_but_steady_upload_passes() {
    let server = start(rate_limits(), || service_fn(upload));
    let mut client = Conn::connect(server.local_addr());
    // 10 KiB/s for 3 s: three windows, each far above 500 bytes/s.
    let chunk = vec![b'y'; 1024];
    client.send(format!("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n", 30 * 1024));
    for _ in 0..30 {
        std::thread::sleep(Duration::from_millis(100));
        client.send(&chunk);
    }
    let res = client.read_response().expect("an answer to a steady upload");
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.json()["len"], 30 * 1024);
}

#[test]
fn a_head_trickled_under_the_rate_gets_408_before_its_header_deadline() {
    let server = start(rate_limits(), || service_fn(upload));
    let mut client = Conn::connect(server.local_addr());
    client.send("GET /");
    let (took, answer) = trickle(&mut client, b"a");
    let answer = String::from_utf8_lossy(&answer.expect("cut within two windows")).into_owned();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request head arrived too slowly"), "{answer}");
    assert!(took < WINDOW * 2 + SLACK, "cut after {took:?}");
}

#[test]
fn a_head_past_the_header_timeout_gets_408() {
    let limits = Limits { header_timeout: Duration::from_secs(1), min_data_rate: 0, ..rate_limits() };
    let server = start(limits, || service_fn(upload));
    let mut client = Conn::connect(server.local_addr());
    client.send("GET / HTTP/1.1\r\nHost");
    let answer = String::from_utf8_lossy(&client.read_until_close()).into_owned();
    assert!(answer.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{answer}");
}

#[test]
fn with_the_rate_off_a_trickle_meets_only_the_stall_deadline() {
    let limits = Limits { min_data_rate: 0, ..rate_limits() };
    let server = start(limits, || service_fn(upload));
    let mut client = Conn::connect(server.local_addr());
    client.send("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n");
    let (took, answer) = trickle(&mut client, b"x");
    assert!(
        answer.is_none(),
        "cut after {took:?} with the rate off: {:?}",
        answer.map(|a| String::from_utf8_lossy(&a).into_owned())
    );
}
