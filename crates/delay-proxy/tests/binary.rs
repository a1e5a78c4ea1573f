//! The delay-proxy binary: prints its listening line, proxies, stops on SIGTERM with its report on stderr,
//! and exits 64 with one line on bad arguments.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{connect, echo_server, median, round_trips};
use rustix::process::{Pid, Signal, kill_process};
use testkit::process::{Guard, wait_for_exit};

fn delay_proxy(args: &[&str]) -> Guard {
    let child = Command::new(testkit::workspace::binary("delay-proxy"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start delay-proxy");
    Guard(child)
}

fn stderr_of(guard: &mut Guard) -> String {
    let mut stderr = String::new();
    guard.0.stderr.take().expect("piped stderr").read_to_string(&mut stderr).expect("read stderr");
    stderr
}

#[test]
fn prints_where_it_listens_proxies_with_the_delay_and_stops_on_sigterm() {
    let upstream = echo_server().to_string();
    let mut proxy = delay_proxy(&["--listen", "127.0.0.1:0", "--upstream", &upstream, "--rtt", "4ms"]);
    let stdout = proxy.0.stdout.take().expect("piped stdout");
    let line = testkit::first_line(stdout, Duration::from_secs(10)).expect("a listening line within 10 s");
    let addr: std::net::SocketAddr = line
        .trim()
        .strip_prefix("listening ")
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("`listening ADDRESS`, got {line:?}"));
    let mut client = connect(addr);
    let median = median(round_trips(&mut client, 20));
    assert!(median >= Duration::from_millis(4) && median < Duration::from_millis(8), "median round trip {median:?}");
    drop(client);

    let pid = Pid::from_raw(proxy.0.id() as i32).expect("a pid");
    kill_process(pid, Signal::TERM).expect("SIGTERM");
    let status = wait_for_exit(&mut proxy.0, Duration::from_secs(5)).expect("exits within 5 s of SIGTERM");
    assert!(status.success(), "{status}");
    let stderr = stderr_of(&mut proxy);
    // 21 round trips of 16 bytes each way.
    assert!(stderr.contains("1 connections, 336 bytes to upstream, 336 bytes to client"), "{stderr}");
}

#[test]
fn bad_arguments_exit_64_with_one_line() {
    for args in [
        &["--upstream", "127.0.0.1:5432", "--rtt", "ten"][..],
        &["--rtt", "10ms"],
        &["--upstream", "127.0.0.1:5432", "--rtt", "10ms", "--threads", "0"],
        &["--upstream", "127.0.0.1:5432", "--rtt", "10ms", "--listen", "nowhere"],
    ] {
        let mut proxy = delay_proxy(args);
        let status = wait_for_exit(&mut proxy.0, Duration::from_secs(5)).expect("exits at once");
        let stderr = stderr_of(&mut proxy);
        assert_eq!(status.code(), Some(64), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: one line, got {stderr:?}");
    }
}
