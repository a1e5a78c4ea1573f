//! Graceful shutdown: in-flight requests finish, idle connections close at once, the deadline is hard, and the
//! listeners are gone afterwards.

mod common;

use std::convert::Infallible;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{get, hello, start, test_limits};
use http::StatusCode;
use serve::{Request, Server};
use testkit::http::Conn;
use tower::service_fn;

/// A server whose handler reports on `started` and then sleeps `delay` before answering.
fn sleepy_server(limits: serve::Limits, delay: Duration) -> (Server, mpsc::Receiver<()>) {
    let (started_tx, started) = mpsc::sync_channel::<()>(16);
    let server = start(limits, move || {
        let started_tx = started_tx.clone();
        service_fn(move |_req: Request| {
            let _ = started_tx.try_send(());
            async move {
                tokio::time::sleep(delay).await;
                Ok::<_, Infallible>(serve::json(StatusCode::OK, &serde_json::json!({ "done": true })))
            }
        })
    });
    (server, started)
}

/// Calls `shutdown` on another thread; the handle yields how long it took.
fn shutdown_in_background(server: Server) -> std::thread::JoinHandle<Duration> {
    std::thread::spawn(move || {
        let start = Instant::now();
        server.shutdown();
        start.elapsed()
    })
}

#[test]
fn in_flight_request_completes_during_graceful_shutdown() {
    let (server, started) = sleepy_server(test_limits(), Duration::from_millis(300));
    let addr = server.local_addr();
    let mut client = Conn::connect(addr);
    client.send(get("/slow"));
    started.recv_timeout(Duration::from_secs(5)).expect("handler started");

    let shutdown = shutdown_in_background(server);
    let res = client.read_response().expect("in-flight response still arrives");
    assert_eq!(res.status, 200);
    assert_eq!(res.json()["done"], true);
    assert!(client.wait_closed(Duration::from_secs(3)).is_some(), "connection closed once the response is out");

    let took = shutdown.join().expect("shutdown thread");
    assert!(took < Duration::from_secs(3), "graceful shutdown took {took:?}");
    assert!(Conn::open(addr).is_err(), "listener still accepts after shutdown");
}

#[test]
fn new_connections_are_refused_after_shutdown() {
    let server = start(serve::Limits { workers: 2, ..test_limits() }, || service_fn(hello));
    let addr = server.local_addr();
    assert_eq!(Conn::connect(addr).request(get("/")).status, 200);
    server.shutdown();
    for _ in 0..10 {
        let err = Conn::open(addr).err().expect("connect fails after shutdown");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    }
}

#[test]
fn shutdown_deadline_cuts_requests_that_outlive_it() {
    let limits = serve::Limits { shutdown_timeout: Duration::from_millis(500), ..test_limits() };
    let (server, started) = sleepy_server(limits, Duration::from_secs(10));
    let mut client = Conn::connect(server.local_addr());
    client.send(get("/forever"));
    started.recv_timeout(Duration::from_secs(5)).expect("handler started");

    let start = Instant::now();
    server.shutdown();
    let took = start.elapsed();
    assert!(took < Duration::from_millis(2500), "shutdown with a 500 ms deadline took {took:?}");

    assert!(client.read_response().is_err(), "the cut request gets no response");
}

#[test]
fn shutdown_closes_idle_and_fresh_connections_without_waiting_for_the_deadline() {
    // Every timeout far away: only shutdown itself can close these connections quickly.
    let limits = serve::Limits {
        header_timeout: Duration::from_secs(30),
        keep_alive_timeout: Duration::from_secs(30),
        shutdown_timeout: Duration::from_secs(20),
        ..test_limits()
    };
    let server = start(limits, || service_fn(hello));
    let mut idle = Conn::connect(server.local_addr());
    assert_eq!(idle.request(get("/")).status, 200);
    let mut fresh = Conn::connect(server.local_addr());
    // Make sure the worker has accepted `fresh` before shutting down: a request on a third connection is answered
    // after the accept loop has seen every earlier connection in the queue.
    assert_eq!(Conn::connect(server.local_addr()).request(get("/")).status, 200);

    let shutdown = shutdown_in_background(server);
    assert!(idle.wait_closed(Duration::from_secs(3)).is_some(), "idle keep-alive connection not closed");
    assert!(fresh.wait_closed(Duration::from_secs(3)).is_some(), "connection that sent nothing not closed");
    let took = shutdown.join().expect("shutdown thread");
    assert!(took < Duration::from_secs(5), "shutdown waited {took:?} for idle connections");
}

#[test]
fn dropping_the_server_shuts_it_down() {
    let server = start(test_limits(), || service_fn(hello));
    let addr = server.local_addr();
    assert_eq!(Conn::connect(addr).request(get("/")).status, 200);
    drop(server);
    assert!(Conn::open(addr).is_err(), "listener still accepts after drop");
}
