#!/usr/bin/env bash
# loadgen capacity, reproduced: metadata-rs (SQLite + Redis cache, one worker on core 0) searched N times in a
# row for the highest open-loop rate with p99 within an objective, loadgen on core 1 with Redis; each search's
# JSON and a Markdown summary go to bench/results/<UTC stamp>/<UTC stamp>-<host>-capacity.{md,json}.
#   bash bench/capacity.sh                   # 3 searches at p99 <= 10ms, 128 connections
#   P99=5ms RUNS=5 CONNECTIONS=64 bash bench/capacity.sh
#   REDIS=0 bash bench/capacity.sh           # SQLite only: no cache, so no cache entries expiring mid-search
#   WARM=0 bash bench/capacity.sh            # no closed-loop warm-up before the first search
# Uses the release builds (bench/setup.sh builds them) and redis-server (scripts/install-test-deps.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
bin="${CARGO_TARGET_DIR:-$repo/target}/release"
p99="${P99:-10ms}"
runs="${RUNS:-3}"
connections="${CONNECTIONS:-128}"
redis="${REDIS:-1}"
# A fresh SQLite file is read from disk and faulted into the page cache over the first minute of load; a
# search that starts cold measures that warm-up, not the server (seen here: 15k req/s at first, 23k after).
warm="${WARM:-30s}"
server_core="${SERVER_CORE:-0}"
loader_core="${LOADER_CORE:-1}"
for b in metadata-rs loadgen; do
  [ -x "$bin/$b" ] || { echo "capacity: $bin/$b missing: run bash bench/setup.sh" >&2; exit 2; }
done
command -v redis-server >/dev/null || { echo "capacity: redis-server missing: run bash scripts/install-test-deps.sh" >&2; exit 2; }

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
redis_port="$(free_port)"
port="$(free_port)"

"$bin/metadata-rs" gen-data --db "$work/metadata.db" --ids "$work/ids.txt" >/dev/null
cache=()
if [ "$redis" = 1 ]; then
  taskset -c "$loader_core" redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
    --daemonize no >"$work/redis.log" 2>&1 &
  pids+=($!)
  cache=(--redis-url "redis://127.0.0.1:$redis_port/0")
fi
taskset -c "$server_core" "$bin/metadata-rs" --port "$port" --hostname 127.0.0.1 --db "$work/metadata.db" \
  "${cache[@]}" >"$work/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null || { echo "capacity: metadata-rs did not answer /healthz" >&2; cat "$work/server.log" >&2; exit 1; }

if [ "$warm" != 0 ]; then
  taskset -c "$loader_core" "$bin/loadgen" -c "$connections" -d "$warm" --pin "$loader_core" --no-progress \
    --path '/v1/metadata/{id}?region={region}' --var "id=@$work/ids.txt" --var 'region=ja,ko,zh-TW,en,th' \
    --expect-status 200,404 "http://127.0.0.1:$port/" >"$work/warm.txt"
fi

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$repo/bench/results/$stamp"
out="$repo/bench/results/$stamp/$stamp-$(hostname)-capacity"
{
  echo "# loadgen capacity on metadata-rs"
  echo
  echo "- command: \`P99=$p99 RUNS=$runs CONNECTIONS=$connections REDIS=$redis bash bench/capacity.sh\` at $(git -C "$repo" rev-parse --short HEAD)"
  if [ "$redis" = 1 ]; then cached="with its Redis cache (redis-server on core $loader_core, TTL 60 s)"; else cached="SQLite only, no cache"; fi
  echo "- machine: $(nproc) CPUs, $(uname -r); metadata-rs (one worker, $cached) on core $server_core, loadgen on core $loader_core"
  echo "- before the searches: $warm of closed-loop load on the same requests (WARM=0 skips it): $(grep -m1 Requests/sec "$work/warm.txt" 2>/dev/null || echo none)"
  echo "- load: GET /v1/metadata/{id}?region={region}, ids from gen-data's sample (1% absent: 404 allowed), regions ja,ko,zh-TW,en,th, $connections connections"
  echo
  echo "| search | capacity req/s | steps | highest pass | lowest failure | loader-bound |"
  echo "|---|---|---|---|---|---|"
} >"$out.md"
jsons=()
for i in $(seq "$runs"); do
  json="$work/search-$i.json"
  taskset -c "$loader_core" "$bin/loadgen" capacity --p99 "$p99" -c "$connections" --pin "$loader_core" --no-progress \
    --path '/v1/metadata/{id}?region={region}' --var "id=@$work/ids.txt" --var 'region=ja,ko,zh-TW,en,th' \
    --expect-status 200,404 --json "$json" "http://127.0.0.1:$port/" | tee "$work/search-$i.txt" >&2 || true
  jsons+=("$json")
  python3 - "$json" "$i" >>"$out.md" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
steps = c["steps"]
# A retried step's verdict is decided by its retry (the next step, same rate).
passes = [s["rate"] for s in steps if s["verdict"] == "pass" and not s.get("retried")]
fails = [s["rate"] for s in steps if s["verdict"] == "fail" and not s.get("retried")]
fmt = lambda v: f"{v:.0f}" if v is not None else "–"
cap = c["capacity_rps"]
print(f"| {sys.argv[2]} | {fmt(cap) if cap else 'none'} | {len(steps)} | {fmt(max(passes) if passes else None)} | "
      f"{fmt(min(fails) if fails else None)} | {'yes' if c['loader_bound'] else 'no'} |")
EOF
done
python3 - "${jsons[@]}" >>"$out.md" <<'EOF'
import json, sys
caps = [json.load(open(p))["capacity_rps"] for p in sys.argv[1:]]
caps = [c for c in caps if c]
if caps:
    lo, hi = min(caps), max(caps)
    print(f"\nSpread: {lo:.0f}–{hi:.0f} req/s, (max − min) ÷ min = {100 * (hi - lo) / lo:.1f}%.")
runs = [json.load(open(p)) for p in sys.argv[1:]]
print("\nEvery step of every search:\n")
print("| search | step | rate asked | achieved | p50 µs | p99 µs | p99.9 µs | errors | loader busy % | verdict |")
print("|---|---|---|---|---|---|---|---|---|---|")
for i, c in enumerate(runs, 1):
    for j, s in enumerate(c["steps"], 1):
        print(f"| {i} | {j} | {s['rate']:.0f} | {s['achieved_rps']:.0f} | {s['p50_us']} | {s['p99_us']} | "
              f"{s['p99_9_us']} | {s['errors']} | {s['loader_busy_pct']:.0f} | {s['verdict']}{' (retried)' if s.get('retried') else ''} |")
json.dump(runs, open(sys.argv[1].rsplit("/", 1)[0] + "/all.json", "w"), indent=1)
EOF
cp "$work/all.json" "$out.json"
cat "$out.md"
echo "capacity: wrote $out.md and $out.json" >&2
