#!/usr/bin/env bash
# Prints the python of a venv with the Python trainer example's requirements
# (examples/python-trainer/requirements.txt: the temporalio SDK from PyPI),
# made once in the cache and remade when the requirements change.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}/python-trainer-venv"
req="examples/python-trainer/requirements.txt"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements-stamp" 2>/dev/null)" != "$want" ]; then
  echo "ensure-trainer-venv: python venv for the trainer example at $venv" >&2
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
  echo "$want" > "$venv/.requirements-stamp"
fi
echo "$venv/bin/python"
