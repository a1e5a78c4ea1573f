#!/usr/bin/env bash
# The test command (README, and .ci/run): installs what tests need, then format check, clippy with
# warnings as errors, every test in the workspace (debug build; real redis-server, PostgreSQL, sockets), and a
# bounded fuzzing run of every fuzz target.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-test-deps.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== tests"
# Some end-to-end tests run `cargo build` for the binaries they start (so a stale binary is never what
# passes). Each package selection has its own feature set, so build those exact selections here, before the
# tests run in parallel: inside a test, a cold build would hold the cargo lock for minutes and time out others.
cargo build --locked --quiet --bins -p flight -p scribe -p metadata -p ladder   # tests/tests/hardening.rs
cargo build --locked --quiet -p flight --bin flight-rs                          # tests/tests/middleware_promises.rs
cargo build --locked --quiet -p loadgen -p probe                                # tests/tests/compose.rs
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
  # nextest does not run doctests.
  cargo test --workspace --locked --doc
else
  cargo test --workspace --locked --no-fail-fast
fi
# Coverage-guided fuzzing, bounded: 20 s per target here (FUZZ_SECONDS to change; longer by hand with
# `bash scripts/fuzz.sh 600`). A crash fails the run and prints the input and how to reproduce it.
echo "== fuzz"
bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
echo "== all tests passed"
