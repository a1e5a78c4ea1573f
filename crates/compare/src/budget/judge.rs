//! A cell's measurements judged against its budget, the table the gate prints, the functions that grew, and
//! what `--update` writes (the budget, and its profile: each cell's functions with their own instructions and
//! their allocations per response, which a later failing run is compared against).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::budget::file::{self, Cell};
use crate::budget::meter::{self, Instructions, Syscalls};
use crate::stats::{median, spread};
use crate::table::Table;

/// The least tolerance `--update` writes. A 2% floor let one extra small allocation per request through
/// (+146 instructions, +1.6% on hello-bare: bench/results/20261206T0110Z), on cells whose five rounds agreed to
/// the instruction.
pub const MIN_TOLERANCE_PCT: f64 = 0.5;

/// Functions below this many own instructions per response, and making fewer allocations than
/// [`PROFILE_ALLOCATIONS_FLOOR`], are left out of the profile.
const PROFILE_FLOOR: f64 = 1.0;
const PROFILE_ALLOCATIONS_FLOOR: f64 = 0.001;

/// How many grown functions a failing cell lists.
const GROWTH_ROWS: usize = 10;

/// A cell's rounds.
#[derive(Debug, Clone, Default)]
pub struct Measurement {
    pub instructions: Vec<Instructions>,
    pub syscalls: Vec<Syscalls>,
}

impl Measurement {
    pub fn push(&mut self, i: Instructions, s: Syscalls) {
        self.instructions.push(i);
        self.syscalls.push(s);
    }

    pub fn instructions_per_response(&self) -> Option<f64> {
        median(self.instructions.iter().map(Instructions::per_response))
    }

    pub fn allocations_per_response(&self) -> Option<f64> {
        median(self.instructions.iter().map(Instructions::allocations_per_response))
    }

    pub fn allocator_per_response(&self) -> Option<f64> {
        median(self.instructions.iter().map(Instructions::allocator_per_response))
    }

    pub fn syscalls_per_response(&self) -> Option<f64> {
        median(self.syscalls.iter().map(Syscalls::per_response))
    }

    /// The instructions' (max − min) / median, percent; None under two rounds.
    pub fn spread_pct(&self) -> Option<f64> {
        if self.instructions.len() < 2 {
            return None;
        }
        let s = spread(self.instructions.iter().map(Instructions::per_response))?;
        Some((s.max - s.min) / s.median * 100.0)
    }

    /// The median round's own instructions and allocations per response for every function (the round whose
    /// judged figure is the median).
    fn functions_per_response(&self) -> HashMap<String, Cost> {
        let mut rounds: Vec<&Instructions> = self.instructions.iter().collect();
        rounds.sort_by(|a, b| a.per_response().total_cmp(&b.per_response()));
        let Some(mid) = rounds.get(rounds.len() / 2) else { return HashMap::new() };
        let n = mid.responses.max(1) as f64;
        let mut out: HashMap<String, Cost> = HashMap::new();
        for (f, &c) in &mid.profile.functions {
            out.entry(f.clone()).or_default().instructions = c as f64 / n;
        }
        for (f, &c) in &mid.profile.allocations {
            out.entry(f.clone()).or_default().allocations = c as f64 / n;
        }
        out
    }
}

/// One function's part of a response: its own instructions, and the allocating calls it makes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cost {
    pub instructions: f64,
    pub allocations: f64,
}

/// One cell's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Instructions per response over the budget, percent (negative: under it).
    pub instructions_delta_pct: f64,
    pub tolerance_pct: f64,
    pub allocations_delta: f64,
    pub allocations_tolerance: f64,
    pub syscalls_delta: f64,
    pub syscalls_tolerance: f64,
}

impl Verdict {
    pub fn instructions_over(&self) -> bool {
        self.instructions_delta_pct > self.tolerance_pct
    }

    pub fn allocations_over(&self) -> bool {
        self.allocations_delta > self.allocations_tolerance + 1e-9
    }

    pub fn syscalls_over(&self) -> bool {
        self.syscalls_delta > self.syscalls_tolerance + 1e-9
    }

    pub fn passed(&self) -> bool {
        !self.instructions_over() && !self.allocations_over() && !self.syscalls_over()
    }
}

/// The cell judged on its rounds so far (none yet: at its budget, so the first round is always measured).
pub fn verdict(cell: &Cell, m: &Measurement) -> Verdict {
    let ins = m.instructions_per_response().unwrap_or(cell.instructions as f64);
    let allocations = m.allocations_per_response().unwrap_or(cell.allocations);
    let sys = m.syscalls_per_response().unwrap_or(cell.syscalls);
    Verdict {
        instructions_delta_pct: (ins / cell.instructions as f64 - 1.0) * 100.0,
        tolerance_pct: cell.tolerance_pct,
        allocations_delta: allocations - cell.allocations,
        allocations_tolerance: cell.allocations_tolerance,
        syscalls_delta: sys - cell.syscalls,
        syscalls_tolerance: cell.syscalls_tolerance,
    }
}

/// The Markdown table of every cell: budget, measured, change and verdict (without verdicts: `--update`'s).
pub fn table(cells: &[Cell], measured: &[Measurement], verdicts: Option<&[Verdict]>) -> String {
    let mut table = Table::new([
        "cell",
        "instructions/resp budget",
        "measured",
        "change",
        "allocations/resp budget",
        "measured",
        "in allocator",
        "syscalls/resp budget",
        "measured",
        "rounds",
        "verdict",
    ]);
    for (i, (c, m)) in cells.iter().zip(measured).enumerate() {
        let ins = m.instructions_per_response().unwrap_or(f64::NAN);
        let allocations = m.allocations_per_response().unwrap_or(f64::NAN);
        let sys = m.syscalls_per_response().unwrap_or(f64::NAN);
        let verdict = match verdicts.map(|v| &v[i]) {
            None => "updated".to_string(),
            Some(v) if v.passed() => "within budget".to_string(),
            Some(v) => {
                let mut why = Vec::new();
                if v.instructions_over() {
                    why.push(format!("instructions +{:.2}% > {}%", v.instructions_delta_pct, v.tolerance_pct));
                }
                if v.allocations_over() {
                    why.push(format!("allocations +{:.2} per response", v.allocations_delta));
                }
                if v.syscalls_over() {
                    why.push(format!("syscalls +{:.2} per response", v.syscalls_delta));
                }
                format!("**over budget**: {}", why.join(", "))
            }
        };
        table.row([
            c.name(),
            format!("{} ± {}%", c.instructions, c.tolerance_pct),
            format!("{ins:.0}"),
            format!("{:+.2}%", (ins / c.instructions as f64 - 1.0) * 100.0),
            format!("{:.2} ± {:.2}", c.allocations, c.allocations_tolerance),
            format!("{allocations:.2}"),
            format!("{:.0}", m.allocator_per_response().unwrap_or(f64::NAN)),
            format!("{:.2} ± {:.2}", c.syscalls, c.syscalls_tolerance),
            format!("{sys:.2}"),
            m.instructions.len().to_string(),
            verdict,
        ]);
    }
    let mut out = table.finish();
    let _ = write!(
        out,
        "\nOne connection, closed loop, {:?} warmup then a {:?} window per measurement; instructions are the \
         server's user space under callgrind outside the allocator (\"in allocator\", reported and not judged, \
         moves with the heap's state; the allocating calls into it are judged instead), syscalls strace -c -f's \
         count.",
        meter::WARMUP,
        meter::WINDOW
    );
    out
}

/// What grew against the committed profile, for each figure the verdict found over budget: the functions
/// whose own instructions per response grew most, and those whose allocations per response did.
pub fn growth(cell: &Cell, m: &Measurement, profile: &Profile, v: &Verdict) -> String {
    let now = m.functions_per_response();
    let empty = BTreeMap::new();
    let before = profile.get(&cell.name()).unwrap_or(&empty);
    let mut out = String::new();
    if v.instructions_over() {
        out.push_str(&grown(cell, "own instructions", &now, before, |c| c.instructions, 1));
    }
    if v.allocations_over() {
        out.push_str(&grown(cell, "allocations", &now, before, |c| c.allocations, 3));
    }
    if before.is_empty() {
        out.push_str("\n(no committed profile for this cell: every function counts as new)\n");
    }
    out
}

/// The functions whose `figure` (named `what`) grew, most first, at most [`GROWTH_ROWS`], `decimals` places,
/// under a title.
fn grown(
    cell: &Cell,
    what: &str,
    now: &HashMap<String, Cost>,
    before: &BTreeMap<String, Cost>,
    figure: impl Fn(&Cost) -> f64,
    decimals: usize,
) -> String {
    // Only what grew by at least what the table can show: a function that vanished or held still explains
    // nothing of a cell over budget.
    let shown = 0.5 / 10f64.powi(decimals as i32);
    let mut rows: Vec<(f64, &str, f64, f64)> = now
        .iter()
        .map(|(f, c)| {
            let b = before.get(f).map_or(0.0, &figure);
            (figure(c) - b, f.as_str(), b, figure(c))
        })
        .filter(|r| r.0 >= shown)
        .collect();
    rows.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    if rows.is_empty() {
        return format!("\n{}: no function's {what} per response grew\n", cell.name());
    }
    let mut table = Table::new(["growth", "budgeted", "measured", "function"]);
    for (delta, f, b, n) in rows.iter().take(GROWTH_ROWS) {
        table.row([
            format!("{delta:+.decimals$}"),
            format!("{b:.decimals$}"),
            format!("{n:.decimals$}"),
            format!("`{f}`"),
        ]);
    }
    format!(
        "\n{}: the functions whose {what} per response grew, most first (at most {GROWTH_ROWS})\n\n{}",
        cell.name(),
        table.finish()
    )
}

/// Per cell, its functions' own instructions and allocations per response.
pub type Profile = BTreeMap<String, BTreeMap<String, Cost>>;

/// `bench/budget.toml` -> `bench/budget.profile.tsv`.
pub fn profile_path(budget: &Path) -> PathBuf {
    budget.with_extension("profile.tsv")
}

/// Reads a profile written by [`update`].
pub fn read_profile(path: &Path) -> anyhow::Result<Profile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut profile = Profile::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.starts_with('#') && !l.is_empty()) {
        let mut fields = line.splitn(4, '\t');
        let (Some(cell), Some(instructions), Some(allocations), Some(function)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            anyhow::bail!("{}:{}: not cell, instructions, allocations, function", path.display(), n + 1);
        };
        let number = |v: &str| v.parse::<f64>().with_context(|| format!("{}:{}: {v:?}", path.display(), n + 1));
        let cost = Cost { instructions: number(instructions)?, allocations: number(allocations)? };
        profile.entry(cell.to_string()).or_default().insert(function.to_string(), cost);
    }
    Ok(profile)
}

/// Rewrites the budget from the measurements (each cell's median, a tolerance from its spread) and the
/// profile beside it.
pub fn update(path: &Path, cells: &[Cell], measured: &[Measurement]) -> anyhow::Result<()> {
    let mut updated = Vec::new();
    let mut profile = String::from(
        "# cell\town instructions per response (median round)\tallocations per response it makes\tfunction\n",
    );
    for (c, m) in cells.iter().zip(measured) {
        let ins = m.instructions_per_response().context("a cell without a measurement")?;
        let spread = m.spread_pct();
        updated.push(Cell {
            instructions: ins.round() as u64,
            tolerance_pct: tolerance(spread),
            allocations: hundredths(m.allocations_per_response().unwrap_or(0.0)),
            allocations_tolerance: count_tolerance(m.instructions.iter().map(Instructions::allocations_per_response)),
            syscalls: hundredths(m.syscalls_per_response().unwrap_or(0.0)),
            syscalls_tolerance: count_tolerance(m.syscalls.iter().map(Syscalls::per_response)),
            spread_pct: spread,
            ..c.clone()
        });
        let mut functions: Vec<(String, Cost)> = m
            .functions_per_response()
            .into_iter()
            .filter(|(_, c)| c.instructions >= PROFILE_FLOOR || c.allocations >= PROFILE_ALLOCATIONS_FLOOR)
            .collect();
        functions.sort_by(|a, b| b.1.instructions.total_cmp(&a.1.instructions).then_with(|| a.0.cmp(&b.0)));
        for (f, cost) in functions {
            let _ = writeln!(profile, "{}\t{:.1}\t{:.3}\t{f}", c.name(), cost.instructions, cost.allocations);
        }
    }
    let header = format!(
        "The performance budget `compare budget` holds every commit to (crates/compare/README.md, \"The budget\").\n\
         Per cell: the rust server's user-space instructions per response outside the allocator and its\n\
         allocating calls into the allocator per response (callgrind), and its system calls per response\n\
         (strace -c -f); one connection, a {:?} window after a {:?} warmup. Written by\n\
         `compare budget --update` from the median of its rounds; the tolerance is three times the spread of\n\
         those rounds (at least 0.5%), the allocations' and syscalls' twice their range (at least 0.05). The\n\
         commit that changes this file says why.",
        meter::WINDOW,
        meter::WARMUP
    );
    std::fs::write(path, file::render(&updated, &header)).with_context(|| format!("writing {}", path.display()))?;
    let p = profile_path(path);
    std::fs::write(&p, profile).with_context(|| format!("writing {}", p.display()))?;
    Ok(())
}

/// For a count per response (calls, allocations): 0.05, or twice the rounds' range rounded up to a
/// twentieth, whichever is larger.
fn count_tolerance(rounds: impl Iterator<Item = f64>) -> f64 {
    let range = spread(rounds).map_or(0.0, |s| s.max - s.min);
    ((range * 2.0 * 20.0).ceil() / 20.0).max(file::DEFAULT_COUNT_TOLERANCE)
}

fn hundredths(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Three times the measured spread rounded up to a half percent, and at least [`MIN_TOLERANCE_PCT`]; 2% when
/// one round measured no spread.
fn tolerance(spread_pct: Option<f64>) -> f64 {
    spread_pct.map_or(file::DEFAULT_TOLERANCE_PCT, |s| ((s * 3.0 * 2.0).ceil() / 2.0).max(MIN_TOLERANCE_PCT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::callgrind::Profile as Dump;
    use crate::budget::syscalls::SyscallCounts;
    use crate::plan::workloads::Workload;

    fn cell() -> Cell {
        Cell {
            server: "flight-rs".into(),
            workload: Workload::HelloBare,
            instructions: 1000,
            tolerance_pct: 2.0,
            allocations: 2.0,
            allocations_tolerance: file::DEFAULT_COUNT_TOLERANCE,
            syscalls: 3.0,
            syscalls_tolerance: file::DEFAULT_COUNT_TOLERANCE,
            spread_pct: None,
            line: 1,
        }
    }

    /// 100 responses: `total` instructions outside the allocator (the allocator's own 5,000 on top, in
    /// `allocs` allocations by `handle`), `calls` system calls.
    fn round(total: u64, calls: u64, functions: &[(&str, u64)]) -> (Instructions, Syscalls) {
        allocating_round(total, 200, calls, functions)
    }

    fn allocating_round(total: u64, allocs: u64, calls: u64, functions: &[(&str, u64)]) -> (Instructions, Syscalls) {
        let functions = functions.iter().map(|(f, c)| (f.to_string(), *c)).collect();
        let allocations = [("handle".to_string(), allocs)].into();
        let profile = Dump { total: total + 5_000, functions, allocator: 5_000, allocations };
        let counts = SyscallCounts { by_name: [("sendto".to_string(), calls)].into() };
        (Instructions { responses: 100, profile }, Syscalls { responses: 100, counts })
    }

    #[test]
    fn a_cell_fails_past_its_tolerance_or_on_one_more_call_in_twenty_responses() {
        let mut m = Measurement::default();
        let (i, s) = round(101_900, 300, &[]);
        m.push(i, s);
        assert!(verdict(&cell(), &m).passed(), "+1.9% and the same calls");
        let mut over = Measurement::default();
        let (i, s) = round(102_100, 300, &[]);
        over.push(i, s);
        assert!(verdict(&cell(), &over).instructions_over(), "+2.1%");
        let mut calls = Measurement::default();
        let (i, s) = round(100_000, 306, &[]);
        calls.push(i, s);
        let v = verdict(&cell(), &calls);
        assert!(v.syscalls_over() && !v.instructions_over(), "{v:?}");
        let mut allocating = Measurement::default();
        let (i, s) = allocating_round(100_000, 206, 300, &[]);
        allocating.push(i, s);
        let v = verdict(&cell(), &allocating);
        assert!(v.allocations_over() && !v.instructions_over() && !v.syscalls_over(), "{v:?}");
    }

    #[test]
    fn the_judged_instructions_leave_the_allocator_out() {
        let (i, _) = round(100_000, 300, &[]);
        assert_eq!((i.per_response(), i.allocator_per_response(), i.allocations_per_response()), (1000.0, 50.0, 2.0));
    }

    #[test]
    fn growth_lists_the_functions_that_grew_most_first_and_only_those() {
        let mut m = Measurement::default();
        let (i, s) = round(100_000, 300, &[("alloc", 30_000), ("parse", 20_000), ("new", 5_000)]);
        m.push(i, s);
        let mut profile = Profile::new();
        let cost = |instructions| Cost { instructions, allocations: 0.0 };
        profile.insert(
            "flight-rs/hello-bare".into(),
            [("alloc".into(), cost(100.0)), ("parse".into(), cost(250.0))].into(),
        );
        let over = Verdict { instructions_delta_pct: 5.0, ..verdict(&cell(), &m) };
        let text = growth(&cell(), &m, &profile, &over);
        let alloc = text.find("`alloc`").expect("alloc listed");
        let new = text.find("`new`").expect("new listed");
        assert!(alloc < new, "+200, +50:\n{text}");
        assert!(!text.contains("`parse`"), "-50 explains nothing:\n{text}");
        assert!(text.contains("| +200.0 | 100.0 | 300.0 | `alloc` |"), "{text}");
        assert!(!text.contains("allocations per response grew"), "allocations within budget:\n{text}");
    }

    #[test]
    fn growth_names_who_allocates_more_when_allocations_are_over() {
        let mut m = Measurement::default();
        let (i, s) = allocating_round(100_000, 300, 300, &[("handle", 50_000)]);
        m.push(i, s);
        let mut profile = Profile::new();
        profile.insert(
            "flight-rs/hello-bare".into(),
            [("handle".into(), Cost { instructions: 500.0, allocations: 2.0 })].into(),
        );
        let v = verdict(&cell(), &m);
        assert!(v.allocations_over() && !v.instructions_over(), "{v:?}");
        let text = growth(&cell(), &m, &profile, &v);
        assert!(text.contains("allocations per response grew, most first"), "{text}");
        assert!(text.contains("| +1.000 | 2.000 | 3.000 | `handle` |"), "{text}");
        assert!(!text.contains("own instructions per response grew"), "instructions within budget:\n{text}");
    }

    #[test]
    fn the_tolerance_is_three_spreads_rounded_up_to_a_half_at_least_half_a_percent() {
        assert_eq!(tolerance(None), 2.0, "one round: no spread, the default");
        assert_eq!(tolerance(Some(0.0)), 0.5);
        assert_eq!(tolerance(Some(0.13)), 0.5);
        assert_eq!(tolerance(Some(0.54)), 2.0);
        assert_eq!(tolerance(Some(1.34)), 4.5);
    }

    #[test]
    fn update_writes_a_budget_and_profile_that_read_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("budget.toml");
        let mut m = Measurement::default();
        for total in [100_000, 100_200, 100_100] {
            let (i, s) = round(total, 300, &[("alloc", total / 2), ("tiny", 50)]);
            m.push(i, s);
        }
        update(&path, &[cell()], &[m]).expect("update");
        let cells = file::read(&path).expect("the budget reads back");
        assert_eq!((cells[0].instructions, cells[0].syscalls, cells[0].tolerance_pct), (1001, 3.0, 1.0));
        assert!(cells[0].spread_pct.is_some_and(|s| (s - 0.1998).abs() < 0.01), "{:?}", cells[0].spread_pct);
        assert_eq!((cells[0].allocations, cells[0].allocations_tolerance), (2.0, file::DEFAULT_COUNT_TOLERANCE));
        let profile = read_profile(&profile_path(&path)).expect("the profile reads back");
        assert_eq!(profile["flight-rs/hello-bare"]["alloc"].instructions, 500.5);
        assert_eq!(profile["flight-rs/hello-bare"]["handle"].allocations, 2.0, "allocates, no own instructions");
        assert!(!profile["flight-rs/hello-bare"].contains_key("tiny"), "0.5 per response is under the floor");
    }
}
