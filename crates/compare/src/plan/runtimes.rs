//! The runtimes compare measures and which workloads each serves: rust (our release binaries), the Bun and
//! Node peers in bench/peers (pinned in its package-lock.json), flight-node (the real Flight 2.0.2 from the
//! npm registry, run as its published benchmark ran it), koa (bare Koa 3, the framework under Flight, hello-bare
//! only), the floor (`compare floor`: pre-serialized bytes, the least any server can do per request) and
//! bring-your-own targets (`--target`, see target.rs). How each starts is server_spec.rs; where its files are,
//! paths.rs; what version it reports, versions.rs.
//!
//! By name only (the `frameworks` group): what applications run instead of hand-written servers: Fastify 5
//! and Express 5 on Node and on Bun, Koa and the real Flight under Bun, the Bun peers as `bun build
//! --compile` executables (with and without bytecode), and the metadata endpoint in PHP under php-fpm and
//! nginx.

use anyhow::bail;

use crate::plan::target::Target;
use crate::plan::workloads::{FlightProfile, Service, Workload};

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

/// Every runtime `--runtimes` can name: `all`'s, then those measured by name only.
pub fn built_in() -> impl Iterator<Item = Runtime> {
    ALL.into_iter().chain(by_name_only())
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
        built_in().find(|r| r.name() == name)
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
        // HTTP/2: rust and the Bun and Node peers serve it (bench/peers/http2.mjs); the frameworks, Flight 2.0.2,
        // PHP and the floor are not set up for it.
        if workload.connecting().http2_streams.is_some() {
            return matches!(self, Runtime::Rust | Runtime::Bun | Runtime::Node | Runtime::Target(_));
        }
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
    let mut names: Vec<&str> = built_in().map(Runtime::name).collect();
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

/// `--runtimes`'s help, built from the groups and [`by_name_only`], so `compare --help` lists every runtime
/// there is.
pub fn list_help() -> String {
    let names = |runtimes: &[Runtime]| runtimes.iter().map(|r| r.name()).collect::<Vec<_>>().join(", ");
    format!(
        "Comma list of runtimes and groups: `all` ({}), the default; `frameworks` ({}); and, by name only, {} (the \
         Scribe peers' original write path, notes only). Each sits out the workloads it does not serve; rust's \
         answers are the reference",
        names(&ALL),
        names(&FRAMEWORKS),
        names(&SHIPPED),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_lists_take_names_and_all_each_once_in_order() {
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
}
