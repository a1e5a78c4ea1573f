#!/usr/bin/env bash
# Instructions per response, counted by callgrind: the one cost figure on this VM that a noisy host cannot move
# (it exposes no hardware counters, and wall-clock CPU per response spread 61-116k req/s in one hour here).
# Each server runs under `valgrind --tool=callgrind` with one worker; a first loadgen run warms it (connections,
# allocator, lazy statics), its counters are zeroed, a second run is measured, and the counters are dumped. The
# servers take turns, ROUNDS times, so a drift in the load would show up as a spread, not as a difference.
#   URL_PATH=/api/hello bash bench/instructions.sh after="$PWD/target/release/flight-rs --hostname 127.0.0.1 --port {port} --workers 1 --middleware bare" \
#       before="/tmp/old-target/release/flight-rs --hostname 127.0.0.1 --port {port} --workers 1 --middleware bare"
#   ROUNDS=5 CONNECTIONS=100 DURATION=10s URL_PATH=/ bash bench/instructions.sh LABEL=COMMAND ...
# Results: bench/results/<UTC stamp>-<host>-instructions.{md,tsv}. The counts are user-space instructions of
# the server process (callgrind does not see the kernel), so a change that moves work into or out of syscalls
# shows only its user-space half; pair this with `strace -c` for the syscalls.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
bin="${CARGO_TARGET_DIR:-$repo/target}/release"
rounds="${ROUNDS:-3}"
connections="${CONNECTIONS:-100}"
duration="${DURATION:-10s}"
warmup="${WARMUP:-3s}"
url_path="${URL_PATH:-/}"
server_core="${SERVER_CORE:-0}"
loader_core="${LOADER_CORE:-1}"
[ "$#" -ge 1 ] || { sed -n '2,12p' "${BASH_SOURCE[0]}" >&2; exit 2; }
[ -x "$bin/loadgen" ] || { echo "instructions: $bin/loadgen missing: run bash bench/setup.sh" >&2; exit 2; }
for tool in valgrind callgrind_control taskset python3; do
  command -v "$tool" >/dev/null || { echo "instructions: $tool missing (Debian: valgrind, util-linux, python3)" >&2; exit 2; }
done
labels=()
commands=()
for spec in "$@"; do
  case "$spec" in
    *=*) labels+=("${spec%%=*}"); commands+=("${spec#*=}") ;;
    *) echo "instructions: '$spec' is not LABEL=COMMAND" >&2; exit 2 ;;
  esac
  case "${spec#*=}" in *'{port}'*) ;; *) echo "instructions: the command of '${spec%%=*}' has no {port}" >&2; exit 2 ;; esac
done

work="$(mktemp -d)"
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ready() {
  local port="$1" i
  for i in $(seq 1 300); do
    if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$port),0.2).close()" 2>/dev/null; then return 0; fi
    kill -0 "$server" 2>/dev/null || { echo "instructions: the server exited before it listened" >&2; return 1; }
    sleep 0.1
  done
  echo "instructions: nothing listened on $port within 30 s" >&2
  return 1
}
load() { # port, duration, json file: closed loop, the hello benchmark's shape
  taskset -c "$loader_core" "$bin/loadgen" "http://127.0.0.1:$1$url_path" -c "$connections" -d "$2" \
    --expect-status 200 --no-progress --json "$3" >/dev/null
}
json_field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
total_instructions() { # the dump's "totals:" line holds Ir, the only event collected by default
  awk '/^totals:/ {print $2; found=1} END {if (!found) exit 1}' "$1"
}

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
host="$(hostname -s)"
out="$repo/bench/results/$stamp-$host-instructions"
printf 'round\tlabel\tresponses\tinstructions\tinstructions_per_response\n' > "$out.tsv"
for round in $(seq 1 "$rounds"); do
  for i in "${!labels[@]}"; do
    label="${labels[$i]}"
    port="$(free_port)"
    cmd="${commands[$i]//\{port\}/$port}"
    # shellcheck disable=SC2086 # the command is a command line, split as the shell would
    taskset -c "$server_core" valgrind --tool=callgrind --callgrind-out-file="$work/$label.$round.out" \
      $cmd >"$work/$label.$round.log" 2>&1 &
    server=$!
    wait_ready "$port"
    load "$port" "$warmup" "$work/warmup.json"
    callgrind_control -z "$server" >/dev/null 2>&1
    load "$port" "$duration" "$work/measured.json"
    callgrind_control -d "$server" >/dev/null 2>&1
    kill "$server"; wait "$server" 2>/dev/null || true; server=""
    # -d writes "<out>.<n>"; the exit writes "<out>" itself (everything after the dump): the dump is the window.
    dump="$(ls "$work/$label.$round.out".* | head -1)"
    instructions="$(total_instructions "$dump")"
    responses="$(json_field "$work/measured.json" responses)"
    per="$(python3 -c "print(f'{$instructions / $responses:.0f}')")"
    printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$label" "$responses" "$instructions" "$per" | tee -a "$out.tsv"
  done
done

machine="$(nproc) CPUs, $(uname -sr), host $host, $(valgrind --version)"
commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
python3 - "$out.tsv" "$out.md" "$rounds" "$connections" "$duration" "$url_path" "$machine" "$commit" "$@" <<'PY'
import csv, statistics, sys
tsv, md, rounds, connections, duration, path, machine, commit, *specs = sys.argv[1:]
rows = list(csv.DictReader(open(tsv), delimiter="\t"))
labels = list(dict.fromkeys(r["label"] for r in rows))
per = {l: [int(r["instructions_per_response"]) for r in rows if r["label"] == l] for l in labels}
base = statistics.median(per[labels[0]])
with open(md, "w") as f:
    f.write("# Instructions per response (callgrind)\n\n")
    f.write(f"`bash bench/instructions.sh` with ROUNDS={rounds} CONNECTIONS={connections} DURATION={duration} "
            f"URL_PATH={path} at {commit}; each server under callgrind on its own, loadgen closed loop.\n\n"
            f"Machine: {machine}.\n\n")
    for s in specs:
        f.write(f"- `{s}`\n")
    f.write(f"\n| server | instructions per response, median | rounds | ratio to {labels[0]} |\n|---|---|---|---|\n")
    for l in labels:
        m = statistics.median(per[l])
        f.write(f"| {l} | {m:,.0f} | {', '.join(f'{v:,}' for v in per[l])} | {m / base:.3f} |\n")
    f.write("\nUser-space instructions of the server process only (callgrind does not count the kernel). "
            "Requests still in flight when a window ends were partly served and not counted, at most "
            f"{connections} per window.\n")
print(open(md).read())
PY
echo "instructions: wrote $out.md and $out.tsv" >&2
