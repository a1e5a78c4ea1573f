//! `loadgen capacity`: the highest open-loop rate at which a latency objective holds (`--p99 10ms`, and
//! `--p999` too if given), which is the question users ask of a server and closed-loop req/s does not answer.
//!
//! The search runs fixed-length open-loop steps, each with its own warmup and fresh connections: from
//! `--start`, the rate doubles until a step fails, then the bracket between the highest pass and the lowest
//! failure is bisected until it is within `--precision` percent. A step passes when it has no error of any
//! kind (nor a status outside 2xx/3xx unless `--expect-status` says what is expected), achieved at least 95%
//! of the rate asked in responses per second, left no more than 1% of its sends still waiting for a
//! connection at its end, and its latency from the intended send time met the objective. That latency is the
//! honest one: a send that found every connection busy waited for one, and its wait counts (`open_loop`), so
//! a rate just above the server's capacity shows as a queue that grows over the step, not as a tail that
//! skipped the sends it could not make. A step that fails while a loader thread was over 90% busy is *loader-bound*: the loader,
//! not the server, could not keep up, so the search stops there and says so rather than calling it the
//! server's capacity.
//!
//! A failed step is run again at the same rate before the search believes it (`--retries`, 1 by default):
//! on a machine whose tail has bursts of its own (a VM's vCPU descheduled for tens of milliseconds), one bad
//! second would otherwise end the doubling far below the server's capacity. Passing steps are not retried:
//! noise makes a tail worse, not better.

use std::io::Write;
use std::time::Duration;

use crate::rate::Rate;
use crate::render;
use crate::report::Report;
use crate::run::{RunError, run};
use crate::settings::CapacitySettings;

/// Bumped when a field changes meaning.
pub const SCHEMA: &str = "loadgen-capacity/1";
/// A step must achieve this share of the rate it asked for.
const ACHIEVED_SHARE: f64 = 0.95;
/// A step may end with at most this share of its scheduled sends still waiting for a connection. A server
/// keeping up leaves about none (a uniform schedule below capacity: none; a burst at the very end: a few);
/// one falling behind by x% leaves x% of the step and its warmup, which a lenient objective (a p99 of a
/// second) would not notice within a step.
const UNSENT_SHARE: f64 = 0.01;
/// No search runs more steps than this (doubling from 1 req/s to 2^30 and bisecting to 0.1% fit in it).
const MAX_STEPS: usize = 64;

/// What one step found.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Step {
    /// Requests per second asked.
    pub rate: f64,
    pub achieved_rps: f64,
    pub responses: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p99_9_us: u64,
    /// Socket, timeout, parse, close and assertion errors.
    pub errors: u64,
    pub non_2xx_3xx: u64,
    pub late_sends: u64,
    /// Sends still waiting for a free connection when the step ended (never sent; their waits are in the
    /// step's latency as lower bounds).
    pub missed_sends: u64,
    /// The busiest loader thread's share of the step, percent.
    pub loader_busy_pct: f64,
    /// "pass", "fail" or "loader-bound".
    pub verdict: String,
    /// Why it did not pass (empty when it did).
    pub why: String,
    /// A later step ran this rate again (this one failed): that step's verdict decides.
    pub retried: bool,
}

/// The search's result, as `--json` writes it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Capacity {
    pub schema: String,
    pub loadgen_version: String,
    pub command: Vec<String>,
    pub target: String,
    /// The objective, µs (null when not part of it).
    pub p99_us: Option<u64>,
    pub p99_9_us: Option<u64>,
    pub step_s: f64,
    pub warmup_s: f64,
    pub connections: u32,
    pub threads: u32,
    pub engine: String,
    pub precision_pct: f64,
    /// How many times a failed step was run again at the same rate.
    pub retries: u32,
    /// The highest rate that passed; null when none did.
    pub capacity_rps: Option<f64>,
    /// The search stopped at a step the loader could not drive: the capacity is at least `capacity_rps`.
    pub loader_bound: bool,
    /// The search reached `--max` still passing: the capacity is at least `capacity_rps`.
    pub reached_max: bool,
    pub steps: Vec<Step>,
}

impl Capacity {
    /// The line that ends the output: `capacity: 41250 req/s at p99 10ms (41236 achieved)`.
    pub fn summary(&self) -> String {
        let objective = self.objective();
        let achieved = self.achieved_rps().map(|a| format!("{a:.0} achieved")).unwrap_or_default();
        let and = if achieved.is_empty() { "" } else { "; " };
        match self.capacity_rps {
            None => format!("capacity: none: the objective ({objective}) failed at every rate tried"),
            Some(rps) if self.loader_bound => format!(
                "capacity: at least {rps:.0} req/s at {objective} ({achieved}{and}loader-bound above it: add loader \
                 threads or machines)"
            ),
            Some(rps) if self.reached_max => {
                format!("capacity: at least {rps:.0} req/s at {objective} ({achieved}{and}--max)")
            }
            Some(rps) if achieved.is_empty() => format!("capacity: {rps:.0} req/s at {objective}"),
            Some(rps) => format!("capacity: {rps:.0} req/s at {objective} ({achieved})"),
        }
    }

    /// Responses per second in the step that found the capacity (what the server did at the rate asked).
    pub fn achieved_rps(&self) -> Option<f64> {
        let rps = self.capacity_rps?;
        self.steps.iter().find(|s| !s.retried && s.verdict == "pass" && s.rate == rps).map(|s| s.achieved_rps)
    }

    fn objective(&self) -> String {
        let mut parts = Vec::new();
        if let Some(us) = self.p99_us {
            parts.push(format!("p99 {}", render::micros(us as f64)));
        }
        if let Some(us) = self.p99_9_us {
            parts.push(format!("p99.9 {}", render::micros(us as f64)));
        }
        parts.join(", ")
    }
}

/// Judges one step's report against the objective.
pub fn judge(report: &Report, rate: f64, search: &CapacitySettings) -> Step {
    let open = report.open_loop.as_ref();
    let errors = report.errors.total();
    let mut why = Vec::new();
    if errors > 0 {
        why.push(format!("{errors} errors"));
    }
    if report.non_2xx_3xx > 0 && search.run.expect.status.is_empty() {
        why.push(format!("{} responses outside 2xx/3xx", report.non_2xx_3xx));
    }
    if report.req_per_s < rate * ACHIEVED_SHARE {
        why.push(format!("achieved {:.0} of {rate:.0} req/s", report.req_per_s));
    }
    let (unsent, scheduled) = open.map_or((0, 0), |o| (o.missed_sends, o.scheduled));
    if unsent as f64 > scheduled as f64 * UNSENT_SHARE {
        why.push(format!("{unsent} of {scheduled} sends still waiting for a connection at the end"));
    }
    let over = |got: u64, limit: Option<Duration>, name: &str| {
        limit
            .filter(|l| got > l.as_micros() as u64)
            .map(|l| format!("{name} {} over {}", render::micros(got as f64), render::micros(l.as_micros() as f64)))
    };
    why.extend(over(report.latency.p99_us, search.p99, "p99"));
    why.extend(over(report.latency.p99_9_us, search.p999, "p99.9"));
    let loader_busy_pct = report.cpu.threads.iter().map(|t| t.busy_pct).fold(0.0, f64::max);
    let verdict = match (why.is_empty(), report.cpu.saturated) {
        (true, _) => "pass",
        (false, true) => "loader-bound",
        (false, false) => "fail",
    };
    if verdict == "loader-bound" {
        why.push(format!("a loader thread was {loader_busy_pct:.0}% busy"));
    }
    Step {
        rate,
        achieved_rps: report.req_per_s,
        responses: report.responses,
        p50_us: report.latency.p50_us,
        p99_us: report.latency.p99_us,
        p99_9_us: report.latency.p99_9_us,
        errors,
        non_2xx_3xx: report.non_2xx_3xx,
        late_sends: open.map_or(0, |o| o.late_sends),
        missed_sends: open.map_or(0, |o| o.missed_sends),
        loader_busy_pct,
        verdict: verdict.to_string(),
        why: why.join("; "),
        retried: false,
    }
}

/// Where the search goes next: the rate of the next step, or None when it is done.
pub fn next_rate(steps: &[Step], search: &CapacitySettings) -> Option<f64> {
    let last = steps.last()?;
    if last.verdict == "loader-bound" || steps.len() >= MAX_STEPS {
        return None;
    }
    let (best_pass, lowest_fail) = bracket(steps);
    match (best_pass, lowest_fail) {
        // Still climbing: double, up to --max.
        (Some(pass), None) => (pass < search.max).then(|| (pass * 2.0).min(search.max)),
        // Nothing passed yet: halve, down to 1 req/s.
        (None, Some(fail)) => (fail > 1.0).then(|| (fail / 2.0).max(1.0)),
        (Some(pass), Some(fail)) if fail <= pass => None, // a lower failure after a higher pass: noise; stop
        (Some(pass), Some(fail)) => ((fail - pass) / pass * 100.0 > search.precision).then(|| (pass + fail) / 2.0),
        (None, None) => None,
    }
}

/// The highest rate that passed and the lowest that failed (retried attempts left out: their retry decides).
fn bracket(steps: &[Step]) -> (Option<f64>, Option<f64>) {
    let decided = || steps.iter().filter(|s| !s.retried);
    let best_pass = decided().filter(|s| s.verdict == "pass").map(|s| s.rate).reduce(f64::max);
    let lowest_fail = decided().filter(|s| s.verdict == "fail").map(|s| s.rate).reduce(f64::min);
    (best_pass, lowest_fail)
}

/// Runs the search, printing one line per step to `out`, and returns the result.
pub fn search(search: &CapacitySettings, command: Vec<String>, out: &mut dyn Write) -> Result<Capacity, RunError> {
    let mut steps: Vec<Step> = Vec::new();
    let mut rate = search.start;
    // Every step runs the same shape (target, engine, threads, connections); the last says what it was.
    let mut shape;
    let mut attempts = 0;
    loop {
        let mut run_settings = search.run.clone();
        run_settings.rate = Some(Rate::steady(rate));
        run_settings.ramp = None;
        run_settings.output.json = None;
        run_settings.output.jsonl = None;
        run_settings.output.hdr_log = None;
        let report = run(&run_settings, command.clone())?;
        let config = &report.config;
        shape = (report.target.clone(), config.engine.clone(), config.threads, config.connections);
        let mut step = judge(&report, rate, search);
        attempts += 1;
        step.retried = step.verdict == "fail" && attempts <= search.retries && steps.len() + 1 < MAX_STEPS;
        let _ = writeln!(out, "{}", step_line(steps.len() + 1, &step));
        let again = step.retried;
        steps.push(step);
        if again {
            continue; // the same rate once more
        }
        attempts = 0;
        match next_rate(&steps, search) {
            Some(next) => rate = next,
            None => break,
        }
    }
    let (best_pass, _) = bracket(&steps);
    let loader_bound = steps.last().is_some_and(|s| s.verdict == "loader-bound");
    let reached_max = !loader_bound && best_pass.is_some_and(|p| p >= search.max);
    let (target, engine, threads, connections) = shape;
    Ok(Capacity {
        schema: SCHEMA.to_string(),
        loadgen_version: env!("CARGO_PKG_VERSION").to_string(),
        command,
        target,
        p99_us: search.p99.map(|d| d.as_micros() as u64),
        p99_9_us: search.p999.map(|d| d.as_micros() as u64),
        step_s: search.run.duration.as_secs_f64(),
        warmup_s: search.run.warmup.as_secs_f64(),
        connections,
        threads,
        engine,
        precision_pct: search.precision,
        retries: search.retries,
        capacity_rps: best_pass,
        loader_bound,
        reached_max,
        steps,
    })
}

/// `step  3:       4000 req/s asked, …: fail (why); trying this rate again`.
fn step_line(number: usize, step: &Step) -> String {
    let why = if step.why.is_empty() { String::new() } else { format!(" ({})", step.why) };
    let again = if step.retried { "; trying this rate again" } else { "" };
    format!(
        "step {:>2}: {:>10.0} req/s asked, {:>10.0} achieved, p50 {}, p99 {}, p99.9 {}, {} errors: {}{why}{again}",
        number,
        step.rate,
        step.achieved_rps,
        render::micros(step.p50_us as f64),
        render::micros(step.p99_us as f64),
        render::micros(step.p99_9_us as f64),
        step.errors,
        step.verdict,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> CapacitySettings {
        let argv = ["loadgen", "capacity", "--p99", "10ms", "http://127.0.0.1:1/"].iter().chain(extra);
        match crate::cli::parse_from(argv).unwrap_or_else(|e| panic!("{e}")).command {
            Some(crate::cli::Command::Capacity(args)) => args.settings().unwrap_or_else(|e| panic!("{e}")),
            other => panic!("not a capacity search: {other:?}"),
        }
    }

    fn step(rate: f64, verdict: &str) -> Step {
        Step {
            rate,
            achieved_rps: rate,
            responses: 1,
            p50_us: 1,
            p99_us: 1,
            p99_9_us: 1,
            errors: 0,
            non_2xx_3xx: 0,
            late_sends: 0,
            missed_sends: 0,
            loader_busy_pct: 10.0,
            verdict: verdict.into(),
            why: String::new(),
            retried: false,
        }
    }

    #[test]
    fn the_search_doubles_then_bisects_to_the_precision() {
        let a = args(&[]);
        let mut steps = vec![step(1000.0, "pass")];
        assert_eq!(next_rate(&steps, &a), Some(2000.0));
        steps.push(step(2000.0, "pass"));
        steps.push(step(4000.0, "fail"));
        assert_eq!(next_rate(&steps, &a), Some(3000.0));
        steps.push(step(3000.0, "fail"));
        assert_eq!(next_rate(&steps, &a), Some(2500.0));
        steps.push(step(2500.0, "pass"));
        steps.push(step(2750.0, "pass"));
        steps.push(step(2875.0, "pass"));
        // 2875 passes, 3000 fails: 4.3% apart, within 5%.
        assert_eq!(next_rate(&steps, &a), None);
    }

    #[test]
    fn a_retried_failure_does_not_count() {
        let a = args(&[]);
        let mut noisy = step(2000.0, "fail");
        noisy.retried = true;
        let steps = [step(1000.0, "pass"), noisy, step(2000.0, "pass")];
        assert_eq!(next_rate(&steps, &a), Some(4000.0), "the retry passed: keep doubling");
        assert_eq!(bracket(&steps), (Some(2000.0), None));
    }

    #[test]
    fn a_first_failure_halves_and_a_loader_bound_step_stops() {
        let a = args(&["--start", "8"]);
        assert_eq!(next_rate(&[step(8.0, "fail")], &a), Some(4.0));
        assert_eq!(next_rate(&[step(1.0, "fail")], &a), None, "nothing below 1 req/s");
        assert_eq!(next_rate(&[step(8.0, "pass"), step(16.0, "loader-bound")], &a), None);
        let capped = args(&["--max", "1500"]);
        assert_eq!(next_rate(&[step(1000.0, "pass")], &capped), Some(1500.0));
        assert_eq!(next_rate(&[step(1000.0, "pass"), step(1500.0, "pass")], &capped), None);
    }

    /// A one-thread open-loop step at `rate` over 1 s: `responses` of them, p99 about `p99_us`, the thread
    /// `busy_pct` busy, `errors` timeouts.
    fn step_report(rate: f64, responses: u64, p99_us: u64, busy_pct: u64, errors: u64) -> Report {
        let command = ["loadgen", "-c", "8", "-d", "1s", "-R", &rate.to_string(), "http://127.0.0.1:1/"];
        let settings = crate::cli::run_settings_of(&command);
        let mut w = crate::stats::WorkerStats::new(true);
        w.responses = responses;
        for i in 0..responses {
            let us = if i * 100 >= responses * 98 { p99_us } else { 100 };
            w.latency.saturating_record(us);
            if let Some(h) = &mut w.latency_from_write {
                h.saturating_record(us);
            }
        }
        w.status.insert(200, responses);
        w.errors.timeout = errors;
        w.cpu_user_us = busy_pct * 10_000;
        w.scheduled = rate as u64;
        let meta = crate::report::RunMeta {
            config: crate::report::RunConfig::new(&settings, 1, "url".into(), "epoll"),
            command: Vec::new(),
            target: "http://127.0.0.1:1/".into(),
            started_unix_ms: 0,
            duration_s: 1.0,
        };
        Report::from_workers(meta, &[w]).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_step_is_judged_on_errors_rate_and_tail_and_a_busy_loader_is_blamed() {
        let a = args(&[]);
        let ok = judge(&step_report(1000.0, 1000, 5_000, 20, 0), 1000.0, &a);
        assert_eq!((ok.verdict.as_str(), ok.why.as_str()), ("pass", ""));
        let slow = judge(&step_report(1000.0, 1000, 20_000, 20, 0), 1000.0, &a);
        assert_eq!(slow.verdict, "fail");
        // HDR keeps 3 significant digits: 20 ms reads back as 20.02 ms.
        assert!(slow.why.starts_with("p99 20.0") && slow.why.ends_with("over 10.00ms"), "{}", slow.why);
        let short = judge(&step_report(1000.0, 900, 5_000, 20, 0), 1000.0, &a);
        assert!(short.verdict == "fail" && short.why.contains("achieved 900 of 1000"), "{short:?}");
        let errors = judge(&step_report(1000.0, 1000, 5_000, 20, 3), 1000.0, &a);
        assert!(errors.verdict == "fail" && errors.why.contains("3 errors"), "{errors:?}");
        // Everything met, but a queue was left: 2% of the step's sends still waiting at its end.
        let mut behind = step_report(1000.0, 1000, 5_000, 20, 0);
        let mut few = behind.clone();
        behind.open_loop.as_mut().expect("open loop").missed_sends = 20;
        let behind = judge(&behind, 1000.0, &a);
        assert!(behind.verdict == "fail" && behind.why == "20 of 1000 sends still waiting for a connection at the end");
        assert_eq!(behind.missed_sends, 20);
        few.open_loop.as_mut().expect("open loop").missed_sends = 10;
        assert_eq!(judge(&few, 1000.0, &a).verdict, "pass", "1% may still wait (a burst at the end)");
        // The same shortfall with the loader's thread saturated: the loader's limit, not the server's.
        let busy = judge(&step_report(1000.0, 900, 5_000, 97, 0), 1000.0, &a);
        assert_eq!(busy.verdict, "loader-bound", "{busy:?}");
        assert!(busy.why.contains("a loader thread was 97% busy"), "{}", busy.why);
        // A busy loader that still met everything passes: busy is not a failure by itself.
        assert_eq!(judge(&step_report(1000.0, 1000, 5_000, 97, 0), 1000.0, &a).verdict, "pass");
    }

    #[test]
    fn the_summary_line_says_what_was_found() {
        let mut c = Capacity {
            schema: SCHEMA.into(),
            loadgen_version: String::new(),
            command: Vec::new(),
            target: String::new(),
            p99_us: Some(10_000),
            p99_9_us: None,
            step_s: 5.0,
            warmup_s: 1.0,
            connections: 10,
            threads: 1,
            engine: "uring".into(),
            precision_pct: 5.0,
            retries: 1,
            capacity_rps: Some(41_250.0),
            loader_bound: false,
            reached_max: false,
            steps: Vec::new(),
        };
        assert_eq!(c.summary(), "capacity: 41250 req/s at p99 10.00ms");
        let mut found = step(41_250.0, "pass");
        found.achieved_rps = 41_236.4;
        let mut noisy = step(41_250.0, "fail");
        noisy.retried = true;
        noisy.achieved_rps = 1.0;
        c.steps = vec![noisy, found, step(45_000.0, "fail")];
        assert_eq!(c.achieved_rps(), Some(41_236.4));
        assert_eq!(c.summary(), "capacity: 41250 req/s at p99 10.00ms (41236 achieved)");
        c.reached_max = true;
        assert_eq!(c.summary(), "capacity: at least 41250 req/s at p99 10.00ms (41236 achieved; --max)");
        c.reached_max = false;
        c.p99_9_us = Some(50_000);
        c.loader_bound = true;
        assert!(
            c.summary().starts_with(
                "capacity: at least 41250 req/s at p99 10.00ms, p99.9 50.00ms (41236 achieved; loader-bound"
            ),
            "{}",
            c.summary()
        );
        c.capacity_rps = None;
        assert!(c.summary().starts_with("capacity: none"));
    }
}
