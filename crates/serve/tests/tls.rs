//! HTTPS on the same workers: the handshake, what it negotiates, resumption, the deadlines a handshake is held
//! to, bytes that are not TLS, and a certificate replaced while connections are open. Every test makes its
//! own CA and server certificate (crates/certs) and speaks through testkit's rustls client.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{get, hello, start, test_limits};
use serve::{Limits, Server, TlsSettings};
use testkit::http::Conn;
use testkit::tls::Client;
use tower::service_fn;

/// Generous bound for "the server closed it in time": the header timeout here is 1 s.
const CLOSE_BOUND: Duration = Duration::from_secs(3);

fn settings(dir: &Path, bundle: &certs::Bundle) -> TlsSettings {
    let files = bundle.write(dir).expect("write the certificate files");
    TlsSettings { cert: files.chain, key: files.key, tickets: true, session_cache: true }
}

fn tls_server(tls: TlsSettings) -> Server {
    start(Limits { tls: Some(tls), ..test_limits() }, || service_fn(hello))
}

fn https(server: &Server, client: &Client) -> Conn {
    Conn::open_tls(server.local_addr(), client).expect("TLS handshake")
}

#[test]
fn https_serves_the_same_answers_with_tls13_and_alpn_http11() {
    let dir = tempfile::tempdir().expect("dir");
    let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
    let server = tls_server(settings(dir.path(), &bundle));
    let mut conn = https(&server, &Client::new(&bundle.ca_pem));
    let tls = conn.tls().expect("a TLS connection");
    assert_eq!(tls.protocol_version(), Some(rustls::ProtocolVersion::TLSv1_3));
    assert_eq!(tls.alpn_protocol(), Some(&b"http/1.1"[..]));
    for path in ["/a", "/b"] {
        let res = conn.request(get(path));
        assert_eq!(res.status, 200, "keep-alive request {path}");
        assert_eq!(res.json(), serde_json::json!({ "path": path }));
    }
    // Limits hold over TLS as over TCP: an oversized head gets 431.
    let big = format!("GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n", "a".repeat(9000));
    assert_eq!(conn.request(big).status, 431);
}

#[test]
fn tls12_is_served_too() {
    let dir = tempfile::tempdir().expect("dir");
    let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
    let server = tls_server(settings(dir.path(), &bundle));
    let mut conn = https(&server, &Client::tls12(&bundle.ca_pem));
    assert_eq!(conn.tls().and_then(|t| t.protocol_version()), Some(rustls::ProtocolVersion::TLSv1_2));
    assert_eq!(conn.request(get("/x")).status, 200);
}

/// The kind of handshake the second connection of one client made, with 1.3 and 1.2.
fn second_handshake(tls: TlsSettings, ca: &str) -> Vec<rustls::HandshakeKind> {
    let server = tls_server(tls);
    [Client::new(ca), Client::tls12(ca)]
        .iter()
        .map(|client| {
            let mut first = https(&server, client);
            // TLS 1.3 tickets arrive after the handshake: read a response so the client has taken them.
            assert_eq!(first.request(get("/")).status, 200);
            let second = https(&server, client);
            second.tls().and_then(|t| t.handshake_kind()).expect("handshake kind")
        })
        .collect()
}

#[test]
fn sessions_resume_by_ticket_or_by_cache_and_not_when_both_are_off() {
    use rustls::HandshakeKind::{Full, Resumed};
    let dir = tempfile::tempdir().expect("dir");
    let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
    let both = settings(dir.path(), &bundle);
    assert_eq!(second_handshake(both.clone(), &bundle.ca_pem), [Resumed, Resumed], "tickets and cache");
    let tickets_only = TlsSettings { session_cache: false, ..both.clone() };
    assert_eq!(second_handshake(tickets_only, &bundle.ca_pem), [Resumed, Resumed], "tickets alone");
    let cache_only = TlsSettings { tickets: false, ..both.clone() };
    assert_eq!(second_handshake(cache_only, &bundle.ca_pem), [Resumed, Resumed], "cache alone");
    let neither = TlsSettings { tickets: false, session_cache: false, ..both };
    assert_eq!(second_handshake(neither, &bundle.ca_pem), [Full, Full], "no resumption");
}

#[test]
fn plaintext_http_on_the_tls_port_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("dir");
    let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
    let server = tls_server(settings(dir.path(), &bundle));
    let mut conn = Conn::connect(server.local_addr());
    conn.send(get("/"));
    let start = Instant::now();
    let answer = conn.read_until_close();
    assert!(start.elapsed() < Duration::from_secs(1), "closed at once, not at a deadline: {:?}", start.elapsed());
    assert!(!answer.starts_with(b"HTTP/"), "no HTTP answer: {:?}", String::from_utf8_lossy(&answer));
    // The server keeps serving.
    assert_eq!(https(&server, &Client::new(&bundle.ca_pem)).request(get("/")).status, 200);
}

#[test]
fn garbage_and_a_client_gone_mid_handshake_leave_the_server_answering() {
    let dir = tempfile::tempdir().expect("dir");
    let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
    let server = tls_server(settings(dir.path(), &bundle));
    let mut garbage = Conn::connect(server.local_addr());
    garbage.send([0xffu8; 64]);
    assert!(garbage.wait_closed(CLOSE_BOUND).is_some(), "garbage gets a close");
    // A record header announcing a ClientHello, then truncation and a close.
    let mut gone = TcpStream::connect(server.local_addr()).expect("connect");
    gone.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).expect("write");
    drop(gone);
    assert_eq!(https(&server, &Client::new(&bundle.ca_pem)).request(get("/")).status, 200);
}

#[test]
fn a_handshake_trickled_or_stalled_is_cut_at_the_header_timeout() {
    let dir = tempfile::tempdir().expect("dir");
    let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
    let server = tls_server(settings(dir.path(), &bundle));
    // The first bytes of a real ClientHello, then one more every 200 ms: data moves, the handshake never ends.
    let mut hello_bytes = Vec::new();
    let mut client = Client::new(&bundle.ca_pem).connection().expect("client");
    client.write_tls(&mut hello_bytes).expect("ClientHello");
    let mut trickle = Conn::connect(server.local_addr());
    let start = Instant::now();
    let mut closed_at = None;
    for byte in &hello_bytes[..hello_bytes.len() - 1] {
        if trickle.write(std::slice::from_ref(byte)).is_err() {
            closed_at = Some(start.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        if start.elapsed() > CLOSE_BOUND * 2 {
            break;
        }
    }
    let closed_at = closed_at.or_else(|| trickle.wait_closed(CLOSE_BOUND).map(|_| start.elapsed()));
    let closed_at = closed_at.expect("a trickled handshake is closed");
    assert!(closed_at < CLOSE_BOUND, "closed at {closed_at:?}, the header timeout is 1 s");
    // One that sends half a ClientHello and stops.
    let mut stalled = Conn::connect(server.local_addr());
    stalled.send(&hello_bytes[..hello_bytes.len() / 2]);
    assert!(stalled.wait_closed(CLOSE_BOUND).is_some(), "a stalled handshake is closed");
}

#[test]
fn a_thousand_unfinished_handshakes_do_not_stop_the_server() {
    let dir = tempfile::tempdir().expect("dir");
    let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
    let limits =
        Limits { header_timeout: Duration::from_secs(30), tls: Some(settings(dir.path(), &bundle)), ..test_limits() };
    let server = start(limits, || service_fn(hello));
    let mut client = Client::new(&bundle.ca_pem).connection().expect("client");
    let mut hello_bytes = Vec::new();
    client.write_tls(&mut hello_bytes).expect("ClientHello");
    let half = &hello_bytes[..hello_bytes.len() / 2];
    let pending: Vec<TcpStream> = (0..1000)
        .map(|_| {
            let mut s = TcpStream::connect(server.local_addr()).expect("connect");
            s.write_all(half).expect("half a ClientHello");
            s
        })
        .collect();
    let start = Instant::now();
    let mut conn = https(&server, &Client::new(&bundle.ca_pem));
    assert_eq!(conn.request(get("/still")).status, 200);
    assert!(start.elapsed() < Duration::from_secs(2), "answered in {:?} with 1000 handshakes pending", start.elapsed());
    drop(pending);
}

#[test]
fn a_new_certificate_serves_new_connections_and_open_ones_keep_going() {
    let dir = tempfile::tempdir().expect("dir");
    let old = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("old");
    let server = tls_server(settings(dir.path(), &old));
    let mut open = https(&server, &Client::new(&old.ca_pem));
    assert_eq!(open.request(get("/before")).status, 200);

    // A key from another pair: refused, and the old certificate stays.
    let new = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("new");
    std::fs::write(dir.path().join("cert.pem"), &new.chain_pem).expect("write the new chain only");
    let err = server.reload_tls().expect_err("a mismatched key is refused");
    assert!(err.to_string().contains("does not match"), "{err}");
    assert!(Conn::open_tls(server.local_addr(), &Client::new(&old.ca_pem)).is_ok(), "old certificate still served");

    new.write(dir.path()).expect("write the new pair");
    server.reload_tls().expect("reload");
    assert!(Conn::open_tls(server.local_addr(), &Client::new(&old.ca_pem)).is_err(), "the old CA no longer verifies");
    assert_eq!(https(&server, &Client::new(&new.ca_pem)).request(get("/after")).status, 200);
    assert_eq!(open.request(get("/still-open")).status, 200, "a connection from before the reload keeps going");
}

#[test]
fn bad_files_fail_start_naming_the_file() {
    let dir = tempfile::tempdir().expect("dir");
    let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
    let good = settings(dir.path(), &bundle);
    let failure = |tls: TlsSettings| {
        let listeners = serve::bind_reuseport("127.0.0.1:0".parse().expect("addr"), 1).expect("bind");
        let limits = Limits { tls: Some(tls), ..test_limits() };
        match Server::start(listeners, limits, || service_fn(hello)) {
            Ok(_) => panic!("started with bad TLS files"),
            Err(e) => e.to_string(),
        }
    };
    let missing = dir.path().join("missing.pem");
    let message = failure(TlsSettings { key: missing.clone(), ..good.clone() });
    assert!(message.contains(&missing.display().to_string()) && message.contains("cannot read"), "{message}");
    // The certificate given as the key, and the key as the certificate.
    let swapped = TlsSettings { cert: good.key.clone(), key: good.cert.clone(), ..good.clone() };
    let message = failure(swapped);
    assert!(message.contains("no CERTIFICATE") || message.contains("no PRIVATE KEY"), "{message}");
    let other = certs::Bundle::generate(&["localhost"]).expect("other");
    let other_dir = tempfile::tempdir().expect("dir");
    let other_key = settings(other_dir.path(), &other).key;
    let message = failure(TlsSettings { key: other_key, ..good });
    assert!(message.contains("does not match"), "{message}");
}
