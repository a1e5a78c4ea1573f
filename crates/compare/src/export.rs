//! `compare export --format bmf RUN.jsonl…`: runs' closed-loop figures in a format another tool reads, on
//! stdout. One format today, the Bencher Metric Format (BMF, bencher.dev/docs/reference/bencher-metric-format):
//!
//! ```text
//! { "hello-bare/rust": { "req_per_s": { "value": 98000.0, "lower_value": 97000.0, "upper_value": 99000.0 } } }
//! ```
//!
//! One benchmark per cell, keyed `workload/runtime`; one measure per metric (the slugs and units of
//! [`Metric`]: `cpu_us_per_resp`, `req_per_s`, `p99_ms`, `rss_peak_mib`), its value the median over the
//! cell's valid closed-loop rounds and its lower and upper values their min and max. The rounds are the ones
//! the report's medians read: each file judged by the cross-record rules and cut to each workload's headline
//! connection count and round trip, as `compare report` and `compare verdict` read it. A metric no round
//! measured is left out of its benchmark, and a cell with no valid closed-loop round is left out altogether
//! (said on stderr).
//!
//! Several files pool a cell's rounds, but only when every file measured that cell alike (the same
//! connections, database round trip, HTTP/2 streams and number of server cores); otherwise the export is
//! refused, naming the cell, the setting and the two files. Refused rather than keyed apart
//! (`hello-bare/rust@c256`): Bencher keeps one history per benchmark name and flags a change against it, so a
//! name must mean the same thing in every export. A suffix that appears only when the files passed happen to
//! differ would rename a cell from one export to the next, and pooling would blend unlike figures into one
//! value. Files measured differently are exported one at a time (or to different Bencher testbeds).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::records::{Kind, Record, ordered, read_jsonl};
use crate::report::cross_record::judged;
use crate::report::sweep::headline;
use crate::stats::spread;
use crate::system::cores::Cores;
use crate::verdict::Metric;

/// What `compare export` can write. An enum with one value today so that another format is one more variant;
/// `--format` has no default, so a script that names bmf keeps getting bmf when others exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Bencher Metric Format: {"workload/runtime": {"measure": {"value", "lower_value", "upper_value"}}}
    Bmf,
}

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// The format written to stdout.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Record files written by compare. With several, a cell's rounds are pooled across the files (its
    /// median, min and max are over all of them); a cell measured with different settings in two files
    /// (connections, --db-rtt, HTTP/2 streams, server cores) is refused, not pooled.
    #[arg(required = true, value_name = "RUN.jsonl")]
    pub files: Vec<PathBuf>,
}

/// The measures every benchmark may carry, in the units their names say ([`Metric::value`] converts).
const MEASURES: [Metric; 4] = [Metric::CpuUsPerResp, Metric::ReqPerS, Metric::P99Ms, Metric::RssPeakMib];

/// One measure of one benchmark, as BMF spells it: the median, and the min and max around it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BmfMetric {
    pub value: f64,
    pub lower_value: f64,
    pub upper_value: f64,
}

/// One benchmark's measures, by slug; sorted maps, so the same records always print the same bytes.
pub type BmfBenchmark = BTreeMap<&'static str, BmfMetric>;

/// `compare export`: 0 with the JSON on stdout; 1 when a file cannot be read, two files measured a cell
/// differently, or nothing was measured (bad flags are clap's, 64 like every subcommand).
pub fn command(args: &ExportArgs) -> ExitCode {
    match export(args) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("compare export: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn export(args: &ExportArgs) -> anyhow::Result<String> {
    let records = pooled(&args.files)?;
    let mut out: BTreeMap<String, BmfBenchmark> = BTreeMap::new();
    for (name, benchmark) in benchmarks(&records) {
        if benchmark.is_empty() {
            eprintln!("compare export: {name} left out: no valid closed-loop run");
        } else {
            out.insert(name, benchmark);
        }
    }
    if out.is_empty() {
        let files: Vec<String> = args.files.iter().map(|f| f.display().to_string()).collect();
        bail!("no valid closed-loop run in {}: nothing to export", files.join(", "));
    }
    match args.format {
        // Pretty, as `compare verdict --json` and `compare claims --json` print: a few dozen benchmarks, read
        // and diffed by people as often as parsed, and Bencher's json adapter reads either.
        ExportFormat::Bmf => serde_json::to_string_pretty(&out).context("writing the BMF JSON"),
    }
}

/// Every file's records as the report reads one run (judged, cut to each workload's headline count and round
/// trip), concatenated; refused when two files measured a cell with different settings.
fn pooled(files: &[PathBuf]) -> anyhow::Result<Vec<Record>> {
    let mut first_seen: BTreeMap<String, (Settings, &Path)> = BTreeMap::new();
    let mut all = Vec::new();
    for file in files {
        let selected = headline(&judged(&read_jsonl(std::slice::from_ref(file))?));
        for r in selected.iter().filter(|r| counts(r)) {
            let settings = Settings::of(r);
            let (seen, seen_in) = first_seen.entry(benchmark_name(r)).or_insert((settings.clone(), file.as_path()));
            if let Some(why) = seen.differs(&settings) {
                bail!(
                    "{}: {why} in {} but {} in {}: measured differently, so not pooled; export them separately",
                    benchmark_name(r),
                    seen_in.display(),
                    why.other,
                    file.display()
                );
            }
        }
        all.extend(selected);
    }
    Ok(all)
}

/// A record the medians read: a valid closed-loop run.
fn counts(r: &Record) -> bool {
    r.kind == Kind::Closed && !r.void
}

/// `workload/runtime`: a cell's benchmark name.
fn benchmark_name(r: &Record) -> String {
    format!("{}/{}", r.workload, r.runtime)
}

/// Every cell of the records, in the order first recorded, with its measures (empty when no valid closed-loop
/// round measured any).
pub fn benchmarks(records: &[Record]) -> Vec<(String, BmfBenchmark)> {
    ordered(records.iter().map(|r| r.workload.as_str()))
        .into_iter()
        .flat_map(|w| {
            let of_workload: Vec<&Record> = records.iter().filter(|r| r.workload == w).collect();
            ordered(of_workload.iter().map(|r| r.runtime.as_str())).into_iter().map(move |rt| {
                let rounds: Vec<&Record> =
                    records.iter().filter(|r| r.workload == w && r.runtime == rt && counts(r)).collect();
                (format!("{w}/{rt}"), measures(&rounds))
            })
        })
        .collect()
}

/// One cell's measures over its rounds: each metric's median, min and max, where any round measured it.
fn measures(rounds: &[&Record]) -> BmfBenchmark {
    MEASURES
        .into_iter()
        .filter_map(|m| {
            let s = spread(rounds.iter().filter_map(|r| m.value()(r)))?;
            Some((m.name(), BmfMetric { value: s.median, lower_value: s.min, upper_value: s.max }))
        })
        .collect()
}

/// What a closed-loop run was measured with beyond its workload and runtime: runs that differ in one of these
/// measured different things, each as its label and value.
#[derive(Debug, Clone, PartialEq)]
struct Settings([(&'static str, String); 4]);

/// The first setting two runs differ in: its label and value in the first, and its value in the other.
#[derive(Debug)]
struct Difference {
    label: &'static str,
    first: String,
    other: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.label, self.first)
    }
}

impl Settings {
    fn of(r: &Record) -> Settings {
        let or_none = |v: Option<String>| v.unwrap_or_else(|| "none".into());
        let cores = &r.layout.server_cores;
        Settings([
            ("connections", or_none(r.connections.map(|c| c.to_string()))),
            ("database round trip", or_none(r.db_rtt_ms.map(|ms| format!("{ms} ms")))),
            ("HTTP/2 streams per connection", or_none(r.http2.as_ref().map(|h| h.streams.to_string()))),
            ("server cores", Cores::parse(cores).map_or_else(|_| cores.clone(), |c| c.count().to_string())),
        ])
    }

    fn differs(&self, other: &Settings) -> Option<Difference> {
        self.0.iter().zip(&other.0).find(|(a, b)| a != b).map(|((label, first), (_, other))| Difference {
            label,
            first: first.clone(),
            other: other.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{LatencyUs, test_record};

    /// A valid closed-loop round of hello-bare on `runtime`: req/s, CPU-µs per response, p99 in µs and peak
    /// RSS in KiB as a record holds them.
    fn round(runtime: &str, n: u32, req_per_s: f64, cpu_us: f64, p99_us: u64, rss_kib: Option<u64>) -> Record {
        let mut r = test_record("hello-bare", runtime, Kind::Closed, n);
        r.connections = Some(100);
        r.req_per_s = Some(req_per_s);
        r.server_cpu_us_per_resp = Some(cpu_us);
        r.latency_us = Some(LatencyUs { p50: 100, p95: None, p99: p99_us, p999: p99_us, max: p99_us });
        r.rss_peak_kib = rss_kib;
        r
    }

    #[test]
    fn values_are_medians_between_the_min_and_max_in_the_slugs_units() {
        let mut void = round("rust", 4, 1.0, 1.0, 1, Some(1));
        void.void_because("a socket error");
        let records = [
            round("rust", 1, 300.0, 12.0, 2500, Some(20 * 1024)),
            round("rust", 2, 100.0, 10.0, 1500, Some(10 * 1024)),
            round("rust", 3, 200.0, 14.0, 3500, Some(30 * 1024)),
            void,
        ];
        let all = benchmarks(&records);
        assert_eq!(all.len(), 1);
        let (name, m) = &all[0];
        assert_eq!(name, "hello-bare/rust");
        let metric = |value, lower_value, upper_value| BmfMetric { value, lower_value, upper_value };
        assert_eq!(m["req_per_s"], metric(200.0, 100.0, 300.0), "the void round is not read");
        assert_eq!(m["cpu_us_per_resp"], metric(12.0, 10.0, 14.0));
        assert_eq!(m["p99_ms"], metric(2.5, 1.5, 3.5), "µs to ms");
        assert_eq!(m["rss_peak_mib"], metric(20.0, 10.0, 30.0), "KiB to MiB");
    }

    #[test]
    fn a_metric_no_round_measured_is_left_out_and_a_void_cell_is_empty() {
        let mut void = round("bun", 1, 50.0, 5.0, 900, None);
        void.void_because("a non-2xx");
        let records = [round("rust", 1, 100.0, 10.0, 1000, None), round("rust", 2, 110.0, 11.0, 3000, None), void];
        let all: BTreeMap<String, BmfBenchmark> = benchmarks(&records).into_iter().collect();
        let rust = &all["hello-bare/rust"];
        assert_eq!(rust.keys().copied().collect::<Vec<_>>(), ["cpu_us_per_resp", "p99_ms", "req_per_s"]);
        assert_eq!(rust["p99_ms"].value, 2.0, "the mean of the two middle rounds");
        assert!(all["hello-bare/bun"].is_empty());
    }

    #[test]
    fn settings_name_the_first_difference() {
        let a = round("rust", 1, 100.0, 10.0, 1000, None);
        let mut b = a.clone();
        assert!(Settings::of(&a).differs(&Settings::of(&b)).is_none());
        b.layout.server_cores = "2".into();
        assert!(Settings::of(&a).differs(&Settings::of(&b)).is_none(), "one core either way");
        b.connections = Some(256);
        b.db_rtt_ms = Some(10.0);
        let d = Settings::of(&a).differs(&Settings::of(&b)).expect("differs");
        assert_eq!((d.to_string(), d.other), ("connections 100".to_string(), "256".to_string()));
        b.connections = a.connections;
        let d = Settings::of(&a).differs(&Settings::of(&b)).expect("differs");
        assert_eq!((d.to_string(), d.other), ("database round trip none".to_string(), "10 ms".to_string()));
        b.db_rtt_ms = None;
        b.layout.server_cores = "0-3".into();
        assert_eq!(Settings::of(&a).differs(&Settings::of(&b)).expect("differs").other, "4");
    }
}
