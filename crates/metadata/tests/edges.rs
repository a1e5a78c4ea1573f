//! Edge probes over real HTTP, each answer held to the independent model of the contract (contract_model):
//! rows with escapes, odd column values and malformed or unusual `locales`; ids and regions that are percent-
//! encoded, malformed, empty, repeated or too long; every method on every route; near-miss paths. Then the
//! same probes through the Redis cache, twice (a cached answer is the same bytes), and a few answers written
//! out by hand so that the model and the server cannot drift together.

mod common;
mod contract_model;

use common::{TestServer, assert_json, custom_db, request_line_probes, settings, with_redis};
use contract_model::{BAD_REGION, MALFORMED_STORED, assert_agrees};
use serde_json::json;

/// Escapes JSON.stringify must write (quote, backslash, short forms, other controls) and characters it must
/// leave alone (DEL, U+2028/9, NEL, BOM, `</script>`, non-ASCII).
const ESC_TEXT: &str = "q\"uote \\back\\slash /sl \n\t\r\u{8}\u{c} \u{1}\u{1f}\u{7f} é 日本語 😀 \u{2028}\u{2029} </script> \u{85}\u{feff}";

/// Rows whose column types are unusual; probed last, so that a server which took them for a database failure
/// (and reopened its connection) could not hide it behind the probes that follow.
const LAST_ROWS: [&str; 1] = ["views-real"];

/// One edge row, owned: (id, channel, duration_s, views, locales), as common::RowSpec borrows it.
type EdgeRow = (String, Option<String>, Option<i64>, Option<i64>, Option<String>);

fn edge_rows() -> Vec<EdgeRow> {
    let full =
        json!({"en": {"title": "T en", "description": "D en"}, "ja": {"title": "タイトル", "description": "説明"}})
            .to_string();
    let row = |id: &str, channel: Option<&str>, d: Option<i64>, v: Option<i64>, locales: Option<&str>| {
        (id.to_string(), channel.map(str::to_string), d, v, locales.map(str::to_string))
    };
    let c = Some("c");
    let mut rows = vec![
        row(
            "esc",
            Some("Chan \"q\" \\ / é 😀"),
            Some(3725),
            Some(600_001),
            Some(
                &json!({"en": {"title": ESC_TEXT, "description": format!("d{ESC_TEXT}")},
                        "ja": {"title": "ラーメン 🍜", "description": "麺"}})
                .to_string(),
            ),
        ),
        // The same kinds of characters, but written as \u escapes in the stored JSON.
        row(
            "esc-ascii",
            c,
            Some(1),
            Some(1),
            Some(r#"{"en": {"title": "caf\u00e9 \u2028 \ud83d\ude00 \u0007", "description": "\\u escapes"}}"#),
        ),
        row(
            "trend",
            c,
            Some(59),
            Some(500_001),
            Some(
                &json!({"en": {"title": "t", "description": "d"}, "zh-TW": {"title": "中文", "description": "描述"}})
                    .to_string(),
            ),
        ),
        row("views500k", c, Some(60), Some(500_000), Some(&full)),
        row("nulls", None, None, None, Some(r#"{"en":{}}"#)),
        row("no-en", c, Some(1), Some(900_000), Some(r#"{"ja":{"title":"j","description":"jd"}}"#)),
        row(
            "odd",
            c,
            Some(1),
            Some(900_000),
            Some(r#"{"ja":"x","en":{"title":["t"],"description":"d","extra":{"a":[1]}}}"#),
        ),
        row("locale-null", c, Some(1), Some(900_000), Some(r#"{"ja":null,"en":{"title":"e"}}"#)),
        row("dup", c, Some(1), Some(1), Some(r#"{"en":{"title":"a"},"en":{"title":"b"}}"#)),
        row(
            "dup-field",
            c,
            Some(1),
            Some(1),
            Some(r#"{"en":{"title":"b","title":7,"description":"x","description":"y"}}"#),
        ),
        row("surrogate", c, Some(1), Some(1), Some(r#"{"en":{"title":"x\ud800y","description":"\ud83d\ude00"}}"#)),
        // A lone surrogate in a region that is a string (no title there), and lone halves in the kept strings
        // with escapes, a pair and raw text around them.
        row(
            "surrogate2",
            c,
            Some(1),
            Some(1),
            Some(r#"{"fr":"\udc00","en":{"title":"\uDFFF\t\"é\u00e9\ud83d\ude00\ud83d","description":7}}"#),
        ),
        row(
            "bignum",
            c,
            Some(1),
            Some(1),
            Some(r#"{"en":{"title":"t","n":1e400,"m":-0,"k":123456789012345678901234567890}}"#),
        ),
        row(
            "proto",
            c,
            Some(1),
            Some(1),
            Some(r#"{"__proto__":{"title":"p"},"constructor":{"title":"c"},"en":{"title":"e"}}"#),
        ),
        row(
            "long",
            Some(&"c".repeat(300)),
            Some(1),
            Some(1),
            Some(&json!({"en": {"title": "L".repeat(20_000), "description": "é".repeat(5000)}}).to_string()),
        ),
        // Malformed locales: not JSON, not an object, trailing text, NaN, NULL.
        row("bad-json", c, Some(1), Some(1), Some("not json")),
        row("arr", c, Some(1), Some(1), Some("[1,2]")),
        row("null-json", c, Some(1), Some(1), Some("null")),
        row("num", c, Some(1), Some(1), Some("5")),
        row("str", c, Some(1), Some(1), Some("\"x\"")),
        row("locales-null", c, Some(1), Some(1), None),
        row("trailing", c, Some(1), Some(1), Some(r#"{"en":{}} x"#)),
        row("nan", c, Some(1), Some(1), Some(r#"{"en":{"title":NaN}}"#)),
        // Allowed around the value: JSON whitespace, and an empty object.
        row("ws", c, Some(1), Some(1), Some(" {\"en\":{\"title\":\"w\"}} \n")),
        row("empty-obj", c, Some(1), Some(600_000), Some("{}")),
    ];
    rows.push(row(
        "deep",
        c,
        Some(1),
        Some(1),
        Some(&format!(r#"{{"ko":{}{},"en":{{"title":"deep"}}}}"#, "[".repeat(300), "]".repeat(300))),
    ));
    // Durations and views at and past the formatting boundaries.
    for (id, d, v) in [
        ("d0", 0, 0),
        ("d3599", 3599, 1),
        ("d3600", 3600, 1),
        ("d360000", 360_000, 1),
        ("dneg", -5, -7),
        ("dbig", 1_000_000_000_000, 1 << 52),
    ] {
        rows.push(row(id, c, Some(d), Some(v), Some(&full)));
    }
    // Ids that must be percent-encoded, or look encoded, or are not ASCII.
    for id in ["a/b", "a b", "a+b", "%41", "x\"y", "vidé😀", "A-Za-z0-9_-~"] {
        rows.push(row(id, c, Some(1), Some(1), Some(&full)));
    }
    rows
}

/// The edge database: the rows above, plus a REAL duration and REAL views (SQLite keeps 90.7 as REAL in an
/// INTEGER column).
fn edge_db(dir: &std::path::Path) -> std::path::PathBuf {
    let rows = edge_rows();
    let specs: Vec<_> =
        rows.iter().map(|(id, ch, d, v, l)| (id.as_str(), ch.as_deref(), *d, *v, l.as_deref())).collect();
    let db = custom_db(dir, &specs);
    let full = r#"{"en":{"title":"T en","description":"D en"}}"#;
    rusqlite::Connection::open(&db)
        .expect("open")
        .execute("INSERT INTO videos VALUES ('views-real', 'c', 90.7, 1234.5, ?1)", [full])
        .expect("REAL row");
    db
}

fn enc(raw: &str) -> String {
    testkit::http::enc(raw)
}

/// Every edge probe, in the order sent.
fn edge_probes() -> Vec<(&'static str, String)> {
    let row_probes = |id: &str| -> Vec<(&'static str, String)> {
        [None, Some("ja"), Some("ko"), Some("zh-TW")]
            .into_iter()
            .map(|region| {
                (
                    "GET",
                    format!("/v1/metadata/{}{}", enc(id), region.map(|r| format!("?region={r}")).unwrap_or_default()),
                )
            })
            .collect()
    };
    let mut probes: Vec<(&'static str, String)> =
        edge_rows().iter().filter(|r| !LAST_ROWS.contains(&r.0.as_str())).flat_map(|r| row_probes(&r.0)).collect();
    probes.extend(request_line_probes());
    // Keys of Object.prototype as regions of the row that stores `__proto__` and `constructor` as languages.
    probes.extend(
        ["/v1/metadata/proto?region=__proto__", "/v1/metadata/proto?region=constructor"]
            .map(|t| ("GET", t.to_string())),
    );
    probes.extend(LAST_ROWS.iter().flat_map(|id| row_probes(id)));
    probes
}

#[test]
fn every_edge_probe_answers_as_the_model_says() {
    let dir = tempfile::tempdir().expect("dir");
    let db = edge_db(dir.path());
    let server = TestServer::start(settings(&db));
    let conn = rusqlite::Connection::open(&db).expect("the test's own connection");
    let probes = edge_probes();
    assert!(probes.len() > 200, "{} probes", probes.len());
    assert_agrees(server.addr, Some(&conn), &probes);
}

#[test]
fn the_cache_answers_the_edge_probes_with_the_same_bytes() {
    let redis = testkit::Redis::start();
    let dir = tempfile::tempdir().expect("dir");
    let db = edge_db(dir.path());
    let server = TestServer::start(with_redis(settings(&db), &redis.url()));
    let conn = rusqlite::Connection::open(&db).expect("the test's own connection");
    // GET only: with a cache, /healthz names Redis too, which the model (no cache) does not.
    let probes: Vec<_> = edge_probes().into_iter().filter(|(m, t)| *m == "GET" && !t.starts_with("/healthz")).collect();
    // The first pass fills the cache (the write is in the background: give it a moment), the second reads it.
    assert_agrees(server.addr, Some(&conn), &probes);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_agrees(server.addr, Some(&conn), &probes);
}

/// A few answers spelled out, independent of the model too.
#[test]
fn hand_written_answers() {
    let dir = tempfile::tempdir().expect("dir");
    let server = TestServer::start(settings(&edge_db(dir.path())));
    let trend = |title: &str, desc: &str, trending: bool| {
        format!(
            r#"{{"id":"trend","channel":"c","title":"{title}","description":"{desc}","duration":"0:59","views":500001,"trending":{trending}}}"#
        )
    };
    for (query, zh) in [
        ("region=zh-TW", true),
        ("region=zh%2DTW", true),
        ("regio%6E=zh-TW", true),
        ("region=zh-tw", false),
        ("", false),
    ] {
        let body = if zh { trend("中文", "描述", true) } else { trend("t", "d", query.is_empty()) };
        assert_json(&server.get(&format!("/v1/metadata/trend?{query}")), 200, &body, query);
    }
    let row = |id: &str, title: &str, desc: &str, duration: &str, views: &str| {
        let trending = views.parse::<i64>().is_ok_and(|v| v > 500_000); // each row here has the region asked for (en when none)
        format!(
            r#"{{"id":{},"channel":"c","title":{title},"description":{desc},"duration":"{duration}","views":{views},"trending":{trending}}}"#,
            serde_json::Value::from(id)
        )
    };
    for (target, body) in [
        // The last duplicate key wins, as JSON.parse does (a title of 7 is not a string: null).
        ("/v1/metadata/dup", row("dup", r#""b""#, "null", "0:01", "1")),
        ("/v1/metadata/dup-field", row("dup-field", "null", r#""y""#, "0:01", "1")),
        // `constructor` is a plain key of the stored object; `toString` is no key at all (en).
        ("/v1/metadata/proto?region=constructor", row("proto", r#""c""#, "null", "0:01", "1")),
        ("/v1/metadata/proto?region=toString", row("proto", r#""e""#, "null", "0:01", "1")),
        // ko is an array 300 deep: skipped, and no title.
        ("/v1/metadata/deep?region=ko", row("deep", "null", "null", "0:01", "1")),
        ("/v1/metadata/deep", row("deep", r#""deep""#, "null", "0:01", "1")),
        ("/v1/metadata/dbig", row("dbig", r#""T en""#, r#""D en""#, "277777777:46:40", "4503599627370496")),
        ("/v1/metadata/dneg", row("dneg", r#""T en""#, r#""D en""#, "0:00", "-7")),
        (
            &format!("/v1/metadata/{}?region=ja", enc("vidé😀")),
            row("vidé😀", r#""タイトル""#, r#""説明""#, "0:01", "1"),
        ),
        // Lone surrogates, as JSON.stringify writes them (ES2019): kept, escaped in lower case.
        ("/v1/metadata/surrogate", row("surrogate", r#""x\ud800y""#, r#""😀""#, "0:01", "1")),
        ("/v1/metadata/surrogate2?region=fr", row("surrogate2", "null", "null", "0:01", "1")),
        ("/v1/metadata/surrogate2", row("surrogate2", r#""\udfff\t\"éé😀\ud83d""#, "null", "0:01", "1")),
    ] {
        assert_json(&server.get(target), 200, &body, target);
    }
    assert_json(
        &server.get("/v1/metadata/proto?region=__proto__"),
        400,
        BAD_REGION,
        "an underscore is no language tag",
    );
    // Where metadata-rs is stricter than the JavaScript peers: REAL views.
    assert_json(&server.get("/v1/metadata/views-real"), 500, MALFORMED_STORED, "views-real");
    assert_eq!(server.get("/v1/metadata/trend").status, 200, "a malformed row is not an outage");
}
