//! A cell's measurements judged against its budget, the table the gate prints, the functions that grew, and
//! what `--update` writes (the budget, and its profile: each cell's functions with their own instructions per
//! response, which a later failing run is compared against).

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

/// Functions below this many own instructions per response are left out of the profile.
const PROFILE_FLOOR: f64 = 1.0;

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

    /// The median round's own instructions per response for every function (the round whose total is the
    /// median, so the functions add up to the figure judged).
    fn functions_per_response(&self) -> HashMap<String, f64> {
        let mut rounds: Vec<&Instructions> = self.instructions.iter().collect();
        rounds.sort_by(|a, b| a.per_response().total_cmp(&b.per_response()));
        let Some(mid) = rounds.get(rounds.len() / 2) else { return HashMap::new() };
        let n = mid.responses.max(1) as f64;
        mid.profile.functions.iter().map(|(f, &c)| (f.clone(), c as f64 / n)).collect()
    }
}

/// One cell's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Instructions per response over the budget, percent (negative: under it).
    pub instructions_delta_pct: f64,
    pub tolerance_pct: f64,
    pub syscalls_delta: f64,
    pub syscalls_tolerance: f64,
}

impl Verdict {
    pub fn instructions_over(&self) -> bool {
        self.instructions_delta_pct > self.tolerance_pct
    }

    pub fn syscalls_over(&self) -> bool {
        self.syscalls_delta > self.syscalls_tolerance + 1e-9
    }

    pub fn passed(&self) -> bool {
        !self.instructions_over() && !self.syscalls_over()
    }
}

/// The cell judged on its rounds so far (none yet: at its budget, so the first round is always measured).
pub fn verdict(cell: &Cell, m: &Measurement) -> Verdict {
    let ins = m.instructions_per_response().unwrap_or(cell.instructions as f64);
    let sys = m.syscalls_per_response().unwrap_or(cell.syscalls);
    Verdict {
        instructions_delta_pct: (ins / cell.instructions as f64 - 1.0) * 100.0,
        tolerance_pct: cell.tolerance_pct,
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
        "syscalls/resp budget",
        "measured",
        "rounds",
        "verdict",
    ]);
    for (i, (c, m)) in cells.iter().zip(measured).enumerate() {
        let ins = m.instructions_per_response().unwrap_or(f64::NAN);
        let sys = m.syscalls_per_response().unwrap_or(f64::NAN);
        let verdict = match verdicts.map(|v| &v[i]) {
            None => "updated".to_string(),
            Some(v) if v.passed() => "within budget".to_string(),
            Some(v) => {
                let mut why = Vec::new();
                if v.instructions_over() {
                    why.push(format!("instructions +{:.2}% > {}%", v.instructions_delta_pct, v.tolerance_pct));
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
         server's user space under callgrind, syscalls strace -c -f's count.",
        meter::WARMUP,
        meter::WINDOW
    );
    out
}

/// The functions whose own instructions per response grew most against the committed profile.
pub fn growth(cell: &Cell, m: &Measurement, profile: &Profile) -> String {
    let now = m.functions_per_response();
    let empty = BTreeMap::new();
    let before = profile.get(&cell.name()).unwrap_or(&empty);
    let mut rows: Vec<(f64, &str, f64, f64)> = now
        .iter()
        .map(|(f, &n)| {
            let b = before.get(f).copied().unwrap_or(0.0);
            (n - b, f.as_str(), b, n)
        })
        .chain(before.iter().filter(|(f, _)| !now.contains_key(*f)).map(|(f, &b)| (-b, f.as_str(), b, 0.0)))
        .collect();
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut table = Table::new(["growth", "budgeted", "measured", "function"]);
    for (delta, f, b, n) in rows.iter().take(GROWTH_ROWS) {
        table.row([format!("{delta:+.1}"), format!("{b:.1}"), format!("{n:.1}"), format!("`{f}`")]);
    }
    let mut out = format!(
        "\n{}: the {GROWTH_ROWS} functions whose own instructions per response grew most\n\n{}",
        cell.name(),
        table.finish()
    );
    if before.is_empty() {
        out.push_str("\n(no committed profile for this cell: every function counts as new)\n");
    }
    out
}

/// Per cell, its functions' own instructions per response.
pub type Profile = BTreeMap<String, BTreeMap<String, f64>>;

/// `bench/budget.toml` -> `bench/budget.profile.tsv`.
pub fn profile_path(budget: &Path) -> PathBuf {
    budget.with_extension("profile.tsv")
}

/// Reads a profile written by [`update`].
pub fn read_profile(path: &Path) -> anyhow::Result<Profile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut profile = Profile::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.starts_with('#') && !l.is_empty()) {
        let mut fields = line.splitn(3, '\t');
        let (Some(cell), Some(per), Some(function)) = (fields.next(), fields.next(), fields.next()) else {
            anyhow::bail!("{}:{}: not cell, instructions, function", path.display(), n + 1);
        };
        let per: f64 = per.parse().with_context(|| format!("{}:{}: {per:?}", path.display(), n + 1))?;
        profile.entry(cell.to_string()).or_default().insert(function.to_string(), per);
    }
    Ok(profile)
}

/// Rewrites the budget from the measurements (each cell's median, a tolerance from its spread) and the
/// profile beside it.
pub fn update(path: &Path, cells: &[Cell], measured: &[Measurement]) -> anyhow::Result<()> {
    let mut updated = Vec::new();
    let mut profile = String::from("# cell\town instructions per response (median round)\tfunction\n");
    for (c, m) in cells.iter().zip(measured) {
        let ins = m.instructions_per_response().context("a cell without a measurement")?;
        let spread = m.spread_pct();
        updated.push(Cell {
            instructions: ins.round() as u64,
            tolerance_pct: tolerance(spread),
            syscalls: (m.syscalls_per_response().unwrap_or(0.0) * 100.0).round() / 100.0,
            syscalls_tolerance: syscalls_tolerance(m),
            spread_pct: spread,
            ..c.clone()
        });
        let mut functions: Vec<(String, f64)> =
            m.functions_per_response().into_iter().filter(|(_, per)| *per >= PROFILE_FLOOR).collect();
        functions.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        for (f, per) in functions {
            let _ = writeln!(profile, "{}\t{per:.1}\t{f}", c.name());
        }
    }
    let header = format!(
        "The performance budget `compare budget` holds every commit to (crates/compare/README.md, \"The budget\").\n\
         Per cell: the rust server's user-space instructions per response (callgrind) and system calls per\n\
         response (strace -c -f), one connection, a {:?} window after a {:?} warmup. Written by\n\
         `compare budget --update` from the median of its rounds; the tolerance is three times the spread of\n\
         those rounds (at least 0.5%), the syscalls' twice their range (at least 0.05). The commit that\n\
         changes this file says why.",
        meter::WINDOW,
        meter::WARMUP
    );
    std::fs::write(path, file::render(&updated, &header)).with_context(|| format!("writing {}", path.display()))?;
    let p = profile_path(path);
    std::fs::write(&p, profile).with_context(|| format!("writing {}", p.display()))?;
    Ok(())
}

/// 0.05 calls per response, or twice the rounds' range rounded up to a twentieth, whichever is larger.
fn syscalls_tolerance(m: &Measurement) -> f64 {
    let range = spread(m.syscalls.iter().map(Syscalls::per_response)).map_or(0.0, |s| s.max - s.min);
    ((range * 2.0 * 20.0).ceil() / 20.0).max(file::DEFAULT_SYSCALLS_TOLERANCE)
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
            syscalls: 3.0,
            syscalls_tolerance: file::DEFAULT_SYSCALLS_TOLERANCE,
            spread_pct: None,
            line: 1,
        }
    }

    fn round(total: u64, calls: u64, functions: &[(&str, u64)]) -> (Instructions, Syscalls) {
        let functions = functions.iter().map(|(f, c)| (f.to_string(), *c)).collect();
        let counts = SyscallCounts { by_name: [("sendto".to_string(), calls)].into() };
        (Instructions { responses: 100, profile: Dump { total, functions } }, Syscalls { responses: 100, counts })
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
    }

    #[test]
    fn growth_lists_the_functions_that_grew_most_first() {
        let mut m = Measurement::default();
        let (i, s) = round(100_000, 300, &[("alloc", 30_000), ("parse", 20_000), ("new", 5_000)]);
        m.push(i, s);
        let mut profile = Profile::new();
        profile.insert("flight-rs/hello-bare".into(), [("alloc".into(), 100.0), ("parse".into(), 250.0)].into());
        let text = growth(&cell(), &m, &profile);
        let alloc = text.find("`alloc`").expect("alloc listed");
        let new = text.find("`new`").expect("new listed");
        let parse = text.find("`parse`").expect("parse listed");
        assert!(alloc < new && new < parse, "+200, +50, -50:\n{text}");
        assert!(text.contains("| +200.0 | 100.0 | 300.0 | `alloc` |"), "{text}");
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
        let profile = read_profile(&profile_path(&path)).expect("the profile reads back");
        assert_eq!(profile["flight-rs/hello-bare"]["alloc"], 500.5);
        assert!(!profile["flight-rs/hello-bare"].contains_key("tiny"), "0.5 per response is under the floor");
    }
}
