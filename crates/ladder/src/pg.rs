//! The Postgres step: a deadpool-postgres pool per worker (its connections' tasks live on that worker's
//! runtime), the statement prepared once per connection, every step under one deadline so an outage or a
//! frozen server costs a request at most `pg_timeout`, never a hang.

use std::cell::Cell;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

pub const ITEM_SQL: &str = "SELECT name, score FROM ladder_items WHERE id = $1";

/// A Postgres URL as tokio-postgres reads it; the error names the variable but not the URL (it may hold a
/// password).
pub fn parse_database_url(url: &str) -> Result<tokio_postgres::Config, String> {
    url.parse::<tokio_postgres::Config>().map_err(|e| format!("DATABASE_URL: {e}"))
}

/// Which `ladder_items` row a video id reads: the sum of the id's bytes, mod 1000, plus 1 (so 1..=1000). Ids
/// are ASCII (the schema's pattern), so bytes are UTF-16 units and the peers' `charCodeAt` sum is the same.
pub fn item_key(id: &str) -> i32 {
    let sum: u64 = id.bytes().map(u64::from).sum();
    (sum % 1000) as i32 + 1
}

/// One `ladder_items` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub name: String,
    pub score: i32,
}

/// One worker's Postgres side.
pub struct Items {
    pool: Option<Pool>,
    timeout: Duration,
    failing: Cell<bool>,
}

impl Items {
    /// `config: None` (no DATABASE_URL): every read fails, so the rung answers 503.
    pub fn new(config: Option<&tokio_postgres::Config>, pool_size: usize, timeout: Duration) -> Items {
        let pool = config.map(|config| {
            let mut pg = config.clone();
            pg.connect_timeout(timeout);
            pg.options(format!("-c statement_timeout={}", timeout.as_millis()));
            let manager = Manager::from_config(
                pg,
                tokio_postgres::NoTls,
                ManagerConfig { recycling_method: RecyclingMethod::Fast },
            );
            Pool::builder(manager)
                .max_size(pool_size)
                .wait_timeout(Some(timeout))
                .create_timeout(Some(timeout))
                .recycle_timeout(Some(timeout))
                .runtime(Runtime::Tokio1)
                .build()
                .unwrap_or_else(|e| unreachable!("a pool with a runtime always builds: {e}"))
        });
        Items { pool, timeout, failing: Cell::new(false) }
    }

    /// The item `key`, `Ok(None)` when the table has no such row. `Err` (logged once per outage): Postgres is
    /// unreachable, too slow, or the table is missing.
    pub async fn get(&self, key: i32) -> Result<Option<Item>, String> {
        let outcome = match &self.pool {
            None => Err("DATABASE_URL is not set".to_string()),
            Some(pool) => match tokio::time::timeout(self.timeout, read(pool, key)).await {
                Ok(result) => result,
                Err(_) => Err(format!("no answer within {} ms", self.timeout.as_millis())),
            },
        };
        match &outcome {
            Ok(_) if self.failing.replace(false) => tracing::info!("Postgres answers again"),
            Err(e) if !self.failing.replace(true) => tracing::warn!(error = %e, "Postgres unavailable; answering 503"),
            _ => {}
        }
        outcome
    }
}

async fn read(pool: &Pool, key: i32) -> Result<Option<Item>, String> {
    let client = pool.get().await.map_err(|e| format!("postgres pool: {e}"))?;
    let result = match client.prepare_cached(ITEM_SQL).await {
        Ok(stmt) => client.query_opt(&stmt, &[&key]).await,
        Err(e) => Err(e),
    };
    let row = match result {
        Ok(row) => row,
        Err(e) => {
            // Not back into the pool: a connection whose statement failed may hold a stale cached plan (the
            // table was dropped and made again) or be half closed; the next request opens a fresh one.
            drop(deadpool_postgres::Object::take(client));
            return Err(describe(&e));
        }
    };
    let Some(row) = row else { return Ok(None) };
    let name = row.try_get(0).map_err(|e| format!("ladder_items.name: {e}"))?;
    let score = row.try_get(1).map_err(|e| format!("ladder_items.score: {e}"))?;
    Ok(Some(Item { name, score }))
}

/// A tokio-postgres error with its cause ("db error" alone says little).
pub fn describe(e: &tokio_postgres::Error) -> String {
    match (e.as_db_error(), std::error::Error::source(e)) {
        (Some(db), _) => format!("postgres: {}", db.message()),
        (None, Some(source)) => format!("postgres: {e}: {source}"),
        (None, None) => format!("postgres: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_key_is_the_byte_sum_mod_1000_plus_1() {
        assert_eq!(item_key("a"), 98);
        assert_eq!(item_key("abc"), 295);
        // 'z' * 9 = 1098 → 99
        assert_eq!(item_key("zzzzzzzzz"), 99);
        assert_eq!(item_key(&"z".repeat(32)), (122 * 32 % 1000) + 1);
        for id in ["A", "dQw4w9WgXcQ", "___", "-"] {
            assert!((1..=1000).contains(&item_key(id)), "{id}");
        }
    }
}
