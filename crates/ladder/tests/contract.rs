//! Every rung's contract against ladder-rs in process, over a real SQLite file and a real Postgres: the bodies
//! (built here independently with serde_json, or written out for the fixed 1 KiB document), 404s, 405s with
//! Allow, and bad bodies (400, 413).

mod common;

use std::sync::Arc;

use common::{
    ABSENT_ID, Dataset, EDGE_ROWS, MALFORMED_ID, TestServer, assert_json, body, postgres_body, request, send_raw,
    settings, sqlite_body,
};
use serde_json::json;

struct Fixture {
    server: TestServer,
    data: Dataset,
    _pg: Arc<testkit::Postgres>,
}

fn fixture(database: &str, rows: u32) -> Fixture {
    let pg = common::shared_postgres();
    let url = pg.create_database(database);
    assert_eq!(common::seed(&url, rows), i64::from(rows));
    let data = Dataset::generate(300);
    let server = TestServer::start(settings(&data.db(), Some(&url)));
    Fixture { server, data, _pg: pg }
}

#[test]
fn every_rung_answers_its_contract() {
    let Fixture { server, data, _pg } = fixture("t_rungs", 1000);
    assert_json(&server.get("/ladder/empty"), 200, r#"{"ok":true}"#, "empty");
    assert_json(&server.get("/ladder/empty?cache=bust"), 200, r#"{"ok":true}"#, "empty, query ignored");
    assert_json(&server.get("/healthz"), 200, r#"{"status":"ok"}"#, "healthz");
    let head = request(server.addr, "HEAD", "/ladder/empty", &[], None);
    assert_eq!((head.status, head.header("content-type")), (200, Some("application/json")), "HEAD");

    let mut ids = data.sample_ids();
    assert!(ids.len() >= 10, "enough sample ids: {ids:?}");
    ids.extend(EDGE_ROWS.iter().map(|r| r.0.to_string()));
    for id in &ids {
        let b = body(id);
        assert_json(&server.post("/ladder/validate", &b), 200, &json!({"ok": true, "id": id}).to_string(), id);
        assert_json(&server.post("/ladder/sqlite", &b), 200, &sqlite_body(&data, id), id);
        assert_json(&server.post("/ladder/postgres", &b), 200, &postgres_body(&data, id), id);
    }
    // The full body, with the optional note, still answers with the id only.
    let full = json!({"id": "abc", "region": "zh-Hant-TW", "tags": vec!["é"; 16], "note": "x".repeat(280)}).to_string();
    assert_json(&server.post("/ladder/validate", &full), 200, r#"{"ok":true,"id":"abc"}"#, "full body");

    // A valid id that is not in the dataset; a row the contract cannot carry.
    for rung in ["/ladder/sqlite", "/ladder/postgres"] {
        assert_json(&server.post(rung, &body(ABSENT_ID)), 404, r#"{"error":"not found"}"#, rung);
        let res = server.post(rung, &body(MALFORMED_ID));
        assert_json(&res, 500, r#"{"error":"stored video is malformed"}"#, rung);
    }
    assert_json(&server.post("/ladder/validate", &body(ABSENT_ID)), 200, r#"{"ok":true,"id":"absent-id-0000"}"#, "");
}

#[test]
fn routes_and_methods() {
    let Fixture { server, _pg, .. } = fixture("t_routes", 1000);
    for path in [
        "/",
        "/nope",
        "/ladder",
        "/ladder/",
        "/ladder/empty/",
        "/ladder/EMPTY",
        "/ladder/json/",
        "/ladder/json.json",
        "/ladder/sqlite/x",
        "/healthz/",
    ] {
        assert_json(&server.get(path), 404, r#"{"error":"not found"}"#, path);
    }
    assert_json(&server.post("/nope", "{}"), 404, r#"{"error":"not found"}"#, "POST /nope");
    for (method, path, allow) in [
        ("POST", "/ladder/empty", "GET, HEAD"),
        ("POST", "/ladder/json", "GET, HEAD"),
        ("PUT", "/ladder/json", "GET, HEAD"),
        ("DELETE", "/healthz", "GET, HEAD"),
        ("GET", "/ladder/validate", "POST"),
        ("PUT", "/ladder/sqlite", "POST"),
        ("HEAD", "/ladder/postgres", "POST"),
    ] {
        let res = request(server.addr, method, path, &[], None);
        assert_eq!(res.status, 405, "{method} {path}");
        assert_eq!(res.header("allow"), Some(allow), "{method} {path}");
        if method != "HEAD" {
            assert_json(&res, 405, r#"{"error":"method not allowed"}"#, path);
        }
    }
}

/// The `GET /ladder/json` document byte for byte, written out here rather than taken from the crate, so a change
/// to the content (which would change what the ladder measures, and must change the peers too) fails here.
const CATALOG: &str = concat!(
    r#"{"ok":true,"total":8,"items":["#,
    r#"{"id":1,"name":"Anvil","category":"tools","tags":["iron","heavy"],"active":true,"price":18900,"#,
    r#""counts":{"stock":12,"sold":340}},"#,
    r#"{"id":2,"name":"Bellows","category":"tools","tags":["leather"],"active":true,"price":4250,"#,
    r#""counts":{"stock":4,"sold":57}},"#,
    r#"{"id":3,"name":"Chisel","category":"tools","tags":["steel","small"],"active":false,"price":1299,"#,
    r#""counts":{"stock":0,"sold":1210}},"#,
    r#"{"id":4,"name":"Dowel","category":"parts","tags":["oak","small","bulk"],"active":true,"price":15,"#,
    r#""counts":{"stock":5000,"sold":88123}},"#,
    r#"{"id":5,"name":"Easel","category":"studio","tags":["pine"],"active":true,"price":7600,"#,
    r#""counts":{"stock":7,"sold":19}},"#,
    r#"{"id":6,"name":"Ferrule","category":"parts","tags":["brass","small"],"active":true,"price":85,"#,
    r#""counts":{"stock":820,"sold":4406}},"#,
    r#"{"id":7,"name":"Gimlet","category":"tools","tags":["steel"],"active":false,"price":950,"#,
    r#""counts":{"stock":3,"sold":95}},"#,
    r#"{"id":8,"name":"Hinge","category":"parts","tags":["brass","bulk"],"active":true,"price":240,"#,
    r#""counts":{"stock":1500,"sold":23017}}"#,
    "]}",
);

/// The 1 KiB JSON rung answers the same document every time, GET or HEAD, with neither database: it depends on
/// nothing but the request.
#[test]
fn the_json_rung_answers_its_1_kib_document() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(settings(&dir.path().join("missing.db"), None));
    // The size the ladder's "1 KB JSON" rung stands for; ASCII, so the peers' string length is its byte length.
    assert!((1000..=1100).contains(&CATALOG.len()) && CATALOG.is_ascii(), "{} bytes", CATALOG.len());
    let value: serde_json::Value = serde_json::from_str(CATALOG).expect("the expected document is JSON");
    assert_eq!(value["items"].as_array().map(Vec::len), Some(8));
    let length = CATALOG.len().to_string();
    for target in ["/ladder/json", "/ladder/json?cache=bust", "/ladder/json"] {
        let res = server.get(target);
        assert_json(&res, 200, CATALOG, target);
        assert_eq!(res.header("content-length"), Some(length.as_str()), "{target}");
    }
    let head = request(server.addr, "HEAD", "/ladder/json", &[], None);
    assert_eq!((head.status, head.header("content-type")), (200, Some("application/json")), "HEAD");
    // HEAD announces the GET body's length and sends none of it.
    let length = CATALOG.len().to_string();
    assert_eq!((head.header("content-length"), head.body.len()), (Some(length.as_str()), 0), "HEAD");
}

#[test]
fn bad_bodies_are_400_and_large_ones_413() {
    let Fixture { server, _pg, .. } = fixture("t_bodies", 1000);
    let long_tag = "t".repeat(33);
    let bad: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"{".to_vec(),
        b"not json".to_vec(),
        b"[]".to_vec(),
        b"null".to_vec(),
        br#"{"id":"x","region":"en","tags":[]} trailing"#.to_vec(),
        br#"{"id":"x","region":"en"}"#.to_vec(),
        br#"{"id":"x","region":"en","tags":[],"extra":true}"#.to_vec(),
        br#"{"id":"","region":"en","tags":[]}"#.to_vec(),
        br#"{"id":"has space","region":"en","tags":[]}"#.to_vec(),
        br#"{"id":"abc\n","region":"en","tags":[]}"#.to_vec(),
        br#"{"id":7,"region":"en","tags":[]}"#.to_vec(),
        br#"{"id":"x","region":"e","tags":[]}"#.to_vec(),
        br#"{"id":"x","region":"en_US","tags":[]}"#.to_vec(),
        br#"{"id":"x","region":"en","tags":"music"}"#.to_vec(),
        format!(r#"{{"id":"x","region":"en","tags":["{long_tag}"]}}"#).into_bytes(),
        json!({"id": "x", "region": "en", "tags": vec!["t"; 17]}).to_string().into_bytes(),
        json!({"id": "x", "region": "en", "tags": [], "note": "n".repeat(281)}).to_string().into_bytes(),
        json!({"id": "a".repeat(33), "region": "en", "tags": []}).to_string().into_bytes(),
        br#"{"id":"x","region":"en","tags":["\ud800"]}"#.to_vec(), // a lone surrogate
        b"\xef\xbb\xbf{\"id\":\"x\",\"region\":\"en\",\"tags\":[]}".to_vec(), // a byte-order mark
        b"{\"id\":\"x\",\"region\":\"en\",\"tags\":[\"\xff\"]}".to_vec(), // not UTF-8
    ];
    for rung in ["/ladder/validate", "/ladder/sqlite", "/ladder/postgres"] {
        for b in &bad {
            let res = common::post(server.addr, rung, b);
            let what = format!("{rung} {:?}", String::from_utf8_lossy(b));
            assert_eq!(res.status, 400, "{what}: {:?}", res.text());
            assert_eq!(res.header("content-type"), Some("application/json"), "{what}");
            let value: serde_json::Value = serde_json::from_slice(&res.body).expect("a JSON error");
            assert!(value["error"].is_string(), "{what}: {value}");
        }
    }

    // Exactly the limit is read; one byte more is refused, whether declared or chunked.
    let valid = body("abc");
    let mut at_limit = valid.clone().into_bytes();
    at_limit.resize(ladder::BODY_LIMIT as usize, b' ');
    assert_eq!(common::post(server.addr, "/ladder/validate", &at_limit).status, 200, "a body of exactly 64 KiB");
    let mut over = at_limit.clone();
    over.push(b' ');
    let too_large = r#"{"error":"request body exceeds the limit of 65536 bytes"}"#;
    assert_json(&common::post(server.addr, "/ladder/validate", &over), 413, too_large, "declared");
    let mut chunked = b"POST /ladder/sqlite HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for piece in over.chunks(8192) {
        chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        chunked.extend_from_slice(piece);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    assert_json(&send_raw(server.addr, &chunked).expect("chunked"), 413, too_large, "chunked");
}

#[test]
fn an_item_missing_from_a_short_table_is_404() {
    let Fixture { server, data, _pg } = fixture("t_short", 5);
    let (mut hit, mut miss) = (0, 0);
    for id in data.sample_ids() {
        let res = server.post("/ladder/postgres", &body(&id));
        if common::key_of(&id) <= 5 {
            assert_json(&res, 200, &postgres_body(&data, &id), &id);
            hit += 1;
        } else {
            assert_json(&res, 404, r#"{"error":"item not found"}"#, &id);
            miss += 1;
        }
    }
    assert!(miss > 0, "some ids point past the table ({hit} hits)");
}
