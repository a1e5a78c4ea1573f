//! The target URL: plain `http://host[:port][/path]`, resolved once before the run.

use std::net::{SocketAddr, ToSocketAddrs};

#[derive(Debug, Clone)]
pub struct Target {
    pub url: String,
    pub addr: SocketAddr,
    /// The Host header value (host, and port when not 80).
    pub host_header: String,
    /// Path and query from the URL (`/` when absent).
    pub path: String,
}

pub fn parse(url: &str) -> Result<Target, String> {
    if url.starts_with("https://") {
        return Err(format!(
            "{url}: https is not supported; loadgen speaks plain HTTP/1.1 (put TLS in front if needed)"
        ));
    }
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url:?} is not an http:// URL"))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('?') => (&rest[..i], format!("/{}", &rest[i..])),
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("{url:?}: missing or unsupported host"));
    }
    if path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
        return Err(format!("{url:?}: the path must not contain spaces or control characters"));
    }
    let (host, port) = split_host_port(authority).ok_or_else(|| format!("{url:?}: invalid host or port"))?;
    let addr = (host.trim_start_matches('[').trim_end_matches(']'), port)
        .to_socket_addrs()
        .map_err(|e| format!("{url}: cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{url}: {host} resolves to no address"))?;
    let host_header = if port == 80 { host.to_string() } else { format!("{host}:{port}") };
    Ok(Target { url: url.to_string(), addr, host_header, path })
}

fn split_host_port(authority: &str) -> Option<(&str, u16)> {
    if let Some(end) = authority.strip_prefix('[').and_then(|a| a.find(']')) {
        let host = &authority[..end + 2];
        return match &authority[end + 2..] {
            "" => Some((host, 80)),
            port => Some((host, port.strip_prefix(':')?.parse().ok()?)),
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() => Some((host, port.parse().ok()?)),
        Some(_) => None,
        None => Some((authority, 80)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
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
        assert!(parse("https://127.0.0.1/").is_err());
        assert!(parse("127.0.0.1:80").is_err());
        assert!(parse("http://:80/").is_err());
        assert!(parse("http://127.0.0.1:99999/").is_err());
        assert!(parse("http://127.0.0.1/a b").is_err());
    }
}
