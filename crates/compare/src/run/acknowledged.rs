//! What a notes-write run left in its database, read back after the load while its server still runs (so a
//! write in flight lands rather than being cut off by the stop): every write the loader saw acknowledged
//! must be a row, with its history row. A server that answers 200 before the commit,
//! or writes the history outside the transaction and loses it, measures cheaper work than the others; its
//! run is void, not faster.

use std::time::{Duration, Instant};

use crate::records::Stored;
use crate::run::deps::Deps;

/// The notes table and its history table (scribe's `<component>` and `<component>_history`); psql prints
/// the two columns as `rows|history`.
const COUNTS: &str = "SELECT (SELECT count(*) FROM notes), (SELECT count(*) FROM notes_history)";
/// A write still in flight when loadgen stopped commits a moment later (the shipped peers' two statements,
/// behind their per-write DDL, take seconds under load): the counts are final once rows and history rows
/// agree in two readings in a row, or at the deadline.
const SETTLE_POLL: Duration = Duration::from_millis(200);
const SETTLE_DEADLINE: Duration = Duration::from_secs(10);

/// The rows and history rows in `db`, read while its server still runs, once settled.
pub fn read_back(deps: &Deps, db: &str) -> anyhow::Result<Stored> {
    let deadline = Instant::now() + SETTLE_DEADLINE;
    let mut last = None;
    loop {
        let stored = parse(&deps.query(db, COUNTS)?)?;
        let settled = stored.rows == stored.history_rows && last == Some(stored);
        if settled || Instant::now() >= deadline {
            return Ok(stored);
        }
        last = Some(stored);
        std::thread::sleep(SETTLE_POLL);
    }
}

fn parse(text: &str) -> anyhow::Result<Stored> {
    let (rows, history) = text.trim().split_once('|').ok_or_else(|| anyhow::anyhow!("counts {text:?}"))?;
    Ok(Stored { rows: rows.parse()?, history_rows: history.parse()? })
}

/// Why `stored` does not account for `acknowledged` writes (2xx answers the loader counted in the measured
/// window; the warmup's and the priming's writes are rows too, so rows may exceed it).
pub fn problems(stored: Stored, acknowledged: u64) -> Vec<String> {
    let mut out = Vec::new();
    if stored.history_rows != stored.rows {
        out.push(format!(
            "{} notes but {} history rows: a write without its history",
            stored.rows, stored.history_rows
        ));
    }
    if stored.rows < acknowledged {
        out.push(format!("{} writes acknowledged but only {} notes stored", acknowledged, stored.rows));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_problems() {
        assert_eq!(parse("12|12\n").expect("parse"), Stored { rows: 12, history_rows: 12 });
        assert!(parse("12").is_err() && parse("a|1").is_err());
        assert!(problems(Stored { rows: 12, history_rows: 12 }, 10).is_empty());
        let lost = problems(Stored { rows: 9, history_rows: 9 }, 10);
        assert_eq!(lost, ["10 writes acknowledged but only 9 notes stored"]);
        let split = problems(Stored { rows: 12, history_rows: 11 }, 10);
        assert_eq!(split, ["12 notes but 11 history rows: a write without its history"]);
    }
}
