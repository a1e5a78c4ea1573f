//! scribe-rs answers the same over HTTP/2 (h2c by prior knowledge, on the port that serves HTTP/1.1) as over
//! HTTP/1.1, against real Postgres and Redis. Reads of one state (a note, the list and its filters, version
//! history, absent rows and tables, /healthz) and refused requests that write nothing (400s, 404s, 413) go
//! through `testkit::h2::same_over_h2`. Writes change the state, so the same request cannot be sent twice and
//! answered the same: each write is made twice with the same input, once per protocol, on two notes, and the
//! answers compared with the notes' ids normalised ([`assert_alike`]).
//!
//! scribe's tests have no TLS setup, so ALPN h2 is left to crates/serve/tests/http2.rs.

mod common;

use common::{JsonRes, Response, Stack, T0_OUT, enc, record, record_at, single};
use serde_json::json;
use testkit::h2::{Req, same_over_h2, send};

/// Every body goes with the Content-Type testkit's HTTP/1.1 client adds on its own, so both protocols carry
/// the same request.
const JSON: &[(&str, &str)] = &[("content-type", "application/json")];

fn with_body<'a>(method: &'a str, target: &'a str, body: &'a [u8]) -> Req<'a> {
    Req { method, target, headers: JSON, body: Some(body) }
}

fn req<'a>(method: &'a str, target: &'a str) -> Req<'a> {
    Req { method, target, headers: &[], body: None }
}

/// A request and the status HTTP/1.1 answers it with (as the crate's other tests establish).
type Case<'a> = (Req<'a>, u16);

/// Checks each status over HTTP/1.1 first (so a wrong fixture fails as such), then compares both protocols.
/// Only for requests that leave the state as it was: same_over_h2 sends each one twice.
fn check(s: &Stack, cases: &[Case<'_>]) {
    for (r, status) in cases {
        let res = testkit::http::request(s.addr(), r.method, r.target, r.headers, r.body);
        assert_eq!(res.status, *status, "{} {} over HTTP/1.1: {:?}", r.method, r.target, res.text());
    }
    let requests: Vec<Req<'_>> = cases.iter().map(|(r, _)| *r).collect();
    same_over_h2(s.addr(), &requests, &[])
        .unwrap_or_else(|differences| panic!("HTTP/2 answers differ from HTTP/1.1:\n{differences}"));
}

/// Three notes (created_by 1/2/2, owners a/b/a), the first updated once, and a second component.
fn seeded(db: &str) -> Stack {
    let s = Stack::start(db);
    s.create("notes", &record(json!({"title": "one", "ids": [1, 2], "owner": {"name": "a"}}), 1));
    s.create("notes", &record(json!({"title": "two — é 🎉", "ids": [3], "owner": {"name": "b"}}), 2));
    s.create("notes", &record(json!({"title": "three \"q\"", "ids": [3, 4], "owner": {"name": "a"}}), 2));
    let edit =
        record_at(json!({"title": "one, edited", "ids": [1]}), 5, "2026-11-29T20:00:00Z", "2026-11-30T08:30:00Z");
    s.put("/notes/1", &edit).ok();
    s.create("notes/drafts", &record(json!({"title": "draft"}), 4));
    s
}

#[test]
fn reads_answer_the_same_over_http2() {
    let s = seeded("t_h2_reads");
    let filter = format!("/notes/all?filter={}", enc(r#"{"created_by":[2]}"#));
    let filter2 = format!("/notes/all?filter2={}", enc(r#"{"data.ids":["contains",[3]]}"#));
    let body_filter = json!({"filter": {"created_by": [2]}}).to_string();
    let cases = [
        (req("GET", "/healthz"), 200),
        (req("GET", "/notes/1"), 200),
        (req("GET", "/notes/2"), 200),
        (req("GET", "/notes/all"), 200),
        (req("GET", &filter), 200),
        (req("GET", "/notes/all?filter[created_by]=2&filter[id]=3"), 200),
        (req("GET", "/notes/all?filter[data.owner.name]=a"), 200),
        (req("GET", &filter2), 200),
        (with_body("POST", "/notes/all", body_filter.as_bytes()), 200),
        (req("GET", "/notes/1/history"), 200),
        (req("GET", "/notes/2/history"), 200),
        (req("GET", "/notes/drafts/1"), 200),
        (req("GET", "/notes/drafts/all"), 200),
        // Absent rows and tables are `[]`.
        (req("GET", "/notes/999"), 200),
        (req("GET", "/notes/99/history"), 200),
        (req("GET", "/nosuchtable/1"), 200),
        (req("GET", "/nosuchtable/all"), 200),
        // HEAD, which scribe-rs routes nowhere: a 404's headers and no body over both (serve drops the body over
        // HTTP/2).
        (req("HEAD", "/notes/1"), 404),
        // An empty 200: content-length 0 over both (serve sets it over HTTP/2, as hyper's HTTP/1.1 does).
        (req("GET", "/"), 200),
    ];
    check(&s, &cases);
}

#[test]
fn refusals_answer_the_same_over_http2() {
    let s = Stack::with_args("t_h2_refusals", &["--payload-limit", "1kb"]);
    s.create("notes", &record(json!({"title": "keep"}), 1));
    let bad_title = record(json!({"title": 42}), 1).to_string();
    let mut missing_by = record(json!({"title": "t"}), 1);
    missing_by.as_object_mut().expect("an object").remove("created_by");
    let missing_by = missing_by.to_string();
    let valid = record(json!({"title": "valid"}), 1).to_string();
    let too_large = record(json!({"title": "x".repeat(2000)}), 1).to_string();
    let bad_filter = format!("/notes/all?filter={}", enc("{not json"));
    let cases = [
        // Validation: schema violations, bodies that are not JSON or not records, no body at all; nothing is
        // written, so the state the second protocol sees is the first's.
        (with_body("POST", "/notes", bad_title.as_bytes()), 400),
        (with_body("PUT", "/notes/1", bad_title.as_bytes()), 400),
        (with_body("POST", "/notes", missing_by.as_bytes()), 400),
        (with_body("POST", "/notes", b"not json"), 400),
        (with_body("POST", "/notes", b"{\"data\":{}} trailing"), 400),
        (with_body("POST", "/notes", b"[]"), 400),
        (req("POST", "/notes"), 400),
        // Names and ids that are not identifiers, and queries that cannot be run.
        (with_body("POST", "/no-tes", valid.as_bytes()), 400),
        (req("GET", "/notes;DROP/1"), 400),
        (req("GET", "/notes/abc"), 400),
        (req("GET", "/notes/2147483648"), 400),
        (req("DELETE", "/notes/99999999999"), 400),
        (req("GET", &bad_filter), 400),
        (req("GET", "/notes/1?parents=parent&children=parent"), 400),
        // 404: an absent id to update, and no route.
        (with_body("PUT", "/notes/999", valid.as_bytes()), 404),
        (req("PATCH", "/notes/1"), 404),
        (req("GET", "/a/b/c/d/e"), 404),
        (with_body("POST", "/a/b/c/d", b"{}"), 404),
        // 413: over --payload-limit.
        (with_body("POST", "/notes", too_large.as_bytes()), 413),
        (with_body("PUT", "/notes/1", too_large.as_bytes()), 413),
    ];
    check(&s, &cases);
    assert_eq!(s.psql("SELECT count(*) FROM notes"), "1", "no refused request wrote anything");
}

/// The one answer to `request` over HTTP/2.
fn over_h2(s: &Stack, request: Req<'_>) -> Response {
    let mut exchange =
        send(s.addr(), &[request]).unwrap_or_else(|e| panic!("{} {} over HTTP/2: {e}", request.method, request.target));
    exchange.responses.remove(0)
}

/// The one answer to `request` over HTTP/1.1.
fn over_h1(s: &Stack, request: Req<'_>) -> Response {
    testkit::http::request(s.addr(), request.method, request.target, request.headers, request.body)
}

/// same_over_h2's rule (testkit::h2::differences) for two writes with the same input on two notes, `h1_id`
/// written over HTTP/1.1 and `h2_id` over HTTP/2, once each note's `"id":N` in the body reads `"id":ID`. The ids
/// have the same number of digits, so even Content-Length must match.
fn assert_alike(what: &str, h1: &Response, h1_id: i64, h2: &Response, h2_id: i64) {
    let normalised = |res: &Response, id: i64| Response {
        body: res.text().replace(&format!("{{\"id\":{id},"), "{\"id\":ID,").into_bytes(),
        ..res.clone()
    };
    let found = testkit::h2::differences(what, &normalised(h1, h1_id), &normalised(h2, h2_id), &[]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn writes_answer_alike_over_http2() {
    let s = Stack::start("t_h2_writes");
    // Create: the table does not exist yet, so HTTP/1.1's POST also creates it; HTTP/2's finds it. Then one
    // note each: 1 over HTTP/1.1, 2 over HTTP/2.
    let created = record(json!({"title": "first — é 🎉", "tags": ["a", "b"], "meta": {"n": 1}}), 2).to_string();
    let create = with_body("POST", "/notes", created.as_bytes());
    let (h1, h2) = (over_h1(&s, create), over_h2(&s, create));
    assert_eq!(single(&h1.ok())["id"], 1, "{}", h1.text());
    assert_eq!(single(&h2.ok())["id"], 2, "{}", h2.text());
    assert_eq!(single(&h2.json())["date_created"], T0_OUT);
    assert_alike("POST /notes", &h1, 1, &h2, 2);

    // Update each note with the same record, on its own protocol.
    let updated = record_at(
        json!({"title": "first, edited", "tags": ["a"]}),
        5,
        "2026-11-29T20:00:00Z",
        "2026-11-30T08:30:00.5Z",
    )
    .to_string();
    let (h1, h2) = (
        over_h1(&s, with_body("PUT", "/notes/1", updated.as_bytes())),
        over_h2(&s, with_body("PUT", "/notes/2", updated.as_bytes())),
    );
    assert_eq!(single(&h1.ok())["modified_by"], 5);
    assert_alike("PUT /notes/<id>", &h1, 1, &h2, 2);

    // Both notes now have the same two versions: each read over both protocols answers the same, and the two
    // notes' answers are alike.
    check(
        &s,
        &[
            (req("GET", "/notes/1"), 200),
            (req("GET", "/notes/2"), 200),
            (req("GET", "/notes/1/history"), 200),
            (req("GET", "/notes/2/history"), 200),
            (req("GET", "/notes/all"), 200),
        ],
    );
    let history = |id: i64| over_h1(&s, req("GET", &format!("/notes/{id}/history")));
    let (one, two) = (history(1), over_h2(&s, req("GET", "/notes/2/history")));
    assert_eq!(one.ok().as_array().map(Vec::len), Some(2), "{}", one.text());
    assert_alike("GET /notes/<id>/history", &one, 1, &two, 2);

    // Delete each note on its own protocol: `[]` both, and then both are gone alike.
    let (h1, h2) = (over_h1(&s, req("DELETE", "/notes/1")), over_h2(&s, req("DELETE", "/notes/2")));
    assert_eq!(h1.ok(), json!([]));
    assert_alike("DELETE /notes/<id>", &h1, 1, &h2, 2);
    check(
        &s,
        &[
            (req("GET", "/notes/1"), 200),
            (req("GET", "/notes/2"), 200),
            (req("GET", "/notes/all"), 200),
            // Deleting an absent id, truncating an empty table and dropping a dropped one change nothing after
            // the first time: the same request may be sent again and answer the same.
            (req("DELETE", "/notes/1"), 200),
            (req("DELETE", "/notes/all"), 200),
            (req("DELETE", "/notes"), 200),
        ],
    );
    assert!(!s.table_exists("notes"), "the table was dropped");
}
