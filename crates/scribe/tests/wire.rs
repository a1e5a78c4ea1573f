//! The exact bytes the notes workloads rely on, each written out independently of the server: a POSTed note
//! comes back as `[row]` with `data`'s keys in jsonb's order (shorter keys first, then bytewise) and its
//! timestamps in UTC with milliseconds; GET returns the same bytes; absent rows and tables are `[]`; the
//! history row holds the creation patch of that row's JSON (diff-match-patch's text, encodeURI'd with spaces
//! kept); /healthz names both backends.

mod common;

use common::{Stack, request};

/// Seed note 1 as the notes-read workload POSTs it: an offset timestamp, one without milliseconds, a nested
/// object and an array, keys in an order jsonb will change.
const NOTE_1: &str = r#"{"data":{"title":"Note 1","body":"Body of note 1: remember the milk, and the eggs.","tags":["seed","n1"],"meta":{"words":10,"pinned":false,"source":"notes_bench"}},"date_created":"2024-01-02T03:04:05Z","date_modified":"2024-05-06T09:08:07.123+02:00","created_by":2,"modified_by":3}"#;

/// Note 1's row, byte for byte.
const ROW_1: &str = r#"{"id":1,"data":{"body":"Body of note 1: remember the milk, and the eggs.","meta":{"words":10,"pinned":false,"source":"notes_bench"},"tags":["seed","n1"],"title":"Note 1"},"date_created":"2024-01-02T03:04:05.000Z","date_modified":"2024-05-06T07:08:07.123Z","created_by":2,"modified_by":3}"#;

/// Fails the envelope three ways: created_by missing, an extra property, data not an object.
const INVALID: &str =
    r#"{"data":[1],"date_created":"2024-01-01T00:00:00Z","date_modified":"yesterday","modified_by":1,"extra":true}"#;

/// The creation patch for `row` (ASCII text): one hunk deleting all of it, the text encodeURI'd and `%20`
/// turned back into spaces, as diff-match-patch's `patch_toText` writes it.
fn creation_patch(row: &str) -> String {
    let mut encoded = String::new();
    for b in row.bytes() {
        if b.is_ascii_alphanumeric() || b" ;,/?:@&=+$-_.!~*'()#".contains(&b) {
            encoded.push(char::from(b));
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    format!("@@ -1,{} +0,0 @@\n-{encoded}\n", row.len())
}

#[test]
fn notes_answers_byte_for_byte() {
    let s = Stack::start("t_wire");
    let post = |body: &str| request(s.addr(), "POST", "/notes", &[], Some(body.as_bytes()));
    let exact = |res: &common::Response, status: u16, body: &str, what: &str| {
        assert_eq!(res.status, status, "{what}: {:?}", res.text());
        assert_eq!(res.text(), body, "{what}");
        assert!(
            res.header("content-type").is_some_and(|ct| ct.starts_with("application/json")),
            "{what}: content-type"
        );
    };

    exact(&s.get("/healthz"), 200, r#"{"status":"ok","postgres":"ok","redis":"ok"}"#, "healthz");
    s.get("/").expect_status(200, "GET /");
    exact(&s.get("/notes/1"), 200, "[]", "before the table exists");
    exact(&post(NOTE_1), 200, &format!("[{ROW_1}]"), "POST note 1");
    exact(&s.get("/notes/1"), 200, &format!("[{ROW_1}]"), "GET note 1");
    exact(&s.get("/notes/2"), 200, "[]", "absent row");
    exact(&s.get("/nosuchcomponent/1"), 200, "[]", "absent table");
    let invalid = post(INVALID);
    assert_eq!(invalid.status, 400, "invalid envelope: {:?}", invalid.text());
    assert!(invalid.json()["error"].is_string(), "a JSON error: {:?}", invalid.text());
    assert_eq!(s.psql("SELECT count(*) FROM notes"), "1", "the invalid POST wrote nothing");

    let history = s.psql("SELECT patches::text FROM notes_history WHERE foreignkey = 1");
    let patches: Vec<String> = serde_json::from_str(&history).expect("patches are a JSON array of strings");
    assert_eq!(patches, [creation_patch(ROW_1)], "the history row holds the creation patch");
}

#[test]
fn the_patch_writer_of_this_test_is_right() {
    // encodeURI keeps its reserved and unreserved sets; %20 becomes a space again.
    assert_eq!(creation_patch(r#"{"a":"b c"}"#), "@@ -1,11 +0,0 @@\n-%7B%22a%22:%22b c%22%7D\n");
}
