//! The ladder-rs binary: bad config exits 64 with one line, the listening line, SIGTERM → exit 0, and the seed
//! subcommand (idempotent: re-running, or running with another row count and back, gives the same table).

mod common;

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Dataset, assert_json, body, postgres_body};
use testkit::process::{Guard, wait_for_exit};

fn ladder(env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut cmd = Command::new(testkit::workspace::binary("ladder-rs"));
    cmd.env_clear().env("RUST_LOG", "warn").args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs to completion within 30 s: (exit code, stdout, stderr).
fn run(env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String, String) {
    let child = ladder(env, args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let mut child = Guard(child);
    let status = wait_for_exit(&mut child.0, Duration::from_secs(30)).expect("ladder-rs exits");
    let (mut stdout, mut stderr) = (String::new(), String::new());
    if let Some(out) = child.0.stdout.as_mut() {
        let _ = out.read_to_string(&mut stdout);
    }
    if let Some(err) = child.0.stderr.as_mut() {
        let _ = err.read_to_string(&mut stderr);
    }
    (status.code(), stdout, stderr)
}

#[test]
fn bad_config_exits_64_with_one_line() {
    for (env, args) in [
        (vec![("LADDER_PORT", "http")], vec![]),
        (vec![("LADDER_WORKERS", "0")], vec![]),
        (vec![("LADDER_PG_TIMEOUT_MS", "0")], vec![]),
        (vec![("DATABASE_URL", "not a url")], vec![]),
        (vec![("LADDER_UPSTREAM_URL", "https://127.0.0.1:3009/upstream")], vec![]),
        (vec![], vec!["--upstream-url", "127.0.0.1:3009/upstream"]),
        (vec![("LADDER_UPSTREAM_TIMEOUT_MS", "0")], vec![]),
        (vec![], vec!["--no-such-flag"]),
        (vec![], vec!["seed"]), // no DATABASE_URL
        (vec![("DATABASE_URL", "postgres://x@127.0.0.1/x")], vec!["seed", "--rows", "0"]),
    ] {
        let (code, _, stderr) = run(&env, &args);
        assert_eq!(code, Some(64), "{env:?} {args:?}: {stderr:?}");
        assert_eq!(stderr.lines().count(), 1, "{env:?} {args:?}: one line, got {stderr:?}");
    }
}

/// A digest of the whole table, as psql prints it.
fn table_digest(pg: &testkit::Postgres, db: &str) -> String {
    pg.psql(db, "SELECT count(*) || ':' || md5(string_agg(id || ',' || name || ',' || score, ';' ORDER BY id)) FROM ladder_items")
}

#[test]
fn seed_is_idempotent_and_the_binary_serves_it() {
    let pg = common::shared_postgres();
    let url = pg.create_database("t_seed");
    let seed = |rows: &str| {
        let (code, stdout, stderr) = run(&[("DATABASE_URL", &url)], &["seed", "--rows", rows]);
        assert_eq!(code, Some(0), "seed --rows {rows}: {stderr}");
        assert!(stdout.contains(&format!("holds {rows} rows")), "{stdout:?}");
    };
    seed("1000");
    let first = table_digest(&pg, "t_seed");
    assert!(first.starts_with("1000:"), "{first}");
    assert_eq!(pg.psql("t_seed", "SELECT name || ' ' || score FROM ladder_items WHERE id = 7"), "item-7 259");
    seed("1000");
    assert_eq!(table_digest(&pg, "t_seed"), first, "a second run changes nothing");
    // Rows edited or added by hand are put back; another count and back gives the same table again.
    pg.psql(
        "t_seed",
        "UPDATE ladder_items SET score = -1 WHERE id = 3; INSERT INTO ladder_items VALUES (5000, 'x', 0)",
    );
    seed("1200");
    assert!(table_digest(&pg, "t_seed").starts_with("1200:"));
    seed("1000");
    assert_eq!(table_digest(&pg, "t_seed"), first, "1200 then 1000 rows");
    // The default is 1000 rows, and --database-url works as well as the variable.
    let (code, _, stderr) = run(&[], &["seed", "--database-url", &url]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(table_digest(&pg, "t_seed"), first, "the default row count");

    // The server: listening line, answers the top rung, exits 0 on SIGTERM.
    let data = Dataset::generate(50);
    let db = data.db().display().to_string();
    let port = testkit::free_port().to_string();
    let env = [
        ("LADDER_PORT", port.as_str()),
        ("LADDER_HOSTNAME", "127.0.0.1"),
        ("LADDER_WORKERS", "2"),
        ("LADDER_DB", db.as_str()),
        ("DATABASE_URL", url.as_str()),
    ];
    let child = ladder(&env, &[]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn");
    let mut child = Guard(child);
    let stdout = child.0.stdout.take().expect("stdout");
    let line = testkit::first_line(stdout, Duration::from_secs(10)).expect("a listening line");
    assert!(line.starts_with(&format!("ladder-rs listening on http://127.0.0.1:{port}")), "{line}");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let id = data.sample_ids().remove(0);
    let res = common::post(addr, "/ladder/postgres", body(&id).as_bytes());
    assert_json(&res, 200, &postgres_body(&data, &id), "the binary's top rung");

    let status = Command::new("kill").arg("-TERM").arg(child.0.id().to_string()).status().expect("kill");
    assert!(status.success());
    let exit = wait_for_exit(&mut child.0, Duration::from_secs(5)).expect("exits after SIGTERM");
    assert_eq!(exit.code(), Some(0));
}

/// `ladder-rs` serving `data` over TLS with the files in `dir`: the child and its address.
fn ladder_tls(data: &Dataset, dir: &std::path::Path) -> (Guard, SocketAddr) {
    let db = data.db().display().to_string();
    let port = testkit::free_port().to_string();
    let (cert, key) = (dir.join("cert.pem").display().to_string(), dir.join("key.pem").display().to_string());
    let env = [
        ("LADDER_PORT", port.as_str()),
        ("LADDER_HOSTNAME", "127.0.0.1"),
        ("LADDER_WORKERS", "2"),
        ("LADDER_DB", db.as_str()),
        ("LADDER_TLS_CERT", cert.as_str()),
        ("LADDER_TLS_KEY", key.as_str()),
    ];
    let child = ladder(&env, &[]).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn");
    let mut child = Guard(child);
    let stdout = child.0.stdout.take().expect("stdout");
    let line = testkit::first_line(stdout, Duration::from_secs(10)).expect("a listening line");
    assert!(line.starts_with(&format!("ladder-rs listening on https://127.0.0.1:{port}")), "{line}");
    (child, format!("127.0.0.1:{port}").parse().expect("addr"))
}

#[test]
fn https_serves_the_rungs_and_sighup_swaps_the_certificate() {
    let dir = tempfile::tempdir().expect("dir");
    let old = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs");
    old.write(dir.path()).expect("write");
    let data = Dataset::generate(50);
    let (mut child, addr) = ladder_tls(&data, dir.path());
    let id = data.sample_ids().remove(0);
    let sqlite =
        format!("POST /ladder/sqlite HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{}", body(&id).len(), body(&id));
    let mut open = testkit::http::Conn::open_tls(addr, &testkit::tls::Client::new(&old.ca_pem)).expect("handshake");
    assert_json(&open.request(&sqlite), 200, &common::sqlite_body(&data, &id), "the SQLite rung over TLS");

    let new = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("new");
    new.write(dir.path()).expect("write the new pair");
    let hup = Command::new("kill").arg("-HUP").arg(child.0.id().to_string()).status().expect("kill");
    assert!(hup.success());
    let client = testkit::tls::Client::new(&new.ca_pem);
    let swapped = testkit::wait::until(Duration::from_secs(5), || testkit::http::Conn::open_tls(addr, &client).is_ok());
    assert!(swapped.is_some(), "after SIGHUP the new certificate is served");
    assert!(child.0.try_wait().expect("try_wait").is_none(), "SIGHUP does not stop the server");
    assert_json(&open.request(&sqlite), 200, &common::sqlite_body(&data, &id), "a connection from before SIGHUP");

    let status = Command::new("kill").arg("-TERM").arg(child.0.id().to_string()).status().expect("kill");
    assert!(status.success());
    assert_eq!(wait_for_exit(&mut child.0, Duration::from_secs(5)).expect("exits").code(), Some(0));
}

#[test]
fn bad_tls_files_exit_64_naming_the_file() {
    let dir = tempfile::tempdir().expect("dir");
    let files = certs::Bundle::generate(certs::LOOPBACK_NAMES).expect("certs").write(dir.path()).expect("write");
    let other_dir = tempfile::tempdir().expect("dir");
    let other = certs::Bundle::generate(&["localhost"]).expect("other").write(other_dir.path()).expect("write");
    let (cert, key, other_key) =
        (files.chain.display().to_string(), files.key.display().to_string(), other.key.display().to_string());
    let missing = dir.path().join("nope.pem").display().to_string();
    for (env, expect) in [
        (vec![("LADDER_TLS_CERT", cert.as_str())], "--tls-key"),
        (vec![("LADDER_TLS_KEY", key.as_str())], "--tls-cert"),
        (vec![("LADDER_TLS_CERT", cert.as_str()), ("LADDER_TLS_KEY", missing.as_str())], missing.as_str()),
        (vec![("LADDER_TLS_CERT", cert.as_str()), ("LADDER_TLS_KEY", other_key.as_str())], "does not match"),
        (vec![("LADDER_TLS_CERT", key.as_str()), ("LADDER_TLS_KEY", key.as_str())], "no CERTIFICATE"),
    ] {
        let (code, stdout, stderr) = run(&env, &[]);
        assert_eq!(code, Some(64), "{env:?}: {stderr:?}");
        assert_eq!(stderr.lines().count(), 1, "{env:?}: one line, got {stderr:?}");
        assert!(stderr.contains(expect), "{env:?}: {stderr:?} names {expect}");
        assert!(stdout.is_empty(), "nothing listened: {stdout:?}");
    }
}
