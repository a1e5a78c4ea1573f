//! Text shared by the Markdown renderers (the comparison, soaks, capacity, calibration, images): numbers with
//! thousands separators, spreads as table cells, and argv quoted so a recorded command can be pasted back
//! into a shell.

use crate::stats::Spread;

/// `1234567.8` → `1,234,568` (digits after the point as asked).
pub fn num(v: f64, digits: usize) -> String {
    let s = format!("{:.*}", digits, v.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), None), |(i, f)| (i, Some(f)));
    let grouped = textfmt::group_digits(int);
    let sign = if v < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') { "-" } else { "" };
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// A spread for a table cell: the median, then (min–max) when there was more than one value; "—" for none.
/// `scale` converts units (1e-3 for µs to ms).
pub fn fmt_spread(s: Option<Spread>, digits: usize, scale: f64) -> String {
    match s {
        None => "—".into(),
        Some(s) if s.n == 1 => num(s.median * scale, digits),
        Some(s) => {
            format!("{} ({}–{})", num(s.median * scale, digits), num(s.min * scale, digits), num(s.max * scale, digits))
        }
    }
}

/// The median alone, or "—".
pub fn fmt_median(s: Option<Spread>, digits: usize, scale: f64) -> String {
    s.map_or("—".into(), |s| num(s.median * scale, digits))
}

/// Quotes an argv for a shell, so the command can be pasted back.
pub fn shell_join(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
            if plain { a.clone() } else { format!("'{}'", a.replace('\'', r"'\''")) }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_get_thousands_separators_and_fixed_decimals() {
        assert_eq!(num(1234567.8, 0), "1,234,568");
        assert_eq!(num(999.0, 1), "999.0");
        assert_eq!(num(1000.0, 2), "1,000.00");
        assert_eq!(num(-1234.5, 1), "-1,234.5");
        assert_eq!(num(0.0004, 3), "0.000");
    }

    #[test]
    fn argv_is_joined_into_a_shell_line_that_reads_back_the_same() {
        let argv = ["compare", "--runtimes", "rust,bun", "--body", r#"{"a":"b c"}"#, "it's"].map(String::from);
        assert_eq!(shell_join(&argv), r#"compare --runtimes rust,bun --body '{"a":"b c"}' 'it'\''s'"#);
    }

    #[test]
    fn a_word_is_quoted_only_when_the_shell_would_split_or_expand_it() {
        let one = |w: &str| shell_join(&[w.to_string()]);
        assert_eq!(one("--body"), "--body");
        assert_eq!(one(r#"{"a":1}"#), r#"'{"a":1}'"#);
        assert_eq!(one("it's"), r"'it'\''s'");
    }
}
