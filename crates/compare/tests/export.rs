//! `compare export --format bmf`: the real binary on committed records, its stdout parsed as JSON and held to
//! the Bencher Metric Format's documented shape (bencher.dev/docs/reference/bencher-metric-format: an object
//! of benchmarks, each an object of measures, each `{value, lower_value?, upper_value?}` with numbers), and
//! one cell's figures recomputed here from the JSONL; then pooling across files, and bad input.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/hello-bare.jsonl");
/// The HTTP/2 workloads on rust, bun and node, 3 rounds each, with peak RSS recorded.
const H2_RUN: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/results/20261205T193844Z/20261205T193844Z-vm.jsonl");
/// hello-default and metadata swept over 64, 256, 512 and 1024 connections.
const SWEEP_RUN: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/results/20261205T093459Z/20261205T093459Z-vm.jsonl");

const MEASURES: [&str; 4] = ["cpu_us_per_resp", "req_per_s", "p99_ms", "rss_peak_mib"];

fn compare(args: &[&str]) -> Output {
    std::process::Command::new(common::compare_exe()).args(args).output().expect("run compare")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `compare export --format bmf FILES…`, which must succeed, its stdout parsed.
fn export(files: &[&str]) -> (Value, String) {
    let out = compare(&[&["export", "--format", "bmf"], files].concat());
    assert!(out.status.success(), "compare export failed: {}", stderr(&out));
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {out:?}"));
    (json, stderr(&out))
}

fn number(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

fn utf8(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temp path")
}

fn records(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// The documented shape: benchmarks keyed `workload/runtime`, each a non-empty object of known measures, each
/// measure an object of finite numbers with `value` required and lower_value <= value <= upper_value.
fn assert_bmf_shape(bmf: &Value) {
    let benchmarks = bmf.as_object().expect("a top-level object");
    assert!(!benchmarks.is_empty(), "no benchmark");
    for (name, measures) in benchmarks {
        let parts: Vec<&str> = name.split('/').collect();
        assert!(parts.len() == 2 && parts.iter().all(|p| !p.is_empty()), "{name} is not workload/runtime");
        let measures = measures.as_object().unwrap_or_else(|| panic!("{name}: not an object"));
        assert!(!measures.is_empty(), "{name}: no measure");
        for (slug, metric) in measures {
            assert!(MEASURES.contains(&slug.as_str()), "{name}: unknown measure {slug}");
            let metric = metric.as_object().unwrap_or_else(|| panic!("{name} {slug}: not an object"));
            for key in metric.keys() {
                assert!(["value", "lower_value", "upper_value"].contains(&key.as_str()), "{name} {slug}: {key}");
            }
            let number = |k: &str| metric.get(k).map(|v| v.as_f64().expect("a number"));
            let value = number("value").unwrap_or_else(|| panic!("{name} {slug}: no value"));
            assert!(value.is_finite(), "{name} {slug}: {value}");
            if let Some(lower) = number("lower_value") {
                assert!(lower.is_finite() && lower <= value, "{name} {slug}: lower {lower} > {value}");
            }
            if let Some(upper) = number("upper_value") {
                assert!(upper.is_finite() && value <= upper, "{name} {slug}: upper {upper} < {value}");
            }
        }
    }
}

/// (median, min, max), computed here rather than with compare's own helpers.
fn median_min_max(mut values: Vec<f64>) -> (f64, f64, f64) {
    assert!(!values.is_empty(), "no value");
    values.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    let n = values.len();
    let median = if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 };
    (median, values[0], values[n - 1])
}

/// A valid closed-loop record of `workload`/`runtime` (at `connections` when given).
fn is_round(r: &Value, workload: &str, runtime: &str, connections: Option<u64>) -> bool {
    r["workload"] == workload
        && r["runtime"] == runtime
        && r["kind"] == "closed"
        && r["void"] == false
        && connections.is_none_or(|c| r["connections"] == c)
}

/// Asserts that the export's measure equals (median, min, max) of `values`.
fn assert_measure(bmf: &Value, name: &str, slug: &str, values: Vec<f64>) {
    let (median, min, max) = median_min_max(values);
    let m = &bmf[name][slug];
    let close = |key: &str, want: f64| {
        let got = m[key].as_f64().unwrap_or_else(|| panic!("{name} {slug}: no {key} in {bmf}"));
        assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{name} {slug} {key}: {got}, expected {want}");
    };
    close("value", median);
    close("lower_value", min);
    close("upper_value", max);
}

#[test]
fn a_committed_run_exports_every_cell_in_the_documented_shape() {
    let (bmf, _) = export(&[H2_RUN]);
    assert_bmf_shape(&bmf);
    let recs = records(H2_RUN);
    let mut cells: Vec<String> = recs
        .iter()
        .filter(|r| r["kind"] == "closed" && r["void"] == false)
        .map(|r| format!("{}/{}", text(&r["workload"]), text(&r["runtime"])))
        .collect();
    cells.sort();
    cells.dedup();
    let names: Vec<&String> = bmf.as_object().expect("object").keys().collect();
    assert_eq!(names, cells.iter().collect::<Vec<_>>());

    let rounds: Vec<&Value> = recs.iter().filter(|r| is_round(r, "hello-h2", "rust", None)).collect();
    assert_eq!(rounds.len(), 3);
    let field = |f: &dyn Fn(&Value) -> f64| rounds.iter().map(|r| f(r)).collect::<Vec<f64>>();
    let name = "hello-h2/rust";
    assert_measure(&bmf, name, "req_per_s", field(&|r| number(&r["req_per_s"])));
    assert_measure(&bmf, name, "cpu_us_per_resp", field(&|r| number(&r["server_cpu_us_per_resp"])));
    assert_measure(&bmf, name, "p99_ms", field(&|r| number(&r["latency_us"]["p99"]) / 1000.0));
    assert_measure(&bmf, name, "rss_peak_mib", field(&|r| number(&r["rss_peak_kib"]) / 1024.0));
}

#[test]
fn void_rounds_void_cells_and_unmeasured_metrics_are_left_out() {
    let (bmf, stderr) = export(&[FIXTURE]);
    assert_bmf_shape(&bmf);
    // node's check failed: no closed-loop run, no benchmark, and stderr says so.
    assert!(bmf.get("hello-bare/node").is_none(), "{bmf}");
    assert!(stderr.contains("hello-bare/node left out"), "{stderr}");
    // bun's second round is void: its figures are its first round's.
    let recs = records(FIXTURE);
    let bun: Vec<f64> =
        recs.iter().filter(|r| is_round(r, "hello-bare", "bun", None)).map(|r| number(&r["req_per_s"])).collect();
    assert_eq!(bun.len(), 1);
    assert_measure(&bmf, "hello-bare/bun", "req_per_s", bun);
    // The fixture predates peak RSS: the measure is absent, never null or 0.
    for (name, measures) in bmf.as_object().expect("an object") {
        assert!(measures.get("rss_peak_mib").is_none(), "{name}: {measures}");
    }
}

#[test]
fn a_sweep_is_read_at_its_headline_count() {
    let (bmf, _) = export(&[SWEEP_RUN]);
    assert_bmf_shape(&bmf);
    let recs = records(SWEEP_RUN);
    let rps = |c: u64| {
        let v: Vec<f64> = recs
            .iter()
            .filter(|r| is_round(r, "hello-default", "rust", Some(c)))
            .map(|r| number(&r["req_per_s"]))
            .collect();
        v
    };
    // 64 is the swept count nearest hello-default's own 100, the count the report's tables use.
    assert_measure(&bmf, "hello-default/rust", "req_per_s", rps(64));
    let exported = number(&bmf["hello-default/rust"]["req_per_s"]["value"]);
    for other in [256, 512, 1024] {
        assert_ne!(exported, median_min_max(rps(other)).0, "the median at {other} connections");
    }
}

/// The fixture, with every line passed through `edit`, written to `dir/name`.
fn edited_fixture(dir: &Path, name: &str, edit: impl Fn(&mut Value)) -> PathBuf {
    let lines: Vec<String> = records(FIXTURE)
        .into_iter()
        .map(|mut r| {
            edit(&mut r);
            r.to_string()
        })
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").expect("write");
    path
}

#[test]
fn several_files_pool_a_cells_rounds() {
    let dir = tempfile::tempdir().expect("temp dir");
    let second = edited_fixture(dir.path(), "second.jsonl", |r| {
        r["run_id"] = "20261130T120000Z-fixture".into();
        if let Some(rps) = r["req_per_s"].as_f64() {
            r["req_per_s"] = (rps * 2.0).into();
        }
    });
    let second = utf8(&second);
    let (bmf, _) = export(&[FIXTURE, second]);
    assert_bmf_shape(&bmf);
    let rust_rps = |path: &str| -> Vec<f64> {
        let recs = records(path);
        recs.iter().filter(|r| is_round(r, "hello-bare", "rust", None)).map(|r| number(&r["req_per_s"])).collect()
    };
    let pooled = [rust_rps(FIXTURE), rust_rps(second)].concat();
    assert_eq!(pooled.len(), 4);
    assert_measure(&bmf, "hello-bare/rust", "req_per_s", pooled);
}

#[test]
fn cells_measured_differently_in_two_files_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let other = edited_fixture(dir.path(), "c256.jsonl", |r| {
        if r["connections"].is_u64() {
            r["connections"] = 256.into();
        }
    });
    let out = compare(&["export", "--format", "bmf", FIXTURE, utf8(&other)]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty(), "nothing on stdout");
    assert!(err.contains("hello-bare/") && err.contains("connections 100 in") && err.contains("but 256 in"), "{err}");
    assert!(err.contains("hello-bare.jsonl") && err.contains("c256.jsonl"), "{err}");
}

#[test]
fn bad_input_is_a_clear_error() {
    // Flags and arguments: clap's message, and 64 as for every subcommand's bad flags.
    let out = compare(&["export", "--format", "bmf"]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("RUN.jsonl"), "{}", stderr(&out));
    let out = compare(&["export", "--format", "csv", FIXTURE]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(stderr(&out).contains("possible values: bmf"), "{}", stderr(&out));
    let out = compare(&["export", FIXTURE]);
    assert_eq!(out.status.code(), Some(64), "--format is required: {}", stderr(&out));

    // Files: the reader's own error, naming the file (and the line), and 1 as `compare report` and `verdict`.
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("missing.jsonl");
    let other = dir.path().join("other.jsonl");
    std::fs::write(&other, "{\"schema\":\"something-else/1\"}\n").expect("write");
    let checks_only = edited_fixture(dir.path(), "checks.jsonl", |r| {
        if r["kind"] != "check" {
            r["kind"] = "check".into();
        }
    });
    for (file, says) in [
        (&missing, "missing.jsonl".to_string()),
        (&other, format!("{}:1: not a compare-record/1 record", other.display())),
        (&checks_only, "nothing to export".to_string()),
    ] {
        let out = compare(&["export", "--format", "bmf", utf8(file)]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{}: {err}", file.display());
        assert!(err.starts_with("compare export: ") && err.contains(&says), "{}: {err}", file.display());
        assert!(out.stdout.is_empty(), "{}: nothing on stdout", file.display());
    }
}
