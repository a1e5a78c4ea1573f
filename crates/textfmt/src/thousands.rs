//! Numbers with a comma between each group of three digits, as the reports and charts print counts.

/// `812000` → `812,000`.
pub fn thousands(n: u64) -> String {
    group_digits(&n.to_string())
}

/// `1234567.4` → `1,234,567`: rounded to a whole number, and negatives (never meant in a chart's labels)
/// shown as 0.
pub fn thousands_rounded(v: f64) -> String {
    group_digits(&format!("{:.0}", v.max(0.0)))
}

/// A run of ASCII digits with a comma before each group of three from the right (`"1234"` → `"1,234"`), for
/// callers that format the digits themselves (a sign or a fraction around them is theirs to add).
pub fn group_digits(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_group_by_three_from_the_right() {
        let cases = [(0, "0"), (999, "999"), (1000, "1,000"), (1_234_567, "1,234,567"), (812_000, "812,000")];
        for (n, text) in cases {
            assert_eq!(thousands(n), text);
        }
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn floats_round_to_whole_numbers_and_negatives_show_as_zero() {
        assert_eq!(thousands_rounded(1_234_567.4), "1,234,567");
        assert_eq!(thousands_rounded(999.5), "1,000");
        assert_eq!(thousands_rounded(12.0), "12");
        assert_eq!(thousands_rounded(0.0), "0");
        assert_eq!(thousands_rounded(-5.0), "0");
    }

    #[test]
    fn digit_runs_group_as_given() {
        assert_eq!(group_digits(""), "");
        assert_eq!(group_digits("123"), "123");
        assert_eq!(group_digits("1234"), "1,234");
        assert_eq!(group_digits("0001"), "0,001");
    }
}
