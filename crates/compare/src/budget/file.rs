//! The budget file (`bench/budget.toml`): per cell, the instructions, allocations and system calls per
//! response the gate holds a commit to. Read strictly, like the claims ledger: a cell naming an unknown server or workload, a
//! server that does not serve that workload, a malformed tolerance or a field the format does not have is
//! refused with its line. `compare budget --update` writes it back in the same layout.
//!
//! ```toml
//! [[cell]]
//! server = "flight-rs"       # the rust server of the workload, or "loadgen" (its cost per request sent)
//! workload = "hello-bare"    # a compare workload
//! instructions = 9188        # user-space instructions per response outside the allocator, callgrind
//! tolerance = "2%"           # how far above `instructions` a measurement may land
//! allocations = 4.0          # allocating calls into the allocator per response, callgrind
//! allocations_tolerance = 0.05  # how many more per response a measurement may make
//! syscalls = 3.0             # system calls per response, strace -c -f
//! syscalls_tolerance = 0.05  # how many more per response a measurement may make
//! spread = "0.12%"           # optional: the instructions' spread over the rounds that set the budget
//! ```

use std::fmt::Write as _;
use std::ops::Range;
use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;
use toml::Spanned;

use crate::plan::workloads::Workload;

/// Where the budget lives in a checkout.
pub const DEFAULT_PATH: &str = "bench/budget.toml";

/// The tolerance a cell gets when the file names none, and the least `--update` writes.
pub const DEFAULT_TOLERANCE_PCT: f64 = 2.0;

/// System calls or allocations per response a cell may make above its budget when the file names no
/// tolerance, and the least `--update` writes: one more on one response in twenty. With one connection most
/// cells repeat their counts to ±0.01; a cell whose count moves with timing (a cache entry expiring
/// mid-window) gets a wider one from its measured spread.
pub const DEFAULT_COUNT_TOLERANCE: f64 = 0.05;

/// The server name of the cell that measures loadgen itself.
pub const LOADGEN: &str = "loadgen";

/// One measured cell and its budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The rust server of `workload`, or [`LOADGEN`].
    pub server: String,
    pub workload: Workload,
    pub instructions: u64,
    pub tolerance_pct: f64,
    pub allocations: f64,
    pub allocations_tolerance: f64,
    pub syscalls: f64,
    pub syscalls_tolerance: f64,
    /// The instructions' spread (max − min over median, percent) when the budget was set.
    pub spread_pct: Option<f64>,
    /// The 1-based line of its `server`, for messages.
    pub line: usize,
}

impl Cell {
    /// `server/workload`, the cell's name in messages and in the profile file.
    pub fn name(&self) -> String {
        format!("{}/{}", self.server, self.workload.name())
    }

    /// Whether this cell measures loadgen rather than a server.
    pub fn is_loadgen(&self) -> bool {
        self.server == LOADGEN
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    #[serde(default)]
    cell: Vec<RawCell>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCell {
    server: Spanned<String>,
    workload: Spanned<String>,
    instructions: Spanned<i64>,
    tolerance: Option<Spanned<String>>,
    allocations: Spanned<f64>,
    allocations_tolerance: Option<Spanned<f64>>,
    syscalls: Spanned<f64>,
    syscalls_tolerance: Option<Spanned<f64>>,
    spread: Option<Spanned<String>>,
}

/// Reads and checks the budget file; the error names the file and the line.
pub fn read(path: &Path) -> anyhow::Result<Vec<Cell>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).with_context(|| format!("{}", path.display()))
}

/// Parses and checks a budget's text.
pub fn parse(text: &str) -> anyhow::Result<Vec<Cell>> {
    let raw: RawBudget = toml::from_str(text).map_err(|e| anyhow::anyhow!("{}", e.to_string().trim_end()))?;
    let mut cells: Vec<Cell> = Vec::new();
    for c in raw.cell {
        let cell = checked(text, c)?;
        if let Some(first) = cells.iter().find(|o| o.server == cell.server && o.workload == cell.workload) {
            bail!("line {}: {} is already budgeted on line {}", cell.line, cell.name(), first.line);
        }
        cells.push(cell);
    }
    if cells.is_empty() {
        bail!("no [[cell]] in the budget");
    }
    Ok(cells)
}

fn checked(text: &str, c: RawCell) -> anyhow::Result<Cell> {
    let line = |s: Range<usize>| text[..s.start.min(text.len())].matches('\n').count() + 1;
    let at = line(c.server.span());
    let Some(workload) = Workload::parse(c.workload.get_ref()) else {
        let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
        bail!(
            "line {}: unknown workload {:?}; one of {}",
            line(c.workload.span()),
            c.workload.get_ref(),
            names.join(", ")
        );
    };
    let server = c.server.get_ref().as_str();
    let serves = workload.service().rust_server();
    if server != serves && server != LOADGEN {
        bail!(
            "line {at}: unknown server {server:?} for {}: {serves}, or {LOADGEN} (its cost per request)",
            workload.name()
        );
    }
    let instructions = u64::try_from(*c.instructions.get_ref())
        .ok()
        .filter(|&n| n > 0)
        .with_context(|| format!("line {}: instructions must be a positive count", line(c.instructions.span())))?;
    let tolerance_pct = match &c.tolerance {
        Some(t) => percent(t.get_ref()).filter(|p| *p < 100.0).with_context(|| {
            format!("line {}: tolerance {:?} is not a percentage like \"2%\"", line(t.span()), t.get_ref())
        })?,
        None => DEFAULT_TOLERANCE_PCT,
    };
    // A per-response count or its tolerance: a non-negative number.
    let count = |value: &Spanned<f64>, field: &str| {
        let v = *value.get_ref();
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(anyhow::anyhow!("line {}: {field} must be a non-negative number", line(value.span())))
        }
    };
    let tolerance_of =
        |t: &Option<Spanned<f64>>, field: &str| t.as_ref().map_or(Ok(DEFAULT_COUNT_TOLERANCE), |t| count(t, field));
    let allocations = count(&c.allocations, "allocations")?;
    let allocations_tolerance = tolerance_of(&c.allocations_tolerance, "allocations_tolerance")?;
    let syscalls = count(&c.syscalls, "syscalls")?;
    let syscalls_tolerance = tolerance_of(&c.syscalls_tolerance, "syscalls_tolerance")?;
    let spread_pct = match &c.spread {
        Some(s) => Some(
            percent(s.get_ref())
                .with_context(|| format!("line {}: spread {:?} is not a percentage", line(s.span()), s.get_ref()))?,
        ),
        None => None,
    };
    let server = server.to_string();
    Ok(Cell {
        server,
        workload,
        instructions,
        tolerance_pct,
        allocations,
        allocations_tolerance,
        syscalls,
        syscalls_tolerance,
        spread_pct,
        line: at,
    })
}

/// `"2%"` or `"0.5 %"` as 2.0 or 0.5; anything else (no sign, negative, not a number) is None.
fn percent(text: &str) -> Option<f64> {
    let number = text.trim().strip_suffix('%')?.trim();
    number.parse::<f64>().ok().filter(|p| p.is_finite() && *p >= 0.0)
}

/// The file `--update` writes: the header that says what the figures are, then the cells in order.
pub fn render(cells: &[Cell], header: &str) -> String {
    let mut out = String::new();
    for line in header.lines() {
        let _ = writeln!(out, "# {line}");
    }
    for c in cells {
        let _ = write!(
            out,
            "\n[[cell]]\nserver = {:?}\nworkload = {:?}\ninstructions = {}\ntolerance = \"{}%\"\n\
             allocations = {:.2}\nallocations_tolerance = {:.2}\nsyscalls = {:.2}\nsyscalls_tolerance = {:.2}\n",
            c.server,
            c.workload.name(),
            c.instructions,
            format_pct(c.tolerance_pct),
            c.allocations,
            c.allocations_tolerance,
            c.syscalls,
            c.syscalls_tolerance
        );
        if let Some(s) = c.spread_pct {
            let _ = writeln!(out, "spread = \"{}%\"", format_pct(s));
        }
    }
    out
}

/// A percentage as the file writes it: two decimals at most, no trailing zeros.
fn format_pct(p: f64) -> String {
    let text = format!("{p:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "# a budget\n[[cell]]\nserver = \"flight-rs\"\nworkload = \"hello-bare\"\ninstructions = 9188\n\
tolerance = \"2.5%\"\nallocations = 4.0\nsyscalls = 3.0\nspread = \"0.12%\"\n\n[[cell]]\nserver = \"loadgen\"\n\
workload = \"hello-bare\"\ninstructions = 4000\nallocations = 0.0\nallocations_tolerance = 0.1\nsyscalls = 2.5\n";

    #[test]
    fn a_budget_reads_back_what_render_writes() {
        let cells = parse(GOOD).expect("parses");
        assert_eq!(cells.len(), 2);
        assert_eq!(cells[0].name(), "flight-rs/hello-bare");
        assert_eq!((cells[0].instructions, cells[0].tolerance_pct, cells[0].spread_pct), (9188, 2.5, Some(0.12)));
        assert_eq!((cells[1].tolerance_pct, cells[1].line), (DEFAULT_TOLERANCE_PCT, 12));
        assert_eq!((cells[0].allocations, cells[0].allocations_tolerance), (4.0, DEFAULT_COUNT_TOLERANCE));
        assert_eq!(cells[1].allocations_tolerance, 0.1);
        assert!(cells[1].is_loadgen());
        let again = parse(&render(&cells, "header\nsecond line")).expect("render parses");
        let strip = |c: &[Cell]| c.iter().map(|c| Cell { line: 0, ..c.clone() }).collect::<Vec<_>>();
        assert_eq!(strip(&again), strip(&cells));
    }

    #[test]
    fn each_bad_entry_is_refused_with_its_line() {
        let cases = [
            (
                GOOD.replace("\"hello-bare\"\ninstructions = 9188", "\"hello-bear\"\ninstructions = 9188"),
                "line 4: unknown workload \"hello-bear\"",
            ),
            (GOOD.replace("\"flight-rs\"", "\"scribe-rs\""), "line 3: unknown server \"scribe-rs\" for hello-bare"),
            (GOOD.replace("\"2.5%\"", "\"2.5\""), "line 6: tolerance \"2.5\" is not a percentage"),
            (GOOD.replace("\"2.5%\"", "\"-1%\""), "line 6: tolerance"),
            (GOOD.replace("9188", "0"), "line 5: instructions must be a positive count"),
            (GOOD.replace("syscalls = 3.0", "syscalls = -1.0"), "line 8: syscalls must be a non-negative number"),
            (GOOD.replace("allocations = 4.0", "allocations = -1.0"), "line 7: allocations must be a non-negative"),
            (GOOD.replace("allocations_tolerance = 0.1", "allocations_tolerance = -0.1"), "line 16: allocations_t"),
            (GOOD.replace("allocations = 4.0\n", ""), "missing field `allocations`"),
            (GOOD.replace("spread = ", "sprad = "), "unknown field `sprad`"),
            (
                GOOD.replace("\"loadgen\"", "\"flight-rs\""),
                "line 12: flight-rs/hello-bare is already budgeted on line 3",
            ),
            ("# nothing\n".to_string(), "no [[cell]]"),
        ];
        for (text, want) in cases {
            let err = format!("{:#}", parse(&text).expect_err(want));
            assert!(err.contains(want), "want {want:?}, got {err}");
        }
    }
}
