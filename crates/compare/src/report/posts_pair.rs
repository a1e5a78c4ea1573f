//! The posts' pair, Bun against Node, judged at every condition a workload ran beyond its headline: each
//! connection count of a sweep, each round trip of `--db-rtt`. The overviews judge the headline count and the
//! least round trip only; this table gives the others a verdict by the same rule, so where the posts' speedup
//! holds and where it disappears is read from the rule, not from the ratios by eye.

use std::fmt::Write as _;

use crate::records::{Kind, Record};
use crate::reference;
use crate::report::overview;
use crate::table::Table;
use crate::verdict::{self, Metric};

/// One condition: the values of its label columns, and the workload's records cut to it (every run's).
pub struct Condition {
    pub label: Vec<String>,
    pub records: Vec<Record>,
}

/// How a metric heads its columns.
fn short(metric: Metric) -> &'static str {
    match metric {
        Metric::ReqPerS => "req/s",
        Metric::CpuUsPerResp => "CPU",
        Metric::P50Ms => "p50",
        Metric::P99Ms => "p99",
        Metric::P999Ms => "p99.9",
        other => other.name(),
    }
}

/// The table for `w` over `conditions` (headed `label_heads`), closed loop, one ratio and verdict column pair
/// per metric; nothing when no condition has both runtimes of the pair.
pub fn table(out: &mut String, w: &str, label_heads: &[&str], conditions: &[Condition], metrics: &[Metric]) {
    let (bun, node) = reference::POSTS_PAIR;
    let judged: Vec<(&Condition, Vec<Option<verdict::Judgement>>)> = conditions
        .iter()
        .map(|c| (c, metrics.iter().map(|m| verdict::judge_pair(&c.records, w, bun, node, *m, Kind::Closed)).collect()))
        .filter(|(_, js): &(&Condition, Vec<Option<verdict::Judgement>>)| js.iter().any(Option::is_some))
        .collect();
    if judged.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{} against {} at each of them (closed loop): {bun}'s value over {node}'s, the median of per-round \
         ratios in each run read (separated by `/`), and the repeatability rule's verdict on that condition's \
         rounds alone.\n",
        overview::capitalized(bun),
        overview::capitalized(node)
    );
    let mut heads: Vec<String> = label_heads.iter().map(|h| h.to_string()).collect();
    for m in metrics {
        heads.push(format!("{bun} ÷ {node} {}", short(*m)));
        heads.push(format!("{} verdict", short(*m)));
    }
    let mut table = Table::new(heads.iter().map(String::as_str));
    for (condition, judgements) in judged {
        let mut row = condition.label.clone();
        for j in &judgements {
            row.push(overview::ratios_text(j.as_ref()));
            row.push(j.as_ref().map_or("—".into(), overview::verdict_text));
        }
        table.row(row.iter().map(String::as_str));
    }
    out.push_str(&table.finish());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_record;

    fn run(rt: &str, round: u32, rps: f64) -> Record {
        let mut r = test_record("ladder-postgres", rt, Kind::Closed, round);
        r.req_per_s = Some(rps);
        r
    }

    #[test]
    fn a_verdict_per_condition_and_none_without_the_pair() {
        let apart = |rps_bun: f64| (1..=3).flat_map(move |i| [run("bun", i, rps_bun), run("node", i, 1000.0)]);
        let conditions = vec![
            Condition { label: vec!["1.0".into()], records: apart(2000.0).collect() },
            Condition { label: vec!["10.0".into()], records: apart(1010.0).collect() },
            Condition { label: vec!["40.0".into()], records: vec![run("rust", 1, 5.0)] },
        ];
        let mut out = String::new();
        table(&mut out, "ladder-postgres", &["round trip ms"], &conditions, &[Metric::ReqPerS]);
        assert!(out.contains("Bun against Node at each of them"), "{out}");
        assert!(out.contains("| round trip ms | bun ÷ node req/s | req/s verdict |"), "{out}");
        assert!(out.contains("| 1.0 | 2.00 | not reproduced: node worse in this run, (b) pending |"), "{out}");
        assert!(out.contains("| 10.0 | 1.01 | no measurable difference: (c) within 10% |"), "{out}");
        assert!(!out.contains("| 40.0 |"), "a condition without the pair has no row: {out}");
        let mut none = String::new();
        table(&mut none, "ladder-postgres", &["round trip ms"], &conditions[2..], &[Metric::ReqPerS]);
        assert!(none.is_empty());
    }
}
