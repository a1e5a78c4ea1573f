//! What a comparison needs before it starts, each missing piece with the step that installs it: the loader
//! and taskset, each runtime's binaries and packages, the databases compare starts itself.

use std::path::{Path, PathBuf};

use crate::plan::paths::{Paths, sbin};
use crate::plan::runtimes::Runtime;
use crate::plan::workloads::{Service, Workload};

/// The Rust binaries a comparison of `workloads` may execute: compare itself (the floor, the harness),
/// loadgen, each workload's server (ladder-rs also seeds ladder-postgres for every runtime), the upstream
/// service and the delay proxy where used.
pub fn rust_binaries(paths: &Paths, workloads: &[Workload], db_rtt: bool) -> Vec<PathBuf> {
    let mut candidates = vec![paths.compare_exe.clone(), paths.loadgen()];
    candidates.extend(workloads.iter().map(|w| paths.rust_bin(w.service())));
    if workloads.iter().any(|w| w.upstream_delay().is_some()) {
        candidates.push(paths.upstream());
    }
    if db_rtt {
        candidates.push(paths.delay_proxy());
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for bin in candidates {
        if bin.is_file() && !out.contains(&bin) {
            out.push(bin);
        }
    }
    out
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
        let serves_any = workloads.iter().any(|w| rt.serves(*w));
        match rt {
            Runtime::Rust => missing.extend(missing_rust_binaries(workloads, paths)),
            Runtime::Target(_) => {}
            Runtime::Floor => {
                if !paths.compare_exe.is_file() {
                    missing.push(format!("{} (the floor) not found", paths.compare_exe.display()));
                }
            }
            Runtime::Php => {
                if serves_any {
                    missing.extend(missing_php(paths));
                }
            }
            _ => {
                // Every JavaScript runtime: its engine (the compiled executables are built from the pinned Bun at
                // the start of the run), and the packages it runs beyond the peers' own.
                let package = |name: &str| paths.peers().join("node_modules").join(name).join("package.json");
                let mut needed = vec![paths.program(rt, Service::Flight)];
                if serves_any {
                    match rt {
                        Runtime::Koa | Runtime::KoaBun => needed.push(package("koa")),
                        Runtime::FlightNode => needed.extend([paths.flight_js(), package("tsx")]),
                        Runtime::FlightBun => needed.push(paths.flight_js()),
                        r => needed.extend(r.framework().map(|fw| package(fw.package()))),
                    }
                }
                for file in needed.into_iter().filter(|f| !f.is_file()) {
                    missing.push(format!("{} not found: {setup} (npm ci in bench/peers)", file.display()));
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

pub fn on_path(program: &str) -> bool {
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

/// php's launcher and what it runs: php-fpm 8.2 with the SQLite3 extension, and nginx.
fn missing_php(paths: &Paths) -> Vec<String> {
    let hint = "run `bash scripts/install-test-deps.sh` (apt-get install php8.2-fpm php8.2-sqlite3 nginx-light)";
    let mut missing = Vec::new();
    if !paths.php_launcher().is_file() {
        missing.push(format!("{} not found", paths.php_launcher().display()));
    }
    for program in ["php-fpm8.2", "nginx"] {
        let found = sbin(program);
        if !found.is_file() && !on_path(program) {
            missing.push(format!("{program} not found for the php runtime: {hint}"));
        }
    }
    if !Path::new("/etc/php/8.2/mods-available/sqlite3.ini").is_file() {
        missing.push(format!("PHP's SQLite3 extension not found for the php runtime: {hint}"));
    }
    missing
}
