//! `loadgen merge`: several reports (typically one per loader machine, run at the same time against the
//! same server) added up into one, exactly.
//!
//! - Counts add: responses, status codes, errors, bytes, connections (opened too), reconnects, in flight at
//!   end, open-loop scheduled, late and missed sends, assertions, and TLS: negotiated values, handshakes by
//!   kind, failures by reason (a key one report lacks counts 0 there, so different negotiations show up as
//!   several keys); the handshake-latency histograms add like the request latency's. Reports without TLS
//!   add nothing to it; `tls` is null only when none had it. HTTP/2's counts (`http2`) add the same way; of
//!   the server's SETTINGS the first report's are kept, and `capped_at` is the lowest cap.
//! - The runs are taken as concurrent: `duration_s` is the longest window, and `req_per_s` (and the
//!   open-loop target and achieved rates) are the sums of each report's own rates, not total responses
//!   over the longest window.
//! - Latency: the histograms are decoded, added and re-encoded, and every percentile is recomputed from the
//!   merged histogram. Percentiles are never averaged.
//! - CPU: the threads are concatenated (in report order) and the totals recomputed from them (`process_us`
//!   adds up); each thread's `busy_pct` stays relative to its own run's window.
//! - The description of the run comes from the first report, except: `target` is kept when all reports
//!   agree, and otherwise becomes `"N targets: a, b, …"`; `config.threads`, `config.connections` and
//!   `config.rate` add up; `config.duration_s` is the longest; `config.pin` is the concatenation when every
//!   report was pinned (else null); `config.engine` is `"mixed"` when the reports used different engines; `started_unix_ms` is the earliest start; `merged_from` adds up.
//! - Refused: no reports, a schema other than [`SCHEMA`], and a mix of closed- and open-loop reports (their
//!   latencies measure different things: from the write versus from the intended send time).

use std::path::Path;

use anyhow::Context as _;
use hdrhistogram::Histogram;

use crate::report::{
    Assertions, Connections, Cpu, Latency, OpenLoop, Report, ReportError, RunConfig, SCHEMA, ThreadCpu, Tls,
    decode_histogram,
};
use crate::stats::{Errors, Http2Counts, TlsCounts};

/// Merges reports into one (see the module docs for what adds up and what is recomputed).
pub fn merge(reports: Vec<Report>) -> Result<Report, ReportError> {
    // No dedicated variant for "nothing to merge" in ReportError; the CLI requires at least one file anyway.
    let Some(first) = reports.first() else {
        return Err(ReportError::Mismatch("the number of reports (none were given)"));
    };
    check_mergeable(&reports, first)?;
    let open = first.open_loop.is_some();
    let latency = merge_latency(reports.iter().map(|r| &r.latency), first.latency.corrected)?;
    let latency_from_write = if open {
        Some(merge_latency(reports.iter().filter_map(|r| r.latency_from_write.as_ref()), false)?)
    } else {
        None
    };

    let sum = |f: fn(&Report) -> u64| reports.iter().map(f).sum::<u64>();
    let max_f = |f: fn(&Report) -> f64| reports.iter().map(f).fold(0.0, f64::max);
    let mut status = std::collections::BTreeMap::new();
    let mut errors = Errors::default();
    for r in &reports {
        for (code, n) in &r.status {
            *status.entry(*code).or_insert(0) += n;
        }
        errors.add(&r.errors);
    }
    let responses = sum(|r| r.responses);
    let threads: Vec<ThreadCpu> = reports.iter().flat_map(|r| r.cpu.threads.iter().cloned()).collect();
    let process_us = reports.iter().map(|r| r.cpu.process_us.max(r.cpu.total_us)).sum::<u64>();

    Ok(Report {
        schema: SCHEMA.to_string(),
        loadgen_version: first.loadgen_version.clone(),
        started_unix_ms: reports.iter().map(|r| r.started_unix_ms).min().unwrap_or(first.started_unix_ms),
        command: first.command.clone(),
        target: merged_target(&reports, first),
        config: merged_config(&reports, first),
        duration_s: max_f(|r| r.duration_s),
        responses,
        req_per_s: reports.iter().map(|r| r.req_per_s).sum(),
        status,
        non_2xx_3xx: sum(|r| r.non_2xx_3xx),
        errors,
        bytes_read: sum(|r| r.bytes_read),
        bytes_written: sum(|r| r.bytes_written),
        connections: Connections {
            asked: sum(|r| r.connections.asked),
            established: sum(|r| r.connections.established),
            failed: sum(|r| r.connections.failed),
            opened: sum(|r| r.connections.opened),
        },
        reconnects: sum(|r| r.reconnects),
        in_flight_at_end: sum(|r| r.in_flight_at_end),
        open_loop: open.then(|| merged_open_loop(&reports)),
        assertions: Assertions { checked: sum(|r| r.assertions.checked), failed: sum(|r| r.assertions.failed) },
        latency,
        latency_from_write,
        cpu: Cpu::new(threads, process_us, responses),
        merged_from: sum(|r| r.merged_from),
        tls: merged_tls(&reports)?,
        http2: reports.iter().filter_map(|r| r.http2.as_ref()).fold(None, |sum: Option<Http2Counts>, h| {
            let mut sum = sum.unwrap_or_default();
            sum.add(h);
            Some(sum)
        }),
    })
}

/// The TLS parts of the reports that have one, added up (None when none has).
fn merged_tls(reports: &[Report]) -> Result<Option<Tls>, ReportError> {
    let parts: Vec<&Tls> = reports.iter().filter_map(|r| r.tls.as_ref()).collect();
    if parts.is_empty() {
        return Ok(None);
    }
    let mut counts = TlsCounts::default();
    for part in &parts {
        counts.add(&part.counts);
    }
    let handshake_latency = merge_latency(parts.iter().map(|t| &t.handshake_latency), false)?;
    Ok(Some(Tls { counts, handshake_latency }))
}

/// Refuses reports that do not add up to one run: another schema, or closed and open loop mixed (their
/// latencies measure different things).
fn check_mergeable(reports: &[Report], first: &Report) -> Result<(), ReportError> {
    for r in reports {
        if r.schema != SCHEMA {
            return Err(ReportError::Schema { found: r.schema.clone() });
        }
    }
    let open = first.open_loop.is_some();
    for r in reports {
        if r.config.mode != first.config.mode || r.open_loop.is_some() != open {
            return Err(ReportError::Mismatch("the mode (closed or open loop)"));
        }
        if r.latency.corrected != first.latency.corrected || r.latency_from_write.is_some() != open {
            return Err(ReportError::Mismatch("how latency was measured (from the write or the intended send)"));
        }
    }
    Ok(())
}

/// The one target when all reports agree, else `"N targets: a, b, …"`.
fn merged_target(reports: &[Report], first: &Report) -> String {
    let mut targets: Vec<&str> = Vec::new();
    for r in reports {
        if !targets.contains(&r.target.as_str()) {
            targets.push(&r.target);
        }
    }
    if targets.len() == 1 { first.target.clone() } else { format!("{} targets: {}", targets.len(), targets.join(", ")) }
}

/// The first report's config, with what describes the whole load added up across reports.
fn merged_config(reports: &[Report], first: &Report) -> RunConfig {
    let mut config = first.config.clone();
    config.threads = reports.iter().map(|r| r.config.threads).sum();
    config.connections = reports.iter().map(|r| r.config.connections).sum();
    config.duration_s = reports.iter().map(|r| r.config.duration_s).fold(0.0, f64::max);
    let open = first.open_loop.is_some();
    config.rate = if open { Some(reports.iter().filter_map(|r| r.config.rate).sum()) } else { first.config.rate };
    // Ramps add up when every report ramped over the same time; otherwise the merge is no single ramp.
    let same_ramp = reports.iter().all(|r| r.config.ramp_s == first.config.ramp_s);
    config.rate_start = match reports.iter().map(|r| r.config.rate_start).collect::<Option<Vec<f64>>>() {
        Some(starts) if same_ramp => Some(starts.iter().sum()),
        _ => None,
    };
    config.ramp_s = config.rate_start.and(first.config.ramp_s);
    config.pin = reports.iter().map(|r| r.config.pin.clone()).collect::<Option<Vec<_>>>().map(|p| p.concat());
    if reports.iter().any(|r| r.config.engine != first.config.engine) {
        config.engine = "mixed".to_string();
    }
    config
}

/// The open-loop figures of concurrent runs: rates and counts add.
fn merged_open_loop(reports: &[Report]) -> OpenLoop {
    let ols: Vec<&OpenLoop> = reports.iter().filter_map(|r| r.open_loop.as_ref()).collect();
    OpenLoop {
        target_rate: ols.iter().map(|o| o.target_rate).sum(),
        achieved_rate: ols.iter().map(|o| o.achieved_rate).sum(),
        scheduled: ols.iter().map(|o| o.scheduled).sum(),
        late_sends: ols.iter().map(|o| o.late_sends).sum(),
        missed_sends: ols.iter().map(|o| o.missed_sends).sum(),
    }
}

/// Decodes and adds the histograms, then recomputes every statistic from the sum.
fn merge_latency<'a>(parts: impl Iterator<Item = &'a Latency>, corrected: bool) -> Result<Latency, ReportError> {
    let mut merged: Option<Histogram<u64>> = None;
    for part in parts {
        let h = decode_histogram(&part.histogram)?;
        if h.len() != part.count {
            return Err(ReportError::Decode(format!(
                "the histogram holds {} values but the report counts {}",
                h.len(),
                part.count
            )));
        }
        match &mut merged {
            None => {
                let mut h = h;
                // Histograms from other loadgen builds may have other bounds: grow rather than fail.
                h.auto(true);
                merged = Some(h);
            }
            Some(acc) => acc.add(&h).map_err(|e| ReportError::Decode(format!("histograms do not add: {e:?}")))?,
        }
    }
    let merged = merged.unwrap_or_else(crate::stats::new_histogram);
    Latency::from_histogram(&merged, corrected)
}

/// Reads a JSON report written by `loadgen --json`, refusing other schema versions.
pub fn read_report(path: &Path) -> anyhow::Result<Report> {
    let raw = std::fs::read_to_string(path).with_context(|| format!("reading report {}", path.display()))?;
    let report: Report = serde_json::from_str(&raw)
        .with_context(|| format!("{} is not a loadgen JSON report (as written by --json)", path.display()))?;
    if report.schema != SCHEMA {
        return Err(ReportError::Schema { found: report.schema }).with_context(|| format!("report {}", path.display()));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{RunConfig, RunMeta};
    use crate::stats::WorkerStats;

    /// A run as `loadgen -tN -cN -d10s --warmup 1s [-R RATE --schedule poisson] URL` would record it, one thread
    /// per CPU.
    fn meta(threads: u32, connections: u32, rate: Option<f64>) -> RunMeta {
        let url = "http://127.0.0.1:3000/";
        let mut command = vec!["loadgen".to_string(), format!("-t{threads}"), format!("-c{connections}")];
        command.extend(["-d10s".into(), "--warmup=1s".into()]);
        command.extend(rate.into_iter().flat_map(|r| [format!("-R{r}"), "--schedule=poisson".into()]));
        command.push(url.into());
        let mut settings = crate::cli::run_settings_of(&command);
        settings.pins = Some((0..threads as usize).collect());
        RunMeta {
            config: RunConfig::new(&settings, threads as usize, "url".into(), "epoll"),
            command,
            target: url.into(),
            started_unix_ms: 1_700_000_000_000,
            duration_s: 10.0,
        }
    }

    /// A worker whose numbers all depend on `seed`, so two workers differ everywhere.
    fn worker(seed: u64, open_loop: bool) -> WorkerStats {
        let mut w = WorkerStats::new(open_loop);
        let n = 5_000 + seed * 1_000;
        for i in 0..n {
            // Different shapes per worker: merged percentiles are not any average of the parts.
            let v = 50 + (i * (seed + 3) * 7919) % (2_000 * (seed + 1));
            w.latency.record(v).unwrap_or_else(|e| panic!("{e}"));
            if let Some(h) = &mut w.latency_from_write {
                h.record(v / 2 + 1).unwrap_or_else(|e| panic!("{e}"));
            }
        }
        w.latency.record(1_000_000 * (seed + 1)).unwrap_or_else(|e| panic!("{e}"));
        if let Some(h) = &mut w.latency_from_write {
            h.record(900_000).unwrap_or_else(|e| panic!("{e}"));
        }
        w.responses = n + 1;
        w.status.insert(200, n + 1 - seed);
        if seed > 0 {
            w.status.insert(500 + seed as u16, seed);
        }
        w.errors = Errors {
            connect: seed,
            read: 1,
            write: 2,
            timeout: seed * 3,
            parse: 0,
            closed: 4,
            assertion: seed,
            tls: 0,
        };
        w.bytes_read = 120 * n;
        w.bytes_written = 40 * n;
        w.reconnects = seed + 2;
        w.connections_asked = 32;
        w.connections_established = 32 - seed;
        w.in_flight_at_end = 7 + seed;
        w.late_sends = if open_loop { 3 * seed + 1 } else { 0 };
        w.scheduled = if open_loop { n + 50 } else { 0 };
        w.missed_sends = if open_loop { seed + 5 } else { 0 };
        w.assertions_checked = n / 2;
        w.cpu_user_us = 4_000_000 + seed * 1_000_000;
        w.cpu_sys_us = 2_000_000;
        w.pinned_cpu = Some(seed as usize);
        w
    }

    fn report(meta: RunMeta, workers: &[WorkerStats]) -> Report {
        Report::from_workers(meta, workers).unwrap_or_else(|e| panic!("from_workers: {e}"))
    }

    fn json(v: &impl serde::Serialize) -> serde_json::Value {
        serde_json::to_value(v).unwrap_or_else(|e| panic!("{e}"))
    }

    fn assert_latency_eq(a: &Latency, b: &Latency) {
        assert_eq!(a.count, b.count);
        assert_eq!(a.corrected, b.corrected);
        for (x, y) in [
            (a.min_us, b.min_us),
            (a.p50_us, b.p50_us),
            (a.p75_us, b.p75_us),
            (a.p90_us, b.p90_us),
            (a.p95_us, b.p95_us),
            (a.p99_us, b.p99_us),
            (a.p99_9_us, b.p99_9_us),
            (a.p99_99_us, b.p99_99_us),
            (a.max_us, b.max_us),
        ] {
            assert_eq!(x, y, "{a:?} vs {b:?}");
        }
        assert!((a.mean_us - b.mean_us).abs() < 1e-6 * a.mean_us.max(1.0), "{} vs {}", a.mean_us, b.mean_us);
        assert!((a.stdev_us - b.stdev_us).abs() < 1e-6 * a.stdev_us.max(1.0), "{} vs {}", a.stdev_us, b.stdev_us);
        let (ha, hb) = (decode_histogram(&a.histogram), decode_histogram(&b.histogram));
        let (ha, hb) = (ha.unwrap_or_else(|e| panic!("{e}")), hb.unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(ha, hb, "merged histogram differs");
    }

    fn merging_equals_one_run(open: bool) {
        let (a, b) = (worker(0, open), worker(1, open));
        let half = open.then_some(10_000.0);
        let whole = open.then_some(20_000.0);
        let mut meta_b = meta(1, 32, half);
        meta_b.config.pin = Some(vec![1]);
        let merged =
            merge(vec![report(meta(1, 32, half), std::slice::from_ref(&a)), report(meta_b, std::slice::from_ref(&b))])
                .unwrap_or_else(|e| panic!("merge: {e}"));
        let single = report(meta(2, 64, whole), &[a, b]);

        assert_eq!(merged.merged_from, 2);
        assert_eq!(merged.responses, single.responses);
        assert_eq!(merged.status, single.status);
        assert_eq!(merged.non_2xx_3xx, single.non_2xx_3xx);
        assert_eq!(merged.errors, single.errors);
        assert_eq!(merged.bytes_read, single.bytes_read);
        assert_eq!(merged.bytes_written, single.bytes_written);
        assert_eq!(json(&merged.connections), json(&single.connections));
        assert_eq!(merged.reconnects, single.reconnects);
        assert_eq!(merged.in_flight_at_end, single.in_flight_at_end);
        assert_eq!(json(&merged.assertions), json(&single.assertions));
        assert_eq!(merged.duration_s, single.duration_s);
        assert!((merged.req_per_s - single.req_per_s).abs() < 1e-9, "{} vs {}", merged.req_per_s, single.req_per_s);
        assert_eq!(json(&merged.config), json(&single.config));
        assert_eq!(merged.target, single.target);
        assert_latency_eq(&merged.latency, &single.latency);
        match (&merged.latency_from_write, &single.latency_from_write) {
            (Some(m), Some(s)) => assert_latency_eq(m, s),
            (None, None) => assert!(!open),
            other => panic!("latency_from_write: {other:?}"),
        }
        match (&merged.open_loop, &single.open_loop) {
            (Some(m), Some(s)) => {
                assert_eq!((m.scheduled, m.late_sends, m.missed_sends), (s.scheduled, s.late_sends, s.missed_sends));
                assert_eq!(m.target_rate, s.target_rate);
                assert!((m.achieved_rate - s.achieved_rate).abs() < 1e-9);
            }
            (None, None) => assert!(!open),
            other => panic!("open_loop: {other:?}"),
        }
        assert_eq!(merged.cpu.total_us, single.cpu.total_us);
        assert_eq!(json(&merged.cpu.threads), json(&single.cpu.threads));
        assert_eq!(merged.cpu.saturated, single.cpu.saturated);
        assert!((merged.cpu.us_per_response - single.cpu.us_per_response).abs() < 1e-9);
        assert!((merged.cpu.responses_per_cpu_s - single.cpu.responses_per_cpu_s).abs() < 1e-6);
    }

    #[test]
    fn merging_disjoint_runs_equals_one_run_closed_loop() {
        merging_equals_one_run(false);
    }

    #[test]
    fn merging_disjoint_runs_equals_one_run_open_loop() {
        merging_equals_one_run(true);
    }

    #[test]
    fn merged_percentiles_are_not_averaged() {
        // One fast run and one slow run: the merged p50 lies between, at the histogram's answer.
        let mut fast = WorkerStats::new(false);
        let mut slow = WorkerStats::new(false);
        for _ in 0..900 {
            fast.latency.record(100).unwrap_or_else(|e| panic!("{e}"));
        }
        for _ in 0..100 {
            slow.latency.record(10_000).unwrap_or_else(|e| panic!("{e}"));
        }
        let merged = merge(vec![report(meta(1, 1, None), &[fast]), report(meta(1, 1, None), &[slow])])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(merged.latency.count, 1000);
        assert_eq!(merged.latency.p50_us, 100);
        assert_eq!(merged.latency.p90_us, 100);
        assert!(merged.latency.p99_us >= 9_995, "{}", merged.latency.p99_us);
    }

    #[test]
    fn merging_one_report_gives_it_back() {
        for open in [false, true] {
            let one = report(meta(2, 64, open.then_some(5_000.0)), &[worker(0, open), worker(2, open)]);
            let merged = merge(vec![one.clone()]).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(json(&merged), json(&one));
        }
    }

    #[test]
    fn different_targets_are_named() {
        let a = report(meta(1, 1, None), &[worker(0, false)]);
        let mut b = report(meta(1, 1, None), &[worker(1, false)]);
        b.target = "http://127.0.0.2:3000/".into();
        b.started_unix_ms -= 5;
        b.duration_s = 10.5;
        let merged = merge(vec![a.clone(), b, a]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(merged.target, "2 targets: http://127.0.0.1:3000/, http://127.0.0.2:3000/");
        assert_eq!(merged.merged_from, 3);
        assert_eq!(merged.duration_s, 10.5);
        assert_eq!(merged.started_unix_ms, 1_700_000_000_000 - 5);
        assert_eq!(merged.config.pin, Some(vec![0, 0, 0]));
    }

    #[test]
    fn refuses_nothing_other_schemas_and_mixed_modes() {
        assert!(matches!(merge(Vec::new()), Err(ReportError::Mismatch(_))));

        let good = report(meta(1, 1, None), &[worker(0, false)]);
        let mut old = good.clone();
        old.schema = "loadgen-report/0".into();
        match merge(vec![good.clone(), old]) {
            Err(ReportError::Schema { found }) => assert_eq!(found, "loadgen-report/0"),
            other => panic!("expected a schema error, got {other:?}"),
        }

        let open = report(meta(1, 1, Some(100.0)), &[worker(0, true)]);
        assert!(matches!(merge(vec![good, open]), Err(ReportError::Mismatch(_))));
    }

    #[test]
    fn corrupt_histograms_are_refused() {
        let good = report(meta(1, 1, None), &[worker(0, false)]);

        let mut not_base64 = good.clone();
        not_base64.latency.histogram = "%%% not base64 %%%".into();
        assert!(matches!(merge(vec![good.clone(), not_base64]), Err(ReportError::Decode(_))));

        let mut garbage = good.clone();
        garbage.latency.histogram = "aGVsbG8gd29ybGQ=".into(); // "hello world": base64, but no histogram
        assert!(matches!(merge(vec![garbage]), Err(ReportError::Decode(_))));

        let mut truncated = good.clone();
        let cut = truncated.latency.histogram.len() / 2 / 4 * 4;
        truncated.latency.histogram.truncate(cut);
        assert!(matches!(merge(vec![truncated]), Err(ReportError::Decode(_))));

        // A valid histogram that is not this report's (counts disagree) is refused too.
        let mut swapped = good.clone();
        swapped.latency.histogram = report(meta(1, 1, None), &[worker(1, false)]).latency.histogram;
        assert!(matches!(merge(vec![swapped]), Err(ReportError::Decode(_))));
    }

    #[test]
    fn read_report_names_the_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let good = report(meta(1, 1, None), &[worker(0, false)]);

        let path = dir.path().join("good.json");
        std::fs::write(&path, serde_json::to_string_pretty(&good).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
        let back = read_report(&path).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(json(&back), json(&good));

        let missing = dir.path().join("missing.json");
        let err = format!("{:#}", read_report(&missing).err().unwrap_or_else(|| panic!("read a missing file")));
        assert!(err.contains("missing.json"), "{err}");

        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{\"schema\": 1}").unwrap_or_else(|e| panic!("{e}"));
        let err = format!("{:#}", read_report(&bad).err().unwrap_or_else(|| panic!("read a bad file")));
        assert!(err.contains("bad.json") && err.contains("not a loadgen JSON report"), "{err}");

        let mut old = good;
        old.schema = "loadgen-report/0".into();
        let old_path = dir.path().join("old.json");
        std::fs::write(&old_path, serde_json::to_string(&old).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
        let err = format!("{:#}", read_report(&old_path).err().unwrap_or_else(|| panic!("read an old report")));
        assert!(err.contains("old.json") && err.contains("loadgen-report/0"), "{err}");
    }
}
