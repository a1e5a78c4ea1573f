//! Where a run's figures came from, recorded in every record: the commit of the checkout that built the Rust
//! binaries and whether its tracked files differed from it (which ones, and a hash of the difference), the
//! build profile, the compiler the binaries name, a hash of each binary and of each lockfile (Cargo.lock, the
//! peers' package-lock.json).
//!
//! The commit says which sources built the binaries only when the binaries are not older than those sources,
//! so compare checks each against the dep-info cargo wrote beside it (crates/dep-info) and refuses a stale
//! one; `--allow-stale` runs it anyway and the record lists it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Lockfiles hashed into every record, relative to the repository: what the Rust side and the JavaScript
/// peers (Bun and Node packages, Flight 2.0.2, the frameworks) were built and installed from.
pub const LOCKFILES: [&str; 2] = ["Cargo.lock", "bench/peers/package-lock.json"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// `git rev-parse HEAD` of the checkout; null outside a git checkout.
    pub commit: Option<String>,
    /// Tracked files differed from that commit when the run started (untracked files do not count: results
    /// land in bench/results); null outside a git checkout.
    pub dirty: Option<bool>,
    /// The tracked files that differed (`git diff --name-only HEAD`), so a reader of a dirty run knows which;
    /// empty when clean. Absent from records written before it existed.
    #[serde(default)]
    pub changed: Vec<String>,
    /// SHA-256 of `git diff --binary HEAD` when dirty: two dirty runs with the same hash ran the same
    /// uncommitted changes. Null when clean or outside a checkout.
    #[serde(default)]
    pub diff_sha256: Option<String>,
    /// The cargo profile folder the binaries came from (`release`, `debug`).
    pub profile: String,
    /// The compiler the binaries name in their `.comment` section (`rustc version 1.95.0 (…)`).
    pub rustc: Option<String>,
    /// SHA-256 of each Rust binary the run executes, by file name.
    pub binaries: BTreeMap<String, String>,
    /// SHA-256 of each lockfile, by path relative to the repository; a missing one is left out.
    pub lockfiles: BTreeMap<String, String>,
    /// Binaries measured although not built from the current sources (`--allow-stale`), each with why;
    /// empty otherwise.
    pub stale: Vec<String>,
}

/// Lowercase hex of a digest.
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_file(path: &Path) -> anyhow::Result<(String, Vec<u8>)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok((hex(&Sha256::digest(&bytes)), bytes))
}

/// The provenance of a run of `binaries` from the checkout at `repo`. A binary older than its sources (or
/// built from another checkout) is an error naming each, unless `allow_stale`: then it is listed in the
/// provenance and a warning printed.
pub fn gather(repo: &Path, binaries: &[PathBuf], allow_stale: bool) -> anyhow::Result<Provenance> {
    let profile = binaries
        .iter()
        .find(|b| b.file_name().is_some_and(|n| n != "compare"))
        .or(binaries.first())
        .and_then(|b| b.parent()?.file_name())
        .map_or_else(|| "unknown".into(), |n| n.to_string_lossy().into_owned());
    let stale: Vec<String> =
        binaries.iter().filter_map(|b| dep_info::check(b, repo).err()).map(|s| s.to_string()).collect();
    if !stale.is_empty() {
        if !allow_stale {
            bail!(
                "binaries not built from the current sources:\n  - {}\nrebuild them (`{}`), or pass --allow-stale \
                 to measure them anyway (the records will say so)",
                stale.join("\n  - "),
                rebuild_command(&profile)
            );
        }
        eprintln!("compare: --allow-stale: measuring binaries not built from the current sources:");
        for s in &stale {
            eprintln!("  - {s}");
        }
    }
    let mut hashes = BTreeMap::new();
    let mut rustc = None;
    for b in binaries {
        let (hash, bytes) = sha256_file(b)?;
        rustc = rustc.or_else(|| compiler(&bytes));
        hashes.insert(b.file_name().unwrap_or_default().to_string_lossy().into_owned(), hash);
    }
    let mut lockfiles = BTreeMap::new();
    for rel in LOCKFILES {
        let path = repo.join(rel);
        if path.is_file() {
            lockfiles.insert(rel.to_string(), sha256_file(&path)?.0);
        }
    }
    let GitState { commit, dirty, changed, diff_sha256 } = git_state(repo);
    Ok(Provenance { commit, dirty, changed, diff_sha256, profile, rustc, binaries: hashes, lockfiles, stale })
}

/// How to rebuild binaries of `profile` (the folder they sit in): bench/setup.sh builds the release ones.
fn rebuild_command(profile: &str) -> String {
    match profile {
        "release" => "bash bench/setup.sh`, or `cargo build --release".into(),
        "debug" => "cargo build --workspace".into(),
        other => format!("cargo build --workspace --profile {other}"),
    }
}

/// The checkout as git sees it; nulls (and nothing changed) where git or the checkout is missing.
#[derive(Debug, Default)]
struct GitState {
    commit: Option<String>,
    dirty: Option<bool>,
    changed: Vec<String>,
    diff_sha256: Option<String>,
}

/// HEAD, and the tracked files that differ from it (staged or not; untracked files do not count).
fn git_state(repo: &Path) -> GitState {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| o.stdout)
    };
    let Some(commit) = git(&["rev-parse", "HEAD"])
        .map(|out| String::from_utf8_lossy(&out).trim().to_string())
        .filter(|c| !c.is_empty())
    else {
        return GitState::default();
    };
    // -z: a path is written as it is, whatever characters it holds.
    let Some(names) = git(&["diff", "--name-only", "-z", "HEAD"]) else {
        return GitState { commit: Some(commit), ..GitState::default() };
    };
    let changed: Vec<String> =
        names.split(|&b| b == 0).filter(|n| !n.is_empty()).map(|n| String::from_utf8_lossy(n).into_owned()).collect();
    let diff_sha256 = if changed.is_empty() {
        None
    } else {
        git(&["diff", "--binary", "HEAD"]).map(|diff| hex(&Sha256::digest(&diff)))
    };
    GitState { commit: Some(commit), dirty: Some(!changed.is_empty()), changed, diff_sha256 }
}

/// The rustc a binary was built by: the `rustc version …` string rustc leaves in its `.comment` section. The
/// first occurrence followed by a version number: compare's own binary also holds the bare mark (this
/// function's constant) among its other strings, and a debug build put that one first.
fn compiler(binary: &[u8]) -> Option<String> {
    const MARK: &[u8] = b"rustc version ";
    let at = binary.windows(MARK.len() + 1).position(|w| w.starts_with(MARK) && w[MARK.len()].is_ascii_digit())?;
    let end = binary[at..].iter().position(|&b| b == 0 || b == b'\n').map_or(binary.len(), |n| at + n);
    std::str::from_utf8(&binary[at..end]).ok().map(str::to_string)
}

/// One line for the summaries: `commit abc1234, release build, rustc 1.95.0 (…)`, the changed files of a
/// dirty checkout, and the stale binaries.
pub fn describe(p: &Provenance) -> String {
    let commit = match (&p.commit, p.dirty) {
        (Some(c), Some(true)) if p.changed.is_empty() => format!("commit `{}` with uncommitted changes", short(c)),
        (Some(c), Some(true)) => {
            format!("commit `{}` with uncommitted changes to {}", short(c), changed_list(&p.changed))
        }
        (Some(c), _) => format!("commit `{}`", short(c)),
        (None, _) => "no git commit".into(),
    };
    let rustc = p.rustc.as_deref().map_or("rustc unknown".into(), |r| r.replacen("rustc version", "rustc", 1));
    let mut line = format!("{commit}, {} build, {rustc}", p.profile);
    if !p.stale.is_empty() {
        line.push_str(&format!("; STALE (--allow-stale): {}", p.stale.join("; ")));
    }
    line
}

/// At most five paths, then how many more: the record has them all.
fn changed_list(changed: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut list: Vec<String> = changed.iter().take(SHOWN).map(|c| format!("`{c}`")).collect();
    if changed.len() > SHOWN {
        list.push(format!("{} more", changed.len() - SHOWN));
    }
    list.join(", ")
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(10)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiler_is_read_from_the_comment_section() {
        let bytes = b"\x7fELF junk\0GCC: (Debian 12.2.0)\0rustc version 1.95.0 (59807616e 2026-04-14)\0more";
        assert_eq!(compiler(bytes).as_deref(), Some("rustc version 1.95.0 (59807616e 2026-04-14)"));
        assert_eq!(compiler(b"no compiler here"), None);
        let decoy = b"rustc version git-C#f28e2bbun\0GCC\0rustc version 1.95.0 (59807616e 2026-04-14)\0";
        assert_eq!(compiler(decoy).as_deref(), Some("rustc version 1.95.0 (59807616e 2026-04-14)"), "the mark alone");
    }

    #[test]
    fn a_stale_binary_is_refused_unless_allowed() {
        let dir = tempfile::tempdir().expect("dir");
        let repo = dir.path().join("repo");
        let release = dir.path().join("target/release");
        std::fs::create_dir_all(&repo).and_then(|()| std::fs::create_dir_all(&release)).expect("dirs");
        std::fs::write(repo.join("Cargo.lock"), "lock").expect("lock");
        let source = repo.join("main.rs");
        std::fs::write(&source, "fn main() {}").expect("source");
        let bin = release.join("loadgen");
        std::fs::write(&bin, b"ELF\0rustc version 1.95.0 (x)\0").expect("binary");
        std::fs::write(release.join("loadgen.d"), format!("{}: {}\n", bin.display(), source.display())).expect("d");
        let older = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options().write(true).open(&bin).and_then(|f| f.set_modified(older)).expect("mtime");

        let err = gather(&repo, std::slice::from_ref(&bin), false).expect_err("stale refused");
        assert!(err.to_string().contains("is older than") && err.to_string().contains("--allow-stale"), "{err}");
        assert!(err.to_string().contains("cargo build --release"), "release binaries: {err}");
        let p = gather(&repo, std::slice::from_ref(&bin), true).expect("allowed");
        assert_eq!(p.stale.len(), 1);
        assert_eq!((p.profile.as_str(), p.rustc.as_deref()), ("release", Some("rustc version 1.95.0 (x)")));
        assert_eq!(p.binaries["loadgen"], hex(&Sha256::digest(b"ELF\0rustc version 1.95.0 (x)\0")));
        assert_eq!(p.lockfiles.keys().collect::<Vec<_>>(), ["Cargo.lock"]);
        assert_eq!((p.commit, p.dirty), (None, None), "not a git checkout");
        assert!(describe(&gather(&repo, &[], false).expect("nothing to check")).starts_with("no git commit"));

        std::fs::File::options()
            .write(true)
            .open(&bin)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()))
            .expect("mtime");
        assert!(gather(&repo, &[bin], false).expect("fresh").stale.is_empty());
    }

    #[test]
    fn a_dirty_checkout_names_its_changed_files_and_hashes_the_difference() {
        let dir = tempfile::tempdir().expect("dir");
        let repo = dir.path();
        let git = |args: &[&str]| {
            let out = Command::new("git").arg("-C").arg(repo).args(args).output().expect("git");
            assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        git(&["init", "-q"]);
        std::fs::write(repo.join("a.rs"), "fn a() {}").expect("a");
        std::fs::write(repo.join("b c.rs"), "fn b() {}").expect("b");
        git(&["add", "."]);
        git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one"]);
        let clean = git_state(repo);
        assert_eq!((clean.dirty, clean.changed.len(), clean.diff_sha256.as_deref()), (Some(false), 0, None));
        assert_eq!(clean.commit.as_deref().map(str::len), Some(40));

        std::fs::write(repo.join("b c.rs"), "fn b() { 1; }").expect("b");
        std::fs::write(repo.join("untracked.md"), "not counted").expect("untracked");
        let dirty = git_state(repo);
        assert_eq!((dirty.dirty, dirty.changed.clone()), (Some(true), vec!["b c.rs".to_string()]));
        let hash = dirty.diff_sha256.clone().expect("a diff hash");
        assert_eq!(git_state(repo).diff_sha256, Some(hash.clone()), "the same changes, the same hash");
        std::fs::write(repo.join("b c.rs"), "fn b() { 2; }").expect("b");
        assert_ne!(git_state(repo).diff_sha256, Some(hash), "other changes, another hash");

        let p = Provenance {
            commit: dirty.commit,
            dirty: Some(true),
            changed: (1..=7).map(|i| format!("f{i}.rs")).collect(),
            diff_sha256: None,
            profile: "release".into(),
            rustc: None,
            binaries: BTreeMap::new(),
            lockfiles: BTreeMap::new(),
            stale: Vec::new(),
        };
        let line = describe(&p);
        assert!(line.contains("uncommitted changes to `f1.rs`, `f2.rs`, `f3.rs`, `f4.rs`, `f5.rs`, 2 more"), "{line}");
    }

    #[test]
    fn the_rebuild_hint_names_the_binaries_profile() {
        assert!(rebuild_command("release").contains("cargo build --release"));
        assert_eq!(rebuild_command("debug"), "cargo build --workspace");
        assert_eq!(rebuild_command("bench"), "cargo build --workspace --profile bench");
    }
}
