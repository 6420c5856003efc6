"""Checked samples in the shapes the trainers people use take in, field for field as their sources
define them (read 2026-12-02; the source file and version of each is named below):

- TRL's GRPOTrainer `rollout_func` return value (trl/trainer/grpo_trainer.py, v1.9.0):
  `prompt_ids`, `completion_ids`, `logprobs` (per completion token), `env_mask` (1 = model token);
  every other key reaches the reward functions as a keyword argument. `rollout_func(prompts,
  trainer)` gets the generation batch's prompts already repeated `num_generations` times (the
  RepeatSampler's), and must return one completion per entry, in that order. TRL reads `logprobs`
  only with `use_vllm` (importance-sampling correction, `sampling/*` metrics) or with
  `off_policy_mask_threshold`; otherwise its ratio is against its own forward pass and they go
  unused. Set GRPOConfig `temperature` to the sampling temperature: TRL scales the logits by it.
- verl's `AgentLoopOutput` (verl/experimental/agent_loop/agent_loop.py, v0.9.0): `prompt_ids`,
  `response_ids`, `response_mask`, `response_logprobs`, `reward_score`, `num_turns`, `metrics`,
  `extra_fields` (the policy-version span as `min_global_steps` / `max_global_steps`).
- SkyRL's `GeneratorOutput` (skyrl/train/generators/base.py, skyrl_train 0.4): every key present,
  unused ones None; masks and logprobs over the response; `trajectory_ids` as
  (instance_id, repetition_id).
- prime-rl's `TrainingSample` (src/prime_rl/transports/rollouts/types.py, v0.8.0): one flat
  sequence, `token_ids`, `mask`, `logprobs`, `temperatures`, `env_name`, `advantages`, all as long
  as `token_ids`.

The prompt is everything before the first generated token; the response (completion) is the rest,
the tool observations between turns included with mask 0 and logprob 0.0, as each of these
trainers' own agent loops write them. The functions return plain dicts and lists (no trainer is
imported): pass them on as they are (`AgentLoopOutput(**d)`, `TrainingSample(**d)`, the dict from
your `rollout_func`).

TRL, verl and SkyRL compute advantages themselves from the reward; prime-rl takes ours per token.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Optional

from .samples import Sample, SampleError


def prompt_length(s: Sample) -> int:
    """Tokens before the first generated one: the prompt the policy was first given."""
    for i, m in enumerate(s.loss_mask):
        if m == 1:
            return i
    raise SampleError(f"{s.rollout_id}: no generated token, so no response to train on (a rollout whose policy never produced ids; export left it in by mistake)")


def _response(s: Sample) -> tuple[int, list[int], list[int], list[float]]:
    p = prompt_length(s)
    return p, s.input_ids[p:], s.loss_mask[p:], [0.0 if lp is None else float(lp) for lp in s.logprobs[p:]]


def _messages(s: Sample) -> int:
    """Chat turns in the sequence: the prompt, each generated span, and each observation after one."""
    p = prompt_length(s)
    turns = 1
    previous = None
    for m in s.loss_mask[p:]:
        if m != previous:
            turns += 1
            previous = m
    return turns


def _groups_in_order(samples: list[Sample]) -> "OrderedDict[str, list[Sample]]":
    groups: "OrderedDict[str, list[Sample]]" = OrderedDict()
    for s in samples:
        groups.setdefault(s.group_id, []).append(s)
    for members in groups.values():
        members.sort(key=lambda m: m.rollout_index)
    return groups


def to_trl_rollout(samples: list[Sample], num_generations: Optional[int] = None) -> dict[str, list[Any]]:
    """What a TRL GRPOTrainer `rollout_func` returns for these samples: one completion per
    sample, each group's rollouts contiguous and in order (TRL reshapes the rewards to
    `(-1, num_generations)`), so every group must have `num_generations` samples. The rollout's
    reward is the extra key `rollout_reward` (use `trl_rollout_reward` as the reward function);
    `rollout_id`, `task_id` and `advantage` ride along for logging only: TRL recomputes the
    advantage from the rewards, with Bessel's correction on the group std (ours has none)."""
    groups = _groups_in_order(samples)
    sizes = {gid: len(members) for gid, members in groups.items()}
    want = num_generations if num_generations is not None else (next(iter(sizes.values())) if sizes else 0)
    uneven = {gid: n for gid, n in sizes.items() if n != want}
    if uneven:
        listed = ", ".join(f"{gid} has {n}" for gid, n in list(uneven.items())[:3])
        raise SampleError(f"TRL groups rollouts by position, {want} per prompt, but {listed}: rollouts left out of the export (broken or stale) make a group short. Fix: keep whole groups only (drop the short ones before this call) or set num_generations to match")
    out: dict[str, list[Any]] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "rollout_reward", "advantage", "rollout_id", "task_id")}
    for members in groups.values():
        for s in members:
            p, response, mask, logprobs = _response(s)
            out["prompt_ids"].append(s.input_ids[:p])
            out["completion_ids"].append(response)
            out["logprobs"].append(logprobs)
            out["env_mask"].append(mask)
            out["rollout_reward"].append(s.reward)
            out["advantage"].append(s.advantage)
            out["rollout_id"].append(s.rollout_id)
            out["task_id"].append(s.task_id)
    return out


def trl_rollout_reward(completions: list[Any], rollout_reward: list[float], **_: Any) -> list[float]:
    """A TRL reward function that returns the verifier's reward the rollout earned."""
    return list(rollout_reward)


def to_verl_agent_loop_output(s: Sample) -> dict[str, Any]:
    """The fields of verl's AgentLoopOutput for one sample (`AgentLoopOutput(**d)`)."""
    p, response, mask, logprobs = _response(s)
    return {
        "prompt_ids": s.input_ids[:p],
        "response_ids": response,
        "response_mask": mask,
        "response_logprobs": logprobs,
        "reward_score": s.reward,
        "num_turns": _messages(s),
        "metrics": {"generate_sequences": 0.0, "tool_calls": 0.0, "compute_score": 0.0, "num_preempted": -1},
        "extra_fields": {
            "min_global_steps": min(s.policy_versions) if s.policy_versions else None,
            "max_global_steps": max(s.policy_versions) if s.policy_versions else None,
            "rollout_id": s.rollout_id,
            "group_id": s.group_id,
            "task_id": s.task_id,
        },
    }


@dataclass(frozen=True)
class TrajectoryID:
    """SkyRL's TrajectoryID, field for field: the group's task instance and the rollout's index in it."""

    instance_id: str
    repetition_id: int


def to_skyrl_generator_output(samples: list[Sample]) -> dict[str, Any]:
    """SkyRL's GeneratorOutput for these samples: every key present, the unused ones None."""
    parts = [_response(s) for s in samples]
    return {
        "prompt_token_ids": [s.input_ids[:p] for s, (p, _, _, _) in zip(samples, parts)],
        "response_ids": [response for _, response, _, _ in parts],
        "rewards": [s.reward for s in samples],
        "loss_masks": [mask for _, _, mask, _ in parts],
        "stop_reasons": [f"{s.outcome.get('class', '')}/{s.outcome.get('type', '')}" for s in samples],
        "rollout_metrics": None,
        "rollout_logprobs": [logprobs for _, _, _, logprobs in parts],
        "trajectory_ids": [TrajectoryID(instance_id=s.group_id, repetition_id=s.rollout_index) for s in samples],
        "trajectory_generation_times": None,
        "trajectory_time_splits": None,
        "rollout_expert_indices": None,
        "is_last_step": None,
        "env_metrics": None,
        "pixel_values": None,
        "image_grid_thw": None,
    }


def to_prime_rl_training_sample(s: Sample, env_name: str, default_temperature: Optional[float] = None) -> dict[str, Any]:
    """prime-rl's TrainingSample for one sample. prime-rl scales the logits that predict token t
    by `temperatures[t-1]`, so token t's sampling temperature goes there. A generated token whose
    temperature was not recorded takes `default_temperature`, or is an error without one."""
    n = len(s.input_ids)
    recorded: list[Optional[float]] = list(s.extra.get("temperatures") or [None] * n)
    mask = [m == 1 for m in s.loss_mask]
    known = [t for t, m in zip(recorded, mask) if m and t is not None]
    base = known[0] if known and all(t == known[0] for t in known) else (default_temperature if default_temperature is not None else 1.0)
    temperatures = [float(base)] * n
    for t in range(1, n):
        if not mask[t]:
            continue
        value = recorded[t] if recorded[t] is not None else default_temperature
        if value is None:
            raise SampleError(f"{s.rollout_id}: token {t} was generated with no recorded sampling temperature, which prime-rl divides the logits by; pass default_temperature= the temperature the server used")
        temperatures[t - 1] = float(value)
    return {
        "token_ids": list(s.input_ids),
        "mask": mask,
        "logprobs": [0.0 if lp is None else float(lp) for lp in s.logprobs],
        "temperatures": temperatures,
        "env_name": env_name,
        "advantages": [s.advantage if m else 0.0 for m in mask],
    }
