//! No child outlives compare's handling of it: a server that exits early leaves a background process in its
//! group, and a failed start must take that down too. One test in this file, so the global child registry
//! belongs to it alone.

mod common;

use std::time::{Duration, Instant};

use compare::plan::server_spec::ServerSpec;
use compare::run::server;
use compare::system::{process, procfs};

fn gone(pid: u32) -> bool {
    // Reparented orphans are reaped by init, or left as zombies where init does not reap (containers).
    matches!(procfs::process_state(pid), None | Some('Z'))
}

#[test]
fn a_server_exiting_early_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pidfile = dir.path().join("background.pid");
    let mut spec = ServerSpec::new("early-exit", "/bin/sh".into());
    spec.args = vec!["-c".into(), format!("sleep 300 & echo $! > '{}'; sleep 0.2; exit 3", pidfile.display())];
    let bench = common::bench(dir.path(), Duration::from_secs(1));

    let err = server::start_ready(&spec, &bench, "/api/hello").expect_err("a server that exits cannot be ready");
    let msg = format!("{err:#}");
    assert!(msg.contains("exited (exit status: 3) before answering"), "{msg}");

    let background: u32 = std::fs::read_to_string(&pidfile).expect("pid file").trim().parse().expect("pid");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gone(background) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gone(background), "the server's background child {background} survived");
    assert_eq!(process::live_count(), 0, "every child was reaped and unregistered");
}
