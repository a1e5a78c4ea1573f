//! SQLite access: one read-only connection per worker thread ([`sqlite_reader::Reader`], shared with
//! ladder-rs), its statements prepared once and cached, the lookup run inline on the worker. A connection that
//! failed (missing, corrupt or replaced file, no `videos` table) is dropped and reopened at most every
//! [`sqlite_reader::REOPEN_EVERY`], answering 503 in between.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;
use rusqlite::types::ValueRef;
use sqlite_reader::{Reader, Unavailable};

use crate::render::{self, Row};

const LOOKUP_SQL: &str = "SELECT channel, duration_s, views, locales FROM videos WHERE id = ?1";
const HEALTH_SQL: &str = "SELECT 1 FROM videos LIMIT 1";

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
    reader: Reader,
}

impl Database {
    /// Opens now when it can; when it cannot, the first request that needs it tries again.
    pub fn new(options: DbOptions) -> Database {
        Database { reader: Reader::new(reader_options(options)) }
    }

    pub fn path(&self) -> &Path {
        self.reader.path()
    }

    /// Appends the JSON body for `id` seen from `region` to `out`; `Ok(false)` when there is no such video.
    pub fn lookup(&mut self, id: &str, region: &str, out: &mut Vec<u8>) -> Result<bool, LookupError> {
        let outcome = self.reader.read(|conn| {
            let mut stmt = conn.prepare_cached(LOOKUP_SQL)?;
            let mut rows = stmt.query([id])?;
            let Some(row) = rows.next()? else { return Ok(None) };
            let (channel, duration, views, locales) =
                (row.get_ref(0)?, row.get_ref(1)?, row.get_ref(2)?, row.get_ref(3)?);
            Ok(Some(row_of(channel, duration, views, locales).and_then(|row| render::render(id, region, &row, out))))
        });
        match outcome {
            Ok(None) => Ok(false),
            Ok(Some(Ok(()))) => Ok(true),
            Ok(Some(Err(source))) => Err(LookupError::Malformed { id: id.to_string(), source }),
            Err(Unavailable(e)) => Err(LookupError::Unavailable(e)),
        }
    }

    /// A cheap query that touches the `videos` table, for /healthz.
    pub fn check(&mut self) -> Result<(), LookupError> {
        self.reader
            .read(|conn| conn.prepare_cached(HEALTH_SQL).and_then(|mut stmt| stmt.query([])?.next().map(|_| ())))
            .map_err(|Unavailable(e)| LookupError::Unavailable(e))
    }
}

/// Opens the database as a worker does: read-only, busy timeout and mmap set, the lookup compiled (a missing
/// table or a file that is not a database fails here).
pub fn open(options: &DbOptions) -> Result<Connection, rusqlite::Error> {
    sqlite_reader::open(&reader_options(options.clone()))
}

fn reader_options(options: DbOptions) -> sqlite_reader::Options {
    let DbOptions { path, busy_timeout, mmap_size } = options;
    sqlite_reader::Options { path, busy_timeout, mmap_size, statement: LOOKUP_SQL }
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
