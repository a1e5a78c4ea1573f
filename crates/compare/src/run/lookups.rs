//! metadata's DB-only runs: the lookup-and-build step (SQLite point read, locales parse, JSON render) in a
//! loop with no HTTP and no server, on each runtime's own SQLite binding: `metadata-rs bench-lookup` and
//! bench/peers/metadata/lookup-bench.mjs under Bun (bun:sqlite) and Node (node:sqlite). All three walk the
//! same id and region sequence over the same file and print the same JSON line; the found count and the
//! bytes built must agree across runtimes, or the run does not count. Pinned to the server cores, one run
//! per round per runtime, the order rotated like the rounds.

use std::fs::File;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;

use crate::format::num;
use crate::plan::dataset::MetadataData;
use crate::plan::paths::Paths;
use crate::plan::runtimes::Runtime;
use crate::plan::workloads::Service;
use crate::records::{LookupRun, Record};
use crate::run::bench::Bench;
use crate::run::recorder::Recorder;
use crate::settings::Config;
use crate::system::process::{Spawned, check_interrupted};

/// The runtimes with a DB-only loop.
pub fn runs_on(rt: Runtime) -> bool {
    matches!(rt, Runtime::Rust | Runtime::Bun | Runtime::Node)
}

/// The untimed lookups before the timed ones: a tenth, as the loops' own defaults have it.
pub fn warmup(iterations: u64) -> u64 {
    iterations / 10
}

/// How long a run may take before it is killed: a debug build does a few thousand lookups a second.
fn limit(iterations: u64) -> Duration {
    Duration::from_secs(30) + Duration::from_secs_f64((iterations + warmup(iterations)) as f64 / 2_000.0)
}

/// The loop's one output line.
#[derive(Debug, Deserialize)]
struct Line {
    iterations: u64,
    seconds: f64,
    ops_per_sec: f64,
    found: u64,
    bytes: u64,
}

/// The command for `rt`'s loop over `data`, pinned to the server cores.
pub fn command(rt: Runtime, paths: &Paths, bench: &Bench, data: &MetadataData, iterations: u64) -> Command {
    let mut cmd = Command::new("taskset");
    cmd.arg("-c").arg(&bench.server_cores).arg(paths.program(rt, Service::Metadata));
    match rt {
        Runtime::Rust => {
            cmd.arg("bench-lookup");
        }
        _ => {
            let script = paths.peers().join("metadata/lookup-bench.mjs");
            if rt.on_bun() {
                cmd.arg("run");
            } else {
                // node:sqlite prints an ExperimentalWarning on first use; it says nothing about the run.
                cmd.arg("--disable-warning=ExperimentalWarning");
            }
            cmd.arg(script).env("NODE_ENV", "production").current_dir(paths.peers());
        }
    }
    cmd.arg("--db").arg(&data.db).arg("--ids").arg(&data.ids);
    cmd.args(["--iterations", &iterations.to_string(), "--warmup", &warmup(iterations).to_string()]);
    cmd
}

/// One DB-only run of `rt` into `rec` (kind lookups), voided with the reason when it fails.
pub fn run(rt: Runtime, paths: &Paths, bench: &Bench, data: &MetadataData, iterations: u64, rec: &mut Record) {
    match run_once(rt, paths, bench, data, iterations, &rec.round.to_string()) {
        Ok(line) => {
            let run = LookupRun {
                iterations: line.iterations,
                seconds: line.seconds,
                ops_per_s: line.ops_per_sec,
                found: line.found,
                bytes: line.bytes,
            };
            if run.iterations != iterations {
                rec.void_because(format!("ran {} lookups, not {iterations}", run.iterations));
            }
            rec.duration_s = Some(run.seconds);
            rec.lookups = Some(run);
        }
        Err(e) => rec.void_because(format!("{e:#}")),
    }
}

fn run_once(
    rt: Runtime,
    paths: &Paths,
    bench: &Bench,
    data: &MetadataData,
    iterations: u64,
    round: &str,
) -> anyhow::Result<Line> {
    let stem = bench.logdir.join(format!("lookups-{}-r{round}", rt.name()));
    let (out_path, err_path) = (stem.with_extension("out"), stem.with_extension("err"));
    let mut cmd = command(rt, paths, bench, data, iterations);
    cmd.stdin(Stdio::null()).stdout(File::create(&out_path)?).stderr(File::create(&err_path)?);
    let mut proc = Spawned::spawn(cmd, "lookups").with_context(|| format!("starting {}'s DB-only loop", rt.name()))?;
    let status = proc.wait_timeout(limit(iterations))?;
    let stderr = || std::fs::read_to_string(&err_path).unwrap_or_default().trim().chars().take(300).collect::<String>();
    let Some(status) = status else {
        proc.kill();
        anyhow::bail!("still running after {:?}; killed", limit(iterations));
    };
    if !status.success() {
        anyhow::bail!("exited {status}: {}", stderr());
    }
    let text = std::fs::read_to_string(&out_path)?;
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    serde_json::from_str(last).with_context(|| format!("its output {last:?} is not the loop's JSON line"))
}

/// Every round: each of rust, bun and node (as `cfg` names them) in rotated order, each record from
/// `record(runtime, round)` appended as measured; a run whose found and bytes differ from rust's in its round
/// is void.
pub fn rounds(
    cfg: &Config,
    bench: &Bench,
    data: &MetadataData,
    estimate_s: f64,
    record: &dyn Fn(Runtime, u32) -> Record,
    recorder: &mut Recorder,
) -> anyhow::Result<()> {
    let rts: Vec<Runtime> = cfg.runtimes.iter().copied().filter(|r| runs_on(*r)).collect();
    recorder.line(&format!("metadata: DB-only lookups, {} a run", cfg.lookups));
    for round in 1..=cfg.runs {
        let mut recs = Vec::new();
        for rt in crate::stats::rotated(&rts, round as usize - 1) {
            check_interrupted()?;
            recorder.begin(&format!("metadata {} DB-only round {round}/{}", rt.name(), cfg.runs));
            let mut rec = record(rt, round);
            run(rt, &cfg.paths, bench, data, cfg.lookups, &mut rec);
            check_interrupted()?;
            let summary = match (&rec.lookups, rec.void) {
                (Some(l), false) => format!("{} lookups/s", num(l.ops_per_s, 0)),
                _ => format!("VOID: {}", rec.void_reason.as_deref().unwrap_or("")),
            };
            recorder.end(estimate_s, &summary);
            recs.push(rec);
        }
        for (i, why) in disagreements(&recs) {
            recs[i].void_because(why);
        }
        for rec in recs {
            recorder.append(rec)?;
        }
    }
    Ok(())
}

/// The runs of one round whose found and bytes differ from rust's (or, without rust, from the first
/// runtime's): they did not build the same bodies.
pub fn disagreements(round: &[Record]) -> Vec<(usize, String)> {
    let tally = |r: &Record| r.lookups.map(|l| (l.found, l.bytes));
    let reference = round.iter().find(|r| r.runtime == "rust").or(round.first()).filter(|r| !r.void);
    let Some((name, want)) = reference.and_then(|r| Some((r.runtime.clone(), tally(r)?))) else { return Vec::new() };
    round
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match tally(r) {
            Some(got) if got != want => Some((
                i,
                format!(
                    "found {} and {} bytes, {name} found {} and {} bytes: not the same bodies",
                    got.0, got.1, want.0, want.1
                ),
            )),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_lookup_record as rec;

    #[test]
    fn agreement() {
        let records = vec![rec("rust", 1, 200_000.0, 10), rec("bun", 1, 100_000.0, 10)];
        assert!(disagreements(&records).is_empty());
        let odd = [rec("rust", 1, 1.0, 10), rec("node", 1, 1.0, 9)];
        let found = disagreements(&odd);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, 1);
        assert!(found[0].1.contains("found 9 and 63 bytes, rust found 10 and 70 bytes"), "{found:?}");
    }
}
