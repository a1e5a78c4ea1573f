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
echo "== build"
# One build of every target before any test runs: the tests that start a workspace binary as a child process
# take the one cargo built here (testkit::workspace::binary fails on a binary older than its sources), and no
# test runs cargo itself, so none waits on the cargo lock.
cargo build --workspace --all-targets --locked
echo "== tests"
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
