//! `compare calibrate`: wrk's and h2load's output parsed as wrk 4.1 and nghttp2 1.52 (Debian) really print
//! them, quick calibrations on the real floor and peers with the real wrk, h2load and loadgen (debug builds
//! next to this test), and the failures: no wrk, no h2load, bad flags. Nothing is skipped: without wrk or
//! h2load the end-to-end tests fail with the step that installs it.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use compare::calibrate::h2load::parse_h2load;
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

/// `h2load -c 2 -m 4 -D 2` against a node:http2 h2c server (nghttp2 1.52.0).
const H2LOAD_OK: &str = "\
starting benchmark...
spawning thread #0: 2 total client(s). Timing-based test with 0s of warm-up time and 2s of main duration for measurements.
Warm-up started for thread #0.
Warm-up phase is over for thread #0.
Main benchmark duration is started for thread #0.
Application protocol: h2c
Main benchmark duration is over for thread #0. Stopping all clients.
Stopped all clients for thread #0

finished in 2.00s, 43604.00 req/s, 936.87KB/s
requests: 87208 total, 87216 started, 87208 done, 87208 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 87208 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 1.83MB (1918704) total, 170.42KB (174508) headers (space savings 95.35%), 170.33KB (174416) data
                     min         max         mean         sd        +/- sd
time for request:       64us     23.92ms       178us       307us    98.57%
time for connect:       80us       117us        98us        26us   100.00%
time to 1st byte:     1.99ms      2.01ms      2.00ms        17us   100.00%
req/s           :   21778.48    21822.77    21800.62       31.32   100.00%
";

#[test]
fn h2load_output_parses_and_names_what_it_lacks() {
    let o = parse_h2load(H2LOAD_OK).expect("parse");
    assert_eq!((o.succeeded, o.failed, o.errored, o.timeout, o.non_2xx), (87208, 0, 0, 0, 0));
    assert_eq!(o.req_per_s, 43604.0);
    assert_eq!(o.duration_s, 2.0);
    assert_eq!(o.protocol.as_deref(), Some("h2c"));
    assert_eq!(o.mean_us, 178.0);
    let errors = H2LOAD_OK
        .replace("87208 succeeded, 0 failed", "87000 succeeded, 208 failed")
        .replace("87208 2xx, 0 3xx, 0 4xx", "87000 2xx, 0 3xx, 208 4xx");
    let o = parse_h2load(&errors).expect("parse");
    assert_eq!((o.succeeded, o.failed, o.non_2xx), (87000, 208, 208));
    // No ALPN agreed (an HTTP/1.1-only server over TLS): h2load prints no protocol line.
    let none = H2LOAD_OK.replace("Application protocol: h2c\n", "");
    assert_eq!(parse_h2load(&none).expect("parse").protocol, None);
    let err = parse_h2load(&H2LOAD_OK.replace("finished in", "ended in")).expect_err("no finish").to_string();
    assert!(err.contains("finished in"), "{err}");
    let err = parse_h2load(&H2LOAD_OK.replace("time for request:", "time:")).expect_err("no mean").to_string();
    assert!(err.contains("time for request"), "{err}");
    assert!(parse_h2load("connect to 127.0.0.1:1 failed: Connection refused\n").is_err());
}

fn calibrate(args: &[&str], path: Option<&Path>) -> Output {
    let mut cmd = Command::new(common::compare_exe());
    cmd.arg("calibrate").args(args);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    cmd.output().expect("run compare calibrate")
}

/// `compare calibrate --quick ARGS` on the test's cores into a fresh folder: its exit code (0 or 1, or 2 with
/// every server loader-bound; else the test fails with its output) and its Markdown, checked to be the one file written and what stdout printed.
fn quick_calibration(args: &[&str]) -> (i32, String) {
    common::loadgen();
    let out = tempfile::tempdir().expect("temp dir");
    let (server, loader) = common::cores();
    let bin_dir = common::bin_dir();
    let mut argv = vec!["--quick", "--server-cores", &server, "--loader-cores", &loader];
    argv.extend(["--bin-dir", bin_dir.to_str().expect("utf-8 bin dir")]);
    argv.extend(["--out-dir", out.path().to_str().expect("utf-8 out dir")]);
    argv.extend(args);
    let run = calibrate(&argv, None);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    let code = run.status.code().unwrap_or(-1);
    // Every server loader-bound is an outcome calibrate reports (exit 2, "incomplete"), not a failure of the
    // tool: beside other tests on 2 cores a debug TLS server stayed under 90% busy with wrk (88%) in a
    // clean-clone run. Any other exit 2 (a run that failed) still fails the test.
    let verdicts: Vec<&str> = stdout.lines().filter(|l| l.starts_with("- ") && l.contains(": **")).collect();
    let loader_bound = code == 2 && !verdicts.is_empty() && verdicts.iter().all(|l| l.contains("**loader-bound**"));
    assert!(matches!(code, 0 | 1) || loader_bound, "compare calibrate exited {}:\n{stdout}\n{stderr}", run.status);
    let files = common::result_files(out.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    assert!(name.ends_with("-calibrate.md"), "{name}");
    let md = std::fs::read_to_string(&files[0]).expect("markdown");
    assert_eq!(stdout, md);
    (code, md)
}

#[test]
fn quick_calibration_on_the_floor_and_node() {
    assert!(
        compare::calibrate::wrk::find().is_some(),
        "wrk not found on PATH: run `bash bench/setup.sh` (it installs wrk), or `apt-get install wrk`"
    );
    // 0 agree, 1 disagree: both are calibrations; 2 means a run failed or nothing could be judged (the Node
    // peer is server-bound on any machine this runs on, so it is judged).
    let (code, md) = quick_calibration(&["--servers", "floor,node"]);
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
        " calibrate --quick --server-cores ",
        " --servers floor,node",
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
    // 0 exactly when no judged server disagrees or is inconclusive (a loader-bound one is not judged), 2 when
    // none was judged. The floor is usually loader-bound here, but with its core fully busy it is judged too.
    let unsettled = ["floor", "node"]
        .iter()
        .any(|s| md.contains(&format!("- {s}: **disagree**")) || md.contains(&format!("- {s}: **inconclusive**")));
    let none_judged = ["floor", "node"].iter().all(|s| md.contains(&format!("- {s}: **loader-bound**")));
    assert_eq!(code == 2, none_judged, "{md}");
    if !none_judged {
        assert_eq!(code == 0, !unsettled, "{md}");
    }
    // Every loader's own CPU was read at its exit, so every efficiency cell has a figure.
    let efficiency = md.split("## Loader efficiency").nth(1).expect("efficiency section");
    for server in ["floor", "node"] {
        let row = efficiency.lines().find(|l| l.starts_with(&format!("| {server} |"))).expect("efficiency row");
        assert!(!row.contains("| – |"), "a loader's CPU is missing: {row}");
    }
}

#[test]
fn quick_http2_calibration_against_h2load_on_rust_bun_and_node() {
    assert!(
        compare::calibrate::h2load::find().is_some(),
        "h2load not found on PATH: {}",
        compare::calibrate::h2load::H2LOAD_HINT
    );
    // 0 agree, 1 disagree or inconclusive (one short round on a shared VM): both are calibrations; 2 is a run
    // that failed (h2load or loadgen errors, a protocol other than h2c).
    let (_, md) = quick_calibration(&["--http2"]);
    for needle in [
        "# loadgen vs h2load calibration",
        "- loaders: h2load nghttp2/",
        "HTTP/2 by prior knowledge (h2c), 16 streams per connection",
        "request headers `user-agent: compare-calibrate` from both",
        "16 connections",
        " -m 16 ",
        "-H 'user-agent: compare-calibrate'",
        "--http2 --streams 16",
        "| loadgen ÷ h2load |",
        "## Loader efficiency",
        "no target is set against h2load here",
    ] {
        assert!(md.contains(needle), "the Markdown lacks {needle:?}:\n{md}");
    }
    for server in ["rust", "bun", "node"] {
        for loader in ["loadgen", "loadgen-epoll", "h2load"] {
            let row = format!("| {server} | 1 | {loader} |");
            assert!(md.contains(&row), "the Markdown lacks {row:?}:\n{md}");
        }
        let said = ["agree", "disagree", "inconclusive", "loader-bound"]
            .iter()
            .any(|w| md.contains(&format!("- {server}: **{w}**")));
        assert!(said, "no verdict for {server}:\n{md}");
        let efficiency = md.split("## Loader efficiency").nth(1).expect("efficiency section");
        let row = efficiency.lines().find(|l| l.starts_with(&format!("| {server} |"))).expect("efficiency row");
        assert!(!row.contains("| – |"), "a loader's CPU is missing: {row}");
    }
}

#[test]
fn quick_tls_calibrations_against_wrk_and_h2load_on_rust() {
    let (_, md) = quick_calibration(&["--tls", "--servers", "rust"]);
    for needle in [
        "# loadgen vs wrk calibration",
        "HTTP/1.1 over TLS 1.3,",
        "--cacert ",
        "--tls-version 1.3",
        "--tls-cipher TLS13_AES_256_GCM_SHA384",
        "https://127.0.0.1:",
        "| rust | 1 | wrk |",
        "no target is set against wrk here",
    ] {
        assert!(md.contains(needle), "the Markdown lacks {needle:?}:\n{md}");
    }
    let (_, md) = quick_calibration(&["--tls", "--http2", "--servers", "rust"]);
    for needle in
        ["# loadgen vs h2load calibration", "HTTP/2 over TLS 1.3 (ALPN h2), 16 streams", "| rust | 1 | h2load |"]
    {
        assert!(md.contains(needle), "the Markdown lacks {needle:?}:\n{md}");
    }
}

/// `compare calibrate --quick ARGS` with a PATH of taskset alone, so the reference loader is missing and
/// everything of ours is there: exit 2, nothing written, and stderr says what to install (`needles`).
fn refused_without_the_reference(args: &[&str], needles: &[&str]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let taskset = ["/usr/bin/taskset", "/bin/taskset"].into_iter().find(|p| Path::new(p).is_file());
    std::os::unix::fs::symlink(taskset.expect("taskset (util-linux) installed"), dir.path().join("taskset"))
        .expect("link taskset");
    common::loadgen();
    let out = tempfile::tempdir().expect("out dir");
    let bin_dir = common::bin_dir();
    let mut argv = vec!["--quick", "--bin-dir", bin_dir.to_str().expect("utf-8 bin dir")];
    argv.extend(["--out-dir", out.path().to_str().expect("utf-8 out dir")]);
    argv.extend(args);
    let run = calibrate(&argv, Some(dir.path()));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    for needle in ["missing prerequisites"].iter().chain(needles) {
        assert!(stderr.contains(needle), "stderr lacks {needle:?}:\n{stderr}");
    }
    assert!(!stderr.contains("loadgen not found"), "{stderr}");
    assert!(std::fs::read_dir(out.path()).expect("out dir").next().is_none(), "nothing was written");
}

#[test]
fn missing_wrk_names_the_install_step() {
    refused_without_the_reference(
        &["--servers", "floor"],
        &["wrk not found on PATH", "bash bench/setup.sh", "apt-get install wrk"],
    );
}

#[test]
fn missing_h2load_names_the_install_step() {
    refused_without_the_reference(
        &["--http2", "--servers", "rust"],
        &["h2load not found on PATH", "scripts/install-test-deps.sh", "nghttp2-client"],
    );
}

#[test]
fn bad_flags_exit_64() {
    for args in [
        &["--runs", "0"][..],
        &["--duration", "1500ms"],
        &["--warmup", "soon"],
        &["--servers", "bun"],
        &["--http2", "--servers", "floor"],
        &["--tls", "--servers", "floor"],
        &["--streams", "4"],
        &["--http2", "--streams", "0"],
        &["--connections", "0"],
        &["--loader-cores", "x"],
        &["--nope"],
    ] {
        let out = calibrate(args, None);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
