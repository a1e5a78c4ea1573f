//! The duration syntax of every binary's flags (loadgen's `-d`, compare's, upstream's `--delay`,
//! delay-proxy's `--rtt`), so `500us` or `2m` means the same everywhere.

use std::fmt;
use std::time::Duration;

/// Why a duration was refused. Its message is one line for the user, naming the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// No number where one was expected.
    Number(String),
    /// A unit other than us, µs, ms, s, m or h.
    Unit(String),
    /// Negative, or not a finite number.
    Invalid(String),
    /// More seconds than a `Duration` holds (`99999999999999999999h`): refused, not a panic.
    TooLong(String),
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Number(raw) => write!(f, "invalid duration {raw:?} (e.g. 10s, 500ms, 2m)"),
            DurationError::Unit(raw) => write!(f, "invalid duration unit in {raw:?} (use us, ms, s, m or h)"),
            DurationError::Invalid(raw) => write!(f, "invalid duration {raw:?}"),
            DurationError::TooLong(raw) => write!(f, "duration {raw:?} is too long"),
        }
    }
}

impl std::error::Error for DurationError {}

/// `10s`, `500ms`, `2m`, `1h`, `250us` (or `µs`); a bare number is seconds (as in wrk).
pub fn parse_duration(raw: &str) -> Result<Duration, DurationError> {
    let raw = raw.trim();
    let split = raw.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(raw.len());
    let (number, unit) = raw.split_at(split);
    let value: f64 = number.parse().map_err(|_| DurationError::Number(raw.to_string()))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(DurationError::Unit(raw.to_string())),
    };
    if !seconds.is_finite() || seconds < 0.0 {
        return Err(DurationError::Invalid(raw.to_string()));
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| DurationError::TooLong(raw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_wrk() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5x").is_err());
    }

    #[test]
    fn bad_durations_say_what_is_wrong_and_a_huge_one_is_refused_not_a_panic() {
        assert_eq!(parse_duration("ten"), Err(DurationError::Number("ten".into())));
        assert_eq!(
            parse_duration("5x").map_err(|e| e.to_string()),
            Err("invalid duration unit in \"5x\" (use us, ms, s, m or h)".into())
        );
        assert_eq!(
            parse_duration("99999999999999999999h"),
            Err(DurationError::TooLong("99999999999999999999h".into()))
        );
        assert_eq!(parse_duration("1.2.3s"), Err(DurationError::Number("1.2.3s".into())));
    }
}
