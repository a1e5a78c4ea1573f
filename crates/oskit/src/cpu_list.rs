//! CPU lists in taskset's syntax (`1`, `0,2`, `2-3`, `0,2,4-5`), read by loadgen's `--pin` and compare's core
//! flags with one rule: every comma-separated item is a CPU or an ascending range, so an empty item (`1,`,
//! `,1`, `1,,2`) is refused rather than skipped, since it is more likely a list cut short than meant.

/// Why a CPU list was refused; each caller words it for its own flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    #[error("empty CPU list")]
    Empty,
    #[error("bad item {0:?} (a CPU or an ascending range; e.g. 1, 2-3, 0,2)")]
    BadItem(String),
    #[error("CPU {0} is past any CPU Linux numbers (at most {MAX_CPU})")]
    TooHigh(usize),
}

/// The highest CPU number taken: Linux numbers at most 8,192 CPUs (NR_CPUS), so anything past this is a typo,
/// and refusing it keeps `0-4000000000` from expanding into a list of billions.
pub const MAX_CPU: usize = 65_535;

/// The CPUs of `text` in the order written, ranges expanded (`"0,2-3"` → `[0, 2, 3]`); spaces around items
/// and around a range's dash are allowed.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, CpuListError> {
    if text.trim().is_empty() {
        return Err(CpuListError::Empty);
    }
    let mut cpus = Vec::new();
    for item in text.split(',').map(str::trim) {
        let bad = || CpuListError::BadItem(item.to_string());
        let (first, last) = item.split_once('-').unwrap_or((item, item));
        let first: usize = first.trim().parse().map_err(|_| bad())?;
        let last: usize = last.trim().parse().map_err(|_| bad())?;
        if first > last {
            return Err(bad());
        }
        if last > MAX_CPU {
            return Err(CpuListError::TooHigh(last));
        }
        cpus.extend(first..=last);
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_cpus_lists_and_ranges_expand_in_order() {
        assert_eq!(parse_cpu_list("1"), Ok(vec![1]));
        assert_eq!(parse_cpu_list("0,2"), Ok(vec![0, 2]));
        assert_eq!(parse_cpu_list("0-3"), Ok(vec![0, 1, 2, 3]));
        assert_eq!(parse_cpu_list("4-5,0, 2 - 2"), Ok(vec![4, 5, 0, 2]));
    }

    #[test]
    fn empty_items_are_refused_wherever_they_are() {
        for bad in ["1,", ",1", "1,,2", ","] {
            assert_eq!(parse_cpu_list(bad), Err(CpuListError::BadItem(String::new())), "{bad:?}");
        }
        assert_eq!(parse_cpu_list(""), Err(CpuListError::Empty));
        assert_eq!(parse_cpu_list("  "), Err(CpuListError::Empty));
    }

    #[test]
    fn a_cpu_past_any_linux_numbers_is_refused_before_a_range_expands() {
        assert_eq!(parse_cpu_list("0-4000000000"), Err(CpuListError::TooHigh(4_000_000_000)));
        assert_eq!(parse_cpu_list("65536"), Err(CpuListError::TooHigh(65_536)));
        assert_eq!(parse_cpu_list("65535").map(|c| c.len()), Ok(1));
    }

    #[test]
    fn descending_ranges_and_non_numbers_are_refused() {
        for bad in ["3-1", "a", "1-", "-1", "1-2-3", "1.5", "x,1"] {
            assert!(matches!(parse_cpu_list(bad), Err(CpuListError::BadItem(_))), "{bad:?}");
        }
    }
}
