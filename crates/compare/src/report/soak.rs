//! Soaks (`compare --soak DURATION`): one long-lived server per runtime and workload, all of them at once,
//! each under its own fixed open-loop rate, sampled every `--soak-interval` (RSS of the whole process tree, CPU per response, the window's latency
//! distribution), so a leak shows as a slope rather than as a number at the end. This module turns the
//! samples into a verdict per cell and renders the soak section and its charts.
//!
//! The slope detector, and why it is built this way:
//! - The first part of a soak is left out (the smaller of 60 s and a quarter of the samples' span): allocator
//!   arenas, connection buffers and caches grow to their working size there, which is not a leak.
//! - The slope is Theil–Sen's (the median of the slopes between every pair of samples), not least squares:
//!   one step of an allocator returning memory, or a single outlier sample, moves it very little.
//! - "growing" needs the fitted growth over the kept span to reach both [`GROWTH_FLOOR_KIB`] and
//!   [`GROWTH_SHARE`] of the median RSS, and the last third's median RSS to sit above the first third's by
//!   half that much: a real leak keeps climbing, a plateau reached early does not.
//! - Fewer than [`MIN_SAMPLES`] kept samples give "too short", never "flat".

use std::fmt::Write;
use std::path::{Path, PathBuf};

use crate::format::num;
use crate::records::{Kind, Record, ordered};
use crate::report::charts::{self, Series};
use crate::stats::median;
use crate::table::Table;

/// Growth below this over the kept span is noise whatever the RSS (page-granular accounting, thread stacks).
pub const GROWTH_FLOOR_KIB: f64 = 2048.0;
/// …and so is growth below this share of the median RSS.
pub const GROWTH_SHARE: f64 = 0.05;
/// Kept samples needed for a verdict.
pub const MIN_SAMPLES: usize = 5;
/// A window that served under this share of the rate fell behind: at its rate an open loop serves within a
/// request or two of it per window (seen here: 299.8 of 300 req/s, the median window of an hour).
pub const BEHIND_SHARE: f64 = 0.9;
/// The longest start of a soak left out of the fit.
const SETTLE_MAX_S: f64 = 60.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Flat,
    Growing,
    TooShort,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Flat => "flat",
            Verdict::Growing => "growing",
            Verdict::TooShort => "too short",
        }
    }
}

/// The RSS trend of one soak.
#[derive(Debug, Clone, PartialEq)]
pub struct Trend {
    /// Samples kept for the fit (after the settle span).
    pub kept: usize,
    /// Where the kept span starts, seconds into the soak.
    pub settle_s: f64,
    /// Theil–Sen slope, KiB per hour.
    pub slope_kib_per_h: f64,
    /// The slope times the kept span: how much the fit says RSS grew, KiB.
    pub growth_kib: f64,
    /// Median RSS of the last third minus that of the first third of the kept samples, KiB.
    pub thirds_kib: f64,
    pub median_kib: f64,
    pub verdict: Verdict,
}

/// The trend of `(seconds, RSS KiB)` samples, in time order.
pub fn trend(samples: &[(f64, f64)]) -> Trend {
    let span = match (samples.first(), samples.last()) {
        (Some(a), Some(b)) => b.0 - a.0,
        _ => 0.0,
    };
    let start = samples.first().map_or(0.0, |s| s.0);
    let settle_s = start + (span / 4.0).min(SETTLE_MAX_S);
    let kept: Vec<(f64, f64)> =
        samples.iter().copied().filter(|(t, rss)| *t >= settle_s && t.is_finite() && rss.is_finite()).collect();
    let median_kib = median(kept.iter().map(|s| s.1)).unwrap_or(0.0);
    let mut slopes = Vec::with_capacity(kept.len() * kept.len().saturating_sub(1) / 2);
    for (i, a) in kept.iter().enumerate() {
        for b in &kept[i + 1..] {
            if b.0 > a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    let slope_kib_per_s = median(slopes).unwrap_or(0.0);
    let kept_span = kept.last().zip(kept.first()).map_or(0.0, |(b, a)| b.0 - a.0);
    let growth_kib = slope_kib_per_s * kept_span;
    let third = kept.len() / 3;
    let thirds_kib = if third == 0 {
        0.0
    } else {
        let last = median(kept[kept.len() - third..].iter().map(|s| s.1)).unwrap_or(0.0);
        let first = median(kept[..third].iter().map(|s| s.1)).unwrap_or(0.0);
        last - first
    };
    let threshold = GROWTH_FLOOR_KIB.max(GROWTH_SHARE * median_kib);
    let verdict = if kept.len() < MIN_SAMPLES {
        Verdict::TooShort
    } else if growth_kib >= threshold && thirds_kib >= threshold / 2.0 {
        Verdict::Growing
    } else {
        Verdict::Flat
    };
    Trend {
        kept: kept.len(),
        settle_s: settle_s - start,
        slope_kib_per_h: slope_kib_per_s * 3600.0,
        growth_kib,
        thirds_kib,
        median_kib,
        verdict,
    }
}

/// One runtime's soak in one workload, summarized.
#[derive(Debug, Clone, PartialEq)]
pub struct SoakCell {
    pub runtime: String,
    pub samples: usize,
    pub void_samples: usize,
    /// The first void sample's reason (a server that exited says so here).
    pub first_void: Option<String>,
    pub elapsed_s: f64,
    pub rate: Option<f64>,
    pub rss_idle_kib: Option<u64>,
    pub rss_first_kib: Option<u64>,
    pub rss_last_kib: Option<u64>,
    pub rss_max_kib: Option<u64>,
    pub p99_first_us: Option<u64>,
    pub p99_last_us: Option<u64>,
    pub p99_max_us: Option<u64>,
    /// Server CPU over every valid window divided by their responses (per-window figures are too coarse at
    /// a low rate: one clock tick is 10 ms).
    pub cpu_us_per_resp: Option<f64>,
    /// Responses per second over the valid windows: below the rate when the server (or loader) fell behind.
    pub achieved_req_per_s: Option<f64>,
    /// Valid windows that served under [`BEHIND_SHARE`] of the rate, and the lowest rate any of them served:
    /// an hour's average hides ten minutes behind.
    pub behind_windows: usize,
    pub lowest_req_per_s: Option<f64>,
    /// The median window's busy share of the server cores, every server on them counted: in a side-by-side
    /// soak, the others' load is in it too.
    pub busy_pct: Option<f64>,
    /// The median window's busy share of the loader cores (loaders, compare, the databases when they share
    /// them), and the same median over the windows behind the rate only. Busy, not iowait: before kernel 6.15
    /// (no `IORING_ENTER_NO_IOWAIT`) an io_uring loader's network waits count as iowait too.
    pub loader_busy_pct: Option<f64>,
    pub behind_loader_busy_pct: Option<f64>,
    pub responses: u64,
    pub errors: u64,
    pub trend: Trend,
}

fn soak_records<'a>(records: &'a [Record], workload: &str, runtime: &str) -> Vec<&'a Record> {
    let mut out: Vec<&Record> =
        records.iter().filter(|r| r.kind == Kind::Soak && r.workload == workload && r.runtime == runtime).collect();
    out.sort_by(|a, b| a.elapsed_s.unwrap_or(0.0).total_cmp(&b.elapsed_s.unwrap_or(0.0)));
    out
}

/// Workloads with soak samples, in order of appearance.
pub fn workloads(records: &[Record]) -> Vec<String> {
    ordered(records.iter().filter(|r| r.kind == Kind::Soak).map(|r| r.workload.as_str()))
}

/// Every soaked runtime of `workload`, in order of appearance.
pub fn summarize(records: &[Record], workload: &str) -> Vec<SoakCell> {
    let of_workload = records.iter().filter(|r| r.kind == Kind::Soak && r.workload == workload);
    ordered(of_workload.map(|r| r.runtime.as_str()))
        .into_iter()
        .map(|runtime| {
            let all = soak_records(records, workload, &runtime);
            // RSS is read after each window whether or not the window counted: a void window (errors at the
            // rate) still says how big the server is.
            let rss: Vec<(f64, f64)> =
                all.iter().filter_map(|r| Some((r.elapsed_s?, r.rss_after_kib? as f64))).collect::<Vec<_>>();
            let valid: Vec<&&Record> = all.iter().filter(|r| !r.void).collect();
            let p99 = |r: &&&Record| r.latency_us.map(|l| l.p99);
            let timed: Vec<(f64, f64, f64)> = valid
                .iter()
                .filter_map(|r| {
                    let n = r.requests? as f64;
                    Some((r.server_cpu_us_per_resp? * n, n, r.duration_s?))
                })
                .collect();
            let rate = all.iter().find_map(|r| r.rate);
            let behind = |r: &Record| rate.zip(served_rate(r)).is_some_and(|(rate, v)| v < rate * BEHIND_SHARE);
            let behind_windows = valid.iter().filter(|r| behind(r)).count();
            let (cpu_us, answered, seconds) =
                timed.iter().fold((0.0, 0.0, 0.0), |(c, n, d), (c1, n1, d1)| (c + c1, n + n1, d + d1));
            SoakCell {
                samples: all.len(),
                void_samples: all.iter().filter(|r| r.void).count(),
                first_void: all.iter().find(|r| r.void).and_then(|r| r.void_reason.clone()),
                elapsed_s: all.iter().filter_map(|r| r.elapsed_s).fold(0.0, f64::max),
                rate,
                rss_idle_kib: all.iter().find_map(|r| r.rss_idle_kib),
                rss_first_kib: all.iter().find_map(|r| r.rss_after_kib),
                rss_last_kib: all.iter().rev().find_map(|r| r.rss_after_kib),
                rss_max_kib: all.iter().filter_map(|r| r.rss_after_kib).max(),
                p99_first_us: valid.first().and_then(p99),
                p99_last_us: valid.last().and_then(p99),
                p99_max_us: valid.iter().filter_map(p99).max(),
                cpu_us_per_resp: (answered > 0.0).then(|| cpu_us / answered),
                achieved_req_per_s: (seconds > 0.0).then(|| answered / seconds),
                behind_windows,
                lowest_req_per_s: valid.iter().filter_map(|r| served_rate(r)).reduce(f64::min),
                busy_pct: median(valid.iter().filter_map(|r| r.server_busy_pct)),
                loader_busy_pct: median(valid.iter().filter_map(|r| r.loader_busy_pct)),
                behind_loader_busy_pct: median(valid.iter().filter(|r| behind(r)).filter_map(|r| r.loader_busy_pct)),
                responses: all.iter().filter_map(|r| r.requests).sum(),
                errors: all.iter().flat_map(|r| r.errors.values()).sum(),
                trend: trend(&rss),
                runtime,
            }
        })
        .collect()
}

/// Responses per second a window served.
fn served_rate(r: &Record) -> Option<f64> {
    let (n, d) = (r.requests?, r.duration_s?);
    (d > 0.0).then(|| n as f64 / d)
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("—".into(), |k| num(k as f64 / 1024.0, 1))
}

fn ms(us: Option<u64>) -> String {
    us.map_or("—".into(), |u| num(u as f64 / 1e3, 2))
}

/// The chart files of one workload's soak, next to the Markdown.
pub fn svg_paths(md: &Path, workload: &str) -> (PathBuf, PathBuf) {
    (charts::svg_path(md, &format!("{workload}-soak-rss")), charts::svg_path(md, &format!("{workload}-soak-p99")))
}

/// Every soaked cell of the run, as `workload runtime`: they all soaked at once.
fn side_by_side(records: &[Record]) -> Vec<String> {
    let cells: Vec<String> =
        records.iter().filter(|r| r.kind == Kind::Soak).map(|r| format!("{} {}", r.workload, r.runtime)).collect();
    ordered(cells.iter().map(String::as_str))
}

/// The soak section of the Markdown (nothing when there are no soak samples).
pub fn section(out: &mut String, records: &[Record], md_path: Option<&Path>) {
    let together = side_by_side(records);
    for w in workloads(records) {
        let cells = summarize(records, &w);
        let rate = cells.iter().find_map(|c| c.rate);
        let _ = writeln!(
            out,
            "\n## {w}: soak\n\nOne server per runtime for the whole soak under a fixed open-loop rate of {} req/s, \
             all {} servers of this run ({}) at the same time on the server cores, each under its own loader, \
             sampled after every window: RSS of the whole process tree, the window's latency (corrected for \
             coordinated omission). The RSS slope is Theil–Sen's over the samples after the first {} s (a \
             quarter of the soak, at most 60 s, where buffers and caches grow to size); \"growing\" means the fit grew by at least {} MiB or {:.0}% of the \
             median RSS, and the last third of the samples sits above the first third.\n",
            rate.map_or("—".into(), |r| num(r, 0)),
            together.len(),
            together.join(", "),
            cells.first().map_or("—".into(), |c| num(c.trend.settle_s, 0)),
            num(GROWTH_FLOOR_KIB / 1024.0, 0),
            GROWTH_SHARE * 100.0,
        );
        if let Some(md) = md_path {
            let (rss, p99) = svg_paths(md, &w);
            let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let _ = writeln!(out, "![{w} RSS over time]({})\n![{w} p99 over time]({})\n", name(&rss), name(&p99));
        }
        out.push_str(&table(records, &w, &cells));
        for c in cells.iter().filter(|c| c.behind_windows > 0) {
            let _ = writeln!(
                out,
                "\n{w} {}: {} of {} windows served under {:.0}% of the rate (lowest {} req/s; loader cores {} \
                 busy in those windows, median): the server, its loader or what they share (the cores, \
                 PostgreSQL, Redis) fell behind there, so those windows soaked it at less than the rate asked.",
                c.runtime,
                c.behind_windows,
                c.samples - c.void_samples,
                BEHIND_SHARE * 100.0,
                c.lowest_req_per_s.map_or("—".into(), |v| num(v, 0)),
                c.behind_loader_busy_pct.map_or("—".into(), |v| format!("{}%", num(v, 0))),
            );
        }
        for c in cells.iter().filter(|c| c.first_void.is_some()) {
            let _ =
                writeln!(out, "\n{} {}: first void sample: {}", w, c.runtime, c.first_void.as_deref().unwrap_or(""));
        }
    }
}

/// One workload's soak table: a row per soaked runtime, then one per runtime whose check voided it.
fn table(records: &[Record], w: &str, cells: &[SoakCell]) -> String {
    let mut table = Table::new([
        "runtime",
        "verdict",
        "RSS slope MiB/h",
        "RSS idle → first → last (max) MiB",
        "p99 first → last (max) ms",
        "achieved req/s",
        "CPU-µs/resp",
        "server cores busy %",
        "loader cores busy %",
        "samples (void)",
        "responses",
        "errors",
    ]);
    for c in cells {
        table.row([
            c.runtime.clone(),
            c.trend.verdict.as_str().to_string(),
            num(c.trend.slope_kib_per_h / 1024.0, 2),
            format!(
                "{} → {} → {} ({})",
                mib(c.rss_idle_kib),
                mib(c.rss_first_kib),
                mib(c.rss_last_kib),
                mib(c.rss_max_kib)
            ),
            format!("{} → {} ({})", ms(c.p99_first_us), ms(c.p99_last_us), ms(c.p99_max_us)),
            c.achieved_req_per_s.map_or("—".into(), |v| num(v, 0)),
            c.cpu_us_per_resp.map_or("—".into(), |v| num(v, 2)),
            c.busy_pct.map_or("—".into(), |v| num(v, 0)),
            c.loader_busy_pct.map_or("—".into(), |v| num(v, 0)),
            format!("{} ({})", c.samples, c.void_samples),
            num(c.responses as f64, 0),
            num(c.errors as f64, 0),
        ]);
    }
    let checked_void = records.iter().filter(|r| r.kind == Kind::Check && r.workload == w && r.void);
    for r in checked_void.filter(|r| !cells.iter().any(|c| c.runtime == r.runtime)) {
        let reason = r.void_reason.as_deref().unwrap_or("no reason recorded");
        let mut row = vec![r.runtime.clone(), format!("VOID (check): {reason}")];
        row.resize(12, String::new());
        table.row(&row);
    }
    table.finish()
}

/// RSS (MiB) and p99 (ms) over time (minutes, or seconds for soaks under five minutes), one line per runtime.
pub fn charts(records: &[Record], workload: &str) -> (String, String) {
    let runtimes =
        ordered(records.iter().filter(|r| r.kind == Kind::Soak && r.workload == workload).map(|r| r.runtime.as_str()));
    let longest = records
        .iter()
        .filter(|r| r.kind == Kind::Soak && r.workload == workload)
        .filter_map(|r| r.elapsed_s)
        .fold(0.0, f64::max);
    let (scale, unit) = if longest >= 300.0 { (60.0, "minutes") } else { (1.0, "seconds") };
    let series = |value: &dyn Fn(&Record) -> Option<f64>| -> Vec<Series> {
        runtimes
            .iter()
            .map(|rt| Series {
                name: rt.clone(),
                points: soak_records(records, workload, rt)
                    .into_iter()
                    .filter_map(|r| Some((r.elapsed_s? / scale, value(r)?)))
                    .collect(),
            })
            .collect()
    };
    let rss = series(&|r| r.rss_after_kib.map(|k| k as f64 / 1024.0));
    let p99 = series(&|r| if r.void { None } else { r.latency_us.map(|l| l.p99 as f64 / 1e3) });
    (
        charts::line_svg(&format!("{workload}: RSS during the soak (MiB)"), unit, &rss),
        charts::line_svg(&format!("{workload}: p99 latency per window during the soak (ms)"), unit, &p99),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_record;

    fn series(n: usize, every_s: f64, rss: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
        (1..=n).map(|i| i as f64 * every_s).map(|t| (t, rss(t))).collect()
    }

    #[test]
    fn windows_behind_the_rate_are_counted_and_said() {
        // Ten 5 s windows at 300 req/s; two served 100 and 260 req/s, one 285 (within 90%: not behind).
        let served = [1500, 1500, 500, 1300, 1425, 1500, 1500, 1500, 1500, 1499];
        let records: Vec<Record> = served
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let mut r = test_record("notes-write", "rust", Kind::Soak, 1);
                (r.rate, r.duration_s, r.requests, r.elapsed_s) =
                    (Some(300.0), Some(5.0), Some(n), Some(5.0 * (i + 1) as f64));
                (r.server_cpu_us_per_resp, r.rss_after_kib) = (Some(100.0), Some(10_240));
                // The loader cores: 60% busy in the windows behind, 30% otherwise.
                r.loader_busy_pct = Some(if n < 1350 { 60.0 } else { 30.0 });
                r
            })
            .collect();
        let cell = &summarize(&records, "notes-write")[0];
        assert_eq!((cell.behind_windows, cell.lowest_req_per_s), (2, Some(100.0)), "{cell:?}");
        let mut md = String::new();
        section(&mut md, &records, None);
        assert!(
            md.contains(
                "notes-write rust: 2 of 10 windows served under 90% of the rate (lowest 100 req/s; loader cores 60% \
                 busy in those windows, median)"
            ),
            "{md}"
        );
        assert!(md.contains("| 100.00 | — | 30 | 10 (0) |"), "the loader cores' column, after the server cores': {md}");
    }

    #[test]
    fn a_check_void_with_a_log_tail_stays_in_its_row() {
        let mut soaked = test_record("metadata", "rust", Kind::Soak, 1);
        (soaked.rate, soaked.duration_s, soaked.requests) = (Some(300.0), Some(5.0), Some(1500));
        let mut void = test_record("metadata", "node", Kind::Check, 0);
        void.void_because("node exited before answering\n    | Error: listen EADDRINUSE\n    | at a|b");
        let mut md = String::new();
        section(&mut md, &[soaked, void], None);
        let row = md.lines().find(|l| l.starts_with("| node |")).expect("the node row");
        assert!(row.contains("VOID (check): node exited before answering     \\| Error"), "{row}");
        assert_eq!(row.matches(" |").count(), 12, "twelve cells, the reason in one: {row}");
    }

    #[test]
    fn flat_with_noise_and_a_warm_up_is_flat() {
        // 30 MiB after a warm-up climb in the first 40 s, then ±0.5 MiB of noise for an hour.
        let s = series(720, 5.0, |t| if t < 40.0 { 10_000.0 + t * 500.0 } else { 30_720.0 + (t * 7.0).sin() * 512.0 });
        let tr = trend(&s);
        assert_eq!(tr.verdict, Verdict::Flat, "{tr:?}");
        assert!(tr.slope_kib_per_h.abs() < 200.0, "{tr:?}");
        assert_eq!(tr.settle_s, 60.0, "the first 60 s after the first sample are left out");
    }

    #[test]
    fn a_steady_leak_is_growing() {
        // 1 MiB a minute on 50 MiB: 60 MiB/h.
        let s = series(720, 5.0, |t| 51_200.0 + t * 1024.0 / 60.0);
        let tr = trend(&s);
        assert_eq!(tr.verdict, Verdict::Growing, "{tr:?}");
        assert!((tr.slope_kib_per_h / 1024.0 - 60.0).abs() < 0.01, "{tr:?}");
    }

    #[test]
    fn a_spike_is_an_outlier_but_a_staircase_is_growth() {
        let blip = series(120, 5.0, |t| if (300.0..310.0).contains(&t) { 40_960.0 + 65_536.0 } else { 40_960.0 });
        assert_eq!(trend(&blip).verdict, Verdict::Flat, "a two-sample spike moves neither the fit nor the thirds");
        // 1 MiB more every minute, in steps: how arenas and caches that are never trimmed look.
        let staircase = series(120, 5.0, |t| 40_960.0 + (t / 60.0).floor() * 1024.0);
        assert_eq!(trend(&staircase).verdict, Verdict::Growing);
    }

    #[test]
    fn small_growth_on_a_big_server_is_flat_and_few_samples_are_too_short() {
        // 3 MiB over the hour on 400 MiB: under 5%.
        let s = series(720, 5.0, |t| 409_600.0 + t * 3072.0 / 3600.0);
        assert_eq!(trend(&s).verdict, Verdict::Flat);
        assert_eq!(trend(&series(4, 5.0, |t| t * 1e6)).verdict, Verdict::TooShort);
        assert_eq!(trend(&[]).verdict, Verdict::TooShort);
    }
}
