//! The published repeatability rule, applied to every workload × runtime × metric against a reference
//! runtime (rust unless told otherwise, crate::reference): a difference counts only if
//!
//! - **(a) separation**: within each run, the two runtimes' per-round values do not overlap: the lower's
//!   largest round is below the higher's smallest, each over at least [`MIN_ROUNDS`] valid rounds;
//! - **(b) reproduction**: the same direction in another run on another host, or on the same host started at
//!   least [`REPRODUCE_AFTER_S`] later;
//! - **(c) size**: in every run the median per-round ratio is more than [`MIN_EFFECT`] away from even (the
//!   better value beats the other by more than 10%);
//! - **(d) validity**: neither runtime has a void record in that workload in any of the runs.
//!
//! Verdicts: `<reference> better` / `<reference> worse` when (a)–(d) hold; `no measurable difference` when a
//! run fails (a) or (c); `not reproduced` when only one run qualifies or the runs disagree in direction; `not
//! comparable` when (d) fails. The rule reads records only (already judged by the report's cross-record
//! rules, at each workload's headline connection count and round trip), so its input is what the report
//! shows. [`judge_pair`] is the rule for one pair, metric and kind of record: the overview's verdicts and
//! the published claims' (report::claims) both come from it.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

use crate::records::{Kind, Record, ordered};
use crate::stats::{Spread, per_round_ratio, spread};

/// Fewer valid rounds than this in a run cannot show separation (the published rule used three runs).
pub const MIN_ROUNDS: usize = 3;
/// (c): the median ratio must be beyond 1.10 (or below 1 ÷ 1.10).
pub const MIN_EFFECT: f64 = 0.10;
/// (b): a second run on the same host counts when it started at least this long after the first.
pub const REPRODUCE_AFTER_S: i64 = 3600;

/// What is judged, each with which way is better and which records hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// The server tree's CPU per response, closed loop: lower is better.
    CpuUsPerResp,
    /// Closed-loop throughput: higher is better.
    ReqPerS,
    /// The highest open-loop rate within the p99 objective (`--capacity`): higher is better.
    CapacityRps,
    /// Latency percentiles of a closed- or open-loop run, ms: lower is better.
    P50Ms,
    P95Ms,
    P99Ms,
    P999Ms,
    /// Idle RSS before the run and the peak (VmHWM) over it, of the server's whole tree, MiB: lower is better.
    RssIdleMib,
    RssPeakMib,
    /// One cold start, exec → first 200, ms: lower is better.
    StartupMs,
    /// The DB-only loop's lookups per second (metadata): higher is better.
    LookupsPerS,
    /// The same loop's single-row inserts per second: higher is better.
    InsertsPerS,
}

impl Metric {
    /// What every overview judges.
    pub const JUDGED: [Metric; 3] = [Metric::CpuUsPerResp, Metric::ReqPerS, Metric::CapacityRps];
    /// Every metric, in the order `name` lists them.
    pub const ALL: [Metric; 12] = [
        Metric::CpuUsPerResp,
        Metric::ReqPerS,
        Metric::CapacityRps,
        Metric::P50Ms,
        Metric::P95Ms,
        Metric::P99Ms,
        Metric::P999Ms,
        Metric::RssIdleMib,
        Metric::RssPeakMib,
        Metric::StartupMs,
        Metric::LookupsPerS,
        Metric::InsertsPerS,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::CpuUsPerResp => "cpu_us_per_resp",
            Metric::ReqPerS => "req_per_s",
            Metric::CapacityRps => "capacity_rps",
            Metric::P50Ms => "p50_ms",
            Metric::P95Ms => "p95_ms",
            Metric::P99Ms => "p99_ms",
            Metric::P999Ms => "p999_ms",
            Metric::RssIdleMib => "rss_idle_mib",
            Metric::RssPeakMib => "rss_peak_mib",
            Metric::StartupMs => "startup_ms",
            Metric::LookupsPerS => "lookups_per_s",
            Metric::InsertsPerS => "inserts_per_s",
        }
    }

    pub fn parse(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The records that hold it, by default: latency may also be read from open-loop runs ([`Metric::kinds`]).
    pub fn kind(self) -> Kind {
        match self {
            Metric::CapacityRps => Kind::Capacity,
            Metric::StartupMs => Kind::Startup,
            Metric::LookupsPerS | Metric::InsertsPerS => Kind::Lookups,
            _ => Kind::Closed,
        }
    }

    /// The kinds of record a judgement of this metric may read.
    pub fn kinds(self) -> &'static [Kind] {
        match self {
            Metric::P50Ms | Metric::P95Ms | Metric::P99Ms | Metric::P999Ms => &[Kind::Closed, Kind::Open],
            Metric::CapacityRps => &[Kind::Capacity],
            Metric::StartupMs => &[Kind::Startup],
            Metric::LookupsPerS | Metric::InsertsPerS => &[Kind::Lookups],
            _ => &[Kind::Closed],
        }
    }

    pub fn value(self) -> fn(&Record) -> Option<f64> {
        match self {
            Metric::CpuUsPerResp => |r| r.server_cpu_us_per_resp,
            Metric::ReqPerS => |r| r.req_per_s,
            // A search that stopped at the loader's limit or loadgen's ceiling found a lower bound, not a
            // capacity: it cannot be judged.
            Metric::CapacityRps => |r| r.capacity.as_ref().filter(|c| !c.loader_bound && !c.reached_max)?.rps,
            Metric::P50Ms => |r| r.latency_us.map(|l| l.p50 as f64 / 1e3),
            Metric::P95Ms => |r| r.latency_us?.p95.map(|v| v as f64 / 1e3),
            Metric::P99Ms => |r| r.latency_us.map(|l| l.p99 as f64 / 1e3),
            Metric::P999Ms => |r| r.latency_us.map(|l| l.p999 as f64 / 1e3),
            Metric::RssIdleMib => |r| r.rss_idle_kib.map(|k| k as f64 / 1024.0),
            Metric::RssPeakMib => |r| r.rss_peak_kib.map(|k| k as f64 / 1024.0),
            Metric::StartupMs => |r| r.startup_ms,
            Metric::LookupsPerS => |r| r.lookups.map(|l| l.ops_per_s),
            Metric::InsertsPerS => |r| r.lookups?.inserts.map(|i| i.ops_per_s),
        }
    }

    /// Less is better for CPU, latency, memory and start time; more for throughput and capacity.
    pub fn lower_is_better(self) -> bool {
        !matches!(self, Metric::ReqPerS | Metric::CapacityRps | Metric::LookupsPerS | Metric::InsertsPerS)
    }
}

/// The rule's outcome; [`Judgement::verdict_text`] words it against the judgement's reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// (a)–(d) hold and the reference is the better one.
    Better,
    Worse,
    NoMeasurableDifference,
    NotReproduced,
    NotComparable,
}

/// One run's view of one cell and metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunEffect {
    pub run_id: String,
    pub host: String,
    /// When the run was invoked ([`invoked_at`]), or its first record read when its id has no stamp.
    pub started_at: String,
    /// Median over rounds of the runtime's value ÷ the reference's in the same round; null without a shared
    /// round.
    pub ratio: Option<f64>,
    /// Which runtime this run favours, by `ratio`: true for the reference.
    pub reference_better: Option<bool>,
    /// Each runtime's per-round values in this run (median, min, max, valid rounds).
    pub reference: Option<SpreadOut>,
    pub other: Option<SpreadOut>,
    /// The per-round ratios' own spread (min, max, rounds) in this run.
    pub ratios: Option<SpreadOut>,
    /// (a): the per-round ranges do not overlap, with at least MIN_ROUNDS valid rounds each.
    pub separated: bool,
    /// (c): the median ratio is beyond 1 ± 10%.
    pub large: bool,
    /// (d) failed: a void record of either runtime in this workload, each with its reason.
    pub void: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SpreadOut {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub rounds: usize,
}

impl From<Spread> for SpreadOut {
    fn from(s: Spread) -> Self {
        SpreadOut { median: s.median, min: s.min, max: s.max, rounds: s.n }
    }
}

/// The verdict on one workload × runtime × metric against the reference, with the runs it read.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub workload: String,
    pub runtime: String,
    pub reference: String,
    pub metric: Metric,
    pub verdict: Verdict,
    /// (b): two runs that count as independent (another host, or an hour apart) agree in direction; false
    /// also when there is only one.
    pub reproduced: bool,
    /// Runs whose records hold this cell, in the order read.
    pub runs: Vec<RunEffect>,
}

/// The JSON form: `verdict` is the words, `node better` when Node is the reference.
impl Serialize for Judgement {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Out<'a> {
            workload: &'a str,
            runtime: &'a str,
            reference: &'a str,
            metric: Metric,
            verdict: String,
            reproduced: bool,
            runs: &'a [RunEffect],
        }
        Out {
            workload: &self.workload,
            runtime: &self.runtime,
            reference: &self.reference,
            metric: self.metric,
            verdict: self.verdict_text(),
            reproduced: self.reproduced,
            runs: &self.runs,
        }
        .serialize(s)
    }
}

impl Judgement {
    /// The verdict in words: `rust better`, `node worse`, `no measurable difference`, `not reproduced`, `not
    /// comparable`.
    pub fn verdict_text(&self) -> String {
        match self.verdict {
            Verdict::Better => self.direction_text(true),
            Verdict::Worse => self.direction_text(false),
            Verdict::NoMeasurableDifference => "no measurable difference".into(),
            Verdict::NotReproduced => "not reproduced".into(),
            Verdict::NotComparable => "not comparable".into(),
        }
    }

    /// `<reference> better` or `<reference> worse`.
    pub fn direction_text(&self, reference_better: bool) -> String {
        format!("{} {}", self.reference, if reference_better { "better" } else { "worse" })
    }

    /// (a), (c) and (d) hold in every run: with one run, what the rule can say before (b).
    pub fn holds_within_runs(&self) -> bool {
        !self.runs.is_empty() && self.runs.iter().all(|r| r.void.is_empty() && r.separated && r.large)
    }

    /// The direction every run agrees on, when they agree: true for the reference.
    pub fn direction(&self) -> Option<bool> {
        let first = self.runs.first()?.reference_better?;
        self.runs.iter().all(|r| r.reference_better == Some(first)).then_some(first)
    }
}

/// Every judgement the records allow against `reference`: per workload (in the order recorded), per runtime
/// other than the reference that it was measured beside, per metric of [`Metric::JUDGED`] with values in
/// some run.
pub fn judge(records: &[Record], reference: &str) -> Vec<Judgement> {
    let mut out = Vec::new();
    for w in ordered(records.iter().map(|r| r.workload.as_str())) {
        let mine: Vec<&Record> = records.iter().filter(|r| r.workload == w).collect();
        if !mine.iter().any(|r| r.runtime == reference) {
            continue;
        }
        // Capacity only where searched; the closed-loop metrics wherever the cell was (a void check left
        // none, and is judged not comparable).
        let searched = mine.iter().any(|r| r.kind == Kind::Capacity);
        for rt in ordered(mine.iter().map(|r| r.runtime.as_str())).into_iter().filter(|r| r != reference) {
            for metric in Metric::JUDGED.into_iter().filter(|m| *m != Metric::CapacityRps || searched) {
                out.extend(judge_pair(records, &w, &rt, reference, metric, metric.kind()));
            }
        }
    }
    out
}

/// The rule for one pair: `runtime` against `reference` on `workload`'s `metric` read from `kind` records,
/// over every run in `records`; `None` when no run measured both.
pub fn judge_pair(
    records: &[Record],
    workload: &str,
    runtime: &str,
    reference: &str,
    metric: Metric,
    kind: Kind,
) -> Option<Judgement> {
    let pair = Pair { workload, runtime, reference, metric, kind };
    let runs = ordered(records.iter().map(|r| r.run_id.as_str()));
    let effects: Vec<RunEffect> = runs.iter().filter_map(|run| run_effect(records, run, &pair)).collect();
    (!effects.is_empty()).then(|| conclude(&pair, effects))
}

/// What one judgement compares.
struct Pair<'a> {
    workload: &'a str,
    runtime: &'a str,
    reference: &'a str,
    metric: Metric,
    kind: Kind,
}

/// One run's effect for the pair, or `None` when the run did not measure both runtimes on the workload, or
/// measured neither's metric there and voided nothing (several runs' files read together: a run of the
/// workload at another count, or without cold starts, says nothing about this metric).
fn run_effect(records: &[Record], run: &str, p: &Pair) -> Option<RunEffect> {
    let of = |name: &str| -> Vec<Record> {
        records.iter().filter(|r| r.run_id == run && r.workload == p.workload && r.runtime == name).cloned().collect()
    };
    let (reference, other) = (of(p.reference), of(p.runtime));
    if reference.is_empty() || other.is_empty() {
        return None;
    }
    let value = p.metric.value();
    let measured = |r: &Record| r.void || (r.kind == p.kind && value(r).is_some());
    if !reference.iter().chain(&other).any(measured) {
        return None;
    }
    let first = records.iter().find(|r| r.run_id == run)?;
    let void: Vec<String> = reference
        .iter()
        .chain(&other)
        .filter(|r| r.void)
        .map(|r| {
            let why = r.void_reason.as_deref().unwrap_or("no reason recorded");
            format!("{} {} round {}: {why}", r.runtime, r.kind.as_str(), r.round)
        })
        .collect();
    let values = |rs: &[Record]| spread(rs.iter().filter(|r| r.kind == p.kind && !r.void).filter_map(value));
    let (reference_spread, other_spread) = (values(&reference), values(&other));
    let both: Vec<Record> = reference.into_iter().chain(other).collect();
    let ratios = per_round_ratio(&both, p.workload, p.kind, p.runtime, p.reference, value);
    let ratio = ratios.map(|s| s.median);
    let lower = p.metric.lower_is_better();
    let reference_better = ratio.map(|r| if lower { r > 1.0 } else { r < 1.0 });
    let separated = match (reference_spread, other_spread) {
        (Some(a), Some(b)) if a.n >= MIN_ROUNDS && b.n >= MIN_ROUNDS => a.max < b.min || b.max < a.min,
        _ => false,
    };
    let large = ratio.is_some_and(|r| r > 0.0 && r.max(1.0 / r) > 1.0 + MIN_EFFECT);
    Some(RunEffect {
        run_id: run.to_string(),
        host: first.machine.hostname.clone(),
        started_at: invoked_at(run).unwrap_or_else(|| first.started_at.clone()),
        ratio,
        reference_better,
        reference: reference_spread.map(SpreadOut::from),
        other: other_spread.map(SpreadOut::from),
        ratios: ratios.map(SpreadOut::from),
        separated,
        large,
        void,
    })
}

fn conclude(p: &Pair, runs: Vec<RunEffect>) -> Judgement {
    let mut j = Judgement {
        workload: p.workload.to_string(),
        runtime: p.runtime.to_string(),
        reference: p.reference.to_string(),
        metric: p.metric,
        verdict: Verdict::NotReproduced,
        reproduced: false,
        runs,
    };
    j.reproduced = j.direction().is_some() && independent(&j.runs);
    j.verdict = if j.runs.iter().any(|r| !r.void.is_empty()) {
        Verdict::NotComparable
    } else if !j.holds_within_runs() {
        Verdict::NoMeasurableDifference
    } else if !j.reproduced {
        Verdict::NotReproduced
    } else if j.direction() == Some(true) {
        Verdict::Better
    } else {
        Verdict::Worse
    };
    j
}

/// When run `run_id` was invoked: the UTC stamp its id begins with (`20261205T093459Z-vm`). Unlike its first
/// record's start, it is the same whichever of the run's records are read: a table that judges one count of a
/// sweep reads records that begin minutes into each run, and two runs an hour apart would look closer.
/// `None` for an id of another form.
fn invoked_at(run_id: &str) -> Option<String> {
    let stamp = run_id.get(..16)?;
    let at = chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%SZ").ok()?;
    Some(at.and_utc().to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// (b)'s second run: two of the runs on different hosts, or started at least an hour apart.
fn independent(runs: &[RunEffect]) -> bool {
    let start = |r: &RunEffect| chrono::DateTime::parse_from_rfc3339(&r.started_at).ok().map(|t| t.timestamp());
    runs.iter().enumerate().any(|(i, a)| {
        runs[i + 1..].iter().any(|b| {
            a.host != b.host || matches!((start(a), start(b)), (Some(x), Some(y)) if (x - y).abs() >= REPRODUCE_AFTER_S)
        })
    })
}

/// Judgements by (workload, runtime, metric), for tables that look cells up.
pub fn by_cell(judgements: &[Judgement]) -> BTreeMap<(String, String, Metric), &Judgement> {
    judgements.iter().map(|j| ((j.workload.clone(), j.runtime.clone(), j.metric), j)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{LatencyUs, test_record};

    /// Rounds of rust and `rt` on hello-bare in run `run`, started at `at`, on `host`: (rust, rt) CPU per
    /// response each round.
    fn run(run: &str, host: &str, at: &str, rt: &str, rounds: &[(f64, f64)]) -> Vec<Record> {
        let mut out = Vec::new();
        for (i, (rust_cpu, other_cpu)) in rounds.iter().enumerate() {
            for (name, cpu) in [("rust", rust_cpu), (rt, other_cpu)] {
                let mut r = test_record("hello-bare", name, Kind::Closed, i as u32 + 1);
                r.run_id = run.into();
                r.machine.hostname = host.into();
                r.started_at = at.into();
                r.server_cpu_us_per_resp = Some(*cpu);
                r.req_per_s = Some(1e6 / cpu);
                out.push(r);
            }
        }
        out
    }

    fn verdict(records: &[Record], metric: Metric) -> Verdict {
        let all = judge(records, "rust");
        all.iter().find(|j| j.metric == metric).map(|j| j.verdict).expect("a judgement")
    }

    const CLEAR: [(f64, f64); 3] = [(10.0, 14.0), (10.5, 15.0), (11.0, 14.5)];

    #[test]
    fn one_clear_run_waits_for_its_second() {
        let r = run("a", "h", "2026-12-04T10:00:00Z", "bun", &CLEAR);
        let all = judge(&r, "rust");
        let cpu = all.iter().find(|j| j.metric == Metric::CpuUsPerResp).expect("cpu");
        assert_eq!(cpu.verdict, Verdict::NotReproduced);
        assert!(cpu.holds_within_runs() && cpu.direction() == Some(true));
        assert_eq!(verdict(&r, Metric::ReqPerS), Verdict::NotReproduced);
        assert!(!all.iter().any(|j| j.metric == Metric::CapacityRps), "no capacity recorded, no judgement");
    }

    #[test]
    fn a_second_run_an_hour_later_or_elsewhere_decides() {
        let mut r = run("a", "h", "2026-12-04T10:00:00Z", "bun", &CLEAR);
        let soon = run("b", "h", "2026-12-04T10:30:00Z", "bun", &CLEAR);
        assert_eq!(verdict(&[r.clone(), soon].concat(), Metric::CpuUsPerResp), Verdict::NotReproduced);
        let elsewhere = run("c", "other", "2026-12-04T10:30:00Z", "bun", &CLEAR);
        assert_eq!(verdict(&[r.clone(), elsewhere].concat(), Metric::CpuUsPerResp), Verdict::Better);
        r.extend(run("d", "h", "2026-12-04T11:00:00Z", "bun", &CLEAR));
        assert_eq!(verdict(&r, Metric::CpuUsPerResp), Verdict::Better);
        assert_eq!(verdict(&r, Metric::ReqPerS), Verdict::Better, "fewer µs per response, more req/s");
        let worse: Vec<(f64, f64)> = CLEAR.iter().map(|(a, b)| (*b, *a)).collect();
        let worse = [
            run("a", "h", "2026-12-04T10:00:00Z", "node", &worse),
            run("d", "h", "2026-12-04T11:00:00Z", "node", &worse),
        ]
        .concat();
        assert_eq!(verdict(&worse, Metric::CpuUsPerResp), Verdict::Worse);
    }

    #[test]
    fn overlap_small_effects_and_disagreement() {
        // Medians 10 vs 14, but one round of each crosses: (a) fails.
        let overlap = run("a", "h", "2026-12-04T10:00:00Z", "bun", &[(10.0, 14.0), (10.0, 14.5), (15.0, 9.5)]);
        assert_eq!(verdict(&overlap, Metric::CpuUsPerResp), Verdict::NoMeasurableDifference);
        // Separated but 5% apart: (c) fails.
        let small = run("a", "h", "2026-12-04T10:00:00Z", "bun", &[(10.0, 10.5), (10.1, 10.6), (10.2, 10.7)]);
        assert_eq!(verdict(&small, Metric::CpuUsPerResp), Verdict::NoMeasurableDifference);
        // Two rounds cannot show separation.
        let short = run("a", "h", "2026-12-04T10:00:00Z", "bun", &CLEAR[..2]);
        assert_eq!(verdict(&short, Metric::CpuUsPerResp), Verdict::NoMeasurableDifference);
        // Each run clear, in opposite directions.
        let flipped: Vec<(f64, f64)> = CLEAR.iter().map(|(a, b)| (*b, *a)).collect();
        let both = [
            run("a", "h", "2026-12-04T10:00:00Z", "bun", &CLEAR),
            run("b", "h", "2026-12-05T10:00:00Z", "bun", &flipped),
        ]
        .concat();
        assert_eq!(verdict(&both, Metric::CpuUsPerResp), Verdict::NotReproduced);
    }

    #[test]
    fn a_void_record_makes_the_cell_not_comparable() {
        let mut r = run("a", "h", "2026-12-04T10:00:00Z", "bun", &CLEAR);
        let mut open = test_record("hello-bare", "bun", Kind::Open, 1);
        open.run_id = "a".into();
        open.void_because("2 timeouts");
        r.push(open);
        let all = judge(&r, "rust");
        let cpu = all.iter().find(|j| j.metric == Metric::CpuUsPerResp).expect("cpu");
        assert_eq!(cpu.verdict, Verdict::NotComparable);
        assert_eq!(cpu.runs[0].void, ["bun open round 1: 2 timeouts"]);
    }

    #[test]
    fn any_runtime_can_be_the_reference() {
        let r = [
            run("a", "h", "2026-12-04T10:00:00Z", "bun", &CLEAR),
            run("d", "h", "2026-12-04T11:00:00Z", "bun", &CLEAR),
        ]
        .concat();
        // rust's 10 µs against bun's 14: with bun as the reference, rust is the row and bun the worse one.
        let all = judge(&r, "bun");
        assert!(all.iter().all(|j| j.runtime == "rust" && j.reference == "bun"));
        let cpu = all.iter().find(|j| j.metric == Metric::CpuUsPerResp).expect("cpu");
        assert_eq!((cpu.verdict, cpu.verdict_text().as_str()), (Verdict::Worse, "bun worse"));
        let json = serde_json::to_value(cpu).expect("json");
        assert_eq!((json["verdict"].as_str(), json["reference"].as_str()), (Some("bun worse"), Some("bun")));
        assert!(json["runs"][0]["reference"]["median"].is_number(), "{json}");
    }

    #[test]
    fn latency_and_start_times_are_judged_lower_is_better() {
        let mut recs = Vec::new();
        for round in 1..=3u32 {
            for (rt, p99, start) in [("node", 10_000, 80.0), ("bun", 4_000, 20.0)] {
                let mut open = test_record("metadata", rt, Kind::Open, round);
                let p99 = p99 + u64::from(round);
                open.latency_us = Some(LatencyUs { p50: 1000, p95: None, p99, p999: 2 * p99, max: 3 * p99 });
                recs.push(open);
                let mut s = test_record("metadata", rt, Kind::Startup, round);
                s.startup_ms = Some(start + f64::from(round));
                recs.push(s);
            }
        }
        let j = judge_pair(&recs, "metadata", "bun", "node", Metric::P99Ms, Kind::Open).expect("judged");
        assert_eq!((j.verdict, j.direction()), (Verdict::NotReproduced, Some(false)), "bun lower: node worse");
        assert!(j.runs[0].ratio.is_some_and(|x| (x - 0.4).abs() < 0.01), "{:?}", j.runs[0]);
        assert_eq!(j.runs[0].ratios.map(|s| s.rounds), Some(3));
        let s = judge_pair(&recs, "metadata", "bun", "node", Metric::StartupMs, Kind::Startup).expect("starts");
        assert_eq!(s.direction(), Some(false));
        let closed = judge_pair(&recs, "metadata", "bun", "node", Metric::P99Ms, Kind::Closed);
        assert!(closed.is_none(), "no closed-loop latency recorded: no run measured it");
        assert!(judge_pair(&recs, "metadata", "bun", "koa", Metric::P99Ms, Kind::Open).is_none());
        assert_eq!(Metric::parse("p999_ms"), Some(Metric::P999Ms));
        assert!(Metric::ALL.iter().all(|m| Metric::parse(m.name()) == Some(*m)));
    }

    #[test]
    fn capacity_is_judged_where_searched_and_bounds_are_not() {
        let mut r = run("a", "h", "2026-12-04T10:00:00Z", "bun", &CLEAR);
        for round in 1..=3 {
            for (name, rps, bound) in [("rust", 50_000.0, false), ("bun", 30_000.0, round == 2)] {
                let mut c = test_record("hello-bare", name, Kind::Capacity, round);
                c.run_id = "a".into();
                c.capacity = Some(crate::records::CapacityFound {
                    objective_p99_us: 10_000,
                    start_rps: 1000.0,
                    rps: Some(rps + f64::from(round)),
                    achieved_rps: Some(rps),
                    p99_us: Some(5000),
                    steps: 10,
                    step_s: 5.0,
                    warmup_s: 1.0,
                    loader_bound: bound,
                    reached_max: false,
                    steps_file: String::new(),
                });
                r.push(c);
            }
        }
        let all = judge(&r, "rust");
        let cap = all.iter().find(|j| j.metric == Metric::CapacityRps).expect("capacity");
        assert_eq!(cap.runs[0].other.map(|s| s.rounds), Some(2), "a loader-bound search is a lower bound");
        assert_eq!(cap.verdict, Verdict::NoMeasurableDifference, "two judged searches cannot show separation");
        let json = serde_json::to_value(cap).expect("json");
        assert_eq!(
            (json["metric"].as_str(), json["verdict"].as_str()),
            (Some("capacity_rps"), Some("no measurable difference"))
        );
    }

    #[test]
    fn a_run_starts_when_it_was_invoked_whatever_slice_is_read() {
        assert_eq!(invoked_at("20261205T093459Z-vm").as_deref(), Some("2026-12-05T09:34:59Z"));
        assert_eq!(invoked_at("r1"), None);
        assert_eq!(invoked_at("20261305T093459Z-vm"), None, "month 13");
    }
}
