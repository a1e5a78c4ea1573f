//! Static files and the SPA fallback, served after the route table for paths it does not know.
//!
//! Traversal: the raw path is percent-decoded exactly once; any decoded segment that is `..`, or holds a
//! backslash or NUL, is refused; the joined path is canonicalized (symlinks resolved) and must still be inside
//! the dist folder. Double encodings (`%252e`) therefore name a literal file called `%2e`, inside the folder.
//! Conditional GETs: weak ETag from size and mtime, Last-Modified, 304. Precompressed `.br` / `.gz` siblings
//! are served when the client accepts them.

use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use http::header::{
    ACCEPT, ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, ETAG, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, LAST_MODIFIED, VARY,
};
use http::{HeaderValue, Method, StatusCode};
use percent_encoding::percent_decode_str;
use serve::{Body, Request, Response};
use tokio_util::io::ReaderStream;

use crate::middleware::compression::{Encoding, negotiate};

/// Files up to this size are read whole (one syscall, and the response cache can keep them); larger ones
/// stream.
const READ_WHOLE: u64 = 256 * 1024;

pub struct StaticFiles {
    root: PathBuf,
}

enum Lookup {
    Found(PathBuf, std::fs::Metadata),
    Missing,
    Forbidden,
}

impl StaticFiles {
    /// `root` must already be canonical (the config resolves it).
    pub fn new(root: PathBuf) -> Self {
        StaticFiles { root }
    }

    pub async fn serve(&self, req: Request) -> Response {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return serve::not_found();
        }
        let path = req.uri().path();
        match self.lookup(path).await {
            Lookup::Found(file, meta) => self.file(&req, &file, &meta).await,
            Lookup::Forbidden => serve::not_found(),
            Lookup::Missing if wants_spa(&req) => match self.lookup("/index.html").await {
                Lookup::Found(file, meta) => {
                    let mut res = self.file(&req, &file, &meta).await;
                    // The same URL is a 404 for clients that do not take HTML.
                    res.headers_mut().append(VARY, HeaderValue::from_static("Accept"));
                    res
                }
                _ => serve::not_found(),
            },
            Lookup::Missing => serve::not_found(),
        }
    }

    async fn lookup(&self, raw_path: &str) -> Lookup {
        let Some(relative) = sanitize(raw_path) else { return Lookup::Forbidden };
        let mut candidate = self.root.join(&relative);
        let Ok(mut meta) = tokio::fs::metadata(&candidate).await else { return Lookup::Missing };
        if meta.is_dir() {
            candidate.push("index.html");
            match tokio::fs::metadata(&candidate).await {
                Ok(m) => meta = m,
                Err(_) => return Lookup::Missing,
            }
        }
        // Symlinks could still point outside: check where the file really is.
        match tokio::fs::canonicalize(&candidate).await {
            Ok(real) if real.starts_with(&self.root) && meta.is_file() => Lookup::Found(real, meta),
            Ok(_) => Lookup::Forbidden,
            Err(_) => Lookup::Missing,
        }
    }

    async fn file(&self, req: &Request, path: &Path, meta: &std::fs::Metadata) -> Response {
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let mtime = modified.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let etag = format!("W/\"{:x}-{:x}\"", meta.len(), mtime);
        let last_modified = httpdate::fmt_http_date(modified);
        let content_type = content_type(path);

        let mut res = if not_modified(req, &etag, modified) {
            let mut res = Response::new(Body::Empty);
            *res.status_mut() = StatusCode::NOT_MODIFIED;
            res
        } else {
            let (file, encoding, len) = self.pick_variant(req, path, meta).await;
            let body = if req.method() == Method::HEAD {
                Body::Empty
            } else if len <= READ_WHOLE {
                match tokio::fs::read(&file).await {
                    Ok(bytes) => Body::from(bytes),
                    Err(e) => return read_failed(&file, e),
                }
            } else {
                match tokio::fs::File::open(&file).await {
                    Ok(f) => Body::stream(http_body_util::StreamBody::new(futures_util::TryStreamExt::map_ok(
                        ReaderStream::new(f),
                        http_body::Frame::data,
                    ))),
                    Err(e) => return read_failed(&file, e),
                }
            };
            let mut res = Response::new(body);
            let headers = res.headers_mut();
            headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
            if let Some(encoding) = encoding {
                headers.insert(CONTENT_ENCODING, HeaderValue::from_static(encoding.token()));
            }
            res
        };
        let headers = res.headers_mut();
        headers.insert(CONTENT_TYPE, content_type);
        if let Ok(v) = HeaderValue::from_str(&etag) {
            headers.insert(ETAG, v);
        }
        if let Ok(v) = HeaderValue::from_str(&last_modified) {
            headers.insert(LAST_MODIFIED, v);
        }
        headers.insert(VARY, HeaderValue::from_static("Accept-Encoding"));
        // HTML names the hashed assets; it must be revalidated so a deploy shows up.
        if path.extension().is_some_and(|e| e == "html") {
            headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        }
        res
    }

    /// The `.br` or `.gz` sibling when the client takes it and it exists, else the file itself.
    async fn pick_variant(
        &self,
        req: &Request,
        path: &Path,
        meta: &std::fs::Metadata,
    ) -> (PathBuf, Option<Encoding>, u64) {
        let accept = req.headers().get(ACCEPT_ENCODING).and_then(|v| v.to_str().ok()).unwrap_or("");
        let mut offered = Vec::with_capacity(2);
        for (encoding, suffix) in [(Encoding::Brotli, "br"), (Encoding::Gzip, "gz")] {
            let mut sibling = path.as_os_str().to_owned();
            sibling.push(".");
            sibling.push(suffix);
            let sibling = PathBuf::from(sibling);
            if let Ok(m) = tokio::fs::metadata(&sibling).await
                && m.is_file()
            {
                offered.push((encoding, sibling, m.len()));
            }
        }
        let encodings: Vec<Encoding> = offered.iter().map(|(e, _, _)| *e).collect();
        if let Some(chosen) = negotiate(accept, &encodings)
            && let Some((e, sibling, len)) = offered.into_iter().find(|(e, _, _)| *e == chosen)
        {
            return (sibling, Some(e), len);
        }
        (path.to_path_buf(), None, meta.len())
    }
}

fn read_failed(path: &Path, e: std::io::Error) -> Response {
    tracing::error!(path = %path.display(), error = %e, "static file read failed");
    serve::error(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
}

/// The request path as a relative path under the dist folder, or None if it tries to leave it.
fn sanitize(raw: &str) -> Option<PathBuf> {
    let decoded = percent_decode_str(raw).decode_utf8().ok()?;
    let mut out = PathBuf::new();
    for segment in decoded.split('/') {
        if segment.is_empty() || segment == "." {
            continue;
        }
        if segment == ".." || segment.contains('\\') || segment.contains('\0') {
            return None;
        }
        out.push(segment);
    }
    // Belt and braces: whatever was pushed must be plain names.
    out.components().all(|c| matches!(c, Component::Normal(_))).then_some(out)
}

/// SPA fallback: GET/HEAD of a page (last segment without a dot), from a client that takes HTML, outside
/// the API and health routes.
fn wants_spa(req: &Request) -> bool {
    let path = req.uri().path();
    let last = path.rsplit('/').next().unwrap_or("");
    let accepts_html = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("text/html"));
    accepts_html
        && !last.contains('.')
        && !(path == "/api" || path.starts_with("/api/") || path == "/healthz" || path.starts_with("/healthz/"))
}

fn not_modified(req: &Request, etag: &str, modified: SystemTime) -> bool {
    if let Some(tags) = req.headers().get(IF_NONE_MATCH).and_then(|v| v.to_str().ok()) {
        let bare = etag.trim_start_matches("W/");
        return tags.split(',').map(str::trim).any(|t| t == "*" || t.trim_start_matches("W/") == bare);
    }
    req.headers()
        .get(IF_MODIFIED_SINCE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| httpdate::parse_http_date(v).ok())
        .is_some_and(|since| {
            // HTTP dates have one-second resolution.
            let secs = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
            secs(modified) <= secs(since)
        })
}

fn content_type(path: &Path) -> HeaderValue {
    let mime = mime_guess::from_path(path).first_or_octet_stream();
    let text = mime.type_() == "text"
        || matches!(mime.essence_str(), "application/javascript" | "application/json" | "image/svg+xml");
    let value = if text { format!("{}; charset=utf-8", mime.essence_str()) } else { mime.essence_str().to_string() };
    HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static("application/octet-stream"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_refuses_every_traversal_spelling() {
        for raw in [
            "/../etc/passwd",
            "/%2e%2e/x",
            "/..%2fx",
            "/a/..%5cb",
            "/%2E%2E/x",
            "/a%00b",
            "/..\\x",
            "/%2e%2e%2f%2e%2e%2fetc",
        ] {
            assert_eq!(sanitize(raw), None, "{raw}");
        }
        assert_eq!(sanitize("/%252e%252e/x"), Some(PathBuf::from("%2e%2e/x")));
        assert_eq!(sanitize("/assets/app.js"), Some(PathBuf::from("assets/app.js")));
        assert_eq!(sanitize("/./a//b/"), Some(PathBuf::from("a/b")));
    }
}
