#!/usr/bin/env bash
# Scribe notes benchmark: scribe-rs vs the Scribe Bun and Node peers (shipped and fixed variants),
# reads (GET /notes/1 after seeding 1000 notes) and writes (POST /notes), on a PostgreSQL and Redis
# the script starts itself. Server pinned to core 0; loadgen, PostgreSQL and Redis to core 1.
# Installs what it needs (bench/setup.sh, plus PostgreSQL and Redis from apt), then measures.
#   bench/notes-bench.sh                                   # 3 rounds of 10 s, results in bench/results/
#   bench/notes-bench.sh --rounds 5 --runtimes rust,bun-fixed,bun-shipped --scenarios read
#   bench/notes-bench.sh --help                            # all flags
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/setup.sh"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
need=()
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || command -v postgres >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
if [ "${#need[@]}" -gt 0 ]; then
  echo "notes-bench: apt-get install ${need[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
# Debian's postgresql package starts a cluster of its own; the benchmark never uses it (it runs its
# own on a free port), so it is left as it is.
exec python3 "$here/notes_bench.py" "$@"
