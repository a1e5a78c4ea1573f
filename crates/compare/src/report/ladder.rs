//! The ladder section: each rung's req/s and CPU per response for every runtime, the ratios to the reference,
//! and the points of the ladder's line chart.

use std::fmt::Write as _;
use std::path::Path;

use crate::format::fmt_median;
use crate::plan::workloads::Workload;
use crate::records::{Kind, Record, ordered};
use crate::reference;
use crate::report::charts;
use crate::report::summary::{cpu, rps, summarize, workloads};
use crate::table::Table;

/// The ladder's rungs that have records, in ladder order.
fn ladder_rungs(records: &[Record]) -> Vec<Workload> {
    let present = workloads(records);
    Workload::LADDER.into_iter().filter(|r| present.iter().any(|p| p == r.name())).collect()
}

/// A rung's short name (`empty`, `validate`, ...), as the ladder's table and chart label it.
fn step(rung: Workload) -> String {
    rung.rung().unwrap_or(rung.name()).to_string()
}

/// Runtimes measured on the ladder, in the order first recorded, the floor left out (it does no work).
fn ladder_runtimes(records: &[Record], rungs: &[Workload]) -> Vec<String> {
    let on_ladder = records.iter().filter(|r| rungs.iter().any(|w| w.name() == r.workload) && r.runtime != "floor");
    ordered(on_ladder.map(|r| r.runtime.as_str()))
}

/// One table for the whole ladder: each rung adds per-request work, so reading down a column shows how a
/// runtime's advantage (or loss) against rust changes as the handler does more.
pub fn ladder_section(out: &mut String, records: &[Record], md_path: Option<&Path>, reference: &str) {
    let rungs = ladder_rungs(records);
    if rungs.len() < 2 {
        return;
    }
    let runtimes = ladder_runtimes(records, &rungs);
    let others: Vec<&String> = runtimes.iter().filter(|r| *r != reference).collect();
    let _ = writeln!(
        out,
        "\n## ladder\n\nEach rung adds work to the one before: an empty handler, then JSON parsing and schema \
         validation of the body, then a SQLite read, then the same behind TLS 1.3 (sqlite+tls, the published \
         ladder's step D); the last rung reads PostgreSQL where the SQLite rung reads SQLite. Medians of closed-loop runs; \
         {reference} ÷ X is {reference}'s req/s over X's (above 1: {reference} is faster), X ÷ {reference} is X's \
         CPU-µs per response over {reference}'s (above 1: {reference} is cheaper), both medians of per-round ratios.\n"
    );
    if let Some(md) = md_path {
        let svg = charts::svg_path(md, "ladder");
        let name = svg.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let _ = writeln!(out, "![ladder]({name})\n");
    }
    let mut head = vec!["rung".to_string()];
    for rt in &runtimes {
        head.extend([format!("{rt} req/s"), format!("{rt} CPU-µs/resp")]);
    }
    for rt in &others {
        head.extend([format!("{reference} ÷ {rt} req/s"), format!("{rt} ÷ {reference} CPU")]);
    }
    let mut table = Table::new(&head);
    for rung in &rungs {
        let summary = summarize(records, rung.name());
        let mut row = vec![step(*rung)];
        for rt in &runtimes {
            match summary.iter().find(|c| &c.runtime == rt) {
                Some(c) if c.void_cell.is_some() => row.extend(["VOID".to_string(), String::new()]),
                Some(c) => {
                    let bound = if c.loader_bound { " loader-bound" } else { "" };
                    row.push(format!("{}{bound}", fmt_median(c.req_per_s, 0, 1.0)));
                    row.push(fmt_median(c.cpu_us_per_resp, 2, 1.0));
                }
                None => row.extend(["—".to_string(), "—".to_string()]),
            }
        }
        for rt in &others {
            row.push(reference::ratio_cell(records, rung.name(), Kind::Closed, reference, rt, rps));
            row.push(reference::ratio_cell(records, rung.name(), Kind::Closed, rt, reference, cpu));
        }
        table.row(&row);
    }
    out.push_str(&table.finish());
}

/// Throughput per runtime across the ladder's rungs, for its line chart.
pub fn ladder_points(records: &[Record]) -> (Vec<String>, Vec<charts::LadderPoint>) {
    let rungs = ladder_rungs(records);
    let runtimes = ladder_runtimes(records, &rungs);
    let mut points = Vec::new();
    for rung in &rungs {
        for c in summarize(records, rung.name()).iter().filter(|c| runtimes.contains(&c.runtime)) {
            if let Some(s) = c.req_per_s {
                points.push(charts::LadderPoint { runtime: c.runtime.clone(), step: step(*rung), value: s.median });
            }
        }
    }
    let steps = rungs.iter().map(|r| step(*r)).collect();
    (steps, points)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_record;
    use crate::report::{Options, render};

    #[test]
    fn ladder_table_and_points() {
        let closed = |w: &str, rt: &str, rps: f64, cpu: f64| {
            let mut r = test_record(w, rt, Kind::Closed, 1);
            (r.req_per_s, r.server_cpu_us_per_resp) = (Some(rps), Some(cpu));
            r
        };
        let records = vec![
            closed("ladder-empty", "rust", 100.0, 10.0),
            closed("ladder-empty", "bun", 80.0, 12.5),
            closed("ladder-postgres", "rust", 40.0, 25.0),
            closed("ladder-postgres", "bun", 10.0, 100.0),
            closed("hello-bare", "floor", 500.0, 2.0),
        ];
        let md = render(&records, None, &Options::default());
        let table = &md[md.find("## ladder\n").expect("ladder section")..];
        assert!(
            table.contains("| rung | rust req/s | rust CPU-µs/resp | bun req/s | bun CPU-µs/resp | rust ÷ bun req/s |")
        );
        assert!(table.contains("| empty | 100 | 10.00 | 80 | 12.50 | 1.25 | 1.25 |"), "{table}");
        assert!(table.contains("| postgres | 40 | 25.00 | 10 | 100.00 | 4.00 | 4.00 |"), "{table}");
        let (steps, points) = ladder_points(&records);
        assert_eq!(steps, ["empty", "postgres"]);
        assert_eq!(points.len(), 4);
        // One rung is no ladder.
        assert!(!render(&records[..2], None, &Options::default()).contains("## ladder\n"));
    }
}
