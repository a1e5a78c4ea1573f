//! flight-rs: the Flight hello/route-table app server in Rust.
//!
//! A route table merged at startup from backend fragments, Flight's edge middleware as tower layers, and a
//! static/SPA fallback, served by the workspace's `serve` crate (one current-thread runtime per core).
//! Run: `cargo run --release -p flight -- --middleware bare` then `curl localhost:3000/api/hello`.
//! Tests build the app with [`App::new`] and call it with `tower::ServiceExt::oneshot`, or start it on
//! 127.0.0.1:0 with [`start`].

pub mod backends;
pub mod config;
pub mod middleware;
pub mod routes;
pub mod static_files;

use std::sync::Arc;

use tower::ServiceBuilder;

use bounded_redis::RedisStore;
use config::{Profile, Settings};
use middleware::EdgeLayer;
use middleware::compression::Compression;
use middleware::cors::CorsLayer;
use middleware::rate_limit::{Limiter, RateLimit};
use middleware::request_log::RequestLog;
use middleware::response_cache::{Cached, ResponseCache};
use middleware::security_headers::SecurityHeadersLayer;
use middleware::session::{SessionStore, Sessions};
use routes::{DuplicateRoute, RouteTable, Router};
use static_files::StaticFiles;

pub use config::Config;

/// Everything shared by all workers: settings, the Redis connection, the in-memory stores.
pub struct AppState {
    pub settings: Settings,
    pub redis: Option<Arc<RedisStore>>,
    limiter: Arc<Limiter>,
    sessions: Arc<SessionStore>,
    cache: Arc<ResponseCache>,
}

/// The app, ready to be turned into per-worker services.
#[derive(Clone)]
pub struct App {
    state: Arc<AppState>,
    table: Arc<RouteTable>,
    files: Option<Arc<StaticFiles>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Routes(#[from] DuplicateRoute),
    #[error("FLIGHT_REDIS_URL: {0}")]
    Redis(#[from] redis::RedisError),
}

impl App {
    /// Builds the shared state and the route table. Fails on duplicate routes, before anything binds.
    pub fn new(settings: Settings) -> Result<App, StartError> {
        let redis = match &settings.redis_url {
            Some(url) => Some(Arc::new(RedisStore::new(url, settings.redis_timeout)?)),
            None => None,
        };
        let state = Arc::new(AppState {
            limiter: Arc::new(Limiter::new(
                settings.rate_limit,
                settings.rate_window,
                settings.trust_proxy,
                redis.clone(),
            )),
            sessions: Arc::new(SessionStore::new(settings.secret.clone(), settings.secure_cookies, redis.clone())),
            cache: Arc::new(ResponseCache::new(settings.cache_ttl, redis.clone())),
            redis,
            settings,
        });
        let table = RouteTable::merge(backends::fragments(&state), state.settings.middleware_on())?;
        let files = state.settings.dist_path.clone().map(|root| Arc::new(StaticFiles::new(root)));
        Ok(App { state, table: Arc::new(table), files })
    }

    pub fn settings(&self) -> &Settings {
        &self.state.settings
    }

    pub fn routes(&self) -> usize {
        self.table.len()
    }

    /// The tower service for one worker: the layers the profile turns on, outermost first, around the router.
    /// Layers that are off are `Either::Right` pass-throughs, so every profile has the same type and `bare`
    /// pays only a branch per layer.
    pub fn service(
        &self,
    ) -> impl tower::Service<
        serve::Request,
        Response = serve::Response,
        Error = std::convert::Infallible,
        Future: 'static,
    >
    + Clone
    + Send
    + 'static
    + use<> {
        let s = &self.state.settings;
        let on = s.middleware_on();
        let production = s.profile == Profile::Production;
        ServiceBuilder::new()
            .option_layer(s.request_log.then_some(EdgeLayer(RequestLog { trust_proxy: s.trust_proxy })))
            .option_layer(on.then_some(SecurityHeadersLayer))
            .option_layer(on.then(|| CorsLayer::new(s.cors_origins.clone(), s.cors_credentials)))
            .option_layer(on.then(|| EdgeLayer(Compression::new(s.compression_threshold))))
            .option_layer(production.then(|| EdgeLayer(RateLimit::new(self.state.limiter.clone()))))
            .option_layer(production.then(|| EdgeLayer(Sessions::new(self.state.sessions.clone()))))
            .option_layer(production.then(|| EdgeLayer(Cached::new(self.state.cache.clone()))))
            .service(serve::Handled(Router::new(self.table.clone(), self.files.clone())))
    }

    /// Serving limits with what this app needs from the server turned on.
    pub fn limits(&self, mut limits: serve::Limits) -> serve::Limits {
        let s = &self.state.settings;
        limits.peer_addr = s.request_log || s.profile == Profile::Production;
        limits
    }
}

/// Starts the app on the given listeners (tests bind 127.0.0.1:0).
pub fn start(app: App, listeners: Vec<std::net::TcpListener>, limits: serve::Limits) -> std::io::Result<serve::Server> {
    let limits = app.limits(limits);
    serve::Server::start(listeners, limits, move || app.service())
}
