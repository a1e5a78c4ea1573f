//! Shared helpers for the metadata-rs tests: datasets in temp dirs (generated, or hand-made rows for edge
//! cases), and metadata-rs served in process on 127.0.0.1:0 with one worker.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use metadata::config::{RedisSettings, Settings};
use metadata::db::DbOptions;
use metadata_dataset::{GenDataArgs, Generated};
use serde_json::{Value, json};
#[allow(unused_imports)] // each test binary uses a different subset
pub use testkit::http::{Response, get, request};

pub const REGIONS: [&str; 5] = ["ja", "ko", "zh-TW", "en", "th"];

/// A generated dataset in its own temp dir.
pub struct Dataset {
    pub dir: tempfile::TempDir,
    pub generated: Generated,
}

impl Dataset {
    pub fn generate(rows: u64, samples: u64, seed: u64) -> Dataset {
        let dir = tempfile::tempdir().expect("temp dir");
        let generated = metadata_dataset::run(&GenDataArgs::in_dir(dir.path(), rows, samples, seed)).expect("gen-data");
        Dataset { dir, generated }
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("metadata.db")
    }

    pub fn sample_ids(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("sample_ids.txt"))
            .expect("sample ids")
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A read-write connection for the test's own reads and edits (WAL: the server keeps reading meanwhile).
    pub fn open_rw(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.db()).expect("open read-write")
    }
}

/// One hand-made row: (id, channel, duration_s, views, locales).
pub type RowSpec<'a> = (&'a str, Option<&'a str>, Option<i64>, Option<i64>, Option<&'a str>);

/// A database with exactly these rows (the generator's table layout, WAL mode).
pub fn custom_db(dir: &Path, rows: &[RowSpec<'_>]) -> PathBuf {
    let path = dir.join("custom.db");
    let conn = rusqlite::Connection::open(&path).expect("create");
    conn.pragma_update(None, "journal_mode", "WAL").expect("wal");
    conn.execute_batch(
        "CREATE TABLE videos (id TEXT PRIMARY KEY, channel TEXT, duration_s INTEGER, views INTEGER, locales TEXT)",
    )
    .expect("table");
    for row in rows {
        conn.execute(
            "INSERT INTO videos VALUES (?1, ?2, ?3, ?4, ?5)",
            rusqlite::params![row.0, row.1, row.2, row.3, row.4],
        )
        .expect("insert");
    }
    path
}

pub fn settings(db: &Path) -> Settings {
    Settings {
        addr: "127.0.0.1:0".parse().expect("addr"),
        db: DbOptions { path: db.to_path_buf(), busy_timeout: Duration::from_millis(100), mmap_size: 1 << 20 },
        redis: None,
    }
}

pub fn with_redis(mut settings: Settings, url: &str) -> Settings {
    settings.redis =
        Some(RedisSettings { url: url.to_string(), ttl: Duration::from_secs(60), timeout: Duration::from_millis(100) });
    settings
}

testkit::in_process_server!(TestServer, Settings, metadata::start);

impl TestServer {
    /// metadata-rs in this process on 127.0.0.1:<ephemeral>, one worker.
    pub fn start(settings: Settings) -> TestServer {
        let limits = serve::Limits { workers: 1, shutdown_timeout: Duration::from_secs(1), ..Default::default() };
        TestServer::start_with_limits(settings, limits)
    }
}

/// The body the contract asks for, built independently of the server with serde_json (whose output for
/// these values is what `JSON.stringify` gives).
pub fn expected_body(
    id: &str,
    channel: Option<&str>,
    duration: &str,
    views: Option<i64>,
    locales: &Value,
    region: &str,
) -> String {
    let has = locales.get(region).is_some();
    let locale = locales.get(region).or_else(|| locales.get("en"));
    let text =
        |field: &str| locale.and_then(|l| l.get(field)).filter(|v| v.is_string()).cloned().unwrap_or(Value::Null);
    json!({
        "id": id,
        "channel": channel,
        "title": text("title"),
        "description": text("description"),
        "duration": duration,
        "views": views,
        "trending": has && views.is_some_and(|v| v > 500_000),
    })
    .to_string()
}

/// Probes of the request line that the contract alone answers, whatever the rows beyond a `trend` row (with
/// en and zh-TW) and no `nope` row: ids as sent on the request line, the region parameter as URLSearchParams
/// reads it, which check wins, decodeURIComponent's refusals, near misses of the two routes, and methods on
/// every route. The edge tests send them all: edges.rs against the model, php.rs against metadata-rs.
pub fn request_line_probes() -> Vec<(&'static str, String)> {
    let get = |t: &str| ("GET", t.to_string());
    // Ids as sent on the request line: raw `+`, an encoded slash (once and twice), encoded ASCII, lower-case
    // hex, dot segments.
    let mut probes: Vec<(&'static str, String)> = [
        "/v1/metadata/a+b",
        "/v1/metadata/a%2Fb?region=en",
        "/v1/metadata/a%252Fb",
        "/v1/metadata/%74rend?region=en",
        "/v1/metadata/%74rend?region=zh-TW",
        "/v1/metadata/vid%c3%a9%f0%9f%98%80",
        "/v1/metadata/%2e%2e",
        "/v1/metadata/..%2F..%2Fetc%2Fpasswd",
        "/v1/metadata/%2F",
        "/v1/metadata/%3F?region=ja",
    ]
    .map(get)
    .into();
    // The region parameter as URLSearchParams reads it, and the 35-character limit.
    let (r35, r36) = (format!("region={}", "a".repeat(35)), format!("region={}", "a".repeat(36)));
    for query in [
        "region=",
        "region",
        "region=%6Aa",
        "region=zh%2DTW",
        "region=ja&region=zh-TW",
        "x=1&region=zh-TW",
        "&&region=zh-TW&",
        "REGION=zh-TW",
        "%72egion=zh-TW",
        "regio%6E=zh-TW",
        "region=+en",
        "region=en+",
        "region=a+b",
        "region=zh-tw",
        "region=EN",
        &r35,
        &r36,
        "region=%E0",
        "region=%C3%A9",
        "region=en%0A",
        "region=en%00",
        "region=e_n",
        "region=x;drop",
        "region=zh%2FTW",
        "region=constructor",
        "region=__proto__",
        "region=toString",
        "region=%",
        "region=%zz",
        "region=%2",
        "region==en",
        "region=en=",
        "",
    ] {
        probes.push(("GET", format!("/v1/metadata/trend?{query}")));
    }
    probes.extend(
        [
            // Which check wins: a malformed id before a bad region, a bad region before the lookup.
            "/v1/metadata/%E0%A4%A?region=bad!",
            "/v1/metadata/nope?region=bad!",
            "/v1/metadata/nope?region=xx",
            // decodeURIComponent's refusals: a cut sequence, a surrogate, an overlong form, bad hex, a lone %,
            // a code point above U+10FFFF, a lone continuation byte.
            "/v1/metadata/%C3",
            "/v1/metadata/%ED%A0%80",
            "/v1/metadata/%C0%80",
            "/v1/metadata/%ZZ",
            "/v1/metadata/abc%",
            "/v1/metadata/abc%4",
            "/v1/metadata/%F4%90%80%80",
            "/v1/metadata/%80",
            "/v1/metadata/abc%FF",
            // Near misses of the two routes.
            "/v1/metadata/",
            "/v1/metadata/?region=en",
            "/v1/metadata",
            "/v1/metadata/a/b",
            "/v1/metadata/trend/",
            "/v1/metadataX",
            "/V1/metadata/trend",
            "/v1//metadata/trend",
            "//v1/metadata/trend",
            "/",
            "/index.php",
            "/metadata.php",
            "/healthz/",
            "/healthz?x=1",
            "/HEALTHZ",
        ]
        .map(get),
    );
    for (method, target) in [
        ("HEAD", "/v1/metadata/trend?region=zh-TW"),
        ("HEAD", "/v1/metadata/nope"),
        ("HEAD", "/v1/metadata/%zz"),
        ("HEAD", "/healthz"),
        ("HEAD", "/nope"),
        ("POST", "/v1/metadata/trend"),
        ("PUT", "/v1/metadata/trend"),
        ("DELETE", "/v1/metadata/trend"),
        ("OPTIONS", "/v1/metadata/trend"),
        ("PATCH", "/v1/metadata/trend"),
        ("TRACE", "/v1/metadata/trend"),
        ("PROPFIND", "/v1/metadata/trend"),
        ("POST", "/v1/metadata/%E0%A4%A"),
        ("POST", "/nope"),
        ("POST", "/v1/metadata/"),
        ("POST", "/healthz"),
        ("TRACE", "/healthz"),
        ("OPTIONS", "/healthz"),
    ] {
        probes.push((method, target.to_string()));
    }
    probes
}

pub fn assert_json(res: &Response, status: u16, body: &str, what: &str) {
    assert_eq!(res.status, status, "{what}: status; body {:?}", res.text());
    assert_eq!(res.header("content-type"), Some("application/json"), "{what}: content-type");
    assert_eq!(res.text(), body, "{what}: body");
}
