"""Reads a `rollout export` JSONL into the arrays a trainer feeds its loss.

    python load_export.py samples.jsonl [--pad-id N]

Each line is one rollout: input_ids, loss_mask (1 on tokens the policy
generated), logprobs aligned to input_ids (null where not generated), reward,
advantage, policy_versions, token_integrity, ... (`rollout export --help`).
Every sample is checked (same lengths, a logprob exactly where the mask is 1,
logprobs <= 0) and the batch is padded to the longest sample:

    input_ids       [N][T]  int, padded with --pad-id (default 0)
    attention_mask  [N][T]  1 on real tokens
    loss_mask       [N][T]  1 on generated tokens
    old_logprobs    [N][T]  float, 0.0 where loss_mask is 0
    advantages      [N]     float; rewards [N]

Plain Python lists (no dependencies); with numpy installed they become arrays.
Prints a JSON summary; exits 1 naming the line of the first bad sample.
"""

import json
import sys


def check(sample, line):
    n = len(sample["input_ids"])
    for field in ("loss_mask", "logprobs"):
        if len(sample[field]) != n:
            raise ValueError(f"line {line}: {field} has {len(sample[field])} entries for {n} input_ids")
    for i, (m, lp) in enumerate(zip(sample["loss_mask"], sample["logprobs"])):
        if (m == 1) != (lp is not None):
            raise ValueError(f"line {line}: position {i} has loss_mask {m} but logprob {lp}")
        if lp is not None and lp > 0:
            raise ValueError(f"line {line}: position {i} has logprob {lp} > 0")


def load(path, pad_id=0):
    samples = []
    with open(path, encoding="utf-8") as f:
        for line, text in enumerate(f, 1):
            if text.strip():
                sample = json.loads(text)
                check(sample, line)
                samples.append(sample)
    width = max((len(s["input_ids"]) for s in samples), default=0)

    def pad(values, fill):
        return list(values) + [fill] * (width - len(values))

    batch = {
        "input_ids": [pad(s["input_ids"], pad_id) for s in samples],
        "attention_mask": [pad([1] * len(s["input_ids"]), 0) for s in samples],
        "loss_mask": [pad(s["loss_mask"], 0) for s in samples],
        "old_logprobs": [pad([0.0 if lp is None else lp for lp in s["logprobs"]], 0.0) for s in samples],
        "advantages": [float(s["advantage"]) for s in samples],
        "rewards": [float(s["reward"]) for s in samples],
    }
    try:
        import numpy as np  # optional
    except ImportError:
        return samples, batch
    return samples, {k: np.asarray(v) for k, v in batch.items()}


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    pad_id = int(args[args.index("--pad-id") + 1]) if "--pad-id" in args else 0
    try:
        samples, batch = load(args[0], pad_id)
    except (ValueError, KeyError, json.JSONDecodeError) as err:
        print(f"load_export: {args[0]}: {err}", file=sys.stderr)
        return 1
    ids = batch["input_ids"]
    print(
        json.dumps(
            {
                "samples": len(samples),
                "shape": [len(ids), len(ids[0]) if len(ids) else 0],
                "generated_tokens": int(sum(sum(row) for row in batch["loss_mask"])),
                "advantages": [float(a) for a in batch["advantages"]],
                "policy_versions": [s["policy_versions"] for s in samples],
                "integrity": sorted({s["token_integrity"]["status"] for s in samples}),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
