//! The JSON report matches schemas/loadgen/report.schema.json: reports built the way a run builds them
//! (closed loop, open loop, merged) validate, and the schema is strict enough to catch a missing or stray
//! field.

use clap::Parser;
use loadgen::merge::merge;
use loadgen::report::{Report, RunConfig, RunMeta, SCHEMA};
use loadgen::stats::WorkerStats;
use serde_json::Value;

const SCHEMA_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemas/loadgen/report.schema.json");

fn validator() -> jsonschema::Validator {
    let raw = std::fs::read_to_string(SCHEMA_PATH).unwrap_or_else(|e| panic!("reading {SCHEMA_PATH}: {e}"));
    let schema: Value = serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{SCHEMA_PATH} is not JSON: {e}"));
    // Built without remote-reference support: every $ref in the schema must be local.
    jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{SCHEMA_PATH} is not a valid schema: {e}"))
}

fn assert_valid(v: &jsonschema::Validator, instance: &Value) {
    let errors: Vec<String> = v.iter_errors(instance).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "report does not match the schema:\n{}", errors.join("\n"));
}

/// A two-thread run as `loadgen -t2 -c8 -d2s --warmup 0.5s [-R RATE] URL` would record it.
fn meta(rate: Option<f64>, pinned: bool) -> RunMeta {
    let url = "http://127.0.0.1:3000/api/hello";
    let mut command: Vec<String> = ["loadgen", "-t2", "-c8", "-d2s", "--warmup=0.5s"].map(String::from).into();
    command.extend(rate.map(|r| format!("-R{r}")));
    command.push(url.into());
    let mut settings = loadgen::cli::Cli::try_parse_from(&command)
        .unwrap_or_else(|e| panic!("{e}"))
        .run
        .settings()
        .unwrap_or_else(|e| panic!("{e}"));
    settings.pins = pinned.then(|| vec![0, 1]);
    RunMeta {
        config: RunConfig::new(&settings, 2, "template /v1/{id}".into(), "epoll"),
        command,
        target: url.into(),
        started_unix_ms: 1_700_000_000_123,
        duration_s: 2.0,
    }
}

fn worker(i: u64, open_loop: bool, pinned: bool) -> WorkerStats {
    let mut w = WorkerStats::new(open_loop);
    for v in 0..500 {
        w.latency.record(80 + v * (i + 1)).unwrap_or_else(|e| panic!("{e}"));
        if let Some(h) = &mut w.latency_from_write {
            h.record(40 + v).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    w.responses = 500;
    w.status.insert(200, 498);
    w.status.insert(404, 2);
    w.errors.timeout = i;
    w.errors.assertion = 1;
    w.bytes_read = 500 * 150;
    w.bytes_written = 500 * 60;
    w.reconnects = i;
    w.connections_asked = 4;
    w.connections_established = 4;
    w.in_flight_at_end = 1;
    if open_loop {
        w.scheduled = 520;
        w.late_sends = 3;
        w.missed_sends = i;
    }
    w.assertions_checked = 500;
    w.cpu_user_us = 300_000;
    w.cpu_sys_us = 200_000 * (i + 1);
    w.pinned_cpu = pinned.then_some(i as usize);
    w
}

fn build(open_loop: bool, pinned: bool) -> Report {
    let rate = open_loop.then_some(500.0);
    let workers = [worker(0, open_loop, pinned), worker(1, open_loop, pinned)];
    Report::from_workers(meta(rate, pinned), &workers).unwrap_or_else(|e| panic!("from_workers: {e}"))
}

fn to_json(report: &Report) -> Value {
    // Through the text form, as a reader of the file would see it.
    let text = serde_json::to_string_pretty(report).unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn closed_loop_report_matches_the_schema() {
    let v = validator();
    for pinned in [false, true] {
        let report = build(false, pinned);
        assert!(report.open_loop.is_none() && report.latency_from_write.is_none());
        let json = to_json(&report);
        assert_eq!(json["schema"], SCHEMA);
        assert!(json["open_loop"].is_null() && json["latency_from_write"].is_null());
        assert_eq!(json["status"]["404"], 4);
        assert_valid(&v, &json);
    }
}

#[test]
fn open_loop_report_matches_the_schema() {
    let v = validator();
    for pinned in [false, true] {
        let report = build(true, pinned);
        let json = to_json(&report);
        assert!(json["open_loop"].is_object() && json["latency_from_write"].is_object());
        assert_eq!(json["latency"]["corrected"], true);
        assert_valid(&v, &json);
    }
}

#[test]
fn empty_and_merged_reports_match_the_schema() {
    let v = validator();
    let mut idle = WorkerStats::new(false);
    idle.connections_asked = 8;
    let empty = Report::from_workers(meta(None, false), &[idle]).unwrap_or_else(|e| panic!("{e}"));
    assert_valid(&v, &to_json(&empty));

    for open_loop in [false, true] {
        let merged = merge(vec![build(open_loop, true), build(open_loop, true)]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(merged.merged_from, 2);
        assert_valid(&v, &to_json(&merged));
    }
}

#[test]
fn a_report_that_validates_reads_back() {
    let report = build(true, true);
    let back: Report = serde_json::from_value(to_json(&report)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(to_json(&back), to_json(&report));
}

#[test]
fn the_schema_rejects_what_serde_would_not_write() {
    let v = validator();
    let good = to_json(&build(true, false));
    assert_valid(&v, &good);

    let mutate = |f: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        let mut bad = good.clone();
        f(bad.as_object_mut().unwrap_or_else(|| panic!("a report is an object")));
        bad
    };

    let no_latency = mutate(&|o| {
        o.remove("latency");
    });
    assert!(!v.is_valid(&no_latency), "an object without `latency` must not validate");

    let stray = mutate(&|o| {
        o.insert("extra".into(), Value::from(1));
    });
    assert!(!v.is_valid(&stray), "unknown top-level fields must not validate");

    let other_schema = mutate(&|o| {
        o.insert("schema".into(), Value::from("loadgen-report/0"));
    });
    assert!(!v.is_valid(&other_schema), "another schema version must not validate");

    let text_status = mutate(&|o| {
        o.insert("status".into(), serde_json::json!({ "ok": 1 }));
    });
    assert!(!v.is_valid(&text_status), "status keys are numeric");

    let nan_rate = mutate(&|o| {
        // serde_json writes a NaN or infinite f64 as null.
        o.insert("req_per_s".into(), Value::Null);
    });
    assert!(!v.is_valid(&nan_rate), "a NaN rate must not validate");

    let missing_nested = mutate(&|o| {
        if let Some(l) = o.get_mut("latency").and_then(Value::as_object_mut) {
            l.remove("p99_us");
        }
    });
    assert!(!v.is_valid(&missing_nested), "nested fields are required too");
}

/// An https run with churn, as `loadgen -t2 -c8 --insecure --tls-version 1.3 --requests-per-conn 10 URL` would
/// record it: two workers whose handshakes negotiated different groups.
fn tls_report() -> Report {
    let url = "https://127.0.0.1:3443/";
    let command: Vec<String> =
        ["loadgen", "-t2", "-c8", "-d2s", "--insecure", "--tls-version", "1.3", "--requests-per-conn", "10", url]
            .map(String::from)
            .into();
    let settings = loadgen::cli::Cli::try_parse_from(&command)
        .unwrap_or_else(|e| panic!("{e}"))
        .run
        .settings()
        .unwrap_or_else(|e| panic!("{e}"));
    let meta = RunMeta {
        config: RunConfig::new(&settings, 2, "url /".into(), "uring"),
        command,
        target: url.into(),
        started_unix_ms: 1_700_000_000_123,
        duration_s: 2.0,
    };
    let workers: Vec<WorkerStats> = ["X25519", "secp256r1"]
        .iter()
        .enumerate()
        .map(|(i, group)| {
            let mut w = worker(i as u64, false, false);
            w.connections_opened = 50;
            let mut tls = loadgen::stats::TlsStats::default();
            tls.counts.versions.insert("TLSv1.3".into(), 50);
            tls.counts.cipher_suites.insert("TLS13_AES_128_GCM_SHA256".into(), 50);
            tls.counts.groups.insert((*group).into(), 50);
            tls.counts.alpn.insert("http/1.1".into(), 50);
            tls.counts.handshakes.full = 4;
            tls.counts.handshakes.resumed = 46;
            tls.counts.failures.insert("handshake timed out".into(), 1);
            for v in 0..50 {
                tls.handshake_latency.record(300 + v).unwrap_or_else(|e| panic!("{e}"));
            }
            w.errors.tls = 1;
            w.tls = Some(tls);
            w
        })
        .collect();
    Report::from_workers(meta, &workers).unwrap_or_else(|e| panic!("from_workers: {e}"))
}

#[test]
fn tls_and_churn_reports_match_the_schema_and_merge() {
    let v = validator();
    let report = tls_report();
    let json = to_json(&report);
    assert_eq!(json["config"]["requests_per_conn"], 10);
    assert_eq!(json["config"]["tls"]["trust"], "insecure");
    assert_eq!(json["config"]["tls"]["version"], "1.3");
    assert_eq!(json["tls"]["groups"]["secp256r1"], 50);
    assert_eq!(json["tls"]["handshakes"]["resumed"], 92);
    assert_eq!(json["tls"]["handshake_latency"]["count"], 100);
    assert_eq!(json["connections"]["opened"], 100);
    assert_eq!(json["errors"]["tls"], 2);
    assert_valid(&v, &json);

    let merged = merge(vec![report.clone(), report.clone(), build(false, false)]).unwrap_or_else(|e| panic!("{e}"));
    let json = to_json(&merged);
    assert_eq!(json["tls"]["versions"]["TLSv1.3"], 200, "the plaintext report adds nothing to the TLS part");
    assert_eq!(json["tls"]["failures"]["handshake timed out"], 4);
    assert_eq!(json["tls"]["handshake_latency"]["count"], 200);
    assert_eq!(json["connections"]["opened"], 200);
    assert_valid(&v, &json);
    let back: Report = serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(to_json(&back), json);
}

#[test]
fn a_report_from_before_tls_still_reads() {
    let mut json = to_json(&build(false, false));
    let o = json.as_object_mut().unwrap_or_else(|| panic!("an object"));
    o.remove("tls");
    for (part, field) in
        [("config", "tls"), ("config", "requests_per_conn"), ("errors", "tls"), ("connections", "opened")]
    {
        o.get_mut(part).and_then(Value::as_object_mut).map(|p| p.remove(field));
    }
    let old: Report = serde_json::from_value(json).unwrap_or_else(|e| panic!("{e}"));
    assert!(old.tls.is_none() && old.config.requests_per_conn.is_none());
    assert_eq!((old.errors.tls, old.connections.opened), (0, 0));
}
