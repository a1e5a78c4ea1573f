//! wrk, the load generator compare calibrates loadgen against: finding it, running it pinned with the same
//! threads, connections, duration and request timeout as loadgen, and reading its text report (with
//! `--latency`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::calibrate::external;

/// The install step every "wrk not found" names.
pub const WRK_HINT: &str = "run `bash bench/setup.sh` (it installs wrk), or `apt-get install wrk`";

/// wrk's socket error counters (printed only when one is non-zero).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketErrors {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
}

impl SocketErrors {
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout
    }
}

/// What we use of wrk's output (with `--latency`).
#[derive(Debug, Clone, PartialEq)]
pub struct WrkOutput {
    /// "N requests in …": completed responses.
    pub requests: u64,
    /// The run's length as wrk measured it.
    pub duration_s: f64,
    /// "Requests/sec:".
    pub req_per_s: f64,
    /// The thread stats' average latency.
    pub latency_avg_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub socket_errors: SocketErrors,
    /// "Non-2xx or 3xx responses:" (wrk cannot tell 3xx from 2xx; the hello servers never redirect).
    pub non_2xx_3xx: u64,
}

/// A wrk time (`477.00us`, `2.34ms`, `2.00s`, `1.00m`, `1.00h`) in µs.
pub fn parse_wrk_time_us(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = text.split_at(split);
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    let value: f64 = num.parse().ok()?;
    value.is_finite().then_some(value * scale)
}

/// Parses wrk's report; an error names the line it lacks.
pub fn parse_wrk(text: &str) -> anyhow::Result<WrkOutput> {
    let mut requests = None;
    let mut req_per_s = None;
    let mut latency_avg_us = None;
    let mut p50_us = None;
    let mut p99_us = None;
    let mut socket_errors = SocketErrors::default();
    let mut non_2xx_3xx = 0;
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            // "278416 requests in 2.00s, 27.35MB read"
            [n, "requests", "in", dur, ..] => {
                let n: u64 = n.parse().with_context(|| format!("wrk: bad request count in {line:?}"))?;
                let dur = parse_wrk_time_us(dur.trim_end_matches(','))
                    .with_context(|| format!("wrk: bad duration in {line:?}"))?;
                requests = Some((n, dur / 1e6));
            }
            ["Requests/sec:", v] => {
                req_per_s = Some(v.parse::<f64>().with_context(|| format!("wrk: bad rate in {line:?}"))?);
            }
            ["Latency", avg, ..] if *avg != "Distribution" => latency_avg_us = parse_wrk_time_us(avg),
            ["50%", v] => p50_us = parse_wrk_time_us(v),
            ["99%", v] => p99_us = parse_wrk_time_us(v),
            ["Socket", "errors:", rest @ ..] => {
                // "connect 0, read 10, write 0, timeout 0"
                for pair in rest.chunks(2) {
                    let [kind, n] = pair else { bail!("wrk: bad socket error line {line:?}") };
                    let n: u64 =
                        n.trim_end_matches(',').parse().with_context(|| format!("wrk: bad count in {line:?}"))?;
                    match *kind {
                        "connect" => socket_errors.connect = n,
                        "read" => socket_errors.read = n,
                        "write" => socket_errors.write = n,
                        "timeout" => socket_errors.timeout = n,
                        other => bail!("wrk: unknown socket error kind {other:?} in {line:?}"),
                    }
                }
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => {
                non_2xx_3xx = n.parse().with_context(|| format!("wrk: bad count in {line:?}"))?;
            }
            _ => {}
        }
    }
    let missing = |what: &str| anyhow::anyhow!("wrk's output lacks {what}");
    let (requests, duration_s) = requests.ok_or_else(|| missing("the \"N requests in T\" line"))?;
    Ok(WrkOutput {
        requests,
        duration_s,
        req_per_s: req_per_s.ok_or_else(|| missing("\"Requests/sec:\""))?,
        latency_avg_us: latency_avg_us.ok_or_else(|| missing("the Latency thread stats"))?,
        p50_us: p50_us.ok_or_else(|| missing("the 50% percentile (was --latency given?)"))?,
        p99_us: p99_us.ok_or_else(|| missing("the 99% percentile (was --latency given?)"))?,
        socket_errors,
        non_2xx_3xx,
    })
}

/// wrk's path, found on PATH.
pub fn find() -> Option<PathBuf> {
    external::find("wrk")
}

/// One wrk process and what came of it.
pub type Run = external::Run<WrkOutput>;

/// What a wrk run is asked for: the same as the loadgen run it is compared with.
#[derive(Debug, Clone)]
pub struct Load {
    /// `taskset -c` list wrk runs on.
    pub cores: String,
    pub threads: usize,
    pub connections: u32,
    /// Per request, as loadgen's, so neither gives up on a slow answer sooner.
    pub timeout: Duration,
    pub url: String,
}

/// Runs wrk once for `duration` (whole seconds), its output in `logdir/<tag>.out|.err`.
pub fn run(wrk: &Path, load: &Load, duration: Duration, logdir: &Path, tag: &str) -> anyhow::Result<Run> {
    let args: Vec<String> = vec![
        "-t".into(),
        load.threads.to_string(),
        "-c".into(),
        load.connections.to_string(),
        "-d".into(),
        format!("{}s", duration.as_secs()),
        "--timeout".into(),
        format!("{}s", load.timeout.as_secs()),
        "--latency".into(),
        load.url.clone(),
    ];
    external::run((wrk, &load.cores, args), duration, (logdir, tag), parse_wrk)
}

/// Why a wrk run does not count; empty when it does.
pub fn problems(run: &Run, warmup: bool) -> Vec<String> {
    let mut reasons = run.process_problems("wrk");
    if let Ok(o) = &run.output {
        if o.non_2xx_3xx > 0 {
            reasons.push(format!("{} non-2xx/3xx responses", o.non_2xx_3xx));
        }
        let e = o.socket_errors;
        if e.total() > 0 {
            reasons.push(format!(
                "socket errors: connect {}, read {}, write {}, timeout {}",
                e.connect, e.read, e.write, e.timeout
            ));
        }
        if !warmup && o.requests == 0 {
            reasons.push("no response completed".to_string());
        }
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_times_in_every_unit_it_prints() {
        assert_eq!(parse_wrk_time_us("477.00us"), Some(477.0));
        assert_eq!(parse_wrk_time_us("2.34ms"), Some(2340.0));
        assert_eq!(parse_wrk_time_us("2.00s"), Some(2e6));
        assert_eq!(parse_wrk_time_us("1.50m"), Some(90e6));
        assert_eq!(parse_wrk_time_us("-nan%"), None);
        assert_eq!(parse_wrk_time_us("12"), None);
    }
}
