//! SIGTERM in the middle of a run: compare kills its servers and loadgen, keeps the records it has, and
//! exits 130. SIGKILL, which compare never sees: its reaper kills them.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use compare::procfs;
use rustix::process::{Pid, Signal, kill_process};

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string()
}

fn gone(pid: u32) -> bool {
    matches!(procfs::process_state(pid), None | Some('Z'))
}

/// Starts compare on a 60 s floor run and waits until the floor server and loadgen both run under it: the
/// child, and every process of its tree but compare itself.
fn compare_mid_run(out: &std::path::Path) -> (std::process::Child, Vec<u32>) {
    common::loadgen();
    let (server, loader) = common::cores();
    let bin_dir = common::bin_dir();
    let mut child = common::compare_into(&bin_dir, out)
        .args(["--workloads", "hello-bare", "--runtimes", "floor", "--duration", "60s", "--warmup", "0"])
        .args(["--startup-runs", "0", "--tail-rate", "0", "--server-cores", &server, "--loader-cores", &loader])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start compare");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tree: Vec<u32> = procfs::process_tree(pid).into_iter().filter(|p| *p != pid).collect();
        let names: Vec<String> = tree.iter().map(|p| comm(*p)).collect();
        if names.iter().any(|n| n == "loadgen") && names.iter().filter(|n| *n == "compare").count() >= 2 {
            // Two: the floor server and the reaper.
            return (child, tree);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err);
            panic!("compare exited ({status}) before the run started:\n{err}");
        }
        assert!(Instant::now() < deadline, "no loadgen under compare within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_exit(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "compare did not exit within 20 s of {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every process of `tree` gone (or a zombie) within 5 s.
fn assert_all_gone(tree: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while tree.iter().any(|p| !gone(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let alive: Vec<String> = tree.iter().filter(|p| !gone(**p)).map(|p| format!("{p} ({})", comm(*p))).collect();
    assert!(alive.is_empty(), "children survived compare: {alive:?}");
}

#[test]
fn sigterm_stops_every_child() {
    let out = tempfile::tempdir().expect("temp dir");
    let (mut child, tree) = compare_mid_run(out.path());
    kill_process(Pid::from_raw(child.id() as i32).expect("pid"), Signal::TERM).expect("SIGTERM");
    let status = wait_exit(&mut child, "SIGTERM");
    assert_eq!(status.code(), Some(130), "interrupted exit code");
    assert_all_gone(&tree);

    // What was measured before the signal is kept: the floor's check record.
    let jsonl: Vec<_> = common::jsonl_files(out.path());
    assert_eq!(jsonl.len(), 1, "{jsonl:?}");
    let records = compare::records::read_jsonl(&jsonl).expect("records");
    assert!(records.iter().any(|r| r.kind == compare::records::Kind::Check && !r.void), "{records:?}");
}

#[test]
fn sigkill_takes_every_child_with_it() {
    let out = tempfile::tempdir().expect("temp dir");
    let (mut child, tree) = compare_mid_run(out.path());
    kill_process(Pid::from_raw(child.id() as i32).expect("pid"), Signal::KILL).expect("SIGKILL");
    let status = wait_exit(&mut child, "SIGKILL");
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "{status}");
    // The floor server, loadgen, and the reaper itself once its work is done.
    assert_all_gone(&tree);
}
