//! One log line per request (method, path, status, duration, client). Off by default: a log line per
//! request costs more than the hello handler itself.

use std::time::Instant;

use serve::Request;

#[derive(Clone, Debug)]
pub struct RequestLog {
    /// Whether the logged client may come from X-Forwarded-For (see [`super::client_ip`]).
    pub trust_proxy: bool,
}

impl super::Edge for RequestLog {
    fn call<S: super::Inner>(&self, inner: &mut S, req: Request) -> super::ResponseFuture {
        let started = Instant::now();
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let client = super::client_ip(&req, self.trust_proxy);
        let fut = inner.call(req);
        Box::pin(async move {
            let Ok(res) = fut.await;
            tracing::info!(
                target: "request",
                %method,
                path = %path.escape_debug(),
                status = res.status().as_u16(),
                micros = started.elapsed().as_micros() as u64,
                client = client.map(|c| c.to_string()).unwrap_or_default(),
            );
            Ok(res)
        })
    }
}
