//! The noise floor of one's own A/B. Two `--target` copies of one command (`--target before=cmd:X --target
//! before-again=cmd:X`) are an A/A pair: the same binary, started the same way, measured interleaved in the
//! same rounds, so whatever separates them is this run's noise. The section states it for the run: each
//! pair's ratios and verdicts by the repeatability rule, the largest ratio, and whether the pair got `no
//! measurable difference` everywhere; a change judged with `compare verdict --reference before` counts only
//! beyond it.

use std::fmt::Write as _;

use crate::plan::target;
use crate::records::{Record, ordered};
use crate::table::Table;
use crate::verdict::{self, Judgement, Metric, Verdict};

/// One A/A pair: the first target given a command, and a later one given the same command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub first: String,
    pub again: String,
}

/// The A/A pairs of the runs `records` come from, read from each run's own command line; a pair counts when
/// both of its names have records here.
pub fn pairs(records: &[Record]) -> Vec<Pair> {
    let measured = |name: &str| records.iter().any(|r| r.runtime == name);
    let mut out: Vec<Pair> = Vec::new();
    for run in ordered(records.iter().map(|r| r.run_id.as_str())) {
        let Some(rec) = records.iter().find(|r| r.run_id == run) else { continue };
        let mut started: Vec<(&str, &str)> = Vec::new();
        for spec in target_specs(&rec.command) {
            let Some((name, command)) = target::started_command(spec) else { continue };
            if let Some((first, _)) = started.iter().find(|(_, c)| *c == command) {
                let pair = Pair { first: first.to_string(), again: name.to_string() };
                if !out.contains(&pair) && measured(&pair.first) && measured(&pair.again) {
                    out.push(pair);
                }
            } else {
                started.push((name, command));
            }
        }
    }
    out
}

/// The values of every `--target` in an argv (`--target X` and `--target=X`).
fn target_specs(argv: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut args = argv.iter();
    while let Some(a) = args.next() {
        if a == "--target" {
            out.extend(args.next().map(String::as_str));
        } else if let Some(spec) = a.strip_prefix("--target=") {
            out.push(spec);
        }
    }
    out
}

/// "Noise floor (A/A)": nothing when the runs have no A/A pair.
pub fn section(out: &mut String, records: &[Record]) {
    let pairs = pairs(records);
    if pairs.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n## Noise floor (A/A)\n\nThe same command under two names, measured interleaved in the same rounds: any \
         difference between them is this run's noise, and a change judged against the first (`compare verdict \
         --reference NAME`) counts only beyond it. Ratios are the second's over the first's (medians of \
         per-round ratios; the spread across runs when there are several).\n"
    );
    for pair in &pairs {
        let judged: Vec<Judgement> = ordered(records.iter().map(|r| r.workload.as_str()))
            .iter()
            .flat_map(|w| {
                Metric::JUDGED
                    .into_iter()
                    .filter_map(move |m| verdict::judge_pair(records, w, &pair.again, &pair.first, m, m.kind()))
            })
            .collect();
        let mut table = Table::new(["workload", "metric", &format!("{} ÷ {}", pair.again, pair.first), "verdict"]);
        let mut largest: Option<(f64, &Judgement)> = None;
        for j in &judged {
            let ratios: Vec<f64> = j.runs.iter().filter_map(|r| r.ratio).collect();
            let text = ratios.iter().map(|r| format!("{r:.3}")).collect::<Vec<_>>().join(", ");
            for &r in &ratios {
                let off = (r - 1.0).abs();
                if largest.is_none_or(|(l, _)| off > (l - 1.0).abs()) {
                    largest = Some((r, j));
                }
            }
            table.row([j.workload.as_str(), j.metric.name(), text.as_str(), &j.verdict_text()]);
        }
        out.push_str(&table.finish());
        let quiet = judged.iter().filter(|j| j.verdict == Verdict::NoMeasurableDifference).count();
        let _ = write!(out, "\n{} against {}: ", pair.again, pair.first);
        match largest {
            Some((r, j)) => {
                let _ = write!(out, "the largest A/A ratio is {r:.3} ({} on {}); ", j.metric.name(), j.workload);
            }
            None => out.push_str("no cell measured both; "),
        }
        let _ = writeln!(
            out,
            "{quiet} of {} cells got `no measurable difference`{}",
            judged.len(),
            if quiet == judged.len() {
                ", as an A/A pair should.".to_string()
            } else {
                ": the others moved with no change at all, so a difference of that size between a change and \
                 its baseline is not evidence here."
                    .to_string()
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{Kind, test_record};

    fn argv(targets: &[&str]) -> Vec<String> {
        let mut v = vec!["compare".to_string(), "--workloads".into(), "hello-bare".into()];
        for t in targets {
            v.extend(["--target".to_string(), t.to_string()]);
        }
        v
    }

    #[test]
    fn two_targets_with_one_command_are_a_pair_and_a_running_one_never_is() {
        let mut r = test_record("hello-bare", "before", Kind::Closed, 1);
        r.command =
            argv(&["before=cmd:./old --port {port}", "after=cmd:./new", "before-again=cmd:./old --port {port}"]);
        r.command
            .extend(["--target=live=http://127.0.0.1:8080".to_string(), "--target=live2=http://127.0.0.1:8080".into()]);
        let again = Record { runtime: "before-again".into(), ..r.clone() };
        assert_eq!(pairs(&[r.clone(), again]), [Pair { first: "before".into(), again: "before-again".into() }]);
        assert!(pairs(&[r]).is_empty(), "before-again has no records here");
    }

    #[test]
    fn the_section_states_the_largest_ratio_and_whether_the_pair_was_quiet() {
        let mut records = Vec::new();
        for round in 1..=3 {
            for (rt, rps) in [("before", 10_000.0), ("before-again", 10_000.0 + f64::from(round) * 100.0)] {
                let mut r = test_record("hello-bare", rt, Kind::Closed, round);
                r.command = argv(&["before=cmd:./old", "before-again=cmd:./old"]);
                r.req_per_s = Some(rps);
                r.server_cpu_us_per_resp = Some(10.0);
                records.push(r);
            }
        }
        let mut out = String::new();
        section(&mut out, &records);
        assert!(out.contains("## Noise floor (A/A)"), "{out}");
        assert!(out.contains("the largest A/A ratio is 1.020 (req_per_s on hello-bare)"), "{out}");
        assert!(out.contains("cells got `no measurable difference`"), "{out}");
        let mut none = String::new();
        section(&mut none, &records.iter().filter(|r| r.runtime == "before").cloned().collect::<Vec<_>>());
        assert!(none.is_empty(), "no pair, no section");
    }
}
