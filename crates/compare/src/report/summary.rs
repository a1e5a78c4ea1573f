//! One workload's cells summarized from its records: each runtime's closed-loop medians and spreads, its
//! open-loop tail, and the bars of the workload's chart.

use crate::records::{Kind, Record, ordered};
use crate::report::charts;
use crate::stats::{Spread, spread};

/// One runtime in one workload, summarized.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSummary {
    pub runtime: String,
    pub version: Option<String>,
    /// The cell's check voided it: nothing else was measured.
    pub void_cell: Option<String>,
    pub req_per_s: Option<Spread>,
    pub cpu_us_per_resp: Option<Spread>,
    pub p95_us: Option<Spread>,
    pub p99_us: Option<Spread>,
    pub rss_idle_kib: Option<Spread>,
    pub rss_after_kib: Option<Spread>,
    pub rss_peak_kib: Option<Spread>,
    pub startup_ms: Option<Spread>,
    pub loader_bound: bool,
    pub contended: bool,
    pub closed_valid: usize,
    pub closed_total: usize,
    pub open: Option<OpenSummary>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OpenSummary {
    pub rate: Option<f64>,
    pub achieved: Option<Spread>,
    pub p50_us: Option<Spread>,
    pub p95_us: Option<Spread>,
    pub p99_us: Option<Spread>,
    pub p999_us: Option<Spread>,
    pub max_us: Option<Spread>,
    pub valid: usize,
    pub total: usize,
}

/// Workloads in the order first recorded.
pub fn workloads(records: &[Record]) -> Vec<String> {
    ordered(records.iter().map(|r| r.workload.as_str()))
}

pub fn summarize(records: &[Record], workload: &str) -> Vec<CellSummary> {
    let mine: Vec<&Record> = records.iter().filter(|r| r.workload == workload).collect();
    let runtimes = ordered(mine.iter().map(|r| r.runtime.as_str()));
    runtimes
        .into_iter()
        .map(|rt| {
            let of = |k: Kind| mine.iter().filter(|r| r.runtime == rt && r.kind == k).copied().collect::<Vec<_>>();
            let checks = of(Kind::Check);
            let void_cell = checks.iter().rev().find(|c| c.void).map(|c| c.void_reason.clone().unwrap_or_default());
            let closed = of(Kind::Closed);
            let ok: Vec<&Record> = closed.iter().filter(|r| !r.void).copied().collect();
            let startups = of(Kind::Startup);
            let open = of(Kind::Open);
            let open_ok: Vec<&Record> = open.iter().filter(|r| !r.void).copied().collect();
            let version = mine.iter().filter(|r| r.runtime == rt).find_map(|r| r.runtime_version.clone());
            let majority =
                |f: &dyn Fn(&Record) -> bool| !ok.is_empty() && ok.iter().filter(|r| f(r)).count() * 2 > ok.len();
            let rss_idle = spread(ok.iter().filter_map(|r| r.rss_idle_kib).map(|v| v as f64))
                .or_else(|| spread(checks.iter().filter_map(|r| r.rss_idle_kib).map(|v| v as f64)));
            CellSummary {
                version,
                void_cell,
                req_per_s: spread(ok.iter().filter_map(|r| r.req_per_s)),
                cpu_us_per_resp: spread(ok.iter().filter_map(|r| r.server_cpu_us_per_resp)),
                p95_us: spread(ok.iter().filter_map(|r| r.latency_us.and_then(|l| l.p95)).map(|v| v as f64)),
                p99_us: spread(ok.iter().filter_map(|r| r.latency_us.map(|l| l.p99 as f64))),
                rss_idle_kib: rss_idle,
                rss_after_kib: spread(ok.iter().filter_map(|r| r.rss_after_kib).map(|v| v as f64)),
                rss_peak_kib: spread(ok.iter().filter_map(|r| r.rss_peak_kib).map(|v| v as f64)),
                startup_ms: spread(startups.iter().filter(|r| !r.void).filter_map(|r| r.startup_ms)),
                loader_bound: majority(&|r| r.loader_bound == Some(true)),
                contended: majority(&|r| r.server_other_pct.is_some_and(|o| o >= 10.0)),
                closed_valid: ok.len(),
                closed_total: closed.len(),
                open: (!open.is_empty()).then(|| OpenSummary {
                    rate: open.iter().find_map(|r| r.rate),
                    achieved: spread(open_ok.iter().filter_map(|r| r.rate_achieved)),
                    p50_us: spread(open_ok.iter().filter_map(|r| r.latency_us.map(|l| l.p50 as f64))),
                    p95_us: spread(open_ok.iter().filter_map(|r| r.latency_us.and_then(|l| l.p95)).map(|v| v as f64)),
                    p99_us: spread(open_ok.iter().filter_map(|r| r.latency_us.map(|l| l.p99 as f64))),
                    p999_us: spread(open_ok.iter().filter_map(|r| r.latency_us.map(|l| l.p999 as f64))),
                    max_us: spread(open_ok.iter().filter_map(|r| r.latency_us.map(|l| l.max as f64))),
                    valid: open_ok.len(),
                    total: open.len(),
                }),
                runtime: rt,
            }
        })
        .collect()
}

/// A closed-loop record's req/s.
pub fn rps(r: &Record) -> Option<f64> {
    r.req_per_s
}

/// A closed-loop record's server CPU-µs per response.
pub fn cpu(r: &Record) -> Option<f64> {
    r.server_cpu_us_per_resp
}

/// The charts' bars for one workload: runtimes with valid closed runs.
pub fn bars(summary: &[CellSummary]) -> Vec<charts::Bar> {
    summary
        .iter()
        .filter_map(|c| {
            let r = c.req_per_s?;
            Some(charts::Bar {
                runtime: c.runtime.clone(),
                req_per_s: r.median,
                req_per_s_min: r.min,
                req_per_s_max: r.max,
                cpu_us_per_resp: c.cpu_us_per_resp.map(|s| s.median),
                lower_bound: false,
            })
        })
        .collect()
}
