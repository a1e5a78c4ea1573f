//! Response compression: br, zstd, gzip or deflate, chosen by the request's Accept-Encoding q-values (ties go
//! to the better codec), for bodies of at least the threshold (1024 bytes by default) or of unknown length.
//! Skips responses that are already encoded, already-compressed media types, `Cache-Control: no-transform`,
//! HEAD, and bodiless statuses. Streams through async-compression: nothing is buffered whole.

use async_compression::Level;
use async_compression::tokio::bufread::{BrotliEncoder, GzipEncoder, ZlibEncoder, ZstdEncoder};
use futures_util::TryStreamExt;
use http::header::{ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, VARY};
use http::{HeaderValue, Method, StatusCode};
use http_body::Body as _;
use http_body_util::BodyDataStream;
use serve::{Body, Request, Response};
use tokio_util::io::{ReaderStream, StreamReader};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Brotli,
    Zstd,
    Gzip,
    Deflate,
}

impl Encoding {
    pub fn token(self) -> &'static str {
        match self {
            Encoding::Brotli => "br",
            Encoding::Zstd => "zstd",
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
        }
    }

    /// Server preference when q-values tie: best ratio per CPU first.
    const PREFERENCE: [Encoding; 4] = [Encoding::Brotli, Encoding::Zstd, Encoding::Gzip, Encoding::Deflate];
}

/// Picks the encoding for an Accept-Encoding value: highest q wins, ties by server preference, `q=0` refuses,
/// `*` stands for any codec not named. `None` means identity.
pub fn negotiate(accept: &str, offered: &[Encoding]) -> Option<Encoding> {
    let mut best: Option<(u16, usize, Encoding)> = None;
    for (rank, &encoding) in Encoding::PREFERENCE.iter().enumerate() {
        if !offered.contains(&encoding) {
            continue;
        }
        let q = quality(accept, encoding.token()).or_else(|| quality(accept, "*")).unwrap_or(0);
        if q == 0 {
            continue;
        }
        if best.is_none_or(|(bq, brank, _)| q > bq || (q == bq && rank < brank)) {
            best = Some((q, rank, encoding));
        }
    }
    best.map(|(_, _, e)| e)
}

/// The q-value (0..=1000) given to `token`, or None when it is not listed.
fn quality(accept: &str, token: &str) -> Option<u16> {
    accept.split(',').find_map(|item| {
        let mut parts = item.split(';');
        let name = parts.next()?.trim();
        if !name.eq_ignore_ascii_case(token) {
            return None;
        }
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
            .next()
            .map(parse_q)
            .unwrap_or(1000);
        Some(q)
    })
}

fn parse_q(raw: &str) -> u16 {
    match raw.trim().parse::<f32>() {
        Ok(q) if (0.0..=1.0).contains(&q) => (q * 1000.0).round() as u16,
        _ => 0,
    }
}

const ALL: [Encoding; 4] = Encoding::PREFERENCE;

/// Media types that are already compressed; compressing them again wastes CPU for nothing.
fn already_compressed(content_type: &[u8]) -> bool {
    let ct = std::str::from_utf8(content_type).unwrap_or("").to_ascii_lowercase();
    let essence = ct.split(';').next().unwrap_or("").trim();
    (essence.starts_with("image/") && essence != "image/svg+xml")
        || essence.starts_with("video/")
        || essence.starts_with("audio/")
        || matches!(
            essence,
            "application/zip"
                | "application/gzip"
                | "application/x-gzip"
                | "application/zstd"
                | "application/x-brotli"
                | "application/x-7z-compressed"
                | "application/x-rar-compressed"
                | "application/pdf"
                | "application/wasm"
                | "font/woff"
                | "font/woff2"
                | "text/event-stream"
        )
}

/// Compresses answers of at least `threshold` bytes (or of unknown length).
#[derive(Clone, Debug)]
pub struct Compression {
    threshold: u64,
}

impl Compression {
    pub fn new(threshold: u64) -> Self {
        Compression { threshold }
    }
}

impl super::Edge for Compression {
    fn call<S: super::Inner>(&self, inner: &mut S, req: Request) -> super::ResponseFuture {
        let encoding = if req.method() == Method::HEAD {
            None
        } else {
            req.headers().get(ACCEPT_ENCODING).and_then(|v| v.to_str().ok()).and_then(|v| negotiate(v, &ALL))
        };
        let threshold = self.threshold;
        let fut = inner.call(req);
        Box::pin(async move {
            let Ok(res) = fut.await;
            Ok(compress(res, encoding, threshold))
        })
    }
}

fn compress(mut res: Response, encoding: Option<Encoding>, threshold: u64) -> Response {
    let status = res.status();
    if status.is_informational() || status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        return res;
    }
    let headers = res.headers();
    if headers.contains_key(CONTENT_ENCODING)
        || headers.get(CONTENT_TYPE).is_some_and(|ct| already_compressed(ct.as_bytes()))
        || headers
            .get(CACHE_CONTROL)
            .is_some_and(|cc| cc.to_str().unwrap_or("").to_ascii_lowercase().contains("no-transform"))
    {
        return res;
    }
    if res.body().size_hint().exact().is_some_and(|len| len < threshold) {
        return res;
    }
    // The response could have been compressed: caches must key on Accept-Encoding from here on.
    res.headers_mut().append(VARY, HeaderValue::from_static("Accept-Encoding"));
    let Some(encoding) = encoding else { return res };
    let (mut parts, body) = res.into_parts();
    let reader = StreamReader::new(BodyDataStream::new(body).map_err(std::io::Error::other));
    // Level 4 brotli/zstd-3-like defaults: on-the-fly compression where CPU per response matters.
    let level = Level::Precise(4);
    let body = match encoding {
        Encoding::Brotli => Body::stream(stream_body(BrotliEncoder::with_quality(reader, level))),
        Encoding::Zstd => Body::stream(stream_body(ZstdEncoder::with_quality(reader, Level::Default))),
        Encoding::Gzip => Body::stream(stream_body(GzipEncoder::with_quality(reader, Level::Default))),
        // HTTP's "deflate" is the zlib format (RFC 9110 §8.4.1.2), not raw deflate.
        Encoding::Deflate => Body::stream(stream_body(ZlibEncoder::with_quality(reader, Level::Default))),
    };
    parts.headers.remove(CONTENT_LENGTH);
    parts.headers.insert(CONTENT_ENCODING, HeaderValue::from_static(encoding.token()));
    Response::from_parts(parts, body)
}

fn stream_body<R>(
    reader: R,
) -> http_body_util::StreamBody<impl futures_util::Stream<Item = std::io::Result<http_body::Frame<bytes::Bytes>>>>
where
    R: tokio::io::AsyncRead + Send + 'static,
{
    http_body_util::StreamBody::new(ReaderStream::new(reader).map_ok(http_body::Frame::data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_q_values_and_preference() {
        assert_eq!(negotiate("gzip, deflate, br", &ALL), Some(Encoding::Brotli));
        assert_eq!(negotiate("gzip;q=1.0, br;q=0.5", &ALL), Some(Encoding::Gzip));
        assert_eq!(negotiate("br;q=0, gzip", &ALL), Some(Encoding::Gzip));
        assert_eq!(negotiate("*", &ALL), Some(Encoding::Brotli));
        assert_eq!(negotiate("*;q=0", &ALL), None);
        assert_eq!(negotiate("identity", &ALL), None);
        assert_eq!(negotiate("zstd, gzip;q=0.9", &ALL), Some(Encoding::Zstd));
        assert_eq!(negotiate("GZIP;Q=0.8", &ALL), Some(Encoding::Gzip));
        assert_eq!(negotiate("gzip;q=abc", &ALL), None);
        assert_eq!(negotiate("", &ALL), None);
    }
}
