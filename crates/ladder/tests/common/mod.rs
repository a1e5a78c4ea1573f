//! Shared helpers for the ladder-rs tests: a generated video dataset (metadata-rs gen-data) with a few hand-made
//! rows for JSON edge cases, a Postgres cluster per test binary, ladder-rs served in process, the upstream
//! service in process, and a canned-answer server ([`canned`]) for upstreams that misbehave.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

pub mod canned;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ladder::Settings;
use ladder::db::DbOptions;
use serde_json::{Value, json};
use testkit::Postgres;
#[allow(unused_imports)] // each test binary uses a different subset
pub use testkit::http::{Response, get, request, send_raw};
use testkit::shared::Shared;

/// One hand-made row: (id, channel, duration_s, views).
pub type EdgeRow = (&'static str, Option<&'static str>, Option<i64>, Option<i64>);

/// Hand-made rows added to the generated data: strings JSON must escape, a NULL channel and NULL counts, an
/// empty channel and negative counts.
pub const EDGE_ROWS: [EdgeRow; 4] = [
    ("edge-quotes", Some("a \"quoted\" \\ back\\slash\n\t\u{1}\u{7f}"), Some(0), Some(0)),
    ("edge-unicode", Some("\u{2028}\u{2029} 😀 <b>&amp;</b> é ж 中 \u{feff}"), Some(3600), Some(9_007_199_254_740_991)),
    ("edge-nulls", None, None, None),
    ("edge_negative", Some(""), Some(-5), Some(-1)),
];

/// A row whose `views` is a REAL: the contract answers 500 for it.
pub const MALFORMED_ID: &str = "edge-real";

/// An id that is valid but in no dataset (generated ids have 11 characters).
pub const ABSENT_ID: &str = "absent-id-0000";

/// A generated dataset (plus [`EDGE_ROWS`] and the malformed row) in its own temp dir.
pub struct Dataset {
    pub dir: tempfile::TempDir,
}

impl Dataset {
    pub fn generate(rows: u64) -> Dataset {
        let dir = tempfile::tempdir().expect("temp dir");
        // No absent ids: every sample id names a row.
        let args = metadata_dataset::GenDataArgs {
            absent_percent: 0.0,
            ..metadata_dataset::GenDataArgs::in_dir(dir.path(), rows, 20, 1)
        };
        metadata_dataset::run(&args).expect("gen-data");
        let data = Dataset { dir };
        let conn = rusqlite::Connection::open(data.db()).expect("open read-write");
        // The generator's columns are NOT NULL; the contract also covers NULLs, so the table is rebuilt without.
        conn.execute_batch(
            "CREATE TABLE nullable (id TEXT PRIMARY KEY, channel TEXT, duration_s INTEGER, views INTEGER, locales TEXT);
             INSERT INTO nullable SELECT id, channel, duration_s, views, locales FROM videos;
             DROP TABLE videos;
             ALTER TABLE nullable RENAME TO videos;",
        )
        .expect("rebuild videos");
        for (id, channel, duration, views) in EDGE_ROWS {
            conn.execute(
                "INSERT INTO videos (id, channel, duration_s, views, locales) VALUES (?1, ?2, ?3, ?4, '{}')",
                rusqlite::params![id, channel, duration, views],
            )
            .expect("insert an edge row");
        }
        conn.execute(
            "INSERT INTO videos (id, channel, duration_s, views, locales) VALUES (?1, 'c', 1, 2.5, '{}')",
            [MALFORMED_ID],
        )
        .expect("insert the malformed row");
        data
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("metadata.db")
    }

    /// Distinct generated ids that are in the table.
    pub fn sample_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_to_string(self.dir.path().join("sample_ids.txt"))
            .expect("sample ids")
            .lines()
            .map(str::to_string)
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// The row as the test reads it itself: (channel, duration_s, views), `None` when absent.
    pub fn row(&self, id: &str) -> Option<(Option<String>, Option<i64>, Option<i64>)> {
        let conn = rusqlite::Connection::open(self.db()).expect("open");
        conn.query_row("SELECT channel, duration_s, views FROM videos WHERE id = ?1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .ok()
    }
}

static SHARED_POSTGRES: Shared<Postgres> = Shared::new();

/// The binary's shared Postgres cluster, started on first use and stopped when the last handle is dropped.
pub fn shared_postgres() -> Arc<Postgres> {
    SHARED_POSTGRES.get_or_start(Postgres::start)
}

/// Runs `ladder::seed::run` (the subcommand's work) and returns the row count.
pub fn seed(url: &str, rows: u32) -> i64 {
    let config: tokio_postgres::Config = url.parse().expect("a Postgres URL");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(ladder::seed::run(&config, rows)).unwrap_or_else(|e| panic!("seed: {e:?}"))
}

pub fn settings(db: &Path, database_url: Option<&str>) -> Settings {
    Settings {
        addr: "127.0.0.1:0".parse().expect("addr"),
        db: DbOptions { path: db.to_path_buf(), busy_timeout: Duration::from_millis(100) },
        postgres: database_url.map(|u| u.parse().expect("a Postgres URL")),
        pg_timeout: Duration::from_secs(2),
        upstream: None,
        upstream_timeout: Duration::from_secs(2),
    }
}

testkit::in_process_server!(TestServer, Settings, ladder::start);

impl TestServer {
    /// ladder-rs in this process on 127.0.0.1:<ephemeral>, one worker, the ladder's body limit.
    pub fn start(settings: Settings) -> TestServer {
        let limits = serve::Limits {
            workers: 1,
            body_limit: ladder::BODY_LIMIT,
            shutdown_timeout: Duration::from_secs(1),
            ..Default::default()
        };
        TestServer::start_with_limits(settings, limits)
    }

    pub fn post(&self, target: &str, body: &str) -> Response {
        post(self.addr, target, body.as_bytes())
    }
}

testkit::in_process_server!(UpstreamServer, upstream::Settings, upstream::start);

impl UpstreamServer {
    /// The upstream service (crates/upstream) in this process, one worker, answering after `delay`.
    pub fn start(delay: Duration) -> UpstreamServer {
        let settings = upstream::Settings {
            addr: "127.0.0.1:0".parse().expect("addr"),
            delay,
            token: upstream::DEFAULT_TOKEN.to_string(),
        };
        let limits = serve::Limits { workers: 1, shutdown_timeout: Duration::from_secs(1), ..Default::default() };
        UpstreamServer::start_with_limits(settings, limits)
    }

    /// What LADDER_UPSTREAM_URL is set to.
    pub fn url(&self) -> String {
        format!("http://{}/upstream", self.addr)
    }

    /// (requests answered, connections accepted) from its /stats, not counting the connection this asks on.
    pub fn stats(&self) -> (u64, u64) {
        let res = self.get("/stats");
        assert_eq!(res.status, 200, "upstream /stats: {}", res.text());
        let value = res.json();
        let count = |field: &str| value[field].as_u64().unwrap_or_else(|| panic!("{field} in {value}"));
        (count("requests"), count("connections") - 1)
    }
}

/// The 200 answer of `/ladder/upstream` with the upstream service's default token.
pub fn upstream_body() -> String {
    json!({ "ok": true, "token": upstream::DEFAULT_TOKEN }).to_string()
}

pub fn post(addr: SocketAddr, target: &str, body: &[u8]) -> Response {
    request(addr, "POST", target, &[], Some(body))
}

/// A valid body for `id`.
pub fn body(id: &str) -> String {
    json!({ "id": id, "region": "en-US", "tags": ["music", "live"] }).to_string()
}

/// The item key, computed here independently of the crate: byte sum mod 1000, plus 1.
pub fn key_of(id: &str) -> i64 {
    id.bytes().map(i64::from).sum::<i64>() % 1000 + 1
}

/// The bodies the contract asks for, built with serde_json (key order as written: preserve_order).
pub fn sqlite_body(data: &Dataset, id: &str) -> String {
    let (channel, duration, views) = data.row(id).unwrap_or_else(|| panic!("{id} is in the dataset"));
    json!({ "ok": true, "id": id, "channel": channel, "duration_s": duration, "views": views }).to_string()
}

pub fn postgres_body(data: &Dataset, id: &str) -> String {
    let mut value: Value = serde_json::from_str(&sqlite_body(data, id)).expect("json");
    let key = key_of(id);
    value["item"] = json!({ "name": format!("item-{key}"), "score": key * 37 % 1000 });
    value.to_string()
}

pub fn assert_json(res: &Response, status: u16, body: &str, what: &str) {
    assert_eq!(res.status, status, "{what}: status; body {:?}", res.text());
    assert_eq!(res.header("content-type"), Some("application/json"), "{what}: content-type");
    assert_eq!(res.text(), body, "{what}: body");
}
