"""The trainer mappings (rollout_export/trainers.py) on a real exported batch, checked against the
rules each trainer's own code enforces on its input (TRL's rollout_func keys and grouping, verl's
AgentLoopOutput response alignment, SkyRL's validate_generator_output, prime-rl's prepare_sample
lengths and temperature index), and for values: every token, mask and logprob where the export put
it. Run by test/integration/exactTokens.test.ts with the batch in the environment; the class
without a batch runs anywhere."""

import json
import os
import unittest

from rollout_export import (
    Sample,
    SampleError,
    prompt_length,
    pull_batch,
    to_prime_rl_training_sample,
    to_skyrl_generator_output,
    to_trl_rollout,
    to_verl_agent_loop_output,
    trl_rollout_reward,
)

ENV = ("ROLLOUT_EXPORT_OK_BATCH", "ROLLOUT_EXPORT_TRAJECTORIES", "ROLLOUT_EXPORT_EXPECTED", "ROLLOUT_CLI")
MISSING = [name for name in ENV if not os.environ.get(name)]

SKYRL_KEYS = {
    "prompt_token_ids", "response_ids", "rewards", "loss_masks", "stop_reasons", "rollout_metrics", "rollout_logprobs",
    "trajectory_ids", "trajectory_generation_times", "trajectory_time_splits", "rollout_expert_indices", "is_last_step",
    "env_metrics", "pixel_values", "image_grid_thw",
}


def generated(mask):
    return [i for i, m in enumerate(mask) if m == 1]


@unittest.skipIf(MISSING, f"run through test/integration/exactTokens.test.ts (needs {', '.join(MISSING)})")
class OnARealBatch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.batch = pull_batch(os.environ["ROLLOUT_EXPORT_OK_BATCH"], trajectories=os.environ["ROLLOUT_EXPORT_TRAJECTORIES"])
        cls.samples = cls.batch.samples
        with open(os.environ["ROLLOUT_EXPORT_EXPECTED"], encoding="utf-8") as f:
            cls.expected = {e["rollout_id"]: e for e in (json.loads(line) for line in f if line.strip())}

    def test_the_batch_has_multi_turn_samples_to_map(self):
        self.assertGreater(len(self.samples), 1)
        self.assertTrue(any(len(s.policy_versions) > 1 or sum(1 for sp in s.completion_spans if sp) > 1 for s in self.samples), "a multi-turn rollout in the batch")

    def test_trl_rollout_func_output(self):
        out = to_trl_rollout(self.samples)
        n = len(self.samples)
        for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "rollout_reward"):
            self.assertEqual(len(out[key]), n, key)
        for i, rid in enumerate(out["rollout_id"]):
            e = self.expected[rid]
            self.assertEqual(out["prompt_ids"][i] + out["completion_ids"][i], e["input_ids"])
            self.assertEqual(len(out["logprobs"][i]), len(out["completion_ids"][i]))
            self.assertEqual(len(out["env_mask"][i]), len(out["completion_ids"][i]))
            p = len(out["prompt_ids"][i])
            self.assertEqual(out["env_mask"][i], e["loss_mask"][p:])
            self.assertEqual(out["env_mask"][i][0], 1, "the completion starts at the first generated token")
            self.assertTrue(all(isinstance(v, float) for v in out["logprobs"][i]), "a float per token, as TRL pads them")
            self.assertEqual([out["logprobs"][i][j] for j in generated(out["env_mask"][i])], [e["logprobs"][p + j] for j in generated(out["env_mask"][i])])
            self.assertTrue(all(out["logprobs"][i][j] == 0.0 for j, m in enumerate(out["env_mask"][i]) if m == 0))
        # TRL reshapes rewards to (-1, num_generations): each group's rollouts contiguous, in order.
        order = [(self.expected[r]["group_id"], self.expected[r]["rollout_index"]) for r in out["rollout_id"]]
        groups = [g for g, _ in order]
        self.assertEqual(groups, sorted(groups, key=groups.index), "groups contiguous")
        self.assertEqual(trl_rollout_reward(out["completion_ids"], **{k: v for k, v in out.items() if k != "completion_ids"}), [self.expected[r]["reward"] for r in out["rollout_id"]])

    def test_trl_refuses_a_short_group(self):
        first = self.samples[0]
        short = [s for s in self.samples if not (s.group_id == first.group_id and s.rollout_index == first.rollout_index)]
        if all(s.group_id != first.group_id for s in short):
            self.skipTest("one rollout per group in this batch")
        full = sum(1 for s in self.samples if s.group_id == first.group_id)
        with self.assertRaisesRegex(SampleError, rf"{full} per prompt, but {first.group_id} has {full - 1}: rollouts left out"):
            to_trl_rollout(short, num_generations=full)

    def test_verl_agent_loop_outputs(self):
        for s in self.samples:
            d = to_verl_agent_loop_output(s)
            e = self.expected[s.rollout_id]
            self.assertEqual(d["prompt_ids"] + d["response_ids"], e["input_ids"])
            self.assertEqual(len(d["response_mask"]), len(d["response_ids"]))
            self.assertEqual(len(d["response_logprobs"]), len(d["response_ids"]))
            self.assertEqual(sum(d["response_mask"]), sum(e["loss_mask"]))
            self.assertEqual(d["reward_score"], e["reward"])
            self.assertEqual((d["extra_fields"]["min_global_steps"], d["extra_fields"]["max_global_steps"]), (min(e["policy_versions"]), max(e["policy_versions"])))
            spans = sum(1 for sp in e["completion_spans"] if sp)
            self.assertGreaterEqual(d["num_turns"], 1 + spans)
            self.assertEqual(set(d["metrics"]), {"generate_sequences", "tool_calls", "compute_score", "num_preempted"})

    def test_skyrl_generator_output_passes_its_validation_rules(self):
        out = to_skyrl_generator_output(self.samples)
        self.assertEqual(set(out), SKYRL_KEYS)
        n = len(out["response_ids"])
        for key, value in out.items():
            if isinstance(value, list):
                self.assertEqual(len(value), n, key)
        for i, s in enumerate(self.samples):
            self.assertEqual(len(out["loss_masks"][i]), len(out["response_ids"][i]))
            self.assertEqual(len(out["rollout_logprobs"][i]), len(out["response_ids"][i]))
            self.assertEqual(out["prompt_token_ids"][i] + out["response_ids"][i], s.input_ids)
            self.assertEqual((out["trajectory_ids"][i].instance_id, out["trajectory_ids"][i].repetition_id), (s.group_id, s.rollout_index))
        self.assertTrue(all(isinstance(r, float) for r in out["rewards"]), "scalar rewards, all of one kind")
        self.assertTrue(any(any(m) for m in out["loss_masks"]))

    def test_prime_rl_training_samples(self):
        for s in self.samples:
            d = to_prime_rl_training_sample(s, env_name="terminal")
            e = self.expected[s.rollout_id]
            n = len(d["token_ids"])
            self.assertEqual([len(d[k]) for k in ("mask", "logprobs", "temperatures", "advantages")], [n] * 4, "prepare_sample: every stream as long as token_ids")
            self.assertEqual(d["token_ids"], e["input_ids"])
            self.assertEqual(d["mask"], [m == 1 for m in e["loss_mask"]])
            self.assertEqual(d["advantages"], [e["advantage"] if m == 1 else 0.0 for m in e["loss_mask"]])
            self.assertEqual([d["logprobs"][t] for t in generated(e["loss_mask"])], [e["logprobs"][t] for t in generated(e["loss_mask"])])
            for t in generated(e["loss_mask"]):
                self.assertEqual(d["temperatures"][t - 1], e["temperatures"][t], f"token {t}'s temperature at {t - 1}, where prime-rl reads it")


def sample(**over):
    base = dict(
        rollout_id="r/0", group_id="g", batch_id="b", task_id="t", task_version="v", rollout_index=0,
        input_ids=[5, 6, 7, 8, 9, 10], loss_mask=[0, 0, 1, 1, 0, 1], logprobs=[None, None, -0.5, -0.25, None, -1.0],
        completion_spans=[(2, 4), (5, 6)], reward=1.0, advantage=0.5, policy_versions=[0, 1],
        outcome={"class": "ok", "type": "submitted"}, token_integrity={"status": "ok"}, staleness=0, stale=False,
        extra={"temperatures": [None, None, 0.7, 0.7, None, 1.0]},
    )
    base.update(over)
    return Sample(**base)


class OnSyntheticSamples(unittest.TestCase):
    def test_the_prompt_ends_at_the_first_generated_token(self):
        self.assertEqual(prompt_length(sample()), 2)
        with self.assertRaisesRegex(SampleError, "no generated token"):
            prompt_length(sample(loss_mask=[0] * 6, logprobs=[None] * 6))

    def test_prime_rl_temperatures_sit_one_before_their_token_and_missing_ones_are_an_error(self):
        d = to_prime_rl_training_sample(sample(), env_name="e")
        self.assertEqual([d["temperatures"][1], d["temperatures"][2], d["temperatures"][4]], [0.7, 0.7, 1.0])
        with self.assertRaisesRegex(SampleError, "no recorded sampling temperature.*default_temperature"):
            to_prime_rl_training_sample(sample(extra={}), env_name="e")
        self.assertEqual(to_prime_rl_training_sample(sample(extra={}), env_name="e", default_temperature=1.0)["temperatures"], [1.0] * 6)

    def test_verl_counts_the_prompt_each_generated_span_and_each_observation(self):
        self.assertEqual(to_verl_agent_loop_output(sample())["num_turns"], 4)


if __name__ == "__main__":
    unittest.main()
