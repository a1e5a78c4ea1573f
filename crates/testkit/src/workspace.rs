//! The workspace under test: its root folder, and the binaries cargo built from it.
//!
//! Every test that runs a workspace binary as a child process takes it from [`binary`]: the file cargo put
//! next to the test binaries (`target/<profile>/<name>`, the one `CARGO_BIN_EXE_<name>` names inside its own
//! package), checked against the dep-info cargo wrote beside it (crates/dep-info), so a binary older than any source it was
//! built from fails the test instead of being tested. Tests never run cargo themselves (a build inside a test
//! holds the cargo lock while other tests wait on it): the test command (`scripts/test.sh`) builds every
//! target first, and `cargo nextest run` builds the binaries of every package it tests.

use std::path::{Path, PathBuf};

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
    if let Err(stale) = dep_info::check(&path, &root()) {
        panic!("{stale}: {build}");
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_holds_the_workspace_manifest() {
        assert!(root().join("Cargo.toml").is_file() && root().join("crates/testkit").is_dir());
    }
}
