#!/usr/bin/env bash
# A runtime comparison inside compose, run by the bench profile's loadgen service (docker-compose.yml):
#
#   docker compose --profile bench run --rm loadgen
#
# Waits until every server answers /healthz, creates one note in each notes server, then loads each server in
# turn with the same loadgen settings. BENCH_ROUNDS rounds, each visiting every server once, so slow drift
# (other tenants, thermal) hits every server alike. Writes loadgen's JSON and text report of every run, a TSV
# of all runs and the summary table to $BENCH_REPORTS/<UTC time>/, and prints the table (medians over rounds).
#
# Settings (env, defaults in brackets): BENCH_DURATION [10s] measured per run, BENCH_WARMUP [3s] discarded
# before it, BENCH_ROUNDS [3], BENCH_CONNECTIONS [100], BENCH_THREADS [1] loader threads, BENCH_REPORTS
# [/reports], BENCH_METADATA_IDS [/data/sample_ids.txt] (metadata-seed's sample ids), BENCH_TARGETS (lines of
# `workload server base-url`; default: the compose services below).
#
# This is a smoke-sized comparison of the composed services. The measurement of record is `bash bench/compare.sh`
# on a host: it also checks identical answers, records server CPU per response, RSS and startup, and runs
# the open loop. Needs bash (its /dev/tcp), sed, awk, and loadgen and probe on PATH (the loadgen image has all).
set -euo pipefail
export LC_ALL=C

duration="${BENCH_DURATION:-10s}"
warmup="${BENCH_WARMUP:-3s}"
rounds="${BENCH_ROUNDS:-3}"
connections="${BENCH_CONNECTIONS:-100}"
threads="${BENCH_THREADS:-1}"
reports="${BENCH_REPORTS:-/reports}"
metadata_ids="${BENCH_METADATA_IDS:-/data/sample_ids.txt}"

# workload, server, base URL (a compose service and the port it listens on). hello-default exists only in
# flight-rs: the peers have no middleware, so it is flight-rs's own cost of security headers, CORS and
# compression checks next to hello-bare.
default_targets="
hello-bare    rust  http://flight-rs-bare:3000
hello-bare    bun   http://flight-bun:3000
hello-bare    node  http://flight-node:3000
hello-default rust  http://flight-rs:3000
notes-read    rust  http://scribe-rs:1337
notes-read    bun   http://scribe-bun:1337
notes-read    node  http://scribe-node:1337
metadata      rust  http://metadata-rs:3001
metadata      bun   http://metadata-bun:3001
metadata      node  http://metadata-node:3001
"
targets="${BENCH_TARGETS:-$default_targets}"

die() {
  echo "bench: $*" >&2
  exit 1
}

case "$rounds" in '' | *[!0-9]* | 0) die "BENCH_ROUNDS must be a whole number of at least 1, not '$rounds'" ;; esac
command -v loadgen >/dev/null || die "loadgen is not on PATH"
command -v probe >/dev/null || die "probe is not on PATH"

# Every distinct base URL answers /healthz (compose's depends_on waited for health already; this also covers
# a run outside compose and a server that went down since).
wait_healthy() {
  local base="$1" deadline=$((SECONDS + 120))
  until probe "$base/healthz" --timeout-ms 1000 </dev/null 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      probe "$base/healthz" --timeout-ms 1000 || true
      die "$base/healthz did not answer 2xx within 120 s"
    fi
    sleep 1
  done
}

# POSTs one note to a notes server and prints the new note's id (from its `[row]` answer). bash's /dev/tcp:
# the loadgen image has no curl.
post_note() {
  local base="$1" hostport host port answer id
  hostport="${base#http://}"
  host="${hostport%%:*}"
  port="${hostport##*:}"
  local body='{"data":{"title":"compose bench","body":"Read under load by deploy/compose/bench.sh.","tags":["bench"]},"date_created":"2026-01-01T00:00:00.000Z","date_modified":"2026-01-01T00:00:00.000Z","created_by":1,"modified_by":1}'
  exec 3<>"/dev/tcp/$host/$port" || die "cannot connect to $base"
  printf 'POST /notes HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
    "$hostport" "${#body}" "$body" >&3
  answer="$(timeout 10 cat <&3 || true)"
  exec 3<&-
  case "$answer" in
    "HTTP/1.1 200"*) ;;
    *) die "POST $base/notes did not answer 200: $(printf '%s' "$answer" | head -c 300)" ;;
  esac
  id="$(printf '%s' "$answer" | sed -n 's/.*\[{"id":\([0-9][0-9]*\).*/\1/p' | head -n 1)"
  [ -n "$id" ] || die "POST $base/notes answered without an id: $(printf '%s' "$answer" | head -c 300)"
  echo "$id"
}

# The first `"name": value` in a pretty-printed loadgen report (the top-level figure, or the closed-loop
# latency's, which comes before any other histogram).
field() {
  sed -n "s/^ *\"$1\": \([^,]*\),*\$/\1/p" "$2" | head -n 1
}

run_dir="$reports/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$run_dir" || die "cannot create $run_dir"
tsv="$run_dir/runs.tsv"
printf 'round\tworkload\tserver\turl\treq_per_s\tp50_us\tp99_us\tresponses\texit\n' >"$tsv"

declare -A note_id=()
while read -r workload server base; do
  [ -n "${workload:-}" ] || continue
  wait_healthy "$base"
  if [ "$workload" = notes-read ] && [ -z "${note_id[$base]:-}" ]; then
    note_id[$base]="$(post_note "$base")"
  fi
done <<<"$targets"
if grep -q '^ *metadata ' <<<"$targets"; then
  [ -s "$metadata_ids" ] || die "no sample ids at $metadata_ids (metadata-seed writes them)"
fi

loader_cpus="$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status 2>/dev/null || true)"
echo "bench: $rounds round(s) x $duration (after $warmup warmup), $connections connections, $threads loader" \
  "thread(s), loader on CPUs ${loader_cpus:-?}; reports in $run_dir"

for ((round = 1; round <= rounds; round++)); do
  while read -r workload server base; do
    [ -n "${workload:-}" ] || continue
    args=(--threads "$threads" --connections "$connections" --duration "$duration" --warmup "$warmup"
      --timeout 2s --no-progress)
    case "$workload" in
      hello-*)
        url="$base/api/hello"
        args+=(--expect-status 200 --expect-body '{"message":"Hello from Flight!"}')
        ;;
      notes-read)
        url="$base/notes/${note_id[$base]}"
        args+=(--expect-status 200 --expect-contains "\"id\":${note_id[$base]},")
        ;;
      metadata)
        # Sample ids drawn at random (seeded: the same sequence for every server), every region; about 1%
        # of the ids are absent on purpose, so 404 is an answer too.
        url="$base/v1/metadata/x"
        args+=(--path '/v1/metadata/{id}?region={region}' --var "id=@$metadata_ids" --var 'region=en,ja,ko,zh-TW,th'
          --pick random --seed 1 --expect-status 200,404)
        ;;
      *) die "unknown workload '$workload' in BENCH_TARGETS" ;;
    esac
    name="round$round-$workload-$server"
    status=0
    # stdin is the target list this loop reads: loadgen gets none.
    loadgen "${args[@]}" --json "$run_dir/$name.json" "$url" </dev/null >"$run_dir/$name.txt" 2>&1 || status=$?
    if [ -s "$run_dir/$name.json" ]; then
      rps="$(field req_per_s "$run_dir/$name.json")"
      p50="$(field p50_us "$run_dir/$name.json")"
      p99="$(field p99_us "$run_dir/$name.json")"
      responses="$(field responses "$run_dir/$name.json")"
    else
      rps=0 p50=0 p99=0 responses=0
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$workload" "$server" "$url" "${rps:-0}" "${p50:-0}" \
      "${p99:-0}" "${responses:-0}" "$status" >>"$tsv"
    if [ "$status" -ne 0 ]; then
      echo "bench: round $round $workload $server: loadgen exited $status (see $run_dir/$name.txt):" >&2
      grep -E 'run failed|Errors|Non-2xx|loadgen:' "$run_dir/$name.txt" >&2 || tail -n 3 "$run_dir/$name.txt" >&2
    fi
    printf 'bench: round %d/%d %-13s %-5s %12.1f req/s\n' "$round" "$rounds" "$workload" "$server" "${rps:-0}"
  done <<<"$targets"
done

# Medians over rounds per workload and server (in the order first measured); "vs rust" is req/s over rust's
# in the same workload. A run whose loadgen failed (errors, wrong answers) makes the row FAILED.
awk -F '\t' '
  function median(list,    v, n, i, j, t) {
    n = split(list, v, " ")
    for (i = 2; i <= n; i++) { t = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  NR == 1 { next }
  {
    key = $2 SUBSEP $3
    if (!(key in runs)) { order[++keys] = key; wl[key] = $2; sv[key] = $3 }
    runs[key]++; rps[key] = rps[key] " " $5; p50[key] = p50[key] " " $6; p99[key] = p99[key] " " $7
    if ($9 != 0) failed[key]++
  }
  END {
    printf "%-14s %-6s %14s %9s %9s %9s  %s\n", "workload", "server", "req/s median", "vs rust", "p50 ms", "p99 ms", "runs"
    for (i = 1; i <= keys; i++) {
      k = order[i]; r = median(rps[k]); rust = wl[k] SUBSEP "rust"
      ratio = (rust in runs && median(rps[rust]) > 0) ? sprintf("%.2fx", r / median(rps[rust])) : "-"
      ok = runs[k] - failed[k]
      printf "%-14s %-6s %14.1f %9s %9.2f %9.2f  %d/%d ok%s\n", wl[k], sv[k], r, ratio, median(p50[k]) / 1000,
        median(p99[k]) / 1000, ok, runs[k], failed[k] ? "  FAILED" : ""
    }
  }' "$tsv" | tee "$run_dir/summary.txt"

if awk -F '\t' 'NR > 1 && $9 != 0 { bad = 1 } END { exit !bad }' "$tsv"; then
  echo "bench: some runs failed their checks; their figures are not comparable (see the .txt reports)" >&2
  exit 1
fi
