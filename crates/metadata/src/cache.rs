//! Cache-aside of rendered responses in Redis, per id and region, with a TTL.
//!
//! Every command runs under the bounded-redis deadline; when Redis is slow or down the request goes straight
//! to SQLite (which answers in microseconds anyway), and bounded-redis retries the connection at most once a
//! second, so an outage costs no request more than one timeout. Only 200 bodies are stored: an absent id
//! costs a GET and a lookup, and cannot fill Redis with keys an attacker makes up.

use std::time::Duration;

use bounded_redis::RedisStore;
use bytes::Bytes;

pub struct Cache {
    store: RedisStore,
    ttl_secs: u64,
}

impl Cache {
    pub fn new(url: &str, ttl: Duration, timeout: Duration) -> Result<Cache, redis::RedisError> {
        Ok(Cache { store: RedisStore::new(url, timeout)?, ttl_secs: ttl.as_secs().max(1) })
    }

    /// `metadata:v1:<region>:<id>`. The region is validated to `[A-Za-z0-9-]`, so the first `:` after it
    /// ends it and no two (region, id) pairs share a key.
    pub fn key(region: &str, id: &str) -> String {
        let mut key = String::with_capacity(16 + region.len() + id.len());
        key.push_str("metadata:v1:");
        key.push_str(region);
        key.push(':');
        key.push_str(id);
        key
    }

    /// The cached body, or `None` on a miss or when Redis cannot answer in time.
    pub async fn get(&self, key: &str) -> Option<Bytes> {
        match self.store.query::<Option<Vec<u8>>>(redis::cmd("GET").arg(key).clone()).await {
            Ok(hit) => hit.map(Bytes::from),
            Err(_) => None, // bounded-redis logged the failure once; SQLite answers
        }
    }

    pub async fn put(&self, key: String, body: Bytes) {
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(body.as_ref()).arg("EX").arg(self.ttl_secs);
        let _ = self.store.query::<()>(cmd).await;
    }

    pub async fn healthy(&self) -> bool {
        self.store.ping().await.is_ok()
    }
}
