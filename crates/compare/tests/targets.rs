//! `--target`: bring-your-own cells, end to end. A flight-rs this test starts itself is added as a running
//! target twice (with and without its pid), once more as a command compare starts per run, and a floor
//! that answers the wrong body as a command target that must be voided. The running server must be left
//! alone: compare never signals what it did not start. The command target runs twice under two names, an A/A
//! pair: the summary states the run's noise floor from it.

mod common;

use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use compare::records::{self, Kind};

fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "flight-rs did not listen on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn targets_are_checked_and_measured_like_runtimes() {
    let bin_dir = common::bin_dir();
    let flight = bin_dir.join("flight-rs");
    assert!(flight.is_file(), "{} not built: `cargo build -p flight`", flight.display());
    let port = testkit::free_port();
    let mine = Command::new(&flight)
        .env("FLIGHT_PORT", port.to_string())
        .env("FLIGHT_HOSTNAME", "127.0.0.1")
        .env("FLIGHT_WORKERS", "1")
        .env("FLIGHT_MIDDLEWARE", "bare")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start flight-rs");
    let mut mine = testkit::process::Guard(mine);
    wait_listening(port);

    let out = tempfile::tempdir().expect("temp dir");
    let (server, loader) = common::cores();
    let started =
        format!("cmd=cmd:FLIGHT_PORT=$PORT FLIGHT_HOSTNAME=127.0.0.1 FLIGHT_WORKERS=1 exec '{}'", flight.display());
    let again = started.replacen("cmd=", "cmd-again=", 1);
    let wrong = format!(
        "wrong=cmd:exec '{}' floor --port {{port}} --body '{{\"message\":\"nope\"}}'",
        common::compare_exe().display()
    );
    let run = common::compare_into(&bin_dir, out.path())
        .args(["--quick", "--workloads", "hello-bare", "--runtimes", "rust", "--tail-rate", "0"])
        .args(["--startup-runs", "1", "--server-cores", &server, "--loader-cores", &loader])
        .args(["--target", &format!("mine=http://127.0.0.1:{port},pid={}", mine.0.id())])
        .args(["--target", &format!("nopid=http://localhost:{port}/")])
        .args(["--target", &started, "--target", &again, "--target", &wrong])
        .output()
        .expect("run compare");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "the wrong target's void gives exit 2:\n{stderr}");
    assert!(stderr.contains("hello-bare wrong: VOID"), "{stderr}");
    assert!(mine.0.try_wait().expect("poll").is_none(), "compare must not stop a server it did not start");

    let jsonl: Vec<_> = common::jsonl_files(out.path());
    let v = common::validator();
    for line in std::fs::read_to_string(&jsonl[0]).expect("jsonl").lines() {
        common::assert_valid(&v, &serde_json::from_str(line).expect("JSON line"));
    }
    let recs = records::read_jsonl(&jsonl).expect("records");
    let of = |rt: &str, k: Kind| recs.iter().filter(|r| r.runtime == rt && r.kind == k).collect::<Vec<_>>();
    for rt in ["rust", "mine", "nopid", "cmd"] {
        let closed = of(rt, Kind::Closed);
        assert_eq!(closed.len(), 1, "{rt}");
        assert!(!closed[0].void, "{rt}: {:?}", closed[0].void_reason);
        assert!(closed[0].req_per_s.is_some_and(|x| x > 0.0), "{rt}");
    }
    // CPU and RSS from the process tree where the pid is known; nothing invented where it is not.
    for rt in ["mine", "cmd"] {
        assert!(of(rt, Kind::Closed)[0].server_cpu_us_per_resp.is_some(), "{rt}");
        assert!(of(rt, Kind::Closed)[0].rss_after_kib.is_some(), "{rt}");
    }
    let nopid = of("nopid", Kind::Closed)[0];
    assert_eq!((nopid.server_cpu_us_per_resp, nopid.rss_after_kib, nopid.loader_bound), (None, None, None));
    assert!(nopid.runtime_version.as_deref().is_some_and(|v| v.contains("CPU and RSS not measured")));
    // Cold starts only for what compare starts.
    assert_eq!((of("mine", Kind::Startup).len(), of("cmd", Kind::Startup).len()), (0, 1));
    let wrong = of("wrong", Kind::Check);
    assert!(wrong[0].void && wrong[0].void_reason.as_deref().is_some_and(|r| r.contains("differ")), "{wrong:?}");
    assert!(of("wrong", Kind::Closed).is_empty());
    let md = std::fs::read_to_string(jsonl[0].with_extension("md")).expect("markdown");
    assert!(md.contains("| nopid |") && md.contains("pid unknown"), "{md}");
    assert!(md.contains("## Noise floor (A/A)") && md.contains("| cmd-again ÷ cmd |"), "{md}");
    assert!(md.contains("cmd-again against cmd: the largest A/A ratio is"), "{md}");
}
