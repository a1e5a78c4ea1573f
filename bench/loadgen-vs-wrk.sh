#!/usr/bin/env bash
# loadgen vs wrk: loader CPU efficiency against flight-rs bare (A), req/s agreement against the
# server-bound Node peer (B) and loadgen's RSS over a long run (C). Server pinned to core 0, loaders
# to core 1. Installs and builds what it needs (bench/setup.sh), then measures.
#   bench/loadgen-vs-wrk.sh                          # 5 rounds of 10 s, 60 s memory run, results in bench/results/
#   bench/loadgen-vs-wrk.sh --rounds 3 --skip-memory
#   bench/loadgen-vs-wrk.sh --help                   # all flags
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/setup.sh"
exec python3 "$here/loadgen_vs_wrk.py" "$@"
