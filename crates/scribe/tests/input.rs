//! Hostile and malformed input: component names and ids that are not identifiers, bodies that are not JSON or
//! not records, bodies that are too large or too deep, and the raw SQL route's token.

mod common;

use std::time::Duration;

use common::{JsonRes, Stack, ids, record};
use serde_json::{Value, json};

/// Every answer to a bad request is a 4xx JSON `{"error": …}`.
fn assert_client_error(res: &common::Response, status: u16, what: &str) -> Value {
    res.expect_status(status, what);
    let body = res.json();
    assert!(body["error"].is_string(), "{what}: {body}");
    body
}

/// A valid envelope around `data` given as raw JSON text (which may be invalid or extreme).
fn envelope_with_raw_data(data: &str) -> String {
    record(json!({}), 1).to_string().replacen(r#""data":{}"#, &format!(r#""data":{data}"#), 1)
}

#[test]
fn component_names_that_are_not_identifiers_are_400() {
    let s = Stack::start("t_bad_names");
    s.create("notes", &record(json!({"title": "keep"}), 1));
    s.create("x", &record(json!({"title": "keep too"}), 1));
    let tables = s.table_count();
    let long = "a".repeat(100);
    let names = [
        "notes;DROP%20TABLE%20x",
        "notes;DROP",
        "x%22;DROP%20TABLE%20notes;--",
        "no%20tes",
        "1abc",
        "no-tes",
        "n%C3%B6tes",
        "notes%00",
        &long,
    ];
    let body = record(json!({"title": "t"}), 1);
    for name in names {
        assert_client_error(&s.post(&format!("/{name}"), &body), 400, &format!("POST /{name}"));
        assert_client_error(&s.get(&format!("/{name}/1")), 400, &format!("GET /{name}/1"));
        assert_client_error(&s.get(&format!("/{name}/all")), 400, &format!("GET /{name}/all"));
        assert_client_error(&s.put(&format!("/{name}/1"), &body), 400, &format!("PUT /{name}/1"));
        assert_client_error(&s.delete(&format!("/{name}/1")), 400, &format!("DELETE /{name}/1"));
        assert_client_error(&s.delete(&format!("/{name}/all")), 400, &format!("DELETE /{name}/all"));
        assert_client_error(&s.delete(&format!("/{name}")), 400, &format!("DELETE /{name}"));
        assert_client_error(&s.post(&format!("/notes/{name}"), &body), 400, &format!("POST /notes/{name}"));
        assert_client_error(&s.delete(&format!("/notes/{name}")), 400, &format!("DELETE /notes/{name}"));
        assert_client_error(&s.get(&format!("/{name}/1/history")), 400, &format!("GET /{name}/1/history"));
    }
    assert_eq!(s.table_count(), tables, "no table created or dropped");
    assert_eq!(ids(&s.get("/notes/all").ok()), [1]);
    assert_eq!(ids(&s.get("/x/all").ok()), [1]);
}

#[test]
fn ids_that_are_not_int4_are_400() {
    let s = Stack::start("t_bad_ids");
    s.create("notes", &record(json!({"title": "keep"}), 1));
    let body = record(json!({"title": "t"}), 1);
    for id in ["1;DROP", "1%3BDROP%20TABLE%20notes", "abc", "99999999999", "2147483648", "1.5", "0x1", "%201"] {
        assert_client_error(&s.get(&format!("/notes/{id}")), 400, &format!("GET /notes/{id}"));
        assert_client_error(&s.put(&format!("/notes/{id}"), &body), 400, &format!("PUT /notes/{id}"));
        assert_client_error(&s.get(&format!("/notes/{id}/history")), 400, &format!("GET /notes/{id}/history"));
        assert_client_error(&s.get(&format!("/notes/drafts/{id}")), 400, &format!("GET /notes/drafts/{id}"));
    }
    assert_client_error(&s.delete("/notes/99999999999"), 400, "DELETE of an id past int4");
    assert_client_error(&s.delete("/notes/1;DROP"), 400, "DELETE /notes/1;DROP");
    assert_eq!(s.get("/notes/2147483647").ok(), json!([]), "the largest int4 is an id");
    assert_eq!(s.get("/notes/-1").ok(), json!([]));
    assert_eq!(ids(&s.get("/notes/all").ok()), [1], "nothing was harmed");
    assert_eq!(s.psql("SELECT data ->> 'title' FROM notes"), "keep");
}

#[test]
fn bodies_that_are_not_json_are_400() {
    let s = Stack::start("t_bad_json");
    s.create("notes", &record(json!({"title": "keep"}), 1));
    let lone_surrogate = envelope_with_raw_data(r#"{"title":"\ud800"}"#);
    let bodies: [&[u8]; 7] = [
        b"{\"data\":",
        b"not json",
        b"{\"data\":{}} trailing",
        b"\xff\xfe\x00",
        lone_surrogate.as_bytes(),
        b"{'data': {}}",
        b"[1,2,",
    ];
    for body in bodies {
        let what = format!("body {:?}", String::from_utf8_lossy(body));
        assert_client_error(&common::request(s.addr(), "POST", "/notes", &[], Some(body)), 400, &what);
        assert_client_error(&common::request(s.addr(), "PUT", "/notes/1", &[], Some(body)), 400, &what);
        assert_client_error(&common::request(s.addr(), "POST", "/notes/all", &[], Some(body)), 400, &what);
    }
    assert_client_error(&common::request(s.addr(), "POST", "/notes", &[], None), 400, "no body");
    assert_client_error(&common::request(s.addr(), "PUT", "/notes/1", &[], Some(b"  \n")), 400, "blank body");
    assert_eq!(s.psql("SELECT count(*) FROM notes"), "1");
    assert_eq!(s.psql("SELECT data ->> 'title' FROM notes"), "keep");
}

/// Records that break the envelope or notes.schema.json: 400 with `errors`, one message per violation.
#[test]
fn schema_violations_are_400_with_messages() {
    let s = Stack::start("t_schema");
    let good = record(json!({"title": "ok"}), 1);
    let with = |key: &str, value: Value| {
        let mut body = good.clone();
        body[key] = value;
        body
    };
    let without = |key: &str| {
        let mut body = good.clone();
        body.as_object_mut().expect("an object").remove(key);
        body
    };
    let cases = [
        (without("created_by"), "created_by", "missing created_by"),
        (without("data"), "data", "missing data"),
        (with("extra", json!(1)), "extra", "an extra top-level field"),
        (with("data", json!("text")), "/data", "data not an object"),
        (with("data", json!([1])), "/data", "data an array"),
        (with("created_by", json!("2")), "/created_by", "created_by a string"),
        (with("date_created", json!("yesterday")), "/date_created", "date_created not a date-time"),
        (with("date_modified", json!("2026-11-29T20:00:00")), "/date_modified", "a date-time without an offset"),
        (with("data", json!({"title": 42})), "/data/title", "notes.schema.json: title must be a string"),
        (with("data", json!({"ids": ["x"]})), "/data/ids/0", "notes.schema.json: ids are integers"),
        (with("data", json!({"parent": "p"})), "/data/parent", "notes.schema.json: parent is an integer"),
    ];
    for (body, mention, what) in &cases {
        let res = s.post("/notes", body);
        let answer = assert_client_error(&res, 400, what);
        let errors = answer["errors"].as_array().unwrap_or_else(|| panic!("{what}: no errors list in {answer}"));
        assert!(!errors.is_empty() && errors.iter().all(Value::is_string), "{what}: {answer}");
        assert!(errors.iter().any(|e| e.as_str().is_some_and(|e| e.contains(mention))), "{what}: {answer}");
        s.put("/notes/1", body).expect_status(400, &format!("PUT, {what}"));
    }
    let two = json!({"data": {"title": 1, "tags": "t"}, "date_created": "x", "date_modified": "2026-11-29T20:00:00Z",
                     "created_by": 1, "modified_by": 1});
    let answer = s.post("/notes", &two).json();
    assert!(answer["errors"].as_array().is_some_and(|e| !e.is_empty()), "{answer}");
    for not_a_record in [json!(null), json!([]), json!("record"), json!(7)] {
        assert_client_error(&s.post("/notes", &not_a_record), 400, &format!("body {not_a_record}"));
    }
    // Values the schema accepts but a column cannot hold.
    let huge = with("created_by", json!(1_i64 << 40));
    assert_client_error(&s.post("/notes", &huge), 400, "created_by past int4");
    assert!(!s.table_exists("notes") || s.psql("SELECT count(*) FROM notes") == "0", "nothing was written");
    // Components without a schema of their own still get the envelope.
    assert_client_error(&s.post("/drafts", &without("modified_by")), 400, "envelope for any component");
    assert_eq!(s.create("drafts", &with("data", json!({"title": 42})))["data"]["title"], 42, "no data schema");
}

/// A NUL character is valid JSON but jsonb cannot store it: the client's mistake, so a 400, not a 500.
#[test]
fn nul_in_data_is_400() {
    let s = Stack::start("t_nul");
    let res = s.post("/notes", &record(json!({"title": "a\u{0}b"}), 1));
    assert_client_error(&res, 400, "NUL in a string");
    s.create("notes", &record(json!({"title": "ok"}), 1));
    let res = s.put("/notes/1", &record(json!({"title": "a\u{0}b"}), 1));
    assert_client_error(&res, 400, "NUL in a string, PUT");
}

#[test]
fn bodies_over_the_payload_limit_are_413() {
    let s = Stack::with_args("t_payload", &["--payload-limit", "1kb"]);
    let fits = record(json!({"title": "x".repeat(800)}), 1);
    assert!(fits.to_string().len() < 1024);
    s.create("notes", &fits);
    let big = record(json!({"title": "x".repeat(2000)}), 1);
    assert_client_error(&s.post("/notes", &big), 413, "Content-Length over the limit");
    assert_client_error(&s.put("/notes/1", &big), 413, "PUT over the limit");
    assert_client_error(&s.post("/notes/all", &json!({"filter": {"id": vec![1; 1000]}})), 413, "/all over the limit");

    // Chunked: no Content-Length, so the limit applies while reading.
    let body = big.to_string();
    let mut raw = b"POST /notes HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/json\r\n\
                    Transfer-Encoding: chunked\r\n\r\n"
        .to_vec();
    for chunk in body.as_bytes().chunks(300) {
        raw.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        raw.extend_from_slice(chunk);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let res = common::send_raw(s.addr(), &raw).expect("a response to the chunked body");
    assert_client_error(&res, 413, "chunked body over the limit");

    assert_eq!(s.psql("SELECT count(*) FROM notes"), "1", "nothing over the limit was written");
    s.get("/").expect_status(200, "still serving");
    s.create("notes", &fits);
}

/// serde_json's depth limit turns deeply nested JSON into a 400 instead of a stack overflow.
#[test]
fn deeply_nested_json_is_400_and_the_server_survives() {
    let s = Stack::start("t_deep");
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let body = deep(10_000);
    assert_client_error(&common::request(s.addr(), "POST", "/notes", &[], Some(body.as_bytes())), 400, "10000 deep");
    let shallow = envelope_with_raw_data(&format!(r#"{{"x":{}}}"#, deep(3)));
    let res = common::request(s.addr(), "POST", "/drafts", &[], Some(shallow.as_bytes()));
    assert_eq!(res.ok()[0]["data"], json!({"x": [[[]]]}), "the same envelope, shallow, is fine");
    let nested = envelope_with_raw_data(&format!(r#"{{"x":{}}}"#, deep(10_000)));
    let res = common::request(s.addr(), "POST", "/notes", &[], Some(nested.as_bytes()));
    assert_client_error(&res, 400, "10000 deep inside data");
    let res = common::request(
        s.addr(),
        "POST",
        "/notes/all",
        &[],
        Some(format!(r#"{{"filter":{}}}"#, deep(10_000)).as_bytes()),
    );
    assert_client_error(&res, 400, "10000 deep filter in a body");
    let res = common::request(s.addr(), "PUT", "/notes/1", &[], Some(body.as_bytes()));
    assert_client_error(&res, 400, "10000 deep PUT");
    let query = common::enc(&deep(2_000));
    assert_client_error(&s.get(&format!("/notes/all?filter={query}")), 400, "2000 deep filter in the query");
    assert_client_error(&s.get(&format!("/notes/all?filter2={query}")), 400, "2000 deep filter2 in the query");
    let res = s.get(&format!("/notes/all?timeMachine={query}"));
    assert!(res.status == 200 || res.status == 400, "deep timeMachine: {} {}", res.status, res.text());

    s.get("/").expect_status(200, "still serving");
    // Moderately nested data is fine and comes back as written.
    let mut data = json!("leaf");
    for _ in 0..60 {
        data = json!({ "d": data });
    }
    let row = s.create("notes", &record(data.clone(), 1));
    assert_eq!(row["data"], data);
    assert_eq!(common::single(&s.get("/notes/1").ok())["data"], data);
    s.put("/notes/1", &record(json!({"title": "flat"}), 1)).ok();
    let history = s.get("/notes/1/history").ok();
    assert_eq!(history[1]["data"], data, "history rebuilds the nested version");
}

#[test]
fn raw_sql_is_off_by_default() {
    let s = Stack::start("t_sql_off");
    let res = common::request(
        s.addr(),
        "POST",
        "/sql",
        &[("Authorization", "Bearer anything-at-all-long-enough")],
        Some(br#"{"query":"SELECT 1"}"#),
    );
    assert_client_error(&res, 404, "POST /sql without a configured token");
}

#[test]
fn raw_sql_needs_the_token() {
    const TOKEN: &str = "0123456789abcdef-token";
    let s = Stack::with_args("t_sql_on", &["--sql-token", TOKEN]);
    s.create("notes", &record(json!({"title": "hello"}), 1));
    let sql = |headers: &[(&str, &str)], body: &[u8]| common::request(s.addr(), "POST", "/sql", headers, Some(body));
    let query = br#"{"query":"SELECT id, data ->> 'title' AS title FROM notes"}"#;
    let bearer = format!("Bearer {TOKEN}");
    let longer = format!("Bearer {TOKEN}x");
    let shorter = format!("Bearer {}", &TOKEN[..TOKEN.len() - 1]);
    let basic = format!("Basic {TOKEN}");
    let lower = format!("bearer {TOKEN}");
    for (headers, what) in [
        (vec![], "no Authorization"),
        (vec![("Authorization", "Bearer wrong-token-wrong-token")], "a wrong token"),
        (vec![("Authorization", longer.as_str())], "the token with a suffix"),
        (vec![("Authorization", shorter.as_str())], "a prefix of the token"),
        (vec![("Authorization", basic.as_str())], "not a Bearer token"),
        (vec![("Authorization", lower.as_str())], "lower-case bearer"),
        (vec![("Authorization", TOKEN)], "no scheme"),
    ] {
        assert_client_error(&sql(&headers, query), 401, what);
    }
    let rows = sql(&[("Authorization", bearer.as_str())], query).ok();
    assert_eq!(rows, json!([{"id": "1", "title": "hello"}]));
    assert_client_error(&sql(&[("Authorization", bearer.as_str())], b"{}"), 400, "no query property");
    assert_client_error(&sql(&[("Authorization", bearer.as_str())], br#"{"query":"SELEC nonsense"}"#), 400, "bad SQL");
    assert_client_error(&sql(&[("Authorization", bearer.as_str())], b"{not json"), 400, "not JSON");
    // The 401 does not depend on the body.
    assert_client_error(&sql(&[], b"{not json"), 401, "no token, bad body");
    std::thread::sleep(Duration::from_millis(10));
    s.get("/").expect_status(200, "still serving");
}
