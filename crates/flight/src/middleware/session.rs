//! Sessions: a signed, HttpOnly, SameSite=Strict cookie carrying a random session id; the data lives
//! server-side (Redis when configured, else memory). Loading is lazy: a request whose handler never touches
//! its session costs no store round trip and gets no cookie. A cookie with a bad signature, or for a session
//! that no longer exists, simply starts a new session. With Redis configured but down, a handler that needs
//! its session gets 503 (falling back to memory would silently fork sessions across processes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use http::HeaderValue;
use http::header::{COOKIE, SET_COOKIE};
use serde_json::{Map, Value};
use serve::{Request, Response};
use sha2::Sha256;
use tower::ServiceExt;

use bounded_redis::RedisStore;

pub const COOKIE_NAME: &str = "flight.sid";
const TTL: Duration = Duration::from_secs(24 * 60 * 60);
const MAX_MEMORY_SESSIONS: usize = 100_000;

#[derive(Debug, thiserror::Error)]
#[error("session store unavailable")]
pub struct SessionUnavailable;

impl SessionUnavailable {
    pub fn response() -> Response {
        serve::unavailable("session store unavailable, retry shortly")
    }
}

/// Expiry and data of a session kept in memory.
type MemorySession = (Instant, Map<String, Value>);

pub struct SessionStore {
    secret: Vec<u8>,
    secure: bool,
    redis: Option<Arc<RedisStore>>,
    memory: Mutex<HashMap<String, MemorySession>>,
}

impl SessionStore {
    /// `secure` adds the cookie's Secure attribute (for deployments behind TLS).
    pub fn new(secret: Vec<u8>, secure: bool, redis: Option<Arc<RedisStore>>) -> Self {
        SessionStore { secret, secure, redis, memory: Mutex::new(HashMap::new()) }
    }

    fn sign(&self, id: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).unwrap_or_else(|_| unreachable_hmac());
        mac.update(id.as_bytes());
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    }

    /// The session id in a cookie value `<id>.<signature>`, if the signature is ours (checked in constant
    /// time).
    fn verify(&self, value: &str) -> Option<String> {
        let (id, sig) = value.split_once('.')?;
        if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return None;
        }
        let sig = URL_SAFE_NO_PAD.decode(sig).ok()?;
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).unwrap_or_else(|_| unreachable_hmac());
        mac.update(id.as_bytes());
        mac.verify_slice(&sig).ok()?;
        Some(id.to_string())
    }

    async fn load(&self, id: &str) -> Result<Option<Map<String, Value>>, SessionUnavailable> {
        if let Some(redis) = &self.redis {
            let raw: Option<String> = redis
                .query(redis::cmd("GET").arg(format!("flight:sess:{id}")).clone())
                .await
                .map_err(|_| SessionUnavailable)?;
            return Ok(raw.and_then(|r| serde_json::from_str(&r).ok()));
        }
        let memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        Ok(memory.get(id).filter(|(exp, _)| *exp > Instant::now()).map(|(_, data)| data.clone()))
    }

    async fn save(&self, id: &str, data: &Map<String, Value>) -> Result<(), SessionUnavailable> {
        if let Some(redis) = &self.redis {
            let json = serde_json::to_string(data).map_err(|_| SessionUnavailable)?;
            let mut cmd = redis::cmd("SET");
            cmd.arg(format!("flight:sess:{id}")).arg(json).arg("EX").arg(TTL.as_secs());
            return redis.query::<()>(cmd).await.map_err(|_| SessionUnavailable);
        }
        let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if memory.len() >= MAX_MEMORY_SESSIONS {
            memory.retain(|_, (exp, _)| *exp > now);
        }
        if memory.len() < MAX_MEMORY_SESSIONS || memory.contains_key(id) {
            memory.insert(id.to_string(), (now + TTL, data.clone()));
        }
        Ok(())
    }
}

fn unreachable_hmac() -> ! {
    // HMAC accepts keys of any length; this cannot happen.
    unreachable!("HMAC-SHA256 rejected a key")
}

/// A request's session, found in the request extensions. Cloning shares it.
#[derive(Clone)]
pub struct Session {
    store: Arc<SessionStore>,
    state: Arc<tokio::sync::Mutex<State>>,
    touched: Arc<AtomicBool>,
}

struct State {
    /// The id from a valid cookie, not yet loaded.
    cookie_id: Option<String>,
    /// Set once loaded (or created): the id and the data.
    loaded: Option<(String, Map<String, Value>)>,
    /// The id is new: the response must set the cookie.
    fresh: bool,
    modified: bool,
}

impl Session {
    /// True once a handler has read or written the session: the response then depends on the client.
    pub fn touched(&self) -> bool {
        self.touched.load(Ordering::Relaxed)
    }

    async fn ensure_loaded<'a>(
        &self,
        state: &'a mut State,
    ) -> Result<&'a mut (String, Map<String, Value>), SessionUnavailable> {
        self.touched.store(true, Ordering::Relaxed);
        if state.loaded.is_none() {
            let existing = match state.cookie_id.take() {
                Some(id) => self.store.load(&id).await?.map(|data| (id, data)),
                None => None,
            };
            state.loaded = Some(match existing {
                Some(found) => found,
                None => {
                    state.fresh = true;
                    (new_id(), Map::new())
                }
            });
        }
        state.loaded.as_mut().ok_or(SessionUnavailable)
    }

    pub async fn get(&self, key: &str) -> Result<Option<Value>, SessionUnavailable> {
        let mut state = self.state.lock().await;
        let (_, data) = self.ensure_loaded(&mut state).await?;
        Ok(data.get(key).cloned())
    }

    pub async fn insert(&self, key: &str, value: Value) -> Result<(), SessionUnavailable> {
        let mut state = self.state.lock().await;
        let (_, data) = self.ensure_loaded(&mut state).await?;
        data.insert(key.to_string(), value);
        state.modified = true;
        Ok(())
    }
}

fn new_id() -> String {
    let bytes: [u8; 24] = rand::random();
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The value of cookie `name` in the request's Cookie headers.
fn cookie<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.trim_matches('"'))
}

/// Gives each request a [`Session`] (in its extensions), saves it after the answer when it changed, and
/// sets the cookie for a new one.
#[derive(Clone)]
pub struct Sessions {
    store: Arc<SessionStore>,
}

impl Sessions {
    pub fn new(store: Arc<SessionStore>) -> Self {
        Sessions { store }
    }
}

impl super::Edge for Sessions {
    fn call<S: super::Inner>(&self, inner: &mut S, mut req: Request) -> super::ResponseFuture {
        let cookie_id = cookie(&req, COOKIE_NAME).and_then(|v| self.store.verify(v));
        let session = Session {
            store: self.store.clone(),
            state: Arc::new(tokio::sync::Mutex::new(State { cookie_id, loaded: None, fresh: false, modified: false })),
            touched: Arc::new(AtomicBool::new(false)),
        };
        req.extensions_mut().insert(session.clone());
        let inner = inner.clone();
        Box::pin(async move {
            let mut res = inner.oneshot(req).await?;
            if !session.touched() {
                return Ok(res);
            }
            let state = session.state.lock().await;
            let Some((id, data)) = &state.loaded else { return Ok(res) };
            if state.modified && session.store.save(id, data).await.is_err() {
                return Ok(SessionUnavailable::response());
            }
            if state.fresh && state.modified {
                let cookie = format!(
                    "{COOKIE_NAME}={id}.{}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict{}",
                    session.store.sign(id),
                    TTL.as_secs(),
                    if session.store.secure { "; Secure" } else { "" }
                );
                if let Ok(value) = HeaderValue::from_str(&cookie) {
                    res.headers_mut().append(SET_COOKIE, value);
                }
            }
            Ok(res)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_and_tampering_fails() {
        let store = SessionStore::new(b"k".repeat(32), false, None);
        let id = new_id();
        let value = format!("{id}.{}", store.sign(&id));
        assert_eq!(store.verify(&value).as_deref(), Some(id.as_str()));
        let mut tampered = value.clone().into_bytes();
        tampered[3] = if tampered[3] == b'A' { b'B' } else { b'A' };
        assert_eq!(store.verify(std::str::from_utf8(&tampered).unwrap_or("")), None);
        assert_eq!(store.verify("garbage"), None);
        assert_eq!(store.verify(&format!("{id}.")), None);
        let other = SessionStore::new(b"x".repeat(32), false, None);
        assert_eq!(other.verify(&value), None);
    }
}
