//! A server on 127.0.0.1:0 with short limits, a handler, and request heads. The tests speak raw HTTP/1.1 through
//! testkit's client (`testkit::http::Conn`), so they control every byte (partial heads, oversized heads,
//! pipelining, bodies never sent) and can watch a connection close.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use serve::{Limits, Request, Response, Server};
use tower::Service;

/// Short limits so timeout tests run in about a second each.
pub fn test_limits() -> Limits {
    Limits {
        workers: 1,
        header_timeout: Duration::from_secs(1),
        keep_alive_timeout: Duration::from_secs(1),
        io_timeout: Duration::from_secs(3),
        max_header_bytes: 8192,
        body_limit: 1024,
        min_data_rate: 500,
        min_data_rate_window: Duration::from_secs(5),
        shutdown_timeout: Duration::from_secs(2),
        peer_addr: false,
        tls: None,
        http2: Some(serve::Http2Limits::DEFAULT),
    }
}

/// Binds `limits.workers` SO_REUSEPORT listeners on 127.0.0.1:0 and starts the server on them.
pub fn start<F, S>(limits: Limits, make_service: F) -> Server
where
    F: Fn() -> S + Send + Sync + 'static,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + 'static,
    S::Future: 'static,
{
    let addr: SocketAddr = "127.0.0.1:0".parse().expect("valid address");
    let listeners = serve::bind_reuseport(addr, limits.workers).expect("bind 127.0.0.1:0");
    Server::start(listeners, limits, make_service).expect("server starts")
}

/// `{"path": "<request path>"}` for every request.
pub async fn hello(req: Request) -> Result<Response, Infallible> {
    Ok(serve::json(http::StatusCode::OK, &serde_json::json!({ "path": req.uri().path() })))
}

/// A GET request head with a Host header and nothing else.
pub fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n")
}
