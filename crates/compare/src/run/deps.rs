//! The PostgreSQL and Redis the notes and ladder workloads need: localdeps' servers of our own, pinned to
//! the loader's cores, or the ones the user gives (`--database-url` / `--redis-url`); and the databases on
//! them, created on first use.
//!
//! PostgreSQL keeps its durability defaults (fsync, synchronous_commit, full_page_writes): a benchmark of a
//! write path with fsync off measures something no deployment runs. Everything started here is stopped when
//! `Deps` is dropped, and nothing else is ever signalled. The servers are started as
//! [`crate::system::process::Spawned`] children (each its own process group, registered), so Ctrl-C and panics,
//! which release builds turn into aborts that run no destructor, still take them down with the rest of
//! compare's children.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail};
use localdeps::{INSTALL_HINT, PgBin, check_db_name};

use crate::system::process::Supervised;

#[derive(Debug, Clone)]
pub struct DepsOptions {
    /// `taskset -c` list for the servers we start (the loader's cores).
    pub cores: String,
    /// Use this PostgreSQL instead of starting one; `database_url(db)` swaps in the database name.
    pub database_url: Option<String>,
    /// Use this Redis instead of starting one.
    pub redis_url: Option<String>,
}

/// What a server compare started for the measured servers is: each one's CPU per response lands in a record
/// field of its own, and the ones that delay answers change what a server's idle share means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dependency {
    Postgres,
    Redis,
    /// compare's upstream service (run/upstream.rs).
    Upstream,
    /// A delay proxy between the servers and a database (run/db_proxy.rs).
    DbProxy,
}

impl Dependency {
    /// How messages name it (`redis (pid 12) exited during the run`).
    pub fn name(self) -> &'static str {
        match self {
            Dependency::Postgres => "postgres",
            Dependency::Redis => "redis",
            Dependency::Upstream => "upstream",
            Dependency::DbProxy => "db-proxy",
        }
    }
}

/// A server compare started that the measured servers use (a database, the upstream service or a delay
/// proxy), whose process tree a run measures and watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Database {
    pub kind: Dependency,
    /// The root of its process tree (the postmaster, redis-server).
    pub pid: u32,
}

pub struct Deps {
    postgres: Option<localdeps::Postgres>,
    redis: Option<localdeps::Redis>,
    given_database_url: Option<String>,
    given_redis_url: Option<String>,
    cores: String,
    /// psql for creating and dropping databases (the started cluster's own, or one from PATH).
    psql: Option<PathBuf>,
    /// Databases known to exist, so `database_url` asks the server only once per name.
    created: Mutex<HashSet<String>>,
}

/// Why the Redis at `url` is not usable now (no PONG to a PING within 2 s), or `None` when it answers.
pub fn redis_unanswered(url: &str) -> Option<String> {
    // The URL stays out of the message (it may carry a password); the error names the server, and its chain
    // says whether it was silence, a refusal or authentication.
    match crate::system::redis::command(url, &["PING"]) {
        Ok(reply) if reply == b"PONG" => None,
        Ok(reply) => Some(format!("Redis answered PING with {:?}", String::from_utf8_lossy(&reply))),
        Err(e) => Some(format!("{e:#}")),
    }
}

impl Deps {
    pub fn start(opts: &DepsOptions) -> anyhow::Result<Deps> {
        Deps::start_in(opts, localdeps::search_dirs())
    }

    /// `start` with an explicit binary search path (tests use an empty one to see the missing-binary error
    /// without touching the process environment).
    fn start_in(opts: &DepsOptions, dirs: Vec<PathBuf>) -> anyhow::Result<Deps> {
        // Look everything up before starting anything, so a missing piece fails fast and cleanly.
        let pg_bin = if opts.database_url.is_none() { Some(PgBin::find(&dirs)?) } else { None };
        if opts.redis_url.is_none() && localdeps::find_in("redis-server", &dirs).is_none() {
            bail!("redis-server not found; {INSTALL_HINT}");
        }
        let psql = match &pg_bin {
            Some(bin) => Some(bin.psql.clone()),
            // Only needed to create databases on the given server; its absence is reported when that happens.
            None => localdeps::find_in("psql", &dirs),
        };
        let local =
            localdeps::Options { cores: Some(opts.cores.clone()), durable: true, dirs, spawner: Arc::new(Supervised) };
        // Started in order; an error drops what was already started, which stops it.
        let postgres = match pg_bin {
            Some(_) => Some(localdeps::Postgres::start(&local)?),
            None => None,
        };
        let redis = match opts.redis_url {
            None => Some(localdeps::Redis::start(&local)?),
            Some(_) => None,
        };
        Ok(Deps {
            postgres,
            redis,
            given_database_url: opts.database_url.clone(),
            given_redis_url: opts.redis_url.clone(),
            cores: opts.cores.clone(),
            psql,
            created: Mutex::new(HashSet::new()),
        })
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

    /// The PostgreSQL server's URL (its `postgres` database), when there is one.
    pub fn postgres_url(&self) -> Option<String> {
        self.url_for("postgres").ok()
    }

    pub fn redis_url(&self) -> String {
        match (&self.given_redis_url, &self.redis) {
            (Some(url), _) => url.clone(),
            (None, Some(redis)) => format!("redis://127.0.0.1:{}", redis.port()),
            // start() guarantees one of the two.
            (None, None) => String::new(),
        }
    }

    /// Pids of the servers started here (the postmaster and redis-server; each is the root of its tree).
    pub fn pids(&self) -> Vec<u32> {
        self.started().into_iter().map(|d| d.pid).collect()
    }

    /// The servers started here, by name; one given by URL is not ours to measure.
    pub fn started(&self) -> Vec<Database> {
        let pg = self.postgres.as_ref().and_then(localdeps::Postgres::pid);
        let pg = pg.map(|pid| Database { kind: Dependency::Postgres, pid });
        let redis = self.redis.as_ref().and_then(localdeps::Redis::pid);
        let redis = redis.map(|pid| Database { kind: Dependency::Redis, pid });
        pg.into_iter().chain(redis).collect()
    }

    /// One value of a query on database `db` (psql's unaligned, tuples-only output, trimmed).
    pub fn query(&self, db: &str, sql: &str) -> anyhow::Result<String> {
        Ok(self.psql(&self.url_for(db)?, sql)?.trim().to_string())
    }

    /// One line for reports: what runs where.
    pub fn describe(&self) -> String {
        let cores = if self.cores.contains([',', '-']) { "cores" } else { "core" };
        let pinned = format!("pinned to {cores} {}", self.cores);
        let pg = self
            .postgres
            .as_ref()
            .map(|p| format!("PostgreSQL {} on :{} (durability defaults)", p.version(), p.port()));
        let redis = self.redis.as_ref().map(|r| format!("redis-server {} on :{}", r.version(), r.port()));
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
            (None, Some(pg)) => Ok(pg.url(db)),
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
        localdeps::psql(psql, url, sql)
    }
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

#[cfg(test)]
mod tests {
    use std::path::Path;

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
        assert!(deps.redis.as_ref().is_some_and(localdeps::Redis::answers_ping));
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
        let err = Deps::start_in(&embedded(), dirs.to_vec()).err().expect("must fail");
        assert!(err.to_string().contains(INSTALL_HINT), "{err}");
        assert!(err.to_string().contains("PostgreSQL"), "{err}");
        let only_redis = DepsOptions { database_url: Some("postgres://u@127.0.0.1:1/x".into()), ..embedded() };
        let err = Deps::start_in(&only_redis, dirs.to_vec()).err().expect("must fail");
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
    fn a_database_url_gets_the_database_name_in_its_path() {
        assert_eq!(with_database("postgres://u@h:1", "d").expect("url"), "postgres://u@h:1/d");
        assert_eq!(with_database("postgres://u@h:1/x", "d").expect("url"), "postgres://u@h:1/d");
        assert!(with_database("nonsense", "d").is_err());
    }
}
