//! HTTP/2 on the same workers: h2c by prior knowledge beside HTTP/1.1 on one port, ALPN h2 over TLS, HTTP/2
//! off, the limits a connection advertises and enforces, and the deadlines that end a connection with a GOAWAY
//! (idle, a client that holds its window at zero, the server's shutdown). Requests go through hyper's client
//! (testkit::h2); where a test needs to control frames (an idle connection, a zero window, a preface in
//! pieces), it writes them itself.

mod common;

use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{hello, start, test_limits};
use http::StatusCode;
use serve::{Http2Limits, Limits, Request, TlsSettings};
use testkit::h2::{Req, same_over_h2, send, send_tls};
use testkit::tls::Client;
use tower::service_fn;

use loadgen::h2_frame::{self as h2, DATA, GOAWAY, HEADERS, PREFACE, RST_STREAM, SETTINGS};

/// One frame as read: type, flags, stream and payload.
#[derive(Debug)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// The client's preface and a SETTINGS frame with `settings` (identifier, value).
fn client_start(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    h2::write_settings(&mut out, settings);
    out
}

/// HEADERS for `GET /` on stream 1, ending the stream: the static table's :method GET, :scheme http, :path /,
/// and :authority `test` as a literal (RFC 7541 appendix A).
fn get_root(stream: u32) -> Vec<u8> {
    let block = [&[0x82, 0x86, 0x84, 0x41, 0x04][..], b"test"].concat();
    let mut out = Vec::new();
    h2::write_headers(&mut out, stream, h2::END_HEADERS | h2::END_STREAM, &block);
    out
}

/// Reads one frame; None at the end of the stream (or a read error).
fn read_frame(stream: &mut TcpStream) -> Option<Frame> {
    let mut head = [0u8; h2::HEADER_LEN];
    stream.read_exact(&mut head).ok()?;
    let h = h2::FrameHeader::parse(&head)?;
    let mut payload = vec![0u8; h.length as usize];
    stream.read_exact(&mut payload).ok()?;
    Some(Frame { kind: h.kind, flags: h.flags, stream: h.stream, payload })
}

/// Every frame until the server closes the connection (bounded by the socket's read timeout).
fn frames_until_close(stream: &mut TcpStream) -> Vec<Frame> {
    std::iter::from_fn(|| read_frame(stream)).collect()
}

fn raw(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(15))).expect("read timeout");
    stream
}

/// The settings (identifier → value) of the server's first SETTINGS frame.
fn server_settings(stream: &mut TcpStream) -> Vec<(u16, u32)> {
    let first = read_frame(stream).expect("the server's SETTINGS");
    assert_eq!((first.kind, first.flags, first.stream), (SETTINGS, 0, 0), "the server's preface is a SETTINGS frame");
    first
        .payload
        .chunks_exact(6)
        .map(|c| (u16::from_be_bytes([c[0], c[1]]), u32::from_be_bytes([c[2], c[3], c[4], c[5]])))
        .collect()
}

fn goaway_code(frames: &[Frame]) -> Option<u32> {
    frames
        .iter()
        .rev()
        .find(|f| f.kind == GOAWAY)
        .map(|f| u32::from_be_bytes([f.payload[4], f.payload[5], f.payload[6], f.payload[7]]))
}

#[test]
fn h2c_by_prior_knowledge_and_http11_share_one_port() {
    let server = start(test_limits(), || service_fn(hello));
    let addr = server.local_addr();
    let requests = [Req::get("/a"), Req::get("/b?x=1"), Req::get("/c")];
    let exchange = send(addr, &requests).expect("h2c exchange");
    for (req, res) in requests.iter().zip(&exchange.responses) {
        assert_eq!(res.status, 200);
        let path = req.target.split('?').next().unwrap_or_default();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&res.body).expect("json"),
            serde_json::json!({ "path": path })
        );
    }
    same_over_h2(addr, &requests, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(testkit::http::get(addr, "/h1").status, 200, "HTTP/1.1 still served on the port");
}

#[test]
fn head_and_empty_answers_carry_the_headers_of_http11_and_no_body() {
    // A HEAD answer's body is dropped (RFC 9113 §8.1.1) with its content-length kept, and an empty 200 says
    // content-length 0, as hyper's HTTP/1.1 does (which sends none for a HEAD whose body is empty); hyper's
    // HTTP/2 alone would send the body and omit the length.
    let server = start(test_limits(), || {
        service_fn(|req: Request| async move {
            let body =
                if req.uri().path() == "/empty" { serve::Body::Empty } else { serve::Body::from("twelve bytes") };
            Ok::<_, Infallible>(http::Response::new(body))
        })
    });
    let requests = [
        Req { method: "HEAD", target: "/full", headers: &[], body: None },
        Req::get("/full"),
        Req::get("/empty"),
        Req { method: "HEAD", target: "/empty", headers: &[], body: None },
    ];
    same_over_h2(server.local_addr(), &requests, &[]).unwrap_or_else(|e| panic!("{e}"));
    let exchange = send(server.local_addr(), &requests).expect("h2c exchange");
    let seen: Vec<(Option<&str>, usize)> =
        exchange.responses.iter().map(|r| (r.header("content-length"), r.body.len())).collect();
    assert_eq!(seen, [(Some("12"), 0), (Some("12"), 12), (Some("0"), 0), (None, 0)]);
}

#[test]
fn a_preface_arriving_in_pieces_is_still_http2() {
    let server = start(test_limits(), || service_fn(hello));
    let mut stream = raw(server.local_addr());
    let start = client_start(&[]);
    stream.write_all(&start[..5]).expect("first piece");
    std::thread::sleep(Duration::from_millis(200));
    stream.write_all(&start[5..20]).expect("second piece");
    std::thread::sleep(Duration::from_millis(200));
    stream.write_all(&start[20..]).expect("the rest");
    server_settings(&mut stream);
}

#[test]
fn the_settings_advertise_the_limits() {
    let limits = Limits {
        http2: Some(Http2Limits { max_streams: 7, stream_window: 100_000, ..Http2Limits::DEFAULT }),
        ..test_limits()
    };
    let server = start(limits, || service_fn(hello));
    let mut stream = raw(server.local_addr());
    stream.write_all(&client_start(&[])).expect("preface");
    let settings = server_settings(&mut stream);
    // MAX_CONCURRENT_STREAMS (3), INITIAL_WINDOW_SIZE (4), MAX_HEADER_LIST_SIZE (6): the test limits' 8192 bytes.
    for (id, value) in [(3u16, 7u32), (4, 100_000), (6, 8192)] {
        assert!(settings.contains(&(id, value)), "setting {id} = {value} in {settings:?}");
    }
}

#[test]
fn streams_past_the_limit_are_refused_and_the_rest_answered() {
    // Six requests at once, before the client could have read the server's SETTINGS: the first four are
    // served, the fifth and sixth refused with RST_STREAM REFUSED_STREAM (the client may retry them), and the
    // connection stays up.
    let limits = Limits { http2: Some(Http2Limits { max_streams: 4, ..Http2Limits::DEFAULT }), ..test_limits() };
    let server = start(limits, || service_fn(hello));
    let mut stream = raw(server.local_addr());
    let requests: Vec<u8> = (0..6).flat_map(|i| get_root(1 + 2 * i)).collect();
    stream.write_all(&[client_start(&[]), requests].concat()).expect("preface and six requests");
    let (mut answered, mut refused) = (Vec::new(), Vec::new());
    while answered.len() + refused.len() < 6 {
        let frame = read_frame(&mut stream).expect("a frame");
        match frame.kind {
            HEADERS => answered.push(frame.stream),
            RST_STREAM => {
                assert_eq!(frame.payload, 7u32.to_be_bytes(), "REFUSED_STREAM");
                refused.push(frame.stream);
            }
            _ => {}
        }
    }
    answered.sort_unstable();
    assert_eq!((answered, refused), (vec![1, 3, 5, 7], vec![9, 11]));
    stream.write_all(&get_root(13)).expect("a request after the refusals");
    let next = std::iter::from_fn(|| read_frame(&mut stream)).find(|f| f.kind == HEADERS).expect("an answer");
    assert_eq!(next.stream, 13);
}

#[test]
fn body_and_header_limits_hold_over_http2() {
    let server = start(test_limits(), || service_fn(echo));
    let addr = server.local_addr();
    let small = vec![b'a'; 1000];
    let large = vec![b'a'; 1025];
    let big_header = "b".repeat(9000);
    let headers = [("x-big", big_header.as_str())];
    let requests = [
        Req { method: "POST", target: "/echo", headers: &[], body: Some(&small) },
        Req { method: "POST", target: "/echo", headers: &[], body: Some(&large) },
        Req { method: "GET", target: "/big", headers: &headers, body: None },
    ];
    let exchange = send(addr, &requests).expect("h2c exchange");
    let statuses: Vec<u16> = exchange.responses.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 413, 431], "echo, a body past the 1024-byte limit, a header list past 8192 bytes");
    assert_eq!(exchange.responses[0].body, small);
}

#[test]
fn tls_negotiates_h2_by_alpn_and_http2_off_refuses_a_client_offering_only_h2() {
    let dir = tempfile::tempdir().expect("dir");
    let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
    let files = bundle.write(dir.path()).expect("write the certificate files");
    let tls = TlsSettings { cert: files.chain, key: files.key, tickets: true, session_cache: true };
    let client = Client::new(&bundle.ca_pem);

    let on = start(Limits { tls: Some(tls.clone()), ..test_limits() }, || service_fn(hello));
    let exchange = send_tls(on.local_addr(), &client, &[Req::get("/tls")]).expect("h2 over TLS");
    assert_eq!(exchange.alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!(exchange.responses[0].status, 200);
    let mut h1 = testkit::http::Conn::open_tls(on.local_addr(), &client).expect("an http/1.1-only client");
    assert_eq!(h1.tls().and_then(|t| t.alpn_protocol()), Some(&b"http/1.1"[..]));
    assert_eq!(h1.request(common::get("/h1")).status, 200);

    let off = start(Limits { tls: Some(tls), http2: None, ..test_limits() }, || service_fn(hello));
    let refused = send_tls(off.local_addr(), &client, &[Req::get("/")]);
    assert!(
        refused.is_err_and(|e| e.to_string().contains("http/1.1")),
        "h2 offered beside http/1.1: http/1.1 selected"
    );
    let only_h2 = client.config_with_alpn(&[b"h2"]);
    let mut conn = rustls::ClientConnection::new(only_h2, "localhost".try_into().expect("name")).expect("client");
    let mut stream = raw(off.local_addr());
    let outcome = loop {
        if let Err(e) = conn.complete_io(&mut stream) {
            break e.to_string();
        }
        if !conn.is_handshaking() {
            break "handshake completed".to_string();
        }
    };
    assert!(outcome.contains("NoApplicationProtocol"), "a client offering only h2 gets an alert: {outcome}");
}

#[test]
fn http2_off_closes_on_the_preface() {
    // hyper's HTTP/1.1 reads the preface as a request of version HTTP/2.0 and closes without answering: no
    // SETTINGS frame, no HTTP/1.1 answer that an HTTP/2 client would misread.
    let server = start(Limits { http2: None, ..test_limits() }, || service_fn(hello));
    let mut stream = raw(server.local_addr());
    stream.write_all(&client_start(&[])).expect("preface");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    assert!(answer.is_empty(), "closed without a byte: {:?}", String::from_utf8_lossy(&answer));
}

#[test]
fn an_idle_connection_gets_a_goaway_then_closes() {
    let server = start(test_limits(), || service_fn(hello));
    let mut stream = raw(server.local_addr());
    stream.write_all(&client_start(&[])).expect("preface");
    let started = Instant::now();
    let frames = frames_until_close(&mut stream);
    let took = started.elapsed();
    assert_eq!(goaway_code(&frames), Some(0), "GOAWAY NO_ERROR in {frames:?}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "closed after {took:?} (keep-alive 1 s)"
    );
}

#[test]
fn a_client_holding_its_window_at_zero_is_closed() {
    // The answer needs DATA, which a zero window never lets through: the response waits, nothing is written,
    // and after the io timeout (3 s here) the connection gets a GOAWAY and is closed.
    let server = start(test_limits(), || service_fn(hello));
    let mut stream = raw(server.local_addr());
    stream.write_all(&[client_start(&[(4, 0)]), get_root(1)].concat()).expect("preface and a request");
    let started = Instant::now();
    let frames = frames_until_close(&mut stream);
    let took = started.elapsed();
    assert!(frames.iter().any(|f| f.kind == HEADERS && f.stream == 1), "the response head went out: {frames:?}");
    assert!(!frames.iter().any(|f| f.kind == DATA && !f.payload.is_empty()), "no body byte past a zero window");
    assert_eq!(goaway_code(&frames), Some(0), "GOAWAY in {frames:?}");
    assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(8), "closed after {took:?} (io timeout 3 s)");
}

#[test]
fn shutdown_sends_goaway_and_finishes_open_streams() {
    let (started_tx, started) = mpsc::sync_channel::<()>(16);
    let server = start(test_limits(), move || {
        let started_tx = started_tx.clone();
        service_fn(move |_req: Request| {
            let _ = started_tx.try_send(());
            async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok::<_, Infallible>(serve::json(StatusCode::OK, &serde_json::json!({ "done": true })))
            }
        })
    });
    let addr = server.local_addr();
    let client = std::thread::spawn(move || send(addr, &[Req::get("/slow"), Req::get("/slow2")]));
    started.recv_timeout(Duration::from_secs(5)).expect("a handler started");
    let began = Instant::now();
    server.shutdown();
    assert!(began.elapsed() < Duration::from_secs(2), "graceful shutdown took {:?}", began.elapsed());
    let exchange = client.join().expect("client thread").expect("both streams answered");
    assert!(exchange.responses.iter().all(|r| r.status == 200 && r.body == br#"{"done":true}"#));
}

/// Echoes the request body (read within the body limit; past it, the 413 the body error turns into).
async fn echo(req: Request) -> Result<serve::Response, Infallible> {
    match serve::read_body(req.into_body(), 1024).await {
        Ok(body) => Ok(http::Response::new(serve::Body::from(body))),
        Err(e) => Ok(e.into_response()),
    }
}
