"""rollout_export against a real exported batch: run by test/integration/exactTokens.test.ts,
which runs the batches on the real Temporal dev server and passes them in the environment:
ROLLOUT_EXPORT_OK_BATCH (a batch whose samples are sound), ROLLOUT_EXPORT_BROKEN_BATCH (one whose
rollouts broke the exact-prefix rule), ROLLOUT_EXPORT_TRAJECTORIES (the store),
ROLLOUT_EXPORT_EXPECTED (the TypeScript export of the ok batch), ROLLOUT_CLI, TEMPORAL_ADDRESS."""

import json
import os
import re
import shutil
import tempfile
import unittest

from rollout_export import ExportError, SampleError, collate, pull_batch, read_samples

ENV = ("ROLLOUT_EXPORT_OK_BATCH", "ROLLOUT_EXPORT_BROKEN_BATCH", "ROLLOUT_EXPORT_TRAJECTORIES", "ROLLOUT_EXPORT_EXPECTED", "ROLLOUT_CLI")
MISSING = [name for name in ENV if not os.environ.get(name)]


@unittest.skipIf(MISSING, f"run through test/integration/exactTokens.test.ts (needs {', '.join(MISSING)})")
class PullBatch(unittest.TestCase):
    def setUp(self):
        self.trajectories = os.environ["ROLLOUT_EXPORT_TRAJECTORIES"]
        with open(os.environ["ROLLOUT_EXPORT_EXPECTED"], encoding="utf-8") as f:
            self.expected = [json.loads(line) for line in f if line.strip()]
        self.scratch = tempfile.mkdtemp(prefix="rollout-export-test-")

    def tearDown(self):
        shutil.rmtree(self.scratch, ignore_errors=True)

    def test_pulls_the_same_samples_the_typescript_export_writes_checked(self):
        batch = pull_batch(os.environ["ROLLOUT_EXPORT_OK_BATCH"], trajectories=self.trajectories)
        self.assertEqual(len(batch), len(self.expected))
        self.assertGreater(len(batch), 0)
        self.assertEqual(batch.left_out, [])
        by_id = {e["rollout_id"]: e for e in self.expected}
        for s in batch:
            e = by_id[s.rollout_id]
            self.assertEqual(s.input_ids, e["input_ids"])
            self.assertEqual(s.loss_mask, e["loss_mask"])
            self.assertEqual(s.logprobs, e["logprobs"])
            self.assertEqual((s.reward, s.advantage, s.policy_versions), (e["reward"], e["advantage"], e["policy_versions"]))
            self.assertEqual(s.token_integrity["status"], "ok")
            self.assertEqual(s.generated_tokens, sum(end - start for start, end in s.completion_spans))
        arrays = collate(batch.samples, pad_id=0)
        width = max(len(e["input_ids"]) for e in self.expected)
        self.assertEqual([len(arrays["input_ids"]), len(arrays["input_ids"][0])], [len(self.expected), width])
        self.assertEqual(int(sum(sum(row) for row in arrays["loss_mask"])), sum(sum(e["loss_mask"]) for e in self.expected))

    def test_broken_rollouts_are_left_out_with_why_and_kept_only_on_request(self):
        batch_id = os.environ["ROLLOUT_EXPORT_BROKEN_BATCH"]
        batch = pull_batch(batch_id, trajectories=self.trajectories)
        self.assertEqual(len(batch), 0)
        self.assertTrue(batch.left_out and all(lo.why == "broken" for lo in batch.left_out), batch.left_out)
        self.assertRegex(batch.left_out[0].reason, r"at turn 1, token \d+")
        kept = pull_batch(batch_id, trajectories=self.trajectories, keep_broken=True)
        self.assertEqual(len(kept), len(batch.left_out))
        for s in kept:
            self.assertEqual(s.token_integrity["status"], "broken")
            self.assertEqual(s.token_integrity["turn"], 1)
            # Turn 0's completion is what the re-rendered prompt no longer holds: it stays unmasked.
            self.assertEqual(s.token_integrity["unmasked_turns"], [0])
        # A file with broken samples is refused when read as if they were sound.
        path = os.path.join(self.scratch, "broken.jsonl")
        pull_batch(batch_id, trajectories=self.trajectories, keep_broken=True, out=path)
        with self.assertRaisesRegex(SampleError, r"line 1 .*token_integrity is broken.*keep_broken=True"):
            list(read_samples(path))

    def test_a_sample_that_breaks_a_rule_is_refused_naming_line_position_and_rule(self):
        path = os.path.join(self.scratch, "samples.jsonl")
        pull_batch(os.environ["ROLLOUT_EXPORT_OK_BATCH"], trajectories=self.trajectories, out=path)
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
        self.assertGreaterEqual(len(lines), 2)
        good = list(read_samples(path))
        self.assertEqual(len(good), len(lines))

        def corrupt(change, pattern):
            bad = [dict(lines[0]), dict(lines[1])]
            change(bad[1])
            bad_path = os.path.join(self.scratch, "bad.jsonl")
            with open(bad_path, "w", encoding="utf-8") as f:
                f.write("".join(json.dumps(x) + "\n" for x in bad))
            with self.assertRaisesRegex(SampleError, pattern):
                list(read_samples(bad_path))

        first_prompt = lines[1]["loss_mask"].index(0)
        first_generated = lines[1]["loss_mask"].index(1)

        def unmask(s):
            s["loss_mask"] = list(s["loss_mask"])
            s["loss_mask"][first_generated] = 0

        def mask_prompt(s):
            s["loss_mask"] = list(s["loss_mask"])
            s["loss_mask"][first_prompt] = 1

        def positive_logprob(s):
            s["logprobs"] = list(s["logprobs"])
            s["logprobs"][first_generated] = 0.5

        corrupt(unmask, rf"line 2 .*position {first_generated}: loss_mask 0 but logprob")
        corrupt(mask_prompt, rf"line 2 .*position {first_prompt}: loss_mask 1 but logprob None")
        corrupt(positive_logprob, rf"line 2 .*position {first_generated}: logprob 0.5 is not <= 0")
        corrupt(lambda s: s.update(logprobs=s["logprobs"][:-1]), r"line 2 .*logprobs has \d+ entries for \d+ input_ids")
        corrupt(lambda s: s.pop("advantage"), r"line 2: no advantage")

    def test_an_unknown_batch_and_a_missing_cli_are_named(self):
        # Not an empty batch: the error names the batch, the batches the server has, and the fix.
        known = re.escape(os.environ["ROLLOUT_EXPORT_OK_BATCH"])
        with self.assertRaisesRegex(ExportError, rf"exited 2: rollout: batch no-such-batch-anywhere is not on the server at \S+ \(it has batches [^)]*{known}.*Fix: check the batch id"):
            pull_batch("no-such-batch-anywhere", trajectories=self.trajectories)
        with self.assertRaisesRegex(ExportError, r"cannot run /nonexistent/rollout"):
            pull_batch("x", rollout=["/nonexistent/rollout"])
        with self.assertRaisesRegex(ExportError, r"exited 2: .*batch id"):
            pull_batch("bad id!", trajectories=self.trajectories)


if __name__ == "__main__":
    unittest.main()
