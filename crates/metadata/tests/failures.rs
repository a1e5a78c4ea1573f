//! A missing, corrupt or locked database, a missing table and a malformed row: clear 503s (or a 500 for the
//! bad row) with JSON bodies, never a panic, and service resumes when the file is fixed.

mod common;

use std::time::{Duration, Instant};

use common::{Dataset, TestServer, assert_json, custom_db, settings};

const UNAVAILABLE: &str = r#"{"error":"database unavailable"}"#;
const HEALTH_DOWN: &str = r#"{"status":"unavailable","sqlite":"down","redis":"disabled"}"#;

fn first_id(data: &Dataset) -> String {
    data.open_rw().query_row("SELECT id FROM videos LIMIT 1", [], |r| r.get(0)).expect("an id")
}

fn assert_unavailable(res: &testkit::http::Response, what: &str) {
    assert_json(res, 503, UNAVAILABLE, what);
    assert_eq!(res.header("retry-after"), Some("1"), "{what}: Retry-After");
}

/// Polls until the server answers 200 for `path`, for at most `within`.
fn until_ok(server: &TestServer, path: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if server.get(path).status == 200 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn missing_database_answers_503_then_recovers_when_the_file_appears() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("metadata.db");
    let server = TestServer::start(settings(&path));
    assert_unavailable(&server.get("/v1/metadata/anything"), "missing file");
    let health = server.get("/healthz");
    assert_json(&health, 503, HEALTH_DOWN, "healthz names sqlite");

    let data = Dataset::generate(20, 5, 1);
    std::fs::copy(data.db(), &path).expect("copy the dataset into place");
    let id = first_id(&data);
    assert!(until_ok(&server, &format!("/v1/metadata/{id}"), Duration::from_secs(5)), "recovers once the file exists");
    assert_eq!(server.get("/healthz").status, 200);
}

#[test]
fn corrupt_file_answers_503() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("metadata.db");
    std::fs::write(&path, b"this is not a SQLite database, just some bytes ".repeat(200)).expect("write");
    let server = TestServer::start(settings(&path));
    for _ in 0..3 {
        assert_unavailable(&server.get("/v1/metadata/x"), "not a database");
    }
    assert_json(&server.get("/healthz"), 503, HEALTH_DOWN, "healthz");
}

#[test]
fn truncated_database_answers_503_not_a_panic() {
    let data = Dataset::generate(400, 50, 2);
    let id = first_id(&data);
    let bytes = std::fs::read(data.db()).expect("read");
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("truncated.db");
    // The header and the first pages survive; most of the b-tree is gone.
    std::fs::write(&path, &bytes[..8192.min(bytes.len())]).expect("write");
    let server = TestServer::start(settings(&path));
    for sample in data.sample_ids().iter().take(20).chain([&id]) {
        let res = server.get(&format!("/v1/metadata/{}", testkit::http::enc(sample)));
        assert!(matches!(res.status, 200 | 404 | 503), "{sample}: {} {:?}", res.status, res.text());
        if res.status == 503 {
            assert_unavailable(&res, "truncated");
        }
    }
    let health = server.get("/healthz").status;
    assert!(matches!(health, 200 | 503), "healthz answers: {health}");
}

#[test]
fn missing_table_answers_503() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("empty.db");
    rusqlite::Connection::open(&path).expect("create").execute_batch("CREATE TABLE other (x)").expect("table");
    let server = TestServer::start(settings(&path));
    assert_unavailable(&server.get("/v1/metadata/x"), "no videos table");
    assert_json(&server.get("/healthz"), 503, HEALTH_DOWN, "healthz");
}

/// A rollback-journal file (the kind users bring) with a writer holding its exclusive lock: readers are
/// refused after the busy timeout, and served again after the commit.
#[test]
fn locked_database_answers_503_within_the_busy_timeout_and_recovers() {
    let dir = tempfile::tempdir().expect("dir");
    let locales = r#"{"en":{"title":"t","description":"d"}}"#;
    let db = custom_db(dir.path(), &[("v1", Some("c"), Some(1), Some(1), Some(locales))]);
    let writer = rusqlite::Connection::open(&db).expect("open");
    writer.pragma_update(None, "journal_mode", "DELETE").expect("rollback journal");
    let server = TestServer::start(settings(&db));
    assert_eq!(server.get("/v1/metadata/v1").status, 200, "before the lock");

    writer.execute_batch("BEGIN EXCLUSIVE; UPDATE videos SET views = views + 1;").expect("lock");
    let started = Instant::now();
    let res = server.get("/v1/metadata/v1");
    let waited = started.elapsed();
    assert_unavailable(&res, "locked");
    // Bounded by the 100 ms busy timeout; the margin is for a loaded CI machine, not a performance claim.
    assert!(waited < Duration::from_secs(5), "a locked database answered after {waited:?}");
    assert_json(&server.get("/healthz"), 503, HEALTH_DOWN, "healthz while locked");

    writer.execute_batch("COMMIT").expect("commit");
    assert!(until_ok(&server, "/v1/metadata/v1", Duration::from_secs(5)), "recovers after the commit");
    let body: serde_json::Value = serde_json::from_slice(&server.get("/v1/metadata/v1").body).expect("json");
    assert_eq!(body["views"], 2, "the committed write is visible");
}

/// A WAL file locked by an exclusive-mode writer before the server connects (while readers are connected,
/// WAL keeps such a writer out instead): 503 until that writer closes.
#[test]
fn wal_database_held_by_an_exclusive_writer_answers_503_until_it_closes() {
    let data = Dataset::generate(20, 5, 1);
    let id = first_id(&data);
    let writer = data.open_rw();
    writer.pragma_update(None, "locking_mode", "EXCLUSIVE").expect("exclusive");
    writer.execute_batch("BEGIN EXCLUSIVE; UPDATE videos SET views = views + 1; COMMIT;").expect("lock");
    let server = TestServer::start(settings(&data.db()));
    let path = format!("/v1/metadata/{id}");
    assert_unavailable(&server.get(&path), "held by an exclusive-mode writer");
    drop(writer); // closing releases the exclusive lock
    assert!(until_ok(&server, &path, Duration::from_secs(5)), "recovers once the writer is gone");
}

#[test]
fn malformed_locales_row_is_a_500_and_other_rows_still_answer() {
    let dir = tempfile::tempdir().expect("dir");
    let good = r#"{"en":{"title":"t","description":"d"}}"#;
    let db = custom_db(
        dir.path(),
        &[
            ("bad-json", Some("c"), Some(1), Some(1), Some("{not json")),
            ("array", Some("c"), Some(1), Some(1), Some("[1,2]")),
            ("null", Some("c"), Some(1), Some(1), None),
            ("good", Some("c"), Some(1), Some(1), Some(good)),
        ],
    );
    rusqlite::Connection::open(&db)
        .expect("open")
        .execute_batch(&format!(
            "INSERT INTO videos VALUES ('text-views', 'c', 1, 'many', '{good}');
             INSERT INTO videos VALUES ('blob-channel', x'00ff', 1, 1, '{good}');
             INSERT INTO videos VALUES ('real-duration', 'c', 3599.9, 7, '{good}');"
        ))
        .expect("odd rows");
    let server = TestServer::start(settings(&db));
    for id in ["bad-json", "array", "null", "text-views", "blob-channel"] {
        assert_json(&server.get(&format!("/v1/metadata/{id}")), 500, r#"{"error":"stored metadata is malformed"}"#, id);
    }
    // Right after a malformed row, the connection still answers: a bad row is not an outage.
    assert_eq!(server.get("/v1/metadata/good").status, 200);
    assert_eq!(server.get("/healthz").status, 200, "a bad row is not an outage");
    let real = server.get("/v1/metadata/real-duration");
    assert!(real.text().contains(r#""duration":"59:59","views":7"#), "a REAL duration is truncated: {}", real.text());
}
