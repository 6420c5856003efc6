"""One GRPO step on exported samples, with a LoRA on the policy: the clipped importance ratio of the
trainer's log probability of each generated token against the server's (the old policy's, as sampled),
times the sample's exported advantage, averaged over every loss-mask token of the batch (token-level,
as DAPO and prime-rl normalise); tool observations and the prompt are masked out.

    python -m rollout_trainer.grpo --samples export.jsonl --gguf model.gguf [--lr 1e-4]
        [--resume DIR] [--out DIR [--convert]]

prints one JSON object: the train-inference mismatch before the step (rollout_trainer.mismatch; also
with every token rescored at each `--also-at T`), the loss, and per sample its advantage and how far
the mean log probability of its generated tokens moved (after minus before, at the sampling
temperatures).

`--out DIR` saves the trainer's state after the step: the LoRA adapter (PEFT's format), the
optimizer's state and the step number (`--resume DIR` continues from them), the base model's
config.json (base-config/), and the trainer's log probability of every generated token after the step
(trainer_logprobs.jsonl: what the server must report once it serves the new weights). `--convert` also
writes DIR/adapter.gguf with llama.cpp's converter (rollout_trainer.adapter_gguf), for `llama-server
--lora`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Optional

from rollout_export import Sample, SampleError

from .adapter_gguf import convert_adapter, write_base_config
from .mismatch import add_sample_arguments, measure, samples_to_train_on, token_temperatures

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


def with_lora(model: Any, rank: int = 8, alpha: int = 16) -> Any:
    """The model with a trainable LoRA on its attention projections (everything else frozen)."""
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=list(LORA_TARGETS), task_type="CAUSAL_LM"))


def generated_logprobs(model: Any, s: Sample, temperatures: list[Optional[float]]) -> tuple[Any, Any]:
    """(positions of the generated tokens, the model's log probabilities of them at their temperatures), with gradients."""
    import torch

    ids = torch.tensor([s.input_ids], dtype=torch.long)
    logits = model(ids).logits[0].float()
    positions = torch.tensor([t for t, temp in enumerate(temperatures) if temp is not None and t > 0], dtype=torch.long)
    temps = torch.tensor([temperatures[int(t)] for t in positions], dtype=torch.float32)
    scaled = logits[positions - 1] / temps.unsqueeze(-1)
    return positions, torch.log_softmax(scaled, dim=-1).gather(-1, ids[0, positions].unsqueeze(-1)).squeeze(-1)


def generated_logprobs_after(model: Any, s: Sample, temperatures: list[Optional[float]]) -> tuple[list[int], list[float]]:
    """(positions, log probabilities) of the generated tokens, without gradients."""
    import torch

    with torch.no_grad():
        positions, lps = generated_logprobs(model, s, temperatures)
    return [int(p) for p in positions], [float(x) for x in lps]


def make_optimizer(model: Any, lr: float) -> Any:
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameter: add the LoRA first (with_lora)")
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.0)


def grpo_step(model: Any, samples: list[Sample], lr: float = 1e-4, clip: float = 0.2, temperature: Optional[float] = None, optimizer: Any = None) -> dict[str, Any]:
    """One optimizer step of the clipped GRPO objective over `samples`; returns what moved (and, under
    "after", each sample's generated positions and their log probabilities after the step)."""
    import torch

    temps = [token_temperatures(s, temperature) for s in samples]
    if all(s.advantage == 0 for s in samples):
        raise SampleError("every sample has advantage 0 (each group's rollouts earned the same reward): a GRPO step on them changes nothing; train on groups whose rewards differ")
    before: list[float] = []
    if optimizer is None:
        optimizer = make_optimizer(model, lr)
    optimizer.zero_grad()
    total_tokens = sum(sum(1 for x in t if x is not None) for t in temps)
    loss_sum = 0.0
    for s, t in zip(samples, temps):
        positions, new = generated_logprobs(model, s, t)
        before.append(float(new.detach().mean()))  # the weights before the step: no pass of its own
        old = torch.tensor([s.logprobs[int(p)] for p in positions], dtype=torch.float32)
        ratio = torch.exp(new - old)
        advantage = torch.tensor(s.advantage, dtype=torch.float32)
        objective = torch.minimum(ratio * advantage, torch.clamp(ratio, 1 - clip, 1 + clip) * advantage)
        loss = -objective.sum() / total_tokens
        loss.backward()  # one sample at a time: the activations of one sequence in memory, not the batch's
        loss_sum += float(loss.detach())
    optimizer.step()
    after_tokens = [generated_logprobs_after(model, s, t) for s, t in zip(samples, temps)]
    after = [sum(lps) / len(lps) if lps else 0.0 for _, lps in after_tokens]
    return {
        "loss": loss_sum,
        "tokens": total_tokens,
        "lr": lr,
        "per_sample": [
            {"rollout_id": s.rollout_id, "advantage": s.advantage, "mean_logprob_before": b, "mean_logprob_after": a, "moved": a - b}
            for s, b, a in zip(samples, before, after)
        ],
        "after": [{"rollout_id": s.rollout_id, "positions": pos, "logprobs": lps} for s, (pos, lps) in zip(samples, after_tokens)],
    }


STATE_FILE = "trainer_state.json"
OPTIMIZER_FILE = "optimizer.pt"


def resume(model: Any, directory: str, lr: float) -> tuple[Any, Any, int]:
    """(the model with the LoRA saved in `directory`, trainable; its optimizer with the saved state; the steps done)."""
    import torch
    from peft import PeftModel

    state_path = os.path.join(directory, STATE_FILE)
    if not os.path.isfile(state_path):
        raise ValueError(f"--resume {directory}: no {STATE_FILE} there (a directory rollout_trainer.grpo --out wrote)")
    with open(state_path, encoding="utf-8") as f:
        state = json.load(f)
    peft_model = PeftModel.from_pretrained(model, directory, is_trainable=True)
    optimizer = make_optimizer(peft_model, lr)
    optimizer.load_state_dict(torch.load(os.path.join(directory, OPTIMIZER_FILE), weights_only=True))
    for group in optimizer.param_groups:
        group["lr"] = lr
    return peft_model, optimizer, int(state["step"])


def save(model: Any, optimizer: Any, step: int, report: dict[str, Any], directory: str, convert: bool) -> None:
    """The trainer's state after `step` in `directory` (see the module's docstring)."""
    import torch

    model.save_pretrained(directory)
    torch.save(optimizer.state_dict(), os.path.join(directory, OPTIMIZER_FILE))
    base_config = os.path.join(directory, "base-config")
    write_base_config(model, base_config)
    with open(os.path.join(directory, "trainer_logprobs.jsonl"), "w", encoding="utf-8") as f:
        for entry in report["after"]:
            f.write(json.dumps(entry) + "\n")
    with open(os.path.join(directory, STATE_FILE), "w", encoding="utf-8") as f:
        json.dump({"step": step, "lr": report["lr"]}, f)
    report["adapter"] = directory
    if convert:
        report["adapter_gguf"] = convert_adapter(directory, base_config, os.path.join(directory, "adapter.gguf"))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rollout_trainer.grpo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sample_arguments(parser)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--clip", type=float, default=0.2)
    parser.add_argument("--resume", metavar="DIR", help="continue from the state an earlier step saved with --out")
    parser.add_argument("--out", metavar="DIR", help="save the trainer's state after the step here")
    parser.add_argument("--convert", action="store_true", help="with --out: also write DIR/adapter.gguf for llama-server --lora")
    args = parser.parse_args(argv)
    if args.convert and not args.out:
        parser.error("--convert writes into the --out directory: name one")
    from .command import run_command
    from .policy_model import load_policy

    def work() -> None:
        samples = samples_to_train_on(args.samples)
        base = load_policy(args.gguf)
        if args.resume:
            model, optimizer, done = resume(base, args.resume, args.lr)
        else:  # a fresh LoRA adds nothing yet: the mismatch is the base model's
            model, done = with_lora(base), 0
            optimizer = make_optimizer(model, args.lr)
        report: dict[str, Any] = {
            "step": done + 1,
            "mismatch": measure(model, samples, args.temperature),
            "mismatch_also_at": [{"temperature": t, **measure(model, samples, t)} for t in args.also_at],
        }
        report.update(grpo_step(model, samples, lr=args.lr, clip=args.clip, temperature=args.temperature, optimizer=optimizer))
        if args.out:
            save(model, optimizer, done + 1, report, args.out, args.convert)
        del report["after"]  # in trainer_logprobs.jsonl; too long for the report line
        print(json.dumps(report))

    return run_command("rollout_trainer.grpo", work)

if __name__ == "__main__":
    sys.exit(main())
