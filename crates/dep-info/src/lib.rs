//! Whether a binary cargo built is still what its sources say: cargo writes `<binary>.d` beside every
//! binary (`target/<profile>/flight-rs.d`), listing each source file the build read. A binary older than
//! one of them, or whose list names no file of the checkout at hand, was not built from these sources.
//!
//! Two users: the tests (testkit refuses to run a stale binary) and compare (it refuses to measure one
//! unless told, and records that it was told).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Why a binary is not what this checkout's sources build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// No binary at the path (the I/O error's text).
    Missing { binary: PathBuf, error: String },
    /// Its dep-info is missing, or names no file under the checkout: a target folder copied from elsewhere.
    NotFromCheckout { binary: PathBuf, dep_info: PathBuf },
    /// A source it was built from changed after it, or is gone.
    OlderThan { binary: PathBuf, source: PathBuf },
}

impl fmt::Display for Stale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stale::Missing { binary, error } => write!(f, "{} not found ({error})", binary.display()),
            Stale::NotFromCheckout { binary, dep_info } => write!(
                f,
                "{} was not built from this checkout (its {} names no file here)",
                binary.display(),
                dep_info.display()
            ),
            Stale::OlderThan { binary, source } => {
                write!(f, "{} is older than {}", binary.display(), source.display())
            }
        }
    }
}

impl std::error::Error for Stale {}

/// `Ok` when `binary` exists, its dep-info (`<binary>.d` beside it) names files under `checkout`, and none
/// of them changed after the binary was written.
pub fn check(binary: &Path, checkout: &Path) -> Result<(), Stale> {
    let built = std::fs::metadata(binary)
        .and_then(|m| m.modified())
        .map_err(|e| Stale::Missing { binary: binary.to_path_buf(), error: e.to_string() })?;
    let dep_info = dep_info_path(binary);
    let listed = std::fs::read_to_string(&dep_info).map(|text| sources(&text)).unwrap_or_default();
    if !listed.iter().any(|source| source.starts_with(checkout)) {
        return Err(Stale::NotFromCheckout { binary: binary.to_path_buf(), dep_info });
    }
    match newer_than(&listed, built) {
        Some(source) => Err(Stale::OlderThan { binary: binary.to_path_buf(), source }),
        None => Ok(()),
    }
}

/// `target/release/flight-rs` → `target/release/flight-rs.d`.
fn dep_info_path(binary: &Path) -> PathBuf {
    let mut name = binary.file_name().unwrap_or_default().to_os_string();
    name.push(".d");
    binary.with_file_name(name)
}

/// The sources a dep-info file lists (`<binary>: <source> <source> …`, spaces escaped as `\ `).
pub fn sources(dep_info: &str) -> Vec<PathBuf> {
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
    use std::fs::File;
    use std::time::Duration;

    fn set_mtime(path: &Path, at: SystemTime) {
        File::options().write(true).open(path).and_then(|f| f.set_modified(at)).expect("set mtime");
    }

    #[test]
    fn dep_info_lists_sources_with_escaped_spaces() {
        let text = "/t/bin: /src/a.rs /src/with\\ space.rs\n\n/src/a.rs:\n";
        assert_eq!(sources(text), [PathBuf::from("/src/a.rs"), PathBuf::from("/src/with space.rs")]);
        assert!(sources("# only a comment\n").is_empty());
    }

    #[test]
    fn a_binary_is_fresh_stale_foreign_or_missing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (checkout, binary) = (dir.path().join("repo"), dir.path().join("target/bin"));
        std::fs::create_dir_all(&checkout)
            .and_then(|()| std::fs::create_dir_all(dir.path().join("target")))
            .expect("dirs");
        let source = checkout.join("main with space.rs");
        std::fs::write(&source, "").and_then(|()| std::fs::write(&binary, "")).expect("write");
        let escaped = source.display().to_string().replace(' ', "\\ ");
        std::fs::write(dep_info_path(&binary), format!("{}: {escaped}\n", binary.display())).expect("write");
        let now = SystemTime::now();
        set_mtime(&source, now - Duration::from_secs(10));
        set_mtime(&binary, now - Duration::from_secs(5));
        assert_eq!(check(&binary, &checkout), Ok(()));

        set_mtime(&source, now);
        let stale = check(&binary, &checkout).expect_err("source changed after the build");
        assert_eq!(stale, Stale::OlderThan { binary: binary.clone(), source: source.clone() });
        assert!(stale.to_string().ends_with(&format!("is older than {}", source.display())), "{stale}");

        let elsewhere = dir.path().join("other-checkout");
        assert!(matches!(check(&binary, &elsewhere), Err(Stale::NotFromCheckout { .. })));
        std::fs::remove_file(&source).expect("remove");
        assert!(matches!(check(&binary, &checkout), Err(Stale::OlderThan { .. })), "a source that is gone");
        assert!(matches!(check(&dir.path().join("target/none"), &checkout), Err(Stale::Missing { .. })));
    }
}
