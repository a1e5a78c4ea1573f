//! `compare verdict RUN.jsonl [RUN.jsonl ...]`: the repeatability rule (crate::verdict) over one or more
//! runs' records against a reference runtime (`--reference`, rust by default), as a table of every workload ×
//! runtime × metric with each run's effect, or as JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::format::num;
use crate::records::Record;
use crate::report::overview::verdict_text;
use crate::table::Table;
use crate::verdict::{self, Judgement, RunEffect};

#[derive(Debug, Clone, Args)]
pub struct VerdictArgs {
    /// Record files written by compare: one per run, or several runs in one file (each run judged alone).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Print a JSON array of {workload, runtime, reference, metric, verdict, reproduced, runs: [per-run
    /// effects]}.
    #[arg(long)]
    pub json: bool,
    /// The runtime every other is judged against: verdicts read `node better`, `node worse` with `node`.
    #[arg(long, default_value = crate::reference::DEFAULT)]
    pub reference: String,
}

/// The rule against `reference` over the records as the report reads them: judged by the report's
/// cross-record rules and cut to each workload's headline connection count and round trip, as every table of
/// the report is.
pub fn judgements(records: &[Record], reference: &str) -> Vec<Judgement> {
    let judged = crate::report::cross_record::judged(records);
    verdict::judge(&crate::report::sweep::headline(&judged), reference)
}

/// One run's effect in a cell: the median ratio and which of (a), (c), (d) hold.
fn effect_text(r: &RunEffect) -> String {
    let mark = |ok: bool| if ok { "✓" } else { "✗" };
    let ratio = r.ratio.map_or("—".into(), |x| num(x, 2));
    format!("{ratio} a{} c{} d{}", mark(r.separated), mark(r.large), mark(r.void.is_empty()))
}

/// The verdict table: one row per workload × runtime × metric, a column per run, ratios to `reference`.
pub fn table(judgements: &[Judgement], reference: &str) -> String {
    let runs = crate::records::ordered(judgements.iter().flat_map(|j| j.runs.iter().map(|r| r.run_id.as_str())));
    let mut head = vec!["workload".to_string(), "runtime".into(), "metric".into(), "verdict".into()];
    head.extend(runs.iter().map(|r| format!("run {r} (÷ {reference})")));
    let mut t = Table::new(head);
    for j in judgements {
        let mut row = vec![j.workload.clone(), j.runtime.clone(), j.metric.name().to_string(), verdict_text(j)];
        for run in &runs {
            row.push(j.runs.iter().find(|r| &r.run_id == run).map_or(String::new(), effect_text));
        }
        t.row(row);
    }
    t.finish()
}

/// `compare verdict`: 0 with the verdicts printed, 1 when a file cannot be read.
pub fn command(args: &VerdictArgs) -> ExitCode {
    let records = match crate::records::read_jsonl(&args.files) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("compare verdict: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let all = judgements(&records, &args.reference);
    if args.json {
        match serde_json::to_string_pretty(&all) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("compare verdict: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else if all.is_empty() {
        println!("No cell to judge: no runtime was measured beside {} in these records.", args.reference);
    } else {
        println!(
            "Ratios are each runtime's value ÷ {}'s (median of per-round ratios); a: rounds separated, c: over \
             10% apart, d: no void record.\n",
            args.reference
        );
        print!("{}", table(&all, &args.reference));
    }
    ExitCode::SUCCESS
}
