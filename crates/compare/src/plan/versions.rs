//! What each runtime reports as its version, for the records: the binary's own `--version`, a framework's
//! package on its engine, a compiled executable's Bun and inputs, PHP's php-fpm and nginx.

use std::path::Path;
use std::process::Command;

use crate::plan::paths::{Paths, sbin};
use crate::plan::runtimes::Runtime;
use crate::plan::server_spec::bun_peer;
use crate::plan::workloads::{Service, Workload};

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

/// `php-fpm 8.2.36 (OPcache) behind nginx 1.22.1`, from the binaries the launcher runs.
fn php_version() -> Option<String> {
    let fpm = first_line(&sbin("php-fpm8.2"), "-v")?;
    let fpm = fpm.split_whitespace().nth(1)?.to_string();
    let nginx = first_line(&sbin("nginx"), "-v")?;
    let nginx = nginx.rsplit('/').next()?.to_string();
    Some(format!("php-fpm {fpm} (OPcache) behind nginx {nginx}"))
}
