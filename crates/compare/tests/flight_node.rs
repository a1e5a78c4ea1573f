//! flight-node, the real Flight 2.0.2 from the npm registry, end to end: in hello-default it is checked
//! against flight-rs and measured like every runtime (the cluster primary's CPU and RSS included), and with
//! a Redis that does not answer its cell fails at once with the reason, never hangs.

mod common;

use std::net::TcpListener;

use compare::records::{self, Kind};

fn run_hello_default(extra: &[&str]) -> (std::process::Output, Vec<records::Record>, tempfile::TempDir) {
    let bin_dir = common::bin_dir();
    let out = tempfile::tempdir().expect("temp dir");
    let (server, loader) = common::cores();
    let run = common::compare_into(&bin_dir, out.path())
        .args(["--quick", "--duration", "1s", "--warmup", "500ms", "--startup-runs", "1", "--tail-rate", "0"])
        .args(["--workloads", "hello-default", "--runtimes", "rust,flight-node"])
        .args(["--server-cores", &server, "--loader-cores", &loader, "--db-cores", &loader])
        .args(extra)
        .output()
        .expect("run compare");
    let files = common::jsonl_files(out.path());
    let v = common::validator();
    for line in files
        .iter()
        .flat_map(|f| std::fs::read_to_string(f).expect("jsonl").lines().map(String::from).collect::<Vec<_>>())
    {
        common::assert_valid(&v, &serde_json::from_str(&line).expect("JSON line"));
    }
    let recs = records::read_jsonl(&files).expect("records");
    (run, recs, out)
}

#[test]
fn flight_node_is_checked_and_measured_in_hello_default() {
    let (run, recs, _out) = run_hello_default(&[]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "compare failed ({}):\n{stderr}", run.status);
    let of = |k: Kind| recs.iter().filter(move |r| r.runtime == "flight-node" && r.kind == k).collect::<Vec<_>>();
    let check = of(Kind::Check);
    assert_eq!(check.len(), 1);
    assert!(!check[0].void, "{:?}\n{stderr}", check[0].void_reason);
    let version = check[0].runtime_version.as_deref().unwrap_or("");
    assert!(version.starts_with("flight 2.0.2 on node v22."), "{version}");
    let closed = of(Kind::Closed);
    assert_eq!(closed.len(), 1);
    assert!(!closed[0].void, "{:?}", closed[0].void_reason);
    assert!(closed[0].req_per_s.is_some_and(|x| x > 0.0));
    assert!(closed[0].server_cpu_us_per_resp.is_some_and(|x| x > 0.0));
    // The cluster primary and its worker: two Node processes' memory, far above one worker's.
    assert!(closed[0].rss_after_kib.is_some_and(|kib| kib > 60 * 1024), "{:?}", closed[0].rss_after_kib);
    assert_eq!(of(Kind::Startup).len(), 1);
}

#[test]
fn flight_node_without_redis_fails_its_cell_with_the_reason() {
    // A port that was just free: nothing answers there.
    let dead = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let url = format!("redis://127.0.0.1:{dead}");
    let started = std::time::Instant::now();
    let (run, recs, _out) = run_hello_default(&["--redis-url", &url]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "a voided cell gives exit 2:\n{stderr}");
    let check: Vec<_> = recs.iter().filter(|r| r.runtime == "flight-node" && r.kind == Kind::Check).collect();
    assert!(check[0].void, "{check:?}");
    let reason = check[0].void_reason.as_deref().unwrap_or("");
    assert!(reason.contains(&format!("Redis at 127.0.0.1:{dead}: PING")), "{reason}");
    assert!(!recs.iter().any(|r| r.runtime == "flight-node" && r.kind == Kind::Closed));
    // rust needs no Redis in hello-default and is still measured.
    assert!(recs.iter().any(|r| r.runtime == "rust" && r.kind == Kind::Closed && !r.void));
    assert!(started.elapsed() < std::time::Duration::from_secs(120), "took {:?}", started.elapsed());
}
