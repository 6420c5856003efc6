"""One exported rollout as a typed sample, the checks a trainer runs before using it, and the
padded arrays it feeds its loss. The checks are those of client/export/trainingSample.ts
(`sampleProblems`): every array as long as input_ids, token ids that are ids, a logprob exactly
where loss_mask is 1 and none elsewhere, logprobs <= 0, completion spans covering exactly the
masked tokens, a temperature only on generated tokens; unless broken samples were asked for,
token_integrity ok; and unless asked for, no logprob_mismatch (logprobs that are not those of the
distribution that sampled the tokens)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

REQUIRED = (
    "rollout_id", "group_id", "batch_id", "task_id", "task_version", "rollout_index",
    "input_ids", "loss_mask", "logprobs", "completion_spans", "reward", "advantage",
    "policy_versions", "outcome", "token_integrity", "staleness", "stale",
)


class SampleError(ValueError):
    """A sample a trainer must not use; the message names the file, line and problem."""


@dataclass(frozen=True)
class Sample:
    rollout_id: str
    group_id: str
    batch_id: str
    task_id: str
    task_version: str
    rollout_index: int
    input_ids: list[int]
    loss_mask: list[int]
    logprobs: list[Optional[float]]
    completion_spans: list[Optional[tuple[int, int]]]
    reward: float
    advantage: float
    policy_versions: list[int]
    outcome: dict[str, str]
    token_integrity: dict[str, Any]
    staleness: Optional[int]
    stale: bool
    # Fields a newer exporter added, kept as they came.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def generated_tokens(self) -> int:
        return sum(self.loss_mask)


def sample_problems(s: dict[str, Any]) -> list[str]:
    """What is wrong with a sample's token arrays; empty when it is sound (trainingSample.ts)."""
    problems: list[str] = []
    ids, mask, lps, spans = s["input_ids"], s["loss_mask"], s["logprobs"], s["completion_spans"]
    n = len(ids)
    if len(mask) != n:
        problems.append(f"loss_mask has {len(mask)} entries for {n} input_ids")
    if len(lps) != n:
        problems.append(f"logprobs has {len(lps)} entries for {n} input_ids")
    for i, token in enumerate(ids):
        if not isinstance(token, int) or isinstance(token, bool) or token < 0:
            problems.append(f"input_ids[{i}] = {token!r} is not a token id")
        m = mask[i] if i < len(mask) else None
        lp = lps[i] if i < len(lps) else None
        if m not in (0, 1):
            problems.append(f"position {i}: loss_mask {m!r} is neither 0 nor 1")
        if (m == 1) != (lp is not None):
            problems.append(f"position {i}: loss_mask {m} but logprob {lp}")
        if lp is not None and (not isinstance(lp, (int, float)) or not math.isfinite(lp) or lp > 0):
            problems.append(f"position {i}: logprob {lp} is not <= 0")
    temps = s.get("temperatures")
    if temps is not None:
        if len(temps) != n:
            problems.append(f"temperatures has {len(temps)} entries for {n} input_ids")
        for i, t in enumerate(temps):
            if t is not None and (not isinstance(t, (int, float)) or not t >= 0):
                problems.append(f"position {i}: temperature {t!r} is not a temperature")
            if t is not None and i < len(mask) and mask[i] != 1:
                problems.append(f"position {i}: a temperature where loss_mask is {mask[i]}")
    covered = 0
    for k, span in enumerate(spans):
        if span is None:
            continue
        start, end = span
        if not (0 <= start <= end <= n):
            problems.append(f"completion_spans[{k}] = [{start}, {end}] is outside the {n} input_ids")
        covered += end - start
    masked = sum(1 for m in mask if m == 1)
    if covered != masked:
        problems.append(f"completion spans cover {covered} tokens, the loss mask {masked}")
    return problems


def _sample(raw: dict[str, Any], where: str, keep_broken: bool, keep_mismatched_logprobs: bool) -> Sample:
    missing = [f for f in REQUIRED if f not in raw]
    if missing:
        raise SampleError(f"{where}: no {', '.join(missing)} (not a `rollout export` sample, or from an older exporter)")
    problems = sample_problems(raw)
    status = raw["token_integrity"].get("status")
    if status != "ok" and not keep_broken:
        problems.append(f"token_integrity is {status} ({raw['token_integrity'].get('reason', '')}); read with keep_broken=True to take such samples")
    mismatch = raw.get("logprob_mismatch")
    if mismatch is not None and not keep_mismatched_logprobs:
        problems.append(f"its logprobs are not those of the distribution that sampled the tokens ({mismatch}); read with keep_mismatched_logprobs=True to take such samples")
    if not isinstance(raw["reward"], (int, float)) or not isinstance(raw["advantage"], (int, float)):
        problems.append(f"reward {raw['reward']!r} and advantage {raw['advantage']!r} must be numbers")
    if problems:
        raise SampleError(f"{where} ({raw['rollout_id']}): " + "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else ""))
    known = {k: raw[k] for k in REQUIRED}
    known["completion_spans"] = [None if s is None else (int(s[0]), int(s[1])) for s in raw["completion_spans"]]
    known["reward"], known["advantage"] = float(raw["reward"]), float(raw["advantage"])
    return Sample(**known, extra={k: v for k, v in raw.items() if k not in known})


def read_samples(path: str, keep_broken: bool = False, keep_mismatched_logprobs: bool = False) -> Iterator[Sample]:
    """The samples of an export file, each checked; raises SampleError at the first bad line."""
    with open(path, encoding="utf-8") as f:
        for line, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as err:
                raise SampleError(f"{path} line {line}: not JSON: {err}") from err
            yield _sample(raw, f"{path} line {line}", keep_broken, keep_mismatched_logprobs)


def collate(samples: list[Sample], pad_id: int = 0) -> dict[str, Any]:
    """Pads the samples to the longest: input_ids, attention_mask, loss_mask, old_logprobs [N][T]
    (0.0 where not generated), temperatures [N][T], advantages, rewards [N]; numpy arrays when numpy is installed."""
    width = max((len(s.input_ids) for s in samples), default=0)

    def pad(values: list[Any], fill: Any) -> list[Any]:
        return list(values) + [fill] * (width - len(values))

    batch: dict[str, Any] = {
        "input_ids": [pad(s.input_ids, pad_id) for s in samples],
        "attention_mask": [pad([1] * len(s.input_ids), 0) for s in samples],
        "loss_mask": [pad(s.loss_mask, 0) for s in samples],
        "old_logprobs": [pad([0.0 if lp is None else lp for lp in s.logprobs], 0.0) for s in samples],
        # Sampling temperature per generated token (1.0 where nothing was generated or nothing says).
        "temperatures": [pad([1.0 if t is None else t for t in s.extra.get("temperatures") or [None] * len(s.input_ids)], 1.0) for s in samples],
        "advantages": [s.advantage for s in samples],
        "rewards": [s.reward for s in samples],
    }
    try:
        import numpy as np  # optional
    except ImportError:
        return batch
    return {k: np.asarray(v) for k, v in batch.items()}
