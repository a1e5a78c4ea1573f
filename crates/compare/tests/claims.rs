//! The published claims: the committed ledger parses and covers every post, `compare claims` judges it on the
//! committed runs (text and JSON, exactly the five verdicts), refuses bad input without writing anything,
//! and the README's block is exactly what `compare claims --readme` makes of the runs it names.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use compare::ledger;
use compare::report::claims::{find_block, readme_block};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

/// The two committed headline runs (default method, three hours apart).
fn headline_runs() -> Vec<PathBuf> {
    ["20261204T205702Z-vm.jsonl", "20261204T235505Z-vm.jsonl"]
        .iter()
        .map(|f| repo().join("bench/results").join(f.split('-').next().expect("stamp")).join(f))
        .collect()
}

const VERDICTS: [&str; 5] =
    ["reproduced", "direction holds, size differs", "contradicted", "no measurable difference", "not measured"];

#[test]
fn the_ledger_covers_every_post() {
    let claims = ledger::read(&repo().join(ledger::DEFAULT_PATH)).expect("the committed ledger parses");
    for post in ["000", "001", "002", "003", "004"] {
        assert!(claims.iter().any(|c| c.post == post), "no claim of post {post}");
    }
    for c in &claims {
        assert!(c.id.starts_with(&c.post), "{} is not an id of post {}", c.id, c.post);
        let unmeasurable = c.unmeasurable.as_ref();
        assert!(c.published.is_some() || unmeasurable.is_some(), "{}: a measurable claim without a figure", c.id);
    }
    // The four that need more cores than this machine has carry the command for one that has them.
    for id in ["000K", "000L", "000M", "003C"] {
        let c = claims.iter().find(|c| c.id == id).expect(id);
        let cmd = c.unmeasurable.as_ref().and_then(|u| u.command.as_deref()).unwrap_or_default();
        assert!(cmd.contains("--server-cores 0-3 --loader-cores 4-5 --db-cores 6-7"), "{id}: {cmd}");
    }
}

#[test]
fn claims_on_the_headline_runs_in_text_and_json() {
    let out = Command::new(common::compare_exe())
        .arg("claims")
        .arg("--claims")
        .arg(repo().join(ledger::DEFAULT_PATH))
        .args(headline_runs())
        .arg("--json")
        .output()
        .expect("run compare claims");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON array");
    let findings = json.as_array().expect("array");
    let claims = ledger::read(&repo().join(ledger::DEFAULT_PATH)).expect("ledger");
    assert_eq!(findings.len(), claims.len(), "one finding per claim");
    for f in findings {
        let verdict = f["verdict"].as_str().expect("verdict");
        assert!(VERDICTS.contains(&verdict), "{verdict}");
        for key in ["id", "published", "runs", "reason"] {
            assert!(f.get(key).is_some(), "{key} missing: {f}");
        }
    }
    let by_id = |id: &str| findings.iter().find(|f| f["id"] == id).expect(id).clone();
    // The headline runs measured bun and node on metadata in both: 004A has two runs' figures.
    let a = by_id("004A");
    assert_eq!(a["runs"].as_array().map(Vec::len), Some(2), "{a}");
    assert!(a["runs"][0]["rounds"].as_u64() >= Some(3), "{a}");
    // Neither run had flight-bun: 000B is not measured, and says so.
    let b = by_id("000B");
    assert_eq!(b["verdict"], "not measured");
    assert!(b["reason"].as_str().is_some_and(|r| r.contains("no run measured both flight-bun and flight-node")), "{b}");
    // The cores the four-core claims need are not here.
    assert!(by_id("003C")["reason"].as_str().is_some_and(|r| r.starts_with("not measurable here")));

    let text = Command::new(common::compare_exe())
        .arg("claims")
        .arg("--claims")
        .arg(repo().join(ledger::DEFAULT_PATH))
        .args(headline_runs())
        .output()
        .expect("run compare claims");
    assert!(text.status.success());
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("| id | the claim | measured as | post | measured, per run | verdict | why |"), "{text}");
    assert!(text.contains(&format!("Of {} claims:", claims.len())), "{text}");
}

#[test]
fn bad_input_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger_with = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).expect("write ledger");
        p
    };
    let good = std::fs::read_to_string(repo().join(ledger::DEFAULT_PATH)).expect("ledger");
    let claims = |ledger: &Path, files: &[PathBuf], extra: &[&str]| {
        Command::new(common::compare_exe())
            .arg("claims")
            .arg("--claims")
            .arg(ledger)
            .args(files)
            .args(extra)
            .output()
            .expect("run compare claims")
    };
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hello-bare.jsonl");
    let refused = |out: std::process::Output, says: &str| {
        assert!(!out.status.success(), "accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "expected {says:?} in: {err}");
    };
    // An unknown workload, with its line.
    let typo = good.replacen("workload = \"hello-default\"", "workload = \"hello-defualt\"", 1);
    let line = typo.lines().position(|l| l.contains("hello-defualt")).expect("typo") + 1;
    refused(
        claims(&ledger_with("typo.toml", &typo), std::slice::from_ref(&fixture), &[]),
        &format!("line {line}: claim 000A"),
    );
    // A duplicate id.
    refused(
        claims(&ledger_with("twice.toml", &format!("{good}\n{good}")), std::slice::from_ref(&fixture), &[]),
        "already used",
    );
    // Not TOML: the parser's line and column.
    refused(
        claims(&ledger_with("broken.toml", "[[claim]\nid = 1\n"), std::slice::from_ref(&fixture), &[]),
        "line 1, column",
    );
    // A run file of another schema, by name.
    let other = dir.path().join("other.jsonl");
    std::fs::write(&other, "{\"schema\":\"loadgen-report/1\"}\n").expect("write");
    refused(
        claims(&repo().join(ledger::DEFAULT_PATH), std::slice::from_ref(&other), &[]),
        "other.jsonl:1: not a compare-record/1",
    );
    // --readme with a refused ledger leaves the README as it was.
    let readme = dir.path().join("README.md");
    let before = "# r\n\n<!-- claims: x.jsonl -->\nold\n<!-- claims end -->\n";
    std::fs::write(&readme, before).expect("write");
    std::fs::copy(&fixture, dir.path().join("x.jsonl")).expect("copy");
    let out = claims(&ledger_with("typo2.toml", &typo), &[dir.path().join("x.jsonl")], &["--readme", "README.md"]);
    refused(out, "unknown workload");
    assert_eq!(std::fs::read_to_string(&readme).expect("read"), before, "nothing written");
    // `compare report` with a refused ledger writes no summary either.
    let md = dir.path().join("summary.md");
    let out = Command::new(common::compare_exe())
        .arg("report")
        .arg(&fixture)
        .arg("--claims")
        .arg(ledger_with("typo3.toml", &typo))
        .arg("--out")
        .arg(&md)
        .output()
        .expect("run compare report");
    refused(out, "unknown workload");
    assert!(!md.exists() && !md.with_extension("html").exists(), "nothing written");
}

#[test]
fn the_readme_block_is_what_compare_claims_makes_of_its_runs() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README");
    let (range, files) = find_block(&readme).expect("README has a claims block");
    assert!(!files.is_empty(), "the block names its runs");
    let claims = ledger::read(&repo().join(ledger::DEFAULT_PATH)).expect("ledger");
    let fresh = readme_block(&claims, &repo(), &files).expect("regenerates");
    assert!(
        readme[range.clone()] == *fresh.trim_end(),
        "README's claims block differs from what `compare claims --readme README.md {}` writes; run it and \
         commit the result",
        files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(" ")
    );
}

#[test]
fn verdict_against_node_gives_bun_against_node_on_every_workload() {
    let out = Command::new(common::compare_exe())
        .args(["verdict", "--reference", "node", "--json"])
        .args(headline_runs())
        .output()
        .expect("run compare verdict");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON array");
    let all = json.as_array().expect("array");
    let bun: Vec<&serde_json::Value> = all.iter().filter(|j| j["runtime"] == "bun").collect();
    let mut workloads: Vec<&str> = bun.iter().filter_map(|j| j["workload"].as_str()).collect();
    workloads.dedup();
    assert_eq!(workloads.len(), 20, "bun against node on every workload: {workloads:?}");
    let words = ["node better", "node worse", "no measurable difference", "not reproduced", "not comparable"];
    for j in all {
        assert_eq!(j["reference"], "node");
        assert!(j["verdict"].as_str().is_some_and(|v| words.contains(&v)), "{j}");
        assert!(j["runtime"] != "node", "node is the reference, never a row");
    }
}
