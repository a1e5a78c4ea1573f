//! The flags both measuring commands share, the comparison and `compare calibrate`: how many runs of how
//! long after what warmup, `--quick`, the server's and the loader's cores, and where the binaries, the
//! workspace and the results are. Declared once here, with the comparison's env names and help; `calibrate`
//! flattens the same struct and renames them (COMPARE_CALIBRATE_*, its own help) with `mut_arg`. Each command
//! resolves them with its own [`Defaults`].
//!
//! The `display_order`s keep `compare --help` listing the flags where they always were, among the
//! comparison's own.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;

use crate::plan::paths::{Paths, results_dir};
use crate::system::cores::Cores;

#[derive(Debug, Clone, Args)]
pub struct MeasureArgs {
    /// Measured runs per cell, interleaved round by round [default: 3; --quick: 1].
    #[arg(long, env = "COMPARE_RUNS", display_order = 3)]
    pub runs: Option<u32>,
    /// Length of each measured run [default: 10s; --full: 20s; --quick: 2s].
    #[arg(long, env = "COMPARE_DURATION", display_order = 4)]
    pub duration: Option<String>,
    /// Discarded warmup before each run, 0 to skip [default: 3s; --full: 10s; --quick: 1s].
    #[arg(long, env = "COMPARE_WARMUP", display_order = 5)]
    pub warmup: Option<String>,
    /// taskset list for the server under test.
    #[arg(long, env = "COMPARE_SERVER_CORES", default_value = "0", display_order = 7)]
    pub server_cores: String,
    /// taskset list for loadgen and compare itself.
    #[arg(long, env = "COMPARE_LOADER_CORES", default_value = "1", display_order = 8)]
    pub loader_cores: String,
    /// Where the .jsonl, .md and .svg files go [default: <repo>/bench/results].
    #[arg(long, env = "COMPARE_OUT_DIR", display_order = 12)]
    pub out_dir: Option<PathBuf>,
    /// A smoke run: 1 s warmup, one 2 s run, 2 cold starts, 20000 metadata rows (explicit flags win).
    #[arg(long, env = "COMPARE_QUICK", display_order = 15)]
    pub quick: bool,
    /// Directory of flight-rs, scribe-rs, metadata-rs and loadgen [default: $CARGO_TARGET_DIR/release or
    /// <repo>/target/release].
    #[arg(long, env = "COMPARE_BIN_DIR", display_order = 16)]
    pub bin_dir: Option<PathBuf>,
    /// The workspace root (bench/peers lives there) [default: found from the current directory upwards].
    #[arg(long, env = "COMPARE_REPO", display_order = 17)]
    pub repo: Option<PathBuf>,
}

/// What a command's shared flags default to: `[without --quick, with --quick]`.
#[derive(Debug, Clone, Copy)]
pub struct Defaults {
    pub runs: [u32; 2],
    pub duration: [&'static str; 2],
    pub warmup: [&'static str; 2],
}

/// The shared flags, resolved (durations still as given: each command has its own rules for them).
#[derive(Debug, Clone)]
pub struct Measure<'a> {
    pub paths: Paths,
    pub out_dir: PathBuf,
    pub runs: u32,
    pub duration: &'a str,
    pub warmup: &'a str,
    pub server_cores: Cores,
    pub loader_cores: Cores,
}

impl MeasureArgs {
    /// Defaults (with `--quick` applied; explicit flags win) and paths relative to the current directory.
    pub fn resolve(&self, defaults: &Defaults, compare_exe: PathBuf) -> anyhow::Result<Measure<'_>> {
        let cwd = std::env::current_dir().context("current directory")?;
        let paths = Paths::resolve(&cwd, self.repo.as_deref(), self.bin_dir.as_deref(), compare_exe);
        let q = usize::from(self.quick);
        let runs = self.runs.unwrap_or(defaults.runs[q]);
        if runs == 0 {
            bail!("--runs must be at least 1");
        }
        Ok(Measure {
            out_dir: results_dir(&paths.repo, &cwd, self.out_dir.as_deref()),
            paths,
            runs,
            duration: self.duration.as_deref().unwrap_or(defaults.duration[q]),
            warmup: self.warmup.as_deref().unwrap_or(defaults.warmup[q]),
            server_cores: Cores::parse(&self.server_cores).context("--server-cores")?,
            loader_cores: Cores::parse(&self.loader_cores).context("--loader-cores")?,
        })
    }
}

/// Runs a command's `resolve(argv, compare_exe)` on this process's argv and path; a bad value is one line on
/// stderr and exit 64.
pub fn resolve_or_exit<T>(resolve: impl FnOnce(Vec<String>, PathBuf) -> anyhow::Result<T>) -> Result<T, ExitCode> {
    let exe = std::env::current_exe().unwrap_or_else(|_| "compare".into());
    resolve(std::env::args().collect(), exe).map_err(|e| {
        eprintln!("config error: {e:#}");
        ExitCode::from(64)
    })
}
