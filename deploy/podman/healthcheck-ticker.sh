#!/usr/bin/env bash
# Runs the health checks of running containers, as Docker's engine does by itself and podman does only through
# systemd timers. This machine has no systemd, so without this every container's health stays "starting" and
# compose's `condition: service_healthy` waits forever.
#
#   deploy/podman/healthcheck-ticker.sh LABEL=VALUE     # e.g. com.docker.compose.project=rust-baselines
#
# Every second it lists the running containers with that label and runs `podman healthcheck run` on each one
# whose interval has passed since its last check. podman itself applies the check's timeout, retries and
# start period and records the status, so `docker-compose ps` and `depends_on: service_healthy` see it. Runs
# until killed (scripts/compose-check.sh starts it and ends it by pid).
set -uo pipefail
label="${1:?usage: healthcheck-ticker.sh LABEL=VALUE}"
podman="${PODMAN:-podman}"

declare -A interval_s last_run running
while true; do
  now=$(date +%s)
  for id in $("$podman" ps -q --no-trunc --filter "label=$label" 2>/dev/null); do
    if [ -z "${interval_s[$id]:-}" ]; then
      # Nanoseconds; 0 (no interval given) is Docker's default of 30 s; no health check at all: skip it.
      ns=$("$podman" inspect --format '{{if .Config.Healthcheck}}{{printf "%d" .Config.Healthcheck.Interval}}{{else}}none{{end}}' "$id" 2>/dev/null) || continue
      case "$ns" in
        none) interval_s[$id]=never; continue ;;
        0 | "") interval_s[$id]=30 ;;
        *) interval_s[$id]=$(( ns / 1000000000 > 0 ? ns / 1000000000 : 1 )) ;;
      esac
      # The first check one second after the container is seen, as an engine's first tick.
      last_run[$id]=$(( now - interval_s[$id] + 1 ))
    fi
    [ "${interval_s[$id]}" = never ] && continue
    # A check still running (a slow command, bounded by its timeout) is not started twice.
    if [ -n "${running[$id]:-}" ] && kill -0 "${running[$id]}" 2>/dev/null; then continue; fi
    if (( now - last_run[$id] >= interval_s[$id] )); then
      last_run[$id]=$now
      "$podman" healthcheck run "$id" >/dev/null 2>&1 &
      running[$id]=$!
    fi
  done
  sleep 1
done
