//! Serving over real sockets: workers, timeouts, keep-alive, pipelining, peer address.

mod common;

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{get, hello, start, test_limits};
use http::StatusCode;
use serve::{PeerAddr, Request, Response};
use testkit::http::Conn;
use tower::service_fn;

/// Generous bound for "the server closed it in time": the configured timeouts here are 1 s.
const CLOSE_BOUND: Duration = Duration::from_secs(3);

#[test]
fn get_is_served_on_a_real_port() {
    let server = start(test_limits(), || service_fn(hello));
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0, "local_addr reports the port the kernel chose");
    assert_eq!(addr.ip().to_string(), "127.0.0.1");

    let res = Conn::connect(addr).request(get("/api/hello"));
    assert_eq!(res.status, 200);
    assert_eq!(res.header("content-type"), Some("application/json"));
    assert_eq!(res.json(), serde_json::json!({ "path": "/api/hello" }));
}

#[test]
fn bind_reuseport_gives_listeners_on_one_port() {
    let listeners = serve::bind_reuseport("127.0.0.1:0".parse().expect("address"), 3).expect("bind");
    assert_eq!(listeners.len(), 3);
    let ports: BTreeSet<u16> = listeners.iter().map(|l| l.local_addr().expect("local addr").port()).collect();
    assert_eq!(ports.len(), 1, "all listeners share the first one's port: {ports:?}");
    assert!(ports.iter().all(|&p| p != 0));
}

#[test]
fn two_reuseport_workers_both_serve() {
    let built = Arc::new(AtomicUsize::new(0));
    let limits = serve::Limits { workers: 2, ..test_limits() };
    let counter = built.clone();
    let server = start(limits, move || {
        counter.fetch_add(1, Ordering::SeqCst);
        service_fn(|_req: Request| async {
            let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
            Ok::<_, Infallible>(serve::json(StatusCode::OK, &serde_json::json!({ "thread": thread })))
        })
    });

    let mut threads = BTreeSet::new();
    for i in 0..200 {
        // A new connection each time, so the kernel's SO_REUSEPORT hash picks a listener each time.
        let res = Conn::connect(server.local_addr()).request(get(&format!("/{i}")));
        assert_eq!(res.status, 200, "connection {i}");
        threads.insert(res.json()["thread"].as_str().expect("thread name").to_string());
    }
    let expected: BTreeSet<String> = ["worker-0".to_string(), "worker-1".to_string()].into();
    assert_eq!(threads, expected, "every connection answered, by both workers");
    assert_eq!(built.load(Ordering::SeqCst), 2, "the factory runs once per worker");
}

#[test]
fn partial_request_head_is_cut_after_header_timeout() {
    // Keep-alive idle far away, so only the header-read timeout can close the stalled connection.
    let limits = serve::Limits { keep_alive_timeout: Duration::from_secs(30), ..test_limits() };
    let server = start(limits, || service_fn(hello));

    let mut stalled = Conn::connect(server.local_addr());
    stalled.send("GET /stalled HTTP/1.1\r\nHost: test\r\n");

    // The stalled connection does not hold up the (single) worker.
    let res = Conn::connect(server.local_addr()).request(get("/other"));
    assert_eq!(res.status, 200);
    assert_eq!(res.json()["path"], "/other");

    assert!(stalled.wait_closed(CLOSE_BOUND).is_some(), "stalled head not cut within {CLOSE_BOUND:?}");
}

#[test]
fn trickled_request_head_is_cut_after_header_timeout() {
    // Slowloris: bytes keep arriving (so the connection is never idle), but the head never completes.
    let limits = serve::Limits { keep_alive_timeout: Duration::from_secs(30), ..test_limits() };
    let server = start(limits, || service_fn(hello));

    let mut client = Conn::connect(server.local_addr());
    client.send("GET /slow HTTP/1.1\r\n");
    let start = Instant::now();
    let mut closed = false;
    for i in 0.. {
        if start.elapsed() > CLOSE_BOUND {
            break;
        }
        if client.write(format!("X-Trickle-{i}: x\r\n").as_bytes()).is_err()
            || client.wait_closed(Duration::from_millis(200)).is_some()
        {
            closed = true;
            break;
        }
    }
    assert!(closed, "a head trickled in forever was not cut within {CLOSE_BOUND:?}");
}

#[test]
fn silent_connection_is_closed_by_idle_timeout() {
    // Header timeout far away: a connection that never sends a byte is idle, and the idle timeout closes it.
    let limits = serve::Limits { header_timeout: Duration::from_secs(30), ..test_limits() };
    let server = start(limits, || service_fn(hello));
    let mut client = Conn::connect(server.local_addr());
    assert!(client.wait_closed(CLOSE_BOUND).is_some(), "silent connection not closed within {CLOSE_BOUND:?}");
}

#[test]
fn idle_keep_alive_connection_is_closed_after_keep_alive_timeout() {
    let limits = serve::Limits { header_timeout: Duration::from_secs(30), ..test_limits() };
    let server = start(limits, || service_fn(hello));
    let mut client = Conn::connect(server.local_addr());
    let res = client.request(get("/first"));
    assert_eq!(res.status, 200);
    assert_ne!(res.header("connection"), Some("close"), "HTTP/1.1 response keeps the connection open");

    let closed_after = client.wait_closed(CLOSE_BOUND).expect("idle keep-alive connection closed within the bound");
    assert!(
        closed_after >= Duration::from_millis(500),
        "closed after {closed_after:?}, well before the 1 s keep-alive timeout"
    );
}

#[test]
fn busy_keep_alive_connection_outlives_idle_timeout() {
    // Both timeouts 1 s; requests every 300 ms for 2.4 s keep the connection from ever being idle that long.
    let server = start(test_limits(), || service_fn(hello));
    let mut client = Conn::connect(server.local_addr());
    for i in 0..8 {
        let res = client.request(get(&format!("/busy/{i}")));
        assert_eq!(res.status, 200, "request {i} on the kept-alive connection");
        assert_eq!(res.json()["path"], format!("/busy/{i}"));
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn partial_head_on_a_kept_alive_connection_is_cut_after_header_timeout() {
    let limits = serve::Limits { keep_alive_timeout: Duration::from_secs(30), ..test_limits() };
    let server = start(limits, || service_fn(hello));
    let mut client = Conn::connect(server.local_addr());
    assert_eq!(client.request(get("/first")).status, 200);
    client.send("GET /second HTTP/1.1\r\nHost: test\r\n");
    assert!(client.wait_closed(CLOSE_BOUND).is_some(), "stalled second head not cut within {CLOSE_BOUND:?}");
}

#[test]
fn slow_handler_is_not_cut_by_keep_alive_timeout() {
    // A request in flight is not idleness, however long the handler takes.
    let server = start(test_limits(), || {
        service_fn(|_req: Request| async {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            Ok::<_, Infallible>(serve::json(StatusCode::OK, &serde_json::json!({ "slow": true })))
        })
    });
    let mut client = Conn::connect(server.local_addr());
    let res = client.request(get("/slow"));
    assert_eq!(res.status, 200);
    assert_eq!(res.json()["slow"], true);
}

#[test]
fn pipelined_requests_get_responses_in_order() {
    let server = start(test_limits(), || {
        service_fn(|req: Request| async move {
            // The first request is the slow one, so out-of-order answering would show.
            if req.uri().path() == "/a" {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok::<_, Infallible>(serve::json(StatusCode::OK, &serde_json::json!({ "path": req.uri().path() })))
        })
    });
    let mut client = Conn::connect(server.local_addr());
    client.send(format!("{}{}{}", get("/a"), get("/b"), get("/c")));
    for path in ["/a", "/b", "/c"] {
        let res = client.read_response().expect("pipelined response");
        assert_eq!(res.status, 200);
        assert_eq!(res.json()["path"], path);
    }
}

fn peer_echo(req: Request) -> std::future::Ready<Result<Response, Infallible>> {
    let peer = req.extensions().get::<PeerAddr>().map(|PeerAddr(addr)| addr.to_string());
    std::future::ready(Ok(serve::json(StatusCode::OK, &serde_json::json!({ "peer": peer }))))
}

#[test]
fn peer_addr_is_in_extensions_when_enabled() {
    let limits = serve::Limits { peer_addr: true, ..test_limits() };
    let server = start(limits, || service_fn(peer_echo));
    let mut client = Conn::connect(server.local_addr());
    let res = client.request(get("/"));
    assert_eq!(res.status, 200);
    assert_eq!(res.json()["peer"], client.local_addr().to_string());
}

#[test]
fn peer_addr_is_absent_when_disabled() {
    let limits = serve::Limits { peer_addr: false, ..test_limits() };
    let server = start(limits, || service_fn(peer_echo));
    let res = Conn::connect(server.local_addr()).request(get("/"));
    assert_eq!(res.status, 200);
    assert_eq!(res.json()["peer"], serde_json::Value::Null);
}

/// The race behind Node's open-loop read errors (bench/peers/keepalive-race.mjs): the event loop is blocked
/// past a keep-alive deadline while that connection's next request arrives. Node's timers run first and
/// destroy the socket with the request unread (RST). serve checks a deadline only when a read would block,
/// so the waiting request is read, and answered.
#[test]
fn a_request_that_arrived_during_a_blocked_loop_is_answered_past_the_keep_alive_deadline() {
    // keep-alive 1 s (test_limits), one worker.
    let server = start(test_limits(), || {
        service_fn(|req: Request| async move {
            if req.uri().path() == "/stall" {
                // Blocks the worker thread, as a GC pause blocks Node's loop.
                std::thread::sleep(Duration::from_millis(1500));
            }
            hello(req).await
        })
    });
    let mut a = Conn::connect(server.local_addr());
    assert_eq!(a.request(get("/a")).status, 200);
    std::thread::sleep(Duration::from_millis(500));
    let mut b = Conn::connect(server.local_addr());
    b.send(get("/stall"));
    std::thread::sleep(Duration::from_millis(300));
    // 0.8 s into A's idle time: in time, though the worker only reads it after the deadline passed.
    a.send(get("/a-again"));
    let res = a.read_response().expect("the request that arrived in time is answered");
    assert_eq!(res.json()["path"], "/a-again");
    assert_eq!(b.read_response().expect("the stalled request").status, 200);
}
