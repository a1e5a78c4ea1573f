//! The ledger of published claims (`bench/claims.toml`): one `[[claim]]` per claim the posts make about
//! servers, each naming the compare workload, metric and pair of runtimes that check it. Other tools write
//! this file too, so its format is fixed and read strictly:
//!
//! ```toml
//! [[claim]]
//! id = "002A"                # the post's claim id
//! post = "002"
//! says = "An empty handler with 1 KB of JSON: Bun about 2.4x Node"
//! workload = "ladder-json"   # a compare workload
//! metric = "req_per_s"       # crate::verdict::Metric's names
//! a = "bun"                  # the ratio is a ÷ b
//! b = "node"
//! published = 2.4            # the post's a ÷ b on that metric (1.0 claims parity)
//! # optional: tolerance = 1.25, kind = "closed" | "open" (latency only), connections = 512, db_rtt_ms = 10,
//! #           stands_in = "...", and for a claim this machine cannot measure: measurable = false,
//! #           why = "...", command = "the compare command for a machine that can"
//! ```
//!
//! A file that is not TOML is refused with the parser's line and column; an entry naming an unknown
//! workload, runtime, metric or kind, a duplicate id, or a field the format does not have, with its line.

use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;
use toml::Spanned;

use crate::plan::runtimes::Runtime;
use crate::plan::workloads::Workload;
use crate::records::Kind;
use crate::verdict::Metric;

/// Where the ledger lives in a checkout.
pub const DEFAULT_PATH: &str = "bench/claims.toml";

/// How far the measured ratio may sit from the post's, either way, and still reproduce it.
pub const DEFAULT_TOLERANCE: f64 = 1.25;

/// One published claim and how compare checks it.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub id: String,
    pub post: String,
    pub says: String,
    pub workload: String,
    pub metric: Metric,
    /// The ratio is a's value ÷ b's.
    pub a: String,
    pub b: String,
    /// The post's a ÷ b; `None` only for a claim this machine cannot measure and the post gave no figure.
    pub published: Option<f64>,
    pub tolerance: f64,
    /// The records the metric is read from: the metric's own unless a latency claim names open loop.
    pub kind: Kind,
    /// Read at this many connections (a connections sweep's count), else at the workload's headline count.
    pub connections: Option<u32>,
    /// Read at this database round trip (`--db-rtt`), else at the least recorded.
    pub db_rtt_ms: Option<f64>,
    pub stands_in: Option<String>,
    /// Set when this machine cannot measure it: why, and the command for one that can.
    pub unmeasurable: Option<Unmeasurable>,
    /// The 1-based line of its `id`, for messages.
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Unmeasurable {
    pub why: String,
    pub command: Option<String>,
}

impl Claim {
    /// A parity claim: the post says the two run alike.
    pub fn parity(&self) -> bool {
        self.published == Some(1.0)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLedger {
    #[serde(default)]
    claim: Vec<RawClaim>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClaim {
    id: Spanned<String>,
    post: String,
    says: String,
    workload: Spanned<String>,
    metric: Spanned<String>,
    a: Spanned<String>,
    b: Spanned<String>,
    published: Option<Spanned<f64>>,
    tolerance: Option<Spanned<f64>>,
    kind: Option<Spanned<String>>,
    connections: Option<Spanned<u32>>,
    db_rtt_ms: Option<Spanned<f64>>,
    stands_in: Option<String>,
    measurable: Option<bool>,
    why: Option<String>,
    command: Option<String>,
}

/// Reads and checks a ledger file; the error names the file and the line.
pub fn read(path: &Path) -> anyhow::Result<Vec<Claim>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).with_context(|| format!("{}", path.display()))
}

/// The 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// Parses and checks a ledger's text.
pub fn parse(text: &str) -> anyhow::Result<Vec<Claim>> {
    let raw: RawLedger = toml::from_str(text).map_err(|e| anyhow::anyhow!("{}", e.to_string().trim_end()))?;
    let mut out: Vec<Claim> = Vec::new();
    for c in raw.claim {
        let claim = checked(text, c, &out)?;
        out.push(claim);
    }
    if out.is_empty() {
        bail!("no [[claim]] in the ledger");
    }
    Ok(out)
}

/// One `[[claim]]` checked field by field against what compare measures (and against the claims before it,
/// `earlier`, for its id); an error names the field's line and the claim.
fn checked(text: &str, c: RawClaim, earlier: &[Claim]) -> anyhow::Result<Claim> {
    let line = |s: &std::ops::Range<usize>| line_of(text, s.start);
    let id = c.id.get_ref().trim().to_string();
    let at = line(&c.id.span());
    let fail = |field_line: usize, what: String| anyhow::anyhow!("line {field_line}: claim {id}: {what}");
    if id.is_empty() {
        return Err(fail(at, "an empty id".into()));
    }
    if let Some(first) = earlier.iter().find(|o| o.id == id) {
        return Err(fail(at, format!("the id is already used on line {}", first.line)));
    }
    let workload = c.workload.get_ref();
    if Workload::parse(workload).is_none() {
        let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
        return Err(fail(
            line(&c.workload.span()),
            format!("unknown workload {workload:?}; one of {}", names.join(", ")),
        ));
    }
    for side in [&c.a, &c.b] {
        if Runtime::parse(side.get_ref()).is_none() {
            return Err(fail(line(&side.span()), format!("unknown runtime {:?}", side.get_ref())));
        }
    }
    if c.a.get_ref() == c.b.get_ref() {
        return Err(fail(line(&c.b.span()), "a and b name the same runtime".into()));
    }
    let Some(metric) = Metric::parse(c.metric.get_ref()) else {
        let names: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
        return Err(fail(
            line(&c.metric.span()),
            format!("unknown metric {:?}; one of {}", c.metric.get_ref(), names.join(", ")),
        ));
    };
    let kind = kind_of(metric, c.kind.as_ref()).map_err(|(span, what)| fail(line(&span), what))?;
    let measurable = c.measurable.unwrap_or(true);
    let published = match (&c.published, measurable) {
        (Some(p), _) if !(p.get_ref().is_finite() && *p.get_ref() > 0.0) => {
            return Err(fail(line(&p.span()), "published must be a positive number".into()));
        }
        (Some(p), _) => Some(*p.get_ref()),
        (None, true) => return Err(fail(at, "no published figure (the post's a ÷ b)".into())),
        (None, false) => None,
    };
    let tolerance = match &c.tolerance {
        Some(t) if !(t.get_ref().is_finite() && *t.get_ref() >= 1.0) => {
            return Err(fail(line(&t.span()), "tolerance must be at least 1 (a factor either way)".into()));
        }
        Some(t) => *t.get_ref(),
        None => DEFAULT_TOLERANCE,
    };
    if let Some(n) = &c.connections
        && *n.get_ref() == 0
    {
        return Err(fail(line(&n.span()), "connections must be at least 1".into()));
    }
    if let Some(ms) = &c.db_rtt_ms
        && !(ms.get_ref().is_finite() && *ms.get_ref() >= 0.0)
    {
        return Err(fail(line(&ms.span()), "db_rtt_ms must be a non-negative number".into()));
    }
    let unmeasurable = match (measurable, c.why) {
        (true, _) => {
            if c.command.is_some() {
                return Err(fail(at, "command is for a claim with measurable = false".into()));
            }
            None
        }
        (false, None) => return Err(fail(at, "measurable = false needs why".into())),
        (false, Some(why)) => Some(Unmeasurable { why, command: c.command }),
    };
    Ok(Claim {
        id,
        post: c.post,
        says: c.says,
        workload: workload.clone(),
        metric,
        a: c.a.into_inner(),
        b: c.b.into_inner(),
        published,
        tolerance,
        kind,
        connections: c.connections.map(Spanned::into_inner),
        db_rtt_ms: c.db_rtt_ms.map(Spanned::into_inner),
        stands_in: c.stands_in,
        unmeasurable,
        line: at,
    })
}

/// The kind of record a claim's metric is read from: the metric's own, or the `kind` the claim names, which
/// the metric must be read from. An error: the field's span and what is wrong with it.
fn kind_of(metric: Metric, kind: Option<&Spanned<String>>) -> Result<Kind, (std::ops::Range<usize>, String)> {
    let Some(k) = kind else { return Ok(metric.kind()) };
    let named = match k.get_ref().as_str() {
        "closed" => Kind::Closed,
        "open" => Kind::Open,
        other => return Err((k.span(), format!("unknown kind {other:?}; closed or open"))),
    };
    if !metric.kinds().contains(&named) {
        return Err((k.span(), format!("{} is not read from {} runs", metric.name(), k.get_ref())));
    }
    Ok(named)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"
[[claim]]
id = "002A"
post = "002"
says = "An empty handler: Bun about 2.4x Node"
workload = "ladder-empty"
metric = "req_per_s"
a = "bun"
b = "node"
published = 2.4
"#;

    #[test]
    fn a_claim_with_its_defaults() {
        let claims = parse(ONE).expect("parses");
        let c = &claims[0];
        assert_eq!((c.id.as_str(), c.metric, c.kind, c.line), ("002A", Metric::ReqPerS, Kind::Closed, 3));
        assert_eq!((c.published, c.tolerance, c.connections, c.unmeasurable.as_ref()), (Some(2.4), 1.25, None, None));
        assert!(!c.parity());
    }

    #[test]
    fn optional_fields_and_unmeasurable_claims() {
        let text = format!(
            "{ONE}\n[[claim]]\nid = \"004E\"\npost = \"004\"\nsays = \"s\"\nworkload = \"metadata\"\nmetric = \
             \"p99_ms\"\na = \"bun\"\nb = \"node\"\npublished = 1.0\nkind = \"open\"\nconnections = 512\n\n[[claim]]\nid \
             = \"003C\"\npost = \"003\"\nsays = \"s\"\nworkload = \"hello-default\"\nmetric = \"req_per_s\"\na = \
             \"bun\"\nb = \"node\"\nmeasurable = false\nwhy = \"six cores\"\ncommand = \"compare --server-cores 0-3\"\n"
        );
        let claims = parse(&text).expect("parses");
        assert_eq!((claims[1].kind, claims[1].connections, claims[1].parity()), (Kind::Open, Some(512), true));
        let u = claims[2].unmeasurable.as_ref().expect("unmeasurable");
        assert_eq!((u.why.as_str(), u.command.as_deref()), ("six cores", Some("compare --server-cores 0-3")));
        assert_eq!(claims[2].published, None);
    }

    fn refused(text: &str) -> String {
        format!("{:#}", parse(text).expect_err("refused"))
    }

    #[test]
    fn bad_entries_are_refused_with_their_line() {
        let e = refused(&ONE.replace("ladder-empty", "ladder-nope"));
        assert!(e.starts_with("line 6: claim 002A: unknown workload \"ladder-nope\""), "{e}");
        let e = refused(&ONE.replace("b = \"node\"", "b = \"deno\""));
        assert!(e.starts_with("line 9: claim 002A: unknown runtime \"deno\""), "{e}");
        let e = refused(&ONE.replace("req_per_s", "req_per_min"));
        assert!(e.starts_with("line 7: claim 002A: unknown metric \"req_per_min\""), "{e}");
        let e = refused(&format!("{ONE}{ONE}"));
        assert!(e.starts_with("line 13: claim 002A: the id is already used on line 3"), "{e}");
        let e = refused(&format!("{ONE}kind = \"open\"\n"));
        assert!(e.contains("req_per_s is not read from open runs"), "{e}");
        let e = refused(&ONE.replace("published = 2.4", ""));
        assert!(e.contains("no published figure"), "{e}");
        let e = refused(&format!("{ONE}colour = \"red\"\n"));
        assert!(e.contains("unknown field `colour`") && e.contains("line 11"), "{e}");
    }

    #[test]
    fn a_file_that_is_not_toml_gives_the_parsers_line_and_column() {
        let e = refused("[[claim]]\nid = \"x\nworkload = 1\n");
        assert!(e.contains("line 2, column"), "{e}");
        assert!(refused("").contains("no [[claim]]"));
    }
}
