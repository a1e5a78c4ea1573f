//! probe: one HTTP/1.1 GET over `std::net::TcpStream`, plain or TLS, for container health checks.
//!
//! The server images are distroless (no shell, no curl), so their `HEALTHCHECK` and the compose and Kubernetes
//! probes run this instead: `probe http://127.0.0.1:3000/healthz [--timeout-ms 2000]` exits 0 when the status
//! is 2xx and 1 otherwise, with one line on stderr saying why (refused, timed out, status 503, ...). Exit 2 is
//! never used: Docker reserves it in health checks. The whole exchange (connect, TLS handshake, send, read the
//! status line) shares one deadline, so a server that accepts but never answers fails within the timeout.
//! Only the status line is read; the body is not.
//!
//! `https://` (for servers run with `--tls-cert`/`--tls-key`, as deploy/compose/tls.yml does) needs one of
//! `--cacert FILE` (verify the server's chain against the certificates in FILE, under the URL's host) or
//! `--insecure` (any certificate; the handshake must still complete): see [`tls`]. TLS 1.3 and 1.2, ALPN
//! `http/1.1`, rustls on aws-lc-rs (the workspace's TLS stack), over the same blocking socket.
//!
//! Its one dependency is rustls: probe is copied into every server image and should stay small, and the
//! plain-HTTP path is std only.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub mod tls;

pub use tls::Trust;

pub const USAGE: &str = "usage: probe http[s]://HOST[:PORT][/PATH] [--timeout-ms N] [--cacert FILE | --insecure]\n\
    One HTTP/1.1 GET; exit 0 on a 2xx status, 1 otherwise (one line on stderr). Default timeout 2000 ms.\n\
    https:// needs --cacert FILE (verify the server against the CA certificates in FILE, under the URL's host)\n\
    or --insecure (accept any certificate; the TLS handshake must still complete).";

pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(2000);

/// The status line must arrive within this many bytes (a status line is a few dozen).
const MAX_STATUS_LINE: usize = 8 * 1024;

/// Why a probe failed (or `Help`, which is not a failure).
#[derive(Debug)]
pub enum Error {
    Help,
    Usage(String),
    Url(String),
    /// An `https://` URL without `--cacert` or `--insecure`.
    NoTrust,
    CaFile(PathBuf, String),
    Resolve(String, io::Error),
    Connect(SocketAddr, io::Error),
    Timeout(Duration),
    Io(io::Error),
    /// The handshake or a TLS record failed (rustls's reason: a certificate problem, an alert, not TLS, ...).
    Tls(rustls::Error),
    TlsClosed,
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
            Error::NoTrust => f.write_str(
                "https:// needs --cacert FILE (the CA to verify the server against) or --insecure (any certificate)",
            ),
            Error::CaFile(path, why) => write!(f, "--cacert {}: {why}", path.display()),
            Error::Resolve(host, e) => write!(f, "cannot resolve {host}: {e}"),
            Error::Connect(addr, e) => write!(f, "cannot connect to {addr}: {e}"),
            Error::Timeout(t) => write!(f, "no answer within {} ms", t.as_millis()),
            Error::Io(e) => write!(f, "{e}"),
            Error::Tls(e) => write!(f, "TLS: {e}{}", tls::hint(e)),
            Error::TlsClosed => f.write_str("connection closed during the TLS handshake"),
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
    /// `https://` rather than `http://`.
    pub https: bool,
    /// The host as written in the URL (brackets kept for IPv6), for the Host header.
    pub host: String,
    pub port: u16,
    /// Path and query, at least `/`.
    pub path: String,
}

impl Target {
    /// The host without IPv6 brackets, for name resolution and TLS.
    fn bare_host(&self) -> &str {
        self.host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(&self.host)
    }

    fn default_port(&self) -> u16 {
        if self.https { 443 } else { 80 }
    }
}

/// `http://host[:port][/path]` or `https://…`; the port defaults to 80 or 443.
pub fn parse_url(url: &str) -> Result<Target, Error> {
    let (https, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (false, rest),
        (_, Some(rest)) => (true, rest),
        _ => return Err(Error::Url(format!("{url:?} must start with http:// or https://"))),
    };
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
            (&authority[..i], Some(port))
        }
        _ => (authority, None),
    };
    if host.is_empty() || path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
        return Err(Error::Url(format!("{url:?}: no host, or whitespace in the path")));
    }
    let mut target = Target { https, host: host.to_string(), port: 0, path };
    target.port = port.unwrap_or(target.default_port());
    Ok(target)
}

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub target: Target,
    pub timeout: Duration,
    /// What an `https://` target is verified against; always `Some` for https, `None` for http.
    pub trust: Option<Trust>,
}

/// `URL [--timeout-ms N] [--cacert FILE | --insecure]` in any order (`--opt=value` too); `-h`/`--help` gives
/// [`Error::Help`].
pub fn parse_args(args: &[String]) -> Result<Probe, Error> {
    let mut url: Option<&str> = None;
    let mut timeout = DEFAULT_TIMEOUT;
    let mut trust: Option<Trust> = None;
    let mut args = args.iter();
    let mut set_trust = |t: Trust| match trust.replace(t) {
        Some(_) => Err(Error::Usage("give one of --cacert FILE or --insecure, once".into())),
        None => Ok(()),
    };
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, v)) if flag.starts_with("--") => (flag, Some(v)),
            _ => (arg.as_str(), None),
        };
        match flag {
            "-h" | "--help" => return Err(Error::Help),
            "--timeout-ms" => {
                let millis = value(inline, &mut args, flag)?;
                let ms = millis.parse::<u64>().ok().filter(|&ms| ms > 0);
                let ms =
                    ms.ok_or_else(|| Error::Usage(format!("--timeout-ms must be a positive number, not {millis:?}")));
                timeout = Duration::from_millis(ms?);
            }
            "--cacert" => {
                let path = value(inline, &mut args, flag)?;
                if path.is_empty() {
                    return Err(Error::Usage("--cacert needs a file".into()));
                }
                set_trust(Trust::CaFile(PathBuf::from(path)))?;
            }
            "--insecure" if inline.is_none() => set_trust(Trust::Insecure)?,
            _ if arg.starts_with('-') => return Err(Error::Usage(format!("unknown option {arg:?}"))),
            _ if url.is_some() => return Err(Error::Usage(format!("unexpected argument {arg:?}"))),
            _ => url = Some(arg),
        }
    }
    let url = url.ok_or_else(|| Error::Usage("no URL given".into()))?;
    let target = parse_url(url)?;
    match (target.https, &trust) {
        (true, None) => return Err(Error::NoTrust),
        // Refused rather than ignored: a check written with --cacert should not pass without TLS.
        (false, Some(_)) => return Err(Error::Usage("--cacert and --insecure are for https:// URLs".into())),
        _ => {}
    }
    Ok(Probe { target, timeout, trust })
}

/// An option's value: after its `=`, or the next argument.
fn value<'a>(inline: Option<&'a str>, rest: &mut std::slice::Iter<'a, String>, flag: &str) -> Result<&'a str, Error> {
    inline.or_else(|| rest.next().map(String::as_str)).ok_or_else(|| Error::Usage(format!("{flag} needs a value")))
}

/// The connected socket with the probe's one deadline applied to every read and write: each call gets what
/// is left of it as the socket's timeout, so however many reads the TLS handshake or a status line sent in
/// pieces takes, the exchange ends by the deadline. A timeout is reported as `TimedOut`.
pub(crate) struct Bounded {
    sock: TcpStream,
    deadline: Instant,
    timeout: Duration,
}

impl Bounded {
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero());
        left.ok_or_else(|| io::ErrorKind::TimedOut.into())
    }
}

/// Socket timeouts surface as WouldBlock (EAGAIN) on Linux; rustls reads WouldBlock as "no data yet, come
/// back later", so it is reported as TimedOut instead.
fn timed_out(e: io::Error) -> io::Error {
    if is_timeout(&e) { io::ErrorKind::TimedOut.into() } else { e }
}

impl Read for Bounded {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.set_read_timeout(Some(self.left()?))?;
        self.sock.read(buf).map_err(timed_out)
    }
}

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.set_write_timeout(Some(self.left()?))?;
        self.sock.write(buf).map_err(timed_out)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

/// An I/O error of the exchange as the probe reports it; `handshake`: it happened during the TLS handshake.
pub(crate) fn io_error(e: io::Error, timeout: Duration, handshake: bool) -> Error {
    if is_timeout(&e) {
        return Error::Timeout(timeout);
    }
    // rustls hands its own errors back wrapped in an io::Error (InvalidData).
    if let Some(tls) = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        return Error::Tls(tls.clone());
    }
    match e.kind() {
        // rustls: the peer closed the TCP connection (without close_notify).
        io::ErrorKind::UnexpectedEof if handshake => Error::TlsClosed,
        io::ErrorKind::UnexpectedEof => Error::Closed,
        _ => Error::Io(e),
    }
}

impl Probe {
    /// Sends the GET and reads the status line: `Ok(status)` when it is 2xx, else the reason.
    pub fn run(&self) -> Result<u16, Error> {
        let deadline = Instant::now() + self.timeout;
        let remaining = || deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero());
        let timed_out = || Error::Timeout(self.timeout);
        let t = &self.target;
        // The CA file is read first, so a bad one is named even when the server is down.
        let tls_config = match (t.https, &self.trust) {
            (true, Some(trust)) => Some(tls::config(trust)?),
            (true, None) => return Err(Error::NoTrust),
            (false, _) => None,
        };

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
        let sock = match (stream, last_error) {
            (Some(s), _) => s,
            (None, Some(e)) => return Err(e),
            (None, None) => return Err(Error::Resolve(t.host.clone(), io::ErrorKind::NotFound.into())),
        };
        let mut sock = Bounded { sock, deadline, timeout: self.timeout };

        let host = if t.port == t.default_port() { t.host.clone() } else { format!("{}:{}", t.host, t.port) };
        let request =
            format!("GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: probe\r\nConnection: close\r\n\r\n", t.path);
        let (status, reason) = if let Some(config) = tls_config {
            let mut tls = tls::connect(sock, t.bare_host(), config)?;
            let answer = exchange(&mut tls, request.as_bytes(), self.timeout);
            // Best effort, so the server sees the session end in order rather than a bare TCP close.
            tls.conn.send_close_notify();
            let _ = tls.conn.write_tls(&mut tls.sock);
            answer?
        } else {
            exchange(&mut sock, request.as_bytes(), self.timeout)?
        };
        if (200..300).contains(&status) { Ok(status) } else { Err(Error::Status(status, reason)) }
    }
}

/// Writes `request` and reads up to the end of the status line, on a plain or a TLS stream.
fn exchange(stream: &mut (impl Read + Write), request: &[u8], timeout: Duration) -> Result<(u16, String), Error> {
    let fail = |e| io_error(e, timeout, false);
    stream.write_all(request).and_then(|()| stream.flush()).map_err(fail)?;
    let mut head = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    let line_end = loop {
        if let Some(end) = head.windows(2).position(|w| w == b"\r\n") {
            break end;
        }
        if head.len() > MAX_STATUS_LINE {
            return Err(Error::BadStatusLine(String::from_utf8_lossy(&head[..80]).into_owned()));
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err(Error::Closed),
            Ok(n) => head.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(fail(e)),
        }
    };
    parse_status_line(&head[..line_end])
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
        assert_eq!(t, Target { https: false, host: "127.0.0.1".into(), port: 3000, path: "/healthz".into() });
        let t = parse_url("https://127.0.0.1:3000/healthz").expect("valid URL");
        assert_eq!(t, Target { https: true, host: "127.0.0.1".into(), port: 3000, path: "/healthz".into() });
        let t = parse_url("https://localhost").expect("valid URL");
        assert_eq!((t.https, t.port, t.path.as_str()), (true, 443, "/"));
        let t = parse_url("http://flight-rs").expect("valid URL");
        assert_eq!((t.port, t.path.as_str()), (80, "/"));
        let t = parse_url("http://[::1]:8080?x=1").expect("valid URL");
        assert_eq!((t.host.as_str(), t.bare_host(), t.port, t.path.as_str()), ("[::1]", "::1", 8080, "/?x=1"));
        let t = parse_url("http://[::1]/v1/metadata/a?region=en").expect("valid URL");
        assert_eq!((t.port, t.path.as_str()), (80, "/v1/metadata/a?region=en"));
        for bad in [
            "ftp://x/",
            "HTTPS://x/",
            "127.0.0.1:3000/",
            "http://:3000/",
            "http://x:port/",
            "http://u@x/",
            "http://x/a b",
        ] {
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
            &["https://h/", "--cacert"],
            &["https://h/", "--cacert="],
            &["https://h/", "--insecure", "--cacert", "ca.pem"],
            &["https://h/", "--insecure", "--insecure"],
            &["https://h/", "--insecure=yes"],
            &["http://h/", "--insecure"],
            &["http://h/", "--cacert", "ca.pem"],
        ] {
            assert!(matches!(parse_args(&args(bad)), Err(Error::Usage(_))), "{bad:?} should be a usage error");
        }
    }

    #[test]
    fn https_needs_a_trust_flag() {
        let p = parse_args(&args(&["--cacert", "/run/ca.pem", "https://127.0.0.1:3000/healthz"])).expect("valid");
        assert_eq!(p.trust, Some(Trust::CaFile("/run/ca.pem".into())));
        let p = parse_args(&args(&["https://h:1/", "--cacert=ca.pem", "--timeout-ms=5"])).expect("valid");
        assert_eq!((p.trust, p.timeout), (Some(Trust::CaFile("ca.pem".into())), Duration::from_millis(5)));
        let p = parse_args(&args(&["https://h:1/", "--insecure"])).expect("valid");
        assert_eq!(p.trust, Some(Trust::Insecure));
        assert_eq!(parse_args(&args(&["http://h:1/"])).expect("valid").trust, None);
        let e = parse_args(&args(&["https://h:1/"])).expect_err("no trust flag");
        assert!(matches!(e, Error::NoTrust));
        assert_eq!(e.to_string().lines().count(), 1);
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
