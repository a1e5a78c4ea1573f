//! upstream: the slow dependency of compare's `upstream` workload. Each runtime's ladder server calls it over
//! HTTP with its platform's pooled client (`GET /ladder/upstream`), so the workload measures what a request
//! that fans out to another service costs each runtime. The service is an instrument, not a contestant: its
//! answer is serialized once at start and each request costs it a route match and a reference count (plus a
//! timer when `--delay` is set).
//!
//! * `GET /upstream`: after `--delay`, 200 with exactly 1,024 bytes of JSON,
//!   `{"service":"upstream","token":"<token>","padding":"xxx…"}`;
//! * `GET /stats`: `{"requests":N,"connections":M}`, the `/upstream` requests answered and the TCP connections
//!   accepted since start, so a test (or compare) can see whether callers keep their connections alive;
//! * `GET /healthz`: `{"status":"ok"}`.
//!
//! Run: `upstream --delay 10ms`, then `curl localhost:3009/upstream`.

pub mod api;
pub mod config;
pub mod document;
pub mod stats;

use std::sync::Arc;

use bytes::Bytes;

pub use config::{Config, DEFAULT_TOKEN, Settings};
pub use document::DOCUMENT_BYTES;

/// The per-worker service factory: the document is serialized here once; each worker gets its own copy of it
/// and its own counters.
pub fn service_factory(settings: Settings) -> impl Fn() -> serve::Handled<api::Upstream> + Send + Sync + 'static {
    let document = document::document(&settings.token);
    let stats = Arc::new(stats::Stats::default());
    move || serve::Handled(api::Upstream::new(Bytes::copy_from_slice(&document), settings.delay, stats.clone()))
}

/// Starts serving on `listeners` (one worker each); tests bind 127.0.0.1:0 and call this.
pub fn start(
    settings: Settings,
    listeners: Vec<std::net::TcpListener>,
    limits: serve::Limits,
) -> std::io::Result<serve::Server> {
    serve::Server::start(listeners, limits, service_factory(settings))
}
