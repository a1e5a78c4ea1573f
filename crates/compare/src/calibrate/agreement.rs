//! Whether loadgen and the reference loader (wrk over HTTP/1.1, h2load over HTTP/2) measured a server alike,
//! and what each loader spent doing it: the runs of one calibration, and the verdicts on them. Rounds rotate
//! which loader goes first, and each round's runs are back to back on the same server, so verdicts are judged
//! on per-round ratios; a server whose cores sat idle under a loader is not judged for agreement. loadgen runs
//! twice per round: on its default engine (io_uring where the kernel allows it) and on epoll, so the engines'
//! efficiency is measured in the same rounds.

use std::collections::BTreeSet;

use crate::plan::runtimes::Runtime;
use crate::stats::median;

/// The loaders agree when |loadgen ÷ reference − 1| is at most this, in percent.
pub const AGREE_PCT: f64 = 5.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loader {
    /// loadgen on its default engine.
    Loadgen,
    /// loadgen with `--engine epoll`.
    LoadgenEpoll,
    Wrk,
    H2load,
}

impl Loader {
    pub fn name(self) -> &'static str {
        match self {
            Loader::Loadgen => "loadgen",
            Loader::LoadgenEpoll => "loadgen-epoll",
            Loader::Wrk => "wrk",
            Loader::H2load => "h2load",
        }
    }
}

/// The loaders of a round (1-based) in the order they run: rotated by one each round, so each goes first,
/// second and third equally often over three rounds.
pub fn order(round: u32, reference: Loader) -> [Loader; 3] {
    let mut loaders = [Loader::Loadgen, reference, Loader::LoadgenEpoll];
    loaders.rotate_right((round.saturating_sub(1) % 3) as usize);
    loaders
}

/// One measured run of one loader against one server.
#[derive(Debug, Clone, PartialEq)]
pub struct LoaderRun {
    pub loader: Loader,
    pub round: u32,
    pub req_per_s: f64,
    pub requests: u64,
    /// None where the loader prints no percentiles (h2load: its mean is in `mean_us`).
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub mean_us: Option<f64>,
    /// utime+stime of the server's process tree over the loader's lifetime, per response.
    pub server_cpu_us_per_resp: Option<f64>,
    /// Non-idle share of the server cores over the run, percent.
    pub server_busy_pct: f64,
    /// Non-idle share of the loader cores over the run, percent.
    pub loader_busy_pct: f64,
    /// The loader process's own CPU (user + system, every thread) over its life, µs: what `wait4` reports,
    /// read the same way for every loader. None when it could not be read (the loader was killed).
    pub loader_cpu_us: Option<f64>,
}

impl LoaderRun {
    /// Responses per loader CPU-second: the loader's efficiency.
    pub fn per_loader_cpu_s(&self) -> Option<f64> {
        self.loader_cpu_us.filter(|us| *us > 0.0).map(|us| self.requests as f64 / (us / 1e6))
    }
}

/// One server's calibration.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerResult {
    pub server: Runtime,
    pub version: Option<String>,
    /// The loader loadgen is judged against: wrk, or h2load over HTTP/2.
    pub reference: Loader,
    pub runs: Vec<LoaderRun>,
    /// Why the calibration on this server could not be completed; its runs so far are kept.
    pub failure: Option<String>,
    /// The last argv of each loader, as run.
    pub loadgen_argv: Vec<String>,
    pub epoll_argv: Vec<String>,
    pub reference_argv: Vec<String>,
    /// The engine loadgen's default runs used (`config.engine` of their reports).
    pub loadgen_engine: Option<String>,
}

/// A server's verdict: the medians of each loader's req/s and their ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub loadgen_req_per_s: f64,
    pub reference_req_per_s: f64,
    /// loadgen ÷ reference: the median of the per-round ratios (each round's two runs are back to back on the
    /// same server, so a server that drifts over the rounds, as Node's JIT and GC do, cancels out), or the
    /// medians' ratio when no round has both.
    pub ratio: f64,
    pub agree: bool,
    /// The server cores were under 90% busy with one of the loaders: that loader set the pace, so the
    /// req/s compare the loaders' own speed, not their measurement of the server. Not judged.
    pub loader_bound: bool,
    /// Not within the tolerance, but the per-round ratios fall on both sides of 1: the server's own
    /// run-to-run variation is wider than the difference, so no difference is shown either.
    pub inconclusive: bool,
}

/// The medians' ratio, `agree` when within ±[`AGREE_PCT`]; `None` without runs of both loaders or with
/// the reference at zero.
pub fn verdict(loadgen: &[f64], reference: &[f64]) -> Option<Verdict> {
    let (l, w) = (median(loadgen.iter().copied())?, median(reference.iter().copied())?);
    if w <= 0.0 {
        return None;
    }
    let ratio = l / w;
    // A hair of tolerance so that exactly 5% (as printed) counts as within.
    Some(Verdict {
        loadgen_req_per_s: l,
        reference_req_per_s: w,
        ratio,
        agree: agrees(ratio),
        loader_bound: false,
        inconclusive: false,
    })
}

fn agrees(ratio: f64) -> bool {
    (ratio - 1.0).abs() <= AGREE_PCT / 100.0 + 1e-12
}

impl ServerResult {
    pub fn values(&self, loader: Loader, f: impl Fn(&LoaderRun) -> Option<f64>) -> Vec<f64> {
        self.runs.iter().filter(|r| r.loader == loader).filter_map(f).collect()
    }

    pub fn verdict(&self) -> Option<Verdict> {
        if self.failure.is_some() {
            return None;
        }
        let mut v = verdict(
            &self.values(Loader::Loadgen, |r| Some(r.req_per_s)),
            &self.values(self.reference, |r| Some(r.req_per_s)),
        )?;
        let rounds = self.round_ratios();
        if let Some(paired) = median(rounds.iter().copied()) {
            v.ratio = paired;
            v.agree = agrees(paired);
            // With n paired rounds the median lies between their min and max with probability 1 − 2^(1−n)
            // (94% for 5): a range that holds 1 shows no difference.
            let lo = rounds.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = rounds.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            v.inconclusive = !v.agree && rounds.len() >= 2 && lo <= 1.0 && hi >= 1.0;
        }
        v.loader_bound = !self.idle_under().is_empty();
        Some(v)
    }

    /// The loaders under which the server cores were (median over the rounds) less than 90% busy.
    pub fn idle_under(&self) -> Vec<Loader> {
        [Loader::Loadgen, self.reference]
            .into_iter()
            .filter(|&l| {
                median(self.values(l, |x| Some(x.server_busy_pct)))
                    .is_some_and(|b| b < crate::run::setup::LOADER_BOUND_PCT)
            })
            .collect()
    }

    /// loadgen ÷ reference req/s per round that has both.
    pub fn round_ratios(&self) -> Vec<f64> {
        let rounds: BTreeSet<u32> = self.runs.iter().map(|r| r.round).collect();
        rounds
            .into_iter()
            .filter_map(|round| {
                let of = |l: Loader| self.runs.iter().find(|r| r.round == round && r.loader == l);
                let (a, b) = (of(Loader::Loadgen)?, of(self.reference)?);
                (b.req_per_s > 0.0).then(|| a.req_per_s / b.req_per_s)
            })
            .collect()
    }

    /// Per round: `loader`'s responses per CPU-second over the reference's in the same round.
    pub fn efficiency_ratios(&self, loader: Loader) -> Vec<f64> {
        let rounds: BTreeSet<u32> = self.runs.iter().map(|r| r.round).collect();
        rounds
            .into_iter()
            .filter_map(|round| {
                let of = |l: Loader| self.runs.iter().find(|r| r.round == round && r.loader == l);
                let (a, b) = (of(loader)?.per_loader_cpu_s()?, of(self.reference)?.per_loader_cpu_s()?);
                (b > 0.0).then(|| a / b)
            })
            .collect()
    }
}

/// Whether this verdict says the loaders measured the server differently (a loader-bound server is not
/// judged: there the req/s are the loaders' own speed).
pub fn disagrees(v: &Verdict) -> bool {
    !v.loader_bound && !v.agree && !v.inconclusive
}

/// What the exit code says: 2 when a server failed or none could be judged, else 1 when one disagrees or is
/// inconclusive (agreement is not shown), else 0.
pub fn exit_code(results: &[ServerResult]) -> u8 {
    let judged = results.iter().filter_map(ServerResult::verdict).filter(|v| !v.loader_bound).count();
    if results.iter().any(|r| r.failure.is_some() || r.verdict().is_none()) || judged == 0 {
        2
    } else if results.iter().any(|r| r.verdict().is_some_and(|v| disagrees(&v) || (v.inconclusive && !v.loader_bound)))
    {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_within_five_percent_and_loader_order_rotates() {
        let v = verdict(&[105.0], &[100.0]).expect("verdict");
        assert!(v.agree && (v.ratio - 1.05).abs() < 1e-12);
        assert!(!verdict(&[94.0], &[100.0]).expect("verdict").agree);
        assert!(verdict(&[1.0], &[]).is_none());
        assert_eq!(order(1, Loader::Wrk), [Loader::Loadgen, Loader::Wrk, Loader::LoadgenEpoll]);
        assert_eq!(order(2, Loader::Wrk), [Loader::LoadgenEpoll, Loader::Loadgen, Loader::Wrk]);
        assert_eq!(order(3, Loader::H2load), [Loader::H2load, Loader::LoadgenEpoll, Loader::Loadgen]);
        assert_eq!(order(4, Loader::Wrk), order(1, Loader::Wrk));
    }

    #[test]
    fn verdicts_judge_per_round_ratios_and_efficiency_against_the_reference() {
        let run = |loader, round, req_per_s, busy| LoaderRun {
            loader,
            round,
            req_per_s,
            requests: 1,
            p50_us: Some(1.0),
            p99_us: Some(1.0),
            mean_us: None,
            server_cpu_us_per_resp: None,
            server_busy_pct: busy,
            loader_busy_pct: 100.0,
            loader_cpu_us: Some(req_per_s),
        };
        let result = |pairs: &[(f64, f64)], busy: f64| ServerResult {
            server: Runtime::Node,
            version: None,
            reference: Loader::Wrk,
            runs: pairs
                .iter()
                .zip(1..)
                .flat_map(|(&(l, w), i)| [run(Loader::Loadgen, i, l, busy), run(Loader::Wrk, i, w, busy)])
                .collect(),
            failure: None,
            loadgen_argv: Vec::new(),
            epoll_argv: Vec::new(),
            reference_argv: Vec::new(),
            loadgen_engine: None,
        };
        let v = |pairs: &[(f64, f64)], busy| result(pairs, busy).verdict().expect("verdict");
        // Paired: a server that drifts between rounds still agrees when each round agrees.
        let drift = v(&[(100.0, 101.0), (200.0, 199.0), (150.0, 150.0)], 100.0);
        assert!(drift.agree && !drift.inconclusive);
        let unsure = v(&[(85.0, 100.0), (116.0, 100.0), (107.0, 100.0)], 100.0);
        assert!(!unsure.agree && unsure.inconclusive);
        let apart = v(&[(110.0, 100.0), (108.0, 100.0), (112.0, 100.0)], 100.0);
        assert!(!apart.agree && !apart.inconclusive);
        assert_eq!(exit_code(&[result(&[(110.0, 100.0), (108.0, 100.0)], 100.0)]), 1);
        assert_eq!(exit_code(&[result(&[(85.0, 100.0), (116.0, 100.0), (107.0, 100.0)], 100.0)]), 1);
        assert!(v(&[(120.0, 100.0)], 80.0).loader_bound);
        assert_eq!(exit_code(&[result(&[(120.0, 100.0)], 80.0)]), 2, "nothing judged");
        assert_eq!(exit_code(&[result(&[(120.0, 100.0)], 80.0), result(&[(101.0, 100.0)], 99.0)]), 0);
        // Efficiency: responses over loader CPU-seconds, per round against wrk's.
        let mut r = result(&[(100.0, 100.0)], 100.0);
        r.runs[0].loader_cpu_us = Some(0.5e6);
        r.runs[1].loader_cpu_us = Some(1e6);
        assert_eq!(r.runs[0].per_loader_cpu_s(), Some(2.0));
        assert_eq!(r.efficiency_ratios(Loader::Loadgen), vec![2.0]);
        assert!(r.efficiency_ratios(Loader::LoadgenEpoll).is_empty(), "no epoll run in that round");
        r.runs[1].loader_cpu_us = None;
        assert!(r.efficiency_ratios(Loader::Loadgen).is_empty(), "wrk's CPU unknown");
    }
}
