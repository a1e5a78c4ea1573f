//! Postgres storage in the original Scribe's layout: table `<component>` (`id serial` + one column per
//! envelope property) and `<component>_history(id serial, foreignkey → id ON DELETE CASCADE, patches json)`
//! holding diff-match-patch patch texts. Differences from the original, all on purpose: every value is a bind
//! parameter and every identifier is validated and quoted; DDL runs once per table and schema version (not per
//! insert) under an advisory lock, so concurrent first writes are safe; a write and its history row commit in
//! one transaction; errors are reported, never answered with an empty 200.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{GenericClient, Pool};
use pg_reader::{ReadError, Reader};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, error::SqlState};

use crate::error::ApiError;
use crate::history;
use crate::row_text::row_text;

/// A validated table name (lower-case, `[a-z_][a-z0-9_]*`, short enough for `<name>_history`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Table(String);

/// Postgres identifiers are at most 63 bytes; `_history` needs 8 of them.
const MAX_TABLE: usize = 63 - "_history".len();

impl Table {
    /// `segments`: ["notes"] or ["notes", "drafts"] → `notes` / `notes_drafts` (the original's naming).
    pub fn new(segments: &[&str]) -> Result<Table, ApiError> {
        for s in segments {
            let valid = !s.is_empty()
                && s.len() <= 63
                && s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !valid {
                return Err(ApiError::BadRequest(format!(
                    "component name {s:?} must match ^[A-Za-z_][A-Za-z0-9_]{{0,62}}$"
                )));
            }
        }
        // Unquoted identifiers fold to lower case in Postgres; the original created tables that way.
        let name = segments.join("_").to_ascii_lowercase();
        if name.len() > MAX_TABLE {
            return Err(ApiError::BadRequest(format!("component name {name:?} is longer than {MAX_TABLE} characters")));
        }
        // `notes_history` (or `/notes/history`) would address notes' history table as a component of its own:
        // a POST would add columns to it and a DELETE drop every version of every note.
        if name.ends_with("_history") {
            return Err(ApiError::BadRequest(format!(
                "component name {name:?} is reserved: tables ending in _history hold version history"
            )));
        }
        Ok(Table(name))
    }

    pub fn name(&self) -> &str {
        &self.0
    }

    /// Quoted: safe for any validated name, reserved words included.
    fn q(&self) -> String {
        format!("\"{}\"", self.0)
    }

    fn history(&self) -> String {
        format!("\"{}_history\"", self.0)
    }
}

/// The envelope's columns, in table order, with their SQL types (from schemas/default.table.schema.json).
pub const COLUMNS: [(&str, &str); 5] = [
    ("data", "jsonb"),
    ("date_created", "timestamptz"),
    ("date_modified", "timestamptz"),
    ("created_by", "integer"),
    ("modified_by", "integer"),
];

/// Tables whose DDL has run in this process, with the schema version they were ensured for.
#[derive(Default)]
pub struct Ensured(Mutex<HashSet<(String, u64)>>);

impl Ensured {
    fn contains(&self, table: &Table, version: u64) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).contains(&(table.0.clone(), version))
    }

    fn insert(&self, table: &Table, version: u64) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert((table.0.clone(), version));
    }

    pub fn forget(&self, table: &Table) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).retain(|(t, _)| *t != table.0);
    }
}

/// One worker's PostgreSQL side: reads by id go through its one pipelined connection ([`Reader`]); writes
/// (a transaction each, which needs a connection of its own), scans and DDL through its pool.
pub struct Store {
    pool: Pool,
    reader: Reader,
    ensured: Arc<Ensured>,
}

/// The envelope values of a record, bound in COLUMNS order.
pub struct Envelope {
    pub data: Value,
    pub date_created: chrono::DateTime<chrono::Utc>,
    pub date_modified: chrono::DateTime<chrono::Utc>,
    pub created_by: i32,
    pub modified_by: i32,
}

impl Envelope {
    /// From a body already validated against the envelope schema.
    pub fn from_body(body: &Value) -> Result<Envelope, ApiError> {
        let date = |key: &str| -> Result<chrono::DateTime<chrono::Utc>, ApiError> {
            let raw = body.get(key).and_then(Value::as_str).unwrap_or_default();
            chrono::DateTime::parse_from_rfc3339(raw)
                .map(|d| d.with_timezone(&chrono::Utc))
                .map_err(|_| ApiError::BadRequest(format!("{key}: {raw:?} is not an RFC 3339 date-time")))
        };
        let int = |key: &str| -> Result<i32, ApiError> {
            body.get(key)
                .and_then(Value::as_i64)
                .and_then(|v| i32::try_from(v).ok())
                .ok_or_else(|| ApiError::BadRequest(format!("{key} must be a 32-bit integer")))
        };
        Ok(Envelope {
            data: body.get("data").cloned().unwrap_or(Value::Null),
            date_created: date("date_created")?,
            date_modified: date("date_modified")?,
            created_by: int("created_by")?,
            modified_by: int("modified_by")?,
        })
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 5] {
        [&self.data, &self.date_created, &self.date_modified, &self.created_by, &self.modified_by]
    }
}

impl Store {
    pub fn new(pool: Pool, reader: Reader, ensured: Arc<Ensured>) -> Self {
        Store { pool, reader, ensured }
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, ApiError> {
        self.pool.get().await.map_err(|e| ApiError::Unavailable(format!("postgres: {e}")))
    }

    /// Creates the tables (and any missing envelope column) once per table and schema version.
    async fn ensure(&self, table: &Table, version: u64) -> Result<(), ApiError> {
        if self.ensured.contains(table, version) {
            return Ok(());
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(db_error)?;
        // Serialize DDL for this table across connections and processes: CREATE TABLE IF NOT EXISTS races.
        tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&table.0]).await.map_err(db_error)?;
        let columns: Vec<String> = COLUMNS.iter().map(|(n, t)| format!("{n} {t}")).collect();
        tx.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {t} (id serial PRIMARY KEY, {cols}); \
             CREATE TABLE IF NOT EXISTS {h} (id serial PRIMARY KEY, foreignkey integer REFERENCES {t} (id) ON DELETE CASCADE, patches json); \
             ALTER TABLE {t} {add}",
            t = table.q(),
            h = table.history(),
            cols = columns.join(", "),
            add = columns.iter().map(|c| format!("ADD COLUMN IF NOT EXISTS {c}")).collect::<Vec<_>>().join(", "),
        ))
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        self.ensured.insert(table, version);
        Ok(())
    }

    /// Inserts a record and its creation history in one transaction; returns the row's JSON. When the table was
    /// dropped underneath us (by another instance, or our own statement cache is stale), it is recreated and
    /// the write retried once.
    pub async fn create(&self, table: &Table, version: u64, envelope: &Envelope) -> Result<String, ApiError> {
        match self.create_once(table, version, envelope).await {
            Err(Attempt::Gone) => {
                self.table_gone(table);
                self.create_once(table, version, envelope).await.map_err(Attempt::into_error)
            }
            other => other.map_err(Attempt::into_error),
        }
    }

    async fn create_once(&self, table: &Table, version: u64, envelope: &Envelope) -> Result<String, Attempt> {
        self.ensure(table, version).await?;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(attempt)?;
        let insert = tx
            .prepare_cached(&format!(
                "INSERT INTO {} (data, date_created, date_modified, created_by, modified_by) VALUES ($1, $2, $3, $4, $5) RETURNING *",
                table.q()
            ))
            .await
            .map_err(attempt)?;
        let row = tx.query_one(&insert, &envelope.params()).await.map_err(attempt)?;
        let (id, text) = (row_id(&row)?, row_text(&row)?);
        let patches = Value::Array(vec![Value::String(history::creation_patch(&text))]);
        let history = tx
            .prepare_cached(&format!("INSERT INTO {} (foreignkey, patches) VALUES ($1, $2)", table.history()))
            .await
            .map_err(attempt)?;
        tx.execute(&history, &[&id, &patches]).await.map_err(attempt)?;
        tx.commit().await.map_err(attempt)?;
        Ok(text)
    }

    /// Updates a record and appends the patch back to its previous version, in one transaction; returns the
    /// row's JSON, `None` when there is no such record. Retried once when the table vanished underneath, like `create`.
    pub async fn update(
        &self,
        table: &Table,
        version: u64,
        id: i32,
        envelope: &Envelope,
    ) -> Result<Option<String>, ApiError> {
        match self.update_once(table, version, id, envelope).await {
            Err(Attempt::Gone) => {
                self.table_gone(table);
                self.update_once(table, version, id, envelope).await.map_err(Attempt::into_error)
            }
            other => other.map_err(Attempt::into_error),
        }
    }

    async fn update_once(
        &self,
        table: &Table,
        version: u64,
        id: i32,
        envelope: &Envelope,
    ) -> Result<Option<String>, Attempt> {
        self.ensure(table, version).await?;
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(attempt)?;
        let select = tx
            .prepare_cached(&format!("SELECT * FROM {} WHERE id = $1 FOR UPDATE", table.q()))
            .await
            .map_err(attempt)?;
        let Some(old) = tx.query_opt(&select, &[&id]).await.map_err(attempt)? else { return Ok(None) };
        let old_text = row_text(&old)?;
        let update = tx
            .prepare_cached(&format!(
                "UPDATE {} SET (data, date_created, date_modified, created_by, modified_by) = ($1, $2, $3, $4, $5) WHERE id = $6 RETURNING *",
                table.q()
            ))
            .await
            .map_err(attempt)?;
        let p = envelope.params();
        let row = tx.query_one(&update, &[p[0], p[1], p[2], p[3], p[4], &id]).await.map_err(attempt)?;
        let new_text = row_text(&row)?;
        let patch = history::update_patch(&new_text, &old_text);
        let existing = tx
            .prepare_cached(&format!(
                "SELECT id, patches FROM {} WHERE foreignkey = $1 ORDER BY id LIMIT 1 FOR UPDATE",
                table.history()
            ))
            .await
            .map_err(attempt)?;
        match tx.query_opt(&existing, &[&id]).await.map_err(attempt)? {
            Some(h) => {
                let history_id: i32 = h.try_get(0).map_err(attempt)?;
                let mut patches: Value = h.try_get(1).map_err(attempt)?;
                match patches.as_array_mut() {
                    Some(list) => list.push(Value::String(patch)),
                    None => patches = Value::Array(vec![Value::String(patch)]),
                }
                let set = tx
                    .prepare_cached(&format!("UPDATE {} SET patches = $1 WHERE id = $2", table.history()))
                    .await
                    .map_err(attempt)?;
                tx.execute(&set, &[&patches, &history_id]).await.map_err(attempt)?;
            }
            None => {
                let patches = Value::Array(vec![Value::String(patch)]);
                let insert = tx
                    .prepare_cached(&format!("INSERT INTO {} (foreignkey, patches) VALUES ($1, $2)", table.history()))
                    .await
                    .map_err(attempt)?;
                tx.execute(&insert, &[&id, &patches]).await.map_err(attempt)?;
            }
        }
        tx.commit().await.map_err(attempt)?;
        Ok(Some(new_text))
    }

    /// Rows of a query, as JSON objects in column order. A missing table reads as no rows.
    pub async fn select(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<String>, ApiError> {
        let client = self.client().await?;
        let statement = match client.prepare_cached(sql).await {
            Ok(s) => s,
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => return Ok(Vec::new()),
            Err(e) => return Err(query_error(e)),
        };
        let rows = match client.query(&statement, params).await {
            Ok(rows) => rows,
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => {
                // A cached statement outlived its table (dropped since): forget cached plans; no rows.
                self.pool.manager().statement_caches.clear();
                return Ok(Vec::new());
            }
            Err(e) => return Err(query_error(e)),
        };
        rows.iter().map(row_text).collect()
    }

    /// The rows of a read bounded by a key (one record, or the few rows that refer to it), on the worker's
    /// pipelined connection. A missing table reads as no rows, as in `select`.
    pub async fn point(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<String>, ApiError> {
        self.point_rows(sql, params).await?.iter().map(row_text).collect()
    }

    async fn point_rows(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, ApiError> {
        match self.reader.query(sql, params).await {
            Ok(rows) => Ok(rows),
            Err(ReadError::Query(e)) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(Vec::new()),
            Err(ReadError::Query(e)) => Err(query_error(e)),
            Err(e @ ReadError::Unreachable(_)) => Err(ApiError::Unavailable(e.to_string())),
        }
    }

    /// The history patches of one record (empty when none or the table is missing).
    pub async fn patches(&self, table: &Table, id: i32) -> Result<Vec<String>, ApiError> {
        let sql = format!("SELECT patches FROM {} WHERE foreignkey = $1 ORDER BY id LIMIT 1", table.history());
        let patches: Option<Value> = match self.point_rows(&sql, &[&id]).await?.first() {
            Some(row) => row.try_get(0).map_err(|e| ApiError::Internal(format!("patches: {e}")))?,
            None => None,
        };
        let patches = patches.as_ref().and_then(Value::as_array);
        Ok(patches.map(|p| p.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()).unwrap_or_default())
    }

    /// Runs a statement that returns nothing; a missing table is not an error (deleting from nothing).
    pub async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<(), ApiError> {
        let client = self.client().await?;
        match client.execute(sql, params).await {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(()),
            Err(e) => Err(db_error(e)),
        }
    }

    pub async fn drop_tables(&self, table: &Table) -> Result<(), ApiError> {
        self.execute(&format!("DROP TABLE IF EXISTS {}, {}", table.history(), table.q()), &[]).await?;
        self.table_gone(table);
        Ok(())
    }

    pub async fn truncate(&self, table: &Table) -> Result<(), ApiError> {
        self.execute(&format!("TRUNCATE {} RESTART IDENTITY CASCADE", table.q()), &[]).await
    }

    /// `SELECT 1` within `deadline`, for /healthz.
    pub async fn ping(&self, deadline: Duration) -> Result<(), String> {
        let check = async {
            let client = self.pool.get().await.map_err(|e| e.to_string())?;
            client.simple_query("SELECT 1").await.map(|_| ()).map_err(|e| e.to_string())
        };
        tokio::time::timeout(deadline, check).await.map_err(|_| "timed out".to_string())?
    }

    /// The table is gone (dropped by another instance): it must be ensured again, and statements prepared
    /// against it must be prepared again.
    fn table_gone(&self, table: &Table) {
        self.ensured.forget(table);
        self.pool.manager().statement_caches.clear();
    }
}

/// One try at a write: it either worked, failed for good, or found the table gone (then worth one retry).
enum Attempt {
    Gone,
    Failed(ApiError),
}

impl Attempt {
    fn into_error(self) -> ApiError {
        match self {
            Attempt::Gone => ApiError::Unavailable("the table was dropped while writing; retry".into()),
            Attempt::Failed(e) => e,
        }
    }
}

impl From<ApiError> for Attempt {
    fn from(e: ApiError) -> Self {
        Attempt::Failed(e)
    }
}

fn attempt(e: tokio_postgres::Error) -> Attempt {
    if e.code() == Some(&SqlState::UNDEFINED_TABLE) || e.code() == Some(&SqlState::UNDEFINED_COLUMN) {
        return Attempt::Gone;
    }
    Attempt::Failed(db_error(e))
}

fn row_id(row: &Row) -> Result<i32, ApiError> {
    row.try_get::<_, i32>("id").map_err(db_error)
}

/// Connection-level failures and Postgres saying "not now" are 503 (retry); anything else is a 500 whose details
/// go to the log only.
pub fn db_error(e: tokio_postgres::Error) -> ApiError {
    if e.is_closed() || e.code().is_none() && e.as_db_error().is_none() || e.code().is_some_and(retryable) {
        return ApiError::Unavailable(format!("postgres: {e}"));
    }
    // Class 22 (data exception: a NUL in text, a value out of range…) is about the values the client sent.
    if let Some(db) = e.as_db_error()
        && db.code().code().starts_with("22")
    {
        return ApiError::BadRequest(format!("value rejected by the database: {}", db.message()));
    }
    ApiError::Internal(format!("postgres: {e}"))
}

/// SQLSTATEs that say the database cannot serve this now, not that the request is wrong: the statement ran out
/// of time (statement_timeout cancels with 57014, lock_timeout fails with 55P03: a table lock held elsewhere makes
/// requests queue on the pool, and they must get the same 503 as the ones that time out waiting for it), the
/// server is shutting down, crashing or starting (57P01-57P03), a connection exception (class 08), or it has no
/// connection slots left (53300).
fn retryable(code: &SqlState) -> bool {
    let code = code.code();
    code.starts_with("57") || code.starts_with("08") || code == "55P03" || code == "53300"
}

/// Errors caused by what the client asked for (a filter on a column that is not there, a value of the wrong
/// type) are 400s with the database's reason; the rest as `db_error`.
fn query_error(e: tokio_postgres::Error) -> ApiError {
    let client_caused = [
        SqlState::UNDEFINED_COLUMN,
        SqlState::UNDEFINED_FUNCTION,
        SqlState::INVALID_TEXT_REPRESENTATION,
        SqlState::DATATYPE_MISMATCH,
        SqlState::INVALID_PARAMETER_VALUE,
        SqlState::INVALID_DATETIME_FORMAT,
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
    ];
    match e.as_db_error() {
        Some(db) if client_caused.contains(db.code()) => {
            ApiError::BadRequest(format!("query rejected: {}", db.message()))
        }
        _ => db_error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_and_shutdowns_are_retryable_request_errors_are_not() {
        for code in [
            SqlState::QUERY_CANCELED,
            SqlState::LOCK_NOT_AVAILABLE,
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::CONNECTION_FAILURE,
            SqlState::TOO_MANY_CONNECTIONS,
        ] {
            assert!(retryable(&code), "{code:?}");
        }
        for code in [SqlState::UNIQUE_VIOLATION, SqlState::UNDEFINED_COLUMN, SqlState::SYNTAX_ERROR] {
            assert!(!retryable(&code), "{code:?}");
        }
    }

    #[test]
    fn history_tables_are_not_components() {
        for segments in [&["notes_history"][..], &["notes", "history"], &["Notes", "HISTORY"], &["a_b_history"]] {
            assert!(matches!(Table::new(segments), Err(ApiError::BadRequest(_))), "{segments:?}");
        }
        for segments in [&["history"][..], &["notes", "histories"], &["history_notes"], &["notes", "drafts"]] {
            assert!(Table::new(segments).is_ok(), "{segments:?}");
        }
    }
}
