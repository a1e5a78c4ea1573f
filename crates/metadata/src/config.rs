use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::db::DbOptions;

/// metadata-rs: GET /v1/metadata/{id}?region=R over a SQLite file, with an optional Redis cache of the
/// rendered JSON. With no subcommand it serves; `gen-data` writes a dataset, `bench-lookup` times the
/// lookup-and-build step without HTTP.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "metadata-rs", version, about)]
pub struct Config {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[arg(long, env = "METADATA_PORT", default_value_t = 3001)]
    pub port: u16,
    #[arg(long, env = "METADATA_HOSTNAME", default_value = "0.0.0.0")]
    pub hostname: IpAddr,
    /// The SQLite file, opened read-only (see `metadata-rs gen-data`).
    #[arg(long, env = "METADATA_DB", default_value = "metadata.db")]
    pub db: PathBuf,
    /// Redis for a cache-aside copy of each rendered response (e.g. redis://127.0.0.1:6379/0). Off when unset.
    #[arg(long, env = "METADATA_REDIS_URL")]
    pub redis_url: Option<String>,
    /// Seconds a cached response lives in Redis.
    #[arg(long, env = "METADATA_REDIS_TTL", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub redis_ttl: u64,
    /// Milliseconds any one Redis command may take before the request goes straight to SQLite.
    #[arg(long, env = "METADATA_REDIS_TIMEOUT_MS", default_value_t = 50)]
    pub redis_timeout_ms: u64,
    /// Milliseconds a query waits on a SQLite lock held by a writer before answering 503. The wait blocks that
    /// worker's thread, so keep it short.
    #[arg(long, env = "METADATA_BUSY_TIMEOUT_MS", default_value_t = 100)]
    pub busy_timeout_ms: u64,
    /// SQLite `PRAGMA mmap_size` in bytes (0 turns memory-mapped reads off).
    #[arg(long, env = "METADATA_MMAP_SIZE", default_value_t = 256 * 1024 * 1024)]
    pub mmap_size: u64,
    #[command(flatten)]
    pub serve: serve::ServeArgs,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Write a deterministic dataset: the SQLite file and a list of ids to replay.
    GenData(metadata_dataset::GenDataArgs),
    /// Time the lookup-and-build step (SQLite read + JSON) without HTTP, like the peers' lookup-bench.mjs.
    BenchLookup(crate::bench_lookup::BenchLookupArgs),
}

/// The resolved server settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub addr: SocketAddr,
    pub db: DbOptions,
    pub redis: Option<RedisSettings>,
}

#[derive(Debug, Clone)]
pub struct RedisSettings {
    pub url: String,
    pub ttl: Duration,
    pub timeout: Duration,
}

impl Config {
    pub fn db_options(&self) -> DbOptions {
        DbOptions {
            path: self.db.clone(),
            busy_timeout: Duration::from_millis(self.busy_timeout_ms),
            mmap_size: self.mmap_size,
        }
    }

    pub fn resolve(&self) -> Result<Settings, String> {
        let redis = match self.redis_url.as_deref().filter(|u| !u.is_empty()) {
            Some(url) => {
                redis::Client::open(url).map_err(|e| format!("METADATA_REDIS_URL {url:?}: {e}"))?;
                Some(RedisSettings {
                    url: url.to_string(),
                    ttl: Duration::from_secs(self.redis_ttl),
                    timeout: Duration::from_millis(self.redis_timeout_ms.max(1)),
                })
            }
            None => None,
        };
        Ok(Settings { addr: SocketAddr::new(self.hostname, self.port), db: self.db_options(), redis })
    }
}
