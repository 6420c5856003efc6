#!/usr/bin/env bash
# Installs the published agent harnesses the `harness` policy runs, each into its own cached venv
# keyed by its pinned requirements (python/harness_bridge/requirements/<harness>.txt), from PyPI:
#   mini-swe-agent 2.4.6 on the host's python3 (>= 3.10; about 60 s and 400 MB cold)
#   terminus-2 (harbor 0.25.0) on CPython 3.12 built from source (scripts/ensure-harness-python.sh:
#   a `# python: VERSION SHA256` line in its requirements names it; about 6 minutes once), and tmux,
#   which it drives in the sandbox
# Prints ROLLOUT_HARNESS_HOME=<dir>: the worker finds <dir>/<harness>/bin/python there
# (harnesses/harnessInstall.ts). Venvs of older pins of a harness are removed.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
home="$cache/harnesses"
mkdir -p "$home"
# terminus-2 drives a tmux session in the sandbox (sample tasks' sandboxes run the host's /usr).
bash scripts/ensure-debian.sh tmux
for req in python/harness_bridge/requirements/*.txt; do
  name="$(basename "$req" .txt)"
  key="$(sha256sum "$req" | cut -c1-16)"
  venv="$home/$name"
  if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements-key" 2>/dev/null)" = "$key" ]; then continue; fi
  echo "ensure-harnesses: $name into $venv (pins in $req)" >&2
  rm -rf "$venv"
  # A requirements file may name the Python it needs (`# python: VERSION SHA256`), built once.
  python="python3"
  pyline="$(grep -m1 '^# python: ' "$req" || true)"
  if [ -n "$pyline" ]; then
    read -r _ _ pyversion pysha <<<"$pyline"
    python="$(bash scripts/ensure-harness-python.sh "$pyversion" "$pysha")"
  fi
  # Built where it lives (a venv's scripts name its path); the key file, written last, marks it complete.
  "$python" -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir -r "$req" >&2
  echo "$key" >"$venv/.requirements-key"
done
echo "ROLLOUT_HARNESS_HOME=$home"
