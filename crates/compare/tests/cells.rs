//! The void rules, on real processes and real loadgen runs: a peer that answers one request with 500 voids
//! its run; a peer whose body differs from the reference's voids its cell with the first difference; the
//! same answers pass. Peers are `compare floor` with a chosen body, or this test binary itself re-executed
//! as a small server (`fake_peer`).

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use compare::cells::{self, CheckInput, Reference, RunInput, ServerSpec};
use compare::deps::Database;
use compare::records::{Kind, Record};
use compare::workloads::{self, LoadSpec, Plan};

const HELLO: &str = r#"{"message":"Hello from Flight!"}"#;

/// Not a test of its own: when re-executed with FAKE_PEER_PORT set, this test binary serves the hello body on
/// that port, except request number FAKE_PEER_FAIL_AT (counted over all connections), which gets a 500.
#[test]
fn fake_peer() {
    let Ok(port) = std::env::var("FAKE_PEER_PORT") else { return };
    let fail_at: u64 = std::env::var("FAKE_PEER_FAIL_AT").ok().and_then(|v| v.parse().ok()).unwrap_or(u64::MAX);
    let listener = TcpListener::bind(("127.0.0.1", port.parse::<u16>().expect("port"))).expect("bind");
    let served = Arc::new(AtomicU64::new(0));
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let served = Arc::clone(&served);
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                // Requests are bodiless GETs: one per "\r\n\r\n".
                while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    buf.drain(..end + 4);
                    let n = served.fetch_add(1, Ordering::SeqCst) + 1;
                    let (status, body) =
                        if n == fail_at { ("500 Internal Server Error", "{}") } else { ("200 OK", HELLO) };
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        });
    }
}

fn fake_peer_spec(fail_at: u64) -> ServerSpec {
    let exe = std::env::current_exe().expect("test binary");
    let mut spec = ServerSpec::new("fake", exe);
    spec.args = ["fake_peer", "--exact", "--nocapture", "--test-threads", "1"].map(String::from).to_vec();
    spec.env = vec![("FAKE_PEER_PORT".into(), "{port}".into()), ("FAKE_PEER_FAIL_AT".into(), fail_at.to_string())];
    spec
}

fn floor_spec(body: &str) -> ServerSpec {
    let mut spec = ServerSpec::new("floor", common::compare_exe());
    spec.args = ["floor", "--port", "{port}", "--body", body].map(String::from).to_vec();
    spec
}

fn record(runtime: &str, kind: Kind) -> Record {
    Record::new(&common::meta(), "hello-bare", runtime, Some("test 1.0"), kind, 1)
}

fn run_against(spec: &ServerSpec, logdir: &std::path::Path) -> Record {
    run_with_databases(spec, logdir, Vec::new())
}

fn run_with_databases(spec: &ServerSpec, logdir: &std::path::Path, databases: Vec<Database>) -> Record {
    let bench = common::bench(logdir, Duration::from_millis(1500));
    let mut load = LoadSpec::get("/api/hello", 4);
    load.expect_status = vec![200];
    let input = RunInput {
        spec,
        ready_path: "/api/hello",
        load: &load,
        prime: None,
        also_ok: &[],
        rate: None,
        tag: "run",
        databases,
    };
    let mut rec = record(&spec.name, Kind::Closed);
    cells::measure(&bench, &input, &mut rec);
    rec
}

#[test]
fn one_500_voids_the_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Request 1 is the readiness poll; 200 lands well inside a 1.5 s run even from a debug loadgen.
    let rec = run_against(&fake_peer_spec(200), dir.path());
    assert!(rec.void, "a 500 must void the run: {rec:?}");
    let reason = rec.void_reason.as_deref().unwrap_or("");
    assert!(reason.contains("unexpected statuses 500: 1"), "reason: {reason}");
    assert_eq!(rec.statuses.get(&500), Some(&1));
    assert!(rec.requests.is_some_and(|n| n > 200), "{rec:?}");
    common::assert_valid(&common::validator(), &serde_json::to_value(&rec).expect("json"));
}

#[test]
fn clean_peer_run_counts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rec = run_against(&fake_peer_spec(u64::MAX), dir.path());
    assert!(!rec.void, "{rec:?}");
    assert!(rec.req_per_s.is_some_and(|r| r > 0.0));
    assert!(rec.server_cpu_us_per_resp.is_some_and(|c| c > 0.0), "{rec:?}");
    assert!(rec.rss_idle_kib.is_some_and(|r| r > 0) && rec.rss_after_kib.is_some_and(|r| r > 0));
    assert!(rec.server_busy_pct.is_some() && rec.loader_bound.is_some());
    assert_eq!(rec.errors.values().sum::<u64>(), 0);
    common::assert_valid(&common::validator(), &serde_json::to_value(&rec).expect("json"));
}

/// Stands in for a database server's process tree: a real process whose CPU the window reads and whose exit
/// it must notice. (The real PostgreSQL and Redis are measured by the notes tests.)
fn database_process(lifetime: &str) -> std::process::Child {
    std::process::Command::new("sleep").arg(lifetime).spawn().expect("sleep")
}

#[test]
fn a_database_that_exits_mid_run_voids_it_and_a_live_one_is_measured() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut live = database_process("30");
    let mut dying = database_process("0.3");
    let databases = vec![Database { name: "postgres", pid: live.id() }, Database { name: "redis", pid: dying.id() }];
    // The settle before the window (half a second) outlasts 0.3 s: the dying one is gone when it is checked.
    let rec = run_with_databases(&fake_peer_spec(u64::MAX), dir.path(), databases);
    let reason = rec.void_reason.as_deref().unwrap_or("");
    assert!(rec.void && reason.contains(&format!("redis (pid {}) exited during the run", dying.id())), "{rec:?}");
    assert!(!reason.contains("postgres"), "the live one is not blamed: {reason}");
    assert!(rec.postgres_cpu_us_per_resp.is_some_and(|us| us >= 0.0), "{rec:?}");
    assert!(rec.server_kernel_pct.is_some_and(|p| (0.0..=100.0).contains(&p)), "{rec:?}");
    common::assert_valid(&common::validator(), &serde_json::to_value(&rec).expect("json"));
    let _ = live.kill();
    let _ = live.wait();
    let _ = dying.wait();
}

fn check(
    spec: &ServerSpec,
    reference: Option<Reference<'_>>,
    logdir: &std::path::Path,
) -> (Record, Vec<workloads::Outcome>) {
    let bench = common::bench(logdir, Duration::from_secs(1));
    let plan = Plan::hello(workloads::by_name("hello-bare").expect("workload"));
    let input = CheckInput {
        spec,
        ready_path: &plan.ready_path,
        probes: &plan.probes,
        only: None,
        content_type_essence: false,
        reference,
    };
    let mut rec = record(&spec.name, Kind::Check);
    let answers = cells::check(&bench, &input, &mut rec);
    (rec, answers)
}

#[test]
fn body_mismatch_voids_the_cell() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (rust, answers) = check(&floor_spec(HELLO), None, dir.path());
    assert!(!rust.void, "the reference passes its own check: {rust:?}");
    assert!(rust.startup_ms.is_some() && rust.rss_idle_kib.is_some());
    let reference = Reference { runtime: "rust", answers: &answers };

    let (same, _) = check(&floor_spec(HELLO), Some(reference), dir.path());
    assert!(!same.void, "identical answers pass: {same:?}");

    let (peer, _) = check(&floor_spec(r#"{"message":"Hello from Bun!"}"#), Some(reference), dir.path());
    assert!(peer.void);
    let reason = peer.void_reason.as_deref().unwrap_or("");
    assert!(reason.contains("differ from rust's answers"), "reason: {reason}");
    assert!(reason.contains("body differs at byte 23"), "the first difference is named: {reason}");
    assert!(reason.contains("differ from the contract"), "the hello contract is checked too: {reason}");
    let v = common::validator();
    for rec in [&rust, &same, &peer] {
        common::assert_valid(&v, &serde_json::to_value(rec).expect("json"));
    }
}

#[test]
fn a_server_that_never_answers_200_voids_the_cell() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut spec = floor_spec(HELLO);
    spec.args = ["floor", "--port", "{port}", "--body", "not json"].map(String::from).to_vec();
    let (rec, answers) = check(&spec, None, dir.path());
    assert!(rec.void && answers.is_empty());
    let reason = rec.void_reason.as_deref().unwrap_or("");
    assert!(reason.contains("did not start") && reason.contains("exit status: 64"), "reason: {reason}");
}
