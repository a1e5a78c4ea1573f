//! An N-core layout end to end: the server on both cores of this machine (loadgen shares one of them, which
//! is fine for a smoke test and warned about), rust with 2 workers, the Node peer as a cluster of 2 and Bun
//! as 2 processes sharing the port. Every cell must pass its check and count; koa and the floor are one
//! process by definition and must be left out, saying so.

mod common;

use compare::records::{self, Kind};

#[test]
fn two_core_layout_runs_every_scaling_runtime() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(cpus >= 2, "an N-core layout needs at least 2 CPUs; this machine has {cpus}");
    common::loadgen();
    let out = tempfile::tempdir().expect("temp dir");
    let run = common::compare_into(&common::bin_dir(), out.path())
        .args(["--quick", "--workloads", "hello-bare", "--tail-rate", "0", "--startup-runs", "1"])
        .args(["--server-cores", "0,1", "--loader-cores", "1"])
        .output()
        .expect("run compare");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "compare failed ({}):\n{stderr}", run.status);
    assert!(stderr.contains("koa, floor run as one process; left out of this 2-core layout"), "{stderr}");

    let jsonl: Vec<_> = common::jsonl_files(out.path());
    let recs = records::read_jsonl(&jsonl).expect("records");
    let runtimes: Vec<&str> = recs.iter().filter(|r| r.kind == Kind::Check).map(|r| r.runtime.as_str()).collect();
    assert_eq!(runtimes, ["rust", "bun", "node"]);
    for r in &recs {
        assert!(!r.void, "{} {}: {:?}", r.runtime, r.kind.as_str(), r.void_reason);
        assert_eq!(r.layout.server_cores, "0,1");
    }
    for rt in ["rust", "bun", "node"] {
        let closed: Vec<_> = recs.iter().filter(|r| r.runtime == rt && r.kind == Kind::Closed).collect();
        assert_eq!(closed.len(), 1, "{rt}");
        assert!(closed[0].req_per_s.is_some_and(|x| x > 0.0) && closed[0].server_cpu_us_per_resp.is_some(), "{rt}");
    }
}
