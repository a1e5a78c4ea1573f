//! flight-rs's middleware promises, end to end over real TCP with raw request bytes (nothing normalized by a
//! client library), in the `default` and `production` profiles, with the in-memory stores and with Redis
//! (`FLIGHT_REDIS_URL`, a real redis-server, two flight-rs instances sharing it where state crosses them).
//!
//! What each test proves, and the figure it reached on its last run:
//! * `cors_allowlist_never_reflects_a_foreign_origin`: with `FLIGHT_CORS_ORIGINS=https://allowed.example,
//!   http://localhost:8080` and credentials on, an origin corpus (case variants, suffix / prefix / subdomain
//!   tricks, scheme swaps, trailing dot and slash, ports, userinfo, `null`, empty, `*`, lists, Cyrillic
//!   look-alikes, punycode, zero-width space, non-UTF-8 bytes, 4 KB) sent as simple requests, 404s, 405s,
//!   preflights and plain OPTIONS, in default, production/memory and production/Redis: an origin is echoed
//!   only when it is exactly an allowed one, `Access-Control-Allow-Credentials` only comes with such an echo
//!   (never with `*`), allowed origins are always echoed with `Vary: Origin`, and a response cached for an
//!   allowed origin never carries that origin's allow header to another one. 124 origins x 7 request kinds x
//!   3 modes + 21 without Origin = 2625 requests: 0 reflected, 0 credentials without an exact echo, 0 5xx.
//! * `cors_wildcard_never_sends_credentials`: the default `*` answers `*` to every origin and never sends
//!   credentials. 868 requests, 0 with credentials, 0 other allow-origin values.
//! * `cors_edge_configs_exit_64_or_serve_safely`: the real `flight-rs` binary started with 31 edge values of
//!   FLIGHT_CORS_ORIGINS (empty, separators only, `*` mixed with origins, duplicates, trailing slashes, no
//!   scheme, `null`, paths, other schemes, upper-case scheme, ports, Unicode, CR LF, spaces, wildcards in
//!   hosts), each with credentials off and on (62 starts): each either exits 64 with one stderr line naming the
//!   variable, or serves a probe corpus without a 5xx and without reflecting anything but its own entries, and
//!   which of the two matches the documented rule. Last run: 38 exits 64, 24 served 765 probes, 0 failures.
//!   Empty and separator-only values mean the default `*` (refused with credentials).
//! * `response_cache_never_crosses_clients_in_memory` / `_on_redis` (two instances sharing Redis): a response
//!   to a request with Authorization (4 spellings) is never stored or served, a response that set a session
//!   cookie is never served to another client (5 clients' visit counters stay separate), 404s and 304s are
//!   never stored (a 404 followed by the file appearing answers 200; a 304 to one client is not what the next
//!   client gets), and on Redis every stored entry decodes to a 2xx without Set-Cookie.
//! * `tampered_session_cookies_start_new_sessions_in_memory` / `_on_redis`: 32-34 tampered spellings of a valid
//!   session cookie (flipped signature / id bytes, truncations, extra segments, padding, another session's
//!   signature, 8 KB and 100 KB values, non-UTF-8 bytes, empty, renamed) each get a new session (visits 1,
//!   a fresh id) or a 4xx for an unparseable head (431 for 100 KB), never a 5xx and never the old session's
//!   data, which is still intact afterwards (the count depends on the random signature: two spellings exist
//!   only when it has `-`/`_` or lower-case letters). Last run: 33 and 34 cookies, 0 old sessions served.
//! * `crlf_never_splits_a_response`: CR LF encoded (`%0d%0a`, `%0a`, `%0d`, the U+560A/U+560D trick) and raw
//!   (bare CR, bare LF, obs-fold) in paths, queries, Origin, Access-Control-Request-Headers, Cookie, Host,
//!   X-Forwarded-For, Accept-Encoding, If-None-Match, with GET, HEAD and preflights, request log on: 0 of 81
//!   requests produced an injected header line, an extra response after the first, or a 5xx.
//! * `static_traversal_never_leaves_dist`: 2055 raw targets (dot-dot in 18 spellings incl. `%2e`, `%252e`,
//!   overlong UTF-8, fullwidth dots and `%u` forms, x 14 separators incl. `%2f`, `%5c`, `\`, overlong `/`,
//!   x depths and targets, plus absolute paths, `//etc/passwd`, NUL, absolute-form targets, symlinks out) in
//!   bare, production/memory and production/Redis = 6165 requests: a secret file next to the dist folder, one
//!   in a sibling folder named `dist-sibling`, and /etc/passwd never appear (0 escapes, 0 5xx); the 222 200s
//!   are all files of dist (the SPA index for page-like targets).

use std::collections::{BTreeSet, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use flight::config::Settings;
use testkit::Redis;
use testkit::http::{Conn, Response, first_line, request_bytes};
use testkit::process::{Guard, wait_for_exit};

/// Long enough for the production profile, and not the built-in one.
const SECRET: &str = "middleware-promises signing secret, 32+ bytes, never the built-in one";
const IO_TIMEOUT: Duration = Duration::from_secs(10);
const ALLOWED: [&str; 2] = ["https://allowed.example", "http://localhost:8080"];

// ------------------------------------------------------------------------------------------------------------
// Servers
// ------------------------------------------------------------------------------------------------------------

/// flight-rs in this process on 127.0.0.1:<ephemeral>, one worker; shut down when dropped.
struct Server {
    addr: SocketAddr,
    /// Shut down gracefully when dropped (serve::Server's own Drop).
    _server: serve::Server,
}

/// Settings exactly as the binary resolves them from its flags, with a rate limit no corpus reaches.
fn settings(args: &[&str]) -> Settings {
    let mut argv = vec!["flight-rs", "--hostname", "127.0.0.1", "--port", "0", "--app-secret", SECRET];
    argv.extend(args);
    let config = <flight::Config as clap::Parser>::try_parse_from(&argv)
        .unwrap_or_else(|e| panic!("flags {argv:?} do not parse: {e}"));
    let mut settings = config.resolve().unwrap_or_else(|e| panic!("flags {argv:?} do not resolve: {e}"));
    // The corpora send thousands of requests from 127.0.0.1; the limiter is not what is tested here.
    settings.rate_limit = 10_000_000;
    settings
}

fn start(settings: Settings) -> Server {
    let app = flight::App::new(settings).expect("the flight app builds");
    let listeners = serve::bind_reuseport("127.0.0.1:0".parse().expect("an address"), 1).expect("bind 127.0.0.1:0");
    let limits = serve::Limits { workers: 1, shutdown_timeout: Duration::from_secs(1), ..Default::default() };
    let server = flight::start(app, listeners, limits).expect("flight-rs starts");
    Server { addr: server.local_addr(), _server: server }
}

/// A temp folder with `dist/` (served) and, outside it, `secret.txt` and `dist-sibling/secret.txt`.
struct Dist {
    dir: tempfile::TempDir,
    root: PathBuf,
}

const OUTSIDE_SECRET: &str = "OUTSIDE-SECRET-4f1c9a-next-to-the-dist-folder";
const SIBLING_SECRET: &str = "SIBLING-SECRET-77be02-in-dist-sibling";
const INDEX_HTML: &str = "<!doctype html><html><head><title>spa</title></head><body>index</body></html>\n";
const APP_JS: &str = "console.log('app');\n";
const SMALL_TXT: &str = "a small text file\n";
const DEEP_TXT: &str = "deep inside dist\n";

fn dist() -> Dist {
    let dir = tempfile::tempdir().expect("a temp dir");
    let write = |path: PathBuf, text: &str| {
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create dirs");
        std::fs::write(path, text).expect("write a file");
    };
    write(dir.path().join("secret.txt"), OUTSIDE_SECRET);
    write(dir.path().join("dist-sibling/secret.txt"), SIBLING_SECRET);
    let root = dir.path().join("dist");
    write(root.join("index.html"), INDEX_HTML);
    write(root.join("assets/app.js"), APP_JS);
    write(root.join("small.txt"), SMALL_TXT);
    write(root.join("sub/dir/file.txt"), DEEP_TXT);
    // Symlinks that lead out: the file itself, and a folder above dist.
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("link-out.txt")).expect("a file symlink");
    std::os::unix::fs::symlink(dir.path(), root.join("up")).expect("a folder symlink");
    let root = std::fs::canonicalize(root).expect("a canonical dist path");
    Dist { dir, root }
}

// ------------------------------------------------------------------------------------------------------------
// A raw HTTP/1.1 exchange that keeps the response head's bytes, so a split header is seen as it was sent
// ------------------------------------------------------------------------------------------------------------

/// A response (testkit's, with its head as received), and what the server sent after it before closing.
#[derive(Debug)]
struct Raw {
    res: Response,
    /// Bytes after the end of the first response (a second, smuggled response would be here).
    trailing: Vec<u8>,
}

impl std::ops::Deref for Raw {
    type Target = Response;

    fn deref(&self) -> &Response {
        &self.res
    }
}

impl Raw {
    /// The things no response may ever be: a 5xx, a head line with a bare CR or LF or without a colon, a
    /// header name that is not a token, or anything after the response.
    fn problems(&self) -> Vec<String> {
        let mut found = Vec::new();
        if self.status >= 500 {
            found.push(format!("status {}", self.status));
        }
        for line in self.head_lines() {
            let shown = String::from_utf8_lossy(line);
            if line.iter().any(|b| *b == b'\r' || *b == b'\n') {
                found.push(format!("bare CR or LF in head line {shown:?}"));
            }
            match line.iter().position(|b| *b == b':') {
                Some(colon) if colon > 0 && line[..colon].iter().all(|b| is_token(*b)) => {}
                _ => found.push(format!("head line that is not a header {shown:?}")),
            }
        }
        if !self.trailing.is_empty() {
            found.push(format!("{} bytes after the response: {:?}", self.trailing.len(), self.trailing_text()));
        }
        found
    }

    fn trailing_text(&self) -> String {
        String::from_utf8_lossy(&self.trailing[..self.trailing.len().min(200)]).into_owned()
    }
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A request with `Host` and `Connection: close`; `target` and header values go out byte for byte.
fn request(method: &str, target: &[u8], headers: &[(&str, &[u8])]) -> Vec<u8> {
    request_bytes(method, target, headers, None)
}

/// Sends the bytes on a new connection, reads the response and then everything until the server closes.
fn exchange(addr: SocketAddr, raw: &[u8]) -> Raw {
    try_exchange(addr, raw).unwrap_or_else(|e| panic!("{:?}: {e}", first_line(raw)))
}

/// An error of kind `InvalidData` when the server answered with bytes that are no HTTP/1.1 response: a
/// failure for every caller, unlike a connection closed without an answer.
fn try_exchange(addr: SocketAddr, raw: &[u8]) -> std::io::Result<Raw> {
    let mut conn = Conn::open(addr)?;
    conn.set_timeout(IO_TIMEOUT);
    // The server may answer (431, 400) and close before reading all of it: the response counts.
    let written = conn.write(raw);
    let res = match conn.next_response(raw.starts_with(b"HEAD ")) {
        Ok(Some(res)) => res,
        Ok(None) => return Err(written.err().unwrap_or_else(|| std::io::ErrorKind::UnexpectedEof.into())),
        Err(e) => return Err(e),
    };
    Ok(Raw { res, trailing: conn.read_until_close() })
}

/// The response to `raw`, or `None` when the server closed without answering; an answer that does not parse
/// as HTTP/1.1 is recorded as a failure.
fn answered(failures: &mut Failures, what: &str, addr: SocketAddr, raw: &[u8]) -> Option<Raw> {
    match try_exchange(addr, raw) {
        Ok(res) => Some(res),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            failures.push(format!("{what}: an answer that is no HTTP/1.1 response: {e}"));
            None
        }
        Err(_) => None,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Collects corpus failures so one run reports all of them, not just the first.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn push(&mut self, what: String) {
        self.0.push(what);
    }

    fn check(&mut self, what: &str, res: &Raw) {
        for problem in res.problems() {
            self.push(format!("{what}: {problem}"));
        }
    }

    fn assert_none(&self, figure: &str) {
        let shown: Vec<&String> = self.0.iter().take(25).collect();
        assert!(self.0.is_empty(), "{figure}: {} failures, first ones:\n{shown:#?}", self.0.len());
    }
}

// ------------------------------------------------------------------------------------------------------------
// Redis: a few raw RESP commands to look at what flight-rs stored
// ------------------------------------------------------------------------------------------------------------

#[derive(Debug)]
enum Resp {
    /// A status or an integer: nothing these tests look at.
    Other,
    Bulk(Option<Vec<u8>>),
    Array(Vec<Resp>),
}

fn redis_command(port: u16, args: &[&[u8]]) -> Resp {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to redis");
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("a read timeout");
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    stream.write_all(&out).expect("write to redis");
    read_resp(&mut BufReader::new(stream))
}

fn read_resp(reader: &mut impl BufRead) -> Resp {
    let mut line = String::new();
    reader.read_line(&mut line).expect("a RESP line");
    let line = line.trim_end();
    let (kind, rest) = line.split_at(1);
    let number = || rest.parse::<i64>().unwrap_or_else(|_| panic!("a RESP number in {line:?}"));
    match kind {
        "+" | ":" => Resp::Other,
        "-" => panic!("redis answered an error: {rest}"),
        "$" if number() < 0 => Resp::Bulk(None),
        "$" => {
            let mut data = vec![0; usize::try_from(number()).expect("a length") + 2];
            reader.read_exact(&mut data).expect("a RESP bulk string");
            data.truncate(data.len() - 2);
            Resp::Bulk(Some(data))
        }
        "*" => Resp::Array((0..number().max(0)).map(|_| read_resp(reader)).collect()),
        _ => panic!("unexpected RESP line {line:?}"),
    }
}

/// Every `flight:cache:*` entry in Redis, decoded as (key, status, header names).
fn cached_entries(redis: &Redis) -> Vec<(String, u16, Vec<String>)> {
    let Resp::Array(keys) = redis_command(redis.port(), &[b"KEYS", b"flight:cache:*"]) else { panic!("KEYS") };
    let mut entries = Vec::new();
    for key in keys {
        let Resp::Bulk(Some(key)) = key else { panic!("a key: {key:?}") };
        let Resp::Bulk(Some(raw)) = redis_command(redis.port(), &[b"GET", &key]) else { continue };
        // status u16, header count u16, then (name len u16, name, value len u32, value)*, body.
        let u16_at = |i: usize| u16::from_be_bytes([raw[i], raw[i + 1]]);
        let status = u16_at(0);
        let mut names = Vec::new();
        let mut at = 4;
        for _ in 0..u16_at(2) {
            let len = usize::from(u16_at(at));
            names.push(lossy(&raw[at + 2..at + 2 + len]).to_ascii_lowercase());
            at += 2 + len;
            let value_len = u32::from_be_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]]);
            at += 4 + usize::try_from(value_len).expect("a length");
        }
        entries.push((lossy(&key), status, names));
    }
    entries
}

// ------------------------------------------------------------------------------------------------------------
// CORS
// ------------------------------------------------------------------------------------------------------------

/// Origins to send: for each allowed origin, the spellings an attacker would try, then hostless oddities.
fn origin_corpus() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for base in ALLOWED {
        let (scheme, host) = base.split_once("://").expect("scheme://host");
        let other = if scheme == "https" { "http" } else { "https" };
        let hostname = host.split(':').next().expect("a host name");
        let mut capital = host.to_string();
        capital[..1].make_ascii_uppercase();
        let variants = [
            base.to_string(), // the allowed origin itself, first: production caches its response
            base.to_ascii_uppercase(),
            format!("{}://{host}", scheme.to_ascii_uppercase()),
            format!("{scheme}://{}", host.to_ascii_uppercase()),
            format!("{scheme}://{capital}"),
            format!("{other}://{host}"),
            format!("{scheme}://{hostname}"),
            format!("{base}.evil.com"),
            format!("{base}.evil"),
            format!("{base}evil.com"),
            format!("{base}-evil.com"),
            format!("{base}."),
            format!("{base}/"),
            format!("{base}//"),
            format!("{base}/path"),
            format!("{base}:443"),
            format!("{base}:80"),
            format!("{base}:0"),
            format!("{base}@evil.com"),
            format!("{base}#"),
            format!("{base}?"),
            format!("{base}%00"),
            format!("{base}%2eevil.com"),
            format!("{base}%2f"),
            format!("{base}\\"),
            format!("{base}\""),
            format!("\"{base}\""),
            format!("{scheme}://evil.{host}"),
            format!("{scheme}://evil{host}"),
            format!("{scheme}://{hostname}.evil.com"),
            format!("{scheme}://evil.com/{host}"),
            format!("{scheme}://evil.com?{host}"),
            format!("{scheme}://evil.com#{host}"),
            format!("{scheme}://evil.com@{host}"),
            format!("//{host}"),
            host.to_string(),
            format!("{scheme}:{host}"),
            format!("{scheme}:/{host}"),
            format!("{scheme}:///{host}"),
            format!("{base}, https://evil.com"),
            format!("https://evil.com, {base}"),
            format!("{base} https://evil.com"),
            format!("{scheme}://{}", host.replace('.', "%2e")),
            format!("{scheme}://{}", host.replacen('o', "\u{43e}", 1)), // Cyrillic о, raw UTF-8
            format!("{base}\u{200b}"),                                  // zero-width space
            format!("{scheme}://xn--{hostname}-3ya"),                   // punycode
            format!("{base}\t"), // OWS: parsers drop it, so this *is* the allowed origin
            format!(" {base}"),
        ];
        out.extend(variants.into_iter().map(String::into_bytes));
        let mut high = base.as_bytes().to_vec();
        high.push(0xff);
        out.push(high);
        let mut overlong = base.as_bytes().to_vec();
        overlong.insert(scheme.len() + 3, 0xc0);
        out.push(overlong);
    }
    for odd in [
        "null",
        "",
        "*",
        "undefined",
        "https://evil.com",
        "http://evil.com",
        "file://",
        "https://",
        "https://allowed.example.evil.com",
        "https://allowed.example.",
        "https://sub.allowed.example",
        "https://allowedXexample",
        "https://allowed_example",
        "http://127.0.0.1:8080",
        "http://[::1]:8080",
        "http://localhost:08080",
        "http://localhost:80800",
        "http://localhost:8080.evil.com",
        "chrome-extension://abcdefghijklmnop",
        "data:",
        "https://allowed.example:443/",
        "'https://allowed.example'",
        "<https://allowed.example>",
        "https://allowed.example%0d%0aX-Injected: yes",
        "https://allowed.example https://allowed.example",
        "https://allowed.example,https://allowed.example",
        "https://allowed.example;https://evil.com",
        "https://evil.com/https://allowed.example",
        "https://allowed.example/../evil.com",
    ] {
        out.push(odd.as_bytes().to_vec());
    }
    out.push(format!("https://{}.allowed.example", "a".repeat(4000)).into_bytes());
    let mut seen = HashSet::new();
    out.retain(|o| seen.insert(o.clone()));
    out
}

/// The request kinds every origin is sent with: (label, method, path, extra headers, is a preflight).
type Kind = (&'static str, &'static str, &'static str, &'static [(&'static str, &'static [u8])], bool);

const KINDS: [Kind; 7] = [
    ("simple GET", "GET", "/api/hello", &[], false),
    ("GET of a cacheable file", "GET", "/small.txt", &[], false),
    ("POST to a GET route (405)", "POST", "/api/hello", &[], false),
    ("GET of an unknown path (404)", "GET", "/nope", &[], false),
    (
        "preflight",
        "OPTIONS",
        "/api/hello",
        &[("Access-Control-Request-Method", b"GET"), ("Access-Control-Request-Headers", b"content-type, x-custom")],
        true,
    ),
    ("preflight of an unknown path", "OPTIONS", "/nope", &[("Access-Control-Request-Method", b"DELETE")], true),
    ("plain OPTIONS", "OPTIONS", "/api/hello", &[], false),
];

/// What the origin is after the parser drops optional whitespace around a header value.
fn ows_trimmed(origin: &[u8]) -> &[u8] {
    let start = origin.iter().position(|b| *b != b' ' && *b != b'\t').unwrap_or(origin.len());
    let end = origin.iter().rposition(|b| *b != b' ' && *b != b'\t').map_or(start, |i| i + 1);
    &origin[start..end]
}

/// Checks one response against an allowlist policy; returns whether it carried an allow header.
fn check_list_policy(
    failures: &mut Failures,
    what: &str,
    res: &Raw,
    origin: Option<&[u8]>,
    allowed: &[&[u8]],
    credentials: bool,
) -> bool {
    failures.check(what, res);
    let acao = res.raw_header_all("access-control-allow-origin");
    let acac = res.raw_header_all("access-control-allow-credentials");
    if acao.len() > 1 {
        failures.push(format!("{what}: {} allow-origin headers", acao.len()));
    }
    let sent = origin.map(ows_trimmed);
    let is_allowed = sent.is_some_and(|o| allowed.contains(&o));
    match acao.first() {
        Some(value) if Some(*value) != sent || !is_allowed => {
            failures.push(format!("{what}: REFLECTED allow-origin {:?}", lossy(value)));
        }
        Some(_) => {}
        None if is_allowed && res.status < 400 => {
            failures.push(format!("{what}: an allowed origin got no allow-origin (status {})", res.status));
        }
        None => {}
    }
    if !acac.is_empty() && (acao.is_empty() || acao.first() == Some(&&b"*"[..]) || !credentials) {
        failures.push(format!("{what}: credentials {:?} with allow-origin {:?}", acac, acao));
    }
    if is_allowed && res.status < 400 && credentials && acac != [b"true"] {
        failures.push(format!("{what}: an allowed origin without credentials: {acac:?}"));
    }
    !acao.is_empty()
}

fn origin_header(origin: &[u8]) -> Vec<(&'static str, &[u8])> {
    vec![("Origin", origin)]
}

/// Sends every origin of the corpus with every request kind; returns (requests, echoes of allowed origins,
/// cache hits seen).
fn run_allowlist_corpus(server: &Server, failures: &mut Failures, mode: &str) -> (usize, usize, usize) {
    let allowed: Vec<&[u8]> = ALLOWED.iter().map(|o| o.as_bytes()).collect();
    let (mut sent, mut echoed, mut hits) = (0, 0, 0);
    for origin in origin_corpus() {
        for (label, method, path, extra, preflight) in KINDS {
            let mut headers = origin_header(&origin);
            headers.extend_from_slice(extra);
            let res = exchange(server.addr, &request(method, path.as_bytes(), &headers));
            sent += 1;
            let what = format!("{mode}, {label}, Origin {:?}", lossy(&origin[..origin.len().min(80)]));
            if check_list_policy(failures, &what, &res, Some(&origin), &allowed, true) {
                echoed += 1;
            }
            if !preflight
                && !matches!(res.status, 400 | 431)
                && !res.raw_header_all("vary").iter().any(|v| contains(&v.to_ascii_lowercase(), b"origin"))
            {
                failures.push(format!("{what}: no Vary: Origin with an allowlist"));
            }
            hits += usize::from(res.header("x-cache") == Some("hit"));
        }
    }
    // No Origin at all: never an allow header.
    for (label, method, path, extra, _) in KINDS {
        let res = exchange(server.addr, &request(method, path.as_bytes(), extra));
        sent += 1;
        check_list_policy(failures, &format!("{mode}, {label}, no Origin"), &res, None, &allowed, true);
    }
    (sent, echoed, hits)
}

fn list_args(profile: &'static str) -> Vec<&'static str> {
    vec![
        "--middleware",
        profile,
        "--cors-origins",
        "https://allowed.example,http://localhost:8080",
        "--cors-credentials",
    ]
}

#[test]
fn cors_allowlist_never_reflects_a_foreign_origin() {
    let files = dist();
    let root = files.root.to_str().expect("a UTF-8 path");
    let redis = Redis::start();
    let redis_url = redis.url();
    let modes: [(&str, Vec<&str>); 3] = [
        ("default", [list_args("default"), vec!["--dist-path", root]].concat()),
        ("production/memory", [list_args("production"), vec!["--dist-path", root]].concat()),
        ("production/redis", [list_args("production"), vec!["--dist-path", root, "--redis-url", &redis_url]].concat()),
    ];
    let mut failures = Failures::default();
    let mut total = 0;
    let origins = origin_corpus().len();
    for (mode, args) in modes {
        let server = start(settings(&args));
        let (sent, echoed, hits) = run_allowlist_corpus(&server, &mut failures, mode);
        total += sent;
        // Each allowed origin is echoed for the 4 non-error kinds that reach CORS with it (GETs, preflights,
        // OPTIONS), plus its OWS-padded spellings; the corpus is useless if none were.
        assert!(echoed >= 2 * 4, "{mode}: only {echoed} allowed echoes");
        if mode.starts_with("production") {
            assert!(hits > origins / 2, "{mode}: the cache answered only {hits} times; the cross-origin check is void");
        }
    }
    println!("cors allowlist: {origins} origins x {} kinds x 3 modes + no-Origin = {total} requests", KINDS.len());
    failures.assert_none(&format!("{total} requests"));
}

#[test]
fn cors_wildcard_never_sends_credentials() {
    let files = dist();
    let root = files.root.to_str().expect("a UTF-8 path");
    let mut failures = Failures::default();
    let mut total = 0;
    for profile in ["default"] {
        let server = start(settings(&["--middleware", profile, "--dist-path", root]));
        for origin in origin_corpus() {
            for (label, method, path, extra, _) in KINDS {
                let mut headers = origin_header(&origin);
                headers.extend_from_slice(extra);
                let res = exchange(server.addr, &request(method, path.as_bytes(), &headers));
                total += 1;
                let what = format!("{profile} `*`, {label}, Origin {:?}", lossy(&origin[..origin.len().min(80)]));
                failures.check(&what, &res);
                // `*` on every answer the middleware makes, preflights included; a head the HTTP parser
                // refuses (400, 431) never reaches it.
                let acao = res.raw_header_all("access-control-allow-origin");
                if acao != [b"*"] && !matches!(res.status, 400 | 431) {
                    failures
                        .push(format!("{what}: allow-origin {:?}", acao.iter().map(|v| lossy(v)).collect::<Vec<_>>()));
                }
                if res.header("access-control-allow-credentials").is_some() {
                    failures.push(format!("{what}: credentials with `*`"));
                }
            }
        }
    }
    println!("cors wildcard: {total} requests");
    failures.assert_none(&format!("{total} requests"));
}

/// What the documented rule makes of FLIGHT_CORS_ORIGINS: `None` = refused at startup; `Some(None)` = any
/// origin (`*`); `Some(Some(list))` = exactly these origins.
fn documented_policy(value: &str, credentials: bool) -> Option<Option<Vec<String>>> {
    let entries: Vec<&str> = value.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    if entries.is_empty() {
        return None; // an empty allowlist is refused, never read as `*`
    }
    if entries.contains(&"*") {
        return if credentials { None } else { Some(None) };
    }
    let mut list = Vec::new();
    for entry in entries {
        // Entries are compared as browsers serialize Origin: lower case, no default port, no trailing slash.
        let mut entry = entry.trim_end_matches('/').to_ascii_lowercase();
        for (scheme, port) in [("https://", ":443"), ("http://", ":80")] {
            if entry.starts_with(scheme) && entry.ends_with(port) {
                entry.truncate(entry.len() - port.len());
            }
        }
        let entry = entry.as_str();
        let host = entry.strip_prefix("https://").or_else(|| entry.strip_prefix("http://"));
        let valid =
            host.is_some_and(|h| !h.is_empty() && !h.contains('/')) && entry.bytes().all(|b| b.is_ascii_graphic());
        if !valid {
            return None;
        }
        list.push(entry.to_string());
    }
    Some(Some(list))
}

#[test]
fn cors_edge_configs_exit_64_or_serve_safely() {
    let values = [
        "",
        " ",
        ",",
        ",,",
        "*",
        " * ",
        "*,https://a.example",
        "https://a.example,*",
        "https://a.example,https://a.example",
        "https://a.example, https://a.example/",
        "https://a.example/",
        " https://a.example , https://b.example ",
        "https://a.example,,https://b.example",
        "https://a.example:443",
        "https://*.example",
        "https://a.example;https://b.example",
        "a.example",
        "null",
        "https://",
        "http://",
        "https://a.example/path",
        "ftp://a.example",
        "HTTPS://a.example",
        "https://\u{fc}nicode.example",
        "https://xn--nicode-2ya.example",
        "https://a.example\r\nX-Injected: yes",
        "https://a .example",
        "**",
        "https://a.example,a.example",
        "https://a.example,null",
        "https://a.example,\"https://b.example\"",
    ];
    let binary = testkit::workspace::binary("flight-rs");
    let mut failures = Failures::default();
    let (mut refused, mut served, mut probes) = (0, 0, 0);
    for value in values {
        for credentials in [false, true] {
            let what = format!("FLIGHT_CORS_ORIGINS={value:?} FLIGHT_CORS_CREDENTIALS={credentials}");
            let expected = documented_policy(value, credentials);
            let mut child = Guard(
                Command::new(&binary)
                    .env_clear()
                    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                    .env("FLIGHT_HOSTNAME", "127.0.0.1")
                    .env("FLIGHT_PORT", "0")
                    .env("FLIGHT_WORKERS", "1")
                    .env("FLIGHT_CORS_ORIGINS", value)
                    .env("FLIGHT_CORS_CREDENTIALS", credentials.to_string())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("flight-rs starts"),
            );
            let stdout = child.0.stdout.take().expect("piped stdout");
            let line = testkit::first_line(stdout, Duration::from_secs(15));
            let Some(line) = line else {
                let status = wait_for_exit(&mut child.0, Duration::from_secs(5));
                let mut stderr = String::new();
                if let Some(mut err) = child.0.stderr.take() {
                    let _ = err.read_to_string(&mut stderr);
                }
                refused += 1;
                if status.and_then(|s| s.code()) != Some(64) {
                    failures.push(format!("{what}: no listening line and exit {status:?}, stderr {stderr:?}"));
                } else if stderr.lines().count() != 1 || !stderr.contains("FLIGHT_CORS") {
                    failures
                        .push(format!("{what}: exit 64 but stderr is not one line naming the variable: {stderr:?}"));
                }
                if expected.is_some() {
                    failures.push(format!("{what}: refused, but the documented rule accepts it ({stderr:?})"));
                }
                continue;
            };
            served += 1;
            let Some(policy) = expected else {
                failures.push(format!("{what}: started ({line:?}), but the documented rule refuses it"));
                continue;
            };
            let addr: SocketAddr = line
                .split("http://")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| panic!("{what}: no address in {line:?}"));
            let mut origins: Vec<String> =
                value.split(',').map(|e| e.trim().to_string()).filter(|e| !e.contains(['\r', '\n'])).collect();
            origins.extend(
                [
                    "https://a.example",
                    "https://b.example",
                    "https://evil.example",
                    "https://a.example.evil.com",
                    "HTTPS://A.EXAMPLE",
                    "https://a.example.",
                    "null",
                    "*",
                    "https://x.example",
                ]
                .map(String::from),
            );
            for origin in &origins {
                for (label, method, path, extra, _) in [KINDS[0], KINDS[3], KINDS[4]] {
                    let mut headers = origin_header(origin.as_bytes());
                    headers.extend_from_slice(extra);
                    let Ok(res) = try_exchange(addr, &request(method, path.as_bytes(), &headers)) else {
                        failures.push(format!("{what}, {label}, Origin {origin:?}: no answer"));
                        continue;
                    };
                    probes += 1;
                    let what = format!("{what}, {label}, Origin {origin:?}");
                    match &policy {
                        None => {
                            failures.check(&what, &res);
                            if res.raw_header_all("access-control-allow-origin") != [b"*"] {
                                let acao: Vec<String> =
                                    res.raw_header_all("access-control-allow-origin").into_iter().map(lossy).collect();
                                failures.push(format!("{what}: the `*` policy answered allow-origin {acao:?}"));
                            }
                            if res.header("access-control-allow-credentials").is_some() {
                                failures.push(format!("{what}: credentials with `*`"));
                            }
                        }
                        Some(list) => {
                            let allowed: Vec<&[u8]> = list.iter().map(|o| o.as_bytes()).collect();
                            let origin = origin.as_bytes();
                            check_list_policy(&mut failures, &what, &res, Some(origin), &allowed, credentials);
                        }
                    }
                }
            }
            // Guard's drop kills it; nothing else to wait for.
        }
    }
    println!("cors edge configs: {refused} refused with exit 64, {served} served ({probes} probe requests)");
    failures.assert_none(&format!("{} configs", values.len() * 2));
}

// ------------------------------------------------------------------------------------------------------------
// Response cache
// ------------------------------------------------------------------------------------------------------------

fn get(server: &Server, path: &str, headers: &[(&str, &[u8])]) -> Raw {
    let res = exchange(server.addr, &request("GET", path.as_bytes(), headers));
    let problems = res.problems();
    assert!(problems.is_empty(), "GET {path}: {problems:?}");
    res
}

fn x_cache(res: &Raw) -> Option<String> {
    res.header("x-cache").map(str::to_string)
}

/// The `name=value` of the session cookie a response sets, if any.
fn session_cookie(res: &Raw) -> Option<String> {
    res.raw_header_all("set-cookie")
        .into_iter()
        .map(lossy)
        .find(|c| c.starts_with("flight.sid="))
        .map(|c| c.split(';').next().unwrap_or_default().to_string())
}

fn visits(res: &Raw) -> u64 {
    let body: serde_json::Value =
        serde_json::from_slice(&res.body).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", res.text()));
    body["visits"].as_u64().unwrap_or_else(|| panic!("no visits in {body}"))
}

/// `a` and `b` are where two different clients send their requests: the same server (memory), or two
/// instances sharing Redis.
fn cache_promises(a: &Server, b: &Server, files: &Dist) {
    // Authorization, in several spellings: never stored, never answered from the cache.
    let spellings: [(&str, &[u8]); 4] = [
        ("Authorization", b"Bearer client-a-token"),
        ("authorization", b"Basic YWxpY2U6c2VjcmV0"),
        ("AUTHORIZATION", b"Token x"),
        ("Authorization", b""),
    ];
    for (i, (name, value)) in spellings.into_iter().enumerate() {
        let path = format!("/auth-{i}.txt");
        std::fs::write(files.root.join(&path[1..]), format!("file {i}\n")).expect("write a file");
        for _ in 0..2 {
            let res = get(a, &path, &[(name, value)]);
            assert_eq!(res.status, 200, "{name}: {value:?}");
            assert_ne!(x_cache(&res).as_deref(), Some("hit"), "{path} with {name}: answered from the cache");
        }
        let other = get(b, &path, &[]);
        assert_eq!(x_cache(&other).as_deref(), Some("miss"), "{path}: a response to {name} was stored");
        let again = get(b, &path, &[]);
        assert_eq!(x_cache(&again).as_deref(), Some("hit"), "{path} is cacheable (positive control)");
        let authorized = get(a, &path, &[(name, value)]);
        assert_ne!(x_cache(&authorized).as_deref(), Some("hit"), "{path}: {name} was answered from the cache");
    }

    // Sessions: five clients, interleaved over both servers; each sees only its own counter.
    let mut cookies: Vec<Option<String>> = vec![None; 5];
    let mut counts = [0u64; 5];
    for round in 0..3 {
        for (client, cookie) in cookies.iter_mut().enumerate() {
            let server = if (client + round) % 2 == 0 { a } else { b };
            let headers: Vec<(&str, &[u8])> = cookie.as_ref().map(|c| ("Cookie", c.as_bytes())).into_iter().collect();
            let res = get(server, "/api/session", &headers);
            assert_eq!(res.status, 200, "client {client} round {round}: {}", res.text());
            assert_ne!(x_cache(&res).as_deref(), Some("hit"), "client {client}: a session answer came from the cache");
            counts[client] += 1;
            assert_eq!(visits(&res), counts[client], "client {client} round {round} saw another client's counter");
            match (cookie.as_ref(), session_cookie(&res)) {
                (None, Some(set)) => *cookie = Some(set),
                (None, None) => panic!("client {client}: a new session without a cookie"),
                (Some(_), Some(set)) => panic!("client {client}: a second cookie {set:?} for a known session"),
                (Some(_), None) => {}
            }
        }
    }
    let distinct: HashSet<&Option<String>> = cookies.iter().collect();
    assert_eq!(distinct.len(), cookies.len(), "every client got its own session cookie: {cookies:?}");

    // A 404 is not stored: once the file exists, the next client gets it.
    let missing = get(b, "/late.txt", &[]);
    assert_eq!(missing.status, 404);
    let missing = get(a, "/late.txt", &[]);
    assert_eq!((missing.status, x_cache(&missing).as_deref()), (404, Some("miss")), "a 404 answered from the cache");
    std::fs::write(files.root.join("late.txt"), "late\n").expect("write late.txt");
    let found = get(b, "/late.txt", &[]);
    assert_eq!((found.status, found.text().as_str()), (200, "late\n"), "a stored 404 was served");

    // A 304 to one client is not what the next one gets.
    std::fs::write(files.root.join("cond.txt"), "conditional\n").expect("write cond.txt");
    let not_modified = get(a, "/cond.txt", &[("If-None-Match", b"*")]);
    assert_eq!(not_modified.status, 304);
    let full = get(b, "/cond.txt", &[]);
    assert_eq!((full.status, full.text().as_str()), (200, "conditional\n"), "a stored 304 was served");

    // Unknown API paths: 404 every time, never from the cache.
    for server in [a, b, a] {
        let res = get(server, "/api/nope", &[]);
        assert_eq!(res.status, 404);
        assert_ne!(x_cache(&res).as_deref(), Some("hit"), "a 404 answered from the cache");
    }
}

#[test]
fn response_cache_never_crosses_clients_in_memory() {
    let files = dist();
    let root = files.root.to_str().expect("a UTF-8 path");
    let server = start(settings(&["--middleware", "production", "--dist-path", root]));
    cache_promises(&server, &server, &files);
}

#[test]
fn response_cache_never_crosses_clients_on_redis() {
    let files = dist();
    let root = files.root.to_str().expect("a UTF-8 path");
    let redis = Redis::start();
    let url = redis.url();
    let args = ["--middleware", "production", "--dist-path", root, "--redis-url", &url];
    let (a, b) = (start(settings(&args)), start(settings(&args)));
    cache_promises(&a, &b, &files);
    let entries = cached_entries(&redis);
    assert!(entries.len() >= 4, "the cache stored its entries in Redis: {entries:?}");
    for (key, status, names) in &entries {
        assert!((200..300).contains(status), "{key:?} stores a {status}");
        assert!(!names.iter().any(|n| n == "set-cookie"), "{key:?} stores a Set-Cookie: {names:?}");
    }
}

// ------------------------------------------------------------------------------------------------------------
// Sessions
// ------------------------------------------------------------------------------------------------------------

fn flip(c: u8) -> u8 {
    if c == b'A' { b'Q' } else { b'A' }
}

/// Tampered spellings of a valid cookie value `id.sig`; `other` is another valid session's value.
fn tampered(value: &str, other: &str) -> Vec<(String, Vec<u8>)> {
    let (id, sig) = value.split_once('.').expect("id.sig");
    let (_, other_sig) = other.split_once('.').expect("id.sig");
    let with = |v: &[u8]| [b"flight.sid=".as_slice(), v].concat();
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    let mut push = |name: &str, cookie: Vec<u8>| out.push((name.to_string(), cookie));
    for at in [0, sig.len() / 2, sig.len() - 1] {
        let mut bytes = value.as_bytes().to_vec();
        let i = id.len() + 1 + at;
        bytes[i] = flip(bytes[i]);
        push(&format!("signature byte {at} flipped"), with(&bytes));
    }
    for at in [0, id.len() - 1] {
        let mut bytes = value.as_bytes().to_vec();
        bytes[at] = flip(bytes[at]);
        push(&format!("id byte {at} flipped"), with(&bytes));
    }
    let v = value.as_bytes();
    push("last byte cut", with(&v[..v.len() - 1]));
    push("cut in half", with(&v[..v.len() / 2]));
    push("id only", with(id.as_bytes()));
    push("id and dot", with(format!("{id}.").as_bytes()));
    push("dot and signature", with(format!(".{sig}").as_bytes()));
    push("signature only", with(sig.as_bytes()));
    push("extra segment", with(format!("{value}.x").as_bytes()));
    push("trailing dot", with(format!("{value}.").as_bytes()));
    push("leading segment", with(format!("x.{value}").as_bytes()));
    push("double dot", with(format!("{id}..{sig}").as_bytes()));
    push("signature twice", with(format!("{value}.{sig}").as_bytes()));
    push("base64 padding", with(format!("{value}=").as_bytes()));
    push("another session's signature", with(format!("{id}.{other_sig}").as_bytes()));
    push("8 KB of signature", with(format!("{value}{}", "A".repeat(8000)).as_bytes()));
    push("100 KB value", with("A".repeat(100_000).as_bytes()));
    push("non-UTF-8 byte appended", with(&[v, b"\xff"].concat()));
    push("non-UTF-8 byte inside", {
        let mut bytes = v.to_vec();
        bytes[3] = 0x80;
        with(&bytes)
    });
    push("empty value", b"flight.sid=".to_vec());
    push("no value", b"flight.sid".to_vec());
    push("empty with semicolon", b"flight.sid=;".to_vec());
    push("empty quotes", b"flight.sid=\"\"".to_vec());
    push("no name", format!("={value}").into_bytes());
    push("name upper-cased", format!("FLIGHT.SID={value}").into_bytes());
    push("space before =", format!("flight.sid ={value}").into_bytes());
    push("percent-encoded dot", with(format!("{id}%2E{sig}").as_bytes()));
    push("space inside", with(format!("{id} .{sig}").as_bytes()));
    push("CR LF encoded", with(format!("{value}%0d%0aSet-Cookie:%20flight.sid={value}").as_bytes()));
    if sig.contains(['-', '_']) {
        push("standard base64 alphabet", with(sig.replace('-', "+").replace('_', "/").as_bytes()));
    }
    if sig.to_ascii_uppercase() != sig {
        push("signature upper-cased", with(format!("{id}.{}", sig.to_ascii_uppercase()).as_bytes()));
    }
    out
}

fn tampering(a: &Server, b: &Server) {
    let first = get(a, "/api/session", &[]);
    let cookie = session_cookie(&first).expect("a session cookie");
    let value = cookie.strip_prefix("flight.sid=").expect("flight.sid=").to_string();
    let other = session_cookie(&get(b, "/api/session", &[])).expect("a second session cookie");
    let other = other.strip_prefix("flight.sid=").expect("flight.sid=").to_string();
    for n in 2..=3 {
        assert_eq!(visits(&get(b, "/api/session", &[("Cookie", cookie.as_bytes())])), n);
    }
    let old_id = value.split_once('.').expect("id.sig").0.to_string();
    let mut failures = Failures::default();
    let corpus = tampered(&value, &other);
    let (mut fresh, mut refused) = (0, 0);
    for (i, (name, header)) in corpus.iter().enumerate() {
        let server = if i % 2 == 0 { a } else { b };
        let res = exchange(server.addr, &request("GET", b"/api/session", &[("Cookie", header)]));
        let what = format!("cookie {name}");
        failures.check(&what, &res);
        match res.status {
            200 => {
                let new = session_cookie(&res);
                let n = visits(&res);
                if n != 1 || new.as_ref().is_none_or(|c| c.contains(&old_id)) {
                    failures.push(format!("{what}: visits {n}, cookie {new:?}: the old session was used"));
                }
                fresh += 1;
            }
            400 | 431 => refused += 1,
            other => failures.push(format!("{what}: status {other}")),
        }
    }
    println!("session tampering: {} cookies, {fresh} new sessions, {refused} refused heads", corpus.len());
    failures.assert_none(&format!("{} tampered cookies", corpus.len()));
    // Quoting a cookie value is allowed (RFC 6265), so this is the same session, still intact: 3 + 1.
    let quoted = format!("flight.sid=\"{value}\"");
    assert_eq!(visits(&get(a, "/api/session", &[("Cookie", quoted.as_bytes())])), 4, "the old session survives");
    assert!(fresh >= corpus.len() - 2, "most tampered cookies reached the session layer: {fresh}");
}

#[test]
fn tampered_session_cookies_start_new_sessions_in_memory() {
    let server = start(settings(&["--middleware", "production"]));
    tampering(&server, &server);
}

#[test]
fn tampered_session_cookies_start_new_sessions_on_redis() {
    let redis = Redis::start();
    let url = redis.url();
    let args = ["--middleware", "production", "--redis-url", &url];
    let (a, b) = (start(settings(&args)), start(settings(&args)));
    tampering(&a, &b);
}

// ------------------------------------------------------------------------------------------------------------
// CR LF
// ------------------------------------------------------------------------------------------------------------

#[test]
fn crlf_never_splits_a_response() {
    let files = dist();
    let root = files.root.to_str().expect("a UTF-8 path");
    let mut args = list_args("production");
    args.extend(["--dist-path", root, "--request-log"]);
    let server = start(settings(&args));
    let evil_targets: [&[u8]; 14] = [
        b"/api/hello?x=%0d%0aX-Injected:%20yes",
        b"/%0d%0aX-Injected:%20yes",
        b"/%0aX-Injected:yes",
        b"/%0dX-Injected:yes",
        b"/page%0d%0aSet-Cookie:%20injected=1",
        b"/small.txt?%0d%0aX-Injected:1",
        b"/%E5%98%8A%E5%98%8DX-Injected:%20yes",
        b"/api/session?%0d%0aSet-Cookie:injected=1",
        b"/assets/app.js%0d%0a%0d%0a<html>injected",
        b"/%0d%0a%0d%0aHTTP/1.1%20200%20OK%0d%0aX-Injected:%201",
        b"/a\rX-Injected: yes",
        b"/a\nX-Injected: yes",
        b"/%23%0d%0aX-Injected:yes",
        b"http://localhost/%0d%0aX-Injected:yes",
    ];
    let evil_headers: [(&str, &[u8]); 13] = [
        ("Origin", b"https://allowed.example%0d%0aX-Injected: yes"),
        ("Origin", b"https://allowed.example\rX-Injected: yes"),
        ("Access-Control-Request-Headers", b"x-a%0d%0aX-Injected: yes"),
        ("Access-Control-Request-Headers", b"content-type\rX-Injected: yes"),
        ("Cookie", b"flight.sid=%0d%0aSet-Cookie:%20injected=1"),
        ("Accept-Encoding", b"gzip%0d%0aX-Injected: yes"),
        ("If-None-Match", b"\"x\"%0d%0aX-Injected: yes"),
        ("X-Forwarded-For", b"1.2.3.4%0d%0aX-Injected: yes"),
        ("Host", b"localhost%0d%0aX-Injected: yes"),
        ("X-Folded", b"a\r\n X-Injected: yes"),
        ("Accept", b"text/html\nX-Injected: yes"),
        ("Origin", b"https://allowed.example\nX-Injected: yes"),
        ("Access-Control-Request-Method", b"GET\r\n\r\nGET /api/hello HTTP/1.1\r\nX-Injected: yes"),
    ];
    let mut failures = Failures::default();
    let mut sent = 0;
    let mut check = |raw: Vec<u8>, failures: &mut Failures| {
        sent += 1;
        let what = format!("{:?}", lossy(&raw[..raw.len().min(160)]));
        let Some(res) = answered(failures, &what, server.addr, &raw) else { return };
        failures.check(&what, &res);
        let head: Vec<u8> = res.head_lines().concat().to_ascii_lowercase();
        if contains(&head, b"injected") {
            failures.push(format!("{what}: the response head carries the injected text: {:?}", res.head_lines()));
        }
        for cookie in res.raw_header_all("set-cookie") {
            if !cookie.starts_with(b"flight.sid=") {
                failures.push(format!("{what}: Set-Cookie {:?}", lossy(cookie)));
            }
        }
    };
    for target in evil_targets {
        for method in ["GET", "HEAD"] {
            let accept: (&str, &[u8]) = ("Accept", b"text/html");
            check(request(method, target, &[accept, ("Origin", b"https://allowed.example")]), &mut failures);
        }
        let preflight = [("Origin", &b"https://allowed.example"[..]), ("Access-Control-Request-Method", b"GET")];
        check(request("OPTIONS", target, &preflight), &mut failures);
    }
    for (name, value) in evil_headers {
        for (method, path) in [("GET", "/api/hello"), ("GET", "/page"), ("OPTIONS", "/api/hello")] {
            let mut headers = vec![("Accept", &b"text/html"[..]), (name, value)];
            if method == "OPTIONS" {
                headers.push(("Access-Control-Request-Method", b"GET"));
            }
            if name != "Origin" {
                headers.push(("Origin", b"https://allowed.example"));
            }
            check(request(method, path.as_bytes(), &headers), &mut failures);
        }
    }
    // The server is still healthy afterwards.
    assert_eq!(exchange(server.addr, &request("GET", b"/api/hello", &[])).status, 200);
    println!("crlf: {sent} requests");
    failures.assert_none(&format!("{sent} CR LF requests"));
}

// ------------------------------------------------------------------------------------------------------------
// Static files
// ------------------------------------------------------------------------------------------------------------

fn traversal_targets(tmp: &Path) -> Vec<Vec<u8>> {
    let dots = [
        "..",
        "%2e%2e",
        "%2E%2E",
        ".%2e",
        "%2e.",
        "%252e%252e",
        "%c0%ae%c0%ae",
        "%e0%80%ae%e0%80%ae",
        "%c0%2e%c0%2e",
        "%uff0e%uff0e",
        "%ef%bc%8e%ef%bc%8e",
        "...",
        "....",
        "..%00",
        "%2e%2e%00",
        "..;",
        "%%32%65%%32%65",
        "..%20",
    ];
    let separators =
        ["/", "%2f", "%2F", "\\", "%5c", "%5C", "%252f", "%c0%af", "%e0%80%af", "//", "/./", "%2f%2f", "/%2e/", "\\/"];
    let mut out: Vec<Vec<u8>> = Vec::new();
    for dot in dots {
        for sep in separators {
            for (depth, target) in
                [(1, "secret.txt"), (3, "secret.txt"), (1, "dist-sibling/secret.txt"), (6, "etc/passwd")]
            {
                let ups = format!("{dot}{sep}").repeat(depth);
                out.push(format!("/{ups}{target}").into_bytes());
                out.push(format!("/assets/{dot}{sep}{ups}{target}").into_bytes());
            }
        }
    }
    let abs = tmp.to_str().expect("a UTF-8 temp path");
    let abs_enc = abs.replace('/', "%2f");
    let specials = [
        "//etc/passwd".to_string(),
        "/%2fetc%2fpasswd".to_string(),
        "/%2Fetc/passwd".to_string(),
        "///etc/passwd".to_string(),
        "/etc/passwd".to_string(),
        format!("/{abs}/secret.txt"),
        format!("/{abs_enc}%2fsecret.txt"),
        format!("{abs}/secret.txt"),
        format!("/file://{abs}/secret.txt"),
        "/C:%5cWindows%5cwin.ini".to_string(),
        "/secret.txt%00.html".to_string(),
        "/..%00/secret.txt".to_string(),
        "/assets/app.js%00/../../secret.txt".to_string(),
        "/index.html/../../secret.txt".to_string(),
        "/index.html%2f..%2f..%2fsecret.txt".to_string(),
        "/./../secret.txt".to_string(),
        "/assets/./../../secret.txt".to_string(),
        "/sub/dir/../../../secret.txt".to_string(),
        "/sub/dir/%2e%2e/%2e%2e/%2e%2e/secret.txt".to_string(),
        "/..%2fsecret.txt?x=1".to_string(),
        "/..%2fsecret.txt#frag".to_string(),
        "/link-out.txt".to_string(),
        "/up/secret.txt".to_string(),
        "/up/dist-sibling/secret.txt".to_string(),
        "/up".to_string(),
        "/%75%70/secret.txt".to_string(),
        "/up%2fsecret.txt".to_string(),
        "/../dist-sibling/secret.txt".to_string(),
        "/../dist/../secret.txt".to_string(),
        "/%2e%2e/dist%2e%2e/secret.txt".to_string(),
        "/..%ff/secret.txt".to_string(),
        "/%ff%fe/../secret.txt".to_string(),
        "*".to_string(),
        "http://localhost/../secret.txt".to_string(),
        "http://localhost/%2e%2e/secret.txt".to_string(),
        "http://localhost/..%2fsecret.txt".to_string(),
        "http://localhost//etc/passwd".to_string(),
        "http://x/..%5c..%5csecret.txt".to_string(),
    ];
    out.extend(specials.into_iter().map(String::into_bytes));
    // Raw bytes a client library would never send: NUL, a high byte, an overlong '.' sequence.
    out.push(b"/..\x00/secret.txt".to_vec());
    out.push(b"/\xc0\xae\xc0\xae/secret.txt".to_vec());
    out.push(b"/\xff/../secret.txt".to_vec());
    let mut seen = HashSet::new();
    out.retain(|t| seen.insert(t.clone()));
    out
}

#[test]
fn static_traversal_never_leaves_dist() {
    let files = dist();
    let passwd_marker: &[u8] = b"root:x:0:0";
    let root = files.root.to_str().expect("a UTF-8 path");
    let redis = Redis::start();
    let url = redis.url();
    let modes: [(&str, Vec<&str>); 3] = [
        ("bare", vec!["--middleware", "bare", "--dist-path", root]),
        ("production/memory", vec!["--middleware", "production", "--dist-path", root]),
        ("production/redis", vec!["--middleware", "production", "--dist-path", root, "--redis-url", &url]),
    ];
    let inside: BTreeSet<&[u8]> =
        [INDEX_HTML, APP_JS, SMALL_TXT, DEEP_TXT].into_iter().map(str::as_bytes).collect::<BTreeSet<_>>();
    let targets = traversal_targets(files.dir.path());
    let mut failures = Failures::default();
    let (mut sent, mut ok, mut no_answer) = (0, 0, 0);
    for (mode, args) in modes {
        let server = start(settings(&args));
        // Positive controls: the folder is served, and the secrets are where the targets point.
        assert_eq!(get(&server, "/sub/dir/file.txt", &[]).text(), DEEP_TXT, "{mode}");
        assert!(files.dir.path().join("dist-sibling/secret.txt").is_file());
        for (i, target) in targets.iter().enumerate() {
            let accept: &[u8] = if i % 2 == 0 { b"text/html" } else { b"*/*" };
            sent += 1;
            let what = format!("{mode}: {:?} (Accept {})", lossy(target), lossy(accept));
            let request = request("GET", target, &[("Accept", accept)]);
            let Some(res) = answered(&mut failures, &what, server.addr, &request) else {
                // A request line the server refuses may just be closed: nothing leaked.
                no_answer += 1;
                continue;
            };
            failures.check(&what, &res);
            let everything = [res.head_lines().concat(), res.body.clone()].concat();
            for secret in [OUTSIDE_SECRET.as_bytes(), SIBLING_SECRET.as_bytes(), passwd_marker] {
                if contains(&everything, secret) {
                    failures.push(format!("{what}: ESCAPED, status {} body {:?}", res.status, res.text()));
                }
            }
            if res.status == 200 {
                ok += 1;
                if !inside.contains(res.body.as_slice()) {
                    failures.push(format!("{what}: 200 with a body that is no file of dist: {:?}", res.text()));
                }
            }
        }
    }
    println!(
        "traversal: {} targets x 3 modes = {sent} requests, {ok} answered 200 with a dist file (SPA index), \
         {no_answer} closed without an answer",
        targets.len()
    );
    failures.assert_none(&format!("{sent} traversal requests"));
}
