//! Where each response's CPU goes, per workload: the server tree's user and kernel time, and the PostgreSQL
//! and Redis compare started, each per response over the same closed-loop windows. A server that moves work
//! into its database (or answers from a cache the others do not have) looks cheap in CPU-µs/resp alone; the
//! total is what a machine pays for the response. compare's upstream service (the upstream workloads) stands
//! for another team's service: its CPU is shown beside the total, never in it.

use std::fmt::Write as _;

use crate::format::fmt_median;
use crate::records::{Kind, Record, ordered};
use crate::reference;
use crate::stats::spread;
use crate::table::Table;

fn kernel_us(r: &Record) -> Option<f64> {
    Some(r.server_cpu_us_per_resp? * r.server_kernel_pct? / 100.0)
}

fn user_us(r: &Record) -> Option<f64> {
    Some(r.server_cpu_us_per_resp? - kernel_us(r)?)
}

/// Server and databases together; a database the workload does not use counts as none.
fn total_us(r: &Record) -> Option<f64> {
    Some(r.server_cpu_us_per_resp? + r.postgres_cpu_us_per_resp.unwrap_or(0.0) + r.redis_cpu_us_per_resp.unwrap_or(0.0))
}

/// The table of one workload's closed-loop runs, when any carries the split (records from before it was
/// kept have none).
pub fn table(out: &mut String, records: &[Record], workload: &str, reference: &str) {
    let ok: Vec<&Record> =
        records.iter().filter(|r| r.workload == workload && r.kind == Kind::Closed && !r.void).collect();
    if !ok.iter().any(|r| r.server_kernel_pct.is_some()) {
        return;
    }
    let with_dbs = ok.iter().any(|r| r.postgres_cpu_us_per_resp.is_some() || r.redis_cpu_us_per_resp.is_some());
    let with_upstream = ok.iter().any(|r| r.upstream_cpu_us_per_resp.is_some());
    let _ = writeln!(
        out,
        "\nWhere the CPU goes (closed loop, CPU-µs per response, medians): the server's process tree in user \
         space and in the kernel{}.\n",
        if with_dbs { ", and the PostgreSQL and Redis compare started, over the same windows" } else { "" }
    );
    if with_upstream {
        out.push_str(
            "The upstream column is compare's upstream service answering the handlers' calls: reported, not in the \
             total.\n\n",
        );
    }
    let mut head = vec!["runtime", "server user", "server kernel", "kernel share"];
    if with_dbs {
        head.extend(["PostgreSQL", "Redis"]);
    }
    let total_ratio = format!("total ÷ {reference}");
    head.extend(["total", &total_ratio]);
    if with_upstream {
        head.push("upstream");
    }
    let mut table = Table::new(head);
    for rt in ordered(ok.iter().map(|r| r.runtime.as_str())) {
        let of: Vec<&&Record> = ok.iter().filter(|r| r.runtime == rt).collect();
        let median = |f: fn(&Record) -> Option<f64>, digits: usize| {
            fmt_median(spread(of.iter().filter_map(|r| f(r))), digits, 1.0)
        };
        let ratio = reference::ratio_cell(records, workload, Kind::Closed, &rt, reference, total_us);
        let mut row = vec![
            rt.clone(),
            median(user_us, 2),
            median(kernel_us, 2),
            format!("{}%", median(|r| r.server_kernel_pct, 0)),
        ];
        if with_dbs {
            row.extend([median(|r| r.postgres_cpu_us_per_resp, 2), median(|r| r.redis_cpu_us_per_resp, 2)]);
        }
        row.extend([median(total_us, 2), ratio]);
        if with_upstream {
            row.push(median(|r| r.upstream_cpu_us_per_resp, 2));
        }
        table.row(&row);
    }
    out.push_str(&table.finish());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_record;

    fn rec(rt: &str, round: u32, cpu: f64, kernel_pct: f64, pg: Option<f64>) -> Record {
        let mut r = test_record("notes-read", rt, Kind::Closed, round);
        (r.server_cpu_us_per_resp, r.server_kernel_pct, r.postgres_cpu_us_per_resp) = (Some(cpu), Some(kernel_pct), pg);
        r.redis_cpu_us_per_resp = pg.map(|_| 1.0);
        r
    }

    #[test]
    fn splits_and_totals() {
        let records = vec![rec("rust", 1, 20.0, 50.0, Some(10.0)), rec("bun", 1, 40.0, 25.0, Some(19.0))];
        let mut out = String::new();
        table(&mut out, &records, "notes-read", "rust");
        assert!(
            out.contains("| runtime | server user | server kernel | kernel share | PostgreSQL | Redis | total |"),
            "{out}"
        );
        assert!(out.contains("| rust | 10.00 | 10.00 | 50% | 10.00 | 1.00 | 31.00 | — |"), "{out}");
        assert!(out.contains("| bun | 30.00 | 10.00 | 25% | 19.00 | 1.00 | 60.00 | 1.94 |"), "{out}");
        let plain = vec![rec("rust", 1, 8.0, 50.0, None)];
        let mut out = String::new();
        table(&mut out, &plain, "notes-read", "rust");
        assert!(out.contains("| rust | 4.00 | 4.00 | 50% | 8.00 | — |"), "{out}");
        let mut old = rec("rust", 1, 8.0, 50.0, None);
        old.server_kernel_pct = None;
        let mut none = String::new();
        table(&mut none, &[old], "notes-read", "rust");
        assert!(none.is_empty(), "records without the split get no table");
        let mut calling = rec("rust", 1, 8.0, 50.0, None);
        calling.upstream_cpu_us_per_resp = Some(3.0);
        let mut out = String::new();
        table(&mut out, &[calling], "notes-read", "rust");
        assert!(out.contains("| rust | 4.00 | 4.00 | 50% | 8.00 | — | 3.00 |"), "{out}");
    }
}
