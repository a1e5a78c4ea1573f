//! The binary: exit codes, one-line errors for bad input, `--json`, and `loadgen merge`.

mod common;

use common::*;

#[test]
fn successful_run_exits_0_and_writes_json() {
    let server = Server::routes();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("report.json");
    let url = server.url("/");
    let exit = loadgen_bin(&["-c", "2", "-d", "300ms", "--timeout", "2s", "--no-progress", "--json", s(&json), &url]);
    assert_eq!(exit.code, Some(0), "stderr {:?}", exit.stderr);
    let report = read_report(&json);
    assert_eq!(report.schema, loadgen::report::SCHEMA);
    assert!(report.responses > 0);
    assert_eq!(report.merged_from, 1);
    assert_eq!(report.status, status_map(&[(200, report.responses)]));
    assert!(report.command.iter().any(|a| a == &url), "command {:?} lacks the URL", report.command);
    assert!(server.requests() >= report.responses);
}

#[test]
fn merge_adds_reports_exactly() {
    let server = Server::routes();
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b, m) = (dir.path().join("a.json"), dir.path().join("b.json"), dir.path().join("merged.json"));
    let common = ["-c", "2", "-d", "300ms", "--timeout", "2s", "--no-progress", "--json"];
    let url_a = server.url("/");
    let url_b = server.url("/404");
    let exit = loadgen_bin(&[&common[..], &[s(&a), url_a.as_str()][..]].concat());
    assert_eq!(exit.code, Some(0), "run A: stderr {:?}", exit.stderr);
    let exit = loadgen_bin(&[&common[..], &[s(&b), url_b.as_str()][..]].concat());
    assert_eq!(exit.code, Some(0), "run B (404s are not failures without --expect-status): stderr {:?}", exit.stderr);
    let exit = loadgen_bin(&["merge", s(&a), s(&b), "--json", s(&m)]);
    assert_eq!(exit.code, Some(0), "merge: stderr {:?}", exit.stderr);

    let (ra, rb, rm) = (read_report(&a), read_report(&b), read_report(&m));
    assert!(ra.responses > 0 && rb.responses > 0);
    assert_eq!(rm.merged_from, 2);
    assert_eq!(rm.responses, ra.responses + rb.responses);
    assert_eq!(rm.latency.count, ra.latency.count + rb.latency.count);
    assert_eq!(rm.status, status_map(&[(200, ra.responses), (404, rb.responses)]));
    assert_eq!(rm.non_2xx_3xx, rb.responses);
    assert_eq!(rm.bytes_read, ra.bytes_read + rb.bytes_read);
    assert_eq!(rm.connections.asked, 4);
    assert_eq!(rm.connections.established, 4);
    assert_eq!(rm.errors.total(), ra.errors.total() + rb.errors.total());
    assert_eq!(rm.latency.max_us, ra.latency.max_us.max(rb.latency.max_us));
    assert_eq!(rm.latency.min_us, ra.latency.min_us.min(rb.latency.min_us));
    let histogram = loadgen::report::decode_histogram(&rm.latency.histogram).expect("merged histogram decodes");
    assert_eq!(histogram.len(), rm.latency.count);
}

#[test]
fn merging_a_missing_report_is_bad_input() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("missing.json");
    let exit = loadgen_bin(&["merge", s(&missing), s(&missing)]);
    assert_ne!(exit.code, Some(0), "merging a missing file succeeded");
    assert!(!exit.stderr_lines().is_empty());
}

#[test]
fn malformed_urls_are_bad_input() {
    for url in ["notaurl", "http://", "ftp://127.0.0.1/", "http://127.0.0.1:99999/"] {
        let exit = loadgen_bin(&["-d", "300ms", "--no-progress", url]);
        exit.assert_bad_input(url);
    }
}

#[test]
fn https_is_bad_input() {
    let exit = loadgen_bin(&["-d", "300ms", "--no-progress", "https://127.0.0.1:1/"]);
    exit.assert_bad_input("https URL");
}

#[test]
fn unreadable_files_are_bad_input() {
    let server = Server::routes();
    let url = server.url("/");
    let missing = "/nonexistent/loadgen-test/file";
    let cases: [&[&str]; 4] = [
        &["--replay", missing],
        &["--body-file", missing, "-m", "POST"],
        &["--path", "/{x}", "--var", "x=@/nonexistent/loadgen-test/file"],
        &["--expect-body-file", missing],
    ];
    for extra in cases {
        let list = [&["-d", "300ms", "--no-progress"][..], extra, &[url.as_str()][..]].concat();
        loadgen_bin(&list).assert_bad_input(&format!("{extra:?}"));
    }
    assert_eq!(server.requests(), 0, "requests were sent despite bad input");
}

#[test]
fn more_threads_than_connections_warns_and_runs() {
    let server = Server::routes();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("report.json");
    let url = server.url("/");
    let exit = loadgen_bin(&["-t4", "-c2", "-d300ms", "--timeout=2s", "--no-progress", "--json", s(&json), &url]);
    assert_eq!(exit.code, Some(0), "stderr {:?}", exit.stderr);
    assert!(!exit.stderr_lines().is_empty(), "no warning about 4 threads for 2 connections");
    assert!(exit.stderr.to_lowercase().contains("thread"), "the warning does not mention threads: {:?}", exit.stderr);
    let report = read_report(&json);
    assert!(report.responses > 0);
    assert_eq!(report.cpu.threads.len(), 2, "threads capped to connections");
    assert_eq!(report.connections.established, 2);
}
