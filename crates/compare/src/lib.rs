//! compare: one command that measures our Rust servers against the Bun and Node peers (and the floor, a
//! server that only writes pre-serialized bytes) per workload, on pinned cores, by these
//! measurement rules: every runtime must answer the probe set exactly as rust does before it is timed;
//! runs are interleaved round by round; server CPU per response comes from /proc over the whole process tree;
//! any non-2xx or socket error voids a run. One JSON record per run is appended to
//! `bench/results/<UTC stamp>-<hostname>.jsonl` (schemas/compare/record.schema.json), and a Markdown summary
//! plus an SVG per workload are written next to it, with the same summary as one self-contained HTML page.
//!
//! ```text
//! bash bench/setup.sh && bash scripts/install-test-deps.sh
//! target/release/compare --quick                       # a smoke run of every workload
//! target/release/compare --workloads hello-bare,metadata --runtimes rust,bun
//! target/release/compare report bench/results/*.jsonl  # re-render the summary
//! ```

pub mod agreement;
pub mod bench;
pub mod calibrate;
pub mod calibration;
pub mod capacity;
pub mod cells;
pub mod charts;
pub mod cli;
pub mod costs;
pub mod deps;
pub mod floor;
pub mod format;
pub mod html;
pub mod http;
pub mod images;
pub mod loader;
pub mod lookups;
pub mod measure;
pub mod process;
pub mod procfs;
pub mod progress;
pub mod records;
pub mod report;
pub mod run;
pub mod runtimes;
pub mod seeds;
pub mod server;
pub mod settings;
pub mod site;
pub mod soak;
pub mod stats;
pub mod stored;
pub mod target;
pub mod workloads;
pub mod wrk;
