//! Command line: wrk-compatible basics (`-t -c -d -H --timeout --latency`, URL positional) and the rest.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "loadgen",
    version,
    about = "HTTP/1.1 load generator: closed and open loop, HDR latency, JSON reports"
)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Merge JSON reports (e.g. one per machine) exactly: counts add, histograms merge.
    Merge {
        /// Reports written by `loadgen --json`.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// Write the merged report as JSON here (`-` for stdout).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Print the latency distribution.
        #[arg(long)]
        latency: bool,
    },
    /// Draw a `--log-requests` file as an SVG: latency over time (p50, p99 and max per time bucket).
    LogChart {
        /// The file `--log-requests` wrote.
        log: PathBuf,
        /// Write the SVG here.
        #[arg(long)]
        svg: PathBuf,
        /// Width of a time bucket, e.g. 100ms, 1s.
        #[arg(long, default_value = "100ms", value_parser = parse_duration)]
        bucket: Duration,
    },
    /// Find the highest open-loop rate at which a latency objective holds (e.g. `--p99 10ms`): steps that
    /// double the rate, then bisect, each with its own warmup. `--json FILE` writes every step.
    Capacity(Box<crate::capacity::CapacityArgs>),
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Target, e.g. http://127.0.0.1:3000/api/hello (http only).
    #[arg(required = true)]
    pub url: Option<String>,
    /// Worker threads, each with its own event loop, connections and histogram.
    #[arg(short = 't', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Connections, spread evenly over threads.
    #[arg(short = 'c', long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub connections: u32,
    /// Measured duration, e.g. 10s, 500ms, 2m.
    #[arg(short = 'd', long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Warmup before measuring (its results are discarded).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Per-request timeout: on expiry the connection is closed, reopened and a timeout counted.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Print the latency distribution.
    #[arg(long)]
    pub latency: bool,
    /// Request method.
    #[arg(short = 'm', long, default_value = "GET")]
    pub method: String,
    /// Request body, read from this file (sent with Content-Length).
    #[arg(long)]
    pub body_file: Option<PathBuf>,
    /// Pin worker threads to these CPUs, round-robin: `1`, `2-3`, `0,2`.
    #[arg(long)]
    pub pin: Option<String>,
    /// Requests in flight per connection (1 = no pipelining).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,
    /// I/O engine: io_uring (one ring per thread, multishot receives, one submit per loop turn) or epoll.
    /// `auto` takes io_uring where the kernel allows it and says so on stderr when it falls back to epoll.
    #[arg(long, value_enum, default_value_t = EngineChoice::Auto, env = "LOADGEN_ENGINE")]
    pub engine: EngineChoice,
    /// Open loop: total requests per second over all threads. Latency is then measured from each request's
    /// intended send time (corrected for coordinated omission). Without it: closed loop, like wrk.
    /// `START:END` with --ramp: the rate climbs (or falls) linearly from START to END.
    #[arg(short = 'R', long, value_parser = parse_rate)]
    pub rate: Option<Rate>,
    /// With `-R START:END`: how long the linear ramp takes, from the start of the measured window (the warmup
    /// runs at START; after the ramp the rate stays at END). Must fit in -d.
    #[arg(long, value_parser = parse_duration, requires = "rate")]
    pub ramp: Option<Duration>,
    /// Open-loop arrival schedule.
    #[arg(long, value_enum, default_value_t = Schedule::Uniform)]
    pub schedule: Schedule,
    /// Path template replacing the URL's path, e.g. `/v1/metadata/{id}?region={region}`.
    #[arg(long)]
    pub path: Option<String>,
    /// Values for a template variable: `NAME=@FILE` (one per line) or `NAME=a,b,c` (repeatable).
    #[arg(long = "var")]
    pub vars: Vec<String>,
    /// How template values are drawn.
    #[arg(long, value_enum, default_value_t = Pick::Random)]
    pub pick: Pick,
    /// Seed for random draws and the Poisson schedule (same seed, same sequence).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Replay the raw HTTP/1.1 requests in this file, in order, round-robin (instead of the URL's path).
    #[arg(long)]
    pub replay: Option<PathBuf>,
    /// Expected status code of every response; a comma list (`200,404`) allows any of them.
    #[arg(long, value_delimiter = ',')]
    pub expect_status: Vec<u16>,
    /// Expected exact body.
    #[arg(long)]
    pub expect_body: Option<String>,
    /// Expected exact body, read from a file.
    #[arg(long)]
    pub expect_body_file: Option<PathBuf>,
    /// The body must contain this.
    #[arg(long)]
    pub expect_contains: Option<String>,
    /// The body's SHA-256, hex.
    #[arg(long)]
    pub expect_sha256: Option<String>,
    /// The body's length in bytes.
    #[arg(long)]
    pub expect_length: Option<u64>,
    /// A header the response must carry: `Name` or `Name: value` (repeatable).
    #[arg(long)]
    pub expect_header: Vec<String>,
    /// Check assertions on every Nth response (1 = all).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub check_every: u64,
    /// Do not fail the run (exit 0) on assertion failures or when fewer connections were established than asked.
    #[arg(long)]
    pub allow_failures: bool,
    /// Write the JSON report here (`-` for stdout).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write one JSON line per second while running (`-` for stdout).
    #[arg(long)]
    pub jsonl: Option<PathBuf>,
    /// No live progress line (it is only shown on a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// Write one line per response of the measured window here (tab-separated: intended send time, actual
    /// send time, latency, status, body bytes, connection; see the README). `loadgen log-chart` draws it.
    #[arg(long)]
    pub log_requests: Option<PathBuf>,
    /// Log every Nth response only.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..), requires = "log_requests")]
    pub log_every: u64,
    /// Log at most this many responses (held in memory until the run ends, about 40 bytes each).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..), requires = "log_requests")]
    pub log_max: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    Uniform,
    Poisson,
}

/// An open-loop rate in requests per second: steady (`start == end`) or a ramp from `start` to `end`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub start: f64,
    pub end: f64,
}

impl Rate {
    pub fn steady(rate: f64) -> Rate {
        Rate { start: rate, end: rate }
    }

    pub fn is_ramp(&self) -> bool {
        self.start != self.end
    }

    /// The rate `elapsed` into the measured window of a ramp taking `ramp` (before the window: `start`).
    pub fn at(&self, elapsed: f64, ramp: Option<Duration>) -> f64 {
        match ramp {
            Some(ramp) if !ramp.is_zero() => {
                let done = (elapsed / ramp.as_secs_f64()).clamp(0.0, 1.0);
                self.start + (self.end - self.start) * done
            }
            _ => self.end,
        }
    }

    /// The mean rate over a window of `window` seconds that starts with the ramp.
    pub fn mean(&self, window: f64, ramp: Option<Duration>) -> f64 {
        let ramp = ramp.map_or(0.0, |r| r.as_secs_f64()).min(window);
        if window <= 0.0 {
            return self.end;
        }
        ((self.start + self.end) / 2.0 * ramp + self.end * (window - ramp)) / window
    }

    /// Each of `threads` workers' share.
    pub fn split(&self, threads: usize) -> Rate {
        let n = threads.max(1) as f64;
        Rate { start: self.start / n, end: self.end / n }
    }
}

/// `20000` or `1000:20000` (requests per second, positive).
pub fn parse_rate(raw: &str) -> Result<Rate, String> {
    let number = |text: &str| -> Result<f64, String> {
        match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
            _ => Err(format!("invalid rate {raw:?}: a positive number of requests per second, or START:END")),
        }
    };
    match raw.split_once(':') {
        Some((start, end)) => Ok(Rate { start: number(start)?, end: number(end)? }),
        None => number(raw).map(Rate::steady),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineChoice {
    Auto,
    Uring,
    Epoll,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pick {
    Random,
    RoundRobin,
}

/// `10s`, `500ms`, `2m`, `1h`, `250us`; a bare number is seconds (as in wrk).
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let split = raw.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(raw.len());
    let (number, unit) = raw.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("invalid duration {raw:?} (e.g. 10s, 500ms, 2m)"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("invalid duration unit in {raw:?} (use us, ms, s, m or h)")),
    };
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(format!("invalid duration {raw:?}"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// `1`, `2-3`, `0,2,4-5` → CPU ids.
pub fn parse_cpus(raw: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("invalid CPU list {raw:?} (e.g. 1, 2-3, 0,2)");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    if cpus.is_empty() {
        return Err(format!("empty CPU list {raw:?}"));
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_wrk() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5x").is_err());
    }

    #[test]
    fn rates_and_ramps() {
        assert_eq!(parse_rate("200"), Ok(Rate::steady(200.0)));
        assert_eq!(parse_rate("100:1000"), Ok(Rate { start: 100.0, end: 1000.0 }));
        for bad in ["0", "-5", "x", "100:", ":5", "1:0", "nan"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        let ramp = Rate { start: 100.0, end: 1100.0 };
        let over = Some(Duration::from_secs(10));
        assert_eq!(ramp.at(-1.0, over), 100.0);
        assert_eq!(ramp.at(5.0, over), 600.0);
        assert_eq!(ramp.at(30.0, over), 1100.0);
        assert_eq!(ramp.mean(10.0, over), 600.0);
        assert_eq!(ramp.mean(20.0, over), 850.0);
        assert_eq!(Rate::steady(50.0).mean(7.0, None), 50.0);
        assert_eq!(ramp.split(2), Rate { start: 50.0, end: 550.0 });
    }

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpus("1"), Ok(vec![1]));
        assert_eq!(parse_cpus("0,2-3"), Ok(vec![0, 2, 3]));
        assert!(parse_cpus("3-1").is_err());
        assert!(parse_cpus("a").is_err());
    }
}
