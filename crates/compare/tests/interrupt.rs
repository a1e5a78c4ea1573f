//! SIGTERM in the middle of a run: compare kills its servers and loadgen, keeps the records it has, and
//! exits 130. SIGKILL, which compare never sees: its reaper kills them.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use compare::system::procfs;
use rustix::process::{Pid, Signal, kill_process};

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string()
}

fn gone(pid: u32) -> bool {
    matches!(procfs::process_state(pid), None | Some('Z'))
}

/// Starts compare on a 60 s run of `run` (workload and runtime flags) and waits until loadgen, the reaper and
/// every process named in `needed` run under it: the child, and every process of its tree but compare itself.
fn compare_mid_run(
    out: &Path,
    run: &[&str],
    needed: &[&str],
    configure: impl FnOnce(&mut Command),
) -> (std::process::Child, Vec<u32>) {
    common::loadgen();
    let (server, loader) = common::cores();
    let bin_dir = common::bin_dir();
    let mut cmd = common::compare_into(&bin_dir, out);
    cmd.args(run)
        .args(["--duration", "60s", "--warmup", "0", "--startup-runs", "0", "--tail-rate", "0"])
        .args(["--server-cores", &server, "--loader-cores", &loader])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    configure(&mut cmd);
    let mut child = cmd.spawn().expect("start compare");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let tree: Vec<u32> = procfs::process_tree(pid).into_iter().filter(|p| *p != pid).collect();
        let names: Vec<String> = tree.iter().map(|p| comm(*p)).collect();
        let running = |name: &str| names.iter().any(|n| n == name);
        if running("loadgen") && running("compare") && needed.iter().all(|n| running(n)) {
            return (child, tree);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err);
            panic!("compare exited ({status}) before the run started:\n{err}");
        }
        assert!(Instant::now() < deadline, "no loadgen and {needed:?} under compare within 90 s: {names:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The floor server on hello-bare: no databases.
const FLOOR: &[&str] = &["--workloads", "hello-bare", "--runtimes", "floor"];

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
    let (mut child, tree) = compare_mid_run(out.path(), FLOOR, &[], |_| {});
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
    let (mut child, tree) = compare_mid_run(out.path(), FLOOR, &[], |_| {});
    kill_process(Pid::from_raw(child.id() as i32).expect("pid"), Signal::KILL).expect("SIGKILL");
    let status = wait_exit(&mut child, "SIGKILL");
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "{status}");
    // The floor server, loadgen, and the reaper itself once its work is done.
    assert_all_gone(&tree);
}

#[test]
fn sigkill_leaves_no_temp_dir_behind() {
    // compare's work dir, and its PostgreSQL cluster and Redis dir, all under a TMPDIR of the test's own.
    let out = tempfile::tempdir().expect("temp dir");
    let tmp = tempfile::tempdir().expect("temp dir");
    // PostgreSQL runs as the postgres user when the tests run as root: it must get through to its dir.
    std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let notes = ["--workloads", "notes-read", "--runtimes", "rust"];
    let (mut child, tree) = compare_mid_run(out.path(), &notes, &["postgres", "redis-server", "scribe-rs"], |cmd| {
        cmd.env("TMPDIR", tmp.path());
    });
    let left = |what: &str| -> Vec<String> {
        let entries = std::fs::read_dir(tmp.path()).unwrap_or_else(|e| panic!("{what}: {e}"));
        entries.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect()
    };
    let mid_run = left("mid-run");
    for prefix in ["compare-", "postgres-", "redis-"] {
        assert!(mid_run.iter().any(|n| n.starts_with(prefix)), "no {prefix}* dir mid-run: {mid_run:?}");
    }
    kill_process(Pid::from_raw(child.id() as i32).expect("pid"), Signal::KILL).expect("SIGKILL");
    wait_exit(&mut child, "SIGKILL");
    assert_all_gone(&tree);
    // The reaper removes the dirs after it killed the groups: gone within its 5 s grace.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !left("after").is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(left("after"), Vec::<String>::new(), "temp dirs survived compare");
}
