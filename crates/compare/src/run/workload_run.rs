//! One workload's shared state while it runs ([`WorkloadRun`]): which databases, dataset and site its servers
//! get (notes-write a fresh database per check and run), the server spec per runtime, the input of a measured
//! run, and the read-back that holds notes-write to every acknowledged write.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;

use crate::plan::dataset::MetadataData;
use crate::plan::load_spec::LoadSpec;
use crate::plan::runtimes::Runtime;
use crate::plan::server_spec::ServerSpec;
use crate::plan::server_spec::{self, ServerEnv};
use crate::plan::site::Site;
use crate::plan::workload_plan::Plan;
use crate::plan::workloads::{Service, Workload};
use crate::records::{Kind, Record, RunMeta};
use crate::run::cells::RunInput;
use crate::run::db_proxy::DbProxies;
use crate::run::deps::{Database, Dependency, Deps};
use crate::run::server::Server;
use crate::run::setup::Bench;
use crate::settings::Config;

/// The database ladder-postgres reads, seeded by `ladder-rs seed`.
pub const LADDER_DB: &str = "compare_ladder";
/// metadata-cached's Redis database index (the production Flight cells use 1 to 3).
const CACHE_DB: u8 = 4;

/// Why a server is being started: notes-write gives checks and runs a fresh database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Check,
    Startup,
    Run,
}

/// One workload's shared state while it runs.
pub struct WorkloadRun<'a> {
    pub cfg: &'a Config,
    pub meta: &'a RunMeta,
    pub bench: &'a Bench,
    pub deps: Option<&'a Deps>,
    pub metadata: Option<&'a MetadataData>,
    /// The static workload's built SPA.
    pub site: Option<&'a Site>,
    /// Its load; `load.connections` is the headline count (checks, capacity searches, soaks).
    pub plan: Plan,
    /// The connection counts its closed- and open-loop rounds run at: the headline count alone, or
    /// `--connections`' sweep.
    pub counts: Vec<u32>,
    /// notes-read: the seeded database everyone reads.
    pub shared_db: Option<String>,
    pub floor_body: Option<Vec<u8>>,
    pub versions: HashMap<Runtime, Option<String>>,
    /// The upstream workloads: compare's upstream service, started for this workload, stopped with it.
    pub upstream: Option<Server>,
    /// The database round trips its rounds run at (`--db-rtt`, on a workload that waits on a database), the
    /// first also its checks', cold starts' and searches'; `[None]`: straight to the databases.
    pub rtts: Vec<Option<Duration>>,
    /// The run's delay proxies, when `--db-rtt` was given.
    pub proxies: Option<&'a DbProxies>,
}

impl WorkloadRun<'_> {
    pub fn workload(&self) -> Workload {
        self.plan.workload
    }

    /// The environment of a server started for `purpose` at the workload's first round trip.
    pub fn server_env(&self, rt: Runtime, purpose: Purpose) -> anyhow::Result<ServerEnv> {
        self.server_env_at(rt, purpose, self.rtts[0])
    }

    /// The environment of a server whose databases are `rtt` away (through the delay proxies).
    pub fn server_env_at(&self, rt: Runtime, purpose: Purpose, rtt: Option<Duration>) -> anyhow::Result<ServerEnv> {
        let mut env = self.direct_env(rt, purpose)?;
        if let (Some(proxies), Some(rtt)) = (self.proxies, rtt) {
            env.database_url = env.database_url.map(|url| proxies.route(&url, rtt));
            env.redis_url = env.redis_url.map(|url| proxies.route(&url, rtt));
        }
        Ok(env)
    }

    fn direct_env(&self, rt: Runtime, purpose: Purpose) -> anyhow::Result<ServerEnv> {
        let mut env = ServerEnv {
            floor_body: self.floor_body.clone(),
            processes: self.cfg.server_processes,
            tls: self.plan.tls.clone(),
            ..ServerEnv::default()
        };
        if self.workload().needs_site() {
            env.dist_path = self.site.map(|s| s.root.clone());
        }
        match self.workload().service() {
            // Flight keeps its sessions (and in production its rate limit and cache) in Redis.
            Service::Flight if server_spec::uses_redis(rt, self.workload()) => {
                let deps = self.deps.context("this workload needs Redis")?;
                env.redis_url = Some(deps.redis_url());
            }
            Service::Flight => {}
            Service::Metadata => {
                env.metadata_db = self.metadata.map(|m| m.db.clone());
                if self.workload().caches_metadata() && server_spec::uses_redis(rt, self.workload()) {
                    let url = self.cache_url().context("metadata-cached needs Redis")?;
                    // Every server starts on an empty cache and fills its own in its warmup.
                    crate::system::redis::command(&url, &["FLUSHDB"])?;
                    env.redis_url = Some(url);
                }
            }
            Service::Ladder => {
                env.metadata_db = self.metadata.map(|m| m.db.clone());
                // Every rung gets the database (a server must start whatever its rung), seeded once.
                if let Some(deps) = self.deps {
                    env.database_url = Some(deps.database_url(LADDER_DB)?);
                }
                env.upstream_url = self.upstream.as_ref().map(crate::run::upstream::url);
            }
            Service::Scribe => {
                let deps = self.deps.context("the notes workloads need PostgreSQL and Redis")?;
                env.redis_url = Some(deps.redis_url());
                env.database_url = Some(match (&self.shared_db, purpose) {
                    (Some(db), _) => deps.database_url(db)?,
                    (None, Purpose::Startup) => deps.database_url("compare_write_startup")?,
                    (None, _) => {
                        // Every check and run writes into an empty database: ids start at 1 and no run
                        // inherits the previous one's rows.
                        let db = write_db(rt);
                        deps.reset_database(&db)?;
                        deps.database_url(&db)?
                    }
                });
            }
        }
        Ok(env)
    }

    /// metadata-cached's Redis database (its own index, so no other workload's keys share it).
    pub fn cache_url(&self) -> Option<String> {
        let deps = self.deps?;
        self.workload().caches_metadata().then(|| server_spec::redis_db(&deps.redis_url(), CACHE_DB))
    }

    /// The servers compare started that `rt`'s server uses on this workload (as `server_env` hands them
    /// out): the databases and the upstream service, measured around its windows.
    pub fn databases(&self, rt: Runtime) -> Vec<Database> {
        let w = self.workload();
        // The floor answers from memory and a target is not handed our databases.
        if matches!(rt, Runtime::Floor | Runtime::Target(_)) {
            return Vec::new();
        }
        let uses = |d: &Database| match d.kind {
            // Every ladder rung is given the database, but only the postgres rung queries it.
            Dependency::Postgres => w.queries_postgres(),
            Dependency::Redis => w.service() == Service::Scribe || server_spec::uses_redis(rt, w),
            // Deps starts databases only; the upstream and the proxies are added below.
            Dependency::Upstream | Dependency::DbProxy => false,
        };
        let mut started: Vec<Database> =
            self.deps.map(|d| d.started().into_iter().filter(uses).collect()).unwrap_or_default();
        if let Some(pid) = self.upstream.as_ref().and_then(Server::pid) {
            started.push(Database { kind: Dependency::Upstream, pid });
        }
        // The proxies carry a cell's database traffic only on a workload whose cells have a round trip.
        if let (Some(proxies), false, Some(_)) = (self.proxies, started.is_empty(), self.rtts[0]) {
            started.extend(proxies.measured());
        }
        started
    }

    pub fn spec(&self, rt: Runtime, purpose: Purpose) -> anyhow::Result<ServerSpec> {
        self.spec_at(rt, purpose, self.rtts[0])
    }

    /// The server for a cell whose databases are `rtt` away.
    pub fn spec_at(&self, rt: Runtime, purpose: Purpose, rtt: Option<Duration>) -> anyhow::Result<ServerSpec> {
        let env = self.server_env_at(rt, purpose, rtt)?;
        Ok(server_spec::server_spec(rt, self.workload(), &self.cfg.paths, &env))
    }

    /// What one measured run (or soak) of this workload on `rt` needs besides the bench; `load` is the plan's
    /// or, in a sweep, a copy at one of its counts.
    pub fn run_input<'s>(
        &'s self,
        rt: Runtime,
        spec: &'s ServerSpec,
        load: &'s LoadSpec,
        rate: Option<f64>,
        tag: &'s str,
    ) -> RunInput<'s> {
        RunInput {
            databases: self.databases(rt),
            spec,
            ready_path: &self.plan.ready_path,
            load,
            cache_url: self.cache_url().filter(|_| server_spec::uses_redis(rt, self.workload())),
            prime: self.plan.prime.as_ref(),
            also_ok: self.workload().also_ok(),
            rate,
            tag,
        }
    }

    pub fn record(&self, rt: Runtime, kind: Kind, round: u32) -> Record {
        let version = self.versions.get(&rt).cloned().flatten();
        let mut rec = Record::new(self.meta, self.workload().name(), rt.name(), version.as_deref(), kind, round);
        rec.db_pool = server_spec::database_pool(rt, self.workload(), self.cfg.server_processes);
        rec
    }
}

/// The database a notes-write run on `rt` writes into, emptied before each run.
pub fn write_db(rt: Runtime) -> String {
    format!("compare_write_{}", rt.name().replace('-', "_"))
}

/// notes-write: every acknowledged write must be in the database with its history row (acknowledged.rs).
/// `earlier`: writes acknowledged before `rec`'s window on the same database (a soak's earlier samples).
pub fn audit_writes(wr: &WorkloadRun<'_>, rt: Runtime, rec: &mut Record, earlier: u64) -> anyhow::Result<()> {
    let (Service::Scribe, None, Some(deps)) = (wr.workload().service(), &wr.shared_db, wr.deps) else { return Ok(()) };
    if wr.databases(rt).is_empty() {
        return Ok(()); // the floor writes nothing
    }
    if rec.requests.is_none() {
        return Ok(()); // the run never got as far as load: nothing to account for
    }
    let stored = crate::run::acknowledged::read_back(deps, &write_db(rt)).context("reading the rows back")?;
    let acknowledged = earlier + acknowledged_writes(rec);
    rec.stored = Some(stored);
    for problem in crate::run::acknowledged::problems(stored, acknowledged) {
        rec.void_because(problem);
    }
    Ok(())
}

/// The 2xx answers the loader counted in `rec`'s window.
pub fn acknowledged_writes(rec: &Record) -> u64 {
    rec.statuses.iter().filter(|(s, _)| (200..300).contains(*s)).map(|(_, n)| n).sum()
}
