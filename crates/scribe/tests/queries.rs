//! List queries and GET-by-id options: filter / filter2 in bracket, JSON and body form, groupBy, timeMachine,
//! parents / children / referenceComponent, and the 400s for queries that cannot be run.

mod common;

use common::{JsonRes, Stack, enc, ids, keys, record, record_at, single};
use serde_json::{Value, json};

/// Three notes: created_by 1/2/2, data.ids [1,2]/[3]/[3,4], data.owner.name a/b/a.
fn seeded(db: &str) -> Stack {
    let s = Stack::start(db);
    s.create("notes", &record(json!({"ids": [1, 2], "owner": {"name": "a"}}), 1));
    s.create("notes", &record(json!({"ids": [3], "owner": {"name": "b"}}), 2));
    s.create("notes", &record(json!({"ids": [3, 4], "owner": {"name": "a"}}), 2));
    s
}

/// GET /notes/all?<query> → the ids of the rows.
fn all_ids(s: &Stack, query: &str) -> Vec<i64> {
    ids(&s.get(&format!("/notes/all?{query}")).ok())
}

#[test]
fn filter_json_and_bracket_forms() {
    let s = seeded("t_filter");
    assert_eq!(all_ids(&s, ""), [1, 2, 3]);
    assert_eq!(all_ids(&s, &format!("filter={}", enc(r#"{"created_by":[2]}"#))), [2, 3], "JSON form");
    assert_eq!(all_ids(&s, &format!("filter={}", enc(r#"{"created_by":2}"#))), [2, 3], "a bare value");
    assert_eq!(all_ids(&s, "filter%5Bcreated_by%5D=2"), [2, 3], "bracket form, encoded brackets");
    assert_eq!(all_ids(&s, "filter[created_by]=2"), [2, 3], "bracket form, raw brackets");
    assert_eq!(all_ids(&s, "filter[created_by]=1&filter[created_by]=2"), [1, 2, 3], "repeated bracket values");
    assert_eq!(all_ids(&s, &format!("filter={}", enc(r#"{"created_by":[1,2]}"#))), [1, 2, 3]);
    assert_eq!(all_ids(&s, "filter[created_by]=7"), Vec::<i64>::new());
    assert_eq!(all_ids(&s, "filter[id]=2"), [2]);
    assert_eq!(all_ids(&s, "filter[created_by]=2&filter[id]=3"), [3], "conditions combine with AND");
    assert_eq!(all_ids(&s, "unknownParameter=1"), [1, 2, 3], "unknown parameters are ignored");
}

#[test]
fn filter_on_json_paths() {
    let s = seeded("t_filter_path");
    assert_eq!(all_ids(&s, "filter[data.owner.name]=a"), [1, 3]);
    assert_eq!(all_ids(&s, &format!("filter={}", enc(r#"{"data.owner.name":["b"]}"#))), [2]);
    assert_eq!(all_ids(&s, &format!("filter={}", enc(r#"{"data.owner.name":["a","b"]}"#))), [1, 2, 3]);
    assert_eq!(all_ids(&s, "filter[data.owner.missing]=a"), Vec::<i64>::new(), "a missing key matches nothing");
    let odd_key = format!("filter={}", enc(r#"{"data.it's \"odd\"; DROP TABLE notes":["x"]}"#));
    assert_eq!(all_ids(&s, &odd_key), Vec::<i64>::new(), "JSON keys are bound, not interpolated");
    assert!(s.table_exists("notes"));
}

#[test]
fn filter2_contains_and_is_one_of() {
    let s = seeded("t_filter2");
    assert_eq!(all_ids(&s, "filter2%5Bdata.ids%5D=contains&filter2%5Bdata.ids%5D=%5B3%5D"), [2, 3], "bracket form");
    assert_eq!(all_ids(&s, "filter2[data.ids]=contains&filter2[data.ids]=[3]"), [2, 3], "raw brackets");
    assert_eq!(all_ids(&s, &format!("filter2={}", enc(r#"{"data.ids":["contains",[3]]}"#))), [2, 3], "JSON form");
    assert_eq!(all_ids(&s, &format!("filter2={}", enc(r#"{"data.ids":["contains",[3,4]]}"#))), [3]);
    assert_eq!(all_ids(&s, &format!("filter2={}", enc(r#"{"data.ids":["contains",[2,3]]}"#))), Vec::<i64>::new());
    assert_eq!(all_ids(&s, &format!("filter2={}", enc(r#"{"id":["is one of",[1,3]]}"#))), [1, 3]);
    assert_eq!(all_ids(&s, "filter2[id]=is%20one%20of&filter2[id]=[1,3]"), [1, 3], "is one of, bracket form");
    assert_eq!(all_ids(&s, &format!("filter2={}", enc(r#"{"data.owner.name":["is one of",["b"]]}"#))), [2]);
    let both = format!("filter[created_by]=2&filter2={}", enc(r#"{"data.ids":["contains",[4]]}"#));
    assert_eq!(all_ids(&s, &both), [3], "filter and filter2 together");
}

#[test]
fn empty_value_lists_match_nothing() {
    let s = seeded("t_filter_empty");
    assert_eq!(s.get(&format!("/notes/all?filter={}", enc(r#"{"created_by":[]}"#))).ok(), json!([]));
    assert_eq!(s.get(&format!("/notes/all?filter2={}", enc(r#"{"id":["is one of",[]]}"#))).ok(), json!([]));
    assert_eq!(s.get(&format!("/notes/all?filter2={}", enc(r#"{"data.ids":["contains",[]]}"#))).ok(), json!([]));
}

#[test]
fn filters_in_a_json_body() {
    let s = seeded("t_filter_body");
    let res = s.post("/notes/all", &json!({"filter": {"created_by": [2]}}));
    assert_eq!(ids(&res.ok()), [2, 3]);
    let res = s.post("/notes/all", &json!({"filter": "{\"created_by\":[1]}"}));
    assert_eq!(ids(&res.ok()), [1], "a filter given as a JSON string");
    let res = s.post("/notes/all", &json!({"filter2": {"data.ids": ["contains", [4]]}}));
    assert_eq!(ids(&res.ok()), [3]);
    let res = s.post("/notes/all", &json!({"filter": {"data.owner.name": ["a"]}, "groupBy": "created_by"}));
    let grouped = res.ok();
    assert_eq!(ids(&grouped["1"]), [1]);
    assert_eq!(ids(&grouped["2"]), [3]);
    let res = common::request(s.addr(), "GET", "/notes/all", &[], Some(br#"{"filter":{"id":[2]}}"#));
    assert_eq!(ids(&res.ok()), [2], "GET /all with a body, as the original's clients may send");
    let res = s.post("/notes/all?filter[id]=1", &json!({"filter": {"id": [2]}}));
    assert_eq!(ids(&res.ok()), [1], "the query string wins over the body");
    assert_eq!(ids(&s.post("/notes/all", &json!({})).ok()), [1, 2, 3]);
    let empty = common::request(s.addr(), "POST", "/notes/all", &[], None);
    assert_eq!(ids(&empty.ok()), [1, 2, 3], "POST /all without a body");
}

#[test]
fn group_by() {
    let s = seeded("t_group_by");
    let grouped = s.get("/notes/all?groupBy=created_by").ok();
    assert_eq!(keys(&grouped), ["1", "2"], "{grouped}");
    assert_eq!(ids(&grouped["1"]), [1]);
    assert_eq!(ids(&grouped["2"]), [2, 3]);
    let grouped = s.get("/notes/all?groupBy=data.owner.name").ok();
    assert_eq!(keys(&grouped), ["a", "b"]);
    assert_eq!(ids(&grouped["a"]), [1, 3]);
    let grouped = s.get("/notes/all?groupBy=created_by&filter[id]=2").ok();
    assert_eq!(keys(&grouped), ["2"]);
    assert_eq!(s.get("/notes/all?groupBy=created_by&filter[id]=99").ok(), json!({}), "no rows, no groups");
}

/// With groupBy the answer is an object of arrays, also when an empty value list means no row can match.
#[test]
fn group_by_with_an_empty_value_list_is_an_object() {
    let s = seeded("t_group_by_empty");
    assert_eq!(s.get("/notes/all?groupBy=created_by&filter[id]=99").ok(), json!({}));
    let empty = s.get(&format!("/notes/all?groupBy=created_by&filter={}", enc(r#"{"id":[]}"#))).ok();
    assert_eq!(empty, json!({}), "an empty value list with groupBy: no rows, no groups, still an object");
}

/// Each record as it was at the timestamp: its latest version whose date_modified is at or before it.
#[test]
fn time_machine() {
    let s = Stack::start("t_time_machine");
    let at = |h: u32| format!("2026-11-29T{h:02}:00:00Z");
    s.create("notes", &record_at(json!({"title": "one v1"}), 1, &at(10), &at(10)));
    s.create("notes", &record_at(json!({"title": "two v1"}), 1, &at(10), &at(10)));
    s.put("/notes/1", &record_at(json!({"title": "one v2"}), 1, &at(10), &at(12))).ok();
    s.put("/notes/2", &record_at(json!({"title": "two v2"}), 1, &at(10), &at(14))).ok();
    s.put("/notes/1", &record_at(json!({"title": "one v3"}), 1, &at(10), &at(16))).ok();
    s.create("notes", &record_at(json!({"title": "three v1"}), 1, &at(15), &at(15)));

    let query = |ts: &str| {
        let tm = json!({"key": "date_modified", "timestamp": ts}).to_string();
        s.get(&format!("/notes/all?timeMachine={}", enc(&tm))).ok()
    };
    let titles = |rows: &Value| -> Vec<Value> {
        rows.as_array().expect("an array").iter().map(|r| r["data"]["title"].clone()).collect()
    };
    // Between the first update of note 1 and the update of note 2.
    let rows = query("2026-11-29T13:00:00Z");
    assert_eq!(titles(&rows), [json!("one v2"), json!("two v1"), Value::Null], "{rows}");
    assert_eq!(rows[0]["date_modified"], "2026-11-29T12:00:00.000Z");
    assert_eq!(rows[2], Value::Null, "a record created later did not exist yet");
    let rows = query("2026-11-29T14:00:00.000Z");
    assert_eq!(titles(&rows), [json!("one v2"), json!("two v2"), Value::Null], "at the instant is included: {rows}");
    let rows = query("2026-11-29T15:30:00+00:00");
    assert_eq!(titles(&rows), [json!("one v2"), json!("two v2"), json!("three v1")]);
    let rows = query("2026-11-30T00:00:00Z");
    assert_eq!(titles(&rows), [json!("one v3"), json!("two v2"), json!("three v1")], "now: the current rows");
    assert_eq!(rows, s.get("/notes/all").ok());

    // Bracket form, with a filter.
    let rows = s
        .get("/notes/all?filter[id]=1&timeMachine[key]=date_modified&timeMachine[timestamp]=2026-11-29T11:00:00Z")
        .ok();
    assert_eq!(titles(&rows), [json!("one v1")]);
    // In a body.
    let body =
        json!({"filter": {"id": [1]}, "timeMachine": {"key": "date_modified", "timestamp": "2026-11-29T12:30:00Z"}});
    assert_eq!(titles(&s.post("/notes/all", &body).ok()), [json!("one v2")]);
    // On GET by id.
    let tm = enc(&json!({"key": "date_modified", "timestamp": "2026-11-29T11:00:00Z"}).to_string());
    assert_eq!(titles(&s.get(&format!("/notes/1?timeMachine={tm}")).ok()), [json!("one v1")]);

    let bad = enc(&json!({"key": "date_modified", "timestamp": "last tuesday"}).to_string());
    s.get(&format!("/notes/all?timeMachine={bad}")).expect_status(400, "a timestamp that is not ISO 8601");
}

#[test]
fn unusable_queries_are_400() {
    let s = seeded("t_filter_errors");
    let json_case = |name: &str, value: &str| format!("{name}={}", enc(value));
    let cases: Vec<(String, &str)> = vec![
        ("filter=%7Bnot%20json".into(), "bad filter JSON"),
        ("filter2=%7Bnot%20json".into(), "bad filter2 JSON"),
        (json_case("filter", "[1,2]"), "filter not an object"),
        (json_case("filter2", r#"{"data.ids":["near",[3]]}"#), "unknown operator"),
        ("filter2[data.ids]=near&filter2[data.ids]=[3]".into(), "unknown operator, bracket form"),
        (json_case("filter2", r#"{"data.ids":"contains"}"#), "filter2 without [operator, value]"),
        (json_case("filter", r#"{"nope":[1]}"#), "a column that does not exist"),
        (json_case("filter", r#"{"nope.x":["a"]}"#), "a JSON path on a column that does not exist"),
        (json_case("filter2", r#"{"nope":["contains",[1]]}"#), "contains on a column that does not exist"),
        (json_case("filter2", r#"{"created_by":["contains",[1]]}"#), "contains on an integer column"),
        ("filter[x%3Bdrop%20table%20notes]=1".into(), "a column name that is not an identifier"),
        ("filter[]=1".into(), "an empty key"),
    ];
    for (query, what) in cases {
        let res = s.get(&format!("/notes/all?{query}"));
        res.expect_status(400, what);
        assert!(res.json()["error"].is_string(), "{what}: {}", res.text());
    }
    assert_eq!(ids(&s.get("/notes/all").ok()), [1, 2, 3], "nothing was harmed");
}

/// A filter that cannot be parsed must not widen to every row: in a body as in the query string, it is a 400.
#[test]
fn bad_filter_string_in_a_body_is_400() {
    let s = seeded("t_filter_body_errors");
    let res = s.post("/notes/all", &json!({"filter": "{not json"}));
    res.expect_status(400, "a body filter string that is not JSON");
    let res = s.post("/notes/all", &json!({"filter": "{\"created_by\":[7]}"}));
    assert_eq!(res.ok(), json!([]), "a valid filter string still filters");
}

/// Notes 1 ← 2 ← 3 (data.parent) and 4 ← 5: parents walk up from a record, children down, with depth.
#[test]
fn parents_and_children() {
    let s = Stack::start("t_tree");
    s.create("notes", &record(json!({"title": "root", "parent": null}), 1));
    s.create("notes", &record(json!({"title": "child", "parent": 1}), 1));
    s.create("notes", &record(json!({"title": "grandchild", "parent": 2}), 1));
    s.create("notes", &record(json!({"title": "other root"}), 1));
    s.create("notes", &record(json!({"title": "other child", "parent": 4}), 1));
    s.create("notes", &record(json!({"title": "second child", "parent": 1}), 1));

    let chain = s.get("/notes/3?parents=parent").ok();
    assert_eq!(ids(&chain), [3, 2, 1], "{chain}");
    let depths: Vec<&Value> = chain.as_array().expect("array").iter().map(|r| &r["depth"]).collect();
    assert_eq!(depths, [&json!(0), &json!(1), &json!(2)]);
    assert_eq!(chain[2]["data"]["title"], "root");
    assert_eq!(keys(&chain[0])[..6], ["id", "data", "date_created", "date_modified", "created_by", "modified_by"]);

    let down = s.get("/notes/1?children=parent").ok();
    let mut got: Vec<(i64, i64)> = down
        .as_array()
        .expect("array")
        .iter()
        .map(|r| (r["depth"].as_i64().expect("depth"), r["id"].as_i64().expect("id")))
        .collect();
    got.sort_unstable();
    assert_eq!(got, [(0, 1), (1, 2), (1, 6), (2, 3)], "{down}");
    assert_eq!(ids(&s.get("/notes/5?children=parent").ok()), [5], "a leaf is its own only descendant");
    assert_eq!(ids(&s.get("/notes/4?parents=parent").ok()), [4], "a root is its own only ancestor");
    assert_eq!(s.get("/notes/99?parents=parent").ok(), json!([]));
    assert_eq!(s.get("/nosuchtable/1?children=parent").ok(), json!([]));

    let both = s.get("/notes/3?parents=parent&children=parent");
    both.expect_status(400, "parents and children together");
    s.get("/notes/3?parents=x%27%3Bdrop").expect_status(400, "a parents field that is not a plain key");
    s.get("/notes/3?parents=parent&referenceComponent=folders").expect_status(400, "parents and references");
}

/// A cycle in the data must not run away: the walk is bounded.
#[test]
fn parent_cycles_terminate() {
    let s = Stack::start("t_cycle");
    s.create("notes", &record(json!({"title": "a", "parent": 2}), 1));
    s.create("notes", &record(json!({"title": "b", "parent": 1}), 1));
    let res = s.get("/notes/1?parents=parent");
    let rows = res.ok();
    let n = rows.as_array().map(Vec::len).unwrap_or(0);
    assert!(n >= 2, "{n} rows");
}

/// A folder whose data.notes lists note ids is found from the note.
#[test]
fn reference_component_with_explicit_path() {
    let s = Stack::start("t_refs_path");
    for title in ["n1", "n2", "n3"] {
        s.create("notes", &record(json!({"title": title}), 1));
    }
    let folder = s.create("folders", &record(json!({"name": "f", "notes": [1, 2]}), 1));
    s.create("folders", &record(json!({"name": "g", "notes": [2], "other": [1]}), 1));
    assert_eq!(s.get("/notes/1?referenceComponent=folders&referencePath=notes").ok(), json!([folder]));
    assert_eq!(ids(&s.get("/notes/2?referenceComponent=folders&referencePath=notes").ok()), [1, 2]);
    assert_eq!(s.get("/notes/3?referenceComponent=folders&referencePath=notes").ok(), json!([]));
    assert_eq!(ids(&s.get("/notes/1?referenceComponent=folders&referencePath=other").ok()), [2]);
    assert_eq!(s.get("/notes/1?referenceComponent=nosuchtable&referencePath=notes").ok(), json!([]));
    s.get("/notes/1?referenceComponent=folders%3Bdrop&referencePath=notes").expect_status(400, "bad component");
    s.get("/notes/1?referenceComponent=folders&referencePath=a.b").expect_status(400, "bad path");
}

/// Without referencePath the path is the referenced component's plural, as the original computed it with the
/// `pluralize` package: pluralize("notes") is "notes" (already plural), so folders' data.notes is searched.
#[test]
fn reference_component_default_path() {
    let s = Stack::start("t_refs_default");
    s.create("notes", &record(json!({"title": "n1"}), 1));
    s.create("notes", &record(json!({"title": "n2"}), 1));
    let folder = s.create("folders", &record(json!({"name": "f", "notes": [1, 2]}), 1));
    assert_eq!(s.get("/notes/1?referenceComponent=folders").ok(), json!([folder]));
}

#[test]
fn reference_component_default_path_of_a_singular_name() {
    let s = Stack::start("t_refs_singular");
    s.create("note", &record(json!({"title": "n1"}), 1));
    s.create("category", &record(json!({"title": "c1"}), 1));
    let folder = s.create("folders", &record(json!({"notes": [1], "categories": [1]}), 1));
    assert_eq!(s.get("/note/1?referenceComponent=folders").ok(), json!([folder]), "note → data.notes");
    assert_eq!(s.get("/category/1?referenceComponent=folders").ok(), json!([folder]), "category → data.categories");
    let row = single(&s.get("/note/1").ok()).clone();
    assert_eq!(row["data"]["title"], "n1");
}

/// Filtering on a timestamp column by the value the API itself returned finds the row.
#[test]
fn filter_on_a_timestamp_column() {
    let s = seeded("t_filter_time");
    s.put("/notes/2", &record_at(json!({"ids": [3]}), 2, common::T0, "2026-12-01T08:00:00Z")).ok();
    let returned = common::single(&s.get("/notes/2").ok())["date_modified"].clone();
    let filter = json!({ "date_modified": [returned] }).to_string();
    assert_eq!(all_ids(&s, &format!("filter={}", enc(&filter))), [2], "by the API's own rendering");
    let filter = json!({ "date_modified": ["2026-12-01T08:00:00Z"] }).to_string();
    assert_eq!(all_ids(&s, &format!("filter={}", enc(&filter))), [2], "by the value as written");
}
