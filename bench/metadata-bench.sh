#!/usr/bin/env bash
# Video-metadata benchmark: metadata-rs vs its Bun and Node peers (bench/peers/metadata) over one
# generated SQLite database: closed-loop load, open-loop tails, DB-only lookups, startup and RSS,
# after a byte-for-byte check of every runtime's answers. Server pinned to core 0, loadgen to core 1.
# Installs what it needs (bench/setup.sh), then measures.
#   bench/metadata-bench.sh                               # 3 rounds of 10 s, results in bench/results/
#   bench/metadata-bench.sh --quick                       # smoke test: 1 round of 2 s on 20000 rows
#   bench/metadata-bench.sh --rounds 5 --runtimes rust,bun
#   bench/metadata-bench.sh --help                        # all flags
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/setup.sh"
exec python3 "$here/metadata_bench.py" "$@"
