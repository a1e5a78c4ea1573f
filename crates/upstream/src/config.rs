use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The token the service answers with unless told otherwise.
pub const DEFAULT_TOKEN: &str = "7f3a9c21e4b05d68";

/// upstream: answers `GET /upstream` with a fixed 1 KiB JSON document after `--delay`, for compare's
/// `upstream` workload; `GET /stats` counts what it served.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "upstream", version, about)]
pub struct Config {
    #[arg(long, env = "UPSTREAM_PORT", default_value_t = 3009)]
    pub port: u16,
    #[arg(long, env = "UPSTREAM_HOSTNAME", default_value = "127.0.0.1")]
    pub hostname: IpAddr,
    /// How long each /upstream request waits before its answer (10ms, 1s; a bare number is seconds). Requests
    /// wait concurrently: one waiting does not hold up another.
    #[arg(long, env = "UPSTREAM_DELAY", default_value = "0ms", value_parser = textfmt::parse_duration)]
    pub delay: Duration,
    /// The `token` field of the answer: 1 to 64 characters of A-Z a-z 0-9 _ -.
    #[arg(long, env = "UPSTREAM_TOKEN", default_value = DEFAULT_TOKEN, value_parser = parse_token)]
    pub token: String,
    #[command(flatten)]
    pub serve: serve::ServeArgs,
}

/// The resolved server settings; tests build these directly.
#[derive(Debug, Clone)]
pub struct Settings {
    pub addr: SocketAddr,
    pub delay: Duration,
    pub token: String,
}

impl Config {
    pub fn settings(&self) -> Settings {
        Settings { addr: SocketAddr::new(self.hostname, self.port), delay: self.delay, token: self.token.clone() }
    }
}

/// A token the document can carry verbatim: no character JSON would escape, and short enough that the padding
/// always has room.
pub fn parse_token(raw: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if (1..=64).contains(&raw.len()) && raw.chars().all(allowed) {
        Ok(raw.to_string())
    } else {
        Err(format!("invalid token {raw:?}: 1 to 64 characters of A-Z a-z 0-9 _ -"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_short_and_plain() {
        assert_eq!(parse_token(DEFAULT_TOKEN).as_deref(), Ok(DEFAULT_TOKEN));
        assert!(parse_token(&"a".repeat(64)).is_ok());
        assert!(parse_token("A-z_09").is_ok());
        for bad in ["", &"a".repeat(65), "a b", "a\"b", "é", "a/b"] {
            assert!(parse_token(bad).is_err(), "{bad:?}");
        }
    }
}
