"""The policy as the trainer holds it: the same weights the inference server serves, read from the
same GGUF file (transformers dequantizes its quantized tensors to float32)."""

from __future__ import annotations

import os
from typing import Any


class PolicyModelError(RuntimeError):
    """The model could not be loaded; the message names the file and the fix."""


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
    try:
        model = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(gguf)), gguf_file=os.path.basename(gguf), dtype=torch.float32)
    except Exception as err:  # transformers raises many kinds here; all mean this file cannot be read as a model
        raise PolicyModelError(f"transformers could not load {gguf} as a causal LM: {type(err).__name__}: {err}") from err
    model.eval()
    return model
