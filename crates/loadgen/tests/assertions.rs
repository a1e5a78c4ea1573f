//! Response assertions: status, exact body, contains, length, SHA-256, headers, `--check-every`, and how they
//! decide the exit code (`--allow-failures`).

mod common;

use common::*;
use sha2::{Digest, Sha256};

/// Runs 300 ms on 2 connections against `path` with the extra arguments.
fn check(server: &Server, path: &str, extra: &[&str]) -> Ran {
    let url = server.url(path);
    let mut list = vec!["-c", "2", "-d", "300ms", "--timeout", "2s"];
    list.extend_from_slice(extra);
    list.push(&url);
    let ran = run(&list);
    assert!(ran.report.responses > 0, "{extra:?}: no responses");
    ran
}

fn assert_passes(ran: &Ran, what: &str) {
    let r = &ran.report;
    assert_eq!(r.assertions.failed, 0, "{what}: {} of {} checks failed", r.assertions.failed, r.assertions.checked);
    assert_eq!(r.errors.assertion, 0, "{what}");
    assert_eq!(r.assertions.checked, r.responses, "{what}: every response is checked");
    assert!(ran.failures().is_empty(), "{what}: failures {:?}", ran.failures());
}

fn assert_fails(ran: &Ran, what: &str) {
    let r = &ran.report;
    assert!(r.assertions.checked > 0, "{what}: nothing checked");
    assert_eq!(r.assertions.failed, r.assertions.checked, "{what}: every checked response fails");
    assert_eq!(r.errors.assertion, r.assertions.failed, "{what}");
    assert!(!ran.failures().is_empty(), "{what}: assertion failures but failures() is empty");
}

#[test]
fn expect_status_mismatch_fails_the_run() {
    let server = Server::routes();
    let ran = check(&server, "/404", &["--expect-status", "200"]);
    assert_fails(&ran, "--expect-status 200 on 404");
    assert_eq!(ran.report.status, status_map(&[(404, ran.report.responses)]));
    assert_eq!(ran.report.non_2xx_3xx, ran.report.responses);

    let allowed = check(&server, "/404", &["--expect-status", "200", "--allow-failures"]);
    assert!(allowed.report.assertions.failed > 0, "--allow-failures still counts the failures");
    assert!(allowed.failures().is_empty(), "--allow-failures: {:?}", allowed.failures());

    let url = server.url("/404");
    let base = ["-c", "2", "-d", "300ms", "--timeout", "2s", "--no-progress", "--expect-status", "200"];
    let exit = loadgen_bin(&[&base[..], &[url.as_str()][..]].concat());
    assert_eq!(exit.code, Some(1), "assertion failures exit 1 (stderr {:?})", exit.stderr);
    let exit = loadgen_bin(&[&base[..], &["--allow-failures", url.as_str()][..]].concat());
    assert_eq!(exit.code, Some(0), "--allow-failures exits 0 (stderr {:?})", exit.stderr);
}

#[test]
fn expect_status_match_passes() {
    let server = Server::routes();
    assert_passes(&check(&server, "/404", &["--expect-status", "404"]), "--expect-status 404 on 404");
    assert_passes(&check(&server, "/", &["--expect-status", "200"]), "--expect-status 200 on 200");
    assert_passes(&check(&server, "/404", &["--expect-status", "200,404"]), "--expect-status 200,404 on 404");
    assert_fails(&check(&server, "/404", &["--expect-status", "200,204"]), "--expect-status 200,204 on 404");
}

#[test]
fn expect_body_exact_contains_and_length() {
    let server = Server::routes();
    assert_passes(&check(&server, "/", &["--expect-body", HELLO]), "--expect-body hello");
    assert_fails(&check(&server, "/", &["--expect-body", "hell"]), "--expect-body hell (a prefix)");
    assert_passes(&check(&server, "/", &["--expect-contains", "ell"]), "--expect-contains ell");
    assert_fails(&check(&server, "/", &["--expect-contains", "bye"]), "--expect-contains bye");
    assert_passes(&check(&server, "/", &["--expect-length", "5"]), "--expect-length 5");
    assert_fails(&check(&server, "/", &["--expect-length", "6"]), "--expect-length 6");
}

#[test]
fn expect_body_file() {
    let server = Server::routes();
    let (_dir, good) = temp_file("good.txt", JSON_BODY.as_bytes());
    assert_passes(&check(&server, "/json", &["--expect-body-file", s(&good)]), "--expect-body-file (same)");
    let (_dir2, bad) = temp_file("bad.txt", b"{\"ok\":false}");
    assert_fails(&check(&server, "/json", &["--expect-body-file", s(&bad)]), "--expect-body-file (different)");
}

#[test]
fn expect_sha256() {
    let server = Server::routes();
    let right: String = Sha256::digest(HELLO.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    assert_passes(&check(&server, "/", &["--expect-sha256", &right]), "--expect-sha256 of hello");
    let wrong: String = Sha256::digest(b"goodbye").iter().map(|b| format!("{b:02x}")).collect();
    assert_fails(&check(&server, "/", &["--expect-sha256", &wrong]), "--expect-sha256 of goodbye");
}

#[test]
fn expect_header() {
    let server = Server::routes();
    let json = "content-type: application/json";
    assert_passes(&check(&server, "/json", &["--expect-header", json]), "json header on /json");
    assert_fails(&check(&server, "/", &["--expect-header", json]), "json header on text/plain");
    assert_passes(&check(&server, "/", &["--expect-header", "Content-Type"]), "name only, present");
    assert_fails(&check(&server, "/", &["--expect-header", "X-Missing"]), "name only, absent");
    assert_fails(
        &check(&server, "/json", &["--expect-header", json, "--expect-header", "X-Missing"]),
        "two headers, one absent",
    );
}

#[test]
fn check_every_nth_response() {
    let server = Server::routes();
    let ran = check(&server, "/", &["--check-every", "10", "--expect-status", "200"]);
    let r = &ran.report;
    assert_eq!(r.assertions.failed, 0);
    let expected = r.responses / 10;
    assert!(
        r.assertions.checked.abs_diff(expected) <= 3,
        "--check-every 10: {} checked of {} responses (expected about {expected})",
        r.assertions.checked,
        r.responses
    );
    assert!(r.assertions.checked > 0 || r.responses < 10);
}

#[test]
fn failing_check_every_nth_counts_only_checked() {
    let server = Server::routes();
    let ran = check(&server, "/404", &["--check-every", "10", "--expect-status", "200"]);
    let r = &ran.report;
    assert!(r.responses >= 10, "too few responses ({}) to check every 10th", r.responses);
    assert_eq!(r.assertions.failed, r.assertions.checked);
    assert!(r.assertions.checked < r.responses, "every response was checked despite --check-every 10");
    assert!(!ran.failures().is_empty());
}
