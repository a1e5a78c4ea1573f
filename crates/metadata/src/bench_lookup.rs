//! `metadata-rs bench-lookup`: the DB-only benchmark. Times the lookup-and-build step (SQLite point read,
//! locales parse, JSON render) with no HTTP, over the sample ids, exactly as bench/peers/metadata/
//! lookup-bench.mjs does on Bun and Node: the same id and region sequence, the same warmup, the same output
//! line, and a byte count that proves every runtime built the same bodies.

use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    let line = serde_json::json!({
        "runtime": "rust",
        "version": env!("CARGO_PKG_VERSION"),
        "iterations": args.iterations,
        "seconds": seconds,
        "ops_per_sec": args.iterations as f64 / seconds,
        "found": tally.found,
        "bytes": tally.bytes,
    });
    println!("{line}");
    std::process::exit(0)
}
