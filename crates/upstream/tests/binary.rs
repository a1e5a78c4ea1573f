//! The upstream binary: a bad token or delay exits 64 with one line; the defaults serve the contract's
//! document; SIGTERM stops it.

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use testkit::process::{Guard, wait_for_exit};

fn upstream(env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut cmd = Command::new(testkit::workspace::binary("upstream"));
    cmd.env_clear().env("RUST_LOG", "warn").args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

#[test]
fn bad_config_exits_64_with_one_line() {
    for (env, args) in [
        (vec![("UPSTREAM_TOKEN", "")], vec![]),
        (vec![("UPSTREAM_TOKEN", "has space")], vec![]),
        (vec![], vec!["--token", &*"a".repeat(65)]),
        (vec![], vec!["--token", "quote\""]),
        (vec![("UPSTREAM_DELAY", "soon")], vec![]),
        (vec![], vec!["--delay", "10 parsecs"]),
        (vec![("UPSTREAM_PORT", "http")], vec![]),
        (vec![("UPSTREAM_WORKERS", "0")], vec![]),
    ] {
        let child = upstream(&env, &args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn");
        let mut child = Guard(child);
        let status = wait_for_exit(&mut child.0, Duration::from_secs(10)).expect("upstream exits");
        let mut stderr = String::new();
        if let Some(err) = child.0.stderr.as_mut() {
            let _ = err.read_to_string(&mut stderr);
        }
        assert_eq!(status.code(), Some(64), "{env:?} {args:?}: {stderr:?}");
        assert_eq!(stderr.lines().count(), 1, "{env:?} {args:?}: one line, got {stderr:?}");
    }
}

#[test]
fn serves_the_document_with_env_settings_and_stops_on_sigterm() {
    let port = testkit::free_port();
    let env = [
        ("UPSTREAM_PORT", &*port.to_string()),
        ("UPSTREAM_DELAY", "30ms"),
        ("UPSTREAM_TOKEN", "tok-1"),
        ("UPSTREAM_WORKERS", "1"),
    ];
    let child = upstream(&env, &[]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn");
    let mut child = Guard(child);
    let stdout = child.0.stdout.take().expect("stdout");
    let line = testkit::first_line(stdout, Duration::from_secs(10)).expect("a listening line");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    assert!(line.contains(&format!("http://{addr}")), "{line}");
    let started = std::time::Instant::now();
    let res = testkit::http::get(addr, "/upstream");
    assert!(started.elapsed() >= Duration::from_millis(30), "UPSTREAM_DELAY honoured");
    assert_eq!((res.status, res.body.len()), (200, upstream::DOCUMENT_BYTES));
    assert_eq!(res.json()["token"], "tok-1");

    let pid = child.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().is_ok_and(|s| s.success()));
    let status = wait_for_exit(&mut child.0, Duration::from_secs(5)).expect("exits after SIGTERM");
    assert_eq!(status.code(), Some(0));
}
