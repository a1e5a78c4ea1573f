//! The open-loop rate (steady, or a linear ramp) and the arrival schedule that spaces the sends. The workers
//! pace their sends by it, the per-second lines show what it asked for, and the report records its mean.

use std::time::Duration;

/// An open-loop rate in requests per second: steady (`start == end`) or a ramp from `start` to `end`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub start: f64,
    pub end: f64,
}

impl Rate {
    pub fn steady(rate: f64) -> Rate {
        Rate { start: rate, end: rate }
    }

    pub fn is_ramp(&self) -> bool {
        self.start != self.end
    }

    /// The rate `elapsed` into the measured window of a ramp taking `ramp` (before the window: `start`).
    pub fn at(&self, elapsed: f64, ramp: Option<Duration>) -> f64 {
        match ramp {
            Some(ramp) if !ramp.is_zero() => {
                let done = (elapsed / ramp.as_secs_f64()).clamp(0.0, 1.0);
                self.start + (self.end - self.start) * done
            }
            _ => self.end,
        }
    }

    /// The mean rate over a window of `window` seconds that starts with the ramp.
    pub fn mean(&self, window: f64, ramp: Option<Duration>) -> f64 {
        let ramp = ramp.map_or(0.0, |r| r.as_secs_f64()).min(window);
        if window <= 0.0 {
            return self.end;
        }
        ((self.start + self.end) / 2.0 * ramp + self.end * (window - ramp)) / window
    }

    /// Each of `threads` workers' share.
    pub fn split(&self, threads: usize) -> Rate {
        let n = threads.max(1) as f64;
        Rate { start: self.start / n, end: self.end / n }
    }

    /// `20000` or `1000:20000` (requests per second, positive): the syntax of `-R`.
    pub fn parse(raw: &str) -> Result<Rate, RateError> {
        let number = |text: &str| match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
            _ => Err(RateError { raw: raw.to_string() }),
        };
        match raw.split_once(':') {
            Some((start, end)) => Ok(Rate { start: number(start)?, end: number(end)? }),
            None => number(raw).map(Rate::steady),
        }
    }
}

/// A `-R` value that is not a rate (the whole value is named, even when only one side of `START:END` is bad).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid rate {raw:?}: a positive number of requests per second, or START:END")]
pub struct RateError {
    pub raw: String,
}

/// How open-loop sends are spaced: evenly, or as a Poisson process (exponential gaps, the same mean).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    Uniform,
    Poisson,
}

impl Schedule {
    /// The name the command line and the report use.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Uniform => "uniform",
            Schedule::Poisson => "poisson",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramps_move_linearly_and_average_over_the_window() {
        let ramp = Rate { start: 100.0, end: 1100.0 };
        let over = Some(Duration::from_secs(10));
        assert_eq!(ramp.at(-1.0, over), 100.0);
        assert_eq!(ramp.at(5.0, over), 600.0);
        assert_eq!(ramp.at(30.0, over), 1100.0);
        assert_eq!(ramp.mean(10.0, over), 600.0);
        assert_eq!(ramp.mean(20.0, over), 850.0);
        assert_eq!(Rate::steady(50.0).mean(7.0, None), 50.0);
        assert_eq!(ramp.split(2), Rate { start: 50.0, end: 550.0 });
    }

    #[test]
    fn rates_parse_steady_or_as_a_ramp_and_anything_else_is_named_in_the_error() {
        assert_eq!(Rate::parse("200"), Ok(Rate::steady(200.0)));
        assert_eq!(Rate::parse("100:1000"), Ok(Rate { start: 100.0, end: 1000.0 }));
        for bad in ["0", "-5", "x", "100:", ":5", "1:0", "nan"] {
            assert_eq!(Rate::parse(bad), Err(RateError { raw: bad.to_string() }), "{bad}");
        }
        assert_eq!(
            Rate::parse("1:0").map_err(|e| e.to_string()),
            Err("invalid rate \"1:0\": a positive number of requests per second, or START:END".to_string())
        );
    }
}
