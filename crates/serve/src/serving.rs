//! Drives one accepted connection to its end, in whichever protocol it speaks: the hyper connection, the
//! server's shutdown signal (a graceful close: HTTP/1.1 finishes the request in flight, HTTP/2 sends GOAWAY
//! and finishes its open streams), and for HTTP/2 the connection-wide deadlines that end it with a GOAWAY.
//! The worker waits for every [`Serving`] to end, up to its shutdown deadline, through [`Live`].

use std::cell::Cell;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::server::conn::{http1, http2};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;
use tower::Service;

use crate::connection::{ConnHandle, ConnService, IdleIo};
use crate::http2::LocalExec;
use crate::{Request, Response};

/// After an HTTP/2 deadline's GOAWAY, how long the client has to read it (and to acknowledge the PING hyper
/// sends with it) before the socket is closed. Nothing else is owed: an idle connection has no stream open and
/// a stalled one is not taking its responses.
const GOAWAY_GRACE: Duration = Duration::from_secs(1);

type Io<I> = TokioIo<IdleIo<I>>;

pin_project_lite::pin_project! {
    #[project = ProtocolProj]
    pub(crate) enum Protocol<I, S>
    where
        I: AsyncRead,
        I: AsyncWrite,
        I: Unpin,
        I: 'static,
        S: Service<Request, Response = Response, Error = Infallible>,
        S: Clone,
        S: 'static,
    {
        Http1 { #[pin] conn: http1::Connection<Io<I>, ConnService<S>> },
        Http2 { #[pin] conn: http2::Connection<Io<I>, ConnService<S>, LocalExec>, handle: ConnHandle },
    }
}

impl<I, S> Protocol<I, S>
where
    I: AsyncRead + AsyncWrite + Unpin + 'static,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
{
    fn graceful_shutdown(self: Pin<&mut Self>) {
        match self.project() {
            ProtocolProj::Http1 { conn } => conn.graceful_shutdown(),
            ProtocolProj::Http2 { conn, .. } => conn.graceful_shutdown(),
        }
    }
}

pin_project_lite::pin_project! {
    /// One connection being served; ends when the connection does.
    pub(crate) struct Serving<I, S>
    where
        I: AsyncRead,
        I: AsyncWrite,
        I: Unpin,
        I: 'static,
        S: Service<Request, Response = Response, Error = Infallible>,
        S: Clone,
        S: 'static,
    {
        #[pin]
        protocol: Protocol<I, S>,
        // The server's shutdown signal; None once it came and the graceful close began.
        stop: Option<Pin<Box<dyn Future<Output = ()>>>>,
        // An HTTP/2 deadline passed: the GOAWAY is out and the socket closes at this time.
        closing: Option<Pin<Box<tokio::time::Sleep>>>,
        _live: LiveGuard,
    }
}

impl<I, S> Serving<I, S>
where
    I: AsyncRead + AsyncWrite + Unpin + 'static,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
{
    pub(crate) fn new(protocol: Protocol<I, S>, stop: Pin<Box<dyn Future<Output = ()>>>, live: &Live) -> Self {
        Serving { protocol, stop: Some(stop), closing: None, _live: live.guard() }
    }
}

impl<I, S> Future for Serving<I, S>
where
    I: AsyncRead + AsyncWrite + Unpin + 'static,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
{
    /// The connection's own error (bad request bytes, a deadline, a reset): an outcome, not a server failure.
    type Output = Result<(), hyper::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some(stop) = this.stop.as_mut()
            && stop.as_mut().poll(cx).is_ready()
        {
            *this.stop = None;
            this.protocol.as_mut().graceful_shutdown();
        }
        let polled = match this.protocol.as_mut().project() {
            ProtocolProj::Http1 { conn } => conn.poll(cx),
            ProtocolProj::Http2 { conn, .. } => conn.poll(cx),
        };
        if polled.is_ready() {
            return polled;
        }
        if let Some(closing) = this.closing.as_mut() {
            return closing.as_mut().poll(cx).map(|()| Ok(()));
        }
        if let ProtocolProj::Http2 { handle, .. } = this.protocol.as_mut().project()
            && let Poll::Ready(why) = handle.poll_http2_deadline(cx)
        {
            tracing::debug!(reason = why, "closing the HTTP/2 connection");
            this.protocol.as_mut().graceful_shutdown();
            let mut closing = Box::pin(tokio::time::sleep(GOAWAY_GRACE));
            // Registers the wake-up; the GOAWAY itself goes out on the poll below.
            let _ = closing.as_mut().poll(cx);
            *this.closing = Some(closing);
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// The worker's count of connections being served, and the wake-up for whoever waits for it to reach zero.
#[derive(Debug, Default, Clone)]
pub(crate) struct Live(Rc<(Cell<usize>, Notify)>);

impl Live {
    fn guard(&self) -> LiveGuard {
        self.0.0.set(self.0.0.get() + 1);
        LiveGuard(self.clone())
    }

    /// Resolves once no connection is being served.
    pub(crate) async fn drained(&self) {
        loop {
            let notified = self.0.1.notified();
            if self.0.0.get() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Counts one connection as live until dropped.
#[derive(Debug)]
pub(crate) struct LiveGuard(Live);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        let count = &self.0.0.0;
        count.set(count.get() - 1);
        if count.get() == 0 {
            self.0.0.1.notify_waiters();
        }
    }
}
