//! metadata-rs: the video-metadata endpoint, `GET /v1/metadata/{id}?region=R`, in Rust. It renders the box
//! under a video thumbnail (title, channel, duration, views, localized title and description, a trending
//! badge) from a read-only SQLite file, optionally through a Redis cache of the rendered JSON, with bodies
//! byte-identical to the Bun and Node peers in bench/peers/metadata.
//!
//! Run: `metadata-rs gen-data` (writes metadata.db and sample_ids.txt), then `metadata-rs` and
//! `curl 'localhost:3001/v1/metadata/<an id from sample_ids.txt>?region=ja'`.

pub mod api;
pub mod bench_insert;
pub mod bench_lookup;
pub mod cache;
pub mod config;
pub mod db;
pub mod gen_data;
pub mod render;

use std::sync::Arc;

pub use config::{Config, Settings};

/// The per-worker service factory: each worker opens its own SQLite connection (and Redis connection when
/// caching), so no lock is shared between threads.
pub fn service_factory(settings: Settings) -> impl Fn() -> serve::Handled<api::Metadata> + Send + Sync + 'static {
    let settings = Arc::new(settings);
    move || {
        let cache = settings.redis.as_ref().and_then(|r| match cache::Cache::new(&r.url, r.ttl, r.timeout) {
            Ok(cache) => Some(cache),
            Err(e) => {
                // The URL was checked with the config; this is not expected, and SQLite alone still serves.
                tracing::error!(error = %e, "Redis cache disabled");
                None
            }
        });
        serve::Handled(api::Metadata::new(db::Database::new(settings.db.clone()), cache))
    }
}

/// Starts serving on `listeners` (one worker each); tests bind 127.0.0.1:0 and call this.
pub fn start(
    settings: Settings,
    listeners: Vec<std::net::TcpListener>,
    limits: serve::Limits,
) -> std::io::Result<serve::Server> {
    serve::Server::start(listeners, limits, service_factory(settings))
}
