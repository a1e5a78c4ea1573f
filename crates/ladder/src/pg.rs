//! The Postgres step: one pipelined connection per worker ([`pg_reader::Reader`], shared with scribe-rs),
//! the statement prepared once on it, the whole step under one deadline, so an outage or a frozen server
//! costs a request at most `pg_timeout`, never a hang.

use std::cell::Cell;
use std::time::Duration;

use pg_reader::{ReadError, Reader};

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
    reader: Option<Reader>,
    /// Whether the last read was refused by PostgreSQL (no table), so such a run is logged once.
    refused: Cell<bool>,
}

impl Items {
    /// `config: None` (no DATABASE_URL): every read fails, so the rung answers 503.
    pub fn new(config: Option<&tokio_postgres::Config>, timeout: Duration) -> Items {
        let reader = config.map(|config| {
            let mut pg = config.clone();
            pg.connect_timeout(timeout);
            pg.options(format!("-c statement_timeout={}", timeout.as_millis()));
            Reader::new(pg, timeout)
        });
        Items { reader, refused: Cell::new(false) }
    }

    /// The item `key`, `Ok(None)` when the table has no such row. `Err` (the reader logs an outage once):
    /// Postgres is unreachable, too slow, or the table is missing.
    pub async fn get(&self, key: i32) -> Result<Option<Item>, String> {
        let Some(reader) = &self.reader else { return Err("DATABASE_URL is not set".to_string()) };
        let row = match reader.query_opt(ITEM_SQL, &[&key]).await {
            Ok(row) => {
                if self.refused.replace(false) {
                    tracing::info!("ladder_items reads again");
                }
                row
            }
            Err(ReadError::Query(e)) => {
                let message = describe(&e);
                if !self.refused.replace(true) {
                    tracing::warn!(error = %message, "ladder_items read failed; answering 503");
                }
                return Err(message);
            }
            Err(e @ ReadError::Unreachable(_)) => return Err(e.to_string()),
        };
        let Some(row) = row else { return Ok(None) };
        let name = row.try_get(0).map_err(|e| format!("ladder_items.name: {e}"))?;
        let score = row.try_get(1).map_err(|e| format!("ladder_items.score: {e}"))?;
        Ok(Some(Item { name, score }))
    }
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
