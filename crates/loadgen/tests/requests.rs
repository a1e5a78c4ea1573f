//! What loadgen sends, as the server records it: path templates, replayed raw requests, headers, method, body.

mod common;

use std::collections::BTreeSet;

use common::*;

const TEMPLATE: &str = "/v/{id}?r={region}";

fn combinations() -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    for id in ["a", "b", "c"] {
        for region in ["ja", "ko"] {
            all.insert(format!("/v/{id}?r={region}"));
        }
    }
    all
}

/// Targets the server received running the template with `extra` arguments.
fn template_targets(extra: &[&str]) -> (Vec<String>, Ran) {
    let (_dir, regions) = temp_file("regions.txt", b"ja\nko\n");
    let server = Server::routes();
    let region_var = format!("region=@{}", s(&regions));
    let mut list = vec!["-d", "300ms", "--timeout", "2s", "--path", TEMPLATE, "--var", "id=a,b,c", "--var"];
    list.push(&region_var);
    list.extend_from_slice(extra);
    let url = server.url("/ignored");
    list.push(&url);
    let ran = run(&list);
    ran.assert_no_errors();
    assert!(ran.report.responses > 0);
    let targets = server.recorded().into_iter().map(|req| req.target).collect();
    (targets, ran)
}

#[test]
fn template_round_robin_draws_every_value() {
    let (targets, ran) = template_targets(&["-c", "2", "--pick", "round-robin"]);
    let allowed = combinations();
    assert!(targets.len() >= 6, "only {} requests", targets.len());
    for target in &targets {
        assert!(allowed.contains(target), "{target:?} is not one of the template's combinations {allowed:?}");
    }
    for id in ["a", "b", "c"] {
        assert!(targets.iter().any(|t| t.starts_with(&format!("/v/{id}?"))), "id {id} never drawn");
    }
    for region in ["ja", "ko"] {
        assert!(targets.iter().any(|t| t.ends_with(&format!("r={region}"))), "region {region} never drawn");
    }
    assert!(ran.report.config.source.contains("template"), "config.source {:?}", ran.report.config.source);
}

#[test]
fn template_random_is_reproducible_with_a_seed() {
    let first = template_targets(&["-c", "1", "-t", "1", "--pick", "random", "--seed", "7"]).0;
    let again = template_targets(&["-c", "1", "-t", "1", "--pick", "random", "--seed", "7"]).0;
    let other = template_targets(&["-c", "1", "-t", "1", "--pick", "random", "--seed", "8"]).0;
    let n = first.len().min(again.len()).min(other.len()).min(200);
    assert!(n >= 20, "too few requests to compare ({n})");
    let allowed = combinations();
    assert!(first.iter().all(|t| allowed.contains(t)), "{first:?}");
    assert_eq!(first[..n], again[..n], "same seed, different sequence");
    assert_ne!(first[..n], other[..n], "seeds 7 and 8 drew the same {n} paths: is the seed used?");
    let distinct: BTreeSet<&String> = first[..n].iter().collect();
    assert!(distinct.len() > 1, "random picks always drew {distinct:?}");
}

#[test]
fn unreadable_var_file_is_bad_input() {
    let server = Server::routes();
    let exit = loadgen_bin(&[
        "-d",
        "300ms",
        "--no-progress",
        "--path",
        "/v/{id}",
        "--var",
        "id=@/nonexistent/loadgen-test/ids.txt",
        &server.url("/"),
    ]);
    exit.assert_bad_input("--var id=@missing file");
    assert_eq!(server.requests(), 0, "requests were sent despite bad input");
}

#[test]
fn replay_sends_raw_requests_in_order() {
    let raw = concat!(
        "GET /a HTTP/1.1\r\nHost: example.test\r\nX-Replay: one\r\n\r\n",
        "POST /b HTTP/1.1\r\nHost: example.test\r\nContent-Type: application/x-www-form-urlencoded\r\n",
        "Content-Length: 11\r\n\r\nhello=world",
    );
    let (_dir, file) = temp_file("requests.http", raw.as_bytes());
    let server = Server::routes();
    let ran = run(&["-c", "1", "-d", "300ms", "--timeout", "2s", "--replay", s(&file), &server.url("/")]);
    ran.assert_no_errors();
    assert!(ran.report.responses >= 2, "only {} responses", ran.report.responses);
    let recorded = server.recorded();
    for (i, req) in recorded.iter().enumerate() {
        if i % 2 == 0 {
            assert_eq!((req.method.as_str(), req.target.as_str()), ("GET", "/a"), "request {i}");
            assert_eq!(req.header("x-replay"), Some("one"), "request {i}: header lost");
            assert!(req.body.is_empty(), "request {i}: GET with a body {:?}", req.body);
        } else {
            assert_eq!((req.method.as_str(), req.target.as_str()), ("POST", "/b"), "request {i}");
            assert_eq!(req.header("content-length"), Some("11"), "request {i}");
            assert_eq!(req.body, b"hello=world", "request {i}: body {:?}", String::from_utf8_lossy(&req.body));
        }
    }
    assert!(ran.report.config.source.contains("replay"), "config.source {:?}", ran.report.config.source);
}

#[test]
fn replay_bodies_stay_intact_over_several_connections() {
    let raw = concat!(
        "GET /a HTTP/1.1\r\nHost: example.test\r\n\r\n",
        "POST /b HTTP/1.1\r\nHost: example.test\r\nContent-Length: 11\r\n\r\nhello=world",
    );
    let (_dir, file) = temp_file("requests.http", raw.as_bytes());
    let server = Server::routes();
    let ran = run(&["-c", "3", "-d", "300ms", "--timeout", "2s", "--replay", s(&file), &server.url("/")]);
    ran.assert_no_errors();
    let recorded = server.recorded();
    let (gets, posts): (Vec<_>, Vec<_>) = recorded.iter().partition(|r| r.method == "GET");
    assert!(!gets.is_empty() && !posts.is_empty(), "{} GET, {} POST", gets.len(), posts.len());
    assert!(gets.iter().all(|r| r.target == "/a" && r.body.is_empty()));
    assert!(posts.iter().all(|r| r.target == "/b" && r.body == b"hello=world"));
    assert!(gets.len().abs_diff(posts.len()) <= 3, "{} GET vs {} POST: not alternating", gets.len(), posts.len());
}

#[test]
fn headers_method_and_body_are_sent() {
    let body: &[u8] = b"line one\r\nline two\n\x00\xff binary \xfe end";
    let (_dir, file) = temp_file("body.bin", body);
    let server = Server::routes();
    let url = server.url("/submit?q=1");
    let headers = ["-H", "X-Test: 1", "-H", "X-Other: two words"];
    let ran =
        run(&[&["-c2", "-d300ms", "--timeout=2s", "-mPOST", "--body-file", s(&file)], &headers[..], &[&url]].concat());
    ran.assert_no_errors();
    assert!(ran.report.responses > 0);
    let recorded = server.recorded();
    assert!(!recorded.is_empty());
    let host = server.addr();
    for req in &recorded {
        assert_eq!(req.method, "POST");
        assert_eq!(req.target, "/submit?q=1");
        assert_eq!(req.version, "HTTP/1.1");
        assert_eq!(req.header("x-test"), Some("1"));
        assert_eq!(req.header("x-other"), Some("two words"));
        assert_eq!(req.header("host"), Some(host.as_str()), "Host header");
        assert_eq!(req.header("content-length"), Some(body.len().to_string().as_str()));
        assert_eq!(req.body, body, "body sent: {:?}", String::from_utf8_lossy(&req.body));
    }
    assert_eq!(ran.report.config.method, "POST");
}
