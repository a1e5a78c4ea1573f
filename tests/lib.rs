//! End-to-end tests across servers and runtimes live in `tests/*.rs`; this crate hosts them as a workspace
//! member. Shared helpers go in `tests/support/`.
