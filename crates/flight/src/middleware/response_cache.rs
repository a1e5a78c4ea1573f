//! Response cache for GET: 2xx responses with a body already in memory (up to 1 MiB), no Set-Cookie, not
//! `private`/`no-store`, not produced for a request carrying Authorization, and not depending on the
//! client's session. Keyed by method, path, query, Accept-Encoding and Accept (the SPA fallback depends on it); served for the TTL (30 s default)
//! with `x-cache: hit`. Entries live in Redis when configured (shared by every process), else in memory,
//! and in memory while Redis is unreachable.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::header::{ACCEPT, ACCEPT_ENCODING, AUTHORIZATION, CACHE_CONTROL, CONNECTION, SET_COOKIE};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use serve::{Body, Request, Response};
use tower::ServiceExt;

use crate::middleware::session::Session;
use bounded_redis::RedisStore;

const X_CACHE: &str = "x-cache";
const MAX_BODY: usize = 1024 * 1024;
const MAX_MEMORY_ENTRIES: usize = 10_000;

/// A stored response.
#[derive(Clone)]
struct Entry {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Entry {
    fn into_response(self) -> Response {
        let mut res = Response::new(Body::Full(self.body));
        *res.status_mut() = self.status;
        *res.headers_mut() = self.headers;
        res.headers_mut().insert(X_CACHE, HeaderValue::from_static("hit"));
        res
    }

    /// status, header count, (name len, name, value len, value)*, body: small and self-delimiting.
    fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(self.body.len() + 256);
        buf.put_u16(self.status.as_u16());
        buf.put_u16(self.headers.len() as u16);
        for (name, value) in &self.headers {
            buf.put_u16(name.as_str().len() as u16);
            buf.put_slice(name.as_str().as_bytes());
            buf.put_u32(value.len() as u32);
            buf.put_slice(value.as_bytes());
        }
        buf.put_slice(&self.body);
        buf.freeze()
    }

    fn decode(mut raw: Bytes) -> Option<Entry> {
        fn take(raw: &mut Bytes, n: usize) -> Option<Bytes> {
            (raw.remaining() >= n).then(|| raw.split_to(n))
        }
        let status = StatusCode::from_u16(take(&mut raw, 2)?.get_u16()).ok()?;
        let count = take(&mut raw, 2)?.get_u16();
        let mut headers = HeaderMap::with_capacity(count as usize);
        for _ in 0..count {
            let len = take(&mut raw, 2)?.get_u16() as usize;
            let name = HeaderName::from_bytes(&take(&mut raw, len)?).ok()?;
            let len = take(&mut raw, 4)?.get_u32() as usize;
            let value = HeaderValue::from_maybe_shared(take(&mut raw, len)?).ok()?;
            headers.append(name, value);
        }
        Some(Entry { status, headers, body: raw })
    }
}

pub struct ResponseCache {
    ttl: Duration,
    redis: Option<Arc<RedisStore>>,
    memory: Mutex<HashMap<String, (Instant, Entry)>>,
}

impl ResponseCache {
    pub fn new(ttl: Duration, redis: Option<Arc<RedisStore>>) -> Self {
        ResponseCache { ttl, redis, memory: Mutex::new(HashMap::new()) }
    }

    async fn get(&self, key: &str) -> Option<Entry> {
        if let Some(redis) = &self.redis {
            // On error, fall through to memory while Redis is away.
            if let Ok(found) =
                redis.query::<Option<Vec<u8>>>(redis::cmd("GET").arg(format!("flight:cache:{key}")).clone()).await
            {
                return found.and_then(|raw| Entry::decode(Bytes::from(raw)));
            }
        }
        let memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        memory.get(key).filter(|(exp, _)| *exp > Instant::now()).map(|(_, e)| e.clone())
    }

    async fn put(&self, key: String, entry: Entry) {
        if let Some(redis) = &self.redis {
            let mut cmd = redis::cmd("SET");
            cmd.arg(format!("flight:cache:{key}"))
                .arg(entry.encode().as_ref())
                .arg("PX")
                .arg(self.ttl.as_millis() as u64);
            if redis.query::<()>(cmd).await.is_ok() {
                return;
            }
        }
        let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if memory.len() >= MAX_MEMORY_ENTRIES {
            memory.retain(|_, (exp, _)| *exp > now);
        }
        if memory.len() < MAX_MEMORY_ENTRIES {
            memory.insert(key, (now + self.ttl, entry));
        }
    }
}

/// Requests the cache may answer or fill: GET without credentials, without `Cache-Control: no-cache`.
fn cache_key(req: &Request) -> Option<String> {
    if req.method() != Method::GET || req.headers().contains_key(AUTHORIZATION) {
        return None;
    }
    let no_cache = req
        .headers()
        .get(CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("no-cache") || v.contains("no-store"));
    if no_cache {
        return None;
    }
    // Accept-Encoding picks the representation; Accept decides whether the SPA fallback answers.
    let header =
        |name| String::from_utf8_lossy(req.headers().get(name).map(|v| v.as_bytes()).unwrap_or(b"")).into_owned();
    Some(format!(
        "GET {}\n{}\n{}",
        req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/"),
        header(ACCEPT_ENCODING),
        header(ACCEPT)
    ))
}

fn storable(res: &Response, session: Option<&Session>) -> Option<Bytes> {
    if !res.status().is_success() || res.headers().contains_key(SET_COOKIE) || session.is_some_and(Session::touched) {
        return None;
    }
    let cache_control = res.headers().get(CACHE_CONTROL).and_then(|v| v.to_str().ok()).unwrap_or("");
    if cache_control.contains("no-store") || cache_control.contains("private") {
        return None;
    }
    match res.body() {
        Body::Full(bytes) if bytes.len() <= MAX_BODY => Some(bytes.clone()),
        Body::Empty => Some(Bytes::new()),
        _ => None,
    }
}

/// Answers cacheable GETs from the cache, and stores what the inner service answers to them.
#[derive(Clone)]
pub struct Cached {
    cache: Arc<ResponseCache>,
}

impl Cached {
    pub fn new(cache: Arc<ResponseCache>) -> Self {
        Cached { cache }
    }
}

impl super::Edge for Cached {
    fn call<S: super::Inner>(&self, inner: &mut S, req: Request) -> super::ResponseFuture {
        let cache = self.cache.clone();
        let inner = inner.clone();
        Box::pin(async move {
            let Some(key) = cache_key(&req) else { return inner.oneshot(req).await };
            if let Some(entry) = cache.get(&key).await {
                return Ok(entry.into_response());
            }
            let session = req.extensions().get::<Session>().cloned();
            let mut res = inner.oneshot(req).await?;
            if let Some(body) = storable(&res, session.as_ref()) {
                let mut headers = res.headers().clone();
                headers.remove(CONNECTION);
                cache.put(key, Entry { status: res.status(), headers, body }).await;
            }
            res.headers_mut().insert(X_CACHE, HeaderValue::from_static("miss"));
            Ok(res)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.append("vary", HeaderValue::from_static("Origin"));
        headers.append("vary", HeaderValue::from_static("Accept-Encoding"));
        let entry = Entry { status: StatusCode::OK, headers, body: Bytes::from_static(b"{\"a\":1}") };
        let back = Entry::decode(entry.encode()).map(|e| (e.status, e.headers.len(), e.body));
        assert_eq!(back, Some((StatusCode::OK, 3, Bytes::from_static(b"{\"a\":1}"))));
        assert!(Entry::decode(Bytes::from_static(b"\x00")).is_none());
    }
}
