"""Branches a rollout at a turn through `rollout branch` (the same checks and workflows the
TypeScript client uses): N rollouts that share its turns 0..K-1 and sample on from turn K.

    from rollout_export import branch_rollout, pull_batch
    branches = branch_rollout("rollout/my-batch/my-task/3", at_turn=4, n=8)
    samples = pull_batch(branches.batch_id)   # each with parent_rollout_id, branch_turn, prefix_length

The `rollout` command and Temporal are found as pull_batch finds them (pull.py)."""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from .pull import rollout_command


class BranchError(RuntimeError):
    """`rollout branch` refused or failed; the message is its own (it names the thing and the fix)."""


@dataclass
class Branches:
    batch_id: str
    parent: str
    at_turn: int
    # Each branch's RolloutResult as the workflow returned it (reward, advantage, branch, attemptHistory, ...).
    rollouts: list[dict[str, Any]] = field(default_factory=list)
    # The group's status: complete, insufficient, ...
    status: str = ""


def branch_rollout(
    rollout_id: str,
    at_turn: int,
    n: int = 2,
    *,
    rollout: Optional[Sequence[str]] = None,
    address: Optional[str] = None,
    store: Optional[str] = None,
    data_dir: Optional[str] = None,
    batch_id: Optional[str] = None,
    timeout: float = 3600.0,
) -> Branches:
    """Starts n branches of the rollout at turn at_turn and waits for them (needs workers running)."""
    args = [*rollout_command(rollout), "branch", rollout_id, "--at-turn", str(at_turn), "-n", str(n), "--json"]
    for flag, value in (("--address", address), ("--store", store), ("--data-dir", data_dir), ("--batch-id", batch_id)):
        if value is not None:
            args += [flag, value]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError as err:
        raise BranchError(f"cannot run {args[0]}: {err}; set ROLLOUT_CLI to the rollout command") from err
    except subprocess.TimeoutExpired as err:
        raise BranchError(f"`{shlex.join(args)}` took over {timeout:.0f} s (are workers serving the rollout's task queues?)") from err
    if done.returncode != 0:
        raise BranchError(done.stderr.strip() or f"`{shlex.join(args)}` exited {done.returncode}")
    groups = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if len(groups) != 1:
        raise BranchError(f"`rollout branch` printed {len(groups)} group results, expected 1: {done.stdout[:500]}")
    group = groups[0]
    return Branches(batch_id=group["batchId"], parent=rollout_id, at_turn=at_turn, rollouts=list(group["rollouts"]), status=str(group.get("status", "")))
