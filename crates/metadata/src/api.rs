//! The HTTP surface: GET /v1/metadata/{id}?region=R and GET /healthz, as a per-worker tower service.
//!
//! Without Redis a request is answered synchronously, inside `call` (no future is boxed, nothing awaits);
//! with Redis the cache is consulted first and a miss is filled in a spawned task, so the response never
//! waits for the SET.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use serve::{Reply, Request, Response};

use crate::cache::Cache;
use crate::db::{Database, LookupError};
use crate::render::DEFAULT_REGION;

const PREFIX: &str = "/v1/metadata/";
/// Longest region accepted: the longest BCP 47 tags in use are well under this.
const MAX_REGION: usize = 35;

/// One worker's service: its own SQLite connection, and its own Redis connection when caching.
#[derive(Clone)]
pub struct Metadata {
    db: Rc<RefCell<Database>>,
    cache: Option<Arc<Cache>>,
}

impl serve::Handler for Metadata {
    fn handle(&self, req: Request) -> Reply {
        self.answer(&req)
    }
}

impl Metadata {
    pub fn new(db: Database, cache: Option<Cache>) -> Metadata {
        Metadata { db: Rc::new(RefCell::new(db)), cache: cache.map(Arc::new) }
    }

    fn answer(&self, req: &Request) -> Reply {
        let path = req.uri().path();
        if path == "/healthz" {
            if !is_read(req.method()) {
                return Reply::now(serve::method_not_allowed(READ_METHODS));
            }
            return self.health();
        }
        let Some(raw_id) = path.strip_prefix(PREFIX).filter(|rest| !rest.is_empty() && !rest.contains('/')) else {
            return Reply::now(serve::not_found());
        };
        if !is_read(req.method()) {
            return Reply::now(serve::method_not_allowed(READ_METHODS));
        }
        let Some(id) = decode_component(raw_id) else {
            return Reply::now(serve::error(StatusCode::BAD_REQUEST, "malformed id"));
        };
        let Some(region) = region(req.uri().query()) else {
            return Reply::now(serve::error(StatusCode::BAD_REQUEST, "region must be a language tag like en or zh-TW"));
        };
        match &self.cache {
            None => Reply::now(lookup(&self.db, &id, &region).0),
            Some(cache) => {
                let (db, cache) = (self.db.clone(), cache.clone());
                Reply::later(async move {
                    let key = Cache::key(&region, &id);
                    if let Some(body) = cache.get(&key).await {
                        return serve::json_bytes(StatusCode::OK, body);
                    }
                    let (response, fresh) = lookup(&db, &id, &region);
                    if let Some(body) = fresh {
                        tokio::spawn(async move { cache.put(key, body).await });
                    }
                    response
                })
            }
        }
    }

    fn health(&self) -> Reply {
        let sqlite_ok = match self.db.try_borrow_mut() {
            Ok(mut db) => db.check().is_ok(),
            Err(_) => false,
        };
        match &self.cache {
            None => Reply::now(health_response(sqlite_ok, "disabled")),
            Some(cache) => {
                let cache = cache.clone();
                Reply::later(async move {
                    let redis = if cache.healthy().await { "ok" } else { "down" };
                    health_response(sqlite_ok, redis)
                })
            }
        }
    }
}

/// The response, and the body worth caching (a 200's).
fn lookup(db: &RefCell<Database>, id: &str, region: &str) -> (Response, Option<Bytes>) {
    let Ok(mut db) = db.try_borrow_mut() else {
        // Unreachable: nothing holds the borrow across an await. Still not a panic on a request path.
        return (serve::unavailable("database unavailable"), None);
    };
    let mut body = Vec::with_capacity(512);
    match db.lookup(id, region, &mut body) {
        Ok(true) => {
            let body = Bytes::from(body);
            (serve::json_bytes(StatusCode::OK, body.clone()), Some(body))
        }
        Ok(false) => (serve::json_bytes(StatusCode::NOT_FOUND, Bytes::from_static(b"null")), None),
        Err(LookupError::Unavailable(_)) => (serve::unavailable("database unavailable"), None), // logged once by Database
        Err(e @ LookupError::Malformed { .. }) => {
            tracing::error!(error = %e, "stored metadata is malformed");
            (serve::error(StatusCode::INTERNAL_SERVER_ERROR, "stored metadata is malformed"), None)
        }
    }
}

fn health_response(sqlite_ok: bool, redis: &str) -> Response {
    let (status, overall, sqlite) =
        if sqlite_ok { (StatusCode::OK, "ok", "ok") } else { (StatusCode::SERVICE_UNAVAILABLE, "unavailable", "down") };
    let body = format!(r#"{{"status":"{overall}","sqlite":"{sqlite}","redis":"{redis}"}}"#);
    serve::json_bytes(status, body)
}

/// Every path here is read-only.
const READ_METHODS: HeaderValue = HeaderValue::from_static("GET, HEAD");

fn is_read(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

/// `decodeURIComponent`: every `%` must start two hex digits and the result must be UTF-8, else `None`.
/// `+` stays `+`.
pub fn decode_component(raw: &str) -> Option<String> {
    if !raw.contains('%') {
        return Some(raw.to_string());
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hi = (hex[0] as char).to_digit(16)?;
            let lo = (hex[1] as char).to_digit(16)?;
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The first `region` parameter as `URLSearchParams.get` reads it (`+` is a space, bad `%` escapes stay as
/// they are), `en` when absent or empty; `None` when it is not a plausible language tag.
pub fn region(query: Option<&str>) -> Option<String> {
    let value = query.and_then(|q| {
        q.split('&').find_map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (form_decode(name) == "region").then(|| form_decode(value))
        })
    });
    let region = match value {
        None => return Some(DEFAULT_REGION.to_string()),
        Some(v) if v.is_empty() => return Some(DEFAULT_REGION.to_string()),
        Some(v) => v,
    };
    let plausible = region.len() <= MAX_REGION && region.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    plausible.then_some(region)
}

/// application/x-www-form-urlencoded decoding, lenient like the WHATWG URL parser: a `%` not followed by two
/// hex digits is kept literally, invalid UTF-8 becomes U+FFFD.
fn form_decode(raw: &str) -> String {
    if !raw.bytes().any(|b| b == b'%' || b == b'+') {
        return raw.to_string();
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escaped = (b == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| Some(((h[0] as char).to_digit(16)? * 16 + (h[1] as char).to_digit(16)?) as u8));
        match (b, escaped) {
            (b'%', Some(decoded)) => {
                out.push(decoded);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_like_decode_uri_component() {
        assert_eq!(decode_component("abc").as_deref(), Some("abc"));
        assert_eq!(decode_component("a%20b+c").as_deref(), Some("a b+c"));
        assert_eq!(decode_component("%E3%81%82").as_deref(), Some("あ"));
        for bad in ["%", "%2", "%zz", "%E0%A4%A", "%FF", "%C3"] {
            assert_eq!(decode_component(bad), None, "{bad}");
        }
    }

    #[test]
    fn region_parameter() {
        assert_eq!(region(None).as_deref(), Some("en"));
        assert_eq!(region(Some("region=")).as_deref(), Some("en"));
        assert_eq!(region(Some("x=1&region=zh-TW&region=ja")).as_deref(), Some("zh-TW"));
        assert_eq!(region(Some("regio%6E=ko")).as_deref(), Some("ko"));
        assert_eq!(region(Some("region=zh%2DTW")).as_deref(), Some("zh-TW"));
        assert_eq!(region(Some("region")).as_deref(), Some("en"));
        for bad in ["region=a+b", "region=%", "region=x;drop", "region=%C3%A9", &format!("region={}", "a".repeat(36))] {
            assert_eq!(region(Some(bad)), None, "{bad}");
        }
    }
}
