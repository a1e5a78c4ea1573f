//! SQLite access: one read-only connection per worker thread, its statements prepared once and cached.
//!
//! A point lookup by primary key takes a few microseconds, so it runs inline on the worker's runtime instead of
//! hopping to a blocking pool (which would cost more than the query). What could block longer is bounded: the
//! busy timeout caps a wait on a lock, and a connection that failed (missing, corrupt or replaced file, no
//! `videos` table) is dropped and reopened at most every [`REOPEN_EVERY`], answering 503 in between.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use crate::render::{self, Row};

const LOOKUP_SQL: &str = "SELECT channel, duration_s, views, locales FROM videos WHERE id = ?1";
const HEALTH_SQL: &str = "SELECT 1 FROM videos LIMIT 1";

/// How often a worker retries opening a database that failed to open.
pub const REOPEN_EVERY: Duration = Duration::from_millis(250);

#[derive(Debug, Clone)]
pub struct DbOptions {
    pub path: PathBuf,
    /// How long a query waits on a lock held by a writer before the request gets 503.
    pub busy_timeout: Duration,
    /// `PRAGMA mmap_size`: reads come from the page cache without a syscall each. The Bun and Node peers set
    /// the same value, so the comparison is between runtimes, not SQLite settings.
    pub mmap_size: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The database cannot answer now (missing, locked, corrupt, no table): 503 with Retry-After.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The row exists but its locales are not a JSON object: 500.
    #[error("row {id:?}: {source}")]
    Malformed { id: String, source: render::Malformed },
}

/// One worker's connection. Not `Sync`: each worker thread owns one.
pub struct Database {
    options: DbOptions,
    conn: Option<Connection>,
    last_open: Option<Instant>,
    /// Whether the last outcome was a failure, so a failure and the recovery are each logged once.
    failing: bool,
}

impl Database {
    /// Opens now when it can; when it cannot, the first request that needs it tries again.
    pub fn new(options: DbOptions) -> Database {
        let mut db = Database { options, conn: None, last_open: None, failing: false };
        if let Err(e) = db.ensure_open() {
            db.failed(&e);
        }
        db
    }

    pub fn path(&self) -> &Path {
        &self.options.path
    }

    /// Appends the JSON body for `id` seen from `region` to `out`; `Ok(false)` when there is no such video.
    pub fn lookup(&mut self, id: &str, region: &str, out: &mut Vec<u8>) -> Result<bool, LookupError> {
        let result = self.try_lookup(id, region, out);
        match &result {
            Ok(_) | Err(LookupError::Malformed { .. }) => self.succeeded(),
            Err(LookupError::Unavailable(_)) => {}
        }
        result
    }

    fn try_lookup(&mut self, id: &str, region: &str, out: &mut Vec<u8>) -> Result<bool, LookupError> {
        if let Err(e) = self.ensure_open() {
            return Err(self.failed(&e));
        }
        let Some(conn) = &self.conn else { return Err(LookupError::Unavailable("not open".to_string())) };
        let outcome = (|| {
            let mut stmt = conn.prepare_cached(LOOKUP_SQL)?;
            let mut rows = stmt.query([id])?;
            let Some(row) = rows.next()? else { return Ok(None) };
            let (channel, duration, views, locales) =
                (row.get_ref(0)?, row.get_ref(1)?, row.get_ref(2)?, row.get_ref(3)?);
            Ok(Some(row_of(channel, duration, views, locales).and_then(|row| render::render(id, region, &row, out))))
        })();
        match outcome {
            Ok(None) => Ok(false),
            Ok(Some(Ok(()))) => Ok(true),
            Ok(Some(Err(source))) => Err(LookupError::Malformed { id: id.to_string(), source }),
            Err(e) => Err(self.failed(&e)),
        }
    }

    /// A cheap query that touches the `videos` table, for /healthz.
    pub fn check(&mut self) -> Result<(), LookupError> {
        if let Err(e) = self.ensure_open() {
            return Err(self.failed(&e));
        }
        let Some(conn) = &self.conn else { return Err(LookupError::Unavailable("not open".to_string())) };
        let outcome = conn.prepare_cached(HEALTH_SQL).and_then(|mut stmt| stmt.query([])?.next().map(|_| ()));
        match outcome {
            Ok(()) => {
                self.succeeded();
                Ok(())
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
    /// every [`REOPEN_EVERY`], answering 503 at once in between. Dropping even on a busy database is
    /// deliberate: only the first request of an outage waits out the busy timeout (the rest get a quick 503
    /// instead of each blocking the worker), and a connection left stale by an exclusive-mode writer (seen:
    /// still busy after that writer closed) is never reused.
    fn failed(&mut self, e: &rusqlite::Error) -> LookupError {
        self.conn = None;
        if !self.failing {
            self.failing = true;
            tracing::warn!(path = %self.options.path.display(), error = %e, "SQLite unavailable; answering 503");
        }
        LookupError::Unavailable(e.to_string())
    }

    fn succeeded(&mut self) {
        if self.failing {
            self.failing = false;
            tracing::info!(path = %self.options.path.display(), "SQLite answers again");
        }
    }
}

/// Opens read-only (no writes, no journal recovery by us), without SQLite's own mutexes (one thread per
/// connection), and checks the statement compiles, which reads the schema and so finds a missing table or a
/// file that is not a database now rather than on the first request.
pub fn open(options: &DbOptions) -> Result<Connection, rusqlite::Error> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(&options.path, flags)?;
    conn.busy_timeout(options.busy_timeout)?;
    conn.pragma_update(None, "mmap_size", options.mmap_size.min(i64::MAX as u64) as i64)?;
    conn.prepare_cached(LOOKUP_SQL)?;
    Ok(conn)
}

/// The row's columns as the contract types them. A column of another storage class is a malformed row (500),
/// not an unusable database: the connection is fine. A REAL duration is truncated, as the peers'
/// `Math.trunc` does; a NULL duration is 0 and NULL views stay null.
fn row_of<'a>(
    channel: ValueRef<'a>,
    duration: ValueRef<'a>,
    views: ValueRef<'a>,
    locales: ValueRef<'a>,
) -> Result<Row<'a>, render::Malformed> {
    let wrong = |column: &str, value: ValueRef<'_>| render::Malformed::column(column, value.data_type());
    Ok(Row {
        channel: match channel {
            ValueRef::Text(text) => Some(std::str::from_utf8(text).map_err(|_| wrong("channel", channel))?),
            ValueRef::Null => None,
            other => return Err(wrong("channel", other)),
        },
        duration_s: match duration {
            ValueRef::Integer(i) => Some(i),
            ValueRef::Real(f) if f.is_finite() => Some(f.trunc() as i64),
            ValueRef::Null => None,
            other => return Err(wrong("duration_s", other)),
        },
        views: match views {
            ValueRef::Integer(i) => Some(i),
            ValueRef::Null => None,
            other => return Err(wrong("views", other)),
        },
        locales: match locales {
            ValueRef::Text(text) => Some(text),
            ValueRef::Null => None, // JSON.parse(null) is null, not an object: malformed, as in the peers
            other => return Err(wrong("locales", other)),
        },
    })
}
