//! The HTTP surface, as a per-worker service. Every answer but a delayed `/upstream` is ready inside `call`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use serve::{Reply, Request};

use crate::stats::{Counters, Stats};

const HEALTH_OK: &[u8] = br#"{"status":"ok"}"#;

/// One worker's service. Its `Clone` counts a connection: serve's worker clones its service exactly once per
/// accepted TCP connection (the connection's own copy, called in place for each of its requests), and that is
/// the one place a connection shows up without a hook in serve. The upstream crate's tests check that N
/// connections count N and that requests on one connection count one.
pub struct Upstream {
    /// The worker's own copy of the document: a clone per answer is a reference count no other thread bumps.
    document: Bytes,
    delay: Duration,
    counters: Arc<Counters>,
    stats: Arc<Stats>,
}

impl Upstream {
    /// The service a worker starts with; it counts in its own `counters`, which `stats` sums.
    pub fn new(document: Bytes, delay: Duration, stats: Arc<Stats>) -> Upstream {
        let counters = stats.register();
        Upstream { document, delay, counters, stats }
    }
}

impl Clone for Upstream {
    fn clone(&self) -> Self {
        self.counters.connection();
        Upstream {
            document: self.document.clone(),
            delay: self.delay,
            counters: self.counters.clone(),
            stats: self.stats.clone(),
        }
    }
}

impl serve::Handler for Upstream {
    fn handle(&self, req: Request) -> Reply {
        let method = req.method();
        if method != Method::GET && method != Method::HEAD {
            return Reply::now(match req.uri().path() {
                "/upstream" | "/stats" | "/healthz" => serve::method_not_allowed(HeaderValue::from_static("GET, HEAD")),
                _ => serve::not_found(),
            });
        }
        match req.uri().path() {
            "/upstream" => self.upstream(),
            "/stats" => Reply::now(serve::json_bytes(StatusCode::OK, self.stats.totals().to_json())),
            "/healthz" => Reply::now(serve::json_bytes(StatusCode::OK, Bytes::from_static(HEALTH_OK))),
            _ => Reply::now(serve::not_found()),
        }
    }
}

impl Upstream {
    /// The document, after the delay. The delay is a timer on the worker's runtime, so requests wait side by
    /// side; with none, the answer is ready at once and nothing is boxed.
    fn upstream(&self) -> Reply {
        if self.delay.is_zero() {
            self.counters.request();
            return Reply::now(serve::json_bytes(StatusCode::OK, self.document.clone()));
        }
        let (document, delay, counters) = (self.document.clone(), self.delay, self.counters.clone());
        Reply::later(async move {
            tokio::time::sleep(delay).await;
            counters.request();
            serve::json_bytes(StatusCode::OK, document)
        })
    }
}
