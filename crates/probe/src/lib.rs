//! probe: one HTTP/1.1 GET over `std::net::TcpStream`, for container health checks.
//!
//! The server images are distroless (no shell, no curl), so their `HEALTHCHECK` and the compose and Kubernetes
//! probes run this instead: `probe http://127.0.0.1:3000/healthz [--timeout-ms 2000]` exits 0 when the status
//! is 2xx and 1 otherwise, with one line on stderr saying why (refused, timed out, status 503, ...). Exit 2 is
//! never used: Docker reserves it in health checks. The whole exchange (connect, send, read the status line)
//! shares one deadline, so a server that accepts but never answers fails within the timeout. Only the status
//! line is read; the body is not. Plain `http://` only: the servers speak HTTP/1.1 without TLS.
//!
//! No dependencies on purpose: it is copied into every server image and must stay tiny.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

pub const USAGE: &str = "usage: probe http://HOST[:PORT][/PATH] [--timeout-ms N]\n\
    One HTTP/1.1 GET; exit 0 on a 2xx status, 1 otherwise (one line on stderr). Default timeout 2000 ms.";

pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(2000);

/// The status line must arrive within this many bytes (a status line is a few dozen).
const MAX_STATUS_LINE: usize = 8 * 1024;

/// Why a probe failed (or `Help`, which is not a failure).
#[derive(Debug)]
pub enum Error {
    Help,
    Usage(String),
    Url(String),
    Resolve(String, io::Error),
    Connect(SocketAddr, io::Error),
    Timeout(Duration),
    Io(io::Error),
    Closed,
    BadStatusLine(String),
    Status(u16, String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Help => f.write_str(USAGE),
            Error::Usage(m) => write!(f, "{m} ({})", USAGE.lines().next().unwrap_or(USAGE)),
            Error::Url(m) => write!(f, "bad URL: {m}"),
            Error::Resolve(host, e) => write!(f, "cannot resolve {host}: {e}"),
            Error::Connect(addr, e) => write!(f, "cannot connect to {addr}: {e}"),
            Error::Timeout(t) => write!(f, "no answer within {} ms", t.as_millis()),
            Error::Io(e) => write!(f, "{e}"),
            Error::Closed => f.write_str("connection closed before a status line"),
            Error::BadStatusLine(line) => write!(f, "not an HTTP/1.x status line: {line:?}"),
            Error::Status(code, reason) if reason.is_empty() => write!(f, "status {code}"),
            Error::Status(code, reason) => write!(f, "status {code} {reason}"),
        }
    }
}

impl std::error::Error for Error {}

/// Where to send the GET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The host as written in the URL (brackets kept for IPv6), for the Host header.
    pub host: String,
    pub port: u16,
    /// Path and query, at least `/`.
    pub path: String,
}

impl Target {
    /// The host without IPv6 brackets, for name resolution.
    fn bare_host(&self) -> &str {
        self.host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(&self.host)
    }
}

/// `http://host[:port][/path]`; the port defaults to 80.
pub fn parse_url(url: &str) -> Result<Target, Error> {
    let rest = url.strip_prefix("http://").ok_or_else(|| Error::Url(format!("{url:?} must start with http://")))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('/') => (&rest[..i], rest[i..].to_string()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_string()),
    };
    if authority.contains('@') {
        return Err(Error::Url(format!("{url:?}: credentials are not supported")));
    }
    // The port follows the last ':' unless that ':' is inside an IPv6 literal.
    let (host, port) = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => {
            let port = authority[i + 1..].parse().map_err(|_| Error::Url(format!("{url:?}: bad port")))?;
            (&authority[..i], port)
        }
        _ => (authority, 80),
    };
    if host.is_empty() || path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
        return Err(Error::Url(format!("{url:?}: no host, or whitespace in the path")));
    }
    Ok(Target { host: host.to_string(), port, path })
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub target: Target,
    pub timeout: Duration,
}

/// `URL [--timeout-ms N]` in any order (`--timeout-ms=N` too); `-h`/`--help` gives [`Error::Help`].
pub fn parse_args(args: &[String]) -> Result<Probe, Error> {
    let mut url: Option<&str> = None;
    let mut timeout = DEFAULT_TIMEOUT;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let millis = if arg == "-h" || arg == "--help" {
            return Err(Error::Help);
        } else if arg == "--timeout-ms" {
            args.next().ok_or_else(|| Error::Usage("--timeout-ms needs a value".into()))?.as_str()
        } else if let Some(value) = arg.strip_prefix("--timeout-ms=") {
            value
        } else if arg.starts_with('-') {
            return Err(Error::Usage(format!("unknown option {arg:?}")));
        } else if url.is_some() {
            return Err(Error::Usage(format!("unexpected argument {arg:?}")));
        } else {
            url = Some(arg);
            continue;
        };
        let ms = millis
            .parse::<u64>()
            .ok()
            .filter(|&ms| ms > 0)
            .ok_or_else(|| Error::Usage(format!("--timeout-ms must be a positive number, not {millis:?}")))?;
        timeout = Duration::from_millis(ms);
    }
    let url = url.ok_or_else(|| Error::Usage("no URL given".into()))?;
    Ok(Probe { target: parse_url(url)?, timeout })
}

impl Probe {
    /// Sends the GET and reads the status line: `Ok(status)` when it is 2xx, else the reason.
    pub fn run(&self) -> Result<u16, Error> {
        let deadline = Instant::now() + self.timeout;
        let remaining = || deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero());
        let timed_out = || Error::Timeout(self.timeout);
        let t = &self.target;

        let addrs: Vec<SocketAddr> =
            (t.bare_host(), t.port).to_socket_addrs().map_err(|e| Error::Resolve(t.host.clone(), e))?.collect();
        let mut stream = None;
        let mut last_error = None;
        for addr in addrs {
            let Some(left) = remaining() else { return Err(timed_out()) };
            match TcpStream::connect_timeout(&addr, left) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) if is_timeout(&e) => return Err(timed_out()),
                Err(e) => last_error = Some(Error::Connect(addr, e)),
            }
        }
        let mut stream = match (stream, last_error) {
            (Some(s), _) => s,
            (None, Some(e)) => return Err(e),
            (None, None) => return Err(Error::Resolve(t.host.clone(), io::ErrorKind::NotFound.into())),
        };

        let host = if t.port == 80 { t.host.clone() } else { format!("{}:{}", t.host, t.port) };
        let request =
            format!("GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: probe\r\nConnection: close\r\n\r\n", t.path);
        stream.set_write_timeout(Some(remaining().ok_or_else(timed_out)?)).map_err(Error::Io)?;
        stream.write_all(request.as_bytes()).map_err(|e| if is_timeout(&e) { timed_out() } else { Error::Io(e) })?;

        let mut head = Vec::with_capacity(256);
        let mut chunk = [0u8; 1024];
        let line_end = loop {
            if let Some(end) = head.windows(2).position(|w| w == b"\r\n") {
                break end;
            }
            if head.len() > MAX_STATUS_LINE {
                return Err(Error::BadStatusLine(String::from_utf8_lossy(&head[..80]).into_owned()));
            }
            stream.set_read_timeout(Some(remaining().ok_or_else(timed_out)?)).map_err(Error::Io)?;
            match stream.read(&mut chunk) {
                Ok(0) => return Err(Error::Closed),
                Ok(n) => head.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return Err(timed_out()),
                Err(e) => return Err(Error::Io(e)),
            }
        };
        let (status, reason) = parse_status_line(&head[..line_end])?;
        if (200..300).contains(&status) { Ok(status) } else { Err(Error::Status(status, reason)) }
    }
}

/// `HTTP/1.1 200 OK` → (200, "OK").
pub fn parse_status_line(line: &[u8]) -> Result<(u16, String), Error> {
    let text = String::from_utf8_lossy(line);
    let bad = || Error::BadStatusLine(text.chars().take(80).collect());
    let mut parts = text.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let code = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") || code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let status = code.parse().map_err(|_| bad())?;
    Ok((status, parts.next().unwrap_or_default().trim().to_string()))
}

/// Read and connect timeouts surface as WouldBlock or TimedOut depending on the call and platform.
fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn urls_parse() {
        let t = parse_url("http://127.0.0.1:3000/healthz").expect("valid URL");
        assert_eq!(t, Target { host: "127.0.0.1".into(), port: 3000, path: "/healthz".into() });
        let t = parse_url("http://flight-rs").expect("valid URL");
        assert_eq!((t.port, t.path.as_str()), (80, "/"));
        let t = parse_url("http://[::1]:8080?x=1").expect("valid URL");
        assert_eq!((t.host.as_str(), t.bare_host(), t.port, t.path.as_str()), ("[::1]", "::1", 8080, "/?x=1"));
        let t = parse_url("http://[::1]/v1/metadata/a?region=en").expect("valid URL");
        assert_eq!((t.port, t.path.as_str()), (80, "/v1/metadata/a?region=en"));
        for bad in ["https://x/", "127.0.0.1:3000/", "http://:3000/", "http://x:port/", "http://u@x/", "http://x/a b"] {
            assert!(matches!(parse_url(bad), Err(Error::Url(_))), "{bad} should be refused");
        }
    }

    #[test]
    fn arguments_parse_in_any_order() {
        let p = parse_args(&args(&["http://h:1/", "--timeout-ms", "250"])).expect("valid");
        assert_eq!(p.timeout, Duration::from_millis(250));
        let p = parse_args(&args(&["--timeout-ms=40", "http://h:1/"])).expect("valid");
        assert_eq!(p.timeout, Duration::from_millis(40));
        assert_eq!(parse_args(&args(&["http://h/"])).expect("valid").timeout, DEFAULT_TIMEOUT);
        assert!(matches!(parse_args(&args(&["--help"])), Err(Error::Help)));
        for bad in [
            &[][..],
            &["http://h/", "--timeout-ms"],
            &["http://h/", "--timeout-ms", "0"],
            &["--nope"],
            &["http://a/", "http://b/"],
        ] {
            assert!(matches!(parse_args(&args(bad)), Err(Error::Usage(_))), "{bad:?} should be a usage error");
        }
    }

    #[test]
    fn status_lines_parse() {
        assert_eq!(parse_status_line(b"HTTP/1.1 200 OK").expect("valid"), (200, "OK".into()));
        assert_eq!(parse_status_line(b"HTTP/1.0 503").expect("valid"), (503, String::new()));
        assert_eq!(parse_status_line(b"HTTP/1.1 404 Not Found").expect("valid"), (404, "Not Found".into()));
        for bad in [&b"SSH-2.0-OpenSSH"[..], b"HTTP/1.1 20 OK", b"HTTP/2 200", b""] {
            assert!(matches!(parse_status_line(bad), Err(Error::BadStatusLine(_))));
        }
    }
}
