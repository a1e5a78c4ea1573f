//! metadata-rs against the independent model of its contract (contract_model) on the generated dataset: every
//! sample id (present and absent) in every region, with no region, an unknown one and a bad one, by GET and
//! HEAD, and the fixed probes; then a database file that is missing at startup and appears later (503s, then
//! answers once the server's next open attempt is due). Also checks the model itself on answers written out
//! by hand.

mod common;
mod contract_model;

use std::time::Duration;

use common::{Dataset, REGIONS, TestServer, settings};
use contract_model::{Json, assert_agrees, decode_uri_component, search_param, stringify, utf16};

#[test]
fn every_sample_id_answers_as_the_model_says() {
    let data = Dataset::generate(2000, 300, 11);
    let server = TestServer::start(settings(&data.db()));
    let conn = data.open_rw();
    let mut requests = Vec::new();
    for id in data.sample_ids() {
        let path = format!("/v1/metadata/{}", testkit::http::enc(&id));
        for region in REGIONS.iter().chain(&["xx", "", "bad!value"]) {
            requests.push(("GET", format!("{path}?region={region}")));
        }
        requests.push(("GET", path.clone()));
        requests.push(("HEAD", format!("{path}?region=ja")));
    }
    let first = data.sample_ids().into_iter().next().expect("a sample id");
    for (method, target) in [
        ("GET", "/v1/metadata/%E0%A4%A".to_string()),
        ("GET", "/v1/metadata/absent-id-not-in-db?region=en".to_string()),
        ("GET", "/healthz".to_string()),
        ("HEAD", "/healthz".to_string()),
        ("POST", format!("/v1/metadata/{first}")),
        ("GET", "/nope".to_string()),
    ] {
        requests.push((method, target));
    }
    let present =
        requests.iter().filter(|(m, t)| *m == "GET" && contract_model::answer(Some(&conn), m, t).status == 200);
    assert!(present.count() > 1000, "the sample holds present ids");
    assert_agrees(server.addr, Some(&conn), &requests);
}

/// The server retries a failed open at most every 250 ms, on a request: the first request more than 250 ms
/// after the file appeared (complete, by rename) is answered from it.
#[test]
fn a_missing_database_answers_as_unavailable_until_the_file_appears() {
    let data = Dataset::generate(50, 10, 5);
    let dir = tempfile::tempdir().expect("dir");
    let late = dir.path().join("late.db");
    let server = TestServer::start(settings(&late));
    let id = data.sample_ids().into_iter().next().expect("a sample id");
    let requests = [
        ("GET", format!("/v1/metadata/{id}?region=ja")),
        ("GET", "/v1/metadata/x?region=bad!".to_string()), // the region is checked before the database
        ("GET", "/healthz".to_string()),
    ];
    assert_agrees(server.addr, None, &requests);

    let tmp = dir.path().join("late.tmp");
    std::fs::copy(data.db(), &tmp).expect("copy");
    std::fs::rename(&tmp, &late).expect("appears at once, complete");
    std::thread::sleep(Duration::from_millis(400));
    let conn = rusqlite::Connection::open(&late).expect("the test's own connection");
    assert_agrees(server.addr, Some(&conn), &requests);
}

/// The model's own pieces on answers worked out by hand, so a server and a model wrong the same way fail here.
#[test]
fn the_model_agrees_with_hand_worked_answers() {
    assert_eq!(decode_uri_component("a%20b+c%2F").as_deref(), Some("a b+c/"));
    assert_eq!(decode_uri_component("vid%C3%A9%F0%9F%98%80").as_deref(), Some("vidé😀"));
    for bad in ["%E0%A4%A", "%C3", "%ED%A0%80", "%C0%80", "%ZZ", "abc%", "%F4%90%80%80", "%+1", "%FF"] {
        assert_eq!(decode_uri_component(bad), None, "{bad}");
    }
    assert_eq!(search_param("x=1&regio%6E=zh%2DTW&region=ja", "region").as_deref(), Some("zh-TW"));
    assert_eq!(search_param("region=+en%zz", "region").as_deref(), Some(" en%zz"));
    assert_eq!(search_param("region=%E0", "region").as_deref(), Some("\u{fffd}"));
    assert_eq!(search_param("region", "region").as_deref(), Some(""));
    assert_eq!(search_param("&&", "region"), None);

    assert_eq!(stringify(&utf16("q\"\\\n\u{1}\u{7f}\u{2028}é")), "\"q\\\"\\\\\\n\\u0001\u{7f}\u{2028}é\"");
    assert_eq!(stringify(&[0x78, 0xD800, 0x79]), r#""x\ud800y""#);
    for text in [r#"{"a":1e400,"b":-0,"c":[[[]]]}"#, " {} \n", r#""x\ud800""#, "[1,2]", "null"] {
        assert!(Json::parse(text).is_some(), "{text}");
    }
    for text in ["not json", r#"{"a":NaN}"#, "{} x", "{\"a\":\"\t\"}", "01", "1.", "[1,]", r#"{"a" 1}"#, ""] {
        assert_eq!(Json::parse(text), None, "{text}");
    }
    assert_eq!(
        Json::parse(r#"{"k":"\ud83d\ude00"}"#),
        Some(Json::Object(vec![(utf16("k"), Json::String(utf16("😀")))]))
    );
    assert_eq!(contract_model::duration_text(3725), "1:02:05");
    assert_eq!(contract_model::duration_text(-1), "0:00");
}
