#!/usr/bin/env bash
# The main job: rust vs Bun vs Node (and the floor server) on every workload, pinned, with its own PostgreSQL
# and Redis. Installs what it needs first (bench/setup.sh: wrk, the pinned Bun and Node peers, the release
# builds; scripts/install-test-deps.sh: PostgreSQL, redis-server, setpriv), then runs target/release/compare.
#   bash bench/compare.sh                       # every workload: 3 rounds of 10 s per cell, about 2 h
#   bash bench/compare.sh --full                # the published method: 10 s warmup, 3 x 20 s per cell
#   bash bench/compare.sh --quick               # a smoke run of a few minutes
#   bash bench/compare.sh --workloads metadata --runtimes rust,bun
#   bash bench/compare.sh --help                # every flag
# Results: bench/results/<UTC time>/<UTC time>-<host>.{jsonl,md,html} and one SVG per workload.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
"$here/setup.sh"
"$repo/scripts/install-test-deps.sh"
exec "${CARGO_TARGET_DIR:-$repo/target}/release/compare" --repo "$repo" "$@"
