//! A throwaway PostgreSQL cluster: `initdb` into a temp dir, `postgres` on a free loopback port, trust auth
//! for user `postgres`. PostgreSQL refuses to run as root, so when the tests run as root (CI does) the server
//! runs as the `postgres` system user through `setpriv`, which execs in place: the child's pid is the
//! postmaster's, so the tests can signal it directly.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{find_binary, free_port};

pub struct Postgres {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    /// uid and gid to run as, when the tests run as root.
    run_as: Option<(u32, u32)>,
}

impl Postgres {
    /// Creates a cluster and starts it; waits until it accepts queries. Panics with a clear message when
    /// PostgreSQL is not installed (the README's test command installs it).
    pub fn start() -> Postgres {
        let dir = tempfile::tempdir().expect("temp dir for postgres");
        let run_as = if current_uid() == 0 { Some(system_user("postgres")) } else { None };
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown the postgres temp dir");
        }
        let mut pg = Postgres { child: None, port: free_port(), dir, run_as };
        let status = pg
            .command("initdb")
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "-D"])
            .arg(pg.data_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap_or_else(|e| panic!("could not run initdb: {e}"));
        assert!(status.status.success(), "initdb failed: {}", String::from_utf8_lossy(&status.stderr));
        pg.spawn();
        pg
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for `database` as user `postgres` (no password: trust auth on loopback).
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Creates a database (each test its own) and returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        assert!(name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'), "database name {name:?}");
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(name)
    }

    /// Runs SQL through psql and returns its unaligned output. Panics when psql fails.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let out = Command::new(find_binary("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "postgres"])
            .args(["-p", &self.port.to_string(), "-d", database, "-c", sql])
            .output()
            .unwrap_or_else(|e| panic!("could not run psql: {e}"));
        assert!(out.status.success(), "psql {sql:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `pg_ctl stop -m immediate`: like a crash (no checkpoint); committed data survives via the WAL.
    pub fn stop_immediate(&mut self) {
        self.stop("immediate");
    }

    /// Starts it again on the same port and data (after a stop).
    pub fn restart(&mut self) {
        self.stop("fast");
        self.spawn();
    }

    fn stop(&mut self, mode: &str) {
        if self.child.is_none() {
            return;
        }
        let _ = self
            .command("pg_ctl")
            .args(["stop", "-m", mode, "-w", "-t", "10", "-D"])
            .arg(self.data_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Some(mut child) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Starts the server and waits until it accepts connections. Right after an immediate stop the old
    /// server's backends can hold its shared memory for a moment longer than the postmaster lives, and a new
    /// postmaster then refuses to start ("pre-existing shared memory block is still in use"); so an early exit
    /// is retried for a few seconds before it fails the test, with the server's log in the message.
    fn spawn(&mut self) {
        let mut attempt = 1;
        loop {
            match self.try_spawn() {
                Ok(()) => return,
                Err(_) if attempt < 20 => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(250));
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    fn try_spawn(&mut self) -> Result<(), String> {
        let socket_dir = self.dir.path().to_path_buf();
        let log_path = self.dir.path().join("postgres.log");
        let log = std::fs::File::create(&log_path).map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-p", &self.port.to_string(), "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"])
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .arg("-k")
            .arg(&socket_dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("could not start postgres: {e}"));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let ready = Command::new(find_binary("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-U", "postgres", "-p", &self.port.to_string()])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(format!("postgres exited during startup: {status}; its log:\n{log}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("postgres on port {} was not ready within 30 s", self.port);
    }

    /// A PostgreSQL binary, run as the postgres user when we are root.
    fn command(&self, name: &str) -> Command {
        let binary = find_binary(name);
        match self.run_as {
            Some((uid, gid)) => {
                let mut cmd = Command::new("setpriv");
                cmd.args(["--reuid", &uid.to_string(), "--regid", &gid.to_string(), "--clear-groups", "--"]);
                cmd.arg(binary);
                cmd
            }
            None => Command::new(binary),
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop("immediate");
    }
}

fn current_uid() -> u32 {
    id(&["-u"])
}

fn system_user(name: &str) -> (u32, u32) {
    (id(&["-u", name]), id(&["-g", name]))
}

fn id(args: &[&str]) -> u32 {
    let out = Command::new("id").args(args).output().unwrap_or_else(|e| panic!("could not run id: {e}"));
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("`id {}` gave no number; is there a `postgres` system user?", args.join(" ")))
}
