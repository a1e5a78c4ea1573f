//! What a comparison is told to do, resolved: the settings `cli.rs` parses its flags into (defaults,
//! `--quick` and paths applied, durations parsed, lists checked). Plain types with no clap in them, so the
//! modules that run a comparison take these and never the command line.

use std::path::PathBuf;
use std::time::Duration;

use crate::plan::paths::Paths;
use crate::plan::runtimes::Runtime;
use crate::plan::workloads::Workload;
use crate::system::cores::Cores;

/// `--soak`: how long, how often sampled, at what rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Soak {
    pub duration: Duration,
    pub interval: Duration,
    pub rate: f64,
}

/// `--capacity`: the objective and how each search steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacitySearch {
    /// p99 at most this, latency from each request's intended send time.
    pub p99: Duration,
    /// Searches per runtime and workload.
    pub runs: u32,
    /// Each step's measured window, and the warmup before it.
    pub step: Duration,
    pub warmup: Duration,
}

/// Everything a comparison needs, resolved.
#[derive(Debug, Clone)]
pub struct Config {
    pub paths: Paths,
    pub workloads: Vec<Workload>,
    pub runtimes: Vec<Runtime>,
    pub runs: u32,
    pub duration: Duration,
    pub warmup: Duration,
    /// `--connections`: empty for each workload's own count, one count for all, or several: a sweep.
    pub connections: Vec<u32>,
    pub server_cores: Cores,
    /// One per server core: rust workers, Node cluster workers, Bun processes.
    pub server_processes: usize,
    pub loader_cores: Cores,
    pub db_cores: Cores,
    pub startup_runs: u32,
    /// `None`: half the slowest runtime's median closed-loop req/s; `Some(0)`: no open-loop runs.
    pub tail_rate: Option<f64>,
    pub out_dir: PathBuf,
    pub database_url: Option<String>,
    /// `--db-rtt`: the round trips a delay proxy adds between the servers and their databases, each a cell of
    /// the workloads that query one; empty: no proxy.
    pub db_rtt: Vec<Duration>,
    pub redis_url: Option<String>,
    pub rows: u64,
    pub seed_notes: u32,
    pub request_timeout: Duration,
    /// Soak mode (`--soak`): checks, then one soak per runtime and workload, all at once, instead of the
    /// comparison.
    pub soak: Option<Soak>,
    /// `--capacity`: a capacity search per runtime and workload after the rounds.
    pub capacity: Option<CapacitySearch>,
    /// metadata's DB-only runs: lookups per run (0: none).
    pub lookups: u64,
    /// `--allow-stale`: measure binaries older than their sources (the records list them).
    pub allow_stale: bool,
    /// compare's argv, recorded in every record.
    pub command: Vec<String>,
}
