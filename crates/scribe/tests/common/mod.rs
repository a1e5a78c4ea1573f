//! Shared helpers for the scribe-rs integration tests: request helpers over testkit's raw HTTP/1.1 client, record
//! builders, and a `Stack` that runs scribe-rs in process against real Postgres and Redis (testkit).
//!
//! Postgres: one cluster per test binary, shared through a `Weak` so it is stopped when the last test using it
//! drops its handle (statics are never dropped, and a cluster left running would outlive the tests). Each test
//! gets its own database in it. Tests that stop or restart Postgres start their own cluster instead.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use testkit::shared::Shared;
use testkit::{Postgres, Redis};

/// The workspace's schemas/ folder (notes.schema.json and the envelope).
pub const SCHEMAS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemas");

/// The timestamp most records are written with.
pub const T0: &str = "2026-11-29T20:00:00Z";
/// The same instant as scribe-rs serializes it (UTC, milliseconds, Z).
pub const T0_OUT: &str = "2026-11-29T20:00:00.000Z";

// ------------------------------------------------------------------------------------------------------------
// HTTP
// ------------------------------------------------------------------------------------------------------------

#[allow(unused_imports)] // each test binary uses a different subset
pub use testkit::http::{IO_TIMEOUT, Response, enc, get, request, send_raw, try_request};

/// The scribe tests' view of a response: most answers must be 200 with JSON.
pub trait JsonRes {
    /// Asserts 200 and returns the JSON body.
    fn ok(&self) -> Value;
}

impl JsonRes for Response {
    fn ok(&self) -> Value {
        assert_eq!(self.status, 200, "expected 200, got {} {:?}", self.status, self.text());
        self.json()
    }
}

pub fn delete(addr: SocketAddr, target: &str) -> Response {
    request(addr, "DELETE", target, &[], None)
}

pub fn post(addr: SocketAddr, target: &str, body: &Value) -> Response {
    request(addr, "POST", target, &[], Some(body.to_string().as_bytes()))
}

pub fn put(addr: SocketAddr, target: &str, body: &Value) -> Response {
    request(addr, "PUT", target, &[], Some(body.to_string().as_bytes()))
}

// ------------------------------------------------------------------------------------------------------------
// Records
// ------------------------------------------------------------------------------------------------------------

/// A record body written at T0 by `by`.
pub fn record(data: Value, by: i64) -> Value {
    record_at(data, by, T0, T0)
}

pub fn record_at(data: Value, by: i64, created: &str, modified: &str) -> Value {
    json!({ "data": data, "date_created": created, "date_modified": modified, "created_by": by, "modified_by": by })
}

/// The one row of a `[row]` answer.
pub fn single(value: &Value) -> &Value {
    let list = value.as_array().unwrap_or_else(|| panic!("expected an array, got {value}"));
    assert_eq!(list.len(), 1, "expected exactly one row, got {value}");
    &list[0]
}

/// The ids of an array of rows, in order.
pub fn ids(value: &Value) -> Vec<i64> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("expected an array of rows, got {value}"))
        .iter()
        .map(|row| row["id"].as_i64().unwrap_or_else(|| panic!("row without an integer id: {row}")))
        .collect()
}

/// The keys of a JSON object, in order.
pub fn keys(value: &Value) -> Vec<&str> {
    value.as_object().unwrap_or_else(|| panic!("expected an object, got {value}")).keys().map(String::as_str).collect()
}

// ------------------------------------------------------------------------------------------------------------
// Servers
// ------------------------------------------------------------------------------------------------------------

static SHARED_POSTGRES: Shared<Postgres> = Shared::new();

/// The binary's shared Postgres cluster, started on first use and stopped when the last handle is dropped.
pub fn shared_postgres() -> Arc<Postgres> {
    SHARED_POSTGRES.get_or_start(Postgres::start)
}

/// scribe-rs running in this process on 127.0.0.1:<ephemeral>, one worker. Shut down when dropped.
pub struct App {
    pub addr: SocketAddr,
    /// Shut down gracefully when dropped (serve::Server's own Drop).
    _server: serve::Server,
}

impl App {
    /// Starts scribe-rs as main.rs does, with the workspace's schemas/ and `extra` command-line arguments.
    pub fn start(database_url: &str, redis_port: u16, extra: &[&str]) -> App {
        let redis_url = format!("redis://127.0.0.1:{redis_port}/1");
        let mut args = vec!["scribe-rs", "--database-url", database_url, "--redis-url", &redis_url];
        args.extend(["--schema-dir", SCHEMAS]);
        args.extend(extra);
        let config = <scribe::Config as clap::Parser>::try_parse_from(&args)
            .unwrap_or_else(|e| panic!("arguments {args:?}: {e}"));
        let settings = config.resolve().unwrap_or_else(|e| panic!("config does not resolve: {e}"));
        let shared = scribe::Shared::new(settings).unwrap_or_else(|e| panic!("scribe state: {e}"));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
        runtime.block_on(scribe::ensure_database(&shared.settings)).unwrap_or_else(|e| panic!("database: {e}"));
        drop(runtime);
        let addr: SocketAddr = "127.0.0.1:0".parse().expect("an address");
        let listeners = serve::bind_reuseport(addr, 1).expect("bind 127.0.0.1:0");
        let limits = serve::Limits { workers: 1, shutdown_timeout: Duration::from_secs(2), ..Default::default() };
        let server = scribe::start(shared, listeners, limits).expect("scribe-rs starts");
        App { addr: server.local_addr(), _server: server }
    }

    pub fn get(&self, target: &str) -> Response {
        get(self.addr, target)
    }

    pub fn delete(&self, target: &str) -> Response {
        delete(self.addr, target)
    }

    pub fn post(&self, target: &str, body: &Value) -> Response {
        post(self.addr, target, body)
    }

    pub fn put(&self, target: &str, body: &Value) -> Response {
        put(self.addr, target, body)
    }
}

/// scribe-rs with its own database in the shared Postgres and its own Redis. Dropped in field order: the
/// server first, then Redis, then this test's handle on Postgres.
pub struct Stack {
    pub app: App,
    pub redis: Redis,
    pub pg: Arc<Postgres>,
    pub db: String,
}

impl Stack {
    /// `db`: this test's database name ([a-z0-9_], unique in the binary).
    pub fn start(db: &str) -> Stack {
        Stack::with_args(db, &[])
    }

    pub fn with_args(db: &str, extra: &[&str]) -> Stack {
        let pg = shared_postgres();
        let url = pg.create_database(db);
        let redis = Redis::start();
        let app = App::start(&url, redis.port(), extra);
        Stack { app, redis, pg, db: db.to_string() }
    }

    /// Another scribe-rs instance on the same database and Redis (as a second replica would be).
    pub fn second_instance(&self) -> App {
        App::start(&self.pg.url(&self.db), self.redis.port(), &[])
    }

    pub fn addr(&self) -> SocketAddr {
        self.app.addr
    }

    pub fn psql(&self, sql: &str) -> String {
        self.pg.psql(&self.db, sql)
    }

    /// Tables in the public schema.
    pub fn table_count(&self) -> i64 {
        self.psql("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'")
            .parse()
            .expect("a count")
    }

    pub fn table_exists(&self, name: &str) -> bool {
        self.psql(&format!(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name = '{name}'"
        )) == "1"
    }

    pub fn get(&self, target: &str) -> Response {
        self.app.get(target)
    }

    pub fn delete(&self, target: &str) -> Response {
        self.app.delete(target)
    }

    pub fn post(&self, target: &str, body: &Value) -> Response {
        self.app.post(target, body)
    }

    pub fn put(&self, target: &str, body: &Value) -> Response {
        self.app.put(target, body)
    }

    /// POSTs a record and returns its row.
    pub fn create(&self, component: &str, body: &Value) -> Value {
        let res = self.post(&format!("/{component}"), body);
        single(&res.ok()).clone()
    }
}
