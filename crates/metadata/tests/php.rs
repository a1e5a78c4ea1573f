//! The PHP metadata peer (bench/peers/php: metadata.php in php-fpm 8.2 behind nginx, started by serve.sh as
//! compare starts it) against metadata-rs, both real servers on 127.0.0.1: every probe of the contract (the
//! generated dataset in every region, edge rows, malformed ids and regions, methods, near-miss paths, a database
//! missing, unusable or locked) must get the same status line, body and headers, apart from the ones nginx adds
//! (Server, Connection) and Date. Then the launcher itself: PEER_PROCESSES=2 runs two of each and both serve,
//! SIGTERM stops the whole tree and exits 0, a child that dies takes the rest down with exit 1, bad values exit
//! 64. Last, the differences that remain are pinned, so that the "same work" line that names them stays true.
//!
//! Needs php8.2-fpm, php8.2-sqlite3 and nginx-light (`bash scripts/install-test-deps.sh` installs them); without
//! them the tests fail naming what is missing, as the other peer tests do.

mod common;

use std::collections::BTreeSet;
use std::io::Read;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{Dataset, REGIONS, Response, TestServer, custom_db, request, request_line_probes, settings};
use rusqlite::types::Value;
use testkit::process::wait_for_exit;
use testkit::wait::{eventually, until};

fn serve_sh() -> PathBuf {
    testkit::workspace::root().join("bench/peers/php/serve.sh")
}

/// Fails the test, naming what is missing and how to install it, unless php-fpm, nginx and PHP's SQLite3 are
/// there (looked up as serve.sh does: PATH plus /usr/sbin).
fn require_php() {
    let found = |program: &str| {
        Command::new("bash")
            .args(["-c", &format!("PATH=\"$PATH:/usr/sbin:/sbin\" command -v {program}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let mut missing = Vec::new();
    for (program, package) in [("php-fpm8.2", "php8.2-fpm"), ("nginx", "nginx-light")] {
        if !found(program) {
            missing.push(format!("{program} ({package})"));
        }
    }
    if !Path::new("/etc/php/8.2/mods-available/sqlite3.ini").is_file() {
        missing.push("PHP's SQLite3 extension (php8.2-sqlite3)".to_string());
    }
    assert!(
        missing.is_empty(),
        "not installed: {}; `bash scripts/install-test-deps.sh` installs them",
        missing.join(", ")
    );
}

/// serve.sh with exactly these variables (and PATH), in a process group of its own as compare starts it.
fn command(env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(serve_sh())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").args([&format!("-{sig}"), "--", &pid.to_string()]).status();
}

/// The PHP peer: serve.sh and everything under it.
struct Php {
    child: Child,
    addr: SocketAddr,
}

impl Php {
    /// Starts serve.sh on a free port and waits for its one "listening" line.
    fn start(db: &Path, processes: u32) -> Php {
        require_php();
        let port = testkit::free_port();
        let (port_text, processes_text) = (port.to_string(), processes.to_string());
        let env = [
            ("METADATA_PORT", port_text.as_str()),
            ("METADATA_HOSTNAME", "127.0.0.1"),
            ("METADATA_DB", db.to_str().expect("UTF-8 path")),
            ("PEER_PROCESSES", processes_text.as_str()),
        ];
        let mut child = command(&env).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("spawn serve.sh");
        let stdout = child.stdout.take().expect("piped stdout");
        let line = testkit::first_line(stdout, Duration::from_secs(20));
        let mut php = Php { child, addr: format!("127.0.0.1:{port}").parse().expect("addr") };
        let line = line.unwrap_or_else(|| panic!("serve.sh printed no line within 20 s: {:?}", php.child.try_wait()));
        let line = line.trim_end();
        assert!(
            line.starts_with("metadata peer: php 8.2.")
                && line.contains(" (php-fpm, OPcache) behind nginx 1.")
                && line.ends_with(&format!(" listening on http://127.0.0.1:{port}")),
            "serve.sh's line: {line:?}"
        );
        // The line comes once nginx listens and both masters have their workers.
        assert!(testkit::http::try_request(php.addr, "GET", "/nope", &[], None).is_ok(), "no answer after the line");
        php
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM to the script, as compare stops it: its exit status within 10 s.
    fn terminate(&mut self) -> ExitStatus {
        signal(self.pid(), "TERM");
        wait_for_exit(&mut self.child, Duration::from_secs(10)).expect("serve.sh still running 10 s after SIGTERM")
    }
}

impl Drop for Php {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            signal(self.pid(), "TERM");
            if wait_for_exit(&mut self.child, Duration::from_secs(5)).is_none() {
                // compare's fallback: the whole group (php-fpm has left it; its parent-death signal stops it).
                let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.pid())]).status();
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------------------
// Processes, from /proc
// ------------------------------------------------------------------------------------------------------------

/// (pid, ppid, pgid, state) of every process.
fn processes() -> Vec<(u32, u32, u32, char)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after the last ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if let [state, ppid, pgrp, ..] = fields[..] {
            let (Ok(ppid), Ok(pgrp)) = (ppid.parse(), pgrp.parse()) else { continue };
            out.push((pid, ppid, pgrp, state.chars().next().unwrap_or('?')));
        }
    }
    out
}

/// Every live descendant of `root`, with its command line.
fn descendants(root: u32) -> Vec<(u32, String)> {
    let all = processes();
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid, _, state) in &all {
            if ppid == parent && state != 'Z' {
                found.push(pid);
                frontier.push(pid);
            }
        }
    }
    found.into_iter().map(|pid| (pid, cmdline(pid))).collect()
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " ").trim().to_string())
        .unwrap_or_default()
}

/// Members of process group `pgid` still running (zombies count as gone: nothing reaps them in some containers).
fn group_members(pgid: u32) -> Vec<u32> {
    processes().into_iter().filter(|p| p.2 == pgid && p.3 != 'Z').map(|p| p.0).collect()
}

fn running(pid: u32) -> bool {
    processes().iter().any(|p| p.0 == pid && p.3 != 'Z')
}

/// Bytes the process has moved through read and write calls so far (/proc/<pid>/io's rchar + wchar): a php-fpm
/// worker reads every request from its socket, an nginx worker writes every response (its recv() calls are not
/// counted, its writev() calls are).
fn io_bytes(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    let field = |name: &str| io.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse::<u64>().ok());
    field("rchar:").unwrap_or(0) + field("wchar:").unwrap_or(0)
}

// ------------------------------------------------------------------------------------------------------------
// Comparing answers
// ------------------------------------------------------------------------------------------------------------

/// Headers nginx adds or owns: Server (`nginx`; metadata-rs sends none), Connection (nginx names keep-alive and
/// close; metadata-rs only close), and Date (the clock's). Every other header must be the same.
const NGINX_HEADERS: [&str; 3] = ["server", "connection", "date"];

fn status_line(res: &Response) -> String {
    let end = res.head.windows(2).position(|w| w == b"\r\n").unwrap_or(res.head.len());
    String::from_utf8_lossy(&res.head[..end]).into_owned()
}

fn headers_that_matter(res: &Response) -> BTreeSet<(String, String)> {
    res.headers.iter().filter(|(n, _)| !NGINX_HEADERS.contains(&n.as_str())).cloned().collect()
}

fn send(addr: SocketAddr, method: &str, target: &str) -> Response {
    request(addr, method, target, &[], None)
}

/// How php's answer to `method target` differs from rust's, if it does.
fn difference(rust: SocketAddr, php: SocketAddr, method: &str, target: &str) -> Option<String> {
    let (want, got) = (send(rust, method, target), send(php, method, target));
    compare(&got, &want).map(|d| format!("{method} {target}: {d}"))
}

/// How `got` (php's) differs from `want` (rust's): status line, body, the headers that matter.
fn compare(got: &Response, want: &Response) -> Option<String> {
    let mut diffs = Vec::new();
    if status_line(got) != status_line(want) {
        diffs.push(format!("status line {:?} (rust {:?})", status_line(got), status_line(want)));
    }
    if got.body != want.body {
        diffs.push(format!("body {:?} (rust {:?})", got.text(), want.text()));
    }
    let (g, w) = (headers_that_matter(got), headers_that_matter(want));
    if g != w {
        diffs.push(format!(
            "headers {:?} (rust {:?})",
            g.difference(&w).collect::<Vec<_>>(),
            w.difference(&g).collect::<Vec<_>>()
        ));
    }
    (!diffs.is_empty()).then(|| diffs.join("; "))
}

/// Asserts php answers every probe as rust does, listing every difference on failure.
fn assert_same(rust: SocketAddr, php: SocketAddr, probes: &[(&str, String)]) {
    let diffs: Vec<String> = probes.iter().filter_map(|(m, t)| difference(rust, php, m, t)).collect();
    assert!(diffs.is_empty(), "{} of {} probes differ:\n{}", diffs.len(), probes.len(), diffs.join("\n"));
}

fn enc(raw: &str) -> String {
    testkit::http::enc(raw)
}

fn get(target: impl Into<String>) -> (&'static str, String) {
    ("GET", target.into())
}

// ------------------------------------------------------------------------------------------------------------
// The edge database
// ------------------------------------------------------------------------------------------------------------

fn text(s: &str) -> Value {
    Value::Text(s.to_string())
}

/// A row: (id, channel, duration_s, views, locales), any storage class.
type EdgeRow = (String, Value, Value, Value, Value);

/// U+10FFFF, which metadata.php uses as its marker in the tolerant parse: stored text holding it must come back
/// unchanged.
const M: char = '\u{10FFFF}';

fn edge_rows() -> Vec<EdgeRow> {
    let full = serde_json::json!({
        "en": {"title": "T en", "description": "D en"},
        "ja": {"title": "タイトル", "description": "説明"},
    })
    .to_string();
    // Escapes JSON.stringify writes (quote, backslash, short forms, other controls) and characters it leaves
    // alone (DEL, U+2028/9, NEL, BOM, `</script>`, non-ASCII).
    let esc = concat!(
        "q\"uote \\back\\slash /sl \n\t\r\u{8}\u{c} \u{1}\u{1f}\u{7f} ",
        "é 日本語 😀 \u{2028}\u{2029} </script> \u{85}\u{feff}"
    );
    let c = || text("c");
    let one = || Value::Integer(1);
    let row = |id: &str, channel: Value, d: Value, v: Value, locales: Value| (id.to_string(), channel, d, v, locales);
    let plain = |id: &str, locales: &str| row(id, text("c"), Value::Integer(1), Value::Integer(1), text(locales));
    let mut rows = vec![
        row(
            "esc",
            text("Chan \"q\" \\ / é 😀"),
            Value::Integer(3725),
            Value::Integer(600_001),
            text(
                &serde_json::json!({"en": {"title": esc, "description": format!("d{esc}")},
                                    "ja": {"title": "ラーメン 🍜", "description": "麺"}})
                .to_string(),
            ),
        ),
        plain(
            "esc-ascii",
            r#"{"en": {"title": "caf\u00e9 \u2028 \ud83d\ude00 \u0007 \/ \u0000", "description": "\\u escapes"}}"#,
        ),
        row(
            "trend",
            c(),
            Value::Integer(59),
            Value::Integer(500_001),
            text(r#"{"en":{"title":"t","description":"d"},"zh-TW":{"title":"中文","description":"描述"}}"#),
        ),
        row("views500k", c(), Value::Integer(60), Value::Integer(500_000), text(&full)),
        row("nulls", Value::Null, Value::Null, Value::Null, text(r#"{"en":{}}"#)),
        row("no-en", c(), one(), Value::Integer(900_000), text(r#"{"ja":{"title":"j","description":"jd"}}"#)),
        row(
            "odd",
            c(),
            one(),
            Value::Integer(900_000),
            text(r#"{"ja":"x","en":{"title":["t"],"description":"d","extra":{"a":[1]}}}"#),
        ),
        row("locale-null", c(), one(), Value::Integer(900_000), text(r#"{"ja":null,"en":{"title":"e"}}"#)),
        plain("locale-array", r#"{"ja":["title"],"en":{"title":"e"}}"#),
        plain("dup", r#"{"en":{"title":"a"},"en":{"title":"b"}}"#),
        plain("dup-field", r#"{"en":{"title":"b","title":7,"description":"x","description":"y"}}"#),
        plain("escaped-keys", r#"{"\u0065n":{"\u0074itle":"e","description":"d"},"j\u0061":{"title":"j"}}"#),
        plain("proto", r#"{"__proto__":{"title":"p"},"constructor":{"title":"c"},"en":{"title":"e"}}"#),
        // Keys PHP turns into integers ("123", "-5") and ones it keeps as strings ("0123", "-0", "1e3").
        plain(
            "numeric-keys",
            r#"{"123":{"title":"n"},"0123":{"title":"z"},"-5":{"title":"m"},"-0":{"title":"mz"},"1e3":{"title":"e3"},"en":{"title":"e"}}"#,
        ),
        plain("empty-key", r#"{"":{"title":"empty"},"en":{"title":"e"}}"#),
        // Lone surrogates: kept, and written as JSON.stringify writes them (lower case).
        plain("surrogate", r#"{"en":{"title":"x\ud800y","description":"\ud83d\ude00"}}"#),
        plain("surrogate2", r#"{"fr":"\udc00","en":{"title":"\uDFFF\t\"é\u00e9\ud83d\ude00\ud83d","description":7}}"#),
        plain("surrogate-key", r#"{"\ud800":{"title":"k"},"en":{"title":"\uD800\uD800 \uDC00\uD83D"}}"#),
        plain("surrogate-then-bad", r#"{"en":{"title":"\ud800"}} x"#),
        plain("surrogate-skipped", r#"{"ja":{"title":"\udbff"},"en":{"title":"plain"}}"#),
        // The marker itself, raw and escaped, beside lone surrogates and an escaped backslash before `ud800`.
        plain(
            "marker",
            &format!(
                r#"{{"en":{{"title":"a\udbff\udfffb\ud800c\\ud800d{M}0{M}d800 \\\ud800","description":"{M}\udbff\uDFFF{M}"}}}}"#
            ),
        ),
        plain("marker-plain", &format!(r#"{{"en":{{"title":"{M}0{M}d800","description":"\udbff\udfff"}}}}"#)),
        plain("bignum", r#"{"en":{"title":"t","n":1e400,"m":-0,"k":123456789012345678901234567890,"f":1.5e-400}}"#),
        row(
            "long",
            text(&"c".repeat(300)),
            one(),
            one(),
            text(
                &serde_json::json!({"en": {"title": "L".repeat(20_000), "description": "é".repeat(5000)}}).to_string(),
            ),
        ),
        // Malformed locales: not JSON, not an object, trailing text, NaN, raw controls, a BOM, NULL, a BLOB.
        plain("bad-json", "not json"),
        plain("arr", "[1,2]"),
        plain("empty-arr", "[]"),
        plain("null-json", "null"),
        plain("num", "5"),
        plain("str", "\"x\""),
        plain("empty", ""),
        plain("trailing", r#"{"en":{}} x"#),
        plain("nan", r#"{"en":{"title":NaN}}"#),
        plain("raw-control", "{\"en\":{\"title\":\"a\u{1}b\"}}"),
        plain("raw-control-skipped", "{\"ja\":{\"title\":\"a\u{1}b\"},\"en\":{\"title\":\"e\"}}"),
        plain("bom", "\u{feff}{\"en\":{}}"),
        plain("formfeed", "\u{c}{\"en\":{}}"),
        plain("single-quotes", "{'en':{}}"),
        plain("trailing-comma", r#"{"en":{"title":"t",}}"#),
        row("locales-null", c(), one(), one(), Value::Null),
        row("locales-blob", c(), one(), one(), Value::Blob(br#"{"en":{"title":"b"}}"#.to_vec())),
        // Allowed around the value: JSON whitespace, and an empty object.
        plain("ws", " \t\r\n{\"en\":{\"title\":\"w\"}} \n"),
        row("empty-obj", c(), one(), Value::Integer(600_000), text("{}")),
        plain("deep", &format!(r#"{{"ko":{}{},"en":{{"title":"deep"}}}}"#, "[".repeat(300), "]".repeat(300))),
        plain("deep2000", &format!(r#"{{"ko":{}{},"en":{{"title":"deep"}}}}"#, "[".repeat(2000), "]".repeat(2000))),
        // Column types: metadata-rs takes TEXT or NULL channel, INTEGER, finite REAL or NULL duration, INTEGER or
        // NULL views, TEXT locales; anything else is a malformed row.
        row("views-real", c(), Value::Real(90.7), Value::Real(1234.5), text(&full)),
        row("views-text", c(), one(), text("5"), text(&full)),
        row("duration-real", c(), Value::Real(3725.9), one(), text(&full)),
        row("duration-neg-real", c(), Value::Real(-3.5), one(), text(&full)),
        row("duration-huge-real", c(), Value::Real(1e300), one(), text(&full)),
        row("duration-inf", c(), Value::Real(f64::INFINITY), one(), text(&full)),
        row("duration-text", c(), text("61"), one(), text(&full)),
        row("duration-blob", c(), Value::Blob(vec![1]), one(), text(&full)),
        row("channel-int", Value::Integer(7), one(), one(), text(&full)),
        row("channel-blob", Value::Blob(b"c".to_vec()), one(), one(), text(&full)),
    ];
    // Durations and views at and past the formatting boundaries.
    for (id, d, v) in [
        ("d0", 0, 0),
        ("d59", 59, 1),
        ("d3599", 3599, 1),
        ("d3600", 3600, 1),
        ("d360000", 360_000, 1),
        ("dneg", -5, -7),
        ("dbig", 1_000_000_000_000, 1 << 52),
        ("dmax", i64::MAX, i64::MAX),
        ("dmin", i64::MIN, i64::MIN),
    ] {
        rows.push(row(id, c(), Value::Integer(d), Value::Integer(v), text(&full)));
    }
    // Ids that must be percent-encoded, or look encoded, or are not ASCII.
    for id in ["a/b", "a b", "a+b", "%41", "x\"y", "vidé😀", "A-Za-z0-9_-~", "a?b", "a#b", "a%2Fb", "..", "\u{10FFFF}"]
    {
        rows.push(row(id, c(), one(), one(), text(&full)));
    }
    rows
}

/// The edge rows in a database of the generator's layout, plus rows whose text is not UTF-8 (only SQL can
/// store those).
fn edge_db(dir: &Path) -> PathBuf {
    let db = custom_db(dir, &[]);
    let conn = rusqlite::Connection::open(&db).expect("open");
    for (id, channel, duration, views, locales) in edge_rows() {
        conn.execute(
            "INSERT INTO videos VALUES (?1, ?2, ?3, ?4, ?5)",
            rusqlite::params![id, channel, duration, views, locales],
        )
        .expect("insert");
    }
    let bytes = |s: &[u8]| Value::Blob(s.to_vec());
    for (id, channel, locales) in [
        ("utf8-channel", bytes(b"c\xff"), bytes(br#"{"en":{"title":"t"}}"#)),
        ("utf8-title", bytes(b"c"), bytes(b"{\"en\":{\"title\":\"t\xff\"}}")),
        ("utf8-skipped", bytes(b"c"), bytes(b"{\"ja\":{\"title\":\"t\xff\"},\"en\":{\"title\":\"e\"}}")),
    ] {
        conn.execute(
            "INSERT INTO videos VALUES (?1, CAST(?2 AS TEXT), 1, 1, CAST(?3 AS TEXT))",
            rusqlite::params![id, channel, locales],
        )
        .expect("insert non-UTF-8 text");
    }
    db
}

/// Every edge probe: each row in several regions, then ids, regions, methods and paths.
fn edge_probes() -> Vec<(&'static str, String)> {
    let mut ids: Vec<String> = edge_rows().into_iter().map(|r| r.0).collect();
    ids.extend(["utf8-channel", "utf8-title", "utf8-skipped"].map(String::from));
    let mut probes = Vec::new();
    for id in &ids {
        for region in ["", "?region=ja", "?region=ko", "?region=zh-TW", "?region=fr"] {
            probes.push(get(format!("/v1/metadata/{}{region}", enc(id))));
        }
    }
    for region in ["123", "0123", "-5", "-0", "1e3", "1234", "constructor", "__proto__", "toString"] {
        probes.push(get(format!("/v1/metadata/numeric-keys?region={region}")));
        probes.push(get(format!("/v1/metadata/proto?region={region}")));
    }
    probes.extend(request_line_probes());
    // A malformed row asked with HEAD: the 500 without its body.
    probes.push(("HEAD", "/v1/metadata/views-real".to_string()));
    probes
}

// ------------------------------------------------------------------------------------------------------------
// The contract
// ------------------------------------------------------------------------------------------------------------

#[test]
fn every_sample_id_in_every_region_answers_as_metadata_rs() {
    let data = Dataset::generate(300, 60, 7);
    let rust = TestServer::start(settings(&data.db()));
    let php = Php::start(&data.db(), 1);
    let mut probes = Vec::new();
    for id in data.sample_ids() {
        probes.push(get(format!("/v1/metadata/{}", enc(&id))));
        for region in REGIONS.iter().copied().chain(["xx", ""]) {
            probes.push(get(format!("/v1/metadata/{}?region={region}", enc(&id))));
        }
        probes.push(("HEAD", format!("/v1/metadata/{}?region=ja", enc(&id))));
    }
    probes.extend([get("/healthz"), ("HEAD", "/healthz".to_string()), get("/v1/metadata/nope")]);
    // The comparison compares something: most probes are 200s with a body.
    let ok = probes.iter().filter(|(m, t)| *m == "GET" && send(rust.addr, m, t).status == 200).count();
    assert!(ok > 300, "only {ok} of {} probes are 200s", probes.len());
    assert_same(rust.addr, php.addr, &probes);
}

#[test]
fn every_edge_probe_answers_as_metadata_rs() {
    let dir = tempfile::tempdir().expect("dir");
    let db = edge_db(dir.path());
    let rust = TestServer::start(settings(&db));
    let php = Php::start(&db, 1);
    let probes = edge_probes();
    assert!(probes.len() > 400, "{} probes", probes.len());
    assert_same(rust.addr, php.addr, &probes);

    // A few answers spelled out, so that both cannot be wrong together where PHP needed care.
    let body = |target: &str| send(php.addr, "GET", target).text();
    assert!(body("/v1/metadata/surrogate").contains(r#""title":"x\ud800y","description":"😀""#));
    let marker = body("/v1/metadata/marker");
    assert!(marker.contains(&format!(r#""title":"a{M}b\ud800c\\ud800d{M}0{M}d800 \\\ud800""#)), "{marker}");
    assert!(body("/v1/metadata/numeric-keys?region=123").contains(r#""title":"n""#));
    assert!(body("/v1/metadata/numeric-keys?region=0123").contains(r#""title":"z""#));
    assert!(body("/v1/metadata/dmax").contains(r#""views":9223372036854775807,"#));
    assert_eq!(send(php.addr, "GET", "/v1/metadata/views-real").status, 500);
    assert_eq!(send(php.addr, "GET", "/v1/metadata/utf8-channel").status, 500);
    let allow = send(php.addr, "TRACE", "/healthz");
    assert_eq!((allow.status, allow.header("allow")), (405, Some("GET, HEAD")), "TRACE: {allow:?}");
    let head = send(php.addr, "HEAD", "/v1/metadata/long");
    let long = send(php.addr, "GET", "/v1/metadata/long");
    assert!(head.body.is_empty() && long.body.len() > 25_000, "HEAD has no body, GET all of it");
    assert_eq!(head.header("content-length"), Some(long.body.len().to_string().as_str()), "HEAD's length is GET's");
    assert_eq!(long.header("transfer-encoding"), None, "a Content-Length, not chunks");
}

#[test]
fn keep_alive_connections_stay_open_and_answer_in_order() {
    let data = Dataset::generate(20, 5, 3);
    let php = Php::start(&data.db(), 1);
    let rust = TestServer::start(settings(&data.db()));
    let ids = data.sample_ids();
    let mut conn = testkit::http::Conn::open(php.addr).expect("connect");
    for (i, id) in ids.iter().cycle().take(20).enumerate() {
        let target = format!("/v1/metadata/{}?region=ko", enc(id));
        let res = if i % 5 == 4 {
            conn.send(format!("HEAD {target} HTTP/1.1\r\nHost: t\r\n\r\n"));
            conn.read_head_response().expect("HEAD on the same connection")
        } else {
            conn.request(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n"))
        };
        let want = send(rust.addr, if i % 5 == 4 { "HEAD" } else { "GET" }, &target);
        assert_eq!((res.status, &res.body), (want.status, &want.body), "request {i} on one connection");
        assert_eq!(res.header("connection"), Some("keep-alive"), "request {i}");
        assert_eq!(res.header("transfer-encoding"), None);
    }
}

// ------------------------------------------------------------------------------------------------------------
// The database unavailable
// ------------------------------------------------------------------------------------------------------------

fn unavailable_probes() -> Vec<(&'static str, String)> {
    vec![
        get("/v1/metadata/abc?region=ja"),
        ("HEAD", "/v1/metadata/abc?region=ja".to_string()),
        get("/v1/metadata/abc?region=bad!"),
        get("/v1/metadata/%zz"),
        ("POST", "/v1/metadata/abc".to_string()),
        get("/healthz"),
        ("HEAD", "/healthz".to_string()),
        get("/nope"),
    ]
}

#[test]
fn a_missing_or_unusable_database_answers_503_as_metadata_rs() {
    let dir = tempfile::tempdir().expect("dir");
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, b"this is not a database ".repeat(200)).expect("write");
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").expect("write");
    let no_table = dir.path().join("no-table.db");
    rusqlite::Connection::open(&no_table).expect("create").execute_batch("CREATE TABLE other (x)").expect("schema");
    let wrong_columns = dir.path().join("wrong-columns.db");
    rusqlite::Connection::open(&wrong_columns)
        .expect("create")
        .execute_batch("CREATE TABLE videos (id TEXT PRIMARY KEY, title TEXT)")
        .expect("schema");
    let a_dir = dir.path().join("a-directory");
    std::fs::create_dir(&a_dir).expect("mkdir");
    let cases = [
        ("missing", dir.path().join("absent.db")),
        ("not a database", garbage),
        ("empty file", empty),
        ("no videos table", no_table),
        ("videos without the columns", wrong_columns),
        ("a directory", a_dir),
    ];
    for (what, path) in cases {
        let rust = TestServer::start(settings(&path));
        let php = Php::start(&path, 1);
        let first = send(php.addr, "GET", "/v1/metadata/abc?region=ja");
        assert_eq!((first.status, first.header("retry-after")), (503, Some("1")), "{what}: {}", first.text());
        assert_eq!(send(php.addr, "GET", "/healthz").status, 503, "{what}: /healthz");
        let probes = unavailable_probes();
        let diffs: Vec<String> = probes.iter().filter_map(|(m, t)| difference(rust.addr, php.addr, m, t)).collect();
        assert!(diffs.is_empty(), "{what}:\n{}", diffs.join("\n"));
    }
}

#[test]
fn the_database_coming_back_is_served_at_once() {
    let data = Dataset::generate(20, 5, 5);
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("later.db");
    let rust = TestServer::start(settings(&path));
    let php = Php::start(&path, 1);
    let id = &data.sample_ids()[0];
    let target = format!("/v1/metadata/{}?region=th", enc(id));
    assert_eq!(send(php.addr, "GET", &target).status, 503);
    // WAL mode: the -wal and -shm files come along if there are any (a checkpointed copy needs none).
    data.open_rw().execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").expect("checkpoint");
    std::fs::copy(data.db(), &path).expect("copy the database in");
    // PHP opens the file on every request: the next one is served. metadata-rs retries within 250 ms.
    let res = send(php.addr, "GET", &target);
    assert_eq!(res.status, 200, "{}", res.text());
    let same = until(Duration::from_secs(5), || difference(rust.addr, php.addr, "GET", &target).is_none());
    assert!(same.is_some(), "{:?}", difference(rust.addr, php.addr, "GET", &target));
    assert_same(rust.addr, php.addr, &[get("/healthz"), ("HEAD", target.clone())]);
}

#[test]
fn a_locked_database_waits_out_the_busy_timeout_then_answers_503() {
    let data = Dataset::generate(20, 5, 9);
    let id = data.sample_ids()[0].clone();
    // A rollback journal: an exclusive lock then keeps readers out (in WAL mode readers go on).
    let writer = data.open_rw();
    let mode: String = writer.query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0)).expect("journal mode");
    assert_eq!(mode, "delete");
    let rust = TestServer::start(settings(&data.db()));
    let php = Php::start(&data.db(), 1);
    let target = format!("/v1/metadata/{}?region=ja", enc(&id));
    assert_same(rust.addr, php.addr, &[get(target.clone())]);

    writer.execute_batch("BEGIN EXCLUSIVE").expect("lock");
    let started = Instant::now();
    let res = send(php.addr, "GET", &target);
    let waited = started.elapsed();
    assert_eq!((res.status, res.header("retry-after")), (503, Some("1")), "{}", res.text());
    // PRAGMA busy_timeout = 100 is set on PHP's connection: it waited before giving up.
    assert!(waited >= Duration::from_millis(90), "answered after {waited:?}: no busy timeout");
    assert_same(rust.addr, php.addr, &[get(target.clone()), get("/healthz")]);

    writer.execute_batch("ROLLBACK").expect("unlock");
    assert_eq!(send(php.addr, "GET", &target).status, 200, "PHP: served again at once");
    let same = until(Duration::from_secs(5), || difference(rust.addr, php.addr, "GET", &target).is_none());
    assert!(same.is_some(), "{:?}", difference(rust.addr, php.addr, "GET", &target));
}

// ------------------------------------------------------------------------------------------------------------
// The launcher
// ------------------------------------------------------------------------------------------------------------

/// (nginx workers, php-fpm workers, nginx master, php-fpm master) under serve.sh.
fn tree(php: &Php) -> (Vec<u32>, Vec<u32>, Vec<u32>, Vec<u32>) {
    let all = descendants(php.pid());
    let with = |needle: &str| all.iter().filter(|(_, c)| c.starts_with(needle)).map(|(p, _)| *p).collect::<Vec<_>>();
    (
        with("nginx: worker process"),
        with("php-fpm: pool metadata"),
        with("nginx: master process"),
        with("php-fpm: master process"),
    )
}

#[test]
fn two_processes_of_each_both_serve() {
    let data = Dataset::generate(50, 20, 4);
    let php = Php::start(&data.db(), 2);
    let rust = TestServer::start(settings(&data.db()));
    // php-fpm forks its static workers after its socket exists: wait for both.
    let (nginx, fpm, nginx_master, fpm_master) =
        eventually(Duration::from_secs(5), || Some(tree(&php)).filter(|t| t.0.len() == 2 && t.1.len() == 2))
            .unwrap_or_else(|| panic!("not two nginx and two php-fpm workers: {:?}", descendants(php.pid())));
    assert_eq!((nginx_master.len(), fpm_master.len()), (1, 1));
    let workers: Vec<u32> = nginx.iter().chain(&fpm).copied().collect();
    let before: Vec<u64> = workers.iter().map(|&p| io_bytes(p)).collect();

    // Concurrent clients on fresh connections: nginx's workers take turns accepting them, and a php-fpm
    // worker busy with one request leaves the next to the other.
    let ids = data.sample_ids();
    let addr = php.addr;
    std::thread::scope(|s| {
        for t in 0..8 {
            let ids = &ids;
            let rust = &rust;
            s.spawn(move || {
                for (i, id) in ids.iter().enumerate().skip(t).step_by(2) {
                    let target = format!("/v1/metadata/{}?region={}", enc(id), REGIONS[i % REGIONS.len()]);
                    let (got, want) = (send(addr, "GET", &target), send(rust.addr, "GET", &target));
                    assert_eq!((got.status, got.body), (want.status, want.body), "{target}");
                }
            });
        }
    });
    let idle: Vec<u32> = workers.iter().zip(&before).filter(|&(&p, &b)| io_bytes(p) <= b).map(|(&p, _)| p).collect();
    assert!(idle.is_empty(), "workers that served nothing: {idle:?} (nginx {nginx:?}, php-fpm {fpm:?})");
}

#[test]
fn sigterm_stops_the_whole_tree_and_exits_0() {
    let data = Dataset::generate(20, 5, 6);
    let mut php = Php::start(&data.db(), 2);
    let tree = eventually(Duration::from_secs(5), || Some(tree(&php)).filter(|t| t.0.len() == 2 && t.1.len() == 2))
        .unwrap_or_else(|| panic!("workers not up: {:?}", descendants(php.pid())));
    let everything: Vec<u32> = descendants(php.pid()).into_iter().map(|(p, _)| p).collect();
    assert_eq!(everything.len(), 6, "serve.sh's children: {:?}", descendants(php.pid()));
    let temp = cmdline(tree.2[0]).split_whitespace().skip_while(|w| *w != "-p").nth(1).map(PathBuf::from);
    let temp = temp.unwrap_or_else(|| panic!("no -p in {:?}", cmdline(tree.2[0])));
    assert!(temp.join("nginx.conf").is_file() && temp.join("php-fpm.conf").is_file(), "{}", temp.display());
    // nginx stays in the script's group; php-fpm's master leaves it (setsid), which serve.sh's header names.
    let group = group_members(php.pid());
    assert!(tree.2.iter().chain(&tree.0).all(|p| group.contains(p)), "nginx in group {}: {group:?}", php.pid());
    assert!(send(php.addr, "GET", "/healthz").status == 200);

    let status = php.terminate();
    assert_eq!(status.code(), Some(0), "serve.sh after SIGTERM: {status:?}");
    let gone = until(Duration::from_secs(5), || everything.iter().all(|&p| !running(p)));
    let left: Vec<(u32, String)> = everything.iter().filter(|&&p| running(p)).map(|&p| (p, cmdline(p))).collect();
    assert!(gone.is_some(), "still running after serve.sh exited: {left:?}");
    assert!(group_members(php.pid()).is_empty(), "group {} not empty", php.pid());
    assert!(!temp.exists(), "{} left behind", temp.display());
    assert!(testkit::http::try_request(php.addr, "GET", "/healthz", &[], None).is_err(), "still answering");
}

/// Everything a pipe gives until it closes, or what came within `within` (a process left holding the pipe
/// open must not hang the test).
fn read_within(mut pipe: impl Read + Send + 'static, within: Duration) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    rx.recv_timeout(within).unwrap_or_else(|_| "<pipe still open>".to_string())
}

/// A child that dies takes the peer down: the other is stopped and serve.sh exits 1, naming it.
fn dies_with(which: &str) {
    let data = Dataset::generate(10, 5, 8);
    let port = testkit::free_port().to_string();
    let db = data.db();
    let env = [("METADATA_PORT", port.as_str()), ("METADATA_DB", db.to_str().expect("UTF-8"))];
    let child = command(&env).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let mut php = Php { child, addr: format!("127.0.0.1:{port}").parse().expect("addr") };
    let stdout = php.child.stdout.take().expect("stdout");
    assert!(testkit::first_line(stdout, Duration::from_secs(20)).is_some(), "serve.sh never started");
    let t = tree(&php);
    let everything: Vec<u32> = descendants(php.pid()).into_iter().map(|(p, _)| p).collect();
    let victim = if which == "nginx" { t.2[0] } else { t.3[0] };
    signal(victim, "KILL");
    let status = wait_for_exit(&mut php.child, Duration::from_secs(10)).expect("serve.sh still running");
    let stderr = read_within(php.child.stderr.take().expect("stderr"), Duration::from_secs(5));
    assert_eq!(status.code(), Some(1), "after killing {which}: {status:?}, stderr {stderr:?}");
    assert!(stderr.contains(&format!("{which} exited unexpectedly")), "stderr: {stderr:?}");
    let gone = until(Duration::from_secs(5), || everything.iter().all(|&p| !running(p)));
    assert!(gone.is_some(), "left running: {:?}", everything.iter().filter(|&&p| running(p)).collect::<Vec<_>>());
}

#[test]
fn nginx_dying_stops_php_fpm_and_exits_1() {
    dies_with("nginx");
}

#[test]
fn php_fpm_dying_stops_nginx_and_exits_1() {
    dies_with("php-fpm");
}

#[test]
fn bad_values_exit_64_with_one_line() {
    require_php();
    let port = testkit::free_port().to_string();
    let cases: [&[(&str, &str)]; 8] = [
        &[("METADATA_PORT", "abc")],
        &[("METADATA_PORT", "0")],
        &[("METADATA_PORT", "70000")],
        &[("METADATA_PORT", "-1")],
        &[("METADATA_PORT", &port), ("PEER_PROCESSES", "0")],
        &[("METADATA_PORT", &port), ("PEER_PROCESSES", "257")],
        &[("METADATA_PORT", &port), ("PEER_PROCESSES", "two")],
        &[("METADATA_PORT", &port), ("METADATA_HOSTNAME", "127.0.0.1; evil")],
    ];
    for case in cases {
        let child = command(case).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
        let mut php = Php { child, addr: format!("127.0.0.1:{port}").parse().expect("addr") };
        let status = wait_for_exit(&mut php.child, Duration::from_secs(10)).expect("serve.sh still running");
        let out = read_within(php.child.stdout.take().expect("stdout"), Duration::from_secs(5));
        let err = read_within(php.child.stderr.take().expect("stderr"), Duration::from_secs(5));
        assert_eq!(status.code(), Some(64), "{case:?}: {err:?}");
        assert_eq!(err.lines().count(), 1, "{case:?}: one line, got {err:?}");
        assert!(err.contains(case.last().expect("a case").0), "{case:?}: the line names the variable: {err:?}");
        assert!(out.is_empty(), "{case:?}: nothing on stdout: {out:?}");
    }
}

// ------------------------------------------------------------------------------------------------------------
// What differs, pinned
// ------------------------------------------------------------------------------------------------------------

/// The differences compare's "same work" line names, held here so that it stays true: nginx's headers, and
/// what nginx or PHP refuse before metadata.php's contract is reached (requests no benchmark sends).
#[test]
fn the_differences_that_remain() {
    let dir = tempfile::tempdir().expect("dir");
    let deep = format!(r#"{{"ko":{}{},"en":{{"title":"deep"}}}}"#, "[".repeat(10_000), "]".repeat(10_000));
    let db = custom_db(dir.path(), &[("deep", Some("c"), Some(1), Some(1), Some(&deep))]);
    // A kept title holding a real U+FFFD in a row with bytes that are not UTF-8 elsewhere: metadata.php cannot
    // tell its U+FFFD from one put in for such bytes, so it answers 500 where metadata-rs answers 200.
    let mut bytes = "{\"ja\":{\"title\":\"x\u{FFFD}\"},".as_bytes().to_vec();
    bytes.extend_from_slice(b"\"ko\":{\"title\":\"y\xff\"}}");
    rusqlite::Connection::open(&db)
        .expect("open")
        .execute("INSERT INTO videos VALUES ('fffd', 'c', 1, 1, CAST(?1 AS TEXT))", [Value::Blob(bytes)])
        .expect("insert");
    let rust = TestServer::start(settings(&db));
    let php = Php::start(&db, 1);
    let status = |addr, target| send(addr, "GET", target).status;
    let target = "/v1/metadata/fffd?region=ja";
    assert_eq!((status(php.addr, target), status(rust.addr, target)), (500, 200));

    // Headers: nginx names itself and the connection's fate on every answer; the rest is the same.
    let (got, want) = (send(php.addr, "GET", "/healthz"), send(rust.addr, "GET", "/healthz"));
    assert_eq!((got.header("server"), want.header("server")), (Some("nginx"), None));
    assert_eq!((got.header("connection"), want.header("connection")), (Some("close"), Some("close")));
    let names = |r: &Response| r.headers.iter().map(|(n, _)| n.clone()).collect::<BTreeSet<_>>();
    let extra: Vec<String> = names(&got).difference(&names(&want)).cloned().collect();
    assert_eq!(extra, ["server"], "headers only php sends");

    // Nesting PHP's parser cannot follow (metadata-rs skips any depth): 500 instead of 200.
    assert_eq!((status(php.addr, "/v1/metadata/deep"), status(rust.addr, "/v1/metadata/deep")), (500, 200));

    // HTTP/1.0: nginx answers in HTTP/1.1, metadata-rs in the request's version; the answer is the same.
    let raw = "GET /healthz HTTP/1.0\r\n\r\n";
    let (got, want) = (raw_send(php.addr, raw, false), raw_send(rust.addr, raw, false));
    assert_eq!((status_line(&got), status_line(&want)), ("HTTP/1.1 200 OK".into(), "HTTP/1.0 200 OK".into()));
    assert_eq!((&got.body, headers_that_matter(&got)), (&want.body, headers_that_matter(&want)), "HTTP/1.0");

    // Requests nginx refuses with its own HTML 400 for reasons metadata-rs does not share: HTTP/1.1 without
    // Host (metadata-rs answers it), a bad Content-Length (metadata-rs answers 400 too, without a body).
    for raw in [
        &b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"[..],
        b"GET /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\nConnection: close\r\n\r\n",
    ] {
        let (got, want) = (testkit::http::send(php.addr, raw), testkit::http::send(rust.addr, raw));
        let line = testkit::http::first_line(raw);
        assert_eq!((got.status, got.header("content-type")), (400, Some("text/html")), "{line}: nginx's page");
        assert!(matches!(want.status, 200 | 400), "{line}: rust {}", want.status);
    }
}

/// Request lines nginx cannot take as they are (a path it cannot decode, a method not in upper case, no
/// request line at all) reach metadata.php through serve.sh's error_page, which answers them as metadata-rs.
#[test]
fn request_lines_nginx_refuses_are_answered_as_metadata_rs() {
    let data = Dataset::generate(10, 5, 2);
    let rust = TestServer::start(settings(&data.db()));
    let php = Php::start(&data.db(), 1);
    let mut diffs = Vec::new();
    for (method, target) in [
        ("get", "/healthz"),
        ("get", "/v1/metadata/x"),
        ("Get", "/nope"),
        ("GET", "/v1/metadata/%zz?region=ja"),
        ("GET", "/v1/metadata/abc%"),
        ("GET", "/v1/metadata/%E0%A4%A?region=bad!"),
        ("POST", "/v1/metadata/%zz"),
        ("HEAD", "/v1/metadata/%4"),
        ("GET", "/v1/metadata/%00"),
        ("GET", "/v1/metadata/a%00b?region=ja"),
        ("GET", "/v1/metadata/..%2F..%2F..%2Fx"),
        ("GET", "/v1/metadata/../../../x"),
        ("GET", "/../refused"),
        ("GET", "/..%2Frefused"),
        ("GET", "/healthz/%zz"),
    ] {
        let raw = format!("{method} {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let (got, want) = (raw_send(php.addr, &raw, method == "HEAD"), raw_send(rust.addr, &raw, method == "HEAD"));
        if let Some(d) = compare(&got, &want) {
            diffs.push(format!("{method} {target}: {d}"));
        }
    }
    for raw in ["garbage\r\n\r\n", "GET\r\n\r\n", "GET /v1/metadata/%zz HTTP/1.1 x\r\n\r\n"] {
        let (got, want) = (raw_send(php.addr, raw, false), raw_send(rust.addr, raw, false));
        if let Some(d) = compare(&got, &want) {
            diffs.push(format!("{raw:?}: {d}"));
        }
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

fn raw_send(addr: SocketAddr, raw: &str, head: bool) -> Response {
    let mut conn = testkit::http::Conn::open(addr).expect("connect");
    conn.send(raw);
    let res = if head { conn.read_head_response() } else { conn.read_response() };
    res.unwrap_or_else(|e| panic!("{raw:?} to {addr}: {e}"))
}
