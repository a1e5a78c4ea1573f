//! End-to-end tests live in `tests/*.rs`; this crate exists to host them as a workspace member.
