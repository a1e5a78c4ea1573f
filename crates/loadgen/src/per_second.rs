//! The run's seconds as they pass: `--jsonl` lines and the terminal's progress line, from the workers'
//! once-a-second ticks. A second is written once every worker has sent its tick for it, so a line always
//! covers the whole loader.
//!
//! A line: `second` (1 is the first second of the measured window), `target_rps` (open loop: the schedule's
//! rate in the middle of that second, which a ramp moves; null in closed loop), `scheduled` (open loop: sends
//! the schedule called for in it), `responses`, `errors`, and the second's latency `p50_us`, `p99_us`,
//! `p99_9_us`, `max_us` (from the intended send time in open loop).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::mpsc;

use hdrhistogram::Histogram;

use crate::settings::RunSettings;
use crate::stats;
use crate::worker::Tick;

/// One second of the run, as the workers' ticks add up.
struct Second {
    workers: usize,
    responses: u64,
    errors: u64,
    scheduled: u64,
    latency: Histogram<u64>,
}

impl Second {
    fn new() -> Second {
        Second { workers: 0, responses: 0, errors: 0, scheduled: 0, latency: stats::new_histogram() }
    }

    fn add(&mut self, tick: &Tick) {
        self.workers += 1;
        self.responses += tick.responses;
        self.errors += tick.errors;
        self.scheduled += tick.scheduled;
        let _ = self.latency.add(&tick.latency);
    }

    fn quantile(&self, q: f64) -> u64 {
        if self.latency.is_empty() { 0 } else { self.latency.value_at_quantile(q) }
    }
}

/// The progress line is drawn only where someone watches it.
fn progress(settings: &RunSettings) -> bool {
    settings.output.progress && std::io::stderr().is_terminal()
}

/// Whether the workers need to send ticks at all: for `--jsonl` or the progress line.
pub fn wanted(settings: &RunSettings) -> bool {
    settings.output.jsonl.is_some() || progress(settings)
}

/// The `--jsonl` file cannot be created. The message is one line for the user and quotes the I/O error, so
/// that is not also a `source` (a chain printer would say it twice).
#[derive(Debug, thiserror::Error)]
#[error("cannot write --jsonl {}: {error}", path.display())]
pub struct JsonlError {
    pub path: PathBuf,
    pub error: std::io::Error,
}

/// Writes a line per second until every worker has hung up; `threads` workers tick each second. Err: the
/// `--jsonl` file cannot be written.
pub fn follow(settings: &RunSettings, ticks: mpsc::Receiver<Tick>, threads: usize) -> Result<(), JsonlError> {
    let mut jsonl: Option<Box<dyn Write>> = match &settings.output.jsonl {
        Some(path) if path.as_os_str() == "-" => Some(Box::new(std::io::stdout())),
        Some(path) => {
            Some(Box::new(std::fs::File::create(path).map_err(|error| JsonlError { path: path.clone(), error })?))
        }
        None => None,
    };
    let progress = progress(settings);
    let mut pending: BTreeMap<u64, Second> = BTreeMap::new();
    for tick in ticks {
        let entry = pending.entry(tick.second).or_insert_with(Second::new);
        entry.add(&tick);
        if entry.workers < threads {
            continue;
        }
        let Some((second, s)) = pending.pop_first() else { continue };
        let target = settings.rate.map(|r| r.at(second as f64 - 0.5, settings.ramp));
        if let Some(out) = jsonl.as_mut() {
            let line = serde_json::json!({
                "second": second,
                "target_rps": target,
                "scheduled": settings.rate.map(|_| s.scheduled),
                "responses": s.responses,
                "errors": s.errors,
                "p50_us": s.quantile(0.5), "p99_us": s.quantile(0.99), "p99_9_us": s.quantile(0.999),
                "max_us": if s.latency.is_empty() { 0 } else { s.latency.max() },
            });
            let _ = writeln!(out, "{line}");
        }
        if progress {
            let asked = target.map_or(String::new(), |t| format!(" of {t:.0}"));
            let p99 = s.quantile(0.99);
            eprint!("\r[{second:>4}s] {:>9}{asked} req/s  {} errors  p99 {p99} us   ", s.responses, s.errors);
        }
    }
    if progress {
        eprintln!();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwritable_jsonl_file_is_named_with_its_error() {
        let error = std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = JsonlError { path: "/nonexistent/run.jsonl".into(), error };
        assert_eq!(e.to_string(), "cannot write --jsonl /nonexistent/run.jsonl: entity not found");
    }
}
