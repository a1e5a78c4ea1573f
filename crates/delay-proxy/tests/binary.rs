//! The delay-proxy binary: prints its listening line, proxies, stops on SIGTERM with its report on stderr,
//! and exits 64 with one line on bad arguments.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use common::{connect, echo_server, median, round_trips};
use rustix::process::{Pid, Signal, kill_process};
use testkit::process::{Guard, wait_for_exit};

/// The running binary, and its stderr as read to the end on a thread of its own (so a report longer than the
/// pipe's buffer cannot block the proxy's exit).
fn delay_proxy(args: &[&str]) -> (Guard, JoinHandle<String>) {
    let mut child = Command::new(testkit::workspace::binary("delay-proxy"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start delay-proxy");
    let mut pipe = child.stderr.take().expect("piped stderr");
    let stderr = std::thread::spawn(move || {
        let mut stderr = String::new();
        let _ = pipe.read_to_string(&mut stderr);
        stderr
    });
    (Guard(child), stderr)
}

#[test]
fn prints_where_it_listens_proxies_with_the_delay_and_stops_on_sigterm() {
    let upstream = echo_server().to_string();
    let (mut proxy, stderr) = delay_proxy(&["--listen", "127.0.0.1:0", "--upstream", &upstream, "--rtt", "4ms"]);
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
    let stderr = stderr.join().expect("stderr");
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
        let (mut proxy, stderr) = delay_proxy(args);
        let status = wait_for_exit(&mut proxy.0, Duration::from_secs(5)).expect("exits at once");
        let stderr = stderr.join().expect("stderr");
        assert_eq!(status.code(), Some(64), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: one line, got {stderr:?}");
    }
}

/// Resident memory of a process, from /proc.
fn resident_kib(pid: u32) -> u64 {
    oskit::procfs::status_kib(format!("/proc/{pid}/status"), "VmRSS").expect("VmRSS in /proc/PID/status")
}

#[test]
fn a_thousand_connections_at_once_each_take_the_delay_and_cost_little_memory() {
    const CONNECTIONS: usize = 1000;
    let rtt = Duration::from_millis(5);
    let upstream = echo_server().to_string();
    let (mut proxy, stderr) = delay_proxy(&["--upstream", &upstream, "--rtt", "5ms", "--threads", "2"]);
    let stdout = proxy.0.stdout.take().expect("piped stdout");
    let line = testkit::first_line(stdout, Duration::from_secs(10)).expect("a listening line within 10 s");
    let addr: std::net::SocketAddr = line.trim().trim_start_matches("listening ").parse().expect("an address");
    let before = resident_kib(proxy.0.id());
    let mut clients: Vec<_> = (0..CONNECTIONS).map(|_| connect(addr)).collect();
    // Every connection pings, then every one reads its answer: all in flight at once.
    let started = std::time::Instant::now();
    for client in &mut clients {
        std::io::Write::write_all(client, b"ping").expect("ping");
    }
    for client in &mut clients {
        let mut pong = [0u8; 4];
        client.read_exact(&mut pong).expect("pong");
        assert_eq!(&pong, b"ping");
    }
    let took = started.elapsed();
    let per_connection = (resident_kib(proxy.0.id()).saturating_sub(before)) as f64 / CONNECTIONS as f64;
    eprintln!("{CONNECTIONS} connections answered within {took:?}; {per_connection:.1} KiB resident per connection");
    assert!(took >= rtt && took < Duration::from_secs(5), "{CONNECTIONS} pings took {took:?}");
    assert!(per_connection < 32.0, "{per_connection:.1} KiB resident per connection");
    drop(clients);
    let pid = Pid::from_raw(proxy.0.id() as i32).expect("a pid");
    kill_process(pid, Signal::TERM).expect("SIGTERM");
    let status = wait_for_exit(&mut proxy.0, Duration::from_secs(5)).expect("exits within 5 s of SIGTERM");
    assert!(status.success(), "{status}");
    let stderr = stderr.join().expect("stderr");
    assert!(
        stderr.contains(&format!("{CONNECTIONS} connections, 4000 bytes to upstream, 4000 bytes to client")),
        "{stderr}"
    );
}
