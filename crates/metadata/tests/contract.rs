//! The handler contract over real HTTP: every region, the fallback to en, duration formatting edges, the
//! 404 body, bad ids and regions, methods, and /healthz.

mod common;

use common::{Dataset, REGIONS, TestServer, assert_json, custom_db, expected_body, request, settings};
use serde_json::Value;

/// The contract's duration format, written out independently of the server's.
fn duration(s: i64) -> String {
    let s = s.max(0);
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

fn enc(raw: &str) -> String {
    testkit::http::enc(raw)
}

#[test]
fn every_sample_id_in_every_region_matches_the_contract() {
    let data = Dataset::generate(300, 60, 7);
    let server = TestServer::start(settings(&data.db()));
    let conn = data.open_rw();
    let mut checked = 0;
    for id in data.sample_ids() {
        let row: Option<(String, i64, i64, String)> = conn
            .query_row("SELECT channel, duration_s, views, locales FROM videos WHERE id = ?1", [&id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .ok();
        for region in REGIONS.iter().copied().chain(["xx", ""]) {
            let res = server.get(&format!("/v1/metadata/{}?region={region}", enc(&id)));
            let what = format!("{id} region {region:?}");
            match &row {
                None => assert_json(&res, 404, "null", &what),
                Some((channel, secs, views, locales)) => {
                    let locales: Value = serde_json::from_str(locales).expect("locales JSON");
                    let effective = if region.is_empty() { "en" } else { region };
                    let want = expected_body(&id, Some(channel), &duration(*secs), Some(*views), &locales, effective);
                    assert_json(&res, 200, &want, &what);
                    checked += 1;
                }
            }
        }
        // No region at all means en.
        let plain = server.get(&format!("/v1/metadata/{}", enc(&id)));
        let with_en = server.get(&format!("/v1/metadata/{}?region=en", enc(&id)));
        assert_eq!((plain.status, plain.body), (with_en.status, with_en.body), "{id}: default region");
    }
    assert!(checked > 200, "only {checked} present lookups were checked");
}

#[test]
fn fallback_to_en_and_trending_needs_the_region() {
    let dir = tempfile::tempdir().expect("dir");
    let locales = r#"{"en":{"title":"Hello","description":"World"},"ja":{"title":"こんにちは","description":"世界"}}"#;
    let db = custom_db(dir.path(), &[("hot", Some("Chan"), Some(61), Some(500_001), Some(locales))]);
    let server = TestServer::start(settings(&db));
    let want = |title: &str, desc: &str, trending: bool| {
        format!(
            r#"{{"id":"hot","channel":"Chan","title":"{title}","description":"{desc}","duration":"1:01","views":500001,"trending":{trending}}}"#
        )
    };
    assert_json(&server.get("/v1/metadata/hot?region=ja"), 200, &want("こんにちは", "世界", true), "ja present");
    assert_json(&server.get("/v1/metadata/hot?region=ko"), 200, &want("Hello", "World", false), "ko falls back");
    assert_json(&server.get("/v1/metadata/hot?region=en"), 200, &want("Hello", "World", true), "en present");
    assert_json(&server.get("/v1/metadata/hot?region=zh-TW"), 200, &want("Hello", "World", false), "zh-TW");
}

#[test]
fn duration_formatting_edges() {
    let dir = tempfile::tempdir().expect("dir");
    let locales = r#"{"en":{"title":"t","description":"d"}}"#;
    let cases =
        [(0, "0:00"), (59, "0:59"), (60, "1:00"), (3599, "59:59"), (3600, "1:00:00"), (3_600_000, "1000:00:00")];
    let ids: Vec<String> = cases.iter().map(|(s, _)| format!("d{s}")).collect();
    let rows: Vec<_> =
        cases.iter().zip(&ids).map(|((s, _), id)| (id.as_str(), Some("c"), Some(*s), Some(1), Some(locales))).collect();
    let db = custom_db(dir.path(), &rows);
    let server = TestServer::start(settings(&db));
    for ((_, want), id) in cases.iter().zip(&ids) {
        let res = server.get(&format!("/v1/metadata/{id}"));
        let body: Value = serde_json::from_slice(&res.body).expect("json");
        assert_eq!(body["duration"], *want, "{id}");
        assert_eq!(duration(id[1..].parse().expect("secs")), *want, "the test's own formatter agrees");
    }
}

#[test]
fn escaping_and_nulls_like_json_stringify() {
    let dir = tempfile::tempdir().expect("dir");
    let locales =
        r#"{"en":{"title":"quote \" backslash \\ newline \n tab \t bell \u0007 ls \u2028 emoji 🍜","description":42}}"#;
    let db = custom_db(dir.path(), &[("q\"x", None, None, None, Some(locales))]);
    let server = TestServer::start(settings(&db));
    let res = server.get(&format!("/v1/metadata/{}", enc("q\"x")));
    let locales: Value = serde_json::from_str(locales).expect("json");
    assert_json(&res, 200, &expected_body("q\"x", None, "0:00", None, &locales, "en"), "escapes");
    assert!(res.text().contains(r#"bell \u0007 ls "#), "control characters as lower-case \\u00xx");
}

#[test]
fn unknown_ids_and_injection_shaped_ids_are_404_null() {
    let data = Dataset::generate(50, 5, 3);
    let server = TestServer::start(settings(&data.db()));
    let count = || data.open_rw().query_row("SELECT count(*) FROM videos", [], |r| r.get::<_, i64>(0)).expect("count");
    let before = count();
    for id in [
        "nope",
        "' OR '1'='1",
        "x'; DROP TABLE videos; --",
        "\" OR 1=1 --",
        "1 UNION SELECT channel, duration_s, views, locales FROM videos",
        "%",
        "*",
        "\u{0}",
        "../../etc/passwd",
        "ｘ",
    ] {
        let res = server.get(&format!("/v1/metadata/{}", enc(id)));
        assert_json(&res, 404, "null", &format!("id {id:?}"));
    }
    assert_eq!(count(), before, "the table is untouched");
}

#[test]
fn bad_requests() {
    let data = Dataset::generate(20, 5, 3);
    let server = TestServer::start(settings(&data.db()));
    let id = data.open_rw().query_row("SELECT id FROM videos LIMIT 1", [], |r| r.get::<_, String>(0)).expect("an id");
    let bad_region = r#"{"error":"region must be a language tag like en or zh-TW"}"#;
    for region in ["a+b", "x;drop", "%C3%A9", "en_US", &"a".repeat(36), "zh%2FTW"] {
        assert_json(&server.get(&format!("/v1/metadata/{id}?region={region}")), 400, bad_region, region);
    }
    for raw in ["%E0%A4%A", "%zz", "%", "abc%FF"] {
        assert_json(&server.get(&format!("/v1/metadata/{raw}")), 400, r#"{"error":"malformed id"}"#, raw);
    }
    let not_found = r#"{"error":"not found"}"#;
    for path in ["/v1/metadata/", "/v1/metadata", "/v1/metadata/a/b", "/v2/metadata/a", "/"] {
        assert_json(&server.get(path), 404, not_found, path);
    }
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        for path in [format!("/v1/metadata/{id}"), "/healthz".to_string()] {
            let res = request(server.addr, method, &path, &[], Some(b"{}"));
            assert_json(&res, 405, r#"{"error":"method not allowed"}"#, &format!("{method} {path}"));
            assert_eq!(res.header("allow"), Some("GET, HEAD"), "{method} {path}");
        }
    }
    let head = request(server.addr, "HEAD", &format!("/v1/metadata/{id}?region=ja"), &[], None);
    assert_eq!(head.status, 200, "HEAD");
    assert!(head.body.is_empty(), "HEAD has no body");
    // Percent-encoded region names and the first of repeated parameters, as URLSearchParams reads them.
    let ja = server.get(&format!("/v1/metadata/{id}?region=ja"));
    assert_eq!(server.get(&format!("/v1/metadata/{id}?regio%6E=j%61&region=ko")).body, ja.body);
}

#[test]
fn healthz_without_redis() {
    let data = Dataset::generate(10, 5, 3);
    let server = TestServer::start(settings(&data.db()));
    assert_json(&server.get("/healthz"), 200, r#"{"status":"ok","sqlite":"ok","redis":"disabled"}"#, "healthz");
}
