//! `--capacity`, the run half (the report half is `report::capacity`): one search per valid runtime and
//! round, each on a fresh server, started from an eighth of the runtime's closed-loop median.

use crate::format::num;
use crate::plan::runtimes::Runtime;
use crate::records::{Kind, Record};
use crate::run::cells;
use crate::run::estimate;
use crate::run::recorder::Recorder;
use crate::run::workload_run::{Purpose, WorkloadRun};
use crate::settings::CapacitySearch;
use crate::stats::rotated;
use crate::system::process::check_interrupted;

/// Where a runtime's capacity search starts: an eighth of its median closed-loop req/s (three doublings to
/// pass it, then bisection), to two significant digits; loadgen's own 1000 without a valid closed run.
pub fn capacity_start(records: &[Record], workload: &str, rt: Runtime) -> f64 {
    let closed = records
        .iter()
        .filter(|r| r.workload == workload && r.runtime == rt.name() && r.kind == Kind::Closed && !r.void);
    match crate::stats::median(closed.filter_map(|r| r.req_per_s)) {
        Some(rps) if rps >= 8.0 => {
            let eighth = rps / 8.0;
            let unit = 10f64.powf(eighth.log10().floor() - 1.0);
            (eighth / unit).round() * unit
        }
        Some(_) => 1.0,
        None => 1000.0,
    }
}

/// `--capacity`: `runs` searches per valid runtime, one fresh server each, the order rotated per round,
/// every record appended as found; loadgen's own result (every step) kept beside the records.
pub fn capacity_rounds(
    wr: &WorkloadRun<'_>,
    search: &CapacitySearch,
    valid: &[Runtime],
    recorder: &mut Recorder,
) -> anyhow::Result<()> {
    let name = wr.workload().name();
    let (_, search_s) = estimate::capacity_estimate(wr.cfg);
    recorder.line(&format!(
        "{name}: capacity at {} ({} s steps after {} s warmups)",
        crate::report::capacity::objective_label(search.p99.as_micros() as u64),
        num(search.step.as_secs_f64(), 1),
        num(search.warmup.as_secs_f64(), 1)
    ));
    let jsonl = recorder.jsonl().to_path_buf();
    for round in 1..=search.runs {
        for rt in rotated(valid, round as usize - 1) {
            check_interrupted()?;
            recorder.begin(&format!("{name} {} capacity search {round}/{}", rt.name(), search.runs));
            let mut rec = wr.record(rt, Kind::Capacity, round);
            let spec = wr.spec(rt, Purpose::Run)?;
            let tag = format!("{name}-{}-capacity-r{round}", rt.name());
            let input = wr.run_input(rt, &spec, &wr.plan.load, None, &tag);
            let json = crate::run::loader::capacity_file(&jsonl, &tag);
            let dir = jsonl.parent().unwrap_or(std::path::Path::new(""));
            let steps_file = json.strip_prefix(dir).unwrap_or(&json).to_string_lossy().into_owned();
            let start = capacity_start(recorder.records(), name, rt);
            cells::capacity(wr.bench, &input, search, start, &json, steps_file, &mut rec);
            check_interrupted()?;
            recorder.end(search_s, &crate::report::capacity::summary_line(&rec));
            recorder.append(rec)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{self, RunMeta};

    #[test]
    fn capacity_starts_at_an_eighth_of_the_closed_rate() {
        let meta = RunMeta {
            run_id: "r".into(),
            command: vec!["compare".into()],
            machine: records::machine_info(),
            layout: records::Layout { server_cores: "0".into(), loader_cores: "1".into(), db_cores: "1".into() },
            provenance: None,
        };
        let closed = |rps: f64, void: bool| {
            let mut r = Record::new(&meta, "hello-bare", "rust", None, Kind::Closed, 1);
            (r.req_per_s, r.void) = (Some(rps), void);
            r
        };
        let out = [closed(100_000.0, false), closed(123_456.0, false), closed(110_000.0, false), closed(1.0, true)];
        assert_eq!(capacity_start(&out, "hello-bare", Runtime::Rust), 14_000.0, "110000 / 8 = 13750, two digits");
        assert_eq!(capacity_start(&out, "hello-bare", Runtime::Bun), 1000.0, "no closed run: loadgen's default");
        assert_eq!(capacity_start(&[closed(4.0, false)], "hello-bare", Runtime::Rust), 1.0);
        assert_eq!(capacity_start(&out, "metadata", Runtime::Rust), 1000.0, "another workload's runs do not count");
    }
}
