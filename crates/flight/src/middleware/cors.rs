//! CORS with an origin allowlist. `*` (the default) allows any origin without credentials and, like Flight,
//! sends `Access-Control-Allow-Origin: *` on every response, so the response does not depend on the request's
//! Origin and caches need no Vary. A list allows exactly those origins, echoes the matching one, and adds
//! `Vary: Origin` to every response so caches keep them apart. An
//! origin outside the list gets no allow header at all (the browser then blocks it). Preflights are answered
//! here with 204; misconfiguration (credentials with `*`) is refused at startup, never a panic at runtime.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::{
    ACCESS_CONTROL_ALLOW_CREDENTIALS, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS, ACCESS_CONTROL_REQUEST_METHOD,
    ORIGIN, VARY,
};
use http::{HeaderValue, Method, StatusCode};
use serve::{Body, Request, Response};

use crate::config::Origins;

const ANY: HeaderValue = HeaderValue::from_static("*");
const TRUE: HeaderValue = HeaderValue::from_static("true");
const METHODS: HeaderValue = HeaderValue::from_static("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
const DEFAULT_HEADERS: HeaderValue = HeaderValue::from_static("Content-Type, Authorization, X-Requested-With");
const MAX_AGE: HeaderValue = HeaderValue::from_static("600");
const VARY_ORIGIN: HeaderValue = HeaderValue::from_static("Origin");
const VARY_PREFLIGHT: HeaderValue =
    HeaderValue::from_static("Origin, Access-Control-Request-Method, Access-Control-Request-Headers");

#[derive(Clone, Debug)]
pub struct CorsLayer {
    policy: Arc<Policy>,
}

#[derive(Debug)]
struct Policy {
    origins: Origins,
    credentials: bool,
}

impl CorsLayer {
    pub fn new(origins: Origins, credentials: bool) -> Self {
        CorsLayer { policy: Arc::new(Policy { origins, credentials }) }
    }
}

impl<S> tower::Layer<S> for CorsLayer {
    type Service = Cors<S>;
    fn layer(&self, inner: S) -> Cors<S> {
        Cors { inner, policy: self.policy.clone() }
    }
}

#[derive(Clone)]
pub struct Cors<S> {
    inner: S,
    policy: Arc<Policy>,
}

impl Policy {
    /// The Access-Control-Allow-Origin value for this request's Origin, if it is allowed.
    fn allow_origin(&self, origin: Option<&HeaderValue>) -> Option<HeaderValue> {
        match &self.origins {
            Origins::Any => Some(ANY),
            Origins::List(list) => origin.and_then(|origin| list.iter().find(|o| *o == origin).cloned()),
        }
    }

    fn varies(&self) -> bool {
        matches!(self.origins, Origins::List(_))
    }

    fn preflight(&self, req: &Request) -> Response {
        let mut res = Response::new(Body::Empty);
        *res.status_mut() = StatusCode::NO_CONTENT;
        let headers = res.headers_mut();
        headers.insert(VARY, VARY_PREFLIGHT);
        if let Some(allow) = self.allow_origin(req.headers().get(ORIGIN)) {
            headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, allow);
            headers.insert(ACCESS_CONTROL_ALLOW_METHODS, METHODS);
            // Echo the requested headers only when they are a plain token list; otherwise the defaults.
            let requested = req
                .headers()
                .get(ACCESS_CONTROL_REQUEST_HEADERS)
                .filter(|v| v.as_bytes().iter().all(|b| b.is_ascii_alphanumeric() || b"-_, ".contains(b)))
                .cloned();
            headers.insert(ACCESS_CONTROL_ALLOW_HEADERS, requested.unwrap_or(DEFAULT_HEADERS));
            headers.insert(ACCESS_CONTROL_MAX_AGE, MAX_AGE);
            if self.credentials {
                headers.insert(ACCESS_CONTROL_ALLOW_CREDENTIALS, TRUE);
            }
        }
        res
    }
}

impl<S: super::Inner> tower::Service<Request> for Cors<S> {
    type Response = Response;
    type Error = Infallible;
    type Future = CorsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let is_preflight = req.method() == Method::OPTIONS
            && req.headers().contains_key(ORIGIN)
            && req.headers().contains_key(ACCESS_CONTROL_REQUEST_METHOD);
        if is_preflight {
            return CorsFuture::Preflight { response: Some(self.policy.preflight(&req)) };
        }
        let allow = self.policy.allow_origin(req.headers().get(ORIGIN));
        CorsFuture::Actual {
            inner: self.inner.call(req),
            allow,
            credentials: self.policy.credentials,
            vary: self.policy.varies(),
        }
    }
}

pin_project_lite::pin_project! {
    #[project = CorsProj]
    pub enum CorsFuture<F> {
        Preflight { response: Option<Response> },
        Actual { #[pin] inner: F, allow: Option<HeaderValue>, credentials: bool, vary: bool },
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for CorsFuture<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            CorsProj::Preflight { response } => Poll::Ready(Ok(response.take().unwrap_or_else(serve::not_found))),
            CorsProj::Actual { inner, allow, credentials, vary } => {
                let Ok(mut res) = std::task::ready!(inner.poll(cx));
                let headers = res.headers_mut();
                if *vary {
                    headers.append(VARY, VARY_ORIGIN);
                }
                if let Some(allow) = allow.take() {
                    headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, allow);
                    if *credentials {
                        headers.insert(ACCESS_CONTROL_ALLOW_CREDENTIALS, TRUE);
                    }
                }
                Poll::Ready(Ok(res))
            }
        }
    }
}
