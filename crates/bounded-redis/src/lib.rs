//! One Redis connection for the whole process, connected lazily and used under a hard deadline.
//!
//! The services this workspace ports hung when Redis was down. Here every command is bounded by the timeout
//! given to [`RedisStore::new`]; a failure flips the store to "down" (one warning), callers take their fallback
//! path, and a reconnect is attempted at most once a second until Redis answers again (one info line on
//! recovery). Used by flight-rs (rate limit, sessions, cache), scribe-rs (schema cache) and metadata-rs
//! (response cache).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("redis unavailable (reconnecting)")]
    Unavailable,
    #[error("redis command timed out")]
    Timeout,
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
}

pub struct RedisStore {
    client: redis::Client,
    timeout: Duration,
    conn: Mutex<Connection>,
    /// Held while connecting, so concurrent first requests wait for one attempt instead of each failing.
    connecting: tokio::sync::Mutex<()>,
    healthy: AtomicBool,
}

#[derive(Default)]
struct Connection {
    manager: Option<ConnectionManager>,
    last_attempt: Option<Instant>,
}

const RECONNECT_EVERY: Duration = Duration::from_secs(1);

impl RedisStore {
    /// The URL was validated with the config, so this only fails on a URL the config let through.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, redis::RedisError> {
        Ok(RedisStore {
            client: redis::Client::open(url)?,
            timeout,
            conn: Mutex::new(Connection::default()),
            connecting: tokio::sync::Mutex::new(()),
            healthy: AtomicBool::new(true),
        })
    }

    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Runs one command against Redis within the deadline.
    pub async fn query<T: redis::FromRedisValue>(&self, cmd: redis::Cmd) -> Result<T, StoreError> {
        let mut manager = self.manager().await?;
        let outcome = tokio::time::timeout(self.timeout, async move { cmd.query_async::<T>(&mut manager).await }).await;
        self.settle(outcome)
    }

    /// Runs a pipeline against Redis within the deadline.
    pub async fn pipeline<T: redis::FromRedisValue>(&self, pipe: redis::Pipeline) -> Result<T, StoreError> {
        let mut manager = self.manager().await?;
        let outcome =
            tokio::time::timeout(self.timeout, async move { pipe.query_async::<T>(&mut manager).await }).await;
        self.settle(outcome)
    }

    fn settle<T>(&self, outcome: Result<redis::RedisResult<T>, tokio::time::error::Elapsed>) -> Result<T, StoreError> {
        match outcome {
            Ok(Ok(value)) => {
                self.mark(true, None);
                Ok(value)
            }
            Ok(Err(e)) => {
                self.mark(false, Some(&e.to_string()));
                Err(StoreError::Redis(e))
            }
            Err(_) => {
                self.mark(false, Some("command timed out"));
                Err(StoreError::Timeout)
            }
        }
    }

    /// PING, for /healthz.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.query::<String>(redis::cmd("PING")).await.map(|_| ())
    }

    fn connected(&self) -> Option<ConnectionManager> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner()).manager.clone()
    }

    async fn manager(&self) -> Result<ConnectionManager, StoreError> {
        if let Some(manager) = self.connected() {
            return Ok(manager);
        }
        let Ok(_connecting) = tokio::time::timeout(self.timeout * 2, self.connecting.lock()).await else {
            return Err(StoreError::Unavailable);
        };
        {
            let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(manager) = &conn.manager {
                return Ok(manager.clone()); // another request connected while this one waited
            }
            if conn.last_attempt.is_some_and(|t| t.elapsed() < RECONNECT_EVERY) {
                return Err(StoreError::Unavailable);
            }
            conn.last_attempt = Some(Instant::now());
        }
        // ConnectionManager reconnects by itself once it has connected; only the first connect is ours.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let attempt =
            tokio::time::timeout(self.timeout * 2, ConnectionManager::new_with_config(self.client.clone(), config))
                .await;
        match attempt {
            Ok(Ok(manager)) => {
                self.conn.lock().unwrap_or_else(|p| p.into_inner()).manager = Some(manager.clone());
                Ok(manager)
            }
            Ok(Err(e)) => {
                self.mark(false, Some(&e.to_string()));
                Err(StoreError::Redis(e))
            }
            Err(_) => {
                self.mark(false, Some("connect timed out"));
                Err(StoreError::Timeout)
            }
        }
    }

    fn mark(&self, ok: bool, why: Option<&str>) {
        let was = self.healthy.swap(ok, Ordering::Relaxed);
        if was && !ok {
            tracing::warn!(
                reason = why.unwrap_or("unknown"),
                "redis unavailable; using in-memory stores until it returns"
            );
        } else if !was && ok {
            tracing::info!("redis is back; using it again");
        }
    }
}
