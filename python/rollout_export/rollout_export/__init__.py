"""Training samples of a rollout-pipeline batch, for a Python trainer.

    from rollout_export import pull_batch, collate

    batch = pull_batch("my-batch", trajectories="data/trajectories")  # runs `rollout export`
    for sample in batch:            # every sample checked: the same rules as the TypeScript side
        sample.input_ids, sample.loss_mask, sample.logprobs, sample.advantage, sample.policy_versions
    arrays = collate(batch.samples, pad_id=0)   # input_ids, attention_mask, loss_mask, old_logprobs, ...

For TRL, verl, SkyRL and prime-rl: `to_trl_rollout`, `to_verl_agent_loop_output`,
`to_skyrl_generator_output`, `to_prime_rl_training_sample` (rollout_export/trainers.py).

`branch_rollout(rollout_id, at_turn, n)` starts n rollouts sharing a rollout's first at_turn turns
(runs `rollout branch`); their batch exports like any other.

`read_samples(path)` checks an export file that already exists. No dependencies; numpy is used by
`collate` when installed. Field meanings: `rollout export --help`.
"""

from .branch import BranchError, Branches, branch_rollout
from .pull import ExportError, ExportedBatch, LeftOut, pull_batch, rollout_command
from .samples import Sample, SampleError, collate, read_samples, sample_problems
from .trainers import (
    TrajectoryID,
    prompt_length,
    to_prime_rl_training_sample,
    to_skyrl_generator_output,
    to_trl_rollout,
    to_verl_agent_loop_output,
    trl_rollout_reward,
)

__all__ = [
    "BranchError",
    "Branches",
    "branch_rollout",
    "ExportError",
    "ExportedBatch",
    "LeftOut",
    "Sample",
    "SampleError",
    "collate",
    "pull_batch",
    "read_samples",
    "rollout_command",
    "sample_problems",
    "TrajectoryID",
    "prompt_length",
    "to_prime_rl_training_sample",
    "to_skyrl_generator_output",
    "to_trl_rollout",
    "to_verl_agent_loop_output",
    "trl_rollout_reward",
]
