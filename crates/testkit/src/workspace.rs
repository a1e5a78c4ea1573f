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
    let build = format!("build it with `cargo build --workspace --all-targets` (scripts/test.sh does) or `cargo build --bin {name}`");
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{} not found ({e}): {build}", path.display()));
    if let Some(source) = newer_source(&profile_dir.join(format!("{name}.d")), built) {
        panic!("{} is older than {}: {build}", path.display(), source.display());
    }
    path
}

/// A source listed in the dep-info file `dep_info` (`<binary>: <source> <source> …`, spaces escaped) that
/// changed after `built`, or is gone. A missing dep-info file counts as stale.
fn newer_source(dep_info: &Path, built: SystemTime) -> Option<PathBuf> {
    let Ok(text) = std::fs::read_to_string(dep_info) else { return Some(dep_info.to_path_buf()) };
    let line = text.lines().find(|line| !line.starts_with('#') && line.contains(": "))?;
    let (_, sources) = line.split_once(": ")?;
    let escaped = sources.replace("\\ ", "\u{0}");
    escaped.split_whitespace().map(|s| PathBuf::from(s.replace('\u{0}', " "))).find(|source| {
        std::fs::metadata(source).and_then(|m| m.modified()).map_or(true, |modified| modified > built)
    })
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
        let modified = std::fs::metadata(&source).and_then(|m| m.modified()).expect("mtime");
        assert_eq!(newer_source(&dep_info, modified + Duration::from_secs(1)), None);
        assert_eq!(newer_source(&dep_info, modified - Duration::from_secs(1)), Some(source));
        assert!(newer_source(&dir.path().join("missing.d"), modified).is_some());
    }

    #[test]
    fn root_holds_the_workspace_manifest() {
        assert!(root().join("Cargo.toml").is_file() && root().join("crates/testkit").is_dir());
    }
}
