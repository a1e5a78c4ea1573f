//! The executables bun-compiled and bun-bytecode run: each Bun peer the run needs, built by the pinned Bun's
//! `bun build --compile` into `<bin-dir>/bun-compiled`, once per set of inputs. Beside each executable its
//! stamp holds a SHA-256 over the build flags, Bun's version and every source under bench/peers (the lockfile
//! too, so a changed dependency rebuilds); an executable whose stamp matches is reused, any other is rebuilt
//! in place (one copy per peer and flag set: each is about 110 MB, Bun itself included).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use crate::plan::paths::Paths;
use crate::plan::server_spec::bun_peer;
use crate::settings::Config;

/// `--bytecode` needs `--format=esm` for the peers: they await at top level (the CommonJS default refuses).
fn flags(bytecode: bool) -> &'static [&'static str] {
    if bytecode { &["--compile", "--bytecode", "--format=esm"] } else { &["--compile"] }
}

/// Builds what this run's compiled runtimes need and is not built from the current inputs.
pub fn ensure(cfg: &Config) -> anyhow::Result<()> {
    let mut wanted: Vec<(&'static str, bool)> = Vec::new();
    for rt in &cfg.runtimes {
        let Some(bytecode) = rt.compiled() else { continue };
        for w in cfg.workloads.iter().filter(|w| rt.serves(**w)) {
            if !wanted.contains(&(bun_peer(*w), bytecode)) {
                wanted.push((bun_peer(*w), bytecode));
            }
        }
    }
    if wanted.is_empty() {
        return Ok(());
    }
    let paths = &cfg.paths;
    std::fs::create_dir_all(paths.compiled_dir())
        .with_context(|| format!("creating {}", paths.compiled_dir().display()))?;
    let bun_version = bun_version(paths)?;
    let sources = sources(&paths.peers())?;
    for (entry, bytecode) in wanted {
        let exe = paths.compiled(entry, bytecode);
        let stamp = paths.compiled_stamp(&exe);
        let hash = inputs_hash(&paths.peers(), &sources, &bun_version, flags(bytecode))?;
        if exe.is_file() && std::fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == hash) {
            continue;
        }
        eprintln!("compare: bun build {} {entry} (inputs {})", flags(bytecode).join(" "), &hash[..16]);
        // No stamp while the executable is being replaced: an interrupted build is rebuilt next time.
        let _ = std::fs::remove_file(&stamp);
        build(paths, entry, bytecode, &exe)?;
        std::fs::write(&stamp, format!("{hash}\n")).with_context(|| format!("writing {}", stamp.display()))?;
    }
    Ok(())
}

fn bun_version(paths: &Paths) -> anyhow::Result<String> {
    let out = Command::new(paths.bun()).arg("--version").output().context("running bun --version")?;
    if !out.status.success() {
        bail!("bun --version failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn build(paths: &Paths, entry: &str, bytecode: bool, exe: &Path) -> anyhow::Result<()> {
    let out = Command::new(paths.bun())
        .arg("build")
        .args(flags(bytecode))
        .arg(paths.peers().join(entry))
        .arg("--outfile")
        .arg(exe)
        .current_dir(paths.peers())
        .output()
        .with_context(|| format!("running bun build for {entry}"))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let said = if said.trim().is_empty() { String::from_utf8_lossy(&out.stdout) } else { said };
        bail!("bun build {} {entry} failed ({}):\n{}", flags(bytecode).join(" "), out.status, said.trim());
    }
    Ok(())
}

/// Every source a peer can import, relative to bench/peers and sorted: scripts and JSON outside node_modules
/// (whose content the lockfile pins).
fn sources(peers: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut dirs = vec![PathBuf::new()];
    while let Some(rel) = dirs.pop() {
        let dir = peers.join(&rel);
        for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let entry = entry?;
            let name = entry.file_name();
            let rel = rel.join(&name);
            let kind = entry.file_type()?;
            if kind.is_dir() && name != "node_modules" {
                dirs.push(rel);
            } else if kind.is_file() && is_source(&rel) {
                out.push(rel);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn is_source(rel: &Path) -> bool {
    rel.extension().is_some_and(|x| ["ts", "mjs", "js", "json"].iter().any(|e| x == *e))
}

/// SHA-256 over the flags, Bun's version, then each source's path and contents, as lowercase hex.
fn inputs_hash(peers: &Path, sources: &[PathBuf], bun_version: &str, flags: &[&str]) -> anyhow::Result<String> {
    let mut h = Sha256::new();
    h.update(format!("bun {bun_version}\0{}\0", flags.join(" ")));
    for rel in sources {
        let bytes = std::fs::read(peers.join(rel)).with_context(|| format!("reading {}", rel.display()))?;
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    Ok(crate::provenance::hex(&h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_follows_every_input() {
        let dir = tempfile::tempdir().expect("dir");
        let peers = dir.path();
        std::fs::create_dir_all(peers.join("ladder")).expect("mkdir");
        std::fs::create_dir_all(peers.join("node_modules/x")).expect("mkdir");
        std::fs::write(peers.join("ladder/server-bun.ts"), "a").expect("write");
        std::fs::write(peers.join("package-lock.json"), "{}").expect("write");
        std::fs::write(peers.join("node_modules/x/index.js"), "ignored").expect("write");
        std::fs::write(peers.join("notes.md"), "ignored").expect("write");
        let found = sources(peers).expect("sources");
        assert_eq!(found, [PathBuf::from("ladder/server-bun.ts"), PathBuf::from("package-lock.json")]);
        let hash = |v: &str, b: bool| inputs_hash(peers, &found, v, flags(b)).expect("hash");
        let first = hash("1.4.5", false);
        assert_eq!(first.len(), 64);
        assert_eq!(first, hash("1.4.5", false), "stable");
        assert_ne!(first, hash("1.4.6", false), "bun's version");
        assert_ne!(first, hash("1.4.5", true), "the flags");
        std::fs::write(peers.join("ladder/server-bun.ts"), "b").expect("write");
        assert_ne!(first, hash("1.4.5", false), "a source");
    }
}
