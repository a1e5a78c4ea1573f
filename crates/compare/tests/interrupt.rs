//! SIGTERM in the middle of a run: compare kills its servers and loadgen, keeps the records it has, and
//! exits 130.

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

#[test]
fn sigterm_stops_every_child() {
    common::loadgen();
    let out = tempfile::tempdir().expect("temp dir");
    let (server, loader) = common::cores();
    let bin_dir = common::bin_dir();
    let mut child = common::compare_into(&bin_dir, out.path())
        .args(["--workloads", "hello-bare", "--runtimes", "floor", "--duration", "60s", "--warmup", "0"])
        .args(["--startup-runs", "0", "--tail-rate", "0", "--server-cores", &server, "--loader-cores", &loader])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start compare");
    let pid = child.id();

    // Wait until the measured run is under way: the floor server and loadgen both running.
    let deadline = Instant::now() + Duration::from_secs(60);
    let tree = loop {
        let tree: Vec<u32> = procfs::process_tree(pid).into_iter().filter(|p| *p != pid).collect();
        let names: Vec<String> = tree.iter().map(|p| comm(*p)).collect();
        if names.iter().any(|n| n == "loadgen") && names.iter().any(|n| n == "compare") {
            break tree;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err);
            panic!("compare exited ({status}) before the run started:\n{err}");
        }
        assert!(Instant::now() < deadline, "no loadgen under compare within 60 s");
        std::thread::sleep(Duration::from_millis(50));
    };

    kill_process(Pid::from_raw(pid as i32).expect("pid"), Signal::TERM).expect("SIGTERM");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "compare did not exit within 20 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130), "interrupted exit code");
    let deadline = Instant::now() + Duration::from_secs(5);
    while tree.iter().any(|p| !gone(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let alive: Vec<String> = tree.iter().filter(|p| !gone(**p)).map(|p| format!("{p} ({})", comm(*p))).collect();
    assert!(alive.is_empty(), "children survived compare: {alive:?}");

    // What was measured before the signal is kept: the floor's check record.
    let jsonl: Vec<_> = common::jsonl_files(out.path());
    assert_eq!(jsonl.len(), 1, "{jsonl:?}");
    let records = compare::records::read_jsonl(&jsonl).expect("records");
    assert!(records.iter().any(|r| r.kind == compare::records::Kind::Check && !r.void), "{records:?}");
}
