//! The upstream step: `GET` the configured URL with hyper-util's pooled keep-alive client (the platform's
//! standard client, as `fetch` is Bun's and Node's), read the whole answer, take its `token`. One client per
//! worker, built once: its connection tasks run on that worker's runtime, so a call never hops threads, and
//! its idle connections are reused by every request the worker serves. The whole call (connect, request,
//! body) runs under one deadline.

use std::cell::Cell;
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use http::uri::Scheme;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// The largest upstream answer read (1 MiB); a longer one is a failed call. The peers apply the same limit.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// How long an idle pooled connection is kept: under serve's 5 s keep-alive timeout (the upstream service's),
/// so the client lets a connection go before the server may close it under a request in flight.
const POOL_IDLE: Duration = Duration::from_secs(4);

/// Why a call gave no token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No LADDER_UPSTREAM_URL: 503.
    #[error("no upstream URL is configured")]
    NotConfigured,
    /// Connect error, a non-2xx status, an answer too long, not JSON, or without a string token: 502.
    #[error("upstream call failed: {0}")]
    Failed(String),
    /// The whole call took longer than the timeout: 504.
    #[error("upstream call took longer than {0:?}")]
    TimedOut(Duration),
}

/// The URL the route calls, as ladder-rs reads LADDER_UPSTREAM_URL: http only (the client has no TLS), with a
/// host.
pub fn parse_upstream_url(raw: &str) -> Result<Uri, String> {
    let bad = || format!("LADDER_UPSTREAM_URL: {raw:?} is not an http:// URL with a host");
    let uri: Uri = raw.parse().map_err(|_| bad())?;
    if uri.scheme() != Some(&Scheme::HTTP) || uri.host().is_none_or(str::is_empty) {
        return Err(bad());
    }
    Ok(uri)
}

/// One worker's upstream side.
pub struct Upstream {
    /// The URL and the pooled client; `None` when no URL is configured.
    target: Option<(Uri, Client<HttpConnector, Empty<Bytes>>)>,
    timeout: Duration,
    /// Whether the last call failed, so a run of failures is logged once.
    failing: Cell<bool>,
}

impl Upstream {
    /// Builds the worker's client (no connection is made until the first call). Call on the worker's runtime.
    pub fn new(url: Option<&Uri>, timeout: Duration) -> Upstream {
        let target = url.map(|url| {
            let mut connector = HttpConnector::new();
            // As Node's and Bun's clients do: a small request must not wait on Nagle's algorithm.
            connector.set_nodelay(true);
            let client = Client::builder(TokioExecutor::new())
                .pool_timer(TokioTimer::new())
                .pool_idle_timeout(POOL_IDLE)
                .build(connector);
            (url.clone(), client)
        });
        Upstream { target, timeout, failing: Cell::new(false) }
    }

    /// The upstream answer's token.
    pub async fn token(&self) -> Result<String, CallError> {
        let Some((url, client)) = &self.target else { return Err(CallError::NotConfigured) };
        let outcome = match tokio::time::timeout(self.timeout, call(client, url)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(CallError::TimedOut(self.timeout)),
        };
        match &outcome {
            Ok(_) if self.failing.replace(false) => tracing::info!("upstream answers again"),
            Err(e) if !self.failing.replace(true) => tracing::warn!(error = %e, "upstream call failed; answering 5xx"),
            _ => {}
        }
        outcome
    }
}

/// One GET, its whole body read (a non-2xx one too, so the connection goes back to the pool), then the token.
async fn call(client: &Client<HttpConnector, Empty<Bytes>>, url: &Uri) -> Result<String, CallError> {
    let response = client.get(url.clone()).await.map_err(|e| CallError::Failed(describe(&e)))?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| CallError::Failed(format!("reading the answer: {e}")))?
        .to_bytes();
    if !status.is_success() {
        return Err(CallError::Failed(format!("status {status}")));
    }
    crate::token::token_of(&body).ok_or_else(|| CallError::Failed("the answer has no string token".to_string()))
}

/// The client's error with its cause ("client error (Connect)" alone says little).
fn describe(e: &hyper_util::client::legacy::Error) -> String {
    match std::error::Error::source(e) {
        Some(source) => format!("{e}: {source}"),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_with_a_host() {
        for good in ["http://127.0.0.1:3009/upstream", "http://localhost/upstream?x=1", "http://[::1]:80/"] {
            assert!(parse_upstream_url(good).is_ok(), "{good}");
        }
        for bad in ["https://127.0.0.1/upstream", "127.0.0.1:3009/upstream", "/upstream", "ftp://x/", "http://", ""] {
            assert!(parse_upstream_url(bad).is_err(), "{bad}");
        }
    }
}
