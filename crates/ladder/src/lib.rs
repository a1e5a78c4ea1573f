//! ladder-rs: the comparison ladder's server. Rungs of growing per-request work, so a comparison can show how each
//! runtime's lead changes as the work grows: two GET rungs (a fixed body, then a document built and serialized per
//! request), then three POST rungs, each doing what the one above it does plus one step:
//!
//! * `GET /ladder/empty`: `{"ok":true}`;
//! * `GET /ladder/json`: a 1 KiB JSON document ([`catalog`]) built and serialized on every request;
//! * `POST /ladder/validate`: parse the JSON body and check it against a JSON Schema compiled once;
//! * `POST /ladder/sqlite`: that, then read the body's video id from the `metadata-rs gen-data` SQLite file;
//! * `POST /ladder/postgres`: that, then read one `ladder_items` row from Postgres (`ladder-rs seed` fills it).
//!
//! Beside the ladder, `GET /ladder/upstream` calls the upstream service (crates/upstream) over HTTP with
//! hyper-util's pooled keep-alive client and answers its token ([`upstream`]): the request that fans out to
//! another service, where each runtime's HTTP client is what differs.
//!
//! Bodies are byte-identical with the Bun and Node peers in bench/peers/ladder.
//!
//! Run: `metadata-rs gen-data`, `ladder-rs seed --database-url URL`, then `LADDER_DB=metadata.db
//! DATABASE_URL=URL ladder-rs` and `curl -d '{"id":"<an id>","region":"en","tags":[]}' localhost:3002/ladder/postgres`.

pub mod api;
pub mod body;
pub mod catalog;
pub mod config;
pub mod db;
pub mod pg;
pub mod seed;
pub mod token;
pub mod upstream;

use std::sync::Arc;

pub use config::{BODY_LIMIT, Config, Settings};

/// What every worker shares: the settings and the compiled body schema.
pub struct Shared {
    pub settings: Settings,
    pub validator: body::BodyValidator,
    /// The request body limit the server runs with, for the 413 message.
    pub body_limit: u64,
}

impl Shared {
    pub fn new(settings: Settings, body_limit: u64) -> Result<Arc<Shared>, String> {
        Ok(Arc::new(Shared { settings, validator: body::BodyValidator::new()?, body_limit }))
    }
}

/// The per-worker service factory: each worker opens its own SQLite connection, its own Postgres connection and
/// its own upstream client pool, so nothing on the request path is shared between threads but the (immutable)
/// validator.
pub fn service_factory(shared: Arc<Shared>) -> impl Fn() -> serve::Handled<api::Ladder> + Send + Sync + 'static {
    move || {
        let settings = &shared.settings;
        let videos = db::Videos::new(settings.db.clone());
        let items = pg::Items::new(settings.postgres.as_ref(), settings.pg_timeout);
        let upstream = upstream::Upstream::new(settings.upstream.as_ref(), settings.upstream_timeout);
        serve::Handled(api::Ladder::new(shared.clone(), videos, items, upstream))
    }
}

/// Starts serving on `listeners` (one worker each); tests bind 127.0.0.1:0 and call this.
pub fn start(
    settings: Settings,
    listeners: Vec<std::net::TcpListener>,
    limits: serve::Limits,
) -> std::io::Result<serve::Server> {
    let shared = Shared::new(settings, limits.body_limit).map_err(std::io::Error::other)?;
    serve::Server::start(listeners, limits, service_factory(shared))
}
