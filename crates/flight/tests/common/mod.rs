//! Shared helpers for flight-rs integration tests: start flight on 127.0.0.1:0 (the tests speak raw HTTP/1.1
//! to it through `testkit::http`), build dist folders, decode compressed bodies.
#![allow(dead_code)] // each test binary uses a different subset

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use flight::config::{Profile, Settings};
use testkit::http::Response;

/// A secret long enough for the production profile.
pub const SECRET: &str = "integration-test secret, 32+ bytes long, not the built-in one";

/// A flight server on its own worker thread; shut down (1 s grace) when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    /// Shut down gracefully when dropped (serve::Server's own Drop).
    _server: serve::Server,
}

impl TestServer {
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.request("GET", path, headers)
    }

    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
        testkit::http::request(self.addr, method, path, headers, None)
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
    TestServer { addr: server.local_addr(), _server: server }
}

/// A header's value as a number; panics when it is missing or not one.
pub fn int_header(res: &Response, name: &str) -> u64 {
    res.header(name)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("header {name} missing or not a number: {:?}", res.headers))
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
