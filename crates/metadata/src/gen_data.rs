//! `metadata-rs gen-data`: the command line around [metadata_dataset], which writes the dataset. The generator
//! lives in its own crate so compare and the tests can call it without linking this server.

use std::io::Write;
use std::time::Instant;

use metadata_dataset::{GenDataArgs, run};

/// Runs `gen-data` from the command line: one summary line on success, one error line and exit 1 on failure.
pub fn main(args: &GenDataArgs) -> ! {
    let started = Instant::now();
    match run(args) {
        Ok(g) => {
            let size = std::fs::metadata(&args.db).map(|m| m.len()).unwrap_or(0);
            println!(
                "wrote {} rows to {} ({:.1} MiB) and {} sample ids ({} absent) to {} in {:.2} s (seed {})",
                g.rows,
                args.db.display(),
                size as f64 / 1048576.0,
                g.samples,
                g.absent,
                args.ids.display(),
                started.elapsed().as_secs_f64(),
                args.seed
            );
            let _ = std::io::stdout().flush();
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("metadata-rs gen-data: {e}");
            std::process::exit(1)
        }
    }
}
