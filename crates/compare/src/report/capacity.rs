//! Capacity at a latency objective (`compare --capacity 10ms`): per workload, each runtime's highest
//! open-loop rate whose p99 met the objective, found by `loadgen capacity` on a fresh server after the
//! rounds (latency from each request's intended send time, so a stalled server cannot hide behind
//! coordinated omission). This module summarizes the searches, renders their table inside the workload's
//! section, and draws their chart. Closed-loop req/s says how fast a runtime goes flat out; this says how
//! much load it takes while still answering in time, which is what a user sizing a deployment asks.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::format::{fmt_median, fmt_spread, num};
use crate::records::{Kind, Record, ordered};
use crate::reference;
use crate::report::charts::{self, Bar};
use crate::stats::{Spread, spread};
use crate::table::Table;

/// One runtime's searches at one objective in one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityCell {
    pub runtime: String,
    /// Over the searches that found a rate.
    pub rps: Option<Spread>,
    /// p99 at the rate found.
    pub p99_us: Option<Spread>,
    /// A search stopped at the loader's limit or loadgen's ceiling: the figure is at least this.
    pub lower_bound: bool,
    /// Valid searches in which no rate met the objective.
    pub none_met: usize,
    pub valid: usize,
    pub total: usize,
    /// loadgen's results, every step, relative to the records' directory.
    pub steps_files: Vec<String>,
}

fn searches<'a>(records: &'a [Record], workload: &'a str) -> impl Iterator<Item = &'a Record> + 'a {
    records.iter().filter(move |r| r.workload == workload && r.kind == Kind::Capacity)
}

fn objective_of(r: &Record) -> Option<u64> {
    r.capacity.as_ref().map(|c| c.objective_p99_us)
}

/// The p99 objectives searched in `workload` (a void search that never ran has none), in the order first
/// recorded.
pub fn objectives(records: &[Record], workload: &str) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for o in searches(records, workload).filter_map(objective_of) {
        if !out.contains(&o) {
            out.push(o);
        }
    }
    out
}

/// "p99 ≤ 10 ms".
pub fn objective_label(p99_us: u64) -> String {
    let ms = format!("{:.3}", p99_us as f64 / 1e3);
    format!("p99 ≤ {} ms", ms.trim_end_matches('0').trim_end_matches('.'))
}

/// Per runtime, its searches at `objective`; a void search counts against the runtime it was for even
/// when it never learned its objective.
pub fn summarize(records: &[Record], workload: &str, objective: u64) -> Vec<CapacityCell> {
    let mine: Vec<&Record> =
        searches(records, workload).filter(|r| objective_of(r).is_none_or(|o| o == objective)).collect();
    ordered(mine.iter().map(|r| r.runtime.as_str()))
        .into_iter()
        .map(|rt| {
            let all: Vec<&Record> = mine.iter().filter(|r| r.runtime == rt).copied().collect();
            let found: Vec<_> = all.iter().filter(|r| !r.void).filter_map(|r| r.capacity.as_ref()).collect();
            CapacityCell {
                rps: spread(found.iter().filter_map(|c| c.rps)),
                p99_us: spread(found.iter().filter_map(|c| c.p99_us).map(|v| v as f64)),
                lower_bound: found.iter().any(|c| c.rps.is_some() && (c.loader_bound || c.reached_max)),
                none_met: found.iter().filter(|c| c.rps.is_none()).count(),
                valid: found.len(),
                total: all.len(),
                steps_files: all.iter().filter_map(|r| r.capacity.as_ref()).map(|c| c.steps_file.clone()).collect(),
                runtime: rt,
            }
        })
        .collect()
}

fn capacity_rps(r: &Record) -> Option<f64> {
    r.capacity.as_ref().and_then(|c| c.rps)
}

/// The chart's bars: runtimes with a capacity found.
pub fn bars(cells: &[CapacityCell]) -> Vec<Bar> {
    cells
        .iter()
        .filter_map(|c| {
            let s = c.rps?;
            Some(Bar {
                runtime: c.runtime.clone(),
                req_per_s: s.median,
                req_per_s_min: s.min,
                req_per_s_max: s.max,
                cpu_us_per_resp: None,
                lower_bound: c.lower_bound,
            })
        })
        .collect()
}

/// The SVG beside the Markdown `md` for `workload` at `objective`.
pub fn svg_path(md: &Path, workload: &str, objective: u64) -> PathBuf {
    charts::svg_path(md, &format!("{workload}-capacity-p99-{objective}us"))
}

/// Every capacity chart of the records: (path beside `md`, SVG).
pub fn charts(records: &[Record], md: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for w in ordered(records.iter().filter(|r| r.kind == Kind::Capacity).map(|r| r.workload.as_str())) {
        for o in objectives(records, &w) {
            let bars = bars(&summarize(records, &w, o));
            if !bars.is_empty() {
                out.push((svg_path(md, &w, o), charts::capacity_svg(&w, &objective_label(o), &bars)));
            }
        }
    }
    out
}

/// The capacity table(s) of `workload`, one per objective, each with its chart linked when `md` is given.
pub fn table(out: &mut String, records: &[Record], workload: &str, md: Option<&Path>, reference: &str) {
    for objective in objectives(records, workload) {
        let cells = summarize(records, workload, objective);
        let step = searches(records, workload)
            .filter_map(|r| r.capacity.as_ref())
            .find(|c| c.objective_p99_us == objective)
            .map(|c| (c.step_s, c.warmup_s));
        let _ = write!(
            out,
            "\nCapacity at {}: the highest open-loop rate whose p99 (from each request's intended send time) \
             met the objective, with no error and at least 95% of the rate achieved (`loadgen capacity`: the \
             rate doubles from an eighth of the closed-loop median, then bisects to 5%",
            objective_label(objective)
        );
        if let Some((step_s, warmup_s)) = step {
            let _ = write!(out, "; {step_s} s steps after {warmup_s} s warmups");
        }
        out.push_str("; every step is in the steps file):\n\n");
        if let (Some(md), false) = (md, bars(&cells).is_empty()) {
            let svg = svg_path(md, workload, objective);
            let name = svg.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let _ = writeln!(out, "![{workload} capacity]({name})\n");
        }
        let ratio_head = format!("÷ {reference}");
        let mut table =
            Table::new(["runtime", "capacity req/s", "p99 ms at it", ratio_head.as_str(), "valid searches", "steps"]);
        for c in &cells {
            let rps = match (c.rps, c.none_met) {
                (Some(s), _) => {
                    let figure = fmt_spread(Some(s), 0, 1.0);
                    if c.lower_bound { format!("≥ {figure} loader-bound") } else { figure }
                }
                (None, n) if n > 0 => "none met it".to_string(),
                (None, _) => "—".to_string(),
            };
            let ratio = reference::ratio_cell(records, workload, Kind::Capacity, &c.runtime, reference, capacity_rps);
            let p99 = fmt_median(c.p99_us, 3, 1e-3);
            let files: Vec<String> = c.steps_files.iter().map(|f| format!("[{}]({f})", file_name(f))).collect();
            let files = if files.is_empty() { "—".to_string() } else { files.join(" ") };
            table.row([c.runtime.as_str(), &rps, &p99, &ratio, &format!("{}/{}", c.valid, c.total), &files]);
        }
        out.push_str(&table.finish());
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// One line for the progress display.
pub fn summary_line(rec: &Record) -> String {
    if rec.void {
        return format!("VOID: {}", rec.void_reason.as_deref().unwrap_or(""));
    }
    match &rec.capacity {
        Some(c) => match (c.rps, c.p99_us) {
            (Some(rps), p99) => {
                let bound = if c.loader_bound || c.reached_max { "at least " } else { "" };
                let p99 = p99.map_or(String::new(), |us| format!(", p99 {} ms there", num(us as f64 / 1e3, 3)));
                format!("{bound}{} req/s in {} steps{p99}", num(rps, 0), c.steps)
            }
            (None, _) => {
                format!("no rate from {} req/s down met the objective ({} steps)", num(c.start_rps, 0), c.steps)
            }
        },
        None => "no result".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{CapacityFound, test_record};

    fn search(rt: &str, round: u32, rps: Option<f64>, loader_bound: bool) -> Record {
        let mut r = test_record("hello-bare", rt, Kind::Capacity, round);
        r.capacity = Some(CapacityFound {
            objective_p99_us: 10_000,
            start_rps: 1000.0,
            rps,
            achieved_rps: rps,
            p99_us: rps.map(|_| 4_000),
            steps: 9,
            step_s: 5.0,
            warmup_s: 1.0,
            loader_bound,
            reached_max: false,
            steps_file: format!("run-capacity/hello-bare-{rt}-capacity-r{round}.json"),
        });
        r
    }

    #[test]
    fn table_ratios_bounds_and_misses() {
        let mut void = search("node", 2, None, false);
        void.void_because("server exited");
        let records = vec![
            search("rust", 1, Some(40_000.0), false),
            search("bun", 1, Some(20_000.0), false),
            search("floor", 1, Some(90_000.0), true),
            search("node", 1, None, false),
            search("rust", 2, Some(44_000.0), false),
            search("bun", 2, Some(33_000.0), false),
            void,
        ];
        assert_eq!(objectives(&records, "hello-bare"), [10_000]);
        assert_eq!((objective_label(10_000), objective_label(2_500)), ("p99 ≤ 10 ms".into(), "p99 ≤ 2.5 ms".into()));
        let mut md = String::new();
        table(&mut md, &records, "hello-bare", Some(Path::new("/x/run.md")), "rust");
        assert!(md.contains("Capacity at p99 ≤ 10 ms"), "{md}");
        assert!(md.contains("5 s steps after 1 s warmups"), "{md}");
        assert!(md.contains("![hello-bare capacity](run-hello-bare-capacity-p99-10000us.svg)"), "{md}");
        // bun ÷ rust per round: 0.5 and 0.75, median 0.625 (printed to even).
        assert!(md.contains("| bun | 26,500 (20,000–33,000) | 4.000 | 0.62 | 2/2 |"), "{md}");
        assert!(md.contains("| rust | 42,000 (40,000–44,000) | 4.000 | — | 2/2 |"), "{md}");
        assert!(md.contains("| floor | ≥ 90,000 loader-bound |"), "{md}");
        assert!(md.contains("| node | none met it | — | — | 1/2 |"), "{md}");
        assert!(md.contains("[hello-bare-rust-capacity-r1.json](run-capacity/hello-bare-rust-capacity-r1.json)"));
        let drawn = charts(&records, Path::new("/x/run.md"));
        assert_eq!(drawn.len(), 1);
        assert!(drawn[0].1.contains(">≥ 90,000</text>"), "{}", drawn[0].1);
    }

    #[test]
    fn a_search_summarizes_as_its_rate_steps_and_p99_in_one_line() {
        assert_eq!(
            summary_line(&search("rust", 1, Some(40_000.0), false)),
            "40,000 req/s in 9 steps, p99 4.000 ms there"
        );
        assert_eq!(
            summary_line(&search("rust", 1, Some(40_000.0), true)),
            "at least 40,000 req/s in 9 steps, p99 4.000 ms there"
        );
        assert!(summary_line(&search("rust", 1, None, false)).starts_with("no rate from 1,000 req/s down"));
    }
}
