//! The target URL: `http://` or `https://host[:port][/path]`, resolved once before the run.

use std::net::{SocketAddr, ToSocketAddrs};

#[derive(Debug, Clone)]
pub struct Target {
    pub url: String,
    pub addr: SocketAddr,
    /// The Host header value (host, and port when not 80).
    pub host_header: String,
    /// Path and query from the URL (`/` when absent).
    pub path: String,
    /// `https://`: every connection speaks TLS.
    pub tls: bool,
    /// The host as TLS names it (SNI and certificate check): without brackets or port.
    pub server_name: String,
}

/// Why a URL is not a target. The resolver's error is quoted in the message, so it is not also a `source`
/// (a chain printer such as anyhow's `{:#}` would say it twice).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("{url:?} is not an http:// or https:// URL")]
    NotHttp { url: String },
    #[error("{url:?}: missing or unsupported host")]
    NoHost { url: String },
    #[error("{url:?}: the path must not contain spaces or control characters")]
    PathWithSpaces { url: String },
    #[error("{url:?}: invalid host or port")]
    BadHostOrPort { url: String },
    #[error("{url}: cannot resolve {host}: {error}")]
    Unresolvable { url: String, host: String, error: std::io::Error },
    #[error("{url}: {host} resolves to no address")]
    NoAddress { url: String, host: String },
}

pub fn parse(url: &str) -> Result<Target, TargetError> {
    let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (rest, false),
        (_, Some(rest)) => (rest, true),
        _ => return Err(TargetError::NotHttp { url: url.into() }),
    };
    let default_port = if tls { 443 } else { 80 };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('?') => (&rest[..i], format!("/{}", &rest[i..])),
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(TargetError::NoHost { url: url.into() });
    }
    if path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
        return Err(TargetError::PathWithSpaces { url: url.into() });
    }
    let (host, port) =
        split_host_port(authority, default_port).ok_or_else(|| TargetError::BadHostOrPort { url: url.into() })?;
    let server_name = host.trim_start_matches('[').trim_end_matches(']').to_string();
    let addr = (server_name.as_str(), port)
        .to_socket_addrs()
        .map_err(|error| TargetError::Unresolvable { url: url.into(), host: host.to_string(), error })?
        .next()
        .ok_or_else(|| TargetError::NoAddress { url: url.into(), host: host.to_string() })?;
    let host_header = if port == default_port { host.to_string() } else { format!("{host}:{port}") };
    Ok(Target { url: url.to_string(), addr, host_header, path, tls, server_name })
}

fn split_host_port(authority: &str, default_port: u16) -> Option<(&str, u16)> {
    if let Some(end) = authority.strip_prefix('[').and_then(|a| a.find(']')) {
        let host = &authority[..end + 2];
        return match &authority[end + 2..] {
            "" => Some((host, default_port)),
            port => Some((host, port.strip_prefix(':')?.parse().ok()?)),
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() => Some((host, port.parse().ok()?)),
        Some(_) => None,
        None => Some((authority, default_port)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_address_path_host_header_and_scheme_and_bad_ones_are_refused() {
        let t = parse("http://127.0.0.1:3000/api/hello?x=1").expect("valid");
        assert_eq!(
            (t.addr.port(), t.path.as_str(), t.host_header.as_str()),
            (3000, "/api/hello?x=1", "127.0.0.1:3000")
        );
        let t = parse("http://127.0.0.1").expect("valid");
        assert_eq!((t.addr.port(), t.path.as_str(), t.host_header.as_str()), (80, "/", "127.0.0.1"));
        let t = parse("http://[::1]:8080/x").expect("valid");
        assert_eq!((t.addr.port(), t.host_header.as_str()), (8080, "[::1]:8080"));
        assert_eq!(parse("http://127.0.0.1:9?q").expect("valid").path, "/?q");
        let t = parse("https://localhost/x").expect("valid");
        assert_eq!(
            (t.addr.port(), t.tls, t.host_header.as_str(), t.server_name.as_str()),
            (443, true, "localhost", "localhost")
        );
        let t = parse("https://[::1]:8443/").expect("valid");
        assert_eq!((t.host_header.as_str(), t.server_name.as_str(), t.tls), ("[::1]:8443", "::1", true));
        assert!(!parse("http://127.0.0.1/").expect("valid").tls);
        assert!(matches!(parse("ftp://127.0.0.1/"), Err(TargetError::NotHttp { .. })));
        assert!(matches!(parse("127.0.0.1:80"), Err(TargetError::NotHttp { .. })));
        assert!(matches!(parse("http://user@127.0.0.1/"), Err(TargetError::NoHost { .. })));
        assert!(matches!(parse("http://:80/"), Err(TargetError::BadHostOrPort { .. })));
        assert!(matches!(parse("http://127.0.0.1:99999/"), Err(TargetError::BadHostOrPort { .. })));
        let spaced = parse("http://127.0.0.1/a b").err().map(|e| e.to_string());
        assert_eq!(
            spaced.as_deref(),
            Some("\"http://127.0.0.1/a b\": the path must not contain spaces or control characters")
        );
    }
}
