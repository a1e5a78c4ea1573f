//! A connections sweep (`--connections 16,64,256,512,1024`): per workload, how each runtime's req/s, CPU per
//! response and latency move as the connections held grow, closed loop (the ceiling at each count) and open
//! loop at one rate for every count (latency at a given load, which is what an SLO's p99.9 is about; at
//! saturation latency only measures the queue the connection count allows).
//!
//! The rest of the report reads one count per workload, its headline (the count nearest the workload's own,
//! [`Workload::headline_connections`]): [`headline`] cuts the other counts' runs out for it, and this section
//! shows them all.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::format::{fmt_median, fmt_spread, num};
use crate::plan::workloads::Workload;
use crate::records::{Kind, Record, ordered};
use crate::reference;
use crate::report::charts::{self, LadderPoint};
use crate::report::posts_pair::{self, Condition};
use crate::stats::{Spread, spread};
use crate::table::Table;
use crate::verdict::Metric;

fn swept(r: &Record) -> bool {
    matches!(r.kind, Kind::Closed | Kind::Open)
}

/// A run's database round trip (`--db-rtt`) as a key: µs, `None` straight to the databases (first in order).
pub fn rtt_key(r: &Record) -> Option<u64> {
    r.db_rtt_ms.map(|ms| (ms * 1e3).round() as u64)
}

/// The round trip that stands for `w` in every table but the round-trip section: the least recorded (straight
/// to the databases when recorded), `None` also when `w` has no rounds.
pub fn headline_rtt(records: &[Record], w: &str) -> Option<u64> {
    records.iter().filter(|r| r.workload == w && swept(r)).map(rtt_key).min().flatten()
}

/// `w`'s records at its headline round trip (every other workload's untouched).
fn at_headline_rtt(records: &[Record], w: &str) -> Vec<Record> {
    let rtt = headline_rtt(records, w);
    records.iter().filter(|r| r.workload != w || !swept(r) || rtt_key(r) == rtt).cloned().collect()
}

/// The distinct connection counts of `w`'s closed- and open-loop runs at its headline round trip, ascending:
/// more than one is a sweep.
pub fn counts(records: &[Record], w: &str) -> Vec<u32> {
    let rtt = headline_rtt(records, w);
    let records: Vec<&Record> = records.iter().filter(|r| rtt_key(r) == rtt).collect();
    let mut counts: Vec<u32> =
        records.iter().filter(|r| r.workload == w && swept(r)).filter_map(|r| r.connections).collect();
    counts.sort_unstable();
    counts.dedup();
    counts
}

/// The count that stands for swept workload `w` in the rest of the report: the one the run used for its
/// checks and capacity searches (the first recorded when the workload is not one compare knows).
pub fn headline_count(records: &[Record], w: &str) -> Option<u32> {
    let counts = counts(records, w);
    match Workload::parse(w) {
        Some(workload) if !counts.is_empty() => Some(workload.headline_connections(&counts)),
        _ => counts.first().copied(),
    }
}

/// The records with every workload's closed- and open-loop runs cut to its headline count and round trip.
pub fn headline(records: &[Record]) -> Vec<Record> {
    // Per workload: its headline round trip, and its headline count when it swept counts (at that round trip).
    let keep: Vec<(String, Option<u64>, Option<u32>)> = ordered(records.iter().map(|r| r.workload.as_str()))
        .into_iter()
        .map(|w| {
            let count = (counts(records, &w).len() > 1).then(|| headline_count(records, &w)).flatten();
            (w.clone(), headline_rtt(records, &w), count)
        })
        .collect();
    records
        .iter()
        .filter(|r| {
            !swept(r)
                || keep.iter().all(|(w, rtt, count)| {
                    *w != r.workload || (rtt_key(r) == *rtt && count.is_none_or(|c| r.connections == Some(c)))
                })
        })
        .cloned()
        .collect()
}

/// `w`'s runs of `kind` at `connections`.
fn at(records: &[Record], w: &str, kind: Kind, connections: u32) -> Vec<Record> {
    records
        .iter()
        .filter(|r| r.workload == w && r.kind == kind && r.connections == Some(connections))
        .cloned()
        .collect()
}

/// One runtime at one count: the medians the tables and charts show.
struct Point {
    req_per_s: Option<Spread>,
    cpu_us_per_resp: Option<Spread>,
    achieved: Option<Spread>,
    p50_us: Option<Spread>,
    p99_us: Option<Spread>,
    p999_us: Option<Spread>,
    loader_bound: bool,
    valid: usize,
    total: usize,
}

fn point(runs: &[Record], runtime: &str) -> Point {
    let mine: Vec<&Record> = runs.iter().filter(|r| r.runtime == runtime).collect();
    let ok: Vec<&Record> = mine.iter().filter(|r| !r.void).copied().collect();
    let latency =
        |f: fn(&crate::records::LatencyUs) -> u64| spread(ok.iter().filter_map(|r| r.latency_us.map(|l| f(&l) as f64)));
    Point {
        req_per_s: spread(ok.iter().filter_map(|r| r.req_per_s)),
        cpu_us_per_resp: spread(ok.iter().filter_map(|r| r.server_cpu_us_per_resp)),
        achieved: spread(ok.iter().filter_map(|r| r.rate_achieved)),
        p50_us: latency(|l| l.p50),
        p99_us: latency(|l| l.p99),
        p999_us: latency(|l| l.p999),
        loader_bound: !ok.is_empty() && ok.iter().filter(|r| r.loader_bound == Some(true)).count() * 2 > ok.len(),
        valid: ok.len(),
        total: mine.len(),
    }
}

/// `w`'s sweep: the closed-loop table, the open-loop table at its one rate with each runtime's p99.9 growth,
/// and the charts' links; nothing when `w` ran at one count.
pub fn section(out: &mut String, records: &[Record], w: &str, md_path: Option<&Path>, reference: &str) {
    let records = &at_headline_rtt(records, w);
    let counts = counts(records, w);
    if counts.len() < 2 {
        return;
    }
    let runtimes = ordered(records.iter().filter(|r| r.workload == w && swept(r)).map(|r| r.runtime.as_str()));
    let listed: Vec<String> = counts.iter().map(u32::to_string).collect();
    let headline = headline_count(records, w).map_or(String::new(), |c| format!(" (the tables above: {c})"));
    let _ = writeln!(
        out,
        "\n### {w}: connections {}{headline}\n\nEvery count in every round, interleaved. Closed loop: each runtime's \
         ceiling at that many connections (latency there is the queue the connections allow); ratios are medians \
         of per-round ratios at the same count.\n",
        listed.join(", ")
    );
    if let Some(md) = md_path {
        for (path, _) in workload_charts(records, w, md) {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let _ = writeln!(out, "![{w} by connections]({name})\n");
        }
    }
    let (rps_ratio, cpu_ratio) = (format!("req/s ÷ {reference}"), format!("CPU ÷ {reference}"));
    let mut table = Table::new([
        "connections",
        "runtime",
        "req/s",
        "CPU-µs/resp",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        rps_ratio.as_str(),
        cpu_ratio.as_str(),
        "valid runs",
    ]);
    for &c in &counts {
        let runs = at(records, w, Kind::Closed, c);
        for rt in &runtimes {
            let p = point(&runs, rt);
            if p.total == 0 {
                continue;
            }
            let ratio = |metric: fn(&Record) -> Option<f64>| {
                reference::ratio_cell(&runs, w, Kind::Closed, rt, reference, metric)
            };
            let mut rps = fmt_spread(p.req_per_s, 0, 1.0);
            if p.loader_bound {
                rps.push_str(" loader-bound");
            }
            table.row([
                &c.to_string(),
                rt.as_str(),
                &rps,
                &fmt_spread(p.cpu_us_per_resp, 2, 1.0),
                &fmt_median(p.p50_us, 3, 1e-3),
                &fmt_median(p.p99_us, 3, 1e-3),
                &fmt_median(p.p999_us, 3, 1e-3),
                &ratio(|r| r.req_per_s),
                &ratio(|r| r.server_cpu_us_per_resp),
                &format!("{}/{}", p.valid, p.total),
            ]);
        }
    }
    out.push_str(&table.finish());
    let conditions: Vec<Condition> = counts
        .iter()
        .map(|&c| Condition { label: vec![c.to_string()], records: at(records, w, Kind::Closed, c) })
        .collect();
    posts_pair::table(out, w, &["connections"], &conditions, &[Metric::ReqPerS, Metric::P99Ms, Metric::P999Ms]);
    open_tables(out, records, w, &counts, &runtimes);
}

/// The open-loop runs at every count (one rate for all), and how much each runtime's p99.9 grew.
fn open_tables(out: &mut String, records: &[Record], w: &str, counts: &[u32], runtimes: &[String]) {
    let open: Vec<&Record> = records.iter().filter(|r| r.workload == w && r.kind == Kind::Open).collect();
    let Some(rate) = open.iter().find_map(|r| r.rate) else { return };
    let _ = writeln!(
        out,
        "\nOpen loop at {} req/s at every count (latency from each request's intended send time):\n",
        num(rate, 0)
    );
    let mut table =
        Table::new(["connections", "runtime", "achieved req/s", "p50 ms", "p99 ms", "p99.9 ms", "valid runs"]);
    for &c in counts {
        let runs = at(records, w, Kind::Open, c);
        for rt in runtimes {
            let p = point(&runs, rt);
            if p.total == 0 {
                continue;
            }
            table.row([
                &c.to_string(),
                rt.as_str(),
                &fmt_median(p.achieved, 0, 1.0),
                &fmt_median(p.p50_us, 3, 1e-3),
                &fmt_spread(p.p99_us, 3, 1e-3),
                &fmt_spread(p.p999_us, 3, 1e-3),
                &format!("{}/{}", p.valid, p.total),
            ]);
        }
    }
    out.push_str(&table.finish());
    // From 64 connections (the published posts' usual count) when swept, else the fewest, to the most.
    let from = if counts.contains(&64) { 64 } else { counts[0] };
    let to = counts[counts.len() - 1];
    let growth: Vec<String> = runtimes
        .iter()
        .filter_map(|rt| {
            let p999 = |c: u32| point(&at(records, w, Kind::Open, c), rt).p999_us.map(|s| s.median);
            let (a, b) = (p999(from)?, p999(to)?);
            (a > 0.0).then(|| format!("{rt} ×{} ({} → {} ms)", num(b / a, 2), num(a / 1e3, 3), num(b / 1e3, 3)))
        })
        .collect();
    if from != to && !growth.is_empty() {
        let _ = writeln!(out, "\np99.9 growth from {from} to {to} connections at that rate: {}.", growth.join(", "));
    }
}

/// `w`'s sweep charts, beside the Markdown `md`: req/s by connections (closed loop) and p99.9 by connections
/// at the open loop's one rate; a chart without a value is not drawn.
fn workload_charts(records: &[Record], w: &str, md: &Path) -> Vec<(PathBuf, String)> {
    let records = &at_headline_rtt(records, w);
    let counts = counts(records, w);
    if counts.len() < 2 {
        return Vec::new();
    }
    let steps: Vec<String> = counts.iter().map(u32::to_string).collect();
    let runtimes = ordered(records.iter().filter(|r| r.workload == w && swept(r)).map(|r| r.runtime.as_str()));
    let mut drawn = Vec::new();
    for kind in [Kind::Closed, Kind::Open] {
        let mut points = Vec::new();
        for (&c, step) in counts.iter().zip(&steps) {
            let runs = at(records, w, kind, c);
            for rt in &runtimes {
                let p = point(&runs, rt);
                let value = match kind {
                    Kind::Closed => p.req_per_s.map(|s| s.median),
                    _ => p.p999_us.map(|s| s.median / 1e3),
                };
                if let Some(value) = value {
                    points.push(LadderPoint { runtime: rt.clone(), step: step.clone(), value });
                }
            }
        }
        if points.is_empty() {
            continue;
        }
        let (name, title, unit) = match kind {
            Kind::Closed => (format!("{w}-connections"), format!("{w}: req/s by connections (closed loop)"), "req/s"),
            _ => (format!("{w}-connections-p999"), format!("{w}: p99.9 by connections at one rate (ms)"), "ms"),
        };
        drawn.push((charts::svg_path(md, &name), charts::steps_svg(&title, unit, &steps, &points)));
    }
    drawn
}

/// Every swept workload's charts.
pub fn charts(records: &[Record], md: &Path) -> Vec<(PathBuf, String)> {
    ordered(records.iter().map(|r| r.workload.as_str())).iter().flat_map(|w| workload_charts(records, w, md)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{LatencyUs, test_record};

    /// hello-bare swept over 16, 64 and 256 connections: rust twice bun's req/s at every count, both tails
    /// growing with the count.
    fn sweep() -> Vec<Record> {
        let mut records = Vec::new();
        for round in 1..=2 {
            for c in [16, 64, 256] {
                for (rt, rps) in [("rust", 100_000.0), ("bun", 50_000.0)] {
                    let mut r = test_record("hello-bare", rt, Kind::Closed, round);
                    r.connections = Some(c);
                    (r.req_per_s, r.server_cpu_us_per_resp) = (Some(rps), Some(1e6 / rps));
                    r.latency_us = Some(LatencyUs { p50: 100, p95: None, p99: 200, p999: 300, max: 400 });
                    records.push(r);
                    let mut r = test_record("hello-bare", rt, Kind::Open, round);
                    r.connections = Some(c);
                    (r.rate, r.rate_achieved) = (Some(20_000.0), Some(20_000.0));
                    let p999 = if rt == "rust" { u64::from(c) * 10 } else { u64::from(c) * 40 };
                    r.latency_us = Some(LatencyUs { p50: 50, p95: None, p99: p999 / 2, p999, max: p999 * 2 });
                    records.push(r);
                }
            }
        }
        let mut check = test_record("hello-bare", "rust", Kind::Check, 0);
        check.connections = Some(64);
        records.push(check);
        records
    }

    #[test]
    fn the_headline_keeps_one_count_and_everything_that_is_not_a_round() {
        let records = sweep();
        assert_eq!(counts(&records, "hello-bare"), [16, 64, 256]);
        // hello-bare's own count is 100: 64 is the nearest swept one.
        assert_eq!(headline_count(&records, "hello-bare"), Some(64));
        let kept = headline(&records);
        assert_eq!(kept.len(), 2 * 2 * 2 + 1);
        assert!(kept.iter().filter(|r| r.kind != Kind::Check).all(|r| r.connections == Some(64)));
        // One count is no sweep: nothing is cut.
        let one: Vec<Record> = records.iter().filter(|r| r.connections == Some(16)).cloned().collect();
        assert_eq!(headline(&one).len(), one.len());
    }

    #[test]
    fn the_section_tables_every_count_and_the_tail_growth() {
        let records = sweep();
        let mut out = String::new();
        section(&mut out, &records, "hello-bare", None, "rust");
        assert!(out.contains("### hello-bare: connections 16, 64, 256 (the tables above: 64)"), "{out}");
        assert!(out.contains("| 256 | bun | 50,000 (50,000–50,000) | 20.00 (20.00–20.00) |"), "{out}");
        assert!(out.contains("| 0.50 | 2.00 | 2/2 |"), "{out}");
        assert!(out.contains("Open loop at 20,000 req/s at every count"), "{out}");
        assert!(
            out.contains(
                "p99.9 growth from 64 to 256 connections at that rate: rust ×4.00 (0.640 → 2.560 ms), bun ×4.00"
            ),
            "{out}"
        );
        let mut none = String::new();
        section(&mut none, &headline(&records), "hello-bare", None, "rust");
        assert!(none.is_empty(), "one count has no sweep section: {none}");
    }

    #[test]
    fn two_charts_per_swept_workload() {
        let records = sweep();
        let drawn = charts(&records, Path::new("/tmp/x/run.md"));
        let names: Vec<String> =
            drawn.iter().map(|(p, _)| p.file_name().unwrap_or_default().to_string_lossy().into_owned()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names[0].contains("hello-bare-connections") && names[1].contains("hello-bare-connections-p999"));
        assert!(drawn[1].1.contains("bun at 256: 10.240 ms"), "{}", drawn[1].1);
        assert!(charts(&headline(&records), Path::new("/tmp/x/run.md")).is_empty());
    }
}
