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
