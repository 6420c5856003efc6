"""One GRPO step on exported samples, with a LoRA on the policy: the clipped importance ratio of the
trainer's log probability of each generated token against the server's (the old policy's, as sampled),
times the sample's exported advantage, averaged over every loss-mask token of the batch (token-level,
as DAPO and prime-rl normalise); tool observations and the prompt are masked out.

    python -m rollout_trainer.grpo --samples export.jsonl --gguf model.gguf [--lr 1e-4] [--out DIR]

prints one JSON object: the train-inference mismatch before the step (rollout_trainer.mismatch; also
with every token rescored at each `--also-at T`), the loss, and per sample its advantage and how far
the mean log probability of its generated tokens moved (after minus before, at the sampling
temperatures). `--out` saves the LoRA adapter (PEFT's format)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Optional

from rollout_export import Sample, SampleError

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


def mean_generated_logprob(model: Any, s: Sample, temperatures: list[Optional[float]]) -> float:
    import torch

    with torch.no_grad():
        _, lps = generated_logprobs(model, s, temperatures)
    return float(lps.mean())


def grpo_step(model: Any, samples: list[Sample], lr: float = 1e-4, clip: float = 0.2, temperature: Optional[float] = None) -> dict[str, Any]:
    """One optimizer step of the clipped GRPO objective over `samples`; returns what moved."""
    import torch

    temps = [token_temperatures(s, temperature) for s in samples]
    if all(s.advantage == 0 for s in samples):
        raise SampleError("every sample has advantage 0 (each group's rollouts earned the same reward): a GRPO step on them changes nothing; train on groups whose rewards differ")
    before: list[float] = []
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameter: add the LoRA first (with_lora)")
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
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
        loss_sum += float(loss)
    optimizer.step()
    after = [mean_generated_logprob(model, s, t) for s, t in zip(samples, temps)]
    return {
        "loss": loss_sum,
        "tokens": total_tokens,
        "lr": lr,
        "per_sample": [
            {"rollout_id": s.rollout_id, "advantage": s.advantage, "mean_logprob_before": b, "mean_logprob_after": a, "moved": a - b}
            for s, b, a in zip(samples, before, after)
        ],
    }


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rollout_trainer.grpo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sample_arguments(parser)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--clip", type=float, default=0.2)
    parser.add_argument("--out", help="a directory to save the LoRA adapter in")
    args = parser.parse_args(argv)
    from .policy_model import PolicyModelError, load_policy

    try:
        samples = samples_to_train_on(args.samples)
        model = with_lora(load_policy(args.gguf))  # a fresh LoRA adds nothing yet: the mismatch is the base model's
        report: dict[str, Any] = {
            "mismatch": measure(model, samples, args.temperature),
            "mismatch_also_at": [{"temperature": t, **measure(model, samples, t)} for t in args.also_at],
        }
        report.update(grpo_step(model, samples, lr=args.lr, clip=args.clip, temperature=args.temperature))
        if args.out:
            model.save_pretrained(args.out)
            report["adapter"] = args.out
        print(json.dumps(report))
    except (SampleError, PolicyModelError, OSError) as err:
        print(f"rollout_trainer.grpo: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
