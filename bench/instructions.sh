#!/usr/bin/env bash
# Instructions per response, counted by callgrind: the one cost figure on this VM that a noisy host cannot move
# (it exposes no hardware counters, and wall-clock CPU per response spread 61-116k req/s in one hour here).
# Each server runs under `valgrind --tool=callgrind` with one worker; a first loadgen run warms it (connections,
# allocator, lazy statics), its counters are zeroed, a second run is measured, and the counters are dumped. The
# servers take turns, ROUNDS times, so a drift in the load would show up as a spread, not as a difference.
#   URL_PATH=/api/hello bash bench/instructions.sh after="$PWD/target/release/flight-rs --hostname 127.0.0.1 --port {port} --workers 1 --middleware bare" \
#       before="/tmp/old-target/release/flight-rs --hostname 127.0.0.1 --port {port} --workers 1 --middleware bare"
#   ROUNDS=5 CONNECTIONS=100 DURATION=10s URL_PATH=/ bash bench/instructions.sh LABEL=COMMAND ...
#   A command may start with NAME=VALUE words: that server's environment (`flat=SERVE_X=1 /path/server ...`).
#   LOADGEN_ARGS="--http2 --streams 16" adds loadgen flags to both runs (HTTP/2 by prior knowledge here).
#   TOP=20 adds each server's 20 costliest functions (their own instructions per response, round 1) to the
#   summary: the profile of where a response's user-space work goes.
# Results: bench/results/<UTC stamp>/<UTC stamp>-<host>-instructions.{md,tsv}. The counts are user-space instructions of
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
top="${TOP:-0}"
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
load() { # port, duration, json file: closed loop, the hello benchmark's shape, plus LOADGEN_ARGS
  # shellcheck disable=SC2086 # LOADGEN_ARGS is a list of loadgen flags, split on spaces on purpose
  taskset -c "$loader_core" "$bin/loadgen" "http://127.0.0.1:$1$url_path" -c "$connections" -d "$2" \
    --expect-status 200 --no-progress --json "$3" ${LOADGEN_ARGS:-} >/dev/null
}
json_field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
top_functions() { # annotate file, responses, total: the TOP functions by their own instructions, per response
  python3 - "$1" "$2" "$3" "$top" <<'PY'
import re, sys
path, responses, total, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = []
for line in open(path):
    m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?)(?: \[(.*)\])?$", line)
    if not m or ":" not in m.group(2):
        continue
    count = int(m.group(1).replace(",", ""))
    # The thread's entry frames are listed with everything under them; a function's own count never is all.
    if count >= 0.99 * total:
        continue
    name = m.group(2).split(":", 1)[1]
    where = (m.group(3) or "").rsplit("/", 1)[-1]
    rows.append((count / responses, name if len(name) <= 110 else name[:107] + "...", where))
for per, name, where in rows[:top]:
    print(f"| {per:,.0f} | `{name}` | {where} |")
PY
}
total_instructions() { # the dump's "totals:" line holds Ir, the only event collected by default
  awk '/^totals:/ {print $2; found=1} END {if (!found) exit 1}' "$1"
}

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
host="$(hostname -s)"
mkdir -p "$repo/bench/results/$stamp"
out="$repo/bench/results/$stamp/$stamp-$host-instructions"
printf 'round\tlabel\tresponses\tinstructions\tinstructions_per_response\n' > "$out.tsv"
for round in $(seq 1 "$rounds"); do
  for i in "${!labels[@]}"; do
    label="${labels[$i]}"
    port="$(free_port)"
    cmd="${commands[$i]//\{port\}/$port}"
    # Leading NAME=VALUE words are the server's environment (as in a shell), set outside valgrind: callgrind
    # would otherwise measure `env` and lose the server at its exec.
    read -r -a words <<<"$cmd"
    vars=()
    while [ "${#words[@]}" -gt 0 ] && [[ "${words[0]}" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
      vars+=("${words[0]}")
      words=("${words[@]:1}")
    done
    env "${vars[@]}" taskset -c "$server_core" valgrind --tool=callgrind --callgrind-out-file="$work/$label.$round.out" \
      "${words[@]}" >"$work/$label.$round.log" 2>&1 &
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
    if [ "$top" -gt 0 ] && [ "$round" -eq 1 ]; then
      callgrind_annotate --threshold=100 "$dump" >"$work/$label.annotate" 2>/dev/null
      top_functions "$work/$label.annotate" "$responses" "$instructions" >"$work/$label.top"
    fi
  done
done

machine="$(nproc) CPUs, $(uname -sr), host $host, $(valgrind --version)"
commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
python3 - "$out.tsv" "$out.md" "$rounds" "$connections" "$duration" "$url_path" "$machine" "$commit" "$work" "$@" <<'PY'
import csv, os, statistics, sys
tsv, md, rounds, connections, duration, path, machine, commit, work, *specs = sys.argv[1:]
rows = list(csv.DictReader(open(tsv), delimiter="\t"))
labels = list(dict.fromkeys(r["label"] for r in rows))
per = {l: [int(r["instructions_per_response"]) for r in rows if r["label"] == l] for l in labels}
base = statistics.median(per[labels[0]])
with open(md, "w") as f:
    f.write("# Instructions per response (callgrind)\n\n")
    f.write(f"`bash bench/instructions.sh` with ROUNDS={rounds} CONNECTIONS={connections} DURATION={duration} "
            f"URL_PATH={path}{' LOADGEN_ARGS=' + repr(os.environ['LOADGEN_ARGS']) if os.environ.get('LOADGEN_ARGS') else ''} "
            f"at {commit}; each server under callgrind on its own, loadgen closed loop.\n\n"
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
    for l in labels:
        top = os.path.join(work, f"{l}.top")
        if os.path.exists(top):
            f.write(f"\n### {l}: the costliest functions (own instructions per response, round 1)\n\n"
                    "| instructions | function | object |\n|---|---|---|\n")
            f.write(open(top).read())
print(open(md).read())
PY
echo "instructions: wrote $out.md and $out.tsv" >&2
