//! compare: one command that measures our Rust servers against the Bun and Node peers (and the floor, a
//! server that only writes pre-serialized bytes) per workload, on pinned cores, by these
//! measurement rules: every runtime must answer the probe set exactly as rust does before it is timed;
//! runs are interleaved round by round; server CPU per response comes from /proc over the whole process tree;
//! any non-2xx or socket error voids a run. One JSON record per run is appended to
//! `bench/results/<UTC stamp>/<UTC stamp>-<hostname>.jsonl` (schemas/compare/record.schema.json; one folder
//! per run), and a Markdown summary plus an SVG per workload are written next to it, with the same summary as
//! one self-contained HTML page.
//!
//! How a comparison flows, folder by folder (crates/compare/README.md draws the same map):
//!
//! ```text
//! cli ─► settings            flags parsed once into plain settings (durations, cores, workloads typed)
//!   plan/                     what is measured: workloads, runtimes and how each starts, probes, load
//!   run/                      measuring: dependencies and data, then per workload checks → cold starts →
//!     │                       closed rounds → open tails → capacity / DB-only runs (or a soak), each a
//!     │                       fresh pinned server under loadgen, every record appended as measured
//!     ▼
//!   records                   one JSON line per run: the only thing report reads
//!   verdict, reference        the repeatability rule, and the runtime its ratios are taken against
//!   ledger                    bench/claims.toml: the published claims and the pair, metric and workload of each
//!   report/                   Markdown tables, SVG charts, the HTML page (also `compare report`); the
//!                             verdicts and published claims on top of the rule (`compare verdict`, `claims`)
//!   calibrate/                loadgen against wrk and h2load on the same servers (`compare calibrate`)
//!   images, floor             `compare images`; the floor server (`compare floor`)
//!   export                    runs' figures for another tool: Bencher Metric Format (`compare export`)
//!   budget/                   the performance gate: instructions and syscalls per response against
//!                             bench/budget.toml (`compare budget`)
//!   system/                   processes and their groups, /proc, core lists, a raw HTTP client
//! ```
//!
//! Imports point one way, down this order, with no cycle (modules on one line import neither other):
//! `cli`; `budget`, `calibrate`, `images`, `export`; `run`; `report`; `ledger`; `verdict`; `reference`; `format`,
//! `measure_flags`, `settings`; `plan`, `stats`; `records`; `provenance`, `system`, `table`, `floor`. So nothing
//! imports cli, run renders the report when it ends, report reads records (and asks plan's workload type) but
//! never run, and plan knows nothing of run or report. tests/tests/imports.rs checks the order against the
//! source.
//!
//! ```text
//! bash bench/setup.sh && bash scripts/install-test-deps.sh
//! target/release/compare --quick                       # a smoke run of every workload
//! target/release/compare --workloads hello-bare,metadata --runtimes rust,bun
//! target/release/compare report bench/results/*/*.jsonl  # re-render the summary
//! ```

pub mod budget;
pub mod calibrate;
pub mod cli;
pub mod export;
pub mod floor;
pub mod format;
pub mod images;
pub mod ledger;
pub mod measure_flags;
pub mod plan;
pub mod provenance;
pub mod records;
pub mod reference;
pub mod report;
pub mod run;
pub mod settings;
pub mod stats;
pub mod system;
pub mod table;
pub mod verdict;
