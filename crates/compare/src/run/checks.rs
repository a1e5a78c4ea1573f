//! Before anything is timed: notes-read's seeded database, then every runtime's check (rust first: its
//! answers are the reference; the floor last: it serves the reference's answer). Only runtimes that pass are
//! measured.

use anyhow::Context;

use crate::plan::probe::Outcome;
use crate::plan::runtimes::Runtime;
use crate::plan::workloads::Workload;
use crate::records::Kind;
use crate::run::cells::{self, Reference};
use crate::run::deps;
use crate::run::estimate;
use crate::run::recorder::Recorder;
use crate::run::seeds;
use crate::run::workload_run::{Purpose, WorkloadRun};
use crate::system::process::check_interrupted;

/// Seeds notes-read's database through the first runtime that can serve notes (rust when measured), so every
/// runtime reads rows written the same way.
fn seed_notes(wr: &mut WorkloadRun<'_>, recorder: &mut Recorder) -> anyhow::Result<()> {
    let deps = wr.deps.context("the notes workloads need PostgreSQL and Redis")?;
    let db = "compare_notes_read";
    deps.reset_database(db)?;
    wr.shared_db = Some(db.to_string());
    let rts = &wr.cfg.runtimes;
    let seeder = if rts.contains(&Runtime::Rust) {
        Runtime::Rust
    } else {
        let can = |r: &Runtime| matches!(r, Runtime::Bun | Runtime::Node);
        rts.iter().copied().find(can).unwrap_or(Runtime::Rust)
    };
    recorder.line(&format!("notes-read: seeding {} notes through {}", wr.cfg.seed_notes, seeder.name()));
    let spec = wr.spec(seeder, Purpose::Check)?;
    let (server, _) = crate::run::server::start_ready(&spec, wr.bench, &wr.plan.ready_path)
        .with_context(|| format!("starting {} to seed notes", seeder.name()))?;
    let seeded = seeds::seed_notes(&format!("http://127.0.0.1:{}", server.port), wr.cfg.seed_notes);
    server.stop();
    seeded
}

/// 1. A workload's data (notes-read's seeded notes), then its checks: the runtimes that passed.
pub fn checked(
    wr: &mut WorkloadRun<'_>,
    recorder: &mut Recorder,
    workdir: &std::path::Path,
) -> anyhow::Result<Vec<Runtime>> {
    if wr.workload() == Workload::NotesRead {
        seed_notes(wr, recorder)?;
    }
    check_cells(wr, recorder, workdir)
}

/// Checks, rust first (its answers are the reference), the floor last (it serves the reference's answer); each
/// check's record appended. The runtimes that passed, in the order given; where the workload has one body
/// under load, that body is what loadgen must see on every response.
fn check_cells(
    wr: &mut WorkloadRun<'_>,
    recorder: &mut Recorder,
    workdir: &std::path::Path,
) -> anyhow::Result<Vec<Runtime>> {
    let cfg = wr.cfg;
    let name = wr.workload().name();
    let (check_s, _, _) = estimate::estimates(cfg);

    let runtimes: Vec<Runtime> = cfg.runtimes.iter().copied().filter(|r| r.serves(wr.workload())).collect();
    let mut order: Vec<Runtime> = runtimes.iter().copied().filter(|r| *r == Runtime::Rust).collect();
    order.extend(runtimes.iter().copied().filter(|r| !matches!(r, Runtime::Rust | Runtime::Floor)));
    order.extend(runtimes.iter().copied().filter(|r| *r == Runtime::Floor));
    let mut reference: Option<(Runtime, Vec<Outcome>)> = None;
    let mut valid: Vec<Runtime> = Vec::new();
    for rt in order {
        check_interrupted()?;
        recorder.begin(&format!("{name} {} check", rt.name()));
        let mut rec = wr.record(rt, Kind::Check, 0);
        if rt == Runtime::Floor {
            wr.floor_body = match &reference {
                Some((_, answers)) => {
                    answers.get(wr.plan.primary).and_then(|a| a.as_ref().ok()).map(|a| a.body.clone())
                }
                None => wr.plan.probes.get(wr.plan.primary).and_then(|p| p.contract.as_ref()).map(|c| c.body.clone()),
            };
        }
        let redis_down = match rt {
            Runtime::FlightNode | Runtime::FlightBun => {
                wr.server_env(rt, Purpose::Check)?.redis_url.and_then(|url| deps::redis_unanswered(&url))
            }
            _ => None,
        };
        if rt == Runtime::Floor && wr.floor_body.is_none() {
            rec.void_because("no reference answer for the floor to serve (every other runtime's check failed)");
        } else if let Some(why) = redis_down {
            // Flight waits on Redis without a deadline (ioredis queues commands while it reconnects), so a
            // dead Redis would show up as hung requests; fail the cell up front instead.
            rec.void_because(why);
        } else {
            let spec = wr.spec(rt, Purpose::Check)?;
            let only = (rt == Runtime::Floor).then_some(wr.plan.primary);
            let refs = reference.as_ref().map(|(r, a)| Reference { runtime: r.name(), answers: a });
            let input = cells::CheckInput {
                spec: &spec,
                ready_path: &wr.plan.ready_path,
                probes: &wr.plan.probes,
                only,
                content_type_essence: wr.workload().content_type_essence(),
                reference: refs,
            };
            let answers = cells::check(wr.bench, &input, &mut rec);
            if !rec.void && reference.is_none() && rt != Runtime::Floor {
                reference = Some((rt, answers));
            }
        }
        check_interrupted()?;
        if rec.void {
            recorder.end(check_s, &format!("VOID: {}", rec.void_reason.as_deref().unwrap_or("")));
            let (steps, seconds) = estimate::cell_after_check(cfg, wr.workload());
            recorder.skip(steps, seconds);
        } else {
            recorder.end(check_s, &format!("answers agree; first 200 after {:.1} ms", rec.startup_ms.unwrap_or(0.0)));
            valid.push(rt);
        }
        recorder.append(rec)?;
    }
    // Measured in the order given, not the check order.
    let valid: Vec<Runtime> = runtimes.iter().copied().filter(|r| valid.contains(r)).collect();

    // Every response under load must be the reference's, where the workload has one body.
    let expected = reference.as_ref().and_then(|(_, a)| a.get(wr.plan.primary)?.as_ref().ok().map(|a| a.body.clone()));
    if let (true, Some(body)) = (wr.workload().one_body_under_load(), expected) {
        let file = workdir.join(format!("{name}-expected-body"));
        std::fs::write(&file, body)?;
        wr.plan.load.expect_body_file = Some(file);
    }

    Ok(valid)
}
