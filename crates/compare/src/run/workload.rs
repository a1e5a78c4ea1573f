//! One workload measured: its checks, the cold starts, the closed-loop rounds and the open-loop tails, every
//! runtime once per round in a rotating order; then the capacity searches and the DB-only runs when asked.

use anyhow::Context;

use std::time::Duration;

use crate::format::num;
use crate::plan::load_spec::LoadSpec;
use crate::plan::runtimes::Runtime;
use crate::records::{Kind, Record};
use crate::run::cells;
use crate::run::checks::checked;
use crate::run::estimate;
use crate::run::recorder::Recorder;
use crate::run::server::millis;
use crate::run::workload_run::{Purpose, WorkloadRun, audit_writes};
use crate::stats::rotated;
use crate::system::process::check_interrupted;

pub fn run_workload(
    wr: &mut WorkloadRun<'_>,
    recorder: &mut Recorder,
    workdir: &std::path::Path,
) -> anyhow::Result<()> {
    let cfg = wr.cfg;
    let name = wr.workload().name();
    let (_, startup_s, run_s) = estimate::estimates(cfg);
    let valid = checked(wr, recorder, workdir)?;

    // 2. Cold starts, interleaved (not for a server compare did not start).
    let startable: Vec<Runtime> = valid.iter().copied().filter(|r| r.started_by_compare()).collect();
    recorder.skip(
        (valid.len() - startable.len()) * cfg.startup_runs as usize,
        ((valid.len() - startable.len()) * cfg.startup_runs as usize) as f64 * startup_s,
    );
    for i in 0..cfg.startup_runs {
        for rt in rotated(&startable, i as usize) {
            check_interrupted()?;
            recorder.begin(&format!("{name} {} start {}/{}", rt.name(), i + 1, cfg.startup_runs));
            let mut rec = wr.record(rt, Kind::Startup, i + 1);
            let spec = wr.spec(rt, Purpose::Startup)?;
            match crate::run::server::startup(&spec, wr.bench, &wr.plan.ready_path) {
                Ok(ms) => rec.startup_ms = Some(ms),
                Err(e) => rec.void_because(format!("{e:#}")),
            }
            check_interrupted()?;
            recorder.end(startup_s, &rec.startup_ms.map_or_else(|| "VOID".to_string(), |ms| format!("{ms:.1} ms")));
            recorder.append(rec)?;
        }
    }

    // 3. Closed loop, then 4. the open-loop tails.
    run_rounds(wr, Kind::Closed, None, &valid, recorder)?;

    let rate = match cfg.tail_rate {
        Some(0.0) => None,
        Some(r) => Some(r),
        // One rate for every runtime and, in a sweep, every count: tails compared at the same load.
        None => {
            let (counts, rtts) = (&wr.counts, &wr.rtts);
            valid
                .iter()
                .flat_map(|rt| counts.iter().flat_map(move |&c| rtts.iter().map(move |&rtt| (rt, c, rtt))))
                .filter_map(|(rt, c, rtt)| {
                    let closed = recorder.records().iter().filter(|r| {
                        r.workload == name
                            && r.runtime == rt.name()
                            && r.kind == Kind::Closed
                            && r.connections == Some(c)
                            && r.db_rtt_ms == rtt.map(millis)
                            && !r.void
                    });
                    crate::stats::spread(closed.filter_map(|r| r.req_per_s)).map(|s| s.median)
                })
                .min_by(f64::total_cmp)
                .map(|slowest| (slowest / 2.0).max(1.0))
        }
    };
    match rate {
        Some(rate) => {
            recorder.line(&format!("{name}: open loop at {rate:.0} req/s"));
            run_rounds(wr, Kind::Open, Some(rate), &valid, recorder)?;
        }
        // `--tail-rate 0`: the open rounds were never counted (`kinds`), so there is nothing to skip.
        None if cfg.tail_rate == Some(0.0) => {}
        None => {
            let skipped = valid.len() * wr.counts.len() * wr.rtts.len() * cfg.runs as usize;
            recorder.skip(skipped, skipped as f64 * run_s);
            if !valid.is_empty() {
                recorder.line(&format!("{name}: no valid closed-loop run to set the open-loop rate; tails skipped"));
            }
        }
    }
    if let Some(search) = cfg.capacity {
        crate::run::capacity::capacity_rounds(wr, &search, &valid, recorder)?;
    }
    if let (1.., lookup_s) = estimate::lookups_estimate(cfg, wr.workload()) {
        let data = wr.metadata.context("metadata dataset")?;
        let record = |rt: Runtime, round: u32| wr.record(rt, Kind::Lookups, round);
        crate::run::lookups::rounds(cfg, wr.bench, data, lookup_s, &record, recorder)?;
    }
    Ok(())
}

/// `cfg.runs` rounds of one kind, every valid runtime at every count once per round, the order rotated each
/// round (in a sweep the counts take turns within the round, so drift over the run spreads over all of them).
fn run_rounds(
    wr: &WorkloadRun<'_>,
    kind: Kind,
    rate: Option<f64>,
    valid: &[Runtime],
    recorder: &mut Recorder,
) -> anyhow::Result<()> {
    let cfg = wr.cfg;
    let name = wr.workload().name();
    let (_, _, run_s) = estimate::estimates(cfg);
    let sweep = wr.counts.len() > 1;
    let cells: Vec<(Option<Duration>, u32, Runtime)> = wr
        .rtts
        .iter()
        .flat_map(|&rtt| wr.counts.iter().flat_map(move |&c| valid.iter().map(move |&rt| (rtt, c, rt))))
        .collect();
    for round in 1..=cfg.runs {
        for (rtt, connections, rt) in rotated(&cells, round as usize - 1) {
            check_interrupted()?;
            let mut at = String::new();
            let mut tag = format!("{name}-{}-{}", rt.name(), kind.as_str());
            if sweep {
                at.push_str(&format!(" at {connections} connections"));
                tag.push_str(&format!("-c{connections}"));
            }
            if let Some(rtt) = rtt {
                at.push_str(&format!(" with the databases {} ms away", num(millis(rtt), 1)));
                tag.push_str(&format!("-rtt{}us", rtt.as_micros()));
            }
            tag.push_str(&format!("-r{round}"));
            recorder.begin(&format!("{name} {} {}{at} round {round}/{}", rt.name(), kind.as_str(), cfg.runs));
            let mut rec = wr.record(rt, kind, round);
            rec.db_rtt_ms = rtt.map(millis);
            let spec = wr.spec_at(rt, Purpose::Run, rtt)?;
            let load = LoadSpec { connections, ..wr.plan.load.clone() };
            let input = wr.run_input(rt, &spec, &load, rate, &tag);
            cells::measure_then(wr.bench, &input, &mut rec, &mut |rec| audit_writes(wr, rt, rec, 0));
            check_interrupted()?;
            recorder.end(run_s, &run_summary(&rec));
            recorder.append(rec)?;
        }
    }
    Ok(())
}

fn run_summary(rec: &Record) -> String {
    if rec.void {
        return format!("VOID: {}", rec.void_reason.as_deref().unwrap_or(""));
    }
    let mut s = format!(
        "{} req/s, {} CPU-µs/resp, p99 {} ms, server cores {}% busy",
        num(rec.req_per_s.unwrap_or(0.0), 0),
        num(rec.server_cpu_us_per_resp.unwrap_or(0.0), 2),
        num(rec.latency_us.map_or(0.0, |l| l.p99 as f64 / 1e3), 3),
        num(rec.server_busy_pct.unwrap_or(0.0), 0)
    );
    if rec.loader_bound == Some(true) {
        s.push_str(" (loader-bound)");
    }
    s
}
