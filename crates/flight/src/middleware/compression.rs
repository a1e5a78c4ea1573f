//! Response compression: br, zstd, gzip or deflate, chosen by the request's Accept-Encoding q-values (ties go
//! to the better codec), for bodies of at least the threshold (1024 bytes by default) or of unknown length.
//! Skips responses that are already encoded, already-compressed media types, `Cache-Control: no-transform`,
//! HEAD, and bodiless statuses. A body already in memory (a route's JSON, a cached or small static file) is
//! compressed in one call into an exact-length body: the streaming encoders' buffers, polls and chunked
//! framing cost more than the compression itself on a 2 KB answer. Streamed bodies stream through
//! async-compression, never buffered whole.

use std::cell::RefCell;
use std::io::Write;

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
    let body = match body {
        Body::Full(bytes) => match compress_whole(&bytes, encoding) {
            Ok(compressed) => {
                parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(compressed.len()));
                Body::Full(compressed.into())
            }
            // Writing into a Vec does not fail; should a codec refuse, the answer goes out as it was.
            Err(e) => {
                tracing::error!(error = %e, encoding = encoding.token(), "compression failed");
                return Response::from_parts(parts, Body::Full(bytes));
            }
        },
        body => {
            parts.headers.remove(CONTENT_LENGTH);
            compress_stream(body, encoding)
        }
    };
    parts.headers.insert(CONTENT_ENCODING, HeaderValue::from_static(encoding.token()));
    Response::from_parts(parts, body)
}

// The same levels in both paths: brotli 4 (on-the-fly, where CPU per response matters), zstd 3, and level 6
// for gzip and deflate (zlib's default, what Bun.gzipSync and node:zlib use).
const BROTLI_QUALITY: u32 = 4;
const BROTLI_WINDOW_BITS: u32 = 22;
const ZSTD_LEVEL: i32 = 3;

thread_local! {
    /// A libdeflate compressor's state is a few hundred KiB: one per worker thread, not one per response.
    static DEFLATE: RefCell<libdeflater::Compressor> =
        RefCell::new(libdeflater::Compressor::new(libdeflater::CompressionLvl::default()));
}

fn compress_whole(data: &[u8], encoding: Encoding) -> std::io::Result<Vec<u8>> {
    match encoding {
        Encoding::Brotli => {
            let out = Vec::with_capacity(data.len() / 2 + 64);
            let mut w = brotli::CompressorWriter::new(out, 4096, BROTLI_QUALITY, BROTLI_WINDOW_BITS);
            w.write_all(data)?;
            w.flush()?;
            Ok(w.into_inner())
        }
        Encoding::Zstd => zstd::bulk::compress(data, ZSTD_LEVEL),
        // HTTP's "deflate" is the zlib format (RFC 9110 §8.4.1.2), not raw deflate.
        Encoding::Gzip | Encoding::Deflate => DEFLATE.with_borrow_mut(|c| {
            let gzip = encoding == Encoding::Gzip;
            let mut out =
                vec![0; if gzip { c.gzip_compress_bound(data.len()) } else { c.zlib_compress_bound(data.len()) }];
            let written = if gzip { c.gzip_compress(data, &mut out) } else { c.zlib_compress(data, &mut out) }
                .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
            out.truncate(written);
            Ok(out)
        }),
    }
}

fn compress_stream(body: Body, encoding: Encoding) -> Body {
    let reader = StreamReader::new(BodyDataStream::new(body).map_err(std::io::Error::other));
    match encoding {
        Encoding::Brotli => {
            Body::stream(stream_body(BrotliEncoder::with_quality(reader, Level::Precise(BROTLI_QUALITY as i32))))
        }
        Encoding::Zstd => Body::stream(stream_body(ZstdEncoder::with_quality(reader, Level::Precise(ZSTD_LEVEL)))),
        Encoding::Gzip => Body::stream(stream_body(GzipEncoder::with_quality(reader, Level::Default))),
        Encoding::Deflate => Body::stream(stream_body(ZlibEncoder::with_quality(reader, Level::Default))),
    }
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
