//! The gate's record: what `compare budget` printed, with the command, build, machine and tools that make it
//! reproducible and the rounds as they were measured, written to `<results dir>/<stamp>/<stamp>-<host>-budget.md`
//! like every other result.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;

use crate::plan::paths::ResultFolder;
use crate::provenance;
use crate::records::RunMeta;

/// One gate or update, as measured.
pub struct Record<'a> {
    pub meta: &'a RunMeta,
    /// The one-line outcome: "every cell within budget", "2 cells over budget: …", "budget rewritten".
    pub outcome: String,
    /// The table and, for a failing cell, what grew: what the gate printed.
    pub body: &'a str,
    /// One line per measurement, as printed while measuring.
    pub rounds: &'a [String],
}

/// Writes `record` into `folder` (the run's, stamped when it started); returns the file.
pub fn write(folder: &ResultFolder, record: &Record<'_>) -> anyhow::Result<PathBuf> {
    let path = folder.file(&record.meta.machine.hostname, "-budget.md");
    std::fs::create_dir_all(&folder.dir).with_context(|| format!("creating {}", folder.dir.display()))?;
    std::fs::write(&path, render(record)).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

pub fn render(r: &Record<'_>) -> String {
    let mut out = format!("# compare budget: {}\n\n", r.outcome);
    let _ = writeln!(out, "- Command: `{}`", r.meta.command.join(" "));
    let build = r.meta.provenance.as_ref().map_or_else(|| "unknown".into(), provenance::describe);
    let _ = writeln!(out, "- Build: {build}");
    let _ = writeln!(out, "- Machine: {}", r.meta.machine);
    let layout = &r.meta.layout;
    let _ = writeln!(out, "- Cores: servers {}, loadgen and compare {}", layout.server_cores, layout.loader_cores);
    let _ = writeln!(out, "- Tools: {}, {}\n", version("valgrind", "--version"), version("strace", "-V"));
    out.push_str(r.body.trim_end());
    out.push_str("\n\n## Each measurement\n\n```\n");
    for line in r.rounds {
        let _ = writeln!(out, "{line}");
    }
    out.push_str("```\n");
    out
}

/// The first line `tool flag` prints, or that it printed nothing.
fn version(tool: &str, flag: &str) -> String {
    Command::new(tool)
        .arg(flag)
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(str::to_string))
        .unwrap_or_else(|| format!("{tool} (no version)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{Layout, machine_info};

    #[test]
    fn the_record_says_how_to_reproduce_it_and_keeps_every_measurement() {
        let meta = RunMeta {
            run_id: "20261206T030000Z-vm".into(),
            command: vec!["compare".into(), "budget".into()],
            machine: machine_info(),
            layout: Layout { server_cores: "0".into(), loader_cores: "1".into(), db_cores: "1".into() },
            provenance: None,
        };
        let rounds = ["budget: flight-rs/hello-bare round 1: 8665 instructions".to_string()];
        let record =
            Record { meta: &meta, outcome: "every cell within budget".into(), body: "| table |\n", rounds: &rounds };
        let dir = tempfile::tempdir().expect("temp dir");
        let path = write(&ResultFolder::now(dir.path()), &record).expect("written");
        let text = std::fs::read_to_string(&path).expect("reads");
        assert!(path.file_name().is_some_and(|n| n.to_string_lossy().ends_with("-budget.md")), "{path:?}");
        assert!(text.starts_with("# compare budget: every cell within budget\n"), "{text}");
        for want in
            ["- Command: `compare budget`", "- Build: unknown", "- Cores: servers 0", "| table |", "round 1: 8665"]
        {
            assert!(text.contains(want), "{want:?} in\n{text}");
        }
    }
}
