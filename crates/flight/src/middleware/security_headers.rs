//! Security headers on every response: nosniff, frame denial, a referrer policy, and a default
//! Content-Security-Policy on HTML. A header the handler set itself is left alone.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::HeaderValue;
use http::header::{CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS};
use serve::{Request, Response};

const NOSNIFF: HeaderValue = HeaderValue::from_static("nosniff");
const DENY: HeaderValue = HeaderValue::from_static("DENY");
const REFERRER: HeaderValue = HeaderValue::from_static("strict-origin-when-cross-origin");
const HTML_CSP: HeaderValue = HeaderValue::from_static(
    "default-src 'self'; base-uri 'self'; object-src 'none'; frame-ancestors 'none'; form-action 'self'",
);

#[derive(Clone, Debug, Default)]
pub struct SecurityHeadersLayer;

impl<S> tower::Layer<S> for SecurityHeadersLayer {
    type Service = SecurityHeaders<S>;
    fn layer(&self, inner: S) -> SecurityHeaders<S> {
        SecurityHeaders { inner }
    }
}

#[derive(Clone)]
pub struct SecurityHeaders<S> {
    inner: S,
}

impl<S: super::Inner> tower::Service<Request> for SecurityHeaders<S> {
    type Response = Response;
    type Error = Infallible;
    // A named future instead of a box: this layer is on the default profile's hot path.
    type Future = WithHeaders<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        WithHeaders { inner: self.inner.call(req) }
    }
}

pin_project_lite::pin_project! {
    pub struct WithHeaders<F> {
        #[pin]
        inner: F,
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for WithHeaders<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Ok(mut res) = std::task::ready!(self.project().inner.poll(cx));
        let headers = res.headers_mut();
        headers.entry(X_CONTENT_TYPE_OPTIONS).or_insert(NOSNIFF);
        headers.entry(X_FRAME_OPTIONS).or_insert(DENY);
        headers.entry(REFERRER_POLICY).or_insert(REFERRER);
        let is_html = headers.get(CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
        if is_html {
            headers.entry(CONTENT_SECURITY_POLICY).or_insert(HTML_CSP);
        }
        Poll::Ready(Ok(res))
    }
}
