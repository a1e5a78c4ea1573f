//! One HTTP/1.1 connection, served as every listener here serves it: hyper's settings, the socket deadlines
//! ([`IdleIo`]) and the adapter in front of the app ([`ConnService`]: 413 and 501 refusals before the body is
//! read, `Limited` bodies, the peer address, the request tracked as in flight). The worker's accept loop and
//! [`serve_connection`] (for a connection accepted elsewhere, e.g. the fuzz target's in-memory pipe) both build
//! it with [`connection`], so there is one setup.

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
    let conn = Rc::new(ConnState::new());
    let io = TokioIo::new(IdleIo::new(io, conn.clone(), limits));
    let service = ConnService {
        app: RefCell::new(app),
        conn,
        body_limit: limits.body_limit,
        peer: limits.peer_addr.then_some(PeerAddr(peer)),
    };
    http.serve_connection(io, service)
}

/// Per-connection bookkeeping shared by the IO wrapper and the service: whether a request is in flight, since
/// when the connection has been waiting for one, and when the first byte of the next head arrived.
struct ConnState {
    in_flight: Cell<u32>,
    idle_since: Cell<Instant>,
    head_started: Cell<Option<Instant>>,
    /// While a request is in flight: since when no byte has moved (None while bytes flow).
    stalled_since: Cell<Option<Instant>>,
    /// The connection task, when it polled for a read while a request was in flight: it must be woken when
    /// the request finishes so the idle deadline gets armed (hyper will not poll the socket again by itself).
    parked: Cell<Option<std::task::Waker>>,
}

impl ConnState {
    fn new() -> Self {
        ConnState {
            in_flight: Cell::new(0),
            idle_since: Cell::new(Instant::now()),
            head_started: Cell::new(None),
            stalled_since: Cell::new(None),
            parked: Cell::new(None),
        }
    }
}

/// Marks a request in flight until its response body has been written (or dropped).
pub(crate) struct InFlight(Rc<ConnState>);

impl InFlight {
    fn new(conn: Rc<ConnState>) -> Self {
        conn.in_flight.set(conn.in_flight.get() + 1);
        conn.head_started.set(None);
        conn.stalled_since.set(None);
        InFlight(conn)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.set(self.0.in_flight.get() - 1);
        self.0.idle_since.set(Instant::now());
        self.0.stalled_since.set(None);
        if let Some(waker) = self.0.parked.take() {
            waker.wake();
        }
    }
}

/// The socket, with its deadlines. While a request is in flight: no byte may stay unmoved in either direction
/// for `stall` (`--io-timeout`), which cuts stalled uploads, clients that stop reading, and handlers that never
/// answer. While none is, two apply:
/// * keep-alive: the next request's first byte must arrive within `keep_alive` of the connection going idle
///   (accepted, or previous response done);
/// * header: once that first byte is in, the whole head must arrive within `header`.
///
/// When a deadline passes, reads fail with TimedOut and hyper closes the connection. Checked only when a
/// read would block, with one timer per connection re-armed lazily (when it fires early), so a busy
/// connection costs two clock reads per request and no timer-wheel work; hyper's own header timer would
/// allocate and arm a timer for every request.
pub(crate) struct IdleIo<I> {
    io: I,
    conn: Rc<ConnState>,
    keep_alive: Duration,
    header: Duration,
    stall: Duration,
    timer: Pin<Box<Sleep>>,
}

impl<I> IdleIo<I> {
    fn new(stream: I, conn: Rc<ConnState>, limits: &Limits) -> Self {
        let timer = Box::pin(tokio::time::sleep(limits.keep_alive_timeout.min(limits.header_timeout)));
        IdleIo {
            io: stream,
            conn,
            keep_alive: limits.keep_alive_timeout,
            header: limits.header_timeout,
            stall: limits.io_timeout,
            timer,
        }
    }

    fn deadline(&self) -> Instant {
        match self.conn.head_started.get() {
            Some(started) => started + self.header,
            None => self.conn.idle_since.get() + self.keep_alive,
        }
    }

    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        if self.conn.in_flight.get() > 0 {
            self.conn.parked.set(Some(cx.waker().clone()));
            return self.poll_stall(cx);
        }
        loop {
            let deadline = self.deadline();
            // The timer may still be armed for a later stall deadline; never let that delay this one.
            if self.timer.deadline() > deadline {
                self.timer.as_mut().reset(deadline);
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if Instant::now() >= deadline {
                let what = if self.conn.head_started.get().is_some() { "header read" } else { "keep-alive idle" };
                return Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, format!("{what} timeout")));
            }
            self.timer.as_mut().reset(deadline);
        }
    }
}

impl<I> IdleIo<I> {
    /// A read while a request is in flight, or any write, would block: fails once no byte has moved for
    /// `stall`. The clock is read only when a stall starts, not while bytes flow.
    fn poll_stall(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let since = match self.conn.stalled_since.get() {
            Some(since) => since,
            None => {
                let now = Instant::now();
                self.conn.stalled_since.set(Some(now));
                now
            }
        };
        let deadline = since + self.stall;
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, "request stalled: no bytes moved")),
            Poll::Pending => Poll::Pending,
        }
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
                Poll::Ready(Ok(n))
            }
            Poll::Pending => match self.poll_stall(cx) {
                Poll::Ready(e) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            },
            other => other,
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for IdleIo<I> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let got_bytes = buf.filled().len() > before;
                if got_bytes {
                    this.conn.stalled_since.set(None);
                    if this.conn.in_flight.get() == 0 && this.conn.head_started.get().is_none() {
                        this.conn.head_started.set(Some(Instant::now()));
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.poll_deadline(cx) {
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
        let result = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
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
    /// The connection's own copy of the app, called in place: hyper calls one request at a time per HTTP/1
    /// connection, so no per-request clone of the layer stack is needed.
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
    type Error = Infallible;
    type Future = ConnFuture<S::Future, tower::util::Oneshot<S, Request>>;

    fn call(&self, req: http::Request<Incoming>) -> Self::Future {
        let in_flight = InFlight::new(self.conn.clone());
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
    type Output = Result<http::Response<TrackedBody>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (response, in_flight) = match self.project() {
            ConnFutureProj::Rejected { response, in_flight } => (response.take(), in_flight.take()),
            ConnFutureProj::App { inner, in_flight } => match inner.poll(cx) {
                Poll::Ready(Ok(response)) => (Some(response), in_flight.take()),
                Poll::Ready(Err(never)) => match never {},
                Poll::Pending => return Poll::Pending,
            },
            ConnFutureProj::Waiting { inner, in_flight } => match inner.poll(cx) {
                Poll::Ready(Ok(response)) => (Some(response), in_flight.take()),
                Poll::Ready(Err(never)) => match never {},
                Poll::Pending => return Poll::Pending,
            },
        };
        match (response, in_flight) {
            (Some(response), Some(in_flight)) => {
                Poll::Ready(Ok(response.map(|body| TrackedBody { body, _in_flight: in_flight })))
            }
            _ => panic!("ConnFuture polled after completion"),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response body, holding the in-flight mark until hyper has written (or dropped) it.
    pub struct TrackedBody {
        #[pin]
        body: Body,
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
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
