"""One step of TRL's own GRPOTrainer (trl 1.9.0) on exported samples, on the CPU: the rollouts come in
through TRL's `rollout_func` hook (rollout_export.trainers.to_trl_rollout, unchanged), the reward
through `trl_rollout_reward`; the model is the GGUF's (rollout_trainer.policy_model) with our LoRA.

    python -m rollout_trainer.trl_step --samples export.jsonl --gguf model.gguf [--lr 1e-4]
        [--off-policy-mask-threshold 0.5] [--out DIR]

prints one JSON object: what TRL logged for the step (loss, reward, reward_std, completion lengths,
entropy, ...), what `rollout_func` was asked for and returned, and how many LoRA tensors moved.

What TRL does with the export (read in trl/trainer/grpo_trainer.py, 1.9.0, and seen running here):
- `rollout_func(prompts, trainer)` gets the generation batch's prompts already repeated
  `num_generations` times and returns one completion per entry in that order; a dataset row's prompt
  here is the group's id, so each call returns that group's samples.
- TRL recomputes the advantages from the rewards (the group's std with Bessel's correction; ours has
  none): the exported `advantage` rides along for logging only.
- The exported logprobs are the sampling policy's for TRL's off-policy sequence masking
  (`off_policy_mask_threshold`, DeepSeek-V3.2's); its importance-sampling correction and its
  `sampling/*` mismatch metrics are tied to `use_vllm` (TRL's own generation), which an external
  rollout source does not use: rollout_trainer.mismatch measures the mismatch instead.
- `temperature` must be the sampling temperature (TRL divides the logits by it): the one recorded on
  the samples, which must be the same for every token.
- `max_completion_length` is not applied to completions that come from `rollout_func`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Optional

from rollout_export import Sample, SampleError

from .mismatch import samples_to_train_on


def sampling_temperature(samples: list[Sample]) -> float:
    """The one temperature every generated token was sampled at (TRL takes a single one)."""
    seen = {float(t) for s in samples for t, m in zip(s.extra.get("temperatures") or [], s.loss_mask) if m == 1 and t is not None}
    if len(seen) != 1:
        raise SampleError(f"TRL scales every token by one temperature; these samples were sampled at {sorted(seen) or 'no recorded temperature'}: export one sampling temperature, or train with rollout_trainer.grpo (per-token temperatures)")
    return seen.pop()


def trl_step(samples: list[Sample], gguf: str, lr: float = 1e-4, off_policy_mask_threshold: Optional[float] = None, out: str = "trl-output") -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing from a model hub: the model and tokenizer come from the GGUF
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from transformers.utils import logging as transformers_logging
    import trl
    from trl import GRPOConfig, GRPOTrainer

    from rollout_export.trainers import to_trl_rollout, trl_rollout_reward

    from .grpo import with_lora
    from .policy_model import load_policy

    transformers_logging.set_verbosity_error()
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        groups.setdefault(s.group_id, []).append(s)
    sizes = {len(members) for members in groups.values()}
    if len(sizes) != 1:
        raise SampleError(f"TRL takes groups of one size (num_generations); these have {sorted(sizes)} rollouts: export groups with every rollout valid, or train with rollout_trainer.grpo")
    size = sizes.pop()
    temperature = sampling_temperature(samples)

    asked: list[dict[str, Any]] = []

    def rollout_func(prompts: list[str], trainer: Any) -> dict[str, Any]:
        ids = [prompts[i] for i in range(0, len(prompts), size)]
        if [p for gid in ids for p in [gid] * size] != list(prompts):
            raise ValueError(f"rollout_func: prompts not in runs of {size} (TRL's num_generations): {prompts}")
        returned = to_trl_rollout([s for gid in ids for s in groups[gid]], num_generations=size)
        asked.append({"prompts": len(prompts), "groups": ids, "completions": len(returned["completion_ids"])})
        return returned

    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(gguf)), gguf_file=os.path.basename(gguf))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = with_lora(load_policy(gguf))
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    load_s = time.monotonic() - started

    logged: list[dict[str, Any]] = []

    class Capture(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Optional[dict[str, Any]] = None, **kwargs: Any) -> None:
            if logs:
                logged.append(dict(logs))

    config = GRPOConfig(
        output_dir=out,
        use_cpu=True,
        max_steps=1,
        num_generations=size,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=size * len(groups),  # one optimizer step over every group
        learning_rate=lr,
        temperature=temperature,
        off_policy_mask_threshold=off_policy_mask_threshold,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[trl_rollout_reward],
        args=config,
        train_dataset=Dataset.from_list([{"prompt": gid} for gid in groups]),
        processing_class=tokenizer,
        rollout_func=rollout_func,
        callbacks=[Capture()],
    )
    started = time.monotonic()
    trainer.train()
    train_s = time.monotonic() - started
    moved = {n: float((p.detach() - before[n]).abs().max()) for n, p in trainer.model.named_parameters() if n in before}
    step = next((entry for entry in logged if "loss" in entry), None)
    return {
        "trl": trl.__version__,
        "torch": torch.__version__,
        "groups": len(groups),
        "num_generations": size,
        "temperature": temperature,
        "rollout_func_calls": asked,
        "logged": step,
        "lora_tensors": len(moved),
        "lora_tensors_moved": sum(1 for v in moved.values() if v > 0),
        "lora_max_abs_change": max(moved.values(), default=0.0),
        "load_s": round(load_s, 1),
        "train_s": round(train_s, 1),
    }


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rollout_trainer.trl_step", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", required=True, help="a `rollout export` JSONL file")
    parser.add_argument("--gguf", required=True, help="the GGUF file the inference server runs")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--off-policy-mask-threshold", type=float, help="TRL's off-policy sequence masking against the exported (sampling) logprobs")
    parser.add_argument("--out", default="trl-output", help="TRL's output_dir (nothing is saved there: save_strategy no)")
    args = parser.parse_args(argv)
    from .command import run_command

    return run_command("rollout_trainer.trl_step", lambda: print(json.dumps(trl_step(samples_to_train_on(args.samples), args.gguf, args.lr, args.off_policy_mask_threshold, args.out), default=str)))

if __name__ == "__main__":
    sys.exit(main())
