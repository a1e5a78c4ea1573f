//! The DB-only table (metadata's lookup-and-build loop per runtime, `run::lookups`): lookups a second, µs per
//! lookup and the per-round ratio to the reference, then the same for the loop's inserts.

use std::fmt::Write as _;

use crate::format::{fmt_median, fmt_spread, num};
use crate::records::{Kind, Record};
use crate::reference;
use crate::stats::spread;
use crate::table::Table;

fn ops(r: &Record) -> Option<f64> {
    r.lookups.map(|l| l.ops_per_s)
}

fn inserts(r: &Record) -> Option<f64> {
    r.lookups?.inserts.map(|i| i.ops_per_s)
}

/// The DB-only table of one workload, when it has lookups records.
pub fn table(out: &mut String, records: &[Record], workload: &str, reference: &str) {
    let mine: Vec<&Record> = records.iter().filter(|r| r.workload == workload && r.kind == Kind::Lookups).collect();
    if mine.is_empty() {
        return;
    }
    let iterations = mine.iter().find_map(|r| r.lookups.map(|l| l.iterations)).unwrap_or(0);
    let _ = writeln!(
        out,
        "\nDB-only: the lookup and the JSON build in a loop, no HTTP ({} lookups a run after a tenth as \
         many untimed; each runtime's own SQLite binding on the same file, pinned to the server cores):\n",
        num(iterations as f64, 0)
    );
    let ratio_head = format!("lookups/s ÷ {reference}");
    let mut table = Table::new(["runtime", "lookups/s", "µs/lookup", ratio_head.as_str(), "valid runs"]);
    let runtimes = crate::records::ordered(mine.iter().map(|r| r.runtime.as_str()));
    let rows = |table: &mut Table, rate: fn(&Record) -> Option<f64>| {
        for rt in &runtimes {
            let of: Vec<&&Record> = mine.iter().filter(|r| &r.runtime == rt).collect();
            let ok: Vec<f64> = of.iter().filter(|r| !r.void).filter_map(|r| rate(r)).collect();
            let per_s = spread(ok.iter().copied());
            let us = spread(ok.iter().map(|o| 1e6 / o));
            let ratio = reference::ratio_cell(records, workload, Kind::Lookups, rt, reference, rate);
            let valid = format!("{}/{}", ok.len(), of.len());
            table.row([rt.as_str(), &fmt_spread(per_s, 0, 1.0), &fmt_median(us, 2, 1.0), &ratio, &valid]);
        }
    };
    rows(&mut table, ops);
    out.push_str(&table.finish());
    let Some(count) = mine.iter().find_map(|r| r.lookups?.inserts.map(|i| i.inserts)) else { return };
    let _ = writeln!(
        out,
        "\nThe same runs' inserts ({} single-row INSERTs a run, each its own transaction, through one prepared \
         statement into a new WAL file with synchronous off, after a tenth as many untimed; a run whose rows, \
         read back, differ from rust's in its round is void):\n",
        num(count as f64, 0)
    );
    let ratio_head = format!("inserts/s ÷ {reference}");
    let mut table = Table::new(["runtime", "inserts/s", "µs/insert", ratio_head.as_str(), "valid runs"]);
    rows(&mut table, inserts);
    out.push_str(&table.finish());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_lookup_record as rec;

    #[test]
    fn table_per_runtime() {
        let records = vec![rec("rust", 1, 200_000.0, 10), rec("bun", 1, 100_000.0, 10), rec("rust", 2, 180_000.0, 10)];
        let mut out = String::new();
        table(&mut out, &records, "metadata", "rust");
        assert!(out.contains("| rust | 190,000 (180,000–200,000) | 5.28 | — | 2/2 |"), "{out}");
        assert!(out.contains("| bun | 100,000 | 10.00 | 0.50 | 1/1 |"), "{out}");
        assert!(!out.contains("inserts"), "no insert table without insert runs: {out}");
        let mut none = String::new();
        table(&mut none, &records, "hello-bare", "rust");
        assert!(none.is_empty());
    }

    #[test]
    fn insert_table_beside_the_lookups() {
        use crate::records::test_insert_record as ins;
        let records = vec![ins("rust", 1, 400_000.0, 1), ins("bun", 1, 200_000.0, 1), ins("node", 1, 100_000.0, 1)];
        let mut out = String::new();
        table(&mut out, &records, "metadata", "node");
        assert!(out.contains("| runtime | inserts/s | µs/insert | inserts/s ÷ node | valid runs |"), "{out}");
        assert!(out.contains("| bun | 200,000 | 5.00 | 2.00 | 1/1 |"), "{out}");
        assert!(out.contains("(1,000 single-row INSERTs a run"), "{out}");
    }
}
