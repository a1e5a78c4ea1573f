//! One log line per request (method, path, status, duration, client). Off by default: a log line per
//! request costs more than the hello handler itself.

use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Instant;

use serve::{Request, Response};

#[derive(Clone, Debug)]
pub struct RequestLogLayer {
    pub trust_proxy: bool,
}

impl<S> tower::Layer<S> for RequestLogLayer {
    type Service = RequestLog<S>;
    fn layer(&self, inner: S) -> RequestLog<S> {
        RequestLog { inner, trust_proxy: self.trust_proxy }
    }
}

#[derive(Clone)]
pub struct RequestLog<S> {
    inner: S,
    trust_proxy: bool,
}

impl<S: super::Inner> tower::Service<Request> for RequestLog<S> {
    type Response = Response;
    type Error = Infallible;
    type Future = super::ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let started = Instant::now();
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let client = super::client_ip(&req, self.trust_proxy);
        let fut = self.inner.call(req);
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
