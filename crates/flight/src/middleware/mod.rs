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

use serve::{Request, Response};

pub type ResponseFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// The bound every layer puts on the service it wraps.
pub trait Inner:
    tower::Service<Request, Response = Response, Error = Infallible, Future: Send + 'static> + Clone + Send + 'static
{
}

impl<S> Inner for S where
    S: tower::Service<Request, Response = Response, Error = Infallible, Future: Send + 'static>
        + Clone
        + Send
        + 'static
{
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
