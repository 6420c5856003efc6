"""Pulls a batch's samples through `rollout export` (the same code, Temporal queries and
trajectory store the TypeScript side uses), then reads and checks them (samples.py).

The `rollout` command is, in order: the `rollout` argument (a list of strings), the ROLLOUT_CLI
environment variable (a command line, e.g. "node /path/to/rollout-pipeline/client/bin/rollout.js"),
or `rollout` on PATH. Temporal is reached as the CLI does: `address`, else TEMPORAL_ADDRESS (and
the TEMPORAL_TLS_* / TEMPORAL_API_KEY variables), else 127.0.0.1:7233."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Iterator, Optional, Sequence

from .samples import Sample, read_samples


class ExportError(RuntimeError):
    """`rollout export` could not run or failed; the message has its stderr and the fix."""


@dataclass(frozen=True)
class LeftOut:
    rollout_id: str
    why: str  # broken | missing | logprobs | not_valid
    reason: str


@dataclass
class ExportedBatch:
    batch_id: str
    samples: list[Sample]
    left_out: list[LeftOut] = field(default_factory=list)
    # The export's own summary line(s): counts of samples, groups, unfinished groups.
    summary: str = ""

    def __iter__(self) -> Iterator[Sample]:
        return iter(self.samples)

    def __len__(self) -> int:
        return len(self.samples)


def rollout_command(rollout: Optional[Sequence[str]] = None) -> list[str]:
    if rollout:
        return list(rollout)
    if os.environ.get("ROLLOUT_CLI"):
        return shlex.split(os.environ["ROLLOUT_CLI"])
    found = shutil.which("rollout")
    if found:
        return [found]
    raise ExportError(
        "no `rollout` command: pass rollout=[...], set ROLLOUT_CLI (e.g. "
        '"node /path/to/rollout-pipeline/client/bin/rollout.js"), or put `rollout` on PATH (npm link in the checkout)'
    )


_LEFT_OUT = re.compile(r"^left out (\S+): (broken|missing|logprobs|not_valid): (.*)$")


def pull_batch(
    batch_id: str,
    *,
    rollout: Optional[Sequence[str]] = None,
    address: Optional[str] = None,
    trajectories: Optional[str] = None,
    store: Optional[str] = None,
    data_dir: Optional[str] = None,
    keep_broken: bool = False,
    keep_mismatched_logprobs: bool = False,
    out: Optional[str] = None,
    timeout: float = 600.0,
) -> ExportedBatch:
    """The checked samples of the batch's finished groups, and every rollout left out with why.
    `out` keeps the JSONL at that path (else a temporary file, removed after reading).
    keep_mismatched_logprobs keeps rollouts whose logprobs are not their sampling distribution's
    (greedy, raw logprobs of a reshaped distribution): for a trainer that recomputes them."""
    args = [*rollout_command(rollout), "export", batch_id]
    for flag, value in (("--address", address), ("--trajectories", trajectories), ("--store", store), ("--data-dir", data_dir)):
        if value is not None:
            args += [flag, value]
    if keep_broken:
        args.append("--keep-broken")
    if keep_mismatched_logprobs:
        args.append("--keep-mismatched-logprobs")
    with tempfile.TemporaryDirectory(prefix="rollout-export-") as scratch:
        path = out or os.path.join(scratch, f"{batch_id}.jsonl")
        try:
            done = subprocess.run([*args, "--out", path], capture_output=True, text=True, timeout=timeout, check=False)
        except FileNotFoundError as err:
            raise ExportError(f"cannot run {args[0]}: {err}; set ROLLOUT_CLI to the rollout command") from err
        except subprocess.TimeoutExpired as err:
            raise ExportError(f"`rollout export {batch_id}` took over {timeout:.0f} s (is Temporal at {address or os.environ.get('TEMPORAL_ADDRESS', '127.0.0.1:7233')} up?)") from err
        left_out = [LeftOut(*m.groups()) for m in map(_LEFT_OUT.match, done.stderr.splitlines()) if m]
        # Exit 1 with a summary is "nothing exported", not a failure: an empty batch.
        nothing = done.returncode == 1 and done.stdout.startswith("0 samples")
        if done.returncode != 0 and not nothing:
            raise ExportError(f"`{shlex.join(args)}` exited {done.returncode}: {done.stderr.strip() or done.stdout.strip()}")
        samples = [] if nothing else list(read_samples(path, keep_broken=keep_broken, keep_mismatched_logprobs=keep_mismatched_logprobs))
    return ExportedBatch(batch_id=batch_id, samples=samples, left_out=left_out, summary=done.stdout.strip())
