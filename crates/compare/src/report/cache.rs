//! metadata-cached's cache: each runtime's hit ratio over its windows, and the rule that keeps the comparison
//! like with like. Every runtime runs the same cache-aside against the same load from an empty cache, so its
//! hit ratio should match rust's; one more than [`MAX_GAP_POINTS`] away (a peer that misses its writes, keys
//! that differ, a TTL that expires) did other work, and its run is void. The rule reads the records alone,
//! so `compare report` applies it to old files the same way.

use std::fmt::Write as _;

use crate::format::fmt_median;
use crate::records::{Kind, Record, ordered};
use crate::stats::spread;
use crate::table::Table;

/// How far a runtime's hit ratio may be from rust's in the same round, in percentage points.
pub const MAX_GAP_POINTS: f64 = 5.0;

fn hit_pct(r: &Record) -> Option<f64> {
    r.cache.and_then(|c| c.hit_pct())
}

/// The records, with every run whose hit ratio is more than [`MAX_GAP_POINTS`] from rust's run of the same
/// round (same workload, kind and connections) void, saying both ratios.
pub fn void_mismatched(records: &[Record]) -> Vec<Record> {
    let rust_pct = |r: &Record| {
        records
            .iter()
            .find(|x| {
                x.runtime == "rust"
                    && !x.void
                    && (&x.run_id, &x.workload, x.kind, x.round, x.connections)
                        == (&r.run_id, &r.workload, r.kind, r.round, r.connections)
            })
            .and_then(hit_pct)
    };
    records
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if let (false, Some(own), Some(rust)) = (r.runtime == "rust", hit_pct(&r), rust_pct(&r))
                && (own - rust).abs() > MAX_GAP_POINTS
            {
                r.void_because(format!(
                    "cache hit ratio {own:.1}% against rust's {rust:.1}% in the same round, more than \
                     {MAX_GAP_POINTS} points apart: not the same work"
                ));
            }
            r
        })
        .collect()
}

/// The hit ratios of a workload's closed-loop runs, when they were measured.
pub fn table(out: &mut String, records: &[Record], workload: &str) {
    let ok: Vec<&Record> =
        records.iter().filter(|r| r.workload == workload && r.kind == Kind::Closed && !r.void).collect();
    if !ok.iter().any(|r| r.cache.is_some()) {
        return;
    }
    let _ = writeln!(
        out,
        "\nThe cache (closed loop, medians; Redis's keyspace hits and misses over each window): a run more than \
         {MAX_GAP_POINTS} points from rust's hit ratio in its round is void.\n"
    );
    let mut table = Table::new(["runtime", "hit ratio %", "lookups per response"]);
    for rt in ordered(ok.iter().map(|r| r.runtime.as_str())) {
        let of: Vec<&&Record> = ok.iter().filter(|r| r.runtime == rt).collect();
        let lookups =
            |r: &Record| Some((r.cache?.hits + r.cache?.misses) as f64 / r.requests.filter(|&n| n > 0)? as f64);
        table.row([
            rt.as_str(),
            &fmt_median(spread(of.iter().filter_map(|r| hit_pct(r))), 1, 1.0),
            &fmt_median(spread(of.iter().filter_map(|r| lookups(r))), 2, 1.0),
        ]);
    }
    out.push_str(&table.finish());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{CacheSeen, test_record};

    fn run(rt: &str, round: u32, hits: u64, misses: u64) -> Record {
        let mut r = test_record("metadata-cached", rt, Kind::Closed, round);
        r.cache = Some(CacheSeen { hits, misses });
        r.requests = Some(hits + misses);
        r
    }

    #[test]
    fn a_ratio_far_from_rusts_in_its_round_is_void() {
        let records = vec![
            run("rust", 1, 90, 10),
            run("bun", 1, 86, 14),  // 4 points: the same work
            run("node", 1, 50, 50), // 40 points: not
            run("node", 2, 50, 50), // no rust in round 2: nothing to judge against
        ];
        let judged = void_mismatched(&records);
        assert!(!judged[0].void && !judged[1].void && !judged[3].void);
        assert!(judged[2].void);
        let why = judged[2].void_reason.as_deref().unwrap_or_default();
        assert!(why.contains("cache hit ratio 50.0% against rust's 90.0%"), "{why}");

        let mut out = String::new();
        table(&mut out, &judged, "metadata-cached");
        assert!(out.contains("| rust | 90.0 | 1.00 |"), "{out}");
        assert!(out.contains("| bun | 86.0 | 1.00 |"), "{out}");
        assert!(out.contains("| node | 50.0 | 1.00 |"), "{out}");
    }
}
