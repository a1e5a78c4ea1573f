//! flight-rs's whole request path: raw bytes from the fuzzer, written into hyper's HTTP/1.1 server over an
//! in-memory duplex pipe, served by the real middleware stack and router (static files and SPA fallback
//! included), with memory stores for the rate limiter, sessions and the response cache.
//!
//! Input: `[config] request bytes…`. `config` picks the profile (production for 0-1, default, bare), whether
//! X-Forwarded-For is trusted, a CORS allowlist with credentials instead of `*`, the request log, and whether
//! a dist folder is served. The rate limit is 4 requests per window so pipelined inputs reach the 429 path;
//! the app (and so its memory stores) is built afresh for every input, so an input's outcome does not depend
//! on the ones before it.
//!
//! The connection is set up as `serve` sets up its own (`serve` does not expose that code): the same hyper
//! builder options, and the same adapter in front of the app (413 with `Connection: close` for a declared
//! Content-Length over the limit, 501 for a Transfer-Encoding other than one `chunked`, `Limited` bodies, the
//! peer address in extensions when the app asks, the app called in place). `serve`'s socket deadlines are left
//! out: the client here half-closes once the server has read its input and answered what it started (see
//! [`settle`]), so a connection that still does not finish is a hang of hyper or the app, not an idle client.
//!
//! Invariants:
//! * no panic;
//! * the connection finishes within 5 s (no hang), and the client reads the response bytes to EOF;
//! * the app never answers 5xx (every layer maps bad input to 4xx; with memory stores nothing is down);
//! * the bytes on the wire are well-framed HTTP/1.1 responses (loadgen's parser reads them without error),
//!   one per request the app answered, with the statuses the app returned, plus possibly one final error
//!   response hyper writes itself (400, 414, 431), and nothing after it;
//! * nothing outside the dist folder is ever served: a file next to it (reachable only by a symlink inside it,
//!   or by traversal) holds a marker that must never appear in the output.
#![no_main]

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::LazyLock;
use std::task::{Context, Poll};
use std::time::Duration;

use flight::config::{Origins, Profile, Settings};
use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{HeaderValue, Method, StatusCode};
use http_body_util::Limited;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use libfuzzer_sys::fuzz_target;
use loadgen::http1::ResponseParser;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};
use tower::ServiceExt;

const MARKER: &str = "OUTSIDE-THE-DIST-FOLDER-7d1c";
const PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 7)), 40000);
const CONNECTION_DEADLINE: Duration = Duration::from_secs(5);
const SETTLE: Duration = Duration::from_millis(100);

/// `FLIGHT_FUZZ_PRINT=1` prints each input's response bytes, to see what a reproduced input got.
static PRINT: LazyLock<bool> = LazyLock::new(|| std::env::var_os("FLIGHT_FUZZ_PRINT").is_some());

static RUNTIME: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime"));

/// A dist folder (canonical path) with an SPA index, an asset large enough to be compressed, a precompressed
/// sibling, a sub-folder with its own index, a file big enough to be streamed, and symlinks leading out of it
/// to a file holding [`MARKER`].
static DIST: LazyLock<PathBuf> = LazyLock::new(|| {
    remove_stale_dists();
    let base = std::env::temp_dir().join(format!("flight-fuzz-{}", std::process::id()));
    let dist = base.join("dist");
    let write = |path: PathBuf, bytes: &[u8]| std::fs::write(path, bytes).expect("write a dist file");
    std::fs::create_dir_all(dist.join("docs")).expect("create the dist folder");
    write(base.join("secret.txt"), MARKER.as_bytes());
    write(dist.join("index.html"), b"<!doctype html><title>app</title><script src=/app.js></script>");
    write(dist.join("app.js"), "console.log('flight fuzz');\n".repeat(80).as_bytes());
    write(dist.join("app.js.gz"), b"not really gzip, served as it is");
    write(dist.join("docs").join("index.html"), b"<p>docs</p>");
    write(dist.join("big.bin"), &vec![b'b'; 300 * 1024]);
    write(dist.join("%2e%2e"), b"a file literally named %2e%2e");
    let _ = std::os::unix::fs::symlink(base.join("secret.txt"), dist.join("leak.txt"));
    let _ = std::os::unix::fs::symlink(&base, dist.join("up"));
    std::fs::canonicalize(&dist).expect("canonical dist path")
});

/// libFuzzer exits without running destructors, so each process's dist folder outlives it; the next one removes
/// those of processes that are gone.
fn remove_stale_dists() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("flight-fuzz-")) else { continue };
        if pid.parse::<u32>().is_ok() && !std::path::Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn settings(config: u8) -> Settings {
    let profile = match config & 3 {
        0 | 1 => Profile::Production,
        2 => Profile::Default,
        _ => Profile::Bare,
    };
    let mut s = Settings::for_profile(profile);
    s.secret = b"a fuzzing secret that is at least 32 bytes long".to_vec();
    s.trust_proxy = config & 4 != 0;
    if config & 8 != 0 {
        s.cors_origins = Origins::List(vec![HeaderValue::from_static("https://app.example")]);
        s.cors_credentials = true;
    }
    s.request_log = config & 16 != 0;
    if config & 32 == 0 {
        s.dist_path = Some(DIST.clone());
    }
    s.rate_limit = 4;
    s
}

/// What the app was asked and answered, per request, in order.
#[derive(Default)]
struct Seen {
    methods: Vec<Method>,
    /// Every answer's status: the app's, and `serve`'s own refusals (413, 501).
    statuses: Vec<u16>,
    /// The app's answers only.
    app_statuses: Vec<u16>,
    /// Response bodies hyper has not finished writing (or dropped) yet.
    open_bodies: usize,
}

/// A response body that tells [`Seen`] when hyper is done with it, as `serve`'s `TrackedBody` tells its
/// connection state.
struct Tracked {
    body: serve::Body,
    seen: Rc<RefCell<Seen>>,
}

impl Tracked {
    fn new(response: serve::Response, from_app: bool, seen: &Rc<RefCell<Seen>>) -> http::Response<Tracked> {
        let mut s = seen.borrow_mut();
        s.statuses.push(response.status().as_u16());
        if from_app {
            s.app_statuses.push(response.status().as_u16());
        }
        s.open_bodies += 1;
        response.map(|body| Tracked { body, seen: seen.clone() })
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.seen.borrow_mut().open_bodies -= 1;
    }
}

impl hyper::body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = serve::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, serve::BoxError>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The same adapter `serve` puts in front of the app (its `ConnService`), minus the in-flight bookkeeping that
/// only its socket deadlines use: the app is called in place when ready, as there, so an answer the app has at
/// hand (`Reply::Now`) is ready before hyper polls the socket again.
struct Adapter<S> {
    app: RefCell<S>,
    limits: serve::Limits,
    seen: Rc<RefCell<Seen>>,
}

type Answer = Pin<Box<dyn Future<Output = Result<http::Response<Tracked>, Infallible>>>>;

impl<S> hyper::service::Service<http::Request<Incoming>> for Adapter<S>
where
    S: tower::Service<serve::Request, Response = serve::Response, Error = Infallible> + Clone + 'static,
{
    type Response = http::Response<Tracked>;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, req: http::Request<Incoming>) -> Answer {
        let seen = self.seen.clone();
        seen.borrow_mut().methods.push(req.method().clone());
        let declared =
            req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > self.limits.body_limit) {
            let response = Tracked::new(serve::payload_too_large(self.limits.body_limit), false, &seen);
            return Box::pin(std::future::ready(Ok(response)));
        }
        if !plain_chunked(req.headers()) {
            let mut response =
                serve::error(StatusCode::NOT_IMPLEMENTED, "only Transfer-Encoding: chunked is supported");
            response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
            return Box::pin(std::future::ready(Ok(Tracked::new(response, false, &seen))));
        }
        let limit = usize::try_from(self.limits.body_limit).unwrap_or(usize::MAX);
        let mut req = req.map(|body| Limited::new(body, limit));
        if self.limits.peer_addr {
            req.extensions_mut().insert(serve::PeerAddr(PEER));
        }
        let answer: Pin<Box<dyn Future<Output = Result<serve::Response, Infallible>>>> = match self.app.try_borrow_mut()
        {
            Ok(mut app) => match app.poll_ready(&mut Context::from_waker(std::task::Waker::noop())) {
                Poll::Ready(Ok(())) => Box::pin(app.call(req)),
                Poll::Ready(Err(never)) => match never {},
                Poll::Pending => Box::pin(app.clone().oneshot(req)),
            },
            Err(_) => Box::pin(self.app.borrow().clone().oneshot(req)),
        };
        Box::pin(async move {
            let response = answer.await?;
            Ok(Tracked::new(response, true, &seen))
        })
    }
}

/// As `serve`: no Transfer-Encoding, or exactly one header saying `chunked`; anything else gets 501.
fn plain_chunked(headers: &http::HeaderMap) -> bool {
    let mut values = headers.get_all(TRANSFER_ENCODING).iter();
    match (values.next(), values.next()) {
        (None, _) => true,
        (Some(v), None) => v.to_str().is_ok_and(|v| v.trim().eq_ignore_ascii_case("chunked")),
        (Some(_), Some(_)) => false,
    }
}

/// The server's end of the pipe, counting the bytes hyper has read and written, so the client knows when its
/// input is in and whether the server is still making progress.
struct Counted {
    io: DuplexStream,
    read: Rc<Cell<usize>>,
    written: Rc<Cell<usize>>,
}

impl AsyncRead for Counted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        self.read.set(self.read.get() + buf.filled().len() - before);
        polled
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.written.set(self.written.get() + n);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Statuses hyper answers by itself when a request cannot be read.
const HYPER_ERRORS: [u16; 3] = [400, 414, 431];

fn check_output(out: &[u8], seen: &Seen) {
    let whole = String::from_utf8_lossy(out);
    assert!(!whole.contains(MARKER), "a file outside the dist folder was served:\n{whole}");
    // Messages show the start of the output (a streamed file is 300 KiB); FLIGHT_FUZZ_PRINT=1 shows all of it.
    let text = String::from_utf8_lossy(&out[..out.len().min(4096)]);
    for status in &seen.app_statuses {
        assert!(*status < 500, "the app answered {status}:\n{text}");
    }

    let mut parser = ResponseParser::default();
    let mut statuses = Vec::new();
    let mut at = 0;
    while at < out.len() {
        // Responses the app wrote answer its requests in order; a response past them is hyper's own error.
        let head = seen.methods.get(statuses.len()).is_some_and(|m| m == Method::HEAD);
        match parser.parse(&out[at..], head, &mut |_, _| {}, None) {
            Ok((used, Some(done))) => {
                at += used;
                statuses.push(done.status);
            }
            Ok((used, None)) => {
                at += used;
                assert!(at == out.len(), "the response bytes stopped parsing at byte {at}:\n{text}");
            }
            Err(e) => panic!("malformed response bytes at byte {at}: {e}:\n{text}"),
        }
    }
    match parser.eof() {
        Ok(Some(done)) => statuses.push(done.status),
        Ok(None) => {}
        Err(e) => panic!("the output ends mid-response: {e}:\n{text}"),
    }
    let answered = seen.statuses.len();
    assert!(statuses.len() >= answered, "{} responses on the wire for {answered} answers:\n{text}", statuses.len());
    assert_eq!(statuses[..answered], seen.statuses[..], "statuses on the wire are not the app's:\n{text}");
    match &statuses[answered..] {
        [] => {}
        [last] if HYPER_ERRORS.contains(last) => {}
        extra => panic!("unexpected responses after the app's: {extra:?}:\n{text}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let [config, request @ ..] = data else { return };
    let app = flight::App::new(settings(*config)).expect("the app builds");
    let limits = app.limits(serve::Limits::default());
    let seen = Rc::new(RefCell::new(Seen::default()));
    let adapter = Adapter { app: RefCell::new(app.service()), limits: limits.clone(), seen: seen.clone() };

    let out = RUNTIME.block_on(async {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (read_by_server, written_by_server) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
        let server = Counted { io: server, read: read_by_server.clone(), written: written_by_server.clone() };
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(None)
            .max_header_size(limits.max_header_bytes)
            .keep_alive(true);
        let connection = http.serve_connection(TokioIo::new(server), adapter);
        let (mut rd, mut wr) = tokio::io::split(client);
        let write = async {
            // The server may stop reading and close (an error, a 413): the rest of the input is then refused.
            if wr.write_all(request).await.is_ok() {
                settle(request.len(), &read_by_server, &written_by_server, &seen).await;
            }
            let _ = wr.shutdown().await;
        };
        let read = async move {
            let mut out = Vec::new();
            let _ = rd.read_to_end(&mut out).await;
            out
        };
        let all = async {
            // The connection's own error (bad request bytes, a body cut short) is an outcome, not a failure.
            let (_served, (), out) = tokio::join!(connection, write, read);
            out
        };
        match tokio::time::timeout(CONNECTION_DEADLINE, all).await {
            Ok(out) => out,
            Err(_) => panic!("the connection did not finish within {CONNECTION_DEADLINE:?}"),
        }
    });
    if *PRINT {
        eprintln!("{}", String::from_utf8_lossy(&out));
    }
    check_output(&out, &seen.borrow());
});

/// Waits, before the client half-closes, until the server has read the whole input, answered every request it
/// started and written out every response, or has made no progress for [`SETTLE`] (a request waiting for body
/// bytes that never come). With `serve`'s settings hyper closes on EOF mid-request, and drops what it still has
/// queued: a client that half-closes at once loses the answer to its last request when that answer is not
/// ready at once, and the rest of a streamed body. Waiting lets every request reach the app and every answer
/// the client.
async fn settle(sent: usize, read_by_server: &Cell<usize>, written_by_server: &Cell<usize>, seen: &RefCell<Seen>) {
    let progress = || {
        let seen = seen.borrow();
        (read_by_server.get(), written_by_server.get(), seen.methods.len(), seen.statuses.len(), seen.open_bodies)
    };
    let mut last = progress();
    let mut since = tokio::time::Instant::now();
    let mut quiet_rounds = 0;
    loop {
        // join! polls the connection and the reader on every round, so hyper's queued bytes keep moving.
        tokio::task::yield_now().await;
        let now = progress();
        if now != last {
            (last, since, quiet_rounds) = (now, tokio::time::Instant::now(), 0);
            continue;
        }
        quiet_rounds += 1;
        let (read, _, started, answered, open_bodies) = now;
        let done = read == sent && started == answered && open_bodies == 0;
        // Nothing written for a few rounds: hyper's write queue is empty, not just waiting for the reader.
        if done && quiet_rounds >= 3 || since.elapsed() >= SETTLE {
            return;
        }
    }
}
