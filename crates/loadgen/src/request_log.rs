//! `--log-requests FILE`: one line per response of the measured window, for looking at latency over time
//! (a GC pause, a cache expiring, a ramp's knee) where percentiles over the whole window hide it.
//!
//! The format, version 1, is text, one response per line, sorted by intended send time, after one header
//! line; fields (and the header's words) are separated by single tabs, shown here as spaces:
//!
//! ```text
//! # loadgen request log 1  intended_us  sent_us  latency_us  status  body_bytes  conn
//! 1520  1520  212  200  2  3
//! ```
//!
//! - `intended_us`: when the request was due, µs after the start of the measured window (closed loop: when it
//!   was written, since a closed loop has no schedule);
//! - `sent_us`: when loadgen wrote it, µs after the same start (open loop: later than intended when every
//!   connection was busy or the loader was late);
//! - `latency_us`: from the intended time to the complete response (what the report's histogram records);
//! - `status`: the response's status code; `body_bytes`: its body's length;
//! - `conn`: the connection slot, 0 to connections − 1, across threads (a slot reconnects under the same
//!   number).
//!
//! Only complete responses are logged (errors and timeouts are counted in the report, not here).
//! `--log-every N` keeps every Nth response, `--log-max N` caps the lines (they are held in memory until the
//! run ends), and a capped log says so in a last comment line: `# not logged: N responses over --log-max`.

use std::fmt::Write as _;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

/// The header line (and the format's version).
pub const HEADER: &str = "# loadgen request log 1\tintended_us\tsent_us\tlatency_us\tstatus\tbody_bytes\tconn";

/// One logged response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub intended_us: u64,
    pub sent_us: u64,
    pub latency_us: u64,
    pub status: u16,
    pub body_bytes: u64,
    pub conn: u32,
}

/// Writes `records` (sorted here by intended time) and, when the cap left some out, how many.
pub fn write(path: &Path, records: &mut [Record], not_logged: u64) -> io::Result<()> {
    records.sort_by_key(|r| (r.intended_us, r.conn));
    let mut out = io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(out, "{HEADER}")?;
    let mut line = String::with_capacity(64);
    for r in records.iter() {
        line.clear();
        let _ = writeln!(
            line,
            "{}\t{}\t{}\t{}\t{}\t{}",
            r.intended_us, r.sent_us, r.latency_us, r.status, r.body_bytes, r.conn
        );
        out.write_all(line.as_bytes())?;
    }
    if not_logged > 0 {
        writeln!(out, "# not logged: {not_logged} responses over --log-max")?;
    }
    out.flush()
}

/// Why a file does not read as a request log. Each message is one line for the user; the I/O error is
/// quoted in it, so it is not also a `source` (a chain printer would say it twice).
#[derive(Debug, thiserror::Error)]
pub enum RequestLogError {
    #[error("cannot read {}: {error}", path.display())]
    Unreadable { path: PathBuf, error: io::Error },
    #[error("{} is not a loadgen request log (version 1): its first line is {first_line:?}", path.display())]
    NotALog { path: PathBuf, first_line: String },
    /// `number` counts from 1, the header being line 1.
    #[error("{}:{number}: not a request log line: {line:?}", path.display())]
    BadLine { path: PathBuf, number: usize, line: String },
}

/// Reads a log written by [`write`]; a line that is not one is an error naming it.
pub fn read(path: &Path) -> Result<Vec<Record>, RequestLogError> {
    let unreadable = |error| RequestLogError::Unreadable { path: path.into(), error };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut records = Vec::new();
    for (n, line) in io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(unreadable)?;
        if n == 0 {
            if line != HEADER {
                return Err(RequestLogError::NotALog { path: path.into(), first_line: line });
            }
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let bad = || RequestLogError::BadLine { path: path.into(), number: n + 1, line: line.clone() };
        let fields: Vec<u64> =
            line.split('\t').map(|f| f.parse::<u64>().map_err(|_| bad())).collect::<Result<_, _>>()?;
        let [intended_us, sent_us, latency_us, status, body_bytes, conn] = fields[..] else { return Err(bad()) };
        records.push(Record {
            intended_us,
            sent_us,
            latency_us,
            status: u16::try_from(status).map_err(|_| bad())?,
            body_bytes,
            conn: u32::try_from(conn).map_err(|_| bad())?,
        });
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_reads_back_sorted_and_a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("log.tsv");
        let r = |intended_us, conn| Record {
            intended_us,
            sent_us: intended_us + 5,
            latency_us: 90,
            status: 200,
            body_bytes: 2,
            conn,
        };
        let mut records = vec![r(300, 1), r(100, 0), r(200, 2)];
        write(&path, &mut records, 7).expect("write");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.starts_with(HEADER) && text.ends_with("# not logged: 7 responses over --log-max\n"), "{text}");
        assert_eq!(read(&path).expect("read back"), vec![r(100, 0), r(200, 2), r(300, 1)]);
        std::fs::write(&path, "intended\tsent\n").expect("write");
        let foreign = read(&path).expect_err("foreign");
        assert!(matches!(&foreign, RequestLogError::NotALog { first_line, .. } if first_line == "intended\tsent"));
        assert!(foreign.to_string().contains("not a loadgen request log"), "{foreign}");
        std::fs::write(&path, format!("{HEADER}\n1\t2\t3\n")).expect("write");
        let short = read(&path).expect_err("short line");
        assert!(matches!(short, RequestLogError::BadLine { number: 2, .. }), "{short:?}");
        assert_eq!(short.to_string(), format!("{}:2: not a request log line: \"1\\t2\\t3\"", path.display()));
    }
}
