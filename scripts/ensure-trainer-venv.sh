#!/usr/bin/env bash
# Prints the python of a venv for Python trainers: the trainer example's requirements
# (examples/python-trainer/requirements.txt: the temporalio SDK from PyPI) and this repository's
# rollout_export package (python/rollout_export: pulls and checks a batch's training samples).
# Made once in the cache, in a folder keyed by the content of both; a changed requirement or
# package file makes a new one (the old one is left for checkouts that still use it).
set -euo pipefail
cd "$(dirname "$0")/.."
req="examples/python-trainer/requirements.txt"
pkg="python/rollout_export"
want="$( (sha256sum "$req"; find "$pkg" -type f \( -name '*.py' -o -name 'pyproject.toml' \) -not -path '*/tests/*' -not -path '*/build/*' -not -path '*.egg-info/*' | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -c1-16)"
venv="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}/python-trainer-venv-$want"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  echo "ensure-trainer-venv: python venv for trainers at $venv (requirements + rollout_export)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
  # A copy, not an editable install: the venv holds what it was keyed by. The build stays out of the tree.
  build="$(mktemp -d)"
  trap 'rm -rf "$build"' EXIT
  cp -r "$pkg" "$build/src"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$build/src" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
