//! The record schema and the Markdown summary, from a recorded JSONL fixture (tests/fixtures/hello-bare.jsonl:
//! rust, bun and the floor over two rounds, node voided by its check, bun's second run voided by a 500).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use compare::records::{self, Kind, LatencyUs, Record};
use compare::report;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hello-bare.jsonl")
}

#[test]
fn fixture_and_fresh_records_match_the_schema() {
    let v = common::validator();
    let text = std::fs::read_to_string(fixture()).expect("fixture");
    for line in text.lines() {
        common::assert_valid(&v, &serde_json::from_str(line).expect("JSON line"));
    }
    // Every kind as compare writes it, including a void one.
    let meta = common::meta();
    let mut closed = Record::new(&meta, "metadata", "rust", Some("metadata-rs 0.1.0"), Kind::Closed, 2);
    closed.connections = Some(128);
    closed.latency_us = Some(LatencyUs { p50: 100, p95: Some(600), p99: 900, p999: 2000, max: 5000 });
    closed.statuses = [(200, 1000), (404, 10)].into_iter().collect();
    closed.errors = [("timeout".to_string(), 1)].into_iter().collect();
    closed.void_because("errors: timeout 1");
    let mut open = Record::new(&meta, "notes-write", "bun", None, Kind::Open, 1);
    open.rate = Some(500.0);
    open.rate_achieved = Some(499.5);
    let mut startup = Record::new(&meta, "hello-default", "node", Some("v22"), Kind::Startup, 3);
    startup.startup_ms = Some(90.5);
    let check = Record::new(&meta, "notes-read", "floor", Some("compare 0.1.0"), Kind::Check, 0);
    for rec in [&closed, &open, &startup, &check] {
        let value = serde_json::to_value(rec).expect("serialize");
        common::assert_valid(&v, &value);
        let back: Record = serde_json::from_value(value).expect("deserialize");
        assert_eq!(&back, rec);
    }
    // A void record without a reason is not a valid record.
    let mut bad = serde_json::to_value(&closed).expect("serialize");
    bad["void_reason"] = serde_json::Value::Null;
    assert!(!v.is_valid(&bad));
}

#[test]
fn summary_from_the_fixture() {
    let records = records::read_jsonl(&[fixture()]).expect("fixture records");
    assert_eq!(records.len(), 19);
    let md = report::render(&records, Some(Path::new("/out/20261129T120000Z-fixture.md")), &report::Options::default());
    let row = |runtime: &str| -> String {
        md.lines().find(|l| l.starts_with(&format!("| {runtime} |"))).unwrap_or_default().to_string()
    };
    assert!(md.contains("command: `compare --workloads hello-bare --runs 2 --startup-runs 2`"), "{md}");
    assert!(md.contains("machine: Test CPU, 2 CPUs, Linux 6.0 (host fixture)"), "{md}");
    assert!(md.contains("![hello-bare](20261129T120000Z-fixture-hello-bare.svg)"), "{md}");

    let rust = row("rust");
    // req/s, CPU-µs/resp, p99, idle and loaded RSS, startup; ratios against the floor per round (0.50, 0.545).
    for cell in ["110,000 (100,000–120,000)", "6.30 (6.00–6.60)", "| 0.850 |", "| 4.9 |", "| 5.9 |", "5.5 (5.0–6.0)"]
    {
        assert!(rust.contains(cell), "rust row lacks {cell}: {rust}");
    }
    assert!(rust.contains("| — | — | 0.52 | 1.50 | 2/2 |"), "{rust}");
    // bun: only round 1 counts (round 2 is void); its ratios use round 1 alone.
    let bun = row("bun");
    assert!(bun.contains("| 80,000 |") && bun.contains("| 0.80 | 1.25 | 0.40 |") && bun.ends_with("| 1/2 |"), "{bun}");
    let node = row("node");
    assert!(node.contains("**VOID**: 1 of 1 probes differ from rust's answers"), "{node}");
    let floor = row("floor");
    assert!(floor.contains("210,000 (200,000–220,000)") && floor.contains("| 1.92 | 0.67 | — | — |"), "{floor}");

    assert!(md.contains("Open loop at 40,000 req/s"), "{md}");
    // The fixture's records predate p95: its column says so.
    assert!(md.lines().any(|l| l.starts_with("| rust | 39,990 | 0.175 | — | 0.700 | 2.100 | 3.500 | 1/1 |")), "{md}");
    // The overview comes first, each cell judged: bun and node have void records, the floor only two rounds.
    assert!(md.find("## Overview") < md.find("## hello-bare"), "{md}");
    assert!(md.contains("| hello-bare | bun | 1.25 | not comparable: a void record | 0.80 |"), "{md}");
    assert!(md.contains("| hello-bare | node | — | not comparable: a void record |"), "{md}");
    assert!(
        md.contains("| hello-bare | floor | 0.67 | no measurable difference: (a) fewer than 3 rounds | 1.92 |"),
        "{md}"
    );
    assert!(md.contains("- bun closed round 2: unexpected statuses 500: 1"), "{md}");
    assert!(!md.contains("loader-bound"), "no run was loader-bound: {md}");
}

#[test]
fn report_subcommand_rerenders_markdown_and_svg_into_a_new_folder() {
    let tmp = tempfile::tempdir().expect("temp dir");
    // A report of its own gets a folder of its own (bench/results/<date>-<subject>/): made if missing.
    let dir = tmp.path().join("20261205-subject");
    let md = dir.join("again.md");
    let out =
        Command::new(common::compare_exe()).arg("report").arg(fixture()).arg("--out").arg(&md).output().expect("run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let written = std::fs::read_to_string(&md).expect("markdown written");
    assert_eq!(String::from_utf8_lossy(&out.stdout), written, "stdout is the file");
    let records = records::read_jsonl(&[fixture()]).expect("fixture records");
    assert_eq!(written, report::render(&records, Some(&md), &report::Options::default()));
    let svg = std::fs::read_to_string(dir.join("again-hello-bare.svg")).expect("svg written");
    assert!(svg.contains("<svg") && svg.contains("rust"), "{svg}");
}

#[test]
fn report_refuses_an_out_its_own_files_would_overwrite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let records = dir.path().join("run.md");
    std::fs::copy(fixture(), &records).expect("copy fixture");
    let refused = |args: &[&std::ffi::OsStr], expect: &str| {
        let out = Command::new(common::compare_exe()).arg("report").args(args).output().expect("run");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
    };
    // The HTML page goes to X.html: an --out X.html would hold the page, and the Markdown would be lost.
    let html = dir.path().join("summary.html");
    refused(&[fixture().as_os_str(), "--out".as_ref(), html.as_os_str()], "ending in .md");
    assert!(!html.exists(), "nothing written when refused");
    // Records in a file named .md: the default output is that file itself.
    refused(&[records.as_os_str()], "is a record file being read");
    assert_eq!(std::fs::read(&records).expect("records"), std::fs::read(fixture()).expect("fixture"), "untouched");
}

#[test]
fn report_refuses_what_is_not_a_record() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"schema\":\"loadgen-report/1\"}\n").expect("write");
    let out = Command::new(common::compare_exe()).arg("report").arg(&bad).output().expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.jsonl:1: not a compare-record/1 record"), "{err}");
}
