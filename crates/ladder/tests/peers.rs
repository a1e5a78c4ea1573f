//! The ladder compares runtimes only if they do the same work and answer the same bytes: this starts ladder-rs
//! (the binary), the Bun peer and the Node peer (bench/peers/ladder) on one dataset and one Postgres, and checks
//! that every probe gets the same status, content type, body and the headers that matter (Allow, Retry-After).
//! 400 bodies may differ (each names its own parser's or validator's complaint): status and content type only.
//! The framework peers (bench/peers/ladder/fastify.mjs and express.mjs, each run on Node and on Bun) take the
//! same probes as the plain peers, under the runtime names compare gives them.
//!
//! The peers come from bench/peers/node_modules (scripts/install-test-deps.sh installs them, so CI has them);
//! when they are absent the tests fail naming what is missing, as the other peer tests do: a comparison that
//! silently did not run would read as one that passed.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::canned::{Canned, response};
use common::{ABSENT_ID, Dataset, EDGE_ROWS, MALFORMED_ID, Response, UpstreamServer, body, request, send_raw};
use serde_json::json;
use testkit::peers::{self, PEERS, RUNTIMES, node_env, start_all};
use testkit::process::{Guard, wait_for_exit};
use testkit::wait::eventually;

/// Fails the test, naming what is missing and how to install it, unless both peer runtimes and the packages the
/// ladder peers import (ajv and pg) are installed.
fn require_peers() {
    peers::require(&["ajv", "pg"]);
}

struct Runtime {
    name: &'static str,
    addr: SocketAddr,
    child: Guard,
}

/// Starts one runtime with the ladder's env and waits until /healthz answers.
fn start(name: &'static str, db: &Path, database_url: &str) -> Runtime {
    start_with(name, db, database_url, None, &[])
}

/// [`start`], serving HTTPS with `tls` (its certificate files and the client that trusts them) when given:
/// ladder-rs reads `LADDER_TLS_CERT`/`LADDER_TLS_KEY`, the peers `TLS_CERT`/`TLS_KEY`; `env` is set on top
/// (the upstream's URL and timeout, which every runtime reads under the same names).
fn start_with(name: &'static str, db: &Path, database_url: &str, tls: Option<&Tls>, env: &[(&str, &str)]) -> Runtime {
    let port = testkit::free_port();
    let mut cmd = if name == "rust" {
        Command::new(testkit::workspace::binary("ladder-rs"))
    } else {
        peers::command("ladder", name)
    };
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUST_LOG", "error")
        .env("LADDER_PORT", port.to_string())
        .env("LADDER_HOSTNAME", "127.0.0.1")
        .env("LADDER_WORKERS", "1")
        .env("LADDER_DB", db)
        .env("DATABASE_URL", database_url)
        .envs(env.iter().copied())
        .envs(node_env(name))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(tls) = tls {
        let (cert, key) = if name == "rust" { ("LADDER_TLS_CERT", "LADDER_TLS_KEY") } else { ("TLS_CERT", "TLS_KEY") };
        cmd.env(cert, &tls.files.chain).env(key, &tls.files.key);
    }
    let mut child = Guard(cmd.spawn().unwrap_or_else(|e| panic!("could not start {name}: {e}")));
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let ready = eventually(Duration::from_secs(20), || {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("{name} exited before answering: {status}");
        }
        match tls {
            None => testkit::http::try_request(addr, "GET", "/healthz", &[], None).ok(),
            Some(tls) => tls.conn(addr).ok().map(|mut c| c.request("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")),
        }
        .filter(|r| r.status == 200)
    });
    assert!(ready.is_some(), "{name} never answered /healthz on {addr}");
    Runtime { name, addr, child }
}

impl Runtime {
    /// SIGTERM, and the runtime exits promptly.
    fn stop(mut self) {
        let pid = self.child.0.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().is_ok_and(|s| s.success()));
        let exited = wait_for_exit(&mut self.child.0, Duration::from_secs(5));
        assert!(exited.is_some(), "{} still running 5 s after SIGTERM", self.name);
    }
}

struct Probe {
    method: &'static str,
    target: &'static str,
    body: Option<Vec<u8>>,
    /// Compare the body too (not for 400s, whose messages may differ).
    exact: bool,
}

fn probe(method: &'static str, target: &'static str, body: Option<Vec<u8>>) -> Probe {
    Probe { method, target, body, exact: true }
}

fn status_only(target: &'static str, body: &[u8]) -> Probe {
    Probe { method: "POST", target, body: Some(body.to_vec()), exact: false }
}

fn send(addr: SocketAddr, p: &Probe) -> Response {
    request(addr, p.method, p.target, &[], p.body.as_deref())
}

/// What must be equal across runtimes.
fn view(res: &Response, exact: bool) -> (u16, Option<String>, Option<String>, Option<String>, Option<String>) {
    let header = |name: &str| res.header(name).map(str::to_string);
    let body = exact.then(|| res.text());
    (res.status, header("content-type"), header("allow"), header("retry-after"), body)
}

/// Compares every probe; returns rust's statuses, so a test can check the probes reached what they aim at.
fn compare(runtimes: &[Runtime], probes: &[Probe]) -> Vec<u16> {
    let mut statuses = Vec::with_capacity(probes.len());
    for p in probes {
        let what = format!("{} {} {:?}", p.method, p.target, p.body.as_deref().map(String::from_utf8_lossy));
        let rust = send(runtimes[0].addr, p);
        assert_eq!(rust.header("content-type"), Some("application/json"), "rust {what}");
        let expected = view(&rust, p.exact);
        for other in &runtimes[1..] {
            let got = send(other.addr, p);
            assert_eq!(view(&got, p.exact), expected, "{} differs from rust on {what}", other.name);
        }
        statuses.push(rust.status);
    }
    statuses
}

#[test]
fn every_peer_answers_byte_for_byte_like_ladder_rs() {
    require_peers();
    let pg = common::shared_postgres();
    let url = pg.create_database("t_peers");
    common::seed(&url, 1000);
    let data = Dataset::generate(200);
    let runtimes = start_all(&RUNTIMES, |n| start(n, &data.db(), &url));

    let mut probes = vec![
        probe("GET", "/ladder/empty", None),
        probe("GET", "/ladder/empty?x=1", None),
        probe("HEAD", "/ladder/empty", None),
        // The 1 KiB document: built and serialized per request by each runtime, so the same bytes here mean the
        // same content and key order, not a copied string.
        probe("GET", "/ladder/json", None),
        probe("GET", "/ladder/json?x=1", None),
        probe("HEAD", "/ladder/json", None),
        probe("POST", "/ladder/json", Some(b"{}".to_vec())),
        probe("DELETE", "/ladder/json", None),
        probe("GET", "/ladder/json/", None),
        probe("GET", "/healthz", None),
        probe("GET", "/nope", None),
        probe("GET", "/ladder/empty/", None),
        probe("POST", "/nope", Some(b"{}".to_vec())),
        probe("POST", "/ladder/empty", None),
        probe("DELETE", "/healthz", None),
        probe("GET", "/ladder/validate", None),
        probe("PUT", "/ladder/sqlite", Some(b"{}".to_vec())),
        probe("GET", "/ladder/postgres", None),
        // No LADDER_UPSTREAM_URL here: 503 everywhere, without Retry-After.
        probe("GET", "/ladder/upstream", None),
        probe("HEAD", "/ladder/upstream", None),
        probe("POST", "/ladder/upstream", Some(b"{}".to_vec())),
        probe("GET", "/ladder/upstream/", None),
    ];
    let mut ids: Vec<String> = data.sample_ids().into_iter().take(8).collect();
    ids.extend(EDGE_ROWS.iter().map(|r| r.0.to_string()));
    ids.extend([ABSENT_ID.to_string(), MALFORMED_ID.to_string()]);
    for id in &ids {
        for target in ["/ladder/validate", "/ladder/sqlite", "/ladder/postgres"] {
            probes.push(probe("POST", target, Some(body(id).into_bytes())));
        }
    }
    let full =
        json!({"id": "Z-9_z", "region": "zh-Hant-TW", "tags": ["é😀", "\u{2028}", "\"q\""], "note": "n\u{0}ote"});
    probes.push(probe("POST", "/ladder/validate", Some(full.to_string().into_bytes())));
    let mut at_limit = body("abc").into_bytes();
    at_limit.resize(ladder::BODY_LIMIT as usize, b' ');
    probes.push(probe("POST", "/ladder/validate", Some(at_limit.clone())));
    at_limit.push(b' ');
    probes.push(probe("POST", "/ladder/sqlite", Some(at_limit)));
    for bad in [
        &b""[..],
        b"{",
        b"[]",
        br#"{"id":"x","region":"en"}"#,
        br#"{"id":"x","region":"en","tags":[],"extra":1}"#,
        br#"{"id":"a b","region":"en","tags":[]}"#,
        br#"{"id":"abc\n","region":"en","tags":[]}"#,
        br#"{"id":"x","region":"en1","tags":[]}"#,
        br#"{"id":"x","region":"en","tags":["333333333333333333333333333333333"]}"#,
        br#"{"id":"x","region":"en","tags":["\ud800"]}"#,
        b"\xef\xbb\xbf{\"id\":\"x\",\"region\":\"en\",\"tags\":[]}",
        b"{\"id\":\"x\",\"region\":\"en\",\"tags\":[\"\xff\"]}",
    ] {
        for target in ["/ladder/validate", "/ladder/postgres"] {
            probes.push(status_only(target, bad));
        }
    }
    let statuses = compare(&runtimes, &probes);
    let answered = |target: &str, status: u16| {
        probes.iter().zip(&statuses).filter(|(p, s)| p.target == target && **s == status).count()
    };
    // The document answered to GET and HEAD (and with a query), the other methods refused, the trailing slash
    // unknown.
    assert_eq!(answered("/ladder/json", 200) + answered("/ladder/json?x=1", 200), 3, "rust's statuses: {statuses:?}");
    assert_eq!(answered("/ladder/json", 405) + answered("/ladder/json/", 404), 3);
    assert_eq!(answered("/ladder/upstream", 503) + answered("/ladder/upstream", 405), 3);
    // 8 samples and 4 edge rows found, the absent id and the malformed row not; every bad body refused.
    assert_eq!(answered("/ladder/postgres", 200), 12, "rust's statuses: {statuses:?}");
    assert_eq!(answered("/ladder/sqlite", 404) + answered("/ladder/postgres", 404), 2);
    assert_eq!(answered("/ladder/sqlite", 500) + answered("/ladder/postgres", 500), 2);
    assert_eq!(answered("/ladder/validate", 400) + answered("/ladder/postgres", 400), 24);

    // A chunked body past the limit: 413 everywhere, same body.
    let mut chunked =
        b"POST /ladder/validate HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            .to_vec();
    for _ in 0..9 {
        chunked.extend_from_slice(format!("{:x}\r\n{}\r\n", 8192, " ".repeat(8192)).as_bytes());
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let answers: Vec<_> = runtimes.iter().map(|r| view(&send_raw(r.addr, &chunked).expect("chunked"), true)).collect();
    assert_eq!(answers[0].0, 413);
    assert!(answers.iter().all(|a| *a == answers[0]), "chunked over the limit: {answers:?}");

    for runtime in runtimes {
        runtime.stop();
    }
}

/// A throwaway certificate in a temp dir and a client that trusts it.
struct Tls {
    _dir: tempfile::TempDir,
    files: certs::Files,
    client: testkit::tls::Client,
}

impl Tls {
    fn new() -> Tls {
        let dir = tempfile::tempdir().expect("dir");
        let bundle = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
        let files = bundle.write(dir.path()).expect("write");
        Tls { _dir: dir, files, client: testkit::tls::Client::new(&bundle.ca_pem) }
    }

    fn conn(&self, addr: SocketAddr) -> std::io::Result<testkit::http::Conn> {
        testkit::http::Conn::open_tls(addr, &self.client)
    }
}

/// Over HTTPS (the ladder's step D), every runtime answers the rungs with rust's bytes and negotiates what
/// rust does with the same client: TLS 1.3, one cipher suite, one key-exchange group, ALPN http/1.1 (Bun.serve
/// selects none; HTTP/1.1 is spoken either way).
#[test]
fn over_tls_the_peers_answer_and_negotiate_like_ladder_rs() {
    require_peers();
    let data = Dataset::generate(50);
    let pg = common::shared_postgres();
    let url = pg.create_database("t_peers_tls");
    common::seed(&url, 1000);
    let tls = Tls::new();
    let runtimes = start_all(&RUNTIMES, |n| start_with(n, &data.db(), &url, Some(&tls), &[]));
    let id = data.sample_ids().remove(0);
    let sqlite =
        format!("POST /ladder/sqlite HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{}", body(&id).len(), body(&id));
    let empty = "GET /ladder/empty HTTP/1.1\r\nHost: t\r\n\r\n";
    let catalog = "GET /ladder/json HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut seen = Vec::new();
    for runtime in &runtimes {
        let mut conn = tls.conn(runtime.addr).unwrap_or_else(|e| panic!("{}: handshake: {e}", runtime.name));
        let answers: Vec<(u16, String)> = [empty, catalog, sqlite.as_str()]
            .iter()
            .map(|req| {
                let res = conn.request(req);
                (res.status, res.text())
            })
            .collect();
        let session = conn.tls().expect("TLS");
        let negotiated = (
            session.protocol_version(),
            session.negotiated_cipher_suite().map(|s| s.suite()),
            session.negotiated_key_exchange_group().map(|g| g.name()),
        );
        let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
        assert!(alpn.is_none() || alpn.as_deref() == Some(b"http/1.1"), "{}: ALPN {alpn:?}", runtime.name);
        seen.push((runtime.name, answers, negotiated));
    }
    let (_, rust_answers, rust_tls) = &seen[0];
    assert_eq!(rust_answers[1].0, 200, "the JSON rung answered: {rust_answers:?}");
    assert!((1000..=1100).contains(&rust_answers[1].1.len()), "the JSON rung's 1 KiB: {rust_answers:?}");
    assert_eq!(rust_answers[2].0, 200, "the SQLite rung answered: {rust_answers:?}");
    assert_eq!(rust_tls.0, Some(rustls::ProtocolVersion::TLSv1_3));
    for (name, answers, negotiated) in &seen[1..] {
        assert_eq!(answers, rust_answers, "{name} answers differ from rust over TLS");
        assert_eq!(negotiated, rust_tls, "{name} negotiated other parameters than rust");
    }
    for runtime in runtimes {
        runtime.stop();
    }
}

#[test]
fn peers_fail_like_ladder_rs_without_their_databases() {
    require_peers();
    let dir = tempfile::tempdir().expect("dir");
    let missing = dir.path().join("missing.db");
    let nowhere = format!("postgres://postgres@127.0.0.1:{}/ladder", testkit::free_port());
    // Nothing listens on the upstream's port either.
    let no_upstream = format!("http://127.0.0.1:{}/upstream", testkit::free_port());
    let env = [("LADDER_UPSTREAM_URL", no_upstream.as_str())];
    let runtimes = start_all(&RUNTIMES, |n| start_with(n, &missing, &nowhere, None, &env));
    let probes = vec![
        probe("GET", "/ladder/empty", None),
        probe("GET", "/ladder/json", None),
        probe("POST", "/ladder/validate", Some(body("abc").into_bytes())),
        probe("POST", "/ladder/sqlite", Some(body("abc").into_bytes())),
        probe("POST", "/ladder/postgres", Some(body("abc").into_bytes())),
        status_only("/ladder/sqlite", b"{}"),
        probe("GET", "/ladder/upstream", None),
    ];
    assert_eq!(compare(&runtimes, &probes), [200, 200, 200, 503, 503, 400, 502]);
    let res = send(runtimes[0].addr, &probes[3]);
    assert_eq!((res.status, res.header("retry-after")), (503, Some("1")));
    for runtime in runtimes {
        runtime.stop();
    }
}

#[test]
fn the_peers_schema_is_ladder_rs_schema() {
    require_peers();
    let module = peers::dir().join("ladder/ladder.mjs");
    let script = format!(
        "const m = await import({}); console.log(JSON.stringify({{ schema: m.SCHEMA, keys: ['dQw4w9WgXcQ', 'a', '{}'].map(m.itemKey) }}));",
        serde_json::to_string(&module.display().to_string()).expect("json"),
        "z".repeat(32)
    );
    let out = Command::new(peers::node())
        .args(["--input-type=module", "-e", &script])
        .stderr(Stdio::inherit())
        .output()
        .expect("node runs");
    assert!(out.status.success(), "node failed");
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON from node");
    assert_eq!(got["schema"], ladder::body::schema());
    let keys: Vec<i64> =
        ["dQw4w9WgXcQ", "a", &"z".repeat(32)].iter().map(|id| i64::from(ladder::pg::item_key(id))).collect();
    assert_eq!(got["keys"], json!(keys));
}

/// The upstream route: each runtime calls its own upstream service (crates/upstream, in this process) and
/// answers rust's bytes, then makes 100 calls one after another; the upstream's /stats says how many
/// connections each runtime's client opened for them (kept alive: one). Then all three call one canned server
/// whose answer changes: each failure is the same 502 or 504 everywhere.
#[test]
fn the_peers_call_the_upstream_like_ladder_rs() {
    require_peers();
    let dir = tempfile::tempdir().expect("dir");
    let (missing, nowhere) =
        (dir.path().join("missing.db"), format!("postgres://postgres@127.0.0.1:{}/x", testkit::free_port()));
    let names = RUNTIMES;
    let upstreams: Vec<UpstreamServer> = names.iter().map(|_| UpstreamServer::start(Duration::ZERO)).collect();
    let runtimes = start_all(&names, |name| {
        let at = names.iter().position(|n| *n == name).expect("a runtime");
        let env = [("LADDER_UPSTREAM_URL", upstreams[at].url()), ("LADDER_UPSTREAM_TIMEOUT_MS", "2000".to_string())];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        start_with(name, &missing, &nowhere, None, &env)
    });
    let probes = vec![
        probe("GET", "/ladder/upstream", None),
        probe("GET", "/ladder/upstream?x=1", None),
        probe("HEAD", "/ladder/upstream", None),
    ];
    assert_eq!(compare(&runtimes, &probes), [200, 200, 200]);
    assert_eq!(send(runtimes[0].addr, &probes[0]).text(), common::upstream_body());

    let mut figures = Vec::new();
    for (runtime, upstream) in runtimes.iter().zip(&upstreams) {
        let before = upstream.stats();
        for i in 0..100 {
            let res = send(runtime.addr, &probes[0]);
            assert_eq!(res.status, 200, "{} call {i}: {}", runtime.name, res.text());
        }
        let after = upstream.stats();
        // The /stats request before was on a connection of its own, counted in `after`.
        let (requests, connections) = (after.0 - before.0, after.1 - before.1 - 1);
        figures.push(format!(
            "{}: {requests} calls on {connections} new upstream connections ({} in all)",
            runtime.name,
            after.1 - 1
        ));
        assert_eq!(requests, 100, "{}: every call reached the upstream", runtime.name);
    }
    eprintln!("keep-alive: {}", figures.join("; "));
    for (runtime, upstream) in runtimes.iter().zip(&upstreams) {
        let (_, connections) = upstream.stats();
        // stats() has been asked twice before on connections of its own.
        let opened = connections - 2;
        assert!(
            opened <= 3,
            "{} opened {opened} upstream connections for 103 calls: its client does not keep them alive ({})",
            runtime.name,
            figures.join("; ")
        );
    }
    for runtime in runtimes {
        runtime.stop();
    }

    // One canned server behind all three, its answer changed between probes.
    let canned = Canned::start(None);
    let env = [("LADDER_UPSTREAM_URL", canned.url()), ("LADDER_UPSTREAM_TIMEOUT_MS", "300".to_string())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let runtimes = start_all(&names, |n| start_with(n, &missing, &nowhere, None, &env));
    let get = [probe("GET", "/ladder/upstream", None)];
    for (what, answer, status) in [
        (
            "a good answer",
            Some(response("200 OK", r#"{"token":"a \"quoted\" \u00e9 token","token":"last é 😀"}"#)),
            200,
        ),
        ("500 with a token", Some(response("500 Internal Server Error", r#"{"token":"t"}"#)), 502),
        ("302 with a token", Some(response("302 Found", r#"{"token":"t"}"#)), 502),
        ("not JSON", Some(response("200 OK", "<html>token</html>")), 502),
        ("no token", Some(response("200 OK", r#"{"service":"upstream"}"#)), 502),
        ("a number token", Some(response("200 OK", r#"{"token":7}"#)), 502),
        ("an array", Some(response("200 OK", r#"["token"]"#)), 502),
        ("a lone surrogate", Some(response("200 OK", r#"{"token":"\ud800"}"#)), 502),
        ("a BOM", Some(response("200 OK", "\u{feff}{\"token\":\"t\"}")), 502),
        ("a body cut short", Some(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"token\":\"t\"}".to_vec()), 502),
        ("silence", None, 504),
    ] {
        canned.set(answer);
        let statuses = std::panic::catch_unwind(|| compare(&runtimes, &get));
        assert_eq!(statuses.unwrap_or_else(|_| panic!("{what}: the runtimes differ (above)")), [status], "{what}");
    }
    for runtime in runtimes {
        runtime.stop();
    }
}

/// A bad upstream setting stops each peer before it listens, one line and exit 64, as ladder-rs does
/// (tests/binary.rs).
#[test]
fn the_peers_refuse_bad_upstream_settings() {
    require_peers();
    for (var, value) in [
        ("LADDER_UPSTREAM_URL", "https://127.0.0.1:3009/upstream"),
        ("LADDER_UPSTREAM_URL", "127.0.0.1:3009/upstream"),
        ("LADDER_UPSTREAM_TIMEOUT_MS", "0"),
    ] {
        for runtime in PEERS {
            let child = peers::command("ladder", runtime)
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .envs(node_env(runtime))
                .env("LADDER_PORT", "0")
                .env(var, value)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn");
            let mut child = Guard(child);
            let status = wait_for_exit(&mut child.0, Duration::from_secs(10)).expect("the peer exits");
            let mut stderr = String::new();
            if let Some(err) = child.0.stderr.as_mut() {
                let _ = std::io::Read::read_to_string(err, &mut stderr);
            }
            assert_eq!(status.code(), Some(64), "{runtime} {var}={value}: {stderr:?}");
            assert_eq!(stderr.lines().count(), 1, "{runtime} {var}={value}: one line, got {stderr:?}");
            assert!(stderr.contains(var), "{runtime}: {stderr:?}");
        }
    }
}

/// Fastify's response serializer (fast-json-stringify, compiled from a route's `schema.response`) drops a field
/// the schema does not list and turns the string "42" into 42 for an integer property: the contract the
/// Fastify peer's 200 answers are printed under. bench/peers/ladder/fastify-serializer.mjs shows both on the
/// peer's own /ladder/sqlite route (fastify.inject, a stored row faked with both), on Node and on Bun, and that
/// ladder.mjs's checks answer such a row 500 before it reaches the serializer (the peer never relies on the
/// coercion; the byte-for-byte test's REAL row is the same case through real SQLite).
#[test]
fn the_fastify_serializer_drops_and_coerces_on_node_and_bun() {
    require_peers();
    let script = peers::dir().join("ladder/fastify-serializer.mjs");
    for runtime in ["node", "bun"] {
        let out = peers::Engine::of(runtime)
            .command(&script)
            .env("NODE_ENV", "production")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{runtime}: {e}"));
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{runtime}: the serializer probe failed ({}):\n{stdout}{stderr}", out.status);
        assert!(
            stdout.contains("extra field dropped") && stdout.contains("\"42\" printed as 42"),
            "{runtime}: {stdout}"
        );
    }
}
