//! The progress bar's arithmetic: how many steps a comparison has and about how long each takes, written
//! once for the whole run's total and for the steps a void cell no longer needs.

use crate::plan::workloads::Workload;
use crate::settings::{Config, Soak};

/// A measured run's time beyond its warmup and window: the fresh server's start, settling, priming and
/// loadgen's exit. The median gap between consecutive run starts in the recorded default runs
/// (20261130T021959Z-vm, 20261130T001642Z-vm, 20261204T073025Z-vm in bench/results) was warmup + duration
/// + 0.6 s.
const RUN_OVERHEAD_S: f64 = 0.7;

/// Estimated seconds per step, for the progress bar.
pub fn estimates(cfg: &Config) -> (f64, f64, f64) {
    let run = cfg.warmup.as_secs_f64() + cfg.duration.as_secs_f64() + RUN_OVERHEAD_S;
    (3.0, 0.5, run)
}

/// DB-only runs for a workload (rust, bun and node per round, on metadata), and the seconds each is
/// expected to take (a release build's 180k lookups a second, bun's half that, node's a third).
pub fn lookups_estimate(cfg: &Config, w: Workload) -> (usize, f64) {
    if w != Workload::Metadata || cfg.lookups == 0 || cfg.soak.is_some() {
        return (0, 0.0);
    }
    let rts = cfg.runtimes.iter().filter(|r| crate::run::lookups::runs_on(**r)).count();
    // Lookups at about 90,000 a second on the slowest runtime, the inserts (a tenth as many) at about 150,000
    // (node:sqlite's 180,000 in 20261205T144751Z-vm, less a margin).
    let inserts = crate::run::lookups::inserts(cfg.lookups) as f64;
    (rts * cfg.runs as usize, 1.0 + cfg.lookups as f64 * 1.1 / 90_000.0 + inserts * 1.1 / 150_000.0)
}

/// Capacity searches per cell, and the seconds each is expected to take: about a dozen steps (three
/// doublings from an eighth of the closed-loop rate, then bisection to 5%, a retry or two), plus the
/// server's start and warmup.
pub fn capacity_estimate(cfg: &Config) -> (usize, f64) {
    cfg.capacity.map_or((0, 0.0), |c| {
        let step = c.step.as_secs_f64() + c.warmup.as_secs_f64() + 0.5;
        (c.runs as usize, 12.0 * step + cfg.warmup.as_secs_f64() + 2.0)
    })
}

/// Measured kinds per round: closed, and open unless `--tail-rate 0`.
pub fn kinds(cfg: &Config) -> usize {
    if cfg.tail_rate == Some(0.0) { 1 } else { 2 }
}

pub fn soak_samples(soak: &Soak) -> usize {
    (soak.duration.as_secs_f64() / soak.interval.as_secs_f64()).ceil().max(1.0) as usize
}

/// Steps a cell still has after its check, and their seconds: what its cold starts, rounds and capacity
/// searches add to the total, and what a void check skips.
pub fn cell_after_check(cfg: &Config, w: Workload) -> (usize, f64) {
    let (_, startup_s, run_s) = estimates(cfg);
    let (searches, search_s) = capacity_estimate(cfg);
    // A sweep runs every round at each count, and a workload waiting on a database at each round trip.
    let rtts = if w.waits_on_database() { cfg.db_rtt.len().max(1) } else { 1 };
    let rounds = cfg.runs as usize * kinds(cfg) * cfg.connections.len().max(1) * rtts;
    let steps = cfg.startup_runs as usize + rounds + searches;
    (steps, cfg.startup_runs as f64 * startup_s + rounds as f64 * run_s + searches as f64 * search_s)
}

/// The whole comparison: steps and their estimated seconds, for the progress bar.
pub fn total(cfg: &Config) -> (usize, f64) {
    let (check_s, _, _) = estimates(cfg);
    let (mut steps, mut seconds) = (0, 0.0);
    if let Some(soak) = &cfg.soak {
        // Every cell soaks at once: the checks take their turns, the soak's time passes once.
        seconds += cfg.warmup.as_secs_f64() + soak.duration.as_secs_f64() + soak.interval.as_secs_f64();
    }
    for w in &cfg.workloads {
        let n = cfg.runtimes.iter().filter(|r| r.serves(*w)).count();
        steps += n;
        seconds += n as f64 * check_s;
        if let Some(soak) = &cfg.soak {
            steps += n * soak_samples(soak);
            continue;
        }
        let (lookups, lookup_s) = lookups_estimate(cfg, *w);
        let (cell_steps, cell_s) = cell_after_check(cfg, *w);
        steps += lookups + n * cell_steps;
        seconds += lookups as f64 * lookup_s + n as f64 * cell_s;
    }
    (steps, seconds)
}
