//! One connection, served as every listener here serves it: hyper's HTTP/1.1 settings, the socket deadlines
//! ([`IdleIo`]) and the adapter in front of the app ([`ConnService`]: 413 and 501 refusals before the body is
//! read, `Limited` bodies, the peer address, the request tracked as in flight). The worker's accept loop and
//! [`serve_connection`] (for a connection accepted elsewhere, e.g. the fuzz target's in-memory pipe) both build
//! it with [`connection`], so there is one setup. An HTTP/2 connection (see http2.rs) is built from the same
//! parts ([`parts`]) with the deadlines that fit a multiplexed connection ([`ConnHandle::poll_http2_deadline`]).

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http_body_util::Limited;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{Instant, Sleep};
use tower::{Service, ServiceExt};

use crate::response::unsupported_transfer_encoding;
use crate::{Body, Limits, Request, Response, payload_too_large};

/// Serves one already-accepted connection (any byte stream: a TCP socket, an in-memory pipe) with the same
/// hyper settings, deadlines, limits and body handling as the listeners [`crate::Server`] runs, until the
/// client closes it or a deadline cuts it. `peer` goes into request extensions when [`Limits::peer_addr`] is
/// on. Needs a tokio runtime with its timer; the future is not `Send` (nor need the app be). The error is the
/// connection's own (bad request bytes, a body cut short, a deadline): an outcome, not a server failure.
pub async fn serve_connection<I, S>(io: I, peer: SocketAddr, limits: &Limits, app: S) -> Result<(), hyper::Error>
where
    I: AsyncRead + AsyncWrite + Unpin + 'static,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
{
    connection(&http1_builder(limits), io, peer, limits, app).await
}

/// hyper's HTTP/1.1 settings for every connection.
pub(crate) fn http1_builder(limits: &Limits) -> http1::Builder {
    let mut http = http1::Builder::new();
    // hyper's own header-read timer would allocate and arm a timer per request; `IdleIo` enforces the same
    // deadline lazily (see its docs). The timer stays set: without one hyper would reject other timeouts.
    http.timer(TokioTimer::new()).header_read_timeout(None).max_header_size(limits.max_header_bytes).keep_alive(true);
    // Answer a request whose client half-closed after sending it (HTTP/1.0-style clients, `nc -N`, some
    // proxies), as nginx, Envoy and HAProxy do. hyper then stops reading while a request is in flight, so the
    // handler's stall deadline is enforced by `ConnFuture`, not by a read that would block.
    http.half_close(true);
    // Not `pipeline_flush(true)`: with it hyper skips the flush while unread request bytes are buffered, so a
    // 431, or a 413 answered before the body was read, would never reach the client.
    http
}

/// The hyper connection for one stream: the stream behind its deadlines, the app behind the adapter.
pub(crate) fn connection<I, S>(
    http: &http1::Builder,
    io: I,
    peer: SocketAddr,
    limits: &Limits,
    app: S,
) -> http1::Connection<TokioIo<IdleIo<I>>, ConnService<S>>
where
    I: AsyncRead + AsyncWrite + Unpin + 'static,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
{
    let (io, service, _) = parts(io, peer, limits, app, false);
    http.serve_connection(io, service)
}

/// The socket behind its deadlines and the app behind the adapter, sharing one [`ConnState`]; `http2` picks
/// the deadlines of a multiplexed connection. The handle is what the connection's driver checks them with.
pub(crate) fn parts<I, S>(
    io: I,
    peer: SocketAddr,
    limits: &Limits,
    app: S,
    http2: bool,
) -> (TokioIo<IdleIo<I>>, ConnService<S>, ConnHandle)
where
    I: AsyncRead + AsyncWrite + Unpin + 'static,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
{
    let conn = Rc::new(ConnState::new(limits, http2));
    let io = TokioIo::new(IdleIo { io, conn: conn.clone() });
    let service = ConnService {
        app: RefCell::new(app),
        conn: conn.clone(),
        body_limit: limits.body_limit,
        peer: limits.peer_addr.then_some(PeerAddr(peer)),
    };
    (io, service, ConnHandle(conn))
}

/// HTTP/2: what one connection may read in one poll of its task before it yields the worker. hyper's HTTP/2
/// decodes frames for as long as the socket has any, with no budget of its own, so a client flooding SETTINGS
/// or PING frames held the worker for tens of milliseconds at a time and every other connection on it waited
/// (tests/tests/http2_attacks.rs measured another client's p99 past 100 ms). 64 KiB is four full DATA frames:
/// an honest connection rarely meets it.
const READ_BUDGET: usize = 64 * 1024;

/// What the driver of an HTTP/2 connection needs of its [`ConnState`]: whether a deadline of the connection as
/// a whole has passed, and a fresh read budget for each poll.
pub(crate) struct ConnHandle(Rc<ConnState>);

impl ConnHandle {
    /// A poll of the connection's task begins: it may read [`READ_BUDGET`] bytes in it.
    pub(crate) fn refill_read_budget(&self) {
        self.0.read_budget.set(READ_BUDGET);
    }

    /// HTTP/2's connection-wide deadlines, which hyper's HTTP/2 has none of. Ready with the reason once one
    /// passed; the driver then closes the connection with a GOAWAY.
    /// * idle: no stream in flight for `--keep-alive-timeout` (a preface or a HEADERS frame cut short is idle
    ///   too: no stream exists until its header block is complete);
    /// * stalled: a response is waiting to be written and no byte has been written for `--io-timeout`: the
    ///   client keeps its flow-control window at zero or stopped reading. Request bytes do not count as
    ///   progress here, so a client cannot hold responses forever by trickling PINGs.
    ///
    /// A handler that does not answer, or a body that stops arriving, is the stream's own stall
    /// ([`ConnFuture`]), as in HTTP/1.1.
    pub(crate) fn poll_http2_deadline(&self, cx: &mut Context<'_>) -> Poll<&'static str> {
        let conn = &*self.0;
        let (deadline, why) = if conn.responding.get() > 0 {
            (conn.written_at.get() + conn.deadlines.stall, "responses stalled: nothing written within the io timeout")
        } else if conn.in_flight.get() == 0 {
            (conn.idle_since.get() + conn.deadlines.keep_alive, "keep-alive idle timeout")
        } else {
            // Handlers at work: the driver is polled again when the last of them finishes (`parked`).
            conn.parked.set(Some(cx.waker().clone()));
            return Poll::Pending;
        };
        conn.poll_until(cx, deadline).map(|()| why)
    }
}

/// Per-connection bookkeeping shared by the IO wrapper and the service: whether a request is in flight, since
/// when the connection has been waiting for one, when the first byte of the next head arrived, the request's
/// data-rate window, and the one timer every deadline of the connection shares.
struct ConnState {
    /// HTTP/2: reads carry frames of many streams, so the per-read deadlines of HTTP/1.1 do not apply (see
    /// [`ConnHandle::poll_http2_deadline`] for what does).
    http2: bool,
    in_flight: Cell<u32>,
    /// Requests whose handler has answered and whose response is still being written.
    responding: Cell<u32>,
    /// HTTP/2: when a write last moved bytes.
    written_at: Cell<Instant>,
    /// HTTP/2: bytes the connection may still read in this poll of its task ([`READ_BUDGET`]).
    read_budget: Cell<usize>,
    idle_since: Cell<Instant>,
    head_started: Cell<Option<Instant>>,
    /// While a request is in flight: since when no byte has moved (None while bytes flow).
    stalled_since: Cell<Option<Instant>>,
    /// While a request is arriving (from its head's first byte until its response is done): when the current
    /// rate window began and how many bytes came in it.
    window: Cell<Option<(Instant, u64)>>,
    /// The last write would block: hyper may hold unwritten response bytes, so nothing else may be written.
    write_blocked: Cell<bool>,
    /// The connection task, when it polled for a read while a request was in flight: it must be woken when
    /// the request finishes so the idle deadline gets armed (hyper will not poll the socket again by itself).
    parked: Cell<Option<std::task::Waker>>,
    deadlines: Deadlines,
    /// One timer for every deadline (see [`ConnState::poll_until`]), re-armed lazily: a busy connection costs
    /// a few clock reads per request and no timer-wheel work; hyper's own header timer would allocate and arm
    /// a timer for every request.
    timer: RefCell<Pin<Box<Sleep>>>,
}

/// The connection's limits, as [`ConnState`] enforces them.
struct Deadlines {
    keep_alive: Duration,
    header: Duration,
    stall: Duration,
    /// Bytes per second a request must average over each window while it arrives; 0 turns the check off.
    min_rate: u64,
    rate_window: Duration,
}

impl ConnState {
    fn new(limits: &Limits, http2: bool) -> Self {
        let first = limits.keep_alive_timeout.min(limits.header_timeout);
        ConnState {
            http2,
            in_flight: Cell::new(0),
            responding: Cell::new(0),
            written_at: Cell::new(Instant::now()),
            read_budget: Cell::new(READ_BUDGET),
            idle_since: Cell::new(Instant::now()),
            head_started: Cell::new(None),
            stalled_since: Cell::new(None),
            window: Cell::new(None),
            write_blocked: Cell::new(false),
            parked: Cell::new(None),
            deadlines: Deadlines {
                keep_alive: limits.keep_alive_timeout,
                header: limits.header_timeout,
                stall: limits.io_timeout,
                min_rate: limits.min_data_rate,
                rate_window: limits.min_data_rate_window,
            },
            timer: RefCell::new(Box::pin(tokio::time::sleep(first))),
        }
    }

    /// Ready once `deadline` has passed, waking the task then. Every wait of the connection (a read, a write,
    /// the handler) shares the one timer: each pulls it earlier when its deadline is sooner, and pushes it later
    /// only when it fired before that deadline. The earliest armed deadline therefore always holds, and whoever
    /// it belongs to sees it pass: hyper polls every pending part of the connection on each wake of its task.
    fn poll_until(&self, cx: &mut Context<'_>, deadline: Instant) -> Poll<()> {
        let mut timer = self.timer.borrow_mut();
        if timer.deadline() > deadline {
            timer.as_mut().reset(deadline);
        }
        loop {
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if Instant::now() >= deadline {
                return Poll::Ready(());
            }
            timer.as_mut().reset(deadline);
        }
    }

    /// A read while a request is in flight, any write, or the handler would block: fails once no byte has
    /// moved for the stall deadline (`--io-timeout`). The clock is read only when a stall starts.
    fn poll_stall(&self, cx: &mut Context<'_>, what: &'static str) -> Poll<io::Error> {
        let since = match self.stalled_since.get() {
            Some(since) => since,
            None => {
                let now = Instant::now();
                self.stalled_since.set(Some(now));
                now
            }
        };
        self.poll_until(cx, since + self.deadlines.stall).map(|()| io::Error::new(io::ErrorKind::TimedOut, what))
    }

    /// The minimum data rate (`--min-data-rate`): while a request arrives, each window of at least
    /// `rate_window` must bring `min_rate` bytes per second on average. Checked when a read would block and the
    /// window has run out; a window that passes starts the next one. Averaging over a window lets an honest
    /// client pause (TCP slow start, a busy uplink) while a trickle is cut within two windows.
    fn poll_rate(&self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let Some((start, bytes)) = self.window.get() else { return Poll::Pending };
        if self.deadlines.min_rate == 0 || self.poll_until(cx, start + self.deadlines.rate_window).is_pending() {
            return Poll::Pending;
        }
        let now = Instant::now();
        let owed = u128::from(self.deadlines.min_rate) * now.duration_since(start).as_millis();
        if u128::from(bytes) * 1000 < owed {
            return Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, "request arrived below the minimum data rate"));
        }
        self.window.set(Some((now, 0)));
        // Arms the timer for the next window; a window is at least a second, so this cannot be Ready.
        let _ = self.poll_until(cx, now + self.deadlines.rate_window);
        Poll::Pending
    }

    /// Bytes arrived: they end a stall, open the rate window (and the header deadline) at a head's first byte,
    /// and count toward the window.
    fn received(&self, n: usize) {
        self.stalled_since.set(None);
        if self.http2 {
            return;
        }
        match self.window.get() {
            Some((start, bytes)) => self.window.set(Some((start, bytes + n as u64))),
            None if self.in_flight.get() == 0 => {
                let now = Instant::now();
                self.head_started.set(Some(now));
                self.window.set(Some((now, n as u64)));
            }
            None => {}
        }
    }
}

/// Marks a request in flight until its response body has been written (or dropped), and as responding once
/// the handler has answered.
pub(crate) struct InFlight {
    conn: Rc<ConnState>,
    responding: bool,
    /// HTTP/2 and a HEAD request: the answer's body is not sent (hyper's HTTP/1.1 drops it by itself, its
    /// HTTP/2 would send it, which RFC 9113 §8.1.1 forbids).
    head_only: bool,
}

impl InFlight {
    fn new(conn: Rc<ConnState>) -> Self {
        conn.in_flight.set(conn.in_flight.get() + 1);
        conn.head_started.set(None);
        conn.stalled_since.set(None);
        InFlight { conn, responding: false, head_only: false }
    }

    /// The handler answered: its response is now waiting to be written.
    fn answered(mut self) -> Self {
        let conn = &*self.conn;
        if conn.http2 && conn.responding.get() == 0 {
            // The write deadline counts from the first response waiting, not from a write long before it.
            conn.written_at.set(Instant::now());
        }
        conn.responding.set(conn.responding.get() + 1);
        self.responding = true;
        self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.responding {
            self.conn.responding.set(self.conn.responding.get() - 1);
        }
        let conn = &*self.conn;
        conn.in_flight.set(conn.in_flight.get() - 1);
        conn.idle_since.set(Instant::now());
        conn.stalled_since.set(None);
        conn.window.set(None);
        if let Some(waker) = conn.parked.take() {
            waker.wake();
        }
    }
}

/// A vectored write of at most this many bytes (hyper's head and body, both small) is copied into one buffer and
/// sent with one `send`; larger ones go to `writev` as they are. The kernel charges a `writev` of two iovecs
/// about 350 ns more than a `send` of the same bytes, while copying 8 KiB costs less than that; from 16 KiB on
/// the copy costs as much or more (measured: `cargo run --release -p serve --example write_cost`,
/// bench/results/20261204T1615Z/20261204T1615Z-write-path.md). hyper's own flattening (`writev(false)`) would copy every body,
/// a 100 KB file too, into a per-connection buffer that keeps its size.
const COALESCE_MAX: usize = 8 * 1024;

thread_local! {
    /// The coalescing buffer: one per worker thread, used only within one `poll_write_vectored` call. A fixed
    /// array in thread-local storage, so it is never allocated or grown and no capacity check runs per write.
    static COALESCED: RefCell<[u8; COALESCE_MAX]> = const { RefCell::new([0; COALESCE_MAX]) };
}

/// The socket, with its deadlines. While a request is in flight: no byte may stay unmoved in either direction
/// for `--io-timeout` (a stalled upload, a client that stops reading; the handler's side is [`ConnFuture`]'s).
/// While none is, two apply:
/// * keep-alive: the next request's first byte must arrive within `--keep-alive-timeout` of the connection
///   going idle (accepted, or previous response done);
/// * header: once that first byte is in, the whole head must arrive within `--header-timeout`.
///
/// And from a head's first byte until the request is answered, the minimum data rate
/// ([`ConnState::poll_rate`]). When a deadline passes, reads fail with TimedOut and hyper closes the
/// connection; a head cut short is first answered 408 (hyper answers nothing to an IO error), a body's
/// error reaches the handler, which answers 408 ([`crate::BodyError`]). Checked only when a read would block.
pub(crate) struct IdleIo<I> {
    io: I,
    conn: Rc<ConnState>,
}

impl<I: AsyncWrite + Unpin> IdleIo<I> {
    fn poll_read_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let conn = &*self.conn;
        if conn.http2 {
            return Poll::Pending;
        }
        let head = conn.in_flight.get() == 0 && conn.head_started.get().is_some();
        if let Poll::Ready(e) = conn.poll_rate(cx) {
            return Poll::Ready(self.refuse_head(cx, head, e));
        }
        if conn.in_flight.get() > 0 {
            conn.parked.set(Some(cx.waker().clone()));
            return conn.poll_stall(cx, "request stalled: no bytes moved");
        }
        let deadline = match conn.head_started.get() {
            Some(started) => started + conn.deadlines.header,
            None => conn.idle_since.get() + conn.deadlines.keep_alive,
        };
        if conn.poll_until(cx, deadline).is_pending() {
            return Poll::Pending;
        }
        let e = io::Error::new(
            io::ErrorKind::TimedOut,
            if head { "header read timeout" } else { "keep-alive idle timeout" },
        );
        Poll::Ready(self.refuse_head(cx, head, e))
    }

    /// A head that did not arrive in time gets a 408 before the close, written here because hyper answers
    /// nothing to an IO error. Best effort, one non-blocking write, and only when hyper holds no unwritten
    /// response bytes it could interleave with.
    fn refuse_head(&mut self, cx: &mut Context<'_>, head: bool, e: io::Error) -> io::Error {
        if head && !self.conn.write_blocked.get() {
            let _ = Pin::new(&mut self.io).poll_write(cx, crate::response::HEAD_TIMEOUT);
        }
        e
    }

    /// A write that moved bytes ends a stall; one that would block (a client that stopped reading) counts
    /// toward the stall deadline, whether or not a request is in flight: a response hyper already took from the
    /// handler (the request is no longer in flight) can still be stuck in its write buffer, and a client that
    /// pipelines requests and never reads leaves hyper there, never polling the socket for reads, so no read
    /// deadline would fire (found by the e2e hardening tests).
    fn after_write(&mut self, cx: &mut Context<'_>, result: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        match result {
            Poll::Ready(Ok(n)) if n > 0 => {
                self.conn.stalled_since.set(None);
                self.conn.write_blocked.set(false);
                if self.conn.http2 {
                    self.conn.written_at.set(Instant::now());
                }
                Poll::Ready(Ok(n))
            }
            Poll::Pending => {
                self.conn.write_blocked.set(true);
                match self.conn.poll_stall(cx, "response stalled: the client stopped reading") {
                    Poll::Ready(e) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            }
            other => other,
        }
    }
}

impl<I: AsyncRead + AsyncWrite + Unpin> AsyncRead for IdleIo<I> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.conn.http2 && this.conn.read_budget.get() == 0 {
            // The budget of this poll is spent: the task goes to the back of the worker's queue (woken, so it is
            // polled again after the others) and the bytes wait in the socket.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let got = buf.filled().len() - before;
                if got > 0 {
                    this.conn.received(got);
                    if this.conn.http2 {
                        this.conn.read_budget.set(this.conn.read_budget.get().saturating_sub(got));
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.poll_read_deadline(cx) {
                Poll::Ready(e) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for IdleIo<I> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_write(cx, buf);
        this.after_write(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let result = if bufs.len() > 1 && total <= COALESCE_MAX {
            // A short write is reported as such: hyper advances its buffers by the count, as after `writev`.
            COALESCED.with_borrow_mut(|coalesced| {
                let mut len = 0;
                for buf in bufs {
                    coalesced[len..len + buf.len()].copy_from_slice(buf);
                    len += buf.len();
                }
                Pin::new(&mut this.io).poll_write(cx, &coalesced[..len])
            })
        } else {
            Pin::new(&mut this.io).poll_write_vectored(cx, bufs)
        };
        this.after_write(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Adapts the app's tower service to hyper for one connection: rejects bodies declared over the limit before
/// reading them, limits the rest while streaming, and tracks the request as in flight.
pub(crate) struct ConnService<S> {
    /// The connection's own copy of the app, called in place: hyper calls the service from the connection's
    /// task, one call at a time (HTTP/1.1: one request at a time; HTTP/2: each stream's call returns a future
    /// that runs on its own task and holds no borrow), so no per-request clone of the layer stack is needed.
    app: RefCell<S>,
    conn: Rc<ConnState>,
    body_limit: u64,
    peer: Option<PeerAddr>,
}

/// No Transfer-Encoding, or exactly one header saying `chunked` (hyper has framed the body by then; this
/// refuses what it accepts but a strict reading of RFC 9112 does not: other codings and repeated headers).
fn plain_chunked(headers: &http::HeaderMap) -> bool {
    let mut values = headers.get_all(TRANSFER_ENCODING).iter();
    match (values.next(), values.next()) {
        (None, _) => true,
        (Some(v), None) => v.to_str().is_ok_and(|v| v.trim().eq_ignore_ascii_case("chunked")),
        (Some(_), Some(_)) => false,
    }
}

/// The client's socket address, in request extensions when [`Limits::peer_addr`] is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

impl<S> hyper::service::Service<http::Request<Incoming>> for ConnService<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
{
    type Response = http::Response<TrackedBody>;
    type Error = io::Error;
    type Future = ConnFuture<S::Future, tower::util::Oneshot<S, Request>>;

    fn call(&self, req: http::Request<Incoming>) -> Self::Future {
        let mut in_flight = InFlight::new(self.conn.clone());
        in_flight.head_only = self.conn.http2 && req.method() == http::Method::HEAD;
        let declared =
            req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > self.body_limit) {
            return ConnFuture::Rejected {
                response: Some(payload_too_large(self.body_limit)),
                in_flight: Some(in_flight),
            };
        }
        if !plain_chunked(req.headers()) {
            return ConnFuture::Rejected {
                response: Some(unsupported_transfer_encoding()),
                in_flight: Some(in_flight),
            };
        }
        let limit = usize::try_from(self.body_limit).unwrap_or(usize::MAX);
        let mut req = req.map(|body| Limited::new(body, limit));
        if let Some(peer) = self.peer {
            req.extensions_mut().insert(peer);
        }
        // tower's contract: call only after poll_ready said Ready. Every service in this workspace is always
        // ready, so the in-place call is the path taken; anything else waits in a clone via `oneshot`.
        let Ok(mut app) = self.app.try_borrow_mut() else {
            let app = self.app.borrow().clone();
            return ConnFuture::Waiting { inner: app.oneshot(req), in_flight: Some(in_flight) };
        };
        match app.poll_ready(&mut Context::from_waker(std::task::Waker::noop())) {
            Poll::Ready(Ok(())) => ConnFuture::App { inner: app.call(req), in_flight: Some(in_flight) },
            Poll::Ready(Err(never)) => match never {},
            Poll::Pending => ConnFuture::Waiting { inner: app.clone().oneshot(req), in_flight: Some(in_flight) },
        }
    }
}

pin_project_lite::pin_project! {
    #[project = ConnFutureProj]
    pub(crate) enum ConnFuture<F, W> {
        Rejected { response: Option<Response>, in_flight: Option<InFlight> },
        App { #[pin] inner: F, in_flight: Option<InFlight> },
        Waiting { #[pin] inner: W, in_flight: Option<InFlight> },
    }
}

impl<F, W> Future for ConnFuture<F, W>
where
    F: Future<Output = Result<Response, Infallible>>,
    W: Future<Output = Result<Response, Infallible>>,
{
    /// An error closes the connection without an answer: the handler stalled past `--io-timeout`.
    type Output = Result<http::Response<TrackedBody>, io::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (polled, in_flight) = match self.project() {
            ConnFutureProj::Rejected { response, in_flight } => (Poll::Ready(response.take()), in_flight),
            ConnFutureProj::App { inner, in_flight } => (inner.poll(cx).map(|Ok(r)| Some(r)), in_flight),
            ConnFutureProj::Waiting { inner, in_flight } => (inner.poll(cx).map(|Ok(r)| Some(r)), in_flight),
        };
        match (polled, in_flight.take()) {
            (Poll::Ready(Some(response)), Some(in_flight)) => {
                let in_flight = in_flight.answered();
                let mut response = response;
                let head_only = in_flight.head_only;
                if in_flight.conn.http2 {
                    content_length_as_http1(&mut response, head_only);
                }
                Poll::Ready(Ok(response.map(|body| TrackedBody { body, head_only, _in_flight: in_flight })))
            }
            // A handler that has not answered: with half-close on, hyper does not read while it waits, so this
            // is where a handler that never answers meets the stall deadline.
            (Poll::Pending, Some(flight)) => {
                let stalled = flight.conn.poll_stall(cx, "handler stalled: no answer within the io timeout");
                *in_flight = Some(flight);
                match stalled {
                    Poll::Ready(e) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            }
            _ => panic!("ConnFuture polled after completion"),
        }
    }
}

/// HTTP/2: the content-length HTTP/1.1 would send, so both carry the same headers. hyper's HTTP/2 sets it only
/// for a body that is not already at its end; its HTTP/1.1 also for an empty body, and for a HEAD answer's
/// (from the body it then drops) unless that body is empty. Not on the statuses that have no content (1xx,
/// 204, 304).
fn content_length_as_http1(response: &mut Response, head: bool) {
    let status = response.status();
    if status.is_informational() || status == http::StatusCode::NO_CONTENT || status == http::StatusCode::NOT_MODIFIED {
        return;
    }
    if let Some(len) = http_body::Body::size_hint(response.body()).exact()
        && !(head && len == 0)
        && !response.headers().contains_key(CONTENT_LENGTH)
    {
        response.headers_mut().insert(CONTENT_LENGTH, http::HeaderValue::from(len));
    }
}

pin_project_lite::pin_project! {
    /// The response body, holding the in-flight mark until hyper has written (or dropped) it. A HEAD answer's
    /// over HTTP/2 ends before its first frame.
    pub struct TrackedBody {
        #[pin]
        body: Body,
        head_only: bool,
        _in_flight: InFlight,
    }
}

impl http_body::Body for TrackedBody {
    type Data = bytes::Bytes;
    type Error = crate::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        let this = self.project();
        if *this.head_only {
            return Poll::Ready(None);
        }
        this.body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.head_only || self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A byte sink that records each write call and takes at most `accept` bytes per call, as a socket with a
    /// nearly full send buffer would. Vectored, like a TCP stream, so hyper would hand it iovecs.
    struct Recorder {
        calls: Vec<(&'static str, Vec<u8>)>,
        accept: usize,
    }

    impl AsyncRead for Recorder {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Poll::Pending
        }
    }

    impl AsyncWrite for Recorder {
        fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            let n = buf.len().min(this.accept);
            this.calls.push(("write", buf[..n].to_vec()));
            Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            let n = all.len().min(this.accept);
            this.calls.push(("writev", all[..n].to_vec()));
            Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn idle_io(accept: usize) -> IdleIo<Recorder> {
        IdleIo { io: Recorder { calls: Vec::new(), accept }, conn: Rc::new(ConnState::new(&Limits::default(), false)) }
    }

    fn write_vectored(io: &mut IdleIo<Recorder>, bufs: &[&[u8]]) -> usize {
        let slices: Vec<io::IoSlice<'_>> = bufs.iter().map(|b| io::IoSlice::new(b)).collect();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match Pin::new(io).poll_write_vectored(&mut cx, &slices) {
            Poll::Ready(Ok(n)) => n,
            other => panic!("the recorder always takes bytes: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_small_head_and_body_leave_in_one_write() {
        let mut io = idle_io(usize::MAX);
        let (head, body) = (b"HTTP/1.1 200 OK\r\ncontent-length: 13\r\n\r\n".as_slice(), b"Hello, World!".as_slice());
        assert_eq!(write_vectored(&mut io, &[head, body]), head.len() + body.len());
        assert_eq!(io.io.calls, [("write", [head, body].concat())]);

        // The largest coalesced write, and one byte more.
        let body = vec![b'x'; COALESCE_MAX - head.len()];
        write_vectored(&mut io, &[head, &body]);
        let body = vec![b'x'; COALESCE_MAX - head.len() + 1];
        write_vectored(&mut io, &[head, &body]);
        let kinds: Vec<_> = io.io.calls.iter().map(|(kind, bytes)| (*kind, bytes.len())).collect();
        assert_eq!(kinds[1..], [("write", COALESCE_MAX), ("writev", COALESCE_MAX + 1)]);
    }

    #[tokio::test]
    async fn a_large_body_and_a_single_buffer_go_out_as_they_are() {
        let mut io = idle_io(usize::MAX);
        let body = vec![b'x'; 100 * 1024];
        write_vectored(&mut io, &[b"HTTP/1.1 200 OK\r\n\r\n", &body]);
        write_vectored(&mut io, &[b"only the head"]);
        let kinds: Vec<_> = io.io.calls.iter().map(|(kind, bytes)| (*kind, bytes.len())).collect();
        assert_eq!(kinds, [("writev", 19 + 100 * 1024), ("writev", 13)]);
    }

    #[tokio::test]
    async fn a_short_coalesced_write_reports_what_was_taken() {
        // The caller (hyper) advances its buffers by the count and writes the rest again, as after a short
        // writev; every byte arrives once and in order.
        let mut io = idle_io(10);
        let (head, body) = (b"HTTP/1.1 200 OK\r\n\r\n".as_slice(), b"0123456789abcdef".as_slice());
        let mut sent = 0;
        while sent < head.len() + body.len() {
            let rest: Vec<u8> = [head, body].concat()[sent..].to_vec();
            let (a, b) = rest.split_at(rest.len().min(4));
            sent += write_vectored(&mut io, &[a, b]);
        }
        let received: Vec<u8> = io.io.calls.iter().flat_map(|(_, bytes)| bytes.iter().copied()).collect();
        assert_eq!(received, [head, body].concat());
        assert!(io.io.calls.iter().all(|(kind, bytes)| *kind == "write" && bytes.len() <= 10));
    }
}
