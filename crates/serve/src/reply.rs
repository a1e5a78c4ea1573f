//! The future a per-worker tower service returns when most answers are ready at once (a route table hit,
//! a refusal, an inline SQLite read) and some need an await: no box for the former. flight's route handlers
//! return it too, and its router is a service with this future.
//!
//! Not `Send`: each worker polls its connections on its own thread, so handlers may hold `Rc` state (metadata's
//! and ladder's per-worker SQLite connections).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::{Request, Response};

pub enum Reply {
    /// Answered at once.
    Now(std::future::Ready<Result<Response, Infallible>>),
    /// Answered after an await.
    Later(Pin<Box<dyn Future<Output = Response>>>),
}

impl Reply {
    pub fn now(res: Response) -> Reply {
        Reply::Now(std::future::ready(Ok(res)))
    }

    pub fn later(fut: impl Future<Output = Response> + 'static) -> Reply {
        Reply::Later(Box::pin(fut))
    }
}

impl Future for Reply {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Reply::Now(ready) => Pin::new(ready).poll(cx),
            Reply::Later(fut) => fut.as_mut().poll(cx).map(Ok),
        }
    }
}

/// An app that answers every request with a [`Reply`] and is always ready (metadata-rs, ladder-rs, flight's
/// router). [`Handled`] turns it into the tower service a worker runs, so none of them repeats that impl.
pub trait Handler {
    fn handle(&self, req: Request) -> Reply;
}

/// A [`Handler`] as a tower service.
#[derive(Clone)]
pub struct Handled<H>(pub H);

impl<H: Handler> tower::Service<Request> for Handled<H> {
    type Response = Response;
    type Error = Infallible;
    type Future = Reply;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Reply {
        self.0.handle(req)
    }
}
