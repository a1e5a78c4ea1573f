//! The Markdown summary (and the SVG per workload), rendered from records alone, so `compare report
//! FILE.jsonl…` gives exactly what the run printed. Medians with their min–max, never a lone figure; ratios
//! are medians of per-round ratios (both runs in the same interleaved round), which travel across machines
//! better than absolute figures.

pub mod cache;
pub mod capacity;
pub mod charts;
pub mod claims;
pub mod command;
pub mod connections;
pub mod costs;
pub mod cross_record;
pub mod db_rtt;
pub mod findings;
pub mod html;
pub mod ladder;
pub mod lookups;
pub mod noise_floor;
pub mod overview;
pub mod posts_pair;
pub mod soak;
pub mod summary;
pub mod sweep;
pub mod verdicts;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::format::{fmt_median, fmt_spread, num, shell_join};
use crate::ledger::Claim;
use crate::plan::runtimes::Runtime;
use crate::plan::stacks;
use crate::plan::workloads::Workload;
use crate::records::{Kind, Record, ordered};
use crate::reference;
pub use crate::report::cross_record::judged;
use crate::report::ladder::{ladder_points, ladder_section};
use crate::report::overview::Scope;
use crate::report::summary::{CellSummary, OpenSummary, bars, cpu, rps, summarize, workloads};
use crate::table::{Table, cell_text};

/// Whether any table said a cell was loader-bound or contended: the notes under the tables explain those.
#[derive(Debug, Default, Clone, Copy)]
struct Flags {
    loader_bound: bool,
    contended: bool,
}

/// The summary's first line: what was compared, on how many workloads, from how many runs.
fn title(records: &[Record]) -> String {
    if records.is_empty() {
        return "compare: no records".into();
    }
    let runtimes = ordered(records.iter().map(|r| r.runtime.as_str()));
    let named = match runtimes.len() {
        n if n > 5 => format!("{} and {} more", runtimes[..4].join(", "), n - 4),
        1 => runtimes[0].clone(),
        n => format!("{} and {}", runtimes[..n - 1].join(", "), runtimes[n - 1]),
    };
    let plural = |n: usize, one: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") };
    let runs = ordered(records.iter().map(|r| r.run_id.as_str())).len();
    format!("compare: {named} on {}, {}", plural(workloads(records).len(), "workload"), plural(runs, "run"))
}

/// How a summary is drawn: against which runtime, and with which published claims.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Every ratio, overview, chart and verdict is taken against this runtime.
    pub reference: String,
    /// The ledger's claims, judged in a "Published claims" section; none, no section.
    pub claims: Vec<Claim>,
}

impl Default for Options {
    fn default() -> Self {
        Options { reference: reference::DEFAULT.into(), claims: Vec::new() }
    }
}

impl Options {
    /// Against rust, with the ledger at `path` when it exists (a ledger that exists but is refused is an
    /// error: a summary never silently drops its claims).
    pub fn with_ledger_at(path: &Path) -> anyhow::Result<Options> {
        let claims = if path.is_file() { crate::ledger::read(path)? } else { Vec::new() };
        Ok(Options { claims, ..Options::default() })
    }
}

/// The whole Markdown document, every ratio and verdict against `opts.reference`. `md_path`: where it goes,
/// so each workload's chart is linked by file name.
pub fn render(records: &[Record], md_path: Option<&Path>, opts: &Options) -> String {
    let reference = opts.reference.as_str();
    let judged = judged(records);
    let all = judged.as_slice();
    // A sweep's other counts appear in its own section only; every other table reads one count per workload.
    let headline = crate::report::sweep::headline(all);
    let records = headline.as_slice();
    let mut out = String::new();
    let workloads = workloads(records);
    let _ = writeln!(out, "# {}\n", title(records));
    run_lines(&mut out, records);
    for scope in Scope::all(reference) {
        crate::report::overview::section(&mut out, records, md_path, scope);
    }
    // A soak's workload has checks and soak samples only; its own section (crate::report::soak) shows it.
    let soaked_only = |w: &str| {
        let of = records.iter().filter(|r| r.workload == w);
        of.clone().any(|r| r.kind == Kind::Soak) && of.clone().all(|r| matches!(r.kind, Kind::Soak | Kind::Check))
    };
    let compared: Vec<&String> = workloads.iter().filter(|w| !soaked_only(w)).collect();
    if !compared.is_empty() {
        out.push_str(
            "\nClosed loop: medians over runs, (min–max) in brackets. CPU-µs/resp is the server's whole process tree \
         (utime+stime from /proc) over the window divided by the responses: the primary efficiency figure. \
         Ratios are medians of per-round ratios (both runs in the same interleaved round); for req/s above 1 \
         is faster, for CPU-µs/resp below 1 is cheaper.\n",
        );
    }
    let mut flags = Flags::default();
    for w in compared {
        workload_section(&mut out, records, w, md_path, reference, &mut flags);
        crate::report::sweep::section(&mut out, all, w, md_path, reference);
        crate::report::db_rtt::section(&mut out, all, w, reference);
    }
    ladder_section(&mut out, records, md_path, reference);
    crate::report::noise_floor::section(&mut out, records);
    crate::report::claims::section(&mut out, &opts.claims, all);
    crate::report::soak::section(&mut out, records, md_path);
    if flags.loader_bound {
        out.push_str(
            "\nloader-bound: the server cores were under 90% busy in most runs, so loadgen (not the server) set \
             the req/s; compare CPU-µs/resp there. Where the server waits on an upstream or on databases behind \
             --db-rtt it idles while waiting, so there the mark also needs the loader's cores 90% busy.\n",
        );
    }
    if flags.contended {
        out.push_str(
            "\ncontended: in most runs 10% or more of the server cores went to other processes (or steal); req/s \
             and latency are unreliable, CPU-µs/resp less so. Rerun on a quiet machine.\n",
        );
    }
    out
}

/// One list of lines per comparison run the records come from: its id, command, machine and core layout.
fn run_lines(out: &mut String, records: &[Record]) {
    let mut runs: Vec<&Record> = Vec::new();
    for r in records {
        if !runs.iter().any(|x| x.run_id == r.run_id) {
            runs.push(r);
        }
    }
    for r in &runs {
        let m = &r.machine;
        let _ = writeln!(out, "- run `{}`, started {}", r.run_id, r.started_at);
        let _ = writeln!(out, "- command: `{}`", shell_join(&r.command));
        let _ = writeln!(out, "- machine: {m}");
        let l = &r.layout;
        let _ = writeln!(
            out,
            "- layout: server on cores {}, loadgen (and compare) on {}, PostgreSQL and Redis on {}",
            l.server_cores, l.loader_cores, l.db_cores
        );
        if let Some(p) = &r.provenance {
            let _ = writeln!(out, "- built from: {}", crate::provenance::describe(p));
        }
    }
}

/// What each framework runtime measured on `w` runs around the shared handlers, in the order the records
/// name them; runtimes with the same note share its line.
fn stack_notes(out: &mut String, records: &[Record], w: &str) {
    let Some(workload) = Workload::parse(w) else { return };
    let mut notes: Vec<(&'static str, Vec<&str>)> = Vec::new();
    for r in records.iter().filter(|r| r.workload == w) {
        let Some(note) = Runtime::parse(&r.runtime).and_then(|rt| stacks::stack(rt, workload)) else { continue };
        match notes.iter_mut().find(|(n, _)| *n == note) {
            Some((_, names)) if names.contains(&r.runtime.as_str()) => {}
            Some((_, names)) => names.push(&r.runtime),
            None => notes.push((note, vec![&r.runtime])),
        }
    }
    for (note, names) in &notes {
        let _ = writeln!(out, "- {}: {note}", names.join(", "));
    }
    if !notes.is_empty() {
        out.push('\n');
    }
}

/// One workload's section: heading, "same work" line, chart, the closed-loop table, then the costs, open-loop,
/// capacity and DB-only tables where recorded, and its void runs.
fn workload_section(
    out: &mut String,
    records: &[Record],
    w: &str,
    md_path: Option<&Path>,
    reference: &str,
    flags: &mut Flags,
) {
    let summary = summarize(records, w);
    let conns = records.iter().find(|r| r.workload == w && r.connections.is_some()).and_then(|r| r.connections);
    let dur = records.iter().find(|r| r.workload == w && r.kind == Kind::Closed).and_then(|r| r.duration_s);
    let _ = writeln!(
        out,
        "\n## {w}\n\n{} connections{}\n",
        conns.map_or("—".into(), |c| c.to_string()),
        dur.map_or(String::new(), |d| format!(", runs of {} s", num(d, 1)))
    );
    if let Some(layers) = Workload::parse(w).and_then(Workload::same_work) {
        let _ = writeln!(out, "Same work: {layers}\n");
    }
    stack_notes(out, records, w);
    if let (Some(md), false) = (md_path, bars(&summary).is_empty()) {
        let svg = charts::svg_path(md, w);
        let name = svg.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let _ = writeln!(out, "![{w}]({name})\n");
    }
    out.push_str(&closed_table(records, w, &summary, reference, flags));
    crate::report::costs::table(out, records, w, reference);
    crate::report::cache::table(out, records, w);
    crate::report::connections::table(out, records, w);
    open_table(out, &summary);
    crate::report::capacity::table(out, records, w, md_path, reference);
    crate::report::lookups::table(out, records, w, reference);
    let voids: Vec<&Record> = records.iter().filter(|r| r.workload == w && r.void && r.kind != Kind::Check).collect();
    if !voids.is_empty() {
        let _ = writeln!(out, "\nVoid runs:\n");
        for r in voids {
            let reason = cell_text(r.void_reason.as_deref().unwrap_or("no reason recorded"));
            let _ = writeln!(out, "- {} {} round {}: {reason}", r.runtime, r.kind.as_str(), r.round);
        }
    }
}

/// The closed-loop table: per runtime its medians and spreads, and per-round ratios to the reference and the
/// floor.
fn closed_table(records: &[Record], w: &str, summary: &[CellSummary], reference: &str, flags: &mut Flags) -> String {
    let (rps_ref, cpu_ref) = (format!("req/s ÷ {reference}"), format!("CPU ÷ {reference}"));
    let mut table = Table::new([
        "runtime",
        "version",
        "req/s",
        "CPU-µs/resp",
        "p95 ms",
        "p99 ms",
        "idle RSS MiB",
        "RSS after MiB",
        "peak RSS MiB",
        "startup ms",
        rps_ref.as_str(),
        cpu_ref.as_str(),
        "req/s ÷ floor",
        "CPU ÷ floor",
        "valid runs",
    ]);
    for c in summary {
        let version = c.version.as_deref().unwrap_or("—");
        if let Some(reason) = &c.void_cell {
            let void = format!("**VOID**: {reason}");
            let valid = format!("0/{}", c.closed_total);
            table.row([c.runtime.as_str(), version, &void, "", "", "", "", "", "", "", "", "", "", "", &valid]);
            continue;
        }
        flags.loader_bound |= c.loader_bound;
        flags.contended |= c.contended;
        let ratio = |den: &str, metric: fn(&Record) -> Option<f64>| {
            reference::ratio_cell(records, w, Kind::Closed, &c.runtime, den, metric)
        };
        let mut rps_text = fmt_spread(c.req_per_s, 0, 1.0);
        if c.loader_bound {
            rps_text.push_str(" loader-bound");
        }
        if c.contended {
            rps_text.push_str(" contended");
        }
        table.row([
            c.runtime.as_str(),
            version,
            &rps_text,
            &fmt_spread(c.cpu_us_per_resp, 2, 1.0),
            &fmt_median(c.p95_us, 3, 1e-3),
            &fmt_median(c.p99_us, 3, 1e-3),
            &fmt_median(c.rss_idle_kib, 1, 1.0 / 1024.0),
            &fmt_median(c.rss_after_kib, 1, 1.0 / 1024.0),
            &fmt_median(c.rss_peak_kib, 1, 1.0 / 1024.0),
            &fmt_spread(c.startup_ms, 1, 1.0),
            &ratio(reference, rps),
            &ratio(reference, cpu),
            &ratio("floor", rps),
            &ratio("floor", cpu),
            &format!("{}/{}", c.closed_valid, c.closed_total),
        ]);
    }
    table.finish()
}

/// The open-loop table (latency tails at one fixed rate), when the workload has open-loop runs.
fn open_table(out: &mut String, summary: &[CellSummary]) {
    let open: Vec<(&CellSummary, &OpenSummary)> =
        summary.iter().filter_map(|c| c.open.as_ref().map(|o| (c, o))).collect();
    let Some(rate) = open.iter().find_map(|(_, o)| o.rate) else { return };
    let _ = writeln!(out, "\nOpen loop at {} req/s (latency from each request's intended send time):\n", num(rate, 0));
    let mut table =
        Table::new(["runtime", "achieved req/s", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms", "valid runs"]);
    for (c, o) in &open {
        table.row([
            c.runtime.as_str(),
            &fmt_median(o.achieved, 0, 1.0),
            &fmt_median(o.p50_us, 3, 1e-3),
            &fmt_median(o.p95_us, 3, 1e-3),
            &fmt_spread(o.p99_us, 3, 1e-3),
            &fmt_spread(o.p999_us, 3, 1e-3),
            &fmt_median(o.max_us, 3, 1e-3),
            &format!("{}/{}", o.valid, o.total),
        ]);
    }
    out.push_str(&table.finish());
}

/// A summary on stdout; a closed pipe (`compare | head`) is not an error, the files are written anyway.
pub fn print(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Writes the Markdown to `md`, one SVG per workload with measured runs next to it, and the same Markdown with
/// those SVGs inline as one self-contained HTML page (`html_path`); the Markdown, drawn by `opts`.
pub fn write_outputs(records: &[Record], md: &Path, opts: &Options) -> anyhow::Result<String> {
    let text = render(records, Some(md), opts);
    let judged = judged(records);
    let all = judged.as_slice();
    let headline = crate::report::sweep::headline(all);
    let records = headline.as_slice();
    // `report --out bench/results/<date>-<subject>/….md` names a folder of its own: made here, as a run's is.
    if let Some(dir) = md.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(md, &text).with_context(|| format!("writing {}", md.display()))?;
    // (file name, SVG text) of every chart written, for the HTML page.
    let mut svgs: Vec<(String, String)> = Vec::new();
    let mut chart = |path: PathBuf, svg: String| -> anyhow::Result<()> {
        std::fs::write(&path, &svg).with_context(|| format!("writing {}", path.display()))?;
        svgs.push((path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(), svg));
        Ok(())
    };
    for scope in Scope::all(&opts.reference) {
        if let Some(svg) = crate::report::overview::chart(records, scope) {
            chart(charts::svg_path(md, &scope.chart_stem()), svg)?;
        }
    }
    for w in workloads(records) {
        let bars = bars(&summarize(records, &w));
        if bars.is_empty() {
            continue;
        }
        chart(charts::svg_path(md, &w), charts::workload_svg(&w, &bars))?;
    }
    for (path, svg) in crate::report::sweep::charts(all, md) {
        chart(path, svg)?;
    }
    for (path, svg) in crate::report::capacity::charts(records, md) {
        chart(path, svg)?;
    }
    for w in crate::report::soak::workloads(records) {
        let (rss, p99) = crate::report::soak::charts(records, &w);
        let (rss_path, p99_path) = crate::report::soak::svg_paths(md, &w);
        chart(rss_path, rss)?;
        chart(p99_path, p99)?;
    }
    let (steps, points) = ladder_points(records);
    if steps.len() >= 2 && !points.is_empty() {
        chart(charts::svg_path(md, "ladder"), charts::ladder_svg(&steps, &points))?;
    }
    let heading = text.lines().next().and_then(|l| l.strip_prefix("# ")).unwrap_or("compare");
    let stem = md.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let page = crate::report::html::page(&format!("{heading} ({stem})"), &text, &svgs);
    let html = html_path(md);
    std::fs::write(&html, page).with_context(|| format!("writing {}", html.display()))?;
    Ok(text)
}

/// The HTML page beside the Markdown `md`: the same stem, `.html`.
pub fn html_path(md: &Path) -> PathBuf {
    md.with_extension("html")
}
