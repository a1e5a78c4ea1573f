//! The published claims on the page: `compare claims [--claims FILE] RUN.jsonl... [--json]` (a table, or an
//! array), the "Published claims" section every summary gets when the ledger exists, and the README's block
//! (`--readme README.md`), which is this module's output on the committed runs and nothing typed by hand.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::format::num;
use crate::ledger::{self, Claim};
use crate::records::Record;
use crate::report::findings::{self, Finding};
use crate::report::overview::{self, Scope};
use crate::table::Table;

#[derive(Debug, Clone, Args)]
pub struct ClaimsArgs {
    /// Record files written by compare: every run whose records bear on a claim (each run judged alone, then
    /// together by the rule's (b)).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The ledger of claims.
    #[arg(long, default_value = ledger::DEFAULT_PATH)]
    pub claims: PathBuf,
    /// Print a JSON array of {id, verdict, published, runs: [{ratio, min, max, rounds}], reason, ...}.
    #[arg(long, conflicts_with = "readme")]
    pub json: bool,
    /// Rewrite this README's block between `<!-- claims:` and `<!-- claims end -->` from these files (the
    /// files are named in the block, relative to the README's folder, so a test can regenerate it).
    #[arg(long)]
    pub readme: Option<PathBuf>,
}

/// The ledger's post figure: `2.40`, `1.00 (parity)`, or `—` without one.
fn published_text(f: &Finding) -> String {
    match f.published {
        Some(1.0) => "1.00 (parity)".into(),
        Some(p) => num(p, 2),
        None => "—".into(),
    }
}

/// Each run's median of per-round a ÷ b ratios with their range: `1.62 (1.55–1.70) / 1.58 (1.50–1.66)`.
fn measured_text(f: &Finding) -> String {
    let each: Vec<String> = f
        .runs
        .iter()
        .map(|r| match (r.ratio, r.min, r.max) {
            (Some(x), Some(lo), Some(hi)) if r.rounds > 1 => format!("{} ({}–{})", num(x, 2), num(lo, 2), num(hi, 2)),
            (Some(x), _, _) => num(x, 2),
            _ => "—".into(),
        })
        .collect();
    if each.is_empty() { "—".into() } else { each.join(" / ") }
}

/// What was measured: `ladder-empty req_per_s bun ÷ node`, with the count and round trip when the claim
/// names them.
fn measured_as(f: &Finding, claim: &Claim) -> String {
    let mut out = format!("{} {} {} ÷ {}", f.workload, f.metric, f.a, f.b);
    if claim.kind == crate::records::Kind::Open {
        out.push_str(", open loop");
    }
    if let Some(c) = claim.connections {
        let _ = write!(out, ", {c} connections");
    }
    if let Some(ms) = claim.db_rtt_ms {
        let _ = write!(out, ", {} ms to the databases", num(ms, 0));
    }
    out
}

/// Why, with the records read and the stand-in.
fn why_text(f: &Finding) -> String {
    let mut out = f.reason.clone();
    if f.records > 0 {
        let _ = write!(out, " ({} records)", f.records);
    }
    if let Some(s) = &f.stands_in {
        let _ = write!(out, ". Stands in: {s}");
    }
    out
}

/// The findings as one Markdown table, a row per claim in ledger order.
pub fn table(claims: &[Claim], findings: &[Finding]) -> String {
    let mut t = Table::new(["id", "the claim", "measured as", "post", "measured, per run", "verdict", "why"]);
    for (c, f) in claims.iter().zip(findings) {
        t.row([
            f.id.clone(),
            f.says.clone(),
            measured_as(f, c),
            published_text(f),
            measured_text(f),
            f.verdict.text().to_string(),
            why_text(f),
        ]);
    }
    t.finish()
}

/// `Of 45 claims: 6 reproduced, 3 contradicted, ...`.
pub fn counts_line(findings: &[Finding]) -> String {
    let each: Vec<String> = findings::counts(findings).iter().map(|(v, n)| format!("{n} {}", v.text())).collect();
    format!("Of {} claims: {}.", findings.len(), each.join(", "))
}

/// How the verdicts were reached, for every page that shows them.
fn rule_text(runs: usize) -> String {
    let pending = if runs == 1 {
        " With one run only (a), (c) and (d) can be checked: each verdict says \"(b) pending\"."
    } else {
        ""
    };
    format!(
        "Each claim of the posts (bench/claims.toml, in the project's own words) judged by the repeatability rule \
         on its pair's per-round ratio (a ÷ b, medians of per-round ratios; the range is the rounds'): \
         `reproduced` when the rule finds the post's direction and every run's ratio is within the post's figure \
         ×/÷ the tolerance (1.25 unless the ledger says), or finds no difference where the post claims parity; \
         `direction holds, size differs` outside the tolerance; `contradicted` for the opposite direction, or a \
         difference where the post claims parity; `no measurable difference` where the rule finds none; `not \
         measured` without valid records (or where this machine cannot measure it).{pending}\n"
    )
}

/// The "Published claims" section of a summary: nothing without claims.
pub fn section(out: &mut String, claims: &[Claim], records: &[Record]) {
    if claims.is_empty() {
        return;
    }
    let findings = findings::judge(claims, records);
    let runs = crate::records::ordered(records.iter().map(|r| r.run_id.as_str())).len();
    let _ = writeln!(out, "\n## Published claims\n\n{}", rule_text(runs));
    out.push_str(&table(claims, &findings));
    let _ = writeln!(out, "\n{}", counts_line(&findings));
}

/// The README's block: the rule, the counts, the claims' table and the Bun-against-Node overview, from
/// `files` (named relative to `base`, the README's folder, in the block's first line).
pub fn readme_block(claims: &[Claim], base: &Path, files: &[PathBuf]) -> anyhow::Result<String> {
    let paths: Vec<PathBuf> = files.iter().map(|f| base.join(f)).collect();
    let records = crate::records::read_jsonl(&paths)?;
    let findings = findings::judge(claims, &records);
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let mut out = format!("{BEGIN} {} -->\n", names.join(" "));
    let _ = writeln!(
        out,
        "\n*Generated by `target/release/compare claims --readme README.md {}`; a test regenerates it from \
         those files.*\n",
        names.join(" ")
    );
    out.push_str(&rule_text(crate::records::ordered(records.iter().map(|r| r.run_id.as_str())).len()));
    runs_list(&mut out, &records, files);
    let _ = writeln!(out, "\n{}\n", counts_line(&findings));
    out.push_str(&table(claims, &findings));
    let judged = crate::report::cross_record::judged(&records);
    let headline = crate::report::sweep::headline(&judged);
    let (bun, node) = crate::reference::POSTS_PAIR;
    let mut pair = String::new();
    overview::section(&mut pair, &headline, None, Scope { reference: node, only: Some(bun) });
    // One level down: the block sits under the README's own heading.
    out.push_str(&pair.replace("\n## ", "\n### "));
    let _ = writeln!(out, "\n{END}");
    Ok(out)
}

/// One line per run the block reads: its file, when it started, the command and the commit it measured.
fn runs_list(out: &mut String, records: &[Record], files: &[PathBuf]) {
    out.push_str("\nThe runs, in the order the figures list them:\n\n");
    for run in crate::records::ordered(records.iter().map(|r| r.run_id.as_str())) {
        let Some(first) = records.iter().find(|r| r.run_id == run) else { continue };
        let file = files.iter().find(|f| f.file_stem().is_some_and(|s| s.to_string_lossy() == run));
        let name = file.map_or(run.clone(), |f| format!("[{run}]({})", f.with_extension("md").display()));
        let built =
            first.provenance.as_ref().map_or(String::new(), |p| format!(", {}", crate::provenance::describe(p)));
        let command = crate::format::shell_join(&first.command);
        let _ = writeln!(out, "- {name}: started {}{built}: `{command}`", first.started_at);
    }
}

/// The block's first line starts with this; the files follow it.
pub const BEGIN: &str = "<!-- claims:";
pub const END: &str = "<!-- claims end -->";

/// The block in a README's text: its byte range and the files its first line names.
pub fn find_block(readme: &str) -> Option<(std::ops::Range<usize>, Vec<PathBuf>)> {
    let start = readme.find(BEGIN)?;
    let end = start + readme[start..].find(END)? + END.len();
    let first = readme[start..].lines().next()?;
    let files = first.strip_prefix(BEGIN)?.strip_suffix("-->")?.split_whitespace().map(PathBuf::from).collect();
    Some((start..end, files))
}

/// `compare claims`: 0 with the findings printed (or the README rewritten), 1 when an input is refused.
pub fn command(args: &ClaimsArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("compare claims: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &ClaimsArgs) -> anyhow::Result<()> {
    let claims = ledger::read(&args.claims)?;
    if let Some(readme) = &args.readme {
        let text = std::fs::read_to_string(readme).with_context(|| format!("reading {}", readme.display()))?;
        let base = readme.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let files: Vec<PathBuf> = args
            .files
            .iter()
            .map(|f| f.strip_prefix(base).map(Path::to_path_buf).unwrap_or_else(|_| f.clone()))
            .collect();
        let block = readme_block(&claims, base, &files)?;
        let Some((range, _)) = find_block(&text) else {
            anyhow::bail!("{} has no `{BEGIN} ... -->` ... `{END}` block to rewrite", readme.display());
        };
        let mut new = text.clone();
        new.replace_range(range, block.trim_end());
        std::fs::write(readme, new).with_context(|| format!("writing {}", readme.display()))?;
        eprintln!("compare claims: rewrote the claims block of {}", readme.display());
        return Ok(());
    }
    let records = crate::records::read_jsonl(&args.files)?;
    let found = findings::judge(&claims, &records);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&found)?);
    } else {
        let runs = crate::records::ordered(records.iter().map(|r| r.run_id.as_str())).len();
        print!("{}\n{}\n{}\n", rule_text(runs), table(&claims, &found), counts_line(&found));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_names_its_files() {
        let readme =
            "# x\n\n<!-- claims: bench/results/a.jsonl bench/results/b.jsonl -->\nold\n<!-- claims end -->\nrest\n";
        let (range, files) = find_block(readme).expect("a block");
        assert_eq!(files, [PathBuf::from("bench/results/a.jsonl"), PathBuf::from("bench/results/b.jsonl")]);
        assert!(readme[range.clone()].starts_with(BEGIN) && readme[range].ends_with(END));
        assert!(find_block("no block").is_none());
    }
}
