//! The insert half of the DB-only benchmark (`metadata-rs bench-lookup --inserts N --insert-db PATH`): N
//! single-row INSERTs, each its own autocommit transaction, through one prepared statement into a fresh file,
//! exactly as bench/peers/metadata/lookup-bench.mjs does on bun:sqlite and node:sqlite. The rows follow the
//! lookup loop's id and region sequence, and a read-back of the table proves every runtime wrote the same rows.
//!
//! The file is in WAL mode with `synchronous = OFF`: an fsync per commit would time the disk, not the binding,
//! and the three runtimes share the disk. What is timed is the binding's bind-step-reset and SQLite's own
//! transaction and page work.

use std::path::Path;

use metadata_dataset::REGIONS;
use rusqlite::Connection;

/// The statements, byte for byte those of lookup-bench.mjs.
pub const PRAGMAS: [&str; 2] = ["PRAGMA journal_mode = WAL", "PRAGMA synchronous = OFF"];
pub const CREATE_SQL: &str = "CREATE TABLE plays (id INTEGER PRIMARY KEY, video_id TEXT NOT NULL, region TEXT NOT NULL, position_ms INTEGER NOT NULL)";
pub const INSERT_SQL: &str = "INSERT INTO plays (video_id, region, position_ms) VALUES (?, ?, ?)";
pub const READ_BACK_SQL: &str = "SELECT count(*) AS rows, coalesce(sum(position_ms), 0) AS position_sum, \
                                  coalesce(sum(length(video_id)), 0) AS id_chars FROM plays";

/// What the table holds after the loop: rows, and two sums that differ when any row's values do.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadBack {
    pub rows: u64,
    pub position_sum: u64,
    pub id_chars: u64,
}

/// The insert file: a new database (an existing file is refused, so no run appends to another's rows), its
/// pragmas set, the table created and the insert prepared once.
pub struct InsertStore {
    conn: Connection,
}

impl InsertStore {
    pub fn create(path: &Path) -> Result<InsertStore, String> {
        if path.exists() {
            return Err(format!("{} exists: the insert loop starts from a new file", path.display()));
        }
        let conn = Connection::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        for pragma in PRAGMAS {
            // journal_mode answers with a row; query it rather than execute.
            conn.query_row(pragma, [], |_| Ok(())).or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(()),
                e => Err(format!("{pragma}: {e}")),
            })?;
        }
        conn.execute(CREATE_SQL, []).map_err(|e| format!("creating the plays table: {e}"))?;
        conn.prepare_cached(INSERT_SQL).map_err(|e| format!("preparing the insert: {e}"))?;
        Ok(InsertStore { conn })
    }

    /// Inserts rows `from..to` of the shared sequence: row i is (ids[i mod n], the lookup loop's region for i,
    /// i × 7919 mod 3,600,000).
    pub fn insert(&mut self, ids: &[String], from: u64, to: u64) -> Result<(), String> {
        let n = ids.len() as u64;
        let mut stmt = self.conn.prepare_cached(INSERT_SQL).map_err(|e| e.to_string())?;
        for i in from..to {
            let id = &ids[(i % n) as usize];
            let region = REGIONS[((i + i / n) % REGIONS.len() as u64) as usize];
            let position_ms = (i * 7919 % 3_600_000) as i64;
            stmt.execute(rusqlite::params![id, region, position_ms]).map_err(|e| format!("insert {i}: {e}"))?;
        }
        Ok(())
    }

    pub fn read_back(&self) -> Result<ReadBack, String> {
        self.conn
            .query_row(READ_BACK_SQL, [], |row| {
                // Counts and sums of non-negative values: SQLite's i64 always fits.
                let count = |i: usize| row.get::<_, i64>(i).map(|v| v as u64);
                Ok(ReadBack { rows: count(0)?, position_sum: count(1)?, id_chars: count(2)? })
            })
            .map_err(|e| format!("reading the plays table back: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_follow_the_sequence_and_a_used_file_is_refused() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("plays.db");
        let ids: Vec<String> = ["a", "bb", "ccc"].iter().map(|s| s.to_string()).collect();
        let mut store = InsertStore::create(&path).expect("a new file");
        store.insert(&ids, 0, 2).expect("inserts");
        store.insert(&ids, 2, 7).expect("inserts");
        // ids a, bb, ccc, a, bb, ccc, a: 1+2+3+1+2+3+1 characters; positions 7919·i for i < 7.
        let want = ReadBack { rows: 7, position_sum: 7919 * 21, id_chars: 13 };
        assert_eq!(store.read_back().expect("read back"), want);
        let journal: String = store.conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).expect("journal mode");
        assert_eq!(journal, "wal");
        drop(store);
        let refused = InsertStore::create(&path).err().expect("refused");
        assert!(refused.contains("exists: the insert loop starts from a new file"), "{refused}");
    }
}
