//! The workspace under test: its root folder, and the binaries cargo built from it.
//!
//! Every test that runs a workspace binary as a child process takes it from [`binary`]: the file cargo put
//! next to the test binaries (`target/<profile>/<name>`, the one `CARGO_BIN_EXE_<name>` names inside its own
//! package), checked against the dep-info cargo wrote beside it, so a binary older than any source it was
//! built from fails the test instead of being tested. Tests never run cargo themselves (a build inside a test
//! holds the cargo lock while other tests wait on it): the test command (`scripts/test.sh`) builds every
//! target first, and `cargo nextest run` builds the binaries of every package it tests.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The workspace's root folder.
pub fn root() -> PathBuf {
    let testkit = Path::new(env!("CARGO_MANIFEST_DIR"));
    testkit.join("../..").canonicalize().expect("crates/testkit sits two folders below the workspace root")
}

/// The workspace binary `name` (`flight-rs`, `loadgen`, …) of the profile the running test was built with.
/// Panics, saying how to build it, when it is missing or older than one of its sources.
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // Test binaries live in target/<profile>/deps; binaries one folder up.
    let profile_dir = exe.parent().and_then(Path::parent).expect("the test runs from target/<profile>/deps");
    let path = profile_dir.join(name);
    let build = format!(
        "build it with `cargo build --workspace --all-targets` (scripts/test.sh does) or `cargo build --bin {name}`"
    );
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{} not found ({e}): {build}", path.display()));
    let dep_info = profile_dir.join(format!("{name}.d"));
    let sources = std::fs::read_to_string(&dep_info).map(|text| sources(&text)).unwrap_or_default();
    // A target folder copied from another checkout lists that checkout's files: not built from this one.
    let root = root();
    if !sources.iter().any(|source| source.starts_with(&root)) {
        panic!(
            "{} was not built from this checkout (its {} names no file here): {build}",
            path.display(),
            dep_info.display()
        );
    }
    if let Some(source) = newer_than(&sources, built) {
        panic!("{} is older than {}: {build}", path.display(), source.display());
    }
    path
}

/// The sources a dep-info file lists (`<binary>: <source> <source> …`, spaces escaped as `\ `).
fn sources(dep_info: &str) -> Vec<PathBuf> {
    let Some(line) = dep_info.lines().find(|line| !line.starts_with('#') && line.contains(": ")) else {
        return Vec::new();
    };
    let (_, listed) = line.split_once(": ").unwrap_or_default();
    listed.replace("\\ ", "\u{0}").split_whitespace().map(|s| PathBuf::from(s.replace('\u{0}', " "))).collect()
}

/// The first of `sources` that changed after `built`, or is gone.
fn newer_than(sources: &[PathBuf], built: SystemTime) -> Option<PathBuf> {
    sources
        .iter()
        .find(|source| std::fs::metadata(source).and_then(|m| m.modified()).map_or(true, |modified| modified > built))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dep_info_sources_newer_than_the_binary_are_found() {
        let dir = tempfile::tempdir().expect("temp dir");
        let source = dir.path().join("with space.rs");
        std::fs::write(&source, "").expect("write");
        let dep_info = dir.path().join("bin.d");
        let escaped = source.display().to_string().replace(' ', "\\ ");
        std::fs::write(&dep_info, format!("{}/bin: {escaped}\n\n{escaped}:\n", dir.path().display())).expect("write");
        let listed = sources(&std::fs::read_to_string(&dep_info).expect("read"));
        assert_eq!(listed, vec![source.clone()]);
        let modified = std::fs::metadata(&source).and_then(|m| m.modified()).expect("mtime");
        assert_eq!(newer_than(&listed, modified + Duration::from_secs(1)), None);
        assert_eq!(newer_than(&listed, modified - Duration::from_secs(1)), Some(source));
        assert!(newer_than(&[dir.path().join("gone.rs")], modified).is_some());
    }

    #[test]
    fn root_holds_the_workspace_manifest() {
        assert!(root().join("Cargo.toml").is_file() && root().join("crates/testkit").is_dir());
    }
}
