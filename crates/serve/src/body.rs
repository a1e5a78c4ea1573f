use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::Limited;
use hyper::body::Incoming;

/// Errors carried by streaming bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body that fails once it grows past the configured limit, whatever its framing (chunked bodies
/// have no Content-Length to check up front). The error downcasts to `http_body_util::LengthLimitError`.
pub type RequestBody = Limited<Incoming>;

/// Why a request body could not be read whole; [`BodyError::into_response`] is the answer it deserves.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Longer than the body limit (a chunked body, or one whose Content-Length lied low).
    #[error("request body exceeds the limit of {0} bytes")]
    TooLarge(u64),
    /// It stopped moving for `--io-timeout`, or arrived below `--min-data-rate`.
    #[error("request body arrived too slowly")]
    TooSlow,
    /// Bad chunked framing, or the client closed before the end.
    #[error("could not read the request body")]
    Broken,
}

impl BodyError {
    /// 413 or 408, both closing the connection (the rest of the body will not be read), or 400.
    pub fn into_response(self) -> crate::Response {
        match self {
            BodyError::TooLarge(limit) => crate::payload_too_large(limit),
            BodyError::TooSlow => crate::request_timeout(),
            BodyError::Broken => crate::error(http::StatusCode::BAD_REQUEST, &self.to_string()),
        }
    }

    fn classify(e: &BoxError, limit: u64) -> BodyError {
        if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
            return BodyError::TooLarge(limit);
        }
        // The connection's deadlines fail the socket read with TimedOut; hyper hands that to the body as the
        // source of its own error.
        let timed_out = e
            .downcast_ref::<hyper::Error>()
            .and_then(std::error::Error::source)
            .and_then(|source| source.downcast_ref::<std::io::Error>())
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut);
        if timed_out { BodyError::TooSlow } else { BodyError::Broken }
    }
}

/// The whole request body. `limit` is the body limit the server was started with (it is only reported: the
/// body fails by itself once it passes it).
pub async fn read_body(body: RequestBody, limit: u64) -> Result<Bytes, BodyError> {
    use http_body_util::BodyExt;
    match body.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) => Err(BodyError::classify(&e, limit)),
    }
}

/// The response body of every server here.
///
/// An enum rather than a boxed `dyn Body` so the common case, a small fully-known payload, costs no allocation
/// and reports its exact length (hyper then writes Content-Length instead of chunking).
#[derive(Default)]
pub enum Body {
    #[default]
    Empty,
    Full(Bytes),
    Stream(Pin<Box<dyn http_body::Body<Data = Bytes, Error = BoxError> + Send>>),
}

impl Body {
    pub fn empty() -> Self {
        Body::Empty
    }

    pub fn stream<B>(body: B) -> Self
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        use http_body_util::BodyExt;
        Body::Stream(Box::pin(body.map_err(Into::into)))
    }

    /// The whole payload when it is already in memory.
    pub fn as_full(&self) -> Option<&[u8]> {
        match self {
            Body::Empty => Some(&[]),
            Body::Full(b) => Some(b),
            Body::Stream(_) => None,
        }
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Empty => f.write_str("Body::Empty"),
            Body::Full(b) => write!(f, "Body::Full({} bytes)", b.len()),
            Body::Stream(_) => f.write_str("Body::Stream"),
        }
    }
}

impl From<Bytes> for Body {
    fn from(b: Bytes) -> Self {
        Body::Full(b)
    }
}

impl From<Vec<u8>> for Body {
    fn from(v: Vec<u8>) -> Self {
        Body::Full(Bytes::from(v))
    }
}

impl From<String> for Body {
    fn from(s: String) -> Self {
        Body::Full(Bytes::from(s))
    }
}

impl From<&'static str> for Body {
    fn from(s: &'static str) -> Self {
        Body::Full(Bytes::from_static(s.as_bytes()))
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match this {
            Body::Empty => Poll::Ready(None),
            Body::Full(bytes) => {
                let data = std::mem::take(bytes);
                *this = Body::Empty;
                if data.is_empty() { Poll::Ready(None) } else { Poll::Ready(Some(Ok(Frame::data(data)))) }
            }
            Body::Stream(inner) => inner.as_mut().poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Empty => true,
            Body::Full(b) => b.is_empty(),
            Body::Stream(inner) => inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Empty => SizeHint::with_exact(0),
            Body::Full(b) => SizeHint::with_exact(b.len() as u64),
            Body::Stream(inner) => inner.size_hint(),
        }
    }
}
