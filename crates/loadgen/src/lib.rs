//! loadgen: a wrk-class HTTP/1.1 load generator that reports honestly.
//!
//! Threads each run their own event loop (io_uring, or epoll through mio; optionally pinned), own their
//! connections and their HDR histograms, and merge once at the end. Closed loop (like wrk; latency
//! uncorrected) or open loop at a fixed rate (`-R`, latency from each request's intended send time). Every
//! request has a real timer; requests still in flight at the end, connections that were never established,
//! and per-kind socket errors are reported.
//!
//! ```text
//! loadgen -t1 -c64 -d10s --latency http://127.0.0.1:3000/api/hello
//! loadgen -R 20000 -c 128 -d 30s --path '/v1/metadata/{id}?region={region}' --var id=@ids.txt --var region=ja,ko,en URL
//! loadgen merge a.json b.json --json all.json
//! ```

// From the top down: `cli` (clap) parses flags into `settings`, plain values that nothing below `cli` needs clap
// for; `capacity` searches by repeating runs; `run` makes room for the connections (`open_files`), starts the workers
// and follows them (`per_second`); `worker` is one thread's event loop on an `engine` (`uring` or `epoll`, either
// under `tls`, configured by `tls_config`, which gives each worker its `session_store`, and says what each
// `handshake` negotiated) over its connection slots (`conn`), sending what `source` renders at the pace of `rate`
// (`open_loop` keeps the schedule, the sends waiting and the free connections), parsing with `http1` (over HTTP/2,
// `h2`'s sans-I/O client, which holds the connection and re-exports the settings of `h2_settings`, writes requests'
// header blocks with `h2_request`, decodes responses' with `h2_response` (which borrows `h2_request`'s `trim`),
// keeps its streams in `h2_stream`, all of them on `h2_frame`'s frames and `hpack`) and checking `assertions`;
// `worker`'s children `worker::http1` and `worker::http2` are its protocol halves, extending its `State`. `stats`
// is what a worker counts, `report` what a run adds up to, `render` its text, `merge` several reports in one.
// Imports only point down this order, so each module can be read (and tested) without the ones above it.

pub mod assertions;
pub mod capacity;
pub mod cli;
mod conn;
mod engine;
mod epoll;
pub mod h2;
pub mod h2_frame;
mod h2_request;
mod h2_response;
mod h2_settings;
mod h2_stream;
mod handshake;
pub mod hpack;
pub mod http1;
pub mod log_chart;
pub mod merge;
pub mod open_files;
mod open_loop;
mod per_second;
pub mod rate;
pub mod render;
pub mod report;
pub mod request_log;
pub mod run;
mod session_store;
pub mod settings;
pub mod source;
pub mod stats;
pub mod target;
mod timer;
mod tls;
pub mod tls_config;
mod uring;
mod worker;

pub use run::{RunError, failures, run, uring_unavailable};
