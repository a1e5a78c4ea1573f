//! `--connections` as a list, end to end on the debug builds: every closed- and open-loop round runs each
//! runtime at each count, the open loop at one rate for all of them, and the report adds the sweep's section
//! and charts while its other tables read the headline count. No figure is asserted.

mod common;

use compare::records::{self, Kind};

#[test]
fn a_sweep_runs_every_runtime_at_every_count_and_reports_them() {
    let bin_dir = common::bin_dir();
    assert!(bin_dir.join("flight-rs").is_file(), "flight-rs not built: `cargo build -p flight`");
    let out = tempfile::tempdir().expect("temp dir");
    let (server, loader) = common::cores();
    let run = common::compare_into(&bin_dir, out.path())
        .args(["--workloads", "hello-bare", "--runtimes", "rust,bun,floor", "--connections", "8,40"])
        .args(["--quick", "--duration", "1s", "--warmup", "300ms", "--startup-runs", "1"])
        .args(["--server-cores", &server, "--loader-cores", &loader, "--db-cores", &loader])
        .output()
        .expect("run compare");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "compare failed ({}):\n{stderr}", run.status);

    let files: Vec<_> = common::result_files(out.path());
    let jsonl = files.iter().find(|p| p.extension().is_some_and(|x| x == "jsonl")).expect("records").clone();
    let recs = records::read_jsonl(std::slice::from_ref(&jsonl)).expect("records");
    let mut rates = Vec::new();
    for runtime in ["rust", "bun", "floor"] {
        for kind in [Kind::Closed, Kind::Open] {
            let mut counts: Vec<u32> = recs
                .iter()
                .filter(|r| r.runtime == runtime && r.kind == kind && !r.void)
                .filter_map(|r| r.connections)
                .collect();
            counts.sort_unstable();
            assert_eq!(counts, [8, 40], "{runtime} {kind:?}:\n{stderr}");
        }
        rates.extend(recs.iter().filter(|r| r.runtime == runtime && r.kind == Kind::Open).filter_map(|r| r.rate));
    }
    assert!(rates.windows(2).all(|w| w[0] == w[1]), "one open-loop rate for every cell: {rates:?}");

    let md = std::fs::read_to_string(jsonl.with_extension("md")).expect("markdown");
    // hello-bare's own 100 connections: 40 is the nearest listed count, so the tables read 40.
    assert!(md.contains("\n40 connections, runs of"), "{md}");
    assert!(md.contains("### hello-bare: connections 8, 40 (the tables above: 40)"), "{md}");
    assert!(md.contains("Open loop at ") && md.contains("at every count"), "{md}");
    assert!(md.contains("p99.9 growth from 8 to 40 connections at that rate: rust ×"), "{md}");
    for chart in ["hello-bare-connections.svg", "hello-bare-connections-p999.svg"] {
        assert!(files.iter().any(|f| f.to_string_lossy().ends_with(chart)), "{chart} in {files:?}");
        assert!(md.contains(chart), "{chart} linked");
    }
}
