//! The dataset generator: deterministic, the promised shape, and careful with existing files.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use metadata_dataset::{GenDataArgs, Generated};
use serde_json::Value;

/// A generated dataset in its own temp dir.
struct Dataset {
    dir: tempfile::TempDir,
    generated: Generated,
}

impl Dataset {
    fn generate(rows: u64, samples: u64, seed: u64) -> Dataset {
        let dir = tempfile::tempdir().expect("temp dir");
        let generated = metadata_dataset::run(&GenDataArgs::in_dir(dir.path(), rows, samples, seed)).expect("gen-data");
        Dataset { dir, generated }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("metadata.db")
    }

    fn sample_ids(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("sample_ids.txt"))
            .expect("sample ids")
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn open_rw(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.db()).expect("open read-write")
    }
}

fn digest(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("read")
}

#[test]
fn same_seed_same_files_other_seed_other_data() {
    let a = Dataset::generate(500, 300, 42);
    let b = Dataset::generate(500, 300, 42);
    let c = Dataset::generate(500, 300, 43);
    assert_eq!(a.generated, b.generated);
    assert!(digest(&a.db()) == digest(&b.db()), "same seed: byte-identical SQLite files");
    assert_eq!(a.sample_ids(), b.sample_ids(), "same seed: same sample ids");
    assert_ne!(a.sample_ids(), c.sample_ids(), "another seed: other ids");
    let dump = |d: &Dataset| -> Vec<(String, String)> {
        let conn = d.open_rw();
        let mut stmt = conn.prepare("SELECT id, locales FROM videos ORDER BY id").expect("prepare");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).expect("query").map(|r| r.expect("row")).collect()
    };
    assert_eq!(dump(&a), dump(&b));
    assert_ne!(dump(&a), dump(&c));
}

#[test]
fn rows_look_like_the_contract_says() {
    let data = Dataset::generate(2000, 2000, 1);
    let conn = data.open_rw();
    assert_eq!(conn.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0)).expect("mode"), "wal");
    let mut stmt = conn.prepare("SELECT id, channel, duration_s, views, locales FROM videos").expect("prepare");
    let rows: Vec<(String, String, i64, i64, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    assert_eq!(rows.len(), 2000);
    let mut regions_seen = HashSet::new();
    let (mut trending, mut long, mut non_ascii_titles) = (0, 0, 0);
    for (id, channel, duration, views, locales) in &rows {
        assert_eq!(id.len(), 11, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{id}");
        assert!(!channel.is_empty());
        assert!(*duration >= 0 && *views >= 0);
        let locales: Value = serde_json::from_str(locales).expect("locales JSON");
        let map = locales.as_object().expect("an object");
        assert!(map.contains_key("en"), "{id}: en is always there");
        for (region, locale) in map {
            assert!(["en", "ja", "ko", "zh-TW", "th"].contains(&region.as_str()), "{region}");
            assert!(locale["title"].is_string() && locale["description"].is_string(), "{id} {region}");
            if region != "en" && locale["title"].as_str().is_some_and(|t| !t.is_ascii()) {
                non_ascii_titles += 1;
            }
            regions_seen.insert(region.clone());
        }
        trending += (*views > 500_000) as usize;
        long += (*duration >= 3600) as usize;
    }
    assert_eq!(regions_seen.len(), 5, "every region appears: {regions_seen:?}");
    assert!((300..=800).contains(&trending), "about a quarter above the trending line: {trending}");
    assert!(long > 50, "some videos run past an hour: {long}");
    assert!(non_ascii_titles > 1000, "localized titles are in their scripts: {non_ascii_titles}");

    let present: HashSet<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    let samples = data.sample_ids();
    let absent = samples.iter().filter(|id| !present.contains(id.as_str())).count();
    assert_eq!(absent as u64, data.generated.absent, "the summary counts the absent ids");
    assert!((5..=45).contains(&absent), "about 1% of 2000 samples are absent: {absent}");
}

#[test]
fn refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().expect("dir");
    let args = GenDataArgs::in_dir(dir.path(), 10, 10, 1);
    metadata_dataset::run(&args).expect("first run");
    let err = metadata_dataset::run(&args).expect_err("second run without --force");
    assert!(err.to_string().contains("--force"), "{err}");
    let forced = metadata_dataset::GenDataArgs { force: true, rows: 20, ..args.clone() };
    metadata_dataset::run(&forced).expect("with --force");
    let conn = rusqlite::Connection::open(&args.db).expect("open");
    assert_eq!(conn.query_row("SELECT count(*) FROM videos", [], |r| r.get::<_, i64>(0)).expect("count"), 20);
    let bad = metadata_dataset::GenDataArgs { absent_percent: 101.0, force: true, ..args };
    assert!(metadata_dataset::run(&bad).is_err(), "absent share over 100%");
}
