//! scribe-rs: the Scribe notes service in Rust. Components are Postgres tables whose records (an envelope
//! around `data`) are validated against JSON Schemas, with diff-match-patch version history per record, a
//! Redis cache of fetched schemas, and /healthz. Same paths, JSON shapes and table layout as the original, so
//! existing clients and databases work; SQL is parameterized, DDL runs once per schema version, and every
//! write commits with its history row in one transaction.
//!
//! Run: `DATABASE_URL=postgres://postgres@127.0.0.1/scribe cargo run --release -p scribe`, then
//! `curl -X POST localhost:1337/notes -H 'content-type: application/json' -d @note.json`.

pub mod api;
pub mod config;
pub mod error;
pub mod history;
pub mod query;
pub mod row_text;
pub mod schemas;
pub mod store;

// diff-match-patch on UTF-16 code units, under `history` (its module docs say why it is ours and not the crate's).
mod diff;
#[cfg(test)]
mod dmp_fixtures;
mod js_unit;
mod js_uri;
mod patch;
mod patch_apply;
mod patch_make;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};

pub use config::{Config, Settings};

/// State shared by every worker.
pub struct Shared {
    pub settings: Settings,
    pub schemas: schemas::Registry,
    pub redis: Arc<bounded_redis::RedisStore>,
    pub ensured: Arc<store::Ensured>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("schemas: {0}")]
    Schemas(#[from] schemas::SchemaError),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
}

impl Shared {
    pub fn new(settings: Settings) -> Result<Arc<Shared>, StartError> {
        let redis = Arc::new(bounded_redis::RedisStore::new(&settings.redis_url, settings.redis_timeout)?);
        let schemas = schemas::Registry::new(schemas::SchemaConfig {
            dir: settings.schema_dir.clone(),
            base_url: settings.schema_base_url.clone(),
            require_schema: settings.require_schema,
            redis: Some(redis.clone()),
            fetch_timeout: Duration::from_secs(2),
        })?;
        Ok(Arc::new(Shared { settings, schemas, redis, ensured: Arc::default() }))
    }

    /// The connection settings every connection of a worker uses: the statement timeout, the connect timeout.
    fn postgres(&self) -> tokio_postgres::Config {
        let mut pg = self.settings.database.clone();
        pg.options(format!("-c statement_timeout={}", self.settings.statement_timeout.as_millis()));
        pg.connect_timeout(self.settings.db_timeout);
        pg
    }

    /// A connection pool for one worker: its connections' tasks then live on that worker's runtime.
    pub fn pool(&self) -> Pool {
        let manager = Manager::from_config(
            self.postgres(),
            tokio_postgres::NoTls,
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let timeout = Some(self.settings.db_timeout);
        Pool::builder(manager)
            .max_size(self.settings.pool_size)
            .wait_timeout(timeout)
            .create_timeout(timeout)
            .recycle_timeout(timeout)
            .runtime(Runtime::Tokio1)
            .build()
            .unwrap_or_else(|e| unreachable!("a pool with a runtime always builds: {e}"))
    }

    /// The per-worker service: its pool, and its one pipelined connection for reads by id, which must answer
    /// within the database timeout.
    pub fn service(self: &Arc<Self>) -> api::Scribe {
        let reader = pg_reader::Reader::new(self.postgres(), self.settings.db_timeout);
        api::Scribe::new(self.clone(), std::rc::Rc::new(store::Store::new(self.pool(), reader, self.ensured.clone())))
    }
}

/// Creates the database when it does not exist (as the original did with pgtools). Best effort: when
/// Postgres is unreachable the server still starts and answers 503 until it is back.
pub async fn ensure_database(settings: &Settings) -> Result<(), String> {
    let mut admin = settings.database.clone();
    admin.dbname("postgres");
    admin.connect_timeout(settings.db_timeout);
    let (client, connection) = admin.connect(tokio_postgres::NoTls).await.map_err(|e| e.to_string())?;
    let driver = tokio::spawn(connection);
    let name = &settings.database_name;
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[name])
        .await
        .map_err(|e| e.to_string())?
        .is_some();
    if !exists {
        // The name was validated to [A-Za-z0-9_]; CREATE DATABASE takes no bind parameters.
        match client.batch_execute(&format!("CREATE DATABASE \"{name}\"")).await {
            Ok(()) => tracing::info!(database = %name, "created database"),
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_DATABASE) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    drop(client);
    let _ = driver.await;
    Ok(())
}

/// Starts scribe-rs on the given listeners (tests bind 127.0.0.1:0).
pub fn start(
    shared: Arc<Shared>,
    listeners: Vec<std::net::TcpListener>,
    mut limits: serve::Limits,
) -> std::io::Result<serve::Server> {
    limits.body_limit = shared.settings.payload_limit;
    serve::Server::start(listeners, limits, move || shared.service())
}
