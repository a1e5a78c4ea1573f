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

use crate::Response;

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
