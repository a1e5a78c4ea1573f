//! `compare --help` names every workload and every runtime, taken from the types' own lists: a workload or
//! runtime the help leaves out is one a reader never learns exists.

mod common;

use compare::plan::runtimes;
use compare::plan::workloads::Workload;

/// The help of one option: its line and the description under it, up to the next option.
fn option_help<'a>(help: &'a str, flag: &str) -> &'a str {
    let start = help.find(&format!("\n      {flag} ")).unwrap_or_else(|| panic!("no {flag} in:\n{help}"));
    let rest = &help[start + 1..];
    let end = rest[1..].find("\n      -").map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

/// The names in a help text: runs of letters, digits and hyphens, so `koa` is not found inside `koa-bun`.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).filter(|w| !w.is_empty()).collect()
}

#[test]
fn help_lists_every_workload_and_runtime() {
    let out = std::process::Command::new(common::compare_exe())
        .arg("--help")
        .env_remove("COMPARE_WORKLOADS")
        .env_remove("COMPARE_RUNTIMES")
        .output()
        .expect("run compare --help");
    assert!(out.status.success(), "compare --help failed: {out:?}");
    let help = String::from_utf8(out.stdout).expect("UTF-8 help");

    let workloads = words(option_help(&help, "--workloads"));
    let missing: Vec<&str> = Workload::ALL.map(Workload::name).into_iter().filter(|n| !workloads.contains(n)).collect();
    assert!(missing.is_empty(), "--workloads' help leaves out {missing:?}:\n{help}");
    for group in ["default", "all", "h2"] {
        assert!(workloads.contains(&group), "--workloads' help leaves out the group {group}");
    }

    let runtimes = words(option_help(&help, "--runtimes"));
    let missing: Vec<&str> = runtimes::built_in().map(|r| r.name()).filter(|n| !runtimes.contains(n)).collect();
    assert!(missing.is_empty(), "--runtimes' help leaves out {missing:?}:\n{help}");
    for group in ["all", "frameworks"] {
        assert!(runtimes.contains(&group), "--runtimes' help leaves out the group {group}");
    }
}
