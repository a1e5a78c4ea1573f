//! The service in process on 127.0.0.1: the exact 1,024-byte answer, the token, the delay (honoured, and not
//! serializing concurrent requests), the counts /stats gives, and the routes the other servers share.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use testkit::http::{Conn, Response, get, request};
use upstream::{DEFAULT_TOKEN, DOCUMENT_BYTES, Settings};

testkit::in_process_server!(Upstream, Settings, upstream::start);

fn start(delay: Duration, token: &str) -> Upstream {
    let settings = Settings { addr: "127.0.0.1:0".parse().expect("addr"), delay, token: token.to_string() };
    let limits = serve::Limits { workers: 1, shutdown_timeout: Duration::from_secs(1), ..Default::default() };
    Upstream::start_with_limits(settings, limits)
}

fn stats(addr: SocketAddr) -> (u64, u64) {
    let res = get(addr, "/stats");
    assert_eq!((res.status, res.header("content-type")), (200, Some("application/json")), "{}", res.text());
    let value = res.json();
    let count = |field: &str| value[field].as_u64().unwrap_or_else(|| panic!("{field} in {value}"));
    (count("requests"), count("connections"))
}

fn assert_document(res: &Response, token: &str) {
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(res.header("content-type"), Some("application/json"));
    assert_eq!(res.body.len(), DOCUMENT_BYTES);
    assert_eq!(res.header("content-length"), Some("1024"));
    let value = res.json();
    assert_eq!(value["service"], "upstream");
    assert_eq!(value["token"], token);
    let padding = value["padding"].as_str().expect("padding is a string");
    assert!(!padding.is_empty() && padding.bytes().all(|b| b == b'x'), "{padding}");
    assert_eq!(value.as_object().map(|o| o.len()), Some(3), "{value}");
}

#[test]
fn answers_exactly_1024_bytes_with_its_token() {
    for token in [DEFAULT_TOKEN, "a", &"Zz_-9".repeat(12)] {
        let server = start(Duration::ZERO, token);
        assert_document(&server.get("/upstream"), token);
        assert_document(&server.get("/upstream?x=1"), token);
        let head = request(server.addr, "HEAD", "/upstream", &[], None);
        assert_eq!((head.status, head.header("content-length")), (200, Some("1024")));
    }
}

#[test]
fn routes_and_methods_like_the_other_servers() {
    let server = start(Duration::ZERO, DEFAULT_TOKEN);
    let health = server.get("/healthz");
    assert_eq!((health.status, health.text().as_str()), (200, r#"{"status":"ok"}"#));
    for path in ["/", "/upstream/", "/nope", "/stats/x"] {
        let res = server.get(path);
        assert_eq!((res.status, res.text().as_str()), (404, r#"{"error":"not found"}"#), "{path}");
    }
    for path in ["/upstream", "/stats", "/healthz"] {
        let res = request(server.addr, "POST", path, &[], Some(b"{}"));
        assert_eq!((res.status, res.text().as_str()), (405, r#"{"error":"method not allowed"}"#), "{path}");
        assert_eq!(res.header("allow"), Some("GET, HEAD"), "{path}");
    }
    // Nothing above was a served /upstream request.
    assert_eq!(stats(server.addr).0, 0);
}

#[test]
fn the_delay_is_honoured_and_requests_wait_side_by_side() {
    let delay = Duration::from_millis(100);
    let server = start(delay, DEFAULT_TOKEN);
    let started = Instant::now();
    assert_document(&server.get("/upstream"), DEFAULT_TOKEN);
    let one = started.elapsed();
    assert!(one >= delay, "answered after {one:?}, before the {delay:?} delay");
    // /stats and /healthz are not delayed.
    let started = Instant::now();
    stats(server.addr);
    assert!(started.elapsed() < delay, "/stats waited {:?}", started.elapsed());

    // 20 at once on one worker: one delay, not twenty (2 s) in a row.
    let addr = server.addr;
    let started = Instant::now();
    let clients: Vec<_> = (0..20).map(|_| std::thread::spawn(move || get(addr, "/upstream"))).collect();
    for client in clients {
        assert_document(&client.join().expect("client thread"), DEFAULT_TOKEN);
    }
    let all = started.elapsed();
    assert!(all >= delay, "20 answered after {all:?}");
    assert!(all < Duration::from_millis(1000), "20 concurrent requests took {all:?}: the delay serializes them");
    assert_eq!(stats(addr).0, 21);
}

#[test]
fn stats_count_requests_and_connections() {
    let server = start(Duration::ZERO, DEFAULT_TOKEN);
    assert_eq!(stats(server.addr), (0, 1), "the /stats request's own connection");

    // 50 requests on one keep-alive connection: 50 requests, one more connection.
    let mut conn = Conn::open(server.addr).expect("connect");
    for _ in 0..50 {
        let res = conn.request("GET /upstream HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(res.body.len(), DOCUMENT_BYTES);
    }
    // The counts are read on another connection while this one stays open.
    assert_eq!(stats(server.addr), (50, 3));
    drop(conn);

    // A connection each: each counts, and so does one that never sends a byte.
    for _ in 0..10 {
        assert_document(&server.get("/upstream"), DEFAULT_TOKEN);
    }
    let silent = std::net::TcpStream::connect(server.addr).expect("connect");
    let counted = testkit::wait::eventually(Duration::from_secs(5), || {
        let now = stats(server.addr);
        // 3 before, 10 requests, the silent one, and this /stats request's own.
        let expected = 3 + 10 + 1 + 1;
        (now.1 >= expected).then_some(now)
    });
    drop(silent);
    // The wait may have made more than one /stats connection.
    let (requests, connections) = counted.expect("the silent connection is counted");
    assert_eq!(requests, 60);
    assert!(connections >= 15, "{connections}");
}
