//! End-to-end tests across servers and runtimes live in `tests/*.rs`; this crate hosts them as a workspace
//! member. What they share (the raw HTTP client, the binaries under test, child processes, polling) is in the
//! `testkit` crate.
