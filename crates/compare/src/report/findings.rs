//! The published claims judged: each ledger entry (crate::ledger) gets exactly one verdict from the
//! repeatability rule (crate::verdict::judge_pair) applied to its pair, metric and records:
//!
//! - `reproduced`: the rule finds the post's direction, and in every run the median of per-round ratios is
//!   within the post's figure ×/÷ the tolerance; for a parity claim, the rule finds no measurable difference;
//! - `direction holds, size differs`: the post's direction, outside the tolerance in some run;
//! - `contradicted`: the opposite direction, or any difference at all for a parity claim;
//! - `no measurable difference`: a claim of a difference, and the rule finds none;
//! - `not measured`: no valid record for the claim's cell (or the ledger says this machine cannot measure it).
//!
//! With one run (or runs not far enough apart) the rule can check (a), (c) and (d) only: the verdict rests on
//! those, and its reason says "(b) pending".

use serde::Serialize;

use crate::ledger::Claim;
use crate::records::{Kind, Record};
use crate::report::sweep::{headline, headline_count, headline_rtt, rtt_key};
use crate::verdict::{self, Judgement, MIN_EFFECT, RunEffect};

/// The five verdicts, in the order tables count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum ClaimVerdict {
    #[serde(rename = "reproduced")]
    Reproduced,
    #[serde(rename = "direction holds, size differs")]
    SizeDiffers,
    #[serde(rename = "contradicted")]
    Contradicted,
    #[serde(rename = "no measurable difference")]
    NoMeasurableDifference,
    #[serde(rename = "not measured")]
    NotMeasured,
}

impl ClaimVerdict {
    pub const ALL: [ClaimVerdict; 5] = [
        ClaimVerdict::Reproduced,
        ClaimVerdict::SizeDiffers,
        ClaimVerdict::Contradicted,
        ClaimVerdict::NoMeasurableDifference,
        ClaimVerdict::NotMeasured,
    ];

    pub fn text(self) -> &'static str {
        match self {
            ClaimVerdict::Reproduced => "reproduced",
            ClaimVerdict::SizeDiffers => "direction holds, size differs",
            ClaimVerdict::Contradicted => "contradicted",
            ClaimVerdict::NoMeasurableDifference => "no measurable difference",
            ClaimVerdict::NotMeasured => "not measured",
        }
    }
}

/// One run's figure for a claim: the median of per-round a ÷ b ratios and their range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunFigure {
    pub run_id: String,
    pub ratio: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub rounds: usize,
}

/// A claim's verdict with what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub id: String,
    pub says: String,
    pub workload: String,
    pub metric: &'static str,
    pub a: String,
    pub b: String,
    pub verdict: ClaimVerdict,
    pub published: Option<f64>,
    pub tolerance: f64,
    pub runs: Vec<RunFigure>,
    /// Records of the claim's cell the rule read (both runtimes, every kind, every run).
    pub records: usize,
    /// Only (a), (c) and (d) could be checked: no second run an hour apart or on another host.
    pub b_pending: bool,
    pub reason: String,
    pub stands_in: Option<String>,
}

/// `claim`'s cell in `records` (already judged by the report's cross-record rules): its workload's closed-
/// and open-loop runs at the claim's connection count and round trip (else the headline ones), and every
/// other record unchanged.
fn cell(records: &[Record], claim: &Claim) -> Vec<Record> {
    if claim.connections.is_none() && claim.db_rtt_ms.is_none() {
        return headline(records);
    }
    let w = claim.workload.as_str();
    let rtt = match claim.db_rtt_ms {
        Some(ms) => Some((ms * 1e3).round() as u64),
        None => headline_rtt(records, w),
    };
    let at_rtt: Vec<Record> = records.iter().filter(|r| r.workload != w || rtt_key(r) == rtt).cloned().collect();
    let count = claim.connections.or_else(|| headline_count(&at_rtt, w));
    let swept = |r: &Record| matches!(r.kind, Kind::Closed | Kind::Open);
    at_rtt.into_iter().filter(|r| r.workload != w || !swept(r) || r.connections == count).collect()
}

/// Where the claim reads its records, for messages: `metadata closed at 512 connections`.
fn where_read(claim: &Claim) -> String {
    let mut out = format!("{} {}", claim.workload, claim.kind.as_str());
    if let Some(c) = claim.connections {
        out.push_str(&format!(" at {c} connections"));
    }
    if let Some(ms) = claim.db_rtt_ms {
        out.push_str(&format!(" with a {ms} ms database round trip"));
    }
    out
}

/// Every claim judged on `records` (one or more runs, raw as read).
pub fn judge(claims: &[Claim], records: &[Record]) -> Vec<Finding> {
    let judged = crate::report::cross_record::judged(records);
    claims.iter().map(|c| judge_one(c, &judged)).collect()
}

fn judge_one(claim: &Claim, judged: &[Record]) -> Finding {
    let mut f = Finding {
        id: claim.id.clone(),
        says: claim.says.clone(),
        workload: claim.workload.clone(),
        metric: claim.metric.name(),
        a: claim.a.clone(),
        b: claim.b.clone(),
        verdict: ClaimVerdict::NotMeasured,
        published: claim.published,
        tolerance: claim.tolerance,
        runs: Vec::new(),
        records: 0,
        b_pending: false,
        reason: String::new(),
        stands_in: claim.stands_in.clone(),
    };
    if let Some(u) = &claim.unmeasurable {
        f.reason = match &u.command {
            Some(cmd) => format!("not measurable here: {}; where it is: `{cmd}`", u.why),
            None => format!("not measurable here: {}", u.why),
        };
        return f;
    }
    let (a, b) = (claim.a.as_str(), claim.b.as_str());
    let records = cell(judged, claim);
    let Some(j) = verdict::judge_pair(&records, &claim.workload, a, b, claim.metric, claim.kind) else {
        f.reason = format!("no run measured both {a} and {b} on {}", where_read(claim));
        return f;
    };
    let judged_run = |r: &Record| j.runs.iter().any(|e| e.run_id == r.run_id);
    let of_pair = |r: &&Record| r.workload == claim.workload && (r.runtime == a || r.runtime == b);
    f.records = records.iter().filter(of_pair).filter(|r| judged_run(r)).count();
    f.runs = j.runs.iter().map(figure).collect();
    let (verdict, reason) = conclude(claim, &j);
    f.verdict = verdict;
    f.b_pending = verdict != ClaimVerdict::NotMeasured && j.holds_within_runs() && !j.reproduced;
    f.reason = if f.b_pending { format!("{reason}; (b) pending") } else { reason };
    f
}

fn figure(r: &RunEffect) -> RunFigure {
    RunFigure {
        run_id: r.run_id.clone(),
        ratio: r.ratio,
        min: r.ratios.map(|s| s.min),
        max: r.ratios.map(|s| s.max),
        rounds: r.ratios.map_or(0, |s| s.rounds),
    }
}

/// The verdict and its reason from the rule's judgement of a ÷ b (b is the judgement's reference).
fn conclude(claim: &Claim, j: &Judgement) -> (ClaimVerdict, String) {
    let (a, b) = (claim.a.as_str(), claim.b.as_str());
    if j.runs.iter().all(|r| r.ratio.is_none()) {
        return (ClaimVerdict::NotMeasured, format!("no round with valid {a} and {b} values on {}", where_read(claim)));
    }
    if j.verdict == verdict::Verdict::NotComparable {
        let voids: Vec<&String> = j.runs.iter().flat_map(|r| &r.void).collect();
        let shown: Vec<&str> = voids.iter().take(3).map(|s| s.as_str()).collect();
        let more = if voids.len() > 3 { format!(" and {} more", voids.len() - 3) } else { String::new() };
        return (ClaimVerdict::NotMeasured, format!("(d) void records: {}{more}", shown.join("; ")));
    }
    let lower = claim.metric.lower_is_better();
    // The rule found a difference: (a), (c) and (d) hold in every run and the runs agree on its direction.
    let found = j.holds_within_runs().then(|| j.direction()).flatten().map(|reference_better| !reference_better);
    let Some(published) = claim.published else {
        return (ClaimVerdict::NotMeasured, "no published figure".into());
    };
    let a_better_published = if lower { published < 1.0 } else { published > 1.0 };
    let which = |a_better: bool| if a_better { format!("{a} better") } else { format!("{b} better") };
    match found {
        None => {
            let why = no_difference_reason(j);
            if claim.parity() {
                (ClaimVerdict::Reproduced, format!("parity: {why}"))
            } else {
                (ClaimVerdict::NoMeasurableDifference, format!("the post has {}; {why}", which(a_better_published)))
            }
        }
        Some(a_better) if claim.parity() => {
            (ClaimVerdict::Contradicted, format!("the post claims parity; the rule finds {}", which(a_better)))
        }
        Some(a_better) if a_better != a_better_published => (
            ClaimVerdict::Contradicted,
            format!("the post has {}; the rule finds {}", which(a_better_published), which(a_better)),
        ),
        Some(a_better) => {
            let (lo, hi) = (published / claim.tolerance, published * claim.tolerance);
            let outside: Vec<String> = j
                .runs
                .iter()
                .filter_map(|r| r.ratio)
                .filter(|x| *x < lo || *x > hi)
                .map(|x| crate::format::num(x, 2))
                .collect();
            let band = format!("{}–{}", crate::format::num(lo, 2), crate::format::num(hi, 2));
            if outside.is_empty() {
                (ClaimVerdict::Reproduced, format!("{} in every run, within {band}", which(a_better)))
            } else {
                (
                    ClaimVerdict::SizeDiffers,
                    format!("{} as the post says, but {} outside {band}", which(a_better), outside.join(", ")),
                )
            }
        }
    }
}

/// Why the rule found no difference: which of (a), (c) failed, or the runs disagree.
fn no_difference_reason(j: &Judgement) -> String {
    if j.runs.iter().all(|r| r.separated && r.large) && j.direction().is_none() {
        return "the runs disagree in direction".into();
    }
    let overlap = j.runs.iter().any(|r| !r.separated);
    let small = j.runs.iter().any(|r| !r.large);
    let few = j
        .runs
        .iter()
        .any(|r| r.reference.map_or(0, |s| s.rounds).min(r.other.map_or(0, |s| s.rounds)) < verdict::MIN_ROUNDS);
    let pct = (MIN_EFFECT * 100.0).round();
    match (overlap, small) {
        (true, true) if few => format!("(a) fewer than 3 rounds, (c) within {pct}%"),
        (true, true) => format!("(a) rounds overlap, (c) within {pct}%"),
        (true, false) if few => "(a) fewer than 3 rounds".into(),
        (true, false) => "(a) rounds overlap".into(),
        _ => format!("(c) within {pct}%"),
    }
}

/// How many findings got each verdict, in the order of [`ClaimVerdict::ALL`], without the empty ones.
pub fn counts(findings: &[Finding]) -> Vec<(ClaimVerdict, usize)> {
    ClaimVerdict::ALL
        .into_iter()
        .map(|v| (v, findings.iter().filter(|f| f.verdict == v).count()))
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_record;

    /// A run of `rounds` closed rounds of bun and node on hello-bare: (bun, node) req/s each round.
    fn run(id: &str, at: &str, rounds: &[(f64, f64)]) -> Vec<Record> {
        let mut out = Vec::new();
        for (i, (bun, node)) in rounds.iter().enumerate() {
            for (rt, rps) in [("bun", bun), ("node", node)] {
                let mut r = test_record("hello-bare", rt, Kind::Closed, i as u32 + 1);
                (r.run_id, r.started_at) = (id.into(), at.into());
                r.req_per_s = Some(*rps);
                r.server_cpu_us_per_resp = Some(1e6 / rps);
                out.push(r);
            }
        }
        out
    }

    fn claim(published: f64) -> Claim {
        let text = format!(
            "[[claim]]\nid = \"T\"\npost = \"0\"\nsays = \"s\"\nworkload = \"hello-bare\"\nmetric = \"req_per_s\"\na = \
             \"bun\"\nb = \"node\"\npublished = {published:?}\n"
        );
        crate::ledger::parse(&text).expect("claim").remove(0)
    }

    const TWICE: [(f64, f64); 3] = [(200.0, 100.0), (210.0, 100.0), (190.0, 98.0)];

    fn two_runs(rounds: &[(f64, f64)]) -> Vec<Record> {
        [run("r1", "2026-12-05T10:00:00Z", rounds), run("r2", "2026-12-05T11:30:00Z", rounds)].concat()
    }

    #[test]
    fn each_verdict_from_the_rule() {
        let records = two_runs(&TWICE);
        let f = &judge(&[claim(2.0)], &records)[0];
        assert_eq!(f.verdict, ClaimVerdict::Reproduced, "{f:?}");
        assert!(!f.b_pending && f.reason == "bun better in every run, within 1.60–2.50", "{}", f.reason);
        assert_eq!((f.runs.len(), f.runs[0].rounds, f.records), (2, 3, 12));
        assert_eq!(f.runs[0].min, Some(190.0 / 98.0), "the rounds' least ratio");
        let f = &judge(&[claim(3.5)], &records)[0];
        assert_eq!(f.verdict, ClaimVerdict::SizeDiffers, "{f:?}");
        assert!(f.reason.contains("outside 2.80–4.38"), "{}", f.reason);
        assert_eq!(judge(&[claim(0.5)], &records)[0].verdict, ClaimVerdict::Contradicted);
        assert_eq!(judge(&[claim(1.0)], &records)[0].verdict, ClaimVerdict::Contradicted, "parity, but 2x");
        let even = two_runs(&[(100.0, 100.0), (101.0, 99.0), (99.0, 101.0)]);
        assert_eq!(judge(&[claim(1.0)], &even)[0].verdict, ClaimVerdict::Reproduced, "parity holds");
        let f = &judge(&[claim(2.4)], &even)[0];
        assert_eq!(f.verdict, ClaimVerdict::NoMeasurableDifference);
        assert!(f.reason.contains("(a) rounds overlap, (c) within 10%"), "{}", f.reason);
    }

    #[test]
    fn one_run_says_b_is_pending() {
        let f = &judge(&[claim(2.0)], &run("r1", "2026-12-05T10:00:00Z", &TWICE))[0];
        assert_eq!(f.verdict, ClaimVerdict::Reproduced);
        assert!(f.b_pending && f.reason.ends_with("; (b) pending"), "{}", f.reason);
    }

    #[test]
    fn missing_and_void_cells_are_not_measured() {
        let mut c = claim(2.0);
        c.a = "koa".into();
        let f = &judge(&[c], &two_runs(&TWICE))[0];
        assert_eq!(f.verdict, ClaimVerdict::NotMeasured);
        assert_eq!(f.reason, "no run measured both koa and node on hello-bare closed");
        let mut records = two_runs(&TWICE);
        records[1].void_because("3 timeouts");
        let f = &judge(&[claim(2.0)], &records)[0];
        assert_eq!(f.verdict, ClaimVerdict::NotMeasured);
        assert!(f.reason.starts_with("(d) void records: node closed round 1: 3 timeouts"), "{}", f.reason);
    }

    #[test]
    fn a_claim_at_a_count_reads_that_count() {
        let mut records = two_runs(&TWICE);
        for r in &mut records {
            r.connections = Some(100);
        }
        let mut at_512 = two_runs(&[(100.0, 300.0), (101.0, 310.0), (99.0, 290.0)]);
        for r in &mut at_512 {
            r.connections = Some(512);
        }
        records.extend(at_512);
        let mut c = claim(2.0);
        assert_eq!(judge(&[c.clone()], &records)[0].verdict, ClaimVerdict::Reproduced, "the headline count");
        c.connections = Some(512);
        let f = &judge(&[c], &records)[0];
        assert_eq!(f.verdict, ClaimVerdict::Contradicted, "{f:?}");
        assert_eq!(f.reason, "the post has bun better; the rule finds node better");
        // A run that never held 512 connections is not one of the claim's runs.
        let only_r1: Vec<Record> =
            records.into_iter().filter(|r| r.run_id == "r2" || r.connections == Some(100)).collect();
        let mut c = claim(2.0);
        c.connections = Some(100);
        let mut later = run("r3", "2026-12-05T13:00:00Z", &TWICE);
        for r in &mut later {
            r.connections = Some(512);
        }
        // Its checks are not swept: they stay in the cell, and must not make r3 one of its runs.
        let mut check = test_record("hello-bare", "bun", Kind::Check, 0);
        check.run_id = "r3".into();
        later.push(check);
        let f = &judge(&[c], &[only_r1, later].concat())[0];
        assert_eq!(f.runs.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), ["r1", "r2"], "{f:?}");
    }

    #[test]
    fn verdicts_serialize_as_their_words() {
        for v in ClaimVerdict::ALL {
            assert_eq!(serde_json::to_value(v).expect("json"), serde_json::Value::String(v.text().into()));
        }
    }
}
