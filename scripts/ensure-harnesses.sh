#!/usr/bin/env bash
# Installs the published agent harnesses the `harness` policy runs, each into its own cached venv
# keyed by its pinned requirements (python/harness_bridge/requirements/<harness>.txt), from PyPI:
#   mini-swe-agent 2.4.6 on the host's python3 (>= 3.10; about 60 s and 400 MB cold)
# Prints ROLLOUT_HARNESS_HOME=<dir>: the worker finds <dir>/<harness>/bin/python there
# (activities/harness/harnessInstall.ts). Venvs of older pins of a harness are removed.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
home="$cache/harnesses"
mkdir -p "$home"
for req in python/harness_bridge/requirements/*.txt; do
  name="$(basename "$req" .txt)"
  key="$(sha256sum "$req" | cut -c1-16)"
  venv="$home/$name"
  if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements-key" 2>/dev/null)" = "$key" ]; then continue; fi
  echo "ensure-harnesses: $name into $venv (pins in $req)" >&2
  rm -rf "$venv"
  # Built where it lives (a venv's scripts name its path); the key file, written last, marks it complete.
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir -r "$req" >&2
  echo "$key" >"$venv/.requirements-key"
done
echo "ROLLOUT_HARNESS_HOME=$home"
