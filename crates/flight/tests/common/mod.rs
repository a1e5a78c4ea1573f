//! Shared helpers for flight-rs integration tests: start flight on 127.0.0.1:0, speak raw HTTP/1.1 over a
//! blocking socket (every read has a timeout), build dist folders, decode compressed bodies.
#![allow(dead_code)] // each test binary uses a different subset

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use flight::config::{Profile, Settings};

/// A secret long enough for the production profile.
pub const SECRET: &str = "integration-test secret, 32+ bytes long, not the built-in one";

/// Socket read/write timeout: a hung server fails the test instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// A flight server on its own worker thread; shut down (1 s grace) when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    server: Option<serve::Server>,
}

impl TestServer {
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        request(self.addr, "GET", path, headers)
    }

    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        request(self.addr, method, path, headers)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }
}

/// One worker, a short shutdown grace so dropping a server never stalls a test.
pub fn limits() -> serve::Limits {
    serve::Limits { workers: 1, shutdown_timeout: Duration::from_secs(1), ..Default::default() }
}

/// Settings for a profile with the test secret set.
pub fn settings(profile: Profile) -> Settings {
    let mut s = Settings::for_profile(profile);
    s.secret = SECRET.as_bytes().to_vec();
    s
}

pub fn start(settings: Settings) -> TestServer {
    start_with_limits(settings, limits())
}

pub fn start_with_limits(settings: Settings, limits: serve::Limits) -> TestServer {
    let app = flight::App::new(settings).expect("flight app builds");
    let listeners = serve::bind_reuseport("127.0.0.1:0".parse().expect("addr"), 1).expect("bind 127.0.0.1:0");
    let server = flight::start(app, listeners, limits).expect("flight starts");
    TestServer { addr: server.local_addr(), server: Some(server) }
}

/// A parsed HTTP/1.1 response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Every header line in order, names lowercased; repeated headers stay separate.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of a header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Every value of a header, in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect()
    }

    pub fn has(&self, name: &str) -> bool {
        self.header(name).is_some()
    }

    /// True when any value of `name`, split on commas, equals `token` (case-insensitive).
    pub fn header_has_token(&self, name: &str, token: &str) -> bool {
        self.header_all(name).iter().flat_map(|v| v.split(',')).any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?} (status {})", self.text(), self.status))
    }

    pub fn int_header(&self, name: &str) -> u64 {
        self.header(name)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("header {name} missing or not a number: {:?}", self.headers))
    }
}

/// A keep-alive client connection.
pub struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(Conn { reader: BufReader::new(stream) })
    }

    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    pub fn write(&mut self, raw: &[u8]) -> io::Result<()> {
        self.reader.get_mut().write_all(raw)?;
        self.reader.get_mut().flush()
    }

    /// Reads one response; `head` says the request was HEAD (no body follows whatever the headers say).
    pub fn read_response(&mut self, head: bool) -> io::Result<Response> {
        read_response(&mut self.reader, head)
    }

    pub fn send(&mut self, raw: &[u8], head: bool) -> io::Result<Response> {
        self.write(raw)?;
        self.read_response(head)
    }
}

/// The bytes of a request with `Host` and `Connection: close`, plus `Content-Length: 0` for methods that
/// usually carry a body.
pub fn raw_request(method: &str, path: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (name, value) in headers {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    if matches!(method, "POST" | "PUT" | "PATCH")
        && !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        raw.push_str("Content-Length: 0\r\n");
    }
    raw.push_str("\r\n");
    raw.into_bytes()
}

/// Sends raw request bytes on a new connection and reads one response.
pub fn try_send(addr: SocketAddr, raw: &[u8], head: bool) -> io::Result<Response> {
    Conn::open(addr)?.send(raw, head)
}

pub fn send(addr: SocketAddr, raw: &[u8], head: bool) -> Response {
    try_send(addr, raw, head).unwrap_or_else(|e| {
        let line = raw.split(|b| *b == b'\r').next().unwrap_or(raw);
        panic!("request {:?} to {addr} failed: {e}", String::from_utf8_lossy(line))
    })
}

pub fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    send(addr, &raw_request(method, path, headers), method == "HEAD")
}

pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Response {
    request(addr, "GET", path, headers)
}

fn read_line(reader: &mut impl BufRead) -> io::Result<String> {
    let mut line = Vec::new();
    let n = reader.read_until(b'\n', &mut line)?;
    if n == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed before a full response head"));
    }
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

pub fn read_response(reader: &mut impl BufRead, head: bool) -> io::Result<Response> {
    let status_line = read_line(reader)?;
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad status line {status_line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader)?;
        if line.is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad header line {line:?}")))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let mut res = Response { status, headers, body: Vec::new() };
    if head || status < 200 || status == 204 || status == 304 {
        return Ok(res);
    }
    if res.header_has_token("transfer-encoding", "chunked") {
        loop {
            let size_line = read_line(reader)?;
            let size_hex = size_line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_hex, 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("bad chunk size {size_line:?}")))?;
            if size == 0 {
                // Trailers, then the empty line.
                while !read_line(reader)?.is_empty() {}
                break;
            }
            let start = res.body.len();
            res.body.resize(start + size, 0);
            reader.read_exact(&mut res.body[start..])?;
            let mut crlf = [0u8; 2];
            reader.read_exact(&mut crlf)?;
        }
    } else if let Some(len) = res.header("content-length") {
        let len: usize =
            len.parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("bad content-length {len}")))?;
        res.body.resize(len, 0);
        reader.read_exact(&mut res.body)?;
    } else {
        reader.read_to_end(&mut res.body)?;
    }
    Ok(res)
}

/// Decodes a response body in the given content-coding. HTTP `deflate` is the zlib format (RFC 9110 8.4.1.2);
/// this checks the zlib wrapper and its Adler-32 rather than accepting raw deflate.
pub fn decode(encoding: &str, data: &[u8]) -> Vec<u8> {
    use async_compression::tokio::bufread::{BrotliDecoder, DeflateDecoder, GzipDecoder, ZstdDecoder};
    use tokio::io::AsyncReadExt;

    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("tokio runtime");
    runtime.block_on(async {
        let mut out = Vec::new();
        let result = match encoding {
            "gzip" => GzipDecoder::new(data).read_to_end(&mut out).await,
            "br" => BrotliDecoder::new(data).read_to_end(&mut out).await,
            "zstd" => ZstdDecoder::new(data).read_to_end(&mut out).await,
            "deflate" => {
                assert!(data.len() >= 6, "deflate body too short for zlib framing: {} bytes", data.len());
                let (cmf, flg) = (data[0], data[1]);
                assert!(
                    cmf & 0x0f == 8 && (u16::from(cmf) << 8 | u16::from(flg)) % 31 == 0,
                    "deflate body has no zlib header (RFC 9110 says HTTP deflate is zlib): {:02x} {:02x}",
                    cmf,
                    flg
                );
                let inner = &data[2..data.len() - 4];
                let r = DeflateDecoder::new(inner).read_to_end(&mut out).await;
                let want = u32::from_be_bytes([
                    data[data.len() - 4],
                    data[data.len() - 3],
                    data[data.len() - 2],
                    data[data.len() - 1],
                ]);
                assert_eq!(adler32(&out), want, "zlib Adler-32 mismatch");
                r
            }
            other => panic!("no decoder for {other}"),
        };
        result.unwrap_or_else(|e| panic!("{encoding} body does not decode: {e}"));
        out
    })
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + u32::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

/// A temp folder holding `dist/` (the served folder) and, next to it, `secret.txt` that must never be served.
pub struct Dist {
    pub dir: tempfile::TempDir,
    /// Canonical path of `dist/`, as the config would resolve it.
    pub root: PathBuf,
}

pub const SECRET_FILE_CONTENT: &str = "TOP-SECRET-CONTENT-outside-the-dist-folder";
pub const INDEX_HTML: &str = "<!doctype html><html><head><title>spa</title></head><body>index</body></html>\n";
pub const APP_JS: &str = "console.log('plain app.js');\n";
pub const APP_JS_BR: &[u8] = b"\x8bpretend-brotli-bytes-of-app.js";
pub const APP_JS_GZ: &[u8] = b"\x1f\x8bpretend-gzip-bytes-of-app.js";
pub const SMALL_TXT: &str = "small text file, well under the threshold\n";

/// About 5 KB of text: compressible, but not a single repeated byte.
pub fn big_text() -> String {
    (0..100).map(|i| format!("line {i:03}: the quick brown fox jumps over the lazy dog {}\n", i * 7919)).collect()
}

/// 5 KB that is not text, served as image/png.
pub fn png_bytes() -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    bytes.extend((0..5000u32).map(|i| (i % 251) as u8));
    bytes
}

pub fn dist() -> Dist {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("dist");
    write(&dir.path().join("secret.txt"), SECRET_FILE_CONTENT.as_bytes());
    write(&root.join("index.html"), INDEX_HTML.as_bytes());
    write(&root.join("assets/app.js"), APP_JS.as_bytes());
    write(&root.join("assets/app.js.br"), APP_JS_BR);
    write(&root.join("assets/app.js.gz"), APP_JS_GZ);
    write(&root.join("big.txt"), big_text().as_bytes());
    write(&root.join("small.txt"), SMALL_TXT.as_bytes());
    write(&root.join("pic.png"), &png_bytes());
    let root = std::fs::canonicalize(&root).expect("canonical dist path");
    Dist { dir, root }
}

fn write(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create dirs");
    }
    std::fs::write(path, bytes).expect("write file");
}
