//! The answer first: one table (and one chart) of every workload × runtime against rust, CPU per response
//! and req/s as ratios to rust (capacity too where searched), each with its verdict by the repeatability
//! rule (crate::verdict). With one run the rule can check (a), (c) and (d) only, and the cell says (b) is
//! pending.

use std::fmt::Write as _;
use std::path::Path;

use crate::format::num;
use crate::records::Record;
use crate::report::charts::{self, RatioPoint};
use crate::table::Table;
use crate::verdict::{self, Judgement, Metric, Verdict};

/// The chart's file name stem beside the Markdown.
pub const CHART: &str = "overview";

/// The verdict on one cell, with the reason for anything short of a verdict either way: `not reproduced:
/// rust better in this run, (b) pending`.
pub fn verdict_text(j: &Judgement) -> String {
    let direction = |better: bool| if better { "rust better" } else { "rust worse" };
    let why = match j.verdict {
        Verdict::RustBetter | Verdict::RustWorse => return j.verdict.text().into(),
        Verdict::NotComparable => "a void record".to_string(),
        Verdict::NoMeasurableDifference => {
            let few = j.runs.iter().any(|r| !r.separated && rounds(r) < verdict::MIN_ROUNDS);
            let why = if j.runs.iter().any(|r| !r.separated) {
                if few { "(a) fewer than 3 rounds" } else { "(a) rounds overlap" }
            } else {
                "(c) within 10%"
            };
            why.to_string()
        }
        Verdict::NotReproduced => match (j.direction(), j.runs.len()) {
            (Some(better), 1) => format!("{} in this run, (b) pending", direction(better)),
            (Some(better), _) => format!("{} in each run, but none on another host or 1 h later", direction(better)),
            (None, _) => "the runs disagree".into(),
        },
    };
    format!("{}: {why}", j.verdict.text())
}

fn rounds(r: &verdict::RunEffect) -> usize {
    r.rust.map_or(0, |s| s.rounds).min(r.other.map_or(0, |s| s.rounds))
}

/// Each run's median ratio, `a / b` when there are two runs.
fn ratios_text(j: Option<&Judgement>) -> String {
    let Some(j) = j else { return "—".into() };
    let each: Vec<String> = j.runs.iter().map(|r| r.ratio.map_or("—".into(), |x| num(x, 2))).collect();
    each.join(" / ")
}

/// The overview section: the table and the chart's image line (`md_path` names the chart), or nothing
/// without a runtime measured beside rust.
pub fn section(out: &mut String, records: &[Record], md_path: Option<&Path>) {
    let judgements = verdict::judge(records);
    if judgements.is_empty() {
        return;
    }
    let cells = verdict::by_cell(&judgements);
    let capacity = judgements.iter().any(|j| j.metric == Metric::CapacityRps);
    let runs = crate::records::ordered(records.iter().map(|r| r.run_id.as_str()));
    let _ = writeln!(
        out,
        "\n## Overview\n\nEvery workload against rust: each runtime's CPU-µs per response and req/s over rust's (medians \
         of per-round ratios; CPU above 1: rust is cheaper, req/s below 1: rust is faster){}, with the verdict of \
         the repeatability rule: a difference counts only if (a) the two runtimes' per-round values do not overlap \
         in any run (3 rounds at least), (b) the direction reproduces in a second run on another host or an hour \
         later, (c) the median effect exceeds 10% in every run, and (d) neither has a void record. {}\n",
        if capacity { ", and capacity at the p99 objective likewise" } else { "" },
        if runs.len() > 1 {
            format!("Ratios of the {} runs read, in order, separated by `/`.", runs.len())
        } else {
            "One run: (a), (c) and (d) are checked, (b) is pending until a second run (`compare verdict` reads \
             several)."
                .to_string()
        }
    );
    if let Some(md) = md_path {
        let svg = charts::svg_path(md, CHART);
        let name = svg.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let _ = writeln!(out, "![overview]({name})\n");
    }
    let mut head = vec!["workload", "runtime", "CPU ÷ rust", "CPU verdict", "req/s ÷ rust", "req/s verdict"];
    if capacity {
        head.extend(["capacity ÷ rust", "capacity verdict"]);
    }
    let mut table = Table::new(head);
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for j in &judgements {
        let key = (j.workload.as_str(), j.runtime.as_str());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let get = |m: Metric| cells.get(&(j.workload.clone(), j.runtime.clone(), m)).copied();
        let text = |m: Metric| get(m).map_or(String::new(), verdict_text);
        let mut row = vec![
            j.workload.clone(),
            j.runtime.clone(),
            ratios_text(get(Metric::CpuUsPerResp)),
            text(Metric::CpuUsPerResp),
            ratios_text(get(Metric::ReqPerS)),
            text(Metric::ReqPerS),
        ];
        if capacity {
            row.extend([ratios_text(get(Metric::CapacityRps)), text(Metric::CapacityRps)]);
        }
        table.row(row);
    }
    out.push_str(&table.finish());
}

/// The overview chart: every workload × runtime's ratios, or `None` when nothing was judged.
pub fn chart(records: &[Record]) -> Option<String> {
    let judgements = verdict::judge(records);
    let cells = verdict::by_cell(&judgements);
    let mut points: Vec<RatioPoint> = Vec::new();
    for j in &judgements {
        if points.iter().any(|p| p.workload == j.workload && p.runtime == j.runtime) {
            continue;
        }
        let get = |m: Metric| cells.get(&(j.workload.clone(), j.runtime.clone(), m)).copied();
        // The first run's ratio: with several runs the table lists each.
        let ratio = |m: Metric| get(m).and_then(|j| j.runs.first()).and_then(|r| r.ratio);
        let holds = |m: Metric| get(m).is_some_and(Judgement::holds_within_runs);
        points.push(RatioPoint {
            workload: j.workload.clone(),
            runtime: j.runtime.clone(),
            cpu: ratio(Metric::CpuUsPerResp),
            rps: ratio(Metric::ReqPerS),
            cpu_holds: holds(Metric::CpuUsPerResp),
            rps_holds: holds(Metric::ReqPerS),
        });
    }
    (!points.is_empty()).then(|| charts::ratios_svg(&points))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{Kind, test_record};

    fn records() -> Vec<Record> {
        let mut out = Vec::new();
        for round in 1..=3 {
            for (rt, cpu) in [("rust", 10.0), ("bun", 15.0), ("node", 10.4)] {
                let mut r = test_record("hello-bare", rt, Kind::Closed, round);
                r.server_cpu_us_per_resp = Some(cpu * (1.0 + f64::from(round) * 0.01));
                r.req_per_s = Some(1e6 / cpu);
                out.push(r);
            }
        }
        out
    }

    #[test]
    fn the_overview_gives_each_cell_its_ratio_and_verdict() {
        let mut out = String::new();
        section(&mut out, &records(), Some(Path::new("/r/run.md")));
        assert!(out.contains("## Overview") && out.contains("![overview](run-overview.svg)"), "{out}");
        assert!(
            out.contains("| hello-bare | bun | 1.50 | not reproduced: rust better in this run, (b) pending | 0.67 |"),
            "{out}"
        );
        assert!(out.contains("| hello-bare | node | 1.04 | no measurable difference: (c) within 10% |"), "{out}");
        let svg = chart(&records()).expect("a chart");
        assert!(svg.contains("hello-bare bun: 1.50") && svg.ends_with("</svg>\n"), "{svg}");
    }

    #[test]
    fn nothing_beside_rust_means_no_overview() {
        let only: Vec<Record> = records().into_iter().filter(|r| r.runtime == "rust").collect();
        let mut out = String::new();
        section(&mut out, &only, None);
        assert!(out.is_empty() && chart(&only).is_none());
    }
}
