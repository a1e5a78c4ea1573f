use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use http::HeaderValue;

/// The secret flight-rs falls back to outside production, so a dev run needs no setup. The production
/// profile refuses to start with it: a known secret lets anyone forge session cookies.
pub const BUILT_IN_SECRET: &str = "flight-rs built-in development secret; set FLIGHT_APP_SECRET";

/// flight-rs: the Flight hello/route-table app server in Rust.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "flight-rs", version, about)]
pub struct Config {
    /// Port to listen on.
    #[arg(long, env = "FLIGHT_PORT", default_value_t = 3000)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, env = "FLIGHT_HOSTNAME", default_value = "0.0.0.0")]
    pub hostname: IpAddr,
    /// Middleware profile: bare (route table only), default (security headers, CORS, compression: what
    /// Flight's Bun port ships), production (default + rate limit, sessions, response cache).
    #[arg(long, env = "FLIGHT_MIDDLEWARE", value_enum, default_value_t = Profile::Default)]
    pub middleware: Profile,
    /// Redis for the rate limiter, sessions and response cache; memory when unset.
    #[arg(long, env = "FLIGHT_REDIS_URL")]
    pub redis_url: Option<String>,
    /// Milliseconds any one Redis command may take before flight-rs gives up on it and falls back.
    #[arg(long, env = "FLIGHT_REDIS_TIMEOUT_MS", default_value_t = 100)]
    pub redis_timeout_ms: u64,
    /// Key that signs session cookies. Required in the production profile.
    #[arg(long, env = "FLIGHT_APP_SECRET", hide_env_values = true)]
    pub app_secret: Option<String>,
    /// Folder of static files (a built SPA) served after the route table, with index.html as SPA fallback.
    #[arg(long, env = "FLIGHT_DIST_PATH")]
    pub dist_path: Option<PathBuf>,
    /// Allowed CORS origins, comma-separated, or `*` for any origin (then without credentials).
    #[arg(long, env = "FLIGHT_CORS_ORIGINS", value_delimiter = ',', default_value = "*")]
    pub cors_origins: Vec<String>,
    /// Send Access-Control-Allow-Credentials: true (needs an explicit origin list).
    #[arg(long, env = "FLIGHT_CORS_CREDENTIALS", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub cors_credentials: bool,
    /// Trust X-Forwarded-For for the client address (only behind a proxy that sets it).
    #[arg(long, env = "FLIGHT_TRUST_PROXY", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub trust_proxy: bool,
    /// Mark the session cookie `Secure` (browsers then send it over HTTPS only). Turn on behind TLS.
    #[arg(long, env = "FLIGHT_SECURE_COOKIES", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub secure_cookies: bool,
    /// One log line per request (method, path, status, duration). Off by default in every profile.
    #[arg(long, env = "FLIGHT_REQUEST_LOG", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub request_log: bool,
    /// Requests allowed per client per rate-limit window.
    #[arg(long, env = "FLIGHT_RATE_LIMIT", default_value_t = 1200, value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit: u32,
    /// Rate-limit window in seconds.
    #[arg(long, env = "FLIGHT_RATE_WINDOW", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub rate_window: u64,
    /// Seconds a cached response is served.
    #[arg(long, env = "FLIGHT_CACHE_TTL", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub cache_ttl: u64,
    /// Responses smaller than this many bytes are not compressed.
    #[arg(long, env = "FLIGHT_COMPRESSION_THRESHOLD", default_value_t = 1024)]
    pub compression_threshold: u64,
    #[command(flatten)]
    pub serve: serve::ServeArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    Bare,
    Default,
    Production,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Bare => "bare",
            Profile::Default => "default",
            Profile::Production => "production",
        }
    }
}

/// Which origins CORS allows.
#[derive(Debug, Clone)]
pub enum Origins {
    Any,
    List(Vec<HeaderValue>),
}

/// Config checked and resolved: everything the app needs, nothing it has to parse again per request.
#[derive(Debug, Clone)]
pub struct Settings {
    pub addr: SocketAddr,
    pub profile: Profile,
    pub redis_url: Option<String>,
    pub redis_timeout: Duration,
    pub secret: Vec<u8>,
    pub dist_path: Option<PathBuf>,
    pub cors_origins: Origins,
    pub cors_credentials: bool,
    pub trust_proxy: bool,
    pub secure_cookies: bool,
    pub request_log: bool,
    pub rate_limit: u32,
    pub rate_window: Duration,
    pub cache_ttl: Duration,
    pub compression_threshold: u64,
}

impl Settings {
    /// Defaults for a profile, as if started with no flags; tests adjust fields from here.
    pub fn for_profile(profile: Profile) -> Settings {
        Settings {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            profile,
            redis_url: None,
            redis_timeout: Duration::from_millis(100),
            secret: BUILT_IN_SECRET.as_bytes().to_vec(),
            dist_path: None,
            cors_origins: Origins::Any,
            cors_credentials: false,
            trust_proxy: false,
            secure_cookies: false,
            request_log: false,
            rate_limit: 1200,
            rate_window: Duration::from_secs(60),
            cache_ttl: Duration::from_secs(30),
            compression_threshold: 1024,
        }
    }

    pub fn middleware_on(&self) -> bool {
        self.profile != Profile::Bare
    }

    pub fn production(&self) -> bool {
        self.profile == Profile::Production
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("FLIGHT_APP_SECRET must be set to your own secret in the production profile")]
    BuiltInSecret,
    #[error("FLIGHT_APP_SECRET must be at least 32 bytes, got {0}")]
    ShortSecret(usize),
    #[error("FLIGHT_CORS_CREDENTIALS needs an explicit FLIGHT_CORS_ORIGINS list; browsers reject credentials with `*`")]
    CredentialsWithWildcard,
    #[error("FLIGHT_CORS_ORIGINS entry {0:?} is not an origin like https://example.com")]
    BadOrigin(String),
    #[error("FLIGHT_CORS_ORIGINS is set but lists no origin; list origins, or `*` for any origin")]
    NoOrigins,
    #[error("FLIGHT_DIST_PATH {0:?} is not a readable directory: {1}")]
    BadDist(PathBuf, std::io::Error),
    #[error("FLIGHT_REDIS_URL {0:?} is not a redis:// URL: {1}")]
    BadRedisUrl(String, String),
}

impl Config {
    pub fn resolve(self) -> Result<Settings, ConfigError> {
        let profile = self.middleware;
        let secret = match self.app_secret {
            Some(s) if s == BUILT_IN_SECRET && profile == Profile::Production => {
                return Err(ConfigError::BuiltInSecret);
            }
            Some(s) if s.len() < 32 && profile == Profile::Production => return Err(ConfigError::ShortSecret(s.len())),
            Some(s) => s.into_bytes(),
            None if profile == Profile::Production => return Err(ConfigError::BuiltInSecret),
            None => BUILT_IN_SECRET.as_bytes().to_vec(),
        };
        let cors_origins = parse_origins(&self.cors_origins)?;
        if self.cors_credentials && matches!(cors_origins, Origins::Any) {
            return Err(ConfigError::CredentialsWithWildcard);
        }
        let dist_path = match self.dist_path {
            Some(path) => match std::fs::canonicalize(&path).and_then(|p| std::fs::read_dir(&p).map(|_| p)) {
                Ok(p) => Some(p),
                Err(e) => return Err(ConfigError::BadDist(path, e)),
            },
            None => None,
        };
        if let Some(url) = &self.redis_url
            && let Err(e) = redis::Client::open(url.as_str())
        {
            return Err(ConfigError::BadRedisUrl(url.clone(), e.to_string()));
        }
        Ok(Settings {
            addr: SocketAddr::new(self.hostname, self.port),
            profile,
            redis_url: self.redis_url,
            redis_timeout: Duration::from_millis(self.redis_timeout_ms.max(1)),
            secret,
            dist_path,
            cors_origins,
            cors_credentials: self.cors_credentials,
            trust_proxy: self.trust_proxy,
            secure_cookies: self.secure_cookies,
            request_log: self.request_log,
            rate_limit: self.rate_limit,
            rate_window: Duration::from_secs(self.rate_window),
            cache_ttl: Duration::from_secs(self.cache_ttl),
            compression_threshold: self.compression_threshold,
        })
    }
}

fn parse_origins(raw: &[String]) -> Result<Origins, ConfigError> {
    let entries: Vec<&str> = raw.iter().map(|s| s.trim()).filter(|s| !s.is_empty()).collect();
    // An empty list is refused rather than read as `*`: a deployment that templates an empty allowlist means
    // "no origin", and silently allowing every origin would be the opposite.
    if entries.is_empty() {
        return Err(ConfigError::NoOrigins);
    }
    if entries.contains(&"*") {
        return Ok(Origins::Any);
    }
    let mut list = Vec::with_capacity(entries.len());
    for raw_entry in entries {
        let entry = normalize_origin(raw_entry);
        let host = entry.strip_prefix("https://").or_else(|| entry.strip_prefix("http://"));
        let valid =
            host.is_some_and(|h| !h.is_empty() && !h.contains('/')) && entry.bytes().all(|b| b.is_ascii_graphic());
        match HeaderValue::from_str(&entry) {
            Ok(v) if valid => list.push(v),
            _ => return Err(ConfigError::BadOrigin(raw_entry.to_string())),
        }
    }
    Ok(Origins::List(list))
}

/// An allowlist entry in the form browsers send in `Origin` (RFC 6454 serialization): scheme and host in lower
/// case, no default port, no trailing slash. Without this, `https://A.example` or `https://a.example:443` would
/// be accepted at startup and then never match, silently blocking the site they name.
fn normalize_origin(entry: &str) -> String {
    let lower = entry.trim_end_matches('/').to_ascii_lowercase();
    for (scheme, port) in [("https://", ":443"), ("http://", ":80")] {
        if let Some(host) = lower.strip_prefix(scheme).and_then(|h| h.strip_suffix(port)) {
            return format!("{scheme}{host}");
        }
    }
    lower
}
