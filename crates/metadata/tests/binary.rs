//! The metadata-rs binary: bad config exits 64 with one line, the listening line, SIGTERM → exit 0, and the
//! gen-data and bench-lookup subcommands.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Dataset;
use testkit::process::{Guard, wait_for_exit};

fn metadata(env: &[(&str, &str)], args: &[&str], cwd: &Path) -> Command {
    let mut cmd = Command::new(testkit::workspace::binary("metadata-rs"));
    cmd.env_clear().env("RUST_LOG", "warn").current_dir(cwd).args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs to completion within 60 s: (exit code, stdout, stderr).
fn run(env: &[(&str, &str)], args: &[&str], cwd: &Path) -> (Option<i32>, String, String) {
    let child = metadata(env, args, cwd).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let mut child = Guard(child);
    let status = wait_for_exit(&mut child.0, Duration::from_secs(60)).expect("metadata-rs exits");
    let read = |r: Option<&mut dyn std::io::Read>| {
        let mut s = String::new();
        if let Some(r) = r {
            let _ = r.read_to_string(&mut s);
        }
        s
    };
    let stdout = read(child.0.stdout.as_mut().map(|s| s as &mut dyn std::io::Read));
    let stderr = read(child.0.stderr.as_mut().map(|s| s as &mut dyn std::io::Read));
    (status.code(), stdout, stderr)
}

#[test]
fn bad_config_exits_64_with_one_line() {
    let dir = tempfile::tempdir().expect("dir");
    for (env, args) in [
        (vec![("METADATA_PORT", "http")], vec![]),
        (vec![("METADATA_REDIS_URL", "not a url")], vec![]),
        (vec![("METADATA_WORKERS", "0")], vec![]),
        (vec![], vec!["--redis-ttl", "0"]),
        (vec![], vec!["--no-such-flag"]),
    ] {
        let (code, _, stderr) = run(&env, &args, dir.path());
        assert_eq!(code, Some(64), "{env:?} {args:?}: {stderr:?}");
        assert_eq!(stderr.lines().count(), 1, "{env:?} {args:?}: one line, got {stderr:?}");
    }
}

#[test]
fn serves_after_the_listening_line_and_exits_0_on_sigterm() {
    let data = Dataset::generate(20, 5, 1);
    let db = data.db();
    let env =
        [("METADATA_PORT", "0"), ("METADATA_HOSTNAME", "127.0.0.1"), ("METADATA_DB", db.to_str().expect("utf-8"))];
    let child =
        metadata(&env, &[], data.dir.path()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn");
    let mut child = Guard(child);
    let stdout = child.0.stdout.take().expect("stdout");
    let line = testkit::first_line(stdout, Duration::from_secs(10)).expect("a listening line");
    assert!(line.starts_with("metadata-rs listening on http://127.0.0.1:"), "{line}");
    let addr: SocketAddr = line
        .trim_start_matches("metadata-rs listening on http://")
        .split_whitespace()
        .next()
        .and_then(|a| a.parse().ok())
        .expect("an address in the listening line");
    assert_eq!(testkit::http::get(addr, "/healthz").status, 200);
    let id = data.sample_ids().into_iter().next().expect("an id");
    let res = testkit::http::get(addr, &format!("/v1/metadata/{id}?region=ko"));
    assert!(matches!(res.status, 200 | 404), "{}", res.status);

    let kill = Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status().expect("kill");
    assert!(kill.success());
    let exited = wait_for_exit(&mut child.0, Duration::from_secs(5)).expect("exits within 5 s of SIGTERM");
    assert_eq!(exited.code(), Some(0));
}

#[test]
fn gen_data_writes_refuses_to_overwrite_and_bench_lookup_reports() {
    let dir = tempfile::tempdir().expect("dir");
    let args = ["gen-data", "--rows", "300", "--samples", "100", "--seed", "5"];
    let (code, stdout, stderr) = run(&[], &args, dir.path());
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("wrote 300 rows to metadata.db"), "{stdout}");
    assert!(dir.path().join("metadata.db").is_file() && dir.path().join("sample_ids.txt").is_file());
    let (code, _, stderr) = run(&[], &args, dir.path());
    assert_eq!(code, Some(1), "a second run without --force fails");
    assert!(stderr.contains("--force"), "{stderr}");

    let (code, stdout, stderr) = run(&[], &["bench-lookup", "--iterations", "1000", "--warmup", "100"], dir.path());
    assert_eq!(code, Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(report["runtime"], "rust");
    assert_eq!(report["iterations"], 1000);
    assert!(report["ops_per_sec"].as_f64().is_some_and(|x| x > 0.0), "{report}");
    // The same sequence through the library gives the same tally: the figure is of the work it claims.
    let ids: Vec<String> =
        std::fs::read_to_string(dir.path().join("sample_ids.txt")).expect("ids").lines().map(str::to_string).collect();
    let mut db = metadata::db::Database::new(common::settings(&dir.path().join("metadata.db")).db);
    let tally = metadata::bench_lookup::run_iterations(&mut db, &ids, 0, 1000).expect("lookups");
    assert_eq!((report["found"].as_u64(), report["bytes"].as_u64()), (Some(tally.found), Some(tally.bytes)));
    assert!(tally.found > 900, "most sample ids are present: {}", tally.found);

    // The insert half: timed inserts after untimed ones, the table read back; a used file is refused.
    let args =
        ["bench-lookup", "--iterations", "10", "--inserts", "500", "--insert-warmup", "50", "--insert-db", "p.db"];
    let (code, stdout, stderr) = run(&[], &args, dir.path());
    assert_eq!(code, Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!((report["inserts"].as_u64(), report["rows"].as_u64()), (Some(500), Some(550)), "{report}");
    assert!(report["inserts_per_sec"].as_f64().is_some_and(|x| x > 0.0), "{report}");
    assert!(report["position_sum"].as_u64().is_some_and(|x| x > 0) && report["id_chars"].as_u64() == Some(550 * 11));
    let (code, _, stderr) = run(&[], &args, dir.path());
    assert_eq!(code, Some(1), "a used insert file is refused");
    assert!(stderr.contains("p.db exists: the insert loop starts from a new file"), "{stderr}");
    let (code, _, stderr) = run(&[], &["bench-lookup", "--iterations", "10", "--inserts", "5"], dir.path());
    assert_eq!((code, stderr.contains("--inserts needs --insert-db")), (Some(1), true), "{stderr}");
}
