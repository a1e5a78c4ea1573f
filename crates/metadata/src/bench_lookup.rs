//! `metadata-rs bench-lookup`: the DB-only benchmark. Times the lookup-and-build step (SQLite point read,
//! locales parse, JSON render) with no HTTP, over the sample ids, exactly as bench/peers/metadata/
//! lookup-bench.mjs does on Bun and Node: the same id and region sequence, the same warmup, the same output
//! line, and a byte count that proves every runtime built the same bodies. With `--inserts N` it then times N
//! single-row inserts into a new file (bench_insert.rs), the post's other half of bun:sqlite against
//! node:sqlite.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::bench_insert::InsertStore;
use crate::db::{Database, DbOptions};
use metadata_dataset::REGIONS;

#[derive(Debug, Clone, clap::Args)]
pub struct BenchLookupArgs {
    #[arg(long, default_value = "metadata.db")]
    pub db: PathBuf,
    /// Sample ids, one per line (from `gen-data`).
    #[arg(long, default_value = "sample_ids.txt")]
    pub ids: PathBuf,
    #[arg(long, default_value_t = 2_000_000)]
    pub iterations: u64,
    /// Untimed iterations first.
    #[arg(long, default_value_t = 200_000)]
    pub warmup: u64,
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    pub mmap_size: u64,
    /// Timed single-row inserts after the lookups, into --insert-db; 0 skips them.
    #[arg(long, default_value_t = 0)]
    pub inserts: u64,
    /// Untimed inserts first, into the same table.
    #[arg(long, default_value_t = 0)]
    pub insert_warmup: u64,
    /// A file that does not exist yet: the insert loop creates it.
    #[arg(long)]
    pub insert_db: Option<PathBuf>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub found: u64,
    pub bytes: u64,
}

/// Runs iterations `from..to` of the shared sequence: id `i mod n`, region shifted by one every pass so each
/// id meets every region.
pub fn run_iterations(db: &mut Database, ids: &[String], from: u64, to: u64) -> Result<Tally, String> {
    let n = ids.len() as u64;
    let mut tally = Tally::default();
    let mut body = Vec::with_capacity(1024);
    for i in from..to {
        let id = &ids[(i % n) as usize];
        let region = REGIONS[((i + i / n) % REGIONS.len() as u64) as usize];
        body.clear();
        match db.lookup(id, region, &mut body) {
            Ok(true) => {
                tally.found += 1;
                tally.bytes += body.len() as u64;
            }
            Ok(false) => tally.bytes += 4, // the 404 body, `null`
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(tally)
}

pub fn main(args: &BenchLookupArgs) -> ! {
    let fail = |message: String| -> ! {
        eprintln!("metadata-rs bench-lookup: {message}");
        std::process::exit(1)
    };
    let text = std::fs::read_to_string(&args.ids).unwrap_or_else(|e| fail(format!("{}: {e}", args.ids.display())));
    let ids: Vec<String> = text.lines().filter(|l| !l.is_empty()).map(str::to_string).collect();
    if ids.is_empty() {
        fail(format!("{} has no ids", args.ids.display()));
    }
    let options =
        DbOptions { path: args.db.clone(), busy_timeout: Duration::from_millis(100), mmap_size: args.mmap_size };
    crate::db::open(&options).unwrap_or_else(|e| fail(format!("{}: {e}", args.db.display())));
    let mut db = Database::new(options);
    run_iterations(&mut db, &ids, 0, args.warmup).unwrap_or_else(|e| fail(e));
    let started = Instant::now();
    let tally = run_iterations(&mut db, &ids, 0, args.iterations).unwrap_or_else(|e| fail(e));
    let seconds = started.elapsed().as_secs_f64();
    let mut line = serde_json::json!({
        "runtime": "rust",
        "version": env!("CARGO_PKG_VERSION"),
        "iterations": args.iterations,
        "seconds": seconds,
        "ops_per_sec": args.iterations as f64 / seconds,
        "found": tally.found,
        "bytes": tally.bytes,
    });
    if args.inserts > 0 {
        let fields = time_inserts(args, &ids).unwrap_or_else(|e| fail(e));
        line.as_object_mut().expect("an object").extend(fields);
    }
    println!("{line}");
    std::process::exit(0)
}

/// The insert loop's fields of the output line: timed inserts, their seconds and rate, and the table read back.
fn time_inserts(args: &BenchLookupArgs, ids: &[String]) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let path = args.insert_db.as_deref().ok_or("--inserts needs --insert-db PATH (a file that does not exist yet)")?;
    let mut store = InsertStore::create(path)?;
    store.insert(ids, 0, args.insert_warmup)?;
    let started = Instant::now();
    store.insert(ids, args.insert_warmup, args.insert_warmup + args.inserts)?;
    let seconds = started.elapsed().as_secs_f64();
    let back = store.read_back()?;
    if back.rows != args.insert_warmup + args.inserts {
        return Err(format!("the table holds {} rows after {} inserts", back.rows, args.insert_warmup + args.inserts));
    }
    let serde_json::Value::Object(fields) = serde_json::json!({
        "inserts": args.inserts,
        "insert_seconds": seconds,
        "inserts_per_sec": args.inserts as f64 / seconds,
        "rows": back.rows,
        "position_sum": back.position_sum,
        "id_chars": back.id_chars,
    }) else {
        unreachable!("a json! object literal")
    };
    Ok(fields)
}
