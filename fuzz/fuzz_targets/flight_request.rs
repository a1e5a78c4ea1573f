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
//! The connection is served by [`serve::serve_connection`], the code every listener of `serve` runs: its hyper
//! settings, socket deadlines and adapter (413 with `Connection: close` for a declared Content-Length over the
//! limit, 501 for a Transfer-Encoding other than one `chunked`, `Limited` bodies, the peer address in
//! extensions when the app asks). The client half-closes once the server has read its input and answered what
//! it started (see [`settle`]), well inside the deadlines, so a connection that still does not finish is a hang
//! of hyper or the app, not an idle client. The app is wrapped in [`Recorded`], which notes what it was asked
//! and answered; `serve`'s own refusals do not reach it and can only be the last response on the wire.
//!
//! Invariants:
//! * no panic;
//! * the connection finishes within 5 s (no hang), and the client reads the response bytes to EOF;
//! * the app never answers 5xx (every layer maps bad input to 4xx; with memory stores nothing is down);
//! * the bytes on the wire are well-framed HTTP/1.1 responses (loadgen's parser reads them without error),
//!   one per request the app answered, with the statuses the app returned, plus possibly one final refusal
//!   (hyper's own 400, 414, 431, or serve's 413, 501), and nothing after it;
//! * nothing outside the dist folder is ever served: a file next to it (reachable only by a symlink inside it,
//!   or by traversal) holds a marker that must never appear in the output.
#![no_main]

use std::cell::Cell;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use flight::config::{Origins, Profile, Settings};
use http::{HeaderValue, Method};
use libfuzzer_sys::fuzz_target;
use loadgen::http1::ResponseParser;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};

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
    statuses: Vec<u16>,
    /// Response bodies hyper has not finished writing (or dropped) yet.
    open_bodies: usize,
}

type Shared = Arc<Mutex<Seen>>;

fn lock(seen: &Shared) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The app, noting each request's method when it is called and each answer's status when it is ready, and
/// marking the answer's body so [`settle`] knows when hyper is done with it.
#[derive(Clone)]
struct Recorded<S> {
    app: S,
    seen: Shared,
}

impl<S> tower::Service<serve::Request> for Recorded<S>
where
    S: tower::Service<serve::Request, Response = serve::Response, Error = Infallible>,
    S::Future: 'static,
{
    type Response = serve::Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<serve::Response, Infallible>>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.app.poll_ready(cx)
    }

    fn call(&mut self, req: serve::Request) -> Self::Future {
        lock(&self.seen).methods.push(req.method().clone());
        let answer = self.app.call(req);
        let seen = self.seen.clone();
        Box::pin(async move {
            let Ok(response) = answer.await;
            let mut s = lock(&seen);
            s.statuses.push(response.status().as_u16());
            s.open_bodies += 1;
            drop(s);
            Ok(response.map(|body| serve::Body::stream(Tracked { body, seen })))
        })
    }
}

/// A response body that tells [`Seen`] when hyper is done with it. Its size hint is the app body's, so hyper
/// frames the response as it would the app's own body.
struct Tracked {
    body: serve::Body,
    seen: Shared,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        lock(&self.seen).open_bodies -= 1;
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

/// What can follow the app's answers, as the connection's last response: hyper's own answers to a request it
/// cannot read, and `serve`'s refusals (413 for a declared body over the limit, 501 for a transfer coding).
const REFUSALS: [u16; 5] = [400, 414, 431, 413, 501];

fn check_output(out: &[u8], seen: &Seen) {
    let whole = String::from_utf8_lossy(out);
    assert!(!whole.contains(MARKER), "a file outside the dist folder was served:\n{whole}");
    // Messages show the start of the output (a streamed file is 300 KiB); FLIGHT_FUZZ_PRINT=1 shows all of it.
    let text = String::from_utf8_lossy(&out[..out.len().min(4096)]);
    for status in &seen.statuses {
        assert!(*status < 500, "the app answered {status}:\n{text}");
    }

    // Responses the app wrote answer its requests in order. A response past them is a refusal of a request the
    // app never saw, so its method is unknown: it parses either as an answer to HEAD (no body) or not.
    let head = |tail_is_head: bool| move |i: usize| seen.methods.get(i).map_or(tail_is_head, |m| m == Method::HEAD);
    let statuses = match responses(out, head(false)) {
        Ok(statuses) => statuses,
        Err(first) => responses(out, head(true)).unwrap_or_else(|_| panic!("{first}:\n{text}")),
    };
    let answered = seen.statuses.len();
    assert!(statuses.len() >= answered, "{} responses on the wire for {answered} answers:\n{text}", statuses.len());
    assert_eq!(statuses[..answered], seen.statuses[..], "statuses on the wire are not the app's:\n{text}");
    match &statuses[answered..] {
        [] => {}
        [last] if REFUSALS.contains(last) => {}
        extra => panic!("unexpected responses after the app's: {extra:?}:\n{text}"),
    }
}

/// The statuses of the well-framed HTTP/1.1 responses `out` holds, read with loadgen's parser; `head(i)` says
/// whether the `i`th answers a HEAD request.
fn responses(out: &[u8], head: impl Fn(usize) -> bool) -> Result<Vec<u16>, String> {
    let mut parser = ResponseParser::default();
    let mut statuses = Vec::new();
    let mut at = 0;
    while at < out.len() {
        match parser.parse(&out[at..], head(statuses.len()), &mut |_, _| {}, None) {
            Ok((used, Some(done))) => {
                at += used;
                statuses.push(done.status);
            }
            Ok((used, None)) => {
                at += used;
                if at != out.len() {
                    return Err(format!("the response bytes stopped parsing at byte {at}"));
                }
            }
            Err(e) => return Err(format!("malformed response bytes at byte {at}: {e}")),
        }
    }
    match parser.eof() {
        Ok(Some(done)) => statuses.push(done.status),
        Ok(None) => {}
        Err(e) => return Err(format!("the output ends mid-response: {e}")),
    }
    Ok(statuses)
}

fuzz_target!(|data: &[u8]| {
    let [config, request @ ..] = data else { return };
    let app = flight::App::new(settings(*config)).expect("the app builds");
    let limits = app.limits(serve::Limits::default());
    let seen = Shared::default();
    let recorded = Recorded { app: app.service(), seen: seen.clone() };

    let out = RUNTIME.block_on(async {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let (read_by_server, written_by_server) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
        let server = Counted { io: server, read: read_by_server.clone(), written: written_by_server.clone() };
        let connection = serve::serve_connection(server, PEER, &limits, recorded);
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
    check_output(&out, &lock(&seen));
});

/// Waits, before the client half-closes, until the server has read the whole input, answered every request it
/// started and written out every response, or has made no progress for [`SETTLE`] (a request waiting for body
/// bytes that never come). With `serve`'s settings hyper closes on EOF mid-request, and drops what it still has
/// queued: a client that half-closes at once loses the answer to its last request when that answer is not
/// ready at once, and the rest of a streamed body. Waiting lets every request reach the app and every answer
/// the client.
async fn settle(sent: usize, read_by_server: &Cell<usize>, written_by_server: &Cell<usize>, seen: &Shared) {
    let progress = || {
        let seen = lock(seen);
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
