//! Read-only SQLite for servers that answer from one database file, one connection per worker thread
//! (metadata-rs, ladder-rs).
//!
//! A primary-key read takes microseconds, so the servers run it inline on the worker's runtime instead of
//! hopping to a blocking pool (which would cost more than the query). What could block longer is bounded: the
//! busy timeout caps a wait on a writer's lock, and after any SQLite error the connection is dropped and
//! reopened at most every [`REOPEN_EVERY`]; in between [`Reader::read`] fails at once with [`Unavailable`],
//! which the servers answer with 503 and `Retry-After`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

/// How often a worker retries opening a database that failed.
pub const REOPEN_EVERY: Duration = Duration::from_millis(250);

#[derive(Debug, Clone)]
pub struct Options {
    pub path: PathBuf,
    /// How long a query waits on a lock held by a writer before it fails.
    pub busy_timeout: Duration,
    /// `PRAGMA mmap_size`: reads come from the page cache without a syscall each.
    pub mmap_size: u64,
    /// A statement compiled (and cached) at open. Compiling reads the schema, so a missing table or a file
    /// that is not a database fails the open rather than the first request.
    pub statement: &'static str,
}

/// The database cannot answer now (missing, locked, corrupt, no table): SQLite's message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// One worker's connection. Not `Sync`: each worker thread owns one.
pub struct Reader {
    options: Options,
    conn: Option<Connection>,
    last_open: Option<Instant>,
    /// Whether the last outcome was a failure, so an outage and the recovery are each logged once.
    failing: bool,
}

impl Reader {
    /// Opens now when it can; when it cannot, the first read tries again.
    pub fn new(options: Options) -> Reader {
        let mut reader = Reader { options, conn: None, last_open: None, failing: false };
        if let Err(e) = reader.ensure_open() {
            reader.failed(&e);
        }
        reader
    }

    pub fn path(&self) -> &Path {
        &self.options.path
    }

    /// Runs `query` on the connection, opening it first if it is closed (and the last attempt is at least
    /// [`REOPEN_EVERY`] ago). Any SQLite error fails the read and drops the connection. A value `query`
    /// returns, even one the caller treats as a bad row, counts as the database answering.
    pub fn read<T>(&mut self, query: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, Unavailable> {
        if let Err(e) = self.ensure_open() {
            return Err(self.failed(&e));
        }
        let Some(conn) = &self.conn else { return Err(Unavailable("not open".to_string())) };
        match query(conn) {
            Ok(value) => {
                self.succeeded();
                Ok(value)
            }
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn ensure_open(&mut self) -> Result<(), rusqlite::Error> {
        if self.conn.is_none() {
            if self.last_open.is_some_and(|t| t.elapsed() < REOPEN_EVERY) {
                return Err(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                    Some("not reopened yet after a failure".to_string()),
                ));
            }
            self.last_open = Some(Instant::now());
            self.conn = Some(open(&self.options)?);
        }
        Ok(())
    }

    /// Logs the first failure of a run of them and drops the connection; the next attempt reopens it, at most
    /// every [`REOPEN_EVERY`], failing at once in between. Dropping even on a busy database is deliberate: only
    /// the first request of an outage waits out the busy timeout (the rest get a quick 503 instead of each
    /// blocking the worker), and a connection left stale by an exclusive-mode writer (seen: still busy after
    /// that writer closed) is never reused.
    fn failed(&mut self, e: &rusqlite::Error) -> Unavailable {
        self.conn = None;
        if !self.failing {
            self.failing = true;
            tracing::warn!(path = %self.options.path.display(), error = %e, "SQLite unavailable; answering 503");
        }
        Unavailable(e.to_string())
    }

    fn succeeded(&mut self) {
        if self.failing {
            self.failing = false;
            tracing::info!(path = %self.options.path.display(), "SQLite answers again");
        }
    }
}

/// Opens read-only (no writes, no journal recovery by us), without SQLite's own mutexes (one thread per
/// connection), with the busy timeout and mmap size set, and compiles [`Options::statement`].
pub fn open(options: &Options) -> Result<Connection, rusqlite::Error> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(&options.path, flags)?;
    conn.busy_timeout(options.busy_timeout)?;
    conn.pragma_update(None, "mmap_size", options.mmap_size.min(i64::MAX as u64) as i64)?;
    conn.prepare_cached(options.statement)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATEMENT: &str = "SELECT v FROM t WHERE k = ?1";

    fn options(path: PathBuf) -> Options {
        Options { path, busy_timeout: Duration::from_millis(50), mmap_size: 1 << 20, statement: STATEMENT }
    }

    fn get(reader: &mut Reader, key: i64) -> Result<Option<String>, Unavailable> {
        reader.read(|conn| {
            let mut stmt = conn.prepare_cached(STATEMENT)?;
            let mut rows = stmt.query([key])?;
            rows.next()?.map(|row| row.get(0)).transpose()
        })
    }

    #[test]
    fn a_missing_file_is_unavailable_until_it_exists_and_the_reopen_interval_passed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db.sqlite");
        let opened_at = Instant::now();
        let mut reader = Reader::new(options(path.clone()));
        assert!(get(&mut reader, 1).is_err(), "no file yet");

        let conn = Connection::open(&path).expect("create");
        conn.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'one');")
            .expect("fill");
        let early = get(&mut reader, 1);
        if opened_at.elapsed() < REOPEN_EVERY {
            assert!(early.is_err(), "reopened before {REOPEN_EVERY:?}");
        }
        std::thread::sleep(REOPEN_EVERY);
        assert_eq!(get(&mut reader, 1).expect("reopened").as_deref(), Some("one"));
        assert_eq!(get(&mut reader, 2).expect("no row is an answer"), None);
    }

    #[test]
    fn a_file_without_the_table_fails_the_open() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db.sqlite");
        Connection::open(&path).expect("create").execute_batch("CREATE TABLE other (x)").expect("schema");
        assert!(open(&options(path)).is_err());
    }
}
