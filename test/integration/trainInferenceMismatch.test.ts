/**
 * The train-inference mismatch on the real model (issue 24 §2): a batch sampled by llama.cpp serving
 * the Qwen2.5-Coder-0.5B GGUF (token-level mode, the RL default temperature 1, no truncation), exported,
 * and the trainer's own log probabilities of the same tokens computed by transformers from the same
 * GGUF (python/trainer, rollout_trainer.mismatch). What a trainer checks before it trusts the server's
 * logprobs as the old policy's: every generated token compared, the mismatch small (bounds measured
 * here and stated in docs/exact-tokens.md), and a distribution that is not the sampling one (the
 * tokens rescored at another temperature) far outside them. Skipped without the model or the trainer's
 * venv (bash scripts/setup.sh train).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { exportBatch } from '../../client/export/exportBatch.js';
import { submitBatch } from '../../client/submitBatch.js';
import type { PolicyConfig } from '../../shared/pipeline.js';
import type { RunningLlamaServer } from '../../workers/inference/llamaServer.js';
import { startHarness, type Harness } from '../helpers/pipelineHarness.js';
import { skipWithoutModel, startTestLlamaServer, TEST_MODEL_NAME } from '../helpers/llamaServer.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const trainPython = process.env.ROLLOUT_TRAIN_PYTHON;
const skip = skipWithoutModel || (trainPython ? false : "needs the trainer's venv: bash scripts/setup.sh train prints ROLLOUT_TRAIN_PYTHON");

/** What rollout_trainer.mismatch prints. */
interface Mismatch {
  samples: number;
  tokens: number;
  mean_k3_kl: number;
  mean_abs_delta: number;
  max_abs_delta: number;
  mean_delta: number;
}

let h: Harness;
let llama: RunningLlamaServer;

before(async () => {
  if (skip) return;
  h = await startHarness('train-mismatch');
  llama = await startTestLlamaServer({ name: 'train-mismatch', parallel: 2, ctx: 8192 });
  await h.startWorkers();
});

after(async () => {
  await h?.stopWorkers();
  await llama?.stop();
  await h?.close();
});

/** What rollout_trainer.grpo prints. */
interface StepReport {
  mismatch: Mismatch;
  mismatch_also_at: (Mismatch & { temperature: number })[];
  loss: number;
  tokens: number;
  per_sample: { rollout_id: string; advantage: number; moved: number }[];
  adapter?: string;
}

/** The mismatch (also rescored at `otherTemperature`), then one GRPO step with a LoRA saved to `adapter` (one model load). */
function grpoStep(samples: string, otherTemperature: number, adapter: string): StepReport {
  const gguf = process.env.ROLLOUT_MODEL_GGUF as string;
  const args = ['-m', 'rollout_trainer.grpo', '--samples', samples, '--gguf', gguf, '--also-at', String(otherTemperature), '--lr', '1e-3', '--out', adapter];
  const py = spawnSync(trainPython as string, args, { encoding: 'utf8', timeout: 900_000 });
  assert.equal(py.status, 0, `rollout_trainer.grpo: ${py.stderr.slice(-3000)}`);
  return JSON.parse(py.stdout.trim().split('\n').at(-1) as string) as StepReport;
}

describe('the trainer against the inference server, on the real model', { timeout: 1_800_000 }, () => {
  test("the trainer's logprobs of the sampled tokens are the server's within the measured bounds (rescored at another temperature they are not), and one GRPO step moves each completion the way its advantage says", { skip }, async () => {
    const policy: PolicyConfig = {
      kind: 'openai',
      baseUrl: llama.baseUrl,
      model: TEST_MODEL_NAME,
      // No temperature set: the RL default (1, no truncation) is what the server samples with.
      sampling: { seed: 7, max_tokens: 160 },
      requestTimeoutMs: 240_000,
      toolCallParser: ['server', 'fenced-json', 'hermes-tags', 'bare-json'],
      tokens: { mode: 'pipeline' },
    };
    const batchId = `train-mismatch-${Date.now()}`;
    const batch = await submitBatch(h.client, { batchId, taskQueues: h.taskQueues, tasks: [join(root, 'examples/tasks/write-greeting')], groupSize: 2, minValid: 1, policy, limits: { maxTurns: 2 } });
    for await (const group of batch.results()) void group;
    const dir = mkdtempSync(join(tmpdir(), 'train-mismatch-'));
    try {
      const out = join(dir, 'samples.jsonl');
      const report = await exportBatch(h.client, h.store, batchId, out);
      assert.ok(report.exported > 1, `two samples to train on: ${JSON.stringify(report)}`);
      const exported = readFileSync(out, 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { loss_mask: number[]; advantage: number });
      const generated = exported.reduce((n, s) => n + s.loss_mask.filter((m) => m === 1).length, 0);
      // The step needs both signs; a group of two on this small model often earns one reward twice
      // (advantages 0). Then the test gives the first +1 and the second -1, and says so.
      const bothSigns = exported.some((s) => s.advantage > 0) && exported.some((s) => s.advantage < 0);
      const stepSamples = bothSigns ? out : join(dir, 'signed.jsonl');
      if (!bothSigns) {
        console.log(`advantages ${JSON.stringify(exported.map((s) => s.advantage))}: the step trains on +1 / -1 instead`);
        writeFileSync(stepSamples, readFileSync(out, 'utf8').trim().split('\n').map((line, i) => JSON.stringify({ ...(JSON.parse(line) as object), advantage: i % 2 === 0 ? 1 : -1 })).join('\n') + '\n');
      }

      const step = grpoStep(stepSamples, 0.5, join(dir, 'adapter'));
      const measured = step.mismatch;
      const rescored = step.mismatch_also_at[0] as Mismatch;
      console.log(`train-inference mismatch, ${measured.samples} samples, ${measured.tokens} generated tokens: mean k3 KL ${measured.mean_k3_kl.toExponential(2)}, mean |delta| ${measured.mean_abs_delta.toFixed(4)}, max |delta| ${measured.max_abs_delta.toFixed(4)}, mean delta ${measured.mean_delta.toFixed(4)}; rescored at temperature 0.5: mean |delta| ${rescored.mean_abs_delta.toFixed(4)}, mean k3 KL ${rescored.mean_k3_kl.toExponential(2)}`);
      assert.equal(measured.tokens, generated, 'every generated token compared');
      // Measured 2026-12-02 (306 tokens): mean k3 KL 3.5e-5, mean |delta| 0.0019, max |delta| 0.072; the
      // bounds leave 10-30x for other samples. Rescored at 0.5 the k3 KL was 400x the measured one.
      assert.ok(measured.mean_k3_kl < 1e-3, `mean k3 KL ${measured.mean_k3_kl}`);
      assert.ok(measured.mean_abs_delta < 0.02, `mean |delta logprob| ${measured.mean_abs_delta}`);
      assert.ok(measured.max_abs_delta < 0.5, `max |delta logprob| ${measured.max_abs_delta}`);
      assert.ok(rescored.mean_k3_kl > 20 * measured.mean_k3_kl, `a distribution that is not the sampling one is seen: k3 KL ${rescored.mean_k3_kl} rescored against ${measured.mean_k3_kl}`);

      // One step: the trainer's log probability of a positive-advantage completion rises, of a negative one falls.
      console.log(`one GRPO step (LoRA r 8, lr 1e-3, ${step.tokens} tokens): loss ${step.loss.toFixed(4)}; ${step.per_sample.map((p) => `advantage ${p.advantage.toFixed(2)} moved ${p.moved.toFixed(4)}`).join(', ')}`);
      assert.equal(step.tokens, generated);
      for (const p of step.per_sample) {
        if (p.advantage > 0) assert.ok(p.moved > 0, `${p.rollout_id}: advantage ${p.advantage}, mean logprob moved ${p.moved}`);
        if (p.advantage < 0) assert.ok(p.moved < 0, `${p.rollout_id}: advantage ${p.advantage}, mean logprob moved ${p.moved}`);
      }
      assert.ok(existsSync(join(dir, 'adapter', 'adapter_model.safetensors')), 'the LoRA adapter is saved');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
