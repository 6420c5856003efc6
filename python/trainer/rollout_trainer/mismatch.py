"""Train-inference mismatch: for every generated token of the exported samples, the trainer's log
probability (the policy's logits at the position before it, divided by the temperature the token was
sampled at, log-softmaxed) against the logprob the inference server reported for it. Reported over the
loss-mask tokens as prime-rl and verl do: the mean k3 estimate of KL(server || trainer)
((r - 1) - log r with r = p_trainer / p_server, on tokens the server sampled), and the mean and max
|delta logprob|.

    python -m rollout_trainer.mismatch --samples export.jsonl --gguf model.gguf [--temperature T]

prints one JSON object (and one more per --also-at T). The server's logprobs must be those of the distribution it sampled from
(rollout export leaves out samples whose are not, unless told otherwise)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Optional

from rollout_export import Sample, SampleError, read_samples


def token_temperatures(s: Sample, override: Optional[float]) -> list[Optional[float]]:
    """The sampling temperature of each generated token (None elsewhere)."""
    recorded = s.extra.get("temperatures") or [None] * len(s.input_ids)
    out: list[Optional[float]] = []
    for t, (m, temp) in enumerate(zip(s.loss_mask, recorded)):
        if m != 1:
            out.append(None)
        elif override is not None:
            out.append(override)
        elif temp is None:
            raise SampleError(f"{s.rollout_id}: token {t} has no recorded sampling temperature; pass --temperature with the one the server used")
        else:
            out.append(float(temp))
    return out


def trainer_logprobs(model: Any, s: Sample, temperatures: list[Optional[float]]) -> list[Optional[float]]:
    """The model's log probability of each generated token of `s` at its temperature."""
    import torch

    ids = torch.tensor([s.input_ids], dtype=torch.long)
    with torch.no_grad():
        logits = model(ids).logits[0].float()  # [T, V]: position t predicts token t + 1
    out: list[Optional[float]] = [None] * len(s.input_ids)
    for t, temp in enumerate(temperatures):
        if temp is None or t == 0:
            continue
        if temp <= 0:
            raise SampleError(f"{s.rollout_id}: token {t} was sampled at temperature {temp} (greedy): its logprob is not a sampling probability")
        out[t] = float(torch.log_softmax(logits[t - 1] / temp, dim=-1)[s.input_ids[t]])
    return out


def measure(model: Any, samples: list[Sample], temperature: Optional[float] = None) -> dict[str, Any]:
    """The mismatch over every generated token of `samples`, and per sample."""
    per_sample = []
    deltas: list[float] = []
    k3s: list[float] = []
    for s in samples:
        temps = token_temperatures(s, temperature)
        ours = trainer_logprobs(model, s, temps)
        d_sample: list[float] = []
        for t, m in enumerate(s.loss_mask):
            if m != 1:
                continue
            server, trainer = s.logprobs[t], ours[t]
            if server is None or trainer is None:
                raise SampleError(f"{s.rollout_id}: token {t} is generated but has no logprob on the {'server' if server is None else 'trainer'} side")
            delta = trainer - server
            d_sample.append(delta)
            k3s.append(math.expm1(delta) - delta)
        deltas.extend(d_sample)
        per_sample.append({"rollout_id": s.rollout_id, "tokens": len(d_sample), "mean_abs_delta": sum(abs(d) for d in d_sample) / max(1, len(d_sample)), "max_abs_delta": max((abs(d) for d in d_sample), default=0.0)})
    n = len(deltas)
    return {
        "samples": len(samples),
        "tokens": n,
        "mean_k3_kl": sum(k3s) / n if n else 0.0,
        "mean_abs_delta": sum(abs(d) for d in deltas) / n if n else 0.0,
        "max_abs_delta": max((abs(d) for d in deltas), default=0.0),
        "mean_delta": sum(deltas) / n if n else 0.0,
        "per_sample": per_sample,
    }


def add_sample_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments every trainer command takes: the samples, the model, the temperatures."""
    parser.add_argument("--samples", required=True, help="a `rollout export` JSONL file")
    parser.add_argument("--gguf", required=True, help="the GGUF file the inference server runs")
    parser.add_argument("--temperature", type=float, help="the sampling temperature of every generated token, instead of the recorded ones")
    parser.add_argument("--also-at", type=float, action="append", default=[], metavar="T", help="also report the mismatch with every token rescored at temperature T (a distribution that is not the sampling one)")


def samples_to_train_on(path: str) -> list[Sample]:
    """The checked samples of an export file; none at all is an error that says how to get some."""
    samples = list(read_samples(path))
    if not samples:
        raise SampleError(f"{path} has no sample: export a batch with valid rollouts (rollout export BATCH --out FILE)")
    return samples


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rollout_trainer.mismatch", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_sample_arguments(parser)
    args = parser.parse_args(argv)
    from .command import run_command
    from .policy_model import load_policy

    def work() -> None:
        samples = samples_to_train_on(args.samples)
        model = load_policy(args.gguf)
        print(json.dumps({"temperature": args.temperature, **measure(model, samples, args.temperature)}))
        for t in args.also_at:
            print(json.dumps({"temperature": t, **measure(model, samples, t)}))

    return run_command("rollout_trainer.mismatch", work)

if __name__ == "__main__":
    sys.exit(main())
