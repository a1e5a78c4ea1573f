//! The statistics every report uses: the median of some runs' values, their spread (median, min, max), and
//! the median of per-round ratios between two runtimes. Non-finite values (a run that measured nothing) are
//! left out, so one bad run cannot poison a figure.

use std::collections::BTreeMap;

use crate::records::{Kind, Record};

/// Median, min and max of some runs' values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

/// The finite values, sorted.
fn sorted(values: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The middle of sorted values (the mean of the two middle ones for an even count).
fn middle(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// `None` without a finite value.
pub fn spread(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
    let v = sorted(values);
    let (&min, &max) = (v.first()?, v.last()?);
    Some(Spread { median: middle(&v), min, max, n: v.len() })
}

/// `None` without a finite value.
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let v = sorted(values);
    (!v.is_empty()).then(|| middle(&v))
}

/// Median over rounds of `metric(num) / metric(den)`, from valid `kind` records of the same round of the
/// same run: both measured in one interleaved round, so drift between rounds cancels.
pub fn per_round_ratio(
    records: &[Record],
    workload: &str,
    kind: Kind,
    num: &str,
    den: &str,
    metric: fn(&Record) -> Option<f64>,
) -> Option<Spread> {
    // (run, round) → (numerator's value, denominator's value).
    type Pair = (Option<f64>, Option<f64>);
    let mut by_round: BTreeMap<(&str, u32), Pair> = BTreeMap::new();
    for r in records.iter().filter(|r| r.workload == workload && r.kind == kind && !r.void) {
        let slot = by_round.entry((r.run_id.as_str(), r.round)).or_default();
        if r.runtime == num {
            slot.0 = metric(r);
        }
        if r.runtime == den {
            slot.1 = metric(r);
        }
    }
    spread(by_round.values().filter_map(|(a, b)| match (a, b) {
        (Some(a), Some(b)) if *b > 0.0 => Some(a / b),
        _ => None,
    }))
}

/// `v` rotated left by `k`: round k starts with the k-th runtime, so no runtime always goes first.
pub fn rotated<T: Clone>(v: &[T], k: usize) -> Vec<T> {
    if v.is_empty() {
        return Vec::new();
    }
    let k = k % v.len();
    v[k..].iter().chain(&v[..k]).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_spreads() {
        assert_eq!(median([3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median([4.0, 1.0]), Some(2.5));
        assert_eq!(median([f64::NAN, 1.0]), Some(1.0));
        assert_eq!(median([]), None);
        assert_eq!(spread([3.0, 1.0, 2.0]), Some(Spread { median: 2.0, min: 1.0, max: 3.0, n: 3 }));
        assert_eq!(spread([4.0, 1.0]).map(|s| s.median), Some(2.5));
        assert_eq!(spread([f64::INFINITY]), None);
    }

    #[test]
    fn rotated_starts_at_the_offset_modulo_the_length() {
        assert_eq!(rotated(&[1, 2, 3], 0), [1, 2, 3]);
        assert_eq!(rotated(&[1, 2, 3], 1), [2, 3, 1]);
        assert_eq!(rotated(&[1, 2, 3], 5), [3, 1, 2]);
        assert!(rotated::<u8>(&[], 1).is_empty());
    }
}
