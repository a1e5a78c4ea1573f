#!/usr/bin/env bash
# Flight hello benchmark: flight-rs (bare and default middleware) vs Bun and Node peers,
# server pinned to core 0 and wrk to core 1. Installs what it needs, then measures.
#   bench/flight-hello.sh                      # 3 rounds of 10 s, results in bench/results/
#   bench/flight-hello.sh --rounds 5 --runtimes rust-bare,bun
#   bench/flight-hello.sh --help               # all flags
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/setup.sh"
exec python3 "$here/flight_hello.py" "$@"
