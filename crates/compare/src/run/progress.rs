//! Progress on stderr (stdout carries the report): on a terminal one line redrawn in place, a bar with the
//! step, its position and an estimate of the time left; otherwise (CI logs, files) one plain line per step.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

const WIDTH: usize = 24;

#[derive(Debug)]
pub struct Progress {
    tty: bool,
    /// Estimated seconds of all steps, and of those done.
    total_s: f64,
    done_s: f64,
    steps_done: usize,
    steps_total: usize,
    current: String,
    started: Instant,
    drawn: bool,
}

impl Progress {
    /// `steps`/`estimate_s`: the plan's size, to place the bar and estimate the time left.
    pub fn new(steps: usize, estimate_s: f64) -> Progress {
        Progress::with_tty(steps, estimate_s, std::io::stderr().is_terminal())
    }

    pub fn with_tty(steps: usize, estimate_s: f64, tty: bool) -> Progress {
        Progress {
            tty,
            total_s: estimate_s.max(1.0),
            done_s: 0.0,
            steps_done: 0,
            steps_total: steps.max(1),
            current: String::new(),
            started: Instant::now(),
            drawn: false,
        }
    }

    /// A step begins: shown at once (on a terminal) or logged as its own line.
    pub fn begin(&mut self, label: &str) {
        self.current = label.to_string();
        if self.tty {
            self.draw();
        } else {
            eprintln!("[{}/{}] {label}", self.steps_done + 1, self.steps_total);
        }
    }

    /// The step ended; `estimate_s` is what it was planned to take. `result` is logged on its own line.
    pub fn end(&mut self, estimate_s: f64, result: &str) {
        self.steps_done += 1;
        self.done_s += estimate_s;
        self.line(&format!("{}: {result}", self.current));
    }

    /// Steps that will not run (a voided cell's): the bar moves past them.
    pub fn skip(&mut self, steps: usize, estimate_s: f64) {
        self.steps_done += steps;
        self.done_s += estimate_s;
        if self.tty {
            self.draw();
        }
    }

    /// A message of its own, above the bar on a terminal.
    pub fn line(&mut self, msg: &str) {
        if self.tty {
            self.clear();
            eprintln!("{msg}");
            self.draw();
        } else {
            eprintln!("{msg}");
        }
    }

    /// Erases the bar (before the report is printed).
    pub fn clear(&mut self) {
        if self.tty && self.drawn {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
            self.drawn = false;
        }
    }

    fn draw(&mut self) {
        let frac = (self.done_s / self.total_s).clamp(0.0, 1.0);
        let filled = (frac * WIDTH as f64).round() as usize;
        let bar: String = "#".repeat(filled) + &"-".repeat(WIDTH - filled);
        let left = self.eta();
        eprint!(
            "\r\x1b[2K[{bar}] {}/{} {} · {} left",
            self.steps_done.min(self.steps_total),
            self.steps_total,
            self.current,
            fmt_duration(left)
        );
        let _ = std::io::stderr().flush();
        self.drawn = true;
    }

    /// Time left: the plan's remaining estimate, scaled by how the elapsed time compares with the done part's.
    fn eta(&self) -> Duration {
        let remaining = (self.total_s - self.done_s).max(0.0);
        let elapsed = self.started.elapsed().as_secs_f64();
        let pace = if self.done_s > 30.0 { (elapsed / self.done_s).clamp(0.5, 3.0) } else { 1.0 };
        Duration::from_secs_f64(remaining * pace)
    }
}

pub fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_seconds_minutes_or_hours() {
        assert_eq!(fmt_duration(Duration::from_secs(5)), "5s");
        assert_eq!(fmt_duration(Duration::from_secs(125)), "2m05s");
        assert_eq!(fmt_duration(Duration::from_secs(3725)), "1h02m");
    }

    #[test]
    fn plain_mode_counts_steps() {
        let mut p = Progress::with_tty(3, 30.0, false);
        p.begin("a");
        p.end(10.0, "ok");
        p.skip(1, 10.0);
        assert_eq!(p.steps_done, 2);
        assert!(p.eta() <= Duration::from_secs(10));
    }
}
