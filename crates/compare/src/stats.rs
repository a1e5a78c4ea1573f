//! The statistics every report uses: the median of some runs' values, and their spread (median, min, max).
//! Non-finite values (a run that measured nothing) are left out, so one bad run cannot poison a figure.

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
}
