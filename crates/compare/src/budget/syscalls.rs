//! `strace -c` summaries read back: how many times each system call was made. The table's layout has been
//! the same since strace 4 (`% time  seconds  usecs/call  calls  errors  syscall`, a dashed rule, a `total`
//! row), and the errors column is blank for calls that never failed.

use std::collections::BTreeMap;

use anyhow::{Context, bail};

/// Calls per system call name, and their sum.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyscallCounts {
    pub by_name: BTreeMap<String, u64>,
}

impl SyscallCounts {
    pub fn total(&self) -> u64 {
        self.by_name.values().sum()
    }
}

/// Parses `strace -c -o FILE`'s table; the `total` row must equal the sum of the rows.
pub fn parse(text: &str) -> anyhow::Result<SyscallCounts> {
    let mut counts = SyscallCounts::default();
    let mut total: Option<u64> = None;
    let mut header = false;
    for (n, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"%") {
            header = true;
            continue;
        }
        if !header || words.is_empty() || words[0].starts_with('-') {
            continue;
        }
        let (Some(calls), Some(name)) = (words.get(3), words.last()) else {
            bail!("line {}: not a row of strace's table: {line:?}", n + 1);
        };
        if words.len() < 5 {
            bail!("line {}: not a row of strace's table: {line:?}", n + 1);
        }
        let calls: u64 = calls.parse().with_context(|| format!("line {}: calls {calls:?}", n + 1))?;
        if *name == "total" {
            total = Some(calls);
        } else {
            *counts.by_name.entry((*name).to_string()).or_default() += calls;
        }
    }
    if !header {
        bail!("no strace -c table (no `% time` header)");
    }
    match total {
        Some(t) if t == counts.total() => Ok(counts),
        Some(t) => bail!("the total row says {t} calls, the rows add up to {}", counts.total()),
        // strace prints no total row when nothing was called.
        None if counts.by_name.is_empty() => Ok(counts),
        None => bail!("no total row"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 54.03    0.133232           2     58200           sendto
 40.11    0.098901           1     58221         2 recvfrom
  5.86    0.014438           1      8412           epoll_wait
------ ----------- ----------- --------- --------- ----------------
100.00    0.246571           1    124833         2 total
";

    #[test]
    fn every_row_is_counted_with_or_without_errors_and_the_total_checks_them() {
        let c = parse(TABLE).expect("parses");
        assert_eq!(c.by_name["sendto"], 58200);
        assert_eq!(c.by_name["recvfrom"], 58221, "a row with an errors column");
        assert_eq!(c.total(), 124833);
    }

    #[test]
    fn a_total_that_disagrees_or_a_text_without_the_table_is_refused() {
        let bad = TABLE.replace("124833", "124834");
        assert!(parse(&bad).expect_err("total").to_string().contains("124834"));
        assert!(parse("strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted\n").is_err());
        let empty = "% time     seconds  usecs/call     calls    errors syscall\n------ -----\n";
        assert_eq!(parse(empty).expect("nothing called").total(), 0);
    }
}
