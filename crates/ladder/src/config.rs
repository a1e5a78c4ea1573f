use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::db::DbOptions;

/// The largest request body the ladder accepts (64 KiB); larger gets 413. Also the peers' limit.
pub const BODY_LIMIT: u64 = 64 * 1024;

/// ladder-rs: the comparison ladder's rungs (empty, JSON, validate, + SQLite, + Postgres) and the upstream call.
/// With no subcommand it serves; `seed` fills the Postgres table the last rung reads.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "ladder-rs", version, about)]
// The ladder's body limit is 64 KiB, not serve's 1 MiB default; `--body-limit` / LADDER_BODY_LIMIT still win.
#[command(mut_arg("body_limit", |a| a.default_value("65536")))]
pub struct Config {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[arg(long, env = "LADDER_PORT", default_value_t = 3002)]
    pub port: u16,
    #[arg(long, env = "LADDER_HOSTNAME", default_value = "0.0.0.0")]
    pub hostname: IpAddr,
    /// The SQLite file made by `metadata-rs gen-data`, opened read-only.
    #[arg(long, env = "LADDER_DB", default_value = "metadata.db")]
    pub db: PathBuf,
    /// Postgres for the last rung (e.g. postgres://postgres@127.0.0.1:5432/ladder). Unset: that rung answers 503.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Milliseconds the Postgres step may take in all (connect, query) before the request gets 503.
    #[arg(long, env = "LADDER_PG_TIMEOUT_MS", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    pub pg_timeout_ms: u64,
    /// The URL `GET /ladder/upstream` calls (http only, e.g. http://127.0.0.1:3009/upstream, the upstream
    /// service's). Unset or empty: that route answers 503.
    #[arg(long, env = "LADDER_UPSTREAM_URL")]
    pub upstream_url: Option<String>,
    /// Milliseconds the whole upstream call (connect, request, answer) may take before the route answers 504.
    #[arg(long, env = "LADDER_UPSTREAM_TIMEOUT_MS", default_value_t = 2000,
          value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub upstream_timeout_ms: u64,
    /// Milliseconds a SQLite read waits on a writer's lock before answering 503 (it blocks the worker).
    #[arg(long, env = "LADDER_BUSY_TIMEOUT_MS", default_value_t = 100)]
    pub busy_timeout_ms: u64,
    #[command(flatten)]
    pub serve: serve::ServeArgs,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Create `ladder_items` if missing and fill ids 1..=rows (idempotent).
    Seed(crate::seed::SeedArgs),
}

/// The resolved server settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub addr: SocketAddr,
    pub db: DbOptions,
    pub postgres: Option<tokio_postgres::Config>,
    pub pg_timeout: Duration,
    /// What `GET /ladder/upstream` calls; `None`: that route answers 503.
    pub upstream: Option<http::Uri>,
    pub upstream_timeout: Duration,
}

impl Config {
    pub fn resolve(&self) -> Result<Settings, String> {
        let postgres = match self.database_url.as_deref().filter(|u| !u.is_empty()) {
            Some(url) => Some(crate::pg::parse_database_url(url)?),
            None => None,
        };
        let upstream = match self.upstream_url.as_deref().filter(|u| !u.is_empty()) {
            Some(url) => Some(crate::upstream::parse_upstream_url(url)?),
            None => None,
        };
        Ok(Settings {
            addr: SocketAddr::new(self.hostname, self.port),
            db: DbOptions { path: self.db.clone(), busy_timeout: Duration::from_millis(self.busy_timeout_ms) },
            postgres,
            pg_timeout: Duration::from_millis(self.pg_timeout_ms),
            upstream,
            upstream_timeout: Duration::from_millis(self.upstream_timeout_ms),
        })
    }
}
