#!/usr/bin/env bash
# Prints the python of the trainer's venv: torch, transformers, peft and gguf from PyPI, pinned in
# python/trainer/requirements.txt (torch's CUDA build with its nvidia-* wheels, about 3.5 GB; it runs
# on the CPU here), and this repository's rollout_export and rollout_trainer packages.
# The venv is made once in the cache, in a folder keyed by the requirements' content (about 100 s and
# 5.6 GB here); venvs of other requirements are removed. The two packages are reinstalled into it
# (seconds) whenever their content differs from what it holds.
set -euo pipefail
cd "$(dirname "$0")/.."
req="python/trainer/requirements.txt"
pkgs=(python/rollout_export python/trainer)
req_key="$(sha256sum "$req" | cut -c1-16)"
pkg_key="$(find "${pkgs[@]}" -type f \( -name '*.py' -o -name 'pyproject.toml' \) -not -path '*/tests/*' -not -path '*/build/*' -not -path '*.egg-info/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)"
cache="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
venv="$cache/train-venv-$req_key"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  echo "ensure-train-venv: the trainer's venv at $venv (torch, transformers, peft, gguf: about 3.5 GB from PyPI)" >&2
  rm -rf "$venv"
  # Other requirements' venvs: gigabytes each, and nothing uses them once the pins moved on.
  for old in "$cache"/train-venv-*; do [ -d "$old" ] && [ "$old" != "$venv" ] && rm -rf "$old"; done
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir -r "$req" >&2
  touch "$venv/.complete"
fi
if [ ! -f "$venv/.packages-$pkg_key" ]; then
  # Copies, not editable installs: the venv holds what the stamp names. The builds stay out of the tree.
  build="$(mktemp -d)"
  trap 'rm -rf "$build"' EXIT
  for pkg in "${pkgs[@]}"; do
    # Without a build/ or egg-info a local pip run may have left: setuptools would reuse that stale build.
    cp -r "$pkg" "$build/$(basename "$pkg")"
    rm -rf "$build/$(basename "$pkg")/build" "$build/$(basename "$pkg")"/*.egg-info
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --force-reinstall "$build/$(basename "$pkg")" >&2
  done
  rm -f "$venv"/.packages-*
  touch "$venv/.packages-$pkg_key"
fi
echo "$venv/bin/python"
