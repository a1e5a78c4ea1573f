//! metadata's DB-only runs: the lookup-and-build step (SQLite point read, locales parse, JSON render) in a
//! loop with no HTTP and no server, on each runtime's own SQLite binding: `metadata-rs bench-lookup` and
//! bench/peers/metadata/lookup-bench.mjs under Bun (bun:sqlite) and Node (node:sqlite). All three walk the
//! same id and region sequence over the same file and print the same JSON line; the found count and the
//! bytes built must agree across runtimes, or the run does not count. Each run then times a tenth as many
//! single-row inserts into a new file of its own (the insert half of the post's bun:sqlite against
//! node:sqlite), and the table read back must agree too. Pinned to the server cores, one run per round per
//! runtime, the order rotated like the rounds.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;

use crate::format::num;
use crate::plan::dataset::MetadataData;
use crate::plan::paths::Paths;
use crate::plan::runtimes::Runtime;
use crate::plan::workloads::Service;
use crate::records::{InsertRun, LookupRun, Record};
use crate::run::recorder::Recorder;
use crate::run::setup::Bench;
use crate::settings::Config;
use crate::system::process::{Spawned, check_interrupted};

/// The runtimes with a DB-only loop.
pub fn runs_on(rt: Runtime) -> bool {
    matches!(rt, Runtime::Rust | Runtime::Bun | Runtime::Node)
}

/// The untimed lookups before the timed ones: a tenth, as the loops' own defaults have it. The inserts have
/// the same share untimed.
pub fn warmup(iterations: u64) -> u64 {
    iterations / 10
}

/// The timed inserts of a run of `iterations` lookups: a tenth as many, so the default run (10 s windows,
/// 1,000,000 lookups) times the post's 100,000 inserts.
pub fn inserts(iterations: u64) -> u64 {
    iterations / 10
}

/// How long a run may take before it is killed: a debug build does a few thousand lookups (or inserts) a
/// second.
fn limit(iterations: u64) -> Duration {
    let operations = iterations + warmup(iterations) + inserts(iterations) + warmup(inserts(iterations));
    Duration::from_secs(30) + Duration::from_secs_f64(operations as f64 / 2_000.0)
}

/// The loop's one output line; the insert fields are there when it was asked for inserts.
#[derive(Debug, Deserialize)]
struct Line {
    iterations: u64,
    seconds: f64,
    ops_per_sec: f64,
    found: u64,
    bytes: u64,
    inserts: Option<u64>,
    insert_seconds: Option<f64>,
    inserts_per_sec: Option<f64>,
    rows: Option<u64>,
    position_sum: Option<u64>,
    id_chars: Option<u64>,
}

impl Line {
    fn insert_run(&self) -> Option<InsertRun> {
        Some(InsertRun {
            inserts: self.inserts?,
            seconds: self.insert_seconds?,
            ops_per_s: self.inserts_per_sec?,
            rows: self.rows?,
            position_sum: self.position_sum?,
            id_chars: self.id_chars?,
        })
    }
}

/// The insert loop's file for one run, and the WAL and shared-memory files SQLite keeps beside it.
fn insert_files(db: &Path) -> [PathBuf; 3] {
    let with = |suffix: &str| PathBuf::from(format!("{}{suffix}", db.display()));
    [db.to_path_buf(), with("-wal"), with("-shm")]
}

/// The command for `rt`'s loop over `data`, pinned to the server cores: `iterations` lookups, then
/// [`inserts`] of them into `insert_db` (a file that does not exist yet).
pub fn command(
    rt: Runtime,
    paths: &Paths,
    bench: &Bench,
    data: &MetadataData,
    iterations: u64,
    insert_db: &Path,
) -> Command {
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
    let count = |n: u64| n.to_string();
    cmd.args(["--iterations", &count(iterations), "--warmup", &count(warmup(iterations))]);
    let timed = inserts(iterations);
    cmd.args(["--inserts", &count(timed), "--insert-warmup", &count(warmup(timed))]).arg("--insert-db").arg(insert_db);
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
                inserts: line.insert_run(),
            };
            if run.iterations != iterations {
                rec.void_because(format!("ran {} lookups, not {iterations}", run.iterations));
            }
            // Fewer than ten lookups ask for no inserts, and the loop then prints no insert fields.
            match (run.inserts, inserts(iterations)) {
                (None, 0) => {}
                (Some(i), asked) if i.inserts == asked => {}
                (Some(i), asked) => rec.void_because(format!("ran {} inserts, not {asked}", i.inserts)),
                (None, _) => rec.void_because("its output has no insert fields"),
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
    let insert_db = stem.with_extension("inserts.db");
    remove_insert_files(&insert_db);
    let line = run_loop(command(rt, paths, bench, data, iterations, &insert_db), &stem, limit(iterations), rt);
    // The loop read its rows back itself; the file is only disk to give back.
    remove_insert_files(&insert_db);
    line
}

fn remove_insert_files(db: &Path) {
    for file in insert_files(db) {
        let _ = std::fs::remove_file(file);
    }
}

/// Runs the loop's `cmd` with its output in `<stem>.out` and `.err`, killed after `limit`; its JSON line.
fn run_loop(mut cmd: Command, stem: &Path, limit: Duration, rt: Runtime) -> anyhow::Result<Line> {
    let (out_path, err_path) = (stem.with_extension("out"), stem.with_extension("err"));
    cmd.stdin(Stdio::null()).stdout(File::create(&out_path)?).stderr(File::create(&err_path)?);
    let mut proc = Spawned::spawn(cmd, "lookups").with_context(|| format!("starting {}'s DB-only loop", rt.name()))?;
    let stderr = || std::fs::read_to_string(&err_path).unwrap_or_default().trim().chars().take(300).collect::<String>();
    let Some(status) = proc.wait_timeout(limit)? else {
        proc.kill();
        anyhow::bail!("still running after {limit:?}; killed");
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
                (Some(l), false) => format!(
                    "{} lookups/s, {} inserts/s",
                    num(l.ops_per_s, 0),
                    l.inserts.map_or("no".into(), |i| num(i.ops_per_s, 0))
                ),
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

/// The runs of one round whose found and bytes, or whose inserted rows read back, differ from rust's (or,
/// without rust, from the first runtime's): they did not build the same bodies or write the same rows.
pub fn disagreements(round: &[Record]) -> Vec<(usize, String)> {
    let tally = |r: &Record| r.lookups.map(|l| (l.found, l.bytes));
    let rows = |r: &Record| r.lookups.and_then(|l| l.inserts).map(|i| (i.rows, i.position_sum, i.id_chars));
    let reference = round.iter().find(|r| r.runtime == "rust").or(round.first()).filter(|r| !r.void);
    let Some((name, want)) = reference.and_then(|r| Some((r.runtime.clone(), tally(r)?))) else { return Vec::new() };
    let want_rows = reference.and_then(rows);
    round
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match (tally(r), rows(r)) {
            (Some(got), _) if got != want => Some((
                i,
                format!(
                    "found {} and {} bytes, {name} found {} and {} bytes: not the same bodies",
                    got.0, got.1, want.0, want.1
                ),
            )),
            (Some(_), Some(got)) if want_rows.is_some_and(|w| w != got) => {
                let w = want_rows.expect("checked");
                Some((
                    i,
                    format!(
                        "read back {} rows summing {} and {}, {name} read back {} summing {} and {}: not the same rows",
                        got.0, got.1, got.2, w.0, w.1, w.2
                    ),
                ))
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_lookup_record as rec;

    #[test]
    fn lookups_must_find_what_rust_found() {
        let records = vec![rec("rust", 1, 200_000.0, 10), rec("bun", 1, 100_000.0, 10)];
        assert!(disagreements(&records).is_empty());
        let odd = [rec("rust", 1, 1.0, 10), rec("node", 1, 1.0, 9)];
        let found = disagreements(&odd);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, 1);
        assert!(found[0].1.contains("found 9 and 63 bytes, rust found 10 and 70 bytes"), "{found:?}");
    }

    #[test]
    fn inserted_rows_must_agree_too() {
        use crate::records::test_insert_record as ins;
        let same = [ins("rust", 1, 300_000.0, 42), ins("bun", 1, 250_000.0, 42), ins("node", 1, 200_000.0, 42)];
        assert!(disagreements(&same).is_empty());
        let odd = [ins("rust", 1, 300_000.0, 42), ins("node", 1, 200_000.0, 41)];
        let found = disagreements(&odd);
        assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), [1]);
        assert!(
            found[0].1.contains("read back 1100 rows summing 41 and 11000, rust read back 1100 summing 42"),
            "{found:?}"
        );
    }

    #[test]
    fn the_insert_files_are_the_db_and_its_wal_and_shm() {
        let files = insert_files(Path::new("/l/lookups-bun-r1.inserts.db"));
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        assert_eq!(
            names,
            ["/l/lookups-bun-r1.inserts.db", "/l/lookups-bun-r1.inserts.db-wal", "/l/lookups-bun-r1.inserts.db-shm"]
        );
    }
}
