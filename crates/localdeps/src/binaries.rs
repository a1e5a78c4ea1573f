//! Where the servers' binaries are found.

use std::path::{Path, PathBuf};

/// The step every "not installed" error names.
pub const INSTALL_HINT: &str = "install PostgreSQL and Redis: bash scripts/install-test-deps.sh";

/// PATH, then where Debian puts servers, then PostgreSQL's versioned dirs, newest major first.
pub fn search_dirs() -> Vec<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut pg_dirs: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| {
                    let major = e.file_name().to_string_lossy().split('.').next().and_then(|m| m.parse().ok());
                    (major.unwrap_or(0), e.path().join("bin"))
                })
                .collect()
        })
        .unwrap_or_default();
    pg_dirs.sort();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"].map(PathBuf::from))
        .chain(pg_dirs.into_iter().rev().map(|(_, dir)| dir))
        .collect()
}

/// The first `dir/name` that is a file.
pub fn find_in(name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    dirs.iter().map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
}

/// `name`, or an error that says how to install it.
pub(crate) fn require(name: &str, dirs: &[PathBuf], install: &str) -> anyhow::Result<PathBuf> {
    find_in(name, dirs).ok_or_else(|| anyhow::anyhow!("{name} not found; {install}"))
}

/// "15.18" from `postgres (PostgreSQL) 15.18 (Debian …)`, "7.0.15" from `Redis server v=7.0.15 sha=…`.
pub(crate) fn version_of(binary: &Path, marker: &str) -> String {
    let out = std::process::Command::new(binary).arg("--version").stdin(std::process::Stdio::null()).output();
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    parse_version(&text, marker).unwrap_or_else(|| "(unknown version)".to_string())
}

pub(crate) fn parse_version(text: &str, marker: &str) -> Option<String> {
    let rest = &text[text.find(marker)? + marker.len()..];
    Some(rest.split_whitespace().next()?.to_string())
}

/// The last `lines` lines of a log, indented for an error message.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n    | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(
            parse_version("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)\n", "(PostgreSQL)").as_deref(),
            Some("15.18")
        );
        assert_eq!(parse_version("Redis server v=7.0.15 sha=0", "v=").as_deref(), Some("7.0.15"));
        assert_eq!(parse_version("nothing", "v="), None);
    }
}
