//! Component CRUD over HTTP against real Postgres and Redis: shapes, ids, subcomponents, dropping and recreating
//! tables, version history, transactions, and concurrent writers.

mod common;

use std::sync::{Arc, Barrier};

use common::{JsonRes, Stack, T0_OUT, ids, keys, record, record_at, single};
use serde_json::{Value, json};

const ROW_KEYS: [&str; 6] = ["id", "data", "date_created", "date_modified", "created_by", "modified_by"];

#[test]
fn create_read_update_delete() {
    let s = Stack::start("t_crud");
    let root = s.get("/");
    root.expect_status(200, "GET /");

    let created = s.post("/notes", &record(json!({"title": "first", "tags": ["a"]}), 2)).ok();
    let row = single(&created);
    assert_eq!(keys(row), ROW_KEYS, "columns in table order: {row}");
    assert_eq!(
        *row,
        json!({"id": 1, "data": {"tags": ["a"], "title": "first"}, "date_created": T0_OUT, "date_modified": T0_OUT,
               "created_by": 2, "modified_by": 2})
    );

    let fetched = s.get("/notes/1").ok();
    assert_eq!(fetched, created, "GET by id returns what POST returned");
    assert_eq!(keys(single(&fetched)), ROW_KEYS);
    assert_eq!(s.get("/notes/999").ok(), json!([]), "absent id");
    assert_eq!(s.get("/nosuchtable/1").ok(), json!([]), "absent table");
    assert_eq!(s.get("/nosuchtable/all").ok(), json!([]), "absent table, /all");
    assert_eq!(s.get("/nosuchtable/1/history").ok(), json!([]), "absent table, history");

    let second = s.create("notes", &record(json!({"title": "second"}), 3));
    assert_eq!(second["id"], 2);

    let updated = s
        .put(
            "/notes/1",
            &record_at(json!({"title": "first, edited"}), 5, "2026-11-29T20:00:00Z", "2026-11-30T08:30:00.5Z"),
        )
        .ok();
    let updated_row = single(&updated);
    assert_eq!(keys(updated_row), ROW_KEYS);
    assert_eq!(updated_row["id"], 1);
    assert_eq!(updated_row["data"], json!({"title": "first, edited"}));
    assert_eq!(updated_row["date_modified"], "2026-11-30T08:30:00.500Z");
    assert_eq!(updated_row["modified_by"], 5);
    assert_eq!(s.get("/notes/1").ok(), updated, "GET sees the update");

    let missing = s.put("/notes/999", &record(json!({"title": "nobody"}), 1));
    missing.expect_status(404, "PUT of an absent id");
    assert!(missing.json()["error"].is_string(), "error body: {}", missing.text());
    assert_eq!(s.psql("SELECT count(*) FROM notes"), "2", "a PUT of an absent id creates nothing");

    assert_eq!(ids(&s.get("/notes/all").ok()), [1, 2], "/all ordered by id");

    assert_eq!(s.delete("/notes/1").ok(), json!([]));
    assert_eq!(s.get("/notes/1").ok(), json!([]));
    assert_eq!(s.psql("SELECT count(*) FROM notes_history WHERE foreignkey = 1"), "0", "history cascades");
    assert_eq!(s.delete("/notes/1").ok(), json!([]), "deleting twice is fine");
    assert_eq!(s.delete("/nosuchtable/1").ok(), json!([]), "deleting from an absent table is fine");
    assert_eq!(ids(&s.get("/notes/all").ok()), [2]);
}

#[test]
fn timestamps_are_utc_with_milliseconds() {
    let s = Stack::start("t_timestamps");
    let row = s.create("notes", &record_at(json!({}), 1, "2026-11-29T21:00:00+01:00", "2026-11-29T20:00:00.123456Z"));
    assert_eq!(row["date_created"], "2026-11-29T20:00:00.000Z");
    assert_eq!(row["date_modified"], "2026-11-29T20:00:00.123Z");
}

#[test]
fn truncate_restarts_ids() {
    let s = Stack::start("t_truncate");
    for _ in 0..3 {
        s.create("notes", &record(json!({"title": "x"}), 1));
    }
    assert_eq!(s.delete("/notes/all").ok(), json!([]));
    assert_eq!(s.get("/notes/all").ok(), json!([]));
    assert_eq!(s.psql("SELECT count(*) FROM notes_history"), "0", "history emptied too");
    assert!(s.table_exists("notes"), "truncate keeps the table");
    let row = s.create("notes", &record(json!({"title": "again"}), 1));
    assert_eq!(row["id"], 1, "ids restart at 1");
    assert_eq!(s.get("/notes/1/history").ok().as_array().map(Vec::len), Some(1));
    assert_eq!(s.delete("/nosuchtable/all").ok(), json!([]), "truncating an absent table is fine");
}

#[test]
fn drop_then_create_recreates_the_table() {
    let s = Stack::start("t_drop_create");
    s.create("notes", &record(json!({"title": "x"}), 1));
    assert_eq!(s.delete("/notes").ok(), json!([]));
    assert!(!s.table_exists("notes"), "DELETE /notes drops the table");
    assert!(!s.table_exists("notes_history"), "and its history table");
    assert_eq!(s.delete("/notes").ok(), json!([]), "dropping twice is fine");
    let row = s.create("notes", &record(json!({"title": "y"}), 1));
    assert_eq!(row["id"], 1, "a fresh table");
    assert!(s.table_exists("notes_history"));
    assert_eq!(s.get("/notes/1/history").ok().as_array().map(Vec::len), Some(1));
    s.put("/notes/1", &record(json!({"title": "z"}), 1)).ok();
    assert_eq!(s.get("/notes/1/history").ok().as_array().map(Vec::len), Some(2));
}

/// Reads of a dropped table answer `[]` like reads of a table that never existed, also on a connection that
/// read the table before it was dropped.
#[test]
fn reads_after_drop_are_empty() {
    let s = Stack::start("t_drop_read");
    s.create("notes", &record(json!({"title": "x"}), 1));
    assert_eq!(ids(&s.get("/notes/1").ok()), [1]);
    assert_eq!(ids(&s.get("/notes/all").ok()), [1]);
    assert_eq!(s.get("/notes/1/history").ok().as_array().map(Vec::len), Some(1));
    assert_eq!(s.delete("/notes").ok(), json!([]));
    assert_eq!(s.get("/notes/1").ok(), json!([]), "GET by id after the drop");
    assert_eq!(s.get("/notes/all").ok(), json!([]), "GET /all after the drop");
    assert_eq!(s.get("/notes/1/history").ok(), json!([]), "history after the drop");
}

/// Two replicas on one database: one drops the component, the other keeps writing to it. store.rs documents
/// `schema_changed` for exactly this ("dropped by another process: forget that it was ensured, so the next
/// request recreates it"); the original ran its DDL on every insert, so its clients never saw a failure here.
#[test]
fn writes_recover_after_another_instance_drops_the_table() {
    let s = Stack::start("t_drop_replica");
    let other = s.second_instance();
    s.create("notes", &record(json!({"title": "one"}), 1));
    s.create("notes", &record(json!({"title": "two"}), 1));
    assert_eq!(other.delete("/notes").ok(), json!([]));
    assert!(!s.table_exists("notes"));
    // One 503 ("retry") is acceptable; a 500, or no success within a few tries, is not.
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let res = s.post("/notes", &record(json!({"title": "three"}), 1));
        statuses.push(res.status);
        if res.status == 200 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(statuses.last(), Some(&200), "statuses: {statuses:?}");
    assert!(statuses.iter().all(|&st| st == 200 || st == 503), "statuses: {statuses:?}");
    assert!(s.table_exists("notes_history"));
}

#[test]
fn subcomponents() {
    let s = Stack::start("t_sub");
    let created = s.post("/notes/drafts", &record(json!({"title": "draft"}), 4)).ok();
    let row = single(&created);
    assert_eq!(row["id"], 1);
    assert_eq!(keys(row), ROW_KEYS);
    assert!(s.table_exists("notes_drafts") && s.table_exists("notes_drafts_history"), "table a_b");
    assert!(!s.table_exists("notes"), "the parent component's table is not touched");

    assert_eq!(s.get("/notes/drafts/1").ok(), created);
    assert_eq!(s.get("/notes/drafts/2").ok(), json!([]));
    assert_eq!(s.get("/notes/drafts/all").ok(), created);
    let history = s.get("/notes/drafts/1/history").ok();
    assert_eq!(history, created, "one version: the current row");

    let updated = s.put("/notes/drafts/1", &record(json!({"title": "draft 2"}), 4)).ok();
    assert_eq!(single(&updated)["data"]["title"], "draft 2");
    let history = s.get("/notes/drafts/1/history").ok();
    assert_eq!(history.as_array().map(Vec::len), Some(2));
    assert_eq!(history[1]["data"]["title"], "draft");
    s.put("/notes/drafts/7", &record(json!({}), 4)).expect_status(404, "PUT of an absent sub id");

    s.create("notes/drafts", &record(json!({"title": "other"}), 4));
    assert_eq!(s.delete("/notes/drafts/1").ok(), json!([]));
    assert_eq!(s.get("/notes/drafts/1").ok(), json!([]));
    assert_eq!(ids(&s.get("/notes/drafts/all").ok()), [2]);

    assert_eq!(s.delete("/notes/drafts/all").ok(), json!([]));
    assert_eq!(s.get("/notes/drafts/all").ok(), json!([]));
    assert_eq!(s.create("notes/drafts", &record(json!({}), 4))["id"], 1, "truncate restarts ids");

    assert_eq!(s.delete("/notes/drafts").ok(), json!([]));
    assert!(!s.table_exists("notes_drafts") && !s.table_exists("notes_drafts_history"), "dropped");
}

/// Versions as the original rebuilds them: the current row, then each older one, newest first.
#[test]
fn history_rebuilds_every_version() {
    let s = Stack::start("t_history");
    let writes = [
        record_at(json!({"title": "v1", "tags": ["x"]}), 1, "2026-11-29T20:00:00Z", "2026-11-29T20:00:00Z"),
        record_at(json!({"title": "v2", "body": "héllo 🎉 wörld"}), 2, "2026-11-29T20:00:00Z", "2026-11-29T21:00:00Z"),
        record_at(
            json!({"title": "v3", "ids": [1, 2, 3], "parent": null}),
            3,
            "2026-11-29T20:00:00Z",
            "2026-11-29T22:00:00Z",
        ),
        record_at(
            json!({"title": "v4 — \"quoted\" \\ and\nnewline"}),
            4,
            "2026-11-29T20:00:00Z",
            "2026-11-29T23:00:00Z",
        ),
    ];
    let mut rows = vec![s.create("notes", &writes[0])];
    s.create("notes", &record(json!({"title": "bystander"}), 9));
    for body in &writes[1..] {
        rows.push(single(&s.put("/notes/1", body).ok()).clone());
    }
    let history = s.get("/notes/1/history").ok();
    let versions = history.as_array().unwrap_or_else(|| panic!("history is an array: {history}"));
    assert_eq!(versions.len(), 4, "current + 3 older versions: {history}");
    for (version, (row, body)) in versions.iter().zip(rows.iter().zip(&writes).rev()) {
        assert_eq!(version, row, "each version is the row as it was written");
        assert_eq!(version["data"], body["data"]);
        assert_eq!(version["modified_by"], body["modified_by"]);
    }
    assert_eq!(s.psql("SELECT count(*) FROM notes_history WHERE foreignkey = 1"), "1", "one history row per record");
    assert_eq!(s.psql("SELECT json_array_length(patches) FROM notes_history WHERE foreignkey = 1"), "4");
    let patches = s.psql(
        "SELECT json_typeof(patches -> 0) || ',' || json_typeof(patches -> 3) FROM notes_history WHERE foreignkey = 1",
    );
    assert_eq!(patches, "string,string", "patch texts");
    assert_eq!(s.get("/notes/2/history").ok().as_array().map(Vec::len), Some(1), "the other record is untouched");
    assert_eq!(s.get("/notes/99/history").ok(), json!([]));
}

/// A record and its history entry commit together: when the history write fails, the record is not written.
#[test]
fn create_and_update_commit_with_their_history() {
    let s = Stack::start("t_atomic");
    s.create("notes", &record(json!({"title": "before"}), 1));
    // From here on every history write is refused by the database.
    s.psql("ALTER TABLE notes_history ADD CONSTRAINT refuse_all CHECK (foreignkey < 0) NOT VALID");

    let res = s.post("/notes", &record(json!({"title": "lost"}), 1));
    assert!(res.status >= 500, "the write must fail, got {} {}", res.status, res.text());
    assert!(res.json()["error"].is_string());
    assert_eq!(s.psql("SELECT count(*) FROM notes"), "1", "no record without its history");

    let res = s.put("/notes/1", &record(json!({"title": "after"}), 1));
    assert!(res.status >= 500, "the update must fail, got {} {}", res.status, res.text());
    assert_eq!(s.psql("SELECT data ->> 'title' FROM notes WHERE id = 1"), "before", "no update without history");
    assert_eq!(s.psql("SELECT json_array_length(patches) FROM notes_history"), "1");

    s.psql("ALTER TABLE notes_history DROP CONSTRAINT refuse_all");
    s.put("/notes/1", &record(json!({"title": "after"}), 1)).ok();
    let history = s.get("/notes/1/history").ok();
    assert_eq!(history.as_array().map(Vec::len), Some(2), "{history}");
    assert_eq!(history[1]["data"]["title"], "before");
}

/// 16 clients write the first records of a component at the same moment: every write succeeds, one table.
#[test]
fn concurrent_first_writes_create_one_table() {
    let s = Stack::start("t_burst");
    let tables_before = s.table_count();
    let barrier = Arc::new(Barrier::new(16));
    let addr = s.addr();
    let statuses: Vec<(u16, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let barrier = barrier.clone();
                scope.spawn(move || {
                    barrier.wait();
                    let res = common::post(addr, "/burst", &record(json!({"n": i}), i));
                    (res.status, res.text())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("writer thread")).collect()
    });
    for (status, body) in &statuses {
        assert_eq!(*status, 200, "every first write succeeds: {body}");
    }
    assert_eq!(s.psql("SELECT count(*) FROM burst"), "16");
    assert_eq!(s.psql("SELECT count(*) FROM burst_history"), "16");
    assert_eq!(s.table_count(), tables_before + 2, "one table and its history table");
    let all = s.get("/burst/all").ok();
    let mut got = ids(&all);
    got.sort_unstable();
    assert_eq!(got, (1..=16).collect::<Vec<i64>>());
}

/// Two replicas take their first writes to a new component at the same moment: the DDL is serialized across
/// processes (advisory lock), so every write succeeds and there is one table.
#[test]
fn concurrent_first_writes_from_two_instances() {
    let s = Stack::start("t_burst_two");
    let other = s.second_instance();
    let addrs = [s.addr(), other.addr];
    let barrier = Arc::new(Barrier::new(16));
    let statuses: Vec<(u16, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let barrier = barrier.clone();
                let addr = addrs[i % 2];
                scope.spawn(move || {
                    barrier.wait();
                    let res = common::post(addr, "/pair/sub", &record(json!({"n": i}), 1));
                    (res.status, res.text())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("writer thread")).collect()
    });
    for (status, body) in &statuses {
        assert_eq!(*status, 200, "every first write succeeds: {body}");
    }
    assert_eq!(s.psql("SELECT count(*) FROM pair_sub"), "16");
    assert_eq!(s.psql("SELECT count(*) FROM pair_sub_history"), "16");
    assert_eq!(ids(&other.get("/pair/sub/all").ok()).len(), 16);
}

/// Concurrent updates of one record serialize: every update lands in the history, and every version rebuilds.
#[test]
fn concurrent_updates_keep_history_consistent() {
    let s = Stack::start("t_concurrent_updates");
    s.create("notes", &record(json!({"title": "start", "n": 0}), 1));
    let addr = s.addr();
    let barrier = Arc::new(Barrier::new(8));
    std::thread::scope(|scope| {
        for i in 1..=8 {
            let barrier = barrier.clone();
            scope.spawn(move || {
                barrier.wait();
                let res = common::put(addr, "/notes/1", &record(json!({"title": format!("writer {i}"), "n": i}), i));
                assert_eq!(res.status, 200, "update {i}: {}", res.text());
            });
        }
    });
    assert_eq!(s.psql("SELECT json_array_length(patches) FROM notes_history"), "9");
    let history = s.get("/notes/1/history").ok();
    let versions = history.as_array().unwrap_or_else(|| panic!("{history}"));
    assert_eq!(versions.len(), 9, "{history}");
    let mut seen: Vec<i64> = versions.iter().map(|v| v["data"]["n"].as_i64().unwrap_or(-1)).collect();
    assert_eq!(seen.last(), Some(&0), "the oldest version is the created one");
    seen.sort_unstable();
    assert_eq!(seen, (0..=8).collect::<Vec<i64>>(), "each write is one version");
    assert_eq!(versions[0], *single(&s.get("/notes/1").ok()), "newest first");
}

/// Names up to the limit work (with `_history`, 63 bytes: Postgres' identifier limit); one more is a 400.
#[test]
fn component_name_length_limit() {
    let s = Stack::start("t_name_length");
    let longest = "n".repeat(55);
    let row = s.create(&longest, &record(json!({}), 1));
    assert_eq!(row["id"], 1);
    assert!(s.table_exists(&format!("{longest}_history")));
    assert_eq!(ids(&s.get(&format!("/{longest}/1")).ok()), [1]);
    let before = s.table_count();
    s.post(&format!("/{}", "n".repeat(56)), &record(json!({}), 1)).expect_status(400, "56 characters");
    s.post(&format!("/{}/{}", "a".repeat(30), "b".repeat(30)), &record(json!({}), 1))
        .expect_status(400, "a subcomponent whose table name is too long");
    assert_eq!(s.table_count(), before);
}

/// `Notes` and `notes` are one table (unquoted identifiers fold to lower case, as in the original), and it is
/// validated by one schema: records that notes.schema.json refuses must not reach the notes table by another
/// spelling of its name.
#[test]
fn component_case_does_not_bypass_its_schema() {
    let s = Stack::start("t_case");
    let bad = record(json!({"title": 42}), 1);
    s.post("/notes", &bad).expect_status(400, "notes.schema.json: title must be a string");
    let res = s.post("/Notes", &bad);
    let count = if s.table_exists("notes") { s.psql("SELECT count(*) FROM notes") } else { "0".into() };
    assert_eq!(
        res.status,
        400,
        "POST /Notes with an invalid title: {} {}; rows in notes: {count}",
        res.status,
        res.text()
    );
    assert_eq!(count, "0");
}

#[test]
fn unknown_routes_are_404() {
    let s = Stack::start("t_routes");
    for (method, path) in [("PATCH", "/notes/1"), ("GET", "/a/b/c/d/e"), ("PUT", "/notes"), ("POST", "/a/b/c/d")] {
        let res = common::request(s.addr(), method, path, &[], Some(b"{}"));
        res.expect_status(404, &format!("{method} {path}"));
        let body: Value = res.json();
        assert!(body["error"].is_string(), "{body}");
    }
}
