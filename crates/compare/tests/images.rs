//! `compare images`. This machine has a docker CLI but no engine, so the first test is the real thing: compare
//! must say plainly that nothing was measured and exit 2. The second puts a small script in the engine's
//! place (it answers `version`, `image inspect`, `run` and `rm` the way the docker CLI does) that starts the
//! real flight-rs on the port compare publishes, so the measuring path (fresh port per start, first answer
//! on /healthz, removal after each start, an image that is not built) runs end to end.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

#[test]
fn without_an_engine_nothing_is_measured_and_it_says_so() {
    let out = tempfile::tempdir().expect("temp dir");
    let run = Command::new(common::compare_exe())
        .args(["images", "--docker", "/nonexistent/docker", "--out-dir"])
        .arg(out.path())
        .output()
        .expect("run compare images");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("No container engine here (neither Docker nor podman answered), so image size"));
    let md: Vec<_> = common::result_files(out.path());
    assert_eq!(md.len(), 2, "the .md and the .json: {md:?}");
}

#[test]
fn sizes_and_starts_are_measured_through_the_cli() {
    let flight = common::bin_dir().join("flight-rs");
    assert!(flight.is_file(), "{} not built: `cargo build -p flight`", flight.display());
    let dir = tempfile::tempdir().expect("temp dir");
    let shim = dir.path().join("docker");
    let log = dir.path().join("calls");
    let script = format!(
        r#"#!/bin/sh
echo "$*" >> '{log}'
case "$1" in
  version) echo 99.0.0-shim ;;
  image)
    case "$5" in
      rust-baselines/flight-rs:0.1.0) echo '12582912 <no value>' ;;
      *) echo "Error response from daemon: No such image: $5" >&2; exit 1 ;;
    esac ;;
  run)
    hp=$(echo "$7" | cut -d: -f2)
    # Out of compare's process group, as a container would be: compare kills the group it spawned as soon
    # as this call returns, so answer only once the server is in its own session (the pid file is written
    # after setsid, by the process that then becomes flight-rs).
    started='{dir}'/started-$hp
    FLIGHT_PORT=$hp FLIGHT_HOSTNAME=127.0.0.1 FLIGHT_WORKERS=1 \
      setsid sh -c 'echo $$ > "$0"; exec "$1"' "$started" '{flight}' >>'{servers}' 2>&1 </dev/null &
    while [ ! -s "$started" ]; do sleep 0.01; done
    cat "$started" ;;
  rm) kill "$3" && echo "$3" ;;
  *) echo "unexpected: $*" >&2; exit 1 ;;
esac
"#,
        log = log.display(),
        servers = dir.path().join("servers.log").display(),
        dir = dir.path().display(),
        flight = flight.display()
    );
    std::fs::write(&shim, script).expect("write the shim");
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = dir.path().join("out");
    let run = Command::new(common::compare_exe())
        .arg("images")
        .arg("--docker")
        .arg(&shim)
        .args(["--runs", "3", "--image", "flight-rs=rust-baselines/flight-rs:0.1.0@3000"])
        .args(["--image", "scribe-rs=rust-baselines/scribe-rs:0.1.0@1337", "--out-dir"])
        .arg(&out)
        .output()
        .expect("run compare images");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("- engine: Docker engine 99.0.0-shim"), "{stdout}");
    let row =
        |name: &str| stdout.lines().find(|l| l.starts_with(&format!("| {name} "))).unwrap_or_default().to_string();
    let flight_row = row("flight-rs");
    // What the shim's servers said (a start that never listened shows its reason here).
    let servers = std::fs::read_to_string(dir.path().join("servers.log")).unwrap_or_default();
    assert!(
        flight_row.contains("| official | 12.0 |") && flight_row.contains("| 3 |"),
        "{flight_row}\nservers:\n{servers}"
    );
    assert!(row("scribe-rs").contains("not built here"), "{stdout}");

    let calls = std::fs::read_to_string(&log).expect("calls");
    let runs: Vec<&str> = calls.lines().filter(|l| l.starts_with("run ")).collect();
    assert_eq!(runs.len(), 3, "{calls}");
    assert!(runs.iter().all(|r| r.contains("--pull never") && r.contains(":3000 rust-baselines/flight-rs:0.1.0")));
    let ports: std::collections::BTreeSet<&str> = runs.iter().map(|r| r.split(' ').nth(6).unwrap_or("")).collect();
    assert_eq!(ports.len(), 3, "a fresh host port per start: {calls}");
    assert_eq!(calls.lines().filter(|l| l.starts_with("rm -f ")).count(), 3, "every container removed: {calls}");
}
