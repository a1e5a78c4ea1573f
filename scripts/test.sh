#!/usr/bin/env bash
# The test command (README, and .ci/run): installs what tests need, then format check, clippy with
# warnings as errors, and every test in the workspace (debug build; real redis-server, real sockets).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-test-deps.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
  # nextest does not run doctests.
  cargo test --workspace --locked --doc
else
  cargo test --workspace --locked --no-fail-fast
fi
echo "== all tests passed"
