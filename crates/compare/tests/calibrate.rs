//! `compare calibrate`: wrk's output parsed as wrk 4.1 (Debian) really prints it, a quick calibration on the
//! real floor with the real wrk and loadgen (debug builds next to this test), and the failures: no wrk, bad
//! flags. Nothing is skipped: without wrk the end-to-end test fails with the step that installs it.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use compare::calibrate::wrk::{SocketErrors, parse_wrk};

/// `taskset -c 1 wrk -t 1 -c 100 -d 2s --latency` against `compare floor` (debug build) on core 0.
const WRK_OK: &str = "\
Running 2s test @ http://127.0.0.1:38411/api/hello
  1 threads and 100 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   542.42us  451.23us   8.74ms   98.02%
    Req/Sec   139.94k    22.38k  177.97k    65.00%
  Latency Distribution
     50%  477.00us
     75%  607.00us
     90%  739.00us
     99%    2.34ms
  278416 requests in 2.00s, 27.35MB read
Requests/sec: 138963.01
Transfer/sec:     13.65MB
";

/// `wrk -t 1 -c 20 -d 1s --latency` on a path the Node hello peer answers 404.
const WRK_404: &str = "\
Running 1s test @ http://127.0.0.1:38412/nope
  1 threads and 20 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.69ms    3.44ms  38.33ms   90.27%
    Req/Sec    36.30k    27.48k   72.00k    70.00%
  Latency Distribution
     50%  379.00us
     75%    1.05ms
     90%    4.99ms
     99%   17.08ms
  36120 requests in 1.00s, 6.30MB read
  Non-2xx or 3xx responses: 36120
Requests/sec:  36089.04
Transfer/sec:      6.30MB
";

/// `wrk -t 1 -c 10 -d 2s --timeout 1s --latency` against a listener that reads each request and closes the
/// connection without answering.
const WRK_SOCKET_ERRORS: &str = "\
Running 2s test @ http://127.0.0.1:38414/api/hello
  1 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     0.00us    0.00us   0.00us    -nan%
    Req/Sec     0.00      0.00     0.00      -nan%
  Latency Distribution
     50%    0.00us
     75%    0.00us
     90%    0.00us
     99%    0.00us
  0 requests in 2.01s, 0.00B read
  Socket errors: connect 0, read 10, write 0, timeout 0
Requests/sec:      0.00
Transfer/sec:       0.00B
";

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6 * b.abs().max(1.0)
}

#[test]
fn wrk_parser_reads_real_output() {
    let ok = parse_wrk(WRK_OK).expect("clean run");
    assert_eq!(ok.requests, 278_416);
    assert!(close(ok.duration_s, 2.0) && close(ok.req_per_s, 138_963.01), "{ok:?}");
    assert!(close(ok.latency_avg_us, 542.42) && close(ok.p50_us, 477.0) && close(ok.p99_us, 2340.0), "{ok:?}");
    assert_eq!((ok.socket_errors, ok.non_2xx_3xx), (SocketErrors::default(), 0));

    let not_found = parse_wrk(WRK_404).expect("404 run");
    assert_eq!((not_found.requests, not_found.non_2xx_3xx), (36_120, 36_120));
    assert!(close(not_found.p99_us, 17_080.0) && close(not_found.latency_avg_us, 1690.0), "{not_found:?}");

    let broken = parse_wrk(WRK_SOCKET_ERRORS).expect("socket errors run");
    assert_eq!(broken.socket_errors, SocketErrors { connect: 0, read: 10, write: 0, timeout: 0 });
    assert_eq!((broken.requests, broken.req_per_s), (0, 0.0));
    assert!(close(broken.duration_s, 2.01));

    // Without --latency there are no percentiles; without a run there is nothing at all.
    let no_latency: String =
        WRK_OK.lines().filter(|l| !l.trim_start().starts_with(['5', '9'])).map(|l| format!("{l}\n")).collect();
    let err = parse_wrk(&no_latency).expect_err("no percentiles").to_string();
    assert!(err.contains("50%"), "{err}");
    assert!(parse_wrk("unable to connect to 127.0.0.1:38413 Connection refused\n").is_err());
}

fn calibrate(args: &[&str], path: Option<&Path>) -> Output {
    let mut cmd = Command::new(common::compare_exe());
    cmd.arg("calibrate").args(args);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    cmd.output().expect("run compare calibrate")
}

#[test]
fn quick_calibration_on_the_floor_and_node() {
    assert!(
        compare::calibrate::wrk::find().is_some(),
        "wrk not found on PATH: run `bash bench/setup.sh` (it installs wrk), or `apt-get install wrk`"
    );
    common::loadgen();
    let out = tempfile::tempdir().expect("temp dir");
    let (server, loader) = common::cores();
    let bin_dir = common::bin_dir();
    let run = calibrate(
        &[
            "--quick",
            "--servers",
            "floor,node",
            "--server-cores",
            &server,
            "--loader-cores",
            &loader,
            "--bin-dir",
            bin_dir.to_str().expect("utf-8 bin dir"),
            "--out-dir",
            out.path().to_str().expect("utf-8 out dir"),
        ],
        None,
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    // 0 agree, 1 disagree: both are calibrations; 2 means a run failed or nothing could be judged (the Node
    // peer is server-bound on any machine this runs on, so it is judged).
    assert!(matches!(run.status.code(), Some(0 | 1)), "compare calibrate exited {}:\n{stdout}\n{stderr}", run.status);

    let files: Vec<_> = std::fs::read_dir(out.path()).expect("out dir").flatten().map(|e| e.path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    assert!(name.ends_with("-calibrate.md"), "{name}");
    let md = std::fs::read_to_string(&files[0]).expect("markdown");
    assert_eq!(stdout, md);
    for needle in [
        "| floor | 1 | loadgen |",
        "| floor | 1 | wrk |",
        "| node | 1 | loadgen |",
        "| node | 1 | wrk |",
        "| floor | 1 | loadgen-epoll |",
        "| node | 1 | loadgen-epoll |",
        "## Loader efficiency",
        "- loaders: wrk ",
        "loadgen 0.",
        "- machine: ",
        "- command: `",
        " calibrate --quick --servers floor,node",
        "Judged on throughput only",
        "**Verdict: ",
    ] {
        assert!(md.contains(needle), "the Markdown lacks {needle:?}:\n{md}");
    }
    for server in ["floor", "node"] {
        let said = ["agree", "disagree", "inconclusive", "loader-bound"]
            .iter()
            .any(|w| md.contains(&format!("- {server}: **{w}**")));
        assert!(said, "no verdict for {server}:\n{md}");
    }
    // 0 exactly when no judged server disagrees or is inconclusive (a loader-bound one is not judged). The
    // floor is usually loader-bound here, but with its core fully busy it is judged too.
    let unsettled = ["floor", "node"]
        .iter()
        .any(|s| md.contains(&format!("- {s}: **disagree**")) || md.contains(&format!("- {s}: **inconclusive**")));
    assert_eq!(run.status.code() == Some(0), !unsettled, "{md}");
    // Every loader's own CPU was read at its exit, so every efficiency cell has a figure.
    let efficiency = md.split("## Loader efficiency").nth(1).expect("efficiency section");
    for server in ["floor", "node"] {
        let row = efficiency.lines().find(|l| l.starts_with(&format!("| {server} |"))).expect("efficiency row");
        assert!(!row.contains("| – |"), "a loader's CPU is missing: {row}");
    }
}

#[test]
fn missing_wrk_names_the_install_step() {
    // A PATH with taskset and nothing else: wrk is missing, everything else is there.
    let dir = tempfile::tempdir().expect("temp dir");
    let taskset = ["/usr/bin/taskset", "/bin/taskset"].into_iter().find(|p| Path::new(p).is_file());
    std::os::unix::fs::symlink(taskset.expect("taskset (util-linux) installed"), dir.path().join("taskset"))
        .expect("link taskset");
    common::loadgen();
    let out = tempfile::tempdir().expect("out dir");
    let bin_dir = common::bin_dir();
    let run = calibrate(
        &[
            "--quick",
            "--servers",
            "floor",
            "--bin-dir",
            bin_dir.to_str().expect("utf-8 bin dir"),
            "--out-dir",
            out.path().to_str().expect("utf-8 out dir"),
        ],
        Some(dir.path()),
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    for needle in ["missing prerequisites", "wrk not found on PATH", "bash bench/setup.sh", "apt-get install wrk"] {
        assert!(stderr.contains(needle), "stderr lacks {needle:?}:\n{stderr}");
    }
    assert!(!stderr.contains("loadgen not found"), "{stderr}");
    assert!(std::fs::read_dir(out.path()).expect("out dir").next().is_none(), "nothing was written");
}

#[test]
fn bad_flags_exit_64() {
    for args in [
        &["--runs", "0"][..],
        &["--duration", "1500ms"],
        &["--warmup", "soon"],
        &["--servers", "bun"],
        &["--connections", "0"],
        &["--loader-cores", "x"],
        &["--nope"],
    ] {
        let out = calibrate(args, None);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
