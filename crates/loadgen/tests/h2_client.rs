//! loadgen's sans-I/O HTTP/2 client (`loadgen::h2`) against a real HTTP/2 server: hyper's (the h2 crate) on a
//! tokio runtime in a background thread, listening on 127.0.0.1:0 (h2c by prior knowledge). The client side is
//! a blocking std `TcpStream` driven the way the worker drives the codec: write what it queued, read, hand the
//! bytes over, keep the unconsumed tail.
//!
//! Routes: `/size/N` (N bytes, a pattern the test checks), `/echo` (the request body's length and sum),
//! `/slow/MS` (answers after MS ms), `/trailers` (a body and a trailer), `/nobody` (204), `/fail` (the service
//! errs: hyper resets the stream). HEAD gets the head of `/size/N` (its content-length) without the body.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use loadgen::h2::{Client, Config, Event, MAX_STREAM_ID, ServerSettings};
use loadgen::h2_frame::{INTERNAL_ERROR, NO_ERROR, REFUSED_STREAM};
use tokio::sync::Notify;

/// Longest any exchange may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(20);

/// The byte at offset `i` of a `/size/N` body: not periodic in any frame size, so a lost or repeated frame
/// shows.
fn pattern(i: usize) -> u8 {
    (i % 251) as u8
}

/// How the test server's HTTP/2 side is configured (hyper's defaults where None).
#[derive(Debug, Clone, Copy, Default)]
struct Limits {
    max_concurrent_streams: Option<u32>,
    stream_window: Option<u32>,
}

/// hyper's HTTP/2 server in a background thread. Dropping it stops the runtime (and every connection).
struct Server {
    addr: SocketAddr,
    /// Notified: every connection shuts down gracefully (GOAWAY, then the streams in flight finish).
    goaway: Arc<Notify>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(limits: Limits) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("local addr");
        listener.set_nonblocking(true).expect("nonblocking");
        let goaway = Arc::new(Notify::new());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let notify = goaway.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                let accept = async {
                    loop {
                        let Ok((socket, _)) = listener.accept().await else { continue };
                        let notify = notify.clone();
                        tokio::spawn(serve(socket, limits, notify));
                    }
                };
                tokio::select! {
                    () = accept => {}
                    _ = stopped => {}
                }
            });
        });
        Server { addr, goaway, stop: Some(stop), thread: Some(thread) }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(socket: tokio::net::TcpStream, limits: Limits, goaway: Arc<Notify>) {
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder.max_concurrent_streams(limits.max_concurrent_streams);
    if let Some(window) = limits.stream_window {
        builder.adaptive_window(false).initial_stream_window_size(window).initial_connection_window_size(window);
    }
    let conn = builder.serve_connection(TokioIo::new(socket), hyper::service::service_fn(route));
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = goaway.notified() => conn.as_mut().graceful_shutdown(),
    }
    let _ = conn.await;
}

type Body = BoxBody<Bytes, Infallible>;

#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the test's /fail route")
    }
}

impl std::error::Error for Refused {}

async fn route(request: Request<Incoming>) -> Result<Response<Body>, Refused> {
    let path = request.uri().path().to_string();
    let head = request.method() == hyper::Method::HEAD;
    let full = |bytes: Vec<u8>| Full::new(Bytes::from(bytes)).boxed();
    let response = |status: u16, body: Body| Response::builder().status(status).body(body).expect("a response");
    if let Some(n) = path.strip_prefix("/size/").and_then(|n| n.parse::<usize>().ok()) {
        if head {
            let empty = full(Vec::new());
            return Ok(Response::builder().header("content-length", n).body(empty).expect("a response"));
        }
        return Ok(response(200, full((0..n).map(pattern).collect())));
    }
    if let Some(ms) = path.strip_prefix("/slow/").and_then(|n| n.parse::<u64>().ok()) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        return Ok(response(200, full(b"slow".to_vec())));
    }
    match path.as_str() {
        "/echo" => {
            let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            let sum: u64 = body.iter().map(|&b| u64::from(b)).sum();
            Ok(response(200, full(format!("{} {sum}", body.len()).into_bytes())))
        }
        "/trailers" => {
            let mut trailers = hyper::HeaderMap::new();
            trailers.insert("x-checksum", hyper::header::HeaderValue::from_static("abc"));
            let body = Full::new(Bytes::from_static(b"abc")).with_trailers(async { Some(Ok(trailers)) }).boxed();
            Ok(response(200, body))
        }
        "/nobody" => Ok(response(204, full(Vec::new()))),
        "/fail" => Err(Refused),
        _ => Ok(response(404, full(Vec::new()))),
    }
}

/// An event, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Settings(ServerSettings),
    Head(u32, u16, Vec<(String, Vec<u8>)>),
    Data(u32, Vec<u8>),
    Done(u32, u16, u64),
    Reset(u32, u32),
    StreamError(u32, u32, &'static str),
    GoAway(u32, u32),
    Unprocessed(u32),
}

fn own(event: Event<'_>) -> Ev {
    match event {
        Event::Settings(s) => Ev::Settings(s),
        Event::Head { stream, status, headers } => {
            Ev::Head(stream, status, headers.iter().map(|h| (h.name.to_string(), h.value.to_vec())).collect())
        }
        Event::Data { stream, bytes } => Ev::Data(stream, bytes.to_vec()),
        Event::Done { stream, status, body_len } => Ev::Done(stream, status, body_len),
        Event::Reset { stream, code } => Ev::Reset(stream, code),
        Event::StreamError { stream, code, reason } => Ev::StreamError(stream, code, reason),
        Event::GoAway { last_stream, code, .. } => Ev::GoAway(last_stream, code),
        Event::Unprocessed { stream } => Ev::Unprocessed(stream),
    }
}

/// One stream's response as the events told it.
#[derive(Debug, Default)]
struct Answer {
    status: u16,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    done: Option<(u16, u64)>,
    reset: Option<u32>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
    }
}

/// The client end: a blocking socket and the codec, driven like the worker drives it.
struct Conn {
    socket: TcpStream,
    client: Client,
    out: Vec<u8>,
    /// Bytes read and not yet consumed (an incomplete frame).
    tail: Vec<u8>,
    events: Vec<Ev>,
}

impl Conn {
    fn connect(server: &Server, config: Config) -> Conn {
        let socket = TcpStream::connect(server.addr).expect("connect");
        socket.set_read_timeout(Some(Duration::from_millis(50))).expect("read timeout");
        socket.set_nodelay(true).expect("nodelay");
        let mut conn =
            Conn { socket, client: Client::new(config), out: Vec::new(), tail: Vec::new(), events: Vec::new() };
        conn.client.start(&mut conn.out);
        conn.flush();
        conn
    }

    fn flush(&mut self) {
        self.socket.write_all(&self.out).expect("write");
        self.out.clear();
    }

    fn open(&mut self, request: &[u8]) -> u32 {
        let id = self.client.open(&mut self.out, request).expect("the request opens a stream");
        self.flush();
        id
    }

    fn get(&mut self, path: &str) -> u32 {
        self.open(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
    }

    /// Reads and hands over what arrives until `done` holds (checked after every read); fails the test after
    /// DEADLINE or when the server closes first.
    fn run_until(&mut self, mut done: impl FnMut(&[Ev], &Client) -> bool) {
        let start = Instant::now();
        let mut buf = vec![0u8; 64 * 1024];
        while !done(&self.events, &self.client) {
            assert!(start.elapsed() < DEADLINE, "timed out; events so far: {:?}", summary(&self.events));
            let n = match self.socket.read(&mut buf) {
                Ok(0) => panic!("the server closed the connection; events: {:?}", summary(&self.events)),
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
                Err(e) => panic!("read: {e}"),
            };
            self.tail.extend_from_slice(&buf[..n]);
            let events = &mut self.events;
            let used = self.client.receive(&self.tail, &mut self.out, &mut |e| events.push(own(e))).expect("no error");
            self.tail.drain(..used);
            self.flush();
        }
    }

    /// Runs until every stream in `streams` has ended.
    fn finish(&mut self, streams: &[u32]) -> BTreeMap<u32, Answer> {
        let streams = streams.to_vec();
        self.run_until(|events, _| {
            let answers = answers(events);
            streams.iter().all(|s| answers.get(s).is_some_and(|a| a.done.is_some() || a.reset.is_some()))
        });
        answers(&self.events)
    }

    /// Reads until the server closes the connection (or DEADLINE): what a server does after its last GOAWAY.
    fn until_closed(&mut self) {
        let start = Instant::now();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            assert!(start.elapsed() < DEADLINE, "the server never closed; events: {:?}", summary(&self.events));
            match self.socket.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    self.tail.extend_from_slice(&buf[..n]);
                    let events = &mut self.events;
                    let used =
                        self.client.receive(&self.tail, &mut self.out, &mut |e| events.push(own(e))).expect("no error");
                    self.tail.drain(..used);
                    let _ = self.socket.write_all(&self.out);
                    self.out.clear();
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => return,
            }
        }
    }
}

fn answers(events: &[Ev]) -> BTreeMap<u32, Answer> {
    let mut answers: BTreeMap<u32, Answer> = BTreeMap::new();
    for event in events {
        match event {
            Ev::Head(s, status, headers) => {
                let a = answers.entry(*s).or_default();
                a.status = *status;
                a.headers = headers.clone();
            }
            Ev::Data(s, bytes) => answers.entry(*s).or_default().body.extend_from_slice(bytes),
            Ev::Done(s, status, len) => answers.entry(*s).or_default().done = Some((*status, *len)),
            Ev::Reset(s, code) => answers.entry(*s).or_default().reset = Some(*code),
            Ev::StreamError(s, _, reason) => panic!("stream {s}: the client found the response malformed: {reason}"),
            _ => {}
        }
    }
    answers
}

/// The events without their bodies, for failure messages.
fn summary(events: &[Ev]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            Ev::Data(s, bytes) => format!("Data({s}, {} bytes)", bytes.len()),
            Ev::Head(s, status, _) => format!("Head({s}, {status})"),
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn responses_of_every_size_arrive_whole() {
    let server = Server::start(Limits::default());
    let sizes = [0usize, 13, 100 * 1024, 1024 * 1024];
    // The default windows (2^30-1) and windows as small as HTTP/2's initial ones: then the server can only
    // send the 1 MiB body because the client's WINDOW_UPDATEs keep reopening them.
    for config in [Config::default(), Config { stream_window: 65_535, connection_window: 65_535, ..Config::default() }]
    {
        let mut conn = Conn::connect(&server, config.clone());
        let streams: Vec<u32> = sizes.iter().map(|n| conn.get(&format!("/size/{n}"))).collect();
        assert_eq!(streams, vec![1, 3, 5, 7], "stream ids are consecutive odd numbers");
        let answers = conn.finish(&streams);
        for (stream, n) in streams.iter().zip(sizes) {
            let a = &answers[stream];
            assert_eq!(a.done, Some((200, n as u64)), "stream {stream}, {n} bytes");
            assert_eq!(a.body.len(), n);
            assert!(a.body.iter().enumerate().all(|(i, &b)| b == pattern(i)), "{n} bytes: the body is not intact");
            // hyper names the length of a body it has whole, and sends an empty one as a bare END_STREAM.
            let length = (n > 0).then(|| n.to_string().into_bytes());
            assert_eq!(a.header("content-length"), length.as_deref(), "{n} bytes");
        }
        assert!(matches!(conn.events.first(), Some(Ev::Settings(_))), "the server's SETTINGS come first");
        let counts = *conn.client.counts();
        assert_eq!((counts.responses, counts.streams_opened, conn.client.in_flight()), (4, 4, 0));
        assert!(counts.data_bytes_received >= sizes.iter().sum::<usize>() as u64);
        if config.stream_window == 65_535 {
            // 1.1 MiB through 64 KiB windows: at least one update per 32 KiB on the connection.
            let least = sizes.iter().sum::<usize>() as u64 / 32_768;
            assert!(counts.window_updates_sent >= least, "{} WINDOW_UPDATEs sent", counts.window_updates_sent);
        } else {
            assert_eq!(counts.window_updates_sent, 1, "only the connection's initial raise");
        }
    }
}

#[test]
fn sixteen_concurrent_streams_on_one_connection() {
    let server = Server::start(Limits::default());
    let mut conn = Conn::connect(&server, Config::default());
    conn.run_until(|events, _| !events.is_empty());
    let started = Instant::now();
    let streams: Vec<u32> = (0..16).map(|_| conn.get("/slow/200")).collect();
    assert_eq!(conn.client.in_flight(), 16);
    assert!(conn.client.can_open(), "hyper allows 200 streams");
    let answers = conn.finish(&streams);
    assert!(streams.iter().all(|s| answers[s].done == Some((200, 4)) && answers[s].body == b"slow"));
    // Concurrent, not one after the other (which would take 16 × 200 ms = 3.2 s).
    assert!(started.elapsed() < Duration::from_millis(3000), "took {:?}", started.elapsed());
    assert_eq!(conn.client.in_flight(), 0);
}

#[test]
fn a_post_body_larger_than_the_servers_window_waits_for_its_updates() {
    let server = Server::start(Limits { stream_window: Some(65_535), ..Limits::default() });
    let mut conn = Conn::connect(&server, Config::default());
    conn.run_until(|events, _| !events.is_empty());
    assert_eq!(conn.client.server_settings().initial_window_size, 65_535);
    let body: Vec<u8> = (0..256 * 1024).map(pattern).collect();
    let sum: u64 = body.iter().map(|&b| u64::from(b)).sum();
    let mut request =
        format!("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    request.extend_from_slice(&body);
    let stream = conn.open(&request);
    let answers = conn.finish(&[stream]);
    assert_eq!(answers[&stream].status, 200);
    assert_eq!(String::from_utf8_lossy(&answers[&stream].body), format!("{} {sum}", body.len()));
    // 256 KiB through a 64 KiB window: the rest was sent as the server's WINDOW_UPDATEs arrived.
    assert!(conn.client.counts().window_updates_received >= 3, "{:?}", conn.client.counts());
}

#[test]
fn the_servers_max_concurrent_streams_caps_the_client() {
    let server = Server::start(Limits { max_concurrent_streams: Some(4), ..Limits::default() });
    let mut conn = Conn::connect(&server, Config::default());
    conn.run_until(|events, _| events.iter().any(|e| matches!(e, Ev::Settings(_))));
    let Some(Ev::Settings(settings)) = conn.events.first().cloned() else { panic!("no SETTINGS first") };
    assert_eq!(settings.max_concurrent_streams, Some(4));
    let mut streams = Vec::new();
    while conn.client.can_open() {
        streams.push(conn.get("/slow/100"));
        assert!(streams.len() <= 4, "the client went past the server's limit");
    }
    assert_eq!(streams.len(), 4);
    let answers = conn.finish(&streams[..1]);
    assert_eq!(answers[&1].done, Some((200, 4)));
    assert!(conn.client.can_open(), "a stream ended: room for one more");
    streams.push(conn.get("/slow/1"));
    let answers = conn.finish(&streams);
    assert!(answers.values().all(|a| a.done.is_some() && a.reset.is_none()));
}

#[test]
fn streams_beyond_the_limit_before_the_settings_are_refused() {
    let server = Server::start(Limits { max_concurrent_streams: Some(4), ..Limits::default() });
    let mut conn = Conn::connect(&server, Config::default());
    // Opened before the server's SETTINGS were read: the client does not know the limit yet.
    let streams: Vec<u32> = (0..8).map(|_| conn.get("/slow/300")).collect();
    let answers = conn.finish(&streams);
    let refused: Vec<u32> = streams.iter().copied().filter(|s| answers[s].reset == Some(REFUSED_STREAM)).collect();
    let done = streams.iter().filter(|s| answers[s].done == Some((200, 4))).count();
    assert_eq!((refused.len(), done), (4, 4), "{:?}", summary(&conn.events));
    assert_eq!(conn.client.counts().refused, 4);
    assert_eq!(conn.client.counts().resets_received, 4);
}

#[test]
fn a_service_error_resets_its_stream_only() {
    let server = Server::start(Limits::default());
    let mut conn = Conn::connect(&server, Config::default());
    let failing = conn.get("/fail");
    let fine = conn.get("/size/13");
    let answers = conn.finish(&[failing, fine]);
    assert_eq!(answers[&failing].reset, Some(INTERNAL_ERROR));
    assert_eq!(answers[&fine].done, Some((200, 13)));
    assert!(conn.client.can_open());
}

#[test]
fn a_graceful_shutdown_sends_goaway_and_finishes_the_streams_in_flight() {
    let server = Server::start(Limits::default());
    let mut conn = Conn::connect(&server, Config::default());
    let slow = conn.get("/slow/300");
    // The server has the stream before it is told to shut down.
    conn.run_until(|events, _| !events.is_empty());
    std::thread::sleep(Duration::from_millis(50));
    server.goaway.notify_waiters();
    conn.run_until(|events, _| events.iter().any(|e| matches!(e, Ev::GoAway(..))));
    assert!(!conn.client.can_open(), "no new streams after a GOAWAY");
    let answers = conn.finish(&[slow]);
    assert_eq!(answers[&slow].done, Some((200, 4)), "the stream in flight completes");
    conn.until_closed();
    let goaways: Vec<&Ev> = conn.events.iter().filter(|e| matches!(e, Ev::GoAway(..))).collect();
    // h2 first says "no new streams" with the largest id, then names the last stream it processed.
    assert_eq!(goaways, vec![&Ev::GoAway(MAX_STREAM_ID, NO_ERROR), &Ev::GoAway(slow, NO_ERROR)]);
    assert_eq!(conn.client.goaway(), Some((slow, NO_ERROR)));
    assert_eq!(conn.client.counts().goaways, 2);
    assert!(!conn.events.iter().any(|e| matches!(e, Ev::Unprocessed(_))));
}

#[test]
fn trailers_end_the_response() {
    let server = Server::start(Limits::default());
    let mut conn = Conn::connect(&server, Config::default());
    let stream = conn.get("/trailers");
    let answers = conn.finish(&[stream]);
    assert_eq!((answers[&stream].done, answers[&stream].body.as_slice()), (Some((200, 3)), &b"abc"[..]));
    assert_eq!(answers[&stream].header("x-checksum"), None, "trailers are not part of the head");
}

#[test]
fn head_and_204_have_no_body() {
    let server = Server::start(Limits::default());
    let mut conn = Conn::connect(&server, Config::default());
    let head = conn.open(b"HEAD /size/5000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let nobody = conn.get("/nobody");
    let answers = conn.finish(&[head, nobody]);
    assert_eq!(answers[&head].done, Some((200, 0)), "HEAD: content-length 5000 and no body is complete");
    assert_eq!(answers[&head].header("content-length"), Some(&b"5000"[..]));
    assert_eq!(answers[&nobody].done, Some((204, 0)));
    assert!(answers.values().all(|a| a.body.is_empty()));
}
