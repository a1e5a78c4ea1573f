//! Dependencies the notes and metadata workloads need: a PostgreSQL cluster and a redis-server of our own,
//! pinned to the loader's cores (unless the user gives `DATABASE_URL` / `REDIS_URL`), plus the seed data.
//!
//! PostgreSQL keeps its durability defaults (fsync, synchronous_commit, full_page_writes): a benchmark of a
//! write path with fsync off measures something no deployment runs. Everything started here is stopped when
//! `Deps` is dropped, and nothing else is ever signalled. The servers are started through
//! [`crate::process::Spawned`] (each its own process group, registered), so Ctrl-C and panics, which release
//! builds turn into aborts that run no destructor, still take them down with the rest of compare's children.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use rustix::process::{Pid, Signal, kill_process};

use crate::process::Spawned;

/// The step every "not installed" error names.
pub const INSTALL_HINT: &str = "install PostgreSQL and Redis: bash scripts/install-test-deps.sh";

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const STOP_GRACE: Duration = Duration::from_secs(5);
const PSQL_TIMEOUT: Duration = Duration::from_secs(120);
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// The component notes are seeded into (as bench/notes_bench.py does).
const NOTES_COMPONENT: &str = "notes";

#[derive(Debug, Clone)]
pub struct DepsOptions {
    /// `taskset -c` list for the servers we start (the loader's cores).
    pub cores: String,
    /// Use this PostgreSQL instead of starting one; `database_url(db)` swaps in the database name.
    pub database_url: Option<String>,
    /// Use this Redis instead of starting one.
    pub redis_url: Option<String>,
}

pub struct Deps {
    postgres: Option<EmbeddedPostgres>,
    redis: Option<EmbeddedRedis>,
    given_database_url: Option<String>,
    given_redis_url: Option<String>,
    cores: String,
    /// psql for creating and dropping databases (the embedded cluster's own, or one from PATH).
    psql: Option<PathBuf>,
    /// Databases known to exist, so `database_url` asks the server only once per name.
    created: Mutex<HashSet<String>>,
    /// Data dir and logs; declared last so it is removed only after the servers have stopped.
    dir: Option<tempfile::TempDir>,
}

struct EmbeddedPostgres {
    child: Spawned,
    port: u16,
    version: String,
}

struct EmbeddedRedis {
    child: Spawned,
    port: u16,
    version: String,
}

/// Where PostgreSQL's binaries are: all from one install, so initdb and postgres are the same version.
struct PgBin {
    initdb: PathBuf,
    postgres: PathBuf,
    pg_isready: PathBuf,
    psql: PathBuf,
}

impl Deps {
    pub fn start(opts: &DepsOptions) -> anyhow::Result<Deps> {
        Deps::start_in(opts, &search_dirs())
    }

    /// `start` with an explicit binary search path (tests use an empty one to see the missing-binary error
    /// without touching the process environment).
    fn start_in(opts: &DepsOptions, dirs: &[PathBuf]) -> anyhow::Result<Deps> {
        // Look everything up before starting anything, so a missing piece fails fast and cleanly.
        let pg_bin = if opts.database_url.is_none() { Some(find_pg_bin(dirs)?) } else { None };
        let redis_server = if opts.redis_url.is_none() {
            Some(find_in("redis-server", dirs).ok_or_else(|| anyhow!("redis-server not found; {INSTALL_HINT}"))?)
        } else {
            None
        };
        let taskset = if pg_bin.is_some() || redis_server.is_some() {
            Some(find_in("taskset", dirs).ok_or_else(|| anyhow!("taskset not found (apt-get install util-linux)"))?)
        } else {
            None
        };
        let psql = match &pg_bin {
            Some(bin) => Some(bin.psql.clone()),
            // Only needed to create databases on the given server; its absence is reported when that happens.
            None => find_in("psql", dirs),
        };
        let mut deps = Deps {
            postgres: None,
            redis: None,
            given_database_url: opts.database_url.clone(),
            given_redis_url: opts.redis_url.clone(),
            cores: opts.cores.clone(),
            psql,
            created: Mutex::new(HashSet::new()),
            dir: None,
        };
        if pg_bin.is_none() && redis_server.is_none() {
            return Ok(deps);
        }
        let dir = tempfile::Builder::new().prefix("compare-deps-").tempdir().context("temp dir for PostgreSQL")?;
        let dir_path = dir.path().to_path_buf();
        deps.dir = Some(dir);
        // From here on an error drops `deps`, which stops whatever was already started.
        if let (Some(bin), Some(taskset)) = (&pg_bin, &taskset) {
            deps.postgres = Some(start_postgres(bin, taskset, &opts.cores, &dir_path, dirs)?);
        }
        if let (Some(server), Some(taskset)) = (&redis_server, &taskset) {
            deps.redis = Some(start_redis(server, taskset, &opts.cores, &dir_path)?);
        }
        Ok(deps)
    }

    /// A URL for database `db`, created on first use.
    pub fn database_url(&self, db: &str) -> anyhow::Result<String> {
        check_db_name(db)?;
        let url = self.url_for(db)?;
        let mut created = self.created.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !created.contains(db) {
            let exists = self.psql(&self.admin_url()?, &format!("SELECT 1 FROM pg_database WHERE datname = '{db}'"))?;
            if exists.trim() != "1" {
                self.psql(&self.admin_url()?, &format!("CREATE DATABASE {db}"))?;
            }
            created.insert(db.to_string());
        }
        Ok(url)
    }

    /// Drops `db` (disconnecting its sessions) and creates it empty, for a fresh run.
    pub fn reset_database(&self, db: &str) -> anyhow::Result<()> {
        check_db_name(db)?;
        let mut created = self.created.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let admin = self.admin_url()?;
        self.psql(&admin, &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))?;
        self.psql(&admin, &format!("CREATE DATABASE {db}"))?;
        created.insert(db.to_string());
        Ok(())
    }

    pub fn redis_url(&self) -> String {
        match (&self.given_redis_url, &self.redis) {
            (Some(url), _) => url.clone(),
            (None, Some(redis)) => format!("redis://127.0.0.1:{}", redis.port),
            // start() guarantees one of the two.
            (None, None) => String::new(),
        }
    }

    /// POSTs notes 1..=count, in order, on one keep-alive connection to the notes server at `base_url`
    /// (`http://host:port`), with the bodies bench/notes_bench.py seeds. Any status but 200 is an error.
    pub fn seed_notes(&self, base_url: &str, count: u32) -> anyhow::Result<()> {
        let authority = http_authority(base_url)?;
        let path = format!("/{NOTES_COMPONENT}");
        let mut conn: Option<HttpConn> = None;
        let mut request = Vec::with_capacity(512);
        for i in 1..=count {
            let body = note_body(i);
            request.clear();
            write!(
                request,
                "POST {path} HTTP/1.1\r\nHost: {authority}\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\n\r\n{body}",
                body.len()
            )?;
            let c = match conn.as_mut() {
                Some(c) => c,
                None => conn.insert(HttpConn::connect(&authority)?),
            };
            let (status, keep_alive, resp_body) =
                c.exchange(&request).with_context(|| format!("seed POST #{i} to {base_url}{path}"))?;
            if status != 200 {
                let shown = String::from_utf8_lossy(&resp_body[..resp_body.len().min(300)]).into_owned();
                bail!("seed POST #{i} to {base_url}{path}: status {status}, body {shown:?}");
            }
            if !keep_alive {
                conn = None;
            }
        }
        Ok(())
    }

    /// Pids of the servers started here (the postmaster and redis-server; each is the root of its tree).
    pub fn pids(&self) -> Vec<u32> {
        let pg = self.postgres.as_ref().map(|p| p.child.pid());
        let redis = self.redis.as_ref().map(|r| r.child.pid());
        pg.into_iter().chain(redis).collect()
    }

    /// One line for reports: what runs where.
    pub fn describe(&self) -> String {
        let cores = if self.cores.contains([',', '-']) { "cores" } else { "core" };
        let pinned = format!("pinned to {cores} {}", self.cores);
        let pg =
            self.postgres.as_ref().map(|p| format!("PostgreSQL {} on :{} (durability defaults)", p.version, p.port));
        let redis = self.redis.as_ref().map(|r| format!("redis-server {} on :{}", r.version, r.port));
        match (pg, redis) {
            (Some(pg), Some(redis)) => format!("{pg}, {redis}, {pinned}"),
            (Some(pg), None) => format!("{pg} {pinned}, given REDIS_URL"),
            (None, Some(redis)) => format!("given DATABASE_URL, {redis} {pinned}"),
            (None, None) => "given DATABASE_URL, given REDIS_URL".to_string(),
        }
    }

    fn url_for(&self, db: &str) -> anyhow::Result<String> {
        match (&self.given_database_url, &self.postgres) {
            (Some(url), _) => with_database(url, db),
            (None, Some(pg)) => Ok(format!("postgres://postgres@127.0.0.1:{}/{db}", pg.port)),
            (None, None) => bail!("no PostgreSQL configured"),
        }
    }

    /// Where CREATE/DROP DATABASE run: the given URL as is (its user may reach no other database), or our
    /// cluster's `postgres` database.
    fn admin_url(&self) -> anyhow::Result<String> {
        match &self.given_database_url {
            Some(url) => Ok(url.clone()),
            None => self.url_for("postgres"),
        }
    }

    fn psql(&self, url: &str, sql: &str) -> anyhow::Result<String> {
        let psql = self.psql.as_ref().ok_or_else(|| anyhow!("psql not found; {INSTALL_HINT}"))?;
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
}

impl Drop for Deps {
    fn drop(&mut self) {
        // Signal both first, then wait: they shut down in parallel.
        // PostgreSQL gets SIGINT (fast shutdown): SIGTERM is its "smart" mode, which waits for every client to
        // disconnect, so a server under test that still holds its pool would always cost the full grace period.
        if let Some(pg) = &self.postgres {
            signal(&pg.child, Signal::INT);
        }
        if let Some(redis) = &self.redis {
            signal(&redis.child, Signal::TERM);
        }
        let deadline = Instant::now() + STOP_GRACE;
        for child in self.postgres.iter_mut().map(|p| &mut p.child).chain(self.redis.iter_mut().map(|r| &mut r.child)) {
            let _ = child.wait_timeout(deadline.saturating_duration_since(Instant::now()));
            // SIGKILL to its whole group if it is still there, and any leftovers of the group if it is not.
            child.kill();
        }
    }
}

/// Only to a child we spawned and have not reaped (Spawned reaps in try_wait/kill, which come later), so the
/// pid cannot belong to anyone else. Already exited is fine.
fn signal(child: &Spawned, signal: Signal) {
    if let Some(pid) = i32::try_from(child.pid()).ok().and_then(Pid::from_raw) {
        let _ = kill_process(pid, signal);
    }
}

fn start_postgres(
    bin: &PgBin,
    taskset: &Path,
    cores: &str,
    dir: &Path,
    dirs: &[PathBuf],
) -> anyhow::Result<EmbeddedPostgres> {
    // PostgreSQL refuses to run as root: then it runs as the `postgres` system user, through setpriv, which
    // (like taskset) execs in place, so the child's pid is the postmaster's.
    let demote = if rustix::process::geteuid().is_root() {
        let (uid, gid) = system_user("postgres").context(
            "running as root and there is no `postgres` system user to run PostgreSQL as \
             (the postgresql package creates it)",
        )?;
        std::os::unix::fs::chown(dir, Some(uid), Some(gid)).context("chown the PostgreSQL temp dir")?;
        let setpriv =
            find_in("setpriv", dirs).ok_or_else(|| anyhow!("setpriv not found (apt-get install util-linux)"))?;
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
    let data = dir.join("pgdata");
    let mut initdb = command(&demote, &bin.initdb);
    // --no-sync only skips flushing initdb's own files; the running server keeps fsync on.
    initdb
        .arg("-D")
        .arg(&data)
        .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"])
        .current_dir(dir)
        .stdin(Stdio::null());
    let (ok, stdout, stderr) = run_with_timeout(initdb, READY_TIMEOUT).context("initdb")?;
    if !ok {
        bail!("initdb failed: {}", tail(if stderr.trim().is_empty() { &stdout } else { &stderr }, 15));
    }

    let port = free_port()?;
    let log_path = dir.join("postgres.log");
    let log = std::fs::File::create(&log_path).context("postgres.log")?;
    let mut cmd = Command::new(taskset);
    cmd.args(["-c", cores]).args(&demote).arg(&bin.postgres).arg("-D").arg(&data);
    cmd.args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="])
        .args(["-c", "max_connections=200", "-c", "TimeZone=UTC"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("postgres.log")?)
        .stderr(log);
    let child =
        Spawned::spawn(cmd, "postgres").with_context(|| format!("could not start {}", bin.postgres.display()))?;
    // Owned from here on, so an early return below stops it.
    let mut pg = EmbeddedPostgres { child, port, version: version_of(&bin.postgres, "(PostgreSQL)") };
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let ready = Command::new(&bin.pg_isready)
            .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres", "-d", "postgres"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ready {
            return Ok(pg);
        }
        if let Ok(Some(status)) = pg.child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            bail!("postgres exited during startup ({status}): {}", tail(&log, 15));
        }
        if Instant::now() > deadline {
            bail!("postgres on :{port} not ready within {} s", READY_TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start_redis(server: &Path, taskset: &Path, cores: &str, dir: &Path) -> anyhow::Result<EmbeddedRedis> {
    let port = free_port()?;
    let log_path = dir.join("redis.log");
    let log = std::fs::File::create(&log_path).context("redis.log")?;
    let mut cmd = Command::new(taskset);
    cmd.args(["-c", cores])
        .arg(server)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("redis.log")?)
        .stderr(log);
    let child = Spawned::spawn(cmd, "redis-server").with_context(|| format!("could not start {}", server.display()))?;
    let mut redis = EmbeddedRedis { child, port, version: version_of(server, "v=") };
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if redis_ping(port) {
            return Ok(redis);
        }
        if let Ok(Some(status)) = redis.child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            bail!("redis-server exited during startup ({status}): {}", tail(&log, 15));
        }
        if Instant::now() > deadline {
            bail!("redis-server on :{port} did not answer PING within {} s", READY_TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stop_now(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

fn redis_ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(stream.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

fn command(prefix: &[std::ffi::OsString], program: &Path) -> Command {
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
            stop_now(&mut child);
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

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n    | ")
}

/// "15.18" from `postgres (PostgreSQL) 15.18 (Debian …)`, "7.0.15" from `Redis server v=7.0.15 sha=…`.
fn version_of(binary: &Path, marker: &str) -> String {
    let out = Command::new(binary).arg("--version").stdin(Stdio::null()).output();
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    parse_version(&text, marker).unwrap_or_else(|| "(unknown version)".to_string())
}

fn parse_version(text: &str, marker: &str) -> Option<String> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let version = rest.split_whitespace().next()?;
    Some(version.to_string())
}

fn free_port() -> anyhow::Result<u16> {
    // Free a moment ago; the kernel does not hand the same ephemeral port out again right away.
    Ok(TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).context("bind 127.0.0.1:0")?.port())
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

/// PATH, then where Debian puts servers, then PostgreSQL's versioned dirs, newest major first.
fn search_dirs() -> Vec<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut pg_dirs: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| {
                    let major = e.file_name().to_string_lossy().split('.').next().and_then(|m| m.parse().ok());
                    (major.unwrap_or(0), e.path().join("bin"))
                })
                .collect()
        })
        .unwrap_or_default();
    pg_dirs.sort();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"].map(PathBuf::from))
        .chain(pg_dirs.into_iter().rev().map(|(_, dir)| dir))
        .collect()
}

fn find_in(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter().map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
}

/// initdb, postgres, pg_isready and psql from the directory the `postgres` found on the search path really
/// lives in (following symlinks such as /usr/local/bin/postgres → /usr/lib/postgresql/15/bin/postgres), so a
/// cluster is never initialized by one major version and run by another.
fn find_pg_bin(dirs: &[PathBuf]) -> anyhow::Result<PgBin> {
    let missing =
        || anyhow!("PostgreSQL (postgres, initdb) not found on PATH or in /usr/lib/postgresql/*/bin; {INSTALL_HINT}");
    let postgres = find_in("postgres", dirs).ok_or_else(missing)?;
    let postgres = std::fs::canonicalize(&postgres).unwrap_or(postgres);
    let dir = postgres.parent().ok_or_else(missing)?.to_path_buf();
    let sibling = |name: &str| {
        let path = dir.join(name);
        path.is_file().then_some(path)
    };
    let initdb = sibling("initdb").ok_or_else(missing)?;
    let pg_isready = sibling("pg_isready")
        .or_else(|| find_in("pg_isready", dirs))
        .ok_or_else(|| anyhow!("pg_isready not found; {INSTALL_HINT}"))?;
    let psql =
        sibling("psql").or_else(|| find_in("psql", dirs)).ok_or_else(|| anyhow!("psql not found; {INSTALL_HINT}"))?;
    Ok(PgBin { initdb, postgres, pg_isready, psql })
}

/// Database names go into SQL unquoted: only what needs no quoting.
fn check_db_name(db: &str) -> anyhow::Result<()> {
    let ok = !db.is_empty()
        && db.len() <= 63
        && db.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !db.as_bytes()[0].is_ascii_digit();
    if !ok {
        bail!("database name {db:?}: use lower-case letters, digits and _ (not first), at most 63");
    }
    Ok(())
}

/// `url` with its database (the path) replaced by `db`, query string kept.
fn with_database(url: &str, db: &str) -> anyhow::Result<String> {
    let scheme_end = url.find("://").ok_or_else(|| anyhow!("DATABASE_URL {url:?} is not a URL"))? + 3;
    let (head, query) = match url.find('?') {
        Some(q) => (&url[..q], &url[q..]),
        None => (url, ""),
    };
    let authority_end = head[scheme_end..].find('/').map_or(head.len(), |i| scheme_end + i);
    Ok(format!("{}/{db}{query}", &head[..authority_end]))
}

/// `host:port` of an `http://host:port[/]` base URL.
fn http_authority(base_url: &str) -> anyhow::Result<String> {
    let rest =
        base_url.strip_prefix("http://").ok_or_else(|| anyhow!("base URL {base_url:?}: expected http://host:port"))?;
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        bail!("base URL {base_url:?}: no host");
    }
    Ok(authority.to_string())
}

/// Seed note `i` (1-based), byte for byte what bench/notes_bench.py's `compact(note_body(i))` sends. Note 1's
/// timestamps are not normalized (no milliseconds, an offset) so checks cover the timestamp format.
pub fn note_body(i: u32) -> String {
    let (created, modified) = if i == 1 {
        ("2024-01-02T03:04:05Z".to_string(), "2024-05-06T09:08:07.123+02:00".to_string())
    } else {
        (format!("2024-01-{:02}T10:00:00.250Z", 1 + i % 28), format!("2024-02-{:02}T11:30:00.500Z", 1 + i % 28))
    };
    format!(
        concat!(
            r#"{{"data":{{"title":"Note {i}","body":"Body of note {i}: remember the milk, and the eggs.","#,
            r#""tags":["seed","n{tag}"],"meta":{{"words":{words},"pinned":{pinned},"source":"notes_bench"}}}},"#,
            r#""date_created":"{created}","date_modified":"{modified}","created_by":{by},"modified_by":{mod_by}}}"#
        ),
        i = i,
        tag = i % 10,
        words = 9 + i % 7,
        pinned = i.is_multiple_of(2),
        created = created,
        modified = modified,
        by = 1 + i % 3,
        mod_by = 2 + i % 5,
    )
}

/// A keep-alive HTTP/1.1 connection for seeding: every read and write under a timeout.
struct HttpConn {
    reader: BufReader<TcpStream>,
}

impl HttpConn {
    fn connect(authority: &str) -> anyhow::Result<HttpConn> {
        let addrs: Vec<_> = authority.to_socket_addrs().with_context(|| format!("resolve {authority}"))?.collect();
        let mut last = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, HTTP_TIMEOUT) {
                Ok(stream) => {
                    stream.set_read_timeout(Some(HTTP_TIMEOUT))?;
                    stream.set_write_timeout(Some(HTTP_TIMEOUT))?;
                    stream.set_nodelay(true)?;
                    return Ok(HttpConn { reader: BufReader::new(stream) });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.map_or_else(|| anyhow!("{authority}: no address"), |e| anyhow!("connect {authority}: {e}")))
    }

    /// Sends one request; returns status, whether the connection may be reused, and the body.
    fn exchange(&mut self, request: &[u8]) -> anyhow::Result<(u16, bool, Vec<u8>)> {
        self.reader.get_mut().write_all(request)?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!("connection closed before a response");
        }
        let mut parts = line.split_whitespace();
        let version = parts.next().unwrap_or_default().to_string();
        let status: u16 =
            parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| anyhow!("bad status line {line:?}"))?;
        let mut keep_alive = version == "HTTP/1.1";
        let mut length: Option<usize> = None;
        let mut chunked = false;
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                bail!("connection closed in the response head");
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let Some((name, value)) = header.split_once(':') else { bail!("bad header line {header:?}") };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.parse().with_context(|| format!("content-length {value:?}"))?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().contains("chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                let value = value.to_ascii_lowercase();
                keep_alive = if keep_alive { !value.contains("close") } else { value.contains("keep-alive") };
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader.read_line(&mut line)?;
                let size = line.trim().split(';').next().unwrap_or_default();
                let size = usize::from_str_radix(size, 16).with_context(|| format!("chunk size {line:?}"))?;
                if size == 0 {
                    // Trailers, up to the empty line.
                    loop {
                        line.clear();
                        if self.reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
                            break;
                        }
                    }
                    break;
                }
                let start = body.len();
                body.resize(start + size, 0);
                self.reader.read_exact(&mut body[start..])?;
                line.clear();
                self.reader.read_line(&mut line)?;
            }
        } else if let Some(length) = length {
            body.resize(length, 0);
            self.reader.read_exact(&mut body)?;
        } else {
            self.reader.read_to_end(&mut body)?;
            keep_alive = false;
        }
        Ok((status, keep_alive, body))
    }
}

/// The metadata workload's dataset in `dir`: `metadata-<rows>.db` and `sample_ids-<rows>.txt` (seed 1, 10000
/// sample ids, 1% absent), regenerated every time so a change to the generator can never leave stale data.
pub fn metadata_dataset(dir: &Path, rows: u64) -> anyhow::Result<(PathBuf, PathBuf)> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let args = metadata::gen_data::GenDataArgs {
        db: dir.join(format!("metadata-{rows}.db")),
        ids: dir.join(format!("sample_ids-{rows}.txt")),
        rows,
        seed: 1,
        samples: 10_000,
        absent_percent: 1.0,
        force: true,
    };
    metadata::gen_data::run(&args).with_context(|| format!("generate the metadata dataset in {}", dir.display()))?;
    Ok((args.db, args.ids))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn embedded() -> DepsOptions {
        DepsOptions { cores: "0".to_string(), database_url: None, redis_url: None }
    }

    fn alive(pid: u32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
    }

    /// Every process whose parent is `pid` (the postmaster's backends and auxiliary processes).
    fn children(pid: u32) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&p| {
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                // pid (comm) state ppid …; comm may contain spaces, so parse after the last ')'.
                let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
                ppid.and_then(|p| p.parse::<u32>().ok()) == Some(pid)
            })
            .collect()
    }

    #[test]
    fn start_serve_and_stop_leave_nothing_behind() {
        let deps = Deps::start(&embedded()).expect("start deps");
        let pids = deps.pids();
        assert_eq!(pids.len(), 2, "postmaster and redis-server");
        for pid in &pids {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
            let cpus = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(str::trim);
            assert_eq!(cpus, Some("0"), "process {pid} is pinned");
        }
        let url = deps.database_url("deps_smoke").expect("database url");
        assert!(url.ends_with("/deps_smoke"), "{url}");
        // Reachable, and durability defaults left on.
        let durability = "SELECT string_agg(setting, ',' ORDER BY name) FROM pg_settings \
                          WHERE name IN ('fsync', 'full_page_writes', 'synchronous_commit')";
        let settings = deps.psql(&url, durability).expect("query");
        assert_eq!(settings.trim(), "on,on,on");
        deps.psql(&url, "CREATE TABLE t (x int)").expect("create table");
        // A second call must not try to create it again.
        assert_eq!(deps.database_url("deps_smoke").expect("again"), url);
        deps.reset_database("deps_smoke").expect("reset");
        let tables = deps.psql(&url, "SELECT count(*) FROM pg_tables WHERE tablename = 't'").expect("query");
        assert_eq!(tables.trim(), "0", "reset leaves an empty database");
        assert!(redis_ping(deps.redis_url().rsplit(':').next().and_then(|p| p.parse().ok()).expect("port")));
        let description = deps.describe();
        assert!(description.starts_with("PostgreSQL 1"), "{description}");
        assert!(
            description.contains(", redis-server ") && description.ends_with(", pinned to core 0"),
            "{description}"
        );

        let mut all: Vec<u32> = pids.clone();
        for &pid in &pids {
            all.extend(children(pid));
        }
        assert!(all.len() > 2, "the postmaster has its auxiliary processes");
        drop(deps);
        for pid in all {
            assert!(!alive(pid), "process {pid} survived Deps::drop");
        }
    }

    #[test]
    fn missing_binaries_give_the_install_step() {
        let empty = tempfile::tempdir().expect("temp dir");
        let dirs = [empty.path().to_path_buf()];
        let err = Deps::start_in(&embedded(), &dirs).err().expect("must fail");
        assert!(err.to_string().contains(INSTALL_HINT), "{err}");
        assert!(err.to_string().contains("PostgreSQL"), "{err}");
        let only_redis = DepsOptions { database_url: Some("postgres://u@127.0.0.1:1/x".into()), ..embedded() };
        let err = Deps::start_in(&only_redis, &dirs).err().expect("must fail");
        assert!(err.to_string().contains("redis-server") && err.to_string().contains(INSTALL_HINT), "{err}");
    }

    #[test]
    fn given_urls_start_nothing() {
        let opts = DepsOptions {
            cores: "1".into(),
            database_url: Some("postgres://me:pw@db.example:5432/bench?sslmode=disable".into()),
            redis_url: Some("redis://cache.example:6379/2".into()),
        };
        let deps = Deps::start(&opts).expect("nothing to start");
        assert!(deps.pids().is_empty());
        assert_eq!(deps.redis_url(), "redis://cache.example:6379/2");
        assert_eq!(deps.describe(), "given DATABASE_URL, given REDIS_URL");
        assert_eq!(
            deps.url_for("notes_rust").expect("url"),
            "postgres://me:pw@db.example:5432/notes_rust?sslmode=disable"
        );
    }

    #[test]
    fn database_urls_and_names() {
        assert_eq!(with_database("postgres://u@h:1", "d").expect("url"), "postgres://u@h:1/d");
        assert_eq!(with_database("postgres://u@h:1/x", "d").expect("url"), "postgres://u@h:1/d");
        assert!(with_database("nonsense", "d").is_err());
        assert!(check_db_name("notes_rust_1").is_ok());
        for bad in ["", "1abc", "a-b", "A", "x; DROP DATABASE y"] {
            assert!(check_db_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_version("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n", "(PostgreSQL)").as_deref(),
            Some("15.18")
        );
        assert_eq!(parse_version("Redis server v=7.0.15 sha=0", "v=").as_deref(), Some("7.0.15"));
    }

    #[test]
    fn note_bodies_match_notes_bench() {
        // Produced by bench/notes_bench.py: compact(note_body(i)).
        assert_eq!(
            note_body(1),
            concat!(
                r#"{"data":{"title":"Note 1","body":"Body of note 1: remember the milk, and the eggs.","#,
                r#""tags":["seed","n1"],"meta":{"words":10,"pinned":false,"source":"notes_bench"}},"#,
                r#""date_created":"2024-01-02T03:04:05Z","date_modified":"2024-05-06T09:08:07.123+02:00","#,
                r#""created_by":2,"modified_by":3}"#
            )
        );
        assert_eq!(
            note_body(37),
            concat!(
                r#"{"data":{"title":"Note 37","body":"Body of note 37: remember the milk, and the eggs.","#,
                r#""tags":["seed","n7"],"meta":{"words":11,"pinned":false,"source":"notes_bench"}},"#,
                r#""date_created":"2024-01-10T10:00:00.250Z","date_modified":"2024-02-10T11:30:00.500Z","#,
                r#""created_by":2,"modified_by":4}"#
            )
        );
    }

    /// A notes server stand-in: answers each POST with 200 (alternating Content-Length and chunked framing,
    /// closing after the third) and records the bodies.
    fn fake_notes_server(fail_at: Option<usize>) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let handle = std::thread::spawn(move || {
            let mut bodies = Vec::new();
            while let Ok((stream, _)) = listener.accept() {
                stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
                let mut reader = BufReader::new(stream);
                loop {
                    let mut head = String::new();
                    let mut length = 0;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return bodies;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().expect("length");
                        }
                        if line == "\r\n" {
                            break;
                        }
                        head.push_str(&line);
                    }
                    assert!(head.starts_with("POST /notes HTTP/1.1\r\n"), "{head}");
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).expect("body");
                    bodies.push(String::from_utf8(body).expect("utf8"));
                    let n = bodies.len();
                    let out = reader.get_mut();
                    if Some(n) == fail_at {
                        let _ = out.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 11\r\n\r\n{\"error\":1}");
                    } else if n % 2 == 0 {
                        let _ =
                            out.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n");
                    } else if n == 3 {
                        let _ = out.write_all(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n[]");
                        break;
                    } else {
                        let _ = out.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n[]");
                    }
                }
                if bodies.len() >= 5 || fail_at.is_some_and(|f| bodies.len() >= f) {
                    return bodies;
                }
            }
            bodies
        });
        (base, handle)
    }

    #[test]
    fn seeding_posts_every_note_in_order() {
        let deps = Deps::start(&DepsOptions {
            cores: "0".into(),
            database_url: Some("postgres://x@127.0.0.1:1/x".into()),
            redis_url: Some("redis://127.0.0.1:1".into()),
        })
        .expect("nothing to start");
        let (base, server) = fake_notes_server(None);
        deps.seed_notes(&base, 5).expect("seed");
        let bodies = server.join().expect("server");
        assert_eq!(bodies, (1..=5).map(note_body).collect::<Vec<_>>());

        let (base, server) = fake_notes_server(Some(2));
        let err = deps.seed_notes(&base, 5).expect_err("must fail");
        assert!(err.to_string().contains("seed POST #2") && err.to_string().contains("400"), "{err}");
        drop(server);
    }

    #[test]
    fn metadata_dataset_writes_db_and_ids() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (db, ids) = metadata_dataset(&dir.path().join("data"), 300).expect("dataset");
        assert!(db.is_file());
        assert_eq!(std::fs::read_to_string(&ids).expect("ids").lines().count(), 10_000);
        // Regenerating over existing files works (fresh runs reuse the dir).
        metadata_dataset(&dir.path().join("data"), 300).expect("again");
    }
}
