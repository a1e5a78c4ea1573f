//! The runtime every ratio, overview, chart and verdict is taken against: rust unless `compare report
//! --reference` or `compare verdict --reference` names another (`node`, to read every runtime against Node).
//! Every table asks for its ratio cells here, so "÷ rust" is one decision, not one per table.

use crate::format::fmt_median;
use crate::records::{Kind, Record};
use crate::stats::per_round_ratio;

/// The reference when none is named: our release binaries.
pub const DEFAULT: &str = "rust";

/// The pair the published posts are about, judged in every summary beside the reference's overview:
/// Bun's figures over Node's.
pub const POSTS_PAIR: (&str, &str) = ("bun", "node");

/// A ratio cell: the median over rounds of `runtime`'s `metric` ÷ `reference`'s on `workload`'s valid `kind`
/// runs of the same round (crate::stats::per_round_ratio), two decimals; `—` for the reference itself and
/// wherever no round measured both.
pub fn ratio_cell(
    records: &[Record],
    workload: &str,
    kind: Kind,
    runtime: &str,
    reference: &str,
    metric: fn(&Record) -> Option<f64>,
) -> String {
    if runtime == reference {
        return "—".into();
    }
    fmt_median(per_round_ratio(records, workload, kind, runtime, reference, metric), 2, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_record;

    #[test]
    fn ratio_cells_against_any_reference() {
        let rec = |rt: &str, rps: f64| {
            let mut r = test_record("hello-bare", rt, Kind::Closed, 1);
            r.req_per_s = Some(rps);
            r
        };
        let records = [rec("rust", 200.0), rec("bun", 100.0), rec("node", 50.0)];
        let rps = |r: &Record| r.req_per_s;
        assert_eq!(ratio_cell(&records, "hello-bare", Kind::Closed, "bun", DEFAULT, rps), "0.50");
        assert_eq!(ratio_cell(&records, "hello-bare", Kind::Closed, "bun", "node", rps), "2.00");
        assert_eq!(ratio_cell(&records, "hello-bare", Kind::Closed, "node", "node", rps), "—");
        assert_eq!(ratio_cell(&records, "hello-bare", Kind::Closed, "bun", "koa", rps), "—", "koa never ran");
    }
}
