"""The trainer's state between steps (rollout_trainer.grpo save / resume), on a small random Qwen2
model (no GGUF needed): a resumed step continues the same LoRA and optimizer, so two steps in two
processes are the two steps of one process."""

from __future__ import annotations

import json
import os
import tempfile
import unittest

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from rollout_export import Sample
from rollout_trainer.adapter_gguf import AdapterConversionError, convert_adapter
from rollout_trainer.grpo import grpo_step, make_optimizer, resume, save, with_lora


def tiny_model() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return Qwen2ForCausalLM(config).eval()


def sample(i: int, advantage: float) -> Sample:
    ids = [1, 5, 9, 3, 7 + i, 11, 2 + i, 4]
    mask = [0, 0, 0, 1, 1, 0, 1, 1]
    return Sample(
        rollout_id=f"rollout/b/t/{i}", group_id="rollout/b/t", batch_id="b", task_id="t", task_version="v", rollout_index=i,
        input_ids=ids, loss_mask=mask, logprobs=[None if m == 0 else -3.0 for m in mask], completion_spans=[None] * len(ids),
        reward=1.0 if advantage > 0 else 0.0, advantage=advantage, policy_versions=[0], outcome={}, token_integrity={}, staleness=None, stale=False,
        extra={"temperatures": [None if m == 0 else 1.0 for m in mask]},
    )


def lora_state(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters() if "lora_" in k}


class TrainerStateTest(unittest.TestCase):
    def test_two_resumed_steps_equal_two_steps_in_one_process(self) -> None:
        samples = [sample(0, 1.0), sample(1, -1.0)]
        one = with_lora(tiny_model())
        opt = make_optimizer(one, 1e-2)
        for _ in range(2):
            grpo_step(one, samples, lr=1e-2, optimizer=opt)

        with tempfile.TemporaryDirectory() as d:
            first = with_lora(tiny_model())
            first_opt = make_optimizer(first, 1e-2)
            report = grpo_step(first, samples, lr=1e-2, optimizer=first_opt)
            save(first, first_opt, 1, report, os.path.join(d, "step-1"), convert=False)
            with open(os.path.join(d, "step-1", "trainer_state.json")) as f:
                self.assertEqual(json.load(f)["step"], 1)
            with open(os.path.join(d, "step-1", "trainer_logprobs.jsonl")) as f:
                after = [json.loads(line) for line in f]
            self.assertEqual([a["positions"] for a in after], [[3, 4, 6, 7], [3, 4, 6, 7]], "every generated position, in order")
            self.assertTrue(os.path.isfile(os.path.join(d, "step-1", "base-config", "config.json")))

            second, second_opt, done = resume(tiny_model(), os.path.join(d, "step-1"), 1e-2)
            self.assertEqual(done, 1)
            grpo_step(second, samples, lr=1e-2, optimizer=second_opt)

        expected, got = lora_state(one), lora_state(second)
        self.assertEqual(sorted(expected), sorted(got))
        for k in expected:
            torch.testing.assert_close(got[k], expected[k], rtol=1e-5, atol=1e-6, msg=f"{k} after two steps")

    def test_resume_from_a_directory_no_step_wrote(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(ValueError, r"no trainer_state.json there"):
                resume(tiny_model(), d, 1e-3)

    def test_conversion_names_what_is_missing(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(AdapterConversionError, r"adapter_config.json is missing"):
                convert_adapter(d, d, os.path.join(d, "out.gguf"), converter=__file__)
            self.assertFalse(os.path.exists(os.path.join(d, "out.gguf")))
            with self.assertRaisesRegex(AdapterConversionError, r"ensure-lora-converter.sh"):
                convert_adapter(d, d, os.path.join(d, "out.gguf"), converter=os.path.join(d, "nowhere.py"))


if __name__ == "__main__":
    unittest.main()
