//! A throwaway PostgreSQL cluster: `initdb` into a temp dir, `postgres` on a free loopback port (no Unix
//! socket), trust auth for user `postgres`. PostgreSQL refuses to run as root, so as root the server runs as
//! the `postgres` system user through `setpriv`, which (like taskset) execs in place: the child's pid is the
//! postmaster's, so it can be signalled directly.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use rustix::process::Signal;

use crate::Options;
use crate::binaries::{INSTALL_HINT, find_in, require, tail, version_of};
use crate::child::Running;

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(10);
const PSQL_TIMEOUT: Duration = Duration::from_secs(120);
/// Right after an immediate stop the old server's backends can hold its shared memory a moment longer than
/// the postmaster lives, and a new postmaster then refuses to start; so an early exit is retried this often.
const START_ATTEMPTS: u32 = 20;

/// PostgreSQL's binaries, all from one install, so a cluster is never initialized by one major version and
/// run by another.
#[derive(Debug, Clone)]
pub struct PgBin {
    pub initdb: PathBuf,
    pub postgres: PathBuf,
    pub pg_isready: PathBuf,
    pub psql: PathBuf,
}

impl PgBin {
    /// initdb, postgres, pg_isready and psql from the directory the `postgres` found in `dirs` really lives in
    /// (following symlinks such as /usr/local/bin/postgres → /usr/lib/postgresql/15/bin/postgres).
    pub fn find(dirs: &[PathBuf]) -> anyhow::Result<PgBin> {
        let missing = || {
            anyhow!("PostgreSQL (postgres, initdb) not found on PATH or in /usr/lib/postgresql/*/bin; {INSTALL_HINT}")
        };
        let postgres = find_in("postgres", dirs).ok_or_else(missing)?;
        let postgres = std::fs::canonicalize(&postgres).unwrap_or(postgres);
        let dir = postgres.parent().ok_or_else(missing)?.to_path_buf();
        let sibling = |name: &str| Some(dir.join(name)).filter(|p| p.is_file()).or_else(|| find_in(name, dirs));
        let initdb = Some(dir.join("initdb")).filter(|p| p.is_file()).ok_or_else(missing)?;
        let pg_isready = sibling("pg_isready").ok_or_else(|| anyhow!("pg_isready not found; {INSTALL_HINT}"))?;
        let psql = sibling("psql").ok_or_else(|| anyhow!("psql not found; {INSTALL_HINT}"))?;
        Ok(PgBin { initdb, postgres, pg_isready, psql })
    }
}

/// A PostgreSQL cluster of our own. Stopped (fast shutdown) when dropped.
pub struct Postgres {
    running: Option<Running>,
    port: u16,
    bin: PgBin,
    /// `taskset -c <cores>` when pinned, then `setpriv … --` when run as root: what goes before `postgres`.
    prefix: Vec<OsString>,
    opts: Options,
    /// Data dir and log; declared last so it is removed only after the server has stopped.
    dir: crate::OwnedDir,
}

impl Postgres {
    /// Creates a cluster and starts it; waits until it accepts connections.
    pub fn start(opts: &Options) -> anyhow::Result<Postgres> {
        let bin = PgBin::find(&opts.dirs)?;
        let dir = crate::OwnedDir::create("postgres-", opts.spawner.clone()).context("temp dir for PostgreSQL")?;
        let demote = if rustix::process::geteuid().is_root() {
            let (uid, gid) = system_user("postgres").context(
                "running as root and there is no `postgres` system user to run PostgreSQL as \
                 (the postgresql package creates it)",
            )?;
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).context("chown the PostgreSQL temp dir")?;
            let setpriv = require("setpriv", &opts.dirs, "apt-get install util-linux")?;
            vec![
                setpriv.into_os_string(),
                format!("--reuid={uid}").into(),
                format!("--regid={gid}").into(),
                "--clear-groups".into(),
                "--".into(),
            ]
        } else {
            Vec::new()
        };
        let mut prefix = Vec::new();
        if let Some(cores) = &opts.cores {
            prefix.push(require("taskset", &opts.dirs, "apt-get install util-linux")?.into_os_string());
            prefix.extend(["-c".into(), cores.into()]);
        }
        prefix.extend(demote.iter().cloned());
        let data = dir.path().join("pgdata");
        let mut initdb = command(&demote, &bin.initdb);
        // --no-sync only skips flushing initdb's own files; a durable server keeps fsync on.
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"])
            .current_dir(dir.path())
            .stdin(Stdio::null());
        let (ok, stdout, stderr) = run_with_timeout(initdb, READY_TIMEOUT).context("initdb")?;
        if !ok {
            bail!("initdb failed: {}", tail(if stderr.trim().is_empty() { &stdout } else { &stderr }, 15));
        }
        let port = crate::free_port().context("bind 127.0.0.1:0")?;
        let mut pg = Postgres { running: None, port, bin, prefix, opts: opts.clone(), dir };
        pg.spawn()?;
        Ok(pg)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.running.as_ref().map(Running::pid)
    }

    /// A URL for `database` as user `postgres` (no password: trust auth on loopback).
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// "15.18".
    pub fn version(&self) -> String {
        version_of(&self.bin.postgres, "(PostgreSQL)")
    }

    pub fn bin(&self) -> &PgBin {
        &self.bin
    }

    /// Runs SQL in `database` through psql; its unaligned, tuples-only output.
    pub fn psql(&self, database: &str, sql: &str) -> anyhow::Result<String> {
        psql(&self.bin.psql, &self.url(database), sql)
    }

    /// Creates database `name` and returns its URL.
    pub fn create_database(&self, name: &str) -> anyhow::Result<String> {
        check_db_name(name)?;
        self.psql("postgres", &format!("CREATE DATABASE {name}"))?;
        Ok(self.url(name))
    }

    /// Immediate shutdown (SIGQUIT, as `pg_ctl stop -m immediate`): like a crash, no checkpoint; committed
    /// data survives through the WAL.
    pub fn stop_immediate(&mut self) {
        self.stop(Signal::QUIT);
    }

    /// Starts it again on the same port and data; a running server is stopped first (fast shutdown).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.stop(Signal::INT);
        self.spawn()
    }

    /// SIGINT is fast shutdown: SIGTERM is "smart" mode, which waits for every client to disconnect, so a
    /// server under test that still holds its pool would always cost the full grace period.
    fn stop(&mut self, signal: Signal) {
        if let Some(mut running) = self.running.take() {
            running.stop(signal, STOP_GRACE);
        }
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let mut attempt = 1;
        loop {
            match self.try_spawn() {
                Ok(()) => return Ok(()),
                Err(Early(_)) if attempt < START_ATTEMPTS => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(250));
                }
                Err(Early(e)) | Err(Late(e)) => return Err(e),
            }
        }
    }

    fn try_spawn(&mut self) -> Result<(), StartError> {
        let log_path = self.dir.path().join("postgres.log");
        let log = std::fs::File::create(&log_path).context("postgres.log").map_err(Late)?;
        let mut cmd = command(&self.prefix, &self.bin.postgres);
        cmd.arg("-D").arg(self.dir.path().join("pgdata"));
        cmd.args(["-p", &self.port.to_string(), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="])
            .args(["-c", "max_connections=200", "-c", "TimeZone=UTC"]);
        if !self.opts.durable {
            cmd.args(["-c", "fsync=off", "-c", "full_page_writes=off"]);
        }
        cmd.current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("postgres.log").map_err(Late)?)
            .stderr(log);
        let running = Running::spawn(self.opts.spawner.as_ref(), cmd, "postgres")
            .with_context(|| format!("could not start {}", self.bin.postgres.display()))
            .map_err(Late)?;
        let running = self.running.insert(running);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let ready = Command::new(&self.bin.pg_isready)
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-d", "postgres"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return Ok(());
            }
            if let Some(status) = running.exited() {
                self.running = None;
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(Early(anyhow!("postgres exited during startup ({status}): {}", tail(&log, 15))));
            }
            if Instant::now() > deadline {
                return Err(Late(anyhow!("postgres on :{} not ready within {} s", self.port, READY_TIMEOUT.as_secs())));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop(Signal::INT);
    }
}

/// Why a start failed: `Early` (the postmaster exited) is worth a retry, `Late` is not.
enum StartError {
    Early(anyhow::Error),
    Late(anyhow::Error),
}
use StartError::{Early, Late};

/// Runs `sql` through `psql` against `url` (any server, ours or not); its unaligned, tuples-only output.
pub fn psql(psql: &Path, url: &str, sql: &str) -> anyhow::Result<String> {
    let mut cmd = Command::new(psql);
    cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::null());
    let (ok, stdout, stderr) = run_with_timeout(cmd, PSQL_TIMEOUT).with_context(|| format!("psql {sql:?}"))?;
    if !ok {
        bail!("psql {sql:?} failed: {}", stderr.trim());
    }
    Ok(stdout)
}

/// Database names go into SQL unquoted: only what needs no quoting.
pub fn check_db_name(db: &str) -> anyhow::Result<()> {
    let ok = !db.is_empty()
        && db.len() <= 63
        && db.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !db.as_bytes()[0].is_ascii_digit();
    if !ok {
        bail!("database name {db:?}: use lower-case letters, digits and _ (not first), at most 63");
    }
    Ok(())
}

fn command(prefix: &[OsString], program: &Path) -> Command {
    match prefix.split_first() {
        Some((first, rest)) => {
            let mut cmd = Command::new(first);
            cmd.args(rest).arg(program);
            cmd
        }
        None => Command::new(program),
    }
}

/// Runs a command with its output captured; kills it after `timeout`. For short outputs only (both pipes are
/// read after exit, so a child filling a pipe would wait for the timeout).
fn run_with_timeout(mut cmd: Command, timeout: Duration) -> anyhow::Result<(bool, String, String)> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("did not finish within {} s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut stdout)?;
    }
    if let Some(mut err) = child.stderr.take() {
        err.read_to_string(&mut stderr)?;
    }
    Ok((status.success(), stdout, stderr))
}

fn system_user(name: &str) -> anyhow::Result<(u32, u32)> {
    let id = |flag: &str| -> anyhow::Result<u32> {
        let out = Command::new("id").args([flag, name]).output().context("run id")?;
        if !out.status.success() {
            bail!("id {flag} {name}: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
    };
    Ok((id("-u")?, id("-g")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_names() {
        assert!(check_db_name("notes_rust_1").is_ok());
        for bad in ["", "1abc", "a-b", "A", "x; DROP DATABASE y"] {
            assert!(check_db_name(bad).is_err(), "{bad:?}");
        }
    }
}
