//! h2load (nghttp2's load generator, Debian's nghttp2-client), the reference compare calibrates loadgen's
//! HTTP/2 against: run pinned with the same threads, connections, streams per connection (`-m`), duration and
//! request headers as loadgen, and its text report read back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::calibrate::external;
use crate::calibrate::wrk::parse_wrk_time_us;

/// The install step every "h2load not found" names.
pub const H2LOAD_HINT: &str =
    "run `bash scripts/install-test-deps.sh` (it installs nghttp2-client), or `apt-get install nghttp2-client`";

/// What we use of h2load's report.
#[derive(Debug, Clone, PartialEq)]
pub struct H2loadOutput {
    /// "finished in 5.00s, …": the measured window.
    pub duration_s: f64,
    /// "…, 259823.40 req/s, …".
    pub req_per_s: f64,
    /// "requests: … N succeeded, N failed, N errored, N timeout".
    pub succeeded: u64,
    pub failed: u64,
    pub errored: u64,
    pub timeout: u64,
    /// "status codes: N 2xx, N 3xx, N 4xx, N 5xx": the responses outside 2xx.
    pub non_2xx: u64,
    /// "Application protocol: h2c"; None when h2load printed none (nothing was negotiated).
    pub protocol: Option<String>,
    /// "time for request:" mean, µs (h2load prints no percentiles).
    pub mean_us: f64,
}

/// The `N word` pairs of a comma list ("1299117 total, 1299373 started, …"), as (word, N).
fn counts(list: &str, line: &str) -> anyhow::Result<Vec<(String, u64)>> {
    list.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (n, word) = pair.split_once(' ').with_context(|| format!("h2load: bad count {pair:?} in {line:?}"))?;
            let n: u64 = n.parse().with_context(|| format!("h2load: bad count {pair:?} in {line:?}"))?;
            Ok((word.trim().to_string(), n))
        })
        .collect()
}

/// Parses h2load's report; an error names the line it lacks.
pub fn parse_h2load(text: &str) -> anyhow::Result<H2loadOutput> {
    let mut finished = None;
    let mut requests = None;
    let mut non_2xx = None;
    let mut protocol = None;
    let mut mean_us = None;
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("finished in ") {
            // "finished in 5.00s, 259823.40 req/s, 8.43MB/s"
            let parts: Vec<&str> = rest.split(", ").collect();
            let [dur, rate, ..] = parts.as_slice() else { bail!("h2load: bad line {line:?}") };
            let dur = parse_wrk_time_us(dur).with_context(|| format!("h2load: bad duration in {line:?}"))?;
            let rate: f64 = rate
                .strip_suffix(" req/s")
                .and_then(|r| r.parse().ok())
                .with_context(|| format!("h2load: bad rate in {line:?}"))?;
            finished = Some((dur / 1e6, rate));
        } else if let Some(rest) = line.strip_prefix("requests:") {
            requests = Some(counts(rest, line)?);
        } else if let Some(rest) = line.strip_prefix("status codes:") {
            let by_class = counts(rest, line)?;
            non_2xx = Some(by_class.iter().filter(|(class, _)| class != "2xx").map(|(_, n)| n).sum::<u64>());
        } else if let Some(rest) = line.strip_prefix("Application protocol:") {
            protocol = Some(rest.trim().to_string());
        } else if let Some(rest) = line.strip_prefix("time for request:") {
            // min, max, mean, sd, +/- sd
            let mean = rest.split_whitespace().nth(2).with_context(|| format!("h2load: bad line {line:?}"))?;
            mean_us = Some(parse_wrk_time_us(mean).with_context(|| format!("h2load: bad mean in {line:?}"))?);
        }
    }
    let missing = |what: &str| anyhow::anyhow!("h2load's output lacks {what}");
    let (duration_s, req_per_s) = finished.ok_or_else(|| missing("the \"finished in\" line"))?;
    let requests = requests.ok_or_else(|| missing("the \"requests:\" line"))?;
    let count = |word: &str| {
        requests
            .iter()
            .find(|(w, _)| w == word)
            .map(|(_, n)| *n)
            .ok_or_else(|| missing(&format!("\"{word}\" requests")))
    };
    Ok(H2loadOutput {
        duration_s,
        req_per_s,
        succeeded: count("succeeded")?,
        failed: count("failed")?,
        errored: count("errored")?,
        timeout: count("timeout")?,
        non_2xx: non_2xx.ok_or_else(|| missing("the \"status codes:\" line"))?,
        protocol,
        mean_us: mean_us.ok_or_else(|| missing("the \"time for request:\" line"))?,
    })
}

/// h2load's path, found on PATH.
pub fn find() -> Option<PathBuf> {
    external::find("h2load")
}

/// One h2load process and what came of it.
pub type Run = external::Run<H2loadOutput>;

/// What an h2load run is asked for: the same as the loadgen run it is compared with.
#[derive(Debug, Clone)]
pub struct Load {
    /// `taskset -c` list h2load runs on.
    pub cores: String,
    pub threads: usize,
    pub connections: u32,
    /// Concurrent streams per connection (`-m`, loadgen's `--streams`).
    pub streams: u32,
    /// Request headers beyond the pseudo-headers, `Name: value`: h2load's own user-agent is replaced by the
    /// one given here, so both loaders send the same header block.
    pub headers: Vec<String>,
    pub url: String,
}

/// Runs h2load once for `duration` (whole seconds, `-D`), its output in `logdir/<tag>.out|.err`.
pub fn run(h2load: &Path, load: &Load, duration: Duration, logdir: &Path, tag: &str) -> anyhow::Result<Run> {
    let mut args: Vec<String> = vec![
        "-t".into(),
        load.threads.to_string(),
        "-c".into(),
        load.connections.to_string(),
        "-m".into(),
        load.streams.to_string(),
        "-D".into(),
        duration.as_secs().to_string(),
    ];
    for h in &load.headers {
        args.extend(["-H".to_string(), h.clone()]);
    }
    args.push(load.url.clone());
    external::run((h2load, &load.cores, args), duration, (logdir, tag), parse_h2load)
}

/// Why an h2load run does not count; empty when it does: `expected` is the protocol it must report (h2 over
/// TLS, h2c in cleartext).
pub fn problems(run: &Run, warmup: bool, expected: &str) -> Vec<String> {
    let mut reasons = run.process_problems("h2load");
    if let Ok(o) = &run.output {
        if o.protocol.as_deref() != Some(expected) {
            reasons
                .push(format!("h2load spoke {} instead of {expected}", o.protocol.as_deref().unwrap_or("no protocol")));
        }
        if o.failed + o.errored + o.timeout > 0 {
            reasons.push(format!("requests failed {}, errored {}, timed out {}", o.failed, o.errored, o.timeout));
        }
        if o.non_2xx > 0 {
            reasons.push(format!("{} responses outside 2xx", o.non_2xx));
        }
        if !warmup && o.succeeded == 0 {
            reasons.push("no response completed".to_string());
        }
    }
    reasons
}
