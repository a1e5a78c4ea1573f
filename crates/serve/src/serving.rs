//! Drives one accepted connection to its end, in whichever protocol it speaks: the hyper connection, the
//! server's shutdown (a graceful close: HTTP/1.1 finishes the request in flight, HTTP/2 sends GOAWAY and
//! finishes its open streams), and for HTTP/2 the connection-wide deadlines that end it with a GOAWAY.
//!
//! The worker's [`Live`] counts the connections being served, tells them when the server stops, and is what
//! the worker waits on, up to its shutdown deadline. A flag each poll reads, and one waker per connection kept
//! in a slot, rather than a shutdown future per connection: polling a watch channel's `changed()` on every
//! wake of every connection cost HTTP/1.1 about 300 instructions per response (bench/instructions.sh).

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
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

// pin_project_lite takes one bound per line of a where clause: the bounds every type here puts on its connection
// and on its service are named once, as traits that every type with those bounds implements.

/// What a connection is read from and written to: a TCP or TLS stream.
pub(crate) trait Transport: AsyncRead + AsyncWrite + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Unpin + 'static> Transport for T {}

/// The server's service, one clone per connection.
pub(crate) trait AppService:
    Service<Request, Response = Response, Error = Infallible> + Clone + 'static
{
}

impl<T: Service<Request, Response = Response, Error = Infallible> + Clone + 'static> AppService for T {}

pin_project_lite::pin_project! {
    #[project = ProtocolProj]
    pub(crate) enum Protocol<I, S>
    where
        I: Transport,
        S: AppService,
    {
        Http1 { #[pin] conn: http1::Connection<Io<I>, ConnService<S>> },
        Http2 { #[pin] conn: http2::Connection<Io<I>, ConnService<S>, LocalExec>, handle: ConnHandle },
    }
}

impl<I, S> Protocol<I, S>
where
    I: Transport,
    S: AppService,
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
        I: Transport,
        S: AppService,
    {
        #[pin]
        protocol: Protocol<I, S>,
        // The server's shutdown was seen and the graceful close began.
        stopping: bool,
        // The task's waker is in `Live`. Once is enough: a `Serving` is the whole of its spawned task, whose
        // waker does not change between polls.
        registered: bool,
        // An HTTP/2 deadline passed: the GOAWAY is out and the socket closes at this time.
        closing: Option<Pin<Box<tokio::time::Sleep>>>,
        _live: LiveGuard,
    }
}

impl<I, S> Serving<I, S>
where
    I: Transport,
    S: AppService,
{
    pub(crate) fn new(protocol: Protocol<I, S>, live: &Live) -> Self {
        Serving { protocol, stopping: false, registered: false, closing: None, _live: live.guard() }
    }
}

impl<I, S> Future for Serving<I, S>
where
    I: Transport,
    S: AppService,
{
    /// The connection's own error (bad request bytes, a deadline, a reset): an outcome, not a server failure.
    type Output = Result<(), hyper::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if !*this.stopping {
            let live = &this._live;
            if live.0.stopping() {
                *this.stopping = true;
                this.protocol.as_mut().graceful_shutdown();
            } else if !*this.registered {
                live.register(cx.waker());
                *this.registered = true;
            }
        }
        let polled = match this.protocol.as_mut().project() {
            ProtocolProj::Http1 { conn } => conn.poll(cx),
            ProtocolProj::Http2 { conn, handle } => {
                handle.refill_read_budget();
                conn.poll(cx)
            }
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

/// The worker's connections being served: how many, whether the server is stopping, each one's waker (to
/// tell it so), and the wake-up for whoever waits for the count to reach zero.
#[derive(Debug, Default, Clone)]
pub(crate) struct Live(Rc<LiveState>);

#[derive(Debug, Default)]
pub(crate) struct LiveState {
    count: Cell<usize>,
    stopping: Cell<bool>,
    /// One slot per connection being served (reused once it ends), holding the waker of its task.
    wakers: RefCell<Vec<Option<Waker>>>,
    free: RefCell<Vec<usize>>,
    drained: Notify,
}

impl LiveState {
    fn stopping(&self) -> bool {
        self.stopping.get()
    }
}

impl Live {
    fn guard(&self) -> LiveGuard {
        let state = &*self.0;
        state.count.set(state.count.get() + 1);
        let slot = match state.free.borrow_mut().pop() {
            Some(slot) => slot,
            None => {
                let mut wakers = state.wakers.borrow_mut();
                wakers.push(None);
                wakers.len() - 1
            }
        };
        LiveGuard(self.0.clone(), slot)
    }

    /// The server is stopping: every connection is woken to begin its graceful close.
    pub(crate) fn stop(&self) {
        self.0.stopping.set(true);
        let wakers: Vec<Waker> = self.0.wakers.borrow_mut().iter_mut().filter_map(Option::take).collect();
        for waker in wakers {
            waker.wake();
        }
    }

    /// Resolves once no connection is being served.
    pub(crate) async fn drained(&self) {
        loop {
            let notified = self.0.drained.notified();
            if self.0.count.get() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Counts one connection as live, in its slot, until dropped.
#[derive(Debug)]
pub(crate) struct LiveGuard(Rc<LiveState>, usize);

impl LiveGuard {
    /// Keeps the connection's waker for [`Live::stop`].
    fn register(&self, waker: &Waker) {
        self.0.wakers.borrow_mut()[self.1] = Some(waker.clone());
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        let state = &*self.0;
        state.wakers.borrow_mut()[self.1] = None;
        state.free.borrow_mut().push(self.1);
        state.count.set(state.count.get() - 1);
        if state.count.get() == 0 {
            state.drained.notify_waiters();
        }
    }
}
