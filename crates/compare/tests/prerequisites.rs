//! What is missing is said once, with the step that installs it, before anything starts; bad arguments are
//! one line and exit 64.

mod common;

use std::process::{Command, Output};

fn compare(args: &[&str]) -> Output {
    Command::new(common::compare_exe()).args(args).output().expect("run compare")
}

#[test]
fn missing_binaries_name_the_install_step() {
    let empty = tempfile::tempdir().expect("temp dir");
    let empty = empty.path().to_str().expect("utf-8 path");
    let out =
        compare(&["--workloads", "hello-bare,metadata", "--runtimes", "rust,bun", "--repo", empty, "--bin-dir", empty]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "missing prerequisites",
        "loadgen not found: run `bash bench/setup.sh` (cargo build --release -p loadgen)",
        "flight-rs not found: run `bash bench/setup.sh` (cargo build --release -p flight)",
        "metadata-rs not found: run `bash bench/setup.sh` (cargo build --release -p metadata)",
        "bun not found: run `bash bench/setup.sh` (npm ci in bench/peers)",
    ] {
        assert!(err.contains(needle), "stderr lacks {needle:?}:\n{err}");
    }
    assert!(std::fs::read_dir(empty).expect("dir").next().is_none(), "nothing was written");
}

#[test]
fn bad_arguments_exit_64() {
    for args in [&["--runs", "0"][..], &["--workloads", "hello"], &["--server-cores", "x"], &["--nope"]] {
        let out = compare(args);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let out = compare(&["floor", "--port", "0", "--body", "not json"]);
    assert_eq!(out.status.code(), Some(64));
}
