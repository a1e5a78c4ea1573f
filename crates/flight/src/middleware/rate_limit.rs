//! Fixed-window rate limit per client (default 1200 requests per 60 s). Every response carries
//! RateLimit-Limit / RateLimit-Remaining / RateLimit-Reset; over the limit is 429 with Retry-After.
//! Counts live in Redis when configured (shared by every flight-rs process), in memory otherwise, and in
//! memory while Redis is unreachable: the limiter degrades, it never blocks a request.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::RETRY_AFTER;
use http::{HeaderValue, StatusCode};
use serve::Request;
use tower::ServiceExt;

use bounded_redis::RedisStore;

pub struct Limiter {
    limit: u32,
    window: Duration,
    trust_proxy: bool,
    memory: Mutex<Windows>,
    redis: Option<Arc<RedisStore>>,
}

#[derive(Default)]
struct Windows {
    current: u64,
    counts: HashMap<IpAddr, u32>,
}

/// Counted, and where the window stands.
#[derive(Debug, Clone, Copy)]
pub struct Decision {
    pub count: u32,
    pub reset_secs: u64,
}

impl Limiter {
    pub fn new(limit: u32, window: Duration, trust_proxy: bool, redis: Option<Arc<RedisStore>>) -> Self {
        Limiter { limit, window, trust_proxy, memory: Mutex::new(Windows::default()), redis }
    }

    /// Counts one request from `client` in the current window.
    pub async fn hit(&self, client: Option<IpAddr>) -> Decision {
        let window_ms = self.window.as_millis().max(1) as u64;
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let window = now_ms / window_ms;
        let reset_secs = ((window + 1) * window_ms - now_ms).div_ceil(1000);
        // Requests with no address (a unix socket, or peer tracking off) share one bucket.
        let client = client.unwrap_or(IpAddr::from([0, 0, 0, 0]));
        if let Some(redis) = &self.redis {
            let key = format!("flight:rl:{window}:{client}");
            let mut pipe = redis::pipe();
            pipe.cmd("INCR").arg(&key).cmd("PEXPIRE").arg(&key).arg(window_ms * 2).ignore();
            if let Ok((count,)) = redis.pipeline::<(u32,)>(pipe).await {
                return Decision { count, reset_secs };
            }
        }
        let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        if memory.current != window {
            // A new window: every old count is void, so the whole map goes (this also bounds its size).
            memory.current = window;
            memory.counts.clear();
        }
        let count = memory.counts.entry(client).or_insert(0);
        *count = count.saturating_add(1);
        Decision { count: *count, reset_secs }
    }
}

/// Counts each request against its client's window; over the limit answers 429 without calling the inner
/// service.
#[derive(Clone)]
pub struct RateLimit {
    limiter: Arc<Limiter>,
}

impl RateLimit {
    pub fn new(limiter: Arc<Limiter>) -> Self {
        RateLimit { limiter }
    }
}

impl super::Edge for RateLimit {
    fn call<S: super::Inner>(&self, inner: &mut S, req: Request) -> super::ResponseFuture {
        let limiter = self.limiter.clone();
        let inner = inner.clone();
        Box::pin(async move {
            let client = super::client_ip(&req, limiter.trust_proxy);
            let decision = limiter.hit(client).await;
            let over = decision.count > limiter.limit;
            let mut res = if over {
                let mut res = serve::error(StatusCode::TOO_MANY_REQUESTS, "too many requests");
                res.headers_mut().insert(RETRY_AFTER, HeaderValue::from(decision.reset_secs));
                res
            } else {
                inner.oneshot(req).await?
            };
            let headers = res.headers_mut();
            headers.insert("ratelimit-limit", HeaderValue::from(limiter.limit));
            headers.insert("ratelimit-remaining", HeaderValue::from(limiter.limit.saturating_sub(decision.count)));
            headers.insert("ratelimit-reset", HeaderValue::from(decision.reset_secs));
            Ok(res)
        })
    }
}
