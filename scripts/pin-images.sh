#!/usr/bin/env bash
# Pins the Dockerfile's base images by digest. Each base image is a build argument declared before the first
# FROM (`ARG RUST_IMAGE=rust:1.95-slim-bookworm`, used as `FROM ${RUST_IMAGE} AS build`); its default is what a
# plain build uses. This script asks the image's registry which manifest the tag points to now, and writes
# `tag@sha256:<digest>` as that default, so every build resolves the same image until the pins are moved again.
#
#   bash scripts/pin-images.sh            # resolve every base image's tag and write tag@sha256:… (all or none)
#   bash scripts/pin-images.sh --check    # every base image pinned, and its registry still serves that digest
#   bash scripts/pin-images.sh --list     # NAME<tab>REFERENCE per base image, offline (scripts/compose-check.sh)
#   --dockerfile FILE                     # another Dockerfile than the repository's
#
# The digest pinned is the one the tag resolves to: for a multi-platform image, its index (manifest list), so the
# pin stays multi-platform. It is the SHA-256 of the manifest's bytes as the registry serves them, and before a
# pin is written the manifest is fetched back by that digest and hashed again, so a digest that does not name
# what the registry serves is never written. Asked with skopeo (Debian's `skopeo`, the library podman uses:
# podman 4.3 itself cannot print a remote manifest's bytes), crane, or `docker buildx imagetools`, the first
# found; PIN_IMAGES_TOOL=skopeo|crane|buildx chooses.
#
# Exit status: 0 pins written, or every pin verified; 1 a check failed (a base image not pinned, a malformed
# digest, a digest or tag the registry does not serve, a FROM that names an image without a build argument);
# 2 usage; 3 a registry the references name did not answer over HTTPS (this project's machines reach none), so
# nothing was changed or verified; 4 no skopeo, crane, docker buildx or curl to ask it, nothing changed.
#
# Environment: PIN_IMAGES_TOOL; PIN_IMAGES_TIMEOUT [60] seconds for each registry request.
set -euo pipefail

mode=pin
dockerfile="$(dirname "${BASH_SOURCE[0]}")/../Dockerfile"
while [ $# -gt 0 ]; do
  case "$1" in
    --check) mode=check ;;
    --list) mode=list ;;
    --dockerfile) dockerfile="${2:?--dockerfile needs a file}"; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "pin-images: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -f "$dockerfile" ] || { echo "pin-images: no $dockerfile" >&2; exit 2; }
timeout_s="${PIN_IMAGES_TIMEOUT:-60}"

say() { echo "pin-images: $*"; }
err() { echo "pin-images: $*" >&2; }

# ---- the base images: global ARGs a FROM names, whose default is not a stage ------------------------------------
# Fills names[] and refs[] in the order of the ARGs; any FROM that names an image itself is an error, since it
# could be neither pinned here nor replaced by compose-check's stand-ins.
names=()
refs=()
read_bases() {
  local line instruction arg value from stage
  local -A global=() stages=() used=()
  local in_stages=0 bad=0
  while IFS= read -r line; do
    line="${line%$'\r'}"
    read -r instruction arg _ <<<"$line" || true
    case "${instruction^^}" in
      ARG)
        if [ "$in_stages" = 0 ] && [[ "$arg" == *=* ]]; then
          value="${arg#*=}"
          value="${value%\"}"
          global["${arg%%=*}"]="${value#\"}"
        fi ;;
      FROM)
        in_stages=1
        read -r _ from _ stage _ <<<"$line"
        if [[ "$from" == --* ]] || [ -z "${stage:-}" ]; then
          err "$dockerfile: FROM $from: expected \`FROM REFERENCE AS NAME\`"; bad=1; continue
        fi
        if [[ "$from" =~ ^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$ ]]; then
          arg="${BASH_REMATCH[1]}"
          if [ -z "${global[$arg]:-}" ]; then
            err "$dockerfile: FROM \${$arg}: no ARG $arg=… with a default before the first FROM"; bad=1
          elif [ -z "${stages[${global[$arg]}]+set}" ]; then
            used["$arg"]=1
          fi
        elif [ -z "${stages[$from]+set}" ]; then
          err "$dockerfile: FROM $from AS $stage names an image directly: declare ARG NAME=$from before the first FROM and use FROM \${NAME}, so it can be pinned"
          bad=1
        fi
        stages["$stage"]=1 ;;
    esac
  done < <(sed -e ':a' -e '/\\$/N; s/\\\n/ /; ta' "$dockerfile" | grep -v -E '^[[:space:]]*(#|$)')
  [ "$bad" = 0 ] || exit 1
  # In the order the ARGs are declared.
  while IFS= read -r line; do
    arg="${line#ARG }"
    arg="${arg%%=*}"
    [ -n "${used[$arg]+set}" ] || continue
    names+=("$arg")
    refs+=("${global[$arg]}")
    unset "used[$arg]"
  done < <(sed -n '/^FROM /q; /^ARG [A-Za-z_][A-Za-z0-9_]*=/p' "$dockerfile")
  [ ${#names[@]} -gt 0 ] || { err "$dockerfile: no base image named through an ARG"; exit 1; }
}

# ---- references --------------------------------------------------------------------------------------------------
# split_ref: a reference's name, tag, digest and registry host, as Docker reads them (shared with base-images.sh).
# shellcheck source=scripts/image-ref.sh
source "$(dirname "${BASH_SOURCE[0]}")/image-ref.sh"

valid_digest() { [[ "$1" =~ ^sha256:[0-9a-f]{64}$ ]]; }

# ---- asking a registry ---------------------------------------------------------------------------------------------
# Whether $1 answers on /v2/ over HTTPS (any HTTP status: 401 asks for a token, which the tools get themselves).
declare -A reachable=()
answers() {
  local host="$1" code
  if [ -z "${reachable[$host]+set}" ]; then
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time "$timeout_s" "https://$host/v2/" 2>/dev/null || true)
    if [ -n "$code" ] && [ "$code" != 000 ]; then reachable[$host]=1; else reachable[$host]=0; fi
  fi
  [ "${reachable[$host]}" = 1 ]
}

pick_tool() {
  tool="${PIN_IMAGES_TOOL:-}"
  if [ -z "$tool" ]; then
    if command -v skopeo >/dev/null; then tool=skopeo
    elif command -v crane >/dev/null; then tool=crane
    elif command -v docker >/dev/null && docker buildx version >/dev/null 2>&1; then tool=buildx
    fi
  fi
  case "$tool" in
    skopeo | crane) command -v "$tool" >/dev/null || { err "PIN_IMAGES_TOOL=$tool: no $tool here; nothing changed"; exit 4; } ;;
    buildx) docker buildx version >/dev/null 2>&1 || { err "PIN_IMAGES_TOOL=buildx: no docker buildx here; nothing changed"; exit 4; } ;;
    "") err "no skopeo, crane or docker buildx to read manifests with (apt-get install skopeo); nothing changed"; exit 4 ;;
    *) err "PIN_IMAGES_TOOL=$tool: expected skopeo, crane or buildx"; exit 2 ;;
  esac
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The digest of what reference $1 (name:tag or name@digest) points to, from the manifest's bytes as served:
# printed on stdout, or the tool's last error line on stderr and status 1.
digest_of() {
  local out="$work/manifest" errors="$work/errors" rc=0
  case "$tool" in
    skopeo) timeout "$timeout_s" skopeo inspect --raw "docker://$1" >"$out" 2>"$errors" || rc=$? ;;
    crane) timeout "$timeout_s" crane manifest "$1" >"$out" 2>"$errors" || rc=$? ;;
    buildx) timeout "$timeout_s" docker buildx imagetools inspect --raw "$1" >"$out" 2>"$errors" || rc=$? ;;
  esac
  if [ "$rc" != 0 ] || [ ! -s "$out" ]; then
    tail -n 1 "$errors" >&2
    [ "$rc" != 124 ] || echo "$tool: no answer in ${timeout_s} s" >&2
    return 1
  fi
  echo "sha256:$(sha256sum <"$out" | cut -d' ' -f1)"
}

# ---- the modes ------------------------------------------------------------------------------------------------------
read_bases

if [ "$mode" = list ]; then
  for i in "${!names[@]}"; do printf '%s\t%s\n' "${names[$i]}" "${refs[$i]}"; done
  exit 0
fi

failed=0
unreachable=()
# Offline first: what is not pinned, or not pinned well, fails without asking anyone.
if [ "$mode" = check ]; then
  for i in "${!names[@]}"; do
    split_ref "${refs[$i]}"
    if [ -z "$r_digest" ]; then
      say "${names[$i]}=${refs[$i]}: not pinned (no @sha256:…)"; failed=1
    elif ! valid_digest "$r_digest"; then
      say "${names[$i]}=${refs[$i]}: malformed digest (want sha256: and 64 lowercase hex digits)"; failed=1
    fi
  done
fi

# Which registries answer; without any, nothing can be resolved or verified.
for i in "${!names[@]}"; do
  split_ref "${refs[$i]}"
  if ! command -v curl >/dev/null; then err "needs curl to reach the registries; nothing changed"; exit 4; fi
  answers "$r_host" || [[ " ${unreachable[*]} " == *" $r_host "* ]] || unreachable+=("$r_host")
done
if [ ${#unreachable[@]} -gt 0 ]; then
  [ "$failed" = 0 ] || exit 1
  err "no answer over HTTPS from ${unreachable[*]} (https://HOST/v2/): the base images' digests cannot be" \
    "resolved or verified on this machine; nothing changed. Run this where those registries are reachable."
  exit 3
fi
pick_tool

new=()
for i in "${!names[@]}"; do
  name="${names[$i]}"
  split_ref "${refs[$i]}"
  tagged="$r_name${r_tag:+:$r_tag}"
  shown="${refs[$i]%%@*}"
  if [ "$mode" = check ]; then
    valid_digest "$r_digest" || continue
    if ! got=$(digest_of "$r_name@$r_digest"); then
      say "$name: $r_name@$r_digest is not served by its registry"; failed=1; continue
    fi
    [ "$got" = "$r_digest" ] || { say "$name: $r_name@$r_digest serves a manifest whose digest is $got"; failed=1; continue; }
    if [ -z "$r_tag" ]; then
      say "$name: ok, $r_digest (pinned without a tag)"
    elif now=$(digest_of "$tagged" 2>/dev/null) && [ "$now" = "$r_digest" ]; then
      say "$name: ok, $shown is still $r_digest"
    elif [ -n "${now:-}" ]; then
      say "$name: ok, $r_digest is served; $shown has moved on to $now (pin-images.sh without --check moves the pin)"
    else
      say "$name: ok, $r_digest is served; $shown no longer resolves"
    fi
  else
    [ -n "$r_tag" ] || { say "$name=${refs[$i]}: no tag to resolve"; failed=1; continue; }
    if ! got=$(digest_of "$tagged"); then
      say "$name: $tagged does not resolve"; failed=1; continue
    fi
    # Read back by digest: only a digest that names the served bytes is written.
    if ! back=$(digest_of "$r_name@$got") || [ "$back" != "$got" ]; then
      say "$name: $tagged hashed to $got, but the registry does not serve that digest back (tool $tool)"; failed=1; continue
    fi
    new[i]="$shown@$got"
    if [ "${refs[$i]}" = "${new[$i]}" ]; then say "$name: $shown is still $got"
    elif [ -n "$r_digest" ]; then say "$name: $shown moved from $r_digest to $got"
    else say "$name: $shown is $got"; fi
  fi
done
[ "$failed" = 0 ] || { [ "$mode" = check ] || err "nothing changed"; exit 1; }
[ "$mode" = pin ] || exit 0
changed=0
for i in "${!names[@]}"; do [ "${refs[$i]}" = "${new[$i]}" ] || changed=1; done
[ "$changed" = 1 ] || { say "every pin in $dockerfile is current; nothing changed"; exit 0; }

# Every tag resolved: rewrite the ARG defaults before the first FROM, and nothing else.
tmp="$(mktemp "$dockerfile.XXXXXX")"
awk -v list="$(for i in "${!names[@]}"; do printf '%s=%s\n' "${names[$i]}" "${new[$i]}"; done)" '
  BEGIN { n = split(list, lines, "\n"); for (i = 1; i <= n; i++) { eq = index(lines[i], "="); pin[substr(lines[i], 1, eq - 1)] = substr(lines[i], eq + 1) } }
  /^FROM / { stages = 1 }
  !stages && /^ARG [A-Za-z_][A-Za-z0-9_]*=/ { name = substr($0, 5, index($0, "=") - 5); if (name in pin) { print "ARG " name "=" pin[name]; next } }
  { print }
' "$dockerfile" >"$tmp"
chmod --reference="$dockerfile" "$tmp"
mv "$tmp" "$dockerfile"
say "wrote ${#names[@]} pins into $dockerfile; deploy/podman/README.md (Pins) says what is pinned: update it"
