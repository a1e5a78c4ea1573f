use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// scribe-rs: the Scribe notes service (component records on Postgres, JSON-Schema validation, version
/// history). Variables keep the original's SCRIBE_APP_* names and defaults; DATABASE_URL and REDIS_URL win.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "scribe-rs", version, about)]
pub struct Config {
    #[arg(long, env = "SCRIBE_APP_PORT", default_value_t = 1337)]
    pub port: u16,
    #[arg(long, env = "SCRIBE_APP_HOSTNAME", default_value = "0.0.0.0")]
    pub hostname: IpAddr,
    #[arg(long, env = "SCRIBE_APP_DB_HOST", default_value = "localhost")]
    pub db_host: String,
    #[arg(long, env = "SCRIBE_APP_DB_USER", default_value = "")]
    pub db_user: String,
    #[arg(long, env = "SCRIBE_APP_DB_PASS", default_value = "", hide_env_values = true)]
    pub db_pass: String,
    #[arg(long, env = "SCRIBE_APP_DB_NAME", default_value = "scribe")]
    pub db_name: String,
    #[arg(long, env = "SCRIBE_APP_DB_PORT", default_value_t = 5432)]
    pub db_port: u16,
    /// Full Postgres URL; wins over the SCRIBE_APP_DB_* parts.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Postgres connections per worker thread.
    #[arg(long, env = "SCRIBE_APP_POOL_SIZE", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub pool_size: u32,
    /// Milliseconds to wait for a pooled connection (then 503) and to open one.
    #[arg(long, env = "SCRIBE_APP_DB_TIMEOUT_MS", default_value_t = 2000)]
    pub db_timeout_ms: u64,
    /// Server-side statement timeout, milliseconds.
    #[arg(long, env = "SCRIBE_APP_STATEMENT_TIMEOUT_MS", default_value_t = 10_000)]
    pub statement_timeout_ms: u64,
    #[arg(long, env = "SCRIBE_APP_REDIS_HOST", default_value = "127.0.0.1")]
    pub redis_host: String,
    #[arg(long, env = "SCRIBE_APP_REDIS_PORT", default_value_t = 6379)]
    pub redis_port: u16,
    #[arg(long, env = "SCRIBE_APP_REDIS_SCHEMA_DB", default_value_t = 1)]
    pub redis_schema_db: u32,
    /// Full Redis URL for the schema cache; wins over the SCRIBE_APP_REDIS_* parts.
    #[arg(long, env = "REDIS_URL")]
    pub redis_url: Option<String>,
    /// Milliseconds any one Redis command may take before the schema cache is skipped.
    #[arg(long, env = "SCRIBE_APP_REDIS_TIMEOUT_MS", default_value_t = 100)]
    pub redis_timeout_ms: u64,
    /// Refuse records of components that have no schema.
    #[arg(long, env = "SCRIBE_APP_REQUIRE_SCHEMA", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub require_schema: bool,
    /// Fetch `<url>/<component>/schema` for components without a local schema (http:// only).
    #[arg(long, env = "SCRIBE_APP_SCHEMA_BASE_URL")]
    pub schema_base_url: Option<String>,
    /// Folder of `<component>.schema.json` files. Default: `./schemas` when it exists (then a missing folder
    /// is not an error); a folder given here must exist.
    #[arg(long, env = "SCRIBE_APP_SCHEMA_DIR")]
    pub schema_dir: Option<PathBuf>,
    /// Largest request body, like the original's `50mb`.
    #[arg(long, env = "SCRIBE_APP_PAYLOAD_LIMIT", default_value = "50mb", value_parser = parse_size)]
    pub payload_limit: u64,
    /// Enables POST /sql (raw SQL, off by default) for requests bearing this token.
    #[arg(long, env = "SCRIBE_APP_SQL_TOKEN", hide_env_values = true)]
    pub sql_token: Option<String>,
    #[command(flatten)]
    pub serve: serve::ServeArgs,
}

/// `50mb`, `100kb`, `1gb`, `512b` or a bare byte count (the units body-parser takes; 1kb = 1024 bytes).
pub fn parse_size(raw: &str) -> Result<u64, String> {
    let lower = raw.trim().to_ascii_lowercase();
    let split = lower.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(lower.len());
    let (number, unit) = lower.split_at(split);
    let number: f64 = number.parse().map_err(|_| format!("{raw:?} is not a size like 50mb"))?;
    let scale = match unit.trim() {
        "" | "b" => 1.0,
        "kb" => 1024.0,
        "mb" => 1024.0 * 1024.0,
        "gb" => 1024.0 * 1024.0 * 1024.0,
        other => return Err(format!("unknown size unit {other:?} in {raw:?}")),
    };
    Ok((number * scale) as u64)
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub addr: SocketAddr,
    pub database: tokio_postgres::Config,
    pub database_name: String,
    pub pool_size: usize,
    pub db_timeout: Duration,
    pub statement_timeout: Duration,
    pub redis_url: String,
    pub redis_timeout: Duration,
    pub require_schema: bool,
    pub schema_base_url: Option<String>,
    pub schema_dir: Option<PathBuf>,
    pub payload_limit: u64,
    pub sql_token: Option<String>,
}

impl Config {
    pub fn resolve(self) -> Result<Settings, String> {
        let database: tokio_postgres::Config = match &self.database_url {
            Some(url) => url.parse().map_err(|e| format!("DATABASE_URL is not a Postgres URL: {e}"))?,
            None => {
                let mut c = tokio_postgres::Config::new();
                c.host(&self.db_host).port(self.db_port).dbname(&self.db_name);
                if !self.db_user.is_empty() {
                    c.user(&self.db_user);
                }
                if !self.db_pass.is_empty() {
                    c.password(&self.db_pass);
                }
                c
            }
        };
        let database_name = database.get_dbname().unwrap_or("scribe").to_string();
        if !database_name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!("database name {database_name:?} must be letters, digits and _"));
        }
        let redis_url = self
            .redis_url
            .unwrap_or_else(|| format!("redis://{}:{}/{}", self.redis_host, self.redis_port, self.redis_schema_db));
        redis::Client::open(redis_url.as_str()).map_err(|e| format!("REDIS_URL {redis_url:?}: {e}"))?;
        if self.serve.body_limit.is_some() {
            // serve's own flag would be silently overridden by the original's name for the same setting.
            return Err("scribe-rs takes its body limit as --payload-limit / SCRIBE_APP_PAYLOAD_LIMIT (default \
                        50mb), not --body-limit / SCRIBE_APP_BODY_LIMIT"
                .into());
        }
        if let Some(token) = &self.sql_token
            && token.len() < 16
        {
            return Err("SCRIBE_APP_SQL_TOKEN must be at least 16 characters".into());
        }
        Ok(Settings {
            addr: SocketAddr::new(self.hostname, self.port),
            database,
            database_name,
            pool_size: self.pool_size as usize,
            db_timeout: Duration::from_millis(self.db_timeout_ms.max(1)),
            statement_timeout: Duration::from_millis(self.statement_timeout_ms.max(1)),
            redis_url,
            redis_timeout: Duration::from_millis(self.redis_timeout_ms.max(1)),
            require_schema: self.require_schema,
            schema_base_url: self.schema_base_url,
            schema_dir: self.schema_dir.or_else(|| {
                let default = PathBuf::from("schemas");
                default.is_dir().then_some(default)
            }),
            payload_limit: self.payload_limit,
            sql_token: self.sql_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_like_body_parser() {
        assert_eq!(parse_size("50mb"), Ok(50 * 1024 * 1024));
        assert_eq!(parse_size("100kb"), Ok(100 * 1024));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("lots").is_err());
    }
}
