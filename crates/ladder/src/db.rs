//! The SQLite step: one read-only connection per worker thread, the statement prepared once and cached, the
//! read run inline on the worker (a primary-key read takes microseconds, less than a hop to a blocking pool).
//! The same approach as metadata-rs: the busy timeout bounds a wait on a writer's lock, and after any SQLite
//! error the connection is dropped and reopened at most every [`REOPEN_EVERY`], answering 503 in between.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

pub const VIDEO_SQL: &str = "SELECT channel, duration_s, views FROM videos WHERE id = ?1";

/// How often a worker retries opening a database that failed.
pub const REOPEN_EVERY: Duration = Duration::from_millis(250);

/// `PRAGMA mmap_size`, as metadata-rs and the peers set it.
const MMAP_SIZE: i64 = 256 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct DbOptions {
    pub path: PathBuf,
    pub busy_timeout: Duration,
}

/// The row's columns as the response carries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Video {
    pub channel: Option<String>,
    pub duration_s: Option<i64>,
    pub views: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum VideoError {
    /// Missing or unusable file, no `videos` table, locked: 503 with Retry-After.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The row exists but a column has a type the contract does not carry (a REAL count, a BLOB channel): 500.
    #[error("row {id:?}: column {column} holds {kind}")]
    Malformed { id: String, column: &'static str, kind: &'static str },
}

/// One worker's connection. Not `Sync`: each worker thread owns one.
pub struct Videos {
    options: DbOptions,
    conn: Option<Connection>,
    last_open: Option<Instant>,
    /// Whether the last outcome was a failure, so an outage and the recovery are each logged once.
    failing: bool,
}

impl Videos {
    /// Opens now when it can; otherwise the first request that needs it tries again.
    pub fn new(options: DbOptions) -> Videos {
        let mut videos = Videos { options, conn: None, last_open: None, failing: false };
        if let Err(e) = videos.ensure_open() {
            videos.failed(&e);
        }
        videos
    }

    /// The video `id`, `Ok(None)` when there is none.
    pub fn get(&mut self, id: &str) -> Result<Option<Video>, VideoError> {
        if let Err(e) = self.ensure_open() {
            return Err(self.failed(&e));
        }
        let Some(conn) = &self.conn else { return Err(VideoError::Unavailable("not open".to_string())) };
        let outcome = (|| {
            let mut stmt = conn.prepare_cached(VIDEO_SQL)?;
            let mut rows = stmt.query([id])?;
            let Some(row) = rows.next()? else { return Ok(None) };
            Ok(Some(video_of(id, row.get_ref(0)?, row.get_ref(1)?, row.get_ref(2)?)))
        })();
        match outcome {
            Ok(found) => {
                self.succeeded();
                found.transpose()
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

    /// Drops the connection (the next attempt reopens it) and logs the first failure of a run.
    fn failed(&mut self, e: &rusqlite::Error) -> VideoError {
        self.conn = None;
        if !self.failing {
            self.failing = true;
            tracing::warn!(path = %self.options.path.display(), error = %e, "SQLite unavailable; answering 503");
        }
        VideoError::Unavailable(e.to_string())
    }

    fn succeeded(&mut self) {
        if self.failing {
            self.failing = false;
            tracing::info!(path = %self.options.path.display(), "SQLite answers again");
        }
    }
}

/// Read-only, no SQLite mutexes (one thread per connection), and the statement compiled now, which reads the
/// schema: a missing table or a file that is not a database fails here rather than on the first request.
pub fn open(options: &DbOptions) -> Result<Connection, rusqlite::Error> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(&options.path, flags)?;
    conn.busy_timeout(options.busy_timeout)?;
    conn.pragma_update(None, "mmap_size", MMAP_SIZE)?;
    conn.prepare_cached(VIDEO_SQL)?;
    Ok(conn)
}

/// TEXT or NULL channel, INTEGER or NULL counts (the peers check the same: a string or null, an integer or
/// null); anything else is a malformed row.
fn video_of(id: &str, channel: ValueRef<'_>, duration: ValueRef<'_>, views: ValueRef<'_>) -> Result<Video, VideoError> {
    let malformed = |column, value: ValueRef<'_>| VideoError::Malformed {
        id: id.to_string(),
        column,
        kind: match value.data_type() {
            rusqlite::types::Type::Null => "NULL",
            rusqlite::types::Type::Integer => "INTEGER",
            rusqlite::types::Type::Real => "REAL",
            rusqlite::types::Type::Text => "TEXT",
            rusqlite::types::Type::Blob => "BLOB",
        },
    };
    let integer = |column, value: ValueRef<'_>| match value {
        ValueRef::Integer(i) => Ok(Some(i)),
        ValueRef::Null => Ok(None),
        other => Err(malformed(column, other)),
    };
    Ok(Video {
        channel: match channel {
            ValueRef::Text(text) => {
                Some(std::str::from_utf8(text).map_err(|_| malformed("channel", channel))?.to_string())
            }
            ValueRef::Null => None,
            other => return Err(malformed("channel", other)),
        },
        duration_s: integer("duration_s", duration)?,
        views: integer("views", views)?,
    })
}
