//! Flight's edge middleware, one tower layer per module, applied outermost first in this order: request log,
//! security headers, CORS, compression, rate limit, sessions, response cache; then the route table and the
//! static/SPA fallback. Any layer may answer without calling the next (CORS preflight, 429, cache hit).

pub mod compression;
pub mod cors;
pub mod rate_limit;
pub mod request_log;
pub mod response_cache;
pub mod security_headers;
pub mod session;

use std::convert::Infallible;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use serve::{Request, Response};

/// A layer's boxed future. Not `Send`, like [`serve::Reply`] under it: a worker polls its connections on its
/// own thread.
pub type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>>>>;

/// The bound every layer puts on the service it wraps.
pub trait Inner:
    tower::Service<Request, Response = Response, Error = Infallible, Future: 'static> + Clone + Send + 'static
{
}

impl<S> Inner for S where
    S: tower::Service<Request, Response = Response, Error = Infallible, Future: 'static> + Clone + Send + 'static
{
}

/// What one edge middleware does with a request, given the service it wraps (polled ready). The middleware
/// that answer through a boxed future (compression, rate limit, request log, response cache, sessions)
/// implement this and share [`EdgeLayer`] and [`EdgeService`] for the tower plumbing; CORS and the security
/// headers, on the default profile's hot path, keep futures of their own so they cost no allocation.
pub trait Edge: Clone + Send + 'static {
    fn call<S: Inner>(&self, inner: &mut S, req: Request) -> ResponseFuture;
}

/// The tower layer of an [`Edge`]: each service it makes holds its own copy of the edge.
#[derive(Clone, Debug)]
pub struct EdgeLayer<E>(pub E);

impl<S, E: Clone> tower::Layer<S> for EdgeLayer<E> {
    type Service = EdgeService<S, E>;
    fn layer(&self, inner: S) -> EdgeService<S, E> {
        EdgeService { inner, edge: self.0.clone() }
    }
}

/// An [`Edge`] in front of the service it wraps; ready when that service is.
#[derive(Clone)]
pub struct EdgeService<S, E> {
    inner: S,
    edge: E,
}

impl<S: Inner, E: Edge> tower::Service<Request> for EdgeService<S, E> {
    type Response = Response;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> ResponseFuture {
        self.edge.call(&mut self.inner, req)
    }
}

/// The client address used for rate limiting and logs: the leftmost X-Forwarded-For entry when the proxy is
/// trusted (the address the first proxy saw), else the socket peer. Never the header otherwise: anyone can
/// send it.
pub fn client_ip(req: &Request, trust_proxy: bool) -> Option<IpAddr> {
    if trust_proxy {
        let forwarded = req
            .headers()
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .and_then(|v| v.trim().parse::<IpAddr>().ok());
        if forwarded.is_some() {
            return forwarded;
        }
    }
    req.extensions().get::<serve::PeerAddr>().map(|p| p.0.ip())
}
