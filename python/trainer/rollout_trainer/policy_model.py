"""The policy as the trainer holds it: the same weights the inference server serves, read from the
same GGUF file (transformers dequantizes its quantized tensors to float32).

Dequantizing takes about 34 s here; the float32 weights are then kept in the cache (safetensors and
the config, about 2 GB for the 0.5B model, keyed by the GGUF's path, size and modification time), and
later loads read them in a few seconds. `ROLLOUT_TRAIN_NO_WEIGHT_CACHE=1` turns the cache off."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from typing import Any


class PolicyModelError(RuntimeError):
    """The model could not be loaded; the message names the file and the fix."""


def weight_cache_dir(gguf: str) -> str:
    """Where the dequantized weights of `gguf` are kept."""
    st = os.stat(gguf)
    key = hashlib.sha256(f"{os.path.realpath(gguf)}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:16]
    root = os.environ.get("ROLLOUT_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rollout-pipeline")
    return os.path.join(root, "dequantized-weights", f"{os.path.splitext(os.path.basename(gguf))[0]}-{key}")


def hf_config(model: Any) -> dict[str, Any]:
    """The model's config as a Hugging Face checkpoint states it: its architecture named, no GGUF quantization entry."""
    base = getattr(model, "get_base_model", lambda: model)()
    config = base.config.to_dict()
    config["architectures"] = [type(base).__name__]
    config.pop("quantization_config", None)  # the dequantized float32 weights, not the GGUF's
    return config


def _save_dequantized(model: Any, directory: str) -> None:
    import json

    from safetensors.torch import save_model

    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".staging-", dir=parent)
    try:
        with open(os.path.join(staging, "config.json"), "w", encoding="utf-8") as f:
            json.dump(hf_config(model), f, indent=1)
        save_model(model, os.path.join(staging, "model.safetensors"))
        for old in os.listdir(parent):  # other GGUFs' or older files' weights: 2 GB each
            if old != os.path.basename(directory) and not old.startswith(".staging-"):
                shutil.rmtree(os.path.join(parent, old), ignore_errors=True)
        os.rename(staging, directory)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # a full disk costs the cache, not the load


def load_policy(gguf: str) -> Any:
    """The causal LM in `gguf`, float32, in eval mode."""
    if not os.path.isfile(gguf):
        raise PolicyModelError(f"no GGUF model at {gguf}: run scripts/ensure-model.sh (it prints ROLLOUT_MODEL_GGUF) or pass the file the inference server runs")
    try:
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as transformers_logging
    except ImportError as err:
        raise PolicyModelError(f"{err}: use the python of the train venv (bash scripts/setup.sh train prints ROLLOUT_TRAIN_PYTHON)") from err
    transformers_logging.disable_progress_bar()  # a bar per tensor on stderr, in every test log
    use_cache = os.environ.get("ROLLOUT_TRAIN_NO_WEIGHT_CACHE") != "1"
    cached = weight_cache_dir(gguf)
    try:
        if use_cache and os.path.isfile(os.path.join(cached, "model.safetensors")):
            model = AutoModelForCausalLM.from_pretrained(cached, dtype=torch.float32)
        else:
            model = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(gguf)), gguf_file=os.path.basename(gguf), dtype=torch.float32)
            if use_cache:
                _save_dequantized(model, cached)
    except Exception as err:  # transformers raises many kinds here; all mean this file cannot be read as a model
        raise PolicyModelError(f"transformers could not load {gguf} as a causal LM: {type(err).__name__}: {err}") from err
    # Loaded from the GGUF, the tensors are plain float32 but transformers leaves its GGUF quantizer
    # attached (is_quantized, not trainable), and a transformers Trainer (TRL's) refuses the model: drop it.
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
        model.config._is_quantized = False
    model.eval()
    return model
