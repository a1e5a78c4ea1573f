//! The SQLite step: one read-only connection per worker thread ([`sqlite_reader::Reader`], shared with
//! metadata-rs), the statement prepared once and cached, the read run inline on the worker. After any SQLite
//! error the connection is dropped and reopened at most every [`sqlite_reader::REOPEN_EVERY`], answering 503
//! in between.

use std::path::PathBuf;
use std::time::Duration;

use rusqlite::types::ValueRef;
use sqlite_reader::{Reader, Unavailable};

pub const VIDEO_SQL: &str = "SELECT channel, duration_s, views FROM videos WHERE id = ?1";

/// `PRAGMA mmap_size`, as metadata-rs and the peers set it.
const MMAP_SIZE: u64 = 256 * 1024 * 1024;

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
    reader: Reader,
}

impl Videos {
    /// Opens now when it can; otherwise the first request that needs it tries again.
    pub fn new(options: DbOptions) -> Videos {
        let DbOptions { path, busy_timeout } = options;
        Videos {
            reader: Reader::new(sqlite_reader::Options {
                path,
                busy_timeout,
                mmap_size: MMAP_SIZE,
                statement: VIDEO_SQL,
            }),
        }
    }

    /// The video `id`, `Ok(None)` when there is none.
    pub fn get(&mut self, id: &str) -> Result<Option<Video>, VideoError> {
        let found = self.reader.read(|conn| {
            let mut stmt = conn.prepare_cached(VIDEO_SQL)?;
            let mut rows = stmt.query([id])?;
            let Some(row) = rows.next()? else { return Ok(None) };
            Ok(Some(video_of(id, row.get_ref(0)?, row.get_ref(1)?, row.get_ref(2)?)))
        });
        found.map_err(|Unavailable(e)| VideoError::Unavailable(e))?.transpose()
    }
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
