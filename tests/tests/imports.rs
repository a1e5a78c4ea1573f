//! The import order each library's docs state, checked against its source: compare's lib.rs and README and
//! loadgen's lib.rs each list their top-level modules in layers in which every `crate::` path points down
//! (a module names only modules after it), so each can be read and tested without the ones above it. The
//! lists here are those docs' lists; a module missing from a list, or an import that points up, fails with
//! the file and the edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// compare's layers, top to bottom (crates/compare/src/lib.rs); modules on one line do not import each other.
const COMPARE: &[&[&str]] = &[
    &["cli"],
    &["budget", "calibrate", "images", "export"],
    &["run"],
    &["report"],
    &["ledger"],
    &["verdict"],
    &["reference"],
    &["format", "measure_flags", "settings"],
    &["plan", "stats"],
    &["records"],
    &["provenance", "system", "table", "floor"],
];

/// loadgen's layers, top to bottom (crates/loadgen/src/lib.rs).
const LOADGEN: &[&[&str]] = &[
    &["cli", "capacity"],
    &["run"],
    &["per_second"],
    &["worker"],
    &["conn", "open_loop", "tls", "assertions"],
    &["h2", "tls_config", "epoll", "uring", "source"],
    &["h2_response", "h2_settings", "h2_stream", "engine", "session_store", "timer"],
    &["h2_request"],
    &["h2_frame", "hpack", "http1"],
    &["log_chart", "merge", "hdr_log"],
    &["render"],
    &["report"],
    &["stats"],
    &["settings"],
    &["rate", "target", "handshake", "request_log", "open_files"],
];

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The identifier that starts `text` (`[a-z0-9_]+`).
fn ident(text: &str) -> &str {
    let end = text.find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// Per top-level module of the crate at `src`: the other top-level modules its code names as `crate::X`,
/// each with the first file that does. Comments and `#[cfg(test)]` code are left out: a doc may name any
/// module, and tests may reach up.
fn imports(src: &Path) -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut edges: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src");
        let top = ident(rel.to_str().expect("utf-8 path")).to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read source");
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for line in code.lines().map(|l| l.split("//").next().unwrap_or_default()) {
            for (i, _) in line.match_indices("crate::") {
                let target = ident(&line[i + "crate::".len()..]);
                if !target.is_empty() && target != top {
                    edges.entry(top.clone()).or_default().entry(target.to_string()).or_insert_with(|| file.clone());
                }
            }
        }
        edges.entry(top).or_default();
    }
    edges
}

/// Fails unless every module of the crate at `src` is in `layers` and every import points to a later layer.
fn assert_layered(src: &Path, layers: &[&[&str]]) {
    let layer_of: BTreeMap<&str, usize> =
        layers.iter().enumerate().flat_map(|(i, names)| names.iter().map(move |n| (*n, i))).collect();
    let edges = imports(src);
    let unlisted: BTreeSet<&String> = edges.keys().filter(|m| !layer_of.contains_key(m.as_str())).collect();
    assert!(unlisted.is_empty(), "{}: modules the stated order leaves out: {unlisted:?}", src.display());
    let mut upward = Vec::new();
    for (from, targets) in &edges {
        for (to, file) in targets {
            let (a, b) = (layer_of[from.as_str()], layer_of.get(to.as_str()).copied().unwrap_or(usize::MAX));
            if b <= a {
                upward.push(format!("{from} -> {to} ({})", file.display()));
            }
        }
    }
    assert!(upward.is_empty(), "imports against the stated order:\n  {}", upward.join("\n  "));
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("crates").join(name).join("src")
}

#[test]
fn compare_imports_point_down_its_stated_order() {
    assert_layered(&crate_src("compare"), COMPARE);
}

#[test]
fn loadgen_imports_point_down_its_stated_order() {
    assert_layered(&crate_src("loadgen"), LOADGEN);
}

#[test]
fn an_upward_import_is_caught() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("high.rs"), "use crate::low::X;\n").expect("write");
    std::fs::write(dir.path().join("low.rs"), "// crate::high is only named in a comment\nuse crate::high::Y;\n")
        .expect("write");
    let caught = std::panic::catch_unwind(|| assert_layered(dir.path(), &[&["high"], &["low"]]));
    let message = caught.expect_err("low imports high").downcast::<String>().expect("a message");
    assert!(message.contains("low -> high"), "{message}");
    assert!(!message.contains("high -> low"), "{message}");
}
