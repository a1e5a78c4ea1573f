#!/usr/bin/env bash
# Checks that the edge peers (app-bun.ts, app-node.mjs) answer like flight-rs: the same status, the
# same headers (names and values) and the same decoded body for a fixed list of requests, one
# request list per profile. Prints every difference; exits 1 on any, 0 when all are equal, 2 on usage.
#
#   check-edge.sh [--production] [--asset /assets/app-abc.js] [--no-items] RUST_URL PEER_URL...
#   check-edge.sh --over-limit N RUST_URL PEER_URL...
#
# Start the servers yourself, with the same profile, FLIGHT_APP_SECRET, FLIGHT_CORS_ORIGINS and (for
# --asset) the same FLIGHT_DIST_PATH, which must hold index.html and the asset. --no-items skips
# /api/items (for a flight-rs build without it). --over-limit N (production servers started with
# FLIGHT_RATE_LIMIT=N) only drives each server past its limit and compares the 429.
#
# What is compared, per request: status; every header, lower-cased, repeated lines joined with ", " in
# order (so `vary: A` + `vary: B` equals `vary: A, B`), names sorted; the body after curl decodes it.
# What is not, and why:
#   date, connection, keep-alive        per response / hop-by-hop (node:http adds keep-alive lines)
#   transfer-encoding, content-length   on an encoded body only: flight-rs streams it (chunked), the
#                                       peers compress in memory and send a length
#   ratelimit-reset, ratelimit-remaining, values depend on the clock and on earlier traffic: presence only
#   retry-after
#   set-cookie                          the session id and signature are random: shape only
# Known differences, reported as "known" and not failing: the encoding chosen when Accept-Encoding
# offers br, zstd or deflate, or `*` (flight-rs picks br/zstd/deflate by q-value, ties br > zstd > gzip;
# the peers speak gzip only) -- the decoded bodies must still be equal.
# Example (a default-profile flight-rs without /api/items and the two peers):
#   check-edge.sh --no-items http://127.0.0.1:3000 http://127.0.0.1:3001 http://127.0.0.1:3002
set -u

production=0
limit=""
asset=""
items=1
while [ $# -gt 0 ]; do
  case "$1" in
    --production) production=1; shift ;;
    --asset) asset="$2"; shift 2 ;;
    --no-items) items=0; shift ;;
    --over-limit) limit="$2"; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    --*) echo "check-edge.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "usage: check-edge.sh [--production] [--asset PATH] [--no-items] RUST_URL PEER_URL..." >&2
  exit 2
fi
urls=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
# Cached GETs carry a query unique to this run, so the response cache starts cold on every server.
run="r$$$RANDOM"

# One request to one server: normalized head in $out.head, decoded body in $out.body.
fetch() { # out url path curl-args...
  local out=$1 url=$2 path=$3
  shift 3
  # --compressed decodes gzip/br/zstd/deflate; an explicit Accept-Encoding header still wins over curl's,
  # and a request that names none sends none (an empty -H drops the one --compressed would add).
  local ae=(-H 'Accept-Encoding:')
  case " $* " in *"Accept-Encoding: "?*) ae=() ;; esac
  rm -f "$out.body"
  curl -s --compressed --max-time 5 -D "$out.raw" -o "$out.body" "${ae[@]}" "$@" "$url$path" || echo "curl failed: $?" > "$out.raw"
  # No body at all (204, 304) leaves no file.
  [ -f "$out.body" ] || : > "$out.body"
  # With -I curl writes the head into the body file too; an answer to HEAD has no body.
  case " $* " in *" -I "*) : > "$out.body" ;; esac
  # The status line, then the headers, normalized.
  awk 'NR == 1 { sub(/\r$/, ""); split($0, s, " "); print "status " s[2]; next }
       { sub(/\r$/, "") } /^$/ { next }
       { i = index($0, ":"); name = tolower(substr($0, 1, i - 1)); value = substr($0, i + 1); sub(/^[ \t]+/, "", value)
         if (!(name in v)) { order[++n] = name; v[name] = value } else v[name] = v[name] ", " value }
       END { for (k = 1; k <= n; k++) print order[k] ": " v[order[k]] }' "$out.raw" |
    awk -v enc="$(grep -i '^content-encoding:' "$out.raw" | head -1)" '
       /^(date|connection|keep-alive): / { next }
       /^(transfer-encoding|content-length): / && enc != "" { next }
       /^(ratelimit-reset|ratelimit-remaining|retry-after): / { sub(/: .*/, ": <n>") }
       /^set-cookie: / { sub(/flight\.sid=[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/, "flight.sid=<id>.<sig>") }
       { print }' | sort > "$out.head"
}

# Sends one request to every server and reports how each peer differs from the first (flight-rs).
check() { # name path curl-args...
  local name=$1 path=$2
  shift 2
  local i before=$failed
  failed=0
  for i in "${!urls[@]}"; do
    fetch "$tmp/$i" "${urls[$i]}" "$path" -b "$tmp/jar$i" -c "$tmp/jar$i" "$@"
  done
  for i in "${!urls[@]}"; do
    [ "$i" = 0 ] && continue
    local peer=${urls[$i]}
    if grep -q '^curl failed' "$tmp/$i.raw" "$tmp/0.raw"; then
      echo "DIFF   $name ($peer): no answer from $(grep -l '^curl failed' "$tmp/$i.raw" "$tmp/0.raw" | sed "s|$tmp/0.raw|${urls[0]}|; s|$tmp/$i.raw|$peer|" | tr '\n' ' ')"
      failed=1
      continue
    fi
    while IFS= read -r line; do
      case "$line" in
        "< content-encoding"*|"> content-encoding"*)
          if [ "$known_encoding" = 1 ]; then echo "known  $name ($peer): $line"; continue; fi ;;
      esac
      echo "DIFF   $name ($peer): $line"
      failed=1
    done < <(diff "$tmp/0.head" "$tmp/$i.head" | grep '^[<>]')
    if ! cmp -s "$tmp/0.body" "$tmp/$i.body"; then
      echo "DIFF   $name ($peer): decoded body differs ($(wc -c < "$tmp/0.body") vs $(wc -c < "$tmp/$i.body") bytes)"
      failed=1
    fi
  done
  [ "$failed" = 0 ] && echo "same   $name: $(grep '^status' "$tmp/0.head" | cut -d' ' -f2), $(grep -c . "$tmp/0.head") header lines, $(wc -c < "$tmp/0.body") body bytes"
  [ "$before" = 1 ] && failed=1
  known_encoding=0
}
known_encoding=0
known() { known_encoding=1; }

O=(-H 'Origin: http://example.com')

if [ -n "$limit" ]; then
  for url in "${urls[@]}"; do
    for ((k = 0; k <= limit; k++)); do
      [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/api/hello")" = 429 ] && break
    done
  done
  check over-limit "/api/hello" "${O[@]}" -H 'Accept-Encoding: gzip'
  check over-limit-preflight "/api/hello" -X OPTIONS "${O[@]}" -H 'Access-Control-Request-Method: GET'
  [ "$failed" = 0 ] && echo "check-edge: all equal (${#urls[@]} servers)"
  exit "$failed"
fi
q=""
[ "$production" = 1 ] && q="?run=$run"

check hello-gzip "/api/hello$q" "${O[@]}" -H 'Accept-Encoding: gzip'
check hello-again-gzip "/api/hello$q" "${O[@]}" -H 'Accept-Encoding: gzip'
check hello-identity "/api/hello$q"
check hello-head "/api/hello" -I "${O[@]}" -H 'Accept-Encoding: gzip'
if [ "$items" = 1 ]; then
  check items-gzip "/api/items$q" "${O[@]}" -H 'Accept-Encoding: gzip'
  check items-gzip-again "/api/items$q" "${O[@]}" -H 'Accept-Encoding: gzip'
  check items-identity "/api/items$q" "${O[@]}"
  check items-gzip-q0 "/api/items$q" -H 'Accept-Encoding: gzip;q=0, identity'
  check items-gzip-upper "/api/items$q" -H 'Accept-Encoding: GZIP;Q=0.8'
  known; check items-gzip-br "/api/items$q" "${O[@]}" -H 'Accept-Encoding: gzip, br'
  known; check items-gzip-deflate-br "/api/items$q" -H 'Accept-Encoding: gzip, deflate, br'
  known; check items-star "/api/items$q" -H 'Accept-Encoding: *'
  known; check items-br-only "/api/items$q" -H 'Accept-Encoding: br'
  known; check items-zstd-only "/api/items$q" -H 'Accept-Encoding: zstd'
  check items-gzip-preferred "/api/items$q" -H 'Accept-Encoding: gzip;q=1.0, br;q=0.5'
  check items-head "/api/items" -I -H 'Accept-Encoding: gzip'
  check items-no-transform "/api/items$q" -H 'Accept-Encoding: gzip' -H 'Cache-Control: no-cache'
fi
check healthz "/healthz" "${O[@]}" -H 'Accept-Encoding: gzip'
check not-found "/nope$q" "${O[@]}" -H 'Accept-Encoding: gzip'
check not-found-api-html "/api/nope$q" -H 'Accept: text/html'
check post-known "/api/hello" -X POST "${O[@]}"
check post-unknown "/nope" -X POST
check options-known "/api/hello" -X OPTIONS
check preflight "/api/hello" -X OPTIONS "${O[@]}" -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: content-type, x-token'
check preflight-odd-headers "/nope" -X OPTIONS "${O[@]}" -H 'Access-Control-Request-Method: GET' -H 'Access-Control-Request-Headers: x(y)'
check cors-other-origin "/api/hello" -H 'Origin: http://other.test'
check cors-no-origin "/api/hello"
check preflight-other-origin "/api/hello" -X OPTIONS -H 'Origin: http://other.test' -H 'Access-Control-Request-Method: GET'
check session-first "/api/session" "${O[@]}"
check session-second "/api/session" "${O[@]}"
check session-bad-cookie "/api/session" -b 'flight.sid=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.bm90LWEtc2ln' "${O[@]}"
check authorization-bypasses-cache "/api/hello$q" -H 'Authorization: Bearer x'

if [ -n "$asset" ]; then
  check asset-gzip "$asset" "${O[@]}" -H 'Accept-Encoding: gzip'
  check asset-gzip-again "$asset" "${O[@]}" -H 'Accept-Encoding: gzip'
  check asset-identity "$asset"
  check asset-head "$asset" -I -H 'Accept-Encoding: gzip'
  known; check asset-gzip-br "$asset" -H 'Accept-Encoding: gzip, br'
  etag=$(grep -i '^etag:' "$tmp/0.raw" | head -1 | sed 's/^[^:]*: *//; s/\r$//')
  check asset-if-none-match "$asset" -H "If-None-Match: $etag"
  check asset-if-modified-since "$asset" -H "If-Modified-Since: $(date -u -d '+1 day' '+%a, %d %b %Y %H:%M:%S GMT')"
  check spa-deep-link "/app/settings/profile" -H 'Accept: text/html,application/xhtml+xml' -H 'Accept-Encoding: gzip'
  check spa-deep-link-again "/app/settings/profile" -H 'Accept: text/html,application/xhtml+xml' -H 'Accept-Encoding: gzip'
  check spa-deep-link-json "/app/settings/profile" -H 'Accept: application/json'
  check spa-dotted-missing "/missing.js" -H 'Accept: text/html'
  check index "/" -H 'Accept-Encoding: gzip'
  check index-html "/index.html"
  # Without Accept: text/html: Bun.serve resolves %2e%2e in req.url before any JS sees it, so with it
  # Bun answers the SPA page for /etc/passwd (still inside the folder) where flight-rs answers 404.
  check traversal "/%2e%2e/etc/passwd" --path-as-is
  check traversal-encoded-slash "/assets/..%2findex.html" --path-as-is -H 'Accept: text/html'
  check traversal-backslash "/assets%5c..%5cindex.html" --path-as-is
fi

if [ "$failed" = 0 ]; then
  echo "check-edge: all equal (${#urls[@]} servers)"
else
  echo "check-edge: differences found" >&2
fi
exit "$failed"
