//! loadgen: a wrk-class HTTP/1.1 and HTTP/2 load generator that reports honestly.
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

// The modules in layers, top down; each imports only modules of the layers below it (modules on one line import
// neither other), so each can be read and tested without the ones above it. tests/tests/imports.rs (the
// workspace's e2e package) checks this order against the source.
//   cli, capacity            clap's flags into `settings`; `capacity` searches by repeating runs
//   run                      room for the connections (`open_files`), the workers started and followed
//   per_second               the once-a-second figures, read from the workers
//   worker                   one thread's event loop (its `http1` and `http2` children are the protocol halves)
//   conn, open_loop, tls,    a connection slot; the open loop's schedule and waiting sends; TLS as an engine
//     assertions             over either engine; the checks every response gets
//   h2, tls_config, epoll,   HTTP/2's sans-I/O client; the rustls config; the two engines; the requests
//     uring, source
//   h2_response, h2_settings, h2_stream, engine, session_store, timer
//   h2_request               (h2_response borrows its `trim`)
//   h2_frame, hpack, http1   the frame layer, HPACK, HTTP/1.1 framing
//   log_chart, merge,        the request log's chart; several reports in one; the HDR interval log
//     hdr_log
//   render                   a report's text
//   report                   what a run adds up to
//   stats                    what a worker counts
//   settings                 the plain values a run is made of
//   rate, target, handshake, request_log, open_files    leaves

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
mod hdr_log;
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

pub use hdr_log::HdrLogError;
pub use per_second::JsonlError;
pub use run::{RunError, failures, run, uring_unavailable};
