#!/usr/bin/env bash
# Installs what rollout-pipeline needs on a Debian machine, idempotently and
# fast when everything is already there:
#   - Debian packages (bubblewrap, util-linux, ...) when missing (needs root)
#   - Node.js >= 22 (Node 24 from the npm registry when the system's is older)
#   - npm dependencies (npm ci, skipped when package-lock.json is unchanged)
#   - the Temporal CLI (PATH, cache, or built once from Go modules)
# Prints the environment to use as `export` lines on stdout; progress on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

# python3 and nodejs are the toolchains sample tasks use inside sandboxes (the host /usr is their base);
# chromium drives the Temporal Web UI in the browser test; postgresql is the server the PostgreSQL store tests start.
DEBIAN_PACKAGES=(bubblewrap util-linux procps iproute2 psmisc ca-certificates python3 python3-venv nodejs chromium postgresql)

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for pkg in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
fi
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing Debian packages: ${missing[*]}; install them with: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

node_bin="$(bash scripts/ensure-node.sh)"
export PATH="$node_bin:$PATH"
echo "setup: node $(node --version) from $node_bin" >&2

stamp="node_modules/.rollout-lock-stamp"
lock_hash="$(sha256sum package-lock.json | cut -d' ' -f1)-$(node --version)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$lock_hash" ]; then
  echo "setup: npm ci" >&2
  npm ci --no-audit --no-fund >&2
  echo "$lock_hash" > "$stamp"
fi

temporal_path="$(bash scripts/ensure-temporal.sh)"
echo "setup: temporal CLI $("$temporal_path" --version | sed 's/^temporal version //') at $temporal_path" >&2

# Real Kubernetes control-plane binaries (kube-apiserver, etcd, kwok) for the Kubernetes provider and
# deploy/ tests, built once from Go modules into the cache (a cold build takes 20-30 minutes on 2 cores).
kube_dir="$(bash scripts/ensure-kube.sh)"
echo "setup: Kubernetes binaries at $kube_dir" >&2

# The Python trainer example (examples/python-trainer) runs on the official temporalio SDK from PyPI.
py_venv="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}/python-trainer-venv"
py_req="examples/python-trainer/requirements.txt"
py_stamp="$py_venv/.requirements-stamp"
if [ ! -x "$py_venv/bin/python" ] || [ "$(cat "$py_stamp" 2>/dev/null)" != "$(sha256sum "$py_req" | cut -d' ' -f1)" ]; then
  echo "setup: python venv for the trainer example at $py_venv" >&2
  python3 -m venv "$py_venv" >&2
  "$py_venv/bin/pip" install --quiet --disable-pip-version-check -r "$py_req" >&2
  sha256sum "$py_req" | cut -d' ' -f1 > "$py_stamp"
fi

printf 'export PATH=%q\n' "$node_bin:$PATH"
printf 'export TEMPORAL_CLI_PATH=%q\n' "$temporal_path"
printf 'export ROLLOUT_TRAINER_PYTHON=%q\n' "$py_venv/bin/python"
printf 'export KUBE_BIN_DIR=%q\n' "$kube_dir"
