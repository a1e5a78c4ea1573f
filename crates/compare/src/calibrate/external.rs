//! A load generator that is not ours (wrk, h2load), run once the way loadgen is: pinned by taskset, its output
//! in files under the run's log folder, killed when it overstays its duration, and its own CPU read from /proc
//! as it exits, so every loader's cost per response is taken alike.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use crate::system::process::Spawned;

/// A loader gets this long past its own duration before it is killed and the run fails.
pub const SLACK: Duration = Duration::from_secs(30);

/// One run of an outside loader and what came of it; `O` is its parsed report.
#[derive(Debug)]
pub struct Run<O> {
    /// `taskset -c CORES program ARGS`, as run.
    pub argv: Vec<String>,
    pub output: anyhow::Result<O>,
    pub exit: Option<i32>,
    pub timed_out: bool,
    pub stderr: String,
    /// The loader's own CPU over its life (all threads), µs; None when it had to be killed.
    pub cpu_us: Option<f64>,
}

/// `program`'s path on PATH (taskset execs it by that path, so the run uses the binary that was checked).
pub fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

/// Runs `taskset -c cores program args` for `duration` (plus [`SLACK`]), its output in `logdir/<tag>.out|.err`,
/// and parses what it printed with `parse`.
pub fn run<O>(
    (program, cores, args): (&Path, &str, Vec<String>),
    duration: Duration,
    (logdir, tag): (&Path, &str),
    parse: fn(&str) -> anyhow::Result<O>,
) -> anyhow::Result<Run<O>> {
    let name = program.file_name().map_or_else(|| "loader".into(), |n| n.to_string_lossy().into_owned());
    let mut argv = vec!["taskset".to_string(), "-c".to_string(), cores.to_string()];
    argv.push(program.to_string_lossy().into_owned());
    argv.extend(args);
    let out_path = logdir.join(format!("{tag}.out"));
    let err_path = logdir.join(format!("{tag}.err"));
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null()).stdout(File::create(&out_path)?).stderr(File::create(&err_path)?);
    let mut proc = Spawned::spawn(cmd, &name).with_context(|| format!("starting {name}"))?;
    let status = proc.wait_timeout(duration + SLACK)?;
    let timed_out = status.is_none();
    if timed_out {
        proc.kill();
    }
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let cpu_us = proc.cpu_at_exit().map(|c| c.total_us());
    Ok(Run { argv, output: parse(&stdout), exit: status.and_then(|s| s.code()), timed_out, stderr, cpu_us })
}

impl<O> Run<O> {
    /// Why the process itself failed (overstayed, a non-zero exit, unreadable output); empty when it did not.
    pub fn process_problems(&self, name: &str) -> Vec<String> {
        let mut reasons = Vec::new();
        if self.timed_out {
            reasons.push(format!("{name} still running {SLACK:?} after its duration; killed"));
        } else if self.exit != Some(0) {
            reasons.push(format!("{name} exited {:?}: {}", self.exit, self.stderr.trim()));
        }
        if let Err(e) = &self.output {
            reasons.push(format!("{e:#}"));
        }
        reasons
    }
}
