//! The void rules, on real processes and real loadgen runs: a peer that answers one request with 500 voids
//! its run; a peer whose body differs from the reference's voids its cell with the first difference; the
//! same answers pass. Peers are `compare floor` with a chosen body, or testkit's `fake-peer` (a hello server
//! that answers one chosen request with 500).

mod common;

use std::time::Duration;

use compare::plan::load_spec::LoadSpec;
use compare::plan::probe;
use compare::plan::server_spec::ServerSpec;
use compare::plan::workload_plan::Plan;
use compare::plan::workloads::Workload;
use compare::records::{Kind, Record};
use compare::run::cells::{self, CheckInput, Reference, RunInput};
use compare::run::deps::{Database, Dependency};

const HELLO: &str = r#"{"message":"Hello from Flight!"}"#;

fn fake_peer_spec(fail_at: u64) -> ServerSpec {
    let mut spec = ServerSpec::new("fake", testkit::workspace::binary("fake-peer"));
    spec.args = vec!["--port".into(), "{port}".into(), "--fail-at".into(), fail_at.to_string()];
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
        cache_url: None,
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

/// Stands in for a database server's process tree: a real process that spins (at the lowest priority, so it
/// takes only idle CPU) for `lifetime`, whose CPU the window reads and whose exit it must notice. (The real
/// PostgreSQL and Redis are measured by the notes tests.) One process, bash itself (nice execs it), which
/// ends on its own clock: a `timeout` in between would leave its spinning child behind when killed.
fn database_process(lifetime: Duration) -> std::process::Child {
    let spin = r#"end=$(( ${EPOCHREALTIME/./} + $1 )); while (( ${EPOCHREALTIME/./} < end )); do :; done"#;
    std::process::Command::new("nice")
        .args(["-n", "19", "bash", "-c", spin, "spin", &lifetime.as_micros().to_string()])
        .spawn()
        .expect("nice bash")
}

#[test]
fn a_database_that_exits_mid_run_voids_it_and_a_live_one_is_measured() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut live = database_process(Duration::from_secs(30));
    let mut dying = database_process(Duration::from_millis(300));
    let databases = vec![
        Database { kind: Dependency::Postgres, pid: live.id() },
        Database { kind: Dependency::Redis, pid: dying.id() },
    ];
    // The settle before the window (half a second) outlasts 0.3 s: the dying one is gone when it is checked.
    let rec = run_with_databases(&fake_peer_spec(u64::MAX), dir.path(), databases);
    let reason = rec.void_reason.as_deref().unwrap_or("");
    assert!(rec.void && reason.contains(&format!("redis (pid {}) exited during the run", dying.id())), "{rec:?}");
    assert!(!reason.contains("postgres"), "the live one is not blamed: {reason}");
    assert!(rec.postgres_cpu_us_per_resp.is_some_and(|us| us > 0.0), "a spinning database has CPU: {rec:?}");
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
) -> (Record, Vec<probe::Outcome>) {
    let bench = common::bench(logdir, Duration::from_secs(1));
    let plan = Plan::hello(Workload::HelloBare);
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
