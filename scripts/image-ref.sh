#!/usr/bin/env bash
# Image references read as Docker reads them, in one place for the scripts that compare or ask for them
# (scripts/pin-images.sh asks registries for them; scripts/base-images.sh matches them to its stand-ins).
# Sourced, not run. split_ref REF sets:
#   r_name    registry/repository, normalized as Docker does: `debian` is docker.io/library/debian, `x/y` is
#             docker.io/x/y, and a first part with a dot or a colon, or `localhost`, is a registry host
#             (`ghcr.io/x` stays ghcr.io/x, `gcr.io/distroless/cc-debian12` stays as it is)
#   r_tag     the tag, or empty
#   r_digest  the digest after `@`, or empty
#   r_host    the host that serves the registry's API (Docker Hub's is registry-1.docker.io, not docker.io)
split_ref() {
  local ref="$1" first
  r_digest=""
  if [[ "$ref" == *@* ]]; then r_digest="${ref#*@}"; ref="${ref%%@*}"; fi
  r_tag=""
  if [[ "${ref##*/}" == *:* ]]; then r_tag="${ref##*:}"; ref="${ref%:*}"; fi
  first="${ref%%/*}"
  if [[ "$ref" != */* ]]; then
    r_name="docker.io/library/$ref"
  elif [[ "$first" == *.* || "$first" == *:* || "$first" == localhost ]]; then
    r_name="$ref"
  else
    r_name="docker.io/$ref"
  fi
  r_host="${r_name%%/*}"
  # Docker Hub's API is not on docker.io itself.
  [ "$r_host" != docker.io ] || r_host=registry-1.docker.io
}
