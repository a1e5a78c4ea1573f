//! `--soak`, the run half (the report half is `report::soak`): every valid cell's server soaked at once, each
//! under its own loader in a thread of its own.

use crate::format::num;
use crate::plan::runtimes::Runtime;
use crate::records::{Kind, Record};
use crate::run::cells;
use crate::run::estimate;
use crate::run::recorder::Recorder;
use crate::run::workload_run::{Purpose, WorkloadRun, acknowledged_writes, audit_writes};
use crate::settings::Soak;
use crate::system::process::check_interrupted;

/// `--soak`: every valid runtime of every workload at once, one long-lived server each under its own loader
/// (a soak looks for growth, not capacity, and at its fixed rate a server needs a small share of a core).
/// Each cell runs in a thread of its own, its start a `--soak-interval` / cells later than the one before, so
/// the loaders' windows (and their loadgen starts) interleave rather than line up. Every sample is appended as
/// measured. A notes-write soak's last sample also accounts for every write acknowledged during the soak.
pub fn soak_cells(runs: &[(WorkloadRun<'_>, Vec<Runtime>)], soak: Soak, recorder: &mut Recorder) -> anyhow::Result<()> {
    let cells: Vec<(&WorkloadRun<'_>, Runtime)> =
        runs.iter().flat_map(|(wr, valid)| valid.iter().map(move |&rt| (wr, rt))).collect();
    if cells.is_empty() {
        return Ok(());
    }
    // In this thread, before any server starts: a notes-write spec empties its runtime's database.
    let specs = cells.iter().map(|(wr, rt)| wr.spec(*rt, Purpose::Run)).collect::<anyhow::Result<Vec<_>>>()?;
    let samples = estimate::soak_samples(&soak);
    let stagger = soak.interval / cells.len() as u32;
    let names: Vec<String> = cells.iter().map(|(wr, rt)| format!("{} {}", wr.workload().name(), rt.name())).collect();
    recorder.line(&format!(
        "soak: {} servers at once ({}) for {:.0} s, each at {:.0} req/s, a sample every {:.1} s, starts {:.2} s apart",
        cells.len(),
        names.join(", "),
        soak.duration.as_secs_f64(),
        soak.rate,
        soak.interval.as_secs_f64(),
        stagger.as_secs_f64(),
    ));
    let shared = std::sync::Mutex::new(recorder);
    let outcomes: Vec<anyhow::Result<()>> = std::thread::scope(|scope| {
        let threads: Vec<_> = cells
            .iter()
            .zip(&specs)
            .enumerate()
            .map(|(i, (&(wr, rt), spec))| {
                let shared = &shared;
                scope.spawn(move || -> anyhow::Result<()> {
                    std::thread::sleep(stagger * i as u32);
                    check_interrupted()?;
                    let name = wr.workload().name();
                    let tag = format!("{name}-{}-soak", rt.name());
                    let input = wr.run_input(rt, spec, &wr.plan.load, Some(soak.rate), &tag);
                    let make = |sample: u32| wr.record(rt, Kind::Soak, sample);
                    let (mut taken, mut acknowledged) = (0, 0);
                    let mut emit = |mut rec: Record| -> anyhow::Result<()> {
                        taken += 1;
                        if rec.round as usize == samples
                            && let Err(e) = audit_writes(wr, rt, &mut rec, acknowledged)
                        {
                            rec.void_because(format!("{e:#}"));
                        }
                        acknowledged += acknowledged_writes(&rec);
                        let summary = soak_summary(&rec);
                        let mut recorder = shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                        recorder.begin(&format!("{name} {} soak sample {}/{samples}", rt.name(), rec.round));
                        recorder.end(soak.interval.as_secs_f64(), &summary);
                        recorder.append(rec)?;
                        Ok(())
                    };
                    let soaked = cells::soak(wr.bench, &input, soak.interval, soak.duration, &make, &mut emit);
                    // A soak cut short (the server exited) leaves its remaining samples' time unspent.
                    let left = samples.saturating_sub(taken);
                    let mut recorder = shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    recorder.skip(left, left as f64 * soak.interval.as_secs_f64());
                    soaked
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a soak thread panicked"))))
            .collect()
    });
    outcomes.into_iter().collect()
}

fn soak_summary(rec: &Record) -> String {
    let rss = rec.rss_after_kib.map_or("—".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
    if rec.void {
        return format!("RSS {rss}; VOID: {}", rec.void_reason.as_deref().unwrap_or(""));
    }
    format!(
        "RSS {rss}, p99 {} ms, {} CPU-µs/resp",
        num(rec.latency_us.map_or(0.0, |l| l.p99 as f64 / 1e3), 3),
        num(rec.server_cpu_us_per_resp.unwrap_or(0.0), 2)
    )
}
