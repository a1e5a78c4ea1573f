//! The scribe-rs binary: config errors exit 64 with one stderr line before binding, the listening line on
//! stdout, the database created when missing, serving while Postgres is down, SIGTERM / SIGINT → exit 0.

mod common;

use std::io::Read;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{JsonRes, SCHEMAS, record};
use serde_json::json;
use testkit::Redis;
use testkit::process::{Guard, wait_for_exit};

/// The binary with a clean environment (nothing from the developer's shell leaks in), run in `cwd`.
fn scribe(env: &[(&str, &str)], args: &[&str], cwd: &Path) -> Command {
    let mut cmd = Command::new(testkit::workspace::binary("scribe-rs"));
    cmd.env_clear().env("RUST_LOG", "warn").current_dir(cwd).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs to completion (with a deadline): (exit code, stdout, stderr).
fn run(env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String, String) {
    let cwd = tempfile::tempdir().expect("a temp dir");
    let child = scribe(env, args, cwd.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn scribe-rs");
    let mut child = Guard(child);
    let status = wait_for_exit(&mut child.0, Duration::from_secs(15))
        .unwrap_or_else(|| panic!("scribe-rs should exit on bad config: env {env:?} args {args:?}"));
    let (mut stdout, mut stderr) = (String::new(), String::new());
    if let Some(mut out) = child.0.stdout.take() {
        let _ = out.read_to_string(&mut stdout);
    }
    if let Some(mut err) = child.0.stderr.take() {
        let _ = err.read_to_string(&mut stderr);
    }
    (status.code(), stdout, stderr)
}

/// A config that would otherwise start: nothing listens on port 1, so nothing is reached before the error.
const BASE: [(&str, &str); 5] = [
    ("SCRIBE_APP_HOSTNAME", "127.0.0.1"),
    ("SCRIBE_APP_PORT", "0"),
    ("SCRIBE_APP_WORKERS", "1"),
    ("DATABASE_URL", "postgres://postgres@127.0.0.1:1/scribe"),
    ("SCRIBE_APP_SCHEMA_DIR", SCHEMAS),
];

fn base_with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut env: Vec<_> = BASE.iter().filter(|(k, _)| !extra.iter().any(|(e, _)| e == k)).copied().collect();
    env.extend_from_slice(extra);
    env
}

fn assert_config_error(env: &[(&str, &str)], args: &[&str], mention: &str) {
    let (code, stdout, stderr) = run(env, args);
    assert_eq!(code, Some(64), "env {env:?} args {args:?}: exit {code:?}, stderr {stderr:?}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one stderr line for {env:?} {args:?}, got {stderr:?}");
    assert!(
        lines[0].to_ascii_lowercase().contains(&mention.to_ascii_lowercase()),
        "the line should mention {mention:?}: {:?}",
        lines[0]
    );
    assert!(stdout.is_empty(), "nothing on stdout before binding: {stdout:?}");
}

#[test]
fn bad_config_exits_64_with_one_line() {
    assert_config_error(&base_with(&[("SCRIBE_APP_PORT", "abc")]), &[], "port");
    assert_config_error(&BASE, &["--port", "70000"], "port");
    assert_config_error(&base_with(&[("DATABASE_URL", "not-a-url")]), &[], "DATABASE_URL");
    assert_config_error(&base_with(&[("DATABASE_URL", "postgres://postgres@127.0.0.1:1/bad-name")]), &[], "name");
    assert_config_error(&base_with(&[("SCRIBE_APP_SQL_TOKEN", "short")]), &[], "SQL_TOKEN");
    assert_config_error(&base_with(&[("SCRIBE_APP_PAYLOAD_LIMIT", "lots")]), &[], "lots");
    assert_config_error(&base_with(&[("SCRIBE_APP_HOSTNAME", "not-an-ip")]), &[], "hostname");
    assert_config_error(&base_with(&[("SCRIBE_APP_WORKERS", "0")]), &[], "workers");
    assert_config_error(&base_with(&[("SCRIBE_APP_POOL_SIZE", "0")]), &[], "pool");
    assert_config_error(&base_with(&[("REDIS_URL", "not a url")]), &[], "REDIS_URL");
    assert_config_error(&base_with(&[("SCRIBE_APP_SCHEMA_BASE_URL", "https://schemas.example")]), &[], "https");
    assert_config_error(&base_with(&[("SCRIBE_APP_SCHEMA_DIR", "/definitely/not/here")]), &[], "/definitely/not/here");
    assert_config_error(&BASE, &["--no-such-flag"], "no-such-flag");
    // serve's body-limit flag would be overridden by --payload-limit: refused, naming the one that works.
    assert_config_error(&base_with(&[("SCRIBE_APP_BODY_LIMIT", "1000")]), &[], "--payload-limit");
    assert_config_error(&BASE, &["--body-limit", "1000"], "--payload-limit");
}

#[test]
fn a_schema_file_that_does_not_parse_exits_64_naming_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(dir.path().join("broken.schema.json"), "{ not json").expect("write the schema");
    let path = dir.path().to_str().expect("a UTF-8 path");
    let mut env = BASE.to_vec();
    env.retain(|(k, _)| *k != "SCRIBE_APP_SCHEMA_DIR");
    env.push(("SCRIBE_APP_SCHEMA_DIR", path));
    assert_config_error(&env, &[], "broken.schema.json");
}

/// Starts the binary and returns it with the address from its listening line.
fn spawn_listening(env: &[(&str, &str)], cwd: &Path) -> (Guard, SocketAddr, String) {
    let mut child = Guard(
        scribe(env, &[], cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn scribe-rs"),
    );
    let stdout = child.0.stdout.take().expect("stdout");
    let line = testkit::first_line(stdout, Duration::from_secs(15)).unwrap_or_else(|| {
        let exited = child.0.try_wait().ok().flatten();
        panic!("no listening line on stdout within 15 s (exited: {exited:?})")
    });
    assert!(line.starts_with("scribe-rs listening on http://127.0.0.1:"), "{line:?}");
    let url = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .unwrap_or_else(|| panic!("no http:// address in {line:?}"));
    let addr: SocketAddr = url.parse().unwrap_or_else(|e| panic!("address {url:?} in {line:?}: {e}"));
    assert_ne!(addr.port(), 0, "the line names the bound port");
    (child, addr, line)
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill").arg(format!("-{name}")).arg(child.id().to_string()).status().expect("run kill");
    assert!(status.success(), "kill -{name}");
}

#[test]
fn serves_creates_its_database_and_stops_on_sigterm() {
    let pg = common::shared_postgres();
    let redis = Redis::start();
    // Not created beforehand: the binary creates it, as the original did.
    let url = pg.url("t_bin_created");
    let redis_url = format!("redis://127.0.0.1:{}/1", redis.port());
    let env = [BASE[0], BASE[1], BASE[2], BASE[4], ("DATABASE_URL", url.as_str()), ("REDIS_URL", redis_url.as_str())];
    let cwd = tempfile::tempdir().expect("a temp dir");
    let (mut child, addr, line) = spawn_listening(&env, cwd.path());
    assert!(line.contains("1 workers") && line.contains("database t_bin_created"), "{line:?}");

    common::get(addr, "/").expect_status(200, "GET /");
    assert_eq!(common::get(addr, "/healthz").ok(), json!({"status": "ok", "postgres": "ok", "redis": "ok"}));
    let row = common::post(addr, "/notes", &record(json!({"title": "from the binary"}), 1)).ok();
    assert_eq!(row[0]["id"], 1);
    assert_eq!(pg.psql("t_bin_created", "SELECT data ->> 'title' FROM notes"), "from the binary");
    common::post(addr, "/notes", &record(json!({"title": 1}), 1)).expect_status(400, "schemas from the folder");

    signal(&child.0, "TERM");
    let exited = wait_for_exit(&mut child.0, Duration::from_secs(5)).expect("exits within 5 s of SIGTERM");
    assert_eq!(exited.code(), Some(0), "{exited:?}");
    assert!(common::try_request(addr, "GET", "/", &[], None).is_err(), "the port is released");
}

#[test]
fn stops_on_sigint() {
    let pg = common::shared_postgres();
    let url = pg.create_database("t_bin_sigint");
    let redis = Redis::start();
    let redis_url = format!("redis://127.0.0.1:{}/1", redis.port());
    let env = [BASE[0], BASE[1], BASE[2], BASE[4], ("DATABASE_URL", url.as_str()), ("REDIS_URL", redis_url.as_str())];
    let cwd = tempfile::tempdir().expect("a temp dir");
    let (mut child, addr, _) = spawn_listening(&env, cwd.path());
    common::get(addr, "/").expect_status(200, "GET /");
    signal(&child.0, "INT");
    let exited = wait_for_exit(&mut child.0, Duration::from_secs(5)).expect("exits within 5 s of SIGINT");
    assert_eq!(exited.code(), Some(0), "{exited:?}");
}

/// Postgres unreachable at startup: the server starts anyway and answers 503 until Postgres is reachable.
#[test]
fn starts_without_postgres_and_answers_503() {
    let redis = Redis::start();
    let redis_url = format!("redis://127.0.0.1:{}/1", redis.port());
    let nothing = format!("postgres://postgres@127.0.0.1:{}/scribe", testkit::free_port());
    let env =
        [BASE[0], BASE[1], BASE[2], BASE[4], ("DATABASE_URL", nothing.as_str()), ("REDIS_URL", redis_url.as_str())];
    let cwd = tempfile::tempdir().expect("a temp dir");
    let (mut child, addr, _) = spawn_listening(&env, cwd.path());
    let health = common::get(addr, "/healthz");
    assert_eq!(health.status, 503);
    assert_eq!(health.json(), json!({"status": "error", "postgres": "unavailable", "redis": "ok"}));
    let res = common::post(addr, "/notes", &record(json!({}), 1));
    assert_eq!(res.status, 503, "{}", res.text());
    assert!(res.header("retry-after").is_some());
    assert_eq!(common::get(addr, "/notes/1").status, 503);
    common::get(addr, "/").expect_status(200, "GET / needs no database");
    signal(&child.0, "TERM");
    let exited = wait_for_exit(&mut child.0, Duration::from_secs(5)).expect("exits within 5 s of SIGTERM");
    assert_eq!(exited.code(), Some(0), "{exited:?}");
}

/// README: `--schema-dir` defaults to "`./schemas` if present": a working directory without one means the
/// envelope alone; with one, its component schemas apply.
#[test]
fn schema_dir_defaults_to_schemas_in_the_working_directory_if_present() {
    let pg = common::shared_postgres();
    let url = pg.create_database("t_bin_default_schemas");
    let redis = Redis::start();
    let redis_url = format!("redis://127.0.0.1:{}/1", redis.port());
    let env = [BASE[0], BASE[1], BASE[2], ("DATABASE_URL", url.as_str()), ("REDIS_URL", redis_url.as_str())];
    let bad_title = record(json!({"title": 1}), 1);

    let empty = tempfile::tempdir().expect("a temp dir");
    let (mut child, addr, _) = spawn_listening(&env, empty.path());
    common::post(addr, "/notes", &bad_title).ok();
    signal(&child.0, "TERM");
    let exited = wait_for_exit(&mut child.0, Duration::from_secs(5)).expect("exits within 5 s of SIGTERM");
    assert_eq!(exited.code(), Some(0), "{exited:?}");

    let workspace = Path::new(SCHEMAS).parent().expect("the workspace root");
    let (mut child, addr, _) = spawn_listening(&env, workspace);
    common::post(addr, "/notes", &bad_title).expect_status(400, "./schemas/notes.schema.json applies");
    common::post(addr, "/notes", &record(json!({"title": "t"}), 1)).ok();
    signal(&child.0, "TERM");
    let exited = wait_for_exit(&mut child.0, Duration::from_secs(5)).expect("exits within 5 s of SIGTERM");
    assert_eq!(exited.code(), Some(0), "{exited:?}");
}
