//! The generated metadata dataset as the probes and the load use it: its files and the sample ids that are and
//! are not in it.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The generated metadata dataset and the sample ids the probes use.
#[derive(Debug, Clone)]
pub struct MetadataData {
    pub db: PathBuf,
    pub ids: PathBuf,
    /// The first 20 sample ids (present or not: every runtime must answer them alike).
    pub first_ids: Vec<String>,
    /// The first sample id in the table: the ready path and the floor's body.
    pub first_present: String,
    /// An id not in the table.
    pub absent: String,
}

impl MetadataData {
    pub fn load(db: &Path, ids: &Path) -> anyhow::Result<MetadataData> {
        let text = std::fs::read_to_string(ids).with_context(|| format!("reading {}", ids.display()))?;
        let sample: Vec<String> = text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
        let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("opening {}", db.display()))?;
        let mut stmt = conn.prepare("SELECT 1 FROM videos WHERE id = ?1")?;
        let mut first_present = None;
        let mut absent = None;
        for id in sample.iter().take(1000) {
            let present = stmt.exists([id])?;
            if present && first_present.is_none() {
                first_present = Some(id.clone());
            }
            if !present && absent.is_none() {
                absent = Some(id.clone());
            }
            if first_present.is_some() && absent.is_some() {
                break;
            }
        }
        let Some(first_present) = first_present else {
            bail!("none of the first sample ids in {} is in {}", ids.display(), db.display())
        };
        // Generated ids are 11 characters; this one cannot be among them.
        let absent = absent.unwrap_or_else(|| "absent-id-not-in-db".into());
        Ok(MetadataData {
            db: db.to_path_buf(),
            ids: ids.to_path_buf(),
            first_ids: sample.into_iter().take(20).collect(),
            first_present,
            absent,
        })
    }
}
