//! The answer first: one table (and one chart) of every workload × runtime against the reference runtime
//! (rust unless `--reference` names another), CPU per response and req/s as ratios to it (capacity too where
//! searched), each with its verdict by the repeatability rule (crate::verdict); then the same for the pair
//! the published posts are about, Bun against Node. With one run the rule can check (a), (c) and (d) only,
//! and the cell says (b) is pending.

use std::fmt::Write as _;
use std::path::Path;

use crate::format::num;
use crate::records::Record;
use crate::reference;
use crate::report::charts::{self, RatioPoint};
use crate::table::Table;
use crate::verdict::{self, Judgement, Metric, Verdict};

/// One overview: every runtime against `reference`, or only `only` against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope<'a> {
    pub reference: &'a str,
    pub only: Option<&'a str>,
}

impl<'a> Scope<'a> {
    /// The overviews of a summary against `reference`: every runtime against it, then Bun against Node
    /// unless the first already is exactly that.
    pub fn all(reference: &'a str) -> Vec<Scope<'a>> {
        let (bun, node) = reference::POSTS_PAIR;
        let mut out = vec![Scope { reference, only: None }];
        if reference != node && reference != bun {
            out.push(Scope { reference: node, only: Some(bun) });
        }
        out
    }

    /// `Every workload against rust`, `Bun against Node`.
    pub fn title(&self) -> String {
        match self.only {
            None => format!("Every workload against {}", self.reference),
            Some(rt) => format!("{} against {}", capitalized(rt), capitalized(self.reference)),
        }
    }

    /// The section's heading: `Overview: every workload against rust`, `Overview: Bun against Node`.
    pub fn heading(&self) -> String {
        match self.only {
            None => format!("Overview: every workload against {}", self.reference),
            Some(_) => format!("Overview: {}", self.title()),
        }
    }

    /// The chart's file name stem beside the Markdown: `overview`, `overview-bun-node`.
    pub fn chart_stem(&self) -> String {
        match self.only {
            None if self.reference == reference::DEFAULT => "overview".into(),
            None => format!("overview-{}", self.reference),
            Some(rt) => format!("overview-{rt}-{}", self.reference),
        }
    }

    /// The rule's judgements in this scope.
    pub fn judgements(&self, records: &[Record]) -> Vec<Judgement> {
        let mut all = verdict::judge(records, self.reference);
        all.retain(|j| self.only.is_none_or(|rt| j.runtime == rt));
        all
    }
}

/// `bun` → `Bun`, for headings.
pub fn capitalized(name: &str) -> String {
    let mut chars = name.chars();
    chars.next().map_or(String::new(), |c| c.to_uppercase().chain(chars).collect())
}

/// The verdict on one cell, with the reason for anything short of a verdict either way: `not reproduced:
/// rust better in this run, (b) pending`.
pub fn verdict_text(j: &Judgement) -> String {
    let why = match j.verdict {
        Verdict::Better | Verdict::Worse => return j.verdict_text(),
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
            (Some(better), 1) => format!("{} in this run, (b) pending", j.direction_text(better)),
            (Some(better), _) => {
                format!("{} in each run, but none on another host or 1 h later", j.direction_text(better))
            }
            (None, _) => "the runs disagree".into(),
        },
    };
    format!("{}: {why}", j.verdict_text())
}

fn rounds(r: &verdict::RunEffect) -> usize {
    r.reference.map_or(0, |s| s.rounds).min(r.other.map_or(0, |s| s.rounds))
}

/// Each run's median ratio, `a / b` when there are two runs.
pub fn ratios_text(j: Option<&Judgement>) -> String {
    let Some(j) = j else { return "—".into() };
    let each: Vec<String> = j.runs.iter().map(|r| r.ratio.map_or("—".into(), |x| num(x, 2))).collect();
    each.join(" / ")
}

/// The overview section for `scope`: the table and the chart's image line (`md_path` names the chart), or
/// nothing without a runtime measured beside the reference.
pub fn section(out: &mut String, records: &[Record], md_path: Option<&Path>, scope: Scope) {
    let judgements = scope.judgements(records);
    if judgements.is_empty() {
        return;
    }
    let r = scope.reference;
    let cells = verdict::by_cell(&judgements);
    let capacity = judgements.iter().any(|j| j.metric == Metric::CapacityRps);
    let runs = crate::records::ordered(records.iter().map(|r| r.run_id.as_str()));
    let whom = match scope.only {
        None => format!("Every workload against {r}: each runtime's"),
        Some(rt) => format!("The posts' question, {rt} against {r} on every workload both ran: {rt}'s"),
    };
    let _ = writeln!(
        out,
        "\n## {}\n\n{whom} CPU-µs per response and req/s over {r}'s (medians of per-round ratios; CPU above 1: {r} \
         is cheaper, req/s below 1: {r} is faster){}, with the verdict of the repeatability rule: a difference \
         counts only if (a) the two runtimes' per-round values do not overlap in any run (3 rounds at least), (b) \
         the direction reproduces in a second run on another host or an hour later, (c) the median effect exceeds \
         10% in every run, and (d) neither has a void record. {}\n",
        scope.heading(),
        if capacity { ", and capacity at the p99 objective likewise" } else { "" },
        if runs.len() > 1 {
            format!(
                "Each cell lists the ratios of the runs that measured it ({} runs read), in the order read, \
                 separated by `/`.",
                runs.len()
            )
        } else {
            "One run: (a), (c) and (d) are checked, (b) is pending until a second run (`compare verdict` reads \
             several)."
                .to_string()
        }
    );
    if let Some(md) = md_path {
        let svg = charts::svg_path(md, &scope.chart_stem());
        let name = svg.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let _ = writeln!(out, "![{}]({name})\n", scope.title());
    }
    let (cpu_head, rps_head, cap_head) = (format!("CPU ÷ {r}"), format!("req/s ÷ {r}"), format!("capacity ÷ {r}"));
    let mut head = vec!["workload", "runtime", cpu_head.as_str(), "CPU verdict", rps_head.as_str(), "req/s verdict"];
    if capacity {
        head.extend([cap_head.as_str(), "capacity verdict"]);
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
    counts_line(out, &judgements);
}

/// How many cells got each verdict, in the order the rule's words come.
fn counts_line(out: &mut String, judgements: &[Judgement]) {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for j in judgements {
        let v = j.verdict_text();
        match counts.iter_mut().find(|(name, _)| *name == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((v, 1)),
        }
    }
    counts.sort_by_key(|(name, _)| verdict_order(judgements, name));
    let each: Vec<String> = counts.iter().map(|(name, n)| format!("{n} {name}")).collect();
    let _ = writeln!(out, "\nOf {} cells: {}.", judgements.len(), each.join(", "));
}

fn verdict_order(judgements: &[Judgement], name: &str) -> usize {
    let Some(j) = judgements.first() else { return 0 };
    let words = [
        j.direction_text(true),
        j.direction_text(false),
        "no measurable difference".into(),
        "not reproduced".into(),
        "not comparable".into(),
    ];
    words.iter().position(|w| w == name).unwrap_or(words.len())
}

/// The overview chart for `scope`: every workload × runtime's ratios, or `None` when nothing was judged.
pub fn chart(records: &[Record], scope: Scope) -> Option<String> {
    let judgements = scope.judgements(records);
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
    (!points.is_empty()).then(|| charts::ratios_svg(&points, &scope.title(), scope.reference))
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
        let rust = Scope { reference: "rust", only: None };
        section(&mut out, &records(), Some(Path::new("/r/run.md")), rust);
        assert!(out.contains("## Overview: every workload against rust"), "{out}");
        assert!(out.contains("![Every workload against rust](run-overview.svg)"), "{out}");
        assert!(
            out.contains("| hello-bare | bun | 1.50 | not reproduced: rust better in this run, (b) pending | 0.67 |"),
            "{out}"
        );
        assert!(out.contains("| hello-bare | node | 1.04 | no measurable difference: (c) within 10% |"), "{out}");
        assert!(out.contains("Of 4 cells: 2 no measurable difference, 2 not reproduced."), "{out}");
        let svg = chart(&records(), rust).expect("a chart");
        assert!(svg.contains("hello-bare bun: 1.50") && svg.ends_with("</svg>\n"), "{svg}");
    }

    #[test]
    fn bun_against_node_is_judged_the_same_way() {
        let scopes = Scope::all("rust");
        assert_eq!(scopes.len(), 2, "rust's overview, then the posts' pair");
        assert_eq!(
            (scopes[1].title(), scopes[1].chart_stem()),
            ("Bun against Node".into(), "overview-bun-node".into())
        );
        let mut out = String::new();
        section(&mut out, &records(), Some(Path::new("/r/run.md")), scopes[1]);
        assert!(out.contains("## Overview: Bun against Node") && out.contains("(run-overview-bun-node.svg)"), "{out}");
        // bun's CPU is 15 ÷ 10.4 of node's; its req/s 10.4 ÷ 15.
        assert!(
            out.contains("| hello-bare | bun | 1.44 | not reproduced: node better in this run, (b) pending | 0.69 |"),
            "{out}"
        );
        assert!(!out.contains("| rust |"), "only the pair: {out}");
        assert!(chart(&records(), scopes[1]).is_some_and(|svg| svg.contains("CPU ÷ node")));
        // Against node as the reference, Bun against Node is already every workload's overview.
        assert_eq!(Scope::all("node"), [Scope { reference: "node", only: None }]);
    }

    #[test]
    fn nothing_beside_rust_means_no_overview() {
        let only: Vec<Record> = records().into_iter().filter(|r| r.runtime == "rust").collect();
        let mut out = String::new();
        let rust = Scope { reference: "rust", only: None };
        section(&mut out, &only, None, rust);
        assert!(out.is_empty() && chart(&only, rust).is_none());
    }
}
